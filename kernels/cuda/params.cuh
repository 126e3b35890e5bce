/*
 * params.cuh - what the cuda backend derives from its parameters, and the
 * one place that says whether it is current (struct cu's params.cu part):
 *  - the 16-bit copy plo (bf16, fp16) of the parameters from mlp_user on,
 *    which the 16-bit GEMMs and fused layers read;
 *  - the first-layer tables AU = mlp_user W1u^T (U, H1) and AI = mlp_item
 *    W1i^T (I, H1), the factorized first layer (DESIGN.md section 3).
 * New parameters (set_state) make both stale; a training step makes the
 * tables stale and the copy too, unless its Adam pass wrote the copy.
 * Nothing outside this file writes c->plo_valid or c->tables_valid.
 */
#ifndef NCF_CUDA_PARAMS_CUH
#define NCF_CUDA_PARAMS_CUH

#include "state.cuh"

namespace NCF_CUDA_NS {

/* The parameters as the products read them: params (fp32) or plo. */
template <typename T> static inline const T *lowp(const struct cu *c)
{
	return c->act == ACT_F32 ? (const T *)(const void *)c->params : (const T *)c->plo;
}

/* The 16-bit copy, then the tables, for the current parameters, unless
 * still current (GEMMs on c->s, asynchronous).  Returns 0 or -1. */
template <typename T> int params_tables(struct ncf_backend *be, struct cu *c);
/* The same for c's element type. */
int params_tables_any(struct ncf_backend *be, struct cu *c);

/* The parameters were replaced: the copy and the tables are stale. */
void params_replaced(struct cu *c);
/* A training step updated the parameters; copy_written: its Adam pass
 * wrote the 16-bit copy too. */
void params_stepped(struct cu *c, int copy_written);

/* What the flags were, to put back when a capture that set them fails (the
 * plain launches after it must do the work again). */
struct params_mark {
	int plo_valid, tables_valid;
};
struct params_mark params_save(const struct cu *c);
void params_restore(struct cu *c, struct params_mark m);

} /* namespace NCF_CUDA_NS */

#endif
