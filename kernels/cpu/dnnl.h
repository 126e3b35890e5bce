/*
 * dnnl.h - what differs between oneDNN's C APIs 2.x and 3.x, behind one
 * small file (dnnl.c): creating a matmul primitive descriptor with its
 * post-ops, and asking which ISA oneDNN would use.  Everything else
 * matmul.c calls (engine, stream, memory, execute, queries of a primitive
 * descriptor) is the same in both.  Only built with NCF_HAVE_DNNL.
 */
#ifndef NCF_CPU_DNNL_H
#define NCF_CPU_DNNL_H

#include <stdint.h>
#include <oneapi/dnnl/dnnl.h>

/* One matmul: C (m, n) = A (m, k) B (k, n), A and B given by the strides
 * of their logical shapes (a transposed operand is a stride of 1 on its
 * first dimension), C row-major with stride ldc. */
struct ncf_dnnl_mm {
	int bf16;	    /* A and B bf16 (else f32); C, bias f32 */
	int64_t m, n, k;
	int64_t as0, as1;   /* strides of A's rows, columns */
	int64_t bs0, bs1;   /* strides of B's rows, columns */
	int64_t ldc;
	int bias;	    /* + a bias row (1, n) */
	int relu;	    /* then max(., 0) */
	int sum;	    /* C += the product (before bias, relu) */
};

/* The primitive descriptor of d on engine e, with a user scratchpad.
 * Returns oneDNN's status. */
dnnl_status_t ncf_dnnl_matmul_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t e,
				 const struct ncf_dnnl_mm *d);

/* 1 when oneDNN would use bf16 instructions (AVX512_BF16, AMX) here, given
 * ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA; its ISA's name in *isa. */
int ncf_dnnl_has_bf16(const char **isa);

#endif
