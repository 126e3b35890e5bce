/*
 * test_cpu_bf16 - the cpu backend in bf16 (NVIDIA's AMP: bf16 operands of
 * the dense products, fp32 accumulation, fp32 master weights and Adam)
 * against the plain fp32 reference (kernels/cpu/reference.c), and the
 * determinism promises of cpu.h: bf16 reproducible for a seed and a thread
 * count, fp32 the same bytes for 1 and 2 threads; and --precision bf16 on
 * a CPU without bf16 instructions (forced with ONEDNN_MAX_CPU_ISA in a
 * child process, before oneDNN reads it) failing with -3 (the tools' exit
 * 3) and one line naming the reason.  The bf16 cases skip when the build
 * has no oneDNN or the CPU no bf16 instructions.
 *
 * How close is close, in bf16.  bf16 keeps 8 significant bits: rounding a
 * float to it moves it by at most u = 2^-8 relative (0.39%).  A product
 * term a*b of two rounded operands is off by at most 2u relative, and the
 * fp32 sum of such terms by at most 2u times the sum of the terms'
 * magnitudes (the fp32 accumulation adds ~2^-24 per term, nothing beside
 * it).  A gradient entry is such a sum taken through the chain of products
 * (forward layers 1..L, then backward L..1: 2L products, L = 3 here), so
 * its relative error is bounded by about 2L * 2u ~ 10% of the magnitudes
 * it sums, a bound that says nothing useful.  The errors of roundings are,
 * though, of either sign and nearly independent, and add like a random
 * walk: the error of a whole tensor, as an L2 norm relative to the
 * tensor's norm, is expected near u * sqrt(2L) ~ 1% where the sums do not
 * cancel.  The first layer's gradients (W1, and the MLP embeddings' rows)
 * are sums, per user and per item, of the samples' dz1, whose positive and
 * negative samples pull against each other: the sum is several times
 * smaller than its terms, and the terms' ~1% error grows relative to it by
 * that factor (seen: ~1% for a batch of 300, ~5% for 4200 samples, 14 per
 * user).  Hence:
 *  - gradient, per tensor: ||g16 - g|| <= 0.03 ||g|| (3x the expectation)
 *    for the tensors above the per-slot sums (layers 2..L, b1, head, GMF),
 *    0.12 ||g|| for W1 and the MLP embeddings (2.4x the worst seen); and no
 *    entry beyond 0.5 max|g| (a ceiling against a lost or misplaced term);
 *  - loss sum: the logits carry ~u relative error of their terms, the BCE
 *    of each moves by less than that times |logit| (its slope is below
 *    1): rel 1e-2;
 *  - a wrong product (a transposed operand, a missed accumulation, a stale
 *    bf16 copy) gives errors of order 100% of the norm: far beyond.
 * Reproducibility and thread invariance are bit for bit (memcmp).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_impl.h"
#include "cpu/matmul.h"
#include "metrics.h"
#include "model.h"
#include "ncf_hd.h"
#include "tap.h"

#define U 300
#define I 3000 /* over 2048 distinct items in a batch: two tiles of item slots */
#define BATCH 4200

static int64_t offsets[U + 1];
static uint32_t *items, *entry_user;

static uint32_t rnd(uint32_t a, uint64_t idx, uint32_t n)
{
	return ncf_uniform_below(ncf_rng(23, NCF_RNG_BENCH, a, idx, 0).v[0], n);
}

/* Users with 3..60 positives, half among the 20 most popular items. */
static void make_data(void)
{
	static uint8_t has[I];
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
	}
	offsets[U] = (int64_t)n;
}

static struct ncf_hparams hparams(void)
{
	struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f,
				 .dropout = 0.5f, .negatives = 4, .batch = BATCH, .seed = 9};
	return hp;
}

static const struct ncf_shape shape = {U, I, 16, 4, {64, 64, 32, 16}};
static struct ncf_dist one = {.rank = 0, .size = 1, .local_size = 1};

/* Open impl in precision prec with threads threads, parameters from seed
 * 3.  Returns 0, or the open's result. */
static int open_be(struct ncf_backend *be, const struct ncf_backend_i *impl,
		   enum ncf_precision prec, int threads)
{
	struct ncf_hparams hp = hparams();
	int rc = ncf_backend_open_impl(be, impl, &shape, &hp, prec, threads, &one);
	if (rc != 0)
		return rc;
	float *p = malloc(be->layout.total * sizeof *p);
	ncf_model_init(&shape, &be->layout, 3, p);
	struct ncf_train_data td = {.users = U, .items = I, .positives = offsets[U],
				    .offsets = offsets, .items_csr = items,
				    .entry_user = entry_user};
	rc = ncf_backend_set_state(be, p, NULL, NULL) || ncf_backend_set_train_data(be, &td);
	free(p);
	if (rc)
		ncf_backend_close(be);
	return rc ? -1 : 0;
}

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

/* The bounds of the header, per tensor; *worst gets the largest relative
 * norm error seen (diagnostics: each tensor's with NCF_TEST_VERBOSE set).  Returns 1 when all hold. */
static int close_bf16(const struct ncf_backend *be, const float *got, const float *want,
		      double *worst)
{
	struct tensor t[4 + 2 * NCF_MAX_LAYERS + 2];
	int nt = tensors(be, t), ok = 1;
	for (int k = 0; k < nt; k++) {
		double d2 = 0, w2 = 0, mx = 0, dmax = 0;
		size_t at = 0;
		for (size_t j = 0; j < t[k].n; j++) {
			double w = want[t[k].off + j], d = fabs((double)got[t[k].off + j] - w);
			d2 += d * d, w2 += w * w;
			mx = fmax(mx, fabs(w));
			if (!(d <= dmax))
				dmax = d, at = j;
		}
		double rel = w2 > 0 ? sqrt(d2 / w2) : sqrt(d2);
		if (rel > *worst)
			*worst = rel;
		if (getenv("NCF_TEST_VERBOSE"))
			tap_diag("%s: relative norm error %.3g", t[k].name, rel);
		int summed = !strcmp(t[k].name, "W1") || !strncmp(t[k].name, "mlp_", 4);
		double bound = summed ? 0.12 : 0.03;
		if (!(rel <= bound) || !(dmax <= 0.5 * mx)) {
			tap_diag("%s: relative norm error %.3g (bound %g), largest |d| %.3g at %zu "
				 "(bound %.3g): got %.6g, want %.6g",
				 t[k].name, rel, bound, dmax, at, 0.5 * mx, got[t[k].off + at],
				 want[t[k].off + at]);
			ok = 0;
		}
	}
	return ok;
}

static int bf16_here(void)
{
	const char *why;
	if (ncf_mm_available(NCF_MM_BF16, &why))
		return 1;
	tap_skip_case(why);
	return 0;
}

static void t_gradient(void)
{
	if (!bf16_here())
		return;
	struct ncf_backend ref, cpu;
	if (open_be(&ref, &ncf_backend_reference, NCF_PRECISION_FP32, 2) != 0) {
		tap_ok(0, "open the reference");
		return;
	}
	if (open_be(&cpu, &ncf_backend_cpu, NCF_PRECISION_BF16, 2) != 0) {
		tap_ok(0, "open the cpu backend in bf16");
		ncf_backend_close(&ref);
		return;
	}
	size_t T = ref.layout.total;
	float *gr = malloc(T * sizeof *gr), *gc = malloc(T * sizeof *gc);
	uint64_t S = (uint64_t)offsets[U] * 5;
	/* three chunks of 2048 (the last short), and a short last batch */
	const uint64_t first[2] = {1000, S - 300}, n[2] = {BATCH, 300};
	double worst = 0;
	for (int k = 0; k < 2; k++) {
		double lr, lc;
		TAP_CHECK(ncf_backend_grad(&ref, 1, first[k], n[k], gr, &lr) == 0);
		TAP_CHECK(ncf_backend_grad(&cpu, 1, first[k], n[k], gc, &lc) == 0);
		tap_ok(close_bf16(&ref, gc, gr, &worst), "batch %d: every tensor within bf16's bound",
		       k);
		tap_ok(tap_close(lc, lr, 0, 1e-2, "loss sum"), "batch %d: the loss sum", k);
	}
	tap_diag("worst relative norm error of a tensor: %.3g", worst);
	free(gr), free(gc);
	ncf_backend_close(&ref), ncf_backend_close(&cpu);
}

/* The parameters after `steps` steps of the cpu backend in prec with
 * threads threads (malloc'd, total floats), or NULL. */
static float *train(enum ncf_precision prec, int threads, int steps, size_t *total)
{
	struct ncf_backend be;
	if (open_be(&be, &ncf_backend_cpu, prec, threads) != 0)
		return NULL;
	*total = be.layout.total;
	float *p = malloc(*total * sizeof *p);
	uint64_t pos = 0;
	int ok = 1;
	for (int k = 0; k < steps && ok; k++, pos += BATCH) {
		double loss;
		ok = ncf_backend_train_step(&be, 0, pos, BATCH, &loss) == 0;
	}
	ok = ok && ncf_backend_get_state(&be, p, NULL, NULL) == 0;
	ncf_backend_close(&be);
	if (!ok)
		free(p), p = NULL;
	return p;
}

static void t_bf16_repro(void)
{
	if (!bf16_here())
		return;
	size_t n = 0;
	float *a = train(NCF_PRECISION_BF16, 2, 3, &n), *b = train(NCF_PRECISION_BF16, 2, 3, &n);
	TAP_CHECK(a && b);
	if (a && b)
		tap_ok(memcmp(a, b, n * sizeof *a) == 0, "two runs, the same parameter bytes");
	float *c = train(NCF_PRECISION_BF16, 1, 3, &n);
	if (a && c) /* not promised: said, not checked */
		tap_diag("bf16 with 1 thread against 2: %s",
			 memcmp(a, c, n * sizeof *a) ? "different bytes" : "the same bytes");
	free(a), free(b), free(c);
}

static void t_fp32_threads(void)
{
	size_t n = 0;
	float *a = train(NCF_PRECISION_FP32, 1, 3, &n), *b = train(NCF_PRECISION_FP32, 2, 3, &n);
	TAP_CHECK(a && b);
	if (a && b)
		tap_ok(memcmp(a, b, n * sizeof *a) == 0, "1 and 2 threads: the same parameter bytes");
	free(a), free(b);
}

/* In the child: bf16 asked for on the cpu must be refused with -3. */
static int child_no_isa(void)
{
	struct ncf_backend be;
	struct ncf_hparams hp = hparams();
	int rc = ncf_backend_open(&be, NCF_DEVICE_CPU, &shape, &hp, NCF_PRECISION_BF16, 1, &one);
	if (rc == 0)
		ncf_backend_close(&be);
	return rc == -3 ? 3 : rc == 0 ? 0 : 1;
}

static void t_no_isa(const char *self)
{
	int fd[2];
	TAP_CHECK(pipe(fd) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]), close(fd[1]);
		setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
		setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
		execl(self, self, "--child-no-isa", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	char err[1024];
	size_t len = 0;
	ssize_t r;
	while (len < sizeof err - 1 && ((r = read(fd[0], err + len, sizeof err - 1 - len)) > 0 ||
					(r < 0 && errno == EINTR)))
		len += r > 0 ? (size_t)r : 0;
	err[len] = 0;
	close(fd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	tap_ok(WIFEXITED(st) && WEXITSTATUS(st) == 3, "refused with -3 (exit status %d)",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	char *nl = strchr(err, '\n');
	tap_ok(nl && nl[1] == 0 && strstr(err, "bf16"), "one line naming bf16: %s", err);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--child-no-isa"))
		return child_no_isa();
	make_data();
	TEST(t_gradient(), "bf16 gradient and loss of two batches within bf16's bounds of the "
			   "fp32 reference's");
	TEST(t_bf16_repro(), "bf16: the same seed and thread count give the same bytes");
	TEST(t_fp32_threads(), "fp32: 1 and 2 threads give the same bytes after three steps");
	TEST(t_no_isa(argv[0]), "--precision bf16 on a CPU without bf16 instructions "
				"(ONEDNN_MAX_CPU_ISA=AVX2): -3 and one line");
	ncf_mm_release();
	free(items), free(entry_user);
	return tap_done();
}
