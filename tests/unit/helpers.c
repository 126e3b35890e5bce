/*
 * helpers.c - the unit tests' shared helpers (see helpers.h for each one's
 * contract).  No checks here: a helper that cannot do its job bails out.
 */
#include "helpers.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ncf_hd.h"
#include "tap.h"

static void bail_out(const char *what, const char *path)
{
	printf("Bail out! %s %s\n", what, path);
	fflush(stdout);
	exit(1);
}

unsigned char *helper_read_file(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	size_t cap = 4096, n = 0, got;
	unsigned char *b = malloc(cap);
	while (b && (got = fread(b + n, 1, cap - n - 1, fp)) > 0)
		if ((n += got) == cap - 1)
			b = realloc(b, cap *= 2);
	fclose(fp);
	if (!b)
		bail_out("out of memory reading", path);
	b[n] = 0;
	*len = n;
	return b;
}

void helper_write_file(const char *path, const void *buf, size_t len)
{
	FILE *fp = fopen(path, "wb");
	if (!fp || (len && fwrite(buf, 1, len, fp) != len) || fclose(fp) != 0)
		bail_out("cannot write", path);
}

void helper_make_tmpdir(char *dir, size_t n, const char *name)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, n, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(dir))
		bail_out("mkdtemp failed:", dir);
}

static int capture_fd = -1, saved_stderr = -1;

void helper_capture_begin(void)
{
	int p[2];
	fflush(stderr);
	saved_stderr = dup(2);
	if (saved_stderr < 0 || pipe(p) != 0)
		bail_out("cannot capture", "stderr");
	fcntl(p[1], F_SETFL, O_NONBLOCK); /* never block on a full pipe */
	dup2(p[1], 2);
	close(p[1]);
	capture_fd = p[0];
}

char *helper_capture_end(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	ssize_t got;
	while (b && (got = read(capture_fd, b + n, cap - 1 - n)) > 0)
		if ((n += (size_t)got) == cap - 1)
			b = realloc(b, cap *= 2);
	close(capture_fd);
	if (!b)
		bail_out("out of memory capturing", "stderr");
	b[n] = 0;
	return b;
}

int helper_sanitizer(void)
{
	const char *san = getenv("NCF_SANITIZER");
	return san && *san && strcmp(san, "0");
}

uint32_t helper_rnd(uint64_t seed, uint32_t a, uint64_t idx, uint32_t n)
{
	return ncf_uniform_below(ncf_rng(seed, NCF_RNG_BENCH, a, idx, 0).v[0], n);
}

void helper_make_rows(uint64_t seed, uint32_t U, uint32_t I, int64_t *offsets, uint32_t **items,
		      uint32_t **entry_user)
{
	uint8_t *has = malloc(I);
	size_t cap = (size_t)U * 64, n = 0;
	uint32_t *it_out = malloc(cap * sizeof *it_out), *eu = malloc(cap * sizeof *eu);
	if (!has || !it_out || !eu)
		bail_out("out of memory making", "rows");
	for (uint32_t u = 0; u < U; u++) {
		memset(has, 0, I);
		uint32_t k = 3 + helper_rnd(seed, 1, u, 58);
		for (uint32_t t = 0; t < k; t++) {
			uint32_t it = helper_rnd(seed, 2, (uint64_t)u * 100 + t, I);
			has[t % 2 ? it : it % 20] = 1;
		}
		offsets[u] = (int64_t)n;
		for (uint32_t it = 0; it < I; it++)
			if (has[it]) {
				it_out[n] = it;
				eu[n++] = u;
			}
	}
	offsets[U] = (int64_t)n;
	free(has);
	*items = it_out;
	*entry_user = eu;
}

uint64_t helper_make_explicit(uint64_t seed, uint32_t U, uint32_t I, uint32_t max,
			      int64_t *neg_offsets, uint32_t **neg_items)
{
	size_t cap = (size_t)U * max + 1, n = 0;
	uint32_t *it = malloc(cap * sizeof *it);
	if (!it)
		bail_out("out of memory making", "explicit negatives");
	for (uint32_t u = 0; u < U; u++) {
		neg_offsets[u] = (int64_t)n;
		uint32_t k = u % 3 == 1 ? 0 : 1 + helper_rnd(seed, 7, u, max);
		for (uint32_t t = 0; t < k; t++)
			it[n++] = helper_rnd(seed, 8, (uint64_t)u * max + t, I);
	}
	neg_offsets[U] = (int64_t)n;
	*neg_items = it;
	return n;
}

/* ---- comparisons ---------------------------------------------------------- */

static void err_fold(struct helper_err *e, double d, double want, double tol)
{
	if (!e)
		return;
	double r = d / (fabs(want) + 1e-30), t = tol > 0 ? d / tol : 0;
	if (isnan(d))
		d = r = t = INFINITY;
	e->abs = fmax(e->abs, d);
	e->rel = fmax(e->rel, r);
	e->tol = fmax(e->tol, t);
}

int helper_close_all(const float *got, const float *want, size_t n, double atol, double rtol,
		     const char *what, struct helper_err *e)
{
	size_t bad = 0;
	for (size_t j = 0; j < n; j++) {
		double d = fabs((double)got[j] - want[j]), tol = atol + rtol * fabs(want[j]);
		if (!(d <= tol)) {
			if (bad < 5)
				tap_diag("%s[%zu]: got %.9g, want %.9g", what, j, got[j], want[j]);
			bad++;
		}
		err_fold(e, d, want[j], tol);
	}
	if (bad)
		tap_diag("%s: %zu of %zu beyond %g + %g |x|", what, bad, n, atol, rtol);
	return bad == 0;
}

int helper_tensors(const struct ncf_layout *L, const struct ncf_shape *s, struct helper_tensor *t)
{
	size_t U = s->users, I = s->items, F = s->factors, M = ncf_shape_m(s);
	int k = 0;
	t[k++] = (struct helper_tensor){"gmf_user", L->gmf_user, U * F};
	t[k++] = (struct helper_tensor){"gmf_item", L->gmf_item, I * F};
	t[k++] = (struct helper_tensor){"mlp_user", L->mlp_user, U * M};
	t[k++] = (struct helper_tensor){"mlp_item", L->mlp_item, I * M};
	for (uint32_t l = 1; l < s->n_layers; l++) {
		t[k] = (struct helper_tensor){"", L->w[l], (size_t)s->layers[l] * s->layers[l - 1]};
		snprintf(t[k++].name, sizeof t->name, "W%u", l);
		t[k] = (struct helper_tensor){"", L->b[l], s->layers[l]};
		snprintf(t[k++].name, sizeof t->name, "b%u", l);
	}
	t[k++] = (struct helper_tensor){"head_w", L->head_w, F + ncf_shape_last(s)};
	t[k++] = (struct helper_tensor){"head_b", L->head_b, 1};
	return k;
}

int helper_close_tensors(const struct ncf_layout *L, const struct ncf_shape *s, const float *got,
			 const float *want, double rel_max, double rtol, const char *what,
			 struct helper_err *e)
{
	struct helper_tensor t[HELPER_MAX_TENSORS];
	int nt = helper_tensors(L, s, t), ok = 1;
	for (int k = 0; k < nt; k++) {
		double mx = 0;
		for (size_t j = 0; j < t[k].n; j++)
			mx = fmax(mx, fabs((double)want[t[k].off + j]));
		char name[64];
		snprintf(name, sizeof name, "%.40s %.15s", what, t[k].name);
		ok &= helper_close_all(got + t[k].off, want + t[k].off, t[k].n, rel_max * mx, rtol,
				       name, e);
	}
	return ok;
}

int helper_l2_tensors(const struct ncf_layout *L, const struct ncf_shape *s, const float *got,
		      const float *want, double tol, const char *what)
{
	struct helper_tensor t[HELPER_MAX_TENSORS];
	int nt = helper_tensors(L, s, t), ok = 1;
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
		if (getenv("NCF_TEST_VERBOSE"))
			tap_diag("%s %s: relative L2 error %.3g", what, t[k].name, rel);
	}
	return ok;
}

int helper_adam_step_close(const float *p_got, const float *p_want, const float *g_got,
			   const float *g_want, size_t n, double lr, double eps, const char *what,
			   struct helper_err *e)
{
	int bad = 0;
	for (size_t j = 0; j < n; j++) {
		double a = fabs((double)g_got[j]), b = fabs((double)g_want[j]);
		double m = (g_got[j] < 0) != (g_want[j] < 0) ? 0 : fmin(a, b);
		double tol = 1e-6 + 1e-5 * fabs(p_want[j]) +
			     lr * fabs((double)g_got[j] - g_want[j]) * eps / ((m + eps) * (m + eps));
		double d = fabs((double)p_got[j] - p_want[j]);
		if (!(d <= tol) && bad++ < 5)
			tap_diag("%s[%zu]: %.9g, want %.9g (gradients %.9g, %.9g)", what, j, p_got[j],
				 p_want[j], g_got[j], g_want[j]);
		err_fold(e, d, p_want[j], tol);
	}
	if (bad)
		tap_diag("%s: %d of %zu beyond the bound", what, bad, n);
	return bad == 0;
}
