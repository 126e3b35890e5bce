/* spill.c - see spill.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "container.h"
#include "err.h"
#include "io.h"
#include "spill.h"

#define REC_BYTES 20
/* Runs and planes: zstd level 1 (fast; the data are sorted or bytes of
 * one kind) with a 128 KiB window, so that a reader needs little memory
 * and many can be open at once. */
#define SPILL_LEVEL 1
#define SPILL_WINDOW_LOG 17
/* Bytes a run reader holds: its input and output buffers and zstd's
 * window and block, with room; the budget divided by it is how many runs
 * are merged at once. */
#define READER_BYTES ((size_t)640 << 10)
#define MIN_ROWS 4096
#define MAX_FANIN 1024

/* Check a zstd call on a temporary file, one per statement. */
#define SPILL_ZSTD_TRY(what, call)                                                        \
	do {                                                                              \
		size_t zr__ = (call);                                                     \
		if (ZSTD_isError(zr__)) {                                                 \
			ncf_error("a temporary file in %s: zstd %s failed (%s:%d): %s",    \
				  ncf_tmp_dir(), (what), __FILE__, __LINE__,              \
				  ZSTD_getErrorName(zr__));                               \
			return -1;                                                        \
		}                                                                         \
	} while (0)

/* ---- one zstd frame appended to a file ------------------------------- */

struct zsink {
	int fd;
	uint64_t start, end; /* the frame's bytes in the file so far */
	ZSTD_CCtx *cc;
	unsigned char *out;
	size_t out_cap;
};

/* Start a frame at offset at of fd (where the file ends). */
static int zsink_begin(struct zsink *z, int fd, uint64_t at)
{
	memset(z, 0, sizeof *z);
	z->fd = fd;
	z->start = z->end = at;
	z->cc = ZSTD_createCCtx();
	if (!z->cc)
		ncf_out_of_memory("zstd context");
	z->out_cap = ZSTD_CStreamOutSize();
	z->out = ncf_xmalloc(z->out_cap);
	SPILL_ZSTD_TRY("set level",
		       ZSTD_CCtx_setParameter(z->cc, ZSTD_c_compressionLevel, SPILL_LEVEL));
	SPILL_ZSTD_TRY("set window", ZSTD_CCtx_setParameter(z->cc, ZSTD_c_windowLog, SPILL_WINDOW_LOG));
	return 0;
}

static int zsink_put(struct zsink *z, const void *data, size_t n, ZSTD_EndDirective op)
{
	ZSTD_inBuffer in = {data, n, 0};
	for (;;) {
		ZSTD_outBuffer out = {z->out, z->out_cap, 0};
		size_t left;
		SPILL_ZSTD_TRY("compress", left = ZSTD_compressStream2(z->cc, &out, &in, op));
		NCF_TRY(ncf_tmp_write(z->fd, z->out, out.pos));
		z->end += out.pos;
		if (op == ZSTD_e_continue ? in.pos == in.size : left == 0)
			return 0;
	}
}

static void zsink_free(struct zsink *z)
{
	ZSTD_freeCCtx(z->cc);
	free(z->out);
	z->cc = NULL;
	z->out = NULL;
}

/* End the frame.  Returns 0 or -1; the sink is freed either way. */
static int zsink_end(struct zsink *z)
{
	int rc = zsink_put(z, NULL, 0, ZSTD_e_end);
	zsink_free(z);
	return rc;
}

/* ---- one frame read back ---------------------------------------------- */

struct extent {
	uint64_t start, end;
};

struct zsource {
	int fd;
	uint64_t pos, end; /* compressed bytes left to read */
	ZSTD_DCtx *dc;
	unsigned char *in;
	ZSTD_inBuffer ib;
	unsigned char *out; /* decompressed bytes out[at .. len) not yet taken */
	size_t at, len, cap;
	int ended;	    /* the frame is complete */
};

static void zsource_open(struct zsource *z, int fd, struct extent e, size_t cap)
{
	memset(z, 0, sizeof *z);
	z->fd = fd;
	z->pos = e.start;
	z->end = e.end;
	z->dc = ZSTD_createDCtx();
	if (!z->dc)
		ncf_out_of_memory("zstd context");
	z->in = ncf_xmalloc(cap);
	z->out = ncf_xmalloc(cap);
	z->cap = cap;
	z->ib.src = z->in;
}

static void zsource_close(struct zsource *z)
{
	ZSTD_freeDCtx(z->dc);
	free(z->in);
	free(z->out);
	memset(z, 0, sizeof *z);
}

/* Decompress more into out (the bytes not yet taken moved to its start).
 * Returns 1, 0 at the frame's end, -1 on an error (reported). */
static int zsource_fill(struct zsource *z)
{
	memmove(z->out, z->out + z->at, z->len - z->at);
	z->len -= z->at;
	z->at = 0;
	size_t before = z->len;
	while (z->len == before) {
		if (z->ib.pos == z->ib.size && z->pos < z->end) {
			size_t want = z->end - z->pos < z->cap ? (size_t)(z->end - z->pos) : z->cap;
			ssize_t k = ncf_tmp_read(z->fd, z->in, want, z->pos);
			if (k < 0)
				return -1;
			z->pos += (uint64_t)k;
			z->ib.size = (size_t)k;
			z->ib.pos = 0;
		}
		if (z->ended || (z->ib.pos == z->ib.size && z->pos == z->end))
			break;
		ZSTD_outBuffer ob = {z->out, z->cap, z->len};
		size_t left;
		SPILL_ZSTD_TRY("decompress", left = ZSTD_decompressStream(z->dc, &ob, &z->ib));
		z->len = ob.pos;
		z->ended = left == 0;
	}
	if (z->len > before)
		return 1;
	if (!z->ended) {
		ncf_error("a temporary file in %s: a frame ends early", ncf_tmp_dir());
		return -1;
	}
	return 0;
}

/* ---- runs --------------------------------------------------------------- */

struct prep_spill {
	struct prep_ids *ids;
	uint64_t budget;
	size_t max_rows;
	uint64_t rows;	      /* ratings written into runs */
	int fd;		      /* the runs' file, -1 before the first */
	uint64_t fd_end;
	struct extent *runs;
	size_t nruns, runs_cap;
	uint32_t *order, *start; /* scratch of ordering a batch of rows */
	size_t start_cap;
};

static void spill_rows(void *ctx, struct prep_rows *r);

struct prep_spill *prep_spill_attach(struct prep_rows *rows, uint64_t budget)
{
	struct prep_spill *sp = ncf_xcalloc(1, sizeof *sp);
	uint64_t n = budget / PREP_SPILL_ROW_BYTES;
	sp->budget = budget;
	sp->max_rows = n < MIN_ROWS ? MIN_ROWS : n > SIZE_MAX / 32 ? SIZE_MAX / 32 : (size_t)n;
	sp->fd = -1;
	rows->limit = sp->max_rows;
	rows->spill = spill_rows;
	rows->spill_ctx = sp;
	return sp;
}

int prep_spill_used(const struct prep_spill *sp)
{
	return sp && sp->nruns > 0;
}

uint64_t prep_spill_rows(const struct prep_spill *sp)
{
	return sp->rows;
}

uint64_t prep_spill_budget(const struct prep_spill *sp)
{
	return sp->budget;
}

/* Append a run to sp's list. */
static void add_run(struct prep_spill *sp, struct extent e)
{
	if (sp->nruns == sp->runs_cap) {
		sp->runs_cap = sp->runs_cap ? 2 * sp->runs_cap : 64;
		sp->runs = ncf_xrealloc(sp->runs, sp->runs_cap * sizeof *sp->runs);
	}
	sp->runs[sp->nruns++] = e;
}

/* Pack records into buf (REC_BYTES each). */
static void pack(unsigned char *p, const struct prep_spill_rec *rec)
{
	memcpy(p, &rec->user, 4);
	memcpy(p + 4, &rec->item, 4);
	memcpy(p + 8, &rec->row, 4);
	memcpy(p + 12, &rec->ts, 8);
}

static void unpack(const unsigned char *p, struct prep_spill_rec *rec)
{
	memcpy(&rec->user, p, 4);
	memcpy(&rec->item, p + 4, 4);
	memcpy(&rec->row, p + 8, 4);
	memcpy(&rec->ts, p + 12, 8);
}

/* Rows r (dense ids) as one run, in (user, timestamp, row) order.
 * Returns 0 or -1 (reported). */
static int write_run(struct prep_spill *sp, const struct prep_rows *r)
{
	uint32_t lo = UINT32_MAX, hi = 0;
	for (size_t k = 0; k < r->n; k++) {
		lo = r->user[k] < lo ? r->user[k] : lo;
		hi = r->user[k] > hi ? r->user[k] : hi;
	}
	uint32_t span = hi - lo + 1;
	if (span + 1 > sp->start_cap) {
		sp->start_cap = span + 1;
		sp->start = ncf_xrealloc(sp->start, sp->start_cap * sizeof *sp->start);
	}
	if (!sp->order)
		sp->order = ncf_xmalloc(sp->max_rows * sizeof *sp->order);
	prep_rows_order(r, lo, span, sp->start, sp->order);
	struct zsink z;
	if (zsink_begin(&z, sp->fd, sp->fd_end) != 0) {
		zsink_free(&z);
		return -1;
	}
	unsigned char buf[REC_BYTES * 4096];
	size_t used = 0;
	int rc = 0;
	for (size_t k = 0; k < r->n && rc == 0; k++) {
		uint32_t i = sp->order[k];
		struct prep_spill_rec rec = {r->user[i], r->item[i], (uint32_t)(sp->rows + i), r->ts[i]};
		pack(buf + used, &rec);
		used += REC_BYTES;
		if (used == sizeof buf || k + 1 == r->n) {
			rc = zsink_put(&z, buf, used, ZSTD_e_continue);
			used = 0;
		}
	}
	if (rc != 0 || zsink_end(&z) != 0) {
		zsink_free(&z);
		return -1;
	}
	add_run(sp, (struct extent){z.start, z.end});
	sp->fd_end = z.end;
	return 0;
}

/* Index r's rows, write them as a run, empty r.  Returns 0 or -1. */
static int spill_batch(struct prep_spill *sp, struct prep_rows *r)
{
	if (!r->n)
		return 0;
	NCF_TRY(prep_rows_check_count(sp->rows + r->n));
	if (!sp->ids)
		sp->ids = prep_ids_new();
	if (sp->fd < 0 && (sp->fd = ncf_tmp_open()) < 0)
		return -1;
	prep_ids_index(sp->ids, r, 0);
	NCF_TRY(write_run(sp, r));
	sp->rows += r->n;
	r->n = 0;
	return 0;
}

static void spill_rows(void *ctx, struct prep_rows *r)
{
	if (r->failed || spill_batch(ctx, r) != 0) {
		r->failed = 1;
		r->n = 0; /* the reader stops at its next check */
	}
}

/* ---- merging ------------------------------------------------------------ */

struct source {
	struct zsource z;
	struct prep_spill_rec rec; /* the next record */
};

struct prep_merge {
	struct source *src;
	size_t n;	/* sources left, a heap on (user, ts, row) over heap[0 .. n) */
	size_t *heap;
};

static int rec_less(const struct prep_spill_rec *a, const struct prep_spill_rec *b)
{
	if (a->user != b->user)
		return a->user < b->user;
	if (a->ts != b->ts)
		return a->ts < b->ts;
	return a->row < b->row;
}

/* The next record of s into s->rec: 1, 0 at its end, -1. */
static int source_next(struct source *s)
{
	while (s->z.len - s->z.at < REC_BYTES) {
		int rc = zsource_fill(&s->z);
		if (rc < 0)
			return -1;
		if (rc == 0 && s->z.len == s->z.at)
			return 0;
		if (rc == 0) {
			ncf_error("a temporary file in %s: a run ends inside a record", ncf_tmp_dir());
			return -1;
		}
	}
	unpack(s->z.out + s->z.at, &s->rec);
	s->z.at += REC_BYTES;
	return 1;
}

static void sift_down(struct prep_merge *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, best = i;
		if (l < m->n && rec_less(&m->src[m->heap[l]].rec, &m->src[m->heap[best]].rec))
			best = l;
		if (r < m->n && rec_less(&m->src[m->heap[r]].rec, &m->src[m->heap[best]].rec))
			best = r;
		if (best == i)
			return;
		size_t t = m->heap[i];
		m->heap[i] = m->heap[best];
		m->heap[best] = t;
		i = best;
	}
}

void prep_merge_close(struct prep_merge *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		zsource_close(&m->src[m->heap[i]].z);
	free(m->src);
	free(m->heap);
	free(m);
}

/* A merge of the runs e[0 .. n) of fd, each read with buffers of cap
 * bytes.  Returns NULL after reporting. */
static struct prep_merge *merge_runs(int fd, const struct extent *e, size_t n, size_t cap)
{
	struct prep_merge *m = ncf_xcalloc(1, sizeof *m);
	m->src = ncf_xcalloc(n ? n : 1, sizeof *m->src);
	m->heap = ncf_xcalloc(n ? n : 1, sizeof *m->heap);
	for (size_t i = 0; i < n; i++) {
		zsource_open(&m->src[i].z, fd, e[i], cap);
		int rc = source_next(&m->src[i]);
		if (rc < 0) {
			zsource_close(&m->src[i].z);
			prep_merge_close(m);
			return NULL;
		}
		if (rc == 0)
			zsource_close(&m->src[i].z);
		else
			m->heap[m->n++] = i;
	}
	for (size_t i = m->n; i-- > 0;)
		sift_down(m, i);
	return m;
}

int prep_merge_next(struct prep_merge *m, struct prep_spill_rec *rec)
{
	if (!m->n)
		return 0;
	struct source *top = &m->src[m->heap[0]];
	*rec = top->rec;
	int rc = source_next(top);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		zsource_close(&top->z);
		m->heap[0] = m->heap[--m->n];
	}
	sift_down(m, 0);
	return 1;
}

/* How many runs are read at once: their readers in half the budget (the
 * other half is the protocol's, behind the last merge). */
static size_t fan_in(const struct prep_spill *sp)
{
	uint64_t n = sp->budget / 2 / READER_BYTES;
	return n < 2 ? 2 : n > MAX_FANIN ? MAX_FANIN : (size_t)n;
}

/* Merge runs first .. first + n of sp into one run of out at *out_end.
 * Returns 0 or -1 (reported). */
static int merge_into(struct prep_spill *sp, size_t first, size_t n, int out, uint64_t *out_end,
		      struct extent *merged)
{
	struct prep_merge *m = merge_runs(sp->fd, sp->runs + first, n, READER_BYTES / 4);
	if (!m)
		return -1;
	struct zsink z;
	int rc = zsink_begin(&z, out, *out_end);
	unsigned char buf[REC_BYTES * 4096];
	size_t used = 0;
	struct prep_spill_rec rec;
	int got;
	while (rc == 0 && (got = prep_merge_next(m, &rec)) != 0) {
		if (got < 0) {
			rc = -1;
			break;
		}
		pack(buf + used, &rec);
		used += REC_BYTES;
		if (used == sizeof buf) {
			rc = zsink_put(&z, buf, used, ZSTD_e_continue);
			used = 0;
		}
	}
	if (rc == 0 && used)
		rc = zsink_put(&z, buf, used, ZSTD_e_continue);
	if (rc == 0)
		rc = zsink_end(&z);
	zsink_free(&z);
	prep_merge_close(m);
	if (rc != 0)
		return -1;
	*merged = (struct extent){z.start, z.end};
	*out_end = z.end;
	return 0;
}

/* Merge passes until the runs fit the budget's fan-in: each pass merges
 * consecutive groups into a new file (records keep their row numbers, so
 * the order is the same whatever the grouping).  Returns 0 or -1. */
static int reduce_runs(struct prep_spill *sp)
{
	size_t k = fan_in(sp);
	while (sp->nruns > k) {
		int out = ncf_tmp_open();
		if (out < 0)
			return -1;
		uint64_t end = 0;
		size_t n = 0;
		for (size_t first = 0; first < sp->nruns; first += k) {
			size_t len = sp->nruns - first < k ? sp->nruns - first : k;
			struct extent e;
			if (merge_into(sp, first, len, out, &end, &e) != 0) {
				close(out);
				return -1;
			}
			sp->runs[n++] = e;
		}
		close(sp->fd);
		sp->fd = out;
		sp->fd_end = end;
		sp->nruns = n;
		ncf_debug("spill: merged runs into %zu", n);
	}
	return 0;
}

int prep_spill_finish(struct prep_spill *sp, struct prep_rows *rows)
{
	rows->spill = NULL;
	if (spill_batch(sp, rows) != 0)
		return -1;
	free(sp->order);
	free(sp->start);
	sp->order = sp->start = NULL;
	free(rows->user);
	free(rows->item);
	free(rows->ts);
	rows->user = rows->item = NULL;
	rows->ts = NULL;
	rows->cap = 0;
	prep_ids_finish(sp->ids, rows);
	sp->ids = NULL;
	ncf_debug("spill: %llu ratings in %zu runs, %llu bytes in %s (budget %llu bytes, %zu rows "
		  "a run)",
		  (unsigned long long)sp->rows, sp->nruns, (unsigned long long)sp->fd_end,
		  ncf_tmp_dir(), (unsigned long long)sp->budget, sp->max_rows);
	return reduce_runs(sp);
}

struct prep_merge *prep_merge_open(struct prep_spill *sp)
{
	return merge_runs(sp->fd, sp->runs, sp->nruns, READER_BYTES / 4);
}

void prep_spill_free(struct prep_spill *sp)
{
	if (!sp)
		return;
	if (sp->ids) {
		struct prep_rows scratch = {0};
		prep_ids_finish(sp->ids, &scratch);
		prep_rows_free(&scratch);
	}
	if (sp->fd >= 0)
		close(sp->fd);
	free(sp->runs);
	free(sp->order);
	free(sp->start);
	free(sp);
}

/* ---- byte planes ------------------------------------------------------ */

#define PLANE_BUF 65536

struct prep_planes {
	int delta;
	uint32_t prev;
	uint64_t count; /* elements */
	int fd[4];
	struct zsink z[4];
	unsigned char *buf[4];
	size_t used;	/* bytes in each buf */
	struct extent e[4];
	int ended, failed;
};

struct prep_planes *prep_planes_open(int delta)
{
	struct prep_planes *p = ncf_xcalloc(1, sizeof *p);
	p->delta = delta;
	for (int b = 0; b < 4; b++) {
		p->fd[b] = -1;
		p->buf[b] = ncf_xmalloc(PLANE_BUF);
	}
	for (int b = 0; b < 4; b++) {
		if ((p->fd[b] = ncf_tmp_open()) < 0 || zsink_begin(&p->z[b], p->fd[b], 0) != 0) {
			prep_planes_free(p);
			return NULL;
		}
	}
	return p;
}

static int planes_flush(struct prep_planes *p, ZSTD_EndDirective op)
{
	for (int b = 0; b < 4; b++)
		NCF_TRY(zsink_put(&p->z[b], p->buf[b], p->used, op));
	p->used = 0;
	return 0;
}

int prep_planes_put(struct prep_planes *p, const uint32_t *v, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		uint32_t x = p->delta ? v[k] - p->prev : v[k];
		p->prev = v[k];
		for (int b = 0; b < 4; b++)
			p->buf[b][p->used] = (unsigned char)(x >> (8 * b));
		if (++p->used == PLANE_BUF && planes_flush(p, ZSTD_e_continue) != 0)
			return -1;
	}
	p->count += n;
	return 0;
}

int prep_planes_feed(void *ctx, struct ncf_cw_stream *s)
{
	struct prep_planes *p = ctx;
	if (!p->ended) {
		NCF_TRY(planes_flush(p, ZSTD_e_end));
		for (int b = 0; b < 4; b++) {
			p->e[b] = (struct extent){p->z[b].start, p->z[b].end};
			zsink_free(&p->z[b]);
		}
		p->ended = 1;
	}
	for (int b = 0; b < 4; b++) {
		struct zsource z;
		zsource_open(&z, p->fd[b], p->e[b], (size_t)1 << 17);
		uint64_t got = 0;
		int rc;
		while ((rc = zsource_fill(&z)) > 0) {
			if (ncf_cw_stream_add(s, z.out, z.len) != 0) {
				rc = -1;
				break;
			}
			got += z.len;
			z.at = z.len;
		}
		zsource_close(&z);
		if (rc < 0)
			return -1;
		if (got != p->count) {
			ncf_error("a temporary file in %s: a byte plane of %llu bytes, not %llu",
				  ncf_tmp_dir(), (unsigned long long)got, (unsigned long long)p->count);
			return -1;
		}
	}
	return 0;
}

void prep_planes_free(struct prep_planes *p)
{
	if (!p)
		return;
	for (int b = 0; b < 4; b++) {
		zsink_free(&p->z[b]);
		if (p->fd[b] >= 0)
			close(p->fd[b]);
		free(p->buf[b]);
	}
	free(p);
}
