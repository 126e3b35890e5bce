/*
 * ncf-infer - NVIDIA's inference benchmark, scoring of (user, item) pairs
 * and top-K recommendations from a checkpoint, export for serving.  See
 * ncf-infer(1).
 *
 * This file is the command line: options into struct infer_opts, checked
 * against the table of which option goes with which mode (mode_options:
 * the usage text, the checks and the man page's synopsis are all read
 * from it), the model opened (model_load.c), then one mode: --bench
 * (bench.c), --score (score.c), --recommend (recommend.c), --export
 * (export.c).  Every mode but --export scores through the backend: the
 * factorized first layer is precomputed once for every user and item, and
 * (cpu backend) a pair's score does not depend on the batch it is scored
 * in.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "backend_opts.h"
#include "bench.h"
#include "cache.h"
#include "cli.h"
#include "dist.h"
#include "err.h"
#include "export.h"
#include "infer.h"
#include "io.h"
#include "kinds.h"
#include "lines.h"
#include "omp_wait.h"
#include "samefile.h"
#include "usage.h"

enum {
	OPT_BENCH = 256, OPT_SCORE, OPT_RECOMMEND, OPT_RANDOM, OPT_EXCLUDE, OPT_SKIP, OPT_WARMUP,
	OPT_ITER, OPT_JSON, OPT_EXPORT, OPT_EXPORT_FORMAT, OPT_IDS, OPT_USERS, OPT_ITEMS,
	OPT_LAYERS, OPT_NUM_BATCHES,
};

/* The modes, as bits of the table below. */
enum {
	BENCH = 1, SCORE = 2, RECOMMEND = 4, EXPORT = 8,
	BACKEND = BENCH | SCORE | RECOMMEND, /* the modes that run a backend */
	ALL = BENCH | SCORE | RECOMMEND | EXPORT,
};

/* Each mode: its option, its argument, and whether it reads an input. */
static const struct mode {
	unsigned bit;
	int opt;
	const char *name, *arg;
	int reads; /* FILE or stdin */
} modes[] = {
	{BENCH, OPT_BENCH, "--bench", NULL, 0},
	{SCORE, OPT_SCORE, "--score", NULL, 1},
	{RECOMMEND, OPT_RECOMMEND, "--recommend", "K", 1},
	{EXPORT, OPT_EXPORT, "--export", "FILE", 0},
};
#define N_MODES (int)(sizeof modes / sizeof modes[0])

/*
 * Which option goes with which mode: the one place that says it.  The
 * usage text (its synopsis and the modes each option names), the checks
 * of the command line and ncf-infer(1)'s SYNOPSIS (tests/cli/infer.t
 * compares them) all come from here.  random: the modes in which the
 * option is for --random-model only.
 */
static const struct mode_option {
	int opt;
	char short_name;      /* 0: none */
	const char *name;     /* the long option, as messages say it */
	const char *arg;      /* its argument, or NULL */
	unsigned modes;	      /* the modes it applies to */
	unsigned random;      /* ... those of them where it needs --random-model */
	const char *help;     /* for --help (wrapped there) */
} mode_options[] = {
	{'m', 'm', "--model", "MODEL", ALL, 0,
	 "a checkpoint written by ncf-train, or safetensors with NVIDIA's state_dict names"},
	{OPT_IDS, 0, "--ids", "CACHE", SCORE | RECOMMEND | EXPORT, 0,
	 "original ids from CACHE, for a model without them"},
	{OPT_RANDOM, 0, "--random-model", NULL, BENCH | EXPORT, 0,
	 "random weights, at NVIDIA's sizes unless given"},
	{OPT_USERS, 0, "--users", "N", BENCH | EXPORT, BENCH | EXPORT,
	 "users of the random model (default 138493, ml-20m's)"},
	{OPT_ITEMS, 0, "--items", "N", BENCH | EXPORT, BENCH | EXPORT,
	 "items of the random model (default 26744)"},
	{'f', 'f', "--factors", "N", BENCH | EXPORT, BENCH | EXPORT,
	 "GMF factors of the random model (default 64)"},
	{OPT_LAYERS, 0, "--layers", "A,B,...", BENCH | EXPORT, BENCH | EXPORT,
	 "MLP sizes of the random model, input first (default 256,256,128,64)"},
	{OPT_EXCLUDE, 0, "--exclude-seen", "CACHE", RECOMMEND, 0,
	 "leave out the user's training items"},
	{OPT_SKIP, 0, "--skip-unknown", NULL, SCORE | RECOMMEND, 0,
	 "write nan for unknown ids instead of failing"},
	{'b', 'b', "--batch-sizes", "LIST", BENCH, 0,
	 "batch sizes (default NVIDIA's: 1024,4096,16384,65536,262144,1048576)"},
	{OPT_WARMUP, 0, "--warmup", "N", BENCH, 0,
	 "untimed passes per batch size (default 10, at most 1 s)"},
	{OPT_ITER, 0, "--iterations", "N", BENCH, 0,
	 "timed passes per batch size (default 190, at most 3 s; given: exactly N)"},
	{OPT_NUM_BATCHES, 0, "--num_batches", "N", BENCH, 0,
	 "inference.py's: --warmup 10 --iterations N-10"},
	{OPT_JSON, 0, "--json", NULL, BENCH, 0, "one JSON object instead of the table"},
	{OPT_EXPORT_FORMAT, 0, "--export-format", "F", EXPORT, 0,
	 "onnx or safetensors, whatever FILE is called"},
	{'s', 's', "--seed", "N", BENCH | EXPORT, EXPORT,
	 "seed of the random model and of the benchmark's pairs (default 1)"},
	{NCF_OPT_DEVICE, 0, "--device", "auto|cpu|cuda", BACKEND, 0, "where to run (default auto)"},
	{NCF_OPT_PRECISION, 0, "--precision", "P", BACKEND, 0,
	 "fp32 or bf16 (a CPU needs AVX512_BF16 or AMX for bf16); tf32 and fp16 on a GPU"},
	{NCF_OPT_AMP, 0, "--amp", NULL, BACKEND, 0, "bf16: bf16 products, fp32 sums (NVIDIA's AMP)"},
	{NCF_OPT_THREADS, 0, "--threads", "N", BACKEND, 0, "CPU threads (default: all)"},
};
#define N_OPTIONS (int)(sizeof mode_options / sizeof mode_options[0])

/* "--bench", "--bench and --export", "--bench, --score and --recommend":
 * the modes of bits, into buf. */
static const char *mode_names(unsigned bits, char *buf, size_t len)
{
	int n = 0, total = 0;
	for (int k = 0; k < N_MODES; k++)
		total += (bits & modes[k].bit) != 0;
	buf[0] = 0;
	for (int k = 0; k < N_MODES; k++) {
		if (!(bits & modes[k].bit))
			continue;
		size_t used = strlen(buf);
		n++;
		snprintf(buf + used, len - used, "%s%s", n == 1 ? "" : n == total ? " and " : ", ",
			 modes[k].name);
	}
	return buf;
}

/* "--users N": an option and its argument, into buf. */
static const char *option_words(const struct mode_option *o, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
	return buf;
}

/* Mode m's synopsis: the mode, the model, its options in the table's
 * order, its input; wrapped before width columns, continuation lines
 * indented by indent. */
static void print_synopsis(FILE *out, const struct mode *m, size_t indent, size_t width)
{
	char line[1024], word[96];
	size_t col = indent;
	int n = snprintf(line, sizeof line, "ncf-infer %s%s%s %s", m->name, m->arg ? " " : "",
			 m->arg ? m->arg : "",
			 m->bit & (BENCH | EXPORT) ? "(-m MODEL | --random-model)" : "-m MODEL");
	fputs(line, out);
	col += (size_t)n;
	for (int k = 0; k < N_OPTIONS + 1; k++) {
		const struct mode_option *o = &mode_options[k < N_OPTIONS ? k : 0];
		if (k == N_OPTIONS) {
			if (!m->reads)
				break;
			snprintf(word, sizeof word, "[FILE]");
		} else if (!(o->modes & m->bit) || o->opt == 'm' || o->opt == OPT_RANDOM) {
			continue;
		} else {
			char w[80];
			snprintf(word, sizeof word, "[%s]", option_words(o, w, sizeof w));
		}
		if (col + 1 + strlen(word) > width) {
			fprintf(out, "\n%*s", (int)indent + 10, "");
			col = indent + 10;
		} else {
			fputc(' ', out);
			col++;
		}
		fputs(word, out);
		col += strlen(word);
	}
	fputc('\n', out);
}

/* An option's line of --help: its names, then the modes it goes with and
 * what it does, wrapped at column 79 under column 27. */
static void print_option(const struct mode_option *o)
{
	char left[96], w[64], text[512] = "";
	snprintf(left, sizeof left, "%c%c%s%s", o->short_name ? '-' : ' ',
		 o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ",
		 option_words(o, w, sizeof w));
	if (o->modes != ALL) {
		unsigned plain = o->modes & ~o->random;
		snprintf(text, sizeof text, "(%s%s%s) ", plain ? mode_names(plain, w, sizeof w) : "",
			 plain && o->random ? ", " : "", o->random ? "--random-model" : "");
	}
	size_t used = strlen(text);
	snprintf(text + used, sizeof text - used, "%s", o->help);
	printf("  %-24s", left);
	size_t col = 26;
	if (strlen(left) > 24)
		printf("\n%26s", "");
	/* words of text, each after a space or at the start of a line */
	for (const char *p = text; *p;) {
		size_t len = strcspn(p, " ");
		if (col + 1 + len > 79 && col > 26) {
			printf("\n%26s", "");
			col = 26;
		}
		printf(" %.*s", (int)len, p);
		col += 1 + len;
		p += len;
		p += strspn(p, " ");
	}
	putchar('\n');
}

static void usage(void)
{
	for (int k = 0; k < N_MODES; k++) {
		fputs(k ? "       " : "usage: ", stdout);
		print_synopsis(stdout, &modes[k], 7, 79);
	}
	printf("\n"
	       "  --bench                  NVIDIA's inference benchmark: throughput and latency\n"
	       "                           per batch size, as a table on stdout\n"
	       "  --score                  read 'user item' lines (original ids; separated by\n"
	       "                           spaces, tabs or a comma), write one probability each\n"
	       "  --recommend K            read user ids, write each user's K best items as\n"
	       "                           user<TAB>item<TAB>score lines, best first\n"
	       "  --export FILE            write the model as ONNX (.onnx) or as safetensors\n"
	       "                           with NVIDIA's PyTorch names (.safetensors)\n"
	       "\n"
	       "Options, with the modes they go with:\n");
	for (int k = 0; k < N_OPTIONS; k++)
		print_option(&mode_options[k]);
	printf("  -q, --quiet              less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose            print more\n"
	       "  -h, --help               show this help\n"
	       "  -V, --version            show the version\n"
	       "\n"
	       "NVIDIA's inference.py spellings work too (--batch_sizes, --n_users, --fp16, ...),\n"
	       "or say what to give instead (ncf(7), NVIDIA'S OPTIONS).\n"
	       "\n"
	       "Exit status: 0 ok, 1 failure (bad input line, unknown id, bad model), 2 usage,\n"
	       "3 device, bf16 or ONNX export unavailable.\n");
}

static const struct option long_opts[] = {
	{"bench", no_argument, 0, OPT_BENCH},
	{"score", no_argument, 0, OPT_SCORE},
	{"recommend", required_argument, 0, OPT_RECOMMEND},
	{"model", required_argument, 0, 'm'},
	{"random-model", no_argument, 0, OPT_RANDOM},
	{"users", required_argument, 0, OPT_USERS},
	{"items", required_argument, 0, OPT_ITEMS},
	{"factors", required_argument, 0, 'f'},
	{"layers", required_argument, 0, OPT_LAYERS},
	{"exclude-seen", required_argument, 0, OPT_EXCLUDE},
	{"skip-unknown", no_argument, 0, OPT_SKIP},
	{"batch-sizes", required_argument, 0, 'b'},
	{"warmup", required_argument, 0, OPT_WARMUP},
	{"iterations", required_argument, 0, OPT_ITER},
	{"num_batches", required_argument, 0, OPT_NUM_BATCHES},
	{"json", no_argument, 0, OPT_JSON},
	{"export", required_argument, 0, OPT_EXPORT},
	{"export-format", required_argument, 0, OPT_EXPORT_FORMAT},
	{"ids", required_argument, 0, OPT_IDS},
	{"seed", required_argument, 0, 's'},
	NCF_BACKEND_LONGOPTS,
	NCF_COMMON_LONGOPTS,
	{0, 0, 0, 0},
};

/* The command line. */
struct infer_opts {
	unsigned mode;		/* BENCH, SCORE, RECOMMEND or EXPORT */
	int random;		/* --random-model */
	int skip;		/* --skip-unknown */
	const char *model_path; /* -m */
	const char *exclude;	/* --exclude-seen */
	const char *ids_path;	/* --ids */
	const char *input;	/* FILE, NULL: stdin */
	const char *export_path, *export_format;
	enum infer_export_format efmt;
	uint32_t K;		/* --recommend K */
	struct ncf_shape shape; /* --random-model's (users, items, factors, layers) */
	struct infer_bench_opts bench;
	int num_batches;	/* --num_batches N, 0: not given */
	char given[N_OPTIONS];	/* the options of mode_options given */
	struct ncf_backend_opts bo;
};

/* A mode option: only one mode. */
static void set_mode(struct infer_opts *o, int c, const char *arg)
{
	unsigned bit = 0;
	for (int k = 0; k < N_MODES; k++)
		if (modes[k].opt == c)
			bit = modes[k].bit;
	if (o->mode && o->mode != bit)
		ncf_usage_error("choose one of --bench, --score, --recommend, --export");
	o->mode = bit;
	if (c == OPT_RECOMMEND)
		o->K = (uint32_t)ncf_opt_int("--recommend", arg, 1, 1000000);
	if (c == OPT_EXPORT)
		o->export_path = arg;
}

/* A benchmark or random-model option into o.  Returns 1 when c was one. */
static int bench_option(int c, const char *arg, char *const *rest, struct infer_opts *o)
{
	struct infer_bench_opts *b = &o->bench;
	switch (c) {
	case 'b':
		b->nsizes = ncf_opt_int_list("--batch-sizes", arg, b->sizes, INFER_BENCH_MAX_SIZES, 1,
					     1ll << 28);
		return 1;
	case OPT_WARMUP:
		b->warmup = (int)ncf_opt_int("--warmup", arg, 0, 1000000);
		return 1;
	case OPT_ITER:
		b->iterations = (int)ncf_opt_int("--iterations", arg, 1, 1000000);
		return 1;
	case OPT_NUM_BATCHES:
		o->num_batches = (int)ncf_opt_int("--num_batches", arg, 11, 1000000);
		return 1;
	case OPT_USERS:
		o->shape.users = (uint32_t)ncf_opt_int("--users", arg, 1, UINT32_MAX - 1);
		return 1;
	case OPT_ITEMS:
		o->shape.items = (uint32_t)ncf_opt_int("--items", arg, 1, UINT32_MAX - 1);
		return 1;
	case 'f':
		o->shape.factors = (uint32_t)ncf_opt_int("--factors", arg, 1, 65536);
		return 1;
	case OPT_LAYERS:
		o->shape.n_layers = (uint32_t)ncf_opt_layers(arg, rest, o->shape.layers,
							     NCF_MAX_LAYERS);
		return 1;
	case 's':
		b->seed = ncf_opt_u64("--seed", arg);
		return 1;
	default:
		return 0;
	}
}

/* Every option into o; -h, -V and bad options end here.  Returns 1 when
 * -V was given. */
static int parse_opts(int argc, char **argv, struct infer_opts *o, struct ncf_cli *cli)
{
	int c;
	while ((c = ncf_cli_next(cli, argc, argv)) != -1) {
		for (int k = 0; k < N_OPTIONS; k++)
			if (mode_options[k].opt == c)
				o->given[k] = 1;
		if (bench_option(c, optarg, argv + optind, o))
			continue;
		switch (c) {
		case OPT_BENCH:
		case OPT_SCORE:
		case OPT_RECOMMEND:
		case OPT_EXPORT:
			set_mode(o, c, optarg);
			break;
		case OPT_EXPORT_FORMAT:
			o->export_format = optarg;
			break;
		case OPT_IDS:
			o->ids_path = optarg;
			break;
		case 'm':
			o->model_path = optarg;
			break;
		case OPT_RANDOM:
			o->random = 1;
			break;
		case OPT_EXCLUDE:
			o->exclude = optarg;
			break;
		case OPT_SKIP:
			o->skip = 1;
			break;
		case OPT_JSON:
			o->bench.json = 1;
			break;
		default:
			if (!ncf_backend_option(c, optarg, &o->bo))
				ncf_cli_common(c, cli);
		}
	}
	return cli->version;
}

static int is_stdin(const char *path)
{
	return path && !strcmp(path, "-");
}

/* Each option given against the table: the modes it goes with, and
 * --random-model where it needs it. */
static void check_table(const struct infer_opts *o)
{
	char names[128];
	for (int k = 0; k < N_OPTIONS; k++) {
		const struct mode_option *t = &mode_options[k];
		if (!o->given[k])
			continue;
		if (!(t->modes & o->mode))
			ncf_usage_error("%s is for %s", t->name, mode_names(t->modes, names, sizeof names));
		if ((t->random & o->mode) && !o->random)
			ncf_usage_error("%s is for --random-model", t->name);
	}
}

/* The model: a file or --random-model (where the mode allows it), and
 * the options that go with each. */
static void check_model(const struct infer_opts *o)
{
	if (o->random && o->ids_path)
		ncf_usage_error("--ids is for a model file without ids, not --random-model");
	if (o->random && o->model_path)
		ncf_usage_error("-m and --random-model exclude each other");
	if (!o->random && !o->model_path)
		ncf_usage_error("no model given (-m MODEL%s)",
				o->mode & (BENCH | EXPORT) ? " or --random-model" : "");
}

/* The input: none for --bench and --export, at most one file for the
 * others, and at most one of the inputs from stdin. */
static void check_inputs(int argc, char **argv, struct infer_opts *o, const struct ncf_cli *cli)
{
	int reads = o->mode == SCORE || o->mode == RECOMMEND;
	for (int k = optind; k < argc; k++)
		ncf_cli_operand(cli, argv[k], "an input file");
	if (!reads && optind < argc)
		ncf_usage_error("%s reads no input ('%s' is extra)",
				o->mode == BENCH ? "--bench" : "--export", argv[optind]);
	if (argc - optind > 1)
		ncf_usage_error("one input file at most ('%s' is extra)", argv[optind + 1]);
	o->input = optind < argc ? argv[optind] : NULL;
	int stdin_in = reads && (!o->input || is_stdin(o->input));
	if ((is_stdin(o->model_path) && (stdin_in || is_stdin(o->exclude))) ||
	    (is_stdin(o->exclude) && stdin_in))
		ncf_usage_error("only one of the model, --exclude-seen and the input can come from stdin");
	if (is_stdin(o->ids_path) && (stdin_in || is_stdin(o->model_path) || is_stdin(o->exclude)))
		ncf_usage_error("--ids - and another input cannot both come from stdin");
}

/* A model where a cache goes (--ids, --exclude-seen)? */
static int is_model(enum ncf_kind k)
{
	return k == NCF_KIND_MODEL || k == NCF_KIND_SAFETENSORS;
}

/* The model and the caches by what they are: a cache given as -m, a model
 * given as --ids or --exclude-seen, the two swapped.  Returns 0, or -1
 * (reported). */
static int check_model_kinds(const struct infer_opts *o)
{
	enum ncf_kind mk = ncf_kind_of(o->model_path);
	int ids_model = is_model(ncf_kind_of(o->ids_path));
	const char *opt = ids_model ? "--ids" : "--exclude-seen";
	const char *path = ids_model ? o->ids_path : o->exclude;
	int cache_model = ids_model || is_model(ncf_kind_of(o->exclude));
	if (mk == NCF_KIND_CACHE && cache_model)
		ncf_error("-m and %s are swapped: -m takes the model (%s), %s the cache (%s)", opt,
			  path, opt, o->model_path);
	else if (mk == NCF_KIND_CACHE)
		ncf_error("-m: %s is %s, not a model: -m takes the model ncf-train wrote (its -o)",
			  o->model_path, ncf_kind_says(mk));
	else if (cache_model)
		ncf_error("%s: %s is %s, not a cache: give the cache the model was trained on", opt,
			  path, ncf_kind_says(ncf_kind_of(path)));
	else
		return 0;
	return -1;
}

/* The input of --score and --recommend by what it is: text, not an ncf
 * file.  Returns 0, or -1 (reported). */
static int check_input_kind(const struct infer_opts *o)
{
	enum ncf_kind k = ncf_kind_of(o->input);
	if ((o->mode != SCORE && o->mode != RECOMMEND) ||
	    (k != NCF_KIND_CACHE && !is_model(k)))
		return 0;
	ncf_error("%s is %s, not the input: %s reads %s (to evaluate on a cache: ncf-eval -m "
		  "MODEL CACHE)",
		  o->input, ncf_kind_says(k), o->mode == SCORE ? "--score" : "--recommend",
		  o->mode == SCORE ? "'user item' lines" : "user ids, one per line");
	return -1;
}

/* --num_batches N is inference.py's count: 10 warm-up passes, then the
 * rest timed; not beside --warmup or --iterations. */
static void check_passes(struct infer_opts *o)
{
	struct infer_bench_opts *b = &o->bench;
	int counted = b->warmup >= 0 || b->iterations > 0;
	if (o->num_batches && counted)
		ncf_usage_error("--num_batches N is --warmup 10 --iterations N-10: give one or the "
				"other");
	if (o->num_batches) {
		b->warmup = 10;
		b->iterations = o->num_batches - 10;
	}
}

/* The checks of the command line.  Returns 0, NCF_EXIT_USAGE after a
 * same-file refusal, or NCF_EXIT_FAIL when --export cannot be created or
 * a file is of the wrong kind (other usage errors exit here). */
static int check_opts(int argc, char **argv, struct infer_opts *o, const struct ncf_cli *cli)
{
	const char *why;
	if (!o->mode)
		ncf_usage_error("choose a mode: --bench, --score, --recommend K or --export FILE");
	ncf_backend_opts_finish(&o->bo);
	check_table(o);
	if (o->mode == EXPORT &&
	    infer_export_format(o->export_path, o->export_format, &o->efmt, &why) != 0)
		ncf_usage_error("%s", why);
	check_model(o);
	check_inputs(argc, argv, o, cli);
	check_passes(o);
	if (o->random && (why = ncf_shape_check(&o->shape)) != NULL)
		ncf_usage_error("--random-model: %s", why);
	int streams = o->mode == SCORE || o->mode == RECOMMEND;
	struct ncf_named files[] = {
		{.path = o->model_path, .what = "-m"},
		{.path = o->exclude, .what = "--exclude-seen"},
		{.path = o->ids_path, .what = "--ids"},
		{.path = !streams ? NULL : o->input ? o->input : "-", .what = "the input"},
		{.path = o->mode == EXPORT ? NULL : "-", .output = 1},
		{.path = o->mode == EXPORT ? o->export_path : NULL, .what = "--export", .output = 1},
	};
	size_t n = sizeof files / sizeof files[0];
	if (ncf_refuse_same_file(files, n) != 0)
		return NCF_EXIT_USAGE;
	if (check_model_kinds(o) != 0 || check_input_kind(o) != 0)
		return NCF_EXIT_FAIL;
	return ncf_probe_outputs(files, n) != 0 ? NCF_EXIT_FAIL : 0;
}

/* The model, its ids (--ids) and --exclude-seen's cache.  Returns 0 or -1
 * (reported). */
static int open_model(const struct infer_opts *o, struct infer_model *m, struct ncf_cache *seen)
{
	if (o->random)
		infer_model_random(m, &o->shape, o->bench.seed);
	else if (infer_model_load(m, o->model_path) != 0)
		return -1;
	if (o->ids_path && infer_model_ids_from_cache(m, o->model_path, o->ids_path) != 0)
		return -1;
	if (o->exclude && infer_model_read_seen(m, o->model_path, o->exclude, seen) != 0)
		return -1;
	int needs_ids = o->mode == SCORE || o->mode == RECOMMEND ||
			(o->mode == EXPORT && o->efmt == INFER_EXPORT_ONNX);
	if (!m->model.user_ids && needs_ids) {
		ncf_error("%s has no original ids (a state_dict converted from NVIDIA's checkpoint?); "
			  "give the cache it was trained on with --ids CACHE",
			  o->model_path);
		return -1;
	}
	return 0;
}

/* --export.  Returns the exit status. */
static int run_export(const struct infer_opts *o, const struct infer_model *m)
{
	ncf_out_cleanup_on_signals();
	int rc = infer_export(&m->model, o->export_path, o->efmt);
	return rc == -3 ? NCF_EXIT_UNAVAILABLE : rc != 0 ? NCF_EXIT_FAIL : 0;
}

/* --bench.  Returns 0 or -1. */
static int run_bench(const struct infer_opts *o, const struct infer_model *m,
		     struct ncf_backend *be)
{
	int nth = 1;
#ifdef _OPENMP
	nth = omp_get_max_threads();
#endif
	char passes[160], what[64];
	infer_bench_describe(be, &o->bench, passes, sizeof passes);
	const struct ncf_shape *s = &m->model.shape;
	int nvidia_sized = s->users == INFER_RANDOM_USERS && s->items == INFER_RANDOM_ITEMS;
	snprintf(what, sizeof what, "random%s", nvidia_sized ? " ml-20m-sized" : "");
	ncf_info("inference benchmark: %s model (%u users, %u items), %s backend in %s, %d "
		 "thread%s, %s; throughput in samples/s, latency in seconds",
		 o->random ? what : o->model_path, s->users, s->items, ncf_backend_name(be),
		 ncf_precision_name(be->precision), nth, nth == 1 ? "" : "s", passes);
	return infer_bench(be, &o->bench);
}

/* --score or --recommend over the input.  Returns 0 or -1. */
static int run_stream(const struct infer_opts *o, struct infer_model *m, struct ncf_backend *be,
		      const struct ncf_cache *seen)
{
	const char *display;
	FILE *in = ncf_in_open(o->input, &display);
	if (!in)
		return -1;
	struct ncf_lines l;
	ncf_lines_init(&l, fileno(in), display, 0);
	const struct ncf_model *mm = &m->model;
	ncf_idindex_init_ids(&m->users, mm->user_ids, &mm->user_names, mm->shape.users);
	ncf_idindex_init_ids(&m->items, mm->item_ids, &mm->item_names, mm->shape.items);
	int rc;
	if (o->mode == SCORE)
		rc = infer_score(be, m, &l, o->skip);
	else
		rc = infer_recommend(be, m, &l, o->K, o->exclude ? seen : NULL, o->skip);
	ncf_lines_free(&l);
	ncf_in_close(in);
	return rc;
}

/* The backend with m's parameters, then the mode.  Returns the exit
 * status. */
static int run_scoring(const struct infer_opts *o, struct infer_model *m,
		       const struct ncf_cache *seen)
{
	struct ncf_backend be;
	struct ncf_dist dist = {.rank = 0, .size = 1, .local_size = 1};
	int rc = ncf_backend_open(&be, o->bo.device, &m->model.shape, &m->model.hp, o->bo.precision,
				  o->bo.threads, &dist);
	if (rc != 0)
		return rc == -3 ? NCF_EXIT_UNAVAILABLE : NCF_EXIT_FAIL;
	rc = ncf_backend_set_state(&be, m->model.params, NULL, NULL);
	if (rc == 0 && o->mode == BENCH)
		rc = run_bench(o, m, &be);
	else if (rc == 0)
		rc = run_stream(o, m, &be, seen);
	ncf_backend_close(&be);
	return rc == 0 ? 0 : NCF_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	ncf_omp_wait_init(argv);
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_synopsis = "ncf-infer (--bench | --score | --recommend K | --export FILE) "
		       "(-m MODEL | --random-model) [options] [FILE]";
	struct infer_opts o = {.efmt = INFER_EXPORT_SAFETENSORS};
	infer_bench_defaults(&o.bench);
	ncf_shape_nvidia(&o.shape, INFER_RANDOM_USERS, INFER_RANDOM_ITEMS);
	struct ncf_cli cli = {.tool = "ncf-infer", .short_opts = ":m:b:s:f:qvhV",
			      .long_opts = long_opts, .usage = usage};
	if (parse_opts(argc, argv, &o, &cli)) {
		ncf_cli_free(&cli);
		ncf_print_version(ncf_verbosity > 2, infer_export_describe);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	int bad = check_opts(argc, argv, &o, &cli);
	ncf_cli_free(&cli);
	if (bad)
		return bad;
	ncf_debug("openmp threads wait: %s", ncf_omp_wait_note());
	struct infer_model m;
	struct ncf_cache seen;
	memset(&m, 0, sizeof m);
	memset(&seen, 0, sizeof seen);
	int status = NCF_EXIT_FAIL;
	if (open_model(&o, &m, &seen) == 0)
		status = o.mode == EXPORT ? run_export(&o, &m) : run_scoring(&o, &m, &seen);
	ncf_cache_free(&seen);
	infer_model_free(&m);
	if (ncf_close_stdout() != 0)
		status = NCF_EXIT_FAIL;
	return status;
}
