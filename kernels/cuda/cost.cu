/*
 * cost.cu - the cost recorder and the per-launch profile (cost.cuh).  The
 * cost model of a step (ncf_cuda_step_cost, cuda.h) is the backend's own
 * step code run dry with a recorder active (backend.cu).
 */
#include <math.h>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.cuh"
#include "cuda.h"
#include "kernels.cuh"

namespace NCF_CUDA_NS {

thread_local struct cost_rec *cost_active;

static const char *const kind_name[COST_KINDS] = {"kernel", "gemm", "memset", "copy", "sort"};

static int note(const char *call, int kind, const char *name, double bytes, double flops,
		const struct cost_shape *shape)
{
	struct cost_rec *r = cost_active;
	if (r->events && r->n < COST_MAX_ITEMS)
		cudaEventRecord(r->events[r->n], r->stream);
	r->count[kind]++;
	r->bytes += bytes;
	r->flops += flops;
	if (r->n < COST_MAX_ITEMS) {
		struct cost_item *it = &r->item[r->n++];
		memset(it, 0, sizeof *it);
		it->name = name;
		it->call = call;
		it->kind = kind;
		it->bytes = bytes;
		it->flops = flops;
		if (shape) {
			it->shaped = 1;
			it->shape = *shape;
		}
	} else {
		r->dropped++;
	}
	return r->dry;
}

int cost_note(int kind, const char *name, double bytes, double flops,
	      const struct cost_shape *shape)
{
	return note(NULL, kind, name, bytes, flops, shape);
}

int cost_note_in(const char *call, int kind, const char *name, double bytes, double flops)
{
	return note(call, kind, name, bytes, flops, NULL);
}

/* ---- the machine -------------------------------------------------------------- */

/*
 * The model's machine (struct ncf_cuda_machine, cuda.h): the device's own
 * figures where a GPU is usable, else the reference machine; beside it the
 * named machines (H100 and H200 SXM) whose prediction bench_gpu --cost
 * prints whatever this machine is, from their reference figures.  What is
 * read, what is measured, what is assumed:
 *  - read from the device: SMs, L2, shared memory per SM and per block,
 *    the SM clock and the memory clock and bus width (the datasheet's
 *    bandwidth: their product, double data rate);
 *  - measured: the bandwidth, a device-to-device copy's bytes read and
 *    written per second: NCF_CUDA_BANDWIDTH (GB/s) when set
 *    (scripts/gpu-check.sh times one at its start and passes it on, so
 *    that every stage models the same machine), else a copy timed here
 *    (256 MiB, the best of 5); where that cannot run, 0.9 of the
 *    datasheet's (a copy reached 3.0 of an H100's 3.35 TB/s and 4.3 of an
 *    H200's 4.8 in the device tool's notes);
 *  - the datasheet: dense FLOP per SM per clock (A100, compute
 *    capability 8.0: 2048 bf16/fp16, 1024 TF32 and 128 fp32 FMA FLOP;
 *    H100/H200, 9.0: 4096, 2048 and 256; another architecture is taken
 *    to be 9.0's and said so), times SMs and clock: the peaks; an SM
 *    issues one warp instruction a clock in each of its four quarters;
 *  - assumed: cuBLAS's large products reach 0.74 of that peak (790
 *    TFLOP/s bf16 of an H200's 1070 at 1980 MHz, 798 of an H100's, in
 *    the device tool's notes); our mma.sync tiles reach half of cuBLAS's
 *    rate (Hopper's wgmma is cuBLAS's); the backend is built with
 *    -fmad=false, so its own fp32 kernels issue a multiply and an add:
 *    half the FMA peak; a load's round trip to device memory under load
 *    takes 0.6 us; a launch inside a CUDA graph costs 1.5 us beyond its
 *    work (the drain of its last wave and the start of the next kernel);
 *    cuBLAS's GEMMs and CUB's sort passes keep memory busy (no latency
 *    bound); a copy to the host crosses PCIe at 25 GB/s after 10 us.
 * The named machines, as lent here (the device tool's notes): an H200 SXM,
 * 132 SMs, 60 MiB of L2, memory at 3201 MHz on 6144 bits, a copy at
 * 4.3 TB/s (2026-10-28 and 11-04); an H100 SXM 80GB, 132 SMs, 50 MiB of L2,
 * memory at 2619 MHz on 5120 bits, a copy at 3.0 TB/s (2026-11-13); both
 * 228 KiB of shared memory per SM and 1980 MHz (the clock read under load
 * on the H200; the H100's datasheet maximum).  The H200 is the reference:
 * the model's machine where no GPU is.  A launch's grid and waves are
 * those the launchers size for the model's machine (132 SMs without a
 * GPU, as both named machines have).  The first GPU run measures each
 * launch against the model (NCF_CUDA_PROFILE).
 */
static const double GEMM_SHARE = 0.74, WMMA_SHARE = 0.5, LATENCY = 0.6e-6, GAP = 1.5e-6,
		    PCIE = 25e9, PCIE_LATENCY = 10e-6, COPY_SHARE = 0.9;

/* The named machines' reference figures (the H200 first: the reference). */
static const struct named_figures {
	const char *name, *full;
	double l2_mib, mem_mhz, bus_bits, copy_tbs;
	const char *seen;
} named[NCF_CUDA_MACHINES] = {
	{"H200", "NVIDIA H200", 60, 3201, 6144, 4.3, "2026-10-28 and 11-04"},
	{"H100", "NVIDIA H100 80GB HBM3", 50, 2619, 5120, 3.0, "2026-11-13"},
};

/* The datasheet's dense FLOP per SM per clock of compute capability
 * major.minor: bf16/fp16 tensor cores, TF32, fp32 FMA.  Returns 1 when
 * the table has it, else 0 and 9.0's. */
static int per_sm_clock(int major, int minor, double *bf, double *tf, double *fp)
{
	int known = (major == 8 && minor == 0) || major == 9;
	*bf = major == 8 && minor == 0 ? 2048 : 4096;
	*tf = *bf / 2;
	*fp = *bf / 16;
	return known;
}

/* The peaks of m from its SMs and clock, and the model's assumptions. */
static void machine_complete(struct ncf_cuda_machine *m)
{
	double bf, tf, fp;
	per_sm_clock(m->cc_major, m->cc_minor, &bf, &tf, &fp);
	double sm_hz = m->sms * m->clock_hz;
	m->peak_bf16 = bf * sm_hz;
	m->peak_tf32 = tf * sm_hz;
	m->peak_fp32 = fp * sm_hz;
	m->gemm_share = GEMM_SHARE;
	m->wmma_share = WMMA_SHARE;
	m->latency_s = LATENCY;
	m->launch_gap_s = GAP;
	m->pcie_bytes_s = PCIE;
	m->pcie_latency_s = PCIE_LATENCY;
}

/* m = named machine k's reference figures (complete). */
static void machine_named(int k, struct ncf_cuda_machine *m)
{
	const struct named_figures *n = &named[k];
	memset(m, 0, sizeof *m);
	snprintf(m->name, sizeof m->name, "%s (reference)", n->full);
	snprintf(m->source, sizeof m->source,
		 "reference: no GPU here, an %s SXM as measured on the GPU machines lent here",
		 n->name);
	m->cc_major = 9;
	m->cc_minor = 0;
	m->sms = 132;
	m->l2_bytes = n->l2_mib * (1 << 20);
	m->smem_sm_bytes = 233472;
	m->smem_block_bytes = 232448;
	m->clock_hz = 1980e6;
	m->bandwidth_datasheet = 2.0 * n->mem_mhz * 1e6 * n->bus_bits / 8;
	m->bandwidth = n->copy_tbs * 1e12;
	snprintf(m->bandwidth_source, sizeof m->bandwidth_source,
		 "reference: a device-to-device copy on an %s here (%s)", n->name, n->seen);
	machine_complete(m);
}

/* The named machines, complete, built once. */
static const struct ncf_cuda_machine *named_machine(int k)
{
	static struct ncf_cuda_machine m[NCF_CUDA_MACHINES];
	static std::once_flag once;
	std::call_once(once, [] {
		for (int j = 0; j < NCF_CUDA_MACHINES; j++)
			machine_named(j, &m[j]);
	});
	return &m[k];
}

/* NCF_CUDA_BANDWIDTH in bytes/s (given in GB/s), or 0 when unset; -1 when
 * it is not a number of GB/s. */
static double env_bandwidth(void)
{
	const char *e = getenv("NCF_CUDA_BANDWIDTH");
	if (!e || !*e)
		return 0;
	char *end;
	double v = strtod(e, &end);
	if (*end || !(v > 0 && v < 1e6))
		return -1;
	return v * 1e9;
}

/* m from the device this process uses.  Returns 0, 1 (no usable GPU: the
 * caller takes the reference) or -1 (reported). */
static int machine_device(struct ncf_cuda_machine *m)
{
#ifdef NCF_CUDA_EMULATE
	(void)m;
	return 1; /* the emulated device is the CPU: nothing of a GPU to model */
#else
	int n = 0, dev = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
		cudaGetLastError(); /* no GPU is not an error here */
		return 1;
	}
	cudaDeviceProp p;
	CUDA_TRY(cudaGetDevice(&dev));
	CUDA_TRY(cudaGetDeviceProperties(&p, dev));
	int khz = 0, mem_khz = 0, bus = 0;
	CUDA_TRY(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
	CUDA_TRY(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev));
	CUDA_TRY(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev));
	snprintf(m->name, sizeof m->name, "%s", p.name);
	double bf, tf, fp;
	int known = per_sm_clock(p.major, p.minor, &bf, &tf, &fp);
	snprintf(m->source, sizeof m->source,
		 "device %d (cudaGetDeviceProperties)%s", dev,
		 known ? "" : "; its FLOP per SM per clock taken to be compute capability 9.0's");
	m->cc_major = p.major;
	m->cc_minor = p.minor;
	m->sms = p.multiProcessorCount;
	m->l2_bytes = p.l2CacheSize;
	m->smem_sm_bytes = (double)p.sharedMemPerMultiprocessor;
	m->smem_block_bytes = (double)p.sharedMemPerBlockOptin;
	m->clock_hz = khz * 1e3;
	m->bandwidth_datasheet = 2.0 * mem_khz * 1e3 * bus / 8;
	return 0;
#endif
}

static struct ncf_cuda_machine g_machine;
static int g_machine_rc;

/* m found (0), or the reference after a failure (-1, reported). */
static int machine_find(struct ncf_cuda_machine *m)
{
	memset(m, 0, sizeof *m);
	int rc = machine_device(m);
	double env = env_bandwidth();
	if (env < 0)
		ncf_error("NCF_CUDA_BANDWIDTH=%s: not a bandwidth in GB/s (a number such as 3000)",
			  getenv("NCF_CUDA_BANDWIDTH"));
	if (rc != 0 || env < 0)
		*m = *named_machine(0);
	if (rc < 0 || env < 0)
		rc = -1;
	if (env > 0) {
		m->bandwidth = env;
		snprintf(m->bandwidth_source, sizeof m->bandwidth_source,
			 "NCF_CUDA_BANDWIDTH (a copy measured before this run)");
	} else if (rc == 0 && env == 0) {
		double bw = 0;
		if (ncf_cuda_copy_bandwidth((size_t)256 << 20, &bw) == 0 && bw > 0) {
			m->bandwidth = bw;
			snprintf(m->bandwidth_source, sizeof m->bandwidth_source,
				 "a device-to-device copy of 256 MiB timed in this process");
		} else {
			m->bandwidth = COPY_SHARE * m->bandwidth_datasheet;
			snprintf(m->bandwidth_source, sizeof m->bandwidth_source,
				 "%.1f of the datasheet's (no copy could be timed)", COPY_SHARE);
		}
	}
	machine_complete(m);
	return rc < 0 ? -1 : 0;
}

/* Once, as the named machines are: the launchers ask for the machine at
 * every launch (cost_waves), so after the first a flag's read, no lock. */
int cost_machine_init(void)
{
	static std::once_flag once;
	std::call_once(once, [] { g_machine_rc = machine_find(&g_machine); });
	return g_machine_rc;
}

const struct ncf_cuda_machine *cost_machine(void)
{
	cost_machine_init(); /* a failure was reported once: the reference stands in */
	return &g_machine;
}

/* ---- the model -------------------------------------------------------------- */

/* The datasheet's dense FLOP rate of machine m in precision prec. */
static double peak_of(const struct ncf_cuda_machine *m, int prec)
{
	return prec == NCF_PRECISION_BF16 || prec == NCF_PRECISION_FP16 ? m->peak_bf16
	       : prec == NCF_PRECISION_TF32				 ? m->peak_tf32
									 : m->peak_fp32;
}

/* The matrix FLOP rate of a GEMM (cuBLAS) or a kernel in precision prec
 * on machine m. */
static double matrix_rate(const struct ncf_cuda_machine *m, int prec, int kind, int mma)
{
	double dense = m->gemm_share * peak_of(m, prec);
	if (kind == COST_GEMM)
		return dense;
	if (mma && prec != NCF_PRECISION_FP32) /* fp32: MMA_F32, no tensor cores */
		return dense * m->wmma_share;
	return m->peak_fp32 / 2; /* no FMA contraction */
}

/* The instruction-issue term of launch it on machine m: the warp
 * instructions of its matrix loops against four a clock per SM. */
static double issue_term(const struct ncf_cuda_machine *m, const struct cost_item *it)
{
	return it->shaped ? it->shape.issue / (m->sms * 4 * m->clock_hz) : 0;
}

/* The time of launch it on machine m: the largest of its terms plus the
 * launch gap; *bound names the term that binds. */
static double predict_on(const struct ncf_cuda_machine *m, const struct cost_item *it, int prec,
			 const char **bound)
{
	static const char *const names[] = {"bytes", "flops", "latency", "chain", "issue", "launch"};
	double t[5] = {0, 0, 0, 0, 0};
	if (it->kind == COST_COPY) {
		*bound = "launch";
		return m->pcie_latency_s + it->bytes / m->pcie_bytes_s;
	}
	t[0] = it->bytes / m->bandwidth;
	if (it->flops > 0)
		t[1] = it->flops / matrix_rate(m, prec, it->kind, it->shaped && it->shape.mma);
	if (it->shaped) {
		const struct cost_shape *c = &it->shape;
		double most = c->resident * m->sms;
		double blocks = c->blocks < most ? c->blocks : most;
		double inflight = blocks * c->threads * c->inflight;
		if (inflight > 0)
			t[2] = (it->bytes + c->reread) * m->latency_s / inflight;
		t[3] = c->chain * m->latency_s;
		t[4] = issue_term(m, it);
	}
	int k = 5;
	double best = 0;
	for (int j = 0; j < 5; j++)
		if (t[j] > best) {
			best = t[j];
			k = j;
		}
	*bound = names[k];
	return best + m->launch_gap_s;
}

double cost_predict(const struct cost_item *it, int prec, const char **bound)
{
	return predict_on(cost_machine(), it, prec, bound);
}

double cost_waves(double blocks, double resident)
{
	double per = resident * cost_machine()->sms;
	return per > 0 ? ceil(blocks / per) : 1;
}

void cost_model_describe(FILE *out)
{
	const struct ncf_cuda_machine *m = cost_machine();
	fprintf(out, "model_machine\t%s\nmodel_machine_source\t%s\n", m->name, m->source);
	fprintf(out, "model_compute_capability\t%d.%d\nmodel_sms\t%d\nmodel_l2_MiB\t%.1f\n"
		"model_smem_per_sm_KiB\t%.0f\nmodel_clock_MHz\t%.0f\n",
		m->cc_major, m->cc_minor, m->sms, m->l2_bytes / (1 << 20), m->smem_sm_bytes / 1024,
		m->clock_hz / 1e6);
	fprintf(out, "model_bandwidth_GBs\t%.0f\nmodel_bandwidth_source\t%s\n"
		"datasheet_bandwidth_GBs\t%.0f\n",
		m->bandwidth / 1e9, m->bandwidth_source, m->bandwidth_datasheet / 1e9);
	fprintf(out, "model_latency_us\t%.2f\nmodel_launch_gap_us\t%.2f\n"
		"model_matrix_bf16_TFLOPs\t%.0f\nmodel_matrix_tf32_TFLOPs\t%.0f\n"
		"model_fp32_TFLOPs\t%.0f\nmodel_gemm_share\t%.2f\nmodel_wmma_share\t%.2f\n"
		"model_issue_per_sm_clock\t4\n",
		m->latency_s * 1e6, m->launch_gap_s * 1e6,
		matrix_rate(m, NCF_PRECISION_BF16, COST_GEMM, 0) / 1e12,
		matrix_rate(m, NCF_PRECISION_TF32, COST_GEMM, 0) / 1e12, m->peak_fp32 / 1e12,
		m->gemm_share, m->wmma_share);
	for (int k = 0; k < NCF_CUDA_MACHINES; k++) {
		const struct ncf_cuda_machine *n = named_machine(k);
		fprintf(out, "model_%s\tbandwidth %.0f GB/s, %d SMs at %.2f GHz, bf16 %.0f TFLOP/s\n",
			named[k].name, n->bandwidth / 1e9, n->sms, n->clock_hz / 1e9,
			matrix_rate(n, NCF_PRECISION_BF16, COST_GEMM, 0) / 1e12);
	}
	mlp_issue_describe(out);
}

void cost_export(const struct cost_rec *r, struct ncf_cuda_cost *out)
{
	memset(out, 0, sizeof *out);
	for (int m = 0; m < NCF_CUDA_MACHINES; m++)
		out->machine[m] = named[m].name;
	for (unsigned k = 0; k < r->n; k++) {
		const char *bound;
		out->predicted_s += cost_predict(&r->item[k], r->prec, &bound);
		for (int m = 0; m < NCF_CUDA_MACHINES; m++)
			out->machine_s[m] += predict_on(named_machine(m), &r->item[k], r->prec, &bound);
	}
	out->bytes = r->bytes;
	out->flops = r->flops;
	out->kernels = r->count[COST_KERNEL];
	out->gemms = r->count[COST_GEMM];
	out->memsets = r->count[COST_MEMSET];
	out->copies = r->count[COST_COPY];
	out->sorts = r->count[COST_SORT];
	out->launches = out->kernels + out->gemms + out->memsets + out->sorts;
	out->dropped = r->dropped;
	out->n = r->n < NCF_CUDA_COST_ITEMS ? r->n : NCF_CUDA_COST_ITEMS;
	for (unsigned k = 0; k < out->n; k++) {
		out->item[k].name = r->item[k].name;
		out->item[k].kind = kind_name[r->item[k].kind];
		out->item[k].bytes = r->item[k].bytes;
		out->item[k].flops = r->item[k].flops;
		out->item[k].predicted_s = cost_predict(&r->item[k], r->prec, &out->item[k].bound);
		for (int m = 0; m < NCF_CUDA_MACHINES; m++) {
			const struct ncf_cuda_machine *n = named_machine(m);
			out->item[k].machine_s[m] = predict_on(n, &r->item[k], r->prec,
							       &out->item[k].machine_bound[m]);
			out->item[k].issue_s[m] = issue_term(n, &r->item[k]);
		}
	}
}

/* ---- NCF_CUDA_PROFILE ------------------------------------------------------ */

/* A row of the profile: the occ-th launch (or library call) named `name`
 * in a step (steps differ a little: the first after new parameters also
 * makes the 16-bit copy; an epoch's last step is shorter), with its sums
 * over the steps that had it. */
struct prof_row {
	const char *name;
	int kind;
	unsigned occ;
	uint64_t steps;
	double us, bytes, flops, model_us;
	const char *bound; /* what binds the model's time (a call's: its longest launch's) */
};

struct profile {
	struct cost_rec rec;	 /* this step's notes */
	int prec;		 /* the steps' precision */
	struct cost_rec *saved;	 /* the recorder active before profile_begin */
	cudaEvent_t ev[COST_MAX_ITEMS + 1];
	int have_events;
	unsigned n;		 /* rows, in the order their launches come in a step */
	struct prof_row row[COST_MAX_ITEMS];
	uint64_t steps, cut;	 /* steps added; launches past COST_MAX_ITEMS */
};

struct profile *profile_open(void)
{
	cost_machine_init(); /* now, outside any step: it may time a copy */
	struct profile *p = (struct profile *)ncf_xcalloc(1, sizeof *p);
	for (int k = 0; k <= COST_MAX_ITEMS; k++)
		if (CUDA_CHECK(cudaEventCreate(&p->ev[k])) != 0) {
			while (k-- > 0)
				cudaEventDestroy(p->ev[k]);
			free(p);
			return NULL;
		}
	p->have_events = 1;
	return p;
}

void profile_close(struct profile *p)
{
	if (!p)
		return;
	for (int k = 0; p->have_events && k <= COST_MAX_ITEMS; k++)
		cudaEventDestroy(p->ev[k]);
	free(p);
}

void profile_begin(struct profile *p, cudaStream_t s, int prec)
{
	memset(&p->rec, 0, sizeof p->rec);
	p->rec.prec = p->prec = prec;
	p->rec.events = p->ev;
	p->rec.stream = s;
	p->saved = cost_active;
	cost_active = &p->rec;
}

void profile_end(struct profile *p)
{
	struct cost_rec *r = &p->rec;
	if (r->n <= COST_MAX_ITEMS)
		cudaEventRecord(p->ev[r->n], r->stream);
	cost_active = p->saved;
}

/* The row of the occ-th launch named name of kind in this step; a new one
 * goes after row `after` (the row of the launch before it; -1: first). */
static unsigned row_of(struct profile *p, const char *name, int kind, unsigned occ,
		       unsigned after)
{
	for (unsigned k = 0; k < p->n; k++)
		if (p->row[k].occ == occ && p->row[k].kind == kind && !strcmp(p->row[k].name, name))
			return k;
	if (p->n == COST_MAX_ITEMS)
		return COST_MAX_ITEMS;
	unsigned at = after == (unsigned)-1 ? 0 : after + 1;
	memmove(&p->row[at + 1], &p->row[at], (p->n - at) * sizeof *p->row);
	memset(&p->row[at], 0, sizeof p->row[at]);
	p->row[at].name = name;
	p->row[at].kind = kind;
	p->row[at].occ = occ;
	p->n++;
	return at;
}

/* The name of item k's row: its library call's, else its own. */
static const char *row_name(const struct cost_item *it)
{
	return it->call ? it->call : it->name;
}

int profile_collect(struct profile *p)
{
	const struct cost_rec *r = &p->rec;
	unsigned prev = COST_MAX_ITEMS; /* none yet: a new row goes first */
	for (unsigned k = 0; k < r->n;) {
		const struct cost_item *it = &r->item[k];
		/* the launches k..e-1: one launch, or those of one library call */
		unsigned e = k + 1;
		while (it->call && e < r->n && r->item[e].call == it->call &&
		       r->item[e].kind == it->kind)
			e++;
		const char *name = row_name(it);
		unsigned occ = 0;
		for (unsigned j = 0; j < k; j++)
			occ += r->item[j].kind == it->kind && !strcmp(row_name(&r->item[j]), name) &&
			       (j == 0 || !r->item[j].call || r->item[j - 1].call != r->item[j].call);
		unsigned q = row_of(p, name, it->kind, occ,
				    prev == COST_MAX_ITEMS ? (unsigned)-1 : prev);
		if (q == COST_MAX_ITEMS) {
			p->cut += e - k;
			k = e;
			continue;
		}
		float ms = 0;
		CUDA_TRY(cudaEventElapsedTime(&ms, p->ev[k], p->ev[e]));
		struct prof_row *w = &p->row[q];
		double longest = -1;
		for (unsigned j = k; j < e; j++) {
			const char *bound;
			double t = cost_predict(&r->item[j], p->prec, &bound);
			w->model_us += 1e6 * t;
			w->bytes += r->item[j].bytes;
			w->flops += r->item[j].flops;
			if (t > longest) {
				longest = t;
				w->bound = bound;
			}
		}
		w->steps++;
		w->us += 1e3 * ms;
		prev = q;
		k = e;
	}
	p->cut += r->dropped;
	p->steps += r->n > 0;
	return 0;
}

void profile_report(const struct profile *p, FILE *out, const char *title)
{
	if (!p->steps)
		return;
	const struct ncf_cuda_machine *m = cost_machine();
	double peak_flops = peak_of(m, p->prec);
	double steps = (double)p->steps, tot = 0, model = 0;
	for (unsigned k = 0; k < p->n; k++)
		tot += p->row[k].us / steps;
	fprintf(out, "cuda profile: %s, %llu steps: per launch (CUB's sort: per sort), the mean "
		"over the steps that had it, and the cost model's time (cost.cu)\n",
		title, (unsigned long long)p->steps);
	fprintf(out, "cuda profile: machine %s: %d SMs, %.0f MHz, %.0f GB/s (%s; datasheet %.0f "
		"GB/s), %%bw of that, %%mx of the datasheet's %.0f TFLOP/s\n",
		m->name, m->sms, m->clock_hz / 1e6, m->bandwidth / 1e9, m->bandwidth_source,
		m->bandwidth_datasheet / 1e9, peak_flops / 1e12);
	fprintf(out, "cuda profile: %3s %-6s %-20s %5s %9s %5s %9s %-7s %9s %9s %7s %5s %7s %5s\n",
		"#", "kind", "launch", "steps", "us", "%", "model_us", "bound", "MB", "GFLOP", "GB/s",
		"%bw", "TFLOP/s", "%mx");
	for (unsigned k = 0; k < p->n; k++) {
		const struct prof_row *w = &p->row[k];
		double n = (double)w->steps, us = w->us / n, s = us * 1e-6;
		double bytes = w->bytes / n, flops = w->flops / n, mus = w->model_us / n;
		double bw = s > 0 ? bytes / s : 0, fl = s > 0 ? flops / s : 0;
		model += mus * n / steps;
		fprintf(out, "cuda profile: %3u %-6s %-20s %5llu %9.2f %5.1f %9.2f %-7s %9.3f %9.3f "
			"%7.1f ",
			k + 1, kind_name[w->kind], w->name, (unsigned long long)w->steps, us,
			tot > 0 ? 100.0 * w->us / steps / tot : 0.0, mus, w->bound ? w->bound : "-",
			bytes / 1e6, flops / 1e9, bw / 1e9);
		if (m->bandwidth > 0)
			fprintf(out, "%5.1f ", 100.0 * bw / m->bandwidth);
		else
			fprintf(out, "%5s ", "-");
		fprintf(out, "%7.2f ", fl / 1e12);
		if (peak_flops > 0 && flops > 0)
			fprintf(out, "%5.1f\n", 100.0 * fl / peak_flops);
		else
			fprintf(out, "%5s\n", "-");
	}
	fprintf(out, "cuda profile: %3s %-6s %-20s %5s %9.2f %5s %9.2f  (a step: the launches' "
		"means summed)\n", "", "", "step", "", tot, "", model);
	if (p->cut)
		fprintf(out, "cuda profile: %llu launches past the %d kept were not timed\n",
			(unsigned long long)p->cut, COST_MAX_ITEMS);
}

} /* namespace NCF_CUDA_NS */

using namespace NCF_CUDA_NS;

int ncf_cuda_machine_of(struct ncf_cuda_machine *m)
{
	int rc = cost_machine_init();
	*m = *cost_machine();
	return rc;
}

int ncf_cuda_copy_bandwidth(size_t bytes, double *bytes_s)
{
	*bytes_s = 0;
	void *a = NULL, *b = NULL;
	cudaStream_t s = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float best = 0;
	int rc = -1;
	if (CUDA_CHECK(cudaMalloc(&a, bytes)) || CUDA_CHECK(cudaMalloc(&b, bytes)) ||
	    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) ||
	    CUDA_CHECK(cudaEventCreate(&e0)) || CUDA_CHECK(cudaEventCreate(&e1)) ||
	    CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, s)))
		goto out;
	/* the first copy warms up (pages, clocks); the best of the next five */
	for (int k = 0; k < 6; k++) {
		float ms = 0;
		if (CUDA_CHECK(cudaEventRecord(e0, s)) ||
		    CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)) ||
		    CUDA_CHECK(cudaEventRecord(e1, s)) || CUDA_CHECK(cudaEventSynchronize(e1)) ||
		    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1)))
			goto out;
		if (k > 0 && ms > 0 && (best == 0 || ms < best))
			best = ms;
	}
	if (best > 0) {
		*bytes_s = 2.0 * (double)bytes / (best * 1e-3);
		rc = 0;
	}
out:
	if (s)
		cudaStreamSynchronize(s);
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	if (s)
		cudaStreamDestroy(s);
	cudaFree(a);
	cudaFree(b);
	return rc;
}
