/*
 * ncf-train - train NeuMF on a cache, evaluate after every epoch, write
 * checkpoints.  See ncf-train(1).
 *
 * Files: -o MODEL holds the best model by HR@K (rewritten when HR@K
 * improves); --checkpoint FILE (default MODEL.last) holds the state after
 * the latest epoch, or mid-epoch after SIGINT/SIGTERM, for --resume;
 * --keep-epochs also writes MODEL.epoch-NNN after every epoch.  Every one
 * is a complete, resumable checkpoint.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend.h"
#include "backend_opts.h"
#include "cache.h"
#include "ckpt.h"
#include "cli.h"
#include "crc32c.h"
#include "dist.h"
#include "err.h"
#include "evaluate.h"
#include "io.h"
#include "model.h"
#include "samefile.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
	ncf_dist_note_signal(sig); /* a rank blocked by a failed one says so */
}

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
	       "      --precision P            fp32, tf32, bf16, fp16 (GPU; default tf32)\n"
	       "      --amp                    bf16 where the GPU has it\n"
	       "      --threads N              CPU threads (default: all)\n"
	       "      --log FILE|-             one JSON object per epoch\n"
	       "      --progress               progress bar even when stderr is not a terminal\n"
	       "  -q, --quiet                  less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose                print more\n"
	       "  -h, --help                   show this help\n"
	       "  -V, --version                show the version (-vV: libraries and devices)\n"
	       "\n"
	       "Exit status: 0 ok, 1 failure (bad file, NaN loss, device error), 2 usage,\n"
	       "3 device unavailable, 130/143 interrupted (state saved in --checkpoint).\n");
}

enum {
	OPT_LAYERS = 256, OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_DROPOUT, OPT_TRUENEG, OPT_RESUME,
	OPT_LOG, OPT_PROGRESS, OPT_CHECKPOINT, OPT_KEEP,
};

struct run {
	const char *output, *checkpoint, *log_path;
	int keep_epochs;
	uint32_t epochs, topk;
	double threshold; /* < 0: none */
	FILE *log;
	struct ncf_dist dist;
	struct ncf_backend be;
	struct ncf_cache cache;
	struct ncf_ckpt ck; /* the state to save: ids borrowed from the cache */
};

static void describe_versions(FILE *out)
{
	ncf_backend_describe_versions(out);
	fprintf(out, "mpi library\t%s\n", ncf_dist_library());
}

/* Bring the backend's state into r->ck and write it to path. */
static int save(struct run *r, const char *path, const char *what)
{
	if (r->dist.rank != 0)
		return 0;
	if (ncf_backend_get_state(&r->be, r->ck.params, r->ck.m, r->ck.v) != 0)
		return -1;
	r->ck.step = r->be.step;
	if (ncf_ckpt_write(&r->ck, path) != 0)
		return -1;
	ncf_debug("saved %s to %s", what, path);
	return 0;
}

/*
 * With several ranks, every rank must start from the same data, model and
 * device, or the collectives go out of step (a hang or a crash in MPI).
 * Rank 0 broadcasts a digest of what it loaded; a rank that differs says
 * so and every rank stops.  Returns 0 when all agree.
 */
static int ranks_agree(struct run *r, uint64_t start_pos)
{
	if (r->dist.size == 1)
		return 0;
	const struct ncf_cache *c = &r->cache;
	unsigned char d[256] = {0};
	ncf_put_u32(d + 0, ncf_cache_fingerprint(c));
	ncf_put_u64(d + 4, (uint64_t)c->train_positives);
	uint32_t crc = ncf_crc32c(0, c->offsets, ((size_t)c->users + 1) * sizeof *c->offsets);
	crc = ncf_crc32c(crc, c->train_items, (size_t)c->train_positives * sizeof *c->train_items);
	ncf_put_u32(d + 12, crc);
	crc = ncf_crc32c(0, c->test_items, (size_t)c->users * sizeof *c->test_items);
	crc = ncf_crc32c(crc, c->eval_neg, (size_t)c->users * c->eval_negatives * sizeof *c->eval_neg);
	ncf_put_u32(d + 16, crc);
	const struct ncf_shape *s = &r->be.shape;
	const struct ncf_hparams *hp = &r->be.hp;
	ncf_put_u32(d + 20, s->factors);
	ncf_put_u32(d + 24, s->n_layers);
	for (uint32_t k = 0; k < s->n_layers && k < NCF_MAX_LAYERS; k++)
		ncf_put_u32(d + 28 + 4 * k, s->layers[k]);
	float f[5] = {hp->lr, hp->beta1, hp->beta2, hp->eps, hp->dropout};
	memcpy(d + 60, f, sizeof f);
	ncf_put_u32(d + 80, hp->negatives);
	ncf_put_u32(d + 84, hp->true_neg);
	ncf_put_u64(d + 88, hp->batch);
	ncf_put_u64(d + 96, hp->seed);
	ncf_put_u64(d + 132, r->ck.step);
	ncf_put_u32(d + 140, r->ck.epoch);
	ncf_put_u64(d + 144, start_pos);
	ncf_put_u32(d + 152, ncf_crc32c(0, r->ck.params, r->be.layout.total * sizeof(float)));
	snprintf((char *)d + 160, 16, "%s", ncf_backend_name(&r->be));
	unsigned char d0[256];
	memcpy(d0, d, sizeof d);
	if (ncf_dist_bcast(&r->dist, d0, sizeof d0) != 0)
		return -1;
	const char *what = NULL;
	if (memcmp(d, d0, 20) != 0)
		what = "its cache differs from rank 0's (another file or another version of it)";
	else if (memcmp(d + 20, d0 + 20, 140) != 0)
		what = "its starting model differs from rank 0's (another --resume file, or a stale "
		       "copy of it)";
	else if (memcmp(d + 160, d0 + 160, 16) != 0)
		what = "it uses another backend than rank 0 (--device auto found no GPU on some "
		       "ranks; give --device)";
	if (what)
		ncf_error("rank %d of %d: %s", r->dist.rank, r->dist.size, what);
	return ncf_dist_max_int(&r->dist, what != NULL) ? -1 : 0;
}

/* The end of every run that got as far as training: close the log, free
 * what the run holds, leave MPI.  Returns status, or 1 when the log or
 * stdout cannot be closed. */
static int run_end(struct run *r, uint8_t *mask, char *default_ckpt, int status)
{
	if (r->log && r->log != stdout && fclose(r->log) != 0) {
		ncf_error("%s: write failed: %s", r->log_path, strerror(errno ? errno : EIO));
		status = NCF_EXIT_FAIL;
	}
	r->log = NULL;
	ncf_backend_close(&r->be);
	free(mask);
	r->ck.user_ids = r->ck.item_ids = NULL; /* the cache's */
	ncf_ckpt_free(&r->ck);
	ncf_cache_free(&r->cache);
	free(default_ckpt);
	int rank0 = r->dist.rank == 0;
	ncf_dist_finish(&r->dist);
	if (rank0 && ncf_close_stdout() != 0 && !status)
		status = NCF_EXIT_FAIL;
	return status;
}

static char *suffixed(const char *path, const char *suffix)
{
	size_t n = strlen(path) + strlen(suffix) + 1;
	char *s = ncf_xmalloc(n);
	snprintf(s, n, "%s%s", path, suffix);
	return s;
}

static void fmt_rate(char *buf, size_t len, double x)
{
	if (x >= 1e6)
		snprintf(buf, len, "%.2fM", x / 1e6);
	else if (x >= 1e3)
		snprintf(buf, len, "%.1fk", x / 1e3);
	else
		snprintf(buf, len, "%.0f", x);
}

int main(int argc, char **argv)
{
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_synopsis = "ncf-train [options] CACHE -o MODEL";
	static const struct option opts[] = {
		{"output", required_argument, 0, 'o'},
		{"checkpoint", required_argument, 0, OPT_CHECKPOINT},
		{"keep-epochs", no_argument, 0, OPT_KEEP},
		{"resume", required_argument, 0, OPT_RESUME},
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
	struct run r;
	memset(&r, 0, sizeof r);
	r.epochs = 30;
	r.topk = 10;
	r.threshold = -1;
	struct ncf_shape shape = {.factors = 64, .n_layers = 4, .layers = {256, 256, 128, 64}};
	struct ncf_hparams hp = {.lr = 0.0045f, .beta1 = 0.25f, .beta2 = 0.5f, .eps = 1e-8f,
				 .dropout = 0.5f, .negatives = 4, .true_neg = 0,
				 .batch = 1u << 20, .seed = 1};
	struct ncf_backend_opts bo = {0};
	const char *resume = NULL;
	int progress = 0, version = 0, c;
	int set_shape = 0, set_hp = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:e:b:f:n:l:s:t:k:qvhV", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			r.output = optarg;
			break;
		case OPT_CHECKPOINT:
			r.checkpoint = optarg;
			break;
		case OPT_KEEP:
			r.keep_epochs = 1;
			break;
		case OPT_RESUME:
			resume = optarg;
			break;
		case 'e':
			r.epochs = (uint32_t)ncf_opt_int("--epochs", optarg, 0, 1000000);
			break;
		case 'b':
			hp.batch = (uint64_t)ncf_opt_int("--batch-size", optarg, 1, (int64_t)1 << 40);
			set_hp = 1;
			break;
		case 'f':
			shape.factors = (uint32_t)ncf_opt_int("--factors", optarg, 1, 65536);
			set_shape = 1;
			break;
		case OPT_LAYERS: {
			int64_t v[NCF_MAX_LAYERS];
			int n = ncf_opt_int_list("--layers", optarg, v, NCF_MAX_LAYERS, 1, 8192);
			if (n < 2)
				ncf_usage_error("--layers needs at least two sizes (input, one layer)");
			if (v[0] % 2)
				ncf_usage_error("--layers: the first size (%lld) is the user and item MLP "
						"embeddings side by side and must be even",
						(long long)v[0]);
			shape.n_layers = (uint32_t)n;
			for (int k = 0; k < n; k++)
				shape.layers[k] = (uint32_t)v[k];
			set_shape = 1;
			break;
		}
		case 'n':
			hp.negatives = (uint32_t)ncf_opt_int("--negative-samples", optarg, 0, 1000);
			set_hp = 1;
			break;
		case OPT_TRUENEG:
			hp.true_neg = 1;
			set_hp = 1;
			break;
		case 'l':
			hp.lr = (float)ncf_opt_real("--learning-rate", optarg, 0, 1, 1e30, 0);
			set_hp = 1;
			break;
		case OPT_BETA1:
			hp.beta1 = (float)ncf_opt_real("--beta1", optarg, 0, 0, 1, 1);
			set_hp = 1;
			break;
		case OPT_BETA2:
			hp.beta2 = (float)ncf_opt_real("--beta2", optarg, 0, 0, 1, 1);
			set_hp = 1;
			break;
		case OPT_EPS:
			hp.eps = (float)ncf_opt_real("--eps", optarg, 0, 1, 1, 0);
			set_hp = 1;
			break;
		case OPT_DROPOUT:
			hp.dropout = (float)ncf_opt_real("--dropout", optarg, 0, 0, 1, 1);
			set_hp = 1;
			break;
		case 's':
			hp.seed = ncf_opt_u64("--seed", optarg);
			set_hp = 1;
			break;
		case 't':
			r.threshold = ncf_opt_real("--threshold", optarg, 0, 0, 1, 0);
			break;
		case 'k':
			r.topk = (uint32_t)ncf_opt_int("--topk", optarg, 1, 100000);
			break;
		case OPT_LOG:
			r.log_path = optarg;
			break;
		case OPT_PROGRESS:
			progress = 1;
			break;
		default:
			if (!ncf_backend_option(c, optarg, &bo))
				ncf_cli_common(c, argv, usage, &version);
		}
	}
	if (version) {
		ncf_print_version(ncf_verbosity > 2, describe_versions);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	ncf_backend_opts_finish(&bo);
	if (optind >= argc)
		ncf_usage_error("no cache given");
	if (argc - optind > 1)
		ncf_usage_error("one cache only ('%s' is extra)", argv[optind + 1]);
	if (!r.output)
		ncf_usage_error("no output model given (-o MODEL)");
	const char *cache_path = argv[optind];
	char *default_ckpt = NULL;
	if (!r.checkpoint)
		r.checkpoint = default_ckpt = suffixed(r.output, ".last");
	if (resume && !strcmp(resume, "-") && !strcmp(cache_path, "-"))
		ncf_usage_error("the cache and --resume cannot both come from stdin");
	if (!strcmp(r.output, "-") || !strcmp(r.checkpoint, "-"))
		ncf_usage_error("models are files: -o and --checkpoint cannot be stdout");
	struct ncf_named files[] = {
		{.path = cache_path, .what = "the cache"},
		{.path = resume, .what = "--resume", .read_first = 1},
		{.path = r.output, .what = "-o", .output = 1},
		{.path = r.checkpoint, .what = "--checkpoint", .output = 1},
		{.path = r.log_path, .what = "--log", .output = 1, .appends = 1},
	};
	if (ncf_refuse_same_file(files, sizeof files / sizeof files[0]) != 0) {
		free(default_ckpt);
		return NCF_EXIT_USAGE;
	}

	if (ncf_dist_init(&r.dist, &argc, &argv) != 0)
		return NCF_EXIT_FAIL;
	int rank0 = r.dist.rank == 0;
#define FAIL(code)                                  \
	do {                                        \
		ncf_dist_abort(&r.dist, (code));    \
	} while (0)

	/* The cache, then the starting state: fresh or resumed. */
	if (ncf_cache_read(cache_path, &r.cache) != 0)
		FAIL(NCF_EXIT_FAIL);
	uint32_t fp = ncf_cache_fingerprint(&r.cache);
	if (resume) {
		if (ncf_ckpt_read(resume, &r.ck, 1) != 0)
			FAIL(NCF_EXIT_FAIL);
		if (r.ck.fingerprint != fp || r.ck.shape.users != r.cache.users ||
		    r.ck.shape.items != r.cache.items ||
		    r.ck.train_positives != (uint64_t)r.cache.train_positives) {
			ncf_error("%s was trained on another data set than %s (%u users, %u items vs "
				  "%u, %u); resume with the cache it was trained on",
				  resume, cache_path, r.ck.shape.users, r.ck.shape.items, r.cache.users,
				  r.cache.items);
			FAIL(NCF_EXIT_FAIL);
		}
		if (set_shape || set_hp)
			ncf_warn("--resume: the model's shape and hyperparameters come from %s; the "
				 "ones given are ignored",
				 resume);
		shape = r.ck.shape;
		hp = r.ck.hp;
		r.topk = r.ck.topk ? r.ck.topk : r.topk;
		free(r.ck.user_ids);
		free(r.ck.item_ids);
	} else {
		shape.users = r.cache.users;
		shape.items = r.cache.items;
		const char *why = ncf_shape_check(&shape);
		if (why)
			ncf_usage_error("%s", why);
		struct ncf_layout L;
		ncf_layout_make(&shape, &L);
		r.ck.shape = shape;
		r.ck.hp = hp;
		r.ck.params = ncf_xmalloc(L.total * sizeof(float));
		r.ck.m = ncf_xcalloc(L.total, sizeof(float));
		r.ck.v = ncf_xcalloc(L.total, sizeof(float));
		ncf_model_init(&shape, &L, hp.seed, r.ck.params);
		r.ck.best_hr = r.ck.best_ndcg = r.ck.last_hr = r.ck.last_ndcg = -1;
		r.ck.topk = r.topk;
	}
	r.ck.user_ids = r.cache.user_ids;
	r.ck.item_ids = r.cache.item_ids;
	r.ck.fingerprint = fp;
	r.ck.train_positives = (uint64_t)r.cache.train_positives;

	uint64_t P = (uint64_t)r.cache.train_positives;
	uint64_t S = P * (1 + (uint64_t)hp.negatives);
	if (S == 0) {
		ncf_error("%s has no training positives: nothing to train on", cache_path);
		FAIL(NCF_EXIT_FAIL);
	}
	uint64_t steps_per_epoch = (S + hp.batch - 1) / hp.batch;
	if (hp.batch > S)
		ncf_info("the batch (%llu) is larger than an epoch (%llu samples): each epoch is "
			 "one step over all samples",
			 (unsigned long long)hp.batch, (unsigned long long)S);

	int orc = ncf_backend_open(&r.be, bo.device, &shape, &hp, bo.precision, bo.threads,
				   &r.dist);
	if (orc == -3)
		FAIL(NCF_EXIT_UNAVAILABLE);
	if (orc != 0)
		FAIL(NCF_EXIT_FAIL);
	r.be.step = r.ck.step;
	uint8_t *mask = NULL;
	if (ncf_backend_set_state(&r.be, r.ck.params, r.ck.m, r.ck.v) != 0 ||
	    ncf_backend_load_cache(&r.be, &r.cache, &mask, 1) != 0)
		FAIL(NCF_EXIT_FAIL);
	if (ranks_agree(&r, r.ck.position) != 0)
		FAIL(NCF_EXIT_FAIL);
	/* the saved loss of an interrupted epoch is the sum over all ranks:
	 * rank 0 carries it on */
	if (r.dist.rank != 0)
		r.ck.epoch_loss = 0;

	if (rank0 && r.log_path) {
		if (!strcmp(r.log_path, "-")) {
			r.log = stdout;
		} else {
			r.log = fopen(r.log_path, resume ? "a" : "w");
			if (!r.log) {
				ncf_error("%s: cannot open the log", r.log_path);
				FAIL(NCF_EXIT_FAIL);
			}
		}
	}
	ncf_out_cleanup_on_signals(); /* SIGHUP: remove temporary files, die */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	int nthreads = 1;
#ifdef _OPENMP
	nthreads = omp_get_max_threads();
#endif
	ncf_info("training %s on %s: %u users, %u items, %llu samples per epoch, batch %llu "
		 "(%llu step%s), %s backend, %d thread%s%s",
		 r.output, cache_path, shape.users, shape.items, (unsigned long long)S,
		 (unsigned long long)hp.batch, (unsigned long long)steps_per_epoch,
		 steps_per_epoch == 1 ? "" : "s", ncf_backend_name(&r.be),
		 nthreads, nthreads == 1 ? "" : "s", "");
	if (r.dist.size > 1)
		ncf_info("%d ranks, each taking 1/%d of every global batch", r.dist.size,
			 r.dist.size);
	if (resume)
		ncf_info("resuming from %s at epoch %u, position %llu of %llu", resume,
			 r.ck.epoch + 1, (unsigned long long)r.ck.position, (unsigned long long)S);

	double total_train = 0, best_tput = 0, t_threshold = -1, run_start = ncf_now();
	uint64_t total_samples = 0;
	uint32_t threshold_epoch = 0, epochs_run = 0;
	int status = 0;
	struct ncf_progress prog;
	ncf_progress_init(&prog, progress);
	if (rank0 == 0)
		prog.enabled = 0;
	char label[64];
	if (r.ck.best_hr >= 0 && r.threshold >= 0 && r.ck.best_hr >= r.threshold) {
		ncf_info("%s already reached HR@%u %.4f >= %.4f; nothing to do", resume, r.topk,
			 r.ck.best_hr, r.threshold);
		r.epochs = r.ck.epoch;
	}
	if (r.ck.epoch >= r.epochs && !(r.ck.position > 0 && r.ck.epoch < r.epochs))
		ncf_info("nothing to do: %u epoch%s asked for, %u already done%s", r.epochs,
			 r.epochs == 1 ? "" : "s", r.ck.epoch,
			 resume ? " (raise -e to train more)" : "");
	int saved_best = 0;
	for (uint32_t e = r.ck.epoch; e < r.epochs; e++) {
		uint64_t pos = e == r.ck.epoch ? r.ck.position : 0;
		double loss = e == r.ck.epoch ? r.ck.epoch_loss : 0;
		uint64_t start_pos = pos;
		double t0 = ncf_now();
		snprintf(label, sizeof label, "epoch %u/%u", e + 1, r.epochs);
		/* on a GPU the steps' losses stay on the device until the epoch
		 * ends, progress shows them or a signal stops it: no wait per step */
		int keep = ncf_backend_device(&r.be) == NCF_DEVICE_CUDA;
		int show = ncf_dist_max_int(&r.dist, prog.enabled);
		while (pos < S) {
			uint64_t n = S - pos < hp.batch ? S - pos : hp.batch;
			double ls = 0;
			if (ncf_backend_train_step(&r.be, e, pos, n, keep ? NULL : &ls) != 0)
				FAIL(NCF_EXIT_FAIL);
			pos += n;
			int sig = ncf_dist_max_int(&r.dist, (int)got_signal);
			if (keep && pos < S && !sig && !show)
				continue;
			if (keep && ncf_backend_take_loss(&r.be, &ls) != 0)
				FAIL(NCF_EXIT_FAIL);
			double gl = ls;
			ncf_dist_sum_f64(&r.dist, &gl, 1);
			if (!isfinite(gl)) {
				ncf_progress_clear(&prog);
				int saved = r.ck.epochs_done > 0 || resume;
				ncf_error("epoch %u, step %llu: the loss is %s; stopping (%s%s; try a "
					  "lower --learning-rate)",
					  e + 1, (unsigned long long)((pos - n) / hp.batch + 1),
					  isnan(gl) ? "NaN" : "infinite",
					  saved ? "left as it was: " : "no checkpoint was written",
					  saved ? (resume && !r.ck.epochs_done ? resume : r.checkpoint) : "");
				FAIL(NCF_EXIT_FAIL);
			}
			loss += ls;
			if (prog.enabled) {
				char extra[64], rate[16];
				double dt = ncf_now() - t0;
				fmt_rate(rate, sizeof rate, dt > 0 ? (double)(pos - start_pos) / dt : 0);
				snprintf(extra, sizeof extra, "loss %.4f  %s samples/s",
					 loss / (double)pos * (double)r.dist.size, rate);
				ncf_progress_update(&prog, label, (double)pos, (double)S, extra);
			}
			if (sig && pos < S) {
				ncf_progress_clear(&prog);
				r.ck.epoch = e;
				r.ck.position = pos;
				double all = loss;
				ncf_dist_sum_f64(&r.dist, &all, 1);
				r.ck.epoch_loss = all;
				if (save(&r, r.checkpoint, "the interrupted state") != 0)
					FAIL(NCF_EXIT_FAIL);
				ncf_info("interrupted in epoch %u at position %llu of %llu; resume with "
					 "--resume %s",
					 e + 1, (unsigned long long)pos, (unsigned long long)S,
					 r.checkpoint);
				return run_end(&r, mask, default_ckpt,
					       sig == SIGINT ? NCF_EXIT_SIGINT : NCF_EXIT_SIGTERM);
			}
		}
		ncf_progress_clear(&prog);
		double train_time = ncf_now() - t0;
		double gloss = loss;
		ncf_dist_sum_f64(&r.dist, &gloss, 1);
		gloss /= (double)S;
		uint64_t done = S - start_pos;
		double tput = train_time > 0 ? (double)done / train_time : 0;
		total_train += train_time;
		total_samples += done;
		if (tput > best_tput)
			best_tput = tput;
		double t1 = ncf_now(), hr, ndcg;
		if (ncf_evaluate(&r.be, &r.cache, r.topk, &hr, &ndcg) != 0)
			FAIL(NCF_EXIT_FAIL);
		double eval_time = ncf_now() - t1;
		double eval_tput = eval_time > 0 ? (double)r.cache.users *
							   (1.0 + r.cache.eval_negatives) / eval_time
						 : 0;
		epochs_run++;
		r.ck.epoch = e + 1;
		r.ck.position = 0;
		r.ck.epoch_loss = 0;
		r.ck.epochs_done = e + 1;
		r.ck.last_hr = hr;
		r.ck.last_ndcg = ndcg;
		int best = hr > r.ck.best_hr;
		if (best) {
			r.ck.best_hr = hr;
			r.ck.best_ndcg = ndcg;
			r.ck.best_epoch = e + 1;
		}
		char rate[16], erate[16];
		fmt_rate(rate, sizeof rate, tput);
		fmt_rate(erate, sizeof erate, eval_tput);
		ncf_info("epoch %u/%u: loss %.4f  hr@%u %.4f  ndcg@%u %.4f  train %.2f s (%s "
			 "samples/s)  eval %.2f s (%s/s)%s",
			 e + 1, r.epochs, gloss, r.topk, hr, r.topk, ndcg, train_time, rate,
			 eval_time, erate, best ? "  best" : "");
		if (best && save(&r, r.output, "the best model") != 0)
			FAIL(NCF_EXIT_FAIL);
		saved_best |= best;
		if (save(&r, r.checkpoint, "the latest state") != 0)
			FAIL(NCF_EXIT_FAIL);
		if (r.keep_epochs) {
			char suffix[32];
			snprintf(suffix, sizeof suffix, ".epoch-%03u", e + 1);
			char *path = suffixed(r.output, suffix);
			int src = save(&r, path, "the epoch's state");
			free(path);
			if (src != 0)
				FAIL(NCF_EXIT_FAIL);
		}
		/* the log after the files: a log that cannot be written stops the
		 * run (every rank), with the epoch's state saved */
		int log_bad = 0;
		if (r.log) {
			fprintf(r.log,
				"{\"epoch\": %u, \"train_loss\": %.6f, \"hr@%u\": %.6f, \"ndcg@%u\": "
				"%.6f, \"train_time\": %.4f, \"eval_time\": %.4f, "
				"\"train_throughput\": %.1f, \"eval_throughput\": %.1f, \"ranks\": %d, "
				"\"rank_throughput\": %.1f, \"best\": %s}\n",
				e + 1, gloss, r.topk, hr, r.topk, ndcg, train_time, eval_time, tput,
				eval_tput, r.dist.size, tput / r.dist.size, best ? "true" : "false");
			errno = 0;
			if (fflush(r.log) != 0 || ferror(r.log)) {
				ncf_error("%s: write failed: %s (the state after epoch %u is saved in %s)",
					  r.log == stdout ? "<stdout>" : r.log_path,
					  strerror(errno ? errno : EIO), e + 1, r.checkpoint);
				if (r.log != stdout)
					fclose(r.log);
				r.log = NULL;
				log_bad = 1;
			}
		}
		if (ncf_dist_max_int(&r.dist, log_bad))
			return run_end(&r, mask, default_ckpt, NCF_EXIT_FAIL);
		if (r.threshold >= 0 && hr >= r.threshold) {
			threshold_epoch = e + 1;
			t_threshold = ncf_now() - run_start;
			break;
		}
		/* a signal during the epoch's last step or its evaluation: the state
		 * after the epoch is saved already; every rank agrees to stop */
		int sig = ncf_dist_max_int(&r.dist, (int)got_signal);
		if (sig) {
			if (e + 1 < r.epochs)
				ncf_info("interrupted after epoch %u; its state is in %s; resume with "
					 "--resume %s",
					 e + 1, r.checkpoint, r.checkpoint);
			else
				ncf_info("interrupted during the last epoch's evaluation; the finished "
					 "run is saved in %s",
					 r.checkpoint);
			return run_end(&r, mask, default_ckpt,
				       sig == SIGINT ? NCF_EXIT_SIGINT : NCF_EXIT_SIGTERM);
		}
	}
	if (epochs_run) {
		char mean[16], bst[16];
		fmt_rate(mean, sizeof mean, total_train > 0 ? (double)total_samples / total_train : 0);
		fmt_rate(bst, sizeof bst, best_tput);
		if (saved_best)
			ncf_info("best hr@%u %.4f (ndcg@%u %.4f) at epoch %u, saved in %s; latest state "
				 "in %s",
				 r.topk, r.ck.best_hr, r.topk, r.ck.best_ndcg, r.ck.best_epoch, r.output,
				 r.checkpoint);
		else
			ncf_info("best hr@%u %.4f (ndcg@%u %.4f) at epoch %u, before --resume: this run "
				 "did not improve on it, so %s was not written; latest state in %s",
				 r.topk, r.ck.best_hr, r.topk, r.ck.best_ndcg, r.ck.best_epoch, r.output,
				 r.checkpoint);
		if (threshold_epoch)
			ncf_info("reached the threshold %.4f at epoch %u after %.1f s", r.threshold,
				 threshold_epoch, t_threshold);
		else if (r.threshold >= 0)
			ncf_info("did not reach the threshold %.4f", r.threshold);
		ncf_info("train throughput: mean %s samples/s, best %s samples/s over %u epoch%s "
			 "(%.1f s)",
			 mean, bst, epochs_run, epochs_run == 1 ? "" : "s", total_train);
		if (r.dist.size > 1) {
			char per[16];
			fmt_rate(per, sizeof per,
				 total_train > 0 ? (double)total_samples / total_train / r.dist.size : 0);
			ncf_info("%d ranks: %s samples/s per rank; %.1f%% of training time in the "
				 "gradient all-reduce",
				 r.dist.size, per,
				 total_train > 0 ? 100.0 * r.dist.allreduce_seconds / total_train : 0.0);
		}
	}
	return run_end(&r, mask, default_ckpt, status);
}
