/*
 * io.h - files in and out, the way every ncf tool handles them.
 *
 * Outputs are written as an unnamed file in the destination's directory
 * (O_TMPFILE) and given their name only when complete (ncf_out_commit:
 * linked in, or linked under a temporary name and renamed over the old
 * file), so a killed writer leaves nothing behind.  Where the file system
 * has no O_TMPFILE the file is written under a temporary name
 * (DIR/.NAME.XXXXXX) and renamed on success; a failure or a catchable
 * signal removes it, SIGKILL leaves it.  Either way a final name never
 * holds a partial file.  A symbolic link is written through: its target
 * is replaced, or created when the link dangles (as a shell redirection
 * would).  A FIFO or a device is written in place.  "-" or NULL is
 * stdout, which a binary output refuses when it is a terminal.  Inputs:
 * "-" or NULL is stdin.
 */
#ifndef NCF_IO_H
#define NCF_IO_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "err.h"

/*
 * NCF_WRITE_TRY(display, call): check a write (ncf_write_full, fflush,
 * ...; 0 on success, errno set on failure), one per statement: on a
 * failure report "DISPLAY: write failed: <the system's words>" and return
 * -1 from the function.
 */
#define NCF_WRITE_TRY(display, call)                                                  \
	do {                                                                          \
		errno = 0;                                                            \
		if ((call) != 0) {                                                    \
			ncf_error("%s: write failed: %s", (display),                  \
				  strerror(errno ? errno : EIO));                     \
			return -1;                                                    \
		}                                                                     \
	} while (0)

enum ncf_out_kind {
	NCF_OUT_STDOUT = 0, /* standard output */
	NCF_OUT_INPLACE,    /* a FIFO or device, written as it is */
	NCF_OUT_UNNAMED,    /* O_TMPFILE: named when committed */
	NCF_OUT_TEMPNAME,   /* written under tmp, renamed when committed */
};

struct ncf_out {
	FILE *fp;	     /* write here */
	char *path;	     /* final name (a link's target), NULL for stdout */
	char *tmp;	     /* temporary name while one exists */
	const char *display; /* name for messages */
	int slot;	     /* cleanup registry slot, -1 for none */
	int kind;	     /* enum ncf_out_kind */
	int replace;	     /* the final name exists (rename over it) */
};

/*
 * Open an output.  binary: refuse a terminal on stdout.  Returns 0, or -1
 * after reporting (cannot create, terminal).
 */
int ncf_out_open(struct ncf_out *o, const char *path, int binary);
/*
 * Could an output to path be opened now, without opening it?  What
 * ncf_out_open would refuse: a directory, a name that cannot be looked
 * up, a directory that does not exist or takes no new file (read-only
 * file system, no permission); the probe leaves nothing behind (an
 * unnamed O_TMPFILE file closed at once, else a temporary name removed
 * at once).  in_place: a file written where it is (appended to) needs
 * only to take writes when it exists.  stdout is not a path here; a FIFO
 * or device passes unopened.  Returns 0, or -1 after ncf_out_open's
 * message.
 */
int ncf_out_probe(const char *path, int in_place);
/* Flush, check, sync and rename into place.  Returns 0 or -1 (reported;
 * the temporary file is removed). */
int ncf_out_commit(struct ncf_out *o);
/* Give up: close and remove the temporary file.  Safe to call twice. */
void ncf_out_abort(struct ncf_out *o);
/* The end of a write: ncf_out_abort when it failed (failed != 0, said
 * already) and -1, else ncf_out_commit's result. */
int ncf_out_end(struct ncf_out *o, int failed);
/* Copy the file src to dst as an output above (atomically, dst's rules).
 * Returns 0 or -1 (reported). */
int ncf_out_copy(const char *src, const char *dst);

/*
 * Install SIGINT/SIGTERM/SIGHUP handlers that remove open
 * temporary outputs and then die of the signal.  A tool that stops on
 * SIGINT/SIGTERM itself (ncf-train) installs its own handlers for those
 * two afterwards and keeps this one for SIGHUP.
 */
void ncf_out_cleanup_on_signals(void);
/* Remove every registered temporary file (async-signal-safe). */
void ncf_out_cleanup_all(void);

/*
 * The name an output to path will end up with: path itself, or the file a
 * symbolic link (or a chain of them, dangling or not) leads to, with the
 * directory made absolute where it exists.  Returns a malloc'd string.
 */
char *ncf_out_final_name(const char *path);

/*
 * Standard streams as every tool wants them; call first in main.
 *  - File descriptors 0, 1 and 2 are open, so that a file a tool opens
 *    never lands on one of them (with stdout closed, `ncf-eval --scores F
 *    >&-` would otherwise print the metrics into F).  A closed one is
 *    opened on /dev/null read-only: reading stdin gives an empty input,
 *    writing stdout fails (EBADF) and is reported, exit 1.
 *  - SIGPIPE has its default action even when the parent ignored it, so
 *    that a reader going away (`ncf-infer --score ... | head`) stops the
 *    tool at its next write, quietly, as it stops cat.
 */
void ncf_init_std_streams(void);

/*
 * Scratch files (ncf-prep's sorted runs): an unnamed file in TMPDIR
 * (default /tmp), open for reading and writing, that no name ever leads
 * to, so that nothing is left behind however the process ends, SIGKILL
 * included: O_TMPFILE, else a name made and removed at once (registered
 * for the signal cleanup above in between).  Returns the
 * descriptor, or -1 after reporting "cannot create a temporary file in
 * DIR (TMPDIR): <the system's words>".
 */
int ncf_tmp_open(void);
/* The directory of ncf_tmp_open: $TMPDIR, or /tmp when unset or empty. */
const char *ncf_tmp_dir(void);
/* Write n bytes to such a file at its end: 0, or -1 after reporting "a
 * temporary file in DIR: write failed: ..." (a full disk). */
int ncf_tmp_write(int fd, const void *buf, size_t n);
/* Read up to n bytes at offset: the bytes read (at least 1), or -1 after
 * reporting (an error, or the file ends there). */
ssize_t ncf_tmp_read(int fd, void *buf, size_t n, uint64_t offset);

/* The directory part of path, "." when it has none ("/" for "/x");
 * malloc'd. */
char *ncf_path_dir(const char *path);

/* Open an input ("-" or NULL: stdin).  *display gets a name for messages.
 * Returns NULL after reporting. */
FILE *ncf_in_open(const char *path, const char **display);
void ncf_in_close(FILE *fp);

/* Write n bytes; 0 or -1. */
int ncf_write_full(FILE *fp, const void *buf, size_t n);

/* Flush and close stdout, reporting a failed write (full disk, closed
 * pipe) as an error.  Returns 0 or -1.  Call before exiting 0. */
int ncf_close_stdout(void);

/* Little-endian field access. */
static inline void ncf_put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}
static inline void ncf_put_u64(unsigned char *p, uint64_t v)
{
	ncf_put_u32(p, (uint32_t)v);
	ncf_put_u32(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t ncf_get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
static inline uint64_t ncf_get_u64(const unsigned char *p)
{
	return (uint64_t)ncf_get_u32(p) | (uint64_t)ncf_get_u32(p + 4) << 32;
}
static inline void ncf_put_f64(unsigned char *p, double d)
{
	uint64_t v;
	__builtin_memcpy(&v, &d, 8);
	ncf_put_u64(p, v);
}
static inline double ncf_get_f64(const unsigned char *p)
{
	uint64_t v = ncf_get_u64(p);
	double d;
	__builtin_memcpy(&d, &v, 8);
	return d;
}

#endif
