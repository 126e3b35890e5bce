/*
 * graphs.cu - the training step as one CUDA graph (graph_step, below), and
 * small scoring batches replayed as CUDA graphs (see backend.cuh).  At
 * batch 1024 the launch overhead of a dozen kernels and
 * GEMMs is most of the latency, so a batch of at most GRAPH_MAX pairs is
 * captured once per batch size (copy in, forward, copy out), GRAPH_SLOTS
 * sizes at a time, and replayed.  Capture needs a cuBLAS workspace of our
 * own (cuBLAS must not allocate while a graph is being captured) and pinned
 * staging buffers.
 *
 * Capture is an optimization: when it fails, the backend says why once and
 * goes on with plain launches.  Under NCF_CUDA_EMULATE there are no graphs:
 * the functions below do nothing and send every batch down the plain path.
 */
#include "backend.cuh"

namespace NCF_CUDA_NS {

#ifndef NCF_CUDA_EMULATE

#define GRAPH_MAX 65536
#define GRAPH_SLOTS 8
#define BLAS_WORKSPACE (32u << 20)

struct graphs {
	struct {
		size_t n;	   /* batch size it was captured for, 0: empty */
		unsigned rows_gen; /* c->rows_gen when captured */
		cudaGraphExec_t exec;
	} slot[GRAPH_SLOTS];
	int off;		 /* a capture failed: plain launches only */
	uint32_t *pin_u, *pin_i; /* (GRAPH_MAX) pinned staging */
	float *pin_out;		 /* (GRAPH_MAX) */
	void *blas_ws;		 /* cuBLAS workspace, fixed for capture */
	/* the training step (graph_step) */
	cudaGraphExec_t step_exec;
	int step_have, step_off;
};

int graphs_init(struct cu *c)
{
	c->graphs = (struct graphs *)ncf_xcalloc(1, sizeof *c->graphs);
	/* the step launch by launch: asked for, or each launch checked by a
	 * synchronisation (NCF_CUDA_SYNC), which a capture cannot hold */
	const char *e = getenv("NCF_CUDA_GRAPH"), *sync = getenv("NCF_CUDA_SYNC");
	c->graphs->step_off = (e && !strcmp(e, "0")) || (sync && *sync && strcmp(sync, "0"));
	NCF_TRY(DALLOC_BYTES(&c->graphs->blas_ws, BLAS_WORKSPACE));
	CUBLAS_TRY(cublasSetWorkspace(c->blas, c->graphs->blas_ws, BLAS_WORKSPACE));
	return 0;
}

void graphs_free(struct cu *c)
{
	struct graphs *g = c->graphs;
	if (!g)
		return;
	for (int k = 0; k < GRAPH_SLOTS; k++)
		if (g->slot[k].n)
			cudaGraphExecDestroy(g->slot[k].exec);
	if (g->step_have)
		cudaGraphExecDestroy(g->step_exec);
	if (g->pin_u)
		cudaFreeHost(g->pin_u);
	if (g->pin_i)
		cudaFreeHost(g->pin_i);
	if (g->pin_out)
		cudaFreeHost(g->pin_out);
	dfree(g->blas_ws);
	free(g);
	c->graphs = NULL;
}

/* What a graph for n pairs does: pinned ids in, forward, logits out.
 * Inside a capture nothing is reported per call (a failure shows when the
 * capture ends); returns 0 or -1 at the first failure. */
static int captured_work(struct ncf_backend *be, struct cu *c, size_t n)
{
	struct graphs *g = c->graphs;
	if (cudaMemcpyAsync(c->su, g->pin_u, n * sizeof(uint32_t), cudaMemcpyHostToDevice, c->s) !=
	    cudaSuccess)
		return -1;
	if (cudaMemcpyAsync(c->si, g->pin_i, n * sizeof(uint32_t), cudaMemcpyHostToDevice, c->s) !=
	    cudaSuccess)
		return -1;
	if (forward_logits_any(be, c, n, c->dl) != 0)
		return -1;
	if (cudaMemcpyAsync(g->pin_out, c->dl, n * sizeof(float), cudaMemcpyDeviceToHost, c->s) !=
	    cudaSuccess)
		return -1;
	return 0;
}

/* Capture the scoring of n pairs into slot k.  Returns 0, or 1 when capture
 * did not work (it says why once; c->graphs->off is then set). */
static int capture(struct ncf_backend *be, struct cu *c, int k, size_t n)
{
	struct graphs *g = c->graphs;
	cudaGraph_t graph;
	cudaError_t e = cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal);
	if (e == cudaSuccess) {
		int bad = captured_work(be, c, n);
		e = cudaStreamEndCapture(c->s, &graph);
		if (e == cudaSuccess && bad) {
			cudaGraphDestroy(graph);
			e = cudaErrorInvalidValue;
		}
	}
	if (e == cudaSuccess) {
		e = cudaGraphInstantiate(&g->slot[k].exec, graph, 0);
		cudaGraphDestroy(graph);
	}
	if (e != cudaSuccess) {
		ncf_debug("cuda backend: no CUDA graphs for scoring (%s); plain launches",
			  cudaGetErrorString(cudaGetLastError()));
		g->off = 1;
		return 1;
	}
	g->slot[k].n = n;
	g->slot[k].rows_gen = c->rows_gen;
	return 0;
}

/* The slot holding a graph for n on the current row buffers, or -1; *free_k
 * gets a slot to capture into (an empty or stale one, else one to evict). */
static int find_slot(const struct cu *c, size_t n, int *free_k)
{
	const struct graphs *g = c->graphs;
	int found = -1;
	*free_k = -1;
	for (int k = 0; k < GRAPH_SLOTS; k++) {
		if (g->slot[k].n == n && g->slot[k].rows_gen == c->rows_gen)
			found = k;
		if (*free_k < 0 && (g->slot[k].n == 0 || g->slot[k].rows_gen != c->rows_gen))
			*free_k = k;
	}
	if (*free_k < 0)
		*free_k = (int)(n % GRAPH_SLOTS); /* evict one */
	return found;
}

/*
 * Logits of n <= GRAPH_MAX pairs through a CUDA graph captured for this n
 * (on its first use): host ids -> pinned staging -> device, forward,
 * device -> pinned -> out.  The graph reads the first-layer tables but does
 * not make them: while they are stale (new parameters) the plain path runs
 * and rebuilds them.
 */
int score_graph(struct ncf_backend *be, struct cu *c, const uint32_t *users,
		const uint32_t *items, size_t n, float *out)
{
	struct graphs *g = c->graphs;
	if (!g || g->off || n == 0 || n > GRAPH_MAX || !c->tables_valid ||
	    (c->act != ACT_F32 && !c->plo_valid))
		return 1;
	if (!g->pin_u) {
		CUDA_TRY(cudaMallocHost((void **)&g->pin_u, GRAPH_MAX * sizeof(uint32_t)));
		CUDA_TRY(cudaMallocHost((void **)&g->pin_i, GRAPH_MAX * sizeof(uint32_t)));
		CUDA_TRY(cudaMallocHost((void **)&g->pin_out, GRAPH_MAX * sizeof(float)));
	}
	NCF_TRY(ensure_rows(be, c, GRAPH_MAX));
	int free_k, k = find_slot(c, n, &free_k);
	if (k < 0) {
		if (g->slot[free_k].n) {
			cudaGraphExecDestroy(g->slot[free_k].exec);
			g->slot[free_k].n = 0;
		}
		if (capture(be, c, free_k, n) != 0)
			return 1;
		k = free_k;
	}
	memcpy(g->pin_u, users, n * sizeof(uint32_t));
	memcpy(g->pin_i, items, n * sizeof(uint32_t));
	CUDA_TRY(cudaGraphLaunch(g->slot[k].exec, c->s));
	CUDA_TRY(cudaStreamSynchronize(c->s));
	memcpy(out, g->pin_out, n * sizeof(float));
	return 0;
}

/* ---- the training step ------------------------------------------------- */

/* Capture once more failed: say why once and launch plainly from now on. */
static int step_graph_off(struct graphs *g, cudaError_t e)
{
	ncf_debug("cuda backend: no CUDA graph for the training step (%s); plain launches",
		  cudaGetErrorString(e));
	cudaGetLastError();
	g->step_off = 1;
	return 1;
}

/*
 * The fused path's step only (the unfused path stays as it was before the
 * graph, for comparison), and not with NCF_CUDA_GRAPH=0.
 * The step's arguments (positions, epoch, Adam's constants, batch size)
 * are kernel arguments, so the step is captured anew each time, which costs
 * the host about what launching it would, and swapped into the
 * instantiated graph (cudaGraphExecUpdate keeps the instantiation when the
 * launches are the same with other arguments; a step of another shape, such
 * as an epoch's short last batch on the unfused path, is instantiated
 * anew).  The device then runs the whole step from one launch.
 */
int graph_step(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first, uint64_t n)
{
	struct graphs *g = c->graphs;
	if (!g || g->step_off || c->prof || be->dist->size > 1 || !fused_path(be, c))
		return 1;
	NCF_TRY(step_prepare(be, c, first, n));
	cudaGraph_t graph;
	cudaError_t e = cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess)
		return step_graph_off(g, e);
	int bad = step_work(be, c, epoch, first, n);
	e = cudaStreamEndCapture(c->s, &graph);
	if (e == cudaSuccess && bad) {
		cudaGraphDestroy(graph);
		e = cudaErrorStreamCaptureInvalidated;
	}
	if (e != cudaSuccess)
		return step_graph_off(g, e);
	if (g->step_have) {
		cudaGraphExecUpdateResultInfo info;
		if (cudaGraphExecUpdate(g->step_exec, graph, &info) != cudaSuccess) {
			cudaGetLastError();
			cudaGraphExecDestroy(g->step_exec);
			g->step_have = 0;
		}
	}
	if (!g->step_have) {
		e = cudaGraphInstantiate(&g->step_exec, graph, 0);
		if (e != cudaSuccess) {
			cudaGraphDestroy(graph);
			return step_graph_off(g, e);
		}
		g->step_have = 1;
	}
	cudaGraphDestroy(graph);
	CUDA_TRY(cudaGraphLaunch(g->step_exec, c->s));
	return 0;
}

#else /* NCF_CUDA_EMULATE: no graphs */

int graphs_init(struct cu *c)
{
	c->graphs = NULL;
	return 0;
}

void graphs_free(struct cu *c)
{
}

int score_graph(struct ncf_backend *be, struct cu *c, const uint32_t *users,
		const uint32_t *items, size_t n, float *out)
{
	return 1;
}

int graph_step(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first, uint64_t n)
{
	return 1;
}

#endif

} /* namespace NCF_CUDA_NS */
