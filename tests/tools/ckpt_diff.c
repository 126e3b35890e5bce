/*
 * ckpt_diff A B - compare the parameters of two checkpoints of one shape:
 * prints max_abs, max_rel (relative to max |A|), rms (root mean square of
 * the difference) and identical (1 when bit-equal) as key<TAB>value lines.
 * Exit 1 when either file cannot be read or the shapes differ.  A test
 * helper (tests/cli/mpi.t).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ckpt.h"
#include "err.h"
#include "model.h"

int main(int argc, char **argv)
{
	ncf_set_progname("ckpt_diff");
	if (argc != 3) {
		fprintf(stderr, "usage: ckpt_diff A.ncfm B.ncfm\n");
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
