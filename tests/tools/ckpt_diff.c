/*
 * ckpt_diff A B - compare the parameters of two checkpoints of one shape:
 * prints max_abs, max_rel (relative to max |A|), rms (root mean square of
 * the difference) and identical (1 when bit-equal) as key<TAB>value lines.
 * Exit 1 when either file cannot be read or the shapes differ.  A test
 * helper (tests/cli/mpi.t).
 *
 * ckpt_diff --by-id A B - A's rows against B's rows of the same original
 * ids (B may hold more users and items, tests/cli/init.t), and the dense
 * parts: prints missing (A's rows whose id B lacks) and identical (1 when
 * every row of A and the dense part are bit-equal in B).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "err.h"
#include "idindex.h"
#include "model.h"

/* Rows of table at of A (n rows, w floats) against B's rows by id. */
static int rows_same(const float *a, const float *b, size_t n, size_t w, const int64_t *at)
{
	int same = 1;
	for (size_t r = 0; r < n; r++)
		same &= at[r] >= 0 && !memcmp(a + r * w, b + (size_t)at[r] * w, w * sizeof(float));
	return same;
}

static int by_id(const char *pa, const char *pb)
{
	struct ncf_ckpt a, b;
	if (ncf_ckpt_read(pa, &a, 0) || ncf_ckpt_read(pb, &b, 0))
		return 1;
	struct ncf_layout la, lb;
	ncf_layout_make(&a.shape, &la);
	ncf_layout_make(&b.shape, &lb);
	struct ncf_id_list au = {a.shape.users, a.user_ids, &a.user_names},
			   ai = {a.shape.items, a.item_ids, &a.item_names},
			   bu = {b.shape.users, b.user_ids, &b.user_names},
			   bi = {b.shape.items, b.item_ids, &b.item_names};
	int64_t *uat = malloc(au.n * sizeof *uat), *iat = malloc(ai.n * sizeof *iat);
	size_t missing = ncf_ids_match(&au, &bu, uat, NULL) + ncf_ids_match(&ai, &bi, iat, NULL);
	size_t F = a.shape.factors, M = ncf_shape_m(&a.shape);
	int same = a.shape.factors == b.shape.factors && la.total - la.dense == lb.total - lb.dense &&
		   !missing;
	same = same && rows_same(a.params + la.gmf_user, b.params + lb.gmf_user, au.n, F, uat) &&
	       rows_same(a.params + la.gmf_item, b.params + lb.gmf_item, ai.n, F, iat) &&
	       rows_same(a.params + la.mlp_user, b.params + lb.mlp_user, au.n, M, uat) &&
	       rows_same(a.params + la.mlp_item, b.params + lb.mlp_item, ai.n, M, iat) &&
	       !memcmp(a.params + la.dense, b.params + lb.dense,
		       (la.total - la.dense) * sizeof(float));
	printf("missing\t%zu\nidentical\t%d\n", missing, same);
	free(uat), free(iat);
	ncf_ckpt_free(&a);
	ncf_ckpt_free(&b);
	return 0;
}

int main(int argc, char **argv)
{
	ncf_set_progname("ckpt_diff");
	if (argc == 4 && !strcmp(argv[1], "--by-id"))
		return by_id(argv[2], argv[3]);
	if (argc != 3) {
		fprintf(stderr, "usage: ckpt_diff [--by-id] A.ncfm B.ncfm\n");
		return 2;
	}
	struct ncf_ckpt a, b;
	if (ncf_ckpt_read(argv[1], &a, 0) || ncf_ckpt_read(argv[2], &b, 0))
		return 1;
	if (memcmp(&a.shape, &b.shape, sizeof a.shape) != 0) {
		ncf_error("the two models have different shapes");
		return 1;
	}
	struct ncf_layout L;
	ncf_layout_make(&a.shape, &L);
	double max_abs = 0, max_a = 0, sq = 0, dense_max = 0;
	size_t over = 0, dense0 = L.w[1]; /* the MLP and the head follow the tables */
	for (size_t k = 0; k < L.total; k++) {
		double d = fabs((double)a.params[k] - b.params[k]);
		if (d > max_abs)
			max_abs = d;
		if (k >= dense0 && d > dense_max)
			dense_max = d;
		over += d > 1e-4;
		if (fabs(a.params[k]) > max_a)
			max_a = fabs(a.params[k]);
		sq += d * d;
	}
	printf("max_abs\t%.3g\nmax_rel\t%.3g\nrms\t%.3g\ndense_max_abs\t%.3g\nover_1e-4\t%.3g\n"
	       "identical\t%d\nsteps\t%llu %llu\n",
	       max_abs, max_a > 0 ? max_abs / max_a : 0, sqrt(sq / (double)L.total), dense_max,
	       (double)over / (double)L.total,
	       memcmp(a.params, b.params, L.total * sizeof(float)) == 0,
	       (unsigned long long)a.step, (unsigned long long)b.step);
	ncf_ckpt_free(&a);
	ncf_ckpt_free(&b);
	return 0;
}
