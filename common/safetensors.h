/*
 * safetensors.h - NeuMF as a safetensors file holding exactly the
 * state_dict of NVIDIA's PyTorch NeuMF (DeepLearningExamples,
 * PyTorch/Recommendation/NCF/neumf.py): the tensor names, shapes and
 * layouts PyTorch has, F32, so that
 *
 *     model.load_state_dict(safetensors.torch.load_file(F), strict=True)
 *
 * loads it into NVIDIA's class built with the same sizes, and a file that
 * NVIDIA's code trained is scored by ncf.  The byte layout, the names and
 * the metadata are documented at the top of safetensors.c and in
 * ncf-model(5).
 */
#ifndef NCF_SAFETENSORS_H
#define NCF_SAFETENSORS_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"

/* What the caller needs the model to fit (from a cache): 0 = any size. */
struct ncf_model_want {
	uint32_t users, items;
};

/* The safetensors library's limit on the JSON header. */
#define NCF_ST_MAX_HEADER 100000000u

/*
 * Write m to path ("-": stdout, never a terminal) under a temporary name,
 * renamed when complete.  The hyperparameters go into __metadata__, and
 * the original ids too when m has them.  Returns 0 or -1 (reported).
 */
int ncf_safetensors_write(const struct ncf_model *m, const char *path);

/*
 * Read a safetensors file from fp (display names it in messages) into m:
 * every rule of the format (header length, JSON, F32, sizes, offsets that
 * neither overlap nor leave holes nor run past the end) and of NeuMF
 * (exactly the tensors of the state_dict, shapes that agree with each
 * other and with want, may be NULL), metadata that agrees with the
 * tensors.  Returns 0, or -1 after one line naming the tensor or field.
 */
int ncf_safetensors_read(FILE *fp, const char *display, const struct ncf_model_want *want,
			 struct ncf_model *m);
/* The same from a whole file in memory (buf, n bytes); for the fuzzer. */
int ncf_safetensors_read_mem(const void *buf, size_t n, const char *display,
			     const struct ncf_model_want *want, struct ncf_model *m);

#endif
