/* container.c - see container.h for the layout. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "container.h"
#include "crc32c.h"
#include "err.h"
#include "io.h"

#define HDR 32

/* The most bytes a zstd frame of c bytes can decode to: its blocks are at
 * least 4 bytes (an RLE block) and make at most 128 KiB each. */
#define NCF_ZSTD_MAX_EXPANSION(c) ((uint64_t)(c) / 4 * 131072 + 131072)
/* The largest window a reader accepts: ncf's writers use 2^21 (level 3)
 * and 2^19 (level 1); a forged frame may not make zstd allocate more. */
#define NCF_ZSTD_WINDOWLOG_MAX 24
/* A section's first output buffer; it doubles as data arrives. */
#define NCF_CR_FIRST_ALLOC ((size_t)1 << 20)

/* Check a zstd call (zstd's CHECK_F), one per statement: evaluate call
 * once; on an error report "DISPLAY: zstd WHAT failed (FILE:LINE): zstd's
 * message" and return -1 from the function. */
#define NCF_ZSTD_TRY(display, what, call)                                                   \
	do {                                                                                \
		size_t zr__ = (call);                                                       \
		if (ZSTD_isError(zr__)) {                                                   \
			ncf_error("%s: zstd %s failed (%s:%d): %s", (display), (what),      \
				  __FILE__, __LINE__, ZSTD_getErrorName(zr__));             \
			return -1;                                                          \
		}                                                                           \
	} while (0)

static void shuffle_bytes(unsigned char *dst, const unsigned char *src, size_t n, size_t elem)
{
	size_t count = n / elem;
	for (size_t b = 0; b < elem; b++)
		for (size_t i = 0; i < count; i++)
			dst[b * count + i] = src[i * elem + b];
}

static void unshuffle_bytes(unsigned char *dst, const unsigned char *src, size_t n, size_t elem)
{
	size_t count = n / elem;
	for (size_t b = 0; b < elem; b++)
		for (size_t i = 0; i < count; i++)
			dst[i * elem + b] = src[b * count + i];
}

int ncf_cw_begin(struct ncf_cw *w, FILE *fp, const char *display, const char magic[8],
		 uint32_t version)
{
	w->fp = fp;
	w->display = display;
	if (!w->level)
		w->level = 3;
	unsigned char h[HDR] = {0};
	memcpy(h, magic, 8);
	ncf_put_u32(h + 8, version);
	ncf_put_u32(h + 28, ncf_crc32c(0, h, 28));
	NCF_WRITE_TRY(display, ncf_write_full(fp, h, HDR));
	return 0;
}

static int write_section_header(struct ncf_cw *w, const char *tag, uint64_t raw, uint64_t comp,
				uint32_t filters)
{
	unsigned char h[HDR] = {0};
	strncpy((char *)h, tag, 8);
	ncf_put_u64(h + 8, raw);
	ncf_put_u64(h + 16, comp);
	ncf_put_u32(h + 24, filters);
	ncf_put_u32(h + 28, ncf_crc32c(0, h, 28));
	NCF_WRITE_TRY(w->display, ncf_write_full(w->fp, h, HDR));
	return 0;
}

/* The filters a section of size bytes really has: delta on whole u32s,
 * the shuffle on whole elements, neither on nothing. */
static uint32_t effective_filters(uint32_t filters, size_t size)
{
	if (!(filters & NCF_FILTER_DELTA32) || size % 4 || !size)
		filters &= ~NCF_FILTER_DELTA32;
	size_t elem = (filters >> 8) & 0xFF;
	if (!(filters & NCF_FILTER_SHUFFLE) || elem <= 1 || size % elem || !size)
		filters &= ~(NCF_FILTER_SHUFFLE | 0xFF00u);
	return filters;
}

/* cc set up for a frame of size bytes at w's level, with its checksum
 * and content size.  Returns 0 or -1 (reported). */
static int set_params(struct ncf_cw *w, ZSTD_CCtx *cc, size_t size)
{
	NCF_ZSTD_TRY(w->display, "set level",
		     ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, w->level));
	NCF_ZSTD_TRY(w->display, "set checksum", ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1));
	/* a zstd built without threads refuses workers: compress here then */
	if (w->workers > 0 && ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_nbWorkers, w->workers)))
		ncf_debug("%s: zstd has no worker threads; compressing on one", w->display);
	NCF_ZSTD_TRY(w->display, "set content size",
		     ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1));
	NCF_ZSTD_TRY(w->display, "set the frame's size", ZSTD_CCtx_setPledgedSrcSize(cc, size));
	return 0;
}

/*
 * Feed in to the stream cc with op (ZSTD_e_continue: until in is taken;
 * ZSTD_e_end: until the frame is out).  The output goes to out, which is
 * written to fd and emptied whenever it fills (fd -1: out must hold the
 * whole frame).  *written counts what went to fd.  The frame depends
 * only on the bytes fed and on cc's parameters, not on how the pieces
 * are cut: zstd buffers them and compresses whole blocks.  Returns 0 or
 * -1 (reported).
 */
static int feed(const char *display, ZSTD_CCtx *cc, ZSTD_outBuffer *out, int fd,
		uint64_t *written, ZSTD_inBuffer *in, ZSTD_EndDirective op)
{
	for (;;) {
		size_t left;
		NCF_ZSTD_TRY(display, "compress", left = ZSTD_compressStream2(cc, out, in, op));
		int done = op == ZSTD_e_continue ? in->pos == in->size : left == 0;
		if (fd >= 0 && out->pos && (done || out->pos == out->size)) {
			NCF_TRY(ncf_tmp_write(fd, out->dst, out->pos));
			*written += out->pos;
			out->pos = 0;
		}
		if (done)
			return 0;
		if (fd < 0 && out->pos == out->size) {
			ncf_error("%s: zstd compress: the frame outgrew its bound", display);
			return -1;
		}
	}
}

/* Compress size bytes of src (filters already applied) with cc into comp
 * (bound bytes) and write the section: with workers, zstd's one call;
 * without, as one stream fed in one piece (the frame ncf_cw_stream makes
 * of the same bytes fed in any pieces).  Returns 0 or -1 (reported). */
static int compress_section(struct ncf_cw *w, ZSTD_CCtx *cc, const char *tag,
			    const unsigned char *src, size_t size, uint32_t filters,
			    unsigned char *comp, size_t bound)
{
	size_t n = 0;
	NCF_TRY(set_params(w, cc, size));
	if (w->workers > 0) {
		NCF_ZSTD_TRY(w->display, "compress", n = ZSTD_compress2(cc, comp, bound, src, size));
	} else {
		ZSTD_outBuffer out = {comp, bound, 0};
		ZSTD_inBuffer in = {src, size, 0}, none = {NULL, 0, 0};
		uint64_t unused = 0;
		NCF_TRY(feed(w->display, cc, &out, -1, &unused, &in, ZSTD_e_continue));
		NCF_TRY(feed(w->display, cc, &out, -1, &unused, &none, ZSTD_e_end));
		n = out.pos;
	}
	NCF_TRY(write_section_header(w, tag, size, n, filters));
	NCF_WRITE_TRY(w->display, ncf_write_full(w->fp, comp, n));
	return 0;
}

int ncf_cw_section(struct ncf_cw *w, const char *tag, const void *data, size_t size,
		   uint32_t filters)
{
	const unsigned char *src = data;
	unsigned char *tmp = NULL, *tmp2 = NULL;
	filters = effective_filters(filters, size);
	if (filters & NCF_FILTER_DELTA32) {
		tmp = ncf_xmalloc(size);
		const uint32_t *in = data;
		uint32_t *out = (uint32_t *)tmp, prev = 0;
		for (size_t i = 0; i < size / 4; i++) {
			out[i] = in[i] - prev;
			prev = in[i];
		}
		src = tmp;
	}
	if (filters & NCF_FILTER_SHUFFLE) {
		tmp2 = ncf_xmalloc(size);
		shuffle_bytes(tmp2, src, size, (filters >> 8) & 0xFF);
		src = tmp2;
	}
	size_t bound = ZSTD_compressBound(size);
	unsigned char *comp = ncf_xmalloc(bound);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	if (!cc)
		ncf_out_of_memory("zstd context");
	int rc = compress_section(w, cc, tag, src, size, filters, comp, bound);
	ZSTD_freeCCtx(cc);
	free(comp);
	free(tmp);
	free(tmp2);
	return rc;
}

int ncf_cw_stream_begin(struct ncf_cw *w, struct ncf_cw_stream *s, const char *tag, uint64_t raw,
			uint32_t filters)
{
	memset(s, 0, sizeof *s);
	s->fd = -1;
	s->w = w;
	s->tag = tag;
	s->raw = raw;
	s->filters = effective_filters(filters, (size_t)raw);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	if (!cc)
		ncf_out_of_memory("zstd context");
	s->cctx = cc;
	s->out_cap = ZSTD_CStreamOutSize();
	s->out = ncf_xmalloc(s->out_cap);
	if (set_params(w, cc, (size_t)raw) != 0 || (s->fd = ncf_tmp_open()) < 0) {
		ncf_cw_stream_abort(s);
		return -1;
	}
	return 0;
}

int ncf_cw_stream_add(struct ncf_cw_stream *s, const void *data, size_t n)
{
	ZSTD_outBuffer out = {s->out, s->out_cap, 0};
	ZSTD_inBuffer in = {data, n, 0};
	s->added += n;
	if (s->added > s->raw) {
		ncf_error("%s: section '%s': more than its %llu bytes", s->w->display, s->tag,
			  (unsigned long long)s->raw);
		return -1;
	}
	return feed(s->w->display, s->cctx, &out, s->fd, &s->comp, &in, ZSTD_e_continue);
}

/* The frame in the temporary file, copied to the section's file after
 * its header.  Returns 0 or -1 (reported). */
static int copy_frame(struct ncf_cw_stream *s)
{
	struct ncf_cw *w = s->w;
	NCF_TRY(write_section_header(w, s->tag, s->raw, s->comp, s->filters));
	for (uint64_t at = 0; at < s->comp;) {
		size_t want = s->comp - at < s->out_cap ? (size_t)(s->comp - at) : s->out_cap;
		ssize_t k = ncf_tmp_read(s->fd, s->out, want, at);
		if (k < 0)
			return -1;
		NCF_WRITE_TRY(w->display, ncf_write_full(w->fp, s->out, (size_t)k));
		at += (uint64_t)k;
	}
	return 0;
}

int ncf_cw_stream_end(struct ncf_cw_stream *s)
{
	int rc = -1;
	if (s->added != s->raw) {
		ncf_error("%s: section '%s': %llu bytes of %llu", s->w->display, s->tag,
			  (unsigned long long)s->added, (unsigned long long)s->raw);
	} else {
		ZSTD_outBuffer out = {s->out, s->out_cap, 0};
		ZSTD_inBuffer none = {NULL, 0, 0};
		rc = feed(s->w->display, s->cctx, &out, s->fd, &s->comp, &none, ZSTD_e_end);
		if (rc == 0)
			rc = copy_frame(s);
	}
	ncf_cw_stream_abort(s);
	return rc;
}

void ncf_cw_stream_abort(struct ncf_cw_stream *s)
{
	ZSTD_freeCCtx(s->cctx);
	s->cctx = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	free(s->out);
	s->out = NULL;
}

int ncf_cw_end(struct ncf_cw *w)
{
	return write_section_header(w, "end", 0, 0, 0);
}

/* fread through the read-ahead buffer. */
static size_t cr_fread(struct ncf_cr *r, void *buf, size_t n)
{
	size_t got = 0;
	if (r->ahead_pos < r->ahead_len) {
		got = r->ahead_len - r->ahead_pos < n ? r->ahead_len - r->ahead_pos : n;
		memcpy(buf, r->ahead + r->ahead_pos, got);
		r->ahead_pos += got;
	}
	if (got < n)
		got += fread((unsigned char *)buf + got, 1, n - got, r->fp);
	return got;
}

static int read_exact(struct ncf_cr *r, void *buf, size_t n, const char *what)
{
	errno = 0;
	size_t got = cr_fread(r, buf, n);
	if (got != n) {
		if (ferror(r->fp))
			ncf_error("%s: read failed: %s", r->display, strerror(errno ? errno : EIO));
		else /* where the file ends, not where the chunk began */
			ncf_error("%s: truncated: file ends in the %s at byte %llu%s", r->display,
				  what, (unsigned long long)(r->offset + got), r->hint);
		return -1;
	}
	r->offset += n;
	return 0;
}

int ncf_cr_open(struct ncf_cr *r, FILE *fp, const char *display, const char magic[8],
		uint32_t min_version, uint32_t max_version, const char *hint)
{
	memset(r, 0, sizeof *r);
	r->fp = fp;
	r->display = display;
	r->hint = hint ? hint : "";
	struct stat st;
	int fd = fileno(fp);
	r->size = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftello(fp) == 0
			  ? (int64_t)st.st_size
			  : -1;
	unsigned char h[HDR];
	errno = 0;
	size_t got = fread(h, 1, HDR, fp);
	if (got < 8 || memcmp(h, magic, 8) != 0) {
		if (ferror(fp))
			ncf_error("%s: read failed: %s", display, strerror(errno));
		else if (got == 0)
			ncf_error("%s: empty file, not an ncf %s file%s", display,
				  !memcmp(magic, "NCFCACHE", 8) ? "cache" : "model", r->hint);
		else if (got >= 8 && !memcmp(h, "NCF", 3))
			ncf_error("%s: an ncf file of another kind (%s), not %.8s%s", display,
				  ncf_escape((const char *)h, 8, 8), magic, r->hint);
		else
			ncf_error("%s: not an ncf %s file (bad magic number)%s", display,
				  !memcmp(magic, "NCFCACHE", 8) ? "cache" : "model", r->hint);
		return -1;
	}
	if (got < HDR) {
		ncf_error("%s: truncated: file ends in its header%s", display, r->hint);
		return -1;
	}
	r->offset = HDR;
	if (ncf_get_u32(h + 28) != ncf_crc32c(0, h, 28)) {
		ncf_error("%s: corrupt header (checksum mismatch)%s", display, r->hint);
		return -1;
	}
	for (int k = 12; k < 28; k++)
		if (h[k]) {
			ncf_error("%s: corrupt header: byte %d is %u, not 0 (flags, created and reserved "
				  "are 0)%s",
				  display, k, h[k], r->hint);
			return -1;
		}
	r->version = ncf_get_u32(h + 8);
	if (r->version < min_version || r->version > max_version) {
		ncf_error("%s: format version %u, this program reads version%s %u%s%s", display,
			  r->version, min_version == max_version ? "" : "s", min_version,
			  min_version == max_version ? "" : " and later", r->hint);
		return -1;
	}
	return 0;
}

static int read_section_header(struct ncf_cr *r, const char *tag, uint64_t *raw, uint64_t *comp,
			       uint32_t *filters)
{
	unsigned char h[HDR];
	char what[64];
	snprintf(what, sizeof what, "header of section '%s'", tag);
	if (read_exact(r, h, HDR, what) != 0)
		return -1;
	if (ncf_get_u32(h + 28) != ncf_crc32c(0, h, 28)) {
		ncf_error("%s: corrupt section header at byte %llu (checksum mismatch)%s",
			  r->display, (unsigned long long)(r->offset - HDR), r->hint);
		return -1;
	}
	char got[9] = {0}, want[8] = {0};
	memcpy(got, h, 8);
	memcpy(want, tag, strnlen(tag, 8));
	if (memcmp(h, want, 8) != 0) { /* the name and its NUL padding */
		ncf_error("%s: expected section '%s' at byte %llu, found '%s'%s", r->display, tag,
			  (unsigned long long)(r->offset - HDR), ncf_escape(got, strlen(got), 8),
			  r->hint);
		return -1;
	}
	*raw = ncf_get_u64(h + 8);
	*comp = ncf_get_u64(h + 16);
	*filters = ncf_get_u32(h + 24);
	return 0;
}

/* A section header's sizes and filters, checked before any allocation.
 * Returns 0 or -1 (reported). */
static int check_section(struct ncf_cr *r, const char *tag, uint64_t raw, uint64_t comp,
			 uint32_t filters, size_t max_size, int exact)
{
	size_t elem = (filters >> 8) & 0xFF;
	if (raw > NCF_ZSTD_MAX_EXPANSION(comp)) {
		/* zstd's densest block (RLE: 4 bytes for 128 KiB) cannot make
		 * that much: refused before any allocation */
		ncf_error("%s: section '%s' claims %llu bytes from %llu compressed bytes, more than "
			  "zstd can expand them to%s",
			  r->display, tag, (unsigned long long)raw, (unsigned long long)comp, r->hint);
		return -1;
	}
	if (raw > max_size || (exact && raw != max_size)) {
		ncf_error("%s: section '%s' has %llu bytes (%llu compressed), expected %s%zu%s",
			  r->display, tag, (unsigned long long)raw, (unsigned long long)comp,
			  exact ? "" : "at most ", max_size, r->hint);
		return -1;
	}
	if (comp > ZSTD_compressBound((size_t)raw) || comp == 0) {
		ncf_error("%s: section '%s': %llu compressed bytes cannot hold %llu bytes%s",
			  r->display, tag, (unsigned long long)comp, (unsigned long long)raw, r->hint);
		return -1;
	}
	int unknown = (filters & ~(NCF_FILTER_DELTA32 | NCF_FILTER_SHUFFLE | 0xFF00u)) != 0;
	int bad_delta = (filters & NCF_FILTER_DELTA32) && raw % 4;
	int bad_shuffle = (filters & NCF_FILTER_SHUFFLE) ? elem < 2 || raw % elem : elem != 0;
	if (unknown || bad_delta || bad_shuffle) {
		ncf_error("%s: section '%s': filters 0x%x cannot apply to %llu bytes%s", r->display,
			  tag, filters, (unsigned long long)raw, r->hint);
		return -1;
	}
	return 0;
}

/* The first bytes of a section's data: one zstd frame (magic 28 b5 2f fd,
 * not a skippable one) whose header (RFC 8878) sets the content checksum
 * flag (bit 2 of its descriptor) and gives the content size raw.  Returns
 * 0 or -1 (reported). */
static int check_frame(struct ncf_cr *r, const char *tag, const unsigned char *in, size_t n,
		       uint64_t raw)
{
	const char *why = n < 6 || memcmp(in, "\x28\xb5\x2f\xfd", 4)	? "not a zstd frame"
			  : !(in[4] & 4)				? "a frame without its checksum"
			  : ZSTD_getFrameContentSize(in, n) != raw ? "a frame of another size"
								   : NULL;
	if (!why)
		return 0;
	ncf_error("%s: section '%s' is corrupt (%s)%s", r->display, tag, why, r->hint);
	return -1;
}

/* A section's decompression: the output grows as zstd actually produces
 * it, up to raw, so that a frame that claims more than it holds costs
 * what it holds. */
struct inflate {
	ZSTD_DCtx *dc;
	unsigned char *out;
	ZSTD_outBuffer ob;
	uint64_t raw;
	size_t zr; /* zstd's last hint: 0 when the frame is complete */
};

static void inflate_grow(struct inflate *f)
{
	size_t grow = f->ob.size < (size_t)f->raw / 2 ? 2 * f->ob.size : (size_t)f->raw;
	f->out = ncf_xrealloc(f->out, grow);
	f->ob.dst = f->out;
	f->ob.size = grow;
}

/* Decompress the n bytes of in.  Returns 0 or -1 (reported). */
static int inflate_chunk(struct ncf_cr *r, const char *tag, struct inflate *f,
			 const unsigned char *in, size_t n)
{
	ZSTD_inBuffer ib = {in, n, 0};
	while (ib.pos < ib.size) {
		if (f->ob.pos == f->ob.size && f->ob.size < f->raw)
			inflate_grow(f);
		size_t before_in = ib.pos, before_out = f->ob.pos;
		f->zr = ZSTD_decompressStream(f->dc, &f->ob, &ib);
		const char *why = NULL;
		if (ZSTD_isError(f->zr)) {
			ncf_error("%s: section '%s' is corrupt (zstd: %s)%s", r->display, tag,
				  ZSTD_getErrorName(f->zr), r->hint);
			return -1;
		}
		if (f->zr == 0 && ib.pos < ib.size)
			why = "data after its frame";
		else if (ib.pos == before_in && f->ob.pos == before_out)
			why = "more data than its size";
		if (why) {
			ncf_error("%s: section '%s' is corrupt (%s)%s", r->display, tag, why, r->hint);
			return -1;
		}
	}
	return 0;
}

/* The decoded bytes zstd holds back until there is room for them, then
 * the frame must be complete at raw bytes (in: the input buffer, empty
 * now).  Returns 0 or -1 (reported). */
static int inflate_end(struct ncf_cr *r, const char *tag, struct inflate *f,
		       const unsigned char *in)
{
	while (f->zr != 0 && f->ob.pos == f->ob.size && f->ob.size < f->raw) {
		inflate_grow(f);
		ZSTD_inBuffer ib = {in, 0, 0};
		f->zr = ZSTD_decompressStream(f->dc, &f->ob, &ib);
		if (ZSTD_isError(f->zr)) {
			ncf_error("%s: section '%s' is corrupt (zstd: %s)%s", r->display, tag,
				  ZSTD_getErrorName(f->zr), r->hint);
			return -1;
		}
	}
	if (f->zr != 0 || f->ob.pos != f->raw) {
		ncf_error("%s: section '%s' is corrupt (incomplete frame)%s", r->display, tag,
			  r->hint);
		return -1;
	}
	return 0;
}

/* Read comp bytes of zstd frame and decompress them into f (raw bytes).
 * Returns 0 or -1 (reported). */
static int inflate_section(struct ncf_cr *r, const char *tag, struct inflate *f, uint64_t comp)
{
	NCF_ZSTD_TRY(r->display, "set window limit",
		     ZSTD_DCtx_setParameter(f->dc, ZSTD_d_windowLogMax, NCF_ZSTD_WINDOWLOG_MAX));
	size_t chunk = ZSTD_DStreamInSize();
	unsigned char *in = ncf_xmalloc(chunk);
	char what[64];
	snprintf(what, sizeof what, "section '%s'", tag);
	int rc = -1;
	for (uint64_t left = comp; left > 0;) {
		size_t want = left < chunk ? (size_t)left : chunk;
		if (read_exact(r, in, want, what) != 0)
			goto out;
		if (left == comp && check_frame(r, tag, in, want, f->raw) != 0)
			goto out;
		left -= want;
		if (inflate_chunk(r, tag, f, in, want) != 0)
			goto out;
	}
	rc = inflate_end(r, tag, f, in);
out:
	free(in);
	return rc;
}

/* Undo the writer's filters on out (raw bytes); returns the result, which
 * may be another buffer (out is then freed). */
static unsigned char *unfilter(unsigned char *out, uint64_t raw, uint32_t filters)
{
	if (filters & NCF_FILTER_SHUFFLE) {
		unsigned char *t = ncf_xmalloc((size_t)raw);
		unshuffle_bytes(t, out, (size_t)raw, (filters >> 8) & 0xFF);
		free(out);
		out = t;
	}
	if (filters & NCF_FILTER_DELTA32) {
		uint32_t *v = (uint32_t *)out, acc = 0;
		for (size_t i = 0; i < raw / 4; i++) {
			acc += v[i];
			v[i] = acc;
		}
	}
	return out;
}

int ncf_cr_section(struct ncf_cr *r, const char *tag, size_t max_size, int exact, void **data,
		   size_t *size)
{
	uint64_t raw, comp;
	uint32_t filters;
	*data = NULL;
	*size = 0;
	NCF_TRY(read_section_header(r, tag, &raw, &comp, &filters));
	NCF_TRY(check_section(r, tag, raw, comp, filters, max_size, exact));
	size_t cap = raw < NCF_CR_FIRST_ALLOC ? (size_t)raw : NCF_CR_FIRST_ALLOC;
	struct inflate f = {.raw = raw, .zr = 1};
	f.out = ncf_xmalloc(cap);
	f.ob = (ZSTD_outBuffer){f.out, cap, 0};
	f.dc = ZSTD_createDCtx();
	if (!f.dc)
		ncf_out_of_memory("zstd context");
	int rc = inflate_section(r, tag, &f, comp);
	ZSTD_freeDCtx(f.dc);
	if (rc != 0) {
		free(f.out);
		return -1;
	}
	*data = unfilter(f.out, raw, filters);
	*size = (size_t)raw;
	return 0;
}

int ncf_cr_can_hold(struct ncf_cr *r, uint64_t raw)
{
	if (r->size >= 0) {
		uint64_t left = (uint64_t)r->size > r->offset ? (uint64_t)r->size - r->offset : 0;
		return raw <= NCF_ZSTD_MAX_EXPANSION(left);
	}
	/* the fewest bytes that can decode to raw: one RLE block per 128 KiB */
	uint64_t need = raw <= 131072 ? 0 : (raw - 131072 + 131071) / 131072 * 4;
	uint64_t have = r->ahead_len - r->ahead_pos;
	if (have >= need)
		return 1;
	/* keep what is still unread, read the rest of need after it */
	size_t keep = (size_t)have, want = (size_t)(need - have);
	unsigned char *b = ncf_xmalloc(keep + want);
	if (keep)
		memcpy(b, r->ahead + r->ahead_pos, keep);
	size_t got = 0, n;
	while (got < want && (n = fread(b + keep + got, 1, want - got, r->fp)) > 0)
		got += n;
	free(r->ahead);
	r->ahead = b;
	r->ahead_len = keep + got;
	r->ahead_pos = 0;
	return got == want;
}

void ncf_cr_close(struct ncf_cr *r)
{
	free(r->ahead);
	r->ahead = NULL;
	r->ahead_len = r->ahead_pos = 0;
}

int ncf_cr_end(struct ncf_cr *r)
{
	uint64_t raw, comp;
	uint32_t filters;
	if (read_section_header(r, "end", &raw, &comp, &filters) != 0)
		return -1;
	if (raw || comp) {
		ncf_error("%s: corrupt end section%s", r->display, r->hint);
		return -1;
	}
	unsigned char extra;
	if (cr_fread(r, &extra, 1) == 1) {
		ncf_error("%s: data after the end of the file at byte %llu (two files "
			  "concatenated?)%s",
			  r->display, (unsigned long long)r->offset, r->hint);
		return -1;
	}
	return 0;
}
