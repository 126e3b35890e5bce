/*
 * ncf-infer - NVIDIA's inference benchmark, scoring of (user, item) pairs
 * and top-K recommendations from a checkpoint, export for serving.  See
 * ncf-infer(1).
 *
 * This file is the command line: options into struct infer_opts, checked,
 * the model opened (model_load.c), then one mode: --bench (bench.c),
 * --score (score.c), --recommend (recommend.c), --export (export.c).
 * Every mode but --export scores through the backend: the factorized
 * first layer is precomputed once for every user and item, and (cpu
 * backend) a pair's score does not depend on the batch it is scored in.
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
#include "lines.h"
#include "samefile.h"
#include "usage.h"

static void usage(void)
{
	printf("usage: ncf-infer --bench (-m MODEL | --random-model) [options]\n"
	       "       ncf-infer --score -m MODEL [options] [FILE]\n"
	       "       ncf-infer --recommend K -m MODEL [--exclude-seen CACHE] [options] [FILE]\n"
	       "       ncf-infer --export FILE (-m MODEL | --random-model) [options]\n"
	       "\n"
	       "  --bench                  NVIDIA's inference benchmark: throughput and latency\n"
	       "                           per batch size, as a table on stdout\n"
	       "  --score                  read 'user item' lines (original ids; separated by\n"
	       "                           spaces, tabs or a comma), write one probability each\n"
	       "  --recommend K            read user ids, write each user's K best items as\n"
	       "                           user<TAB>item<TAB>score lines, best first\n"
	       "      --export FILE        write the model as ONNX (.onnx) or as safetensors\n"
	       "                           with NVIDIA's PyTorch names (.safetensors)\n"
	       "      --export-format F    onnx or safetensors, whatever FILE is called\n"
	       "  -m, --model MODEL        a checkpoint written by ncf-train, or safetensors\n"
	       "                           with NVIDIA's state_dict names\n"
	       "      --ids CACHE          original ids from CACHE, for a model without them\n"
	       "      --random-model       (--bench, --export) NVIDIA's ml-20m sizes, random weights\n"
	       "      --exclude-seen CACHE (--recommend) leave out the user's training items\n"
	       "      --skip-unknown       write nan for unknown ids instead of failing\n"
	       "  -b, --batch-sizes LIST   (--bench) default 1024,4096,16384,65536,262144,1048576\n"
	       "      --warmup N           (--bench) untimed passes per batch size (default 10)\n"
	       "      --iterations N       (--bench) timed passes per batch size (default 190)\n"
	       "      --json               (--bench) one JSON object instead of the table\n"
	       "      --device auto|cpu|cuda  where to run (default auto)\n"
	       "      --precision P        fp32 or bf16 (a CPU needs AVX512_BF16 or AMX\n"
	       "                           for bf16); tf32 and fp16 on a GPU\n"
	       "      --amp                bf16: bf16 products, fp32 sums (NVIDIA's AMP)\n"
	       "      --threads N          CPU threads (default: all)\n"
	       "  -s, --seed N             seed of the random model and ids (default 1)\n"
	       "  -q, --quiet              less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose            print more\n"
	       "  -h, --help               show this help\n"
	       "  -V, --version            show the version\n"
	       "\n"
	       "Exit status: 0 ok, 1 failure (bad input line, unknown id, bad model), 2 usage,\n"
	       "3 device, bf16 or ONNX export unavailable.\n");
}

enum {
	OPT_BENCH = 256, OPT_SCORE, OPT_RECOMMEND, OPT_RANDOM, OPT_EXCLUDE, OPT_SKIP, OPT_WARMUP,
	OPT_ITER, OPT_JSON, OPT_EXPORT, OPT_EXPORT_FORMAT, OPT_IDS,
};

static const struct option long_opts[] = {
	{"bench", no_argument, 0, OPT_BENCH},
	{"score", no_argument, 0, OPT_SCORE},
	{"recommend", required_argument, 0, OPT_RECOMMEND},
	{"model", required_argument, 0, 'm'},
	{"random-model", no_argument, 0, OPT_RANDOM},
	{"exclude-seen", required_argument, 0, OPT_EXCLUDE},
	{"skip-unknown", no_argument, 0, OPT_SKIP},
	{"batch-sizes", required_argument, 0, 'b'},
	{"warmup", required_argument, 0, OPT_WARMUP},
	{"iterations", required_argument, 0, OPT_ITER},
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
	int mode;		/* OPT_BENCH, OPT_SCORE, OPT_RECOMMEND or OPT_EXPORT */
	int random;		/* --random-model */
	int skip;		/* --skip-unknown */
	int json;		/* --json */
	const char *model_path; /* -m */
	const char *exclude;	/* --exclude-seen */
	const char *ids_path;	/* --ids */
	const char *input;	/* FILE, NULL: stdin */
	const char *export_path, *export_format;
	enum infer_export_format efmt;
	uint32_t K;		/* --recommend K */
	int64_t sizes[64];	/* --batch-sizes */
	int nsizes, warmup, iterations;
	uint64_t seed;
	struct ncf_backend_opts bo;
};

/* A mode option: only one mode. */
static void set_mode(struct infer_opts *o, int c, const char *arg)
{
	if (o->mode && o->mode != c)
		ncf_usage_error("choose one of --bench, --score, --recommend, --export");
	o->mode = c;
	if (c == OPT_RECOMMEND)
		o->K = (uint32_t)ncf_opt_int("--recommend", arg, 1, 1000000);
	if (c == OPT_EXPORT)
		o->export_path = arg;
}

/* Every option into o; -h, -V and bad options end here.  Returns 1 when
 * -V was given. */
static int parse_opts(int argc, char **argv, struct infer_opts *o)
{
	int version = 0, c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:b:s:qvhV", long_opts, NULL)) != -1) {
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
		case 'b':
			o->nsizes = ncf_opt_int_list("--batch-sizes", optarg, o->sizes, 64, 1, 1ll << 28);
			break;
		case OPT_WARMUP:
			o->warmup = (int)ncf_opt_int("--warmup", optarg, 0, 1000000);
			break;
		case OPT_ITER:
			o->iterations = (int)ncf_opt_int("--iterations", optarg, 1, 1000000);
			break;
		case OPT_JSON:
			o->json = 1;
			break;
		case 's':
			o->seed = ncf_opt_u64("--seed", optarg);
			break;
		default:
			if (!ncf_backend_option(c, optarg, &o->bo))
				ncf_cli_common(c, argv, usage, &version);
		}
	}
	return version;
}

static int is_stdin(const char *path)
{
	return path && !strcmp(path, "-");
}

/* Which options go with which mode, and at most one input from stdin. */
static void check_mode(int argc, char **argv, struct infer_opts *o)
{
	const char *why;
	if (o->export_format && o->mode != OPT_EXPORT)
		ncf_usage_error("--export-format is for --export");
	if (o->mode == OPT_EXPORT &&
	    infer_export_format(o->export_path, o->export_format, &o->efmt, &why) != 0)
		ncf_usage_error("%s", why);
	if (o->mode == OPT_EXPORT && optind < argc)
		ncf_usage_error("--export reads no input ('%s' is extra)", argv[optind]);
	if (o->random && o->mode != OPT_BENCH && o->mode != OPT_EXPORT)
		ncf_usage_error("--random-model is for --bench and --export");
	if (o->random && o->ids_path)
		ncf_usage_error("--ids is for a model file without ids, not --random-model");
	if (o->random && o->model_path)
		ncf_usage_error("-m and --random-model exclude each other");
	if (!o->random && !o->model_path)
		ncf_usage_error("no model given (-m MODEL%s)",
				o->mode == OPT_BENCH ? " or --random-model" : "");
	if (o->exclude && o->mode != OPT_RECOMMEND)
		ncf_usage_error("--exclude-seen is for --recommend");
	if (o->mode == OPT_BENCH && optind < argc)
		ncf_usage_error("--bench reads no input ('%s' is extra)", argv[optind]);
	if (argc - optind > 1)
		ncf_usage_error("one input file at most ('%s' is extra)", argv[optind + 1]);
	o->input = optind < argc ? argv[optind] : NULL;
	int stdin_in = o->mode != OPT_BENCH && o->mode != OPT_EXPORT &&
		       (!o->input || is_stdin(o->input));
	if ((is_stdin(o->model_path) && (stdin_in || is_stdin(o->exclude))) ||
	    (is_stdin(o->exclude) && stdin_in))
		ncf_usage_error("only one of the model, --exclude-seen and the input can come from stdin");
	if (is_stdin(o->ids_path) && (stdin_in || is_stdin(o->model_path) || is_stdin(o->exclude)))
		ncf_usage_error("--ids - and another input cannot both come from stdin");
}

/* The checks of the command line.  Returns 0, NCF_EXIT_USAGE after a
 * same-file refusal, or NCF_EXIT_FAIL when --export cannot be created
 * (other usage errors exit here). */
static int check_opts(int argc, char **argv, struct infer_opts *o)
{
	if (!o->mode)
		ncf_usage_error("choose a mode: --bench, --score, --recommend K or --export FILE");
	ncf_backend_opts_finish(&o->bo);
	check_mode(argc, argv, o);
	int streams = o->mode != OPT_BENCH && o->mode != OPT_EXPORT;
	struct ncf_named files[] = {
		{.path = o->model_path, .what = "-m"},
		{.path = o->exclude, .what = "--exclude-seen"},
		{.path = o->ids_path, .what = "--ids"},
		{.path = !streams ? NULL : o->input ? o->input : "-", .what = "the input"},
		{.path = o->mode == OPT_EXPORT ? NULL : "-", .output = 1},
		{.path = o->mode == OPT_EXPORT ? o->export_path : NULL, .what = "--export",
		 .output = 1},
	};
	size_t n = sizeof files / sizeof files[0];
	if (ncf_refuse_same_file(files, n) != 0)
		return NCF_EXIT_USAGE;
	return ncf_probe_outputs(files, n) != 0 ? NCF_EXIT_FAIL : 0;
}

/* The model, its ids (--ids) and --exclude-seen's cache.  Returns 0 or -1
 * (reported). */
static int open_model(const struct infer_opts *o, struct infer_model *m, struct ncf_cache *seen)
{
	if (o->random)
		infer_model_random(m, o->seed);
	else if (infer_model_load(m, o->model_path) != 0)
		return -1;
	if (o->ids_path && infer_model_ids_from_cache(m, o->model_path, o->ids_path) != 0)
		return -1;
	if (o->exclude && infer_model_read_seen(m, o->model_path, o->exclude, seen) != 0)
		return -1;
	int needs_ids = o->mode == OPT_SCORE || o->mode == OPT_RECOMMEND ||
			(o->mode == OPT_EXPORT && o->efmt == INFER_EXPORT_ONNX);
	if (!m->user_ids && needs_ids) {
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
	struct ncf_model mf = {.shape = m->shape, .hp = m->hp, .user_ids = m->user_ids,
				    .item_ids = m->item_ids, .params = m->params};
	int rc = infer_export(&mf, o->export_path, o->efmt);
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
	ncf_info("inference benchmark: %s model (%u users, %u items), %s backend in %s, %d "
		 "thread%s, %d warm-up and %d timed passes; throughput in samples/s, "
		 "latency in seconds; pairs on the device (NVIDIA's inference.py), then "
		 "host to host (host_*)",
		 o->random ? "random ml-20m-sized" : o->model_path, m->shape.users, m->shape.items,
		 ncf_backend_name(be), ncf_precision_name(be->precision), nth, nth == 1 ? "" : "s",
		 o->warmup, o->iterations);
	return infer_bench(be, o->sizes, o->nsizes, o->warmup, o->iterations, o->json,
			       o->seed);
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
	ncf_idindex_init(&m->users, m->user_ids, m->shape.users);
	ncf_idindex_init(&m->items, m->item_ids, m->shape.items);
	int rc;
	if (o->mode == OPT_SCORE)
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
	int rc = ncf_backend_open(&be, o->bo.device, &m->shape, &m->hp, o->bo.precision,
				  o->bo.threads, &dist);
	if (rc != 0)
		return rc == -3 ? NCF_EXIT_UNAVAILABLE : NCF_EXIT_FAIL;
	rc = ncf_backend_set_state(&be, m->params, NULL, NULL);
	if (rc == 0 && o->mode == OPT_BENCH)
		rc = run_bench(o, m, &be);
	else if (rc == 0)
		rc = run_stream(o, m, &be, seen);
	ncf_backend_close(&be);
	return rc == 0 ? 0 : NCF_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_synopsis = "ncf-infer (--bench | --score | --recommend K | --export FILE) "
		       "(-m MODEL | --random-model) [options] [FILE]";
	struct infer_opts o = {.sizes = {1024, 4096, 16384, 65536, 262144, 1048576},
			       .nsizes = 6, .warmup = 10, .iterations = 190, .seed = 1,
			       .efmt = INFER_EXPORT_SAFETENSORS};
	if (parse_opts(argc, argv, &o)) {
		ncf_print_version(ncf_verbosity > 2, infer_export_describe);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	int bad = check_opts(argc, argv, &o);
	if (bad)
		return bad;
	struct infer_model m;
	struct ncf_cache seen;
	memset(&m, 0, sizeof m);
	memset(&seen, 0, sizeof seen);
	int status = NCF_EXIT_FAIL;
	if (open_model(&o, &m, &seen) == 0)
		status = o.mode == OPT_EXPORT ? run_export(&o, &m) : run_scoring(&o, &m, &seen);
	ncf_cache_free(&seen);
	infer_model_free(&m);
	if (ncf_close_stdout() != 0)
		status = NCF_EXIT_FAIL;
	return status;
}
