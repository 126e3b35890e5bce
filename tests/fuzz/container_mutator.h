/*
 * container_mutator.h - a structure-aware libFuzzer mutator for ncf's
 * container files (caches and checkpoints, common/container.h).
 *
 * Plain byte mutations almost never get past the CRC-32C of a header or
 * zstd's content checksum, so the parsers behind them see little.  This
 * mutator decodes the file into its sections (decompressed, filters
 * undone), changes one thing at the level a hostile writer would (a meta
 * field set to 0, a maximum or a value next to an overflow; an array
 * element out of range; a section resized, dropped, doubled or renamed;
 * filters, version, magic), and encodes the file again with every CRC and
 * zstd checksum right.  One mutation in ten is libFuzzer's own on the raw
 * bytes, so that the checksum paths stay covered.
 *
 * Include it in a harness built with -DNCF_FUZZ_STRUCTURE.
 */
#ifndef NCF_CONTAINER_MUTATOR_H
#define NCF_CONTAINER_MUTATOR_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <zstd.h>

#include "container.h"
#include "crc32c.h"
#include "io.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define FZ_MAX_SECTIONS 16
#define FZ_MAX_RAW (1u << 22) /* sections larger than this are not decoded */

struct fz_section {
	char tag[8];
	uint32_t filters;
	unsigned char *raw; /* decoded, filters undone */
	size_t size;
};

struct fz_file {
	unsigned char hdr[32];
	struct fz_section s[FZ_MAX_SECTIONS];
	int n; /* sections, the end section included */
};

static uint64_t fz_rng;
static uint64_t fz_next(void)
{
	fz_rng ^= fz_rng << 13;
	fz_rng ^= fz_rng >> 7;
	fz_rng ^= fz_rng << 17;
	return fz_rng;
}
static uint64_t fz_below(uint64_t n)
{
	return n ? fz_next() % n : 0;
}

static void fz_free(struct fz_file *f)
{
	for (int i = 0; i < f->n; i++)
		free(f->s[i].raw);
	f->n = 0;
}

static int fz_parse(const uint8_t *d, size_t n, struct fz_file *f)
{
	memset(f, 0, sizeof *f);
	if (n < 32)
		return -1;
	memcpy(f->hdr, d, 32);
	size_t o = 32;
	while (f->n < FZ_MAX_SECTIONS) {
		if (n - o < 32)
			goto bad;
		const unsigned char *h = d + o;
		uint64_t raw = ncf_get_u64(h + 8), comp = ncf_get_u64(h + 16);
		struct fz_section *s = &f->s[f->n++];
		memcpy(s->tag, h, 8);
		s->filters = ncf_get_u32(h + 24);
		o += 32;
		if (!memcmp(s->tag, "end\0\0\0\0\0", 8))
			return 0;
		if (comp > n - o || raw > FZ_MAX_RAW)
			goto bad;
		s->raw = malloc(raw ? raw : 1);
		if (!s->raw || ZSTD_decompress(s->raw, raw, d + o, comp) != raw)
			goto bad;
		s->size = raw;
		o += comp;
		size_t elem = (s->filters >> 8) & 0xFF;
		if ((s->filters & NCF_FILTER_SHUFFLE) && elem > 1 && raw % elem == 0) {
			unsigned char *t = malloc(raw ? raw : 1);
			size_t count = raw / elem;
			for (size_t b = 0; b < elem; b++)
				for (size_t i = 0; i < count; i++)
					t[i * elem + b] = s->raw[b * count + i];
			free(s->raw);
			s->raw = t;
		}
		if ((s->filters & NCF_FILTER_DELTA32) && raw % 4 == 0) {
			uint32_t acc = 0, v;
			for (size_t i = 0; i < raw; i += 4) {
				memcpy(&v, s->raw + i, 4);
				acc += v;
				memcpy(s->raw + i, &acc, 4);
			}
		}
	}
bad:
	fz_free(f);
	return -1;
}

/* Encode f into out (at most max bytes); returns the size, 0 if it does
 * not fit.  Filters are applied where they can be; a filter word that
 * cannot apply is written as it is (the reader must refuse it). */
static size_t fz_write(const struct fz_file *f, uint8_t *out, size_t max)
{
	if (max < 32)
		return 0;
	unsigned char h[32];
	memcpy(h, f->hdr, 32);
	ncf_put_u32(h + 28, ncf_crc32c(0, h, 28));
	memcpy(out, h, 32);
	size_t o = 32;
	for (int i = 0; i < f->n; i++) {
		const struct fz_section *s = &f->s[i];
		int end = !memcmp(s->tag, "end\0\0\0\0\0", 8);
		size_t size = end ? 0 : s->size;
		unsigned char *tmp = malloc(size ? size : 1);
		memcpy(tmp, s->raw ? s->raw : (const unsigned char *)"", size);
		if ((s->filters & NCF_FILTER_DELTA32) && size % 4 == 0) {
			uint32_t prev = 0, v;
			for (size_t k = 0; k < size; k += 4) {
				memcpy(&v, tmp + k, 4);
				uint32_t d = v - prev;
				prev = v;
				memcpy(tmp + k, &d, 4);
			}
		}
		size_t elem = (s->filters >> 8) & 0xFF;
		if ((s->filters & NCF_FILTER_SHUFFLE) && elem > 1 && size % elem == 0) {
			unsigned char *t = malloc(size ? size : 1);
			size_t count = size / elem;
			for (size_t b = 0; b < elem; b++)
				for (size_t k = 0; k < count; k++)
					t[b * count + k] = tmp[k * elem + b];
			free(tmp);
			tmp = t;
		}
		size_t comp = 0;
		unsigned char *z = NULL;
		if (!end) {
			size_t bound = ZSTD_compressBound(size);
			z = malloc(bound);
			ZSTD_CCtx *cc = ZSTD_createCCtx();
			ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
			ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
			ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
			comp = ZSTD_compress2(cc, z, bound, tmp, size);
			ZSTD_freeCCtx(cc);
			if (ZSTD_isError(comp))
				comp = 0;
		}
		free(tmp);
		if (o + 32 + comp > max) {
			free(z);
			return 0;
		}
		memset(h, 0, 32);
		memcpy(h, s->tag, 8);
		ncf_put_u64(h + 8, size);
		ncf_put_u64(h + 16, comp);
		ncf_put_u32(h + 24, end ? 0 : s->filters);
		ncf_put_u32(h + 28, ncf_crc32c(0, h, 28));
		memcpy(out + o, h, 32);
		o += 32;
		if (comp)
			memcpy(out + o, z, comp);
		o += comp;
		free(z);
	}
	return o;
}

/* An interesting value for a field of width bytes whose value is now v. */
static uint64_t fz_value(int width, uint64_t v)
{
	uint64_t top = width == 8 ? UINT64_MAX : UINT32_MAX;
	switch (fz_below(12)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return top;
	case 3:
		return top - 1;
	case 4:
		return top >> 1; /* 2^31-1, 2^63-1 */
	case 5:
		return (top >> 1) + 1;
	case 6:
		return (v + 1) & top;
	case 7:
		return (v - 1) & top;
	case 8:
		return (uint64_t)1 << fz_below(width * 8);
	case 9:
		return (v * 2) & top;
	case 10: { /* a float: NaN, inf, -1, huge */
		static const double dd[] = {NAN, INFINITY, -INFINITY, -1.0, 1e39, 2.0, -0.0};
		double x = dd[fz_below(7)];
		if (width == 8) {
			uint64_t u;
			memcpy(&u, &x, 8);
			return u;
		}
		float fl = (float)x;
		uint32_t u;
		memcpy(&u, &fl, 4);
		return u;
	}
	default:
		return fz_next() & top;
	}
}

static void fz_put(unsigned char *p, int width, uint64_t v)
{
	if (width == 8)
		ncf_put_u64(p, v);
	else
		ncf_put_u32(p, (uint32_t)v);
}
static uint64_t fz_get(const unsigned char *p, int width)
{
	return width == 8 ? ncf_get_u64(p) : ncf_get_u32(p);
}

/* Resize section s to size bytes (new bytes zero). */
static void fz_resize(struct fz_section *s, size_t size)
{
	unsigned char *r = calloc(size ? size : 1, 1);
	memcpy(r, s->raw ? s->raw : r, s->size < size ? s->size : size);
	free(s->raw);
	s->raw = r;
	s->size = size;
}

/* One structural mutation of f.  meta_width(off) gives the width (4 or 8)
 * of the meta field at off, 0 for none. */
static void fz_mutate(struct fz_file *f, int (*meta_width)(size_t off), size_t max)
{
	int data = f->n - 1; /* sections before end */
	if (data < 1)
		return;
	int k = 1 + (int)fz_below((uint64_t)data - 1 ? (uint64_t)data - 1 : 1); /* not meta */
	if (k >= data)
		k = data - 1;
	struct fz_section *s = &f->s[k];
	switch (fz_below(10)) {
	case 0:
	case 1:
	case 2: { /* a meta field */
		struct fz_section *m = &f->s[0];
		if (m->size < 8)
			return;
		size_t off;
		int w = 0;
		for (int tries = 0; tries < 64 && !w; tries++) {
			off = fz_below(m->size / 4) * 4;
			w = meta_width(off);
		}
		if (w && off + (size_t)w <= m->size)
			fz_put(m->raw + off, w, fz_value(w, fz_get(m->raw + off, w)));
		return;
	}
	case 3:
	case 4: { /* an array element */
		int w = s->filters >> 8 == 8 ? 8 : 4;
		if (s->size < (size_t)w)
			return;
		size_t off = fz_below(s->size / w) * w;
		fz_put(s->raw + off, w, fz_value(w, fz_get(s->raw + off, w)));
		return;
	}
	case 5: { /* libFuzzer's bytes on one section's content */
		size_t cap = s->size * 2 + 64;
		if (cap > max)
			cap = max;
		if (cap < s->size)
			cap = s->size;
		unsigned char *r = calloc(cap ? cap : 1, 1);
		memcpy(r, s->raw, s->size);
		s->size = LLVMFuzzerMutate(r, s->size, cap);
		free(s->raw);
		s->raw = r;
		return;
	}
	case 6: { /* resize: a few bytes, a few elements, to zero */
		size_t sizes[] = {0, s->size + 4, s->size > 4 ? s->size - 4 : 0, s->size + 8,
				  s->size > 8 ? s->size - 8 : 0, s->size + 1};
		size_t to = sizes[fz_below(6)];
		if (to <= FZ_MAX_RAW)
			fz_resize(s, to);
		return;
	}
	case 7: { /* drop, double or swap sections */
		int op = (int)fz_below(3);
		if (op == 0 && f->n > 1) {
			free(s->raw);
			memmove(&f->s[k], &f->s[k + 1], (size_t)(f->n - k - 1) * sizeof *s);
			f->n--;
		} else if (op == 1 && f->n < FZ_MAX_SECTIONS) {
			memmove(&f->s[k + 1], &f->s[k], (size_t)(f->n - k) * sizeof *s);
			f->n++;
			f->s[k + 1].raw = malloc(s->size ? s->size : 1);
			memcpy(f->s[k + 1].raw, s->raw, s->size);
		} else if (k + 1 < data) {
			struct fz_section t = f->s[k];
			f->s[k] = f->s[k + 1];
			f->s[k + 1] = t;
		}
		return;
	}
	case 8: /* filters */
		s->filters ^= (uint32_t)1 << fz_below(16);
		return;
	default: { /* the file header: version, flags, magic */
		int op = (int)fz_below(3);
		if (op == 0)
			ncf_put_u32(f->hdr + 8, (uint32_t)fz_value(4, ncf_get_u32(f->hdr + 8)));
		else if (op == 1)
			f->hdr[12 + fz_below(16)] ^= (unsigned char)(1u << fz_below(8));
		else
			memcpy(f->hdr, memcmp(f->hdr, "NCFCACHE", 8) ? "NCFCACHE" : "NCFMODEL", 8);
		return;
	}
	}
}

/* The mutator: decode, mutate once or a few times, encode. */
static size_t fz_custom_mutate(uint8_t *data, size_t size, size_t max, unsigned int seed,
			       int (*meta_width)(size_t off))
{
	fz_rng = seed * 0x9E3779B97F4A7C15ull + 1;
	struct fz_file f;
	if (fz_below(10) == 0 || fz_parse(data, size, &f) != 0)
		return LLVMFuzzerMutate(data, size, max);
	int rounds = 1 + (int)fz_below(3);
	for (int r = 0; r < rounds; r++)
		fz_mutate(&f, meta_width, max);
	uint8_t *out = malloc(max);
	size_t n = out ? fz_write(&f, out, max) : 0;
	fz_free(&f);
	if (!n) {
		free(out);
		return LLVMFuzzerMutate(data, size, max);
	}
	memcpy(data, out, n);
	free(out);
	return n;
}

#endif
