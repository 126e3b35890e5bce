/*
 * helpers.c - the unit tests' shared helpers (see helpers.h for each one's
 * contract).  No checks here: a helper that cannot do its job bails out.
 */
#include "helpers.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ncf_hd.h"

static void bail_out(const char *what, const char *path)
{
	printf("Bail out! %s %s\n", what, path);
	fflush(stdout);
	exit(1);
}

unsigned char *helper_read_file(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	size_t cap = 4096, n = 0, got;
	unsigned char *b = malloc(cap);
	while (b && (got = fread(b + n, 1, cap - n - 1, fp)) > 0)
		if ((n += got) == cap - 1)
			b = realloc(b, cap *= 2);
	fclose(fp);
	if (!b)
		bail_out("out of memory reading", path);
	b[n] = 0;
	*len = n;
	return b;
}

void helper_write_file(const char *path, const void *buf, size_t len)
{
	FILE *fp = fopen(path, "wb");
	if (!fp || (len && fwrite(buf, 1, len, fp) != len) || fclose(fp) != 0)
		bail_out("cannot write", path);
}

void helper_make_tmpdir(char *dir, size_t n, const char *name)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, n, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(dir))
		bail_out("mkdtemp failed:", dir);
}

static int capture_fd = -1, saved_stderr = -1;

void helper_capture_begin(void)
{
	int p[2];
	fflush(stderr);
	saved_stderr = dup(2);
	if (saved_stderr < 0 || pipe(p) != 0)
		bail_out("cannot capture", "stderr");
	fcntl(p[1], F_SETFL, O_NONBLOCK); /* never block on a full pipe */
	dup2(p[1], 2);
	close(p[1]);
	capture_fd = p[0];
}

char *helper_capture_end(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	ssize_t got;
	while (b && (got = read(capture_fd, b + n, cap - 1 - n)) > 0)
		if ((n += (size_t)got) == cap - 1)
			b = realloc(b, cap *= 2);
	close(capture_fd);
	if (!b)
		bail_out("out of memory capturing", "stderr");
	b[n] = 0;
	return b;
}

int helper_sanitizer(void)
{
	const char *san = getenv("NCF_SANITIZER");
	return san && *san && strcmp(san, "0");
}

uint32_t helper_rnd(uint64_t seed, uint32_t a, uint64_t idx, uint32_t n)
{
	return ncf_uniform_below(ncf_rng(seed, NCF_RNG_BENCH, a, idx, 0).v[0], n);
}

void helper_make_rows(uint64_t seed, uint32_t U, uint32_t I, int64_t *offsets, uint32_t **items,
		      uint32_t **entry_user)
{
	uint8_t *has = malloc(I);
	size_t cap = (size_t)U * 64, n = 0;
	uint32_t *it_out = malloc(cap * sizeof *it_out), *eu = malloc(cap * sizeof *eu);
	if (!has || !it_out || !eu)
		bail_out("out of memory making", "rows");
	for (uint32_t u = 0; u < U; u++) {
		memset(has, 0, I);
		uint32_t k = 3 + helper_rnd(seed, 1, u, 58);
		for (uint32_t t = 0; t < k; t++) {
			uint32_t it = helper_rnd(seed, 2, (uint64_t)u * 100 + t, I);
			has[t % 2 ? it : it % 20] = 1;
		}
		offsets[u] = (int64_t)n;
		for (uint32_t it = 0; it < I; it++)
			if (has[it]) {
				it_out[n] = it;
				eu[n++] = u;
			}
	}
	offsets[U] = (int64_t)n;
	free(has);
	*items = it_out;
	*entry_user = eu;
}
