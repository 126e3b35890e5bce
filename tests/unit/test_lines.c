/*
 * test_lines - the line reader's rules (common/lines.h): line ends, a bare
 * carriage return, NUL bytes and lines past the limit refused on whatever
 * line they are and however the input is split into reads, the
 * byte-order mark, peeking, the byte count and checksum.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "lines.h"
#include "tap.h"

static char last_message[512];

static void sink(const char *line)
{
	snprintf(last_message, sizeof last_message, "%s", line);
}

/* A reader over text (n bytes): a descriptor (a memfd) when bufsize is 0,
 * else a stream read bufsize bytes at a time.  *fp, *fd to close after. */
static void open_text(struct ncf_lines *l, const char *text, size_t n, size_t max, size_t bufsize,
		      FILE **fp, int *fd)
{
	*fd = memfd_create("lines", 0);
	if (*fd < 0 || write(*fd, text, n) != (ssize_t)n || lseek(*fd, 0, SEEK_SET) != 0)
		abort();
	*fp = NULL;
	if (bufsize) {
		*fp = fdopen(*fd, "rb");
		ncf_lines_init_stream(l, *fp, "t.txt", max, bufsize);
	} else {
		ncf_lines_init(l, *fd, "t.txt", max);
	}
}

static void close_text(struct ncf_lines *l, FILE *fp, int fd)
{
	ncf_lines_free(l);
	if (fp)
		fclose(fp);
	else
		close(fd);
}

/* Read text to its end or its first error with every line (blank ones
 * too) appended to out as "LINE|" ("LINE$|" for a last line without its
 * end).  Returns ncf_lines_next's last result (0 or -1). */
static int read_all(const char *text, size_t n, size_t max, size_t bufsize, char *out,
		    size_t cap)
{
	struct ncf_lines l;
	FILE *fp;
	int fd;
	open_text(&l, text, n, max, bufsize, &fp, &fd);
	out[0] = 0;
	last_message[0] = 0;
	char *s;
	size_t len;
	int rc;
	while ((rc = ncf_lines_next(&l, &s, &len)) == 1) {
		size_t o = strlen(out);
		snprintf(out + o, cap - o, "%s%s|", s, l.ended ? "" : "$");
	}
	close_text(&l, fp, fd);
	return rc;
}

/* Every way of reading: a descriptor, and streams with small and large
 * buffers. */
static const size_t bufsizes[] = {0, 1, 7, 64, 4096};
#define NBUF (sizeof bufsizes / sizeof bufsizes[0])

static void t_line_ends(void)
{
	const char text[] = "\xEF\xBB\xBF" "a b\r\n\n  \nc\nd";
	char out[256];
	for (size_t b = 0; b < NBUF; b++) {
		int rc = read_all(text, sizeof text - 1, 16, bufsizes[b], out, sizeof out);
		tap_ok(rc == 0 && !strcmp(out, "a b||  |c|d$|"),
		       "buffer %zu: BOM skipped, CRLF and LF stripped, blank lines kept, the last "
		       "line's missing end said: '%s'",
		       bufsizes[b], out);
	}
}

/* text must fail on line no with a message containing what, read any
 * way. */
static void refused(const char *text, size_t n, size_t max, unsigned no, const char *what,
		    const char *desc)
{
	char want[128], out[4096];
	snprintf(want, sizeof want, "t.txt:%u: %s", no, what);
	for (size_t b = 0; b < NBUF; b++) {
		int rc = read_all(text, n, max, bufsizes[b], out, sizeof out);
		tap_ok(rc == -1 && strstr(last_message, want), "%s, buffer %zu: '%s'", desc,
		       bufsizes[b], last_message);
	}
}

static void t_bare_cr(void)
{
	refused("a\rb\nc\n", 6, 16, 1, "a carriage return inside the line", "a CR on line 1");
	refused("a\nb\rc\n", 6, 16, 2, "a carriage return inside the line", "a CR inside line 2");
	refused("a\nb\r\r\n", 6, 16, 2, "a carriage return inside the line", "CR CR LF");
	refused("a\nb\r", 4, 16, 2, "a carriage return inside the line", "a CR ending the input");
	refused("a\rb\rc\rd\re\rf\rg\rh\ri\rj\r", 20, 4, 1, "a carriage return inside the line",
		"CR line ends (old Mac) past the limit are said as CRs");
	TAP_CHECK(strstr(last_message, "tr '\\r' '\\n'") != NULL);
}

static void t_nul(void)
{
	refused("a\nb\0c\n", 6, 16, 2, "a NUL byte in the line", "a NUL in line 2");
	refused("\0", 1, 16, 1, "a NUL byte in the line", "a lone NUL");
}

/* Lines of max bytes pass, with LF, CRLF or no end; max + 1 bytes fail
 * on the first line, a middle one and the last, ended or not. */
static void t_long_lines(void)
{
	enum { MAX = 20 };
	char ok20[] = "12345678901234567890";
	char text[256], out[512];
	snprintf(text, sizeof text, "%s\n%s\r\n%s", ok20, ok20, ok20);
	for (size_t b = 0; b < NBUF; b++)
		tap_ok(read_all(text, strlen(text), MAX, bufsizes[b], out, sizeof out) == 0,
		       "buffer %zu: lines of exactly max bytes pass (LF, CRLF, no end)", bufsizes[b]);
	const char *cases[][2] = {
		{"123456789012345678901\nx\n", "1"},   {"x\n123456789012345678901\ny\n", "2"},
		{"x\ny\n123456789012345678901\n", "3"}, {"x\ny\n123456789012345678901", "3"},
		{"x\n123456789012345678901\r\n", "2"}, {"x\n1234567890123456789012345678901234567890", "2"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
		refused(cases[c][0], strlen(cases[c][0]), MAX, (unsigned)atoi(cases[c][1]),
			"line longer than 20 bytes", "a line of max + 1 bytes or more");
}

static void t_peek_count_crc(void)
{
	const char text[] = "\xEF\xBB\xBF" "1 2\n3 4\n";
	struct ncf_lines l;
	FILE *fp;
	int fd;
	open_text(&l, text, sizeof text - 1, 16, 64, &fp, &fd);
	l.crc_on = 1;
	const char *p;
	size_t n;
	TAP_CHECK(ncf_lines_peek(&l, 100, &p, &n) == 0 && n == 8 && !memcmp(p, "1 2\n", 4));
	TAP_CHECK(ncf_lines_peek(&l, 3, &p, &n) == 0 && n == 3 && !memcmp(p, "1 2", 3));
	char *s;
	size_t len;
	int lines = 0;
	while (ncf_lines_next(&l, &s, &len) == 1)
		lines++;
	TAP_CHECK(lines == 2 && l.line == 2 && l.bytes == sizeof text - 1);
	TAP_CHECK(l.crc == ncf_crc32c(0, text, sizeof text - 1));
	close_text(&l, fp, fd);
}

/* keep_end: lines stay as read, their ends after them. */
static void t_keep_end(void)
{
	const char text[] = "1 2\r\n3\n4";
	struct ncf_lines l;
	FILE *fp;
	int fd;
	open_text(&l, text, sizeof text - 1, 16, 64, &fp, &fd);
	l.keep_end = 1;
	char *s;
	size_t len;
	TAP_CHECK(ncf_lines_next(&l, &s, &len) == 1 && len == 3 && l.eol == 2 &&
		  !memcmp(s, "1 2\r\n", 5));
	TAP_CHECK(ncf_lines_next(&l, &s, &len) == 1 && len == 1 && l.eol == 1 && !memcmp(s, "3\n", 2));
	TAP_CHECK(ncf_lines_next(&l, &s, &len) == 1 && len == 1 && l.eol == 0 && !l.ended);
	TAP_CHECK(ncf_lines_next(&l, &s, &len) == 0);
	close_text(&l, fp, fd);
}

int main(void)
{
	ncf_set_progname("test");
	ncf_set_message_sink(sink);
	TEST(t_line_ends(), "line ends, blank lines, the byte-order mark");
	TEST(t_bare_cr(), "a carriage return that is not part of a CRLF");
	TEST(t_nul(), "NUL bytes");
	TEST(t_long_lines(), "the longest line, wherever it is");
	TEST(t_peek_count_crc(), "peeking, the byte count and the checksum");
	TEST(t_keep_end(), "lines kept with their ends");
	return tap_done();
}
