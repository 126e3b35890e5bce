/*
 * helpers.h - what the C tests share: files read and written whole, a
 * temporary directory, stderr captured into a string, the random CSR data
 * of the backend tests, the sanitizer switch, and the comparisons of the
 * backend tests (elementwise, per tensor, relative L2, one Adam step).
 * Linked into every unit test (tests/unit/helpers.c), the emulation test
 * and tests/gpu/gpu_parity.c; not part of libncf.
 *
 * A failure to set a test up (a file that cannot be written, no temporary
 * directory) is no check that fails: it prints "Bail out!" and exits 1.
 * The helpers print TAP diagnostics only (tap.h's counters belong to each
 * test's own file).
 */
#ifndef NCF_TEST_HELPERS_H
#define NCF_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole of path, malloc'd, with a NUL byte after its *len bytes; NULL
 * when it cannot be opened. */
unsigned char *helper_read_file(const char *path, size_t *len);

/* Write len bytes of buf to path (created or truncated), or bail out. */
void helper_write_file(const char *path, const void *buf, size_t len);

/* Make a fresh directory "$TMPDIR/<name>.XXXXXX" (/tmp without TMPDIR) into
 * dir (n bytes), or bail out. */
void helper_make_tmpdir(char *dir, size_t n, const char *name);

/* Capture what is written to file descriptor 2 between begin and end (not
 * nested) through a pipe that never blocks: the messages captured are a few
 * lines, far below the pipe's capacity.  helper_capture_end returns the
 * text, malloc'd and NUL-terminated. */
void helper_capture_begin(void);
char *helper_capture_end(void);

/* Run under the sanitizers (NCF_SANITIZER set and not "0": make check-asan)? */
int helper_sanitizer(void);

/* ncf_uniform_below(n) of Philox draw (seed, NCF_RNG_BENCH, a, idx): the
 * reproducible numbers the tests build their data from. */
uint32_t helper_rnd(uint64_t seed, uint32_t a, uint64_t idx, uint32_t n);

/* A training CSR of U users and I items drawn from seed: users with 3..60
 * positives, half of them among the 20 most popular items (so that item
 * gradients sum many samples and partly cancel), rows sorted.  offsets is
 * (U + 1); *items and *entry_user (malloc'd, at most 64 U) are (P). */
void helper_make_rows(uint64_t seed, uint32_t U, uint32_t I, int64_t *offsets, uint32_t **items,
		      uint32_t **entry_user);

/* Explicit training negatives of U users and I items drawn from seed, as a
 * data set gives them (ncf_cache's neg_offsets, neg_items): every third
 * user none, the others 1..max each in no order, repeats allowed.
 * neg_offsets is (U + 1); *neg_items (malloc'd, at least one element) is
 * (E).  Returns E. */
uint64_t helper_make_explicit(uint64_t seed, uint32_t U, uint32_t I, uint32_t max,
			      int64_t *neg_offsets, uint32_t **neg_items);

/* ---- comparisons: each returns 1 when everything is close, and prints
 * the first mismatches (and their count) as TAP diagnostics ---- */

/* The largest errors a comparison saw (callers zero it; comparisons fold
 * theirs in): |d|, |d| / |want|, |d| / tolerance (a NaN counts as
 * infinite). */
struct helper_err {
	double abs, rel, tol;
};

/* |got - want| <= atol + rtol |want| elementwise, over n; NaN is never
 * close.  what names the array in the diagnostics; e may be NULL. */
int helper_close_all(const float *got, const float *want, size_t n, double atol, double rtol,
		     const char *what, struct helper_err *e);

/* One tensor of the parameter vector: its name ("gmf_user", "W1", "b1",
 * "head_w", ...), offset and length. */
struct helper_tensor {
	char name[16];
	size_t off, n;
};

#define HELPER_MAX_TENSORS (4 + 2 * NCF_MAX_LAYERS + 2)

/* The tensors of layout L of shape s, in layout order, into t (at most
 * HELPER_MAX_TENSORS); their count. */
int helper_tensors(const struct ncf_layout *L, const struct ncf_shape *s, struct helper_tensor *t);

/* Per tensor of got and want (L.total): |d| <= rel_max max|want over the
 * tensor| + rtol |want|. */
int helper_close_tensors(const struct ncf_layout *L, const struct ncf_shape *s, const float *got,
			 const float *want, double rel_max, double rtol, const char *what,
			 struct helper_err *e);

/* Per tensor: the relative L2 error ||got - want|| / ||want|| (||got -
 * want|| where want is all 0) <= tol.  With NCF_TEST_VERBOSE set, every
 * tensor's error as a diagnostic. */
int helper_l2_tensors(const struct ncf_layout *L, const struct ncf_shape *s, const float *got,
		      const float *want, double tol, const char *what);

/* The parameters p_got (n) after one Adam step from the same state as
 * p_want, taken on the gradient g_got where p_want's was g_want: within
 * 1e-6 + 1e-5 |p| + lr |dg| eps / (m + eps)^2, m the smaller |g| (0 when the
 * signs differ).  The first step is lr g / (|g| + eps), which moves by at
 * most that for a gradient difference dg, so where |g| is near eps a
 * gradient difference far inside its own bound may change the step by up
 * to lr.  e->tol gets the worst error over its bound. */
int helper_adam_step_close(const float *p_got, const float *p_want, const float *g_got,
			   const float *g_want, size_t n, double lr, double eps, const char *what,
			   struct helper_err *e);

#ifdef __cplusplus
}
#endif

#endif
