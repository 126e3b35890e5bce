/*
 * tiles.c - column sums over tiles of TILE rows taken by threads in any
 * order, the tile partials added in tile order: the result depends on the
 * tile cut only (fixed), never on the thread count.  See cpu.h.  (The
 * dense products over tiles are matmul.h's.)
 */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "err.h"

/* c->tile_part, grown to hold need floats (need > 0). */
static float *tile_scratch(struct cpu *c, size_t need)
{
	if (need > c->tile_cap) {
		c->tile_cap = need;
		c->tile_part = ncf_xrealloc(c->tile_part, need * sizeof(float));
	}
	return c->tile_part;
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
