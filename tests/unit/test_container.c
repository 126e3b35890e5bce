/*
 * test_container.c - the section writer with zstd workers (container.h):
 * the bytes of a section are the same for every number of workers from 1
 * on, which is what keeps ncf-train's checkpoints byte-for-byte
 * reproducible whatever the machine's processor count (ncf-train writes
 * them with one worker per processor, at most 8); they read back to the
 * data written.  The section is 24 MB of shuffled float-like data, so
 * that zstd splits it into several jobs (below a few MB one job holds it
 * all and the question does not arise).
 *
 * And the streamed section (ncf_cw_stream, ncf-prep's spilled caches):
 * the filtered bytes fed in pieces of any size make the same file as
 * ncf_cw_section on the array at workers 0, for a delta-and-shuffle
 * section as the cache's training items are and a plain one, pieces of
 * 1 byte to 1 MiB, and a section of no bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "tap.h"

static const char MAGIC[8] = "NCFTEST\0";

/* The file of one section of data (n bytes) written with workers; *len
 * its size.  NULL on failure. */
static char *write_file(const void *data, size_t n, int workers, size_t *len)
{
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, len);
	if (!fp)
		return NULL;
	struct ncf_cw w = {0};
	w.level = 1;
	w.workers = workers;
	int rc = ncf_cw_begin(&w, fp, "test", MAGIC, 1) ||
		 ncf_cw_section(&w, "params", data, n,
				NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4)) ||
		 ncf_cw_end(&w);
	if (fclose(fp) != 0 || rc) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Read the one section of file (len bytes) back: equal to data (n)? */
static int reads_back(char *file, size_t len, const void *data, size_t n)
{
	FILE *fp = fmemopen(file, len, "rb");
	if (!fp)
		return 0;
	struct ncf_cr r;
	memset(&r, 0, sizeof r);
	void *got = NULL;
	size_t size = 0;
	int ok = ncf_cr_open(&r, fp, "test", MAGIC, 1, 1, "") == 0 &&
		 ncf_cr_section(&r, "params", n, 1, &got, &size) == 0 && ncf_cr_end(&r) == 0 &&
		 size == n && memcmp(got, data, n) == 0;
	free(got);
	ncf_cr_close(&r);
	fclose(fp);
	return ok;
}

/* The file of one section (tag "s") of n bytes at data with filters, at
 * zstd level 3 and no workers (as caches are written): from the array, or
 * (pieces non-zero) through ncf_cw_stream fed the filtered bytes in
 * pieces of pieces bytes (growing by half each time).  *len its size. */
static char *one_section(const uint32_t *data, size_t n, uint32_t filters, size_t pieces,
			 size_t *len)
{
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, len);
	struct ncf_cw w = {0};
	int rc = !fp || ncf_cw_begin(&w, fp, "test", MAGIC, 1);
	if (!rc && !pieces) {
		rc = ncf_cw_section(&w, "s", data, n, filters);
	} else if (!rc) {
		/* the filters by hand: delta, then byte planes */
		size_t count = n / 4;
		unsigned char *f = malloc(n + 1);
		for (size_t i = 0; i < count; i++) {
			uint32_t v = data[i] - ((filters & NCF_FILTER_DELTA32) && i ? data[i - 1] : 0);
			for (int b = 0; b < 4; b++)
				f[b * count + i] = (unsigned char)(v >> (8 * b));
		}
		struct ncf_cw_stream st;
		rc = ncf_cw_stream_begin(&w, &st, "s", n, filters);
		for (size_t at = 0, k = pieces; !rc && at < n; at += k, k += k / 2 + 1)
			rc = ncf_cw_stream_add(&st, f + at, k < n - at ? k : n - at);
		rc = rc ? (ncf_cw_stream_abort(&st), -1) : ncf_cw_stream_end(&st);
		free(f);
	}
	rc = rc || ncf_cw_end(&w);
	if ((fp && fclose(fp) != 0) || rc) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void t_stream_equals_section(void)
{
	size_t count = 3u << 20, n = count * 4; /* 12 MB: many blocks, more than the window */
	uint32_t *x = malloc(n), s = 7;
	for (size_t i = 0; i < count; i++) { /* ascending, with small steps: training items */
		s = s * 1664525u + 1013904223u;
		x[i] = (i ? x[i - 1] : 0) + (s >> 29);
	}
	uint32_t delta = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4) | NCF_FILTER_DELTA32;
	uint32_t plain = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4);
	const struct {
		uint32_t filters;
		size_t n, pieces;
	} cases[] = {{delta, n, 1}, {delta, n, 4093}, {delta, n, 1 << 20}, {plain, n, 777},
		     {plain, 4000, 1}, {delta, 0, 1}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		size_t la = 0, lb = 0;
		char *a = one_section(x, cases[c].n, cases[c].filters, 0, &la);
		char *b = one_section(x, cases[c].n, cases[c].filters, cases[c].pieces, &lb);
		tap_ok(a && b && la == lb && !memcmp(a, b, la),
		       "%zu bytes, filters %#x, fed from %zu bytes a piece: %zu and %zu bytes",
		       cases[c].n, cases[c].filters, cases[c].pieces, la, lb);
		free(a);
		free(b);
	}
	free(x);
}

/* A 24 MB section of N(0, 0.01)-ish floats, as a model's weights, written
 * with 0, 1, 2 and 3 workers: f[w], len[w] bytes. */
static size_t count = 6u << 20, n;
static float *x;
static char *f[4];
static size_t len[4];

static void write_with_workers(void)
{
	n = count * sizeof(float);
	x = malloc(n);
	uint32_t s = 12345;
	for (size_t i = 0; i < count; i++) {
		s = s * 1664525u + 1013904223u;
		x[i] = (float)((int32_t)(s >> 8) - (1 << 23)) / (float)(1 << 23) * 0.01f;
	}
	for (int w = 0; w < 4; w++)
		f[w] = write_file(x, n, w, &len[w]);
}

static void t_written(void)
{
	for (int w = 0; w < 4; w++)
		tap_ok(f[w] != NULL, "written with %d workers", w);
}

static void t_same_bytes(void)
{
	int same = f[1] && f[2] && f[3] && len[1] == len[2] && len[1] == len[3] &&
		   !memcmp(f[1], f[2], len[1]) && !memcmp(f[1], f[3], len[1]);
	tap_ok(same, "1, 2 and 3 workers: %zu, %zu, %zu bytes", len[1], len[2], len[3]);
}

static void t_reads_back(int w)
{
	tap_ok(f[w] && reads_back(f[w], len[w], x, n), "%d workers' file", w);
}

static void t_compresses(void)
{
	tap_ok(len[1] < n, "%zu of %zu bytes", len[1], n);
}

int main(void)
{
	TEST(t_stream_equals_section(), "a streamed section: the bytes of the section from the array");
	write_with_workers();
	TEST(t_written(), "a 24 MB section written with 0, 1, 2 and 3 workers");
	TEST(t_same_bytes(), "1, 2 and 3 workers: the same bytes");
	TEST(t_reads_back(0), "no workers: reads back to the data");
	TEST(t_reads_back(1), "1 worker: reads back to the data");
	TEST(t_reads_back(3), "3 workers: reads back to the data");
	TEST(t_compresses(), "the shuffled section compresses");
	for (int w = 0; w < 4; w++)
		free(f[w]);
	free(x);
	return tap_done();
}
