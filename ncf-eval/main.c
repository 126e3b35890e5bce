/*
 * ncf-eval - HR@K and NDCG@K of a model (or of the popularity ranking) on a
 * cache's evaluation candidates.  See ncf-eval(1).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_opts.h"
#include "cache.h"
#include "ckpt.h"
#include "cli.h"
#include "dist.h"
#include "err.h"
#include "evaluate.h"
#include "io.h"
#include "kinds.h"
#include "metrics.h"
#include "model_file.h"
#include "omp_wait.h"
#include "samefile.h"
#include "usage.h"

static void usage(void)
{
	printf("usage: ncf-eval -m MODEL [options] CACHE\n"
	       "       ncf-eval --baseline popularity [options] CACHE\n"
	       "\n"
	       "Rank each user's test item among its evaluation negatives and print HR@K,\n"
	       "NDCG@K and the number of users as key<TAB>value lines.\n"
	       "\n"
	       "  -m, --model MODEL        a checkpoint written by ncf-train, or safetensors\n"
	       "                           with NVIDIA's state_dict names\n"
	       "      --baseline popularity  rank items by their training count instead\n"
	       "  -k, --topk K[,K...]      K of HR@K and NDCG@K (default 10); several: a pair\n"
	       "                           of lines (or JSON keys) per K\n"
	       "      --json               print one JSON object instead\n"
	       "      --scores FILE|-      also write every candidate's probability as\n"
	       "                           user<TAB>item<TAB>score lines (original ids)\n"
	       "      --device auto|cpu|cuda  where to score (default auto)\n"
	       "      --precision P        fp32 or bf16 (a CPU needs AVX512_BF16 or AMX\n"
	       "                           for bf16); tf32 and fp16 on a GPU\n"
	       "      --amp                bf16: bf16 products, fp32 sums (NVIDIA's AMP)\n"
	       "      --threads N          CPU threads (default: all)\n"
	       "  -q, --quiet              less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose            print timings\n"
	       "  -h, --help               show this help\n"
	       "  -V, --version            show the version\n"
	       "\n"
	       "NVIDIA's ncf.py --mode test spellings work too (--load_checkpoint_path), or say\n"
	       "what to give instead (ncf(7), NVIDIA'S OPTIONS).\n"
	       "\n"
	       "Exit status: 0 ok, 1 failure (bad file, model and cache do not match), 2 usage,\n"
	       "3 device or bf16 unavailable.\n");
}

enum { OPT_BASELINE = 256, OPT_JSON, OPT_SCORES };

/* Write "user<TAB>item<TAB>probability" for every candidate of every user
 * (the test item first, then the negatives as drawn or given), ids as
 * the cache has them.  Returns 0 or -1. */
static int write_scores(struct ncf_backend *be, const struct ncf_cache *c, const char *path)
{
	struct ncf_out o;
	if (ncf_out_open(&o, path, 0) != 0)
		return -1;
	uint32_t per = c->eval_negatives + 1, block = 1024;
	size_t cap = (size_t)block * per;
	uint32_t *u = ncf_xmalloc(cap * sizeof *u), *it = ncf_xmalloc(cap * sizeof *it);
	float *p = ncf_xmalloc(cap * sizeof *p);
	int rc = 0;
	for (uint32_t u0 = 0; u0 < c->users && rc == 0; u0 += block) {
		uint32_t u1 = u0 + block < c->users ? u0 + block : c->users;
		size_t n = 0;
		for (uint32_t x = u0; x < u1; x++) {
			u[n] = x;
			it[n++] = c->test_items[x];
			for (uint32_t k = 0; k < c->eval_negatives; k++) {
				u[n] = x;
				it[n++] = c->eval_neg[(size_t)x * c->eval_negatives + k];
			}
		}
		if (ncf_backend_score(be, u, it, n, p) != 0) {
			rc = -1;
			break;
		}
		for (size_t j = 0; j < n; j++) { /* the original ids, numbers or names */
			ncf_id_print(o.fp, ncf_cache_user_id(c, u[j]));
			fputc('\t', o.fp);
			ncf_id_print(o.fp, ncf_cache_item_id(c, it[j]));
			fprintf(o.fp, "\t%.9g\n", p[j]);
		}
	}
	free(u), free(it), free(p);
	return ncf_out_end(&o, rc);
}

/* Ranks of every user under the popularity ranking: candidates scored by
 * their number of training positives. */
static void popularity_ranks(const struct ncf_cache *c, const uint8_t *mask, uint32_t *ranks)
{
	float *pop = ncf_xcalloc(c->items, sizeof *pop);
	for (int64_t k = 0; k < c->train_positives; k++)
		pop[c->train_items[k]] += 1.0f;
	uint32_t N = c->eval_negatives;
#pragma omp parallel
	{
		float *sc = ncf_xmalloc(((size_t)N + 1) * sizeof *sc);
#pragma omp for schedule(static)
		for (int64_t u = 0; u < (int64_t)c->users; u++) {
			for (uint32_t k = 0; k < N; k++)
				sc[k] = pop[c->eval_neg[(size_t)u * N + k]];
			ranks[u] = ncf_rank(pop[c->test_items[u]], sc, mask + (size_t)u * N, N);
		}
		free(sc);
	}
	free(pop);
}

/* The metrics, a pair per K, then the users (and the planted oracle of a
 * synthetic cache), as key<TAB>value lines or one JSON object. */
static void print_metrics(const struct ncf_cache *c, const uint32_t *ks, int nk, const double *hr,
			  const double *ndcg, int json)
{
	for (int k = 0; k < nk; k++)
		if (json)
			printf("%s\"hr@%u\": %.6f, \"ndcg@%u\": %.6f", k ? ", " : "{", ks[k], hr[k],
			       ks[k], ndcg[k]);
		else
			printf("hr@%u\t%.6f\nndcg@%u\t%.6f\n", ks[k], hr[k], ks[k], ndcg[k]);
	if (json) {
		printf(", \"users\": %u", c->users);
		if (!isnan(c->oracle_hr))
			printf(", \"oracle_hr@10\": %.6f", c->oracle_hr);
		printf("}\n");
	} else {
		printf("users\t%u\n", c->users);
		if (!isnan(c->oracle_hr))
			printf("oracle_hr@10\t%.6f\n", c->oracle_hr);
	}
}

static const struct option long_opts[] = {
	{"model", required_argument, 0, 'm'},
	{"baseline", required_argument, 0, OPT_BASELINE},
	{"topk", required_argument, 0, 'k'},
	{"json", no_argument, 0, OPT_JSON},
	{"scores", required_argument, 0, OPT_SCORES},
	NCF_BACKEND_LONGOPTS,
	NCF_COMMON_LONGOPTS,
	{0, 0, 0, 0},
};

/* The most K of one run. */
#define EVAL_MAX_K 32

/* The command line. */
struct eval_opts {
	const char *model;	/* -m */
	const char *baseline;	/* --baseline popularity */
	const char *scores;	/* --scores FILE */
	const char *cache_path; /* CACHE */
	uint32_t topk[EVAL_MAX_K];
	int nk;			/* how many K */
	int topk_given;		/* -k was given */
	int json;
	struct ncf_backend_opts bo;
};

/* Every option into o; -h, -V and bad options end here.  Returns 1 when
 * -V was given. */
static int parse_opts(int argc, char **argv, struct eval_opts *o, struct ncf_cli *cli)
{
	int c;
	int64_t ks[EVAL_MAX_K];
	while ((c = ncf_cli_next(cli, argc, argv)) != -1) {
		switch (c) {
		case 'm':
			o->model = optarg;
			break;
		case OPT_BASELINE:
			if (strcmp(optarg, "popularity") != 0)
				ncf_usage_error("--baseline: '%s' is not a baseline (popularity)",
						ncf_escape(optarg, strlen(optarg), 40));
			o->baseline = optarg;
			break;
		case 'k':
			o->nk = ncf_opt_int_list("--topk", optarg, ks, EVAL_MAX_K, 1, 100000);
			for (int k = 0; k < o->nk; k++)
				o->topk[k] = (uint32_t)ks[k];
			o->topk_given = 1;
			break;
		case OPT_JSON:
			o->json = 1;
			break;
		case OPT_SCORES:
			o->scores = optarg;
			break;
		default:
			if (!ncf_backend_option(c, optarg, &o->bo))
				ncf_cli_common(c, cli);
		}
	}
	return cli->version;
}

/* The files of the run into f (room for EVAL_FILES).  Returns how many. */
#define EVAL_FILES 4
static size_t eval_files(const struct eval_opts *o, struct ncf_named *f)
{
	struct ncf_named files[EVAL_FILES] = {
		{.path = o->cache_path, .what = "the cache"},
		{.path = o->model, .what = "-m"},
		{.path = o->scores, .what = "--scores", .output = 1},
		{.path = "-", .output = 1},
	};
	memcpy(f, files, sizeof files);
	return EVAL_FILES;
}

/* The model and the cache, by what they are: swapped, or one where the
 * other goes, or ratings not made into a cache yet.  Returns 0, or -1
 * (reported). */
static int check_kinds(const struct eval_opts *o)
{
	enum ncf_kind mk = ncf_kind_of(o->model), ck = ncf_kind_of(o->cache_path);
	int cache_is_model = ck == NCF_KIND_MODEL || ck == NCF_KIND_SAFETENSORS;
	char name[256];
	if (cache_is_model && mk == NCF_KIND_CACHE)
		ncf_error("the model and the cache are swapped: ncf-eval -m %s %s", o->cache_path,
			  o->model);
	else if (cache_is_model)
		ncf_error("%s is %s, not a cache: the cache, the operand, is the one the model "
			  "was trained on: ncf-eval -m %s CACHE",
			  o->cache_path, ncf_kind_says(ck), o->model ? o->model : o->cache_path);
	else if (ck == NCF_KIND_TEXT)
		ncf_error("%s is %s (ratings?), not a cache: make the cache first: ncf-prep -o %s %s",
			  o->cache_path, ncf_kind_says(ck),
			  ncf_kind_cache_name(o->cache_path, name, sizeof name), o->cache_path);
	else if (mk == NCF_KIND_CACHE)
		ncf_error("-m: %s is %s, not a model: the cache is the operand, and -m takes the "
			  "model ncf-train wrote (its -o)",
			  o->model, ncf_kind_says(mk));
	else if (mk == NCF_KIND_TEXT)
		ncf_error("-m: %s is %s, not a model (a checkpoint ncf-train wrote, or safetensors)",
			  o->model, ncf_kind_says(mk));
	else
		return 0;
	return -1;
}

/* The operands and the files.  Returns 0, NCF_EXIT_USAGE after a
 * same-file refusal, or NCF_EXIT_FAIL for a file of the wrong kind (other
 * usage errors exit here). */
static int check_opts(int argc, char **argv, struct eval_opts *o, const struct ncf_cli *cli)
{
	ncf_backend_opts_finish(&o->bo);
	if (!o->model && !o->baseline)
		ncf_usage_error("give a model (-m MODEL) or --baseline popularity");
	if (o->model && o->baseline)
		ncf_usage_error("-m and --baseline exclude each other");
	if (o->scores && !o->model)
		ncf_usage_error("--scores needs a model (-m MODEL)");
	for (int k = optind; k < argc; k++)
		ncf_cli_operand(cli, argv[k], "a cache");
	if (optind >= argc)
		ncf_usage_error("no cache given");
	if (argc - optind > 1)
		ncf_usage_error("one cache only ('%s' is extra)", argv[optind + 1]);
	o->cache_path = argv[optind];
	if (o->model && !strcmp(o->model, "-") && !strcmp(o->cache_path, "-"))
		ncf_usage_error("the model and the cache cannot both come from stdin");
	struct ncf_named files[EVAL_FILES];
	if (ncf_refuse_same_file(files, eval_files(o, files)) != 0)
		return NCF_EXIT_USAGE;
	return check_kinds(o) != 0 ? NCF_EXIT_FAIL : 0;
}

/* Every K given must be below the cache's candidates per user
 * (ncf_topk_refuse).  Returns 0, or -1 (reported). */
static int check_topk(const struct eval_opts *o, const struct ncf_cache *c)
{
	for (int k = 0; k < o->nk; k++)
		if (ncf_topk_refuse(o->topk[k], o->topk_given, o->cache_path, c) != 0)
			return -1;
	return 0;
}

/* The default K is not refused (a cache of few negatives is evaluated as
 * before), nor a K of a given split's, but beside the metrics the first
 * such K is said to mean nothing. */
static void warn_topk(const struct eval_opts *o, const struct ncf_cache *c)
{
	for (int k = 0; k < o->nk; k++)
		if (ncf_topk_warn(o->topk[k], o->topk_given, o->cache_path, c))
			return;
}

/* Can rank 0, the one that writes, create --scores?  Asked before the
 * cache is read and the model evaluated.  Returns 0 or -1 (reported). */
static int probe_outputs(const struct eval_opts *o, const struct ncf_dist *dist)
{
	struct ncf_named files[EVAL_FILES];
	return dist->rank == 0 ? ncf_probe_outputs(files, eval_files(o, files)) : 0;
}

/* --baseline popularity: HR@K and NDCG@K of ranking by training count,
 * for each of o's K. */
static void eval_popularity(const struct eval_opts *o, const struct ncf_cache *c, double *hr,
			    double *ndcg)
{
	uint8_t *mask =
		ncf_eval_mask(c->test_items, c->eval_neg, c->users, c->eval_negatives, c->items);
	uint32_t *ranks = ncf_xmalloc((size_t)c->users * sizeof *ranks);
	popularity_ranks(c, mask, ranks);
	for (int k = 0; k < o->nk; k++)
		ncf_metrics_from_ranks(ranks, c->users, o->topk[k], &hr[k], &ndcg[k]);
	free(ranks);
	free(mask);
}

/* -m MODEL, which must belong to the cache.  Returns 0 or -1 (reported). */
static int read_model(const struct eval_opts *o, const struct ncf_cache *cache,
		      struct ncf_model *ck)
{
	struct ncf_model_want want = {cache->users, cache->items};
	if (ncf_model_file_read(o->model, &want, ck) != 0)
		return -1;
	uint32_t fp = ncf_cache_fingerprint(cache);
	/* a model without ids (NVIDIA's, converted): its rows are the cache's
	 * indices, which follow NVIDIA's order */
	uint32_t model_fp = ck->user_ids ? ncf_model_file_fingerprint(ck) : fp;
	if (!ck->user_ids)
		ncf_model_file_note_no_ids(o->model, o->cache_path, cache);
	if (model_fp == fp && ck->shape.users == cache->users && ck->shape.items == cache->items)
		return 0;
	ncf_error("%s and %s do not belong together: the model was trained on %u users "
		  "and %u items (data fingerprint %08x), the cache has %u users and %u "
		  "items (fingerprint %08x); evaluate with the cache the model was "
		  "trained on",
		  o->model, o->cache_path, ck->shape.users, ck->shape.items, model_fp, cache->users,
		  cache->items, fp);
	return -1;
}

/* What evaluating gives: the metrics, and whether they are printed
 * already (before the --scores that may share stdout). */
struct eval_result {
	double hr[EVAL_MAX_K], ndcg[EVAL_MAX_K];
	int printed;
};

/* The model's metrics on the backend, and with --scores every candidate's
 * probability (rank 0).  Returns 0 or -1 (reported). */
static int score_model(const struct eval_opts *o, struct ncf_backend *be, int rank,
		       const struct ncf_cache *cache, const struct ncf_model *ck,
		       uint8_t **mask, struct eval_result *res)
{
	NCF_TRY(ncf_backend_set_state(be, ck->params, NULL, NULL));
	NCF_TRY(ncf_backend_load_cache(be, cache, mask, 0));
	NCF_TRY(ncf_evaluate_ks(be, cache, o->topk, o->nk, res->hr, res->ndcg));
	if (!o->scores || rank != 0)
		return 0;
	/* the metrics first (they may share stdout with the scores) */
	print_metrics(cache, o->topk, o->nk, res->hr, res->ndcg, o->json);
	NCF_TRY(fflush(stdout));
	NCF_TRY(write_scores(be, cache, o->scores));
	res->printed = 1;
	return 0;
}

/* -m MODEL on the backend.  Returns 0, or an exit status for
 * ncf_dist_fail. */
static int eval_model(const struct eval_opts *o, struct ncf_dist *dist,
		      const struct ncf_cache *cache, struct eval_result *res)
{
	struct ncf_model ck;
	if (read_model(o, cache, &ck) != 0)
		return NCF_EXIT_FAIL;
	struct ncf_backend be;
	int rc = ncf_backend_open(&be, o->bo.device, &ck.shape, &ck.hp, o->bo.precision,
				  o->bo.threads, dist);
	if (rc != 0)
		return rc == -3 ? NCF_EXIT_UNAVAILABLE : NCF_EXIT_FAIL;
	uint8_t *mask = NULL;
	if (score_model(o, &be, dist->rank, cache, &ck, &mask, res) != 0)
		return NCF_EXIT_FAIL;
	ncf_backend_close(&be);
	free(mask);
	ncf_model_free(&ck);
	return 0;
}

int main(int argc, char **argv)
{
	ncf_omp_wait_init(argv);
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_synopsis = "ncf-eval (-m MODEL | --baseline popularity) [--topk K[,K...]] [--json] CACHE";
	struct eval_opts o = {.topk = {ncf_nvidia_topk}, .nk = 1};
	struct ncf_cli cli = {.tool = "ncf-eval", .short_opts = ":m:k:qvhV", .long_opts = long_opts,
			      .usage = usage};
	if (parse_opts(argc, argv, &o, &cli)) {
		ncf_cli_free(&cli);
		ncf_print_version(ncf_verbosity > 2, NULL);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	int bad = check_opts(argc, argv, &o, &cli);
	ncf_cli_free(&cli);
	if (bad)
		return bad;

	ncf_out_cleanup_on_signals();
	struct ncf_dist dist;
	ncf_dist_on_hang(ncf_exit_hung);
	if (ncf_dist_init(&dist, &argc, &argv) != 0)
		return NCF_EXIT_FAIL;
	ncf_debug("openmp threads wait: %s", ncf_omp_wait_note());
	if (probe_outputs(&o, &dist) != 0)
		exit(ncf_dist_fail(&dist, NCF_EXIT_FAIL));
	struct ncf_cache cache;
	if (ncf_cache_read(o.cache_path, &cache) != 0)
		exit(ncf_dist_fail(&dist, NCF_EXIT_FAIL));
	if (check_topk(&o, &cache) != 0)
		exit(ncf_dist_fail(&dist, NCF_EXIT_USAGE));
	double t0 = ncf_now();
	struct eval_result res = {0};
	if (o.baseline) {
		eval_popularity(&o, &cache, res.hr, res.ndcg);
	} else {
		int rc = eval_model(&o, &dist, &cache, &res);
		if (rc != 0)
			exit(ncf_dist_fail(&dist, rc));
	}
	double dt = ncf_now() - t0;
	ncf_debug("evaluated %u users x %u candidates in %.3f s (%.0f candidates/s)", cache.users,
		  cache.eval_negatives + 1, dt,
		  dt > 0 ? (double)cache.users * (cache.eval_negatives + 1) / dt : 0.0);
	int status = 0;
	if (dist.rank == 0) {
		warn_topk(&o, &cache);
		if (!res.printed)
			print_metrics(&cache, o.topk, o.nk, res.hr, res.ndcg, o.json);
		if (ncf_close_stdout() != 0)
			status = NCF_EXIT_FAIL;
	}
	ncf_cache_free(&cache);
	ncf_dist_finish(&dist);
	return status;
}
