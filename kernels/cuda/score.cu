/*
 * score.cu - scoring and evaluation on the cuda backend (score.cuh): the
 * probabilities (or logits) of (user, item) pairs given by the host, of
 * pairs kept on the device for benchmarks, and the ranks of each user's
 * evaluation candidates (made on the device).
 *
 * The host path, score_host, for n pairs:
 *  - cut into chunks: one up to 65536 pairs, else four or more of at most
 *    EVAL_CHUNK, so that transfers overlap compute at every size;
 *  - two slots, each with pinned host buffers and device buffers for one
 *    chunk.  Chunk k uses slot k % 2: the host copies its ids into the
 *    slot's pinned buffers, the h2d stream copies them to the device, the
 *    compute stream (c->s) waits for that copy, checks the ids and runs the
 *    forward pass (a CUDA graph per chunk size and slot, graphs.cu) with the
 *    sigmoid in the head kernel, the d2h stream waits for the compute and
 *    copies the results and the chunk's bad-pair word back.  Before reusing
 *    a slot for chunk k + 2 the host waits for chunk k's copy back and takes
 *    its results, so chunk k + 1's transfers and the host's copies run while
 *    chunk k computes;
 *  - ids are checked on the device (check_ids_kernel, as the ids are copied
 *    to the row buffers the forward pass reads): a pair outside the model is
 *    scored as (0, 0) and leaves its index in the chunk's word; the host
 *    reads the word with the results and, after the last chunk, names the
 *    first bad pair, as the cpu backend does.
 *
 * The resident path (NVIDIA's inference.py measures with the inputs already
 * on the device and a synchronisation around each pass): resident_set
 * copies the pairs to the device once, checked there and then;
 * score_resident runs the same chunks as the host path (check, forward,
 * sigmoid, graphs) on them and waits, without transfers.
 *
 * Evaluation (score_eval_ranks) makes each user's candidates on the
 * device, scores them in chunks of EVAL_CHUNK pairs and ranks them there;
 * only the ranks come back.
 *
 * Legend: n pairs, U users, I items, N evaluation negatives per user.
 */
#include "graphs.cuh"
#include "params.cuh"
#include "rows.cuh"
#include "score.cuh"

namespace NCF_CUDA_NS {

static const size_t EVAL_CHUNK = (size_t)1 << 20; /* (user, item) pairs per scoring launch */

/* ---- the forward pass ----------------------------------------------------- */

/* Layers 2..L on n rows: h[k] = relu(h[k-1] W_k^T + b_k), no dropout. */
template <typename T>
static int mlp_forward(struct ncf_backend *be, struct cu *c, size_t n, const dropout_k &none)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	const T *w = lowp<T>(c);
	cudaDataType dt = dtype_of<T>();
	for (uint32_t k = 2; k < s->n_layers; k++) {
		size_t in = s->layers[k - 1], out = s->layers[k];
		NCF_TRY(lin_fwd(&c->blas, {"gemm_fwd", n, in, out}, {c->h[k - 1], dt, in},
				{w + L->w[k], dt, in}, {c->h[k], dt, out}));
		NCF_TRY(bias_relu_dropout_cuda<T>(n, (uint32_t)out, (T *)c->h[k],
						  c->params + L->b[k], none, k - 1, NULL, c->s));
	}
	return 0;
}

/* Logits (prob: probabilities) of the n pairs in c->su, c->si into out
 * (device), no dropout, reading the tables as they are (params_tables
 * first). */
template <typename T>
static int forward(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob)
{
	const struct ncf_shape *s = &be->shape;
	const struct ncf_layout *L = &be->layout;
	dropout_k none;
	memset(&none, 0, sizeof none);
	uint32_t last = s->n_layers - 1;
	layer1_rows<T> l1 = {n, s->layers[1], c->su, c->si, (const T *)c->AU, (const T *)c->AI,
			     c->params + L->b[1], (T *)c->h[1]};
	NCF_TRY(layer1_cuda<T>(l1, c->s));
	NCF_TRY(mlp_forward<T>(be, c, n, none));
	head_rows<T> a = {n, s->factors, s->layers[last], c->su, c->si, c->params + L->gmf_user,
			  c->params + L->gmf_item, c->params + L->head_w, (const T *)c->h[last]};
	return head_logits_cuda<T>(a, prob, out, c->s);
}

static int forward_any(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob)
{
	return by_act(c->act, [&](auto t) { return forward<decltype(t)>(be, c, n, out, prob); });
}

/* Pairs of the chunk a host call of n pairs is cut into. */
static size_t host_chunk(size_t n)
{
	if (n <= 65536)
		return n;
	size_t c = (n + 3) / 4;
	c = (c + 4095) / 4096 * 4096;
	return c < EVAL_CHUNK ? c : EVAL_CHUNK;
}

/* ---- the id check --------------------------------------------------------- */

/* u_out[j], i_out[j] = the chunk's pair j when inside the model (U users,
 * I items), else (0, 0) and *k.bad = min(*k.bad, j). */
struct id_check {
	size_t n;
	const uint32_t *u_in, *i_in; /* (n) */
	uint32_t U, I;
	uint32_t *u_out, *i_out;     /* (n) */
	unsigned long long *bad;
};
static constexpr launch_facts check_ids_facts = {BLOCK, 8};
__global__ void NCF_BOUNDS(check_ids_facts) check_ids_kernel(id_check a)
{
	size_t j = NCF_TID;
	if (j >= a.n)
		return;
	uint32_t u = a.u_in[j], it = a.i_in[j];
	if (u >= a.U || it >= a.I) {
		atomicMin(a.bad, (unsigned long long)j); /* integer: the result is the minimum */
		u = 0;
		it = 0;
	}
	a.u_out[j] = u;
	a.i_out[j] = it;
}

static int check_ids_cuda(const id_check &a, cudaStream_t stream)
{
	unsigned blocks;
	if (grid_1d(a.n, &blocks))
		return -1;
	if (!blocks)
		return 0;
	/* ids read and written (cost.cuh; scoring is not run dry, but every
	 * launcher notes what it moves) */
	cost_shape sh = cost_shape_for(check_ids_facts, blocks, 8, 1);
	if (NCF_COST_SHAPED("check_ids", 16.0 * a.n, 0, sh))
		return 0;
	NCF_LAUNCH(check_ids_kernel, blocks, BLOCK, 0, stream, a);
	return CUDA_CHECK(cudaGetLastError());
}

/*
 * One scoring chunk: n pairs read from in_u, in_i (device); a pair outside
 * the model is scored as (0, 0) and sets *bad (device) to the smallest such
 * j; logits or (prob) probabilities into out (device).  Its fields are what
 * a graph of it bakes in (the key of graphs_cached).
 */
struct chunk {
	size_t n;
	const uint32_t *in_u, *in_i; /* (n) */
	float *out;		     /* (n) */
	unsigned long long *bad;     /* one word, all ones when every pair was inside */
	int prob;
};

/* The chunk's launches, as the graph holds them (graph_work). */
struct chunk_arg {
	struct ncf_backend *be;
	const struct chunk *k;
};
static int chunk_work(void *arg)
{
	const struct chunk_arg *a = (const struct chunk_arg *)arg;
	struct ncf_backend *be = a->be;
	struct cu *c = impl(be);
	const struct chunk *k = a->k;
	if (!NCF_COST(COST_MEMSET, "set_bad", (double)sizeof *k->bad, 0))
		CUDA_TRY(cudaMemsetAsync(k->bad, 0xFF, sizeof *k->bad, c->s));
	id_check ids = {k->n, k->in_u, k->in_i, be->shape.users, be->shape.items, c->su, c->si,
			k->bad};
	NCF_TRY(check_ids_cuda(ids, c->s));
	return forward_any(be, c, k->n, k->out, k->prob);
}

/* A chunk as a graph when it can be, else with plain launches (the row
 * buffers and the tables ready: scorer_ready). */
static int run_chunk(struct ncf_backend *be, struct cu *c, const struct chunk *k)
{
	struct chunk key;
	memset(&key, 0, sizeof key); /* padding too: the key is compared as bytes */
	key.n = k->n, key.in_u = k->in_u, key.in_i = k->in_i, key.out = k->out;
	key.bad = k->bad, key.prob = k->prob;
	struct chunk_arg a = {be, k};
	int g = 1;
	if (k->n && k->n <= c->cap) {
		char what[64];
		snprintf(what, sizeof what, "scoring %zu pairs", k->n);
		g = graphs_cached(c, &key, sizeof key, chunk_work, &a, what);
	}
	if (g <= 0)
		return g;
	return chunk_work(&a);
}

/* ---- streams and buffers ----------------------------------------------- */

struct slot {
	uint32_t *pin_u, *pin_i;      /* (cap) pinned */
	float *pin_out;		      /* (cap) pinned */
	unsigned long long *pin_bad;  /* one word, pinned */
	uint32_t *d_u, *d_i;	      /* (cap) device */
	float *d_out;		      /* (cap) device */
	unsigned long long *d_bad;    /* one word, device */
	cudaEvent_t in_done, computed, out_done;
	int have_events;
	size_t o, k; /* the chunk in flight: first pair, pairs (k = 0: none) */
};

struct scorer {
	cudaStream_t h2d, d2h;
	int have_h2d, have_d2h;
	struct slot sl[2];
	size_t cap;		 /* pairs per slot */
	uint32_t *r_u, *r_i;	 /* (r_n) resident pairs */
	size_t r_n;
};

static void slot_buffers_free(struct slot *sl)
{
	if (sl->pin_u)
		cudaFreeHost(sl->pin_u);
	if (sl->pin_i)
		cudaFreeHost(sl->pin_i);
	if (sl->pin_out)
		cudaFreeHost(sl->pin_out);
	if (sl->pin_bad)
		cudaFreeHost(sl->pin_bad);
	sl->pin_u = sl->pin_i = NULL;
	sl->pin_out = NULL;
	sl->pin_bad = NULL;
	dfree(sl->d_u), dfree(sl->d_i), dfree(sl->d_out), dfree(sl->d_bad);
	sl->k = 0;
}

void score_free(struct cu *c)
{
	struct scorer *sc = c->sc;
	dfree(c->ranks);
	c->ranks_cap = 0;
	if (!sc)
		return;
	for (int s = 0; s < 2; s++) {
		struct slot *sl = &sc->sl[s];
		slot_buffers_free(sl);
		if (sl->have_events) {
			cudaEventDestroy(sl->in_done);
			cudaEventDestroy(sl->computed);
			cudaEventDestroy(sl->out_done);
		}
	}
	dfree(sc->r_u), dfree(sc->r_i);
	if (sc->have_h2d)
		cudaStreamDestroy(sc->h2d);
	if (sc->have_d2h)
		cudaStreamDestroy(sc->d2h);
	free(sc);
	c->sc = NULL;
}

/* The scorer's streams and events (once).  Returns 0 or -1. */
static int scorer_open(struct cu *c)
{
	if (c->sc)
		return 0;
	struct scorer *sc = (struct scorer *)ncf_xcalloc(1, sizeof *sc);
	c->sc = sc;
	CUDA_TRY(cudaStreamCreateWithFlags(&sc->h2d, cudaStreamNonBlocking));
	sc->have_h2d = 1;
	CUDA_TRY(cudaStreamCreateWithFlags(&sc->d2h, cudaStreamNonBlocking));
	sc->have_d2h = 1;
	for (int s = 0; s < 2; s++) {
		struct slot *sl = &sc->sl[s];
		CUDA_TRY(cudaEventCreateWithFlags(&sl->in_done, cudaEventDisableTiming));
		CUDA_TRY(cudaEventCreateWithFlags(&sl->computed, cudaEventDisableTiming));
		CUDA_TRY(cudaEventCreateWithFlags(&sl->out_done, cudaEventDisableTiming));
		sl->have_events = 1;
	}
	return 0;
}

/* Slots for chunks of up to n pairs.  Returns 0 or -1. */
static int slots_grow(struct scorer *sc, size_t n)
{
	if (n <= sc->cap)
		return 0;
	size_t cap = n < 65536 ? 65536 : n;
	sc->cap = 0;
	for (int s = 0; s < 2; s++) {
		struct slot *sl = &sc->sl[s];
		slot_buffers_free(sl);
		CUDA_TRY(cudaMallocHost((void **)&sl->pin_u, cap * sizeof *sl->pin_u));
		CUDA_TRY(cudaMallocHost((void **)&sl->pin_i, cap * sizeof *sl->pin_i));
		CUDA_TRY(cudaMallocHost((void **)&sl->pin_out, cap * sizeof *sl->pin_out));
		CUDA_TRY(cudaMallocHost((void **)&sl->pin_bad, sizeof *sl->pin_bad));
		NCF_TRY(DALLOC(sl->d_u, cap));
		NCF_TRY(DALLOC(sl->d_i, cap));
		NCF_TRY(DALLOC(sl->d_out, cap));
		NCF_TRY(DALLOC(sl->d_bad, 1));
	}
	sc->cap = cap;
	return 0;
}

/* Everything a call with chunks of `chunk` pairs needs, before it issues
 * work: streams, slots, row buffers, the tables.  Returns 0 or -1. */
static int scorer_ready(struct ncf_backend *be, struct cu *c, size_t chunk)
{
	NCF_TRY(scorer_open(c));
	NCF_TRY(slots_grow(c->sc, chunk));
	NCF_TRY(rows_ensure(be, c, chunk));
	return params_tables_any(be, c);
}

/* After a failure in the middle of a call: wait for what was issued (its
 * errors were reported or will be by the next call) and forget the chunks
 * in flight. */
static void scorer_quiesce(struct cu *c)
{
	struct scorer *sc = c->sc;
	cudaStreamSynchronize(sc->h2d);
	cudaStreamSynchronize(c->s);
	cudaStreamSynchronize(sc->d2h);
	sc->sl[0].k = sc->sl[1].k = 0;
}

/* ---- the host path --------------------------------------------------------- */

/* n bytes from src to dst, by several threads when it is large (the copies
 * into and out of the pinned buffers are the host's part of the pipeline). */
static void host_copy(void *dst, const void *src, size_t n)
{
	const size_t piece = (size_t)1 << 20;
	size_t pieces = (n + piece - 1) / piece;
#pragma omp parallel for schedule(static) if (pieces > 1)
	for (size_t k = 0; k < pieces; k++) {
		size_t o = k * piece, len = n - o < piece ? n - o : piece;
		memcpy((char *)dst + o, (const char *)src + o, len);
	}
}

/* Issue the chunk staged in sl (len pairs): copy in, compute, copy out. */
static int issue(struct ncf_backend *be, struct cu *c, struct scorer *sc, struct slot *sl,
		 size_t len, int prob)
{
	size_t bytes = len * sizeof(uint32_t);
	CUDA_TRY(cudaMemcpyAsync(sl->d_u, sl->pin_u, bytes, cudaMemcpyHostToDevice, sc->h2d));
	CUDA_TRY(cudaMemcpyAsync(sl->d_i, sl->pin_i, bytes, cudaMemcpyHostToDevice, sc->h2d));
	CUDA_TRY(cudaEventRecord(sl->in_done, sc->h2d));
	CUDA_TRY(cudaStreamWaitEvent(c->s, sl->in_done, 0));
	struct chunk k = {len, sl->d_u, sl->d_i, sl->d_out, sl->d_bad, prob};
	NCF_TRY(run_chunk(be, c, &k));
	CUDA_TRY(cudaEventRecord(sl->computed, c->s));
	CUDA_TRY(cudaStreamWaitEvent(sc->d2h, sl->computed, 0));
	CUDA_TRY(cudaMemcpyAsync(sl->pin_out, sl->d_out, len * sizeof(float),
				 cudaMemcpyDeviceToHost, sc->d2h));
	CUDA_TRY(cudaMemcpyAsync(sl->pin_bad, sl->d_bad, sizeof *sl->pin_bad,
				 cudaMemcpyDeviceToHost, sc->d2h));
	CUDA_TRY(cudaEventRecord(sl->out_done, sc->d2h));
	return 0;
}

/* Wait for the chunk in flight in sl, take its results into out and its
 * first bad pair into *first_bad (the smallest so far). */
static int retire(struct slot *sl, float *out, uint64_t *first_bad)
{
	CUDA_TRY(cudaEventSynchronize(sl->out_done));
	host_copy(out + sl->o, sl->pin_out, sl->k * sizeof *out);
	unsigned long long b = *sl->pin_bad;
	if (b != ~0ull && sl->o + b < *first_bad)
		*first_bad = sl->o + b;
	sl->k = 0;
	return 0;
}

/* The pairs of a host call: users, items (n), the results out (n). */
struct host_pairs {
	const uint32_t *users, *items;
	size_t n;
	float *out;
	int prob;
};

static int host_pipeline(struct ncf_backend *be, const host_pairs &hp, size_t chunk,
			 uint64_t *first_bad)
{
	struct cu *c = impl(be);
	struct scorer *sc = c->sc;
	const uint32_t *users = hp.users, *items = hp.items;
	size_t n = hp.n;
	float *out = hp.out;
	int prob = hp.prob;
	size_t chunks = (n + chunk - 1) / chunk;
	for (size_t q = 0; q < chunks + 2; q++) {
		struct slot *sl = &sc->sl[q % 2];
		if (sl->k) /* chunk q - 2: done before its slot takes chunk q */
			NCF_TRY(retire(sl, out, first_bad));
		if (q >= chunks)
			continue;
		size_t o = q * chunk, len = n - o < chunk ? n - o : chunk;
		host_copy(sl->pin_u, users + o, len * sizeof *users);
		host_copy(sl->pin_i, items + o, len * sizeof *items);
		NCF_TRY(issue(be, c, sc, sl, len, prob));
		sl->o = o;
		sl->k = len;
	}
	return 0;
}

int score_host(struct ncf_backend *be, struct cu *c, const uint32_t *users, const uint32_t *items,
	       size_t n, float *out, int prob)
{
	if (n == 0)
		return 0;
	size_t chunk = host_chunk(n);
	NCF_TRY(scorer_ready(be, c, chunk));
	uint64_t bad = UINT64_MAX;
	host_pairs hp = {users, items, n, out, prob};
	if (host_pipeline(be, hp, chunk, &bad) != 0) {
		scorer_quiesce(c);
		return -1;
	}
	if (bad != UINT64_MAX) {
		ncf_error("cuda backend: pair %llu (user %u, item %u) is outside the model (%u users, "
			  "%u items)",
			  (unsigned long long)bad, users[bad], items[bad], be->shape.users,
			  be->shape.items);
		return -1;
	}
	return 0;
}

/* ---- pairs kept on the device ------------------------------------------- */

int score_keep(struct ncf_backend *be, struct cu *c, const uint32_t *users, const uint32_t *items,
	       size_t n)
{
	NCF_TRY(scorer_open(c));
	struct scorer *sc = c->sc;
	for (size_t j = 0; j < n; j++) /* once, when they are kept */
		if (users[j] >= be->shape.users || items[j] >= be->shape.items) {
			ncf_error("cuda backend: pair %zu (user %u, item %u) is outside the model "
				  "(%u users, %u items)",
				  j, users[j], items[j], be->shape.users, be->shape.items);
			return -1;
		}
	sc->r_n = 0;
	dfree(sc->r_u), dfree(sc->r_i);
	NCF_TRY(DALLOC(sc->r_u, n));
	NCF_TRY(DALLOC(sc->r_i, n));
	if (n) {
		CUDA_TRY(cudaMemcpyAsync(sc->r_u, users, n * sizeof *users, cudaMemcpyHostToDevice,
					 c->s));
		CUDA_TRY(cudaMemcpyAsync(sc->r_i, items, n * sizeof *items, cudaMemcpyHostToDevice,
					 c->s));
	}
	CUDA_TRY(cudaStreamSynchronize(c->s));
	sc->r_n = n;
	return 0;
}

int score_kept(struct ncf_backend *be, struct cu *c, size_t n, float *out, int prob)
{
	struct scorer *sc = c->sc;
	size_t kept = sc ? sc->r_n : 0;
	if (n > kept) {
		ncf_error("cuda backend: %zu pairs asked for, %zu kept on the device", n, kept);
		return -1;
	}
	if (n == 0)
		return 0;
	size_t chunk = n < EVAL_CHUNK ? n : EVAL_CHUNK;
	NCF_TRY(scorer_ready(be, c, chunk));
	struct slot *sl = &sc->sl[0];
	for (size_t o = 0; o < n; o += chunk) {
		size_t len = n - o < chunk ? n - o : chunk;
		struct chunk k = {len, sc->r_u + o, sc->r_i + o, sl->d_out, sl->d_bad, prob};
		NCF_TRY(run_chunk(be, c, &k));
		if (out)
			CUDA_TRY(cudaMemcpyAsync(out + o, sl->d_out, len * sizeof *out,
						 cudaMemcpyDeviceToHost, c->s));
	}
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

/* ---- evaluation --------------------------------------------------------- */

int score_eval_ranks(struct ncf_backend *be, struct cu *c, uint32_t u0, uint32_t u1,
		     uint32_t *ranks)
{
	if (!c->have_ed) {
		ncf_error("cuda backend: no evaluation data");
		return -1;
	}
	if (u1 <= u0)
		return 0;
	size_t per = (size_t)c->N + 1, nusers = u1 - u0;
	size_t upc = EVAL_CHUNK / per ? EVAL_CHUNK / per : 1;
	if (upc > nusers)
		upc = nusers;
	NCF_TRY(rows_ensure(be, c, upc * per));
	NCF_TRY(params_tables_any(be, c));
	if (nusers > c->ranks_cap) {
		dfree(c->ranks);
		c->ranks_cap = 0;
		NCF_TRY(DALLOC(c->ranks, nusers));
		c->ranks_cap = nusers;
	}
	for (size_t a = u0; a < u1; a += upc) {
		uint32_t nb = (uint32_t)(u1 - a < upc ? u1 - a : upc);
		NCF_TRY(eval_pairs_cuda((uint32_t)a, nb, c->N, c->test, c->neg, c->su, c->si,
					c->s));
		NCF_TRY(forward_any(be, c, (size_t)nb * per, c->dl, 0));
		NCF_TRY(rank_cuda(c->dl, c->counted, (uint32_t)a, nb, c->N, c->ranks + (a - u0),
				  c->s));
	}
	CUDA_TRY(cudaMemcpyAsync(ranks, c->ranks, nusers * sizeof *ranks, cudaMemcpyDeviceToHost,
				 c->s));
	return CUDA_CHECK(cudaStreamSynchronize(c->s));
}

} /* namespace NCF_CUDA_NS */
