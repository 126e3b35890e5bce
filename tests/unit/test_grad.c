/*
 * test_grad - the gradient of the whole NeuMF (dropout, GMF, head, BCE) of
 * the plain reference (kernels/cpu/reference.c, the oracle of the other
 * tests) and of the fast cpu backend (factorized first layer) against
 * central finite differences of an independent double-precision evaluation
 * of the model, on the same samples and dropout masks; and bit-identical
 * gradients of the fast backend for 1 and 2 threads.
 *
 * Tolerances.  The reference loss is double; the backend computes in
 * float, so its loss agrees to float rounding (rel 1e-5 over a few hundred
 * terms).  Finite differences with h = 1e-6 in double have truncation error
 * O(h^2) ~ 1e-12 and no kink trouble unless a ReLU input sits within 1e-6
 * of 0 (we check that none does); the backend's float gradient carries
 * accumulation error of a few ulps of the summed terms, so we accept
 * |g - fd| <= 1e-6 + 1e-3 |fd| per parameter: 1e-6 is ~10 ulps of the
 * largest terms (~1e-2) of a mean over 100+ samples, and 1e-3 relative
 * leaves room for cancellation in small gradients.  Both float
 * implementations get the same bounds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend_impl.h"
#include "model.h"
#include "ncf_hd.h"
#include "tap.h"

/* A small data set: U users, I items, CSR by hand. */
#define U 7
#define I 11
static const int64_t offsets[U + 1] = {0, 3, 5, 9, 10, 13, 13, 16};
static const uint32_t items[16] = {0, 4, 7, 1, 2, 3, 5, 8, 10, 6, 0, 9, 10, 2, 4, 6};
static uint32_t entry_user[16];

static struct ncf_shape shape = {.users = U, .items = I, .factors = 4, .n_layers = 4,
				 .layers = {8, 6, 4, 3}};
static struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f,
				.dropout = 0.3f, .negatives = 2, .true_neg = 0, .batch = 48,
				.seed = 7};
static struct ncf_layout L;
static double min_relu_gap; /* smallest |pre-activation| seen */

/* Mean BCE over positions [first, first + n) of epoch, in double, the
 * model written out plainly: x = [mlp_user[u], mlp_item[i]], h_k = drop(relu(W_k h + b)). */
static double ref_loss(const double *p, uint32_t epoch, uint64_t first, uint64_t n)
{
	uint64_t S = 16 * (1 + hp.negatives);
	ncf_stream st = {.perm = ncf_perm_make(S, hp.seed, epoch), .seed = hp.seed, .epoch = epoch,
			 .items = I, .positives = 16, .entry_user = entry_user, .offsets = offsets,
			 .csr_items = items};
	uint32_t drop16 = ncf_dropout_threshold(hp.dropout);
	double scale = (double)(1.0f / (1.0f - hp.dropout));
	size_t F = shape.factors, M = shape.layers[0] / 2;
	double total = 0;
	for (uint64_t t = first; t < first + n; t++) {
		uint32_t u, it;
		int y = ncf_sample_at(&st, t, &u, &it);
		double h[2][64];
		for (size_t k = 0; k < M; k++) {
			h[0][k] = p[L.mlp_user + u * M + k];
			h[0][M + k] = p[L.mlp_item + it * M + k];
		}
		int cur = 0;
		size_t width = 2 * M;
		for (uint32_t k = 1; k < shape.n_layers; k++) {
			size_t out = shape.layers[k];
			for (size_t o = 0; o < out; o++) {
				double z = p[L.b[k] + o];
				for (size_t q = 0; q < width; q++)
					z += p[L.w[k] + o * width + q] * h[cur][q];
				if (fabs(z) < min_relu_gap)
					min_relu_gap = fabs(z);
				double a = z > 0 ? z : 0;
				ncf_u32x4 bits = ncf_dropout_bits(hp.seed, epoch, t, k - 1, (uint32_t)(o / 8));
				a = ncf_dropout_keep(bits, (uint32_t)(o % 8), drop16) ? a * scale : 0;
				h[1 - cur][o] = a;
			}
			cur = 1 - cur;
			width = out;
		}
		double logit = p[L.head_b];
		for (size_t f = 0; f < F; f++)
			logit += p[L.head_w + f] * p[L.gmf_user + u * F + f] * p[L.gmf_item + it * F + f];
		for (size_t q = 0; q < width; q++)
			logit += p[L.head_w + F + q] * h[cur][q];
		/* stable BCE with logits */
		double l = (logit > 0 ? logit : 0) - logit * y + log1p(exp(-fabs(logit)));
		total += l;
	}
	return total / (double)n;
}

/* The gradient of implementation impl (threads threads) at params. */
static int run_grad(const struct ncf_backend_i *impl, int threads, const float *params,
		    uint64_t first, uint64_t n, float *g, double *loss)
{
	struct ncf_dist dist = {.rank = 0, .size = 1, .local_size = 1};
	struct ncf_backend be;
	if (ncf_backend_open_impl(&be, impl, &shape, &hp, NCF_PRECISION_DEFAULT, threads,
				  &dist) != 0)
		return -1;
	struct ncf_train_data td = {.users = U, .items = I, .positives = 16, .offsets = offsets,
				    .items_csr = items, .entry_user = entry_user};
	int rc = ncf_backend_set_state(&be, params, NULL, NULL) ||
		 ncf_backend_set_train_data(&be, &td) ||
		 ncf_backend_grad(&be, 0, first, n, g, loss);
	ncf_backend_close(&be);
	return rc;
}

/* fd (L.total) = central differences of ref_loss at p (restored). */
static void finite_differences(double *p, uint64_t first, uint64_t n, double *fd)
{
	const double h = 1e-6;
	for (size_t k = 0; k < L.total; k++) {
		double keep = p[k];
		p[k] = keep + h;
		double lp = ref_loss(p, 0, first, n);
		p[k] = keep - h;
		double lm = ref_loss(p, 0, first, n);
		p[k] = keep;
		fd[k] = (lp - lm) / (2 * h);
	}
}

/* Parameters whose gradient g is off fd by more than 1e-6 + 1e-3 |fd| (the
 * first ones are shown); *worst: the largest error over its tolerance. */
static int count_off(const float *g, const double *fd, const char *who, double *worst)
{
	int bad = 0;
	*worst = 0;
	for (size_t k = 0; k < L.total; k++) {
		double err = fabs((double)g[k] - fd[k]), tol = 1e-6 + 1e-3 * fabs(fd[k]);
		if (err / tol > *worst)
			*worst = err / tol;
		if (err > tol) {
			if (bad < 10)
				tap_diag("%s: parameter %zu: %.9g, finite difference %.9g", who, k,
					 (double)g[k], fd[k]);
			bad++;
		}
	}
	return bad;
}

/* ---- the cases ---------------------------------------------------------- */

/* NVIDIA's initial parameters (float, and p in double), the gradients of the
 * cpu backend (g, g2: 1 and 2 threads) and of the reference (gr), finite
 * differences fd; a batch that starts inside the epoch. */
static float *params, *g, *g2, *gr;
static double *p, *fd, loss, ref;
static const uint64_t first = 5, n = 40;

static void set_up(void)
{
	for (uint32_t u = 0; u < U; u++)
		for (int64_t k = offsets[u]; k < offsets[u + 1]; k++)
			entry_user[k] = u;
	ncf_layout_make(&shape, &L);
	params = malloc(L.total * sizeof(float));
	ncf_model_init(&shape, &L, hp.seed, params);
	/* Embeddings of N(0, 0.01) make every gradient tiny; scale them up so
	 * that the check sees gradients of ordinary size. */
	for (size_t k = 0; k < L.dense; k++)
		params[k] *= 30.0f;
	g = malloc(L.total * sizeof(float));
	g2 = malloc(L.total * sizeof(float));
	gr = malloc(L.total * sizeof(float));
	p = malloc(L.total * sizeof(double));
	fd = malloc(L.total * sizeof(double));
	for (size_t k = 0; k < L.total; k++)
		p[k] = params[k];
}

static void t_cpu_grad(void)
{
	tap_ok(run_grad(&ncf_backend_cpu, 1, params, first, n, g, &loss) == 0, "a gradient, 1 thread");
}

static void t_cpu_loss(void)
{
	min_relu_gap = INFINITY;
	ref = ref_loss(p, 0, first, n);
	tap_ok(tap_close(loss / (double)n, ref, 0, 1e-5, "loss"), "the reference loss is %.8f", ref);
	tap_diag("smallest |ReLU input| %.3g (finite differences need > 1e-5)", min_relu_gap);
}

static void t_cpu_fd(void)
{
	double worst, largest = 0;
	finite_differences(p, first, n, fd);
	int bad = count_off(g, fd, "cpu", &worst);
	for (size_t k = 0; k < L.total; k++)
		largest = fabs(fd[k]) > largest ? fabs(fd[k]) : largest;
	tap_ok(bad == 0, "%d of %zu gradients off (worst error %.3g of its tolerance)", bad, L.total,
	       worst);
	tap_ok(min_relu_gap > 1e-5, "no ReLU input within 1e-5 of its kink (%.3g)", min_relu_gap);
	tap_diag("largest gradient %.3g", largest);
}

static void t_nonzero(void)
{
	int nonzero = 0;
	for (size_t k = 0; k < L.total; k++)
		nonzero += g[k] != 0.0f;
	tap_ok(nonzero > (int)L.total / 2, "%d of %zu nonzero", nonzero, L.total);
}

static void t_threads(void)
{
	double loss2;
	tap_ok(run_grad(&ncf_backend_cpu, 2, params, first, n, g2, &loss2) == 0 &&
		       memcmp(g, g2, L.total * sizeof(float)) == 0,
	       "the gradient of 2 threads is that of 1");
}

/* The plain reference, the other tests' oracle, on the same batch. */
static void t_reference_loss(void)
{
	double rloss;
	tap_ok(run_grad(&ncf_backend_reference, 1, params, first, n, gr, &rloss) == 0 &&
		       tap_close(rloss / (double)n, ref, 0, 1e-5, "reference loss"),
	       "the loss of reference.c");
}

static void t_reference_fd(void)
{
	double worst;
	int bad = count_off(gr, fd, "reference", &worst);
	tap_ok(bad == 0, "%d of %zu gradients off (worst error %.3g of its tolerance)", bad, L.total,
	       worst);
}

/* Without dropout, and a batch that covers the whole epoch. */
static uint64_t S;

static void t_whole_loss(void)
{
	hp.dropout = 0.0f;
	S = 16 * (1 + hp.negatives);
	tap_ok(run_grad(&ncf_backend_cpu, 2, params, 0, S, g, &loss) == 0 &&
		       tap_close(loss / (double)S, ref_loss(p, 0, 0, S), 0, 1e-5, "loss"),
	       "the cpu backend's loss");
}

static void t_whole_fd(void)
{
	double worst;
	finite_differences(p, 0, S, fd);
	int bad = count_off(g, fd, "cpu", &worst);
	tap_ok(bad == 0, "%d gradients off (worst error %.3g of its tolerance)", bad, worst);
}

static void t_whole_reference(void)
{
	double rloss, worst = 0;
	int rc = run_grad(&ncf_backend_reference, 1, params, 0, S, gr, &rloss);
	tap_ok(rc == 0 && tap_close(rloss / (double)S, ref_loss(p, 0, 0, S), 0, 1e-5,
				    "reference loss"),
	       "the loss of reference.c");
	tap_ok(rc == 0 && count_off(gr, fd, "reference", &worst) == 0,
	       "gradients (worst %.3g of the tolerance)", worst);
}

static void t_relu_gap(void)
{
	tap_ok(min_relu_gap > 1e-5, "the smallest is %.3g", min_relu_gap);
}

int main(void)
{
	set_up();
	TEST(t_cpu_grad(), "cpu backend computes a gradient");
	TEST(t_cpu_loss(), "loss equals the double-precision reference (rel 1e-5)");
	TEST(t_cpu_fd(), "all %zu parameter gradients match finite differences", L.total);
	TEST(t_nonzero(), "the gradient is not trivially zero");
	TEST(t_threads(), "1 and 2 threads give bit-identical gradients");
	TEST(t_reference_loss(), "reference.c: loss equals the double-precision model (rel 1e-5)");
	TEST(t_reference_fd(), "reference.c: all %zu parameter gradients match finite differences",
	     L.total);
	TEST(t_whole_loss(), "no dropout, whole epoch: loss equals the reference");
	TEST(t_whole_fd(), "no dropout, whole epoch: gradients match finite differences");
	TEST(t_whole_reference(), "reference.c, no dropout, whole epoch: loss and gradients match");
	TEST(t_relu_gap(), "no ReLU input within 1e-5 of its kink");
	free(params), free(g), free(g2), free(gr), free(p), free(fd);
	return tap_done();
}
