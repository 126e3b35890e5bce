/*
 * test_container.c - the section writer with zstd workers (container.h):
 * the bytes of a section are the same for every number of workers from 1
 * on, which is what keeps ncf-train's checkpoints byte-for-byte
 * reproducible whatever the machine's processor count (ncf-train writes
 * them with one worker per processor, at most 8); they read back to the
 * data written.  The section is 24 MB of shuffled float-like data, so
 * that zstd splits it into several jobs (below a few MB one job holds it
 * all and the question does not arise).
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

int main(void)
{
	tap_plan(6);
	size_t count = 6u << 20, n = count * sizeof(float);
	float *x = malloc(n);
	uint32_t s = 12345;
	for (size_t i = 0; i < count; i++) { /* N(0, 0.01)-ish, as a model's weights */
		s = s * 1664525u + 1013904223u;
		x[i] = (float)((int32_t)(s >> 8) - (1 << 23)) / (float)(1 << 23) * 0.01f;
	}
	size_t len[4] = {0};
	char *f[4];
	for (int w = 0; w < 4; w++)
		f[w] = write_file(x, n, w, &len[w]);
	tap_ok(f[0] && f[1] && f[2] && f[3], "a 24 MB section written with 0, 1, 2 and 3 workers");
	int same = f[1] && f[2] && f[3] && len[1] == len[2] && len[1] == len[3] &&
		   !memcmp(f[1], f[2], len[1]) && !memcmp(f[1], f[3], len[1]);
	tap_ok(same, "1, 2 and 3 workers: the same bytes (%zu, %zu, %zu)", len[1], len[2], len[3]);
	tap_ok(f[0] && reads_back(f[0], len[0], x, n), "no workers: reads back to the data");
	tap_ok(f[1] && reads_back(f[1], len[1], x, n), "1 worker: reads back to the data");
	tap_ok(f[3] && reads_back(f[3], len[3], x, n), "3 workers: reads back to the data");
	tap_ok(len[1] < n, "the shuffled section compresses (%zu of %zu bytes)", len[1], n);
	for (int w = 0; w < 4; w++)
		free(f[w]);
	free(x);
	return tap_done();
}
