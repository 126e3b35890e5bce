/*
 * container.h - the sectioned, checksummed, zstd-compressed file layout
 * shared by the cache (.ncfc, cache.c) and the checkpoint (.ncfm, ckpt.c).
 *
 * A file is a header, then sections, then an end section; it is written and
 * read strictly in order, so it works through pipes.  All integers are
 * little-endian.
 *
 *   file header (32 bytes)
 *     0   8  magic        "NCFCACHE" or "NCFMODEL"
 *     8   4  version      format version of the file kind
 *     12  4  flags        0
 *     16  8  created      0 (reserved; files are reproducible byte for byte)
 *     24  4  reserved     0
 *     28  4  crc          CRC-32C of bytes 0..27
 *
 *   section header (32 bytes), followed by comp_size bytes of payload
 *     0   8  tag          ASCII name, NUL padded ("meta", "trainitm", ...)
 *     8   8  raw_size     bytes after decompression and filters
 *     16  8  comp_size    bytes of the zstd frame that follows
 *     24  4  filters      bit 0: u32 delta; bit 1: byte shuffle, element
 *                         size in bits 8..15
 *     28  4  crc          CRC-32C of bytes 0..27
 *
 *   payload: one zstd frame with its content size and content checksum
 *   (XXH64-based, verified by zstd on decompression).  Filters are undone
 *   in reverse order after decompression: un-shuffle, then prefix-sum.
 *
 *   end: a section header with tag "end", sizes 0, no payload.
 *
 * The reader checks every CRC and size, and reports truncation,
 * corruption and unknown versions in one line that names the file and
 * ends with a hint.  Memory follows what a file holds, not what it
 * claims: a section may hold at most what the caller allows and what its
 * compressed bytes can decode to (zstd's densest block, RLE, turns 4
 * bytes into 128 KiB), its buffer grows only as zstd produces data, and
 * frames may not ask for a window over 16 MiB; a reader can also ask,
 * before any section, whether the rest of a regular file can hold all
 * that its meta section implies (ncf_cr_can_hold).
 */
#ifndef NCF_CONTAINER_H
#define NCF_CONTAINER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define NCF_FILTER_DELTA32 1u
#define NCF_FILTER_SHUFFLE 2u
#define NCF_FILTER_SHUFFLE_ELEM(n) ((uint32_t)(n) << 8)

struct ncf_cw {
	FILE *fp;	     /* destination */
	const char *display; /* name for messages */
	int level;	     /* zstd level */
	int workers;	     /* zstd worker threads, 0: none (the caller's thread).
			      * With 1 or more the bytes are the same whatever
			      * the number (zstd 1.5; test_container checks),
			      * but not those of 0 for inputs over a few MB */
};

/* Write the file header.  Returns 0 or -1 (reported). */
int ncf_cw_begin(struct ncf_cw *w, FILE *fp, const char *display, const char magic[8],
		 uint32_t version);
/*
 * Write one section from data (size bytes).  filters: NCF_FILTER_* (delta
 * needs size % 4 == 0, shuffle size % elem == 0).  Returns 0 or -1.
 */
int ncf_cw_section(struct ncf_cw *w, const char *tag, const void *data, size_t size,
		   uint32_t filters);
/* Write the end section.  Returns 0 or -1. */
int ncf_cw_end(struct ncf_cw *w);

/*
 * A section whose bytes arrive in pieces, for data that does not fit in
 * memory (ncf-prep's spilled protocol): begin, add every byte in order,
 * end.  The bytes added are the filtered ones (what the filters make of
 * the array: delta applied, bytes shuffled), raw in all; the header
 * records filters as ncf_cw_section would for raw bytes.  The frame is
 * compressed into an unnamed temporary file (ncf_tmp_open: its size goes
 * into the header before it), then copied after the header.  With
 * w->workers 0 the file's bytes are exactly those of ncf_cw_section on
 * the unfiltered array: both compress as one zstd stream fed in pieces,
 * whose frame does not depend on how the pieces are cut.  Each returns 0
 * or -1 (reported; end or abort frees the stream either way).
 */
struct ncf_cw_stream {
	struct ncf_cw *w;
	void *cctx;	    /* ZSTD_CCtx */
	int fd;		    /* the temporary file, -1 before begin */
	const char *tag;
	uint64_t raw, added, comp;
	uint32_t filters;
	unsigned char *out; /* a buffer of zstd's output size */
	size_t out_cap;
};
int ncf_cw_stream_begin(struct ncf_cw *w, struct ncf_cw_stream *s, const char *tag, uint64_t raw,
			uint32_t filters);
int ncf_cw_stream_add(struct ncf_cw_stream *s, const void *data, size_t n);
int ncf_cw_stream_end(struct ncf_cw_stream *s);
void ncf_cw_stream_abort(struct ncf_cw_stream *s);

struct ncf_cr {
	FILE *fp;
	const char *display; /* name for messages */
	const char *hint;    /* appended to corruption messages */
	uint32_t version;    /* the file's version */
	uint64_t offset;     /* bytes consumed so far */
	int64_t size;	     /* the file's size when it is a regular file, else -1 */
	unsigned char *ahead;/* bytes read ahead of the sections (ncf_cr_can_hold) */
	size_t ahead_len, ahead_pos;
};

/*
 * Read and check the file header.  Accepts versions min_version..
 * max_version.  Returns 0 or -1 (reported: not this kind of file,
 * truncated, corrupt header, unsupported version).
 */
int ncf_cr_open(struct ncf_cr *r, FILE *fp, const char *display, const char magic[8],
		uint32_t min_version, uint32_t max_version, const char *hint);
/*
 * Read the next section, which must be named tag and hold at most
 * max_size bytes (exactly max_size if exact).  On success *data is a new
 * malloc'd buffer of *size bytes (aligned for any type).  Returns 0 or -1.
 */
int ncf_cr_section(struct ncf_cr *r, const char *tag, size_t max_size, int exact,
		   void **data, size_t *size);
/*
 * Can the rest of the file hold sections of raw bytes in all (what a
 * meta section implies), at zstd's densest?  For a regular file its size
 * says; from a pipe the bytes that must at least follow (raw / 32768)
 * are read ahead, so a short stream is refused before any section
 * buffer is allocated (memory: what the stream really delivered).
 * Returns 1 or 0 (then nothing is reported).
 */
int ncf_cr_can_hold(struct ncf_cr *r, uint64_t raw);
/* Read the end section.  Returns 0 or -1. */
int ncf_cr_end(struct ncf_cr *r);
/* Free what the reader holds (not the stream).  Safe to call twice. */
void ncf_cr_close(struct ncf_cr *r);

#endif
