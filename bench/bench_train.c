/*
 * bench_train - training throughput of a backend at a given batch size, on
 * a cache: warm-up steps, then timed steps; prints samples/s, the FLOP rate
 * of the dense layers, and this machine's own sgemm rate measured in the
 * same run (in bf16 also the rate of oneDNN's bf16 products of the
 * backend's shape, the reference bf16 is held to), as key<TAB>value lines.
 * Used by scripts/bench.sh.
 *
 *   bench_train CACHE [--batch N] [--steps N] [--warmup N] [--device D]
 *               [--precision PREC] [--threads N] [--no-eval]
 */
#include <cblas.h>
#undef I
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "backend_opts.h"
#include "cache.h"
#include "cpu/matmul.h"
#include "cli.h"
#include "err.h"
#include "evaluate.h"
#include "model.h"
#include "ncf_hd.h"
#include "usage.h"

/* Each thread's own (m, n) x (n, k)^T products, the way the cpu backend
 * calls them: A (threads, m, k), W (n, k), bias (n) or NULL, C (threads,
 * m, n), of type t (NCF_MM_F32: OpenBLAS sgemm; NCF_MM_BF16: matmul.h's
 * forward with bias and ReLU). */
struct own_products {
	enum ncf_mm_type t;
	size_t m, n, k;
	const void *a, *w;
	const float *bias;
	float *c;
};

static int own_product(const struct own_products *p, size_t id)
{
	size_t m = p->m, n = p->n, k = p->k;
	if (p->t == NCF_MM_F32) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0f,
			    (const float *)p->a + id * m * k, (int)k, p->w, (int)k, 0.0f,
			    p->c + id * m * n, (int)n);
		return 0;
	}
	return ncf_mm_forward(&(struct ncf_mm_forward_op){
		.t = p->t, .m = m, .n = n, .k = k, .X = (const ncf_bf16 *)p->a + id * m * k,
		.ldx = k, .W = p->w, .ldw = k, .bias = p->bias, .relu = 1, .Y = p->c + id * m * n,
		.ldy = n});
}

/* The best FLOP/s of `trials` trials of each of `threads` threads running
 * reps of its own products; a trial where a product fails does not count. */
static double own_products_rate(const struct own_products *p, int threads, int trials, int reps)
{
	double best = 0;
	for (int trial = 0; trial < trials; trial++) {
		int fail = 0;
		double t = ncf_now();
#pragma omp parallel num_threads(threads) reduction(| : fail)
		{
#ifdef _OPENMP
			size_t id = (size_t)omp_get_thread_num();
#else
			size_t id = 0;
#endif
			for (int r = 0; r < reps; r++)
				fail |= own_product(p, id) != 0;
		}
		t = ncf_now() - t;
		double rate = 2.0 * (double)(p->m * p->n * p->k) * reps * threads / t;
		if (!fail && rate > best)
			best = rate;
	}
	return best;
}

/*
 * The sgemm rate (FLOP/s) of this machine with `threads` threads: the best
 * of (a) OpenBLAS's own threading on one 2048^3 product and (b) each thread
 * running single-threaded OpenBLAS on its own (1024, 128, 256) products,
 * the way the cpu backend calls it; best of several trials.  The highest
 * rate is the reference, so the fraction reported is a lower bound.
 */
static double sgemm_rate(int threads)
{
	double best = 0;
	size_t big = 2048;
	float *a = ncf_xmalloc(big * big * sizeof(float)), *b = ncf_xmalloc(big * big * sizeof(float));
	float *c = ncf_xmalloc(big * big * sizeof(float));
	for (size_t i = 0; i < big * big; i++)
		a[i] = (float)(i % 13) * 0.01f, b[i] = (float)(i % 7) * 0.01f;
	openblas_set_num_threads(threads);
	for (int trial = 0; trial < 4; trial++) {
		double t = ncf_now();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)big, (int)big, (int)big, 1.0f,
			    a, (int)big, b, (int)big, 0.0f, c, (int)big);
		t = ncf_now() - t;
		if (2.0 * big * big * big / t > best)
			best = 2.0 * big * big * big / t;
	}
	openblas_set_num_threads(1);
	struct own_products p = {NCF_MM_F32, 1024, 128, 256, a, b, NULL, c};
	double own = own_products_rate(&p, threads, 5, 60);
	free(a), free(b), free(c);
	return own > best ? own : best;
}

/*
 * The FLOP rate of oneDNN's bf16 products on this machine with `threads`
 * threads, the way the cpu backend calls them (matmul.h): each thread its
 * own (2048, 256) x (256, 128) forward products with bias and ReLU, one
 * at a time; best of several trials.  0 when bf16 products cannot run.
 */
static double bf16_rate(int threads)
{
	if (!ncf_mm_available(NCF_MM_BF16, NULL))
		return 0;
	size_t m = 2048, n = 128, k = 256;
	ncf_bf16 *a = ncf_xmalloc((size_t)threads * m * k * sizeof *a);
	ncf_bf16 *w = ncf_xmalloc(n * k * sizeof *w);
	float *bias = ncf_xcalloc(n, sizeof *bias);
	float *c = ncf_xmalloc((size_t)threads * m * n * sizeof *c);
	for (size_t i = 0; i < (size_t)threads * m * k; i++)
		a[i] = ncf_bf16_from_f32((float)(i % 13) * 0.01f);
	for (size_t i = 0; i < n * k; i++)
		w[i] = ncf_bf16_from_f32((float)(i % 7) * 0.01f);
	struct own_products p = {NCF_MM_BF16, m, n, k, a, w, bias, c};
	double best = own_products_rate(&p, threads, 5, 40);
	free(a), free(w), free(bias), free(c);
	return best;
}

int main(int argc, char **argv)
{
	ncf_set_progname("bench_train");
	ncf_synopsis = "bench_train CACHE [--batch N] [--steps N] [--warmup N] [--device D] [--precision P] [--threads N] [--no-eval]";
	ncf_verbosity = 1;
	uint64_t batch = 1u << 20;
	int steps = 3, warmup = 1, threads = 0, no_eval = 0;
	enum ncf_device device = NCF_DEVICE_CPU;
	enum ncf_precision prec = NCF_PRECISION_DEFAULT;
	static const struct option opts[] = {
		{"batch", 1, 0, 'b'}, {"steps", 1, 0, 's'},	{"warmup", 1, 0, 'w'},
		{"device", 1, 0, 'd'}, {"precision", 1, 0, 'p'}, {"threads", 1, 0, 't'},
		{"no-eval", 0, 0, 'n'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b': batch = (uint64_t)ncf_opt_int("--batch", optarg, 1, 1ll << 32); break;
		case 's': steps = (int)ncf_opt_int("--steps", optarg, 1, 100000); break;
		case 'w': warmup = (int)ncf_opt_int("--warmup", optarg, 0, 100000); break;
		case 'd': if (ncf_device_parse(optarg, &device)) ncf_usage_error("--device: '%s' is not cpu, cuda or auto", optarg); break;
		case 'p': if (ncf_precision_parse(optarg, &prec)) ncf_usage_error("--precision: '%s' is not fp32, tf32, bf16 or fp16", optarg); break;
		case 't': threads = (int)ncf_opt_int("--threads", optarg, 1, 4096); break;
		case 'n': no_eval = 1; break;
		case 'h': ncf_usage_help();
		default: ncf_usage_exit();
		}
	}
	if (optind == argc)
		ncf_usage_error("no cache given");
	if (optind != argc - 1)
		ncf_usage_error("one cache only ('%s' is extra)", argv[argc - 1]);
	struct ncf_dist dist;
	ncf_dist_on_hang(ncf_exit_hung);
	if (ncf_dist_init(&dist, &argc, &argv) != 0)
		return 1;
	struct ncf_cache cache;
	if (ncf_cache_read(argv[optind], &cache) != 0)
		return 1;
	struct ncf_shape shape;
	ncf_shape_nvidia(&shape, cache.users, cache.items);
	struct ncf_hparams hp;
	ncf_hparams_nvidia(&hp);
	hp.batch = batch;
	struct ncf_backend be;
	int rc = ncf_backend_open(&be, device, &shape, &hp, prec, threads, &dist);
	if (rc)
		return rc == -3 ? 3 : 1;
	float *params = ncf_xmalloc(be.layout.total * sizeof(float));
	ncf_model_init(&shape, &be.layout, 1, params);
	uint8_t *mask;
	if (ncf_backend_set_state(&be, params, NULL, NULL) ||
	    ncf_backend_load_cache(&be, &cache, &mask, 1))
		return 1;
	uint64_t S = ncf_epoch_samples((uint64_t)cache.train_positives, hp.negatives,
				       cache.train_negatives);
	int nth = 1;
#ifdef _OPENMP
	nth = omp_get_max_threads();
#endif
	int on_cpu = ncf_backend_on_host(&be);
	double peak = on_cpu && dist.size == 1 ? sgemm_rate(nth) : 0;
	uint64_t pos = 0;
	double loss;
	if (batch > S)
		ncf_usage_error("--batch %llu is larger than an epoch (%llu samples)",
				(unsigned long long)batch, (unsigned long long)S);
	/* consecutive batches of epoch 0, starting over when the next would not fit */
#define NEXT_POS(p) ((p) + 2 * batch <= S ? (p) + batch : 0)
	for (int w = 0; w < warmup; w++, pos = NEXT_POS(pos))
		if (ncf_backend_train_step(&be, 0, pos, batch, &loss))
			return 1;
	ncf_backend_sync(&be);
	ncf_dist_barrier(&dist);
	uint64_t first_timed = pos;
	double ar0 = dist.allreduce_seconds;
	double t = ncf_now();
	for (int k = 0; k < steps; k++, pos = NEXT_POS(pos))
		if (ncf_backend_train_step(&be, 0, pos, batch, &loss))
			return 1;
	ncf_backend_sync(&be);
	ncf_dist_barrier(&dist);
	t = ncf_now() - t;
	double ar = dist.allreduce_seconds - ar0;
	double sps = (double)batch * steps / t;
	/* Dense FLOPs actually executed: forward, backward data and backward
	 * weights, 3 x 2 x multiply-adds; per sample for layers 2..L and the
	 * head; once per distinct user and item of each batch for the
	 * factorized first layer (counted here by replaying the batches'
	 * sample stream). */
	double per_sample = 6.0 * ncf_dense_macs_factorized(&shape);
	double first_row = 6.0 * shape.layers[1] * (shape.layers[0] / 2.0);
	uint8_t *seen_u = ncf_xcalloc(cache.users, 1), *seen_i = ncf_xcalloc(cache.items, 1);
	ncf_stream st = {.perm = ncf_perm_make(S, hp.seed, 0), .seed = hp.seed, .epoch = 0,
			 .items = cache.items, .positives = cache.train_positives,
			 .entry_user = cache.entry_user, .offsets = cache.offsets,
			 .csr_items = cache.train_items, .train_negatives = cache.train_negatives,
			 .users = cache.users, .neg_offsets = cache.neg_offsets,
			 .neg_items = cache.neg_items};
	double distinct = 0;
	uint64_t p = first_timed;
	for (int k = 0; k < steps; k++, p = NEXT_POS(p)) {
		memset(seen_u, 0, cache.users);
		memset(seen_i, 0, cache.items);
		for (uint64_t j = p; j < p + batch; j++) {
			uint32_t u, it;
			ncf_sample_at(&st, j, &u, &it);
			distinct += !seen_u[u] + !seen_i[it];
			seen_u[u] = seen_i[it] = 1;
		}
	}
	free(seen_u), free(seen_i);
	double flops = per_sample * batch * steps + first_row * distinct;
	double t2 = ncf_now(), hr = 0, ndcg = 0;
	if (!no_eval && ncf_evaluate(&be, &cache, 10, &hr, &ndcg))
		return 1;
	double te = ncf_now() - t2;
	if (dist.rank != 0) {
		ncf_backend_close(&be);
		ncf_dist_finish(&dist);
		return 0;
	}
	printf("backend\t%s\n", ncf_backend_name(&be));
	int bf16 = be.precision == NCF_PRECISION_BF16;
	printf("precision\t%s\n", ncf_precision_name(be.precision));
	if (on_cpu)
		printf("matmul\t%s\n", ncf_mm_describe());
	printf("ranks\t%d\n", dist.size);
	printf("threads\t%d\n", nth);
	printf("batch\t%llu\n", (unsigned long long)batch);
	printf("steps\t%d\n", steps);
	printf("seconds_per_step\t%.4f\n", t / steps);
	printf("allreduce_fraction\t%.4f\n", t > 0 ? ar / t : 0.0);
	printf("samples_per_s\t%.0f\n", sps);
	printf("dense_gflops\t%.2f\n", flops / t / 1e9);
	if (on_cpu && dist.size == 1) {
		double after = sgemm_rate(nth);
		if (after > peak)
			peak = after;
		printf("sgemm_gflops\t%.2f\n", peak / 1e9);
		printf("dense_fraction_of_sgemm\t%.3f\n", flops / t / peak);
		printf("unfactorized_equivalent_gflops\t%.2f\n",
		       6.0 * ncf_dense_macs_per_sample(&shape) * batch * steps / t / 1e9);
		double bpeak = bf16 ? bf16_rate(nth) : 0;
		if (bpeak > 0) {
			printf("bf16_matmul_gflops\t%.2f\n", bpeak / 1e9);
			printf("dense_fraction_of_bf16_matmul\t%.3f\n", flops / t / bpeak);
		}
	}
	printf("rank_samples_per_s\t%.0f\n", sps / dist.size);
	if (!no_eval) {
		printf("eval_seconds\t%.4f\n", te);
		printf("eval_samples_per_s\t%.0f\n",
		       (double)cache.users * (cache.eval_negatives + 1) / te);
	}
	printf("epoch_seconds_estimate\t%.2f\n", (double)S / sps);
	printf("peak_rss_mb\t%.1f\n", (double)ncf_peak_rss() / 1e6);
	ncf_backend_close(&be);
	free(mask);
	free(params);
	ncf_cache_free(&cache);
	ncf_dist_finish(&dist);
	return 0;
}
