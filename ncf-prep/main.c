/*
 * ncf-prep - MovieLens ratings (or synthetic data) in, a cache out.
 *
 * The thin main: options into struct prep_opts, then parse (parse.c) or
 * generate (synth.c), index (rows.c), run the protocol (protocol.c) and
 * write the cache (common/cache.c); or --info, or --emit-csv.  See
 * ncf-prep(1).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "err.h"
#include "io.h"
#include "kinds.h"
#include "given.h"
#include "omp_wait.h"
#include "paper.h"
#include "parse.h"
#include "protocol.h"
#include "rows.h"
#include "samefile.h"
#include "spec.h"
#include "spill.h"
#include "synth.h"
#include "usage.h"

static void usage(void)
{
	printf("usage: ncf-prep [options] [FILE]\n"
	       "       ncf-prep --feature-spec DIR/feature_spec.yaml [-o CACHE]\n"
	       "       ncf-prep --ncf-paper DIR/NAME [-o CACHE]\n"
	       "       ncf-prep --synthetic SHAPE[xSCALE] [options]\n"
	       "       ncf-prep --info CACHE\n"
	       "\n"
	       "Turn ratings (FILE or stdin) into an ncf cache: leave-one-out split by\n"
	       "time, training positives, evaluation negatives; or read a split made\n"
	       "elsewhere, with its candidates.\n"
	       "\n"
	       "  -o, --output FILE        write the cache to FILE (default stdout)\n"
	       "      --format NAME        input format: ml-20m, ml-1m, ml-100k, csv\n"
	       "                           (default: detected from the first line)\n"
	       "      --columns SPEC       a CSV's columns: user=COL,item=COL,time=COL, each\n"
	       "                           COL a header's name or a number from 1\n"
	       "      --delimiter C        a CSV's separator: one character, or tab\n"
	       "      --feature-spec FILE  NVIDIA's feature spec over CSV files: a given split\n"
	       "      --ncf-paper NAME     NAME.train.rating, .test.rating, .test.negative (the\n"
	       "                           NCF paper's files; also read when FILE is one)\n"
	       "      --min-ratings N      drop users with fewer than N distinct items (0: off)\n"
	       "      --eval-negatives N   evaluation negatives per user (default 100)\n"
	       "  -s, --seed N             seed of the negatives and synthetic data (default 1)\n"
	       "  -S, --buffer-size SIZE   memory for the ratings, as sort -S: K, M, G, T, b or %%\n"
	       "                           of physical memory (default 50%%); beyond it sorted\n"
	       "                           runs are spilled to TMPDIR and merged\n"
	       "      --synthetic SPEC     generate data: SHAPE[xSCALE], SHAPE one of\n"
	       "                           %s\n"
	       "      --emit-csv           with --synthetic: write the ratings as ml-20m CSV\n"
	       "      --info CACHE         print the summary of CACHE as key<TAB>value lines\n"
	       "      --progress           show progress even when stderr is not a terminal\n"
	       "  -q, --quiet              less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose            print stage timings\n"
	       "  -h, --help               show this help\n"
	       "  -V, --version            show the version (-vV: libraries)\n"
	       "\n"
	       "NVIDIA's convert.py spellings work too (--path FILE, --valid_negative N), or say\n"
	       "what to give instead (ncf(7), NVIDIA'S OPTIONS).\n"
	       "\n"
	       "Exit status: 0 ok, 1 bad input or I/O error, 2 usage error.\n",
	       prep_synth_shapes());
}

enum {
	OPT_FORMAT = 256,
	OPT_MIN,
	OPT_NEG,
	OPT_SYNTH,
	OPT_EMIT,
	OPT_INFO,
	OPT_PROG,
	OPT_PATH,
	OPT_COLUMNS,
	OPT_DELIM,
	OPT_SPEC,
	OPT_PAPER,
};

/* The default -S: this share of physical memory. */
#define DEFAULT_BUFFER_PERCENT 50
/* The least -S used (a smaller one is raised to it, as sort does). */
#define MIN_BUFFER ((uint64_t)1 << 20)

static const struct option long_opts[] = {
	{"output", required_argument, 0, 'o'},
	{"format", required_argument, 0, OPT_FORMAT},
	{"columns", required_argument, 0, OPT_COLUMNS},
	{"delimiter", required_argument, 0, OPT_DELIM},
	{"feature-spec", required_argument, 0, OPT_SPEC},
	{"ncf-paper", required_argument, 0, OPT_PAPER},
	{"min-ratings", required_argument, 0, OPT_MIN},
	{"eval-negatives", required_argument, 0, OPT_NEG},
	{"seed", required_argument, 0, 's'},
	{"buffer-size", required_argument, 0, 'S'},
	{"synthetic", required_argument, 0, OPT_SYNTH},
	{"emit-csv", no_argument, 0, OPT_EMIT},
	{"info", required_argument, 0, OPT_INFO},
	{"progress", no_argument, 0, OPT_PROG},
	{"path", required_argument, 0, OPT_PATH}, /* NVIDIA's convert.py: FILE */
	NCF_COMMON_LONGOPTS,
	{0, 0, 0, 0},
};

/* The command line. */
struct prep_opts {
	const char *output;    /* -o, NULL: stdout */
	const char *input;     /* FILE, NULL: stdin */
	const char *path;      /* --path FILE (NVIDIA's spelling of FILE) */
	const char *synthetic; /* --synthetic SPEC */
	const char *info;      /* --info CACHE */
	const char *spec;      /* --feature-spec FILE (or FILE.yaml) */
	const char *paper;     /* --ncf-paper NAME (or a file of the paper's) */
	char paper_name[4096]; /* NAME of a file of the paper's given as FILE */
	char spec_path[4096];  /* DIR/feature_spec.yaml for --feature-spec DIR */
	const char *drawn;     /* the first of the options of ncf-prep's own split given
				  (--min-ratings, --eval-negatives, --seed), or NULL */
	struct prep_parse_opts parse; /* --format, --columns, --delimiter, --progress */
	struct prep_protocol_opts po;
	uint64_t buffer;       /* -S, bytes */
	int emit_csv, progress;
};

/* The stages of a run: when each ended, for -v, and the progress line
 * that names the one under way. */
struct prep_times {
	double start, read, index, protocol, oracle, write;
	struct ncf_progress prog;
};

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

/* Physical memory in bytes (0: unknown). */
static uint64_t physical_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
	return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/* P percent of physical memory (1 GiB when it is unknown). */
static uint64_t memory_share(uint64_t p)
{
	uint64_t m = physical_memory();
	return m ? m / 100 * p : (uint64_t)1 << 30;
}

/* -S SIZE as sort(1) reads it: a whole number, then b (bytes), K (the
 * default), M, G or T (powers of 1024, either case), or % of physical
 * memory; at least MIN_BUFFER is used. */
static uint64_t parse_size(const char *arg)
{
	static const char units[] = "bkmgt";
	char *end;
	errno = 0;
	unsigned long long v = arg[0] >= '0' && arg[0] <= '9' ? strtoull(arg, &end, 10) : 0;
	const char *u = arg[0] >= '0' && arg[0] <= '9' ? end : arg;
	char unit = *u ? (char)(*u | 0x20) : 'k';
	const char *at = *u == '%' ? NULL : strchr(units, unit);
	if (errno || u == arg || (u[0] && u[1]) || (!at && *u != '%') || (*u == '%' && v > 100))
		ncf_usage_error("--buffer-size: '%s' is not a size (a whole number, then K, M, G, T, "
				"b or %%, as for sort -S)",
				ncf_escape(arg, strlen(arg), 40));
	uint64_t bytes;
	if (*u == '%') {
		bytes = memory_share(v);
	} else {
		int shift = 10 * (int)(at - units);
		if (shift && v > (UINT64_MAX >> shift))
			ncf_usage_error("--buffer-size: '%s' is more bytes than can be counted",
					ncf_escape(arg, strlen(arg), 40));
		bytes = (uint64_t)v << shift;
	}
	return bytes < MIN_BUFFER ? MIN_BUFFER : bytes;
}

/* Every option into o; -h, -V and bad options end here.  Returns 1 when
 * -V was given. */
static int parse_opts(int argc, char **argv, struct prep_opts *o, struct ncf_cli *cli)
{
	int c;
	while ((c = ncf_cli_next(cli, argc, argv)) != -1) {
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case 'S':
			o->buffer = parse_size(optarg);
			break;
		case OPT_FORMAT:
			o->parse.format = prep_parse_format(optarg);
			if (o->parse.format == NCF_FORMAT_UNKNOWN)
				ncf_usage_error("--format: unknown format '%s' (ml-20m, ml-1m, ml-100k, "
						"csv)",
						ncf_escape(optarg, strlen(optarg), 40));
			break;
		case OPT_COLUMNS:
			if (prep_parse_columns_check(optarg))
				ncf_usage_error("--columns: '%s': %s (like user=userId,item=movieId,"
						"time=timestamp, or user=1,item=2,time=4)",
						ncf_escape(optarg, strlen(optarg), 60),
						prep_parse_columns_check(optarg));
			o->parse.columns = optarg;
			break;
		case OPT_DELIM:
			o->parse.delimiter = prep_parse_delimiter(optarg);
			if (!o->parse.delimiter)
				ncf_usage_error("--delimiter: '%s' is not one character (other than a "
						"quote, a space or a line end), or tab",
						ncf_escape(optarg, strlen(optarg), 20));
			break;
		case OPT_MIN:
			o->drawn = o->drawn ? o->drawn : "--min-ratings";
			o->po.min_ratings = (uint32_t)ncf_opt_int("--min-ratings", optarg, 0, UINT32_MAX);
			break;
		case OPT_NEG:
			o->drawn = o->drawn ? o->drawn : "--eval-negatives";
			o->po.eval_negatives = (uint32_t)ncf_opt_int("--eval-negatives", optarg, 1,
									 NCF_CACHE_MAX_NEGATIVES);
			break;
		case 's':
			o->drawn = o->drawn ? o->drawn : "--seed";
			o->po.seed = ncf_opt_u64("--seed", optarg);
			break;
		case OPT_SYNTH:
			o->synthetic = optarg;
			break;
		case OPT_EMIT:
			o->emit_csv = 1;
			break;
		case OPT_INFO:
			o->info = optarg;
			break;
		case OPT_PROG:
			o->progress = o->parse.progress = 1;
			break;
		case OPT_PATH:
			o->path = optarg;
			break;
		case OPT_SPEC:
			o->spec = optarg;
			break;
		case OPT_PAPER:
			o->paper = optarg;
			break;
		default:
			ncf_cli_common(c, cli);
		}
	}
	return cli->version;
}

/* --info CACHE: its summary as key<TAB>value lines.  Returns the exit
 * status. */
static int run_info(int argc, const struct prep_opts *o)
{
	if (optind < argc || o->output || o->synthetic || o->path)
		ncf_usage_error("--info takes one cache and no other input or output");
	struct ncf_named files[] = {{.path = o->info, .what = "--info"},
				    {.path = "-", .output = 1}};
	if (ncf_refuse_same_file(files, 2) != 0)
		return NCF_EXIT_USAGE;
	enum ncf_kind k = ncf_kind_of(o->info);
	char name[256];
	if (k == NCF_KIND_MODEL || k == NCF_KIND_SAFETENSORS) {
		ncf_error("--info: %s is %s, not a cache: --info describes caches (ncf-infer and "
			  "ncf-eval read models)",
			  o->info, ncf_kind_says(k));
		return NCF_EXIT_FAIL;
	}
	if (k == NCF_KIND_TEXT) {
		ncf_error("--info: %s is %s (ratings?), not a cache: make one first: ncf-prep -o %s %s",
			  o->info, ncf_kind_says(k), ncf_kind_cache_name(o->info, name, sizeof name),
			  o->info);
		return NCF_EXIT_FAIL;
	}
	struct ncf_cache cache;
	if (ncf_cache_read(o->info, &cache) != 0)
		return NCF_EXIT_FAIL;
	ncf_cache_print_info(&cache, stdout);
	ncf_cache_free(&cache);
	return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
}

/* The input by what it is: a cache or a model is not ratings.  Returns 0,
 * or -1 (reported). */
static int check_input_kind(const struct prep_opts *o)
{
	enum ncf_kind k = ncf_kind_of(o->input);
	if (k == NCF_KIND_CACHE)
		ncf_error("%s is %s already: ncf-prep reads ratings (ncf-prep --info %s describes "
			  "it; ncf-train %s -o MODEL trains on it)",
			  o->input, ncf_kind_says(k), o->input, o->input);
	else if (k == NCF_KIND_MODEL || k == NCF_KIND_SAFETENSORS)
		ncf_error("%s is %s, not ratings: ncf-prep reads ratings (ncf-eval -m %s CACHE "
			  "evaluates it)",
			  o->input, ncf_kind_says(k), o->input);
	else
		return 0;
	return -1;
}

/* -o as NVIDIA's convert.py --output takes it, a directory: the cache is
 * a file, and which one to give is said (exit 1, as for any -o that
 * cannot be created).  Returns 0, or -1 (reported). */
static int refuse_output_dir(const struct prep_opts *o)
{
	struct stat st;
	if (!o->output || stat(o->output, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	char name[256];
	size_t len = strlen(o->output);
	ncf_error("-o: %s is a directory; ncf-prep writes one cache file (where NVIDIA's "
		  "convert.py --output takes a directory): -o %s%s%s",
		  o->output, o->output, len && o->output[len - 1] == '/' ? "" : "/",
		  o->input ? ncf_kind_cache_name(o->input, name, sizeof name) : "ratings.ncfc");
	return -1;
}

/* The operands: one input file at most (or --path), which becomes
 * o->input; a second name that is no file yet, or a cache, is where the
 * user meant the cache to go. */
static void check_operands(int argc, char **argv, struct prep_opts *o, const struct ncf_cli *cli)
{
	for (int k = optind; k < argc; k++)
		ncf_cli_operand(cli, argv[k], "a ratings file");
	if (o->path && optind < argc)
		ncf_usage_error("--path is NVIDIA's spelling of the input file: give one of them, not "
				"both ('%s' is extra)",
				argv[optind]);
	enum ncf_kind extra = argc - optind > 1 ? ncf_kind_of(argv[optind + 1]) : NCF_KIND_UNKNOWN;
	if (argc - optind > 1 && !o->output && (extra == NCF_KIND_UNKNOWN || extra == NCF_KIND_CACHE))
		ncf_usage_error("one input file at most ('%s' is extra; to write the cache there, "
				"give -o %s)",
				argv[optind + 1], argv[optind + 1]);
	if (argc - optind > 1)
		ncf_usage_error("one input file at most ('%s' is extra)", argv[optind + 1]);
	o->input = optind < argc ? argv[optind] : o->path;
}

/* The operands and the files of a run that writes a cache or CSV.
 * Returns 0, NCF_EXIT_USAGE after a same-file refusal, or NCF_EXIT_FAIL
 * when -o cannot be created or the input is not ratings (said before a
 * large input is read; other usage errors exit here). */
/* Is name a YAML file (by its name)? */
static int yaml_name(const char *name)
{
	size_t n = strlen(name);
	return (n > 5 && !strcmp(name + n - 5, ".yaml")) || (n > 4 && !strcmp(name + n - 4, ".yml"));
}

/* A split given with the data: FILE a feature spec's YAML or one of the
 * NCF paper's files is read as --feature-spec or --ncf-paper would; the
 * options that belong to ncf-prep's own split or to ratings files are
 * refused with one. */
static void check_given(struct prep_opts *o)
{
	if (o->input && !o->spec && !o->paper) {
		if (prep_paper_name(o->input, o->paper_name, sizeof o->paper_name))
			o->paper = o->paper_name;
		else if (yaml_name(o->input))
			o->spec = o->input;
		else
			return;
		o->input = NULL;
	}
	if (!o->spec && !o->paper)
		return;
	const char *given = o->spec ? "--feature-spec" : "--ncf-paper";
	if (o->spec && o->paper)
		ncf_usage_error("--feature-spec and --ncf-paper: give one split");
	if (o->input || o->synthetic)
		ncf_usage_error("%s reads its own files: no %s", given,
				o->synthetic ? "--synthetic" : "input file besides");
	if (o->parse.format != NCF_FORMAT_UNKNOWN || o->parse.columns || o->parse.delimiter)
		ncf_usage_error("%s: the files' layout is the split's own (no --format, --columns, "
				"--delimiter)",
				given);
	if (o->drawn)
		ncf_usage_error("%s: %s belongs to ncf-prep's own split, and this one is given with "
				"its candidates (nothing is drawn, no user dropped)",
				given, o->drawn);
	if (o->spec && !strcmp(o->spec, "-"))
		ncf_usage_error("--feature-spec: a file, not standard input (its CSV files are "
				"found beside it)");
	/* a directory: its feature_spec.yaml, as NVIDIA's ncf.py --data DIR
	 * reads it (--feature_spec_file's default) */
	struct stat st;
	if (o->spec && stat(o->spec, &st) == 0 && S_ISDIR(st.st_mode)) {
		size_t n = strlen(o->spec);
		if (n + sizeof "/feature_spec.yaml" > sizeof o->spec_path)
			ncf_usage_error("--feature-spec: '%s' is too long a name", o->spec);
		snprintf(o->spec_path, sizeof o->spec_path, "%s%sfeature_spec.yaml", o->spec,
			 o->spec[n - 1] == '/' ? "" : "/");
		o->spec = o->spec_path;
	}
}

/* --format, --columns, --delimiter: an input file's, a CSV's for the
 * last two.  Exits 2 on a conflict. */
static void check_layout(const struct prep_opts *o)
{
	if (o->synthetic && (o->parse.format != NCF_FORMAT_UNKNOWN || o->parse.columns ||
			     o->parse.delimiter))
		ncf_usage_error("--%s applies to input files, not --synthetic",
				o->parse.format != NCF_FORMAT_UNKNOWN ? "format"
				: o->parse.columns		       ? "columns"
								       : "delimiter");
	if ((o->parse.columns || o->parse.delimiter) && o->parse.format != NCF_FORMAT_UNKNOWN &&
	    o->parse.format != NCF_FORMAT_CSV)
		ncf_usage_error("--%s reads a CSV file, not --format %s: leave --format out",
				o->parse.columns ? "columns" : "delimiter",
				ncf_format_name(o->parse.format));
}

static int check_opts(int argc, char **argv, struct prep_opts *o, const struct ncf_cli *cli)
{
	check_operands(argc, argv, o, cli);
	check_given(o);
	if (o->synthetic && o->input)
		ncf_usage_error("--synthetic takes no input file");
	if (o->emit_csv && !o->synthetic)
		ncf_usage_error("--emit-csv needs --synthetic");
	check_layout(o);
	int given = o->spec || o->paper;
	struct ncf_named files[] = {
		{.path = o->synthetic || given ? NULL : o->input ? o->input : "-", .what = "the input"},
		{.path = o->output ? o->output : "-", .what = "-o", .output = 1}};
	if (ncf_refuse_same_file(files, 2) != 0)
		return NCF_EXIT_USAGE;
	if (refuse_output_dir(o) != 0 || ncf_probe_outputs(files, 2) != 0)
		return NCF_EXIT_FAIL;
	return !o->synthetic && !given && check_input_kind(o) != 0 ? NCF_EXIT_FAIL : 0;
}

/* --synthetic SPEC --emit-csv: the generator's ratings as ml-20m CSV.
 * Returns the exit status. */
static int run_emit_csv(const struct prep_opts *o, const struct prep_synth *synth, double t0)
{
	struct ncf_out out;
	if (ncf_out_open(&out, o->output, 0) != 0)
		return NCF_EXIT_FAIL;
	int bad = prep_synth_write_csv(synth, out.fp);
	if (bad)
		ncf_error("%s: write failed: %s", out.display, strerror(errno ? errno : EIO));
	if (ncf_out_end(&out, bad) != 0)
		return NCF_EXIT_FAIL;
	ncf_info("wrote synthetic %s ratings (%u users, %u items) to %s in %.2f s", o->synthetic,
		 synth->users, synth->items, o->output ? o->output : "<stdout>", ncf_now() - t0);
	return 0;
}

/* The ratings into rows, from the generator (synth non-NULL) or the input
 * file; the cache's source fields, and in pi the keys of a CSV's ids
 * (prep_parse_ids, once the rows are indexed).  *display names the
 * input.  Returns 0 or -1 (reported). */
static int read_rows(const struct prep_opts *o, const struct prep_synth *synth,
		     struct prep_rows *rows, struct ncf_cache *cache, const char **display,
		     struct prep_parse_info *pi)
{
	*display = "<synthetic>";
	if (synth) {
		prep_synth_rows(synth, rows);
		cache->format = NCF_FORMAT_SYNTHETIC;
		snprintf(cache->synthetic, sizeof cache->synthetic, "%s", o->synthetic);
		return rows->failed ? -1 : 0;
	}
	FILE *in = ncf_in_open(o->input, display);
	if (!in)
		return -1;
	int rc = prep_parse(in, *display, &o->parse, rows, pi);
	ncf_in_close(in);
	if (rc != 0)
		return -1;
	cache->format = pi->format;
	cache->source_bytes = pi->bytes;
	cache->source_crc = pi->crc;
	return 0;
}

/* The cache to -o (stdout by default), its training items and
 * negatives from train and neg when they are given (the spilled
 * protocol's planes), else from the cache; *bytes its size when it is a
 * file (else -1).  Returns 0 or -1 (reported). */
static int write_cache(const struct prep_opts *o, const struct ncf_cache *cache,
		       struct prep_planes *train, struct prep_planes *neg, long *bytes)
{
	struct ncf_out out;
	if (ncf_out_open(&out, o->output, 1) != 0)
		return -1;
	struct ncf_cache_source ts = {prep_planes_feed, train}, ns = {prep_planes_feed, neg};
	int bad = ncf_cache_write_sourced(cache, out.fp, out.display, train ? &ts : NULL,
					  neg ? &ns : NULL);
	*bytes = out.fp != stdout ? ftell(out.fp) : -1;
	return ncf_out_end(&out, bad);
}

/* What the run made (and with -v how long each stage took). */
static void report_cache(const char *display, const struct ncf_cache *cache,
			 const struct prep_times *t, long out_bytes)
{
	if (cache->split_given)
		ncf_info("%s: a given split: %u users, %u items, %lld training positives, %llu "
			 "explicit negatives; %u test positives, %u negative candidates each",
			 display, cache->users, cache->items, (long long)cache->train_positives,
			 (unsigned long long)cache->train_negatives, cache->users,
			 cache->eval_negatives);
	else
		ncf_info("%s: %llu ratings, %u users, %u items -> %lld training positives, %u test "
			 "positives, %u negatives each",
			 display, (unsigned long long)cache->ratings_read, cache->users, cache->items,
			 (long long)cache->train_positives, cache->users, cache->eval_negatives);
	if (cache->split_given && (cache->duplicates_dropped || cache->test_only_users))
		ncf_info("dropped %llu repeated training positives; %llu users have only a test "
			 "positive",
			 (unsigned long long)cache->duplicates_dropped,
			 (unsigned long long)cache->test_only_users);
	else if (cache->duplicates_dropped || cache->users_dropped || cache->test_only_users)
		ncf_info("dropped %llu duplicate ratings, %llu users under --min-ratings (%llu "
			 "ratings, %llu items); %llu users have only a test positive",
			 (unsigned long long)cache->duplicates_dropped,
			 (unsigned long long)cache->users_dropped,
			 (unsigned long long)cache->ratings_dropped,
			 (unsigned long long)cache->items_dropped,
			 (unsigned long long)cache->test_only_users);
	if (!isnan(cache->oracle_hr))
		ncf_info("oracle HR@10 of the planted scores: %.4f", cache->oracle_hr);
	ncf_debug("time read %.3f s (%.1f MB/s), index %.3f s, protocol %.3f s, oracle %.3f s, "
		  "write %.3f s, total %.3f s",
		  t->read - t->start,
		  cache->source_bytes ? mb(cache->source_bytes) / (t->read - t->start) : 0.0,
		  t->index - t->read, t->protocol - t->index, t->oracle - t->protocol,
		  t->write - t->oracle, t->write - t->start);
	if (out_bytes >= 0)
		ncf_debug("cache %ld bytes%s", out_bytes,
			  cache->source_bytes ? "" : " (synthetic source)");
	if (out_bytes >= 0 && cache->source_bytes)
		ncf_debug("cache/source size ratio %.4f",
			  (double)out_bytes / (double)cache->source_bytes);
	ncf_debug("peak memory %.1f MB", mb(ncf_peak_rss()));
}

/* The rows, all in memory, to the cache, written: index, protocol,
 * oracle (synth: freed once it is computed).  Returns 0 or -1. */
static int prep_in_memory(const struct prep_opts *o, struct prep_synth *synth,
			  struct prep_rows *rows, struct prep_parse_info *pi,
			  struct ncf_cache *cache, struct prep_times *t, long *out_bytes)
{
	cache->ratings_read = rows->n;
	ncf_progress_phase(&t->prog, "indexing users and items");
	prep_rows_index(rows);
	prep_parse_ids(pi, rows);
	t->index = ncf_now();
	ncf_progress_phase(&t->prog, "protocol: leave-one-out, evaluation negatives");
	NCF_TRY(prep_protocol_run(rows, &o->po, cache));
	prep_rows_free(rows);
	t->protocol = ncf_now();
	if (synth) {
		ncf_progress_phase(&t->prog, "oracle HR@10 of the planted scores");
		cache->oracle_hr = prep_synth_oracle(synth, cache, 10);
		prep_synth_free(synth);
	}
	t->oracle = ncf_now();
	ncf_progress_phase(&t->prog, "writing the cache");
	return write_cache(o, cache, NULL, NULL, out_bytes);
}

/* The synthetic oracle over the spilled protocol's batches: begun on the
 * first, once the cache's ids exist. */
struct oracle_batches {
	const struct prep_synth *synth;
	struct prep_synth_oracle *q;
};

static void oracle_batch(void *ctx, const struct ncf_cache *c, uint32_t first, uint32_t n,
			 const uint32_t *test, const uint32_t *neg)
{
	struct oracle_batches *ob = ctx;
	if (!ob->q)
		ob->q = prep_synth_oracle_begin(ob->synth, c);
	prep_synth_oracle_users(ob->q, c, first, n, test, neg);
}

/* The rows that outgrew -S, spilled into sp, to the cache, written:
 * the last run and the merges, the protocol over the merged runs with
 * the oracle batch by batch (synth: freed once it is computed), the
 * cache from its planes.  Returns 0 or -1. */
static int prep_spilled(const struct prep_opts *o, struct prep_synth *synth, struct prep_spill *sp,
			struct prep_rows *rows, struct prep_parse_info *pi, struct ncf_cache *cache,
			struct prep_times *t, long *out_bytes)
{
	ncf_progress_phase(&t->prog, "sorting and spilling the last run");
	NCF_TRY(prep_spill_finish(sp, rows));
	prep_parse_ids(pi, rows);
	cache->ratings_read = prep_spill_rows(sp);
	t->index = ncf_now();
	ncf_progress_phase(&t->prog, "merging the runs, protocol: leave-one-out, evaluation negatives");
	struct prep_planes *train = prep_planes_open(1), *neg = train ? prep_planes_open(0) : NULL;
	struct oracle_batches ob = {synth, NULL};
	struct prep_protocol_hook hook = {oracle_batch, &ob};
	int rc = train && neg ? 0 : -1;
	if (rc == 0)
		rc = prep_protocol_run_spilled(sp, rows, &o->po, cache, train, neg,
					      synth ? &hook : NULL);
	if (ob.q)
		cache->oracle_hr = prep_synth_oracle_end(ob.q, cache, 10);
	if (synth)
		prep_synth_free(synth);
	t->protocol = t->oracle = ncf_now(); /* the oracle ran inside the protocol */
	ncf_progress_phase(&t->prog, "writing the cache");
	if (rc == 0)
		rc = write_cache(o, cache, train, neg, out_bytes);
	prep_planes_free(train);
	prep_planes_free(neg);
	return rc;
}

/* -o is none of the files a given split was read from (g's), each of
 * them known only once it is read.  0, or -1 (reported: exit 2). */
static int refuse_given_output(const struct prep_opts *o, const struct prep_given *g)
{
	size_t n = g->n_files + 1;
	struct ncf_named *f = ncf_xcalloc(n, sizeof *f);
	for (uint32_t k = 0; k < g->n_files; k++)
		f[k] = (struct ncf_named){.path = g->files[k], .what = "an input of the split"};
	f[g->n_files] = (struct ncf_named){.path = o->output ? o->output : "-", .what = "-o",
					   .output = 1};
	int rc = ncf_refuse_same_file(f, n);
	free(f);
	return rc;
}

/* --ncf-paper NAME: its three files are there before any is read, else
 * one line that says which is missing and what NAME is (a directory given
 * for NAME: the NAME its *.train.rating has).  0, or -1 (reported). */
static int paper_files_there(const char *name)
{
	const char *train = prep_paper_suffix[PREP_PAPER_TRAIN];
	struct stat st;
	if (stat(name, &st) == 0 && S_ISDIR(st.st_mode)) {
		DIR *d = opendir(name);
		struct dirent *e;
		char found[256] = "NAME";
		size_t m = strlen(train);
		while (d && (e = readdir(d)) != NULL) {
			size_t n = strlen(e->d_name);
			if (n > m && n - m < sizeof found && !strcmp(e->d_name + n - m, train)) {
				memcpy(found, e->d_name, n - m);
				found[n - m] = 0;
				break;
			}
		}
		if (d)
			closedir(d);
		const char *sep = name[strlen(name) - 1] == '/' ? "" : "/";
		ncf_error("--ncf-paper %s: a directory; give DIR/NAME, the start of the files' names "
			  "(--ncf-paper %s%s%s for %s%s%s%s)",
			  name, name, sep, found, name, sep, found, train);
		return -1;
	}
	for (int k = 0; k < 3; k++) {
		char *path = prep_paper_path(name, k);
		int there = stat(path, &st) == 0;
		if (!there)
			ncf_error("%s: %s (--ncf-paper %s reads %s.train.rating, .test.rating and "
				  ".test.negative)",
				  path, strerror(errno), name, name);
		free(path);
		if (!there)
			return -1;
	}
	return 0;
}

/* A split given with the data (--feature-spec, --ncf-paper) to a cache:
 * its files read (spec.c, paper.c), the protocol's given way in
 * (protocol.c), the cache written.  Returns the exit status. */
static int run_given(const struct prep_opts *o, double t0)
{
	struct prep_times t = {.start = t0};
	ncf_progress_init(&t.prog, o->progress);
	ncf_progress_phase(&t.prog, "reading the given split");
	struct prep_given g;
	prep_given_init(&g);
	struct ncf_cache cache;
	memset(&cache, 0, sizeof cache);
	cache.oracle_hr = NAN;
	cache.format = o->spec ? NCF_FORMAT_FEATURE_SPEC : NCF_FORMAT_NCF_PAPER;
	int rc = o->spec ? prep_spec_read(o->spec, &prep_open_files, &g)
		 : paper_files_there(o->paper) != 0 ? -1
						      : prep_paper_read(o->paper, &prep_open_files, &g);
	int status = rc == -3 ? NCF_EXIT_UNAVAILABLE : NCF_EXIT_FAIL;
	if (rc == 0 && refuse_given_output(o, &g) != 0) {
		rc = -1;
		status = NCF_EXIT_USAGE;
	}
	cache.source_bytes = g.bytes;
	cache.source_crc = g.crc;
	t.read = t.index = ncf_now();
	if (rc == 0) {
		ncf_progress_phase(&t.prog, "protocol: the given split");
		rc = prep_protocol_run_given(&g, &cache);
	}
	prep_given_free(&g);
	t.protocol = t.oracle = ncf_now();
	long out_bytes = -1;
	if (rc == 0) {
		ncf_progress_phase(&t.prog, "writing the cache");
		rc = write_cache(o, &cache, NULL, NULL, &out_bytes);
	}
	t.write = ncf_now();
	ncf_progress_clear(&t.prog);
	if (rc == 0) {
		report_cache(o->spec ? o->spec : o->paper, &cache, &t, out_bytes);
		status = 0;
	}
	ncf_cache_free(&cache);
	return status;
}

/* Ratings (or the generator) to a cache, in memory or, when the rows
 * outgrow -S, through sorted runs on disk (spill.h), the same bytes
 * either way.  synth is set up for --synthetic, else NULL; it is freed
 * once its oracle is computed.  Returns the exit status. */
static int run_prep(const struct prep_opts *o, struct prep_synth *synth, double t0)
{
	/* the generator's users are all kept without --min-ratings: too many
	 * for the negatives is known before a rating is made */
	if (synth && o->po.min_ratings <= 1 &&
	    prep_protocol_check_size(synth->users, o->po.eval_negatives) != 0)
		return NCF_EXIT_FAIL;
	struct prep_times t = {.start = t0};
	ncf_progress_init(&t.prog, o->progress);
	struct prep_rows rows = {0};
	struct prep_spill *sp = prep_spill_attach(&rows, o->buffer);
	struct ncf_cache cache;
	memset(&cache, 0, sizeof cache);
	cache.oracle_hr = NAN;
	const char *display;
	long out_bytes = -1;
	int status = NCF_EXIT_FAIL;
	if (synth)
		ncf_progress_phase(&t.prog, "generating the synthetic ratings");
	struct prep_parse_info pi = {0};
	if (read_rows(o, synth, &rows, &cache, &display, &pi) != 0)
		goto out;
	t.read = ncf_now();
	if ((prep_spill_used(sp) ? prep_spilled(o, synth, sp, &rows, &pi, &cache, &t, &out_bytes)
				: prep_in_memory(o, synth, &rows, &pi, &cache, &t, &out_bytes)) != 0)
		goto out;
	t.write = ncf_now();
	ncf_progress_clear(&t.prog);
	report_cache(display, &cache, &t, out_bytes);
	status = 0;
out:
	ncf_progress_clear(&t.prog);
	prep_parse_info_free(&pi);
	prep_spill_free(sp);
	prep_rows_free(&rows);
	ncf_cache_free(&cache);
	return status;
}

int main(int argc, char **argv)
{
	ncf_omp_wait_init(argv);
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_synopsis = "ncf-prep [-o CACHE] [--format NAME | --columns SPEC] [--delimiter C] "
		       "[--min-ratings N] [--eval-negatives N] [--seed N] [-S SIZE] "
		       "[FILE | --synthetic SPEC [--emit-csv]] | --feature-spec FILE | --ncf-paper NAME "
		       "| --info CACHE";
	struct ncf_cli cli = {.tool = "ncf-prep", .short_opts = ":o:S:s:qvhV",
			      .long_opts = long_opts, .usage = usage};
	struct prep_opts o = {.parse = {.format = NCF_FORMAT_UNKNOWN},
			      .po = {.min_ratings = 0, .eval_negatives = 100, .seed = 1}};
	if (parse_opts(argc, argv, &o, &cli)) {
		ncf_cli_free(&cli);
		ncf_print_version(ncf_verbosity > 2, NULL);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	if (o.info) {
		ncf_cli_free(&cli);
		return run_info(argc, &o);
	}
	if (!o.buffer)
		o.buffer = memory_share(DEFAULT_BUFFER_PERCENT);
	int bad = check_opts(argc, argv, &o, &cli);
	ncf_cli_free(&cli);
	if (bad)
		return bad;
	ncf_debug("openmp threads wait: %s", ncf_omp_wait_note());
	ncf_out_cleanup_on_signals();

	double t0 = ncf_now();
	struct prep_synth synth;
	memset(&synth, 0, sizeof synth);
	if (o.synthetic && prep_synth_init(&synth, o.synthetic, o.po.seed) != 0)
		ncf_usage_error("--synthetic: '%s' is not SHAPE[xSCALE] with SHAPE one of %s and "
				"SCALE 1 to 1000",
				ncf_escape(o.synthetic, strlen(o.synthetic), 40), prep_synth_shapes());
	int status;
	if (o.synthetic && o.emit_csv) {
		status = run_emit_csv(&o, &synth, t0);
	} else if ((!o.output || !strcmp(o.output, "-")) && isatty(STDOUT_FILENO)) {
		/* fail early on a terminal, before reading a large input */
		ncf_error("refusing to write binary data to a terminal; use -o FILE or redirect "
			  "stdout");
		status = NCF_EXIT_FAIL;
	} else if (o.spec || o.paper) {
		status = run_given(&o, t0);
	} else {
		status = run_prep(&o, o.synthetic ? &synth : NULL, t0);
	}
	prep_synth_free(&synth);
	return status;
}
