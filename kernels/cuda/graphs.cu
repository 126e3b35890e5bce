/*
 * graphs.cu - CUDA graphs (graphs.cuh): capture and replay, for whatever
 * function the caller hands in.
 *
 * Cached graphs (scoring chunks): a chunk is a dozen launches and GEMMs
 * (the id check, the first layer, the MLP, the head with its sigmoid); at
 * batch 1024 their launch overhead is most of the latency, and at every
 * size it is host time taken from the transfers' pipeline.  So each is
 * captured once under a key saying what it bakes in (its size and buffers)
 * and the generation of the row buffers (c->rows_gen: moving them makes a
 * graph stale), then replayed.  GRAPH_SLOTS graphs are kept, the least
 * recently used evicted.  A graph reads the parameters and the first-layer
 * tables where they are, so new parameters need no new graph: the caller
 * rebuilds the tables outside the graph first.
 *
 * The training step's graph: a step's arguments (positions, epoch, Adam's
 * constants, batch size) are kernel arguments, so the step is captured
 * anew each time, which costs the host about what launching it would, and
 * swapped into the instantiated graph (cudaGraphExecUpdate keeps the
 * instantiation when the launches are the same with other arguments; a
 * step whose launches differ is instantiated anew).  The device then runs
 * the whole step from one launch, without a gap between kernels.  The
 * first step runs with plain launches, uncaptured: what a kernel or
 * library does once (cuBLAS's first use of a shape, a kernel's attributes)
 * happens outside any capture, and a fault of that step is reported at the
 * launch that made it rather than at a graph's.
 *
 * Capture is an optimization: when it fails (capture_begin keeps its
 * errors quiet), it is said once, with the reason, and the caller issues
 * the work with plain launches from then on, so that a timing of a step or
 * of scoring is never taken for the graph's when it is not.  Under
 * NCF_CUDA_SYNC=1 there are no graphs.  How each training step ran is
 * counted (graph_counts: captures, replays, plain steps) for the tools'
 * reports.  The emulation (emu.h) captures, updates and replays too, so
 * the tests exercise all of this.
 */
#include "graphs.cuh"

namespace NCF_CUDA_NS {

#define GRAPH_SLOTS 32
#define BLAS_WORKSPACE (32u << 20)

struct graphs {
	struct {
		unsigned char key[GRAPH_KEY];
		size_t len;	   /* 0: an empty slot */
		unsigned rows_gen; /* c->rows_gen when captured */
		uint64_t used;	   /* last use, for eviction */
		cudaGraphExec_t exec;
	} slot[GRAPH_SLOTS];
	uint64_t tick;
	int off;       /* no cached graphs (NCF_CUDA_SYNC, or a capture failed) */
	int step_off;  /* no step graph: NCF_CUDA_GRAPH=0, NCF_CUDA_SYNC=1, or a capture failed */
	void *blas_ws; /* cuBLAS workspace, fixed for capture */
	cudaGraphExec_t step_exec;
	int step_have; /* step_exec is instantiated */
	int step_warm; /* a step ran uncaptured: the next may be captured */
	int step_failed; /* a capture of the step failed */
	struct graph_counts n;
};

int graphs_init(struct cu *c)
{
	c->graphs = (struct graphs *)ncf_xcalloc(1, sizeof *c->graphs);
	NCF_TRY(DALLOC_BYTES(&c->graphs->blas_ws, BLAS_WORKSPACE));
	CUBLAS_TRY(cublasSetWorkspace(c->blas.h, c->graphs->blas_ws, BLAS_WORKSPACE));
	if (!graphs_allowed()) {
		c->graphs->off = c->graphs->step_off = 1;
		ncf_debug("cuda backend: NCF_CUDA_SYNC=1: no CUDA graphs");
	}
	const char *e = getenv("NCF_CUDA_GRAPH");
	if (e && !strcmp(e, "0"))
		c->graphs->step_off = 1;
	return 0;
}

void graphs_free(struct cu *c)
{
	struct graphs *g = c->graphs;
	if (!g)
		return;
	for (int k = 0; k < GRAPH_SLOTS; k++)
		if (g->slot[k].len)
			cudaGraphExecDestroy(g->slot[k].exec);
	if (g->step_have)
		cudaGraphExecDestroy(g->step_exec);
	dfree(g->blas_ws);
	free(g);
	c->graphs = NULL;
}

struct graph_counts graphs_counts(const struct cu *c)
{
	struct graph_counts z;
	memset(&z, 0, sizeof z);
	return c->graphs ? c->graphs->n : z;
}

/* fn(arg) captured on c->s into *graph.  Returns cudaSuccess or why not
 * (the failure kept quiet; a failing fn invalidates the capture). */
static cudaError_t capture(struct cu *c, graph_work fn, void *arg, cudaGraph_t *graph)
{
	*graph = NULL;
	capture_begin();
	cudaError_t e = cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal);
	if (e == cudaSuccess) {
		int bad = fn(arg);
		e = cudaStreamEndCapture(c->s, graph); /* ends it, whatever happened */
		if (e == cudaSuccess && bad)
			e = cudaErrorStreamCaptureInvalidated;
	}
	capture_end();
	if (e != cudaSuccess && *graph) {
		cudaGraphDestroy(*graph);
		*graph = NULL;
	}
	return e;
}

/* Say why a capture did not work (once: graphs of its kind are off from
 * then on) and clear its error.  Returns 1 (the caller issues the work
 * itself). */
static int capture_failed(const char *what, cudaError_t e)
{
	cudaGetLastError(); /* the capture's error is not the next call's */
	ncf_warn("cuda backend: no CUDA graph for %s (%s); plain launches from here on", what,
		 g_quiet_msg[0] ? g_quiet_msg : cudaGetErrorString(e));
	return 1;
}

/* ---- cached graphs ----------------------------------------------------- */

/* The slot holding a live graph for key, or -1; *free_q gets a slot to
 * capture into (empty, stale, else the least recently used). */
static int find_slot(const struct cu *c, const void *key, size_t len, int *free_q)
{
	const struct graphs *g = c->graphs;
	int found = -1;
	*free_q = -1;
	for (int q = 0; q < GRAPH_SLOTS; q++) {
		int live = g->slot[q].len && g->slot[q].rows_gen == c->rows_gen;
		if (live && g->slot[q].len == len && !memcmp(g->slot[q].key, key, len))
			found = q;
		if (!live && *free_q < 0)
			*free_q = q;
	}
	if (*free_q < 0) {
		*free_q = 0;
		for (int q = 1; q < GRAPH_SLOTS; q++)
			if (g->slot[q].used < g->slot[*free_q].used)
				*free_q = q;
	}
	return found;
}

int graphs_cached(struct cu *c, const void *key, size_t len, graph_work fn, void *arg,
		  const char *what)
{
	struct graphs *g = c->graphs;
	if (!g || g->off || len == 0 || len > GRAPH_KEY)
		return 1;
	int q, free_q;
	q = find_slot(c, key, len, &free_q);
	if (q < 0) {
		q = free_q;
		if (g->slot[q].len) {
			cudaGraphExecDestroy(g->slot[q].exec);
			g->slot[q].len = 0;
		}
		cudaGraph_t graph;
		cudaError_t e = capture(c, fn, arg, &graph);
		if (e == cudaSuccess) {
			e = cudaGraphInstantiate(&g->slot[q].exec, graph, 0);
			cudaGraphDestroy(graph);
		}
		if (e != cudaSuccess) {
			g->off = 1;
			return capture_failed(what, e);
		}
		memcpy(g->slot[q].key, key, len);
		g->slot[q].len = len;
		g->slot[q].rows_gen = c->rows_gen;
		g->n.captures++;
	}
	g->slot[q].used = ++g->tick;
	CUDA_TRY(cudaGraphLaunch(g->slot[q].exec, c->s));
	g->n.launches++;
	return 0;
}

/* ---- the training step --------------------------------------------------- */

int graphs_step_on(const struct cu *c)
{
	return c->graphs && !c->graphs->step_off;
}

/* The new capture into the instantiated graph, or a new instantiation. */
static cudaError_t step_instantiate(struct graphs *g, cudaGraph_t graph)
{
	if (g->step_have) {
		cudaGraphExecUpdateResultInfo info;
		if (cudaGraphExecUpdate(g->step_exec, graph, &info) == cudaSuccess)
			return cudaSuccess;
		cudaGetLastError(); /* not an error: instantiate anew */
		cudaGraphExecDestroy(g->step_exec);
		g->step_have = 0;
	}
	cudaError_t e = cudaGraphInstantiate(&g->step_exec, graph, 0);
	if (e == cudaSuccess) {
		g->step_have = 1;
		g->n.step_instantiations++;
	}
	return e;
}

int graphs_step(struct cu *c, graph_work fn, void *arg)
{
	struct graphs *g = c->graphs;
	if (!graphs_step_on(c))
		return 1;
	if (!g->step_warm) { /* the first step: uncaptured */
		g->step_warm = 1;
		return 1;
	}
	cudaGraph_t graph;
	cudaError_t e = capture(c, fn, arg, &graph);
	if (e == cudaSuccess) {
		g->n.step_captures++;
		e = step_instantiate(g, graph);
		cudaGraphDestroy(graph);
	}
	if (e != cudaSuccess) {
		g->step_off = g->step_failed = 1;
		return capture_failed("the training step", e);
	}
	CUDA_TRY(cudaGraphLaunch(g->step_exec, c->s));
	g->n.step_launches++;
	return 0;
}

void graphs_step_plain(struct cu *c)
{
	if (c->graphs)
		c->graphs->n.step_plain++;
}

} /* namespace NCF_CUDA_NS */

using namespace NCF_CUDA_NS;

void ncf_cuda_graph_counts(const struct ncf_backend *be, struct ncf_cuda_graphs *out)
{
	const struct cu *c = impl(be);
	struct graph_counts n = graphs_counts(c);
	memset(out, 0, sizeof *out);
	out->captures = n.step_captures;
	out->instantiations = n.step_instantiations;
	out->replays = n.step_launches;
	out->plain = n.step_plain;
	out->failed = c->graphs && c->graphs->step_failed;
}

namespace NCF_CUDA_NS {

} /* namespace NCF_CUDA_NS */
