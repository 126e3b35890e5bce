/*
 * bench_save - what an epoch's checkpoints cost ncf-train, at a model
 * size (ml-20m's by default: 138,493 users, 26,744 items, NVIDIA's
 * shape), on the cpu backend: the snapshot (get_state into
 * ncf_backend_host_alloc memory, the part still on the training clock),
 * one checkpoint written with zstd on the calling thread (how every file
 * was written before the writer thread), the same with zstd workers (the
 * writer thread's way), and the copy of a written file to a second name
 * (-o and MODEL.epoch-NNN).  Each is timed --reps times, alternating;
 * key<TAB>value lines give the min and the median.  Used by
 * scripts/bench.sh.
 *
 *   bench_save DIR [--users U] [--items I] [--reps N] [--workers N]
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "ckpt.h"
#include "cli.h"
#include "err.h"
#include "io.h"
#include "model.h"
#include "usage.h"

#define MAX_REPS 32

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void print_times(const char *key, double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	printf("%s_s_min\t%.4f\n%s_s_median\t%.4f\n", key, t[0], key, t[n / 2]);
}

int main(int argc, char **argv)
{
	ncf_set_progname(argv[0]);
	uint32_t users = 138493, items = 26744;
	int reps = 3, workers = (int)sysconf(_SC_NPROCESSORS_ONLN);
	static const struct option longopts[] = {{"users", required_argument, NULL, 'u'},
						 {"items", required_argument, NULL, 'i'},
						 {"reps", required_argument, NULL, 'r'},
						 {"workers", required_argument, NULL, 'w'},
						 {NULL, 0, NULL, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'u')
			users = (uint32_t)ncf_opt_int("--users", optarg, 1, 100000000);
		else if (c == 'i')
			items = (uint32_t)ncf_opt_int("--items", optarg, 1, 100000000);
		else if (c == 'r')
			reps = (int)ncf_opt_int("--reps", optarg, 1, MAX_REPS);
		else if (c == 'w')
			workers = (int)ncf_opt_int("--workers", optarg, 1, 64);
		else
			return 2;
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: bench_save DIR [--users U] [--items I] [--reps N] [--workers N]\n");
		return 2;
	}
	workers = workers > 8 ? 8 : workers < 1 ? 1 : workers; /* as ncf-train (save.c) */
	const char *dir = argv[optind];
	struct ncf_shape shape;
	ncf_shape_nvidia(&shape, users, items);
	struct ncf_hparams hp;
	ncf_hparams_nvidia(&hp);
	struct ncf_layout L;
	ncf_layout_make(&shape, &L);
	size_t bytes = L.total * sizeof(float);

	struct ncf_dist one = {0, 1, 0, 1, 0, 0.0};
	struct ncf_backend be;
	if (ncf_backend_open(&be, NCF_DEVICE_CPU, &shape, &hp, NCF_PRECISION_FP32, 0, &one) != 0)
		return 1;
	struct ncf_ckpt ck;
	memset(&ck, 0, sizeof ck);
	ck.shape = shape;
	ck.hp = hp;
	ck.best_hr = ck.best_ndcg = ck.last_hr = ck.last_ndcg = -1;
	ck.user_ids = ncf_xmalloc((size_t)users * 4);
	ck.item_ids = ncf_xmalloc((size_t)items * 4);
	for (uint32_t u = 0; u < users; u++)
		ck.user_ids[u] = u + 1;
	for (uint32_t i = 0; i < items; i++)
		ck.item_ids[i] = i + 1;
	/* a trained model's moments are not zero: Adam's after NVIDIA's
	 * initialisation stand in, params for m, their squares for v */
	float *init = ncf_xmalloc(bytes), *m = ncf_xmalloc(bytes), *v = ncf_xmalloc(bytes);
	ncf_model_init(&shape, &L, hp.seed, init);
	for (size_t j = 0; j < L.total; j++) {
		m[j] = 0.1f * init[j];
		v[j] = 0.01f * init[j] * init[j];
	}
	if (ncf_backend_set_state(&be, init, m, v) != 0)
		return 1;
	free(init);
	free(m);
	free(v);
	ck.params = ncf_backend_host_alloc(&be, bytes);
	ck.m = ncf_backend_host_alloc(&be, bytes);
	ck.v = ncf_backend_host_alloc(&be, bytes);

	size_t n = strlen(dir) + 32;
	char *a = ncf_xmalloc(n), *b = ncf_xmalloc(n);
	snprintf(a, n, "%s/bench_save.ncfm", dir);
	snprintf(b, n, "%s/bench_save.copy.ncfm", dir);
	double snap[MAX_REPS], w0[MAX_REPS], wn[MAX_REPS], cp[MAX_REPS];
	struct stat st = {0};
	for (int r = 0; r < reps; r++) {
		double t0 = ncf_now();
		if (ncf_backend_get_state(&be, ck.params, ck.m, ck.v) != 0)
			return 1;
		double t1 = ncf_now();
		if (ncf_ckpt_write(&ck, a, 0) != 0)
			return 1;
		double t2 = ncf_now();
		if (ncf_ckpt_write(&ck, a, workers) != 0)
			return 1;
		double t3 = ncf_now();
		if (ncf_out_copy(a, b) != 0)
			return 1;
		double t4 = ncf_now();
		snap[r] = t1 - t0, w0[r] = t2 - t1, wn[r] = t3 - t2, cp[r] = t4 - t3;
	}
	stat(a, &st);
	printf("model\t%u users, %u items, factors 64, layers 256,256,128,64\n", users, items);
	printf("state_mb\t%.1f\n", 3.0 * (double)bytes / 1e6);
	printf("checkpoint_mb\t%.1f\n", (double)st.st_size / 1e6);
	printf("zstd_workers\t%d\n", workers);
	print_times("snapshot", snap, reps);
	print_times("write_one_thread", w0, reps);
	print_times("write_workers", wn, reps);
	print_times("copy", cp, reps);
	unlink(a);
	unlink(b);
	ncf_backend_host_free(&be, ck.params);
	ncf_backend_host_free(&be, ck.m);
	ncf_backend_host_free(&be, ck.v);
	free(ck.user_ids);
	free(ck.item_ids);
	free(a);
	free(b);
	ncf_backend_close(&be);
	return 0;
}
