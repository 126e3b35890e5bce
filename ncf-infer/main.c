/*
 * ncf-infer - NVIDIA's inference benchmark, scoring of (user, item) pairs
 * and top-K recommendations from a checkpoint.  See ncf-infer(1).
 *
 * Every mode scores through the backend's score(): the factorized first
 * layer is precomputed once for every user and item, and (cpu backend) a
 * pair's score does not depend on the batch it is scored in.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "backend_opts.h"
#include "bench.h"
#include "cache.h"
#include "ckpt.h"
#include "cli.h"
#include "err.h"
#include "export.h"
#include "idindex.h"
#include "io.h"
#include "lines.h"
#include "model.h"
#include "model_file.h"
#include "ncf_hd.h"
#include "samefile.h"

#define SCORE_BATCH 65536 /* pairs scored per call in --score */

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
	       "      --precision P        fp32, tf32, bf16, fp16 (GPU)\n"
	       "      --amp                bf16 where the GPU has it\n"
	       "      --threads N          CPU threads (default: all)\n"
	       "  -s, --seed N             seed of the random model and ids (default 1)\n"
	       "  -q, --quiet              less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose            print more\n"
	       "  -h, --help               show this help\n"
	       "  -V, --version            show the version\n"
	       "\n"
	       "Exit status: 0 ok, 1 failure (bad input line, unknown id, bad model), 2 usage,\n"
	       "3 device or ONNX export unavailable.\n");
}

enum {
	OPT_BENCH = 256, OPT_SCORE, OPT_RECOMMEND, OPT_RANDOM, OPT_EXCLUDE, OPT_SKIP, OPT_WARMUP,
	OPT_ITER, OPT_JSON, OPT_EXPORT, OPT_EXPORT_FORMAT, OPT_IDS,
};

struct model {
	struct ncf_shape shape;
	struct ncf_hparams hp;
	uint32_t fingerprint;
	uint32_t *user_ids, *item_ids;
	float *params;
	struct ncf_idindex users, items;
};

static void random_model(struct model *m, uint64_t seed)
{
	struct ncf_shape s = {.users = 138493, .items = 26744, .factors = 64, .n_layers = 4,
			      .layers = {256, 256, 128, 64}};
	m->shape = s;
	struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f,
				 .dropout = 0.5f, .negatives = 4, .batch = 1u << 20, .seed = seed};
	m->hp = hp;
	struct ncf_layout L;
	ncf_layout_make(&s, &L);
	m->params = ncf_xmalloc(L.total * sizeof(float));
	ncf_model_init(&s, &L, seed, m->params);
	m->user_ids = ncf_xmalloc((size_t)s.users * sizeof(uint32_t));
	m->item_ids = ncf_xmalloc((size_t)s.items * sizeof(uint32_t));
	for (uint32_t u = 0; u < s.users; u++)
		m->user_ids[u] = u + 1;
	for (uint32_t i = 0; i < s.items; i++)
		m->item_ids[i] = i + 1;
}

/* A checkpoint or a safetensors file (model_file.h); the ids may be NULL. */
static int load_model(struct model *m, const char *path)
{
	struct ncf_model_file f;
	if (ncf_model_file_read(path, NULL, &f) != 0)
		return -1;
	m->shape = f.shape;
	m->hp = f.hp;
	m->fingerprint = f.user_ids ? ncf_model_file_fingerprint(&f) : 0;
	m->user_ids = f.user_ids;
	m->item_ids = f.item_ids;
	m->params = f.params;
	return 0;
}

/* --ids CACHE: the cache's ids for a model without any; a model with ids
 * must have the same.  Returns 0 or -1 (reported). */
static int ids_from_cache(struct model *m, const char *model_path, const char *cache_path)
{
	struct ncf_cache c;
	if (ncf_cache_read(cache_path, &c) != 0)
		return -1;
	uint32_t fp = ncf_cache_fingerprint(&c);
	int rc = 0;
	if (c.users != m->shape.users || c.items != m->shape.items) {
		ncf_error("%s and %s do not belong together: the model has %u users and %u items, "
			  "the cache %u and %u",
			  model_path, cache_path, m->shape.users, m->shape.items, c.users, c.items);
		rc = -1;
	} else if (m->user_ids && fp != m->fingerprint) {
		ncf_error("%s and %s do not belong together: they have other original ids "
			  "(fingerprints %08x and %08x)",
			  model_path, cache_path, m->fingerprint, fp);
		rc = -1;
	} else if (!m->user_ids) {
		m->user_ids = c.user_ids;
		m->item_ids = c.item_ids;
		c.user_ids = c.item_ids = NULL;
		m->fingerprint = fp;
	}
	ncf_cache_free(&c);
	return rc;
}

static int flush_stdout(void *unused)
{
	(void)unused;
	return fflush(stdout) != 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- score */

struct pending {
	uint32_t *u, *it;
	uint8_t *known;
	float *out;
	size_t n;
};

static int flush_scores(struct ncf_backend *be, struct pending *pd)
{
	if (!pd->n)
		return 0;
	/* unknown pairs are scored as (0, 0) and printed as nan */
	if (ncf_backend_score(be, pd->u, pd->it, pd->n, pd->out) != 0)
		return -1;
	for (size_t j = 0; j < pd->n; j++) {
		if (pd->known[j])
			printf("%.9g\n", pd->out[j]);
		else
			fputs("nan\n", stdout);
	}
	pd->n = 0;
	if (fflush(stdout) != 0)
		return -1;
	return 0;
}

struct flush_ctx {
	struct ncf_backend *be;
	struct pending *pd;
};

static int flush_pending(void *arg)
{
	struct flush_ctx *f = arg;
	return flush_scores(f->be, f->pd);
}

static int score_stream(struct ncf_backend *be, struct model *m, struct ncf_lines *l, int skip)
{
	struct pending pd = {0};
	pd.u = ncf_xmalloc(SCORE_BATCH * sizeof *pd.u);
	pd.it = ncf_xmalloc(SCORE_BATCH * sizeof *pd.it);
	pd.known = ncf_xmalloc(SCORE_BATCH);
	pd.out = ncf_xmalloc(SCORE_BATCH * sizeof *pd.out);
	uint64_t pairs = 0;
	int rc = -1;
	struct flush_ctx fc = {be, &pd};
	for (;;) {
		char *s;
		int got = ncf_lines_read(l, &s, flush_pending, &fc);
		if (got < 0)
			goto out;
		if (got == 0)
			break;
		uint32_t a, b;
		if (ncf_parse_ids(s, 2, &a, &b) != 0) {
			ncf_error("%s:%llu: expected 'user item' (two ids separated by spaces, a tab "
				  "or a comma), found '%s'",
				  l->display, (unsigned long long)l->line, ncf_escape(s, strlen(s), 60));
			goto out;
		}
		int64_t ui = ncf_idindex_find(&m->users, a), ii = ncf_idindex_find(&m->items, b);
		if ((ui < 0 || ii < 0) && !skip) {
			ncf_error("%s:%llu: unknown %s id %u (the model knows %u users and %u items; "
				  "--skip-unknown writes nan instead)",
				  l->display, (unsigned long long)l->line, ui < 0 ? "user" : "item",
				  ui < 0 ? a : b, m->shape.users, m->shape.items);
			goto out;
		}
		pd.known[pd.n] = ui >= 0 && ii >= 0;
		pd.u[pd.n] = ui >= 0 ? (uint32_t)ui : 0;
		pd.it[pd.n] = ii >= 0 ? (uint32_t)ii : 0;
		pd.n++;
		pairs++;
		if (pd.n == SCORE_BATCH && flush_scores(be, &pd) != 0)
			goto out;
	}
	if (pairs == 0) {
		ncf_error("%s: empty input, expected 'user item' lines", l->display);
		goto out;
	}
	ncf_debug("scored %llu pairs", (unsigned long long)pairs);
	rc = 0;
out:
	free(pd.u), free(pd.it), free(pd.known), free(pd.out);
	return rc;
}

/* ------------------------------------------------------------ recommend */

struct cand {
	float logit;
	uint32_t item;
};

/* Better first: higher logit, then lower item index. */
static int cand_better(const struct cand *a, const struct cand *b)
{
	return a->logit > b->logit || (a->logit == b->logit && a->item < b->item);
}

static void heap_down(struct cand *h, size_t n, size_t i)
{
	/* a min-heap by "better": the root is the worst of the kept */
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		if (l < n && cand_better(&h[w], &h[l]))
			w = l;
		if (r < n && cand_better(&h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		struct cand t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	return cand_better(x, y) ? -1 : cand_better(y, x) ? 1 : 0;
}

static int recommend_stream(struct ncf_backend *be, struct model *m, struct ncf_lines *l,
			    uint32_t K, const struct ncf_cache *seen, int skip)
{
	uint32_t I = m->shape.items;
	uint32_t *u = ncf_xmalloc((size_t)I * sizeof *u), *it = ncf_xmalloc((size_t)I * sizeof *it);
	float *lg = ncf_xmalloc((size_t)I * sizeof *lg);
	struct cand *heap = ncf_xmalloc(((size_t)K + 1) * sizeof *heap);
	uint8_t *excluded = ncf_xcalloc(I, 1);
	for (uint32_t i = 0; i < I; i++)
		it[i] = i;
	uint64_t users = 0;
	int rc = -1;
	for (;;) {
		char *s;
		int got = ncf_lines_read(l, &s, flush_stdout, NULL);
		if (got < 0)
			goto out;
		if (got == 0)
			break;
		uint32_t a, dummy;
		if (ncf_parse_ids(s, 1, &a, &dummy) != 0) {
			ncf_error("%s:%llu: expected a user id, found '%s'", l->display,
				  (unsigned long long)l->line, ncf_escape(s, strlen(s), 60));
			goto out;
		}
		users++;
		int64_t ui = ncf_idindex_find(&m->users, a);
		if (ui < 0) {
			if (skip) {
				printf("%u\tnan\tnan\n", a);
				continue;
			}
			ncf_error("%s:%llu: unknown user id %u (the model knows %u users; "
				  "--skip-unknown writes nan instead)",
				  l->display, (unsigned long long)l->line, a, m->shape.users);
			goto out;
		}
		for (uint32_t i = 0; i < I; i++)
			u[i] = (uint32_t)ui;
		int lrc = ncf_backend_logits(be, u, it, I, lg);
		if (lrc != 0)
			goto out;
		if (seen)
			for (int64_t k = seen->offsets[ui]; k < seen->offsets[ui + 1]; k++)
				excluded[seen->train_items[k]] = 1;
		size_t n = 0;
		for (uint32_t i = 0; i < I; i++) {
			if (excluded[i])
				continue;
			struct cand c = {lg[i], i};
			if (n < K) {
				heap[n++] = c;
				if (n == K)
					for (size_t k = K / 2 + 1; k-- > 0;)
						heap_down(heap, n, k);
			} else if (cand_better(&c, &heap[0])) {
				heap[0] = c;
				heap_down(heap, n, 0);
			}
		}
		if (seen)
			for (int64_t k = seen->offsets[ui]; k < seen->offsets[ui + 1]; k++)
				excluded[seen->train_items[k]] = 0;
		qsort(heap, n, sizeof *heap, cmp_cand);
		for (size_t k = 0; k < n; k++) {
			float p = ncf_sigmoid(heap[k].logit);
			printf("%u\t%u\t%.9g\n", a, m->item_ids[heap[k].item], p);
		}
	}
	if (users == 0) {
		ncf_error("%s: empty input, expected user ids, one per line", l->display);
		goto out;
	}
	rc = 0;
out:
	free(u), free(it), free(lg), free(heap), free(excluded);
	return rc;
}

int main(int argc, char **argv)
{
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_backend_fallback_level = 3; /* the CPU fallback is said with -v */
	ncf_synopsis = "ncf-infer (--bench | --score | --recommend K) (-m MODEL | --random-model) "
		       "[options] [FILE]";
	static const struct option opts[] = {
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
	int mode = 0, random = 0, skip = 0, json = 0, version = 0, c;
	struct ncf_backend_opts bo = {0};
	const char *model_path = NULL, *exclude = NULL;
	const char *export_path = NULL, *export_format = NULL, *ids_path = NULL;
	uint32_t K = 0;
	int64_t sizes[64] = {1024, 4096, 16384, 65536, 262144, 1048576};
	int nsizes = 6, warmup = 10, iterations = 190;
	uint64_t seed = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":m:b:s:qvhV", opts, NULL)) != -1) {
		switch (c) {
		case OPT_BENCH:
		case OPT_SCORE:
		case OPT_RECOMMEND:
		case OPT_EXPORT:
			if (mode && mode != c)
				ncf_usage_error("choose one of --bench, --score, --recommend, --export");
			mode = c;
			if (c == OPT_RECOMMEND)
				K = (uint32_t)ncf_opt_int("--recommend", optarg, 1, 1000000);
			if (c == OPT_EXPORT)
				export_path = optarg;
			break;
		case OPT_EXPORT_FORMAT:
			export_format = optarg;
			break;
		case OPT_IDS:
			ids_path = optarg;
			break;
		case 'm':
			model_path = optarg;
			break;
		case OPT_RANDOM:
			random = 1;
			break;
		case OPT_EXCLUDE:
			exclude = optarg;
			break;
		case OPT_SKIP:
			skip = 1;
			break;
		case 'b':
			nsizes = ncf_opt_int_list("--batch-sizes", optarg, sizes, 64, 1, 1ll << 28);
			break;
		case OPT_WARMUP:
			warmup = (int)ncf_opt_int("--warmup", optarg, 0, 1000000);
			break;
		case OPT_ITER:
			iterations = (int)ncf_opt_int("--iterations", optarg, 1, 1000000);
			break;
		case OPT_JSON:
			json = 1;
			break;
		case 's':
			seed = ncf_opt_u64("--seed", optarg);
			break;
		default:
			if (!ncf_backend_option(c, optarg, &bo))
				ncf_cli_common(c, argv, usage, &version);
		}
	}
	if (version) {
		ncf_print_version(ncf_verbosity > 2, ncf_export_describe);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	if (!mode)
		ncf_usage_error("choose a mode: --bench, --score, --recommend K or --export FILE");
	ncf_backend_opts_finish(&bo);
	enum ncf_export_format efmt = NCF_EXPORT_SAFETENSORS;
	const char *why;
	if (export_format && mode != OPT_EXPORT)
		ncf_usage_error("--export-format is for --export");
	if (mode == OPT_EXPORT && ncf_export_format(export_path, export_format, &efmt, &why) != 0)
		ncf_usage_error("%s", why);
	if (mode == OPT_EXPORT && optind < argc)
		ncf_usage_error("--export reads no input ('%s' is extra)", argv[optind]);
	if (random && mode != OPT_BENCH && mode != OPT_EXPORT)
		ncf_usage_error("--random-model is for --bench and --export");
	if (random && ids_path)
		ncf_usage_error("--ids is for a model file without ids, not --random-model");
	if (random && model_path)
		ncf_usage_error("-m and --random-model exclude each other");
	if (!random && !model_path)
		ncf_usage_error("no model given (-m MODEL%s)", mode == OPT_BENCH ? " or --random-model" : "");
	if (exclude && mode != OPT_RECOMMEND)
		ncf_usage_error("--exclude-seen is for --recommend");
	if (mode == OPT_BENCH && optind < argc)
		ncf_usage_error("--bench reads no input ('%s' is extra)", argv[optind]);
	if (argc - optind > 1)
		ncf_usage_error("one input file at most ('%s' is extra)", argv[optind + 1]);
	const char *input = optind < argc ? argv[optind] : NULL;
	int stdin_in = mode != OPT_BENCH && mode != OPT_EXPORT && (!input || !strcmp(input, "-"));
	if ((model_path && !strcmp(model_path, "-") && (stdin_in || (exclude && !strcmp(exclude, "-")))) ||
	    (exclude && !strcmp(exclude, "-") && stdin_in))
		ncf_usage_error("only one of the model, --exclude-seen and the input can come from stdin");
	if (ids_path && !strcmp(ids_path, "-") &&
	    (stdin_in || (model_path && !strcmp(model_path, "-")) || (exclude && !strcmp(exclude, "-"))))
		ncf_usage_error("--ids - and another input cannot both come from stdin");
	struct ncf_named files[] = {
		{.path = model_path, .what = "-m"},
		{.path = exclude, .what = "--exclude-seen"},
		{.path = ids_path, .what = "--ids"},
		{.path = mode == OPT_BENCH || mode == OPT_EXPORT ? NULL : input ? input : "-",
		 .what = "the input"},
		{.path = mode == OPT_EXPORT ? NULL : "-", .output = 1},
		{.path = mode == OPT_EXPORT ? export_path : NULL, .what = "--export", .output = 1},
	};
	if (ncf_refuse_same_file(files, sizeof files / sizeof files[0]) != 0)
		return NCF_EXIT_USAGE;

	/* every failure below goes to done, which frees what was made */
	int status = NCF_EXIT_FAIL, be_open = 0;
	struct ncf_backend be;
	struct model m;
	memset(&m, 0, sizeof m);
	struct ncf_cache seen;
	memset(&seen, 0, sizeof seen);
	if (random)
		random_model(&m, seed);
	else if (load_model(&m, model_path) != 0)
		goto done;
	if (ids_path && ids_from_cache(&m, model_path, ids_path) != 0)
		goto done;
	if (exclude) {
		if (ncf_cache_read(exclude, &seen) != 0)
			goto done;
		if (!m.user_ids && seen.users == m.shape.users && seen.items == m.shape.items) {
			/* a model without ids: the rows are the cache's */
			m.user_ids = ncf_xmalloc((size_t)seen.users * sizeof *m.user_ids);
			m.item_ids = ncf_xmalloc((size_t)seen.items * sizeof *m.item_ids);
			memcpy(m.user_ids, seen.user_ids, (size_t)seen.users * sizeof *m.user_ids);
			memcpy(m.item_ids, seen.item_ids, (size_t)seen.items * sizeof *m.item_ids);
			m.fingerprint = ncf_cache_fingerprint(&seen);
		}
		if (ncf_cache_fingerprint(&seen) != m.fingerprint || seen.users != m.shape.users ||
		    seen.items != m.shape.items) {
			ncf_error("%s and %s do not belong together: the model was trained on another "
				  "data set (%u users, %u items; the cache has %u, %u)",
				  model_path, exclude, m.shape.users, m.shape.items, seen.users,
				  seen.items);
			goto done;
		}
	}
	if (!m.user_ids && (mode == OPT_SCORE || mode == OPT_RECOMMEND ||
			    (mode == OPT_EXPORT && efmt == NCF_EXPORT_ONNX))) {
		ncf_error("%s has no original ids (a state_dict converted from NVIDIA's checkpoint?); "
			  "give the cache it was trained on with --ids CACHE",
			  model_path);
		goto done;
	}
	if (mode == OPT_EXPORT) {
		ncf_out_cleanup_on_signals();
		struct ncf_model_file mf = {.shape = m.shape, .hp = m.hp, .user_ids = m.user_ids,
					    .item_ids = m.item_ids, .params = m.params};
		int erc = ncf_export(&mf, export_path, efmt);
		status = erc == -3 ? NCF_EXIT_UNAVAILABLE : erc != 0 ? NCF_EXIT_FAIL : 0;
		goto done;
	}
	struct ncf_dist dist = {.rank = 0, .size = 1, .local_size = 1};
	int orc = ncf_backend_open(&be, bo.device, &m.shape, &m.hp, bo.precision, bo.threads, &dist);
	if (orc != 0) {
		status = orc == -3 ? NCF_EXIT_UNAVAILABLE : NCF_EXIT_FAIL;
		goto done;
	}
	be_open = 1;
	if (ncf_backend_set_state(&be, m.params, NULL, NULL) != 0)
		goto done;
	int rc = 0;
	if (mode == OPT_BENCH) {
		int nth = 1;
#ifdef _OPENMP
		nth = omp_get_max_threads();
#endif
		ncf_info("inference benchmark: %s model (%u users, %u items), %s backend, %d "
			 "thread%s, %d warm-up and %d timed passes; throughput in samples/s, "
			 "latency in seconds; pairs on the device (NVIDIA's inference.py), then "
			 "host to host (host_*)",
			 random ? "random ml-20m-sized" : model_path, m.shape.users, m.shape.items,
			 ncf_backend_name(&be), nth, nth == 1 ? "" : "s", warmup, iterations);
		rc = ncf_infer_bench(&be, sizes, nsizes, warmup, iterations, json, seed);
	} else {
		const char *display;
		FILE *in = ncf_in_open(input, &display);
		if (!in)
			goto done;
		struct ncf_lines l;
		ncf_lines_init(&l, fileno(in), display, 0);
		m.users.n = 0;
		ncf_idindex_init(&m.users, m.user_ids, m.shape.users);
		ncf_idindex_init(&m.items, m.item_ids, m.shape.items);
		if (mode == OPT_SCORE)
			rc = score_stream(&be, &m, &l, skip);
		else
			rc = recommend_stream(&be, &m, &l, K, exclude ? &seen : NULL, skip);
		ncf_lines_free(&l);
		ncf_in_close(in);
		ncf_idindex_free(&m.users);
		ncf_idindex_free(&m.items);
	}
	status = rc == 0 ? 0 : NCF_EXIT_FAIL;
done:
	if (be_open)
		ncf_backend_close(&be);
	ncf_cache_free(&seen);
	free(m.params), free(m.user_ids), free(m.item_ids);
	if (ncf_close_stdout() != 0)
		status = NCF_EXIT_FAIL;
	return status;
}
