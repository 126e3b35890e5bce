/*
 * graphs.cu - scoring chunks replayed as CUDA graphs (see backend.cuh and
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
 * Under NCF_CUDA_SYNC=1 there are no graphs.  The emulation (emu.h)
 * captures and replays too, so the tests exercise all of this.
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
};

int graphs_init(struct cu *c)
{
	c->graphs = (struct graphs *)ncf_xcalloc(1, sizeof *c->graphs);
	NCF_TRY(DALLOC_BYTES(&c->graphs->blas_ws, BLAS_WORKSPACE));
	CUBLAS_TRY(cublasSetWorkspace(c->blas, c->graphs->blas_ws, BLAS_WORKSPACE));
	if (!graphs_allowed()) {
		c->graphs->off = 1;
		ncf_debug("cuda backend: NCF_CUDA_SYNC=1: no CUDA graphs");
	}
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

} /* namespace NCF_CUDA_NS */
