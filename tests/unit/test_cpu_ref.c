/*
 * test_cpu_ref - the fast cpu backend (kernels/cpu/: factorized first
 * layer, slots, chunks in lanes, tiled OpenBLAS sgemm, AVX2 Philox, FMA
 * register tiles for scoring) against the plain reference
 * (kernels/cpu/reference.c, the model as DESIGN.md section 3 writes it), on
 * the same data, parameters and batches: the gradient and loss of a batch,
 * the parameters and Adam moments after one and after five steps, logits,
 * scores and evaluation ranks, a rank's slice of a two-rank batch; for
 * widths that are multiples of 8 (vector paths), odd widths (scalar paths)
 * and one hidden layer without dropout.  Batches of 4200 are three chunks
 * of 2048 with over 2048 distinct items (two tiles of item slots; the
 * scoring tables of 4000 items are two tiles as well).
 *
 * Both see the same samples and dropout masks (ncf_hd.h), so they compute
 * the same function; what differs is the order of float sums.  The fast
 * backend sums the first layer's input gradient per distinct user and item
 * before multiplying, OpenBLAS blocks its dot products, the batch is cut
 * into chunks whose sums are added lane by lane, table rows into tiles;
 * the reference adds sample by sample, in row order.  A float sum of K
 * terms moves by at most ~K ulps of the sum of their magnitudes; the
 * magnitudes here are at most ~10x the result (the gradient of a mean of a
 * few thousand samples, partly cancelling), K <= a few thousand.  Hence,
 * how close is close:
 *  - gradient, per tensor: |d| <= 1e-5 max|g| + 1e-4 |g| (1e-5 of the
 *    tensor's largest entry covers ~100 ulps of a sum whose terms are ~10x
 *    the largest entry; 1e-4 relative, entries that cancel badly);
 *  - loss sums (double sums of float BCE values that differ by the logits'
 *    rounding): rel 1e-6;
 *  - logits and scores: |d| <= 1e-6 + 1e-5 |x| (the same products; scoring
 *    adds them with fused multiply-adds in the fast backend, plainly in the
 *    reference: ~1 ulp per term over ~100 terms of similar size);
 *  - one Adam step: the fast backend's parameters are ncf_adam_update of
 *    its own gradient, bit for bit; against the reference's, |d| <= 1e-6 +
 *    1e-5 |p| + lr |dg| eps / (m + eps)^2: the first step is
 *    lr * g / (|g| + eps), which moves by at most that for a gradient
 *    difference dg (m the smaller |g|, 0 across a sign change), so where |g|
 *    is near eps = 1e-8 (many embedding entries at NVIDIA's initialisation)
 *    a gradient difference far inside its own bound may change the step by
 *    up to lr.  Adam's first moment as the gradient.  After five steps
 *    |d| <= 1e-4 (the
 *    differences compound a little each step; it assumes no entry's
 *    gradient comes within ~1e-9 of 0 along the way, true of this data:
 *    the worst is printed);
 *  - evaluation ranks: equal, unless two candidates' reference logits lie
 *    within 1e-5 of each other (a near tie; reported, at most 1 user).
 * The worst errors seen are printed as diagnostics, relative to the bound.
 * Under the sanitizers (NCF_SANITIZER=1, make check-asan) the five-step
 * comparison, slow there and numerically the same, is skipped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "metrics.h"
#include "model.h"
#include "ncf_hd.h"
#include "tap.h"

#define U 300
#define I 4000 /* over 2048 distinct items in a batch: two tiles of item slots */
#define N 30

static int64_t offsets[U + 1];
static uint32_t *items, *entry_user;
static uint32_t test_items[U], neg[U * N];
static uint8_t *counted;

static uint32_t rnd(uint32_t a, uint64_t idx, uint32_t n)
{
	return ncf_uniform_below(ncf_rng(17, NCF_RNG_BENCH, a, idx, 0).v[0], n);
}

/* Users with 3..60 positives, half of them among the 20 most popular items
 * (so that item gradients sum many samples); N negatives each. */
static void make_data(void)
{
	uint8_t has[I];
	size_t cap = (size_t)U * 64, n = 0;
	items = malloc(cap * sizeof *items);
	entry_user = malloc(cap * sizeof *entry_user);
	for (uint32_t u = 0; u < U; u++) {
		memset(has, 0, sizeof has);
		uint32_t k = 3 + rnd(1, u, 58);
		for (uint32_t t = 0; t < k; t++) {
			uint32_t it = rnd(2, (uint64_t)u * 100 + t, I);
			has[t % 2 ? it : it % 20] = 1;
		}
		offsets[u] = (int64_t)n;
		for (uint32_t it = 0; it < I; it++)
			if (has[it]) {
				items[n] = it;
				entry_user[n++] = u;
			}
		uint32_t t = rnd(3, u, I);
		while (has[t])
			t = (t + 1) % I;
		test_items[u] = t;
		for (uint32_t q = 0; q < N; q++)
			neg[u * N + q] = rnd(4, (uint64_t)u * N + q, I);
	}
	offsets[U] = (int64_t)n;
	counted = ncf_eval_mask(test_items, neg, U, N, I);
}

/* Run by make check-asan (NCF_SANITIZER=1)? */
static int sanitizer(void)
{
	const char *san = getenv("NCF_SANITIZER");
	return san && *san && strcmp(san, "0");
}

static uint64_t epoch_samples(void)
{
	return (uint64_t)offsets[U] * 5;
}

static struct ncf_hparams hparams(float dropout)
{
	struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f,
				 .dropout = dropout, .negatives = 4, .batch = 4200, .seed = 9};
	return hp;
}

/* Open impl with the data and parameters initialised from seed 3. */
static int open_be(struct ncf_backend *be, const struct ncf_backend_i *impl,
		   const struct ncf_shape *s, const struct ncf_hparams *hp, struct ncf_dist *d)
{
	if (ncf_backend_open_impl(be, impl, s, hp, NCF_PRECISION_FP32, 2, d) != 0)
		return -1;
	float *p = malloc(be->layout.total * sizeof *p);
	ncf_model_init(s, &be->layout, 3, p);
	struct ncf_train_data td = {.users = U, .items = I, .positives = offsets[U],
				    .offsets = offsets, .items_csr = items,
				    .entry_user = entry_user};
	struct ncf_eval_data ed = {.users = U, .negatives = N, .test_items = test_items,
				   .neg = neg, .counted = counted};
	int rc = ncf_backend_set_state(be, p, NULL, NULL) || ncf_backend_set_train_data(be, &td) ||
		 ncf_backend_set_eval_data(be, &ed);
	free(p);
	return rc ? -1 : 0;
}

/* The tensors of a layout, by role. */
struct tensor {
	char name[16];
	size_t off, n;
};

static int tensors(const struct ncf_backend *be, struct tensor *t)
{
	const struct ncf_layout *L = &be->layout;
	const struct ncf_shape *s = &be->shape;
	size_t F = s->factors, M = ncf_shape_m(s);
	int k = 0;
	t[k++] = (struct tensor){"gmf_user", L->gmf_user, (size_t)U * F};
	t[k++] = (struct tensor){"gmf_item", L->gmf_item, (size_t)I * F};
	t[k++] = (struct tensor){"mlp_user", L->mlp_user, (size_t)U * M};
	t[k++] = (struct tensor){"mlp_item", L->mlp_item, (size_t)I * M};
	for (uint32_t l = 1; l < s->n_layers; l++) {
		t[k] = (struct tensor){"", L->w[l], (size_t)s->layers[l] * s->layers[l - 1]};
		snprintf(t[k++].name, 16, "W%u", l);
		t[k] = (struct tensor){"", L->b[l], s->layers[l]};
		snprintf(t[k++].name, 16, "b%u", l);
	}
	t[k++] = (struct tensor){"head_w", L->head_w, F + ncf_shape_last(s)};
	t[k++] = (struct tensor){"head_b", L->head_b, 1};
	return k;
}

/* |got - want| <= atol + rtol |want| elementwise (first mismatches shown);
 * *worst gets the largest |d| / (atol + rtol |want|) seen.  Returns 1 when
 * all are close. */
static int close_all(const float *got, const float *want, size_t n, double atol, double rtol,
		     const char *what, double *worst)
{
	int bad = 0;
	for (size_t j = 0; j < n; j++) {
		double d = fabs((double)got[j] - want[j]), tol = atol + rtol * fabs(want[j]);
		if (isnan(d) || d > tol) {
			if (bad < 5)
				tap_diag("%s[%zu]: got %.9g, want %.9g", what, j, got[j], want[j]);
			bad++;
		}
		if (tol > 0 && d / tol > *worst)
			*worst = isnan(d) ? INFINITY : d / tol;
	}
	if (bad)
		tap_diag("%s: %d of %zu beyond %g + %g |x|", what, bad, n, atol, rtol);
	return bad == 0;
}

/* Per tensor: |d| <= rel_max max|want| + rtol |want|. */
static int close_tensors(const struct ncf_backend *be, const float *got, const float *want,
			 double rel_max, double rtol, const char *what, double *worst)
{
	struct tensor t[4 + 2 * NCF_MAX_LAYERS + 2];
	int nt = tensors(be, t), ok = 1;
	for (int k = 0; k < nt; k++) {
		double mx = 0;
		for (size_t j = 0; j < t[k].n; j++)
			mx = fmax(mx, fabs((double)want[t[k].off + j]));
		char name[64];
		snprintf(name, sizeof name, "%.40s %.15s", what, t[k].name);
		ok &= close_all(got + t[k].off, want + t[k].off, t[k].n, rel_max * mx, rtol, name,
				worst);
	}
	return ok;
}

static void test_gradient(const struct ncf_shape *s, float dropout, const char *label)
{
	struct ncf_hparams hp = hparams(dropout);
	struct ncf_dist one = {.rank = 0, .size = 1, .local_size = 1};
	struct ncf_backend ref, cpu;
	if (open_be(&ref, &ncf_backend_reference, s, &hp, &one) ||
	    open_be(&cpu, &ncf_backend_cpu, s, &hp, &one)) {
		tap_ok(0, "%s: open the backends", label);
		return;
	}
	size_t T = ref.layout.total;
	float *gr = malloc(T * sizeof *gr), *gc = malloc(T * sizeof *gc);
	uint64_t S = epoch_samples();
	double worst = 0;
	int ok = 1;
	/* three chunks of 2048 (the last short), and a short last batch */
	const uint64_t first[2] = {1000, S - 300}, n[2] = {4200, 300};
	for (int k = 0; k < 2; k++) {
		double lr, lc;
		ok &= ncf_backend_grad(&ref, 1, first[k], n[k], gr, &lr) == 0 &&
		      ncf_backend_grad(&cpu, 1, first[k], n[k], gc, &lc) == 0;
		ok &= close_tensors(&ref, gc, gr, 1e-5, 1e-4, "grad", &worst);
		ok &= tap_close(lc, lr, 0, 1e-6, "loss sum");
	}
	tap_ok(ok, "%s: gradients and losses of two batches equal the reference's (worst %.3g of "
	       "the bound)", label, worst);
	free(gr), free(gc);
	ncf_backend_close(&ref), ncf_backend_close(&cpu);
}

static void test_steps(const struct ncf_shape *s, float dropout, const char *label)
{
	struct ncf_hparams hp = hparams(dropout);
	struct ncf_dist one = {.rank = 0, .size = 1, .local_size = 1};
	struct ncf_backend ref, cpu;
	if (open_be(&ref, &ncf_backend_reference, s, &hp, &one) ||
	    open_be(&cpu, &ncf_backend_cpu, s, &hp, &one)) {
		tap_ok(0, "%s: open the backends", label);
		return;
	}
	size_t T = ref.layout.total;
	float *pr = malloc(T * sizeof *pr), *pc = malloc(T * sizeof *pc);
	float *p0 = malloc(T * sizeof *p0), *gr = malloc(T * sizeof *gr);
	float *gc = malloc(T * sizeof *gc), *mr = malloc(T * sizeof *mr), *mc = malloc(T * sizeof *mc);
	uint64_t S = epoch_samples(), B = hp.batch, pos = 0;
	double lr, lc, worst = 0, wm = 0;
	int ok = ncf_backend_get_state(&cpu, p0, NULL, NULL) == 0 &&
		 ncf_backend_grad(&ref, 0, 0, B, gr, &lr) == 0 &&
		 ncf_backend_grad(&cpu, 0, 0, B, gc, &lc) == 0;
	ok &= ncf_backend_train_step(&ref, 0, 0, B, &lr) == 0 &&
	      ncf_backend_train_step(&cpu, 0, 0, B, &lc) == 0;
	ok &= ncf_backend_get_state(&ref, pr, mr, NULL) == 0 &&
	      ncf_backend_get_state(&cpu, pc, mc, NULL) == 0;
	/* (a) the fast step is Adam (ncf_adam_update) on its own gradient, bit
	 * for bit */
	struct ncf_adam_k ak;
	ncf_adam_constants(&hp, 1, &ak);
	int exact = 1;
	for (size_t j = 0; j < T; j++) {
		float p = p0[j], m = 0, v = 0;
		ncf_adam_update(&p, &m, &v, gc[j], &ak);
		exact &= memcmp(&p, &pc[j], sizeof p) == 0;
	}
	/* (b) against the reference's step: both are lr * f(g), f(g) = g / (|g|
	 * + eps) (step 1), so they differ by lr |f(gc) - f(gr)| <= lr |gc - gr|
	 * eps / (m + eps)^2, m the smaller |g| (0 when the signs differ), plus
	 * the rounding of p - step */
	int bad = 0;
	for (size_t j = 0; j < T; j++) {
		double a = fabs((double)gc[j]), b = fabs((double)gr[j]);
		double m = (gc[j] < 0) != (gr[j] < 0) ? 0 : fmin(a, b), e = ak.eps;
		double tol = 1e-6 + 1e-5 * fabs(pr[j]) +
			     ak.lr * fabs((double)gc[j] - gr[j]) * e / ((m + e) * (m + e));
		double d = fabs((double)pc[j] - pr[j]);
		if (!(d <= tol) && bad++ < 5)
			tap_diag("params after 1 step[%zu]: %.9g, reference %.9g (gradients %.9g, %.9g)",
				 j, pc[j], pr[j], gc[j], gr[j]);
		worst = fmax(worst, d / tol);
	}
	ok &= exact && bad == 0;
	ok &= close_tensors(&ref, mc, mr, 1e-5, 1e-4, "Adam m", &wm);
	tap_ok(ok && ref.step == 1 && cpu.step == 1,
	       "%s: one Adam step: exact on the fast gradient, the reference's within the bound its "
	       "gradient implies (worst %.3g of it), Adam m (worst %.3g)", label, worst, wm);
	if (sanitizer()) { /* slow there, and the same numbers as without */
		tap_skip(1, "five steps: not under the sanitizers");
		goto out;
	}
	ok = 1;
	pos = B;
	for (int k = 0; k < 4; k++) { /* four more, into the next epoch */
		uint32_t e = pos >= S ? 1 : 0;
		uint64_t f = pos % S, nb = B < S - f ? B : S - f;
		ok &= ncf_backend_train_step(&ref, e, f, nb, &lr) == 0 &&
		      ncf_backend_train_step(&cpu, e, f, nb, &lc) == 0;
		ok &= tap_close(lc, lr, 0, 1e-5, "loss sum");
		pos += nb;
	}
	ok &= ncf_backend_get_state(&ref, pr, NULL, NULL) == 0 &&
	      ncf_backend_get_state(&cpu, pc, NULL, NULL) == 0;
	worst = 0;
	ok &= close_all(pc, pr, T, 1e-4, 0, "params after 5 steps", &worst);
	tap_ok(ok, "%s: parameters after five steps within 1e-4 (worst %.3g of the bound)", label,
	       worst);
out:
	free(pr), free(pc), free(p0), free(gr), free(gc), free(mr), free(mc);
	ncf_backend_close(&ref), ncf_backend_close(&cpu);
}

static void test_scoring(const struct ncf_shape *s, const char *label)
{
	struct ncf_hparams hp = hparams(0.5f);
	struct ncf_dist one = {.rank = 0, .size = 1, .local_size = 1};
	struct ncf_backend ref, cpu;
	if (open_be(&ref, &ncf_backend_reference, s, &hp, &one) ||
	    open_be(&cpu, &ncf_backend_cpu, s, &hp, &one)) {
		tap_ok(0, "%s: open the backends", label);
		return;
	}
	/* a step first (the fast one), so that the parameters are not the
	 * initial ones; both score the same parameters */
	double l;
	int ok = ncf_backend_train_step(&cpu, 0, 0, hp.batch, &l) == 0;
	float *p = malloc(ref.layout.total * sizeof *p);
	ok &= ncf_backend_get_state(&cpu, p, NULL, NULL) == 0 &&
	      ncf_backend_set_state(&ref, p, NULL, NULL) == 0;
	free(p);
	size_t n = 6000;
	uint32_t *us = malloc(n * sizeof *us), *is = malloc(n * sizeof *is);
	float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
	for (size_t j = 0; j < n; j++)
		us[j] = rnd(5, j, U), is[j] = rnd(6, j, I);
	double worst = 0, ws = 0;
	ok &= ncf_backend_logits(&ref, us, is, n, a) == 0 &&
	      ncf_backend_logits(&cpu, us, is, n, b) == 0 &&
	      close_all(b, a, n, 1e-6, 1e-5, "logit", &worst);
	ok &= ncf_backend_score(&ref, us, is, n, a) == 0 &&
	      ncf_backend_score(&cpu, us, is, n, b) == 0 &&
	      close_all(b, a, n, 1e-6, 1e-5, "score", &ws);
	tap_ok(ok, "%s: logits and scores of %zu pairs equal the reference's (worst %.3g, %.3g of "
	       "the bound)", label, n, worst, ws);
	uint32_t rr[U], rc[U];
	ok = ncf_backend_eval_ranks(&ref, 0, U, rr) == 0 &&
	     ncf_backend_eval_ranks(&cpu, 0, U, rc) == 0;
	int diff = 0;
	for (uint32_t u = 0; u < U; u++)
		if (rr[u] != rc[u]) {
			tap_diag("%s: user %u: rank %u, reference %u (a near tie?)", label, u, rc[u],
				 rr[u]);
			diff++;
		}
	tap_ok(ok && diff <= 1, "%s: evaluation ranks of all %u users equal (%d differ)", label, U,
	       diff);
	free(us), free(is), free(a), free(b);
	ncf_backend_close(&ref), ncf_backend_close(&cpu);
}

/* Rank 1 of 2: both take the same slice of the global batch. */
static void test_slice(const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(0.5f);
	struct ncf_dist r1 = {.rank = 1, .size = 2, .local_rank = 1, .local_size = 2};
	struct ncf_backend ref, cpu;
	if (open_be(&ref, &ncf_backend_reference, s, &hp, &r1) ||
	    open_be(&cpu, &ncf_backend_cpu, s, &hp, &r1)) {
		tap_ok(0, "rank 1 of 2: open the backends");
		return;
	}
	size_t T = ref.layout.total;
	float *gr = malloc(T * sizeof *gr), *gc = malloc(T * sizeof *gc);
	double lr, lc, worst = 0;
	int ok = ncf_backend_grad(&ref, 0, 333, 8333, gr, &lr) == 0 &&
		 ncf_backend_grad(&cpu, 0, 333, 8333, gc, &lc) == 0;
	ok &= close_tensors(&ref, gc, gr, 1e-5, 1e-4, "rank 1 grad", &worst) &&
	      tap_close(lc, lr, 0, 1e-6, "loss sum");
	tap_ok(ok, "rank 1 of 2: the gradient of its slice equals the reference's (worst %.3g of "
	       "the bound)", worst);
	free(gr), free(gc);
	ncf_backend_close(&ref), ncf_backend_close(&cpu);
}

int main(void)
{
	make_data();
	const struct ncf_shape s8 = {U, I, 8, 4, {32, 24, 16, 8}};
	const struct ncf_shape s5 = {U, I, 6, 4, {14, 13, 10, 5}};
	const struct ncf_shape s2 = {U, I, 8, 2, {16, 8}};
	test_gradient(&s8, 0.5f, "widths of 8");
	test_gradient(&s5, 0.5f, "odd widths");
	test_gradient(&s2, 0.0f, "one hidden layer, no dropout");
	test_steps(&s8, 0.5f, "widths of 8");
	test_steps(&s5, 0.5f, "odd widths");
	test_scoring(&s8, "widths of 8");
	test_scoring(&s5, "odd widths");
	test_slice(&s8);
	free(items), free(entry_user), free(counted);
	return tap_done();
}
