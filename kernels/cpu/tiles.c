/*
 * tiles.c - the dense products of the cpu backend's first layer and
 * scoring tables, as OpenBLAS sgemm calls over tiles of TILE rows taken by
 * threads in any order; every output depends on the tile cut only (fixed),
 * never on the thread count.  See cpu.h.
 */
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#undef I /* <complex.h>, pulled in by OpenBLAS */

#include "cpu.h"
#include "err.h"

/* out (rows, H) = x (rows, M) W^T, W (H, M) with leading dimension ldw;
 * tiles of TILE rows in parallel. */
void ncf_cpu_rows_times_wt(const float *x, size_t rows, size_t M, const float *W, size_t ldw,
			   size_t H, float *out)
{
	size_t tiles = (rows + TILE - 1) / TILE;
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, nr = rows - r0 < TILE ? rows - r0 : TILE;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)H, (int)M, 1.0f,
			    x + r0 * M, (int)M, W, (int)ldw, 0.0f, out + r0 * H, (int)H);
	}
}

/* out (rows, M) = d (rows, H) W, W (H, M) with leading dimension ldw. */
void ncf_cpu_rows_times_w(const float *d, size_t rows, size_t H, const float *W, size_t ldw,
			  size_t M, float *out)
{
	size_t tiles = (rows + TILE - 1) / TILE;
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, nr = rows - r0 < TILE ? rows - r0 : TILE;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)M, (int)H, 1.0f,
			    d + r0 * H, (int)H, W, (int)ldw, 0.0f, out + r0 * M, (int)M);
	}
}

/* out (H, M) with leading dimension ldo = d^T x over rows: d (rows, H),
 * x (rows, M).  Tile partials added in tile order. */
/* c->tile_part, grown to hold need floats (need > 0). */
static float *tile_scratch(struct cpu *c, size_t need)
{
	if (need > c->tile_cap) {
		c->tile_cap = need;
		c->tile_part = ncf_xrealloc(c->tile_part, need * sizeof(float));
	}
	return c->tile_part;
}

void ncf_cpu_tn_sum(struct cpu *c, const float *d, const float *x, size_t rows, size_t H,
		    size_t M, float *out, size_t ldo)
{
	size_t tiles = (rows + TILE - 1) / TILE;
	if (tiles == 0) {
		for (size_t h = 0; h < H; h++)
			memset(out + h * ldo, 0, M * sizeof(float));
		return;
	}
	float *part = tile_scratch(c, tiles * H * M);
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, nr = rows - r0 < TILE ? rows - r0 : TILE;
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)H, (int)M, (int)nr, 1.0f,
			    d + r0 * H, (int)H, x + r0 * M, (int)M, 0.0f, part + (size_t)t * H * M,
			    (int)M);
	}
#pragma omp parallel for schedule(static)
	for (int64_t h = 0; h < (int64_t)H; h++)
		for (size_t m = 0; m < M; m++) {
			float acc = 0.0f;
			for (size_t t = 0; t < tiles; t++)
				acc += part[t * H * M + (size_t)h * M + m];
			out[(size_t)h * ldo + m] = acc;
		}
}

/* Column sums of d (rows, H) into out (H), tile partials in order. */
void ncf_cpu_col_sum(struct cpu *c, const float *d, size_t rows, size_t H, float *out)
{
	size_t tiles = (rows + TILE - 1) / TILE;
	float *part = tile_scratch(c, tiles * H + 1);
	memset(part, 0, (tiles * H + 1) * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1)
	for (int64_t t = 0; t < (int64_t)tiles; t++) {
		size_t r0 = (size_t)t * TILE, r1 = r0 + TILE < rows ? r0 + TILE : rows;
		float *p = part + (size_t)t * H;
		for (size_t r = r0; r < r1; r++)
			for (size_t h = 0; h < H; h++)
				p[h] += d[r * H + h];
	}
	for (size_t h = 0; h < H; h++) {
		float acc = 0.0f;
		for (size_t t = 0; t < tiles; t++)
			acc += part[t * H + h];
		out[h] = acc;
	}
}
