/*
 * gpu_parity - the cuda backend on a real GPU against the cpu backend (the
 * specification), on a cache made by ncf-prep, with NVIDIA's model shape
 * (64 factors, layers 256,256,128,64).  TAP on stdout; "1..0 # SKIP" without
 * a usable GPU.  Run by tests/gpu/parity.t (and, with --smoke, under
 * compute-sanitizer by tests/gpu/sanitizer.t).
 *
 *   gpu_parity CACHE [--smoke]
 *
 * Checks, and how close is close (cuBLAS pinned to fp32 math, no TF32, for
 * every comparison with the cpu backend):
 *  - the sample stream of 2^20 positions of two epochs, with and without
 *    --true-negatives, and with explicit negatives added to the cache in
 *    memory: bit for bit (integer formulas of ncf_hd.h, compiled by nvcc
 *    for the device); with those, the gradient of the epoch's last batch
 *    as below;
 *  - bias + ReLU + dropout, widths 256, 128, 64, 13: bit for bit (the same
 *    Philox bits; the kernels are built with -fmad=false);
 *  - the dense Adam pass: bit for bit against ncf_adam_update (IEEE sqrt
 *    and division on the device, no FMA contraction);
 *  - scores (sigmoid of the logits) of 2^18 random pairs: relative error
 *    <= 1e-5, logits |d| <= 1e-5 (1 + |x|).  cuBLAS and OpenBLAS add the
 *    K <= 256 products of each dot product in different orders (a typical
 *    relative difference of u sqrt(K) / 2 ~ 5e-7 per layer, u = 2^-24, a
 *    few times that at worst over four layers), and the device's expf
 *    differs from glibc's by an ulp or two;
 *  - evaluation: HR@10 and NDCG@10 within 1e-3 of the cpu backend's, at most
 *    0.2% of the ranks different (U / 500, 12 of ml-1m's 6040 users).  A
 *    rank changes only where a counted negative's logit is within the two
 *    backends' rounding of the test item's.  Measured under the emulation
 *    (tests/unit/test_cuda_emu.cc's build, NVIDIA's shape, synthetic ml-1m,
 *    these initial weights): the logits are 0.09 +- 0.01 (rms 0.0896, max
 *    0.102), the cpu backend's float rounding is rms 4.6e-9 and at most
 *    2.1e-8 against the same forward pass in double, the emulated GPU
 *    (other summation orders, OpenBLAS) differs from the cpu by at most
 *    1.5e-8 and changed no rank; 20 users have a counted negative within
 *    1e-7 of the test item, 189 within 1e-6.  A GPU whose rounding is
 *    independent of the cpu's and as large changes, in expectation, 1.0
 *    rank (a negative crosses with probability Phi(-gap / 2 sigma), summed
 *    over counted negatives); 3x as large 2.4, 10x 7.3.  So 12 holds up to
 *    about ten times the cpu's rounding (logit noise ~5e-8, far inside the
 *    logit tolerance of 1e-5 (1 + |x|)); more changed ranks than that means
 *    more than rounding.  (After training,
 *    logits spread to rms ~2 and near ties become rare: 15 steps of 65536
 *    leave an expected 0.3 changed ranks at 10x.)  bf16 and fp16 are not
 *    ranked against the cpu: their unit roundoff (2^-8, 2^-11) times logits
 *    of 0.09 is 3.5e-4 and 4.4e-5, where 5402 and ~1500 of the 6040 users
 *    have a near tie;
 *  - one step's gradient per tensor: |d| <= 1e-4 max|g| + 1e-4 |g| (batch
 *    sums of 65536 terms in other orders); the step itself is Adam on that
 *    gradient bit for bit; the parameters after it, per tensor: max |d| <=
 *    1e-4 max |p| where |g| >= 100 eps (the first Adam step moves each
 *    parameter by lr g / (|g| + eps), nearly lr sign(g) there), at most
 *    2 lr elsewhere (see check_step_params);
 *  - the GPU is deterministic: the same gradient twice, bit for bit, in fp32
 *    and bf16 (no float atomics, fixed reduction orders);
 *  - tf32, bf16, fp16: the gradient within 5%, 10%, 5% (relative L2 norm per
 *    tensor) of the fp32 one (16-bit activations switch the ReLU of units
 *    near 0, see test_cuda_emu.cc), three training steps with finite loss.
 *  - scoring with the pairs kept on the device (the benchmark's resident
 *    path) against the host path: within the logits' tolerance (cuBLAS may
 *    pick other kernels for other chunk sizes), all probabilities;
 *  - scoring graphs after the tables change: new parameters (set_state) and
 *    a training step under the graphs captured before, scores against the
 *    cpu backend with the same parameters (relative 1e-5, as above), and no
 *    new capture;
 *  - fp16 overflow on the device: a loss scale of 2^24 B (dlogit w
 *    overflows fp16) and a NaN made in the forward pass (inf - inf in the first
 *    layer, test_cuda_emu.cc t_fp16_nan) both skip the step and halve
 *    the scale;
 *  - (not with --smoke) one whole epoch in fp32: the mean loss within 3e-3
 *    (relative) of the cpu backend's, HR@10 after it within three binomial
 *    sigmas of two independent models' difference, 3 sqrt(2 p (1 - p) / U)
 *    (~0.027 at p = 0.6 on ml-1m).  Why so loose: Adam's first steps are
 *    nearly sign descent, so parameters whose gradient is near zero take
 *    lr-sized steps of either sign on a rounding difference, and the runs
 *    diverge chaotically after a dozen steps; measured under the emulation
 *    on synthetic ml-latest-small (NVIDIA's shape, batch 8192, 61 steps):
 *    the first 12 steps' losses within 3e-9, later single steps up to
 *    3.5e-2 apart, the epoch means 6.1e-4 apart (then 1.9e-4, 6.6e-5), HR
 *    equal after the first epoch; and this test itself on the emulation with
 *    synthetic ml-1m (76 steps of 65536): mean loss 0.470370 against
 *    0.470586 (4.6e-4), HR@10 0.3866 against 0.3795.
 * --smoke: small batches, one of each operation, for compute-sanitizer.
 * --fault: one kernel that faults (tests/gpu/faults.t checks the message);
 *    the device is lost afterwards, so it is a process of its own.
 *
 * Built a second time against the CPU emulation of the cuda backend
 * (build/tests/gpu_parity_emu, -DNCF_CUDA_EMULATE), which make check runs
 * with --smoke on tiny data (tests/unit/gpu_parity_emu.t): the checks
 * themselves are then checked without a GPU (the emulation's rounding is
 * the cpu's, so they pass with room to spare; the sort is its CPU twin).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "cache.h"
#include "err.h"
#include "evaluate.h"
#include "metrics.h"
#include "model.h"
#include "ncf_hd.h"
#include "../unit/helpers.h"
#include "../unit/tap.h"
#if defined(NCF_HAVE_CUDA) || defined(NCF_CUDA_EMULATE)
#include "cuda/test_hooks.h"
#endif

#if !defined(NCF_HAVE_CUDA) && !defined(NCF_CUDA_EMULATE)
int main(void)
{
	tap_skip_all("not built with CUDA");
}
#else

static struct ncf_dist one = {0, 1, 0, 1, 0, 0.0};
static struct ncf_cache cache;
static struct ncf_shape shape;
static int smoke;

static uint32_t rnd(uint32_t a, uint64_t idx, uint32_t n)
{
	return helper_rnd(99, a, idx, n);
}

static struct ncf_hparams hparams(uint64_t batch, int true_neg)
{
	struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f,
				 .dropout = 0.5f, .negatives = 4, .true_neg = (uint32_t)true_neg,
				 .batch = batch, .seed = 1};
	return hp;
}

/* Open a backend on the cache with NVIDIA's initial parameters (seed 1). */
static int open_be(struct ncf_backend *be, enum ncf_device dev, enum ncf_precision p,
		   const struct ncf_hparams *hp, uint8_t **mask)
{
#ifdef NCF_CUDA_EMULATE
	/* built against the emulation (gpu_parity_emu): its table for cuda */
	if (dev == NCF_DEVICE_CUDA) {
		if (ncf_backend_open_impl(be, &ncf_backend_cuda, &shape, hp, p, 0, &one) != 0)
			return -1;
	} else
#endif
	if (ncf_backend_open(be, dev, &shape, hp, p, 0, &one) != 0)
		return -1;
	float *params = ncf_xmalloc(be->layout.total * sizeof(float));
	ncf_model_init(&shape, &be->layout, 1, params);
	int rc = ncf_backend_set_state(be, params, NULL, NULL) ||
		 ncf_backend_load_cache(be, &cache, mask, 1);
	free(params);
	return rc ? -1 : 0;
}

/* Per tensor of be's layout (helpers.h): |d| <= rel_max max|want| + rtol |want|. */
static int close_tensors(const struct ncf_backend *be, const float *got, const float *want,
			 double rel_max, double rtol, const char *what)
{
	return helper_close_tensors(&be->layout, &be->shape, got, want, rel_max, rtol, what, NULL);
}

/* Relative L2 error per tensor <= tol. */
static int l2_tensors(const struct ncf_backend *be, const float *got, const float *want,
		      double tol, const char *what)
{
	return helper_l2_tensors(&be->layout, &be->shape, got, want, tol, what);
}

/* ---- the sample stream and the operations ------------------------------- */

static void t_samples(int tn)
{
	uint64_t P = (uint64_t)cache.train_positives;
	uint64_t S = ncf_epoch_samples(P, 4, cache.train_negatives);
	uint64_t n = smoke ? 4096 : (uint64_t)1 << 20;
	if (n > S)
		n = S;
	struct ncf_hparams hp = hparams(65536, tn);
	struct ncf_backend be;
	uint8_t *mask = NULL;
	if (!tap_ok(!open_be(&be, NCF_DEVICE_CUDA, NCF_PRECISION_FP32, &hp, &mask),
		    "open the cuda backend"))
		return;
	uint32_t *u = ncf_xmalloc(n * 4), *it = ncf_xmalloc(n * 4);
	uint8_t *lab = ncf_xmalloc(n);
	for (uint32_t e = 0; e < 2; e++) {
		uint64_t first = e ? S - n : (S - n) / 2;
		int ok = ncf_cuda_debug_samples(&be, e, first, n, u, it, lab) == 0;
		ncf_stream st = {.perm = ncf_perm_make(S, hp.seed, e), .seed = hp.seed, .epoch = e,
				 .items = cache.items, .positives = (int64_t)P, .true_neg = tn,
				 .entry_user = cache.entry_user, .offsets = cache.offsets,
				 .csr_items = cache.train_items,
				 .train_negatives = cache.train_negatives, .users = cache.users,
				 .neg_offsets = cache.neg_offsets, .neg_items = cache.neg_items};
		int bad = 0;
#pragma omp parallel for reduction(+ : bad)
		for (int64_t j = 0; j < (int64_t)n; j++) {
			uint32_t wu, wi;
			int y = ncf_sample_at(&st, first + (uint64_t)j, &wu, &wi);
			bad += wu != u[j] || wi != it[j] || y != lab[j];
		}
		tap_ok(ok && bad == 0, "epoch %u: %d samples differ", e, bad);
	}
	free(u), free(it), free(lab);
	ncf_backend_close(&be);
	free(mask);
}

/* Rows of width H of bias (zero) + ReLU + dropout of layer: got against its
 * definition, bit for bit; the first difference as a diagnostic. */
static int dropout_exact(const float *z, const float *got, size_t n, uint32_t H, uint64_t pos0,
			 uint32_t layer)
{
	uint32_t drop16 = ncf_dropout_threshold(0.5f);
	for (size_t j = 0; j < n; j++)
		for (uint32_t h = 0; h < H; h++) {
			float x = z[j * H + h] + 0.0f, r = x > 0.0f ? x : 0.0f;
			ncf_u32x4 b = ncf_dropout_bits(1, 3, pos0 + j, layer, h / 8);
			r = r * (ncf_dropout_keep(b, h % 8, drop16) ? 2.0f : 0.0f);
			if (memcmp(&r, &got[j * H + h], 4)) {
				tap_diag("width %u layer %u row %zu unit %u: %g, want %g", H, layer, j,
					 h, got[j * H + h], r);
				return 0;
			}
		}
	return 1;
}

static void t_dropout(struct ncf_backend *be)
{
	const uint32_t widths[] = {256, 128, 64, 13};
	size_t n = smoke ? 64 : 4096;
	for (int w = 0; w < 4; w++) {
		uint32_t H = widths[w];
		float *z = ncf_xmalloc(n * H * 4), *got = ncf_xmalloc(n * H * 4);
		for (size_t j = 0; j < n * H; j++)
			z[j] = ((float)rnd(1, j, 2001) - 1000.0f) * 0.01f;
		for (uint32_t layer = 0; layer < 3; layer++) {
			uint64_t pos0 = 77777ull * (layer + 1);
			int ok = ncf_cuda_debug_dropout(be, 3, pos0, layer, n, H, z, got) == 0;
			tap_ok(ok && dropout_exact(z, got, n, H, pos0, layer), "width %u, layer %u", H,
			       layer);
		}
		free(z), free(got);
	}
}

static void t_adam(struct ncf_backend *be)
{
	size_t na = smoke ? 4096 : 1 << 20;
	float *p = ncf_xmalloc(na * 4), *m = ncf_xmalloc(na * 4), *v = ncf_xmalloc(na * 4);
	float *g = ncf_xmalloc(na * 4), *p2 = ncf_xmalloc(na * 4), *m2 = ncf_xmalloc(na * 4);
	float *v2 = ncf_xmalloc(na * 4);
	for (size_t j = 0; j < na; j++) {
		p[j] = ((float)rnd(2, j, 1 << 20) - 524288.0f) * 1e-6f;
		m[j] = ((float)rnd(3, j, 1 << 20) - 524288.0f) * 1e-9f;
		v[j] = (float)rnd(4, j, 1 << 20) * 1e-14f;
		g[j] = ((float)rnd(5, j, 1 << 20) - 524288.0f) * powf(10.0f, -(float)(j % 12));
	}
	memcpy(p2, p, na * 4), memcpy(m2, m, na * 4), memcpy(v2, v, na * 4);
	int ok = ncf_cuda_debug_adam(be, p, m, v, g, na, 5) == 0;
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, 5, &k);
	for (size_t j = 0; j < na; j++)
		ncf_adam_update(&p2[j], &m2[j], &v2[j], g[j], &k);
	tap_ok(ok && !memcmp(p, p2, na * 4) && !memcmp(m, m2, na * 4) && !memcmp(v, v2, na * 4),
	       "p, m and v of step 5, bit for bit");
	free(p), free(m), free(v), free(g), free(p2), free(m2), free(v2);
}

/* ---- forward, evaluation, a step ---------------------------------------- */

static void t_scores(struct ncf_backend *cpu, struct ncf_backend *gpu)
{
	size_t n = smoke ? 4096 : 1 << 18;
	uint32_t *us = ncf_xmalloc(n * 4), *is = ncf_xmalloc(n * 4);
	for (size_t j = 0; j < n; j++)
		us[j] = rnd(10, j, cache.users), is[j] = rnd(11, j, cache.items);
	float *lc = ncf_xmalloc(n * 4), *lg = ncf_xmalloc(n * 4);
	float *sc = ncf_xmalloc(n * 4), *sg = ncf_xmalloc(n * 4);
	int ok = !ncf_backend_logits(cpu, us, is, n, lc) &&
		 !ncf_backend_logits(gpu, us, is, n, lg) &&
		 !ncf_backend_score(cpu, us, is, n, sc) && !ncf_backend_score(gpu, us, is, n, sg);
	struct helper_err e = {0, 0, 0};
	double ml = 0;
	int sok = helper_close_all(sg, sc, n, 0, 1e-5, "score", &e);
	int lok = 1;
	for (size_t j = 0; j < n; j++) {
		double d = fabs((double)lg[j] - lc[j]) / (1 + fabs(lc[j]));
		ml = fmax(ml, d);
		lok &= d <= 1e-5;
	}
	tap_ok(ok && sok, "scores of %zu pairs: relative error %.2g <= 1e-5", n, e.rel);
	tap_ok(ok && lok, "logits: |d| / (1 + |x|) = %.2g <= 1e-5", ml);
	tap_diag("scores: relative error %.2g; logits: |d| / (1 + |x|) = %.2g", e.rel, ml);
	free(us), free(is), free(lc), free(lg), free(sc), free(sg);
}

static void t_evaluation(struct ncf_backend *cpu, struct ncf_backend *gpu)
{
	uint32_t U = cache.users;
	uint32_t *rc = ncf_xmalloc(U * 4), *rg = ncf_xmalloc(U * 4);
	int ok = !ncf_backend_eval_ranks(cpu, 0, U, rc) && !ncf_backend_eval_ranks(gpu, 0, U, rg);
	uint32_t diff = 0;
	for (uint32_t u = 0; u < U; u++)
		diff += rc[u] != rg[u];
	double hc, nc, hg, ng;
	ncf_metrics_from_ranks(rc, U, 10, &hc, &nc);
	ncf_metrics_from_ranks(rg, U, 10, &hg, &ng);
	tap_ok(ok && fabs(hc - hg) <= 1e-3, "HR@10 %.5f (cpu %.5f)", hg, hc);
	tap_ok(ok && fabs(nc - ng) <= 1e-3, "NDCG@10 %.5f (cpu %.5f)", ng, nc);
	tap_ok(ok && diff <= U / 500, "%u of %u ranks differ", diff, U);
	tap_diag("HR@10 %.5f (cpu %.5f), NDCG@10 %.5f (cpu %.5f), %u of %u ranks differ", hg, hc, ng,
		 nc, diff, U);
	free(rc), free(rg);
}

/* The cpu backend's fp32 gradient of the batch (epoch 2, B..2B) at the
 * initial parameters, which the other precisions are held to. */
static float *grad_cpu;

static void t_gradient(struct ncf_backend *cpu, struct ncf_backend *gpu, uint64_t B)
{
	size_t total = cpu->layout.total;
	float *gg = ncf_xmalloc(total * 4), *g2 = ncf_xmalloc(total * 4);
	double lc, lg, l2;
	grad_cpu = ncf_xmalloc(total * 4);
	int ok = !ncf_backend_grad(cpu, 2, B, B, grad_cpu, &lc) &&
		 !ncf_backend_grad(gpu, 2, B, B, gg, &lg);
	tap_ok(ok && close_tensors(cpu, gg, grad_cpu, 1e-4, 1e-4, "grad"),
	       "the gradient per tensor within 1e-4");
	tap_ok(ok && tap_close(lg, lc, 0, 1e-5, "loss"), "the loss within 1e-5");
	tap_ok(ok && !ncf_backend_grad(gpu, 2, B, B, g2, &l2) && !memcmp(gg, g2, total * 4) &&
		       l2 == lg,
	       "the same gradient twice, bit for bit");
	free(gg), free(g2);
}

/* The parameters pg after one step against the cpu backend's pc, per
 * tensor: max |d| <= 1e-4 max |p| where |g| >= 1e-6 = 100 eps (sc: the cpu
 * backend's gradient).  There the first Adam step moves p by lr g / (|g| +
 * eps), within 1% of lr sign(g) whatever the rounding of g.  Where |g| is
 * near eps, the step's derivative lr eps / (|g| + eps)^2 (up to lr / eps =
 * 4.5e5) turns a rounding difference of g of 1e-11 into 1e-6 or more;
 * there only |d| <= 2 lr (the sign) is required. */
static void check_step_params(const struct ncf_backend *cpu, const float *pg, const float *pc,
			      const float *sc, double lr)
{
	struct helper_tensor t[HELPER_MAX_TENSORS];
	int nt = helper_tensors(&cpu->layout, &cpu->shape, t);
	size_t loose = 0;
	double worst = 0;
	for (int q = 0; q < nt; q++) {
		double mx = 0, md = 0;
		int sign = 1;
		for (size_t j = t[q].off; j < t[q].off + t[q].n; j++)
			mx = fmax(mx, fabs(pc[j]));
		for (size_t j = t[q].off; j < t[q].off + t[q].n; j++) {
			double d = fabs((double)pg[j] - pc[j]);
			if (!(d <= 2.0 * lr + 1e-7) && sign) {
				tap_diag("param %s[%zu]: %.9g, cpu %.9g", t[q].name, j - t[q].off, pg[j],
					 pc[j]);
				sign = 0;
			}
			if (fabs(sc[j]) >= 1e-6)
				md = fmax(md, d);
			else
				loose += d > 1e-4 * mx;
		}
		tap_ok(sign, "%s: within 2 lr everywhere", t[q].name);
		tap_ok(md <= 1e-4 * mx, "params %s: max |d| %.3g <= 1e-4 max |p| = %.3g", t[q].name,
		       md, 1e-4 * mx);
		worst = fmax(worst, mx > 0 ? md / mx : md);
	}
	tap_diag("max |d| / max |p| = %.2g per tensor (%zu near-zero-gradient elements beyond)",
		 worst, loose);
}

/* One training step from the initial state, on the batch of (epoch 0,
 * positions 0..B). */
static void t_step(struct ncf_backend *cpu, struct ncf_backend *gpu, uint64_t B)
{
	size_t total = cpu->layout.total;
	float *pc = ncf_xmalloc(total * 4), *pg = ncf_xmalloc(total * 4);
	float *p0 = ncf_xmalloc(total * 4), *sc = ncf_xmalloc(total * 4), *sg = ncf_xmalloc(total * 4);
	double lc, lg;
	int ok = !ncf_backend_get_state(gpu, p0, NULL, NULL) &&
		 !ncf_backend_grad(cpu, 0, 0, B, sc, &lc) && !ncf_backend_grad(gpu, 0, 0, B, sg, &lg);
	ok &= !ncf_backend_train_step(cpu, 0, 0, B, &lc) &&
	      !ncf_backend_train_step(gpu, 0, 0, B, &lg);
	ok &= !ncf_backend_get_state(cpu, pc, NULL, NULL) &&
	      !ncf_backend_get_state(gpu, pg, NULL, NULL);
	tap_ok(ok, "a step each");
	/* the step is Adam on the GPU's gradient, exactly */
	struct ncf_adam_k ak;
	ncf_adam_constants(&gpu->hp, 1, &ak);
	int exact = 1;
	for (size_t j = 0; j < total; j++) {
		float p = p0[j], m = 0, v = 0;
		ncf_adam_update(&p, &m, &v, sg[j], &ak);
		exact &= !memcmp(&p, &pg[j], 4);
	}
	tap_ok(exact, "Adam on the GPU's gradient, bit for bit");
	check_step_params(cpu, pg, pc, sc, ak.lr);
	free(p0), free(sc), free(sg), free(pc), free(pg);
}

/* Precision p against fp32 (see the top): the gradient within tol, three
 * steps; bf16 deterministic. */
static void t_precision(const struct ncf_backend *cpu, enum ncf_precision p, double tol,
			uint64_t B)
{
	const char *name = ncf_precision_name(p);
	size_t total = cpu->layout.total;
	struct ncf_hparams hp = hparams(B, 0);
	struct ncf_backend be;
	uint8_t *mask = NULL;
	if (!tap_ok(!open_be(&be, NCF_DEVICE_CUDA, p, &hp, &mask), "open the cuda backend in %s",
		    name))
		return;
	float *gg = ncf_xmalloc(total * 4), *g2 = ncf_xmalloc(total * 4);
	double lg, l2;
	tap_ok(!ncf_backend_grad(&be, 2, B, B, gg, &lg) && l2_tensors(cpu, gg, grad_cpu, tol, name),
	       "the gradient within %g of fp32 (L2 per tensor)", tol);
	if (p == NCF_PRECISION_BF16)
		tap_ok(!ncf_backend_grad(&be, 2, B, B, g2, &l2) && !memcmp(gg, g2, total * 4),
		       "the same gradient twice");
	double loss = 0;
	uint64_t S = ncf_epoch_samples((uint64_t)cache.train_positives, 4, cache.train_negatives);
	uint64_t pos = 0;
	int ok = 1;
	for (int st = 0; st < 3; st++) {
		uint64_t nb = B < S - pos ? B : S - pos;
		ok &= !ncf_backend_train_step(&be, 0, pos, nb, &loss) && isfinite(loss);
		pos = (pos + nb) % S;
	}
	tap_ok(ok && be.step == 3, "three steps with finite losses");
	free(gg), free(g2);
	ncf_backend_close(&be);
	free(mask);
}

/* ---- scoring ------------------------------------------------------------ */

/* Scores of be and cpu on n pairs within the scores' tolerance above. */
static int scores_close(struct ncf_backend *gpu, struct ncf_backend *cpu, const uint32_t *us,
			const uint32_t *is, size_t n, const char *what)
{
	float *sg = ncf_xmalloc(n * 4), *sc = ncf_xmalloc(n * 4);
	int ok = !ncf_backend_score(gpu, us, is, n, sg) && !ncf_backend_score(cpu, us, is, n, sc) &&
		 helper_close_all(sg, sc, n, 0, 1e-5, what, NULL);
	free(sg), free(sc);
	return ok;
}

/* The pairs of the scoring tests. */
static size_t score_n;
static uint32_t *score_us, *score_is;

static void score_pairs(void)
{
	score_n = smoke ? 4096 : 1 << 18;
	score_us = ncf_xmalloc(score_n * 4), score_is = ncf_xmalloc(score_n * 4);
	for (size_t j = 0; j < score_n; j++)
		score_us[j] = rnd(12, j, cache.users), score_is[j] = rnd(13, j, cache.items);
}

/* The resident path against the host path. */
static void t_resident(struct ncf_backend *gpu)
{
	size_t n = score_n;
	float *h = ncf_xmalloc(n * 4), *r = ncf_xmalloc(n * 4);
	int ok = !ncf_backend_score(gpu, score_us, score_is, n, h) &&
		 !ncf_backend_resident_set(gpu, score_us, score_is, n) &&
		 !ncf_backend_score_resident(gpu, n, NULL) && !ncf_backend_score_resident(gpu, n, r);
	int prob = 1;
	for (size_t j = 0; j < n; j++)
		prob &= r[j] >= 0.0f && r[j] <= 1.0f;
	tap_ok(ok && helper_close_all(r, h, n, 1e-6, 1e-5, "resident", NULL),
	       "the host path's scores");
	tap_ok(ok && prob, "probabilities");
	free(h), free(r);
}

/* Graphs after the tables change. */
static void t_scoring_graphs(struct ncf_backend *cpu, struct ncf_backend *gpu, uint64_t B)
{
	size_t n = score_n;
	uint64_t c0, l0, c1, l1;
	int ok = scores_close(gpu, cpu, score_us, score_is, n, "before");
	ncf_cuda_debug_graphs(gpu, &c0, &l0);
	float *p = ncf_xmalloc(gpu->layout.total * 4);
	ncf_model_init(&shape, &gpu->layout, 2, p);
	ok &= !ncf_backend_set_state(gpu, p, NULL, NULL) && !ncf_backend_set_state(cpu, p, NULL, NULL) &&
	      scores_close(gpu, cpu, score_us, score_is, n, "after set_state");
	double loss;
	ok &= !ncf_backend_train_step(gpu, 0, 0, B, &loss) &&
	      !ncf_backend_get_state(gpu, p, NULL, NULL) &&
	      !ncf_backend_set_state(cpu, p, NULL, NULL) &&
	      scores_close(gpu, cpu, score_us, score_is, n, "after a step");
	ncf_cuda_debug_graphs(gpu, &c1, &l1);
	tap_ok(ok, "the new parameters' scores");
	tap_ok(c0 > 0 && c1 == c0 && l1 > l0, "no new capture (%llu graphs, %llu more launches)",
	       (unsigned long long)c1, (unsigned long long)(l1 - l0));
	free(p);
}

/* ---- fp16 overflow, an epoch -------------------------------------------- */

/* The cuda backend in fp16 (batches of B) into be; 0, or -1 after a failed
 * check. */
static int open_fp16(struct ncf_backend *be, uint64_t B, uint8_t **mask)
{
	struct ncf_hparams hp = hparams(B, 0);
	int rc = open_be(be, NCF_DEVICE_CUDA, NCF_PRECISION_FP16, &hp, mask);
	tap_ok(rc == 0, "open the cuda backend in fp16");
	return rc ? -1 : 0;
}

/* An overflowing loss scale on the device. */
static void t_fp16_overflow(uint64_t B)
{
	struct ncf_backend be;
	uint8_t *mask = NULL;
	if (open_fp16(&be, B, &mask))
		return;
	size_t total = be.layout.total;
	float *p = ncf_xmalloc(total * 4), *after = ncf_xmalloc(total * 4);
	double loss;
	int ok = !ncf_backend_get_state(&be, p, NULL, NULL);
	/* dlogit = (sigmoid - y) / B * scale: about 2^23 with this scale, and
	 * dz = dlogit w (|w| ~ 0.1) far past fp16's 65504 */
	int lg = 0;
	while (((uint64_t)1 << lg) < B)
		lg++;
	float big = ldexpf(1.0f, 24 + lg);
	ncf_cuda_set_loss_scale(&be, big, 2000);
	ok &= !ncf_backend_train_step(&be, 0, 0, B, &loss) &&
	      !ncf_backend_get_state(&be, after, NULL, NULL);
	tap_ok(ok && be.step == 0 && !memcmp(p, after, total * 4) &&
		       ncf_cuda_loss_scale(&be) == big / 2,
	       "a loss scale of 2^%d: the step skipped, the scale halved", 24 + lg);
	free(p), free(after);
	ncf_backend_close(&be);
	free(mask);
}

/* The first batch of the stream (epoch 0, batches of B) with user 0 in it:
 * its first position into *first; 0, or -1 when there is none. */
static int batch_with_user0(struct ncf_backend *be, uint64_t B, uint64_t *first)
{
	uint64_t S = ncf_epoch_samples((uint64_t)cache.train_positives, 4, cache.train_negatives);
	uint32_t *u = ncf_xmalloc(B * 4), *it = ncf_xmalloc(B * 4);
	uint8_t *lab = ncf_xmalloc(B);
	int has0 = 0, ok = 1;
	for (*first = 0; *first + B <= S && !has0; *first += B) {
		ok &= !ncf_cuda_debug_samples(be, 0, *first, B, u, it, lab);
		for (uint64_t j = 0; j < B; j++)
			has0 |= u[j] == 0;
		if (has0)
			break;
	}
	free(u), free(it), free(lab);
	return ok && has0 ? 0 : -1;
}

/* A NaN made in the forward pass (see test_cuda_emu.cc t_fp16_nan). */
static void t_fp16_nan(uint64_t B)
{
	struct ncf_backend be;
	uint8_t *mask = NULL;
	if (open_fp16(&be, B, &mask))
		return;
	size_t total = be.layout.total;
	float *p = ncf_xmalloc(total * 4), *after = ncf_xmalloc(total * 4);
	int ok = !ncf_backend_get_state(&be, p, NULL, NULL);
	const struct ncf_layout *L = &be.layout;
	uint32_t M = ncf_shape_m(&shape), h = 3;
	for (uint32_t k = 0; k < M; k++) {
		p[L->mlp_user + k] = 1.0f;
		p[L->w[1] + (size_t)h * 2 * M + k] = 8192.0f;
		p[L->w[1] + (size_t)h * 2 * M + M + k] = -8192.0f;
	}
	for (size_t e = 0; e < (size_t)cache.items * M; e++)
		p[L->mlp_item + e] = 1.0f;
	ncf_cuda_set_loss_scale(&be, 32768.0f, 2000);
	uint64_t step = be.step, first = 0;
	double loss;
	ok &= !ncf_backend_set_state(&be, p, NULL, NULL);
	ok &= tap_ok(!batch_with_user0(&be, B, &first), "a batch with user 0");
	ok = ok && !ncf_backend_train_step(&be, 0, first, B, &loss) &&
	      !ncf_backend_get_state(&be, after, NULL, NULL);
	tap_ok(ok && be.step == step && !memcmp(p, after, total * 4) &&
		       ncf_cuda_loss_scale(&be) == 16384.0f,
	       "the step skipped, the scale halved");
	free(p), free(after);
	ncf_backend_close(&be);
	free(mask);
}

/* One whole epoch, fp32: mean loss and HR@10 after it (see the top). */
static void t_epoch(uint64_t B)
{
	struct ncf_hparams hp = hparams(B, 0);
	struct ncf_backend cpu, gpu;
	uint8_t *m1 = NULL, *m2 = NULL;
	if (!tap_ok(!open_be(&cpu, NCF_DEVICE_CPU, NCF_PRECISION_FP32, &hp, &m1) &&
			    !open_be(&gpu, NCF_DEVICE_CUDA, NCF_PRECISION_FP32, &hp, &m2),
		    "open the backends"))
		exit(tap_done());
	uint64_t S = ncf_epoch_samples((uint64_t)cache.train_positives, 4, cache.train_negatives);
	double tc = 0, tg = 0, lc, lg;
	int ok = 1, steps = 0;
	for (uint64_t pos = 0; pos < S; pos += B, steps++) {
		uint64_t n = B < S - pos ? B : S - pos;
		ok &= !ncf_backend_train_step(&cpu, 0, pos, n, &lc) &&
		      !ncf_backend_train_step(&gpu, 0, pos, n, &lg);
		tc += lc, tg += lg;
	}
	double hc, nc, hg, ng;
	ok &= !ncf_evaluate(&cpu, &cache, 10, &hc, &nc) && !ncf_evaluate(&gpu, &cache, 10, &hg, &ng);
	double p = hc, tol = 3 * sqrt(2 * p * (1 - p) / cache.users);
	tap_ok(ok && fabs(tg - tc) <= 3e-3 * tc, "%d steps: mean loss %.6f (cpu %.6f)", steps,
	       tg / S, tc / S);
	tap_ok(ok && fabs(hg - hc) <= tol, "HR@10 %.4f (cpu %.4f, within %.4f)", hg, hc, tol);
	tap_diag("one epoch (%d steps): mean loss %.6f (cpu %.6f), HR@10 %.4f (cpu %.4f)", steps,
		 tg / S, tc / S, hg, hc);
	ncf_backend_close(&cpu);
	ncf_backend_close(&gpu);
	free(m1), free(m2);
}

/* Explicit negatives (helpers.h) added to the cache in memory, as a data
 * set with label 0 rows gives them: the stream bit for bit, and the
 * gradient of the epoch's last batch (explicit samples among its
 * positions) within t_gradient's bounds of the cpu backend's. */
static void t_explicit(uint64_t B)
{
	cache.neg_offsets = ncf_xmalloc(((size_t)cache.users + 1) * sizeof *cache.neg_offsets);
	cache.train_negatives =
		helper_make_explicit(5, cache.users, cache.items, 20, cache.neg_offsets,
				     &cache.neg_items);
	t_samples(0);
	struct ncf_hparams hp = hparams(B, 0);
	struct ncf_backend cpu, gpu;
	uint8_t *m1 = NULL, *m2 = NULL;
	if (!tap_ok(!open_be(&cpu, NCF_DEVICE_CPU, NCF_PRECISION_FP32, &hp, &m1) &&
			    !open_be(&gpu, NCF_DEVICE_CUDA, NCF_PRECISION_FP32, &hp, &m2),
		    "open the backends"))
		return;
	uint64_t S = ncf_epoch_samples((uint64_t)cache.train_positives, 4, cache.train_negatives);
	size_t total = cpu.layout.total;
	float *gc = ncf_xmalloc(total * 4), *gg = ncf_xmalloc(total * 4);
	double lc, lg;
	int ok = !ncf_backend_grad(&cpu, 1, S - B, B, gc, &lc) &&
		 !ncf_backend_grad(&gpu, 1, S - B, B, gg, &lg);
	tap_ok(ok && close_tensors(&cpu, gg, gc, 1e-4, 1e-4, "grad"),
	       "the last batch's gradient per tensor within 1e-4");
	tap_ok(ok && tap_close(lg, lc, 0, 1e-5, "loss"), "its loss within 1e-5");
	free(gc), free(gg);
	ncf_backend_close(&cpu);
	ncf_backend_close(&gpu);
	free(m1), free(m2);
	free(cache.neg_offsets), free(cache.neg_items);
	cache.neg_offsets = NULL, cache.neg_items = NULL;
	cache.train_negatives = 0;
}

static void t_fault(struct ncf_backend *gpu)
{
	tap_ok(ncf_cuda_debug_fault(gpu) == -1, "ncf_cuda_debug_fault returns -1");
}

/* ---- main ---------------------------------------------------------------- */

/* The cases on one cpu and one cuda backend, which the step and the
 * scoring change in turn. */
static void shared_cases(struct ncf_backend *cpu, struct ncf_backend *gpu, uint64_t B)
{
	TEST(t_dropout(gpu), "bias + ReLU + dropout bit-exact on the GPU (widths 256, 128, 64, 13)");
	TEST(t_adam(gpu), "dense Adam pass bit-exact on the GPU against ncf_adam_update");
	TEST(t_scores(cpu, gpu), "scores of random pairs: relative error <= 1e-5, logits |d| <= "
				 "1e-5 (1 + |x|) (fp32)");
	TEST(t_evaluation(cpu, gpu), "evaluation: HR@10 and NDCG@10 within 1e-3, at most 0.2%% of "
				     "the ranks differ");
	TEST(t_gradient(cpu, gpu, B),
	     "one batch of %llu: gradient per tensor within 1e-4, loss within 1e-5, twice the same "
	     "(fp32)",
	     (unsigned long long)B);
	TEST(t_step(cpu, gpu, B), "one training step = Adam on the GPU's gradient, bit for bit; the "
				  "parameters within 1e-4 per tensor");
	static const struct {
		enum ncf_precision p;
		double tol;
	} precs[] = {{NCF_PRECISION_TF32, 0.05}, {NCF_PRECISION_BF16, 0.10},
		     {NCF_PRECISION_FP16, 0.05}};
	for (size_t k = 0; k < 3; k++)
		TEST(t_precision(cpu, precs[k].p, precs[k].tol, B),
		     "%s: gradient within %g of fp32 (L2 per tensor)%s, three steps",
		     ncf_precision_name(precs[k].p), precs[k].tol,
		     precs[k].p == NCF_PRECISION_BF16 ? ", deterministic" : "");
	score_pairs();
	TEST(t_resident(gpu), "%zu pairs kept on the device score as the host path does", score_n);
	TEST(t_scoring_graphs(cpu, gpu, B), "scoring graphs after set_state and after a training "
					    "step: the new parameters' scores, no new capture");
	free(score_us), free(score_is), free(grad_cpu);
}

int main(int argc, char **argv)
{
	ncf_set_progname("gpu_parity");
	ncf_verbosity = 1;
	if (argc < 2) {
		fprintf(stderr, "usage: gpu_parity CACHE [--smoke]\n");
		return 2;
	}
	smoke = argc > 2 && !strcmp(argv[2], "--smoke");
	int fault = argc > 2 && !strcmp(argv[2], "--fault");
	char why[256];
	if (!ncf_cuda_usable(why, sizeof why)) {
		printf("1..0 # SKIP no GPU: %s\n", why);
		return 0;
	}
	if (ncf_cache_read(argv[1], &cache) != 0)
		return 1;
	shape = (struct ncf_shape){.users = cache.users, .items = cache.items, .factors = 64,
				   .n_layers = 4, .layers = {256, 256, 128, 64}};
	uint64_t B = smoke ? 2048 : 65536;
	if (!fault) {
		TEST(t_samples(0), "sample stream bit-exact on the GPU, 2 epochs");
		TEST(t_samples(1), "sample stream bit-exact on the GPU, 2 epochs, --true-negatives");
	}
	struct ncf_hparams hp = hparams(B, 0);
	struct ncf_backend cpu, gpu;
	uint8_t *m1 = NULL, *m2 = NULL;
	if (open_be(&cpu, NCF_DEVICE_CPU, NCF_PRECISION_FP32, &hp, &m1) ||
	    open_be(&gpu, NCF_DEVICE_CUDA, NCF_PRECISION_FP32, &hp, &m2)) {
		tap_ok(0, "open the backends");
		return tap_done();
	}
	ncf_backend_describe(&gpu, stderr);
	if (fault) {
		/* the device is lost after this: nothing else in this process */
		TEST(t_fault(&gpu), "a kernel that faults is reported");
		return tap_done();
	}
	shared_cases(&cpu, &gpu, B);
	ncf_backend_close(&cpu);
	ncf_backend_close(&gpu);
	free(m1), free(m2);
	TEST(t_fp16_overflow(B), "fp16 on the device: an overflowing loss scale skips the step and "
				 "halves it");
	TEST(t_fp16_nan(B), "fp16 on the device: a NaN made in the forward pass (inf - inf through "
			    "the ReLU) skips the step and halves the scale");
	TEST(t_explicit(B), "explicit negatives: the stream bit-exact on the GPU, the gradient of a "
			    "batch at the epoch's end as the cpu backend's");
	if (!smoke)
		TEST(t_epoch(B), "one epoch (fp32): mean loss within 3e-3, HR@10 within three sigmas");
	ncf_cache_free(&cache);
	return tap_done();
}
#endif
