/*
 * cli.h - command-line helpers shared by the tools: strict number parsing,
 * option values checked against their range with a message that names the
 * option, --version, progress lines.  They report and return; ending a bad
 * command line with the synopsis and status 2 is the tools' (cli/usage.h).
 * The clock (ncf_now, ncf_peak_rss) is clock.h, included here for the
 * tools' convenience.
 */
#ifndef NCF_CLI_H
#define NCF_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "clock.h"

#define NCF_VERSION "0.1.0"

/*
 * Option values, checked: arg as an integer in [min, max], a u64, a real
 * number in (lo | [lo, hi) | hi], a list "a,b,c" of at most max integers
 * in [min, max_v] (*n gets the count).  On a bad value: "prog: OPT: 'arg'
 * is not ..." naming the option, and -1; the tool then ends the command
 * line (cli/usage.h: the synopsis, exit 2).  Return 0 or -1.
 */
int ncf_opt_parse_int(const char *opt, const char *arg, int64_t min, int64_t max, int64_t *v);
int ncf_opt_parse_u64(const char *opt, const char *arg, uint64_t *v);
int ncf_opt_parse_real(const char *opt, const char *arg, double lo, int lo_open, double hi,
		       int hi_open, double *v);
int ncf_opt_parse_int_list(const char *opt, const char *arg, int64_t *out, int max, int64_t min,
			   int64_t max_v, int *n);

/* Strict parsers used by the options and by data readers: the whole
 * string must be the number.  Return 0 or -1. */
int ncf_parse_i64(const char *s, int64_t *out);
int ncf_parse_u64(const char *s, uint64_t *out);
int ncf_parse_double(const char *s, double *out);

/* -V/--version: "prog (ncf) VERSION"; with verbose, the compiled-in
 * features and library versions, one per line.  extra (may be NULL) adds
 * lines, e.g. the CUDA device. */
void ncf_print_version(int verbose, void (*extra)(FILE *));


/*
 * Progress on stderr, shown at level 2 and up when stderr is a terminal or
 * when forced (--progress).  On a terminal one line rewritten in place, at
 * most about 6 times a second, cleared at the end; elsewhere (a log file,
 * Slurm's output) plain lines "prog: ...", at most one every
 * NCF_PROGRESS_PLAIN_S seconds.  A line is "label  done/total (pct%)  rate
 * ETA m:ss  extra", the rate and ETA measured since the label last
 * changed; done and total count unit ("samples"), or bytes when unit is
 * NCF_PROGRESS_BYTES (shown in MB).
 */
#define NCF_PROGRESS_PLAIN_S 5.0
#define NCF_PROGRESS_BYTES "B"
struct ncf_progress {
	int enabled;
	int tty;	  /* rewritten in place; else plain lines */
	const char *unit; /* what done and total count; NULL: nothing said */
	double last;	  /* when the last line was shown */
	int shown;	  /* a line is up (on a terminal) or was printed */
	char label[64];	  /* the label of the last update */
	double since;	  /* when that label began */
	double done0;	  /* done at that moment */
};
void ncf_progress_init(struct ncf_progress *p, int force);
/* Show "label  done/total (pct%) ..."; total 0 means unknown. */
void ncf_progress_update(struct ncf_progress *p, const char *label, double done, double total,
			 const char *extra);
/* A stage with nothing to count: "label" (ncf-prep's "protocol"). */
void ncf_progress_phase(struct ncf_progress *p, const char *label);
void ncf_progress_clear(struct ncf_progress *p);
/* seconds as "45s", "3:07" or "1:02:03", into buf. */
const char *ncf_progress_eta(char *buf, size_t len, double seconds);

#endif
