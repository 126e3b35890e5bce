/*
 * bench.c - ncf-infer --bench: NVIDIA's inference benchmark (PyTorch
 * inference.py), per batch size, measured two ways (ncf-infer(1), BENCHMARK):
 *
 *  - as inference.py does: the pairs already where the backend computes
 *    (ncf_backend_resident_set: device memory on a GPU), each pass
 *    synchronised before and after (its torch.cuda.synchronize() around
 *    model(users, items, sigmoid=True)), the probabilities left there.
 *    Columns throughput_avg (batch / mean latency, samples/s), latency_avg,
 *    latency_p90, latency_p95, latency_p99 (seconds);
 *  - host to host: ids from host memory, probabilities back into host
 *    memory (ncf_backend_score, what --score does), the same statistics as
 *    host_throughput_avg ... host_latency_p99.
 *
 * On the cpu backend host memory is the device: both measure the same work.
 * Percentiles are nearest-rank over the timed passes.  Pairs are uniform
 * over the model's users and items, drawn from the seed (Philox, purpose
 * NCF_RNG_BENCH, one stream per batch size).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "clock.h"
#include "err.h"
#include "ncf_hd.h"

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

/* warmup untimed passes, then iterations timed ones into lat, each
 * between two synchronisations. */
static int time_passes(const struct pass *p, int warmup, int iterations, double *lat)
{
	for (int w = 0; w < warmup; w++)
		if (run_pass(p) != 0)
			return -1;
	for (int k = 0; k < iterations; k++) {
		if (ncf_backend_sync(p->be) != 0)
			return -1;
		double t = ncf_now();
		if (run_pass(p) != 0 || ncf_backend_sync(p->be) != 0)
			return -1;
		lat[k] = ncf_now() - t;
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

/* How every batch size is measured: warmup untimed and iterations timed
 * passes, pairs from seed, the latencies into lat (iterations). */
struct plan {
	int warmup, iterations;
	uint64_t seed;
	double *lat;
};

/* Both measurements of batch size n (pairs drawn for size index s). */
static int bench_size(struct ncf_backend *be, const struct plan *pl, size_t n, int s,
		      struct stats *dev, struct stats *host)
{
	int warmup = pl->warmup, iterations = pl->iterations;
	double *lat = pl->lat;
	uint32_t *u = ncf_xmalloc(n * sizeof *u), *it = ncf_xmalloc(n * sizeof *it);
	float *out = ncf_xmalloc(n * sizeof *out);
	for (size_t j = 0; j < n; j++) {
		ncf_u32x4 r = ncf_rng(pl->seed, NCF_RNG_BENCH, (uint32_t)s, j, 0);
		u[j] = ncf_uniform_below(r.v[0], be->shape.users);
		it[j] = ncf_uniform_below(r.v[1], be->shape.items);
	}
	int rc = -1;
	struct pass p = {be, 1, u, it, out, n};
	NCF_TRY_GOTO(ncf_backend_resident_set(be, u, it, n), out);
	NCF_TRY_GOTO(time_passes(&p, warmup, iterations, lat), out);
	summarise(lat, iterations, dev);
	NCF_TRY_GOTO(ncf_backend_score_resident(be, n, out), out);
	NCF_TRY_GOTO(probabilities(out, n, "device"), out);
	p.resident = 0;
	if (time_passes(&p, warmup, iterations, lat) != 0)
		goto out;
	summarise(lat, iterations, host);
	if (probabilities(out, n, "host") != 0)
		goto out;
	rc = 0;
out:
	free(u), free(it), free(out);
	return rc;
}

int infer_bench(struct ncf_backend *be, const int64_t *sizes, int nsizes, int warmup,
		    int iterations, int json, uint64_t seed)
{
	if (json)
		printf("{\"device\": \"%s\", \"precision\": \"%s\", \"warmup\": %d, \"iterations\": "
		       "%d, \"results\": [",
		       ncf_backend_name(be), ncf_precision_name(be->precision),
		       warmup, iterations);
	else
		printf("batch_size\tthroughput_avg\tlatency_avg\tlatency_p90\tlatency_p95\t"
		       "latency_p99\thost_throughput_avg\thost_latency_avg\thost_latency_p90\t"
		       "host_latency_p95\thost_latency_p99\n");
	struct plan pl = {warmup, iterations, seed,
			  ncf_xmalloc((size_t)iterations * sizeof *pl.lat)};
	int rc = 0;
	for (int s = 0; s < nsizes && rc == 0; s++) {
		size_t n = (size_t)sizes[s];
		struct stats d, h;
		rc = bench_size(be, &pl, n, s, &d, &h);
		if (rc != 0)
			break;
		if (json)
			printf("%s{\"batch_size\": %zu, \"throughput_avg\": %.1f, \"latency_avg\": %.9f, "
			       "\"latency_p90\": %.9f, \"latency_p95\": %.9f, \"latency_p99\": %.9f, "
			       "\"host_throughput_avg\": %.1f, \"host_latency_avg\": %.9f, "
			       "\"host_latency_p90\": %.9f, \"host_latency_p95\": %.9f, "
			       "\"host_latency_p99\": %.9f}",
			       s ? ", " : "", n, (double)n / d.mean, d.mean, d.p90, d.p95, d.p99,
			       (double)n / h.mean, h.mean, h.p90, h.p95, h.p99);
		else
			printf("%zu\t%.1f\t%.9f\t%.9f\t%.9f\t%.9f\t%.1f\t%.9f\t%.9f\t%.9f\t%.9f\n", n,
			       (double)n / d.mean, d.mean, d.p90, d.p95, d.p99, (double)n / h.mean,
			       h.mean, h.p90, h.p95, h.p99);
		fflush(stdout);
	}
	if (json && rc == 0)
		printf("]}\n");
	free(pl.lat);
	return rc;
}
