/*
 * fuzz_lines.c - libFuzzer harness of the line reader of ncf-infer --score
 * and --recommend and of ncf-prep (common/lines.c), checked against a
 * plain reference.
 *
 * Input: byte 0 picks the longest line (8 to 263 bytes, so that lines
 * cross refills and overflow it) and the id count (1 or 2); the rest is
 * what comes on stdin: through a pipe-like memfd for even sizes, a stream
 * with a larger buffer (ncf-prep's way) for odd ones.  The reference splits
 * the same bytes on LF itself: the reader must skip a leading byte-order
 * mark, return exactly the non-blank lines (CR before LF dropped), stop
 * with an error at the first line whose first max + 1 bytes hold a NUL or
 * a CR not before its LF, or which is longer than max, and parse ids as
 * strtoul would.
 */
#include <ctype.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "lines.h"

/* The reference id parser: [ \t]* ID ([ \t,]+ ID)? [ \t]* with ids decimal
 * 0..2^32-1. */
static int ref_ids(const char *s, int want, uint32_t *a, uint32_t *b)
{
	const char *p = s;
	uint32_t *out[2] = {a, b};
	while (*p == ' ' || *p == '\t')
		p++;
	for (int k = 0; k < want; k++) {
		if (k) {
			const char *q = p;
			while (*q == ' ' || *q == '\t' || *q == ',')
				q++;
			if (q == p)
				return -1;
			p = q;
		}
		if (!isdigit((unsigned char)*p))
			return -1;
		unsigned long long v = 0;
		while (isdigit((unsigned char)*p)) {
			v = v * 10 + (unsigned)(*p - '0');
			if (v > UINT32_MAX)
				return -1;
			p++;
		}
		*out[k] = (uint32_t)v;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	return *p ? -1 : 0;
}

static int flushes;
static int count_flush(void *arg)
{
	(void)arg;
	flushes++;
	return 0;
}

/* The reference: the next non-blank line of in (n bytes) from *pos, as
 * s, len; 1 line, 0 the end, -1 an error. */
static int ref_next(const uint8_t *in, size_t n, size_t max, size_t *pos, uint64_t *line,
		    const uint8_t **s, size_t *len)
{
	for (;;) {
		if (*pos >= n)
			return 0;
		const uint8_t *p = in + *pos;
		const uint8_t *nl = memchr(p, '\n', n - *pos);
		size_t all = nl ? (size_t)(nl - p) : n - *pos;
		size_t body = nl && all && p[all - 1] == '\r' ? all - 1 : all;
		size_t seen = all < max + 1 ? all : max + 1;
		++*line;
		if (memchr(p, 0, seen) || memchr(p, '\r', body < seen ? body : seen) || body > max)
			return -1;
		*pos += all + (nl != NULL);
		size_t k = 0;
		while (k < body && (p[k] == ' ' || p[k] == '\t'))
			k++;
		if (k < body) {
			*s = p;
			*len = body;
			return 1;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t max = 8 + data[0];
	int want = 1 + (data[0] & 1);
	const uint8_t *in = data + 1;
	size_t n = size - 1;
	fuzz_messages_reset();
	struct ncf_lines l;
	FILE *fp = NULL;
	int fd = -1;
	if (size % 2) {
		fp = fuzz_open(in, n);
		ncf_lines_init_stream(&l, fp, "<fuzz>", max, 2 * max + data[0] % 7);
	} else {
		fd = memfd_create("fuzz-lines", 0);
		FUZZ_ASSERT(fd >= 0, "memfd");
		if (n)
			FUZZ_ASSERT(write(fd, in, n) == (ssize_t)n, "write");
		lseek(fd, 0, SEEK_SET);
		ncf_lines_init(&l, fd, "<fuzz>", max);
	}
	size_t pos = n >= 3 && !memcmp(in, "\xEF\xBB\xBF", 3) ? 3 : 0;
	uint64_t line = 0;
	for (;;) {
		const uint8_t *s = NULL;
		size_t len = 0;
		int ref = ref_next(in, n, max, &pos, &line, &s, &len);
		char *got;
		int rc = ncf_lines_read(&l, &got, count_flush, NULL);
		FUZZ_ASSERT(rc == ref, "reader returned %d where the reference has %d (line %llu)", rc,
			    ref, (unsigned long long)line);
		if (ref == 0)
			break;
		if (ref < 0) {
			fuzz_check_refusal();
			FUZZ_ASSERT(!strncmp(fuzz_last_message, "fuzz: <fuzz>:", 13), "message '%s'",
				    fuzz_last_message);
			break;
		}
		FUZZ_ASSERT(strlen(got) == len && !memcmp(got, s, len) && l.line == line,
			    "line %llu differs", (unsigned long long)line);
		uint32_t a = 0, b = 0, ra = 0, rb = 0;
		int p1 = ncf_parse_ids(got, want, &a, &b), p2 = ref_ids(got, want, &ra, &rb);
		FUZZ_ASSERT(p1 == p2 && (p1 || (a == ra && (want == 1 || b == rb))),
			    "ids of line %llu", (unsigned long long)line);
	}
	ncf_lines_free(&l);
	if (fp)
		fclose(fp);
	else
		close(fd);
	return 0;
}
