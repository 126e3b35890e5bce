/*
 * bench.c - ncf-infer --bench: NVIDIA's inference benchmark (PyTorch
 * inference.py), per batch size (ncf-infer(1), BENCHMARK):
 *
 *  - as inference.py does: the pairs already where the backend computes
 *    (ncf_backend_resident_set: device memory on a GPU), each pass
 *    synchronised before and after (its torch.cuda.synchronize() around
 *    model(users, items, sigmoid=True)), the probabilities left there.
 *    Columns throughput_avg (batch / mean latency, samples/s), latency_avg,
 *    latency_p90, latency_p95, latency_p99 (seconds);
 *  - on a GPU also host to host: ids from host memory, probabilities back
 *    into host memory (ncf_backend_score, what --score does), the same
 *    statistics as host_throughput_avg ... host_latency_p99.  On the cpu
 *    backend host memory is the device: that would be the same work
 *    again, so it is measured once;
 *  - iterations: the timed passes (by default NVIDIA's 190 unless they
 *    would take more than TIMED_BUDGET seconds, so that the default table
 *    ends well within a minute on a 2-core CPU, where a pass at 2^20 takes
 *    half a second).
 *
 * Percentiles are nearest-rank over the timed passes.  Pairs are uniform
 * over the model's users and items, drawn from the seed (Philox, purpose
 * NCF_RNG_BENCH, one stream per batch size).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "clock.h"
#include "err.h"
#include "ncf_hd.h"

/* NVIDIA's passes (inference.py: 200 batches, the first 10 untimed), and
 * the seconds the defaults may take per batch size. */
#define NVIDIA_WARMUP 10
#define NVIDIA_ITERATIONS 190
#define WARMUP_BUDGET 1.0
#define TIMED_BUDGET 3.0
#define MIN_TIMED 5

void infer_bench_defaults(struct infer_bench_opts *b)
{
	static const int64_t nvidia[] = {1024, 4096, 16384, 65536, 262144, 1048576};
	memset(b, 0, sizeof *b);
	memcpy(b->sizes, nvidia, sizeof nvidia);
	b->nsizes = (int)(sizeof nvidia / sizeof nvidia[0]);
	b->warmup = -1;
	b->iterations = 0;
	b->seed = 1;
}

const char *infer_bench_describe(const struct ncf_backend *be, const struct infer_bench_opts *b,
				 char *buf, size_t len)
{
	char w[64], t[64];
	if (b->warmup < 0)
		snprintf(w, sizeof w, "%d (at most %.0f s)", NVIDIA_WARMUP, WARMUP_BUDGET);
	else
		snprintf(w, sizeof w, "%d", b->warmup);
	if (b->iterations == 0)
		snprintf(t, sizeof t, "%d (at most %.0f s, at least %d)", NVIDIA_ITERATIONS,
			 TIMED_BUDGET, MIN_TIMED);
	else
		snprintf(t, sizeof t, "%d", b->iterations);
	snprintf(buf, len, "%s warm-up and %s timed passes per batch size%s", w, t,
		 ncf_backend_on_host(be)
			 ? ""
			 : "; pairs on the device (NVIDIA's inference.py), then host to host "
			   "(host_*)");
	return buf;
}

struct stats {
	double mean, p90, p95, p99;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The p-th percentile of sorted x (n): nearest rank. */
static double percentile(const double *x, int n, double p)
{
	int k = (int)ceil(p / 100.0 * n) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return x[k];
}

static void summarise(double *lat, int n, struct stats *st)
{
	double total = 0;
	for (int k = 0; k < n; k++)
		total += lat[k];
	qsort(lat, (size_t)n, sizeof *lat, cmp_double);
	st->mean = total / n;
	st->p90 = percentile(lat, n, 90);
	st->p95 = percentile(lat, n, 95);
	st->p99 = percentile(lat, n, 99);
}

/* One pass: of the kept pairs (resident) or from host memory. */
struct pass {
	struct ncf_backend *be;
	int resident;
	const uint32_t *u, *it;
	float *out;
	size_t n;
};

static int run_pass(const struct pass *p)
{
	if (p->resident)
		return ncf_backend_score_resident(p->be, p->n, NULL);
	return ncf_backend_score(p->be, p->u, p->it, p->n, p->out);
}

/* The warm-up passes, then the timed ones into lat (room for
 * NVIDIA_ITERATIONS or b->iterations), each between two
 * synchronisations; *timed gets how many.  Returns 0 or -1. */
static int time_passes(const struct pass *p, const struct infer_bench_opts *b, double *lat,
		       int *timed)
{
	int warmup = b->warmup < 0 ? NVIDIA_WARMUP : b->warmup;
	double t0 = ncf_now();
	for (int w = 0; w < warmup; w++) {
		if (run_pass(p) != 0)
			return -1;
		if (b->warmup < 0 && ncf_now() - t0 > WARMUP_BUDGET)
			break;
	}
	int n = b->iterations ? b->iterations : NVIDIA_ITERATIONS;
	double spent = 0;
	for (*timed = 0; *timed < n; (*timed)++) {
		if (!b->iterations && *timed >= MIN_TIMED && spent > TIMED_BUDGET)
			break;
		if (ncf_backend_sync(p->be) != 0)
			return -1;
		double t = ncf_now();
		if (run_pass(p) != 0 || ncf_backend_sync(p->be) != 0)
			return -1;
		lat[*timed] = ncf_now() - t;
		spent += lat[*timed];
	}
	return 0;
}

static int probabilities(const float *out, size_t n, const char *what)
{
	for (size_t j = 0; j < n; j++)
		if (!(out[j] >= 0.0f && out[j] <= 1.0f)) {
			ncf_error("benchmark: %s score %zu is %g, not a probability", what, j,
				  out[j]);
			return -1;
		}
	return 0;
}

/* What one batch size measured. */
struct size_result {
	size_t n;	    /* the batch size */
	struct stats dev;   /* pairs kept where the backend computes */
	struct stats host;  /* host to host (a GPU's) */
	int timed;	    /* timed passes of dev */
	int has_host;
};

/* The measurements of batch size r->n (pairs drawn for size index s):
 * resident, and host to host where that is other work.  Returns 0 or -1. */
static int bench_size(struct ncf_backend *be, const struct infer_bench_opts *b, int s,
		      double *lat, struct size_result *r)
{
	size_t n = r->n;
	uint32_t *u = ncf_xmalloc(n * sizeof *u), *it = ncf_xmalloc(n * sizeof *it);
	float *out = ncf_xmalloc(n * sizeof *out);
	for (size_t j = 0; j < n; j++) {
		ncf_u32x4 x = ncf_rng(b->seed, NCF_RNG_BENCH, (uint32_t)s, j, 0);
		u[j] = ncf_uniform_below(x.v[0], be->shape.users);
		it[j] = ncf_uniform_below(x.v[1], be->shape.items);
	}
	int rc = -1, timed;
	struct pass p = {be, 1, u, it, out, n};
	NCF_TRY_GOTO(ncf_backend_resident_set(be, u, it, n), out);
	NCF_TRY_GOTO(time_passes(&p, b, lat, &r->timed), out);
	summarise(lat, r->timed, &r->dev);
	NCF_TRY_GOTO(ncf_backend_score_resident(be, n, out), out);
	NCF_TRY_GOTO(probabilities(out, n, "device"), out);
	r->has_host = !ncf_backend_on_host(be);
	if (r->has_host) {
		p.resident = 0;
		NCF_TRY_GOTO(time_passes(&p, b, lat, &timed), out);
		summarise(lat, timed, &r->host);
		NCF_TRY_GOTO(probabilities(out, n, "host"), out);
	}
	rc = 0;
out:
	free(u), free(it), free(out);
	return rc;
}

/* The table's header, or the JSON object's start. */
static void print_head(struct ncf_backend *be, const struct infer_bench_opts *b, int host)
{
	if (b->json) {
		printf("{\"device\": \"%s\", \"precision\": \"%s\", \"warmup\": %d, \"iterations\": "
		       "%d, \"results\": [",
		       ncf_backend_name(be), ncf_precision_name(be->precision),
		       b->warmup < 0 ? NVIDIA_WARMUP : b->warmup,
		       b->iterations ? b->iterations : NVIDIA_ITERATIONS);
		return;
	}
	printf("batch_size\tthroughput_avg\tlatency_avg\tlatency_p90\tlatency_p95\tlatency_p99");
	if (host)
		printf("\thost_throughput_avg\thost_latency_avg\thost_latency_p90\t"
		       "host_latency_p95\thost_latency_p99");
	printf("\titerations\n");
}

/* One batch size's row, or its object in the JSON (and a line on stderr,
 * the JSON coming whole at the end). */
static void print_size(const struct infer_bench_opts *b, int s, const struct size_result *r)
{
	const struct stats *d = &r->dev, *h = &r->host;
	double n = (double)r->n;
	if (!b->json) {
		printf("%zu\t%.1f\t%.9f\t%.9f\t%.9f\t%.9f", r->n, n / d->mean, d->mean, d->p90,
		       d->p95, d->p99);
		if (r->has_host)
			printf("\t%.1f\t%.9f\t%.9f\t%.9f\t%.9f", n / h->mean, h->mean, h->p90, h->p95,
			       h->p99);
		printf("\t%d\n", r->timed);
		fflush(stdout);
		return;
	}
	ncf_info("batch size %zu: %.1f samples/s, latency %.9f s (p99 %.9f s), %d timed passes",
		 r->n, n / d->mean, d->mean, d->p99, r->timed);
	printf("%s{\"batch_size\": %zu, \"throughput_avg\": %.1f, \"latency_avg\": %.9f, "
	       "\"latency_p90\": %.9f, \"latency_p95\": %.9f, \"latency_p99\": %.9f",
	       s ? ", " : "", r->n, n / d->mean, d->mean, d->p90, d->p95, d->p99);
	if (r->has_host)
		printf(", \"host_throughput_avg\": %.1f, \"host_latency_avg\": %.9f, "
		       "\"host_latency_p90\": %.9f, \"host_latency_p95\": %.9f, "
		       "\"host_latency_p99\": %.9f",
		       n / h->mean, h->mean, h->p90, h->p95, h->p99);
	printf(", \"iterations\": %d}", r->timed);
}

int infer_bench(struct ncf_backend *be, const struct infer_bench_opts *b)
{
	print_head(be, b, !ncf_backend_on_host(be));
	int room = b->iterations ? b->iterations : NVIDIA_ITERATIONS;
	double *lat = ncf_xmalloc((size_t)room * sizeof *lat);
	int rc = 0;
	for (int s = 0; s < b->nsizes && rc == 0; s++) {
		struct size_result r = {.n = (size_t)b->sizes[s]};
		rc = bench_size(be, b, s, lat, &r);
		if (rc == 0)
			print_size(b, s, &r);
	}
	if (b->json && rc == 0)
		printf("]}\n");
	free(lat);
	return rc;
}
