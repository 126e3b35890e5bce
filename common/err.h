/*
 * err.h - messages to people, on stderr, prefixed with the program name.
 *
 * Library code in common/ and kernels/ reports with ncf_error() and
 * returns -1; only a tool decides the exit status (see the exit codes
 * below, which every man page documents).  The one exception is running
 * out of memory (ncf_xmalloc below).
 *
 * Checks are statements, one call each (zstd's CHECK_F, STYLE.md rule 24):
 * NCF_TRY below for ncf's own calls, which report their failures
 * themselves; for a foreign library a checker beside the code that calls
 * it, which reports the library's own words with the call's file and line:
 * NCF_ZSTD_TRY (container.c), NCF_MPI_TRY (dist.c), NCF_WRITE_TRY (io.h:
 * stdio and write(2)), CUDA_CHECK and friends (kernels/cuda/common.cuh).
 */
#ifndef NCF_ERR_H
#define NCF_ERR_H

#include <stdarg.h>

enum ncf_exit {
	NCF_EXIT_OK = 0,	  /* success */
	NCF_EXIT_FAIL = 1,	  /* I/O, corrupt file, bad data, NaN, device error */
	NCF_EXIT_USAGE = 2,	  /* bad command line */
	NCF_EXIT_UNAVAILABLE = 3, /* requested device or feature not available */
	NCF_EXIT_SIGINT = 130,	  /* interrupted by SIGINT, state saved */
	NCF_EXIT_SIGTERM = 143,	  /* terminated by SIGTERM, state saved */
};

/* NCF_TRY(call): call returns 0, or nonzero once it has reported why;
 * then return -1 from the function.  NCF_TRY_GOTO(call, label): the same,
 * going to label (the function's cleanup, its status already -1). */
#define NCF_TRY(call)                    \
	do {                             \
		if ((call) != 0)         \
			return -1;       \
	} while (0)
#define NCF_TRY_GOTO(call, label)        \
	do {                             \
		if ((call) != 0)         \
			goto label;      \
	} while (0)

/* Display levels: 0 quiet (errors only), 1 warnings, 2 normal, 3 verbose. */
extern int ncf_verbosity;

/* Set the program name used as the prefix of every message. */
void ncf_set_progname(const char *name);
const char *ncf_progname(void);

/* Send every message (the whole "prog: text" line, without its newline)
 * to sink instead of stderr; NULL restores stderr.  For fuzzers and tests
 * that check that each refusal says something. */
void ncf_set_message_sink(void (*sink)(const char *line));
/* The same for the calling thread only, ahead of the one above, with ctx
 * passed on: a worker thread (ncf-train's checkpoint writer) keeps its
 * messages for the main thread to print at a moment of its choosing. */
void ncf_set_thread_message_sink(void (*sink)(const char *line, void *ctx), void *ctx);

/* "prog: message\n" on stderr.  Always printed. */
void ncf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed at level >= 1. */
void ncf_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed at level >= 2 (normal information). */
void ncf_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed at level >= 3. */
void ncf_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Allocations that do not fail: calloc/malloc/realloc/strdup that, when
 * memory runs out, report "out of memory (N bytes)" and end the process
 * with status 1 (from a worker thread at once, without the exit handlers).
 * This is the only place under common/ and kernels/ that ends the process,
 * as git's xmalloc does: every caller would do the same, and no input can
 * get here by design, since every reader sizes its allocations by the
 * bytes it has read or checked against the file's size.
 */
void *ncf_xmalloc(size_t n);
void *ncf_xcalloc(size_t n, size_t size);
void *ncf_xrealloc(void *p, size_t n);
char *ncf_xstrdup(const char *s);
/* The same end when a library could not allocate (what: "zstd context"). */
void ncf_out_of_memory(const char *what) __attribute__((noreturn));

/* Escape s (len bytes) for a message: printable ASCII as is, the rest as
 * \xNN, cut at max bytes with "...".  Returns a static buffer. */
const char *ncf_escape(const char *s, size_t len, size_t max);

#endif
