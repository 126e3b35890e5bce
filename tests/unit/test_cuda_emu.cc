/*
 * test_cuda_emu.cc - the cuda backend run on the CPU through the emulation
 * layer (kernels/cuda/emu.h), against the plain reference
 * (kernels/cpu/reference.c, the specification) and the fast cpu backend
 * (kernels/cpu/, itself checked against the reference by test_cpu_ref), on
 * the same data, parameters and batches.
 *
 * This binary holds the .cu files of kernels/cuda/ compiled as C++ with
 * -DNCF_CUDA_EMULATE:
 * every kernel of the backend but the radix sort runs here, one thread at a
 * time, with host memory as device memory and OpenBLAS as cuBLAS (fp32
 * products; bf16 and fp16 operands are rounded as on the GPU).  What it
 * checks, and how close is close:
 *  - the sample stream (users, items, labels) at every position of several
 *    epochs, with and without --true-negatives: bit for bit (integer
 *    formulas of ncf_hd.h);
 *  - dropout masks and bias + ReLU + dropout, for widths that are and are not
 *    multiples of 8: bit for bit (same Philox bits, same float operations);
 *  - the dense Adam pass: bit for bit against ncf_adam_update;
 *  - segment sums through the (CPU twin of the) sort: bit for bit for keys
 *    whose rows lie in one chunk (summed in the cpu backend's order), within
 *    1e-6 of the sum of magnitudes otherwise (chunk sums added left to right);
 *  - logits and scores: |d| <= 1e-6 + 1e-5 |x|.  Same float operations in the
 *    same order except inside sgemm, which OpenBLAS may sum in another order
 *    for other matrix shapes (the cpu backend multiplies chunks and slots, the
 *    emulation whole tables and batches);
 *  - evaluation ranks: equal for every user (a different rank would need two
 *    candidates' logits within the rounding above of each other; the test
 *    says so if it happens);
 *  - the gradient of one step, per tensor: |d| <= 1e-5 max|g| + 1e-5 |g|: the
 *    batch sums (K = B in the weight-gradient GEMMs, column sums, segment
 *    sums) are added in other orders than the cpu backend's lanes and tiles,
 *    which moves each sum by a few ulps of the sum of its terms' magnitudes;
 *  - parameters after one Adam step: |d| <= 1e-6 + 1e-5 |p|, and after five
 *    steps <= 1e-4 (Adam's first steps are nearly sign descent: a gradient
 *    error changes the update only where |g| is near eps = 1e-8; it grows
 *    slowly with the steps);
 *  - the rank slices of a two-rank job: each rank's gradient against the cpu
 *    backend's for the same rank, and their sum against one rank's;
 *  - bf16 and fp16 steps: the gradient within 10% and 2% (relative L2 norm
 *    per tensor) of the fp32 cpu backend's (see test_low_precision for
 *    why so loose), logits within 2e-2; fp16 dynamic loss scaling: a step with
 *    an overflowing scale is skipped and halves the scale, good steps double
 *    it after the growth interval;
 *  - bad input (ids outside the model, positions past the epoch) refused;
 *  - a short training run: both backends' HR@10 after two epochs equal;
 *  - against the reference directly (test_oracle), for the three shapes:
 *    the gradient of two batches per tensor |d| <= 1e-5 max|g| + 1e-4 |g|
 *    and loss sums rel 1e-6, the logits of every pair |d| <= 1e-6 +
 *    1e-5 |x|, evaluation ranks equal (at most one near tie), one Adam step
 *    within the change its gradient difference implies (lr |dg| eps /
 *    (m + eps)^2 + 1e-6 + 1e-5 |p|, m the smaller |g|; see test_cpu_ref.c).
 *    Why: the same operations on the same samples and masks, summed in
 *    other orders (OpenBLAS as cuBLAS over whole tables and batches, column
 *    sums in groups of 64 rows, segment sums by chunks of 32, against the
 *    reference's sample-by-sample sums): a few ulps of each sum's
 *    magnitudes, as for the cpu backend.
 *  - the scoring path (score.cu): scores of 1, 1000 and 70000 pairs (four
 *    chunks through both transfer slots) within the logits' tolerance of
 *    the cpu backend's and bit for bit ncf_sigmoid of the emulated logits
 *    (the sigmoid in the head kernel is the host's formula); the first bad
 *    id among chunks named, once, and the next call right; pairs kept on
 *    the device scoring as the host path, bit for bit;
 *  - scoring graphs (graphs.cu, captured and replayed by the emulation):
 *    one capture per chunk, replays right after set_state and a training
 *    step, a new capture after the row buffers move; a capture that fails
 *    (cuBLAS refusing it) says nothing at the normal level and one line at
 *    -v, and plain launches score right;
 *  - NCF_CUDA_SYNC=1: the same gradient, step and scores bit for bit, no
 *    graphs; a kernel that faults (__trap) named with its file and line
 *    with it, surfacing at the synchronisation with a hint without it, in
 *    one line either way;
 *  - fp16: a NaN made in the forward pass (inf - inf in the first layer)
 *    reaches the logits through the ReLU and skips the step;
 *  - more ranks on a node than devices refused at open (-3); several ranks'
 *    communicator made at open (refused there in this build, without NCCL);
 *  - a whole epoch's loss against the cpu backend's (relative 1e-5), and a
 *    run stopped after three steps and resumed from its state equal to the
 *    uninterrupted one bit for bit.
 *  - the fused dense layers (mlp.cu, wmma tiles emulated, the threads of a
 *    block as fibers) against their definition: fp32 bit for bit, tf32,
 *    bf16 and fp16 within the bounds argued at test_linear and
 *    test_linear_w;
 *  - the two training steps (NCF_CUDA_PATH=fused, the default, and
 *    unfused): the step tests above run on each (training, ranks, low
 *    precision, a run, the reference, NCF_CUDA_SYNC and faults, the fp16
 *    NaN, the whole epoch and the resume), and the two against each other
 *    (test_paths); losses kept on the device and taken at once
 *    (test_deferred_loss);
 *  - the cost recorder (cost.cuh): a live step notes every launch that the
 *    emulation runs, the dry run (bench_gpu --cost) the same launches and
 *    bytes;
 *  - the fused step's CUDA graph (graphs.cu graph_step: captured each step,
 *    swapped in with cudaGraphExecUpdate, replayed by the emulation): four
 *    steps bit for bit the same as plain launches, as NCF_CUDA_SYNC=1, as
 *    the graph under the other stream mode, and as the plain launches after
 *    a capture that fails (one line at -v), in fp32, bf16 and fp16.
 * tests/unit/test_cuda_emu_lazy.t runs all of it again with lazy streams
 * (NCF_EMU_LAZY=1, emu.h), which fails any check whose work is not ordered
 * by a synchronisation or an event: the transfer pipeline, every read of a
 * result.
 * What it does not check: the CUB radix sort, real GPU rounding (expf,
 * tensor cores), real concurrency and timing: tests/gpu does, on a GPU.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

extern "C" {
#include "backend_impl.h"
#include "err.h"
#include "metrics.h"
#include "model.h"
}
#include "cuda/cuda.h"
#include "cuda/test_hooks.h"
#include "ncf_hd.h"
#include "tap.h"

typedef std::vector<float> fvec;

/* x rounded to bf16 / fp16 (nearest even) and back, as the device rounds. */
static float ncf_test_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	u &= 0xffff0000u;
	memcpy(&x, &u, 4);
	return x;
}
static float ncf_test_f16(float x)
{
	/* fp16 has 11 significant bits: round the float's 24 to 11 (nearest
	 * even); the test's values (|x| in [2^-14, 65504) or 0) stay normal */
	if (x == 0.0f || fabsf(x) < 6.2e-5f)
		return fabsf(x) < 6.2e-5f && x != 0.0f ? (float)(nearbyint(x * 16777216.0) / 16777216.0)
						       : x;
	uint32_t u;
	memcpy(&u, &x, 4);
	u += 0xfffu + ((u >> 13) & 1u);
	u &= 0xffffe000u;
	memcpy(&x, &u, 4);
	return x;
}

/* ---- a small data set, built from Philox ------------------------------- */

struct data {
	uint32_t U, I, N;
	std::vector<int64_t> offsets;
	std::vector<uint32_t> items, entry_user, test, neg;
	uint8_t *counted;
};

static uint32_t rnd(uint64_t seed, uint32_t a, uint64_t idx, uint32_t n)
{
	return ncf_uniform_below(ncf_rng(seed, NCF_RNG_BENCH, a, idx, 0).v[0], n);
}

/* U users with 2..2+spread positives each (items skewed towards low ids
 * for a few users, so that some ids fill several segment chunks), N
 * evaluation negatives. */
static void make_data(struct data *d, uint32_t U, uint32_t I, uint32_t N, uint32_t spread,
		      uint64_t seed)
{
	d->U = U, d->I = I, d->N = N;
	d->offsets.assign(1, 0);
	d->items.clear(), d->entry_user.clear(), d->test.clear(), d->neg.clear();
	std::vector<uint8_t> has(I);
	for (uint32_t u = 0; u < U; u++) {
		std::fill(has.begin(), has.end(), 0);
		uint32_t k = 2 + rnd(seed, 1, u, spread);
		for (uint32_t t = 0; t < k; t++) {
			uint32_t it = rnd(seed, 2, (uint64_t)u * 1000 + t, I);
			if (t % 2 == 0)
				it = it % 5; /* popular items */
			has[it] = 1;
		}
		for (uint32_t it = 0; it < I; it++)
			if (has[it]) {
				d->items.push_back(it);
				d->entry_user.push_back(u);
			}
		d->offsets.push_back((int64_t)d->items.size());
		uint32_t t = rnd(seed, 3, u, I);
		while (has[t])
			t = (t + 1) % I;
		d->test.push_back(t);
		for (uint32_t q = 0; q < N; q++) {
			uint32_t it = rnd(seed, 4, (uint64_t)u * N + q, I);
			for (int a = 0; has[it] && a < 100; a++)
				it = rnd(seed, 5 + a, (uint64_t)u * N + q, I);
			d->neg.push_back(it);
		}
	}
	d->counted = ncf_eval_mask(d->test.data(), d->neg.data(), U, N, I);
}

static struct ncf_train_data train_data(const struct data *d)
{
	struct ncf_train_data td;
	td.users = d->U;
	td.items = d->I;
	td.positives = (int64_t)d->items.size();
	td.offsets = d->offsets.data();
	td.items_csr = d->items.data();
	td.entry_user = d->entry_user.data();
	return td;
}

static struct ncf_eval_data eval_data(const struct data *d)
{
	struct ncf_eval_data ed;
	ed.users = d->U;
	ed.negatives = d->N;
	ed.test_items = d->test.data();
	ed.neg = d->neg.data();
	ed.counted = d->counted;
	return ed;
}

/* ---- backends ----------------------------------------------------------- */

static struct ncf_dist one = {0, 1, 0, 1, 0, 0.0};

/* The step's code path under test (NCF_CUDA_PATH, read when a backend is
 * opened): the tests of steps run once on each. */
static const char *g_path = "fused";

static struct ncf_hparams hparams(uint64_t batch, float dropout, int true_neg)
{
	struct ncf_hparams hp;
	memset(&hp, 0, sizeof hp);
	hp.lr = 0.0045f;
	hp.beta1 = 0.25f;
	hp.beta2 = 0.5f;
	hp.eps = 1e-8f;
	hp.dropout = dropout;
	hp.negatives = 4;
	hp.true_neg = (uint32_t)true_neg;
	hp.batch = batch;
	hp.seed = 7;
	return hp;
}

/* Open impl for shape s on data d with parameters initialised from seed. */
static int open_be(struct ncf_backend *be, const struct ncf_backend_i *impl,
		   const struct ncf_shape *s, const struct ncf_hparams *hp, enum ncf_precision p,
		   struct ncf_dist *dist, const struct data *d)
{
	if (ncf_backend_open_impl(be, impl, s, hp, p, 2, dist) != 0)
		return -1;
	fvec params(be->layout.total);
	ncf_model_init(s, &be->layout, 3, params.data());
	struct ncf_train_data td = train_data(d);
	struct ncf_eval_data ed = eval_data(d);
	if (ncf_backend_set_state(be, params.data(), NULL, NULL) ||
	    ncf_backend_set_train_data(be, &td) || ncf_backend_set_eval_data(be, &ed))
		return -1;
	return 0;
}

static void close_be(struct ncf_backend *be)
{
	ncf_backend_close(be);
}

static fvec get_params(struct ncf_backend *be)
{
	fvec p(be->layout.total);
	ncf_backend_get_state(be, p.data(), NULL, NULL);
	return p;
}

/* ---- comparisons -------------------------------------------------------- */

struct tensor {
	const char *name;
	size_t off, n;
};

static std::vector<struct tensor> tensors(const struct ncf_backend *be)
{
	const struct ncf_layout *L = &be->layout;
	const struct ncf_shape *s = &be->shape;
	static char names[NCF_MAX_LAYERS][2][16];
	std::vector<struct tensor> t;
	size_t U = s->users, I = s->items, F = s->factors, M = ncf_shape_m(s);
	t.push_back({"gmf_user", L->gmf_user, U * F});
	t.push_back({"gmf_item", L->gmf_item, I * F});
	t.push_back({"mlp_user", L->mlp_user, U * M});
	t.push_back({"mlp_item", L->mlp_item, I * M});
	for (uint32_t k = 1; k < s->n_layers; k++) {
		snprintf(names[k][0], 16, "W%u", k);
		snprintf(names[k][1], 16, "b%u", k);
		t.push_back({names[k][0], L->w[k], (size_t)s->layers[k] * s->layers[k - 1]});
		t.push_back({names[k][1], L->b[k], s->layers[k]});
	}
	t.push_back({"head_w", L->head_w, F + ncf_shape_last(s)});
	t.push_back({"head_b", L->head_b, 1});
	return t;
}

/* |got - want| <= atol + rtol |want| elementwise; the first mismatches go
 * to the TAP diagnostics.  Returns 1 when all are close. */
static int close_all(const float *got, const float *want, size_t n, double atol, double rtol,
		     const char *what, double *maxdiff)
{
	int bad = 0;
	double md = 0;
	for (size_t j = 0; j < n; j++) {
		double d = fabs((double)got[j] - want[j]);
		if (d > md || isnan(d))
			md = isnan(d) ? INFINITY : d;
		if (!(d <= atol + rtol * fabs(want[j]))) {
			if (bad < 5)
				tap_diag("%s[%zu]: got %.9g, want %.9g", what, j, got[j], want[j]);
			bad++;
		}
	}
	if (bad)
		tap_diag("%s: %d of %zu beyond %g + %g |x|", what, bad, n, atol, rtol);
	if (maxdiff)
		*maxdiff = md;
	return bad == 0;
}

/* Per tensor: |d| <= rel_max * max|want| + rtol |want|. */
static int close_tensors(const struct ncf_backend *be, const float *got, const float *want,
			 double rel_max, double rtol, const char *what)
{
	int ok = 1;
	for (const struct tensor &t : tensors(be)) {
		double mx = 0;
		for (size_t j = 0; j < t.n; j++)
			mx = std::max(mx, (double)fabsf(want[t.off + j]));
		char name[64];
		snprintf(name, sizeof name, "%s %s", what, t.name);
		ok &= close_all(got + t.off, want + t.off, t.n, rel_max * mx, rtol, name, NULL);
	}
	return ok;
}

/* Relative L2 error per tensor <= tol. */
static int l2_tensors(const struct ncf_backend *be, const float *got, const float *want,
		      double tol, const char *what)
{
	int ok = 1;
	for (const struct tensor &t : tensors(be)) {
		double num = 0, den = 0;
		for (size_t j = 0; j < t.n; j++) {
			double d = (double)got[t.off + j] - want[t.off + j];
			num += d * d;
			den += (double)want[t.off + j] * want[t.off + j];
		}
		double rel = den > 0 ? sqrt(num / den) : sqrt(num);
		if (!(rel <= tol) && !(den == 0 && num < 1e-20)) {
			tap_diag("%s %s: relative L2 error %.3g > %g", what, t.name, rel, tol);
			ok = 0;
		}
		if (getenv("NCF_TEST_VERBOSE"))
			tap_diag("%s %s: relative L2 error %.3g", what, t.name, rel);
	}
	return ok;
}

/* ---- the tests ---------------------------------------------------------- */

static void test_samples(const struct data *d, const struct ncf_shape *s)
{
	for (int tn = 0; tn < 2; tn++) {
		struct ncf_hparams hp = hparams(256, 0.5f, tn);
		struct ncf_backend be;
		if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
			tap_ok(0, "open the emulated cuda backend");
			return;
		}
		int64_t P = (int64_t)d->items.size();
		uint64_t S = (uint64_t)P * 5;
		std::vector<uint32_t> u(S), it(S);
		std::vector<uint8_t> lab(S);
		int ok = 1;
		for (uint32_t e = 0; e < 3 && ok; e++) {
			ok = ncf_cuda_debug_samples(&be, e, 0, S, u.data(), it.data(), lab.data()) == 0;
			ncf_perm perm = ncf_perm_make(S, hp.seed, e);
			for (uint64_t t = 0; t < S && ok; t++) {
				uint32_t wu, wi;
				int y = ncf_sample_at(&perm, t, hp.seed, e, P, d->I, tn,
						      d->entry_user.data(), d->offsets.data(),
						      d->items.data(), &wu, &wi);
				if (wu != u[t] || wi != it[t] || y != lab[t]) {
					tap_diag("epoch %u position %llu: (%u, %u, %d), want (%u, %u, %d)",
						 e, (unsigned long long)t, u[t], it[t], lab[t], wu, wi, y);
					ok = 0;
				}
			}
		}
		tap_ok(ok, "sample stream bit-exact, 3 epochs of %llu samples%s",
		       (unsigned long long)S, tn ? ", --true-negatives" : "");
		close_be(&be);
	}
}

/* Bias (zero) + ReLU + dropout written from its definition (reference.c
 * dropout_mask and relu_dropout_forward). */
static void dropout_ref(const float *z, float *out, size_t n, uint32_t H, float p, uint64_t seed,
			uint32_t epoch, uint64_t pos0, uint32_t layer)
{
	uint32_t drop16 = ncf_dropout_threshold(p);
	float scale = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
	for (size_t j = 0; j < n; j++)
		for (uint32_t h = 0; h < H; h++) {
			float x = z[j * H + h] + 0.0f;
			float r = x > 0.0f ? x : 0.0f;
			if (p > 0) {
				ncf_u32x4 bits = ncf_dropout_bits(seed, epoch, pos0 + j, layer, h / 8);
				r = r * (ncf_dropout_keep(bits, h % 8, drop16) ? scale : 0.0f);
			}
			out[j * H + h] = r;
		}
}

static void test_dropout(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the emulated cuda backend");
		return;
	}
	const uint32_t widths[] = {24, 13, 5};
	int ok = 1;
	size_t kept = 0, total = 0;
	for (uint32_t w = 0; w < 3; w++) {
		uint32_t H = widths[w];
		size_t n = 97;
		fvec z(n * H), got(n * H), want(n * H);
		for (size_t j = 0; j < z.size(); j++)
			z[j] = (float)((int)rnd(9, w, j, 2001) - 500) * 0.01f;
		for (uint32_t layer = 0; layer < 3; layer++) {
			uint64_t pos0 = 1000003ull * layer + 17;
			ok &= ncf_cuda_debug_dropout(&be, 2, pos0, layer, n, H, z.data(), got.data()) ==
			      0;
			dropout_ref(z.data(), want.data(), n, H, hp.dropout, hp.seed, 2, pos0, layer);
			ok &= memcmp(got.data(), want.data(), n * H * sizeof(float)) == 0;
			for (size_t j = 0; j < n * H; j++) {
				kept += z[j] > 0 && want[j] != 0;
				total += z[j] > 0;
			}
		}
	}
	tap_ok(ok, "bias + ReLU + dropout bit-exact (widths 24, 13, 5; layers 0-2)");
	tap_ok(kept > total * 4 / 10 && kept < total * 6 / 10,
	       "dropout keeps about half (%zu of %zu)", kept, total);
	close_be(&be);
}

static void test_adam(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the emulated cuda backend");
		return;
	}
	size_t n = 20000;
	fvec p(n), m(n), v(n), g(n);
	for (size_t j = 0; j < n; j++) {
		p[j] = ((float)rnd(11, 0, j, 1 << 20) - 524288.0f) * 1e-6f;
		m[j] = ((float)rnd(11, 1, j, 1 << 20) - 524288.0f) * 1e-9f;
		v[j] = (float)rnd(11, 2, j, 1 << 20) * 1e-14f;
		g[j] = ((float)rnd(11, 3, j, 1 << 20) - 524288.0f) * powf(10.0f, -(float)(j % 12));
	}
	int ok = 1;
	for (uint64_t step = 1; step < 40; step += 13) {
		fvec p2 = p, m2 = m, v2 = v, p3 = p, m3 = m, v3 = v;
		ok &= ncf_cuda_debug_adam(&be, p2.data(), m2.data(), v2.data(), g.data(), n, step) == 0;
		struct ncf_adam_k k;
		ncf_adam_constants(&hp, step, &k);
		for (size_t j = 0; j < n; j++)
			ncf_adam_update(&p3[j], &m3[j], &v3[j], g[j], &k);
		ok &= !memcmp(p2.data(), p3.data(), n * 4) && !memcmp(m2.data(), m3.data(), n * 4) &&
		      !memcmp(v2.data(), v3.data(), n * 4);
	}
	tap_ok(ok, "dense Adam pass bit-exact against ncf_adam_update (steps 1, 14, 27)");
	close_be(&be);
}

static void test_segsum(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the emulated cuda backend");
		return;
	}
	/* keys: 0 very often (many chunks), 1..9 often, the rest of 0..199 rarely,
	 * 200..299 never */
	size_t n = 1500;
	uint32_t K = 300, H = 5;
	std::vector<uint32_t> key(n);
	fvec src(n * H), got((size_t)K * H);
	for (size_t j = 0; j < n; j++) {
		uint32_t r = rnd(13, 0, j, 100);
		key[j] = r < 30 ? 0 : r < 70 ? 1 + rnd(13, 1, j, 9) : rnd(13, 2, j, 200);
		for (uint32_t h = 0; h < H; h++)
			src[j * H + h] = ((float)rnd(13, 3, j * H + h, 20001) - 10000.0f) * 1e-3f;
	}
	int ok = ncf_cuda_debug_segsum(&be, key.data(), n, K, src.data(), H, got.data()) == 0;
	/* the reference: sums in sample order */
	fvec want((size_t)K * H, 0.0f), mag((size_t)K * H, 0.0f);
	std::vector<size_t> count(K), first(K, n), last(K);
	for (size_t j = 0; j < n; j++) {
		for (uint32_t h = 0; h < H; h++) {
			want[(size_t)key[j] * H + h] += src[j * H + h];
			mag[(size_t)key[j] * H + h] += fabsf(src[j * H + h]);
		}
		count[key[j]]++;
	}
	/* sorted position range of each key, to know which fit one chunk */
	std::vector<uint32_t> sorted = key;
	std::stable_sort(sorted.begin(), sorted.end());
	for (size_t e = 0; e < n; e++) {
		first[sorted[e]] = std::min(first[sorted[e]], e);
		last[sorted[e]] = e;
	}
	int exact = 1, near = 1, multi = 0;
	for (uint32_t k = 0; k < K; k++)
		for (uint32_t h = 0; h < H; h++) {
			size_t o = (size_t)k * H + h;
			if (count[k] == 0) {
				exact &= got[o] == 0.0f;
				continue;
			}
			if (first[k] / 32 == last[k] / 32) {
				if (got[o] != want[o]) {
					tap_diag("key %u col %u: %.9g, want %.9g (one chunk)", k, h, got[o],
						 want[o]);
					exact = 0;
				}
			} else {
				multi += h == 0;
				if (!(fabsf(got[o] - want[o]) <= 1e-6f * mag[o])) {
					tap_diag("key %u col %u: %.9g, want %.9g", k, h, got[o], want[o]);
					near = 0;
				}
			}
		}
	tap_ok(ok && exact, "segment sums bit-exact for keys within one chunk, 0 for absent keys");
	tap_ok(ok && near && multi >= 2, "segment sums over several chunks (%d keys) within 1e-6",
	       multi);
	close_be(&be);
}

/* A value in [-1, 1) from Philox (purpose a, index j). */
static float urand(uint32_t a, uint64_t j)
{
	return ((float)rnd(21, a, j, 1u << 20) - 524288.0f) / 524288.0f;
}

/*
 * The fused dense layers (kernels/cuda/mlp.cu: tensor-core tiles, wmma
 * emulated by emu.h, threads of a block as fibers) against their
 * definition, written here as reference.c writes it (linear_forward,
 * dropout_mask, relu_dropout_forward; linear_backward's din, then
 * relu_dropout_backward with the mask read from h > 0):
 *  - fp32 (MMA_F32): bit for bit: each output sums its products in k order
 *    in fp32, then adds the bias, as reference.c does; the partial column
 *    sums (16 rows in order, then 4 row groups, per 128 rows) within 1e-6 of
 *    the sum of their magnitudes;
 *  - tf32: |d| <= 2^-10 S + 1e-6 with S = scale sum |a_k b_k|: each input
 *    rounded to 10 mantissa bits moves each product by at most 2^-10 of it
 *    (two roundings of 2^-11), and ReLU and dropout do not enlarge a
 *    difference (a unit whose input changes sign differs by at most that);
 *  - bf16, fp16: inputs rounded on the host, the same sums on the rounded
 *    inputs as the reference (in double): |d| <= 2^-8 |x| (bf16; 2^-11
 *    fp16) for the output's own rounding + 2e-5 S for fp32 sums of up to
 *    256 products in another order (256 x 2^-24 < 2e-5).
 * Widths: multiples of 16, of 8, neither; rows not a multiple of 64.
 */
static void test_linear(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the emulated cuda backend");
		return;
	}
	const uint32_t dims[][2] = {{32, 24}, {13, 10}, {40, 256}, {256, 128}, {24, 5}};
	const char *mname[] = {"fp32", "tf32", "bf16", "fp16"};
	const double rel[] = {0, 0, 1.0 / 256, 1.0 / 2048}, sum_tol[] = {0, 1.0 / 1024, 2e-5, 2e-5};
	float scale = 1.0f / (1.0f - hp.dropout);
	uint32_t drop16 = ncf_dropout_threshold(hp.dropout);
	for (int mode = 0; mode < 4; mode++) {
		int okf = 1, okb = 1, okp = 1;
		double worst_f = 0, worst_b = 0;
		for (const auto &dm : dims) {
			uint32_t in = dm[0], out = dm[1], layer = 1;
			size_t rows = 150, nb = (rows + 127) / 128;
			uint64_t pos0 = 77;
			fvec X(rows * in), W((size_t)out * in), b(out), Y(rows * out);
			fvec dZ(rows * out), H(rows * in), dX(rows * in), part(nb * in);
			for (size_t j = 0; j < X.size(); j++)
				X[j] = urand(1, j);
			for (size_t j = 0; j < W.size(); j++)
				W[j] = urand(2, j) * 0.3f;
			for (size_t j = 0; j < out; j++)
				b[j] = urand(3, j) * 0.1f;
			for (size_t j = 0; j < dZ.size(); j++)
				dZ[j] = urand(4, j);
			for (size_t j = 0; j < H.size(); j++)
				H[j] = urand(5, j) > 0.2f ? urand(6, j) : 0.0f; /* some units off */
			/* the inputs as the kernel sees them */
			auto rounded = [&](fvec v) {
				for (float &x : v)
					x = mode == 2 ? ncf_test_bf16(x) : mode == 3 ? ncf_test_f16(x) : x;
				return v;
			};
			fvec Xr = rounded(X), Wr = rounded(W), dZr = rounded(dZ), Hr = rounded(H);
			okf &= !ncf_cuda_debug_linear(&be, 0, mode, 2, pos0, layer, rows, in, out,
						      X.data(), W.data(), b.data(), Y.data(), NULL);
			okb &= !ncf_cuda_debug_linear(&be, 1, mode, 2, pos0, layer, rows, in, out,
						      dZ.data(), W.data(), H.data(), dX.data(),
						      part.data());
			for (size_t j = 0; j < rows; j++) {
				for (uint32_t o = 0; o < out; o++) {
					float acc = 0.0f;
					double dacc = 0, S = 0;
					for (uint32_t q = 0; q < in; q++) {
						acc += Xr[j * in + q] * Wr[(size_t)o * in + q];
						dacc += (double)Xr[j * in + q] * Wr[(size_t)o * in + q];
						S += fabs((double)Xr[j * in + q] * Wr[(size_t)o * in + q]);
					}
					ncf_u32x4 bits = ncf_dropout_bits(hp.seed, 2, pos0 + j, layer, o / 8);
					float mult = ncf_dropout_keep(bits, o % 8, drop16) ? scale : 0.0f;
					float z = acc + b[o];
					float want = (z > 0.0f ? z : 0.0f) * mult;
					double dz = dacc + b[o];
					double dwant = (dz > 0 ? dz : 0) * mult;
					float got = Y[j * out + o];
					double err = mode == 0 ? (got == want ? 0 : INFINITY)
							       : fabs(got - dwant);
					double tol = rel[mode] * fabs(dwant) + sum_tol[mode] * S * scale +
						     (mode ? 1e-6 : 0);
					if (!(err <= tol) && okf) {
						tap_diag("%s fwd %ux%u [%zu][%u]: %.9g, want %.9g", mname[mode],
							 out, in, j, o, got, mode ? dwant : want);
						okf = 0;
					}
					worst_f = std::max(worst_f, tol > 0 ? err / tol : err);
				}
				for (uint32_t q = 0; q < in; q++) {
					float acc = 0.0f;
					double dacc = 0, S = 0;
					for (uint32_t o = 0; o < out; o++) {
						acc += dZr[j * out + o] * Wr[(size_t)o * in + q];
						dacc += (double)dZr[j * out + o] * Wr[(size_t)o * in + q];
						S += fabs((double)dZr[j * out + o] * Wr[(size_t)o * in + q]);
					}
					float h = Hr[j * in + q];
					float want = h > 0.0f ? acc * scale : 0.0f;
					double dwant = h > 0.0f ? dacc * scale : 0;
					float got = dX[j * in + q];
					double err = mode == 0 ? (got == want ? 0 : INFINITY)
							       : fabs(got - dwant);
					double tol = rel[mode] * fabs(dwant) + sum_tol[mode] * S * scale +
						     (mode ? 1e-6 : 0);
					if (!(err <= tol) && okb) {
						tap_diag("%s bwd %ux%u [%zu][%u]: %.9g, want %.9g", mname[mode],
							 out, in, j, q, got, mode ? dwant : want);
						okb = 0;
					}
					worst_b = std::max(worst_b, tol > 0 ? err / tol : err);
				}
			}
			/* partials against the kernel's own dX: order only */
			for (size_t p = 0; p < nb; p++)
				for (uint32_t q = 0; q < in; q++) {
					double want = 0, mag = 0;
					for (size_t j = p * 128; j < std::min(rows, (p + 1) * 128); j++) {
						want += dX[j * in + q];
						mag += fabs(dX[j * in + q]);
					}
					double tol = (mode >= 2 ? 1.0 / 256 : 1e-6) * mag + 1e-7;
					if (!(fabs(part[p * in + q] - want) <= tol) && okp) {
						tap_diag("%s partial %u of %ux%u: %.9g, want %.9g", mname[mode],
							 q, out, in, part[p * in + q], want);
						okp = 0;
					}
				}
		}
		tap_ok(okf, "%s: fused forward (matrix product, bias, ReLU, dropout) %s (worst %.3g of "
			    "the bound)",
		       mname[mode], mode ? "within its bound" : "bit for bit", worst_f);
		tap_ok(okb, "%s: fused backward (product, mask from h > 0, scale) %s (worst %.3g)",
		       mname[mode], mode ? "within its bound" : "bit for bit", worst_b);
		tap_ok(okp, "%s: per-block column sums of the backward's output", mname[mode]);
	}
	close_be(&be);
}

/*
 * The backward with the weight gradient (mlp.cu linear_bwdw: one pass
 * gives dX, the bias gradient's and dW's per-group partials; then
 * reduce_partials adds the groups) against the definitions in double:
 *  - dX: fp32 bit for bit (the same k order as linear_backward's din), the
 *    other modes within test_linear's bounds;
 *  - dW = dZ^T H and db = column sums of dX: |d| <= 1e-6 S (fp32: sums of
 *    up to 2000 terms in other orders, 2000 x 2^-24 < 1.2e-4 of S at worst,
 *    in practice ~sqrt(2000) x 2^-24 = 3e-6: the bound allows 1e-5 S), TF32
 *    2^-10 S (inputs rounded), bf16 / fp16 2^-8 S / 2^-11 S (inputs rounded
 *    on the host already: only the sums' order and dX's rounding), with S
 *    the sum of the terms' magnitudes.
 * Rows span several row groups of a block (rows > 64 x groups) and blocks
 * of two column groups (in > 128).
 */
static void test_linear_w(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the emulated cuda backend");
		return;
	}
	const uint32_t dims[][2] = {{32, 24}, {13, 10}, {200, 64}, {24, 5}};
	const char *mname[] = {"fp32", "tf32", "bf16", "fp16"};
	const double tolx[] = {0, 1.0 / 1024, 1.0 / 256, 1.0 / 2048};
	const double tolw[] = {1e-5, 1.0 / 1024, 1.0 / 256, 1.0 / 2048};
	float scale = 1.0f / (1.0f - hp.dropout);
	for (int mode = 0; mode < 4; mode++) {
		int okx = 1, okw = 1;
		double worst = 0;
		for (const auto &dm : dims) {
			uint32_t in = dm[0], out = dm[1];
			/* 13 x 10 (not tf32): more than 256 groups of 64
			 * rows (a group sums two tiles); 200 x 64: two column
			 * groups */
			size_t rows = in == 13 && mode != 1 ? 16700 : in > 100 ? 150 : 700;
			fvec dZ(rows * out), W((size_t)out * in), H(rows * in), dX(rows * in);
			fvec db(in), dW((size_t)out * in);
			for (size_t j = 0; j < dZ.size(); j++)
				dZ[j] = urand(7, j);
			for (size_t j = 0; j < W.size(); j++)
				W[j] = urand(8, j) * 0.3f;
			for (size_t j = 0; j < H.size(); j++)
				H[j] = urand(9, j) > 0.2f ? urand(10, j) : 0.0f;
			auto rounded = [&](fvec v) {
				for (float &x : v)
					x = mode == 2 ? ncf_test_bf16(x) : mode == 3 ? ncf_test_f16(x) : x;
				return v;
			};
			fvec dZr = rounded(dZ), Wr = rounded(W), Hr = rounded(H);
			int ok = !ncf_cuda_debug_linear_w(&be, mode, rows, in, out, dZ.data(), W.data(),
							  H.data(), dX.data(), db.data(), dW.data());
			okx &= ok;
			okw &= ok;
			std::vector<double> sdb(in, 0), mdb(in, 0);
			for (size_t j = 0; j < rows && okx; j++)
				for (uint32_t q = 0; q < in; q++) {
					float acc = 0.0f;
					double dacc = 0, S = 0;
					for (uint32_t o = 0; o < out; o++) {
						acc += dZr[j * out + o] * Wr[(size_t)o * in + q];
						dacc += (double)dZr[j * out + o] * Wr[(size_t)o * in + q];
						S += fabs((double)dZr[j * out + o] * Wr[(size_t)o * in + q]);
					}
					float h = Hr[j * in + q];
					float want = h > 0.0f ? acc * scale : 0.0f;
					double dwant = h > 0.0f ? dacc * scale : 0;
					float got = dX[j * in + q];
					double err = mode == 0 ? (got == want ? 0 : INFINITY) : fabs(got - dwant);
					double tol = tolx[mode] * (fabs(dwant) + 2 * S * scale) + (mode ? 1e-6 : 0);
					if (!(err <= tol)) {
						tap_diag("%s bwdw dX %ux%u [%zu][%u]: %.9g, want %.9g", mname[mode],
							 out, in, j, q, got, mode ? dwant : want);
						okx = 0;
						break;
					}
					sdb[q] += got;
					mdb[q] += fabs(got);
				}
			for (uint32_t q = 0; q < in && okw; q++)
				if (!(fabs(db[q] - sdb[q]) <= tolw[mode] * mdb[q] + 1e-7)) {
					tap_diag("%s bwdw db[%u]: %.9g, want %.9g", mname[mode], q, db[q],
						 sdb[q]);
					okw = 0;
				}
			for (uint32_t o = 0; o < out && okw; o++)
				for (uint32_t q = 0; q < in && okw; q++) {
					double want = 0, S = 0;
					for (size_t j = 0; j < rows; j++) {
						double t = (double)dZr[j * out + o] * Hr[j * in + q];
						want += t;
						S += fabs(t);
					}
					double err = fabs(dW[(size_t)o * in + q] - want);
					worst = std::max(worst, S > 0 ? err / S : err);
					if (!(err <= tolw[mode] * S + 1e-7)) {
						tap_diag("%s bwdw dW %ux%u [%u][%u]: %.9g, want %.9g", mname[mode],
							 out, in, o, q, dW[(size_t)o * in + q], want);
						okw = 0;
					}
				}
		}
		tap_ok(okx, "%s: fused backward with dW: dX %s", mname[mode],
		       mode ? "within its bound" : "bit for bit");
		tap_ok(okw, "%s: fused backward with dW: dW and the bias gradient after the "
			    "fixed-order reduction (worst dW error %.2g of its terms' magnitude)",
		       mname[mode], worst);
	}
	close_be(&be);
}

/* Logits, scores and ranks of emu against cpu on the same parameters. */
static void test_forward(const struct data *d, const struct ncf_shape *s, const char *label)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	size_t n = (size_t)d->U * d->I;
	std::vector<uint32_t> us(n), is(n);
	for (size_t j = 0; j < n; j++)
		us[j] = (uint32_t)(j / d->I), is[j] = (uint32_t)(j % d->I);
	fvec lc(n), le(n), sc(n), se(n);
	int ok = !ncf_backend_logits(&cpu, us.data(), is.data(), n, lc.data()) &&
		 !ncf_backend_logits(&emu, us.data(), is.data(), n, le.data());
	double md = 0;
	tap_ok(ok && close_all(le.data(), lc.data(), n, 1e-6, 1e-5, "logit", &md),
	       "%s: logits of all %zu pairs equal to the cpu backend's (max |d| %.2g)", label, n,
	       md);
	ok = !ncf_backend_score(&cpu, us.data(), is.data(), n, sc.data()) &&
	     !ncf_backend_score(&emu, us.data(), is.data(), n, se.data());
	tap_ok(ok && close_all(se.data(), sc.data(), n, 1e-6, 1e-5, "score", NULL),
	       "%s: scores equal to the cpu backend's", label);
	std::vector<uint32_t> rc(d->U), re(d->U);
	ok = !ncf_backend_eval_ranks(&cpu, 0, d->U, rc.data()) &&
	     !ncf_backend_eval_ranks(&emu, 0, d->U, re.data());
	int same = 0;
	for (uint32_t u = 0; u < d->U; u++) {
		if (rc[u] != re[u])
			tap_diag("user %u: rank %u, cpu %u", u, re[u], rc[u]);
		same += rc[u] == re[u];
	}
	tap_ok(ok && same == (int)d->U, "%s: evaluation ranks equal for all %u users", label, d->U);
	/* a slice of users, as ranks get them */
	std::vector<uint32_t> part(d->U);
	ok = !ncf_backend_eval_ranks(&emu, 5, d->U - 3, part.data());
	tap_ok(ok && std::equal(part.begin(), part.begin() + (d->U - 8), re.begin() + 5),
	       "%s: ranks of a slice of users equal those of all", label);
	close_be(&cpu);
	close_be(&emu);
}

/* One step's gradient, one and five steps' parameters. */
static void test_training(const struct data *d, const struct ncf_shape *s, float dropout,
			  const char *label)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, dropout, 0);
	struct ncf_backend cpu, emu;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	size_t total = cpu.layout.total;
	uint64_t S = (uint64_t)d->items.size() * 5;
	fvec gc(total), ge(total);
	double lc = 0, le = 0;
	int ok = 1;
	for (int k = 0; k < 2; k++) {
		uint64_t first = k ? S - 300 : 0, n = k ? 300 : B; /* a short last batch too */
		ok &= !ncf_backend_grad(&cpu, 1, first, n, gc.data(), &lc) &&
		      !ncf_backend_grad(&emu, 1, first, n, ge.data(), &le);
		ok &= close_tensors(&cpu, ge.data(), gc.data(), 1e-5, 1e-5, "grad");
		ok &= tap_close(le, lc, 0, 1e-6, "loss sum");
	}
	tap_ok(ok, "%s: gradients of two batches equal to the cpu backend's per tensor", label);
	/* one step */
	ok = !ncf_backend_train_step(&cpu, 0, 0, B, &lc) &&
	     !ncf_backend_train_step(&emu, 0, 0, B, &le);
	fvec pc = get_params(&cpu), pe = get_params(&emu);
	double md = 0;
	ok &= close_all(pe.data(), pc.data(), total, 1e-6, 1e-5, "params after 1 step", &md);
	tap_ok(ok && cpu.step == 1 && emu.step == 1,
	       "%s: parameters after one Adam step equal (max |d| %.2g)", label, md);
	/* four more, crossing into the next epoch */
	ok = 1;
	uint64_t pos = B;
	for (int k = 0; k < 4; k++) {
		uint32_t e = pos >= S ? 1 : 0;
		uint64_t first = pos % S, n = std::min<uint64_t>(B, S - first);
		ok &= !ncf_backend_train_step(&cpu, e, first, n, &lc) &&
		      !ncf_backend_train_step(&emu, e, first, n, &le);
		ok &= tap_close(le, lc, 0, 1e-5, "loss sum");
		pos += n;
	}
	pc = get_params(&cpu), pe = get_params(&emu);
	ok &= close_all(pe.data(), pc.data(), total, 1e-4, 0, "params after 5 steps", &md);
	fvec mc(total), me(total), vc(total), ve(total);
	ncf_backend_get_state(&cpu, NULL, mc.data(), vc.data());
	ncf_backend_get_state(&emu, NULL, me.data(), ve.data());
	ok &= close_tensors(&cpu, me.data(), mc.data(), 1e-4, 1e-4, "Adam m");
	tap_ok(ok, "%s: parameters after five steps within 1e-4 (max |d| %.2g)", label, md);
	/* evaluation after training: the tables follow the parameters */
	std::vector<uint32_t> rc(d->U), re(d->U);
	ok = !ncf_backend_eval_ranks(&cpu, 0, d->U, rc.data()) &&
	     !ncf_backend_eval_ranks(&emu, 0, d->U, re.data());
	int diff = 0;
	for (uint32_t u = 0; u < d->U; u++)
		diff += rc[u] != re[u];
	tap_ok(ok && diff <= 1, "%s: ranks after five steps equal (%d of %u differ)", label, diff,
	       d->U);
	close_be(&cpu);
	close_be(&emu);
}

/* Two ranks: each takes its slice; the sum of their gradients is one
 * rank's. */
static void test_ranks(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 333;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_dist r0 = {0, 2, 0, 2, 0, 0.0}, r1 = {1, 2, 1, 2, 0, 0.0};
	struct ncf_backend c0, e0, e1, e;
	if (open_be(&c0, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &r0, d) ||
	    open_be(&e0, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &r0, d) ||
	    open_be(&e1, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &r1, d) ||
	    open_be(&e, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	size_t total = c0.layout.total;
	fvec g0c(total), g0(total), g1(total), g(total);
	double l0c, l0, l1, l;
	int ok = !ncf_backend_grad(&c0, 0, 100, B, g0c.data(), &l0c) &&
		 !ncf_backend_grad(&e0, 0, 100, B, g0.data(), &l0) &&
		 !ncf_backend_grad(&e1, 0, 100, B, g1.data(), &l1) &&
		 !ncf_backend_grad(&e, 0, 100, B, g.data(), &l);
	ok &= close_tensors(&c0, g0.data(), g0c.data(), 1e-5, 1e-5, "rank 0 grad");
	tap_ok(ok, "%s: rank 0 of 2: gradient of its slice equal to the cpu backend's", g_path);
	for (size_t j = 0; j < total; j++)
		g0[j] += g1[j];
	ok = close_tensors(&e, g0.data(), g.data(), 1e-5, 1e-5, "rank sum") &&
	     tap_close(l0 + l1, l, 0, 1e-6, "loss");
	tap_ok(ok, "%s: ranks 0 + 1 of 2: gradients and losses sum to one rank's", g_path);
	close_be(&c0), close_be(&e0), close_be(&e1), close_be(&e);
}

static void test_low_precision(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend cpu;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the cpu backend");
		return;
	}
	size_t total = cpu.layout.total;
	fvec gc(total), ge(total);
	double lc, le;
	ncf_backend_grad(&cpu, 0, 0, B, gc.data(), &lc);
	size_t n = (size_t)d->U * 3;
	std::vector<uint32_t> us(n), is(n);
	for (size_t j = 0; j < n; j++)
		us[j] = (uint32_t)(j / 3), is[j] = (uint32_t)((j * 7) % d->I);
	fvec lgc(n), lge(n);
	ncf_backend_logits(&cpu, us.data(), is.data(), n, lgc.data());
	/* Bounds on the relative L2 error of each gradient tensor.  bf16 keeps
	 * 8 significant bits, fp16 and TF32 11: besides the rounding itself
	 * (2^-9, 2^-12 relative), a pre-activation near 0 may change sign,
	 * switching a ReLU unit off or on for one sample, which changes that
	 * sample's whole contribution; in this tiny model at initialisation,
	 * where a tensor's gradient is a sum of largely cancelling terms (one
	 * sample's share of 512 is ~1/sqrt(512) = 4%), a handful of such
	 * switches moves it by up to a few percent; how many happen is luck
	 * (seen: bf16 5.6% unfused, 4.1% fused; fp16 0.6%, 0.06%; TF32 5.0%
	 * fused).  The unfused path's emulated TF32 is fp32 (its GEMMs are
	 * OpenBLAS), the fused path's dense layers round their inputs to TF32
	 * (emu.h's wmma), as on a GPU. */
	const enum ncf_precision precs[] = {NCF_PRECISION_TF32, NCF_PRECISION_BF16,
					    NCF_PRECISION_FP16};
	int fused = !strcmp(g_path, "fused");
	const double tol[] = {fused ? 0.10 : 1e-4, 0.10, fused ? 0.10 : 0.02};
	for (int k = 0; k < 3; k++) {
		const char *name = ncf_precision_name(precs[k]);
		struct ncf_backend emu;
		if (open_be(&emu, &ncf_backend_cuda, s, &hp, precs[k], &one, d)) {
			tap_ok(0, "open the emulated backend in %s", name);
			continue;
		}
		int ok = !ncf_backend_grad(&emu, 0, 0, B, ge.data(), &le) &&
			 l2_tensors(&cpu, ge.data(), gc.data(), tol[k], name) &&
			 tap_close(le, lc, 0, 1e-2, "loss");
		ok &= !ncf_backend_logits(&emu, us.data(), is.data(), n, lge.data()) &&
		      close_all(lge.data(), lgc.data(), n, 2e-2, 2e-2, name, NULL);
		tap_ok(ok, "%s %s: gradient within %g (relative L2 per tensor), logits within 2e-2 of "
			   "fp32",
		       g_path, name, tol[k]);
		double loss;
		ok = 1;
		uint64_t S = (uint64_t)d->items.size() * 5, pos = 0;
		for (int st = 0; st < 3; st++) {
			uint64_t nb = std::min<uint64_t>(B, S - pos);
			ok &= !ncf_backend_train_step(&emu, 0, pos, nb, &loss) && isfinite(loss);
			pos = (pos + nb) % S;
		}
		tap_ok(ok && emu.step == 3, "%s %s: three training steps", g_path, name);
		close_be(&emu);
	}
	close_be(&cpu);

	/* fp16 dynamic loss scaling */
	struct ncf_backend emu;
	if (open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP16, &one, d)) {
		tap_ok(0, "open the emulated backend in fp16");
		return;
	}
	tap_ok(ncf_cuda_loss_scale(&emu) == 32768.0f, "fp16: loss scale starts at 2^15");
	fvec before = get_params(&emu);
	ncf_cuda_set_loss_scale(&emu, 1073741824.0f, 2); /* 2^30: dlogit overflows fp16 */
	double loss;
	int ok = !ncf_backend_train_step(&emu, 0, 0, B, &loss);
	fvec after = get_params(&emu);
	tap_ok(ok && emu.step == 0 && !memcmp(before.data(), after.data(), total * 4) &&
		       ncf_cuda_loss_scale(&emu) == 536870912.0f,
	       "fp16: an overflowing step is skipped and halves the scale (now %g)",
	       (double)ncf_cuda_loss_scale(&emu));
	ncf_cuda_set_loss_scale(&emu, 1024.0f, 2);
	ok = !ncf_backend_train_step(&emu, 0, 0, B, &loss) && emu.step == 1 &&
	     ncf_cuda_loss_scale(&emu) == 1024.0f;
	ok &= !ncf_backend_train_step(&emu, 0, B, B, &loss) && emu.step == 2 &&
	      ncf_cuda_loss_scale(&emu) == 2048.0f;
	tap_ok(ok, "fp16: good steps advance Adam and double the scale after the interval");
	close_be(&emu);
}

/* The cost recorder (kernels/cuda/cost.cuh): a step run live notes every
 * launch emu.h sees (kernels, GEMMs, memsets, copies; the sort's notes
 * stand for CUB's launches, which the CPU twin has none of), and the dry
 * run of ncf_cuda_step_cost notes the same launches with the same bytes.
 * So the cost model counts what the code launches. */
static void test_cost(const struct data *d, const struct ncf_shape *s, const char *path)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	const enum ncf_precision precs[] = {NCF_PRECISION_FP32, NCF_PRECISION_BF16,
					    NCF_PRECISION_FP16};
	setenv("NCF_CUDA_PATH", path, 1);
	for (int k = 0; k < 3; k++) {
		struct ncf_backend emu;
		const char *pn = ncf_precision_name(precs[k]);
		if (open_be(&emu, &ncf_backend_cuda, s, &hp, precs[k], &one, d)) {
			tap_ok(0, "open the emulated backend");
			continue;
		}
		static struct ncf_cuda_cost live, dry;
		unsigned long c0[4], c1[4];
		double loss;
		/* a step in the middle of training (the dry run's model of one) */
		int ok = !ncf_backend_train_step(&emu, 0, B, B, &loss) &&
			 !ncf_cuda_debug_emu_counts(c0) &&
			 !ncf_cuda_debug_step_cost(&emu, 0, 0, B, NULL, &live) &&
			 !ncf_cuda_debug_emu_counts(c1) && !ncf_backend_take_loss(&emu, &loss);
		ok &= live.kernels == c1[0] - c0[0] && live.gemms == c1[1] - c0[1] &&
		      live.memsets == c1[2] - c0[2] && live.copies == c1[3] - c0[3];
		if (!ok)
			tap_diag("noted %u kernels, %u gemms, %u memsets, %u copies; emu saw %lu, %lu, "
				 "%lu, %lu",
				 live.kernels, live.gemms, live.memsets, live.copies, c1[0] - c0[0],
				 c1[1] - c0[1], c1[2] - c0[2], c1[3] - c0[3]);
		tap_ok(ok && live.dropped == 0 && live.bytes > 0 && live.flops > 0,
		       "%s %s: the recorder noted each of the step's %u launches once", path, pn,
		       live.launches);
		int64_t P = (int64_t)d->items.size();
		ok = !ncf_cuda_step_cost(s, &hp, precs[k], path, P, &dry) && dry.n == live.n &&
		     dry.launches == live.launches && dry.bytes == live.bytes;
		for (unsigned j = 0; ok && j < dry.n; j++)
			if (strcmp(dry.item[j].name, live.item[j].name) ||
			    dry.item[j].bytes != live.item[j].bytes) {
				tap_diag("launch %u: dry %s %.0f, live %s %.0f", j + 1, dry.item[j].name,
					 dry.item[j].bytes, live.item[j].name, live.item[j].bytes);
				ok = 0;
			}
		tap_ok(ok, "%s %s: the dry cost run notes the same launches and bytes (%.0f)", path,
		       pn, dry.bytes);
		close_be(&emu);
	}
	/* the loop in main sets the path for every test of its round */
	setenv("NCF_CUDA_PATH", g_path, 1);
}

/* The fused path against the unfused one on the same batch: the same
 * function summed in other orders (rows by user, per-block partials), so as
 * close as either is to reference.c in fp32; in bf16 both round their
 * activations, in different places (the fused forward rounds once after the
 * bias), within the bf16 bound of test_low_precision.  And the cost model
 * at NVIDIA's shape: the fused step moves fewer bytes in fewer launches. */
static void test_paths(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	const enum ncf_precision precs[] = {NCF_PRECISION_FP32, NCF_PRECISION_BF16};
	for (int k = 0; k < 2; k++) {
		struct ncf_backend f, u;
		setenv("NCF_CUDA_PATH", "fused", 1);
		int opened = !open_be(&f, &ncf_backend_cuda, s, &hp, precs[k], &one, d);
		setenv("NCF_CUDA_PATH", "unfused", 1);
		opened &= !open_be(&u, &ncf_backend_cuda, s, &hp, precs[k], &one, d);
		unsetenv("NCF_CUDA_PATH");
		if (!opened) {
			tap_ok(0, "open the backends");
			return;
		}
		size_t total = f.layout.total;
		fvec gf(total), gu(total);
		double lf, lu;
		int ok = !ncf_backend_grad(&f, 1, 100, B, gf.data(), &lf) &&
			 !ncf_backend_grad(&u, 1, 100, B, gu.data(), &lu);
		ok &= k == 0 ? close_tensors(&u, gf.data(), gu.data(), 1e-5, 1e-4, "fused vs unfused")
			     : l2_tensors(&u, gf.data(), gu.data(), 0.10, "bf16 fused vs unfused");
		ok &= tap_close(lf, lu, 0, k == 0 ? 1e-6 : 1e-3, "loss sum");
		tap_ok(ok, "%s: the fused path's gradient and loss equal the unfused path's",
		       ncf_precision_name(precs[k]));
		close_be(&f);
		close_be(&u);
	}
	struct ncf_shape ml = {138493, 26744, 64, 4, {256, 256, 128, 64}};
	struct ncf_hparams big = hparams(1u << 20, 0.5f, 0);
	static struct ncf_cuda_cost cf, cu;
	for (int k = 0; k < 2; k++) {
		enum ncf_precision p = k ? NCF_PRECISION_TF32 : NCF_PRECISION_BF16;
		int ok = !ncf_cuda_step_cost(&ml, &big, p, "fused", 19861770, &cf) &&
			 !ncf_cuda_step_cost(&ml, &big, p, "unfused", 19861770, &cu);
		tap_ok(ok && cf.bytes < cu.bytes && cf.launches < cu.launches && cf.flops > 0,
		       "ml-20m %s at 2^20: fused %.2f GB in %u launches, unfused %.2f GB in %u",
		       ncf_precision_name(p), cf.bytes / 1e9, cf.launches, cu.bytes / 1e9,
		       cu.launches);
	}
}

/* Steps given no loss_sum keep their losses (on the device, on the fused
 * path): ncf_backend_take_loss returns their sum, the same double as the
 * losses returned step by step added in order, and the steps do the same
 * (parameters bit for bit); for the cpu backend the wrapper keeps it. */
static void test_deferred_loss(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 256;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	const struct ncf_backend_i *impls[] = {&ncf_backend_cpu, &ncf_backend_cuda,
					       &ncf_backend_cuda, &ncf_backend_cuda};
	const char *paths[] = {"", "fused", "unfused", "fused"};
	const enum ncf_precision precs[] = {NCF_PRECISION_FP32, NCF_PRECISION_FP32,
					    NCF_PRECISION_FP32, NCF_PRECISION_BF16};
	for (int k = 0; k < 4; k++) {
		struct ncf_backend a, b;
		setenv("NCF_CUDA_PATH", k ? paths[k] : "fused", 1);
		int ok = !open_be(&a, impls[k], s, &hp, precs[k], &one, d) &&
			 !open_be(&b, impls[k], s, &hp, precs[k], &one, d);
		unsetenv("NCF_CUDA_PATH");
		if (!ok) {
			tap_ok(0, "open the backends");
			return;
		}
		double sum = 0, taken = -1, l;
		uint64_t S = (uint64_t)d->items.size() * 5;
		for (uint64_t pos = 0, t = 0; t < 6; t++, pos = (pos + B) % S) {
			uint64_t n = std::min<uint64_t>(B, S - pos);
			ok &= !ncf_backend_train_step(&a, 0, pos, n, &l);
			sum += l;
			ok &= !ncf_backend_train_step(&b, 0, pos, n, NULL);
		}
		ok &= !ncf_backend_take_loss(&b, &taken) && taken == sum;
		ok &= !ncf_backend_take_loss(&b, &l) && l == 0;
		fvec pa = get_params(&a), pb = get_params(&b);
		ok &= !memcmp(pa.data(), pb.data(), pa.size() * 4) && a.step == b.step;
		tap_ok(ok, "%s%s%s %s: six steps' losses kept and taken at once (%.9g), the same steps",
		       a.i->name, k ? " " : "", paths[k], ncf_precision_name(precs[k]), taken);
		close_be(&a);
		close_be(&b);
	}
}

/* The host memory a checkpoint's snapshot goes to (ncf_backend_host_alloc:
 * page-locked from the cuda backend, malloc'd from the cpu one): get_state
 * into it gives the bytes get_state into ordinary memory does, after some
 * steps, and it is freed by the backend that gave it. */
static void test_host_memory(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	const struct ncf_backend_i *impls[] = {&ncf_backend_cpu, &ncf_backend_cuda};
	for (int k = 0; k < 2; k++) {
		struct ncf_backend be;
		if (open_be(&be, impls[k], s, &hp, NCF_PRECISION_FP32, &one, d) != 0) {
			tap_ok(0, "open the backend");
			return;
		}
		int ok = 1;
		for (uint64_t t = 0; t < 3; t++)
			ok &= !ncf_backend_train_step(&be, 0, t * 256, 256, NULL);
		size_t n = be.layout.total;
		float *hp_ = (float *)ncf_backend_host_alloc(&be, 3 * n * sizeof(float));
		fvec p(n), m(n), v(n);
		ok &= !ncf_backend_get_state(&be, hp_, hp_ + n, hp_ + 2 * n);
		ok &= !ncf_backend_get_state(&be, p.data(), m.data(), v.data());
		ok &= !memcmp(hp_, p.data(), n * 4) && !memcmp(hp_ + n, m.data(), n * 4) &&
		      !memcmp(hp_ + 2 * n, v.data(), n * 4);
		ok &= ((uintptr_t)hp_ & 15) == 0;
		ncf_backend_host_free(&be, hp_);
		ncf_backend_host_free(&be, NULL);
		tap_ok(ok, "%s: get_state into ncf_backend_host_alloc memory (%s) gives the same "
			   "bytes, 16-byte aligned",
		       be.i->name, k ? "page-locked" : "malloc'd");
		close_be(&be);
	}
}

/* Bad input is refused with a message, not run: ids outside the model,
 * positions past the end of the epoch (which would make the permutation's
 * cycle walk loop forever). */
static void test_refusals(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend emu;
	if (open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the emulated cuda backend");
		return;
	}
	uint64_t S = (uint64_t)d->items.size() * 5;
	uint32_t u = d->U, it = 0;
	float out;
	double loss;
	tap_diag("expected messages follow:");
	fflush(stdout);
	int ok = ncf_backend_logits(&emu, &u, &it, 1, &out) == -1;
	ok &= ncf_backend_train_step(&emu, 0, S - 10, 11, &loss) == -1 && emu.step == 0;
	tap_ok(ok, "ids outside the model and positions past the epoch are refused");
	close_be(&emu);
}

/* Two epochs of training with evaluation: the same HR@10. */
static void test_run(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 256;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	uint64_t S = (uint64_t)d->items.size() * 5;
	double hc = 0, he = 0, nc, ne, l;
	std::vector<uint32_t> rc(d->U), re(d->U);
	int ok = 1;
	for (uint32_t e = 0; e < 2; e++)
		for (uint64_t pos = 0; pos < S; pos += B) {
			uint64_t n = std::min<uint64_t>(B, S - pos);
			ok &= !ncf_backend_train_step(&cpu, e, pos, n, &l) &&
			      !ncf_backend_train_step(&emu, e, pos, n, &l);
		}
	ok &= !ncf_backend_eval_ranks(&cpu, 0, d->U, rc.data()) &&
	      !ncf_backend_eval_ranks(&emu, 0, d->U, re.data());
	ncf_metrics_from_ranks(rc.data(), d->U, 10, &hc, &nc);
	ncf_metrics_from_ranks(re.data(), d->U, 10, &he, &ne);
	tap_ok(ok && fabs(hc - he) <= 1.5 / d->U,
	       "%s: two epochs (%llu steps): HR@10 %.4f, cpu backend %.4f", g_path, (unsigned long long)(2 * ((S + B - 1) / B)), he, hc);
	close_be(&cpu);
	close_be(&emu);
}

/* The emulated backend against the reference, directly. */
static void test_oracle(const struct data *d, const struct ncf_shape *s, float dropout,
			const char *label)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, dropout, 0);
	struct ncf_backend ref, emu;
	if (open_be(&ref, &ncf_backend_reference, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	size_t total = ref.layout.total;
	uint64_t S = (uint64_t)d->items.size() * 5;
	fvec gr(total), ge(total);
	double lr = 0, le = 0, gworst = 0;
	int ok = 1;
	for (int k = 0; k < 2; k++) {
		uint64_t first = k ? S - 300 : 0, n = k ? 300 : B;
		ok &= !ncf_backend_grad(&ref, 1, first, n, gr.data(), &lr) &&
		      !ncf_backend_grad(&emu, 1, first, n, ge.data(), &le);
		ok &= close_tensors(&ref, ge.data(), gr.data(), 1e-5, 1e-4, "grad");
		ok &= tap_close(le, lr, 0, 1e-6, "loss sum");
		for (const struct tensor &t : tensors(&ref)) { /* the worst, for the record */
			double mx = 0;
			for (size_t j = 0; j < t.n; j++)
				mx = std::max(mx, (double)fabsf(gr[t.off + j]));
			for (size_t j = 0; j < t.n; j++) {
				double dg = fabs((double)ge[t.off + j] - gr[t.off + j]);
				double tol = 1e-5 * mx + 1e-4 * fabs((double)gr[t.off + j]);
				if (tol > 0)
					gworst = std::max(gworst, dg / tol);
			}
		}
	}
	tap_diag("%s: worst gradient difference %.3g of its bound", label, gworst);
	size_t n = (size_t)d->U * d->I;
	std::vector<uint32_t> us(n), is(n), rr(d->U), re(d->U);
	for (size_t j = 0; j < n; j++)
		us[j] = (uint32_t)(j / d->I), is[j] = (uint32_t)(j % d->I);
	fvec lgr(n), lge(n);
	double md = 0;
	ok &= !ncf_backend_logits(&ref, us.data(), is.data(), n, lgr.data()) &&
	      !ncf_backend_logits(&emu, us.data(), is.data(), n, lge.data()) &&
	      close_all(lge.data(), lgr.data(), n, 1e-6, 1e-5, "logit", &md);
	int diff = 0;
	ok &= !ncf_backend_eval_ranks(&ref, 0, d->U, rr.data()) &&
	      !ncf_backend_eval_ranks(&emu, 0, d->U, re.data());
	for (uint32_t u = 0; u < d->U; u++)
		diff += rr[u] != re[u];
	tap_ok(ok && diff <= 1,
	       "%s: against reference.c: gradients, losses, logits (max |d| %.2g), ranks (%d of %u "
	       "differ)",
	       label, md, diff, d->U);
	/* one Adam step from the same state, on the batch of the first gradient */
	ok = !ncf_backend_grad(&ref, 0, 0, B, gr.data(), &lr) &&
	     !ncf_backend_grad(&emu, 0, 0, B, ge.data(), &le) &&
	     !ncf_backend_train_step(&ref, 0, 0, B, &lr) &&
	     !ncf_backend_train_step(&emu, 0, 0, B, &le);
	fvec pr = get_params(&ref), pe = get_params(&emu);
	struct ncf_adam_k ak;
	ncf_adam_constants(&hp, 1, &ak);
	int bad = 0;
	double worst = 0;
	for (size_t j = 0; j < total; j++) {
		double a = fabs((double)ge[j]), b = fabs((double)gr[j]), e = ak.eps;
		double m = (ge[j] < 0) != (gr[j] < 0) ? 0 : std::min(a, b);
		double tol = 1e-6 + 1e-5 * fabs(pr[j]) +
			     ak.lr * fabs((double)ge[j] - gr[j]) * e / ((m + e) * (m + e));
		double dd = fabs((double)pe[j] - pr[j]);
		if (!(dd <= tol) && bad++ < 5)
			tap_diag("params[%zu]: %.9g, reference %.9g", j, pe[j], pr[j]);
		worst = std::max(worst, dd / tol);
	}
	tap_ok(ok && bad == 0 && emu.step == 1,
	       "%s: one Adam step within the bound its gradient implies (worst %.3g of it)", label,
	       worst);
	close_be(&ref);
	close_be(&emu);
}

/* ---- the scoring path, graphs, faults, ranks -------------------------------- */

/* stderr of a stretch of code, into a string. */
struct stderr_capture {
	FILE *tmp;
	int saved;
	void start()
	{
		fflush(stderr);
		tmp = tmpfile();
		saved = dup(2);
		dup2(fileno(tmp), 2);
	}
	std::string stop()
	{
		fflush(stderr);
		dup2(saved, 2);
		close(saved);
		std::string s;
		rewind(tmp);
		char buf[4096];
		size_t got;
		while ((got = fread(buf, 1, sizeof buf, tmp)) > 0)
			s.append(buf, got);
		fclose(tmp);
		return s;
	}
};

static int lines_of(const std::string &s)
{
	return (int)std::count(s.begin(), s.end(), '\n');
}

/* n random pairs inside the model. */
static void random_pairs(const struct data *d, size_t n, uint64_t seed, std::vector<uint32_t> &us,
			 std::vector<uint32_t> &is)
{
	us.resize(n), is.resize(n);
	for (size_t j = 0; j < n; j++)
		us[j] = rnd(seed, 20, j, d->U), is[j] = rnd(seed, 21, j, d->I);
}

/*
 * The host path against the cpu backend at sizes of one chunk and of
 * several (70000 pairs: four chunks through both slots): scores within the
 * logits' tolerance of test_forward, and exactly ncf_sigmoid of the
 * emulated logits (the sigmoid moved into the head kernel computes the same
 * float as the host sigmoid did); a bad id deep in a long call is named,
 * and the next call works.
 */
static void test_scoring(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	const size_t sizes[] = {1, 1000, 70000};
	for (size_t n : sizes) {
		std::vector<uint32_t> us, is;
		random_pairs(d, n, n, us, is);
		fvec sc(n), se(n), le(n);
		int ok = !ncf_backend_score(&cpu, us.data(), is.data(), n, sc.data()) &&
			 !ncf_backend_score(&emu, us.data(), is.data(), n, se.data()) &&
			 !ncf_backend_logits(&emu, us.data(), is.data(), n, le.data());
		int same = 1;
		for (size_t j = 0; j < n; j++) {
			float want = ncf_sigmoid(le[j]);
			same &= !memcmp(&want, &se[j], 4);
		}
		ok &= close_all(se.data(), sc.data(), n, 1e-6, 1e-5, "score", NULL);
		tap_ok(ok && same,
		       "host path, %zu pairs: scores equal to the cpu backend's, bit for bit the "
		       "sigmoid of the logits",
		       n);
	}
	size_t n = 70000;
	std::vector<uint32_t> us, is;
	random_pairs(d, n, 3, us, is);
	us[50001] = d->U + 5; /* in the third chunk */
	us[60000] = d->U;     /* a later one: not the first */
	fvec out(n);
	stderr_capture cap;
	cap.start();
	int rc = ncf_backend_score(&emu, us.data(), is.data(), n, out.data());
	std::string err = cap.stop();
	char want[160];
	snprintf(want, sizeof want,
		 "test_cuda_emu: cuda backend: pair 50001 (user %u, item %u) is outside the model "
		 "(%u users, %u items)\n",
		 d->U + 5, is[50001], d->U, d->I);
	tap_ok(rc == -1 && err == want, "a bad id among 70000 pairs: the first is named, once");
	if (err != want)
		tap_diag("got: %s", err.c_str());
	us[50001] = 1, us[60000] = 2;
	fvec sc(n), se(n);
	int ok = !ncf_backend_score(&emu, us.data(), is.data(), n, se.data()) &&
		 !ncf_backend_score(&cpu, us.data(), is.data(), n, sc.data()) &&
		 close_all(se.data(), sc.data(), n, 1e-6, 1e-5, "score after", NULL);
	tap_ok(ok, "the next call scores correctly");
	close_be(&cpu);
	close_be(&emu);
}

/* Scores of emu and cpu on pairs (us, is) equal within test_forward's
 * tolerance. */
static int scores_agree(struct ncf_backend *emu, struct ncf_backend *cpu,
			const std::vector<uint32_t> &us, const std::vector<uint32_t> &is,
			const char *what)
{
	size_t n = us.size();
	fvec se(n), sc(n);
	return !ncf_backend_score(emu, us.data(), is.data(), n, se.data()) &&
	       !ncf_backend_score(cpu, us.data(), is.data(), n, sc.data()) &&
	       close_all(se.data(), sc.data(), n, 1e-6, 1e-5, what, NULL);
}

/*
 * Scoring graphs: captured once per chunk and replayed; still right after
 * the parameters change under them (set_state, a training step: the tables
 * are rebuilt outside the graph), and after the row buffers move (graphs
 * captured on the old ones are not replayed).
 */
static void test_graphs(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	/* the row buffers as a step of 512 leaves them, so that the step below
	 * does not move them */
	fvec gr(emu.layout.total);
	double loss;
	ncf_backend_grad(&emu, 0, 0, 512, gr.data(), &loss);
	std::vector<uint32_t> us, is;
	random_pairs(d, 300, 9, us, is);
	uint64_t c0, l0, c1, l1, c2, l2;
	ncf_cuda_debug_graphs(&emu, &c0, &l0);
	int ok = scores_agree(&emu, &cpu, us, is, "first") &&
		 scores_agree(&emu, &cpu, us, is, "second");
	ncf_cuda_debug_graphs(&emu, &c1, &l1);
	tap_ok(ok && c1 - c0 == 1 && l1 - l0 == 2,
	       "300 pairs twice: one graph captured, launched twice (%llu, %llu)",
	       (unsigned long long)(c1 - c0), (unsigned long long)(l1 - l0));
	/* new parameters under the graph */
	fvec p(emu.layout.total);
	ncf_model_init(s, &emu.layout, 1234, p.data());
	ok = !ncf_backend_set_state(&emu, p.data(), NULL, NULL) &&
	     !ncf_backend_set_state(&cpu, p.data(), NULL, NULL) &&
	     scores_agree(&emu, &cpu, us, is, "after set_state");
	ok &= !ncf_backend_train_step(&emu, 0, 0, 512, &loss) &&
	      !ncf_backend_train_step(&cpu, 0, 0, 512, &loss);
	fvec pe = get_params(&emu);
	ok &= !ncf_backend_set_state(&cpu, pe.data(), NULL, NULL) &&
	      scores_agree(&emu, &cpu, us, is, "after a step");
	ncf_cuda_debug_graphs(&emu, &c2, &l2);
	tap_ok(ok && c2 == c1 && l2 - l1 == 2,
	       "after set_state and after a training step: the same graph replays the new "
	       "parameters' scores");
	/* the row buffers grow (a longer call), then the short call again */
	std::vector<uint32_t> ub, ib;
	random_pairs(d, 5000, 10, ub, ib);
	ok = scores_agree(&emu, &cpu, ub, ib, "5000") && scores_agree(&emu, &cpu, us, is, "300");
	uint64_t c3, l3;
	ncf_cuda_debug_graphs(&emu, &c3, &l3);
	tap_ok(ok && c3 - c2 == 2, "after the row buffers move: graphs captured anew (%llu)",
	       (unsigned long long)(c3 - c2));
	close_be(&cpu);
	close_be(&emu);

	/* a capture that fails falls back quietly: nothing at the normal
	 * level, one line at -v, right scores either way */
	for (int verbose = 0; verbose < 2; verbose++) {
		int saved = ncf_verbosity;
		ncf_verbosity = verbose ? 3 : 2;
		struct ncf_backend e2, c2b;
		if (open_be(&e2, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d) ||
		    open_be(&c2b, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d)) {
			tap_ok(0, "open the backends");
			ncf_verbosity = saved;
			return;
		}
		ncf_cuda_emu_blas_no_capture(1);
		stderr_capture cap;
		cap.start();
		ok = scores_agree(&e2, &c2b, us, is, "no graphs") &&
		     scores_agree(&e2, &c2b, us, is, "no graphs again");
		std::string err = cap.stop();
		ncf_cuda_emu_blas_no_capture(0);
		uint64_t cc, ll;
		ncf_cuda_debug_graphs(&e2, &cc, &ll);
		int quiet = verbose ? lines_of(err) == 1 &&
					      err.find("no CUDA graph for scoring 300 pairs (") !=
						      std::string::npos &&
					      err.find("cuBLAS") != std::string::npos
				    : err.empty();
		tap_ok(ok && quiet && cc == 0 && ll == 0,
		       "a failed capture %s, and plain launches score right",
		       verbose ? "says so in one line at -v" : "says nothing at the normal level");
		if (!quiet)
			tap_diag("stderr: %s", err.c_str());
		close_be(&e2);
		close_be(&c2b);
		ncf_verbosity = saved;
	}
}

/* Pairs kept where the backend computes (the device-resident benchmark):
 * the same scores as the host path, on the emulated GPU and through the
 * wrappers' host copy on the CPU; asking for more than is kept, or keeping
 * a bad id, is refused. */
static void test_resident(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	size_t n = 3000;
	std::vector<uint32_t> us, is;
	random_pairs(d, n, 12, us, is);
	fvec he(n), re(n), hc(n), rc(n);
	int ok = !ncf_backend_resident_set(&emu, us.data(), is.data(), n) &&
		 !ncf_backend_resident_set(&cpu, us.data(), is.data(), n) &&
		 !ncf_backend_score_resident(&emu, n, NULL) &&
		 !ncf_backend_score_resident(&emu, n, re.data()) &&
		 !ncf_backend_score_resident(&cpu, n, rc.data()) &&
		 !ncf_backend_score(&emu, us.data(), is.data(), n, he.data()) &&
		 !ncf_backend_score(&cpu, us.data(), is.data(), n, hc.data());
	ok &= !memcmp(re.data(), he.data(), n * 4) && !memcmp(rc.data(), hc.data(), n * 4);
	ok &= !ncf_backend_score_resident(&emu, 10, re.data()) && !memcmp(re.data(), he.data(), 40);
	tap_ok(ok, "kept pairs score as the host path does (emulated GPU, and the cpu backend's "
		   "host copy), all of them or the first 10");
	stderr_capture cap;
	cap.start();
	us[7] = d->U;
	int refused = ncf_backend_score_resident(&emu, n + 1, NULL) == -1 &&
		      ncf_backend_score_resident(&cpu, n + 1, NULL) == -1 &&
		      ncf_backend_resident_set(&emu, us.data(), is.data(), n) == -1 &&
		      ncf_backend_resident_set(&cpu, us.data(), is.data(), n) == -1;
	std::string err = cap.stop();
	tap_ok(refused && lines_of(err) == 4 &&
		       err.find("cuda backend: pair 7 (user 41, item") != std::string::npos &&
		       err.find("cpu backend: pair 7 (user 41, item") != std::string::npos,
	       "more pairs than kept, and a bad id to keep, are refused with a message");
	close_be(&cpu);
	close_be(&emu);
}

/*
 * NCF_CUDA_SYNC=1: the same results, no graphs; a kernel that faults is
 * named by it, and without it the fault surfaces at the synchronisation
 * with the hint, once each.
 */
static void test_sync_and_faults(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	std::vector<uint32_t> us, is;
	random_pairs(d, 2000, 13, us, is);
	fvec g[2], sc[2];
	double loss;
	int ok = 1;
	uint64_t captured[2] = {0, 0}, launched;
	for (int sync = 0; sync < 2; sync++) {
		/* the checks read it when a backend opens */
		if (sync)
			setenv("NCF_CUDA_SYNC", "1", 1);
		struct ncf_backend be;
		if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
			tap_ok(0, "open the emulated backend");
			unsetenv("NCF_CUDA_SYNC");
			return;
		}
		g[sync].resize(be.layout.total), sc[sync].resize(2000);
		ok &= !ncf_backend_grad(&be, 0, 0, 512, g[sync].data(), &loss) &&
		      !ncf_backend_train_step(&be, 0, 0, 512, &loss) &&
		      !ncf_backend_score(&be, us.data(), is.data(), 2000, sc[sync].data());
		ncf_cuda_debug_graphs(&be, &captured[sync], &launched);
		close_be(&be);
		unsetenv("NCF_CUDA_SYNC");
	}
	ok &= !memcmp(g[0].data(), g[1].data(), g[0].size() * 4) &&
	      !memcmp(sc[0].data(), sc[1].data(), 2000 * 4);
	tap_ok(ok && captured[0] == 1 && captured[1] == 0,
	       "%s: NCF_CUDA_SYNC=1: the same gradient, step and scores, bit for bit; no graphs",
	       g_path);

	for (int sync = 0; sync < 2; sync++) {
		if (sync)
			setenv("NCF_CUDA_SYNC", "1", 1);
		struct ncf_backend be;
		if (open_be(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
			tap_ok(0, "open the emulated backend");
			unsetenv("NCF_CUDA_SYNC");
			return;
		}
		stderr_capture cap;
		cap.start();
		int rc = ncf_cuda_debug_fault(&be);
		int rc2 = ncf_backend_train_step(&be, 0, 0, 512, &loss); /* the device is lost */
		std::string err = cap.stop();
		int named = err.find("kernel fault_kernel (") != std::string::npos &&
			    err.find("test_hooks.cu:") != std::string::npos &&
			    err.find("unspecified launch failure (cudaErrorLaunchFailure)") !=
				    std::string::npos;
		int hinted = err.find("a kernel launched before this call failed; NCF_CUDA_SYNC=1 "
				      "names it") != std::string::npos;
		int good = rc == -1 && rc2 == -1 && lines_of(err) == 1 &&
			   (sync ? named && !hinted : hinted && !named);
		tap_ok(good, "%s: a kernel that faults: %s, in one line, and the next step fails",
		       g_path,
		       sync ? "NCF_CUDA_SYNC=1 names it with its file and line"
			    : "surfaces at the synchronisation, saying how to name it");
		if (!good)
			tap_diag("rc %d, %d; stderr: %s", rc, rc2, err.c_str());
		close_be(&be);
		ncf_cuda_emu_reset_faults();
		unsetenv("NCF_CUDA_SYNC");
	}
}

/*
 * fp16: a NaN made in the forward pass reaches the step's inf/NaN check.
 * The state is made so that the only non-finite values of the step are the
 * first layer's pre-activations of one unit h: W1u[h] = 8192 and mlp_user[0]
 * = 1 put AU[0][h] = 8192 M (inf in fp16: M = 16 here), W1i[h] = -8192 and
 * every mlp_item row = 1 put AI[i][h] = -inf for every item (the other
 * users' AU[u][h] stay near 8192 * 0.01 * sqrt(M)), so unit h is
 * inf - inf = NaN for user 0's samples and -inf (ReLU: 0) for the others.
 * A ReLU that turned the NaN into 0 would leave every activation, logit and
 * gradient finite (the backward pass multiplies no inf: dAU and dAI are 0 in
 * column h) and the step would be taken; the NaN must instead reach the
 * logits of user 0 (and only those) and make the step skipped, the loss
 * scale halved.
 */
static void test_fp16_nan(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	struct ncf_backend emu;
	if (open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP16, &one, d)) {
		tap_ok(0, "open the emulated backend in fp16");
		return;
	}
	const struct ncf_layout *L = &emu.layout;
	uint32_t M = ncf_shape_m(s), h = 3;
	fvec p = get_params(&emu);
	for (uint32_t k = 0; k < M; k++) {
		p[L->mlp_user + k] = 1.0f;				 /* mlp_user[0] */
		p[L->w[1] + (size_t)h * 2 * M + k] = 8192.0f;	 /* W1u[h] */
		p[L->w[1] + (size_t)h * 2 * M + M + k] = -8192.0f; /* W1i[h] */
	}
	for (uint32_t i = 0; i < d->I; i++)
		for (uint32_t k = 0; k < M; k++)
			p[L->mlp_item + (size_t)i * M + k] = 1.0f;
	int ok = !ncf_backend_set_state(&emu, p.data(), NULL, NULL);
	std::vector<uint32_t> us(2 * d->I), is(2 * d->I);
	for (uint32_t i = 0; i < d->I; i++)
		us[i] = 0, is[i] = i, us[d->I + i] = 1, is[d->I + i] = i;
	fvec lg(us.size());
	ok &= !ncf_backend_logits(&emu, us.data(), is.data(), us.size(), lg.data());
	int nan0 = 0, finite1 = 0;
	for (uint32_t i = 0; i < d->I; i++)
		nan0 += isnan(lg[i]), finite1 += isfinite(lg[d->I + i]);
	tap_ok(ok && nan0 == (int)d->I && finite1 == (int)d->I,
	       "%s: fp16: inf - inf in the first layer is NaN through the ReLU: user 0's logits "
	       "all NaN (%d of %u), user 1's finite (%d)",
	       g_path, nan0, d->I, finite1);
	float scale = ncf_cuda_loss_scale(&emu);
	double loss;
	ok = !ncf_backend_train_step(&emu, 0, 0, 512, &loss);
	fvec after = get_params(&emu);
	tap_ok(ok && emu.step == 0 && !memcmp(p.data(), after.data(), p.size() * 4) &&
		       ncf_cuda_loss_scale(&emu) == scale / 2,
	       "%s: fp16: a NaN made in the forward pass skips the step and halves the loss "
	       "scale (%g -> %g)",
	       g_path, (double)scale, (double)ncf_cuda_loss_scale(&emu));
	close_be(&emu);
}

/* More ranks on a node than GPUs: refused when the backend opens, as
 * "unavailable" (-3), naming ranks, host and GPUs.  Several ranks of a job
 * get their communicator when the backend opens: in a build without NCCL,
 * as here, that is where they are refused. */
static void test_ranks_per_node(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_dist two_here = {1, 2, 1, 2, 1, 0.0}, one_each = {0, 2, 0, 1, 1, 0.0};
	struct ncf_backend be;
	ncf_cuda_emu_devices(1);
	stderr_capture cap;
	cap.start();
	int rc = ncf_backend_open_impl(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, 2,
				       &two_here);
	std::string err = cap.stop();
	tap_ok(rc == -3 && lines_of(err) == 1 &&
		       err.find("cuda backend: 2 ranks on ") != std::string::npos &&
		       err.find(" and 1 GPU there: start at most one rank per GPU") !=
			       std::string::npos,
	       "2 ranks on a node of 1 GPU: refused at open with -3 (exit 3)");
	if (rc != -3)
		tap_diag("rc %d, stderr: %s", rc, err.c_str());
	ncf_cuda_emu_devices(2);
	cap.start();
	rc = ncf_backend_open_impl(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, 2,
				   &two_here);
	err = cap.stop();
	int nccl_msg = err.find("2 ranks need NCCL") != std::string::npos;
	if (rc == 0)
		close_be(&be);
	cap.start();
	int rc2 = ncf_backend_open_impl(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, 2,
					&one_each);
	err = cap.stop();
	tap_ok(rc == -1 && rc2 == -1 && nccl_msg && err.find("2 ranks need NCCL") != std::string::npos,
	       "2 ranks with a GPU each: the communicator is made at open (here: no NCCL, refused "
	       "then)");
	ncf_cuda_emu_devices(1);
	(void)d;
}

/*
 * A whole epoch: the emulated backend's loss per step and over the epoch
 * equal to the cpu backend's (relative 1e-5 per step as test_training's
 * five steps, 1e-5 over the epoch: the per-step differences do not add up
 * in one direction); and stopping after k steps, reopening from the state
 * (parameters, moments, step) and going on gives the uninterrupted run's
 * parameters bit for bit (--resume).
 */
static void test_epoch_and_resume(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 256;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend cpu, emu, part;
	if (open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&emu, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d) ||
	    open_be(&part, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d)) {
		tap_ok(0, "open the backends");
		return;
	}
	uint64_t S = (uint64_t)d->items.size() * 5;
	double tc = 0, te = 0, lc, le;
	int ok = 1, steps = 0, stop_at = 3;
	for (uint64_t pos = 0; pos < S; pos += B, steps++) {
		uint64_t n = std::min<uint64_t>(B, S - pos);
		ok &= !ncf_backend_train_step(&cpu, 0, pos, n, &lc) &&
		      !ncf_backend_train_step(&emu, 0, pos, n, &le);
		ok &= tap_close(le, lc, 0, 1e-5, "step loss");
		tc += lc, te += le;
		if (steps < stop_at)
			ok &= !ncf_backend_train_step(&part, 0, pos, n, &le);
	}
	tap_ok(ok && fabs(te - tc) <= 1e-5 * tc,
	       "%s: a whole epoch (%d steps): mean loss %.6f, cpu backend %.6f", g_path, steps,
	       te / S, tc / S);
	/* resume part from its state after stop_at steps */
	size_t total = part.layout.total;
	fvec pp(total), m(total), v(total);
	ok = !ncf_backend_get_state(&part, pp.data(), m.data(), v.data());
	uint64_t step = part.step;
	close_be(&part);
	struct ncf_backend res;
	ok &= !open_be(&res, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d) &&
	      !ncf_backend_set_state(&res, pp.data(), m.data(), v.data());
	res.step = step;
	for (uint64_t pos = (uint64_t)stop_at * B; pos < S; pos += B)
		ok &= !ncf_backend_train_step(&res, 0, pos, std::min<uint64_t>(B, S - pos), &le);
	fvec pr = get_params(&res), pe = get_params(&emu);
	tap_ok(ok && res.step == emu.step && !memcmp(pr.data(), pe.data(), total * 4),
	       "%s: stopped after %d steps and resumed from the state: the epoch's parameters bit "
	       "for bit",
	       g_path, stop_at);
	close_be(&res);
	close_be(&cpu);
	close_be(&emu);
}

/*
 * The fused step as one CUDA graph (graphs.cu, graph_step), which the
 * emulation captures, updates (cudaGraphExecUpdate) and replays.  Four
 * steps (two of them with their losses kept on the device and taken at the
 * end, the last one short) give the same parameters, Adam moments and
 * losses, bit for bit, as
 *  - the same steps launched plainly (NCF_CUDA_GRAPH=0),
 *  - launched plainly and each launch synchronised (NCF_CUDA_SYNC=1),
 *  - the graph in the other stream mode (lazy when this run is eager, eager
 *    when it is lazy: the least and the most delayed schedules),
 *  - a capture that fails (cuBLAS refusing to be captured), after which the
 *    step falls back to plain launches: said in one line at -v, nothing at
 *    the normal level.  In bf16 and fp16 the first step after set_state
 *    makes the 16-bit copy of the parameters, which the failed capture had
 *    only recorded: the fallback must make it again;
 * in fp32, bf16 and fp16.  With the graph, every step is captured and
 * launched as a graph, instantiated once (cudaGraphExecUpdate takes each
 * later capture, the short step's too; in bf16 and fp16 twice: the first
 * step also makes the 16-bit copy); without it, no capture; and a
 * replay runs the very kernels, GEMMs, memsets and copies of a plain step
 * (emu.h's counts of what ran).
 */
struct graph_run {
	fvec p, m, v;
	double loss[2], taken;
	uint64_t captured, instantiated, launched;
	unsigned long ran[4]; /* what the second step ran (emu.h's counts) */
	std::string err;      /* stderr of the steps */
	int ok;
};

enum { GR_GRAPH, GR_NO_GRAPH, GR_SYNC, GR_OTHER_MODE, GR_NO_CAPTURE_V, GR_NO_CAPTURE, GR_RUNS };

static void graph_run_steps(const struct data *d, const struct ncf_shape *s, enum ncf_precision prec,
			    int mode, struct graph_run *r)
{
	uint64_t B = 256, S = (uint64_t)d->items.size() * 5;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	int lazy = getenv("NCF_EMU_LAZY") && !strcmp(getenv("NCF_EMU_LAZY"), "1");
	int saved_verbosity = ncf_verbosity;
	r->ok = 0;
	if (S < 3 * B + 2) {
		tap_diag("the data set is too small for four steps of %llu", (unsigned long long)B);
		return;
	}
	if (mode == GR_NO_GRAPH)
		setenv("NCF_CUDA_GRAPH", "0", 1);
	if (mode == GR_SYNC)
		setenv("NCF_CUDA_SYNC", "1", 1);
	if (mode == GR_OTHER_MODE)
		ncf_cuda_emu_lazy(!lazy);
	struct ncf_backend be;
	int opened = !open_be(&be, &ncf_backend_cuda, s, &hp, prec, &one, d);
	unsetenv("NCF_CUDA_GRAPH");
	unsetenv("NCF_CUDA_SYNC");
	if (!opened) {
		ncf_cuda_emu_lazy(lazy);
		return;
	}
	if (mode == GR_NO_CAPTURE_V || mode == GR_NO_CAPTURE) {
		ncf_cuda_emu_blas_no_capture(1);
		ncf_verbosity = mode == GR_NO_CAPTURE_V ? 3 : 2;
	}
	stderr_capture cap;
	cap.start();
	unsigned long c0[4], c1[4];
	int ok = !ncf_backend_train_step(&be, 0, 0, B, NULL) && !ncf_cuda_debug_emu_counts(c0) &&
		 !ncf_backend_train_step(&be, 0, B, B, &r->loss[0]) &&
		 !ncf_cuda_debug_emu_counts(c1) && !ncf_backend_train_step(&be, 0, 2 * B, B, NULL) &&
		 !ncf_backend_train_step(&be, 0, 3 * B, std::min<uint64_t>(B / 2 + 3, S - 3 * B),
					 &r->loss[1]) &&
		 !ncf_backend_take_loss(&be, &r->taken);
	r->err = cap.stop();
	ncf_verbosity = saved_verbosity;
	ncf_cuda_emu_blas_no_capture(0);
	for (int k = 0; k < 4; k++)
		r->ran[k] = c1[k] - c0[k];
	size_t total = be.layout.total;
	r->p.resize(total), r->m.resize(total), r->v.resize(total);
	ok &= !ncf_backend_get_state(&be, r->p.data(), r->m.data(), r->v.data()) && be.step == 4;
	ncf_cuda_debug_step_graph(&be, &r->captured, &r->instantiated, &r->launched);
	close_be(&be);
	ncf_cuda_emu_lazy(lazy);
	r->ok = ok;
}

static int graph_runs_equal(const struct graph_run *a, const struct graph_run *b)
{
	size_t bytes = a->p.size() * 4;
	return a->p.size() == b->p.size() && !memcmp(a->p.data(), b->p.data(), bytes) &&
	       !memcmp(a->m.data(), b->m.data(), bytes) && !memcmp(a->v.data(), b->v.data(), bytes) &&
	       a->loss[0] == b->loss[0] && a->loss[1] == b->loss[1] && a->taken == b->taken;
}

static void test_step_graph(const struct data *d, const struct ncf_shape *s)
{
	const enum ncf_precision precs[] = {NCF_PRECISION_FP32, NCF_PRECISION_BF16,
					    NCF_PRECISION_FP16};
	const char *other = getenv("NCF_EMU_LAZY") && !strcmp(getenv("NCF_EMU_LAZY"), "1")
				    ? "eager"
				    : "lazy";
	static const char *const what[GR_RUNS] = {
		"", "NCF_CUDA_GRAPH=0", "NCF_CUDA_SYNC=1", "", "a failed capture", "a failed capture"};
	char sh[32];
	snprintf(sh, sizeof sh, "%u,%u,%u", s->layers[1], s->layers[2], s->layers[3]);
	setenv("NCF_CUDA_PATH", "fused", 1);
	for (enum ncf_precision prec : precs) {
		const char *pn = ncf_precision_name(prec);
		static struct graph_run r[GR_RUNS];
		for (int mode = 0; mode < GR_RUNS; mode++)
			graph_run_steps(d, s, prec, mode, &r[mode]);
		const struct graph_run *g = &r[GR_GRAPH];
		/* in bf16 and fp16 the first step after set_state also makes the
		 * 16-bit copy (later steps' Adam writes it): one launch more, a
		 * graph of another topology, instantiated anew by the second */
		uint64_t inst = prec == NCF_PRECISION_FP32 ? 1 : 2;
		tap_ok(g->ok && g->captured == 4 && g->launched == 4 && g->instantiated == inst,
		       "step graph, %s, layers %s: 4 steps captured (%llu), instantiated %llu times "
		       "(%s), launched as graphs (%llu)",
		       pn, sh, (unsigned long long)g->captured, (unsigned long long)g->instantiated,
		       inst == 1 ? "then updated" : "the first step's cast, then updated",
		       (unsigned long long)g->launched);
		for (int mode = GR_NO_GRAPH; mode < GR_RUNS; mode++) {
			const struct graph_run *x = &r[mode];
			int graphs = mode == GR_OTHER_MODE ? 4 : 0;
			int same = x->ok && graph_runs_equal(g, x) && x->captured == (uint64_t)graphs &&
				   x->launched == (uint64_t)graphs;
			if (mode == GR_NO_GRAPH || mode == GR_SYNC || mode == GR_OTHER_MODE)
				same &= !memcmp(g->ran, x->ran, sizeof g->ran);
			if (mode == GR_NO_CAPTURE_V)
				same &= lines_of(x->err) == 1 &&
					x->err.find("no CUDA graph for the training step (") !=
						std::string::npos &&
					x->err.find("cuBLAS") != std::string::npos;
			if (mode == GR_NO_CAPTURE)
				same &= x->err.empty();
			char label[96];
			if (mode == GR_OTHER_MODE)
				snprintf(label, sizeof label, "the graph with %s streams", other);
			else if (mode == GR_NO_CAPTURE_V)
				snprintf(label, sizeof label, "%s (one line at -v), then plain launches",
					 what[mode]);
			else if (mode == GR_NO_CAPTURE)
				snprintf(label, sizeof label,
					 "%s (nothing at the normal level), then plain launches",
					 what[mode]);
			else
				snprintf(label, sizeof label, "%s, plain launches", what[mode]);
			tap_ok(same,
			       "step graph, %s, layers %s: %s: the same parameters, moments and losses, "
			       "bit for bit",
			       pn, sh, label);
			if (!same)
				tap_diag("ok %d, equal %d, graphs %llu/%llu, ran %lu %lu %lu %lu vs %lu %lu "
					 "%lu %lu; stderr: %s",
					 x->ok, graph_runs_equal(g, x), (unsigned long long)x->captured,
					 (unsigned long long)x->launched, x->ran[0], x->ran[1], x->ran[2],
					 x->ran[3], g->ran[0], g->ran[1], g->ran[2], g->ran[3],
					 x->err.c_str());
		}
	}
	unsetenv("NCF_CUDA_PATH");
}

int main(void)
{
	ncf_set_progname("test_cuda_emu");
	ncf_verbosity = 1;
	char why[128];
	tap_ok(ncf_cuda_usable(why, sizeof why) == 1, "the emulated device is usable");

	struct data d;
	make_data(&d, 41, 67, 30, 14, 5);
	/* widths multiples of 8 (vector paths) and not (scalar paths, partial
	 * dropout blocks) */
	struct ncf_shape s8 = {41, 67, 8, 4, {32, 24, 16, 8}};
	struct ncf_shape s5 = {41, 67, 6, 4, {14, 13, 10, 5}};
	struct ncf_shape s2 = {41, 67, 8, 2, {16, 8}};

	test_samples(&d, &s8);
	test_dropout(&d, &s8);
	test_adam(&d, &s8);
	test_segsum(&d, &s8);
	test_linear(&d, &s8);
	test_linear_w(&d, &s8);
	test_forward(&d, &s8, "widths of 8");
	test_forward(&d, &s5, "odd widths");
	test_refusals(&d, &s8);
	test_paths(&d, &s8);
	test_deferred_loss(&d, &s8);
	test_host_memory(&d, &s8);
	const char *const paths[] = {"fused", "unfused"};
	for (const char *path : paths) {
		char l[3][64];
		g_path = path;
		setenv("NCF_CUDA_PATH", path, 1);
		snprintf(l[0], 64, "%s: widths of 8, dropout 0.5", path);
		snprintf(l[1], 64, "%s: odd widths, dropout 0.5", path);
		snprintf(l[2], 64, "%s: one hidden layer, no dropout", path);
		test_training(&d, &s8, 0.5f, l[0]);
		test_training(&d, &s5, 0.5f, l[1]);
		test_training(&d, &s2, 0.0f, l[2]);
		test_ranks(&d, &s8);
		test_low_precision(&d, &s8);
		test_run(&d, &s8);
		test_oracle(&d, &s8, 0.5f, l[0]);
		test_oracle(&d, &s5, 0.5f, l[1]);
		test_oracle(&d, &s2, 0.0f, l[2]);
		test_cost(&d, &s8, path);
		test_cost(&d, &s5, path);
		test_sync_and_faults(&d, &s8);
		test_fp16_nan(&d, &s8);
		test_epoch_and_resume(&d, &s8);
	}
	unsetenv("NCF_CUDA_PATH");
	g_path = "fused";
	test_step_graph(&d, &s8);
	test_step_graph(&d, &s5);
	test_scoring(&d, &s8);
	test_graphs(&d, &s8);
	test_resident(&d, &s8);
	test_ranks_per_node(&d, &s8);
	free(d.counted);
	return tap_done();
}
