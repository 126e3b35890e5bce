/*
 * helpers.h - what the C unit tests share: files read and written whole, a
 * temporary directory, stderr captured into a string, the random CSR data
 * of the backend tests, the sanitizer switch.  Linked into every unit test
 * (tests/unit/helpers.c); not part of libncf.
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

#ifdef __cplusplus
}
#endif

#endif
