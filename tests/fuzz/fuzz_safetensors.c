/*
 * fuzz_safetensors.c - libFuzzer harness for the safetensors reader
 * (common/safetensors.c): every input is read as a whole file, once with no
 * sizes wanted and once against the sizes a cache could have, under ASan
 * and UBSan (make fuzz-safetensors).  A read that succeeds must give a
 * model that ncf can use: a valid shape, finite parameters, and ids that
 * are either both there or both absent.  The reader's messages are kept
 * out of libFuzzer's output by -close_fd_mask=2 (the make rule).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "err.h"
#include "safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ncf_set_progname("fuzz_safetensors");
	return 0;
}

static void check(const struct ncf_model *m, const struct ncf_model_want *w)
{
	struct ncf_layout L;
	if (ncf_shape_check(&m->shape) || m->shape.users < 1 || m->shape.items < 1)
		abort();
	if (w && ((w->users && m->shape.users != w->users) || (w->items && m->shape.items != w->items)))
		abort();
	if (!m->user_ids != !m->item_ids)
		abort();
	ncf_layout_make(&m->shape, &L);
	for (size_t k = 0; k < L.total; k++)
		if (!isfinite(m->params[k]))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ncf_model m;
	if (ncf_safetensors_read_mem(data, size, "fuzz", NULL, &m) == 0) {
		check(&m, NULL);
		/* the same file against a cache of its own sizes, and of one user more */
		struct ncf_model_want w = {m.shape.users, m.shape.items};
		struct ncf_model_want w2 = {m.shape.users + 1, 0};
		ncf_model_free(&m);
		if (ncf_safetensors_read_mem(data, size, "fuzz", &w, &m) != 0)
			abort();
		check(&m, &w);
		ncf_model_free(&m);
		if (ncf_safetensors_read_mem(data, size, "fuzz", &w2, &m) == 0)
			abort();
	}
	return 0;
}
