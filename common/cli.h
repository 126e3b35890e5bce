/*
 * cli.h - command-line helpers shared by the tools: range-checked number
 * parsing that names the option, usage errors, --version, progress lines.
 * The clock (ncf_now, ncf_peak_rss) is clock.h, included here for the
 * tools' convenience.
 */
#ifndef NCF_CLI_H
#define NCF_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "clock.h"

#define NCF_VERSION "0.1.0"

/* Set by each tool before parsing: its one-line synopsis for usage errors. */
extern const char *ncf_synopsis;

/* Print "prog: message" and the synopsis on stderr, exit 2. */
void ncf_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

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

/* Parse arg as an integer in [min, max] for option opt; exits 2 with a
 * message naming opt when it is not one. */
int64_t ncf_opt_int(const char *opt, const char *arg, int64_t min, int64_t max);
uint64_t ncf_opt_u64(const char *opt, const char *arg);
/* Parse a real number; lo/hi bounds, open or closed. */
double ncf_opt_real(const char *opt, const char *arg, double lo, int lo_open, double hi,
		    int hi_open);
/* Parse "a,b,c" into at most max integers in [min, max_v]; returns count. */
int ncf_opt_int_list(const char *opt, const char *arg, int64_t *out, int max, int64_t min,
		     int64_t max_v);

/* Strict parsers used by the options and by data readers: the whole
 * string must be the number.  Return 0 or -1. */
int ncf_parse_i64(const char *s, int64_t *out);
int ncf_parse_u64(const char *s, uint64_t *out);
int ncf_parse_double(const char *s, double *out);

/* -V/--version: "prog (ncf) VERSION"; with verbose, the compiled-in
 * features and library versions, one per line.  extra (may be NULL) adds
 * lines, e.g. the CUDA device. */
void ncf_print_version(int verbose, void (*extra)(FILE *));


/* Progress on stderr: enabled when stderr is a terminal or forced; at most
 * about 6 updates a second, rewritten in place, cleared at the end. */
struct ncf_progress {
	int enabled;
	double last;
	int shown;
};
void ncf_progress_init(struct ncf_progress *p, int force);
/* Show "label  done/total (pct%) extra"; total 0 means unknown. */
void ncf_progress_update(struct ncf_progress *p, const char *label, double done, double total,
			 const char *extra);
void ncf_progress_clear(struct ncf_progress *p);

#endif
