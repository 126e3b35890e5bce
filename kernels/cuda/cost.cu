/*
 * cost.cu - the cost recorder and the per-launch profile (cost.cuh).  The
 * cost model of a step (ncf_cuda_step_cost, cuda.h) is the backend's own
 * step code run dry with a recorder active (backend.cu).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.cuh"
#include "cuda.h"
#include "kernels.cuh"

namespace NCF_CUDA_NS {

thread_local struct cost_rec *cost_active;

static const char *const kind_name[COST_KINDS] = {"kernel", "gemm", "memset", "copy", "sort"};

int cost_note(int kind, const char *name, double bytes, double flops,
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

/* ---- the model -------------------------------------------------------------- */

/*
 * The machines the model predicts for, every figure in one place (kept
 * apart from the model's terms below: the named machines the prediction
 * is printed for, H100 and H200 SXM; the first is the default):
 *  - Measured on an H200 SXM lent here (the device tool's notes,
 *    2026-10-28 and 11-04): a device-to-device copy moves 4.3 TB/s (bytes
 *    read and written); cuBLAS's 8192^3 bf16 product runs 790 TFLOP/s on
 *    random data.
 *  - NVIDIA's datasheets: 132 SMs for both; HBM 4.8 TB/s (H200) and
 *    3.35 TB/s (H100); bf16 989 TFLOP/s dense at the 1.83 GHz that rate
 *    implies (4096 FLOP per SM per clock), the same GH100 SMs in both; TF32
 *    half the bf16 rate; fp32 without tensor cores 67 TFLOP/s (FMA; the
 *    backend is built with -fmad=false, so its own fp32 kernels issue a
 *    multiply and an add: half that); an SM issues one warp instruction a
 *    clock in each of its four quarters.
 *  - Assumed, not measured: the H100 copies at the H200's measured share
 *    of its datasheet bandwidth (4.3 / 4.8 of 3.35 TB/s: 3.0 TB/s) and
 *    multiplies at the H200's measured rate (the same SMs and clocks); a
 *    load's round trip to device memory under load 0.6 us; a launch inside
 *    a CUDA graph costs 1.5 us beyond its work (the drain of its last wave
 *    and the start of the next kernel); our mma.sync tiles (Hopper's wgmma
 *    is for cuBLAS) reach half the dense rate; cuBLAS's GEMMs and CUB's
 *    sort passes keep memory busy (no latency bound); a copy to the host
 *    crosses PCIe at 25 GB/s after 10 us.
 * The first GPU run measures each launch against these (NCF_CUDA_PROFILE).
 */
struct cost_machine {
	const char *name;
	double bw, sms, clock, latency, gap, matrix_bf16, matrix_tf32, fp32, mma_share, pcie,
		pcie_latency;
};
static const struct cost_machine machines[NCF_CUDA_MACHINES] = {
	{"H200", 4.3e12, 132, 1.83e9, 0.6e-6, 1.5e-6, 790e12, 395e12, 67e12, 0.5, 25e9, 10e-6},
	{"H100", 3.0e12, 132, 1.83e9, 0.6e-6, 1.5e-6, 790e12, 395e12, 67e12, 0.5, 25e9, 10e-6},
};
static const struct cost_machine *const H200 = &machines[0];

/* The matrix FLOP rate of a GEMM (cuBLAS) or a kernel in precision prec
 * on machine m. */
static double matrix_rate(const struct cost_machine *m, int prec, int kind, int mma)
{
	double dense = prec == NCF_PRECISION_BF16 || prec == NCF_PRECISION_FP16 ? m->matrix_bf16
		       : prec == NCF_PRECISION_TF32				  ? m->matrix_tf32
										  : m->fp32;
	if (kind == COST_GEMM)
		return dense;
	if (mma && prec != NCF_PRECISION_FP32) /* fp32: MMA_F32, no tensor cores */
		return dense * m->mma_share;
	return m->fp32 / 2; /* no FMA contraction */
}

/* The instruction-issue term of launch it on machine m: the warp
 * instructions of its matrix loops against four a clock per SM. */
static double issue_term(const struct cost_machine *m, const struct cost_item *it)
{
	return it->shaped ? it->shape.issue / (m->sms * 4 * m->clock) : 0;
}

/* The time of launch it on machine m: the largest of its terms plus the
 * launch gap; *bound names the term that binds. */
static double predict_on(const struct cost_machine *m, const struct cost_item *it, int prec,
			 const char **bound)
{
	static const char *const names[] = {"bytes", "flops", "latency", "chain", "issue", "launch"};
	double t[5] = {0, 0, 0, 0, 0};
	if (it->kind == COST_COPY) {
		*bound = "launch";
		return m->pcie_latency + it->bytes / m->pcie;
	}
	t[0] = it->bytes / m->bw;
	if (it->flops > 0)
		t[1] = it->flops / matrix_rate(m, prec, it->kind, it->shaped && it->shape.mma);
	if (it->shaped) {
		const struct cost_shape *c = &it->shape;
		double blocks = c->blocks < c->resident * m->sms ? c->blocks : c->resident * m->sms;
		double inflight = blocks * c->threads * c->inflight;
		if (inflight > 0)
			t[2] = (it->bytes + c->reread) * m->latency / inflight;
		t[3] = c->chain * m->latency;
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
	return best + m->gap;
}

double cost_predict(const struct cost_item *it, int prec, const char **bound)
{
	return predict_on(H200, it, prec, bound);
}

double cost_waves(double blocks, double resident)
{
	double per = resident * H200->sms;
	return per > 0 ? ceil(blocks / per) : 1;
}

void cost_model_describe(FILE *out)
{
	const struct cost_machine *m = H200;
	fprintf(out, "model_bandwidth_GBs\t%.0f\nmodel_latency_us\t%.2f\nmodel_launch_gap_us\t%.2f\n"
		"model_sms\t%.0f\nmodel_matrix_bf16_TFLOPs\t%.0f\nmodel_matrix_tf32_TFLOPs\t%.0f\n"
		"model_fp32_TFLOPs\t%.0f\nmodel_mma_share\t%.2f\nmodel_issue_per_sm_clock\t4\n",
		m->bw / 1e9, m->latency * 1e6, m->gap * 1e6, m->sms, m->matrix_bf16 / 1e12,
		m->matrix_tf32 / 1e12, m->fp32 / 1e12, m->mma_share);
	for (int k = 0; k < NCF_CUDA_MACHINES; k++)
		fprintf(out, "model_%s\tbandwidth %.0f GB/s, %.0f SMs at %.2f GHz, bf16 %.0f TFLOP/s\n",
			machines[k].name, machines[k].bw / 1e9, machines[k].sms, machines[k].clock / 1e9,
			machines[k].matrix_bf16 / 1e12);
	mlp_issue_describe(out);
}

void cost_export(const struct cost_rec *r, struct ncf_cuda_cost *out)
{
	memset(out, 0, sizeof *out);
	for (int m = 0; m < NCF_CUDA_MACHINES; m++)
		out->machine[m] = machines[m].name;
	for (unsigned k = 0; k < r->n; k++) {
		const char *bound;
		out->predicted_s += cost_predict(&r->item[k], r->prec, &bound);
		for (int m = 0; m < NCF_CUDA_MACHINES; m++)
			out->machine_s[m] += predict_on(&machines[m], &r->item[k], r->prec, &bound);
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
			out->item[k].machine_s[m] = predict_on(&machines[m], &r->item[k], r->prec,
							       &out->item[k].machine_bound[m]);
			out->item[k].issue_s[m] = issue_term(&machines[m], &r->item[k]);
		}
	}
}

/* ---- NCF_CUDA_PROFILE ------------------------------------------------------ */

/* A launch of the steps profiled: the occ-th launch named `name` in a step
 * (steps differ a little: the first after new parameters also makes the
 * 16-bit copy; an epoch's last step is shorter), with its sums over the
 * steps that had it. */
struct prof_row {
	const char *name;
	int kind;
	unsigned occ;
	uint64_t steps;
	double us, bytes, flops;
	struct cost_item last; /* its latest note, for the model's time */
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

/* The row of launch it, the occ-th of its name in this step; a new one
 * goes after row `after` (the row of the launch before it; -1: first). */
static unsigned row_of(struct profile *p, const struct cost_item *it, unsigned occ, unsigned after)
{
	for (unsigned k = 0; k < p->n; k++)
		if (p->row[k].occ == occ && p->row[k].kind == it->kind &&
		    !strcmp(p->row[k].name, it->name))
			return k;
	if (p->n == COST_MAX_ITEMS)
		return COST_MAX_ITEMS;
	unsigned at = after == (unsigned)-1 ? 0 : after + 1;
	memmove(&p->row[at + 1], &p->row[at], (p->n - at) * sizeof *p->row);
	memset(&p->row[at], 0, sizeof p->row[at]);
	p->row[at].name = it->name;
	p->row[at].kind = it->kind;
	p->row[at].occ = occ;
	p->n++;
	return at;
}

int profile_collect(struct profile *p)
{
	const struct cost_rec *r = &p->rec;
	unsigned prev = COST_MAX_ITEMS; /* none yet: a new row goes first */
	for (unsigned k = 0; k < r->n; k++) {
		const struct cost_item *it = &r->item[k];
		unsigned occ = 0;
		for (unsigned j = 0; j < k; j++)
			occ += r->item[j].kind == it->kind && !strcmp(r->item[j].name, it->name);
		unsigned q = row_of(p, it, occ, prev == COST_MAX_ITEMS ? (unsigned)-1 : prev);
		if (q == COST_MAX_ITEMS) {
			p->cut++;
			continue;
		}
		float ms = 0;
		CUDA_TRY(cudaEventElapsedTime(&ms, p->ev[k], p->ev[k + 1]));
		struct prof_row *w = &p->row[q];
		w->steps++;
		w->us += 1e3 * ms;
		w->bytes += it->bytes;
		w->flops += it->flops;
		w->last = *it;
		prev = q;
	}
	p->cut += r->dropped;
	p->steps += r->n > 0;
	return 0;
}

void profile_report(const struct profile *p, FILE *out, const char *title, double peak_bw,
		    double peak_flops)
{
	if (!p->steps)
		return;
	double steps = (double)p->steps, tot = 0, model = 0;
	for (unsigned k = 0; k < p->n; k++)
		tot += p->row[k].us / steps;
	fprintf(out, "cuda profile: %s, %llu steps: per launch, the mean over the steps that had "
		"it, and the cost model's time (cost.cu)\n", title, (unsigned long long)p->steps);
	fprintf(out, "cuda profile: %3s %-6s %-20s %5s %9s %5s %9s %-7s %9s %9s %7s %5s %7s %5s\n",
		"#", "kind", "launch", "steps", "us", "%", "model_us", "bound", "MB", "GFLOP", "GB/s",
		"%bw", "TFLOP/s", "%mx");
	for (unsigned k = 0; k < p->n; k++) {
		const struct prof_row *w = &p->row[k];
		double n = (double)w->steps, us = w->us / n, s = us * 1e-6;
		double bytes = w->bytes / n, flops = w->flops / n;
		double bw = s > 0 ? bytes / s : 0, fl = s > 0 ? flops / s : 0;
		struct cost_item mean = w->last;
		mean.bytes = bytes;
		mean.flops = flops;
		const char *bound;
		double mus = 1e6 * cost_predict(&mean, p->prec, &bound);
		model += mus * n / steps;
		fprintf(out, "cuda profile: %3u %-6s %-20s %5llu %9.2f %5.1f %9.2f %-7s %9.3f %9.3f "
			"%7.1f ",
			k + 1, kind_name[w->kind], w->name, (unsigned long long)w->steps, us,
			tot > 0 ? 100.0 * w->us / steps / tot : 0.0, mus, bound, bytes / 1e6,
			flops / 1e9, bw / 1e9);
		if (peak_bw > 0)
			fprintf(out, "%5.1f ", 100.0 * bw / peak_bw);
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
