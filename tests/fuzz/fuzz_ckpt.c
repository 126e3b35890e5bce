/*
 * fuzz_ckpt.c - libFuzzer harness of the checkpoint reader
 * (ncf_ckpt_read_fp, ncf-model(5)) followed by what ncf-infer does with an
 * accepted model: open the cpu backend on its shape, load its parameters,
 * score pairs.  Built plain (fuzz_ckpt) and with -DNCF_FUZZ_STRUCTURE
 * (fuzz_ckpt_sa: the container mutator keeps the checksums valid).
 *
 * Invariants: a refusal has a message; an accepted model scores its first
 * and last (user, item) and some between to probabilities in [0, 1]
 * (NaN only when huge parameters overflow).
 */
#include <omp.h>

#include "backend.h"
#include "ckpt.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	omp_set_num_threads(1);
	return 0;
}

static void score_some(const struct ncf_ckpt *ck, const uint8_t *data, size_t size)
{
	struct ncf_dist dist = {.rank = 0, .size = 1, .local_size = 1};
	struct ncf_backend be;
	int rc = ncf_backend_open(&be, NCF_DEVICE_CPU, &ck->shape, &ck->hp, NCF_PRECISION_DEFAULT,
				  1, &dist);
	FUZZ_ASSERT(rc == 0, "the cpu backend refused an accepted model: %s", fuzz_last_message);
	FUZZ_ASSERT(ncf_backend_set_state(&be, ck->params, NULL, NULL) == 0, "set_state");
	enum { N = 16 };
	uint32_t u[N], it[N];
	float out[N];
	for (int k = 0; k < N; k++) {
		uint32_t h = (uint32_t)k * 2654435761u ^ (uint32_t)(size ? data[k % size] : 0);
		u[k] = k == 0 ? 0 : k == 1 ? ck->shape.users - 1 : h % ck->shape.users;
		it[k] = k == 0 ? 0 : k == 1 ? ck->shape.items - 1 : (h >> 7) % ck->shape.items;
	}
	FUZZ_ASSERT(ncf_backend_score(&be, u, it, N, out) == 0, "score");
	/* with parameters of moderate size (|p| <= 1000, whatever a run can
	 * reach) nothing overflows, so every score is a probability; huge
	 * finite ones may overflow to inf - inf = NaN, never to another value */
	struct ncf_layout L;
	ncf_layout_make(&ck->shape, &L);
	int moderate = 1;
	for (size_t k = 0; k < L.total && moderate; k++)
		moderate = ck->params[k] >= -1000.0f && ck->params[k] <= 1000.0f;
	for (int k = 0; k < N; k++)
		FUZZ_ASSERT((out[k] >= 0.0f && out[k] <= 1.0f) || (!moderate && out[k] != out[k]),
			    "score %d is %g", k, out[k]);
	ncf_backend_close(&be);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_messages_reset();
	FILE *fp = fuzz_open_either(data, size);
	struct ncf_ckpt ck;
	if (ncf_ckpt_read_fp(fp, "<fuzz>", &ck, 1) == 0) {
		score_some(&ck, data, size);
		ncf_ckpt_free(&ck);
	} else {
		fuzz_check_refusal();
	}
	fclose(fp);
	return 0;
}

#ifdef NCF_FUZZ_STRUCTURE
#include "container_mutator.h"

/* The width of the checkpoint meta field at off (ckpt.c's table). */
static int ckpt_meta_width(size_t off)
{
	if (off < 48 || (off >= 56 && off < 88) || off == 112 || off == 116 || off == 152 ||
	    off == 156)
		return 4;
	if (off == 48 || off == 88 || off == 96 || off == 104 || off == 120 || off == 128 ||
	    off == 136 || off == 144 || off == 160 || off == 168 || off == 176 || off == 200)
		return 8;
	if ((off >= 184 && off < 200) || (off >= 208 && off < 256))
		return 4;
	return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed)
{
	return fz_custom_mutate(data, size, max, seed, ckpt_meta_width);
}
#endif
