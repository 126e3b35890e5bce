/* err.c - see err.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

int ncf_verbosity = 2;
static const char *progname = "ncf";

void ncf_set_progname(const char *name)
{
	const char *slash = strrchr(name, '/');
	progname = slash ? slash + 1 : name;
}

const char *ncf_progname(void)
{
	return progname;
}

static void (*message_sink)(const char *line);

void ncf_set_message_sink(void (*sink)(const char *line))
{
	message_sink = sink;
}

static __thread void (*thread_sink)(const char *line, void *ctx);
static __thread void *thread_sink_ctx;

void ncf_set_thread_message_sink(void (*sink)(const char *line, void *ctx), void *ctx)
{
	thread_sink = sink;
	thread_sink_ctx = ctx;
}

static void vmsg(const char *fmt, va_list ap)
{
	/* One write per message so that lines from ranks do not interleave. */
	char buf[4096];
	int n = snprintf(buf, sizeof buf, "%s: ", progname);
	if (n < 0)
		n = 0;
	vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	size_t len = strlen(buf);
	if (thread_sink) {
		thread_sink(buf, thread_sink_ctx);
		return;
	}
	if (message_sink) {
		message_sink(buf);
		return;
	}
	if (len + 1 < sizeof buf) {
		buf[len++] = '\n';
		buf[len] = 0;
	} else {
		buf[sizeof buf - 2] = '\n';
	}
	fputs(buf, stderr);
	fflush(stderr);
}

void ncf_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

void ncf_warn(const char *fmt, ...)
{
	if (ncf_verbosity < 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

void ncf_info(const char *fmt, ...)
{
	if (ncf_verbosity < 2)
		return;
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

void ncf_debug(const char *fmt, ...)
{
	if (ncf_verbosity < 3)
		return;
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
}

/* "out of memory (...)" and the end of the process, status 1. */
static void out_of_memory(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void out_of_memory(const char *fmt, ...)
{
	/* the process ends: say it now, not to the thread's sink */
	int worker = thread_sink != NULL;
	thread_sink = NULL;
	va_list ap;
	va_start(ap, fmt);
	vmsg(fmt, ap);
	va_end(ap);
	if (worker) /* not the exit handlers (CUDA's teardown, ...) under the main thread */
		_exit(NCF_EXIT_FAIL);
	exit(NCF_EXIT_FAIL);
}

void ncf_out_of_memory(const char *what)
{
	out_of_memory("out of memory (%s)", what);
}

void *ncf_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		out_of_memory("out of memory (%zu bytes)", n);
	return p;
}

void *ncf_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		out_of_memory("out of memory (%zu x %zu bytes)", n, size);
	return p;
}

void *ncf_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		out_of_memory("out of memory (%zu bytes)", n);
	return q;
}

char *ncf_xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = ncf_xmalloc(n);
	memcpy(d, s, n);
	return d;
}

const char *ncf_escape(const char *s, size_t len, size_t max)
{
	static __thread char buf[512];
	size_t o = 0;
	if (max > 120)
		max = 120;
	for (size_t i = 0; i < len && o + 8 < sizeof buf; i++) {
		if (i == max) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			buf[o++] = (char)c;
		} else {
			o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
		}
	}
	buf[o] = 0;
	return buf;
}
