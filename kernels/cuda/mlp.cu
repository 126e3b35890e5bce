/*
 * mlp.cu - the fused dense layers of the training step (kernels.cuh; the
 * fused implementation of dense.cuh): one kernel per layer and direction
 * that does the layer's matrix product on tensor cores (mma.cuh) and
 * applies what the plain implementation does in separate passes while the
 * product's tile is still on chip:
 *
 *   linear_fwd_cuda:  h_out = dropout(relu(h_in W^T + b))           (rows, out)
 *   linear_bwd_cuda:  dz_in = h_in > 0 ? (dz_out W) * scale : 0      (rows, in)
 *                     and per block of BWD_ROWS rows the column sums of
 *                     dz_in (the bias gradient's partials, summed in a fixed
 *                     order by reduce_partials_cuda)
 *
 * so each activation is written once and read once by the next layer, and
 * the dropout mask is recomputed from Philox (forward) or read from the sign
 * of h_in (backward: h_in > 0 exactly where the unit was kept and its input
 * was positive), never stored.  The weight gradient dW = dz_out^T h_in is
 * computed in the same backward pass (linear_bwdw_kernel, below) for layers
 * of at most BWDW_MAX_OUT outputs; a wider layer keeps a cuBLAS GEMM
 * (dense.cu).
 *
 * Tiles: a block of 256 threads (8 warps, 4 x 2) computes 64 rows by all
 * `n` columns of its output (n <= FUSED_MAX_WIDTH, padded to 16), the
 * reduction dimension in chunks of KC staged in shared memory; warp (wm, wn)
 * owns rows 16 wm .. 16 wm + 16 and the column tiles wn, wn + 2, ...  In the
 * epilogue a warp stores one 16x16 float tile to its staging area and lane l
 * finishes row l / 2, columns 8 (l % 2) .. + 8 of it: one Philox block of
 * dropout bits (ncf_dropout_bits, 8 units) and one 16-byte store.  Tile
 * counts per warp are compile-time constants (loops of 8 or 4 tiles with a
 * predicate), and what depends on runtime widths (which dW tile a warp
 * owns, which 16-byte piece a thread stages) is worked out once per
 * kernel, so the loops divide nothing.
 *
 * Rounding: the forward pass adds the bias to the fp32 product and rounds
 * once to T (the plain dense layers round the product to T first).  In precision
 * fp32 (MMA_F32) each output is the sum of its K products in k order, then
 * the bias: what reference.c's linear_forward computes, bit for bit.
 */
#include "kernels.cuh"
#include "mma.cuh"

namespace NCF_CUDA_NS {

enum { FUSED_BM = 64, FUSED_THREADS = 256 };
/* The fused layers' kernels: 256 threads a block, two blocks an SM (their
 * __launch_bounds__ and their cost notes read this). */
static constexpr launch_facts mlp_facts = {FUSED_THREADS, 2};

/*
 * The sm_90 SASS of each kernel's inner loop (the innermost loop that holds
 * its mma instructions): instructions issued per mma.sync, for bf16, fp16
 * and tf32 (fp32 has no mma), as tests/gpu/sass.t counts them in the build
 * and checks against these.  The cost model's issue term (cost.cuh) is a
 * launch's mma instructions times this.
 */
struct mma_issue {
	float bf16, f16, tf32;
};
static constexpr mma_issue issue_fwd = {10.8f, 10.8f, 16.3f}, issue_fwd_ws = {5.0f, 5.0f, 10.9f},
			   issue_bwd = {9.2f, 9.2f, 16.3f}, issue_bwdw = {8.1f, 8.1f, 16.2f};

/* Warp instructions of `flops` of mma work at `per` instructions an mma
 * (tf32: m16n8k8, 2048 FLOPs; 16-bit: m16n8k16, 4096). */
template <typename T, int MODE> static double issue_of(double flops, const mma_issue &per)
{
	if (MODE == MMA_F32)
		return 0;
	if (MODE == MMA_TF32)
		return flops / 2048 * per.tf32;
	return flops / 4096 * (std::is_same<T, bf16>::value ? per.bf16 : per.f16);
}

/* Chunk of the reduction dimension and shared-memory padding (16 bytes) by
 * element size. */
template <typename T> struct tile_dims {
	enum { KC = sizeof(T) == 2 ? 32 : 16, PAD = 16 / sizeof(T), LDA = KC + PAD };
};

/* Which operands move in 16-byte pieces (aligned, widths multiples of 8):
 * the input (X, dZ), W, the output and what has its shape (Y; H and dX). */
struct pieces {
	int x, w, y;
};

/* Where a thread sits: warp (wm, wn) of the 4 x 2, lane, and the row r and
 * first column c0 of the epilogue's 8 outputs of a 16x16 tile. */
struct lane_pos {
	unsigned warp, wm, wn, lane, r, c0;
};
NCF_DEV lane_pos lane_pos_of(void)
{
	unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	lane_pos p = {warp, warp / 2, warp % 2, lane, lane / 2, (lane % 2) * 8};
	return p;
}

/*
 * s[r lds + c] = g[(r0 + r) ldg + c0 + c] where r0 + r < rmax and c0 + c <
 * cmax, else 0, for r < t.R, c < t.C (C a multiple of 8), by the threads of
 * the block in pieces of 8 elements (w = walk_of(t.C / 8)): one 16-byte
 * copy (two for float) where m.vec and the piece is whole.
 */
template <typename T>
NCF_DEV void load_tile(const stile<T> &t, const gmat<T> &m, size_t r0, uint32_t c0,
		       const piece_walk &w)
{
	unsigned r = w.r, c = w.c;
	for (; r < t.R; walk_next(w, r, c)) {
		size_t gr = r0 + r;
		uint32_t gc = c0 + 8 * c;
		T *dst = t.s + (size_t)r * t.ld + 8 * c;
		const T *src = m.g + gr * m.ld + gc;
		if (gr < m.rmax && m.vec && gc + 8 <= m.cmax) {
			st16(dst, ld16(src));
			if (sizeof(T) == 4)
				st16(dst + 4, ld16(src + 4));
			continue;
		}
		NCF_UNROLL
		for (unsigned e = 0; e < 8; e++)
			dst[e] = gr < m.rmax && gc + e < m.cmax ? src[e] : from_f32<T>(0.0f);
	}
}

/* ---- forward ------------------------------------------------------------- */

/*
 * The forward epilogue of a block's 64 rows from row0: each warp stages its
 * accumulators' 16x16 tiles (nt of them across the output) in st and this
 * lane (row r, columns c0 .. c0 + 8 of a tile) adds the bias, applies ReLU
 * and dropout (one Philox block of bits for its 8 units) and stores its 8
 * outputs at once (16 bytes where vecy).
 */
template <typename P, typename T>
NCF_DEV void fwd_epilogue(typename P::frag_c acc[8], float *st, size_t row0, uint32_t nt,
			  const layer_fwd<T> &a, int vecy, const lane_pos &lp)
{
	size_t row = row0 + 16 * lp.wm + lp.r;
	NCF_UNROLL
	for (uint32_t i = 0; i < 8; i++) {
		uint32_t t = lp.wn + 2 * i;
		if (t >= nt)
			continue;
		P::store(st, acc[i], 16);
		__syncwarp();
		uint32_t h0 = 16 * t + lp.c0;
		if (row < a.rows && h0 < a.out) {
			uint32_t cnt = a.out - h0 < 8 ? a.out - h0 : 8;
			ncf_u32x4 bits = dropout_bits_at(a.dk, a.rowpos ? a.rowpos[row] : row,
							 a.layer, h0 / 8);
			float v[8];
			NCF_UNROLL
			for (uint32_t e = 0; e < 8; e++) {
				float x = st[lp.r * 16 + lp.c0 + e] + (e < cnt ? a.b[h0 + e] : 0.0f);
				float y = relu(x); /* keeps a NaN (common.cuh) */
				if (a.dk.active)
					y = y * dropout_mult(a.dk, bits, e);
				v[e] = y;
			}
			store_upto8(a.Y + row * a.out + h0, v, cnt, vecy && cnt == 8);
		}
		__syncwarp();
	}
}

/* acc[i] += the product of row block x (16 rows at 16 wm) and column tile
 * wn + 2 i of w (nt tiles; B read as W^T: W[n][k] at w[n ld + k]), over k
 * < kn in steps of KSTEP; x and w with leading dimension ld. */
template <typename P, typename T>
NCF_DEV void fwd_tiles(typename P::frag_c acc[8], const T *x, const T *w, unsigned ld,
		       uint32_t kn, uint32_t nt, const lane_pos &lp)
{
	for (uint32_t kk = 0; kk < kn; kk += P::KSTEP) {
		typename P::frag_a fa;
		P::load_a(fa, x + 16 * lp.wm * ld + kk, ld);
		NCF_UNROLL
		for (uint32_t i = 0; i < 8; i++) {
			uint32_t t = lp.wn + 2 * i;
			if (t < nt) {
				typename P::template frag_b<mma_col>::type fb;
				P::template load_b<mma_col>(fb, w + 16 * t * ld + kk, ld);
				P::mma(acc[i], fa, fb);
			}
		}
	}
}

template <typename T, int MODE>
__global__ void NCF_BOUNDS(mlp_facts) linear_fwd_kernel(layer_fwd<T> a, pieces v)
{
	typedef mma_tile<T, MODE> P;
	typedef tile_dims<T> D;
	__shared__ __align__(32) T xs[FUSED_BM * D::LDA];
	__shared__ __align__(32) T ws[FUSED_MAX_WIDTH * D::LDA];
	__shared__ __align__(32) float stage[FUSED_THREADS / 32][256];
	lane_pos lp = lane_pos_of();
	size_t row0 = (size_t)blockIdx.x * FUSED_BM;
	uint32_t npad = (a.out + 15) / 16 * 16, nt = npad / 16;
	piece_walk walk = walk_of(D::KC / 8);
	typename P::frag_c acc[8];
	NCF_UNROLL
	for (int i = 0; i < 8; i++)
		P::zero(acc[i]);
	for (uint32_t k0 = 0; k0 < a.in; k0 += D::KC) {
		load_tile(stile<T>{xs, D::LDA, FUSED_BM, D::KC}, gmat<T>{a.X, a.in, a.rows, a.in, v.x},
			  row0, k0, walk);
		load_tile(stile<T>{ws, D::LDA, npad, D::KC}, gmat<T>{a.W, a.in, a.out, a.in, v.w}, 0,
			  k0, walk);
		__syncthreads();
		uint32_t kn = a.in - k0 < (uint32_t)D::KC ? a.in - k0 : (uint32_t)D::KC;
		fwd_tiles<P>(acc, xs, ws, D::LDA, kn, nt, lp);
		__syncthreads();
	}
	fwd_epilogue<P>(acc, stage[lp.warp], row0, nt, a, v.y, lp);
}

/*
 * The forward pass with W resident (linear_fwd_ws_kernel): the same
 * products, sums and epilogue as linear_fwd_kernel, bit for bit, organised
 * so that memory stays busy.  A block loads W (npad, in) into shared memory
 * once, then takes row tiles blockIdx.x, + gridDim.x, ... (a persistent
 * grid of what the SMs hold at once), the next tile's X (64, in) copied in
 * by cp.async while the tensor cores work on the current one (two stages),
 * so a block keeps a whole tile in flight instead of one 16-byte piece a
 * thread; and W is read once per block instead of once per 64 rows.  For
 * layers whose W and two X tiles fit in shared memory (fwd_ws_fits).
 */
template <typename T> struct fwd_ws_smem {
	uint32_t ld, xs0, xs1, st, bytes;
	NCF_DI fwd_ws_smem(uint32_t in, uint32_t out)
	{
		uint32_t npad = (out + 15) / 16 * 16;
		ld = (in + 15) / 16 * 16 + tile_dims<T>::PAD;
		xs0 = npad * ld * (uint32_t)sizeof(T);
		xs1 = xs0 + FUSED_BM * ld * (uint32_t)sizeof(T);
		st = xs1 + FUSED_BM * ld * (uint32_t)sizeof(T);
		bytes = st + FUSED_THREADS / 32 * 256 * 4;
	}
};

template <typename T, int MODE>
__global__ void NCF_BOUNDS(mlp_facts) linear_fwd_ws_kernel(layer_fwd<T> a, pieces v)
{
	typedef mma_tile<T, MODE> P;
	NCF_DYN_SHARED(smem);
	fwd_ws_smem<T> L(a.in, a.out);
	T *ws = (T *)smem;
	lane_pos lp = lane_pos_of();
	uint32_t kpad = (a.in + 15) / 16 * 16, npad = (a.out + 15) / 16 * 16, nt = npad / 16;
	float *st = (float *)(smem + L.st) + lp.warp * 256;
	size_t tiles = (a.rows + FUSED_BM - 1) / FUSED_BM, tile = blockIdx.x;
	piece_walk walk = walk_of(kpad / (16 / sizeof(T)));
	gmat<T> X = {a.X, a.in, a.rows, a.in, v.x};
	stage_tile(stile<T>{ws, L.ld, npad, kpad}, gmat<T>{a.W, a.in, a.out, a.in, v.w}, 0, 0, walk);
	if (tile < tiles)
		stage_tile(stile<T>{(T *)(smem + L.xs0), L.ld, FUSED_BM, kpad}, X, tile * FUSED_BM, 0,
			   walk);
	cp_async_commit();
	for (unsigned i = 0; tile < tiles; i++, tile += gridDim.x) {
		size_t next = tile + gridDim.x;
		if (next < tiles)
			stage_tile(stile<T>{(T *)(smem + (i & 1 ? L.xs0 : L.xs1)), L.ld, FUSED_BM, kpad},
				   X, next * FUSED_BM, 0, walk);
		cp_async_commit();
		cp_async_wait<1>(); /* W and this tile are in; the next is on its way */
		__syncthreads();
		const T *x = (const T *)(smem + (i & 1 ? L.xs1 : L.xs0));
		typename P::frag_c acc[8];
		NCF_UNROLL
		for (int k = 0; k < 8; k++)
			P::zero(acc[k]);
		fwd_tiles<P>(acc, x, ws, L.ld, a.in, nt, lp);
		fwd_epilogue<P>(acc, st, tile * FUSED_BM, nt, a, v.y, lp);
		__syncthreads(); /* the next iteration refills this tile's stage */
	}
}

/* ---- backward ------------------------------------------------------------ */

/* Where a lane's 8 outputs of a tile of dX go: dst (16-byte stores where
 * vec), the cnt of them that exist (live: the row and columns exist), and
 * the 16 column sums of the tile they add to. */
template <typename T> struct dx_out {
	T *dst;
	bool live, vec;
	uint32_t cnt;
	float *colsum;
};

/*
 * The epilogue of one 16x16 tile of dX in both backward kernels: the warp
 * stages its accumulator acc in st (16 x 16 floats), and this lane (row r,
 * columns c0 .. c0 + 8 of the tile) makes d = h > 0 ? acc * scale : 0 of
 * its columns (h: the layer input's values there), stores them, and adds
 * the tile's column sums (rows in order) to o.colsum.
 */
template <typename P, typename T>
NCF_DEV void dx_tile(typename P::frag_c &acc, float *st, const float h[8], float scale,
		     const dx_out<T> &o, const lane_pos &lp)
{
	P::store(st, acc, 16);
	__syncwarp();
	float d[8];
	NCF_UNROLL
	for (uint32_t e = 0; e < 8; e++)
		d[e] = o.live && e < o.cnt && h[e] > 0.0f ? st[lp.r * 16 + lp.c0 + e] * scale : 0.0f;
	if (o.live)
		store_upto8(o.dst, d, o.cnt, o.vec && o.cnt == 8);
	__syncwarp();
	NCF_UNROLL
	for (uint32_t e = 0; e < 8; e++)
		st[lp.r * 16 + lp.c0 + e] = d[e];
	__syncwarp();
	if (lp.lane < 16) {
		float sum = 0.0f;
		for (unsigned rr = 0; rr < 16; rr++)
			sum += st[rr * 16 + lp.lane];
		o.colsum[lp.lane] += sum;
	}
	__syncwarp();
}

/* acc[i] += the product of row block z (16 rows at 16 wm) and column tile
 * wn + 2 i of w (NT tile slots, nt tiles; B row-major: w[k ld + n]), over
 * k < kn in steps of KSTEP; z with leading dimension ldz, w with ldw. */
template <typename P, int NT, typename T>
NCF_DEV void bwd_tiles(typename P::frag_c acc[NT], const T *z, unsigned ldz, const T *w,
		       unsigned ldw, uint32_t kn, uint32_t nt, const lane_pos &lp)
{
	for (uint32_t kk = 0; kk < kn; kk += P::KSTEP) {
		typename P::frag_a fa;
		P::load_a(fa, z + 16 * lp.wm * ldz + kk, ldz);
		NCF_UNROLL
		for (uint32_t i = 0; i < NT; i++) {
			uint32_t t = lp.wn + 2 * i;
			if (t < nt) {
				typename P::template frag_b<mma_row>::type fb;
				P::template load_b<mma_row>(fb, w + kk * ldw + 16 * t, ldw);
				P::mma(acc[i], fa, fb);
			}
		}
	}
}

template <typename T, int MODE>
__global__ void NCF_BOUNDS(mlp_facts) linear_bwd_kernel(layer_bwd<T> a, pieces v)
{
	typedef mma_tile<T, MODE> P;
	typedef tile_dims<T> D;
	__shared__ __align__(32) T zs[FUSED_BM * D::LDA];
	__shared__ __align__(32) T ws[D::KC * (FUSED_MAX_WIDTH + D::PAD)];
	__shared__ __align__(32) float stage[FUSED_THREADS / 32][256];
	__shared__ float colpart[4][FUSED_MAX_WIDTH];
	lane_pos lp = lane_pos_of();
	uint32_t npad = (a.in + 15) / 16 * 16, nt = npad / 16, ldb = npad + D::PAD;
	float *st = stage[lp.warp];
	piece_walk wz = walk_of(D::KC / 8), ww = walk_of(npad / 8);
	for (unsigned q = threadIdx.x; q < 4 * FUSED_MAX_WIDTH; q += blockDim.x)
		(&colpart[0][0])[q] = 0.0f;
	for (uint32_t rt = 0; rt < BWD_ROWS / FUSED_BM; rt++) {
		size_t row0 = (size_t)blockIdx.x * BWD_ROWS + rt * FUSED_BM;
		typename P::frag_c acc[8];
		NCF_UNROLL
		for (int i = 0; i < 8; i++)
			P::zero(acc[i]);
		for (uint32_t k0 = 0; k0 < a.out; k0 += D::KC) {
			load_tile(stile<T>{zs, D::LDA, FUSED_BM, D::KC},
				  gmat<T>{a.dZ, a.out, a.rows, a.out, v.x}, row0, k0, wz);
			load_tile(stile<T>{ws, ldb, D::KC, npad}, gmat<T>{a.W, a.in, a.out, a.in, v.w},
				  k0, 0, ww);
			__syncthreads();
			uint32_t kn = a.out - k0 < (uint32_t)D::KC ? a.out - k0 : (uint32_t)D::KC;
			bwd_tiles<P, 8>(acc, zs, D::LDA, ws, ldb, kn, nt, lp);
			__syncthreads();
		}
		size_t row = row0 + 16 * lp.wm + lp.r;
		NCF_UNROLL
		for (uint32_t i = 0; i < 8; i++) {
			uint32_t t = lp.wn + 2 * i;
			if (t >= nt)
				continue;
			uint32_t q0 = 16 * t + lp.c0;
			bool live = row < a.rows && q0 < a.in;
			uint32_t cnt = live ? (a.in - q0 < 8 ? a.in - q0 : 8) : 0;
			float hv[8] = {0};
			if (live)
				load_upto8(a.H + row * a.in + q0, hv, cnt, v.y && cnt == 8);
			dx_out<T> o = {a.dX + row * a.in + q0, live, v.y != 0, cnt,
				       &colpart[lp.wm][16 * t]};
			dx_tile<P>(acc[i], st, hv, a.scale, o, lp);
		}
	}
	__syncthreads();
	for (uint32_t q = threadIdx.x; q < a.in; q += blockDim.x)
		a.part[(size_t)blockIdx.x * a.part_ld + q] =
			((colpart[0][q] + colpart[1][q]) + colpart[2][q]) + colpart[3][q];
}

/* ---- backward with the weight gradient ----------------------------------- */

/*
 * Shared memory of linear_bwdw_kernel: its columns of W (opad, 128
 * columns of in) once, then two stages of a row tile's dZ (64, out) and H
 * (64, its 128 columns), and the column partials.  The warps' staging in
 * the epilogue takes the current stage's dZ tile when that is big enough
 * (dZ is no longer read then), else a place of its own.  Offsets stay
 * 32-byte aligned (every piece is a multiple of 32 bytes).
 */
template <typename T> struct bwdw_smem {
	uint32_t ldz, ldh, zs[2], hs[2], st, cp, bytes;
	int st_alias; /* the staging is the current dZ tile */
	NCF_DI bwdw_smem(uint32_t out, uint32_t qpad)
	{
		typedef tile_dims<T> D;
		uint32_t es = (uint32_t)sizeof(T), opad = (out + 15) / 16 * 16;
		ldz = opad + D::PAD;
		ldh = qpad + D::PAD;
		uint32_t wbytes = opad * ldh * es, zbytes = FUSED_BM * ldz * es;
		uint32_t hbytes = FUSED_BM * ldh * es, stbytes = FUSED_THREADS / 32 * 256 * 4;
		zs[0] = wbytes;
		hs[0] = zs[0] + zbytes;
		zs[1] = hs[0] + hbytes;
		hs[1] = zs[1] + zbytes;
		st_alias = zbytes >= stbytes;
		st = hs[1] + hbytes;
		cp = st + (st_alias ? 0 : stbytes);
		bytes = cp + 4 * BWDW_COLS * 4;
	}
};

/* A block's columns of the layer input: q0 .. q0 + qn (qpad padded to 16,
 * qt tiles), out padded to opad (ot tiles).  Warp w owns dW tiles w + 8 j
 * of the ot x qt grid: tile i is (i / qt, i % qt), the quotient as i inv
 * >> 16 with inv = ceil(2^16 / qt) (exact for i < 64, qt <= 8), so no
 * loop divides. */
struct bwdw_cols {
	uint32_t q0, qn, qpad, qt, opad, ot, inv;
	NCF_DEV bwdw_cols(uint32_t in, uint32_t out, uint32_t y)
	{
		q0 = BWDW_COLS * y;
		qn = in - q0 < BWDW_COLS ? in - q0 : (uint32_t)BWDW_COLS;
		qpad = (qn + 15) / 16 * 16;
		qt = qpad / 16;
		opad = (out + 15) / 16 * 16;
		ot = opad / 16;
		inv = (65536 + qt - 1) / qt;
	}
	/* dW tile i: does it exist, and its row and column tiles */
	NCF_DEV bool has(uint32_t i) const
	{
		return i < ot * qt;
	}
	NCF_DEV uint32_t row_tile(uint32_t i) const
	{
		return i * inv >> 16;
	}
	NCF_DEV uint32_t col_tile(uint32_t i) const
	{
		return i - row_tile(i) * qt;
	}
};
static_assert(BWDW_COLS / 16 <= 8 && FUSED_THREADS / 32 * 8 <= 64, "bwdw_cols' quotient");

/* accw[j] += dZ^T H over a tile's 64 rows for the warp's dW tiles
 * (k over the rows in order). */
template <typename P, typename T>
NCF_DEV void dw_tiles(typename P::frag_c accw[8], const T *zs, unsigned ldz, const T *hs,
		      unsigned ldh, const bwdw_cols &q, unsigned warp)
{
	for (uint32_t kr = 0; kr < FUSED_BM; kr += P::KSTEP) {
		NCF_UNROLL
		for (uint32_t j = 0; j < 8; j++) {
			uint32_t i = warp + 8 * j;
			if (!q.has(i))
				continue;
			typename P::frag_at fa;
			P::load_at(fa, zs + kr * ldz + 16 * q.row_tile(i), ldz);
			typename P::template frag_b<mma_row>::type fb;
			P::template load_b<mma_row>(fb, hs + kr * ldh + 16 * q.col_tile(i), ldh);
			P::mma(accw[j], fa, fb);
		}
	}
}

/* The warp's dW tiles (accw) to pw (out, in), its block's row of the
 * partials, through its staging st. */
template <typename P, typename T>
NCF_DEV void write_dw(typename P::frag_c accw[8], float *st, float *pw, const layer_bwd<T> &a,
		      const bwdw_cols &q, const lane_pos &lp)
{
	NCF_UNROLL
	for (uint32_t j = 0; j < 8; j++) {
		uint32_t i = lp.warp + 8 * j;
		if (!q.has(i))
			continue;
		P::store(st, accw[j], 16);
		__syncwarp();
		uint32_t o = 16 * q.row_tile(i) + lp.r, c = 16 * q.col_tile(i) + lp.c0;
		if (o < a.out)
			for (uint32_t e = 0; e < 8 && c + e < q.qn; e++)
				pw[(size_t)o * a.in + q.q0 + c + e] = st[lp.r * 16 + lp.c0 + e];
		__syncwarp();
	}
}

/*
 * Block b = y + Y g (Y = ceil(in / BWDW_COLS)): columns q0 = BWDW_COLS y ..
 * of in, row tiles g, g + G, g + 2G, ... of 64 rows.  The block loads its
 * columns of W once; the next tile's dZ and H come in by cp.async while the
 * current one is multiplied (two stages).  Per tile: dX's columns = H > 0 ?
 * (dZ W) * scale : 0 (k over out in order), and dW's columns += dZ^T H (k
 * over the tile's rows in order; rows past the end are zeros).  The block
 * then writes its column sums of dX (part, row g) and its dW (partw, (G,
 * out, in), row g).  Warp w: dX rows 16 (w / 2), column tiles w % 2 + 2 i;
 * dW tiles w + 8 j of the (out / 16) x (BWDW_COLS / 16) grid.  The sums are
 * those of one pass over the tiles in order, the same whatever the stages.
 */
template <typename T, int MODE>
__global__ void NCF_BOUNDS(mlp_facts) linear_bwdw_kernel(layer_bwd<T> a, pieces v, uint32_t G)
{
	typedef mma_tile<T, MODE> P;
	NCF_DYN_SHARED(smem);
	lane_pos lp = lane_pos_of();
	uint32_t Y = (a.in + BWDW_COLS - 1) / BWDW_COLS, g = blockIdx.x / Y;
	bwdw_cols q(a.in, a.out, blockIdx.x % Y);
	bwdw_smem<T> L(a.out, q.qpad);
	T *ws = (T *)smem;
	float(*colpart)[BWDW_COLS] = (float(*)[BWDW_COLS])(smem + L.cp);
	const unsigned E = 16 / sizeof(T);
	piece_walk wz = walk_of(q.opad / E), wh = walk_of(q.qpad / E);
	gmat<T> Z = {a.dZ, a.out, a.rows, a.out, v.x}, H = {a.H, a.in, a.rows, a.in, v.y};
	for (unsigned c = threadIdx.x; c < 4 * BWDW_COLS; c += blockDim.x)
		(&colpart[0][0])[c] = 0.0f;
	typename P::frag_c accw[8];
	NCF_UNROLL
	for (int j = 0; j < 8; j++)
		P::zero(accw[j]);
	size_t tiles = (a.rows + FUSED_BM - 1) / FUSED_BM, tile = g;
	stage_tile(stile<T>{ws, L.ldh, q.opad, q.qpad}, gmat<T>{a.W, a.in, a.out, a.in, v.w}, 0,
		   q.q0, wh);
	if (tile < tiles) {
		stage_tile(stile<T>{(T *)(smem + L.zs[0]), L.ldz, FUSED_BM, q.opad}, Z,
			   tile * FUSED_BM, 0, wz);
		stage_tile(stile<T>{(T *)(smem + L.hs[0]), L.ldh, FUSED_BM, q.qpad}, H,
			   tile * FUSED_BM, q.q0, wh);
	}
	cp_async_commit();
	for (unsigned it = 0; tile < tiles; it++, tile += G) {
		size_t row0 = tile * FUSED_BM, next = tile + G;
		if (next < tiles) {
			/* (L's offsets picked by a condition: an index would put L in
			 * local memory) */
			unsigned b = (it + 1) & 1;
			stage_tile(stile<T>{(T *)(smem + (b ? L.zs[1] : L.zs[0])), L.ldz, FUSED_BM,
					    q.opad},
				   Z, next * FUSED_BM, 0, wz);
			stage_tile(stile<T>{(T *)(smem + (b ? L.hs[1] : L.hs[0])), L.ldh, FUSED_BM,
					    q.qpad},
				   H, next * FUSED_BM, q.q0, wh);
		}
		cp_async_commit();
		cp_async_wait<1>(); /* W and this tile are in; the next is on its way */
		__syncthreads();
		uint32_t zoff = it & 1 ? L.zs[1] : L.zs[0], hoff = it & 1 ? L.hs[1] : L.hs[0];
		const T *zs = (const T *)(smem + zoff), *hs = (const T *)(smem + hoff);
		typename P::frag_c accx[4];
		NCF_UNROLL
		for (int i = 0; i < 4; i++)
			P::zero(accx[i]);
		bwd_tiles<P, 4>(accx, zs, L.ldz, ws, L.ldh, a.out, q.qt, lp);
		dw_tiles<P>(accw, zs, L.ldz, hs, L.ldh, q, lp.warp);
		float *st = (float *)(smem + (L.st_alias ? zoff : L.st)) + lp.warp * 256;
		if (L.st_alias)
			__syncthreads(); /* every warp is done with dZ before it is staging */
		/* dX: the mask from H's tile, the column sums */
		size_t row = row0 + 16 * lp.wm + lp.r;
		NCF_UNROLL
		for (uint32_t i = 0; i < 4; i++) {
			uint32_t t = lp.wn + 2 * i;
			if (t >= q.qt)
				continue;
			uint32_t c = 16 * t + lp.c0;
			bool live = row < a.rows && c < q.qn;
			uint32_t cnt = live ? (q.qn - c < 8 ? q.qn - c : 8) : 0;
			float hv[8];
			NCF_UNROLL
			for (uint32_t e = 0; e < 8; e++)
				hv[e] = to_f32(hs[(16 * lp.wm + lp.r) * L.ldh + c + e]);
			dx_out<T> o = {a.dX + row * a.in + q.q0 + c, live, v.y != 0, cnt,
				       &colpart[lp.wm][16 * t]};
			dx_tile<P>(accx[i], st, hv, a.scale, o, lp);
		}
		__syncthreads(); /* the next iteration refills this tile's stage */
	}
	for (uint32_t c = threadIdx.x; c < q.qn; c += blockDim.x)
		a.part[(size_t)g * a.part_ld + q.q0 + c] =
			((colpart[0][c] + colpart[1][c]) + colpart[2][c]) + colpart[3][c];
	float *st = (float *)(smem + (L.st_alias ? L.zs[0] : L.st)) + lp.warp * 256;
	write_dw<P>(accw, st, a.partw + (size_t)g * a.out * a.in, a, q, lp);
}

/* ---- launchers ----------------------------------------------------------- */

/* Blocks of `bytes` of shared memory an SM holds at once, at most the
 * kernels' minimum of mlp_facts (what their registers allow), at least 1. */
static unsigned resident_by_smem(size_t bytes)
{
	size_t k = g_smem_sm / (bytes + 1024); /* the runtime keeps 1 KiB a block */
	return k < 1 ? 1 : k > mlp_facts.min_blocks ? mlp_facts.min_blocks : (unsigned)k;
}

/* Does the resident-W forward take a layer of in -> out in T? */
template <typename T> static int fwd_ws_fits(uint32_t in, uint32_t out)
{
	return fwd_ws_smem<T>(in, out).bytes <= g_smem_block;
}

/* The blocks of a layer launch of ROWS rows, PER rows a block, in *nb: 1,
 * 0 when there are no rows (nothing to launch), -1 with the reason when the
 * tiled side WIDE (out forward, in backward) is wider than the tiles hold or
 * the rows need more blocks than one launch takes. */
static int layer_blocks(size_t rows, uint32_t in, uint32_t out, uint32_t wide, size_t per,
			size_t *nb)
{
	if (wide > FUSED_MAX_WIDTH || in == 0 || out == 0) {
		ncf_error("cuda backend: a fused layer of %u x %u (the limit is %u)", out, in,
			  (unsigned)FUSED_MAX_WIDTH);
		return -1;
	}
	*nb = (rows + per - 1) / per;
	if (*nb > 0x7FFFFFFFu) {
		ncf_error("cuda backend: %zu rows are more than one launch takes", rows);
		return -1;
	}
	return *nb > 0;
}

/* f(std::integral_constant<int, MODE>()) for the MMA mode of T: 16-bit
 * types their own, fp32 tf32 when asked, else exact fp32 (no tensor
 * cores). */
template <typename T, typename F> static int by_mode(int tf32, F f)
{
	if constexpr (sizeof(T) == 2)
		return f(std::integral_constant<int, MMA_16>());
	else if (tf32)
		return f(std::integral_constant<int, MMA_TF32>());
	else
		return f(std::integral_constant<int, MMA_F32>());
}

/* The forward pass of mode MODE: the resident-W kernel where W and two X
 * tiles fit, else the one that streams both. */
template <typename T, int MODE>
static int fwd_mode(const layer_fwd<T> &a, pieces v, size_t nb, double bytes, cudaStream_t stream)
{
	double es = sizeof(T), flops = 2.0 * a.rows * a.in * a.out;
	int ws = fwd_ws_fits<T>(a.in, a.out);
	double issue = issue_of<T, MODE>(flops, ws ? issue_fwd_ws : issue_fwd);
	if (ws) {
		/* a persistent grid of what the SMs hold; a block's tiles one after
		 * another, each tile's X (a stage: its bytes in flight) copied in
		 * while the one before is multiplied; W read once a block */
		fwd_ws_smem<T> L(a.in, a.out);
		unsigned res = resident_by_smem(L.bytes);
		size_t grid = (size_t)res * g_sms < nb ? (size_t)res * g_sms : nb;
		double stage = (double)FUSED_BM * L.ld * es;
		cost_shape sh = cost_shape_for(mlp_facts, (double)grid, res,
					       stage / FUSED_THREADS, ceil((double)nb / grid));
		sh.mma = 1, sh.issue = issue, sh.reread = ((double)grid - 1) * a.in * a.out * es;
		if (NCF_COST_SHAPED("linear_fwd", bytes, flops, sh))
			return 0;
		auto linear_fwd_ws = linear_fwd_ws_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
		NCF_LAUNCH_SYNC(linear_fwd_ws, (unsigned)grid, FUSED_THREADS, L.bytes, stream, a, v);
		return CUDA_CHECK(cudaGetLastError());
	}
	/* W too big to stay: per chunk of KC of the reduction the block loads its
	 * X rows and W's rows, then waits at a barrier and multiplies: one round
	 * trip a chunk, in every wave; every block reads all of W (from L2) */
	double KC = tile_dims<T>::KC, npad = (a.out + 15) / 16 * 16, chunks = ceil(a.in / KC);
	cost_shape sh = cost_shape_for(mlp_facts, (double)nb, mlp_facts.min_blocks,
				       (FUSED_BM + npad) * KC * es / FUSED_THREADS,
				       chunks * cost_waves((double)nb, mlp_facts.min_blocks));
	sh.mma = 1, sh.issue = issue, sh.reread = ((double)nb - 1) * a.in * a.out * es;
	if (NCF_COST_SHAPED("linear_fwd", bytes, flops, sh))
		return 0;
	auto linear_fwd = linear_fwd_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
	NCF_LAUNCH_SYNC(linear_fwd, (unsigned)nb, FUSED_THREADS, 0, stream, a, v);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T> int linear_fwd_cuda(const layer_fwd<T> &a, int tf32, cudaStream_t stream)
{
	size_t nb;
	int ok = layer_blocks(a.rows, a.in, a.out, a.out, FUSED_BM, &nb);
	if (ok <= 0)
		return ok;
	double es = sizeof(T);
	/* X and Y once, W once (it stays in L2), the positions when dropout
	 * reads them */
	double bytes = a.rows * ((double)a.in + a.out) * es + (double)a.in * a.out * es +
		       a.out * 4.0 + (a.rowpos && a.dk.active ? a.rows * 4.0 : 0.0);
	pieces v = {a.in % 8 == 0 && aligned16(a.X), a.in % 8 == 0 && aligned16(a.W),
		    a.out % 8 == 0 && aligned16(a.Y)};
	return by_mode<T>(tf32, [&](auto m) {
		return fwd_mode<T, decltype(m)::value>(a, v, nb, bytes, stream);
	});
}

template <typename T, int MODE>
static int bwd_mode(const layer_bwd<T> &a, pieces v, size_t nb, cudaStream_t stream)
{
	double es = sizeof(T), flops = 2.0 * a.rows * a.in * a.out;
	/* dZ, H and dX once, W once (L2), the partials */
	double bytes = a.rows * ((double)a.out + 2.0 * a.in) * es + (double)a.in * a.out * es +
		       nb * (double)a.in * 4.0;
	/* two row tiles a block, each a round trip per chunk of KC of out;
	 * every row tile reads all of W (from L2) */
	double KC = tile_dims<T>::KC, npad = (a.in + 15) / 16 * 16, tiles = 2.0 * nb;
	cost_shape sh = cost_shape_for(mlp_facts, (double)nb, mlp_facts.min_blocks,
				       (FUSED_BM + npad) * KC * es / FUSED_THREADS,
				       2 * (ceil(a.out / KC) + 1) *
					       cost_waves((double)nb, mlp_facts.min_blocks));
	sh.mma = 1, sh.issue = issue_of<T, MODE>(flops, issue_bwd);
	sh.reread = (tiles - 1) * a.in * a.out * es;
	if (NCF_COST_SHAPED("linear_bwd", bytes, flops, sh))
		return 0;
	auto linear_bwd = linear_bwd_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
	NCF_LAUNCH_SYNC(linear_bwd, (unsigned)nb, FUSED_THREADS, 0, stream, a, v);
	return CUDA_CHECK(cudaGetLastError());
}

/* 16-byte pieces of a backward pass: dZ, W, and H with dX. */
template <typename T> static pieces bwd_pieces(const layer_bwd<T> &a)
{
	pieces v = {a.out % 8 == 0 && aligned16(a.dZ), a.in % 8 == 0 && aligned16(a.W),
		    a.in % 8 == 0 && aligned16(a.H) && aligned16(a.dX)};
	return v;
}

template <typename T> int linear_bwd_cuda(const layer_bwd<T> &a, int tf32, cudaStream_t stream)
{
	size_t nb;
	int ok = layer_blocks(a.rows, a.in, a.out, a.in, BWD_ROWS, &nb);
	if (ok <= 0)
		return ok;
	pieces v = bwd_pieces(a);
	return by_mode<T>(tf32, [&](auto m) {
		return bwd_mode<T, decltype(m)::value>(a, v, nb, stream);
	});
}

/* Let the kernels of T and MODE that stage tiles in dynamic shared memory
 * have as much as the device gives a block. */
template <typename T, int MODE> static int mlp_allow(void)
{
	int bytes = (int)g_smem_block;
	CUDA_TRY(cudaFuncSetAttribute(linear_bwdw_kernel<T, MODE>,
				      cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
	return CUDA_CHECK(cudaFuncSetAttribute(linear_fwd_ws_kernel<T, MODE>,
					       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

int mlp_setup(void)
{
	if (cost_dry())
		return 0;
	NCF_TRY((mlp_allow<bf16, MMA_16>()));
	NCF_TRY((mlp_allow<f16, MMA_16>()));
	NCF_TRY((mlp_allow<float, MMA_TF32>()));
	return mlp_allow<float, MMA_F32>();
}

uint32_t bwdw_groups(size_t rows)
{
	size_t tiles = (rows + FUSED_BM - 1) / FUSED_BM;
	return tiles < BWDW_GROUPS ? (uint32_t)(tiles ? tiles : 1) : (uint32_t)BWDW_GROUPS;
}

template <typename T, int MODE>
static int bwdw_mode(const layer_bwd<T> &a, pieces v, cudaStream_t stream)
{
	uint32_t G = bwdw_groups(a.rows), Y = (a.in + BWDW_COLS - 1) / BWDW_COLS;
	double es = sizeof(T), flops = 4.0 * a.rows * a.in * a.out;
	/* dZ (once per column group: the groups of a row tile run side by
	 * side, so the second read comes from L2) and H once, dX written; W
	 * once (L2); the partials of the bias gradient and of dW */
	double bytes = a.rows * ((double)a.out + 2.0 * a.in) * es + (double)a.in * a.out * es +
		       G * ((double)a.in + (double)a.out * a.in) * 4.0;
	/* a block's row tiles one after another, each tile's dZ and H (a stage:
	 * its bytes in flight) copied in while the one before is multiplied;
	 * a block's columns of W read once */
	uint32_t qpad = (a.in < BWDW_COLS ? (a.in + 15) / 16 * 16 : (uint32_t)BWDW_COLS);
	bwdw_smem<T> L(a.out, qpad);
	unsigned res = resident_by_smem(L.bytes);
	double tiles = ceil((double)a.rows / FUSED_BM), nbd = (double)G * Y;
	double stage = (double)L.hs[0] - L.zs[0] + ((double)L.zs[1] - L.hs[0]);
	cost_shape sh = cost_shape_for(mlp_facts, nbd, res, stage / FUSED_THREADS,
				       ceil(tiles / G) * cost_waves(nbd, res));
	sh.mma = 1, sh.issue = issue_of<T, MODE>(flops, issue_bwdw);
	sh.reread = (nbd - 1) * (double)a.out * qpad * es;
	if (NCF_COST_SHAPED("linear_bwdw", bytes, flops, sh))
		return 0;
	auto linear_bwdw = linear_bwdw_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
	NCF_LAUNCH_SYNC(linear_bwdw, G * Y, FUSED_THREADS, L.bytes, stream, a, v, G);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T> int linear_bwdw_cuda(const layer_bwd<T> &a, int tf32, cudaStream_t stream)
{
	if (a.out > BWDW_MAX_OUT || a.in > FUSED_MAX_WIDTH || a.in == 0 || a.out == 0) {
		ncf_error("cuda backend: a fused layer of %u x %u with its weight gradient (the "
			  "limits are %u x %u)",
			  a.out, a.in, (unsigned)BWDW_MAX_OUT, (unsigned)FUSED_MAX_WIDTH);
		return -1;
	}
	if (a.rows == 0)
		return 0;
	pieces v = bwd_pieces(a);
	return by_mode<T>(tf32, [&](auto m) {
		return bwdw_mode<T, decltype(m)::value>(a, v, stream);
	});
}

/* The issue notes' table, for the cost model's description (cost.cu) and
 * tests/gpu/sass.t, which checks it against the SASS. */
void mlp_issue_describe(FILE *out)
{
	static const struct {
		const char *kernel;
		const mma_issue *per;
	} k[] = {{"linear_fwd_kernel", &issue_fwd},
		 {"linear_fwd_ws_kernel", &issue_fwd_ws},
		 {"linear_bwd_kernel", &issue_bwd},
		 {"linear_bwdw_kernel", &issue_bwdw}};
	for (const auto &x : k)
		fprintf(out, "model_issue_per_mma\t%s\tbf16 %.2f fp16 %.2f tf32 %.2f\n", x.kernel,
			(double)x.per->bf16, (double)x.per->f16, (double)x.per->tf32);
}

#define NCF_INSTANTIATE(T)                                                                   \
	template int linear_fwd_cuda<T>(const layer_fwd<T> &, int, cudaStream_t);             \
	template int linear_bwd_cuda<T>(const layer_bwd<T> &, int, cudaStream_t);             \
	template int linear_bwdw_cuda<T>(const layer_bwd<T> &, int, cudaStream_t);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
