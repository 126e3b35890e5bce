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
 *    epochs, with and without --true-negatives, with explicit negatives
 *    (beside 4 drawn per positive, and alone): bit for bit (integer
 *    formulas of ncf_hd.h); the step's gradients and parameters with
 *    explicit negatives against the cpu backend's, as below;
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
 *    per tensor) of the fp32 cpu backend's (see t_low_precision for
 *    why so loose), logits within 2e-2; fp16 dynamic loss scaling: a step with
 *    an overflowing scale is skipped and halves the scale, good steps double
 *    it after the growth interval;
 *  - bad input (ids outside the model, positions past the epoch) refused;
 *  - a short training run: both backends' HR@10 after two epochs equal;
 *  - against the reference directly (t_oracle), for the three shapes:
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
 *    bf16 and fp16 within the bounds argued at t_linear and
 *    t_linear_w;
 *  - the step with each implementation of its dense layers (NCF_CUDA_DENSE=
 *    fused, the one the fixed order takes here, lt, whose cuBLASLt
 *    products the emulation stands in for, and plain): the step tests
 *    above run on each (training, ranks, low precision, a run, the
 *    reference, NCF_CUDA_SYNC and faults, the fp16 NaN, the whole epoch and
 *    the resume), the three against each other and mixed layer by layer
 *    (t_dense), a layer wider than the fused kernels take (t_wide), bad
 *    names refused; losses kept on the device and taken at once
 *    (t_deferred_loss);
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
#include "helpers.h"
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
	std::vector<int64_t> neg_offsets; /* explicit negatives (U + 1), or empty */
	std::vector<uint32_t> neg_items;  /* (E) */
};

static uint32_t rnd(uint64_t seed, uint32_t a, uint64_t idx, uint32_t n)
{
	return helper_rnd(seed, a, idx, n);
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

/* d with explicit negatives (helpers.h) added. */
static void add_explicit(struct data *d, uint64_t seed)
{
	d->neg_offsets.assign(d->U + 1, 0);
	uint32_t *it = NULL;
	uint64_t E = helper_make_explicit(seed, d->U, d->I, 9, d->neg_offsets.data(), &it);
	d->neg_items.assign(it, it + E);
	free(it);
}

/* The epoch's samples of d with k drawn negatives per positive. */
static uint64_t epoch_samples(const struct data *d, uint32_t k)
{
	return ncf_epoch_samples(d->items.size(), k, d->neg_items.size());
}

static struct ncf_train_data train_data(const struct data *d)
{
	struct ncf_train_data td;
	memset(&td, 0, sizeof td);
	if (!d->neg_items.empty()) {
		td.train_negatives = d->neg_items.size();
		td.neg_offsets = d->neg_offsets.data();
		td.neg_items = d->neg_items.data();
	}
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

/* The dense layers' implementation under test (NCF_CUDA_DENSE, read when
 * a backend is opened): the tests of steps run once on each. */
static const char *g_dense = "fused";

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

/* Open the emulated cuda backend in precision p (one rank); 0, or -1 after
 * a failed check. */
static int open_emu(struct ncf_backend *be, const struct ncf_shape *s,
		    const struct ncf_hparams *hp, const struct data *d,
		    enum ncf_precision p = NCF_PRECISION_FP32)
{
	int rc = open_be(be, &ncf_backend_cuda, s, hp, p, &one, d);
	tap_ok(rc == 0, "open the emulated cuda backend in %s", ncf_precision_name(p));
	return rc ? -1 : 0;
}

/* Open impl (the cpu backend or the reference) into a and the emulated
 * backend into emu, fp32, one rank; 0, or -1 after a failed check. */
static int open_two(struct ncf_backend *a, const struct ncf_backend_i *impl,
		    struct ncf_backend *emu, const struct ncf_shape *s,
		    const struct ncf_hparams *hp, const struct data *d)
{
	int rc = open_be(a, impl, s, hp, NCF_PRECISION_FP32, &one, d) ||
		 open_be(emu, &ncf_backend_cuda, s, hp, NCF_PRECISION_FP32, &one, d);
	tap_ok(rc == 0, "open the %s and the emulated cuda backend", impl->name);
	return rc ? -1 : 0;
}

/* ---- comparisons (helpers.h), on a backend's layout ---------------------- */

/* Per tensor: |d| <= rel_max * max|want| + rtol |want|. */
static int close_tensors(const struct ncf_backend *be, const float *got, const float *want,
			 double rel_max, double rtol, const char *what,
			 struct helper_err *e = NULL)
{
	return helper_close_tensors(&be->layout, &be->shape, got, want, rel_max, rtol, what, e);
}

/* Relative L2 error per tensor <= tol. */
static int l2_tensors(const struct ncf_backend *be, const float *got, const float *want,
		      double tol, const char *what)
{
	return helper_l2_tensors(&be->layout, &be->shape, got, want, tol, what);
}

/* What was written to stderr since helper_capture_begin. */
static std::string capture_end(void)
{
	char *m = helper_capture_end();
	std::string s(m);
	free(m);
	return s;
}

static int lines_of(const std::string &s)
{
	return (int)std::count(s.begin(), s.end(), '\n');
}

/* ---- the sample stream, dropout, Adam, segment sums ---------------------- */

static void t_samples(const struct data *d, const struct ncf_shape *s, int tn, uint32_t k = 4)
{
	struct ncf_hparams hp = hparams(256, 0.5f, tn);
	hp.negatives = k;
	struct ncf_backend be;
	if (open_emu(&be, s, &hp, d))
		return;
	int64_t P = (int64_t)d->items.size();
	uint64_t S = epoch_samples(d, hp.negatives), E = d->neg_items.size();
	std::vector<uint32_t> u(S), it(S);
	std::vector<uint8_t> lab(S);
	int ok = 1;
	for (uint32_t e = 0; e < 3 && ok; e++) {
		ok = ncf_cuda_debug_samples(&be, e, 0, S, u.data(), it.data(), lab.data()) == 0;
		ncf_stream st = {ncf_perm_make(S, hp.seed, e), hp.seed, e, d->I, P, tn,
				 d->entry_user.data(), d->offsets.data(), d->items.data(), E, d->U,
				 E ? d->neg_offsets.data() : NULL, E ? d->neg_items.data() : NULL};
		for (uint64_t t = 0; t < S && ok; t++) {
			uint32_t wu, wi;
			int y = ncf_sample_at(&st, t, &wu, &wi);
			if (wu != u[t] || wi != it[t] || y != lab[t]) {
				tap_diag("epoch %u position %llu: (%u, %u, %d), want (%u, %u, %d)", e,
					 (unsigned long long)t, u[t], it[t], lab[t], wu, wi, y);
				ok = 0;
			}
		}
	}
	tap_ok(ok, "3 epochs of %llu samples", (unsigned long long)S);
	close_be(&be);
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

static void t_dropout(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_emu(&be, s, &hp, d))
		return;
	const uint32_t widths[] = {24, 13, 5};
	size_t kept = 0, total = 0;
	for (uint32_t w = 0; w < 3; w++) {
		uint32_t H = widths[w];
		size_t n = 97;
		fvec z(n * H), got(n * H), want(n * H);
		for (size_t j = 0; j < z.size(); j++)
			z[j] = (float)((int)rnd(9, w, j, 2001) - 500) * 0.01f;
		for (uint32_t layer = 0; layer < 3; layer++) {
			uint64_t pos0 = 1000003ull * layer + 17;
			int ok = ncf_cuda_debug_dropout(&be, 2, pos0, layer, n, H, z.data(),
							got.data()) == 0;
			dropout_ref(z.data(), want.data(), n, H, hp.dropout, hp.seed, 2, pos0, layer);
			tap_ok(ok && !memcmp(got.data(), want.data(), n * H * sizeof(float)),
			       "width %u, layer %u: bit-exact", H, layer);
			for (size_t j = 0; j < n * H; j++) {
				kept += z[j] > 0 && want[j] != 0;
				total += z[j] > 0;
			}
		}
	}
	tap_ok(kept > total * 4 / 10 && kept < total * 6 / 10,
	       "dropout keeps about half (%zu of %zu)", kept, total);
	close_be(&be);
}

static void t_adam(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_emu(&be, s, &hp, d))
		return;
	size_t n = 20000;
	fvec p(n), m(n), v(n), g(n);
	for (size_t j = 0; j < n; j++) {
		p[j] = ((float)rnd(11, 0, j, 1 << 20) - 524288.0f) * 1e-6f;
		m[j] = ((float)rnd(11, 1, j, 1 << 20) - 524288.0f) * 1e-9f;
		v[j] = (float)rnd(11, 2, j, 1 << 20) * 1e-14f;
		g[j] = ((float)rnd(11, 3, j, 1 << 20) - 524288.0f) * powf(10.0f, -(float)(j % 12));
	}
	for (uint64_t step = 1; step < 40; step += 13) {
		fvec p2 = p, m2 = m, v2 = v, p3 = p, m3 = m, v3 = v;
		int ok = ncf_cuda_debug_adam(&be, p2.data(), m2.data(), v2.data(), g.data(), n,
					     step) == 0;
		struct ncf_adam_k k;
		ncf_adam_constants(&hp, step, &k);
		for (size_t j = 0; j < n; j++)
			ncf_adam_update(&p3[j], &m3[j], &v3[j], g[j], &k);
		tap_ok(ok && !memcmp(p2.data(), p3.data(), n * 4) &&
			       !memcmp(m2.data(), m3.data(), n * 4) &&
			       !memcmp(v2.data(), v3.data(), n * 4),
		       "step %llu: p, m and v bit-exact", (unsigned long long)step);
	}
	close_be(&be);
}

/* ---- the fused dense layers ------------------------------------------------ */

/* A value in [-1, 1) from Philox (purpose a, index j). */
static float urand(uint32_t a, uint64_t j)
{
	return ((float)rnd(21, a, j, 1u << 20) - 524288.0f) / 524288.0f;
}

static const char *const mode_name[] = {"fp32", "tf32", "bf16", "fp16"};

/* v as the kernel sees it in mode (bf16 and fp16 round on the host). */
static fvec rounded(fvec v, int mode)
{
	for (float &x : v)
		x = mode == 2 ? ncf_test_bf16(x) : mode == 3 ? ncf_test_f16(x) : x;
	return v;
}

/* One sum of products of the dense layers' definition: sum_k a[k sa] b[k
 * sb] over n terms, in float in k order (*acc), in double (*dacc) and the
 * sum of the terms' magnitudes (*S). */
static void dot(const float *a, size_t sa, const float *b, size_t sb, uint32_t n, float *acc,
		double *dacc, double *S)
{
	*acc = 0.0f, *dacc = 0, *S = 0;
	for (uint32_t k = 0; k < n; k++) {
		*acc += a[k * sa] * b[k * sb];
		*dacc += (double)a[k * sa] * b[k * sb];
		*S += fabs((double)a[k * sa] * b[k * sb]);
	}
}

/* The backward's dX[j][q] against its definition (mask from h > 0, the
 * dropout's scale): *err its error, fp32 (mode 0) against the float sum in
 * k order (0 or infinite), the other modes against the sum in double; *S
 * the sum of the products' magnitudes. */
static void dx_error(const fvec &dZr, const fvec &Wr, const fvec &Hr, const fvec &dX, size_t j,
		     uint32_t q, uint32_t in, uint32_t out, float scale, int mode, double *err,
		     double *dwant, double *S)
{
	float acc;
	double dacc;
	dot(&dZr[j * out], 1, &Wr[q], in, out, &acc, &dacc, S);
	float h = Hr[j * in + q];
	float want = h > 0.0f ? acc * scale : 0.0f;
	*dwant = h > 0.0f ? dacc * scale : 0;
	float got = dX[j * in + q];
	*err = mode == 0 ? (got == want ? 0 : INFINITY) : fabs(got - *dwant);
	if (mode == 0)
		*dwant = want;
}

/* The inputs of one fused layer of in -> out on rows rows, from Philox. */
struct layer_case {
	uint32_t in, out;
	size_t rows;
	fvec X, W, b, dZ, H;
};

/* v filled with urand(a, .) * mul. */
static void fill(fvec &v, uint32_t a, float mul)
{
	for (size_t j = 0; j < v.size(); j++)
		v[j] = urand(a, j) * mul;
}

/* Activations: urand(a + 1, .), with some units off (where urand(a, .) <=
 * 0.2). */
static void fill_h(fvec &v, uint32_t a)
{
	for (size_t j = 0; j < v.size(); j++)
		v[j] = urand(a, j) > 0.2f ? urand(a + 1, j) : 0.0f;
}

static void size_layer(struct layer_case *c, uint32_t in, uint32_t out, size_t rows)
{
	c->in = in, c->out = out, c->rows = rows;
	c->X.resize(rows * in), c->W.resize((size_t)out * in), c->b.resize(out);
	c->dZ.resize(rows * out), c->H.resize(rows * in);
}

/* The bounds of t_linear's fused layers, by mode (see there). */
static const double lin_rel[] = {0, 0, 1.0 / 256, 1.0 / 2048};
static const double lin_sum_tol[] = {0, 1.0 / 1024, 2e-5, 2e-5};

/* The forward's Y (rows x out) against its definition: product, bias,
 * ReLU, dropout of (seed, epoch 2, pos0 + row, layer 1). *worst: the worst
 * error over its bound. */
static int check_forward(const struct layer_case *c, const fvec &Y, int mode, uint64_t seed,
			 uint64_t pos0, float p, double *worst)
{
	float scale = 1.0f / (1.0f - p);
	uint32_t drop16 = ncf_dropout_threshold(p), in = c->in, out = c->out;
	fvec Xr = rounded(c->X, mode), Wr = rounded(c->W, mode);
	for (size_t j = 0; j < c->rows; j++)
		for (uint32_t o = 0; o < out; o++) {
			float acc;
			double dacc, S;
			dot(&Xr[j * in], 1, &Wr[(size_t)o * in], 1, in, &acc, &dacc, &S);
			ncf_u32x4 bits = ncf_dropout_bits(seed, 2, pos0 + j, 1, o / 8);
			float mult = ncf_dropout_keep(bits, o % 8, drop16) ? scale : 0.0f;
			float z = acc + c->b[o];
			float want = (z > 0.0f ? z : 0.0f) * mult;
			double dz = dacc + c->b[o];
			double dwant = (dz > 0 ? dz : 0) * mult;
			float got = Y[j * out + o];
			double err = mode == 0 ? (got == want ? 0 : INFINITY) : fabs(got - dwant);
			double tol = lin_rel[mode] * fabs(dwant) + lin_sum_tol[mode] * S * scale +
				     (mode ? 1e-6 : 0);
			*worst = std::max(*worst, tol > 0 ? err / tol : err);
			if (!(err <= tol)) {
				tap_diag("%s fwd %ux%u [%zu][%u]: %.9g, want %.9g", mode_name[mode], out,
					 in, j, o, got, mode ? dwant : want);
				return 0;
			}
		}
	return 1;
}

/* The backward's dX (rows x in) against its definition. */
static int check_backward(const struct layer_case *c, const fvec &dX, int mode, float p,
			  double *worst)
{
	float scale = 1.0f / (1.0f - p);
	uint32_t in = c->in, out = c->out;
	fvec Wr = rounded(c->W, mode), dZr = rounded(c->dZ, mode), Hr = rounded(c->H, mode);
	for (size_t j = 0; j < c->rows; j++)
		for (uint32_t q = 0; q < in; q++) {
			double err, dwant, S;
			dx_error(dZr, Wr, Hr, dX, j, q, in, out, scale, mode, &err, &dwant, &S);
			double tol = lin_rel[mode] * fabs(dwant) + lin_sum_tol[mode] * S * scale +
				     (mode ? 1e-6 : 0);
			*worst = std::max(*worst, tol > 0 ? err / tol : err);
			if (!(err <= tol)) {
				tap_diag("%s bwd %ux%u [%zu][%u]: %.9g, want %.9g", mode_name[mode], out,
					 in, j, q, dX[j * in + q], dwant);
				return 0;
			}
		}
	return 1;
}

/* The per-block (128 rows) column sums part of the kernel's own dX: order
 * only. */
static int check_partials(const struct layer_case *c, const fvec &dX, const fvec &part, int mode)
{
	size_t nb = (c->rows + 127) / 128;
	for (size_t p = 0; p < nb; p++)
		for (uint32_t q = 0; q < c->in; q++) {
			double want = 0, mag = 0;
			for (size_t j = p * 128; j < std::min(c->rows, (p + 1) * 128); j++) {
				want += dX[j * c->in + q];
				mag += fabs(dX[j * c->in + q]);
			}
			double tol = (mode >= 2 ? 1.0 / 256 : 1e-6) * mag + 1e-7;
			if (!(fabs(part[p * c->in + q] - want) <= tol)) {
				tap_diag("%s partial %u of %ux%u: %.9g, want %.9g", mode_name[mode], q,
					 c->out, c->in, part[p * c->in + q], want);
				return 0;
			}
		}
	return 1;
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
static void t_linear(const struct data *d, const struct ncf_shape *s, int mode)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_emu(&be, s, &hp, d))
		return;
	const uint32_t dims[][2] = {{32, 24}, {13, 10}, {40, 256}, {256, 128}, {24, 5}};
	double worst_f = 0, worst_b = 0;
	for (const auto &dm : dims) {
		struct layer_case c;
		size_layer(&c, dm[0], dm[1], 150);
		fill(c.X, 1, 1.0f), fill(c.W, 2, 0.3f), fill(c.b, 3, 0.1f), fill(c.dZ, 4, 1.0f);
		fill_h(c.H, 5);
		uint64_t pos0 = 77;
		size_t nb = (c.rows + 127) / 128;
		fvec Y(c.rows * c.out), dX(c.rows * c.in), part(nb * c.in);
		struct ncf_cuda_layer_case fw = {mode,	     2,		   1,	       pos0,
						 c.rows,     c.in,	   c.out,      c.X.data(),
						 c.W.data(), c.b.data()};
		struct ncf_cuda_layer_case bw = fw;
		bw.A = c.dZ.data(), bw.bh = c.H.data();
		int okf = !ncf_cuda_debug_linear(&be, &fw, 0, Y.data(), NULL);
		int okb = !ncf_cuda_debug_linear(&be, &bw, 1, dX.data(), part.data());
		tap_ok(okf && check_forward(&c, Y, mode, hp.seed, pos0, hp.dropout, &worst_f),
		       "%ux%u: forward (matrix product, bias, ReLU, dropout)", c.out, c.in);
		tap_ok(okb && check_backward(&c, dX, mode, hp.dropout, &worst_b),
		       "%ux%u: backward (product, mask from h > 0, scale)", c.out, c.in);
		tap_ok(okb && check_partials(&c, dX, part, mode),
		       "%ux%u: per-block column sums of the backward's output", c.out, c.in);
	}
	tap_diag("%s: worst forward error %.3g of the bound, backward %.3g", mode_name[mode], worst_f,
		 worst_b);
	close_be(&be);
}

/* The bounds of t_linear_w by mode: dX, and dW and db (see there). */
static const double lw_tolx[] = {0, 1.0 / 1024, 1.0 / 256, 1.0 / 2048};
static const double lw_tolw[] = {1e-5, 1.0 / 1024, 1.0 / 256, 1.0 / 2048};

/* linear_bwdw's dX against its definition; its column sums (the bias
 * gradient's definition) and their magnitudes into sdb, mdb. */
static int check_bwdw_dx(const struct layer_case *c, const fvec &dX, int mode, float p,
			 std::vector<double> &sdb, std::vector<double> &mdb)
{
	float scale = 1.0f / (1.0f - p);
	uint32_t in = c->in, out = c->out;
	fvec Wr = rounded(c->W, mode), dZr = rounded(c->dZ, mode), Hr = rounded(c->H, mode);
	sdb.assign(in, 0), mdb.assign(in, 0);
	for (size_t j = 0; j < c->rows; j++)
		for (uint32_t q = 0; q < in; q++) {
			double err, dwant, S;
			dx_error(dZr, Wr, Hr, dX, j, q, in, out, scale, mode, &err, &dwant, &S);
			double tol = lw_tolx[mode] * (fabs(dwant) + 2 * S * scale) + (mode ? 1e-6 : 0);
			if (!(err <= tol)) {
				tap_diag("%s bwdw dX %ux%u [%zu][%u]: %.9g, want %.9g", mode_name[mode],
					 out, in, j, q, dX[j * in + q], dwant);
				return 0;
			}
			sdb[q] += dX[j * in + q];
			mdb[q] += fabs(dX[j * in + q]);
		}
	return 1;
}

/* dW = dZ^T H against the sums in double; *worst: the worst error over its
 * terms' magnitude. */
static int check_bwdw_dw(const struct layer_case *c, const fvec &dW, int mode, double *worst)
{
	uint32_t in = c->in, out = c->out;
	fvec dZr = rounded(c->dZ, mode), Hr = rounded(c->H, mode);
	for (uint32_t o = 0; o < out; o++)
		for (uint32_t q = 0; q < in; q++) {
			double want = 0, S = 0;
			for (size_t j = 0; j < c->rows; j++) {
				double t = (double)dZr[j * out + o] * Hr[j * in + q];
				want += t;
				S += fabs(t);
			}
			double err = fabs(dW[(size_t)o * in + q] - want);
			*worst = std::max(*worst, S > 0 ? err / S : err);
			if (!(err <= lw_tolw[mode] * S + 1e-7)) {
				tap_diag("%s bwdw dW %ux%u [%u][%u]: %.9g, want %.9g", mode_name[mode],
					 out, in, o, q, dW[(size_t)o * in + q], want);
				return 0;
			}
		}
	return 1;
}

/*
 * The backward with the weight gradient (mlp.cu linear_bwdw: one pass
 * gives dX, the bias gradient's and dW's per-group partials; then
 * reduce_partials adds the groups) against the definitions in double:
 *  - dX: fp32 bit for bit (the same k order as linear_backward's din), the
 *    other modes within t_linear's bounds;
 *  - dW = dZ^T H and db = column sums of dX: |d| <= 1e-6 S (fp32: sums of
 *    up to 2000 terms in other orders, 2000 x 2^-24 < 1.2e-4 of S at worst,
 *    in practice ~sqrt(2000) x 2^-24 = 3e-6: the bound allows 1e-5 S), TF32
 *    2^-10 S (inputs rounded), bf16 / fp16 2^-8 S / 2^-11 S (inputs rounded
 *    on the host already: only the sums' order and dX's rounding), with S
 *    the sum of the terms' magnitudes.
 * Rows span several row groups of a block (rows > 64 x groups) and blocks
 * of two column groups (in > 128).
 */
static void t_linear_w(const struct data *d, const struct ncf_shape *s, int mode)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (open_emu(&be, s, &hp, d))
		return;
	const uint32_t dims[][2] = {{32, 24}, {13, 10}, {200, 64}, {24, 5}};
	double worst = 0;
	for (const auto &dm : dims) {
		uint32_t in = dm[0], out = dm[1];
		/* 13 x 10 (not tf32): more than 256 groups of 64 rows (a group
		 * sums two tiles); 200 x 64: two column groups */
		size_t rows = in == 13 && mode != 1 ? 16700 : in > 100 ? 150 : 700;
		struct layer_case c;
		size_layer(&c, in, out, rows);
		fill(c.dZ, 7, 1.0f), fill(c.W, 8, 0.3f), fill_h(c.H, 9);
		fvec dX(rows * in), db(in), dW((size_t)out * in);
		struct ncf_cuda_layer_case lc = {mode, 0,	   0,	       0,	  rows,
						 in,   out,	   c.dZ.data(), c.W.data(), c.H.data()};
		int ok = !ncf_cuda_debug_linear_w(&be, &lc, dX.data(), db.data(), dW.data());
		std::vector<double> sdb, mdb;
		tap_ok(ok && check_bwdw_dx(&c, dX, mode, hp.dropout, sdb, mdb), "%ux%u, %zu rows: dX",
		       out, in, rows);
		int okb = ok;
		for (uint32_t q = 0; q < in && okb; q++)
			if (!(fabs(db[q] - sdb[q]) <= lw_tolw[mode] * mdb[q] + 1e-7)) {
				tap_diag("%s bwdw db[%u]: %.9g, want %.9g", mode_name[mode], q, db[q],
					 sdb[q]);
				okb = 0;
			}
		tap_ok(okb, "%ux%u, %zu rows: the bias gradient", out, in, rows);
		tap_ok(ok && check_bwdw_dw(&c, dW, mode, &worst), "%ux%u, %zu rows: dW", out, in, rows);
	}
	tap_diag("%s: worst dW error %.2g of its terms' magnitude", mode_name[mode], worst);
	close_be(&be);
}

/* ---- forward, steps, ranks, precisions ------------------------------------- */

/* Logits, scores and ranks of emu against cpu on the same parameters. */
static void t_forward(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
	size_t n = (size_t)d->U * d->I;
	std::vector<uint32_t> us(n), is(n);
	for (size_t j = 0; j < n; j++)
		us[j] = (uint32_t)(j / d->I), is[j] = (uint32_t)(j % d->I);
	fvec lc(n), le(n), sc(n), se(n);
	int ok = !ncf_backend_logits(&cpu, us.data(), is.data(), n, lc.data()) &&
		 !ncf_backend_logits(&emu, us.data(), is.data(), n, le.data());
	struct helper_err e = {0, 0, 0};
	tap_ok(ok && helper_close_all(le.data(), lc.data(), n, 1e-6, 1e-5, "logit", &e),
	       "logits of all %zu pairs equal to the cpu backend's (max |d| %.2g)", n, e.abs);
	ok = !ncf_backend_score(&cpu, us.data(), is.data(), n, sc.data()) &&
	     !ncf_backend_score(&emu, us.data(), is.data(), n, se.data());
	tap_ok(ok && helper_close_all(se.data(), sc.data(), n, 1e-6, 1e-5, "score", NULL),
	       "scores equal to the cpu backend's");
	std::vector<uint32_t> rc(d->U), re(d->U);
	ok = !ncf_backend_eval_ranks(&cpu, 0, d->U, rc.data()) &&
	     !ncf_backend_eval_ranks(&emu, 0, d->U, re.data());
	int same = 0;
	for (uint32_t u = 0; u < d->U; u++) {
		if (rc[u] != re[u])
			tap_diag("user %u: rank %u, cpu %u", u, re[u], rc[u]);
		same += rc[u] == re[u];
	}
	tap_ok(ok && same == (int)d->U, "evaluation ranks equal for all %u users", d->U);
	/* a slice of users, as ranks get them */
	std::vector<uint32_t> part(d->U);
	ok = !ncf_backend_eval_ranks(&emu, 5, d->U - 3, part.data());
	tap_ok(ok && std::equal(part.begin(), part.begin() + (d->U - 8), re.begin() + 5),
	       "ranks of a slice of users equal those of all");
	close_be(&cpu);
	close_be(&emu);
}

/* The gradients and loss sums of emu against want (the cpu backend or the
 * reference) on two batches of 512, the first and a short last one of 300:
 * per tensor |d| <= 1e-5 max|g| + rtol |g|, loss sums rel 1e-6. */
static void check_two_batches(struct ncf_backend *want, struct ncf_backend *emu,
			      const struct data *d, double rtol, struct helper_err *e)
{
	size_t total = want->layout.total;
	uint64_t S = epoch_samples(d, want->hp.negatives);
	fvec gw(total), ge(total);
	for (int k = 0; k < 2; k++) {
		double lw = 0, le = 0;
		uint64_t n = std::min<uint64_t>(k ? 300 : 512, S), first = k ? S - n : 0;
		int ok = !ncf_backend_grad(want, 1, first, n, gw.data(), &lw) &&
			 !ncf_backend_grad(emu, 1, first, n, ge.data(), &le);
		tap_ok(ok && close_tensors(want, ge.data(), gw.data(), 1e-5, rtol, "grad", e),
		       "batch at %llu: the gradient per tensor", (unsigned long long)first);
		tap_ok(ok && tap_close(le, lw, 0, 1e-6, "loss sum"), "batch at %llu: the loss sum",
		       (unsigned long long)first);
	}
}

static void t_training_grad(const struct data *d, const struct ncf_shape *s, float dropout,
			    uint32_t k = 4)
{
	struct ncf_hparams hp = hparams(512, dropout, 0);
	hp.negatives = k;
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
	check_two_batches(&cpu, &emu, d, 1e-5, NULL);
	close_be(&cpu);
	close_be(&emu);
}

/* One and five steps' parameters, then the ranks. */
static void t_training_steps(const struct data *d, const struct ncf_shape *s, float dropout)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, dropout, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
	size_t total = cpu.layout.total;
	uint64_t S = epoch_samples(d, hp.negatives);
	double lc = 0, le = 0;
	int ok = !ncf_backend_train_step(&cpu, 0, 0, B, &lc) &&
		 !ncf_backend_train_step(&emu, 0, 0, B, &le);
	fvec pc = get_params(&cpu), pe = get_params(&emu);
	struct helper_err e1 = {0, 0, 0}, e5 = {0, 0, 0};
	tap_ok(ok && helper_close_all(pe.data(), pc.data(), total, 1e-6, 1e-5,
				      "params after 1 step", &e1) &&
		       cpu.step == 1 && emu.step == 1,
	       "parameters after one Adam step equal (max |d| %.2g)", e1.abs);
	/* four more, crossing into the next epoch */
	uint64_t pos = B;
	for (int k = 0; k < 4; k++) {
		uint32_t ep = pos >= S ? 1 : 0;
		uint64_t first = pos % S, n = std::min<uint64_t>(B, S - first);
		ok = !ncf_backend_train_step(&cpu, ep, first, n, &lc) &&
		     !ncf_backend_train_step(&emu, ep, first, n, &le);
		tap_ok(ok && tap_close(le, lc, 0, 1e-5, "loss sum"), "step %d: the loss sum", k + 2);
		pos += n;
	}
	pc = get_params(&cpu), pe = get_params(&emu);
	tap_ok(helper_close_all(pe.data(), pc.data(), total, 1e-4, 0, "params after 5 steps", &e5),
	       "parameters after five steps within 1e-4 (max |d| %.2g)", e5.abs);
	fvec mc(total), me(total), vc(total), ve(total);
	ncf_backend_get_state(&cpu, NULL, mc.data(), vc.data());
	ncf_backend_get_state(&emu, NULL, me.data(), ve.data());
	tap_ok(close_tensors(&cpu, me.data(), mc.data(), 1e-4, 1e-4, "Adam m"), "Adam m");
	/* evaluation after training: the tables follow the parameters */
	std::vector<uint32_t> rc(d->U), re(d->U);
	ok = !ncf_backend_eval_ranks(&cpu, 0, d->U, rc.data()) &&
	     !ncf_backend_eval_ranks(&emu, 0, d->U, re.data());
	int diff = 0;
	for (uint32_t u = 0; u < d->U; u++)
		diff += rc[u] != re[u];
	tap_ok(ok && diff <= 1, "ranks after five steps equal (%d of %u differ)", diff, d->U);
	close_be(&cpu);
	close_be(&emu);
}

/* Two ranks: each takes its slice; the sum of their gradients is one
 * rank's. */
static void t_ranks(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 333;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_dist r0 = {0, 2, 0, 2, 0, 0.0}, r1 = {1, 2, 1, 2, 0, 0.0};
	struct ncf_backend c0, e0, e1, e;
	if (!tap_ok(!open_be(&c0, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &r0, d) &&
			    !open_be(&e0, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &r0, d) &&
			    !open_be(&e1, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &r1, d) &&
			    !open_be(&e, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, &one, d),
		    "open the backends"))
		return;
	size_t total = c0.layout.total;
	fvec g0c(total), g0(total), g1(total), g(total);
	double l0c, l0, l1, l;
	int ok = !ncf_backend_grad(&c0, 0, 100, B, g0c.data(), &l0c) &&
		 !ncf_backend_grad(&e0, 0, 100, B, g0.data(), &l0) &&
		 !ncf_backend_grad(&e1, 0, 100, B, g1.data(), &l1) &&
		 !ncf_backend_grad(&e, 0, 100, B, g.data(), &l);
	tap_ok(ok && close_tensors(&c0, g0.data(), g0c.data(), 1e-5, 1e-5, "rank 0 grad"),
	       "rank 0 of 2: gradient of its slice equal to the cpu backend's");
	for (size_t j = 0; j < total; j++)
		g0[j] += g1[j];
	tap_ok(ok && close_tensors(&e, g0.data(), g.data(), 1e-5, 1e-5, "rank sum") &&
		       tap_close(l0 + l1, l, 0, 1e-6, "loss"),
	       "ranks 0 + 1 of 2: gradients and losses sum to one rank's");
	close_be(&c0), close_be(&e0), close_be(&e1), close_be(&e);
}

/* Bounds on the relative L2 error of each gradient tensor in precision p
 * with the dense implementation under test.  bf16 keeps 8 significant bits, fp16 and
 * TF32 11: besides the rounding itself (2^-9, 2^-12 relative), a
 * pre-activation near 0 may change sign, switching a ReLU unit off or on
 * for one sample, which changes that sample's whole contribution; in this
 * tiny model at initialisation, where a tensor's gradient is a sum of
 * largely cancelling terms (one sample's share of 512 is ~1/sqrt(512) =
 * 4%), a handful of such switches moves it by up to a few percent; how many
 * happen is luck (seen: bf16 5.6% with GEMMs, 4.1% fused; fp16 0.6%, 0.06%;
 * TF32 5.0% fused).  The emulated TF32 of the GEMMs (plain, lt) is fp32
 * (they are OpenBLAS), the fused kernels round their inputs to TF32
 * (emu.h's mma.sync), as on a GPU. */
static double low_precision_tol(enum ncf_precision p)
{
	int fused = !strcmp(g_dense, "fused");
	return p == NCF_PRECISION_TF32 ? (fused ? 0.10 : 1e-4)
	       : p == NCF_PRECISION_BF16 ? 0.10
					 : (fused ? 0.10 : 0.02);
}

/* The gradient and logits in precision p against the cpu backend's fp32,
 * then three training steps. */
static void t_low_precision(const struct data *d, const struct ncf_shape *s, enum ncf_precision p)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (!tap_ok(!open_be(&cpu, &ncf_backend_cpu, s, &hp, NCF_PRECISION_FP32, &one, d),
		    "open the cpu backend"))
		return;
	if (open_emu(&emu, s, &hp, d, p)) {
		close_be(&cpu);
		return;
	}
	const char *name = ncf_precision_name(p);
	size_t total = cpu.layout.total, n = (size_t)d->U * 3;
	fvec gc(total), ge(total), lgc(n), lge(n);
	std::vector<uint32_t> us(n), is(n);
	for (size_t j = 0; j < n; j++)
		us[j] = (uint32_t)(j / 3), is[j] = (uint32_t)((j * 7) % d->I);
	double lc, le, tol = low_precision_tol(p);
	int ok = !ncf_backend_grad(&cpu, 0, 0, B, gc.data(), &lc) &&
		 !ncf_backend_logits(&cpu, us.data(), is.data(), n, lgc.data()) &&
		 !ncf_backend_grad(&emu, 0, 0, B, ge.data(), &le);
	tap_ok(ok && l2_tensors(&cpu, ge.data(), gc.data(), tol, name),
	       "the gradient within %g (relative L2 per tensor)", tol);
	tap_ok(ok && tap_close(le, lc, 0, 1e-2, "loss"), "the loss within 1e-2");
	tap_ok(!ncf_backend_logits(&emu, us.data(), is.data(), n, lge.data()) &&
		       helper_close_all(lge.data(), lgc.data(), n, 2e-2, 2e-2, name, NULL),
	       "logits within 2e-2 of fp32");
	double loss;
	ok = 1;
	uint64_t S = (uint64_t)d->items.size() * 5, pos = 0;
	for (int st = 0; st < 3; st++) {
		uint64_t nb = std::min<uint64_t>(B, S - pos);
		ok &= !ncf_backend_train_step(&emu, 0, pos, nb, &loss) && isfinite(loss);
		pos = (pos + nb) % S;
	}
	tap_ok(ok && emu.step == 3, "three training steps with finite losses");
	close_be(&emu);
	close_be(&cpu);
}

/* fp16 dynamic loss scaling. */
static void t_loss_scaling(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend emu;
	if (open_emu(&emu, s, &hp, d, NCF_PRECISION_FP16))
		return;
	tap_ok(ncf_cuda_loss_scale(&emu) == 32768.0f, "the loss scale starts at 2^15");
	fvec before = get_params(&emu);
	ncf_cuda_set_loss_scale(&emu, 1073741824.0f, 2); /* 2^30: dlogit overflows fp16 */
	double loss;
	int ok = !ncf_backend_train_step(&emu, 0, 0, B, &loss);
	fvec after = get_params(&emu);
	tap_ok(ok && emu.step == 0 && !memcmp(before.data(), after.data(), after.size() * 4) &&
		       ncf_cuda_loss_scale(&emu) == 536870912.0f,
	       "an overflowing step is skipped and halves the scale (now %g)",
	       (double)ncf_cuda_loss_scale(&emu));
	ncf_cuda_set_loss_scale(&emu, 1024.0f, 2);
	ok = !ncf_backend_train_step(&emu, 0, 0, B, &loss) && emu.step == 1 &&
	     ncf_cuda_loss_scale(&emu) == 1024.0f;
	ok &= !ncf_backend_train_step(&emu, 0, B, B, &loss) && emu.step == 2 &&
	      ncf_cuda_loss_scale(&emu) == 2048.0f;
	tap_ok(ok, "good steps advance Adam and double the scale after the interval");
	close_be(&emu);
}

/* ---- the cost recorder, the dense layers, losses kept, host memory --------- */

/* The cost recorder (kernels/cuda/cost.cuh): a step run live notes every
 * launch emu.h sees (kernels, GEMMs, memsets, copies; the sort's notes
 * stand for CUB's launches, which the CPU twin has none of), and the dry
 * run of ncf_cuda_step_cost notes the same launches with the same bytes.
 * So the cost model counts what the code launches.  dense: the dense
 * layers' implementation (NCF_CUDA_DENSE, set by the caller). */
static void t_cost(const struct data *d, const struct ncf_shape *s, const char *dense,
		   enum ncf_precision p)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend emu;
	if (open_emu(&emu, s, &hp, d, p))
		return;
	static struct ncf_cuda_cost live, dry;
	unsigned long c0[4], c1[4];
	double loss;
	/* a step in the middle of training (the dry run's model of one) */
	int ok = !ncf_backend_train_step(&emu, 0, B, B, &loss) && !ncf_cuda_debug_emu_counts(c0) &&
		 !ncf_cuda_debug_step_cost(&emu, 0, 0, B, NULL, &live) &&
		 !ncf_cuda_debug_emu_counts(c1) && !ncf_backend_take_loss(&emu, &loss);
	ok &= live.kernels == c1[0] - c0[0] && live.gemms == c1[1] - c0[1] &&
	      live.memsets == c1[2] - c0[2] && live.copies == c1[3] - c0[3];
	if (!ok)
		tap_diag("noted %u kernels, %u gemms, %u memsets, %u copies; emu saw %lu, %lu, %lu, "
			 "%lu",
			 live.kernels, live.gemms, live.memsets, live.copies, c1[0] - c0[0],
			 c1[1] - c0[1], c1[2] - c0[2], c1[3] - c0[3]);
	tap_ok(ok && live.dropped == 0 && live.bytes > 0 && live.flops > 0,
	       "the recorder noted each of the step's %u launches once", live.launches);
	int64_t P = (int64_t)d->items.size();
	ok = !ncf_cuda_step_cost(s, &hp, p, dense, P, &dry) && dry.n == live.n &&
	     dry.launches == live.launches && dry.bytes == live.bytes;
	for (unsigned j = 0; ok && j < dry.n; j++)
		if (strcmp(dry.item[j].name, live.item[j].name) ||
		    dry.item[j].bytes != live.item[j].bytes) {
			tap_diag("launch %u: dry %s %.0f, live %s %.0f", j + 1, dry.item[j].name,
				 dry.item[j].bytes, live.item[j].name, live.item[j].bytes);
			ok = 0;
		}
	tap_ok(ok, "the dry cost run notes the same launches and bytes (%.0f)", dry.bytes);
	close_be(&emu);
}

/* Open the emulated backend in precision p with the dense layers pinned
 * to spec (NCF_CUDA_DENSE).  Returns 0 or -1. */
static int open_dense(struct ncf_backend *be, const struct ncf_shape *s,
		      const struct ncf_hparams *hp, const struct data *d, enum ncf_precision p,
		      const char *spec)
{
	setenv("NCF_CUDA_DENSE", spec, 1);
	int rc = open_be(be, &ncf_backend_cuda, s, hp, p, &one, d);
	unsetenv("NCF_CUDA_DENSE");
	return rc;
}

/* Each implementation of the dense layers, and mixes layer by layer,
 * against plain (GEMMs and element-wise passes) on the same batch: the
 * same function summed in other orders (the fused kernels' per-block
 * partials, cuBLASLt's stand-in), so as close as each is to reference.c
 * in fp32; in bf16 they round their activations in different places (the
 * fused forward rounds once after the bias), within the bf16 bound of
 * t_low_precision.  With and without dropout (without it, lt's backward
 * above an lt layer takes cuBLASLt's dReLU and bias gradient,
 * DRELU_BGRAD). */
static void t_dense(const struct data *d, const struct ncf_shape *s, enum ncf_precision p,
		    float dropout)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, dropout, 0);
	static const char *const specs[] = {"fused", "lt", "lt,fused", "fused,lt", "lt,plain"};
	struct ncf_backend ref;
	if (!tap_ok(!open_dense(&ref, s, &hp, d, p, "plain"), "open plain"))
		return;
	int fp32 = p == NCF_PRECISION_FP32;
	size_t total = ref.layout.total;
	fvec gr(total), g(total);
	double lr, l;
	int ok = !ncf_backend_grad(&ref, 1, 100, B, gr.data(), &lr);
	for (const char *spec : specs) {
		struct ncf_backend be;
		if (!tap_ok(!open_dense(&be, s, &hp, d, p, spec), "open %s", spec))
			continue;
		int got = ok && !ncf_backend_grad(&be, 1, 100, B, g.data(), &l);
		tap_ok(got && (fp32 ? close_tensors(&ref, g.data(), gr.data(), 1e-5, 1e-4, spec)
				    : l2_tensors(&ref, g.data(), gr.data(), 0.10, spec)),
		       "%s: the gradient as plain's", spec);
		tap_ok(got && tap_close(l, lr, 0, fp32 ? 1e-6 : 1e-3, "loss sum"),
		       "%s: the loss sum as plain's", spec);
		close_be(&be);
	}
	close_be(&ref);
}

/* A dense layer wider than the fused kernels take (300 inputs): the fixed
 * order takes lt for it, a pin of fused falls back to plain (said at -v),
 * and either step's gradient is the cpu backend's; a bad NCF_CUDA_DENSE is
 * refused when the backend opens. */
static void t_wide(const struct data *d)
{
	struct ncf_shape w = {41, 67, 8, 3, {16, 300, 8}};
	uint64_t B = 256;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend cpu, be;
	if (!tap_ok(!open_be(&cpu, &ncf_backend_cpu, &w, &hp, NCF_PRECISION_FP32, &one, d),
		    "open the cpu backend"))
		return;
	size_t total = cpu.layout.total;
	fvec gc(total), g(total);
	double lc, l;
	int ok = !ncf_backend_grad(&cpu, 0, 0, B, gc.data(), &lc);
	int verbosity = ncf_verbosity;
	for (const char *spec : {"", "fused"}) {
		ncf_verbosity = 3;
		helper_capture_begin();
		int opened = !open_dense(&be, &w, &hp, d, NCF_PRECISION_FP32, spec);
		int got = opened && !ncf_backend_grad(&be, 0, 0, B, g.data(), &l);
		std::string said = capture_end();
		ncf_verbosity = verbosity;
		tap_ok(got && ok && close_tensors(&cpu, g.data(), gc.data(), 1e-5, 1e-4, "wide") &&
			       tap_close(l, lc, 0, 1e-6, "loss"),
		       "NCF_CUDA_DENSE='%s': the gradient as the cpu backend's", spec);
		const char *want = *spec ? "plain" : "lt";
		const char *names[NCF_MAX_LAYERS] = {NULL};
		if (opened)
			ncf_cuda_debug_dense(&be, names);
		tap_ok(opened && names[2] && !strcmp(names[2], want) &&
			       said.find(*spec ? "wider than the fused kernels take" : "lt (300 -> 8") !=
				       std::string::npos,
		       "layer 2 took %s (%s), said at -v", names[2] ? names[2] : "nothing", want);
		tap_diag("at -v: %s", said.c_str());
		if (opened)
			close_be(&be);
	}
	close_be(&cpu);
	setenv("NCF_CUDA_DENSE", "sideways", 1);
	helper_capture_begin();
	int opened = !open_be(&be, &ncf_backend_cuda, &w, &hp, NCF_PRECISION_FP32, &one, d);
	std::string err = capture_end();
	unsetenv("NCF_CUDA_DENSE");
	tap_ok(!opened && err.find("NCF_CUDA_DENSE: 'sideways' is not fused, lt or plain") !=
				  std::string::npos,
	       "a name it does not know is refused: %s", err.c_str());
	if (opened)
		close_be(&be);
}

/* The cost model at NVIDIA's shape: the fused dense layers move fewer
 * bytes in fewer launches than plain's GEMMs and passes, and the step
 * with the fixed order (fused) moves no more than the 8.63 GB per step
 * of bf16 that the fused step was held to before. */
static void t_dense_cost(enum ncf_precision p)
{
	struct ncf_shape ml = {138493, 26744, 64, 4, {256, 256, 128, 64}};
	struct ncf_hparams big = hparams(1u << 20, 0.5f, 0);
	static struct ncf_cuda_cost cf, cu, cd;
	int ok = !ncf_cuda_step_cost(&ml, &big, p, "fused", 19861770, &cf) &&
		 !ncf_cuda_step_cost(&ml, &big, p, "plain", 19861770, &cu) &&
		 !ncf_cuda_step_cost(&ml, &big, p, NULL, 19861770, &cd);
	tap_ok(ok && cf.bytes < cu.bytes && cf.launches < cu.launches && cf.flops > 0,
	       "fused %.2f GB in %u launches, plain %.2f GB in %u", cf.bytes / 1e9, cf.launches,
	       cu.bytes / 1e9, cu.launches);
	tap_ok(ok && cd.bytes == cf.bytes && cd.dense[2] && !strcmp(cd.dense[2], "fused") &&
		       (p != NCF_PRECISION_BF16 || cd.bytes <= 8626552250.0),
	       "the fixed order takes fused: %.3f GB per step", cd.bytes / 1e9);
}

/* Steps given no loss_sum keep their losses (on the device):
 * ncf_backend_take_loss returns their sum, the same double as the losses
 * returned step by step added in order, and the steps do the same
 * (parameters bit for bit); for the cpu backend the wrapper keeps it.
 * dense: the dense layers' implementation, or NULL for the cpu backend. */
static void t_deferred_loss(const struct data *d, const struct ncf_shape *s, const char *dense,
			    enum ncf_precision p)
{
	uint64_t B = 256;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	const struct ncf_backend_i *impl = dense ? &ncf_backend_cuda : &ncf_backend_cpu;
	struct ncf_backend a, b;
	setenv("NCF_CUDA_DENSE", dense ? dense : "fused", 1);
	int ok = !open_be(&a, impl, s, &hp, p, &one, d) && !open_be(&b, impl, s, &hp, p, &one, d);
	unsetenv("NCF_CUDA_DENSE");
	if (!tap_ok(ok, "open the backends"))
		return;
	double sum = 0, taken = -1, l;
	uint64_t S = (uint64_t)d->items.size() * 5;
	for (uint64_t pos = 0, t = 0; t < 6; t++, pos = (pos + B) % S) {
		uint64_t n = std::min<uint64_t>(B, S - pos);
		ok &= !ncf_backend_train_step(&a, 0, pos, n, &l);
		sum += l;
		ok &= !ncf_backend_train_step(&b, 0, pos, n, NULL);
	}
	tap_ok(ok, "six steps each");
	tap_ok(!ncf_backend_take_loss(&b, &taken) && taken == sum,
	       "the losses kept, taken at once: %.9g, step by step %.9g", taken, sum);
	tap_ok(!ncf_backend_take_loss(&b, &l) && l == 0, "taken again: 0");
	fvec pa = get_params(&a), pb = get_params(&b);
	tap_ok(!memcmp(pa.data(), pb.data(), pa.size() * 4) && a.step == b.step,
	       "the same steps, bit for bit");
	close_be(&a);
	close_be(&b);
}

/* The host memory a checkpoint's snapshot goes to (ncf_backend_host_alloc:
 * page-locked from the cuda backend, malloc'd from the cpu one): get_state
 * into it gives the bytes get_state into ordinary memory does, after some
 * steps, and it is freed by the backend that gave it. */
static void t_host_memory(const struct data *d, const struct ncf_shape *s,
			  const struct ncf_backend_i *impl)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend be;
	if (!tap_ok(open_be(&be, impl, s, &hp, NCF_PRECISION_FP32, &one, d) == 0,
		    "open the backend"))
		return;
	int ok = 1;
	for (uint64_t t = 0; t < 3; t++)
		ok &= !ncf_backend_train_step(&be, 0, t * 256, 256, NULL);
	tap_ok(ok, "three steps");
	size_t n = be.layout.total;
	float *hp_ = (float *)ncf_backend_host_alloc(&be, 3 * n * sizeof(float));
	fvec p(n), m(n), v(n);
	ok = !ncf_backend_get_state(&be, hp_, hp_ + n, hp_ + 2 * n) &&
	     !ncf_backend_get_state(&be, p.data(), m.data(), v.data());
	tap_ok(ok && !memcmp(hp_, p.data(), n * 4) && !memcmp(hp_ + n, m.data(), n * 4) &&
		       !memcmp(hp_ + 2 * n, v.data(), n * 4),
	       "the same bytes");
	tap_ok(((uintptr_t)hp_ & 15) == 0, "16-byte aligned");
	ncf_backend_host_free(&be, hp_);
	ncf_backend_host_free(&be, NULL);
	close_be(&be);
}

/* Bad input is refused with a message, not run: ids outside the model,
 * positions past the end of the epoch (which would make the permutation's
 * cycle walk loop forever). */
static void t_refusals(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend emu;
	if (open_emu(&emu, s, &hp, d))
		return;
	uint64_t S = (uint64_t)d->items.size() * 5;
	uint32_t u = d->U, it = 0;
	float out;
	double loss;
	tap_diag("expected messages follow:");
	fflush(stdout);
	tap_ok(ncf_backend_logits(&emu, &u, &it, 1, &out) == -1, "user %u of %u refused", u, d->U);
	tap_ok(ncf_backend_train_step(&emu, 0, S - 10, 11, &loss) == -1 && emu.step == 0,
	       "a batch past the epoch refused");
	close_be(&emu);
}

/* Two epochs of training with evaluation: the same HR@10. */
static void t_run(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 256;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
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
	tap_ok(ok && fabs(hc - he) <= 1.5 / d->U, "%llu steps: HR@10 %.4f, cpu backend %.4f",
	       (unsigned long long)(2 * ((S + B - 1) / B)), he, hc);
	close_be(&cpu);
	close_be(&emu);
}

/* The emulated backend against the reference, directly: two batches'
 * gradients and losses, the logits of every pair, the ranks. */
static void t_oracle(const struct data *d, const struct ncf_shape *s, float dropout)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, dropout, 0);
	struct ncf_backend ref, emu;
	if (open_two(&ref, &ncf_backend_reference, &emu, s, &hp, d))
		return;
	struct helper_err ge_err = {0, 0, 0}, lg_err = {0, 0, 0};
	check_two_batches(&ref, &emu, d, 1e-4, &ge_err);
	tap_diag("worst gradient difference %.3g of its bound", ge_err.tol);
	size_t n = (size_t)d->U * d->I;
	std::vector<uint32_t> us(n), is(n), rr(d->U), re(d->U);
	for (size_t j = 0; j < n; j++)
		us[j] = (uint32_t)(j / d->I), is[j] = (uint32_t)(j % d->I);
	fvec lgr(n), lge(n);
	tap_ok(!ncf_backend_logits(&ref, us.data(), is.data(), n, lgr.data()) &&
		       !ncf_backend_logits(&emu, us.data(), is.data(), n, lge.data()) &&
		       helper_close_all(lge.data(), lgr.data(), n, 1e-6, 1e-5, "logit", &lg_err),
	       "the logits of all %zu pairs (max |d| %.2g)", n, lg_err.abs);
	int diff = 0;
	int ok = !ncf_backend_eval_ranks(&ref, 0, d->U, rr.data()) &&
		 !ncf_backend_eval_ranks(&emu, 0, d->U, re.data());
	for (uint32_t u = 0; u < d->U; u++)
		diff += rr[u] != re[u];
	tap_ok(ok && diff <= 1, "ranks (%d of %u differ)", diff, d->U);
	close_be(&ref);
	close_be(&emu);
}

/* One Adam step from the same state against the reference's, on the batch
 * of t_oracle's first gradient: within the bound its gradient implies. */
static void t_oracle_step(const struct data *d, const struct ncf_shape *s, float dropout)
{
	uint64_t B = 512;
	struct ncf_hparams hp = hparams(B, dropout, 0);
	struct ncf_backend ref, emu;
	if (open_two(&ref, &ncf_backend_reference, &emu, s, &hp, d))
		return;
	size_t total = ref.layout.total;
	fvec gr(total), ge(total);
	double lr, le;
	int ok = !ncf_backend_grad(&ref, 0, 0, B, gr.data(), &lr) &&
		 !ncf_backend_grad(&emu, 0, 0, B, ge.data(), &le) &&
		 !ncf_backend_train_step(&ref, 0, 0, B, &lr) &&
		 !ncf_backend_train_step(&emu, 0, 0, B, &le);
	fvec pr = get_params(&ref), pe = get_params(&emu);
	struct ncf_adam_k ak;
	ncf_adam_constants(&hp, 1, &ak);
	struct helper_err e = {0, 0, 0};
	tap_ok(ok && emu.step == 1, "one step each");
	tap_ok(helper_adam_step_close(pe.data(), pr.data(), ge.data(), gr.data(), total, ak.lr,
				      ak.eps, "params", &e),
	       "the parameters (worst %.3g of the bound)", e.tol);
	tap_diag("one Adam step: worst %.3g of the bound", e.tol);
	close_be(&ref);
	close_be(&emu);
}

/* ---- the scoring path, graphs, faults, ranks -------------------------------- */

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
 * logits' tolerance of t_forward, and exactly ncf_sigmoid of the
 * emulated logits (the sigmoid moved into the head kernel computes the same
 * float as the host sigmoid did).
 */
static void t_scoring(const struct data *d, const struct ncf_shape *s, size_t n)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
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
	tap_ok(ok && helper_close_all(se.data(), sc.data(), n, 1e-6, 1e-5, "score", NULL),
	       "scores equal to the cpu backend's");
	tap_ok(ok && same, "bit for bit the sigmoid of the logits");
	close_be(&cpu);
	close_be(&emu);
}

/* A bad id deep in a long call is named, and the next call works. */
static void t_scoring_bad_id(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
	size_t n = 70000;
	std::vector<uint32_t> us, is;
	random_pairs(d, n, 3, us, is);
	us[50001] = d->U + 5; /* in the third chunk */
	us[60000] = d->U;     /* a later one: not the first */
	fvec out(n);
	helper_capture_begin();
	int rc = ncf_backend_score(&emu, us.data(), is.data(), n, out.data());
	std::string err = capture_end();
	char want[160];
	snprintf(want, sizeof want,
		 "test_cuda_emu: cuda backend: pair 50001 (user %u, item %u) is outside the model "
		 "(%u users, %u items)\n",
		 d->U + 5, is[50001], d->U, d->I);
	if (!tap_ok(rc == -1 && err == want, "the first bad id named, once"))
		tap_diag("got: %s", err.c_str());
	us[50001] = 1, us[60000] = 2;
	fvec sc(n), se(n);
	tap_ok(!ncf_backend_score(&emu, us.data(), is.data(), n, se.data()) &&
		       !ncf_backend_score(&cpu, us.data(), is.data(), n, sc.data()) &&
		       helper_close_all(se.data(), sc.data(), n, 1e-6, 1e-5, "score after", NULL),
	       "the next call scores correctly");
	close_be(&cpu);
	close_be(&emu);
}

/* Scores of emu and cpu on pairs (us, is) equal within t_forward's
 * tolerance. */
static int scores_agree(struct ncf_backend *emu, struct ncf_backend *cpu,
			const std::vector<uint32_t> &us, const std::vector<uint32_t> &is,
			const char *what)
{
	size_t n = us.size();
	fvec se(n), sc(n);
	return !ncf_backend_score(emu, us.data(), is.data(), n, se.data()) &&
	       !ncf_backend_score(cpu, us.data(), is.data(), n, sc.data()) &&
	       helper_close_all(se.data(), sc.data(), n, 1e-6, 1e-5, what, NULL);
}

/* New parameters under emu's graphs, then a training step; cpu given the
 * same parameters.  1 when both keep scoring alike. */
static int change_parameters(struct ncf_backend *emu, struct ncf_backend *cpu,
			     const struct ncf_shape *s, const std::vector<uint32_t> &us,
			     const std::vector<uint32_t> &is)
{
	double loss;
	fvec p(emu->layout.total);
	ncf_model_init(s, &emu->layout, 1234, p.data());
	int ok = !ncf_backend_set_state(emu, p.data(), NULL, NULL) &&
		 !ncf_backend_set_state(cpu, p.data(), NULL, NULL) &&
		 scores_agree(emu, cpu, us, is, "after set_state");
	ok &= !ncf_backend_train_step(emu, 0, 0, 512, &loss) &&
	      !ncf_backend_train_step(cpu, 0, 0, 512, &loss);
	fvec pe = get_params(emu);
	return ok && !ncf_backend_set_state(cpu, pe.data(), NULL, NULL) &&
	       scores_agree(emu, cpu, us, is, "after a step");
}

/*
 * Scoring graphs: captured once per chunk and replayed; still right after
 * the parameters change under them (set_state, a training step: the tables
 * are rebuilt outside the graph), and after the row buffers move (graphs
 * captured on the old ones are not replayed).
 */
static void t_graphs(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
	/* the row buffers as a step of 512 leaves them, so that the step below
	 * does not move them */
	fvec gr(emu.layout.total);
	double loss;
	ncf_backend_grad(&emu, 0, 0, 512, gr.data(), &loss);
	std::vector<uint32_t> us, is;
	random_pairs(d, 300, 9, us, is);
	uint64_t c0, l0, c1, l1, c2, l2, c3, l3;
	ncf_cuda_debug_graphs(&emu, &c0, &l0);
	int ok = scores_agree(&emu, &cpu, us, is, "first") &&
		 scores_agree(&emu, &cpu, us, is, "second");
	ncf_cuda_debug_graphs(&emu, &c1, &l1);
	tap_ok(ok && c1 - c0 == 1 && l1 - l0 == 2,
	       "300 pairs twice: one graph captured, launched twice (%llu, %llu)",
	       (unsigned long long)(c1 - c0), (unsigned long long)(l1 - l0));
	ok = change_parameters(&emu, &cpu, s, us, is);
	ncf_cuda_debug_graphs(&emu, &c2, &l2);
	tap_ok(ok && c2 == c1 && l2 - l1 == 2,
	       "after set_state and after a training step: the same graph replays the new "
	       "parameters' scores");
	/* the row buffers grow (a longer call), then the short call again */
	std::vector<uint32_t> ub, ib;
	random_pairs(d, 5000, 10, ub, ib);
	ok = scores_agree(&emu, &cpu, ub, ib, "5000") && scores_agree(&emu, &cpu, us, is, "300");
	ncf_cuda_debug_graphs(&emu, &c3, &l3);
	tap_ok(ok && c3 - c2 == 2, "after the row buffers move: graphs captured anew (%llu)",
	       (unsigned long long)(c3 - c2));
	close_be(&cpu);
	close_be(&emu);
}

/* A capture that fails falls back to plain launches and says so in one
 * line, at the normal level as at -v (a latency measured then is not the
 * graph's); right scores either way. */
static void t_graphs_no_capture(const struct data *d, const struct ncf_shape *s, int verbose)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
	std::vector<uint32_t> us, is;
	random_pairs(d, 300, 9, us, is);
	int saved = ncf_verbosity;
	ncf_verbosity = verbose ? 3 : 2;
	ncf_cuda_emu_blas_no_capture(1);
	helper_capture_begin();
	int ok = scores_agree(&emu, &cpu, us, is, "no graphs") &&
		 scores_agree(&emu, &cpu, us, is, "no graphs again");
	std::string err = capture_end();
	ncf_cuda_emu_blas_no_capture(0);
	ncf_verbosity = saved;
	uint64_t cc, ll;
	ncf_cuda_debug_graphs(&emu, &cc, &ll);
	int said = lines_of(err) == 1 &&
		   err.find("no CUDA graph for scoring 300 pairs (") != std::string::npos &&
		   err.find("cuBLAS") != std::string::npos;
	tap_ok(ok && cc == 0 && ll == 0, "plain launches score right");
	if (!tap_ok(said, verbose ? "one line at -v" : "one line at the normal level"))
		tap_diag("stderr: %s", err.c_str());
	close_be(&cpu);
	close_be(&emu);
}

/* Pairs kept where the backend computes (the device-resident benchmark):
 * the same scores as the host path, on the emulated GPU and through the
 * wrappers' host copy on the CPU; asking for more than is kept, or keeping
 * a bad id, is refused. */
static void t_resident(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_backend cpu, emu;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
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
	tap_ok(ok && !memcmp(re.data(), he.data(), n * 4) && !memcmp(rc.data(), hc.data(), n * 4),
	       "all kept pairs score as the host path does");
	tap_ok(!ncf_backend_score_resident(&emu, 10, re.data()) && !memcmp(re.data(), he.data(), 40),
	       "the first 10 kept pairs too");
	helper_capture_begin();
	us[7] = d->U;
	int refused = ncf_backend_score_resident(&emu, n + 1, NULL) == -1 &&
		      ncf_backend_score_resident(&cpu, n + 1, NULL) == -1 &&
		      ncf_backend_resident_set(&emu, us.data(), is.data(), n) == -1 &&
		      ncf_backend_resident_set(&cpu, us.data(), is.data(), n) == -1;
	std::string err = capture_end();
	tap_ok(refused && lines_of(err) == 4 &&
		       err.find("cuda backend: pair 7 (user 41, item") != std::string::npos &&
		       err.find("cpu backend: pair 7 (user 41, item") != std::string::npos,
	       "more pairs than kept, and a bad id to keep, are refused with a message");
	close_be(&cpu);
	close_be(&emu);
}

/* NCF_CUDA_SYNC=1: the same results, no graphs. */
static void t_sync(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	std::vector<uint32_t> us, is;
	random_pairs(d, 2000, 13, us, is);
	fvec g[2], sc[2];
	double loss;
	uint64_t captured[2] = {0, 0}, launched;
	for (int sync = 0; sync < 2; sync++) {
		/* the checks read it when a backend opens */
		if (sync)
			setenv("NCF_CUDA_SYNC", "1", 1);
		struct ncf_backend be;
		int opened = !open_emu(&be, s, &hp, d);
		unsetenv("NCF_CUDA_SYNC");
		if (!opened)
			return;
		g[sync].resize(be.layout.total), sc[sync].resize(2000);
		tap_ok(!ncf_backend_grad(&be, 0, 0, 512, g[sync].data(), &loss) &&
			       !ncf_backend_train_step(&be, 0, 0, 512, &loss) &&
			       !ncf_backend_score(&be, us.data(), is.data(), 2000, sc[sync].data()),
		       "a gradient, a step and scores%s", sync ? " with NCF_CUDA_SYNC=1" : "");
		ncf_cuda_debug_graphs(&be, &captured[sync], &launched);
		close_be(&be);
	}
	tap_ok(!memcmp(g[0].data(), g[1].data(), g[0].size() * 4) &&
		       !memcmp(sc[0].data(), sc[1].data(), 2000 * 4),
	       "the same gradient, step and scores, bit for bit");
	tap_ok(captured[0] == 1 && captured[1] == 0, "a graph without, none with NCF_CUDA_SYNC=1");
}

/* A kernel that faults is named by NCF_CUDA_SYNC=1 (sync), and without it
 * the fault surfaces at the synchronisation with the hint, once each. */
static void t_fault(const struct data *d, const struct ncf_shape *s, int sync)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	double loss;
	if (sync)
		setenv("NCF_CUDA_SYNC", "1", 1);
	struct ncf_backend be;
	int opened = !open_emu(&be, s, &hp, d);
	unsetenv("NCF_CUDA_SYNC");
	if (!opened)
		return;
	helper_capture_begin();
	int rc = ncf_cuda_debug_fault(&be);
	int rc2 = ncf_backend_train_step(&be, 0, 0, 512, &loss); /* the device is lost */
	std::string err = capture_end();
	int named = err.find("kernel fault_kernel (") != std::string::npos &&
		    err.find("test_hooks.cu:") != std::string::npos &&
		    err.find("unspecified launch failure (cudaErrorLaunchFailure)") !=
			    std::string::npos;
	int hinted = err.find("a kernel launched before this call failed; NCF_CUDA_SYNC=1 "
			      "names it") != std::string::npos;
	int good = rc == -1 && rc2 == -1 && lines_of(err) == 1 &&
		   (sync ? named && !hinted : hinted && !named);
	if (!tap_ok(good, "the fault %s, in one line, and the next step fails",
		    sync ? "named" : "hinted at"))
		tap_diag("rc %d, %d; stderr: %s", rc, rc2, err.c_str());
	close_be(&be);
	ncf_cuda_emu_reset_faults();
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
static void t_fp16_nan(const struct data *d, const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(512, 0.5f, 0);
	struct ncf_backend emu;
	if (open_emu(&emu, s, &hp, d, NCF_PRECISION_FP16))
		return;
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
	       "user 0's logits all NaN (%d of %u), user 1's finite (%d)", nan0, d->I, finite1);
	float scale = ncf_cuda_loss_scale(&emu);
	double loss;
	ok = !ncf_backend_train_step(&emu, 0, 0, 512, &loss);
	fvec after = get_params(&emu);
	tap_ok(ok && emu.step == 0 && !memcmp(p.data(), after.data(), p.size() * 4) &&
		       ncf_cuda_loss_scale(&emu) == scale / 2,
	       "the step skipped, the loss scale halved (%g -> %g)", (double)scale,
	       (double)ncf_cuda_loss_scale(&emu));
	close_be(&emu);
}

/* More ranks on a node than GPUs: refused when the backend opens, as
 * "unavailable" (-3), naming ranks, host and GPUs.  Several ranks of a job
 * get their communicator when the backend opens: in a build without NCCL,
 * as here, that is where they are refused. */
static void t_ranks_per_node(const struct ncf_shape *s)
{
	struct ncf_hparams hp = hparams(256, 0.5f, 0);
	struct ncf_dist two_here = {1, 2, 1, 2, 1, 0.0}, one_each = {0, 2, 0, 1, 1, 0.0};
	struct ncf_backend be;
	ncf_cuda_emu_devices(1);
	helper_capture_begin();
	int rc = ncf_backend_open_impl(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, 2,
				       &two_here);
	std::string err = capture_end();
	if (!tap_ok(rc == -3 && lines_of(err) == 1 &&
			    err.find("cuda backend: 2 ranks on ") != std::string::npos &&
			    err.find(" and 1 GPU there: start at most one rank per GPU") !=
				    std::string::npos,
		    "2 ranks on a node of 1 GPU: refused at open with -3 (exit 3)"))
		tap_diag("rc %d, stderr: %s", rc, err.c_str());
	ncf_cuda_emu_devices(2);
	helper_capture_begin();
	rc = ncf_backend_open_impl(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, 2, &two_here);
	err = capture_end();
	int nccl_msg = err.find("2 ranks need NCCL") != std::string::npos;
	if (rc == 0)
		close_be(&be);
	helper_capture_begin();
	int rc2 = ncf_backend_open_impl(&be, &ncf_backend_cuda, s, &hp, NCF_PRECISION_FP32, 2,
					&one_each);
	err = capture_end();
	tap_ok(rc == -1 && nccl_msg, "2 ranks on a node of 2 GPUs: refused, NCCL named");
	tap_ok(rc2 == -1 && err.find("2 ranks need NCCL") != std::string::npos,
	       "2 ranks with a GPU each on two nodes: refused, NCCL named");
	ncf_cuda_emu_devices(1);
}

/*
 * A whole epoch: the emulated backend's loss per step and over the epoch
 * equal to the cpu backend's (relative 1e-5 per step as t_training_steps's
 * five steps, 1e-5 over the epoch: the per-step differences do not add up
 * in one direction); and stopping after k steps, reopening from the state
 * (parameters, moments, step) and going on gives the uninterrupted run's
 * parameters bit for bit (--resume).
 */
static void t_epoch_and_resume(const struct data *d, const struct ncf_shape *s)
{
	uint64_t B = 256;
	struct ncf_hparams hp = hparams(B, 0.5f, 0);
	struct ncf_backend cpu, emu, part;
	if (open_two(&cpu, &ncf_backend_cpu, &emu, s, &hp, d))
		return;
	if (open_emu(&part, s, &hp, d))
		return;
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
	       "a whole epoch (%d steps): mean loss %.6f, cpu backend %.6f", steps, te / S, tc / S);
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
	       "stopped after %d steps and resumed from the state: the epoch's parameters bit "
	       "for bit",
	       stop_at);
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
 *    step falls back to plain launches: said in one line, at the normal
 *    level as at -v (a timing must not pass for the graph's);
 * in fp32, bf16 and fp16.  With the graph, the first step runs uncaptured
 * (in bf16 and fp16 it also makes the 16-bit copy of the parameters) and
 * every later one is captured and launched as a graph, instantiated once
 * (cudaGraphExecUpdate takes each later capture, the short step's too);
 * without it, no capture; the counts the tools report (ncf_cuda_graph_counts:
 * replays, plain steps, a failed capture) say so; and a replay runs the
 * very kernels, GEMMs, memsets and copies of a plain step (emu.h's counts
 * of what ran).
 */
struct graph_run {
	fvec p, m, v;
	double loss[2], taken;
	uint64_t captured, instantiated, launched;
	struct ncf_cuda_graphs counts; /* what the tools are told */
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
	helper_capture_begin();
	unsigned long c0[4], c1[4];
	int ok = !ncf_backend_train_step(&be, 0, 0, B, NULL) && !ncf_cuda_debug_emu_counts(c0) &&
		 !ncf_backend_train_step(&be, 0, B, B, &r->loss[0]) &&
		 !ncf_cuda_debug_emu_counts(c1) && !ncf_backend_train_step(&be, 0, 2 * B, B, NULL) &&
		 !ncf_backend_train_step(&be, 0, 3 * B, std::min<uint64_t>(B / 2 + 3, S - 3 * B),
					 &r->loss[1]) &&
		 !ncf_backend_take_loss(&be, &r->taken);
	r->err = capture_end();
	ncf_verbosity = saved_verbosity;
	ncf_cuda_emu_blas_no_capture(0);
	for (int k = 0; k < 4; k++)
		r->ran[k] = c1[k] - c0[k];
	size_t total = be.layout.total;
	r->p.resize(total), r->m.resize(total), r->v.resize(total);
	ok &= !ncf_backend_get_state(&be, r->p.data(), r->m.data(), r->v.data()) && be.step == 4;
	ncf_cuda_debug_step_graph(&be, &r->captured, &r->instantiated, &r->launched);
	ncf_cuda_graph_counts(&be, &r->counts);
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

/* The label of run mode in the TAP lines. */
static std::string graph_mode_label(int mode)
{
	const char *other = getenv("NCF_EMU_LAZY") && !strcmp(getenv("NCF_EMU_LAZY"), "1")
				    ? "eager"
				    : "lazy";
	switch (mode) {
	case GR_NO_GRAPH:
		return "NCF_CUDA_GRAPH=0, plain launches";
	case GR_SYNC:
		return "NCF_CUDA_SYNC=1, plain launches";
	case GR_OTHER_MODE:
		return std::string("the graph with ") + other + " streams";
	case GR_NO_CAPTURE_V:
		return "a failed capture (one line at -v), then plain launches";
	default:
		return "a failed capture (one line at the normal level), then plain launches";
	}
}

/* The lines of s that say a dense layer's implementation. */
static int dense_lines(const std::string &s)
{
	int n = 0;
	for (size_t at = s.find("cuda backend: dense layer "); at != std::string::npos;
	     at = s.find("cuda backend: dense layer ", at + 1))
		n++;
	return n;
}

/* Run x (mode) against the graph's run g: the same parameters, moments and
 * losses, bit for bit; graphs only in the other stream mode; what ran the
 * same where the steps are not replaced; the failed capture's stderr. */
static void check_graph_mode(const struct graph_run *g, const struct graph_run *x, int mode)
{
	int graphs = mode == GR_OTHER_MODE ? 3 : 0;
	int same = x->ok && graph_runs_equal(g, x) && x->captured == (uint64_t)graphs &&
		   x->launched == (uint64_t)graphs && x->counts.replays == (uint64_t)graphs &&
		   x->counts.plain == 4 - (uint64_t)graphs &&
		   x->counts.failed == (mode == GR_NO_CAPTURE_V || mode == GR_NO_CAPTURE);
	if (mode == GR_NO_GRAPH || mode == GR_SYNC || mode == GR_OTHER_MODE)
		same &= !memcmp(g->ran, x->ran, sizeof g->ran);
	/* one line, besides the dense layers' choice (said at -v) */
	if (mode == GR_NO_CAPTURE_V || mode == GR_NO_CAPTURE)
		same &= lines_of(x->err) - dense_lines(x->err) == 1 &&
			x->err.find("no CUDA graph for the training step (") != std::string::npos &&
			x->err.find("cuBLAS") != std::string::npos &&
			x->err.find("plain launches from here on") != std::string::npos;
	if (!tap_ok(same, "%s: the same parameters, moments and losses, bit for bit",
		    graph_mode_label(mode).c_str()))
		tap_diag("ok %d, equal %d, graphs %llu/%llu, ran %lu %lu %lu %lu vs %lu %lu %lu %lu; "
			 "stderr: %s",
			 x->ok, graph_runs_equal(g, x), (unsigned long long)x->captured,
			 (unsigned long long)x->launched, x->ran[0], x->ran[1], x->ran[2], x->ran[3],
			 g->ran[0], g->ran[1], g->ran[2], g->ran[3], x->err.c_str());
}

static void t_step_graph(const struct data *d, const struct ncf_shape *s, enum ncf_precision prec)
{
	static struct graph_run r[GR_RUNS];
	setenv("NCF_CUDA_DENSE", "fused", 1);
	for (int mode = 0; mode < GR_RUNS; mode++)
		graph_run_steps(d, s, prec, mode, &r[mode]);
	unsetenv("NCF_CUDA_DENSE");
	const struct graph_run *g = &r[GR_GRAPH];
	/* the first step runs uncaptured (in bf16 and fp16 it also makes the
	 * 16-bit copy); the three after it are captured, instantiated once and
	 * updated after, and launched as the graph */
	tap_ok(g->ok && g->captured == 3 && g->launched == 3 && g->instantiated == 1 &&
		       g->counts.replays == 3 && g->counts.plain == 1 && g->counts.captures == 3 &&
		       !g->counts.failed,
	       "the first step plain (%llu), 3 captured (%llu), instantiated %llu time, then "
	       "updated, launched as graphs (%llu)",
	       (unsigned long long)g->counts.plain, (unsigned long long)g->captured,
	       (unsigned long long)g->instantiated, (unsigned long long)g->launched);
	for (int mode = GR_NO_GRAPH; mode < GR_RUNS; mode++)
		check_graph_mode(g, &r[mode], mode);
}

/* ---- main ------------------------------------------------------------------ */

static struct data dd;
static struct data de; /* dd with explicit negatives */
/* widths multiples of 8 (vector paths) and not (scalar paths, partial
 * dropout blocks) */
static struct ncf_shape s8 = {41, 67, 8, 4, {32, 24, 16, 8}};
static struct ncf_shape s5 = {41, 67, 6, 4, {14, 13, 10, 5}};
static struct ncf_shape s2 = {41, 67, 8, 2, {16, 8}};

static const enum ncf_precision lows[] = {NCF_PRECISION_TF32, NCF_PRECISION_BF16,
					  NCF_PRECISION_FP16};
static const enum ncf_precision costed[] = {NCF_PRECISION_FP32, NCF_PRECISION_BF16,
					    NCF_PRECISION_FP16};

/* The emulation's parts, each against its definition. */
static void kernel_cases(void)
{
	TEST(t_samples(&dd, &s8, 0), "sample stream bit-exact, 3 epochs");
	TEST(t_samples(&dd, &s8, 1), "sample stream bit-exact, 3 epochs, --true-negatives");
	TEST(t_samples(&de, &s8, 0), "sample stream with %zu explicit negatives bit-exact, 3 epochs",
	     de.neg_items.size());
	TEST(t_samples(&de, &s8, 1, 0),
	     "sample stream of explicit negatives alone (-n 0) bit-exact, --true-negatives");
	TEST(t_dropout(&dd, &s8), "bias + ReLU + dropout bit-exact (widths 24, 13, 5; layers 0-2)");
	TEST(t_adam(&dd, &s8), "dense Adam pass bit-exact against ncf_adam_update (steps 1, 14, 27)");
	for (int mode = 0; mode < 4; mode++)
		TEST(t_linear(&dd, &s8, mode), "%s: fused forward, backward and column sums %s",
		     mode_name[mode], mode ? "within their bounds" : "bit for bit");
	for (int mode = 0; mode < 4; mode++)
		TEST(t_linear_w(&dd, &s8, mode),
		     "%s: fused backward with dW: dX %s, dW and the bias gradient after the "
		     "fixed-order reduction",
		     mode_name[mode], mode ? "within its bound" : "bit for bit");
	TEST(t_forward(&dd, &s8), "widths of 8: logits, scores and ranks equal the cpu backend's");
	TEST(t_forward(&dd, &s5), "odd widths: logits, scores and ranks equal the cpu backend's");
	TEST(t_refusals(&dd, &s8), "ids outside the model and positions past the epoch are refused");
	for (int k = 0; k < 2; k++)
		for (float dropout : {0.5f, 0.0f})
			TEST(t_dense(&dd, &s8, costed[k], dropout),
			     "%s, dropout %g: each dense implementation, and mixes, as plain's",
			     ncf_precision_name(costed[k]), (double)dropout);
	TEST(t_wide(&dd), "a dense layer of 300 inputs: lt by the fixed order, fused pinned falls "
			  "back to plain; a bad name refused");
	TEST(t_dense_cost(NCF_PRECISION_BF16), "ml-20m bf16 at 2^20: the fused dense layers move "
					       "fewer bytes in fewer launches");
	TEST(t_dense_cost(NCF_PRECISION_TF32), "ml-20m tf32 at 2^20: the fused dense layers move "
					       "fewer bytes in fewer launches");
	TEST(t_deferred_loss(&dd, &s8, NULL, NCF_PRECISION_FP32),
	     "cpu fp32: six steps' losses kept and taken at once, the same steps");
	TEST(t_deferred_loss(&dd, &s8, "fused", NCF_PRECISION_FP32),
	     "cuda fused fp32: six steps' losses kept and taken at once, the same steps");
	TEST(t_deferred_loss(&dd, &s8, "plain", NCF_PRECISION_FP32),
	     "cuda plain fp32: six steps' losses kept and taken at once, the same steps");
	TEST(t_deferred_loss(&dd, &s8, "fused", NCF_PRECISION_BF16),
	     "cuda fused bf16: six steps' losses kept and taken at once, the same steps");
	TEST(t_host_memory(&dd, &s8, &ncf_backend_cpu),
	     "cpu: get_state into ncf_backend_host_alloc memory (malloc'd): the same bytes");
	TEST(t_host_memory(&dd, &s8, &ncf_backend_cuda),
	     "cuda: get_state into ncf_backend_host_alloc memory (page-locked): the same bytes");
}

/* The step's tests with the dense implementation `path` (NCF_CUDA_DENSE). */
static void step_cases(const char *path)
{
	static const struct {
		struct ncf_shape *s;
		float dropout;
		const char *what;
	} shapes[] = {{&s8, 0.5f, "widths of 8, dropout 0.5"},
		      {&s5, 0.5f, "odd widths, dropout 0.5"},
		      {&s2, 0.0f, "one hidden layer, no dropout"}};
	g_dense = path;
	setenv("NCF_CUDA_DENSE", path, 1);
	for (const auto &x : shapes) {
		TEST(t_training_grad(&dd, x.s, x.dropout),
		     "%s: %s: gradients of two batches equal to the cpu backend's per tensor", path,
		     x.what);
		TEST(t_training_steps(&dd, x.s, x.dropout),
		     "%s: %s: parameters after one and five Adam steps, then the ranks", path, x.what);
	}
	TEST(t_training_grad(&de, &s8, 0.5f),
	     "%s: explicit negatives beside 4 drawn: gradients of two batches equal to the cpu "
	     "backend's",
	     path);
	TEST(t_training_grad(&de, &s5, 0.5f, 0),
	     "%s: explicit negatives alone (-n 0), odd widths: gradients equal to the cpu backend's",
	     path);
	TEST(t_training_steps(&de, &s8, 0.5f),
	     "%s: explicit negatives: parameters after one and five Adam steps, then the ranks",
	     path);
	TEST(t_ranks(&dd, &s8), "%s: two ranks: rank 0's slice, and the sum of both", path);
	for (enum ncf_precision p : lows)
		TEST(t_low_precision(&dd, &s8, p),
		     "%s %s: gradient and logits near fp32's, three training steps", path,
		     ncf_precision_name(p));
	TEST(t_loss_scaling(&dd, &s8), "%s fp16: dynamic loss scaling", path);
	TEST(t_run(&dd, &s8), "%s: two epochs: HR@10 as the cpu backend's", path);
	for (const auto &x : shapes) {
		TEST(t_oracle(&dd, x.s, x.dropout),
		     "%s: %s: against reference.c: gradients, losses, logits, ranks", path, x.what);
		TEST(t_oracle_step(&dd, x.s, x.dropout),
		     "%s: %s: one Adam step within the bound its gradient implies", path, x.what);
	}
	for (const struct ncf_shape *s : {&s8, &s5})
		for (enum ncf_precision p : costed)
			TEST(t_cost(&dd, s, path, p),
			     "%s %s, layers %u: the recorder notes each launch once, the dry run the "
			     "same",
			     path, ncf_precision_name(p), s->layers[1]);
	TEST(t_sync(&dd, &s8), "%s: NCF_CUDA_SYNC=1: the same gradient, step and scores; no graphs",
	     path);
	TEST(t_fault(&dd, &s8, 0), "%s: a kernel that faults surfaces at the synchronisation, "
				   "saying how to name it",
	     path);
	TEST(t_fault(&dd, &s8, 1), "%s: a kernel that faults: NCF_CUDA_SYNC=1 names it with its "
				   "file and line",
	     path);
	TEST(t_fp16_nan(&dd, &s8), "%s: fp16: a NaN made in the forward pass reaches the logits "
				   "through the ReLU and skips the step",
	     path);
	TEST(t_epoch_and_resume(&dd, &s8), "%s: a whole epoch's loss, and a resumed run bit for bit",
	     path);
	unsetenv("NCF_CUDA_DENSE");
	g_dense = "fused";
}

/* The fused step's graph, the scoring path and its graphs, ranks. */
static void graph_cases(void)
{
	for (const struct ncf_shape *s : {&s8, &s5})
		for (enum ncf_precision p : costed)
			TEST(t_step_graph(&dd, s, p), "step graph, %s, layers %u,%u,%u: four steps",
			     ncf_precision_name(p), s->layers[1], s->layers[2], s->layers[3]);
	for (size_t n : {(size_t)1, (size_t)1000, (size_t)70000})
		TEST(t_scoring(&dd, &s8, n), "host path, %zu pairs: scores equal to the cpu "
					     "backend's, bit for bit the sigmoid of the logits",
		     n);
	TEST(t_scoring_bad_id(&dd, &s8), "a bad id among 70000 pairs: the first is named, once");
	TEST(t_graphs(&dd, &s8), "scoring graphs: captured once, replayed after new parameters");
	TEST(t_graphs_no_capture(&dd, &s8, 0), "a failed capture says so in one line at the normal "
					       "level, and plain launches score right");
	TEST(t_graphs_no_capture(&dd, &s8, 1), "a failed capture says so in one line at -v, and "
					       "plain launches score right");
	TEST(t_resident(&dd, &s8), "kept pairs score as the host path does; too many, or a bad id, "
				   "refused");
	TEST(t_ranks_per_node(&s8), "more ranks on a node than GPUs refused (-3); several ranks' "
				    "communicator made at open");
}

static void t_usable(void)
{
	char why[128];
	tap_ok(ncf_cuda_usable(why, sizeof why) == 1, "ncf_cuda_usable says 1");
}

/* What the tools ask instead of naming the device (backend.h): the loss
 * stays on the device, host memory is pinned, the device is its own. */
static void t_answers(void)
{
	struct ncf_shape s = {41, 67, 8, 4, {32, 24, 16, 8}};
	struct ncf_hparams hp;
	ncf_hparams_nvidia(&hp);
	struct ncf_backend be;
	int rc = ncf_backend_open_impl(&be, &ncf_backend_cuda, &s, &hp, NCF_PRECISION_FP32, 1, &one);
	tap_ok(rc == 0 && ncf_backend_keeps_loss(&be) && ncf_backend_pins_host(&be) &&
		       !ncf_backend_on_host(&be),
	       "keeps the loss, pins host memory, not on the host");
	if (rc == 0)
		ncf_backend_close(&be);
}

int main(void)
{
	ncf_set_progname("test_cuda_emu");
	ncf_verbosity = 1;
	TEST(t_usable(), "the emulated device is usable");
	TEST(t_answers(), "the emulated cuda backend's answers to the tools");
	make_data(&dd, 41, 67, 30, 14, 5);
	make_data(&de, 41, 67, 30, 14, 5);
	add_explicit(&de, 6);
	kernel_cases();
	for (const char *path : {"fused", "lt", "plain"})
		step_cases(path);
	graph_cases();
	free(dd.counted);
	free(de.counted);
	return tap_done();
}
