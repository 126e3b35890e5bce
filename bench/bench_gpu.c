/*
 * bench_gpu - training and evaluation speed of the cuda backend, per
 * precision, on a cache (for the speed bars below: ncf-prep --synthetic ml-20m):
 * samples/s at the given batch (2^20, NVIDIA's), seconds for one whole epoch
 * (every step of it, negative sampling and shuffle included, since the
 * backend generates the sample stream itself), seconds to rank all users'
 * test items among their candidates, and the achieved fraction of the GPU's
 * memory bandwidth and matrix rate.  Prints NVIDIA's training table (GPUs,
 * batch size per GPU, throughput in TF32 and mixed precision, speedup), a
 * table per precision, and key<TAB>value lines.
 *
 *   bench_gpu CACHE [--batch N] [--steps N] [--warmup N] [--precisions LIST]
 *                   [--no-epoch] [-v]
 *   bench_gpu --cost SHAPE [--precision P] [--batch-size N] [--dense fused|lt|plain|LIST]
 *                   [--dropout P] [-v]
 *   bench_gpu --device [--copy-bytes N]
 *
 * --cost: no GPU needed.  The cost model of one training step at NVIDIA's
 * model shape on SHAPE (a synthetic data set name of ncf-prep, e.g. ml-20m,
 * ml-20mx4: its users, items and training positives) as key<TAB>value
 * lines: bytes_per_step, flops_per_step, launches_per_step (kernels, GEMMs,
 * memsets and the sort's launches), the samples/s that moving those bytes
 * at the model machine's bandwidth would allow (bandwidth_bound_samples_per_s,
 * also under its older name samples_per_s_at_bandwidth; bandwidth_GBs), and
 * the model's prediction: predicted_step_us and predicted_samples_per_s,
 * each launch's time the largest of its bytes, FLOPs, latency (the bytes it
 * keeps in flight), dependent chain and instruction issue terms plus a
 * launch gap, summed; the model's machine and figures follow (model_*: the
 * GPU's own where one is usable, NCF_CUDA_BANDWIDTH's bandwidth where it is
 * set, else the reference machine, an H200; kernels/cuda/cost.cu states
 * them), and the prediction on each named machine, whatever this one is
 * (predicted_step_us_H100, _H200 and predicted_samples_per_s_ of each, from
 * their reference figures); with -v one line per launch
 * (launch<TAB>N<TAB>kind<TAB>name<TAB>bytes<TAB>flops<TAB>predicted_us<TAB>
 * bound, then per named machine<TAB>"NAME us bound issue us", bound the
 * term that binds: bytes, flops, latency, chain, issue or launch; issue
 * the instruction-issue term of the tensor-core kernels, 0 elsewhere).  The
 * backend's step code runs dry and every launcher notes what it would move
 * (ncf_cuda_step_cost, kernels/cuda/cost.cuh), so the count follows the
 * code.  --dense: the dense layers' implementations, as NCF_CUDA_DENSE
 * (one name for all, or one per layer 2..L; default: NCF_CUDA_DENSE, else
 * the fixed order a step takes without timing, fused where the widths
 * allow), printed as dense_layer_K lines.  A benchmark run prints each
 * precision's choice (the backend's dense_layer_K lines: which, and the
 * times that chose it); with -v the backend also says on stderr what it
 * says at ncf-train's -v (each dense layer's choice as it is made, how the
 * training steps ran).
 *
 * --device: the GPU the cost model describes (name, SMs, L2, shared memory
 * per SM, clock, the datasheet's bandwidth: model_* and datasheet_* lines)
 * and a device-to-device copy of N bytes (default 256 MiB) timed now:
 * copy_bandwidth_GBs, bytes read and written per second, the best of five
 * (scripts/gpu-check.sh passes it to every later stage as
 * NCF_CUDA_BANDWIDTH).
 *
 * LIST: comma-separated fp32, tf32, bf16, fp16 (default tf32,bf16,fp16,fp32).
 * Fractions of peak: bytes and matrix FLOPs per step are the backend's own
 * count (gpu_step_cost: its step code run dry, each launch noting what it
 * moves, as --cost prints it), the peaks are the cost model's machine's
 * (gpu_peak_rates): the bandwidth a device-to-device copy reaches (measured;
 * the datasheet's, memory clock x bus width, is printed beside it) and the
 * datasheet's matrix FLOP per SM per clock times the device's SMs and clock.
 * How the timed steps ran: PREC_graph_replays (as their CUDA graph),
 * PREC_plain_steps (launch by launch) and PREC_graph_captures; the first
 * step (uncaptured), NCF_CUDA_GRAPH=0 or a capture that failed shows as plain
 * steps, so a samples/s is never taken for the graph's when it is not.
 * With NCF_CUDA_PROFILE=1 the backend also prints the time of every launch
 * of a step as each precision finishes (the step then runs without its
 * graph, so the samples/s are those of plain launches).  The cuda backend
 * is the module kernels/module.h opens; without it, or without a usable GPU,
 * bench_gpu says so and exits 0 (--cost needs only the module).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_opts.h"
#include "cache.h"
#include "cli.h"
#include "err.h"
#include "evaluate.h"
#include "model.h"
#include "module.h"
#include "ncf_hd.h"
#include "synth.h"
#include "usage.h"
#include "gpu_cost.h"

struct result {
	enum ncf_precision prec;
	int done;
	double sps, step_s, epoch_s, eval_s, hr;
	double bw_frac, mx_frac, eval_bw_frac;
	struct ncf_cuda_peak pk;
	struct ncf_cuda_graphs graphs; /* how the timed steps ran */
};

/* b - a, field by field. */
static struct ncf_cuda_graphs graphs_since(const struct ncf_cuda_graphs *a,
					   const struct ncf_cuda_graphs *b)
{
	struct ncf_cuda_graphs d = *b;
	d.captures -= a->captures;
	d.instantiations -= a->instantiations;
	d.replays -= a->replays;
	d.plain -= a->plain;
	return d;
}

static int bench_one(const struct ncf_cache *cache, enum ncf_precision prec, uint64_t batch,
		     int warmup, int steps, int epoch, const float *params, struct result *r)
{
	struct ncf_shape shape;
	ncf_shape_nvidia(&shape, cache->users, cache->items);
	struct ncf_hparams hp;
	ncf_hparams_nvidia(&hp);
	hp.batch = batch;
	struct ncf_dist dist = {.rank = 0, .size = 1, .local_size = 1};
	struct ncf_backend be;
	uint8_t *mask = NULL;
	memset(r, 0, sizeof *r);
	r->prec = prec;
	if (ncf_backend_open(&be, NCF_DEVICE_CUDA, &shape, &hp, prec, 0, &dist) != 0)
		return -1;
	int rc = -1;
	if (ncf_backend_set_state(&be, params, NULL, NULL) ||
	    ncf_backend_load_cache(&be, cache, &mask, 1) || gpu_peak_rates(&be, &r->pk))
		goto out;
	uint64_t S = ncf_epoch_samples((uint64_t)cache->train_positives, hp.negatives,
				       cache->train_negatives);
	uint64_t pos = 0;
	double loss, t;
	/* as ncf-train does on a GPU: the losses stay on the device until
	 * they are taken (no wait per step) */
	for (int w = 0; w < warmup; w++, pos = (pos + batch) % S)
		if (ncf_backend_train_step(&be, 0, pos, batch < S - pos ? batch : S - pos, NULL))
			goto out;
	if (ncf_backend_take_loss(&be, &loss))
		goto out;
	ncf_backend_describe(&be, stdout); /* the dense layers' choice among them */
	const struct ncf_cuda_api *api = ncf_cuda_load(NULL, 0);
	struct ncf_cuda_graphs g0, g1;
	api->graph_counts(&be, &g0);
	uint64_t done = 0;
	t = ncf_now();
	for (int k = 0; k < steps; k++) {
		uint64_t n = batch < S - pos ? batch : S - pos;
		if (ncf_backend_train_step(&be, 0, pos, n, NULL))
			goto out;
		done += n;
		pos = (pos + n) % S;
	}
	if (ncf_backend_take_loss(&be, &loss))
		goto out;
	t = ncf_now() - t;
	api->graph_counts(&be, &g1);
	r->graphs = graphs_since(&g0, &g1);
	r->sps = (double)done / t;
	r->step_s = t / steps;
	double bytes, flops;
	if (gpu_step_cost(&be, cache->train_positives, &bytes, &flops))
		goto out;
	r->bw_frac = r->pk.mem_bytes_s > 0 ? bytes / r->step_s / r->pk.mem_bytes_s : 0;
	r->mx_frac = r->pk.matrix_flops > 0 ? flops / r->step_s / r->pk.matrix_flops : 0;
	if (epoch) {
		t = ncf_now();
		for (uint64_t p = 0; p < S; p += batch)
			if (ncf_backend_train_step(&be, 1, p, batch < S - p ? batch : S - p, NULL))
				goto out;
		if (ncf_backend_take_loss(&be, &loss))
			goto out;
		r->epoch_s = ncf_now() - t;
	}
	double ndcg;
	if (ncf_evaluate(&be, cache, 10, &r->hr, &ndcg)) /* warm-up: tables, buffers */
		goto out;
	t = ncf_now();
	if (ncf_evaluate(&be, cache, 10, &r->hr, &ndcg))
		goto out;
	r->eval_s = ncf_now() - t;
	gpu_eval_cost(&be, (uint64_t)cache->users * (cache->eval_negatives + 1), &bytes, &flops);
	r->eval_bw_frac = r->pk.mem_bytes_s > 0 ? bytes / r->eval_s / r->pk.mem_bytes_s : 0;
	r->done = 1;
	rc = 0;
out:
	ncf_backend_close(&be);
	free(mask);
	return rc;
}

/* bench_gpu --cost: the cost model of one step (see the top).  Returns the
 * exit status. */
static int cost_main(const char *spec, enum ncf_precision prec, uint64_t batch, const char *dense,
		     float dropout, int verbose)
{
	struct prep_synth syn;
	if (prep_synth_init(&syn, spec, 1) != 0) {
		ncf_error("--cost: '%s' is not a synthetic data set (%s, optionally xSCALE)", spec,
			  prep_synth_shapes());
		return 2;
	}
	struct ncf_shape shape;
	ncf_shape_nvidia(&shape, syn.users, syn.items);
	int64_t positives = (int64_t)syn.ratings - (int64_t)syn.users; /* leave-one-out */
	prep_synth_free(&syn);
	struct ncf_hparams hp;
	ncf_hparams_nvidia(&hp);
	hp.dropout = dropout;
	hp.batch = batch;
	if (prec == NCF_PRECISION_DEFAULT)
		prec = NCF_PRECISION_TF32;
	char why[1024];
	const struct ncf_cuda_api *api = ncf_cuda_load(why, sizeof why);
	if (!api) {
		ncf_error("--cost needs the cuda module: %s", why);
		return 3;
	}
	if (!dense || !*dense)
		dense = getenv("NCF_CUDA_DENSE"); /* the pins a run would take */
	struct ncf_cuda_machine mach;
	if (api->machine(&mach) != 0)
		return 1;
	struct ncf_cuda_cost *c = ncf_xcalloc(1, sizeof *c);
	if (api->step_cost(&shape, &hp, prec, dense, positives, c) != 0) {
		free(c);
		return 1;
	}
	printf("shape\t%s\nusers\t%u\nitems\t%u\npositives\t%lld\nprecision\t%s\n"
	       "batch\t%llu\ndropout\t%g\n",
	       spec, shape.users, shape.items, (long long)positives, ncf_precision_name(prec),
	       (unsigned long long)batch, (double)dropout);
	for (uint32_t k = 2; k < shape.n_layers; k++)
		printf("dense_layer_%u\t%s\n", k, c->dense[k] ? c->dense[k] : "-");
	printf("step_as_one_cuda_graph\tyes\n");
	double bw_sps = c->bytes > 0 ? mach.bandwidth / c->bytes * (double)batch : 0;
	printf("bytes_per_step\t%.0f\nflops_per_step\t%.0f\nlaunches_per_step\t%u\n"
	       "kernels_per_step\t%u\ngemms_per_step\t%u\nmemsets_per_step\t%u\n"
	       "sort_launches_per_step\t%u\ncopies_per_step\t%u\nbytes_per_sample\t%.1f\n"
	       "bandwidth_GBs\t%.0f\nsamples_per_s_at_bandwidth\t%.0f\n"
	       "bandwidth_bound_samples_per_s\t%.0f\npredicted_step_us\t%.1f\n"
	       "predicted_samples_per_s\t%.0f\n",
	       c->bytes, c->flops, c->launches, c->kernels, c->gemms, c->memsets, c->sorts,
	       c->copies, c->bytes / (double)batch, mach.bandwidth / 1e9, bw_sps, bw_sps,
	       c->predicted_s * 1e6, c->predicted_s > 0 ? (double)batch / c->predicted_s : 0);
	for (int j = 0; j < NCF_CUDA_MACHINES; j++)
		printf("predicted_step_us_%s\t%.1f\npredicted_samples_per_s_%s\t%.0f\n",
		       c->machine[j], c->machine_s[j] * 1e6, c->machine[j],
		       c->machine_s[j] > 0 ? (double)batch / c->machine_s[j] : 0);
	api->cost_model(stdout);
	for (unsigned k = 0; verbose && k < c->n; k++) {
		printf("launch\t%u\t%s\t%s\t%.0f\t%.0f\t%.2f\t%s", k + 1, c->item[k].kind,
		       c->item[k].name, c->item[k].bytes, c->item[k].flops,
		       c->item[k].predicted_s * 1e6, c->item[k].bound);
		for (int j = 0; j < NCF_CUDA_MACHINES; j++)
			printf("\t%s %.2f %s issue %.2f", c->machine[j], c->item[k].machine_s[j] * 1e6,
			       c->item[k].machine_bound[j], c->item[k].issue_s[j] * 1e6);
		printf("\n");
	}
	if (c->dropped)
		printf("launches_not_listed\t%u\n", c->dropped);
	free(c);
	return 0;
}

/* bench_gpu --device: the model's machine and a copy timed now.  Returns
 * the exit status. */
static int device_main(uint64_t bytes)
{
	char why[1024];
	const struct ncf_cuda_api *api = ncf_cuda_load(why, sizeof why);
	if (!api) {
		ncf_error("--device needs the cuda module: %s", why);
		return 3;
	}
	if (!api->usable(why, sizeof why)) {
		ncf_error("--device: no usable GPU: %s", why);
		return 3;
	}
	double bw = 0;
	if (api->copy_bandwidth((size_t)bytes, &bw) != 0)
		return 1;
	api->cost_model(stdout);
	printf("copy_bytes\t%llu\ncopy_bandwidth_GBs\t%.0f\n", (unsigned long long)bytes,
	       bw / 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	ncf_set_progname("bench_gpu");
	ncf_synopsis = "bench_gpu CACHE [--batch N] [--steps N] [--warmup N] [--precisions LIST] [--no-epoch] [-v]\n"
		       "       bench_gpu --cost SHAPE [--precision P] [--batch-size N] [--dense fused|lt|plain|LIST] [--dropout P] [-v]\n"
		       "       bench_gpu --device [--copy-bytes N]";
	ncf_verbosity = 1;
	uint64_t batch = 1u << 20;
	int steps = 20, warmup = 3, epoch = 1, verbose = 0, device = 0;
	uint64_t copy_bytes = (uint64_t)256 << 20;
	const char *list = "tf32,bf16,fp16,fp32", *cost = NULL, *dense = NULL;
	enum ncf_precision prec = NCF_PRECISION_DEFAULT;
	float dropout = 0.5f;
	static const struct option opts[] = {
		{"batch", 1, 0, 'b'},	   {"steps", 1, 0, 's'},      {"warmup", 1, 0, 'w'},
		{"precisions", 1, 0, 'p'}, {"no-epoch", 0, 0, 'E'},   {"cost", 1, 0, 'c'},
		{"precision", 1, 0, 'P'},  {"batch-size", 1, 0, 'b'}, {"dense", 1, 0, 'x'},
		{"dropout", 1, 0, 'd'},	   {"verbose", 0, 0, 'v'},    {"device", 0, 0, 'D'},
		{"copy-bytes", 1, 0, 'B'}, {"help", 0, 0, 'h'},	   {0, 0, 0, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
		switch (c) {
		case 'b': batch = (uint64_t)ncf_opt_int("--batch", optarg, 1, 1ll << 30); break;
		case 's': steps = (int)ncf_opt_int("--steps", optarg, 1, 100000); break;
		case 'w': warmup = (int)ncf_opt_int("--warmup", optarg, 0, 100000); break;
		case 'p': list = optarg; break;
		case 'E': epoch = 0; break;
		case 'c': cost = optarg; break;
		case 'P':
			if (ncf_precision_parse(optarg, &prec))
				ncf_usage_error("--precision: '%s' is not fp32, tf32, bf16 or fp16",
						optarg);
			break;
		case 'x': dense = optarg; break;
		case 'd': dropout = (float)ncf_opt_real("--dropout", optarg, 0, 0, 1, 1); break;
		case 'v': verbose = 1; break;
		case 'D': device = 1; break;
		case 'B': copy_bytes = (uint64_t)ncf_opt_int("--copy-bytes", optarg, 1 << 20, 1ll << 36); break;
		case 'h': ncf_usage_help();
		default: ncf_usage_exit();
		}
	}
	if (device) {
		if (optind != argc)
			ncf_usage_error("--device takes no cache ('%s' is extra)", argv[optind]);
		return device_main(copy_bytes);
	}
	if (cost) {
		if (optind != argc)
			ncf_usage_error("--cost takes a shape, not a cache ('%s' is extra)", argv[optind]);
		return cost_main(cost, prec, batch, dense, dropout, verbose);
	}
	if (optind == argc)
		ncf_usage_error("no cache given (make one: ncf-prep -o ml-20m.ncfc --synthetic ml-20m)");
	if (optind != argc - 1)
		ncf_usage_error("one cache only ('%s' is extra)", argv[argc - 1]);
	if (verbose)
		ncf_verbosity = 3; /* the backend's -v lines */
	char why[1024];
	const struct ncf_cuda_api *api = ncf_cuda_load(why, sizeof why);
	if (!api) {
		printf("gpu\tno cuda module: %s\n", why);
		return 0;
	}
	if (!api->usable(why, sizeof why)) {
		printf("gpu\tno usable GPU: %s\n", why);
		return 0;
	}
	struct ncf_cache cache;
	if (ncf_cache_read(argv[optind], &cache) != 0)
		return 1;
	struct ncf_shape shape;
	ncf_shape_nvidia(&shape, cache.users, cache.items);
	struct ncf_layout L;
	ncf_layout_make(&shape, &L);
	float *params = ncf_xmalloc(L.total * sizeof(float));
	ncf_model_init(&shape, &L, 1, params);

	struct result res[8];
	int nres = 0, failed = 0;
	char *copy = ncf_xstrdup(list), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok && nres < 8; tok = strtok_r(NULL, ",", &save)) {
		enum ncf_precision p;
		if (ncf_precision_parse(tok, &p))
			ncf_usage_error("--precisions: '%s' is not fp32, tf32, bf16 or fp16", tok);
		double t0 = ncf_now();
		if (bench_one(&cache, p, batch, warmup, steps, epoch, params, &res[nres]) != 0) {
			ncf_error("%s: the benchmark failed", tok);
			failed = 1;
		}
		fprintf(stderr, "bench_gpu: %s done in %.1f s\n", tok, ncf_now() - t0);
		nres++;
	}
	free(copy);

	const struct result *tf32 = NULL, *mixed = NULL;
	for (int k = 0; k < nres; k++) {
		if (!res[k].done)
			continue;
		if (res[k].prec == NCF_PRECISION_TF32)
			tf32 = &res[k];
		if (res[k].prec == NCF_PRECISION_BF16 || (!mixed && res[k].prec == NCF_PRECISION_FP16))
			mixed = &res[k];
	}
	const struct ncf_cuda_peak *pk = nres && res[0].done ? &res[0].pk : NULL;
	struct ncf_hparams nv;
	ncf_hparams_nvidia(&nv);
	uint64_t S = ncf_epoch_samples((uint64_t)cache.train_positives, nv.negatives,
				       cache.train_negatives);
	printf("\nNCF training, %s, %u users x %u items, %llu samples per epoch, batch %llu\n\n",
	       pk ? pk->name : "GPU", cache.users, cache.items, (unsigned long long)S,
	       (unsigned long long)batch);
	printf("| GPUs | Batch size / GPU | Throughput - TF32 (samples/s) | Throughput - mixed "
	       "precision (samples/s) | Throughput speedup (mixed precision - TF32) |\n");
	printf("|------|------------------|-------------------------------|--------------------"
	       "-------------------|----------------------------------------------|\n");
	printf("| 1 | %llu | %.4gM | %.4gM (%s) | %.2f |\n\n", (unsigned long long)batch,
	       tf32 ? tf32->sps / 1e6 : 0, mixed ? mixed->sps / 1e6 : 0,
	       mixed ? ncf_precision_name(mixed->prec) : "-",
	       tf32 && mixed && tf32->sps > 0 ? mixed->sps / tf32->sps : 0);
	printf("| precision | samples/s | steps as CUDA graph | time per step (ms) | time per "
	       "epoch (s) | eval %u x %u (ms) | memory bandwidth used | matrix rate used | HR@10 "
	       "after |\n",
	       cache.users, cache.eval_negatives + 1);
	printf("|-----------|-----------|---------------------|--------------------|------------"
	       "--------|------------------|-----------------------|------------------|-------------"
	       "|\n");
	for (int k = 0; k < nres; k++) {
		const struct result *r = &res[k];
		if (!r->done) {
			printf("| %s | failed | | | | | | | |\n", ncf_precision_name(r->prec));
			continue;
		}
		printf("| %s | %.4gM | %llu of %d%s | %.3f | %.3f | %.1f | %.0f%% | %.0f%% | %.4f |\n",
		       ncf_precision_name(r->prec), r->sps / 1e6,
		       (unsigned long long)r->graphs.replays, steps,
		       r->graphs.failed ? " (capture failed)" : "", r->step_s * 1e3, r->epoch_s,
		       r->eval_s * 1e3, 100 * r->bw_frac, 100 * r->mx_frac, r->hr);
	}
	printf("\n");
	if (pk)
		printf("gpu\t%s (compute capability %d.%d, %d SMs)\npeak_memory_bandwidth_GBs\t%.0f\n"
		       "memory_bandwidth_GBs\t%.0f\nmemory_bandwidth_source\t%s\nclock_MHz\t%.0f\n"
		       "matrix_peak_source\t%s\n",
		       pk->name, pk->cc_major, pk->cc_minor, pk->sms, pk->mem_datasheet / 1e9,
		       pk->mem_bytes_s / 1e9, pk->mem_source, pk->clock_hz / 1e6, pk->matrix_source);
	for (int k = 0; k < nres; k++) {
		const struct result *r = &res[k];
		const char *n = ncf_precision_name(r->prec);
		if (!r->done)
			continue;
		printf("%s_samples_per_s\t%.0f\n%s_seconds_per_step\t%.5f\n%s_epoch_seconds\t%.3f\n"
		       "%s_eval_seconds\t%.4f\n%s_memory_bandwidth_fraction\t%.3f\n"
		       "%s_matrix_peak_TFLOPs\t%.1f\n%s_matrix_rate_fraction\t%.3f\n"
		       "%s_eval_memory_bandwidth_fraction\t%.3f\n",
		       n, r->sps, n, r->step_s, n, r->epoch_s, n, r->eval_s, n, r->bw_frac, n,
		       r->pk.matrix_flops / 1e12, n, r->mx_frac, n, r->eval_bw_frac);
		printf("%s_graph_replays\t%llu\n%s_plain_steps\t%llu\n%s_graph_captures\t%llu\n"
		       "%s_graph_capture_failed\t%s\n",
		       n, (unsigned long long)r->graphs.replays, n, (unsigned long long)r->graphs.plain,
		       n, (unsigned long long)r->graphs.captures, n, r->graphs.failed ? "yes" : "no");
	}
	/* the bars the cuda backend is held to: an H200, batch 2^20, ml-20m-shaped data */
	if (cache.users != 138493 || batch != (1u << 20)) {
		printf("bars	n/a (they are for ml-20m-shaped data at batch 2^20)\n");
		free(params);
		ncf_cache_free(&cache);
		return failed;
	}
	const struct result *bf = NULL;
	double best_epoch = 0, best_eval = 0;
	for (int k = 0; k < nres; k++) {
		if (!res[k].done)
			continue;
		if (res[k].prec == NCF_PRECISION_BF16)
			bf = &res[k];
		if (res[k].epoch_s > 0 && (best_epoch == 0 || res[k].epoch_s < best_epoch))
			best_epoch = res[k].epoch_s;
		if (best_eval == 0 || res[k].eval_s < best_eval)
			best_eval = res[k].eval_s;
	}
	printf("bar_bf16_200M_samples_per_s\t%s\n", !bf ? "not run" : bf->sps >= 200e6 ? "met" : "missed");
	/* the fused step's bar, twice what cuBLAS's GEMMs and plain passes reached */
	printf("bar_bf16_400M_samples_per_s\t%s\n", !bf ? "not run" : bf->sps >= 400e6 ? "met" : "missed");
	printf("bar_tf32_120M_samples_per_s\t%s\n",
	       !tf32 ? "not run" : tf32->sps >= 120e6 ? "met" : "missed");
	printf("bar_epoch_0.5_s\t%s (%.3f s)\n",
	       best_epoch == 0 ? "not run" : best_epoch <= 0.5 ? "met" : "missed", best_epoch);
	printf("bar_eval_50_ms\t%s (%.1f ms)\n",
	       best_eval == 0 ? "not run" : best_eval <= 0.05 ? "met" : "missed", best_eval * 1e3);
	free(params);
	ncf_cache_free(&cache);
	return failed;
}
