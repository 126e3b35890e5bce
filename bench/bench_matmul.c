/*
 * bench_matmul - GFLOP/s of the cpu backend's dense products (matmul.h)
 * per shape, library and precision, the way the backend calls them: every
 * thread runs its own products of TILE rows on its own data, one call at a
 * time.  The shapes are those of NVIDIA's model (MLP 256-256-128-64, the
 * first layer factorized: 128 inputs per table).  One line per product:
 *
 *   product  m  n  k  openblas_f32  dnnl_f32  dnnl_bf16   (GFLOP/s; - absent)
 *
 *   bench_matmul [--reps N] [--threads N]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "clock.h"
#include "cli.h"
#include "err.h"
#include "cpu/matmul.h"
#include "usage.h"

struct shape {
	const char *name;
	int kind; /* 0 forward (bias, ReLU), 1 dX, 2 dW */
	size_t m, n, k, ldw;
};

static const struct shape shapes[] = {
	{"fwd1", 0, 2048, 256, 128, 256}, /* first layer per table: W1u (256, 128) of (256, 256) */
	{"fwd2", 0, 2048, 128, 256, 256},
	{"fwd3", 0, 2048, 64, 128, 128},
	{"dx3", 1, 2048, 64, 128, 128},
	{"dx2", 1, 2048, 128, 256, 256},
	{"dx1", 1, 2048, 256, 128, 256},
	{"dw3", 2, 2048, 64, 128, 128},
	{"dw2", 2, 2048, 128, 256, 256},
	{"dw1", 2, 2048, 256, 128, 256},
};

struct bufs {
	float *a, *w, *out, *bias; /* a (m, max(n, k)), w (n, ldw), out (max) */
	ncf_bf16 *ah, *wh;
};

static int run_one(const struct shape *s, enum ncf_mm_type t, struct bufs *b)
{
	const void *a = t == NCF_MM_BF16 ? (const void *)b->ah : (const void *)b->a;
	const void *w = t == NCF_MM_BF16 ? (const void *)b->wh : (const void *)b->w;
	switch (s->kind) {
	case 0:
		return ncf_mm_forward(&(struct ncf_mm_forward_op){
			.t = t, .m = s->m, .n = s->n, .k = s->k, .X = a, .ldx = s->k, .W = w,
			.ldw = s->ldw, .bias = b->bias, .relu = 1, .Y = b->out, .ldy = s->n});
	case 1:
		return ncf_mm_dx(&(struct ncf_mm_dx_op){.t = t, .m = s->m, .n = s->n, .k = s->k,
							.dY = a, .ldd = s->n, .W = w, .ldw = s->ldw,
							.dX = b->out, .ldx = s->k});
	default: /* dY (m, n), X (m, k): a serves as both */
		return ncf_mm_dw(&(struct ncf_mm_dw_op){.t = t, .m = s->m, .n = s->n, .k = s->k,
							.dY = a, .ldd = s->n, .X = a, .ldx = s->k,
							.dW = b->out, .ldw = s->k, .accumulate = 1});
	}
}

/* GFLOP/s of reps products per thread, best of 3; -1 when it fails. */
static double rate(const struct shape *s, enum ncf_mm_type t, struct bufs *tb, int threads,
		   int reps)
{
	double best = 0;
	for (int trial = 0; trial < 4; trial++) {
		int fail = 0;
		double t0 = ncf_now();
#pragma omp parallel num_threads(threads) reduction(| : fail)
		{
#ifdef _OPENMP
			struct bufs *b = &tb[omp_get_thread_num()];
#else
			struct bufs *b = &tb[0];
#endif
			for (int r = 0; r < reps; r++)
				fail |= run_one(s, t, b) != 0;
		}
		double dt = ncf_now() - t0;
		if (fail)
			return -1;
		double g = 2.0 * (double)s->m * (double)s->n * (double)s->k * reps * threads / dt / 1e9;
		if (trial > 0 && g > best) /* the first creates the primitives */
			best = g;
	}
	return best;
}

int main(int argc, char **argv)
{
	ncf_set_progname("bench_matmul");
	ncf_synopsis = "bench_matmul [--reps N] [--threads N]";
	int reps = 50, threads = 0;
	static const struct option opts[] = {
		{"reps", 1, 0, 'r'}, {"threads", 1, 0, 't'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': reps = (int)ncf_opt_int("--reps", optarg, 1, 1000000); break;
		case 't': threads = (int)ncf_opt_int("--threads", optarg, 1, 4096); break;
		case 'h': ncf_usage_help();
		default: ncf_usage_exit();
		}
	}
#ifdef _OPENMP
	if (threads == 0)
		threads = omp_get_max_threads();
#else
	threads = 1;
#endif
	size_t big = 2048 * 256;
	struct bufs *tb = ncf_xcalloc((size_t)threads, sizeof *tb);
	for (int t = 0; t < threads; t++) {
		struct bufs *b = &tb[t];
		b->a = ncf_xmalloc(big * sizeof(float));
		b->w = ncf_xmalloc(256 * 256 * sizeof(float));
		b->out = ncf_xmalloc(big * sizeof(float));
		b->bias = ncf_xmalloc(256 * sizeof(float));
		b->ah = ncf_xmalloc(big * sizeof(ncf_bf16));
		b->wh = ncf_xmalloc(256 * 256 * sizeof(ncf_bf16));
		for (size_t j = 0; j < big; j++)
			b->a[j] = (float)((j * 2654435761u) % 1000) / 1000.0f - 0.5f, b->out[j] = 0;
		for (size_t j = 0; j < 256 * 256; j++)
			b->w[j] = (float)((j * 40503u) % 1000) / 1000.0f - 0.5f;
		for (size_t j = 0; j < 256; j++)
			b->bias[j] = 0.01f * (float)j;
		ncf_bf16_from_f32_n(b->a, big, b->ah);
		ncf_bf16_from_f32_n(b->w, 256 * 256, b->wh);
	}
	int bf16 = ncf_mm_available(NCF_MM_BF16, NULL);
	printf("# %s, %d threads, %d products of each per thread; GFLOP/s\n", ncf_mm_describe(),
	       threads, reps);
	printf("%-6s %6s %5s %5s %13s %9s %10s\n", "product", "m", "n", "k", "openblas_f32",
	       "dnnl_f32", "dnnl_bf16");
	int rc = 0;
	for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
		const struct shape *s = &shapes[j];
		ncf_mm_force_lib(NCF_MM_LIB_OPENBLAS);
		double ob = rate(s, NCF_MM_F32, tb, threads, reps);
		ncf_mm_force_lib(NCF_MM_LIB_DNNL);
		double dn = bf16 || strstr(ncf_mm_describe(), "oneDNN") ? rate(s, NCF_MM_F32, tb,
									       threads, reps)
									  : -1;
		ncf_mm_force_lib(NCF_MM_LIB_AUTO);
		double bh = bf16 ? rate(s, NCF_MM_BF16, tb, threads, reps) : -1;
		if (ob < 0)
			rc = 1;
		printf("%-7s %6zu %5zu %5zu %13.1f ", s->name, s->m, s->n, s->k, ob);
		if (dn < 0)
			printf("%9s ", "-");
		else
			printf("%9.1f ", dn);
		if (bh < 0)
			printf("%10s\n", "-");
		else
			printf("%10.1f\n", bh);
	}
	for (int t = 0; t < threads; t++)
		free(tb[t].a), free(tb[t].w), free(tb[t].out), free(tb[t].bias), free(tb[t].ah),
			free(tb[t].wh);
	free(tb);
	ncf_mm_release();
	if (fclose(stdout) != 0)
		return 1;
	return rc;
}
