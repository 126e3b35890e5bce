/*
 * usage.h - the end of a bad command line, shared by the four tools and
 * the benchmarks: "prog: what is wrong", then the synopsis and a hint, on
 * stderr, and exit status 2.  The library under the tools (common/,
 * kernels/) only reports and returns; this file turns its -1 into the
 * exit, so that the tools' option loops stay one line per option.  It is
 * linked into the programs, never into libncf.a (ARCHITECTURE.md).
 */
#ifndef NCF_USAGE_H
#define NCF_USAGE_H

#include <getopt.h>
#include <stdint.h>

#include "backend_opts.h"
#include "cli.h"

/* Set by each tool before parsing: its one-line synopsis for usage errors. */
extern const char *ncf_synopsis;

/* Print "prog: message" and the synopsis on stderr, exit 2. */
void ncf_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The synopsis after a message already given (a parser's), exit 2. */
void ncf_usage_exit(void) __attribute__((noreturn));

/*
 * The options every tool shares, for the default branch of its getopt
 * switch: -q and -v (one display level down or up), -V (sets *version),
 * -h (usage() on stdout, then exit 0), and getopt's ':' and '?' (a usage
 * error, exit 2).
 */
void ncf_cli_common(int c, char **argv, void (*usage)(void), int *version);
/* Their getopt_long entries. */
#define NCF_COMMON_LONGOPTS                                                  \
	{"quiet", no_argument, 0, 'q'}, {"verbose", no_argument, 0, 'v'},    \
	{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}

/* The checked option values of cli.h, ending the command line (exit 2)
 * on a bad one: an integer in [min, max], a u64, a real number, a list of
 * at most max integers (returns the count). */
int64_t ncf_opt_int(const char *opt, const char *arg, int64_t min, int64_t max);
uint64_t ncf_opt_u64(const char *opt, const char *arg);
double ncf_opt_real(const char *opt, const char *arg, double lo, int lo_open, double hi,
		    int hi_open);
int ncf_opt_int_list(const char *opt, const char *arg, int64_t *out, int max, int64_t min,
		     int64_t max_v);

/* --device, --precision, --amp, --threads (backend_opts.h), ending the
 * command line on a bad value: 1 when c was one of them, else 0. */
int ncf_backend_option(int c, const char *arg, struct ncf_backend_opts *o);
/* After the options: --amp against --precision (exit 2 when they clash). */
void ncf_backend_opts_finish(struct ncf_backend_opts *o);

/* For ncf_dist_on_hang (dist.h): a job whose ranks stopped answering ends
 * with status 1, at once (the thread that noticed it is not main's). */
void ncf_exit_hung(void) __attribute__((noreturn));

#endif
