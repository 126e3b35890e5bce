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
 *    --true-negatives: bit for bit (integer formulas of ncf_hd.h, compiled
 *    by nvcc for the device);
 *  - bias + ReLU + dropout, widths 256, 128, 64, 13: bit for bit (the same
 *    Philox bits; the kernels are built with -fmad=false);
 *  - the dense Adam pass: bit for bit against ncf_adam_update (IEEE sqrt
 *    and division on the device, no FMA contraction);
 *  - segment sums through the CUB radix sort: bit for bit where a key's
 *    rows lie in one chunk, within 1e-6 of the sum of magnitudes otherwise;
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
 *    2 lr elsewhere (see test_step);
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
 *    layer, test_cuda_emu.cc test_fp16_nan) both skip the step and halve
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
	return ncf_uniform_below(ncf_rng(99, NCF_RNG_BENCH, a, idx, 0).v[0], n);
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

struct tensor {
	const char *name;
	size_t off, n;
};

static int tensors(const struct ncf_backend *be, struct tensor *t)
{
	static char names[NCF_MAX_LAYERS][2][16];
	const struct ncf_layout *L = &be->layout;
	const struct ncf_shape *s = &be->shape;
	size_t U = s->users, I = s->items, F = s->factors, M = ncf_shape_m(s);
	int k = 0;
	t[k++] = (struct tensor){"gmf_user", L->gmf_user, U * F};
	t[k++] = (struct tensor){"gmf_item", L->gmf_item, I * F};
	t[k++] = (struct tensor){"mlp_user", L->mlp_user, U * M};
	t[k++] = (struct tensor){"mlp_item", L->mlp_item, I * M};
	for (uint32_t l = 1; l < s->n_layers; l++) {
		snprintf(names[l][0], 16, "W%u", l);
		snprintf(names[l][1], 16, "b%u", l);
		t[k++] = (struct tensor){names[l][0], L->w[l], (size_t)s->layers[l] * s->layers[l - 1]};
		t[k++] = (struct tensor){names[l][1], L->b[l], s->layers[l]};
	}
	t[k++] = (struct tensor){"head_w", L->head_w, F + ncf_shape_last(s)};
	t[k++] = (struct tensor){"head_b", L->head_b, 1};
	return k;
}

/* |got - want| <= atol + rtol |want|; first mismatches as diagnostics. */
static int close_all(const float *got, const float *want, size_t n, double atol, double rtol,
		     const char *what, double *maxrel)
{
	size_t bad = 0;
	double mr = 0;
	for (size_t j = 0; j < n; j++) {
		double d = fabs((double)got[j] - want[j]);
		double r = d / (fabs(want[j]) + 1e-30);
		if (r > mr || isnan(d))
			mr = isnan(d) ? INFINITY : r;
		if (!(d <= atol + rtol * fabs(want[j]))) {
			if (bad < 5)
				tap_diag("%s[%zu]: got %.9g, want %.9g", what, j, got[j], want[j]);
			bad++;
		}
	}
	if (bad)
		tap_diag("%s: %zu of %zu beyond %g + %g |x|", what, bad, n, atol, rtol);
	if (maxrel)
		*maxrel = mr;
	return bad == 0;
}

static int close_tensors(const struct ncf_backend *be, const float *got, const float *want,
			 double rel_max, double rtol, const char *what)
{
	struct tensor t[4 + 2 * NCF_MAX_LAYERS + 2];
	int nt = tensors(be, t), ok = 1;
	for (int k = 0; k < nt; k++) {
		double mx = 0;
		for (size_t j = 0; j < t[k].n; j++)
			mx = fmax(mx, fabs(want[t[k].off + j]));
		char name[64];
		snprintf(name, sizeof name, "%s %s", what, t[k].name);
		ok &= close_all(got + t[k].off, want + t[k].off, t[k].n, rel_max * mx, rtol, name,
				NULL);
	}
	return ok;
}

static int l2_tensors(const struct ncf_backend *be, const float *got, const float *want,
		      double tol, const char *what)
{
	struct tensor t[4 + 2 * NCF_MAX_LAYERS + 2];
	int nt = tensors(be, t), ok = 1;
	for (int k = 0; k < nt; k++) {
		double num = 0, den = 0;
		for (size_t j = 0; j < t[k].n; j++) {
			double d = (double)got[t[k].off + j] - want[t[k].off + j];
			num += d * d;
			den += (double)want[t[k].off + j] * want[t[k].off + j];
		}
		double rel = den > 0 ? sqrt(num / den) : sqrt(num);
		if (!(rel <= tol)) {
			tap_diag("%s %s: relative L2 error %.3g > %g", what, t[k].name, rel, tol);
			ok = 0;
		}
	}
	return ok;
}

static void test_samples(void)
{
	uint64_t P = (uint64_t)cache.train_positives, S = P * 5;
	uint64_t n = smoke ? 4096 : (uint64_t)1 << 20;
	if (n > S)
		n = S;
	uint32_t *u = ncf_xmalloc(n * 4), *it = ncf_xmalloc(n * 4);
	uint8_t *lab = ncf_xmalloc(n);
	for (int tn = 0; tn < 2; tn++) {
		struct ncf_hparams hp = hparams(65536, tn);
		struct ncf_backend be;
		uint8_t *mask = NULL;
		if (open_be(&be, NCF_DEVICE_CUDA, NCF_PRECISION_FP32, &hp, &mask)) {
			tap_ok(0, "open the cuda backend");
			return;
		}
		int ok = 1;
		for (uint32_t e = 0; e < 2 && ok; e++) {
			uint64_t first = e ? S - n : (S - n) / 2;
			ok = ncf_cuda_debug_samples(&be, e, first, n, u, it, lab) == 0;
			ncf_perm perm = ncf_perm_make(S, hp.seed, e);
			int bad = 0;
#pragma omp parallel for reduction(+ : bad)
			for (int64_t j = 0; j < (int64_t)n; j++) {
				uint32_t wu, wi;
				int y = ncf_sample_at(&perm, first + (uint64_t)j, hp.seed, e,
						      (int64_t)P, cache.items, tn, cache.entry_user,
						      cache.offsets, cache.train_items, &wu, &wi);
				bad += wu != u[j] || wi != it[j] || y != lab[j];
			}
			if (bad)
				tap_diag("epoch %u: %d samples differ", e, bad);
			ok &= bad == 0;
		}
		tap_ok(ok, "sample stream bit-exact on the GPU, %llu positions of 2 epochs%s",
		       (unsigned long long)n, tn ? ", --true-negatives" : "");
		ncf_backend_close(&be);
		free(mask);
	}
	free(u), free(it), free(lab);
}

static void test_ops(struct ncf_backend *be)
{
	/* dropout */
	const uint32_t widths[] = {256, 128, 64, 13};
	int ok = 1;
	size_t n = smoke ? 64 : 4096;
	for (int w = 0; w < 4; w++) {
		uint32_t H = widths[w];
		float *z = ncf_xmalloc(n * H * 4), *got = ncf_xmalloc(n * H * 4);
		for (size_t j = 0; j < n * H; j++)
			z[j] = ((float)rnd(1, j, 2001) - 1000.0f) * 0.01f;
		for (uint32_t layer = 0; layer < 3; layer++) {
			uint64_t pos0 = 77777ull * (layer + 1);
			ok &= ncf_cuda_debug_dropout(be, 3, pos0, layer, n, H, z, got) == 0;
			uint32_t drop16 = ncf_dropout_threshold(0.5f);
			for (size_t j = 0; j < n && ok; j++)
				for (uint32_t h = 0; h < H; h++) {
					float x = z[j * H + h] + 0.0f, r = x > 0.0f ? x : 0.0f;
					ncf_u32x4 b = ncf_dropout_bits(1, 3, pos0 + j, layer, h / 8);
					r = r * (ncf_dropout_keep(b, h % 8, drop16) ? 2.0f : 0.0f);
					if (memcmp(&r, &got[j * H + h], 4)) {
						tap_diag("width %u layer %u row %zu unit %u: %g, want %g", H,
							 layer, j, h, got[j * H + h], r);
						ok = 0;
						break;
					}
				}
		}
		free(z), free(got);
	}
	tap_ok(ok, "bias + ReLU + dropout bit-exact on the GPU (widths 256, 128, 64, 13)");

	/* Adam */
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
	ok = ncf_cuda_debug_adam(be, p, m, v, g, na, 5) == 0;
	struct ncf_adam_k k;
	ncf_adam_constants(&be->hp, 5, &k);
	for (size_t j = 0; j < na; j++)
		ncf_adam_update(&p2[j], &m2[j], &v2[j], g[j], &k);
	ok &= !memcmp(p, p2, na * 4) && !memcmp(m, m2, na * 4) && !memcmp(v, v2, na * 4);
	tap_ok(ok, "dense Adam pass bit-exact on the GPU against ncf_adam_update");
	free(p), free(m), free(v), free(g), free(p2), free(m2), free(v2);

	/* segment sums through the CUB sort */
	size_t ns = smoke ? 5000 : 1 << 20;
	uint32_t K = smoke ? 700 : 100000, H = 7;
	uint32_t *key = ncf_xmalloc(ns * 4);
	float *src = ncf_xmalloc(ns * H * 4), *out = ncf_xmalloc((size_t)K * H * 4);
	double *want = calloc((size_t)K * H, sizeof(double)), *mag = calloc((size_t)K * H, 8);
	size_t *cnt = calloc(K, sizeof(size_t)), *first = ncf_xmalloc(K * sizeof(size_t));
	size_t *last = calloc(K, sizeof(size_t));
	for (size_t j = 0; j < ns; j++) {
		uint32_t r = rnd(6, j, 100);
		key[j] = r < 10 ? 0 : r < 40 ? 1 + rnd(7, j, 50) : rnd(8, j, K / 2);
		cnt[key[j]]++;
		for (uint32_t h = 0; h < H; h++)
			src[j * H + h] = ((float)rnd(9, j * H + h, 20001) - 10000.0f) * 1e-3f;
	}
	ok = ncf_cuda_debug_segsum(be, key, ns, K, src, H, out) == 0;
	/* sorted positions: keys in order, by counting */
	size_t pos = 0;
	for (uint32_t q = 0; q < K; q++) {
		first[q] = pos;
		pos += cnt[q];
		last[q] = pos ? pos - 1 : 0;
	}
	/* the reference sums in sample order (float, like the cpu backend) */
	float *wf = calloc((size_t)K * H, sizeof(float));
	for (size_t j = 0; j < ns; j++)
		for (uint32_t h = 0; h < H; h++) {
			wf[(size_t)key[j] * H + h] += src[j * H + h];
			want[(size_t)key[j] * H + h] += src[j * H + h];
			mag[(size_t)key[j] * H + h] += fabs(src[j * H + h]);
		}
	int exact = 1, near = 1;
	for (uint32_t q = 0; q < K; q++)
		for (uint32_t h = 0; h < H; h++) {
			size_t o = (size_t)q * H + h;
			if (!cnt[q])
				exact &= out[o] == 0.0f;
			else if (first[q] / 32 == last[q] / 32)
				exact &= out[o] == wf[o];
			else
				near &= fabs(out[o] - want[o]) <= 1e-6 * mag[o] + 1e-6;
		}
	tap_ok(ok && exact && near,
	       "segment sums through the CUB sort: bit-exact within a chunk, 1e-6 across chunks");
	free(key), free(src), free(out), free(want), free(mag), free(cnt), free(first), free(last);
	free(wf);
}

static void test_forward(struct ncf_backend *cpu, struct ncf_backend *gpu)
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
	double mr = 0, ml = 0;
	int sok = close_all(sg, sc, n, 0, 1e-5, "score", &mr);
	int lok = 1;
	for (size_t j = 0; j < n; j++) {
		double d = fabs((double)lg[j] - lc[j]) / (1 + fabs(lc[j]));
		ml = fmax(ml, d);
		lok &= d <= 1e-5;
	}
	tap_ok(ok && sok, "scores of %zu pairs: relative error %.2g <= 1e-5 (fp32)", n, mr);
	tap_ok(ok && lok, "logits: |d| / (1 + |x|) = %.2g <= 1e-5", ml);
	free(us), free(is), free(lc), free(lg), free(sc), free(sg);

	/* evaluation */
	uint32_t U = cache.users;
	uint32_t *rc = ncf_xmalloc(U * 4), *rg = ncf_xmalloc(U * 4);
	ok = !ncf_backend_eval_ranks(cpu, 0, U, rc) && !ncf_backend_eval_ranks(gpu, 0, U, rg);
	uint32_t diff = 0;
	for (uint32_t u = 0; u < U; u++)
		diff += rc[u] != rg[u];
	double hc, nc, hg, ng;
	ncf_metrics_from_ranks(rc, U, 10, &hc, &nc);
	ncf_metrics_from_ranks(rg, U, 10, &hg, &ng);
	tap_ok(ok && fabs(hc - hg) <= 1e-3 && fabs(nc - ng) <= 1e-3 && diff <= U / 500,
	       "evaluation: HR@10 %.5f (cpu %.5f), NDCG@10 %.5f (cpu %.5f), %u of %u ranks differ",
	       hg, hc, ng, nc, diff, U);
	free(rc), free(rg);
}

static void test_step(struct ncf_backend *cpu, struct ncf_backend *gpu, uint64_t B)
{
	size_t total = cpu->layout.total;
	float *gc = ncf_xmalloc(total * 4), *gg = ncf_xmalloc(total * 4);
	float *g2 = ncf_xmalloc(total * 4);
	double lc, lg, l2;
	int ok = !ncf_backend_grad(cpu, 2, B, B, gc, &lc) &&
		 !ncf_backend_grad(gpu, 2, B, B, gg, &lg);
	ok &= close_tensors(cpu, gg, gc, 1e-4, 1e-4, "grad") && tap_close(lg, lc, 0, 1e-5, "loss");
	tap_ok(ok, "one batch of %llu: gradient per tensor within 1e-4, loss within 1e-5 (fp32)",
	       (unsigned long long)B);
	ok = !ncf_backend_grad(gpu, 2, B, B, g2, &l2) && !memcmp(gg, g2, total * 4) && l2 == lg;
	tap_ok(ok, "the same gradient twice, bit for bit (fp32)");

	/* one training step from the initial state, on the batch of (epoch 0,
	 * positions 0..B): gc, gg its gradients, p0 the parameters before */
	float *pc = ncf_xmalloc(total * 4), *pg = ncf_xmalloc(total * 4);
	float *p0 = ncf_xmalloc(total * 4), *sc = ncf_xmalloc(total * 4), *sg = ncf_xmalloc(total * 4);
	ok = !ncf_backend_get_state(gpu, p0, NULL, NULL) &&
	     !ncf_backend_grad(cpu, 0, 0, B, sc, &lc) &&
	     !ncf_backend_grad(gpu, 0, 0, B, sg, &lg);
	ok &= !ncf_backend_train_step(cpu, 0, 0, B, &lc) &&
	      !ncf_backend_train_step(gpu, 0, 0, B, &lg);
	ok &= !ncf_backend_get_state(cpu, pc, NULL, NULL) &&
	      !ncf_backend_get_state(gpu, pg, NULL, NULL);
	/* (a) the step is Adam on the GPU's gradient, exactly */
	struct ncf_adam_k ak;
	ncf_adam_constants(&gpu->hp, 1, &ak);
	int exact = 1;
	for (size_t j = 0; j < total; j++) {
		float p = p0[j], m = 0, v = 0;
		ncf_adam_update(&p, &m, &v, sg[j], &ak);
		exact &= !memcmp(&p, &pg[j], 4);
	}
	tap_ok(ok && exact, "one training step = Adam on the GPU's gradient, bit for bit");
	/* (b) against the cpu backend, per tensor: max |d| <= 1e-4 max |p| where
	 * |g| >= 1e-6 = 100 eps.  There the first Adam step moves p by
	 * lr g / (|g| + eps), within 1% of lr sign(g) whatever the rounding of g.
	 * Where |g| is near eps, the step's derivative lr eps / (|g| + eps)^2 (up
	 * to lr / eps = 4.5e5) turns a rounding difference of g of 1e-11 into
	 * 1e-6 or more; there only |d| <= 2 lr (the sign) is required. */
	struct tensor t[4 + 2 * NCF_MAX_LAYERS + 2];
	int nt = tensors(cpu, t), pok = 1;
	size_t loose = 0;
	double worst = 0;
	for (int q = 0; q < nt; q++) {
		double mx = 0, md = 0;
		for (size_t j = t[q].off; j < t[q].off + t[q].n; j++)
			mx = fmax(mx, fabs(pc[j]));
		for (size_t j = t[q].off; j < t[q].off + t[q].n; j++) {
			double d = fabs((double)pg[j] - pc[j]);
			if (!(d <= 2.0 * ak.lr + 1e-7)) {
				pok = 0;
				tap_diag("param %s[%zu]: %.9g, cpu %.9g", t[q].name, j - t[q].off, pg[j], pc[j]);
			}
			if (fabs(sc[j]) >= 1e-6)
				md = fmax(md, d);
			else
				loose += d > 1e-4 * mx;
		}
		if (!(md <= 1e-4 * mx)) {
			pok = 0;
			tap_diag("params %s: max |d| %.3g > 1e-4 max |p| = %.3g", t[q].name, md, 1e-4 * mx);
		}
		worst = fmax(worst, mx > 0 ? md / mx : md);
	}
	tap_ok(ok && pok, "parameters after one step: max |d| / max |p| = %.2g <= 1e-4 per tensor "
			  "(%zu near-zero-gradient elements beyond)",
	       worst, loose);
	free(p0), free(sc), free(sg);

	/* the other precisions against fp32 */
	const enum ncf_precision precs[] = {NCF_PRECISION_TF32, NCF_PRECISION_BF16,
					    NCF_PRECISION_FP16};
	const double tol[] = {0.05, 0.10, 0.05};
	struct ncf_hparams hp = hparams(B, 0);
	for (int k = 0; k < 3; k++) {
		const char *name = ncf_precision_name(precs[k]);
		struct ncf_backend be;
		uint8_t *mask = NULL;
		if (open_be(&be, NCF_DEVICE_CUDA, precs[k], &hp, &mask)) {
			tap_ok(0, "open the cuda backend in %s", name);
			continue;
		}
		ok = !ncf_backend_grad(&be, 2, B, B, gg, &lg) &&
		     l2_tensors(cpu, gg, gc, tol[k], name);
		if (precs[k] == NCF_PRECISION_BF16)
			ok &= !ncf_backend_grad(&be, 2, B, B, g2, &l2) && !memcmp(gg, g2, total * 4);
		double loss = 0;
		uint64_t S = (uint64_t)cache.train_positives * 5, pos = 0;
		for (int st = 0; st < 3; st++) {
			uint64_t nb = B < S - pos ? B : S - pos;
			ok &= !ncf_backend_train_step(&be, 0, pos, nb, &loss) && isfinite(loss);
			pos = (pos + nb) % S;
		}
		tap_ok(ok && be.step == 3, "%s: gradient within %g of fp32 (L2 per tensor)%s, three "
					   "steps",
		       name, tol[k], precs[k] == NCF_PRECISION_BF16 ? ", deterministic" : "");
		ncf_backend_close(&be);
		free(mask);
	}
	free(gc), free(gg), free(g2), free(pc), free(pg);
}

/* Scores of be and cpu on n pairs within the scores' tolerance above. */
static int scores_close(struct ncf_backend *gpu, struct ncf_backend *cpu, const uint32_t *us,
			const uint32_t *is, size_t n, const char *what)
{
	float *sg = ncf_xmalloc(n * 4), *sc = ncf_xmalloc(n * 4);
	int ok = !ncf_backend_score(gpu, us, is, n, sg) && !ncf_backend_score(cpu, us, is, n, sc) &&
		 close_all(sg, sc, n, 0, 1e-5, what, NULL);
	free(sg), free(sc);
	return ok;
}

/* The resident path against the host path; graphs after the tables change. */
static void test_scoring(struct ncf_backend *cpu, struct ncf_backend *gpu, uint64_t B)
{
	size_t n = smoke ? 4096 : 1 << 18;
	uint32_t *us = ncf_xmalloc(n * 4), *is = ncf_xmalloc(n * 4);
	for (size_t j = 0; j < n; j++)
		us[j] = rnd(12, j, cache.users), is[j] = rnd(13, j, cache.items);
	float *h = ncf_xmalloc(n * 4), *r = ncf_xmalloc(n * 4);
	int ok = !ncf_backend_score(gpu, us, is, n, h) &&
		 !ncf_backend_resident_set(gpu, us, is, n) &&
		 !ncf_backend_score_resident(gpu, n, NULL) &&
		 !ncf_backend_score_resident(gpu, n, r);
	int prob = 1;
	for (size_t j = 0; j < n; j++)
		prob &= r[j] >= 0.0f && r[j] <= 1.0f;
	ok &= close_all(r, h, n, 1e-6, 1e-5, "resident", NULL);
	tap_ok(ok && prob, "%zu pairs kept on the device score as the host path does", n);
	free(h), free(r);

	uint64_t c0, l0, c1, l1;
	ok = scores_close(gpu, cpu, us, is, n, "before");
	ncf_cuda_debug_graphs(gpu, &c0, &l0);
	float *p = ncf_xmalloc(gpu->layout.total * 4);
	ncf_model_init(&shape, &gpu->layout, 2, p);
	ok &= !ncf_backend_set_state(gpu, p, NULL, NULL) && !ncf_backend_set_state(cpu, p, NULL, NULL) &&
	      scores_close(gpu, cpu, us, is, n, "after set_state");
	double loss;
	ok &= !ncf_backend_train_step(gpu, 0, 0, B, &loss) &&
	      !ncf_backend_get_state(gpu, p, NULL, NULL) &&
	      !ncf_backend_set_state(cpu, p, NULL, NULL) &&
	      scores_close(gpu, cpu, us, is, n, "after a step");
	ncf_cuda_debug_graphs(gpu, &c1, &l1);
	tap_ok(ok && c0 > 0 && c1 == c0 && l1 > l0,
	       "scoring graphs after set_state and after a training step: the new parameters' "
	       "scores, no new capture (%llu graphs, %llu more launches)",
	       (unsigned long long)c1, (unsigned long long)(l1 - l0));
	free(p), free(us), free(is);
}

/* fp16 overflow on the device: an overflowing loss scale, and a NaN made in
 * the forward pass (see test_cuda_emu.cc test_fp16_nan). */
static void test_fp16_skips(uint64_t B)
{
	struct ncf_hparams hp = hparams(B, 0);
	struct ncf_backend be;
	uint8_t *mask = NULL;
	if (open_be(&be, NCF_DEVICE_CUDA, NCF_PRECISION_FP16, &hp, &mask)) {
		tap_ok(0, "open the cuda backend in fp16");
		return;
	}
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
	       "fp16 on the device: an overflowing loss scale (2^%d) skips the step and halves it",
	       24 + lg);
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
	uint64_t step = be.step;
	ok = !ncf_backend_set_state(&be, p, NULL, NULL);
	/* a batch with user 0 in it: positions of the stream until one is found */
	uint64_t S = (uint64_t)cache.train_positives * 5, first = 0;
	uint32_t *u = ncf_xmalloc(B * 4), *it = ncf_xmalloc(B * 4);
	uint8_t *lab = ncf_xmalloc(B);
	int has0 = 0;
	for (; first + B <= S && !has0; first += B) {
		ok &= !ncf_cuda_debug_samples(&be, 0, first, B, u, it, lab);
		for (uint64_t j = 0; j < B; j++)
			has0 |= u[j] == 0;
		if (has0)
			break;
	}
	ok &= has0 && !ncf_backend_train_step(&be, 0, first, B, &loss) &&
	      !ncf_backend_get_state(&be, after, NULL, NULL);
	tap_ok(ok && be.step == step && !memcmp(p, after, total * 4) &&
		       ncf_cuda_loss_scale(&be) == 16384.0f,
	       "fp16 on the device: a NaN made in the forward pass (inf - inf through the ReLU) "
	       "skips the step and halves the scale");
	free(u), free(it), free(lab), free(p), free(after);
	ncf_backend_close(&be);
	free(mask);
}

/* One whole epoch, fp32: mean loss and HR@10 after it (see the top). */
static void test_epoch(uint64_t B)
{
	struct ncf_hparams hp = hparams(B, 0);
	struct ncf_backend cpu, gpu;
	uint8_t *m1 = NULL, *m2 = NULL;
	if (open_be(&cpu, NCF_DEVICE_CPU, NCF_PRECISION_FP32, &hp, &m1) ||
	    open_be(&gpu, NCF_DEVICE_CUDA, NCF_PRECISION_FP32, &hp, &m2)) {
		tap_ok(0, "open the backends");
		return;
	}
	uint64_t S = (uint64_t)cache.train_positives * 5;
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
	tap_ok(ok && fabs(tg - tc) <= 3e-3 * tc && fabs(hg - hc) <= tol,
	       "one epoch (%d steps, fp32): mean loss %.6f (cpu %.6f), HR@10 %.4f (cpu %.4f, within "
	       "%.4f)",
	       steps, tg / S, tc / S, hg, hc, tol);
	ncf_backend_close(&cpu);
	ncf_backend_close(&gpu);
	free(m1), free(m2);
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
	if (!fault)
		test_samples();
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
		tap_ok(ncf_cuda_debug_fault(&gpu) == -1, "a kernel that faults is reported");
		return tap_done();
	}
	test_ops(&gpu);
	test_forward(&cpu, &gpu);
	test_step(&cpu, &gpu, B);
	test_scoring(&cpu, &gpu, B);
	ncf_backend_close(&cpu);
	ncf_backend_close(&gpu);
	free(m1), free(m2);
	test_fp16_skips(B);
	if (!smoke)
		test_epoch(B);
	ncf_cache_free(&cache);
	return tap_done();
}
#endif
