/*
 * ncf-train - train NeuMF on a cache, evaluate after every epoch, write
 * checkpoints.  See ncf-train(1).
 *
 * Files: -o MODEL holds the best model by HR@K (rewritten when HR@K
 * improves); --checkpoint FILE (default MODEL.last) holds the state after
 * the latest epoch, or mid-epoch after SIGINT/SIGTERM, for --resume;
 * --keep-epochs also writes MODEL.epoch-NNN after every epoch.  Every one
 * is a complete, resumable checkpoint.
 *
 * This file is the command line: options into struct train_opts, checked,
 * then the run (train.h: run.c, epoch.c, save.c, report.c).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_opts.h"
#include "cli.h"
#include "dist.h"
#include "err.h"
#include "io.h"
#include "kinds.h"
#include "model.h"
#include "omp_wait.h"
#include "samefile.h"
#include "train.h"
#include "usage.h"

static void usage(void)
{
	printf("usage: ncf-train [options] CACHE -o MODEL\n"
	       "\n"
	       "Train NeuMF on a cache made by ncf-prep; evaluate HR@K and NDCG@K after every\n"
	       "epoch; keep the best model in MODEL and the latest state in MODEL.last.\n"
	       "\n"
	       "  -o, --output MODEL           the best model by HR@K (required)\n"
	       "      --checkpoint FILE        the latest state, for --resume (default MODEL.last)\n"
	       "      --keep-epochs            also keep MODEL.epoch-NNN after every epoch\n"
	       "      --resume FILE            continue from a checkpoint, exactly\n"
	       "      --init MODEL             start a new run from a model's weights (ncf's, or\n"
	       "                               NVIDIA's safetensors): fine-tuning, with this\n"
	       "                               run's settings and a fresh optimizer\n"
	       "  -e, --epochs N               epochs in all (default 30)\n"
	       "  -b, --batch-size N           global batch (default 1048576)\n"
	       "  -f, --factors N              GMF factors (default 64)\n"
	       "      --layers A,B,...         MLP sizes, input first (default 256,256,128,64)\n"
	       "  -n, --negative-samples N     negatives per positive (default 4)\n"
	       "      --true-negatives         never draw a user's training positive as negative\n"
	       "  -l, --learning-rate X        Adam learning rate (default 0.0045)\n"
	       "      --beta1 X                (default 0.25)\n"
	       "      --beta2 X                (default 0.5)\n"
	       "      --eps X                  (default 1e-8)\n"
	       "      --dropout X              MLP dropout, 0 <= X < 1 (default 0.5)\n"
	       "  -s, --seed N                 seed of weights, samples and dropout (default 1)\n"
	       "  -t, --threshold X            stop when HR@K reaches X\n"
	       "  -k, --topk K                 K of HR@K and NDCG@K (default 10)\n"
	       "      --device auto|cpu|cuda   where to train (default auto)\n"
	       "      --precision P            fp32, tf32, bf16, fp16 (default tf32 on a GPU,\n"
	       "                               fp32 on a CPU; a CPU has fp32 and bf16)\n"
	       "      --amp                    bf16: bf16 products, fp32 sums and weights\n"
	       "      --threads N              CPU threads (default: all)\n"
	       "      --log FILE|-             one JSON object per epoch\n"
	       "      --progress               progress also when stderr is not a terminal (as\n"
	       "                               plain lines, one every 5 s at most)\n"
	       "  -q, --quiet                  less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose                print more\n"
	       "  -h, --help                   show this help\n"
	       "  -V, --version                show the version (-vV: libraries and devices)\n"
	       "\n"
	       "NVIDIA's ncf.py spellings work too (--batch_size, --learning_rate, ...), or say\n"
	       "what to give instead (ncf(7), NVIDIA'S OPTIONS).\n"
	       "\n"
	       "Exit status: 0 ok, 1 failure (bad file, NaN loss, device error), 2 usage,\n"
	       "3 device unavailable, 130/143 interrupted (state saved in --checkpoint).\n");
}

enum {
	OPT_LAYERS = 256, OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_DROPOUT, OPT_TRUENEG, OPT_RESUME,
	OPT_LOG, OPT_PROGRESS, OPT_CHECKPOINT, OPT_KEEP, OPT_INIT,
};

static const struct option long_opts[] = {
	{"output", required_argument, 0, 'o'},
	{"checkpoint", required_argument, 0, OPT_CHECKPOINT},
	{"keep-epochs", no_argument, 0, OPT_KEEP},
	{"resume", required_argument, 0, OPT_RESUME},
	{"init", required_argument, 0, OPT_INIT},
	{"epochs", required_argument, 0, 'e'},
	{"batch-size", required_argument, 0, 'b'},
	{"factors", required_argument, 0, 'f'},
	{"layers", required_argument, 0, OPT_LAYERS},
	{"negative-samples", required_argument, 0, 'n'},
	{"true-negatives", no_argument, 0, OPT_TRUENEG},
	{"learning-rate", required_argument, 0, 'l'},
	{"beta1", required_argument, 0, OPT_BETA1},
	{"beta2", required_argument, 0, OPT_BETA2},
	{"eps", required_argument, 0, OPT_EPS},
	{"dropout", required_argument, 0, OPT_DROPOUT},
	{"seed", required_argument, 0, 's'},
	{"threshold", required_argument, 0, 't'},
	{"topk", required_argument, 0, 'k'},
	{"log", required_argument, 0, OPT_LOG},
	{"progress", no_argument, 0, OPT_PROGRESS},
	NCF_BACKEND_LONGOPTS,
	NCF_COMMON_LONGOPTS,
	{0, 0, 0, 0},
};

/* NVIDIA's defaults (DESIGN.md section 3). */
static void default_opts(struct train_opts *o)
{
	memset(o, 0, sizeof *o);
	o->epochs = ncf_nvidia_epochs;
	o->topk = ncf_nvidia_topk;
	o->threshold = -1;
	ncf_shape_nvidia(&o->shape, 0, 0); /* users and items: the cache's */
	ncf_hparams_nvidia(&o->hp);
}

/* A model option: its value into o->shape or o->hp, and its bit into
 * o->given; rest: the arguments after it.  Returns 1 when c was one. */
static int model_option(int c, const char *arg, char *const *rest, struct train_opts *o)
{
	struct ncf_hparams *hp = &o->hp;
	enum train_setting k;
	switch (c) {
	case 'b':
		hp->batch = (uint64_t)ncf_opt_int("--batch-size", arg, 1, (int64_t)1 << 40);
		k = TRAIN_SET_BATCH;
		break;
	case 'f':
		o->shape.factors = (uint32_t)ncf_opt_int("--factors", arg, 1, 65536);
		k = TRAIN_SET_FACTORS;
		break;
	case OPT_LAYERS:
		o->shape.n_layers = (uint32_t)ncf_opt_layers(arg, rest, o->shape.layers,
							     NCF_MAX_LAYERS);
		k = TRAIN_SET_LAYERS;
		break;
	case 'n':
		hp->negatives = (uint32_t)ncf_opt_int("--negative-samples", arg, 0, 1000);
		k = TRAIN_SET_NEGATIVES;
		break;
	case OPT_TRUENEG:
		hp->true_neg = 1;
		k = TRAIN_SET_TRUENEG;
		break;
	case 'l':
		hp->lr = (float)ncf_opt_real("--learning-rate", arg, 0, 1, 1e30, 0);
		k = TRAIN_SET_LR;
		break;
	case OPT_BETA1:
		hp->beta1 = (float)ncf_opt_real("--beta1", arg, 0, 0, 1, 1);
		k = TRAIN_SET_BETA1;
		break;
	case OPT_BETA2:
		hp->beta2 = (float)ncf_opt_real("--beta2", arg, 0, 0, 1, 1);
		k = TRAIN_SET_BETA2;
		break;
	case OPT_EPS:
		hp->eps = (float)ncf_opt_real("--eps", arg, 0, 1, 1, 0);
		k = TRAIN_SET_EPS;
		break;
	case OPT_DROPOUT:
		hp->dropout = (float)ncf_opt_real("--dropout", arg, 0, 0, 1, 1);
		k = TRAIN_SET_DROPOUT;
		break;
	case 's':
		hp->seed = ncf_opt_u64("--seed", arg);
		k = TRAIN_SET_SEED;
		break;
	default:
		return 0;
	}
	o->given |= 1u << k;
	return 1;
}

/* -k K: one K; a list is ncf-eval's. */
static uint32_t parse_topk(const char *arg)
{
	if (strchr(arg, ','))
		ncf_usage_error("--topk takes one K, of --threshold and of the best model; for "
				"several, evaluate the model: ncf-eval -k %s -m MODEL CACHE",
				ncf_escape(arg, strlen(arg), 40));
	return (uint32_t)ncf_opt_int("--topk", arg, 1, 100000);
}

/* Every option into o; -h, -V and bad options end here.  Returns 1 when
 * -V was given. */
static int parse_opts(int argc, char **argv, struct train_opts *o, struct ncf_cli *cli)
{
	int c;
	while ((c = ncf_cli_next(cli, argc, argv)) != -1) {
		if (model_option(c, optarg, argv + optind, o))
			continue;
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case OPT_CHECKPOINT:
			o->checkpoint = optarg;
			break;
		case OPT_KEEP:
			o->keep_epochs = 1;
			break;
		case OPT_RESUME:
			o->resume = optarg;
			break;
		case OPT_INIT:
			o->init = optarg;
			break;
		case 'e':
			o->epochs = (uint32_t)ncf_opt_int("--epochs", optarg, 0, 1000000);
			break;
		case 't':
			o->threshold = ncf_opt_real("--threshold", optarg, 0, 0, 1, 0);
			break;
		case 'k':
			o->topk = parse_topk(optarg);
			o->topk_given = 1;
			break;
		case OPT_LOG:
			o->log_path = optarg;
			break;
		case OPT_PROGRESS:
			o->progress = 1;
			break;
		default:
			if (!ncf_backend_option(c, optarg, &o->bo))
				ncf_cli_common(c, cli);
		}
	}
	return cli->version;
}

/* The files of the run into f (room for TRAIN_FILES): the inputs, the
 * outputs and the epoch files of --keep-epochs.  Returns how many. */
#define TRAIN_FILES 7
static size_t train_files(const struct train_opts *o, struct ncf_named *f)
{
	struct ncf_named files[TRAIN_FILES] = {
		{.path = o->cache_path, .what = "the cache"},
		{.path = o->resume, .what = "--resume", .read_first = 1},
		{.path = o->init, .what = "--init"},
		{.path = o->output, .what = "-o", .output = 1},
		{.path = o->checkpoint, .what = "--checkpoint", .output = 1},
		{.path = o->log_path, .what = "--log", .output = 1, .appends = 1},
		{.path = o->keep_epochs ? o->output : NULL, .what = "--keep-epochs", .output = 1,
		 .series = TRAIN_EPOCH_SERIES, .series_last = o->epochs},
	};
	memcpy(f, files, sizeof files);
	return TRAIN_FILES;
}

/* The cache, --resume and --init, by what they are: a model where the
 * cache goes, a cache given to --resume or --init, ratings not made into a
 * cache yet.  Returns 0, or -1 (reported). */
static int check_kinds(const struct train_opts *o)
{
	enum ncf_kind ck = ncf_kind_of(o->cache_path), rk = ncf_kind_of(o->resume),
		      ik = ncf_kind_of(o->init);
	char name[256];
	if (ck == NCF_KIND_MODEL && rk == NCF_KIND_CACHE)
		ncf_error("the cache and --resume are swapped: ncf-train %s --resume %s -o %s",
			  o->resume, o->cache_path, o->output);
	else if ((ck == NCF_KIND_MODEL || ck == NCF_KIND_SAFETENSORS) && ik == NCF_KIND_CACHE)
		ncf_error("the cache and --init are swapped: ncf-train %s --init %s -o %s", o->init,
			  o->cache_path, o->output);
	else if (ck == NCF_KIND_MODEL)
		ncf_error("%s is %s, not a cache: to train it on, give it to --resume with the "
			  "cache it was trained on: ncf-train CACHE --resume %s -o %s; or start a "
			  "new run from its weights: ncf-train CACHE --init %s -o NEW.ncfm",
			  o->cache_path, ncf_kind_says(ck), o->cache_path, o->output, o->cache_path);
	else if (ck == NCF_KIND_SAFETENSORS)
		ncf_error("%s is %s, not a cache: to train it on, start a run from its weights: "
			  "ncf-train CACHE --init %s -o %s",
			  o->cache_path, ncf_kind_says(ck), o->cache_path, o->output);
	else if (ck == NCF_KIND_TEXT)
		ncf_error("%s is %s (ratings?), not a cache: make the cache first: ncf-prep -o %s %s",
			  o->cache_path, ncf_kind_says(ck),
			  ncf_kind_cache_name(o->cache_path, name, sizeof name), o->cache_path);
	else if (rk == NCF_KIND_CACHE)
		ncf_error("--resume: %s is %s, not a checkpoint: the cache is the operand, "
			  "--resume takes MODEL.last (or -o's MODEL)",
			  o->resume, ncf_kind_says(rk));
	else if (rk == NCF_KIND_SAFETENSORS)
		ncf_error("--resume: %s is %s, not a checkpoint written by ncf-train: to start a "
			  "run from its weights give it to --init",
			  o->resume, ncf_kind_says(rk));
	else if (rk == NCF_KIND_TEXT)
		ncf_error("--resume: %s is %s, not a checkpoint written by ncf-train", o->resume,
			  ncf_kind_says(rk));
	else if (ik == NCF_KIND_CACHE)
		ncf_error("--init: %s is %s, not a model: the cache is the operand, --init takes a "
			  "model (ncf-train's -o, or safetensors with NVIDIA's names)",
			  o->init, ncf_kind_says(ik));
	else if (ik == NCF_KIND_TEXT)
		ncf_error("--init: %s is %s, not a model (ncf-train's -o, or safetensors with "
			  "NVIDIA's names)",
			  o->init, ncf_kind_says(ik));
	else
		return 0;
	return -1;
}

/* The operands and the files: one cache, -o, --checkpoint (default
 * MODEL.last, malloc'd into *default_ckpt), no two files the same (the
 * epoch files included).  Returns 0, NCF_EXIT_USAGE after a same-file
 * refusal, or NCF_EXIT_FAIL for a file of the wrong kind (other usage
 * errors exit here). */
static int check_opts(int argc, char **argv, struct train_opts *o, const struct ncf_cli *cli,
		      char **default_ckpt)
{
	ncf_backend_opts_finish(&o->bo);
	for (int k = optind; k < argc; k++)
		ncf_cli_operand(cli, argv[k], "a cache");
	if (optind >= argc)
		ncf_usage_error("no cache given");
	if (argc - optind > 1)
		ncf_usage_error("one cache only ('%s' is extra)", argv[optind + 1]);
	if (!o->output)
		ncf_usage_error("no output model given (-o MODEL)");
	o->cache_path = argv[optind];
	if (!o->checkpoint)
		o->checkpoint = *default_ckpt = train_suffixed(o->output, ".last");
	if (o->resume && o->init)
		ncf_usage_error("--init and --resume exclude each other: --resume continues a run "
				"exactly (its settings, optimizer and place), --init starts a new run "
				"from a model's weights");
	if (o->resume && !strcmp(o->resume, "-") && !strcmp(o->cache_path, "-"))
		ncf_usage_error("the cache and --resume cannot both come from stdin");
	if (o->init && !strcmp(o->init, "-") && !strcmp(o->cache_path, "-"))
		ncf_usage_error("the cache and --init cannot both come from stdin");
	if (!strcmp(o->output, "-") || !strcmp(o->checkpoint, "-"))
		ncf_usage_error("models are files: -o and --checkpoint cannot be stdout");
	struct ncf_named files[TRAIN_FILES];
	if (ncf_refuse_same_file(files, train_files(o, files)) != 0)
		return NCF_EXIT_USAGE;
	return check_kinds(o) != 0 ? NCF_EXIT_FAIL : 0;
}

/* Can rank 0, the one that writes, create every output?  Asked before
 * the cache is read, so that a directory given as -o or a read-only
 * file system is said now and not after the first epoch.  Returns 0 or
 * -1 (reported). */
static int probe_outputs(const struct train_opts *o, const struct ncf_dist *dist)
{
	struct ncf_named files[TRAIN_FILES];
	return dist->rank == 0 ? ncf_probe_outputs(files, train_files(o, files)) : 0;
}

static void describe_versions(FILE *out)
{
	ncf_backend_describe_versions(out);
	fprintf(out, "mpi library\t%s\n", ncf_dist_library());
}

int main(int argc, char **argv)
{
	ncf_omp_wait_init(argv);
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_synopsis = "ncf-train [options] CACHE -o MODEL";
	struct train_opts o;
	default_opts(&o);
	o.argv0 = argv[0];
	struct ncf_cli cli = {.tool = "ncf-train", .short_opts = ":o:e:b:f:n:l:s:t:k:qvhV",
			      .long_opts = long_opts, .usage = usage};
	if (parse_opts(argc, argv, &o, &cli)) {
		ncf_cli_free(&cli);
		ncf_print_version(ncf_verbosity > 2, describe_versions);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	char *default_ckpt = NULL;
	int bad = check_opts(argc, argv, &o, &cli, &default_ckpt);
	ncf_cli_free(&cli);
	if (bad) {
		free(default_ckpt);
		return bad;
	}
	struct train_run r;
	memset(&r, 0, sizeof r);
	ncf_dist_on_hang(ncf_exit_hung);
	if (ncf_dist_init(&r.dist, &argc, &argv) != 0)
		return NCF_EXIT_FAIL;
	if (probe_outputs(&o, &r.dist) != 0)
		exit(ncf_dist_fail(&r.dist, NCF_EXIT_FAIL));
	if (train_open(&r, &o) != 0 || train_epochs(&r) != 0) {
		train_save_finish(&r); /* the write in flight ends first */
		exit(ncf_dist_fail(&r.dist, r.status)); /* the other ranks cannot go on */
	}
	if (train_save_finish(&r) != 0 && !r.stopped) /* no summary of a run whose state is lost */
		r.stopped = 1;
	if (!r.stopped && train_report_summary(&r) != 0)
		r.status = NCF_EXIT_FAIL;
	int status = train_close(&r, r.status);
	free(default_ckpt);
	return status;
}
