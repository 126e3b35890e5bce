/*
 * cost.cu - the cost recorder and the per-launch profile (cost.cuh).  The
 * cost model of a step (ncf_cuda_step_cost, cuda.h) is the backend's own
 * step code run dry with a recorder active (backend.cu).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.cuh"
#include "cuda.h"

namespace NCF_CUDA_NS {

thread_local struct cost_rec *cost_active;

static const char *const kind_name[COST_KINDS] = {"kernel", "gemm", "memset", "copy", "sort"};

int cost_note(int kind, const char *name, double bytes, double flops)
{
	struct cost_rec *r = cost_active;
	if (r->events && r->n < COST_MAX_ITEMS)
		cudaEventRecord(r->events[r->n], r->stream);
	r->count[kind]++;
	r->bytes += bytes;
	r->flops += flops;
	if (r->n < COST_MAX_ITEMS) {
		struct cost_item *it = &r->item[r->n++];
		it->name = name;
		it->kind = kind;
		it->bytes = bytes;
		it->flops = flops;
	} else {
		r->dropped++;
	}
	return r->dry;
}

void cost_export(const struct cost_rec *r, struct ncf_cuda_cost *out)
{
	memset(out, 0, sizeof *out);
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
	}
}

/* ---- NCF_CUDA_PROFILE ------------------------------------------------------ */

struct profile {
	struct cost_rec rec;	 /* this step's notes */
	struct cost_rec *saved;	 /* the recorder active before profile_begin */
	cudaEvent_t ev[COST_MAX_ITEMS + 1];
	int have_events;
	unsigned n;		 /* launches per step, as the first profiled step had them */
	struct cost_item first[COST_MAX_ITEMS];
	double us[COST_MAX_ITEMS]; /* summed over the steps added */
	uint64_t steps, other;	 /* steps added; steps whose launches differed */
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

void profile_begin(struct profile *p, cudaStream_t s)
{
	memset(&p->rec, 0, sizeof p->rec);
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

/* Is this step's list of launches the first profiled step's? */
static int same_launches(const struct profile *p)
{
	const struct cost_rec *r = &p->rec;
	if (r->n != p->n || r->dropped)
		return 0;
	for (unsigned k = 0; k < r->n; k++)
		if (r->item[k].kind != p->first[k].kind || strcmp(r->item[k].name, p->first[k].name))
			return 0;
	return 1;
}

int profile_collect(struct profile *p)
{
	const struct cost_rec *r = &p->rec;
	if (r->n == 0)
		return 0;
	if (p->steps == 0 && p->other == 0) {
		p->n = r->n;
		memcpy(p->first, r->item, r->n * sizeof *r->item);
	}
	if (!same_launches(p)) {
		p->other++;
		return 0;
	}
	for (unsigned k = 0; k < r->n; k++) {
		float ms = 0;
		CUDA_TRY(cudaEventElapsedTime(&ms, p->ev[k], p->ev[k + 1]));
		p->us[k] += 1e3 * ms;
	}
	p->steps++;
	return 0;
}

void profile_report(const struct profile *p, FILE *out, const char *title, double peak_bw,
		    double peak_flops)
{
	if (!p->steps)
		return;
	double tot = 0, steps = (double)p->steps;
	for (unsigned k = 0; k < p->n; k++)
		tot += p->us[k] / steps;
	fprintf(out, "cuda profile: %s, mean of %llu steps (%llu others with other launches)\n",
		title, (unsigned long long)p->steps, (unsigned long long)p->other);
	fprintf(out, "cuda profile: %3s %-6s %-20s %9s %5s %10s %10s %8s %6s %8s %6s\n", "#",
		"kind", "launch", "us", "%", "MB", "GFLOP", "GB/s", "%bw", "TFLOP/s", "%mx");
	for (unsigned k = 0; k < p->n; k++) {
		const struct cost_item *it = &p->first[k];
		double us = p->us[k] / steps, s = us * 1e-6;
		double bw = s > 0 ? it->bytes / s : 0, fl = s > 0 ? it->flops / s : 0;
		fprintf(out, "cuda profile: %3u %-6s %-20s %9.2f %5.1f %10.3f %10.3f %8.1f ", k + 1,
			kind_name[it->kind], it->name, us, tot > 0 ? 100.0 * us / tot : 0.0,
			it->bytes / 1e6, it->flops / 1e9, bw / 1e9);
		if (peak_bw > 0)
			fprintf(out, "%6.1f ", 100.0 * bw / peak_bw);
		else
			fprintf(out, "%6s ", "-");
		fprintf(out, "%8.2f ", fl / 1e12);
		if (peak_flops > 0 && it->flops > 0)
			fprintf(out, "%6.1f\n", 100.0 * fl / peak_flops);
		else
			fprintf(out, "%6s\n", "-");
	}
	fprintf(out, "cuda profile: %3s %-6s %-20s %9.2f\n", "", "", "step", tot);
}

} /* namespace NCF_CUDA_NS */
