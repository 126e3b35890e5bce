/*
 * fuzz_lines.c - libFuzzer harness of the line reader of ncf-infer --score
 * and --recommend (common/lines.c), checked against a plain reference.
 *
 * Input: byte 0 picks the buffer (8 to 263 bytes, so that lines cross
 * refills and overflow it) and the id count (1 or 2); the rest is what
 * comes on stdin, through a pipe-like memfd.  The reference splits the
 * same bytes on LF itself: the reader must return exactly its non-blank
 * lines (CR before LF dropped), stop with an error at the first line
 * holding a NUL or longer than the buffer, and parse ids as strtoul would.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t cap = 8 + data[0];
	int want = 1 + (data[0] & 1);
	const uint8_t *in = data + 1;
	size_t n = size - 1;
	int fd = memfd_create("fuzz-lines", 0);
	FUZZ_ASSERT(fd >= 0, "memfd");
	if (n)
		FUZZ_ASSERT(write(fd, in, n) == (ssize_t)n, "write");
	lseek(fd, 0, SEEK_SET);
	fuzz_messages_reset();
	struct ncf_lines l;
	ncf_lines_init(&l, fd, "<fuzz>", cap);
	size_t pos = 0;
	uint64_t line = 0;
	for (;;) {
		/* the reference's next non-blank line, or its error */
		int ref_err = 0, ref_end = 0;
		size_t len = 0;
		const uint8_t *s = NULL;
		for (;;) {
			if (pos >= n) {
				ref_end = 1;
				break;
			}
			const uint8_t *nl = memchr(in + pos, '\n', n - pos);
			s = in + pos;
			len = nl ? (size_t)(nl - s) : n - pos;
			/* the reader holds a line in cap bytes, its LF included:
			 * cap - 1 bytes at most */
			if (len >= cap) {
				ref_err = 1;
				break;
			}
			line++;
			pos += len + (nl != NULL);
			if (memchr(s, 0, len)) {
				ref_err = 1;
				break;
			}
			if (nl && len && s[len - 1] == '\r')
				len--;
			size_t k = 0;
			while (k < len && (s[k] == ' ' || s[k] == '\t'))
				k++;
			if (k < len)
				break;
		}
		char *got;
		int rc = ncf_lines_read(&l, &got, count_flush, NULL);
		if (ref_end) {
			FUZZ_ASSERT(rc == 0, "reader returned %d at the end", rc);
			break;
		}
		if (ref_err) {
			FUZZ_ASSERT(rc == -1, "reader returned %d where the reference fails", rc);
			fuzz_check_refusal();
			FUZZ_ASSERT(!strncmp(fuzz_last_message, "fuzz: <fuzz>:", 13), "message '%s'",
				    fuzz_last_message);
			break;
		}
		FUZZ_ASSERT(rc == 1, "reader returned %d for a line", rc);
		FUZZ_ASSERT(strlen(got) == len && !memcmp(got, s, len) && l.line == line,
			    "line %llu differs", (unsigned long long)line);
		uint32_t a = 0, b = 0, ra = 0, rb = 0;
		int p1 = ncf_parse_ids(got, want, &a, &b), p2 = ref_ids(got, want, &ra, &rb);
		FUZZ_ASSERT(p1 == p2 && (p1 || (a == ra && (want == 1 || b == rb))),
			    "ids of line %llu", (unsigned long long)line);
	}
	ncf_lines_free(&l);
	close(fd);
	return 0;
}
