/*
 * mlp.cu - the fused dense layers of the training step (kernels.cuh,
 * "fused step"): one kernel per layer and direction that does the layer's
 * matrix product on tensor cores (mma.cuh) and applies what the unfused
 * path does in separate passes while the product's tile is still on chip:
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
 * (step_fused.cu).
 *
 * Tiles: a block of 256 threads (8 warps, 4 x 2) computes 64 rows by all
 * `n` columns of its output (n <= FUSED_MAX_WIDTH, padded to 16), the
 * reduction dimension in chunks of KC staged in shared memory; warp (wm, wn)
 * owns rows 16 wm .. 16 wm + 16 and the column tiles wn, wn + 2, ...  In the
 * epilogue a warp stores one 16x16 float tile to its staging area and lane l
 * finishes row l / 2, columns 8 (l % 2) .. + 8 of it: one Philox block of
 * dropout bits (ncf_dropout_bits, 8 units) and one 16-byte store.
 *
 * Rounding: the forward pass adds the bias to the fp32 product and rounds
 * once to T (the unfused path rounds the product to T first).  In precision
 * fp32 (MMA_F32) each output is the sum of its K products in k order, then
 * the bias: what reference.c's linear_forward computes, bit for bit.
 */
#include "kernels.cuh"
#include "mma.cuh"

namespace NCF_CUDA_NS {

enum { FUSED_BM = 64, FUSED_THREADS = 256 };

/* Chunk of the reduction dimension and shared-memory padding (16 bytes) by
 * element size. */
template <typename T> struct tile_dims {
	enum { KC = sizeof(T) == 2 ? 32 : 16, PAD = 16 / sizeof(T), LDA = KC + PAD };
};

/*
 * s[r lds + c] = g[(r0 + r) ldg + c0 + c] where r0 + r < rmax and c0 + c <
 * cmax, else 0, for r < R, c < C (C a multiple of 8), by the threads of the
 * block in pieces of 8 elements: one 16-byte copy (two for float) where vec
 * (g 16-byte aligned, ldg a multiple of 8) and the piece is whole.
 */
template <typename T>
NCF_DI void load_tile(T *s, unsigned lds, const T *__restrict__ g, size_t ldg, size_t r0,
		      size_t rmax, uint32_t c0, uint32_t cmax, unsigned R, unsigned C, int vec)
{
	unsigned per = C / 8, pieces = R * per;
	for (unsigned p = threadIdx.x; p < pieces; p += blockDim.x) {
		unsigned r = p / per, c = (p % per) * 8;
		size_t gr = r0 + r;
		uint32_t gc = c0 + c;
		T *dst = s + (size_t)r * lds + c;
		const T *src = g + gr * ldg + gc;
		if (gr < rmax && vec && gc + 8 <= cmax) {
			st16(dst, ld16(src));
			if (sizeof(T) == 4)
				st16(dst + 4, ld16(src + 4));
			continue;
		}
		NCF_UNROLL
		for (unsigned e = 0; e < 8; e++)
			dst[e] = gr < rmax && gc + e < cmax ? src[e] : from_f32<T>(0.0f);
	}
}

/* ---- forward ------------------------------------------------------------- */

/*
 * The forward epilogue of a block's 64 rows from row0: each warp stages its
 * accumulators' 16x16 tiles in st and this lane (row r, columns c0 .. c0 + 8
 * of a tile) adds the bias, applies ReLU and dropout (one Philox block of
 * bits for its 8 units) and stores its 8 outputs at once.
 */
template <typename P, typename T>
NCF_DEV void fwd_epilogue(typename P::frag_c acc[8], float *st, size_t row0, size_t rows,
			  uint32_t out, uint32_t nt, const float *__restrict__ b,
			  const dropout_k &dk, uint32_t layer, const uint32_t *__restrict__ rowpos,
			  int vecy, T *__restrict__ Y, unsigned wm, unsigned wn, unsigned lane,
			  unsigned r, unsigned c0)
{
	size_t row = row0 + 16 * wm + r;
	NCF_UNROLL
	for (uint32_t i = 0; i < 8; i++) {
		uint32_t t = wn + 2 * i;
		if (t >= nt)
			continue;
		P::store(st, acc[i], 16);
		__syncwarp();
		uint32_t h0 = 16 * t + c0;
		if (row < rows && h0 < out) {
			uint32_t cnt = out - h0 < 8 ? out - h0 : 8;
			ncf_u32x4 bits =
				dropout_bits_at(dk, rowpos ? rowpos[row] : row, layer, h0 / 8);
			float v[8];
			NCF_UNROLL
			for (uint32_t e = 0; e < 8; e++) {
				float x = st[r * 16 + c0 + e] + (e < cnt ? b[h0 + e] : 0.0f);
				float y = relu(x); /* keeps a NaN (common.cuh) */
				if (dk.active)
					y = y * dropout_mult(dk, bits, e);
				v[e] = y;
			}
			store_upto8(Y + row * out + h0, v, cnt, vecy && cnt == 8);
		}
		__syncwarp();
	}
}

template <typename T, int MODE>
__global__ void __launch_bounds__(FUSED_THREADS, 2)
	linear_fwd_kernel(size_t rows, uint32_t in, uint32_t out, const T *__restrict__ X,
			  const T *__restrict__ W, const float *__restrict__ b, dropout_k dk,
			  uint32_t layer, const uint32_t *__restrict__ rowpos, int vecx, int vecw,
			  int vecy, T *__restrict__ Y)
{
	typedef mma_tile<T, MODE> P;
	typedef tile_dims<T> D;
	__shared__ __align__(32) T xs[FUSED_BM * D::LDA];
	__shared__ __align__(32) T ws[FUSED_MAX_WIDTH * D::LDA];
	__shared__ __align__(32) float stage[FUSED_THREADS / 32][256];
	unsigned warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
	size_t row0 = (size_t)blockIdx.x * FUSED_BM;
	uint32_t npad = (out + 15) / 16 * 16, nt = npad / 16;
	typename P::frag_c acc[8];
	NCF_UNROLL
	for (int i = 0; i < 8; i++)
		P::zero(acc[i]);
	for (uint32_t k0 = 0; k0 < in; k0 += D::KC) {
		load_tile(xs, D::LDA, X, in, row0, rows, k0, in, FUSED_BM, D::KC, vecx);
		load_tile(ws, D::LDA, W, in, 0, out, k0, in, npad, D::KC, vecw);
		__syncthreads();
		for (uint32_t kk = 0; kk < (uint32_t)D::KC && k0 + kk < in; kk += P::KSTEP) {
			typename P::frag_a a;
			P::load_a(a, xs + 16 * wm * D::LDA + kk, D::LDA);
			NCF_UNROLL
			for (uint32_t i = 0; i < 8; i++) {
				uint32_t t = wn + 2 * i;
				if (t < nt) {
					typename P::template frag_b<mma_col>::type bt;
					P::template load_b<mma_col>(bt, ws + 16 * t * D::LDA + kk,
								    D::LDA);
					P::mma(acc[i], a, bt);
				}
			}
		}
		__syncthreads();
	}
	unsigned lane = threadIdx.x % 32, r = lane / 2, c0 = (lane % 2) * 8;
	fwd_epilogue<P>(acc, stage[warp], row0, rows, out, nt, b, dk, layer, rowpos, vecy, Y, wm, wn,
			lane, r, c0);
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
__global__ void __launch_bounds__(FUSED_THREADS, 2)
	linear_fwd_ws_kernel(size_t rows, uint32_t in, uint32_t out, const T *__restrict__ X,
			     const T *__restrict__ W, const float *__restrict__ b, dropout_k dk,
			     uint32_t layer, const uint32_t *__restrict__ rowpos, int vecx, int vecw,
			     int vecy, T *__restrict__ Y)
{
	typedef mma_tile<T, MODE> P;
	NCF_DYN_SHARED(smem);
	fwd_ws_smem<T> L(in, out);
	T *ws = (T *)smem;
	unsigned warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
	unsigned lane = threadIdx.x % 32, r = lane / 2, c0 = (lane % 2) * 8;
	uint32_t kpad = (in + 15) / 16 * 16, npad = (out + 15) / 16 * 16, nt = npad / 16;
	float *st = (float *)(smem + L.st) + warp * 256;
	size_t tiles = (rows + FUSED_BM - 1) / FUSED_BM, tile = blockIdx.x;
	stage_tile(ws, L.ld, W, in, 0, out, 0, in, npad, kpad, vecw);
	if (tile < tiles)
		stage_tile((T *)(smem + L.xs0), L.ld, X, in, tile * FUSED_BM, rows, 0, in, FUSED_BM,
			   kpad, vecx);
	cp_async_commit();
	for (unsigned i = 0; tile < tiles; i++, tile += gridDim.x) {
		size_t next = tile + gridDim.x;
		if (next < tiles)
			stage_tile((T *)(smem + (i & 1 ? L.xs0 : L.xs1)), L.ld, X, in, next * FUSED_BM,
				   rows, 0, in, FUSED_BM, kpad, vecx);
		cp_async_commit();
		cp_async_wait<1>(); /* W and this tile are in; the next is on its way */
		__syncthreads();
		const T *x = (const T *)(smem + (i & 1 ? L.xs1 : L.xs0));
		typename P::frag_c acc[8];
		NCF_UNROLL
		for (int k = 0; k < 8; k++)
			P::zero(acc[k]);
		for (uint32_t kk = 0; kk < in; kk += P::KSTEP) {
			typename P::frag_a a;
			P::load_a(a, x + 16 * wm * L.ld + kk, L.ld);
			NCF_UNROLL
			for (uint32_t k = 0; k < 8; k++) {
				uint32_t t = wn + 2 * k;
				if (t < nt) {
					typename P::template frag_b<mma_col>::type bt;
					P::template load_b<mma_col>(bt, ws + 16 * t * L.ld + kk, L.ld);
					P::mma(acc[k], a, bt);
				}
			}
		}
		fwd_epilogue<P>(acc, st, tile * FUSED_BM, rows, out, nt, b, dk, layer, rowpos, vecy, Y,
				wm, wn, lane, r, c0);
		__syncthreads(); /* the next iteration refills this tile's stage */
	}
}

/* ---- backward ------------------------------------------------------------ */

/*
 * The epilogue of one 16x16 tile of dX in both backward kernels: the warp
 * stages its accumulator acc in st (16 x 16 floats), and this lane (row r,
 * columns c0 .. c0 + 8 of the tile) makes d = h > 0 ? acc * scale : 0 of
 * its cnt columns (h: the layer input's values there; live: the row and
 * columns exist), stores them at dst (16-byte stores where vec), and adds
 * the tile's column sums (rows in order) to colsum (16 floats).
 */
template <typename P, typename T>
NCF_DEV void dx_tile(typename P::frag_c &acc, float *st, const float h[8], bool live,
		    uint32_t cnt, float scale, T *dst, bool vec, float *colsum, unsigned lane,
		    unsigned r, unsigned c0)
{
	P::store(st, acc, 16);
	__syncwarp();
	float d[8];
	NCF_UNROLL
	for (uint32_t e = 0; e < 8; e++)
		d[e] = live && e < cnt && h[e] > 0.0f ? st[r * 16 + c0 + e] * scale : 0.0f;
	if (live)
		store_upto8(dst, d, cnt, vec && cnt == 8);
	__syncwarp();
	NCF_UNROLL
	for (uint32_t e = 0; e < 8; e++)
		st[r * 16 + c0 + e] = d[e];
	__syncwarp();
	if (lane < 16) {
		float sum = 0.0f;
		for (unsigned rr = 0; rr < 16; rr++)
			sum += st[rr * 16 + lane];
		colsum[lane] += sum;
	}
	__syncwarp();
}

template <typename T, int MODE>
__global__ void __launch_bounds__(FUSED_THREADS, 2)
	linear_bwd_kernel(size_t rows, uint32_t in, uint32_t out, const T *__restrict__ dZ,
			  const T *__restrict__ W, const T *__restrict__ H, float scale, int vecz,
			  int vecw, int vech, T *__restrict__ dX, float *__restrict__ part,
			  uint32_t part_ld)
{
	typedef mma_tile<T, MODE> P;
	typedef tile_dims<T> D;
	__shared__ __align__(32) T zs[FUSED_BM * D::LDA];
	__shared__ __align__(32) T ws[D::KC * (FUSED_MAX_WIDTH + D::PAD)];
	__shared__ __align__(32) float stage[FUSED_THREADS / 32][256];
	__shared__ float colpart[4][FUSED_MAX_WIDTH];
	unsigned warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
	unsigned lane = threadIdx.x % 32, r = lane / 2, c0 = (lane % 2) * 8;
	uint32_t npad = (in + 15) / 16 * 16, nt = npad / 16, ldb = npad + D::PAD;
	float *st = stage[warp];
	for (unsigned q = threadIdx.x; q < 4 * FUSED_MAX_WIDTH; q += blockDim.x)
		colpart[q / FUSED_MAX_WIDTH][q % FUSED_MAX_WIDTH] = 0.0f;
	for (uint32_t rt = 0; rt < BWD_ROWS / FUSED_BM; rt++) {
		size_t row0 = (size_t)blockIdx.x * BWD_ROWS + rt * FUSED_BM;
		typename P::frag_c acc[8];
		NCF_UNROLL
		for (int i = 0; i < 8; i++)
			P::zero(acc[i]);
		for (uint32_t k0 = 0; k0 < out; k0 += D::KC) {
			load_tile(zs, D::LDA, dZ, out, row0, rows, k0, out, FUSED_BM, D::KC, vecz);
			load_tile(ws, ldb, W, in, k0, out, 0, in, D::KC, npad, vecw);
			__syncthreads();
			for (uint32_t kk = 0; kk < (uint32_t)D::KC && k0 + kk < out;
			     kk += P::KSTEP) {
				typename P::frag_a a;
				P::load_a(a, zs + 16 * wm * D::LDA + kk, D::LDA);
				NCF_UNROLL
				for (uint32_t i = 0; i < 8; i++) {
					uint32_t t = wn + 2 * i;
					if (t < nt) {
						typename P::template frag_b<mma_row>::type bt;
						P::template load_b<mma_row>(
							bt, ws + kk * ldb + 16 * t, ldb);
						P::mma(acc[i], a, bt);
					}
				}
			}
			__syncthreads();
		}
		size_t row = row0 + 16 * wm + r;
		NCF_UNROLL
		for (uint32_t i = 0; i < 8; i++) {
			uint32_t t = wn + 2 * i;
			if (t >= nt)
				continue;
			uint32_t q0 = 16 * t + c0;
			bool live = row < rows && q0 < in;
			uint32_t cnt = live ? (in - q0 < 8 ? in - q0 : 8) : 0;
			float hv[8] = {0};
			if (live)
				load_upto8(H + row * in + q0, hv, cnt, vech && cnt == 8);
			dx_tile<P>(acc[i], st, hv, live, cnt, scale, dX + row * in + q0, vech,
				   &colpart[wm][16 * t], lane, r, c0);
		}
	}
	__syncthreads();
	for (uint32_t q = threadIdx.x; q < in; q += blockDim.x)
		part[(size_t)blockIdx.x * part_ld + q] =
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
__global__ void __launch_bounds__(FUSED_THREADS, 2)
	linear_bwdw_kernel(size_t rows, uint32_t in, uint32_t out, const T *__restrict__ dZ,
			   const T *__restrict__ W, const T *__restrict__ H, float scale,
			   uint32_t G, int vecz, int vecw, int vech, T *__restrict__ dX,
			   float *__restrict__ part, uint32_t part_ld, float *__restrict__ partw)
{
	typedef mma_tile<T, MODE> P;
	NCF_DYN_SHARED(smem);
	uint32_t Y = (in + BWDW_COLS - 1) / BWDW_COLS, y = blockIdx.x % Y, g = blockIdx.x / Y;
	uint32_t q0 = BWDW_COLS * y, qn = in - q0 < BWDW_COLS ? in - q0 : (uint32_t)BWDW_COLS;
	uint32_t qpad = (qn + 15) / 16 * 16, qt = qpad / 16, opad = (out + 15) / 16 * 16;
	uint32_t ot = opad / 16;
	bwdw_smem<T> L(out, qpad);
	T *ws = (T *)smem;
	float(*colpart)[BWDW_COLS] = (float(*)[BWDW_COLS])(smem + L.cp);
	unsigned warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
	unsigned lane = threadIdx.x % 32, r = lane / 2, c0 = (lane % 2) * 8;
	for (unsigned q = threadIdx.x; q < 4 * BWDW_COLS; q += blockDim.x)
		colpart[q / BWDW_COLS][q % BWDW_COLS] = 0.0f;
	typename P::frag_c accw[8];
	NCF_UNROLL
	for (int j = 0; j < 8; j++)
		P::zero(accw[j]);
	size_t tiles = (rows + FUSED_BM - 1) / FUSED_BM, tile = g;
	stage_tile(ws, L.ldh, W, in, 0, out, q0, in, opad, qpad, vecw);
	if (tile < tiles) {
		stage_tile((T *)(smem + L.zs[0]), L.ldz, dZ, out, tile * FUSED_BM, rows, 0, out,
			   FUSED_BM, opad, vecz);
		stage_tile((T *)(smem + L.hs[0]), L.ldh, H, in, tile * FUSED_BM, rows, q0, in,
			   FUSED_BM, qpad, vech);
	}
	cp_async_commit();
	for (unsigned it = 0; tile < tiles; it++, tile += G) {
		size_t row0 = tile * FUSED_BM, next = tile + G;
		if (next < tiles) {
			unsigned b = (it + 1) & 1;
			stage_tile((T *)(smem + (b ? L.zs[1] : L.zs[0])), L.ldz, dZ, out,
				   next * FUSED_BM, rows, 0, out, FUSED_BM, opad, vecz);
			stage_tile((T *)(smem + (b ? L.hs[1] : L.hs[0])), L.ldh, H, in,
				   next * FUSED_BM, rows, q0, in, FUSED_BM, qpad, vech);
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
		for (uint32_t kk = 0; kk < out; kk += P::KSTEP) {
			typename P::frag_a a;
			P::load_a(a, zs + 16 * wm * L.ldz + kk, L.ldz);
			NCF_UNROLL
			for (uint32_t i = 0; i < 4; i++) {
				uint32_t t = wn + 2 * i;
				if (t < qt) {
					typename P::template frag_b<mma_row>::type bt;
					P::template load_b<mma_row>(bt, ws + kk * L.ldh + 16 * t, L.ldh);
					P::mma(accx[i], a, bt);
				}
			}
		}
		/* dW += dZ^T H over the tile's rows */
		for (uint32_t kr = 0; kr < FUSED_BM; kr += P::KSTEP) {
			NCF_UNROLL
			for (uint32_t j = 0; j < 8; j++) {
				uint32_t i = warp + 8 * j;
				if (i < ot * qt) {
					typename P::frag_at at;
					P::load_at(at, zs + kr * L.ldz + 16 * (i / qt), L.ldz);
					typename P::template frag_b<mma_row>::type bt;
					P::template load_b<mma_row>(bt, hs + kr * L.ldh + 16 * (i % qt),
								    L.ldh);
					P::mma(accw[j], at, bt);
				}
			}
		}
		float *st = (float *)(smem + (L.st_alias ? zoff : L.st)) + warp * 256;
		if (L.st_alias)
			__syncthreads(); /* every warp is done with dZ before it is staging */
		/* dX: the mask from H's tile, the column sums */
		size_t row = row0 + 16 * wm + r;
		NCF_UNROLL
		for (uint32_t i = 0; i < 4; i++) {
			uint32_t t = wn + 2 * i;
			if (t >= qt)
				continue;
			uint32_t c = 16 * t + c0;
			bool live = row < rows && c < qn;
			uint32_t cnt = live ? (qn - c < 8 ? qn - c : 8) : 0;
			float hv[8];
			NCF_UNROLL
			for (uint32_t e = 0; e < 8; e++)
				hv[e] = to_f32(hs[(16 * wm + r) * L.ldh + c + e]);
			dx_tile<P>(accx[i], st, hv, live, cnt, scale, dX + row * in + q0 + c, vech,
				   &colpart[wm][16 * t], lane, r, c0);
		}
		__syncthreads(); /* the next iteration refills this tile's stage */
	}
	for (uint32_t q = threadIdx.x; q < qn; q += blockDim.x)
		part[(size_t)g * part_ld + q0 + q] =
			((colpart[0][q] + colpart[1][q]) + colpart[2][q]) + colpart[3][q];
	float *st = (float *)(smem + (L.st_alias ? L.zs[0] : L.st)) + warp * 256;
	NCF_UNROLL
	for (uint32_t j = 0; j < 8; j++) {
		uint32_t i = warp + 8 * j;
		if (i >= ot * qt)
			continue;
		P::store(st, accw[j], 16);
		__syncwarp();
		uint32_t o = 16 * (i / qt) + r, c = 16 * (i % qt) + c0;
		if (o < out)
			for (uint32_t e = 0; e < 8 && c + e < qn; e++)
				partw[((size_t)g * out + o) * in + q0 + c + e] = st[r * 16 + c0 + e];
		__syncwarp();
	}
}

/* ---- launchers ----------------------------------------------------------- */

/* One launch of the kernel for T and its tile mode. */
template <typename T, int MODE>
static int fwd_launch(unsigned nb, cudaStream_t stream, size_t rows, uint32_t in, uint32_t out,
		      const T *X, const T *W, const float *b, const dropout_k &dk, uint32_t layer,
		      const uint32_t *rowpos, int vecx, int vecw, int vecy, T *Y)
{
	auto linear_fwd = linear_fwd_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
	NCF_LAUNCH_SYNC(linear_fwd, nb, FUSED_THREADS, 0, stream, rows, in, out, X, W, b, dk, layer,
			rowpos, vecx, vecw, vecy, Y);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T, int MODE>
static int bwd_launch(unsigned nb, cudaStream_t stream, size_t rows, uint32_t in, uint32_t out,
		      const T *dZ, const T *W, const T *H, float scale, int vecz, int vecw,
		      int vech, T *dX, float *part, uint32_t part_ld)
{
	auto linear_bwd = linear_bwd_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
	NCF_LAUNCH_SYNC(linear_bwd, nb, FUSED_THREADS, 0, stream, rows, in, out, dZ, W, H, scale,
			vecz, vecw, vech, dX, part, part_ld);
	return CUDA_CHECK(cudaGetLastError());
}

template <typename T, int MODE>
static int fwd_ws_launch(unsigned nb, size_t smem, cudaStream_t stream, size_t rows, uint32_t in,
			 uint32_t out, const T *X, const T *W, const float *b, const dropout_k &dk,
			 uint32_t layer, const uint32_t *rowpos, int vecx, int vecw, int vecy, T *Y)
{
	auto linear_fwd_ws = linear_fwd_ws_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
	NCF_LAUNCH_SYNC(linear_fwd_ws, nb, FUSED_THREADS, smem, stream, rows, in, out, X, W, b, dk,
			layer, rowpos, vecx, vecw, vecy, Y);
	return CUDA_CHECK(cudaGetLastError());
}

/* Blocks of `bytes` of shared memory an SM holds at once, at most most
 * (what their registers allow), at least 1. */
static unsigned resident_by_smem(size_t bytes, unsigned most)
{
	size_t k = g_smem_sm / (bytes + 1024); /* the runtime keeps 1 KiB a block */
	return k < 1 ? 1 : k > most ? most : (unsigned)k;
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

template <typename T>
int linear_fwd_cuda(size_t rows, uint32_t in, uint32_t out, const T *X, const T *W,
		    const float *b, const dropout_k &dk, uint32_t layer, const uint32_t *rowpos,
		    int tf32, T *Y, cudaStream_t stream)
{
	size_t nb;
	int ok = layer_blocks(rows, in, out, out, FUSED_BM, &nb);
	if (ok <= 0)
		return ok;
	double es = sizeof(T);
	/* X and Y once, W once (it stays in L2), the positions when dropout
	 * reads them */
	double bytes = rows * ((double)in + out) * es + (double)in * out * es + out * 4.0 +
		       (rowpos && dk.active ? rows * 4.0 : 0.0);
	double flops = 2.0 * rows * in * out;
	int vecx = in % 8 == 0 && aligned16(X), vecw = in % 8 == 0 && aligned16(W);
	int vecy = out % 8 == 0 && aligned16(Y);
	if (fwd_ws_fits<T>(in, out)) {
		/* a persistent grid of what the SMs hold; a block's tiles one after
		 * another, each tile's X (a stage: its bytes in flight) copied in
		 * while the one before is multiplied; W read once a block */
		size_t smem = fwd_ws_smem<T>(in, out).bytes;
		unsigned res = resident_by_smem(smem, 2);
		size_t grid = (size_t)res * g_sms < nb ? (size_t)res * g_sms : nb;
		double stage = (double)FUSED_BM * fwd_ws_smem<T>(in, out).ld * es;
		cost_shape sh = cost_shape_of((double)grid, FUSED_THREADS, res, stage / FUSED_THREADS,
					      ceil((double)nb / grid), 1,
					      ((double)grid - 1) * in * out * es);
		if (NCF_COST_SHAPED("linear_fwd", bytes, flops, sh))
			return 0;
		if constexpr (sizeof(T) == 2)
			return fwd_ws_launch<T, MMA_16>((unsigned)grid, smem, stream, rows, in, out, X, W,
							b, dk, layer, rowpos, vecx, vecw, vecy, Y);
		else if (tf32)
			return fwd_ws_launch<T, MMA_TF32>((unsigned)grid, smem, stream, rows, in, out, X,
							  W, b, dk, layer, rowpos, vecx, vecw, vecy, Y);
		else
			return fwd_ws_launch<T, MMA_F32>((unsigned)grid, smem, stream, rows, in, out, X,
							 W, b, dk, layer, rowpos, vecx, vecw, vecy, Y);
	}
	/* W too big to stay: per chunk of KC of the reduction the block loads its
	 * X rows and W's rows, then waits at a barrier and multiplies: one round
	 * trip a chunk, in every wave; every block reads all of W (from L2) */
	double KC = tile_dims<T>::KC, npad = (out + 15) / 16 * 16, chunks = ceil(in / KC);
	cost_shape sh = cost_shape_of((double)nb, FUSED_THREADS, 2,
				      (FUSED_BM + npad) * KC * es / FUSED_THREADS,
				      chunks * cost_waves((double)nb, 2), 1,
				      ((double)nb - 1) * in * out * es);
	if (NCF_COST_SHAPED("linear_fwd", bytes, flops, sh))
		return 0;
	if constexpr (sizeof(T) == 2)
		return fwd_launch<T, MMA_16>((unsigned)nb, stream, rows, in, out, X, W, b, dk,
					     layer, rowpos, vecx, vecw, vecy, Y);
	else if (tf32)
		return fwd_launch<T, MMA_TF32>((unsigned)nb, stream, rows, in, out, X, W, b, dk,
					       layer, rowpos, vecx, vecw, vecy, Y);
	else
		return fwd_launch<T, MMA_F32>((unsigned)nb, stream, rows, in, out, X, W, b, dk,
					      layer, rowpos, vecx, vecw, vecy, Y);
}

template <typename T>
int linear_bwd_cuda(size_t rows, uint32_t in, uint32_t out, const T *dZ, const T *W,
		    const T *H, float scale, int tf32, T *dX, float *part, uint32_t part_ld,
		    cudaStream_t stream)
{
	size_t nb;
	int ok = layer_blocks(rows, in, out, in, BWD_ROWS, &nb);
	if (ok <= 0)
		return ok;
	double es = sizeof(T);
	/* dZ, H and dX once, W once (L2), the partials */
	double bytes = rows * ((double)out + 2.0 * in) * es + (double)in * out * es +
		       nb * (double)in * 4.0;
	/* two row tiles a block, each a round trip per chunk of KC of out;
	 * every row tile reads all of W (from L2) */
	double KC = tile_dims<T>::KC, npad = (in + 15) / 16 * 16, tiles = 2.0 * nb;
	cost_shape sh = cost_shape_of((double)nb, FUSED_THREADS, 2,
				      (FUSED_BM + npad) * KC * es / FUSED_THREADS,
				      2 * (ceil(out / KC) + 1) * cost_waves((double)nb, 2), 1,
				      (tiles - 1) * in * out * es);
	if (NCF_COST_SHAPED("linear_bwd", bytes, 2.0 * rows * in * out, sh))
		return 0;
	int vecz = out % 8 == 0 && aligned16(dZ), vecw = in % 8 == 0 && aligned16(W);
	int vech = in % 8 == 0 && aligned16(H) && aligned16(dX);
	if constexpr (sizeof(T) == 2)
		return bwd_launch<T, MMA_16>((unsigned)nb, stream, rows, in, out, dZ, W, H, scale,
					     vecz, vecw, vech, dX, part, part_ld);
	else if (tf32)
		return bwd_launch<T, MMA_TF32>((unsigned)nb, stream, rows, in, out, dZ, W, H, scale,
					       vecz, vecw, vech, dX, part, part_ld);
	else
		return bwd_launch<T, MMA_F32>((unsigned)nb, stream, rows, in, out, dZ, W, H, scale,
					      vecz, vecw, vech, dX, part, part_ld);
}

template <typename T, int MODE>
static int bwdw_launch(unsigned nb, size_t smem, cudaStream_t stream, size_t rows, uint32_t in,
		       uint32_t out, const T *dZ, const T *W, const T *H, float scale, uint32_t G,
		       int vecz, int vecw, int vech, T *dX, float *part, uint32_t part_ld,
		       float *partw)
{
	auto linear_bwdw = linear_bwdw_kernel<T, MODE>; /* the name NCF_CUDA_SYNC reports */
	NCF_LAUNCH_SYNC(linear_bwdw, nb, FUSED_THREADS, smem, stream, rows, in, out, dZ, W, H,
			scale, G, vecz, vecw, vech, dX, part, part_ld, partw);
	return CUDA_CHECK(cudaGetLastError());
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

template <typename T>
int linear_bwdw_cuda(size_t rows, uint32_t in, uint32_t out, const T *dZ, const T *W,
		     const T *H, float scale, int tf32, T *dX, float *part, uint32_t part_ld,
		     float *partw, cudaStream_t stream)
{
	if (out > BWDW_MAX_OUT || in > FUSED_MAX_WIDTH || in == 0 || out == 0) {
		ncf_error("cuda backend: a fused layer of %u x %u with its weight gradient (the "
			  "limits are %u x %u)",
			  out, in, (unsigned)BWDW_MAX_OUT, (unsigned)FUSED_MAX_WIDTH);
		return -1;
	}
	if (rows == 0)
		return 0;
	uint32_t G = bwdw_groups(rows), Y = (in + BWDW_COLS - 1) / BWDW_COLS;
	double es = sizeof(T);
	/* dZ (once per column group: the groups of a row tile run side by
	 * side, so the second read comes from L2) and H once, dX written; W
	 * once (L2); the partials of the bias gradient and of dW */
	double bytes = rows * ((double)out + 2.0 * in) * es + (double)in * out * es +
		       G * ((double)in + (double)out * in) * 4.0;
	/* a block's row tiles one after another, each tile's dZ and H (a stage:
	 * its bytes in flight) copied in while the one before is multiplied;
	 * a block's columns of W read once */
	uint32_t qpad = (in < BWDW_COLS ? (in + 15) / 16 * 16 : (uint32_t)BWDW_COLS);
	bwdw_smem<T> L(out, qpad);
	size_t smem = L.bytes;
	unsigned res = resident_by_smem(smem, 2);
	double tiles = ceil((double)rows / FUSED_BM), nbd = (double)G * Y;
	double stage = (double)L.hs[0] - L.zs[0] + ((double)L.zs[1] - L.hs[0]);
	cost_shape sh = cost_shape_of(nbd, FUSED_THREADS, res, stage / FUSED_THREADS,
				      ceil(tiles / G) * cost_waves(nbd, res), 1,
				      (nbd - 1) * (double)out * qpad * es);
	if (NCF_COST_SHAPED("linear_bwdw", bytes, 4.0 * rows * in * out, sh))
		return 0;
	int vecz = out % 8 == 0 && aligned16(dZ), vecw = in % 8 == 0 && aligned16(W);
	int vech = in % 8 == 0 && aligned16(H) && aligned16(dX);
	unsigned nb = G * Y;
	if constexpr (sizeof(T) == 2)
		return bwdw_launch<T, MMA_16>(nb, smem, stream, rows, in, out, dZ, W, H, scale, G,
					      vecz, vecw, vech, dX, part, part_ld, partw);
	else if (tf32)
		return bwdw_launch<T, MMA_TF32>(nb, smem, stream, rows, in, out, dZ, W, H, scale, G,
						vecz, vecw, vech, dX, part, part_ld, partw);
	else
		return bwdw_launch<T, MMA_F32>(nb, smem, stream, rows, in, out, dZ, W, H, scale, G,
					       vecz, vecw, vech, dX, part, part_ld, partw);
}

#define NCF_INSTANTIATE(T)                                                                     \
	template int linear_fwd_cuda<T>(size_t, uint32_t, uint32_t, const T *, const T *,      \
					const float *, const dropout_k &, uint32_t,            \
					const uint32_t *, int, T *, cudaStream_t);             \
	template int linear_bwd_cuda<T>(size_t, uint32_t, uint32_t, const T *, const T *,      \
					const T *, float, int, T *, float *, uint32_t,         \
					cudaStream_t);                                         \
	template int linear_bwdw_cuda<T>(size_t, uint32_t, uint32_t, const T *, const T *,     \
					 const T *, float, int, T *, float *, uint32_t,        \
					 float *, cudaStream_t);

NCF_INSTANTIATE(float)
NCF_INSTANTIATE(bf16)
NCF_INSTANTIATE(f16)

} /* namespace NCF_CUDA_NS */
