/*
 * fuzz.h - what the libFuzzer harnesses of tests/fuzz share.
 *
 * Each harness defines LLVMFuzzerTestOneInput (and, built with
 * -DNCF_FUZZ_STRUCTURE, a structure-aware LLVMFuzzerCustomMutator).  The
 * same sources are linked with replay.c into plain programs that make
 * check runs on the reproducers kept in tests/fuzz/regress/ (no clang
 * needed).  A harness aborts when an invariant breaks, so that libFuzzer
 * (or the replay) reports it like a crash.
 */
#ifndef NCF_FUZZ_H
#define NCF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache.h"
#include "err.h"

/* Messages the library printed since fuzz_messages_reset(); their text
 * goes nowhere (a fuzzer prints millions), or to stderr with
 * NCF_FUZZ_VERBOSE set. */
static int fuzz_message_count;
static char fuzz_last_message[512];

static void fuzz_sink(const char *line)
{
	fuzz_message_count++;
	snprintf(fuzz_last_message, sizeof fuzz_last_message, "%s", line);
	if (getenv("NCF_FUZZ_VERBOSE")) /* replay_* with messages shown */
		fprintf(stderr, "%s\n", line);
}

static inline void fuzz_messages_reset(void)
{
	ncf_set_progname("fuzz");
	ncf_set_message_sink(fuzz_sink);
	fuzz_message_count = 0;
	fuzz_last_message[0] = 0;
}

#define FUZZ_ASSERT(cond, ...)                                                          \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "fuzz invariant broken (%s:%d): %s: ", __FILE__,  \
				__LINE__, #cond);                                       \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
			abort();                                                        \
		}                                                                       \
	} while (0)

/* A refusal always says why, in one line that starts with the program
 * name (STYLE.md rule 9). */
static inline void fuzz_check_refusal(void)
{
	FUZZ_ASSERT(fuzz_message_count >= 1, "a reader failed without a message");
	FUZZ_ASSERT(!strncmp(fuzz_last_message, "fuzz: ", 6) && !strchr(fuzz_last_message, '\n'),
		    "message '%s'", fuzz_last_message);
}

/* A read-only stream over d (n bytes); an empty input is /dev/null. */
static inline FILE *fuzz_open(const uint8_t *d, size_t n)
{
	FILE *fp = n ? fmemopen((void *)d, n, "rb") : fopen("/dev/null", "rb");
	if (!fp)
		abort();
	return fp;
}

/* The same as a regular file (a memfd), which readers can weigh by its
 * size; fuzz_open's stream is read like a pipe. */
static inline FILE *fuzz_open_file(const uint8_t *d, size_t n)
{
	int fd = memfd_create("fuzz", 0);
	if (fd < 0 || (n && write(fd, d, n) != (ssize_t)n) || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	FILE *fp = fdopen(fd, "rb");
	if (!fp)
		abort();
	return fp;
}

/* Odd sizes as a file, even ones as a pipe: both reading paths. */
static inline FILE *fuzz_open_either(const uint8_t *d, size_t n)
{
	return n % 2 ? fuzz_open_file(d, n) : fuzz_open(d, n);
}

/* The cache c written (to memory, as display) and read back into *r
 * (the caller frees it): what the writer makes, the reader accepts.
 * *buf holds the bytes written (the caller frees it). */
static inline void fuzz_cache_round_trip(const struct ncf_cache *c, const char *display,
					 struct ncf_cache *r, char **buf)
{
	size_t len = 0;
	*buf = NULL;
	FILE *ms = open_memstream(buf, &len);
	FUZZ_ASSERT(ncf_cache_write_fp(c, ms, display) == 0, "writing %s", display);
	fclose(ms);
	FILE *in = fuzz_open((const uint8_t *)*buf, len);
	FUZZ_ASSERT(ncf_cache_read_fp(in, display, r) == 0,
		    "the reader refuses what the writer made: %s", fuzz_last_message);
	fclose(in);
}

#endif
