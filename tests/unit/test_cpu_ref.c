/*
 * test_cpu_ref - the fast cpu backend (kernels/cpu/: factorized first
 * layer, slots, chunks in lanes, tiled OpenBLAS sgemm, AVX2 Philox, FMA
 * register tiles for scoring) against the plain reference
 * (kernels/cpu/reference.c, the model as DESIGN.md section 3 writes it), on
 * the same data, parameters and batches: the gradient and loss of a batch,
 * the parameters and Adam moments after one and after five steps, logits,
 * scores and evaluation ranks, a rank's slice of a two-rank batch; for
 * widths that are multiples of 8 (vector paths), odd widths (scalar paths)
 * and one hidden layer without dropout.  Then what both answer the tools
 * instead of their device (backend.h), and the cpu's precisions.  Batches of 4200 are three chunks
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
#include "helpers.h"
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
/* explicit training negatives (helpers.h), given to the backends when
 * with_explicit is set */
static int64_t neg_offsets[U + 1];
static uint32_t *neg_items;
static uint64_t E;
static int with_explicit;

static uint32_t rnd(uint32_t a, uint64_t idx, uint32_t n)
{
	return helper_rnd(17, a, idx, n);
}

/* The shared random rows (helpers.h), a test item off each user's row and N
 * negatives each. */
static void make_data(void)
{
	helper_make_rows(17, U, I, offsets, &items, &entry_user);
	for (uint32_t u = 0; u < U; u++) {
		const uint32_t *row = items + offsets[u];
		int64_t len = offsets[u + 1] - offsets[u];
		uint32_t t = rnd(3, u, I);
		while (ncf_row_has(row, len, t))
			t = (t + 1) % I;
		test_items[u] = t;
		for (uint32_t q = 0; q < N; q++)
			neg[u * N + q] = rnd(4, (uint64_t)u * N + q, I);
	}
	counted = ncf_eval_mask(test_items, neg, U, N, I);
	E = helper_make_explicit(17, U, I, 12, neg_offsets, &neg_items);
}

static uint64_t epoch_samples(const struct ncf_hparams *hp)
{
	return ncf_epoch_samples((uint64_t)offsets[U], hp->negatives, with_explicit ? E : 0);
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
	if (with_explicit) {
		td.train_negatives = E;
		td.neg_offsets = neg_offsets;
		td.neg_items = neg_items;
	}
	struct ncf_eval_data ed = {.users = U, .negatives = N, .test_items = test_items,
				   .neg = neg, .counted = counted};
	int rc = ncf_backend_set_state(be, p, NULL, NULL) || ncf_backend_set_train_data(be, &td) ||
		 ncf_backend_set_eval_data(be, &ed);
	free(p);
	return rc ? -1 : 0;
}

/* Per tensor of be's layout: |d| <= rel_max max|want| + rtol |want|. */
static int close_tensors(const struct ncf_backend *be, const float *got, const float *want,
			 double rel_max, double rtol, const char *what, struct helper_err *e)
{
	return helper_close_tensors(&be->layout, &be->shape, got, want, rel_max, rtol, what, e);
}

/* ---- the cases ---------------------------------------------------------- */

/* The reference and the fast backend on the same data and parameters, as
 * rank d of its ranks; 0, or -1 after a failed check. */
static int open_pair(struct ncf_backend *ref, struct ncf_backend *cpu, const struct ncf_shape *s,
		     const struct ncf_hparams *hp, struct ncf_dist *d)
{
	int rr = open_be(ref, &ncf_backend_reference, s, hp, d);
	int rc = open_be(cpu, &ncf_backend_cpu, s, hp, d);
	if (!tap_ok(rr == 0 && rc == 0, "open the backends")) {
		if (rr == 0)
			ncf_backend_close(ref);
		if (rc == 0)
			ncf_backend_close(cpu);
		return -1;
	}
	return 0;
}

static void close_pair(struct ncf_backend *ref, struct ncf_backend *cpu)
{
	ncf_backend_close(ref);
	ncf_backend_close(cpu);
}

static struct ncf_dist one = {.rank = 0, .size = 1, .local_size = 1};

static void t_gradient(const struct ncf_shape *s, float dropout)
{
	struct ncf_hparams hp = hparams(dropout);
	struct ncf_backend ref, cpu;
	if (open_pair(&ref, &cpu, s, &hp, &one))
		return;
	size_t T = ref.layout.total;
	float *gr = malloc(T * sizeof *gr), *gc = malloc(T * sizeof *gc);
	uint64_t S = epoch_samples(&hp);
	struct helper_err worst = {0};
	/* three chunks of 2048 (the last short), and a short last batch */
	const uint64_t first[2] = {1000, S - 300}, n[2] = {4200, 300};
	for (int k = 0; k < 2; k++) {
		double lr, lc;
		int ok = ncf_backend_grad(&ref, 1, first[k], n[k], gr, &lr) == 0 &&
			 ncf_backend_grad(&cpu, 1, first[k], n[k], gc, &lc) == 0;
		tap_ok(ok, "batch %d: both gradients computed", k);
		tap_ok(ok && close_tensors(&ref, gc, gr, 1e-5, 1e-4, "grad", &worst),
		       "batch %d: gradients", k);
		tap_ok(ok && tap_close(lc, lr, 0, 1e-6, "loss sum"), "batch %d: loss sums", k);
	}
	tap_diag("gradients: worst %.3g of the bound", worst.tol);
	free(gr), free(gc);
	close_pair(&ref, &cpu);
}

/* The fast step is Adam (ncf_adam_update) on its own gradient gc from the
 * parameters p0, bit for bit. */
static int step_is_adam(const float *p0, const float *gc, const float *pc, size_t T,
			const struct ncf_adam_k *ak)
{
	int exact = 1;
	for (size_t j = 0; j < T; j++) {
		float p = p0[j], m = 0, v = 0;
		ncf_adam_update(&p, &m, &v, gc[j], ak);
		exact &= memcmp(&p, &pc[j], sizeof p) == 0;
	}
	return exact;
}

static void t_one_step(const struct ncf_shape *s, float dropout)
{
	struct ncf_hparams hp = hparams(dropout);
	struct ncf_backend ref, cpu;
	if (open_pair(&ref, &cpu, s, &hp, &one))
		return;
	size_t T = ref.layout.total;
	float *pr = malloc(T * sizeof *pr), *pc = malloc(T * sizeof *pc);
	float *p0 = malloc(T * sizeof *p0), *gr = malloc(T * sizeof *gr);
	float *gc = malloc(T * sizeof *gc), *mr = malloc(T * sizeof *mr), *mc = malloc(T * sizeof *mc);
	uint64_t B = hp.batch;
	double lr, lc;
	struct helper_err worst = {0}, wm = {0};
	int ok = ncf_backend_get_state(&cpu, p0, NULL, NULL) == 0 &&
		 ncf_backend_grad(&ref, 0, 0, B, gr, &lr) == 0 &&
		 ncf_backend_grad(&cpu, 0, 0, B, gc, &lc) == 0;
	ok &= ncf_backend_train_step(&ref, 0, 0, B, &lr) == 0 &&
	      ncf_backend_train_step(&cpu, 0, 0, B, &lc) == 0;
	ok &= ncf_backend_get_state(&ref, pr, mr, NULL) == 0 &&
	      ncf_backend_get_state(&cpu, pc, mc, NULL) == 0;
	tap_ok(ok && ref.step == 1 && cpu.step == 1, "one step each");
	struct ncf_adam_k ak;
	ncf_adam_constants(&hp, 1, &ak);
	tap_ok(ok && step_is_adam(p0, gc, pc, T, &ak), "exact on the fast gradient");
	tap_ok(ok && helper_adam_step_close(pc, pr, gc, gr, T, ak.lr, ak.eps, "params after 1 step",
					    &worst),
	       "the reference's within the bound its gradient implies (worst %.3g of it)",
	       worst.tol);
	tap_ok(ok && close_tensors(&ref, mc, mr, 1e-5, 1e-4, "Adam m", &wm), "Adam m (worst %.3g)",
	       wm.tol);
	tap_diag("one step: worst %.3g of the bound, Adam m %.3g", worst.tol, wm.tol);
	free(pr), free(pc), free(p0), free(gr), free(gc), free(mr), free(mc);
	close_pair(&ref, &cpu);
}

static void t_five_steps(const struct ncf_shape *s, float dropout)
{
	if (helper_sanitizer()) { /* slow there, and the same numbers as without */
		tap_skip_case("five steps: not under the sanitizers");
		return;
	}
	struct ncf_hparams hp = hparams(dropout);
	struct ncf_backend ref, cpu;
	if (open_pair(&ref, &cpu, s, &hp, &one))
		return;
	size_t T = ref.layout.total;
	float *pr = malloc(T * sizeof *pr), *pc = malloc(T * sizeof *pc);
	uint64_t S = epoch_samples(&hp), B = hp.batch, pos = 0;
	double lr, lc;
	struct helper_err worst = {0};
	for (int k = 0; k < 5; k++) { /* into the next epoch */
		uint32_t e = pos >= S ? 1 : 0;
		uint64_t f = pos % S, nb = B < S - f ? B : S - f;
		int ok = ncf_backend_train_step(&ref, e, f, nb, &lr) == 0 &&
			 ncf_backend_train_step(&cpu, e, f, nb, &lc) == 0;
		tap_ok(ok, "step %d taken", k + 1);
		tap_ok(ok && tap_close(lc, lr, 0, 1e-5, "loss sum"), "step %d: loss sums", k + 1);
		pos += nb;
	}
	int ok = ncf_backend_get_state(&ref, pr, NULL, NULL) == 0 &&
		 ncf_backend_get_state(&cpu, pc, NULL, NULL) == 0;
	tap_ok(ok && helper_close_all(pc, pr, T, 1e-4, 0, "params after 5 steps", &worst),
	       "parameters within 1e-4 (worst %.3g of the bound)", worst.tol);
	tap_diag("five steps: worst %.3g of the bound", worst.tol);
	free(pr), free(pc);
	close_pair(&ref, &cpu);
}

/* Both backends after a step of the fast one, so that the parameters are
 * not the initial ones; both score the same parameters. */
static int open_stepped(struct ncf_backend *ref, struct ncf_backend *cpu,
			const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(0.5f);
	if (open_pair(ref, cpu, s, &hp, &one))
		return -1;
	double l;
	float *p = malloc(ref->layout.total * sizeof *p);
	int ok = ncf_backend_train_step(cpu, 0, 0, hp.batch, &l) == 0 &&
		 ncf_backend_get_state(cpu, p, NULL, NULL) == 0 &&
		 ncf_backend_set_state(ref, p, NULL, NULL) == 0;
	free(p);
	tap_ok(ok, "a step, its parameters given to the reference");
	return 0;
}

static void t_scores(const struct ncf_shape *s)
{
	struct ncf_backend ref, cpu;
	if (open_stepped(&ref, &cpu, s))
		return;
	size_t n = 6000;
	uint32_t *us = malloc(n * sizeof *us), *is = malloc(n * sizeof *is);
	float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
	for (size_t j = 0; j < n; j++)
		us[j] = rnd(5, j, U), is[j] = rnd(6, j, I);
	struct helper_err worst = {0}, ws = {0};
	tap_ok(ncf_backend_logits(&ref, us, is, n, a) == 0 &&
		       ncf_backend_logits(&cpu, us, is, n, b) == 0 &&
		       helper_close_all(b, a, n, 1e-6, 1e-5, "logit", &worst),
	       "logits of %zu pairs (worst %.3g of the bound)", n, worst.tol);
	tap_ok(ncf_backend_score(&ref, us, is, n, a) == 0 &&
		       ncf_backend_score(&cpu, us, is, n, b) == 0 &&
		       helper_close_all(b, a, n, 1e-6, 1e-5, "score", &ws),
	       "scores of %zu pairs (worst %.3g of the bound)", n, ws.tol);
	tap_diag("logits: worst %.3g of the bound, scores %.3g", worst.tol, ws.tol);
	free(us), free(is), free(a), free(b);
	close_pair(&ref, &cpu);
}

static void t_ranks(const struct ncf_shape *s)
{
	struct ncf_backend ref, cpu;
	if (open_stepped(&ref, &cpu, s))
		return;
	uint32_t rr[U], rc[U];
	int ok = ncf_backend_eval_ranks(&ref, 0, U, rr) == 0 &&
		 ncf_backend_eval_ranks(&cpu, 0, U, rc) == 0;
	int diff = 0;
	for (uint32_t u = 0; ok && u < U; u++)
		if (rr[u] != rc[u]) {
			tap_diag("user %u: rank %u, reference %u (a near tie?)", u, rc[u], rr[u]);
			diff++;
		}
	tap_ok(ok && diff <= 1, "%d of %u users' ranks differ", diff, U);
	close_pair(&ref, &cpu);
}

/* Rank 1 of 2: both take the same slice of the global batch. */
static void t_slice(const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(0.5f);
	struct ncf_dist r1 = {.rank = 1, .size = 2, .local_rank = 1, .local_size = 2};
	struct ncf_backend ref, cpu;
	if (open_pair(&ref, &cpu, s, &hp, &r1))
		return;
	size_t T = ref.layout.total;
	float *gr = malloc(T * sizeof *gr), *gc = malloc(T * sizeof *gc);
	double lr, lc;
	struct helper_err worst = {0};
	int ok = ncf_backend_grad(&ref, 0, 333, 8333, gr, &lr) == 0 &&
		 ncf_backend_grad(&cpu, 0, 333, 8333, gc, &lc) == 0;
	tap_ok(ok && close_tensors(&ref, gc, gr, 1e-5, 1e-4, "rank 1 grad", &worst),
	       "gradients (worst %.3g of the bound)", worst.tol);
	tap_ok(ok && tap_close(lc, lr, 0, 1e-6, "loss sum"), "loss sums");
	tap_diag("rank 1: worst %.3g of the bound", worst.tol);
	free(gr), free(gc);
	close_pair(&ref, &cpu);
}

/* Explicit negatives (E of them, label 0 at the epoch's last E samples),
 * k drawn negatives per positive beside them: the gradient of batches
 * that reach the epoch's end equals the reference's, differs from the
 * gradient without them, and a position past S is refused. */
static void t_explicit(const struct ncf_shape *s, uint32_t k)
{
	struct ncf_hparams hp = hparams(0.5f);
	hp.negatives = k;
	struct ncf_backend ref, cpu, plain;
	with_explicit = 0;
	int rp = open_be(&plain, &ncf_backend_cpu, s, &hp, &one);
	with_explicit = 1;
	if (!tap_ok(rp == 0, "open the cpu backend without them") ||
	    open_pair(&ref, &cpu, s, &hp, &one)) {
		with_explicit = 0;
		return;
	}
	size_t T = ref.layout.total;
	float *gr = malloc(T * sizeof *gr), *gc = malloc(T * sizeof *gc), *gp = malloc(T * sizeof *gp);
	uint64_t S = epoch_samples(&hp), D = S - E;
	struct helper_err worst = {0};
	tap_ok(E > 0 && S == (uint64_t)offsets[U] * (1 + k) + E, "S = P (1 + %u) + E = %llu", k,
	       (unsigned long long)S);
	const uint64_t first[2] = {0, S - 4200};
	for (int b = 0; b < 2; b++) {
		double lr, lc;
		int ok = ncf_backend_grad(&ref, 2, first[b], 4200, gr, &lr) == 0 &&
			 ncf_backend_grad(&cpu, 2, first[b], 4200, gc, &lc) == 0;
		tap_ok(ok && close_tensors(&ref, gc, gr, 1e-5, 1e-4, "grad", &worst),
		       "positions %llu..%llu: gradients", (unsigned long long)first[b],
		       (unsigned long long)first[b] + 4200);
		tap_ok(ok && tap_close(lc, lr, 0, 1e-6, "loss sum"), "... and loss sums");
	}
	double lp, lc;
	helper_capture_begin();
	int past_plain = ncf_backend_grad(&plain, 2, D - 4200 + 1, 4200, gp, &lp);
	int past = ncf_backend_grad(&cpu, 2, S - 4200 + 1, 4200, gc, &lc);
	free(helper_capture_end());
	tap_ok(past_plain != 0 && past != 0, "a batch past S refused (with and without them)");
	int same = ncf_backend_grad(&plain, 2, 0, 4200, gp, &lp) == 0 &&
		   ncf_backend_grad(&cpu, 2, 0, 4200, gc, &lc) == 0 &&
		   !memcmp(gp, gc, T * sizeof *gp);
	tap_ok(!same, "the gradient of positions 0..4200 differs without them");
	tap_diag("explicit negatives, k %u: worst %.3g of the bound", k, worst.tol);
	free(gr), free(gc), free(gp);
	close_pair(&ref, &cpu);
	ncf_backend_close(&plain);
	with_explicit = 0;
}

/* What the tools ask of a backend instead of naming its device, and the
 * cpu's precisions (cpu.c, through ncf_backend_open with --device cpu):
 * the default and fp32 compute in fp32, a GPU's precision is refused. */
static void t_answers(const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(0.5f);
	struct ncf_backend be, ref;
	int rc = ncf_backend_open(&be, NCF_DEVICE_CPU, s, &hp, NCF_PRECISION_DEFAULT, 1, &one);
	tap_ok(rc == 0 && !ncf_backend_keeps_loss(&be) && !ncf_backend_pins_host(&be) &&
		       ncf_backend_on_host(&be),
	       "cpu: the loss comes back with each step, no pinned memory, computes on the host");
	tap_ok(rc == 0 && be.precision == NCF_PRECISION_FP32, "cpu: the default computes in fp32");
	if (rc == 0)
		ncf_backend_close(&be);
	rc = ncf_backend_open_impl(&ref, &ncf_backend_reference, s, &hp, NCF_PRECISION_BF16, 1,
				   &one);
	tap_ok(rc == 0 && ref.precision == NCF_PRECISION_FP32 && ncf_backend_on_host(&ref),
	       "reference: fp32 whatever is asked, on the host");
	if (rc == 0)
		ncf_backend_close(&ref);
	static const enum ncf_precision gpu[2] = {NCF_PRECISION_TF32, NCF_PRECISION_FP16};
	for (int k = 0; k < 2; k++) {
		fprintf(stderr, "# expected message follows:\n");
		rc = ncf_backend_open(&be, NCF_DEVICE_CPU, s, &hp, gpu[k], 1, &one);
		tap_ok(rc == -3, "--device cpu --precision %s: unavailable (-3), not %d",
		       ncf_precision_name(gpu[k]), rc);
		if (rc == 0)
			ncf_backend_close(&be);
	}
}

int main(void)
{
	make_data();
	const struct ncf_shape s8 = {U, I, 8, 4, {32, 24, 16, 8}};
	const struct ncf_shape s5 = {U, I, 6, 4, {14, 13, 10, 5}};
	const struct ncf_shape s2 = {U, I, 8, 2, {16, 8}};
	static const char *const what = "gradients and losses of two batches equal the reference's";
	TEST(t_gradient(&s8, 0.5f), "widths of 8: %s", what);
	TEST(t_gradient(&s5, 0.5f), "odd widths: %s", what);
	TEST(t_gradient(&s2, 0.0f), "one hidden layer, no dropout: %s", what);
	TEST(t_one_step(&s8, 0.5f), "widths of 8: one Adam step: exact on the fast gradient, the "
				    "reference's within the bound its gradient implies, Adam m");
	TEST(t_five_steps(&s8, 0.5f), "widths of 8: parameters after five steps within 1e-4");
	TEST(t_one_step(&s5, 0.5f), "odd widths: one Adam step: exact on the fast gradient, the "
				    "reference's within the bound its gradient implies, Adam m");
	TEST(t_five_steps(&s5, 0.5f), "odd widths: parameters after five steps within 1e-4");
	TEST(t_scores(&s8), "widths of 8: logits and scores equal the reference's");
	TEST(t_ranks(&s8), "widths of 8: evaluation ranks of all %u users equal", U);
	TEST(t_scores(&s5), "odd widths: logits and scores equal the reference's");
	TEST(t_ranks(&s5), "odd widths: evaluation ranks of all %u users equal", U);
	TEST(t_slice(&s8), "rank 1 of 2: the gradient of its slice equals the reference's");
	TEST(t_answers(&s8), "the backend's answers to the tools, and the cpu's precisions");
	TEST(t_explicit(&s8, 4), "explicit negatives beside 4 drawn per positive: the gradient "
				 "equals the reference's");
	TEST(t_explicit(&s5, 0), "explicit negatives alone (-n 0), odd widths: the gradient "
				 "equals the reference's");
	free(items), free(entry_user), free(counted), free(neg_items);
	return tap_done();
}
