/*
 * usage.h - the command line of the four tools and the end of a bad one,
 * shared by the tools and the benchmarks: "prog: what is wrong", then the
 * synopsis and a hint, on stderr, and exit status 2.  The library under
 * the tools (common/, kernels/) only reports and returns; this file turns
 * its -1 into the exit, so that the tools' option loops stay one line per
 * option.  It is linked into the programs, never into libncf.a
 * (ARCHITECTURE.md).
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
/* --help of a program whose help is its synopsis (the benchmarks): on stdout, exit 0. */
void ncf_usage_help(void) __attribute__((noreturn));

/*
 * A tool's command line: its options, and what parsing learns.  A tool
 * fills the first four fields and calls ncf_cli_next until it returns -1,
 * handing each option to its switch; the default branch ends in
 * ncf_cli_common.
 */
struct ncf_cli {
	const char *tool;		/* "ncf-train": whose NVIDIA names (nvidia.h) */
	const char *short_opts;		/* getopt's, starting with ':' */
	const struct option *long_opts; /* ending with a zero row */
	void (*usage)(void);		/* -h */
	int version;			/* -V was given */
	char **given;			/* argv as given (getopt permutes argv) */
	int argc;
	char **argv;			/* the one getopt works on */
	struct option *opts;		/* long_opts and NVIDIA's names */
	char **rewritten;		/* argv's words rewritten for getopt, each
					 * followed by the word it replaced */
	int nrewritten;
};

/*
 * The next option of argv, as getopt_long returns it (optarg set), -1
 * after the last.  NVIDIA's spellings of the tool's options (nvidia.h)
 * come back as ncf's; those with nothing to do are skipped; those with no
 * ncf equivalent end the command line with the line that says ncf's way.
 */
int ncf_cli_next(struct ncf_cli *cli, int argc, char **argv);
/* Free what ncf_cli_next keeps. */
void ncf_cli_free(struct ncf_cli *cli);

/*
 * The options every tool shares, for the default branch of its switch:
 * -q and -v (one display level down or up), -V (sets cli->version), -h
 * (cli->usage() on stdout, then exit 0), and getopt's ':' and '?' (a
 * usage error naming the option, with the nearest known option when one
 * is close; exit 2).
 */
void ncf_cli_common(int c, struct ncf_cli *cli);
/* Their getopt_long entries. */
#define NCF_COMMON_LONGOPTS                                                  \
	{"quiet", no_argument, 0, 'q'}, {"verbose", no_argument, 0, 'v'},    \
	{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}

/*
 * An operand where a file (what: "a cache") is expected that is a number
 * and no file, right after a short option that took its value from the
 * same word (-b1 0.25: -b took 1): end the command line saying which
 * option took what, and NVIDIA's meaning of the word where it has one
 * (ncf.py's -b1 is --beta1).  Otherwise return.
 */
void ncf_cli_operand(const struct ncf_cli *cli, const char *operand, const char *what);

/* The checked option values of cli.h, ending the command line (exit 2)
 * on a bad one: an integer in [min, max], a u64, a real number, a list of
 * at most max integers (returns the count). */
int64_t ncf_opt_int(const char *opt, const char *arg, int64_t min, int64_t max);
uint64_t ncf_opt_u64(const char *opt, const char *arg);
double ncf_opt_real(const char *opt, const char *arg, double lo, int lo_open, double hi,
		    int hi_open);
int ncf_opt_int_list(const char *opt, const char *arg, int64_t *out, int max, int64_t min,
		     int64_t max_v);

/*
 * --layers A,B,...: the MLP sizes, input first, into layers (room for max);
 * returns how many.  NVIDIA's spelling, the sizes as separate arguments
 * (--layers 256 256 128 64, rest: the arguments after the option's, NULL
 * ended) or one quoted with spaces, ends the command line showing ours.
 */
int ncf_opt_layers(const char *arg, char *const *rest, uint32_t *layers, int max);

/*
 * -k K against cache c (named path): with K at or above its candidates per
 * user (the test item and its negatives) every test item is a hit.  Such
 * a K given is refused, unless the candidates were given too (a feature
 * spec's series: NVIDIA's example runs -k 3 on them); a K not given (the
 * default, or a resumed run's) or a given split's is said to mean nothing.
 * ncf_topk_refuse: -1 where K is refused (reported), else 0.
 * ncf_topk_warn: 1 where it warned, else 0.
 */
struct ncf_cache;
int ncf_topk_refuse(uint32_t k, int given, const char *path, const struct ncf_cache *c);
int ncf_topk_warn(uint32_t k, int given, const char *path, const struct ncf_cache *c);

/* --device, --precision, --amp, --threads (backend_opts.h), ending the
 * command line on a bad value: 1 when c was one of them, else 0. */
int ncf_backend_option(int c, const char *arg, struct ncf_backend_opts *o);
/* After the options: --amp against --precision (exit 2 when they clash). */
void ncf_backend_opts_finish(struct ncf_backend_opts *o);

/* For ncf_dist_on_hang (dist.h): a job whose ranks stopped answering ends
 * with status 1, at once (the thread that noticed it is not main's). */
void ncf_exit_hung(void) __attribute__((noreturn));

#endif
