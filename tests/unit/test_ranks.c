/*
 * test_ranks - data parallelism without MPI: the cpu backend's gradient of
 * one global batch, computed as R ranks would compute it (each its slice,
 * struct ncf_dist faked as rank r of R) and summed, against the gradient
 * of one rank, for R = 2 and 3, at the initial parameters and after some
 * training; and the losses of the slices summing to the whole batch's.
 * This is the exact contract behind mpirun -np R ncf-train (DESIGN.md
 * section 7); tests/cli/mpi.t checks the MPI plumbing around it.
 *
 * Tolerances.  The slices see the same samples, dropout masks and
 * parameters; what differs is the order of float sums (each rank sums its
 * part, then the parts are added) and the rounding of OpenBLAS, which may
 * depend on a row's place in the matrix (its AVX-512 kernels do) and the
 * chunks are cut differently.  Those ulps can flip a ReLU that sits at 0:
 * one sample's unit then adds or drops its term.  Per tensor we accept
 * ||sum - one||_2 <= 1e-4 ||one||_2 + 1e-9: sums of a few thousand float
 * terms agree to ~1e-6 relative, and a flipped unit is one of B * H terms
 * (measured worst over these cases: 7e-7).  The losses are sums of
 * per-sample values computed identically: rel 1e-9 in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "helpers.h"
#include "model.h"
#include "ncf_hd.h"
#include "tap.h"

#define U 300
#define I 800

static int64_t offsets[U + 1];
static uint32_t *items, *entry_user;

static const struct ncf_shape shape = {.users = U, .items = I, .factors = 16, .n_layers = 4,
				       .layers = {64, 64, 32, 16}};

static int open_be(struct ncf_backend *be, struct ncf_dist *d, const struct ncf_hparams *hp)
{
	if (ncf_backend_open(be, NCF_DEVICE_CPU, &shape, hp, NCF_PRECISION_FP32, 2, d) != 0)
		return -1;
	struct ncf_train_data td = {.users = U, .items = I, .positives = offsets[U],
				    .offsets = offsets, .items_csr = items,
				    .entry_user = entry_user};
	return ncf_backend_set_train_data(be, &td);
}

/* Worst ||a - b|| / ||b|| over the tensors of the layout (name in *what). */
static double worst_tensor(const struct ncf_layout *L, const float *a, const float *b,
			   const char **what)
{
	struct {
		const char *name;
		size_t off, n;
	} t[] = {
		{"gmf_user", L->gmf_user, L->gmf_item - L->gmf_user},	{"gmf_item", L->gmf_item, L->mlp_user - L->gmf_item},
		{"mlp_user", L->mlp_user, L->mlp_item - L->mlp_user},	{"mlp_item", L->mlp_item, L->w[1] - L->mlp_item},
		{"mlp", L->w[1], L->head_w - L->w[1]}, {"head", L->head_w, L->total - L->head_w},
	};
	double worst = 0;
	for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
		double d2 = 0, b2 = 0;
		for (size_t j = t[k].off; j < t[k].off + t[k].n; j++) {
			double d = (double)a[j] - b[j];
			d2 += d * d;
			b2 += (double)b[j] * b[j];
		}
		double r = sqrt(d2) / (sqrt(b2) + 1e-9);
		if (r > worst) {
			worst = r;
			*what = t[k].name;
		}
	}
	return worst;
}

/* The one-rank backend, trained to some step; at that step its parameters
 * p and the gradient g1 and loss l1 of the batch [first, first + n). */
static struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f,
				.dropout = 0.5f, .negatives = 4, .batch = 4096, .seed = 3};
static struct ncf_backend one;
static size_t T;
static float *p, *g1;
static double l1;
static int g1_rc = -1;
static uint64_t S, first, n;

static int set_up(void)
{
	/* users with 3..60 positives, half of them among the 20 most popular
	 * items (so that item gradients sum many samples and partly cancel) */
	helper_make_rows(11, U, I, offsets, &items, &entry_user);
	static struct ncf_dist single = {.rank = 0, .size = 1, .local_size = 1};
	if (open_be(&one, &single, &hp) != 0)
		return -1;
	T = one.layout.total;
	p = malloc(T * sizeof *p);
	g1 = malloc(T * sizeof *g1);
	ncf_model_init(&shape, &one.layout, hp.seed, p);
	ncf_backend_set_state(&one, p, NULL, NULL);
	S = (uint64_t)offsets[U] * (1 + hp.negatives);
	return 0;
}

/* Train steps more steps with one rank, then take the next batch's
 * gradient. */
static void train(int steps)
{
	for (int s = 0; s < steps; s++) {
		uint64_t nb = S - first < hp.batch ? S - first : hp.batch;
		double ls;
		ncf_backend_train_step(&one, 0, first, nb, &ls);
		first = first + nb >= S ? 0 : first + nb;
	}
	n = S - first < hp.batch ? S - first : hp.batch;
	ncf_backend_get_state(&one, p, NULL, NULL);
	g1_rc = ncf_backend_grad(&one, 0, first, n, g1, &l1);
}

/* R ranks' gradients of the batch, each its slice, summed. */
static void t_ranks_sum(int R)
{
	float *gr = malloc(T * sizeof *gr), *gsum = calloc(T, sizeof *gsum);
	double lsum = 0;
	int ok = g1_rc == 0;
	for (int r = 0; r < R; r++) {
		struct ncf_dist d = {.rank = r, .size = R, .local_rank = r, .local_size = R};
		struct ncf_backend be;
		double lr;
		ok &= open_be(&be, &d, &hp) == 0 && ncf_backend_set_state(&be, p, NULL, NULL) == 0 &&
		      ncf_backend_grad(&be, 0, first, n, gr, &lr) == 0;
		ncf_backend_close(&be);
		for (size_t j = 0; j < T; j++)
			gsum[j] += gr[j];
		lsum += lr;
	}
	const char *what = "";
	double w = worst_tensor(&one.layout, gsum, g1, &what);
	tap_diag("after %llu steps, %d ranks: worst tensor %s, relative L2 %.3g",
		 (unsigned long long)one.step, R, what, w);
	tap_ok(ok && w <= 1e-4, "the gradients, relative L2 within 1e-4");
	tap_ok(tap_close(lsum, l1, 0, 1e-9, "loss"), "the losses, rel 1e-9");
	free(gr), free(gsum);
}

int main(void)
{
	if (set_up() != 0)
		return tap_ok(0, "open the cpu backend"), tap_done();
	/* compare after 0, 10, then 30 steps with one rank */
	static const int more[3] = {0, 10, 20};
	for (int phase = 0; phase < 3; phase++) {
		train(more[phase]);
		for (int R = 2; R <= 3; R++)
			TEST(t_ranks_sum(R),
			     "%d ranks sum to the 1-rank gradient and loss after %llu steps", R,
			     (unsigned long long)one.step);
	}
	ncf_backend_close(&one);
	free(p), free(g1), free(items), free(entry_user);
	return tap_done();
}
