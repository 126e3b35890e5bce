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
};

struct profile {
	struct cost_rec rec;	 /* this step's notes */
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
	double steps = (double)p->steps, tot = 0;
	for (unsigned k = 0; k < p->n; k++)
		tot += p->row[k].us / steps;
	fprintf(out, "cuda profile: %s, %llu steps: per launch, the mean over the steps that had "
		"it\n", title, (unsigned long long)p->steps);
	fprintf(out, "cuda profile: %3s %-6s %-20s %6s %9s %5s %10s %10s %8s %6s %8s %6s\n", "#",
		"kind", "launch", "steps", "us", "%", "MB", "GFLOP", "GB/s", "%bw", "TFLOP/s", "%mx");
	for (unsigned k = 0; k < p->n; k++) {
		const struct prof_row *w = &p->row[k];
		double n = (double)w->steps, us = w->us / n, s = us * 1e-6;
		double bytes = w->bytes / n, flops = w->flops / n;
		double bw = s > 0 ? bytes / s : 0, fl = s > 0 ? flops / s : 0;
		fprintf(out, "cuda profile: %3u %-6s %-20s %6llu %9.2f %5.1f %10.3f %10.3f %8.1f ",
			k + 1, kind_name[w->kind], w->name, (unsigned long long)w->steps, us,
			tot > 0 ? 100.0 * w->us / steps / tot : 0.0, bytes / 1e6, flops / 1e9,
			bw / 1e9);
		if (peak_bw > 0)
			fprintf(out, "%6.1f ", 100.0 * bw / peak_bw);
		else
			fprintf(out, "%6s ", "-");
		fprintf(out, "%8.2f ", fl / 1e12);
		if (peak_flops > 0 && flops > 0)
			fprintf(out, "%6.1f\n", 100.0 * fl / peak_flops);
		else
			fprintf(out, "%6s\n", "-");
	}
	fprintf(out, "cuda profile: %3s %-6s %-20s %6s %9.2f  (a step, the launches' means summed)\n",
		"", "", "step", "", tot);
	if (p->cut)
		fprintf(out, "cuda profile: %llu launches past the %d kept were not timed\n",
			(unsigned long long)p->cut, COST_MAX_ITEMS);
}

} /* namespace NCF_CUDA_NS */
