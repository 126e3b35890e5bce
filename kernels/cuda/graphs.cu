/*
 * graphs.cu - the fused training step as one CUDA graph (graph_step,
 * below), and scoring chunks replayed as CUDA graphs (see backend.cuh and
 * score.cu).  A chunk is a dozen launches and GEMMs (the id check, the
 * first layer, the MLP, the head with its sigmoid); at batch 1024 their
 * launch overhead is most of the latency, and at every size it is host time
 * taken from the transfers' pipeline.  So each chunk is captured once as a
 * graph, keyed by what it bakes in: its size, its input, output and bad-pair
 * buffers, logits or probabilities, and the generation of the row buffers
 * (c->rows_gen: ensure_rows moves them), then replayed.  GRAPH_SLOTS graphs
 * are kept, the least recently used evicted.
 *
 * A graph reads the parameters and the first-layer tables where they are,
 * so new parameters (set_state, a training step) need no new graph: the
 * tables are rebuilt outside the graph (make_tables_any) before it runs.
 * Capture needs a cuBLAS workspace of our own (cuBLAS must not allocate
 * while a graph is being captured) and no allocation or synchronisation
 * inside: the callers prepare buffers and tables first.
 *
 * Capture is an optimization: when it fails (capture_begin keeps its errors
 * quiet), the backend says why once at -v and goes on with plain launches.
 * Under NCF_CUDA_SYNC=1 there are no graphs (neither the step's nor
 * scoring's).  The emulation (emu.h) captures, updates and replays too, so
 * the tests exercise all of this.
 */
#include "backend.cuh"

namespace NCF_CUDA_NS {

#define GRAPH_SLOTS 32
#define BLAS_WORKSPACE (32u << 20)

struct graphs {
	struct {
		struct chunk key;  /* what it was captured for (key.n = 0: empty) */
		unsigned rows_gen; /* c->rows_gen when captured */
		uint64_t used;	   /* last use, for eviction */
		cudaGraphExec_t exec;
	} slot[GRAPH_SLOTS];
	uint64_t tick;
	int off;       /* graphs are not used (NCF_CUDA_SYNC, or a capture failed) */
	void *blas_ws; /* cuBLAS workspace, fixed for capture */
	/* the training step (graph_step) */
	cudaGraphExec_t step_exec;
	int step_have; /* step_exec is instantiated */
	int step_off;  /* the step launch by launch: NCF_CUDA_GRAPH=0, NCF_CUDA_SYNC=1,
			  or a capture failed */
};

int graphs_init(struct cu *c)
{
	c->graphs = (struct graphs *)ncf_xcalloc(1, sizeof *c->graphs);
	NCF_TRY(DALLOC_BYTES(&c->graphs->blas_ws, BLAS_WORKSPACE));
	CUBLAS_TRY(cublasSetWorkspace(c->blas, c->graphs->blas_ws, BLAS_WORKSPACE));
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
		if (g->slot[k].key.n)
			cudaGraphExecDestroy(g->slot[k].exec);
	if (g->step_have)
		cudaGraphExecDestroy(g->step_exec);
	dfree(g->blas_ws);
	free(g);
	c->graphs = NULL;
}

static int same_chunk(const struct chunk *a, const struct chunk *b)
{
	return a->n == b->n && a->in_u == b->in_u && a->in_i == b->in_i && a->out == b->out &&
	       a->bad == b->bad && a->prob == b->prob;
}

/* Capture chunk k into slot q.  Returns 0, or 1 when capture did not work
 * (said once at -v; graphs are off from then on). */
static int capture(struct ncf_backend *be, struct cu *c, int q, const struct chunk *k)
{
	struct graphs *g = c->graphs;
	cudaGraph_t graph = NULL;
	capture_begin();
	cudaError_t e = cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal);
	if (e == cudaSuccess) {
		int bad = chunk_work(be, c, k);
		e = cudaStreamEndCapture(c->s, &graph); /* ends it, whatever happened */
		if (e == cudaSuccess && bad)
			e = cudaErrorInvalidValue;
	}
	capture_end();
	if (e == cudaSuccess)
		e = cudaGraphInstantiate(&g->slot[q].exec, graph, 0);
	if (graph)
		cudaGraphDestroy(graph);
	if (e != cudaSuccess) {
		cudaGetLastError(); /* the capture's error is not the next call's */
		ncf_debug("cuda backend: no CUDA graph for scoring %zu pairs (%s); plain launches",
			  k->n, g_quiet_msg[0] ? g_quiet_msg : cudaGetErrorString(e));
		g->off = 1;
		return 1;
	}
	g->slot[q].key = *k;
	g->slot[q].rows_gen = c->rows_gen;
	c->graph_captures++;
	return 0;
}

/* The slot holding a graph for k on the current row buffers, or -1; *free_q
 * gets a slot to capture into (empty, stale, else the least recently used). */
static int find_slot(const struct cu *c, const struct chunk *k, int *free_q)
{
	const struct graphs *g = c->graphs;
	int found = -1;
	*free_q = -1;
	for (int q = 0; q < GRAPH_SLOTS; q++) {
		int live = g->slot[q].key.n && g->slot[q].rows_gen == c->rows_gen;
		if (live && same_chunk(&g->slot[q].key, k))
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

int graph_chunk(struct ncf_backend *be, struct cu *c, const struct chunk *k)
{
	struct graphs *g = c->graphs;
	if (!g || g->off || k->n == 0 || k->n > c->cap)
		return 1;
	int free_q, q = find_slot(c, k, &free_q);
	if (q < 0) {
		if (g->slot[free_q].key.n) {
			cudaGraphExecDestroy(g->slot[free_q].exec);
			g->slot[free_q].key.n = 0;
		}
		if (capture(be, c, free_q, k) != 0)
			return 1;
		q = free_q;
	}
	g->slot[q].used = ++g->tick;
	CUDA_TRY(cudaGraphLaunch(g->slot[q].exec, c->s));
	c->graph_launches++;
	return 0;
}

/* ---- the training step ------------------------------------------------- */

/* A capture of the step did not work: say why once (at -v) and launch the
 * step plainly from now on.  Returns 1. */
static int step_graph_off(struct graphs *g, cudaError_t e)
{
	cudaGetLastError(); /* the capture's error is not the next call's */
	ncf_debug("cuda backend: no CUDA graph for the training step (%s); plain launches",
		  g_quiet_msg[0] ? g_quiet_msg : cudaGetErrorString(e));
	g->step_off = 1;
	return 1;
}

/*
 * The fused path's step only (the unfused path stays as it was before the
 * graph, for comparison), one rank (NCCL stays outside), no
 * NCF_CUDA_PROFILE (its events time each phase), not with NCF_CUDA_GRAPH=0
 * or NCF_CUDA_SYNC=1.  The step's arguments (positions, epoch, Adam's
 * constants, batch size) are kernel arguments, so the step is captured
 * anew each time, which costs the host about what launching it would, and
 * swapped into the instantiated graph (cudaGraphExecUpdate keeps the
 * instantiation when the launches are the same with other arguments; a
 * step whose launches differ is instantiated anew).  The device then runs
 * the whole step from one launch.  Inside the capture nothing allocates,
 * synchronises or sets a kernel attribute: step_prepare did that first.
 * The host state a step's work sets (the tables and the 16-bit copy made
 * valid) is put back when the capture fails, since the plain launches that
 * follow must do that work again.
 */
int graph_step(struct ncf_backend *be, struct cu *c, uint32_t epoch, uint64_t first, uint64_t n)
{
	struct graphs *g = c->graphs;
	if (!g || g->step_off || c->prof || be->dist->size > 1 || !fused_path(be, c))
		return 1;
	NCF_TRY(step_prepare(be, c, first, n));
	int tables_valid = c->tables_valid, plo_valid = c->plo_valid;
	cudaGraph_t graph = NULL;
	capture_begin();
	cudaError_t e = cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal);
	if (e == cudaSuccess) {
		int bad = step_work(be, c, epoch, first, n);
		e = cudaStreamEndCapture(c->s, &graph); /* ends it, whatever happened */
		if (e == cudaSuccess && bad)
			e = cudaErrorStreamCaptureInvalidated;
	}
	capture_end();
	if (e != cudaSuccess)
		goto failed;
	c->step_captures++;
	if (g->step_have) {
		cudaGraphExecUpdateResultInfo info;
		if (cudaGraphExecUpdate(g->step_exec, graph, &info) != cudaSuccess) {
			cudaGetLastError(); /* not an error: instantiate anew */
			cudaGraphExecDestroy(g->step_exec);
			g->step_have = 0;
		}
	}
	if (!g->step_have) {
		e = cudaGraphInstantiate(&g->step_exec, graph, 0);
		if (e != cudaSuccess)
			goto failed;
		g->step_have = 1;
		c->step_instantiations++;
	}
	cudaGraphDestroy(graph);
	CUDA_TRY(cudaGraphLaunch(g->step_exec, c->s));
	c->step_launches++;
	return 0;
failed:
	if (graph)
		cudaGraphDestroy(graph);
	c->tables_valid = tables_valid;
	c->plo_valid = plo_valid;
	return step_graph_off(g, e);
}

} /* namespace NCF_CUDA_NS */
