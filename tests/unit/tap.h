/*
 * tap.h - a minimal TAP producer for the C unit tests.  A test fails by its
 * exit status: tap_done() returns non-zero when any check failed or the
 * plan was not met.
 */
#ifndef NCF_TAP_H
#define NCF_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed, tap_planned = -1;

static inline void tap_plan(int n)
{
	tap_planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

static inline void tap_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	exit(0);
}

static inline int tap_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

static inline void tap_skip(int n, const char *why)
{
	for (int i = 0; i < n; i++)
		printf("ok %d # SKIP %s\n", ++tap_n, why);
}

static inline void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

/* |got - want| <= atol + rtol |want|, with a diagnostic on failure. */
static inline int tap_close(double got, double want, double atol, double rtol, const char *what)
{
	int ok = fabs(got - want) <= atol + rtol * fabs(want) && !isnan(got);
	if (!ok)
		tap_diag("%s: got %.9g, want %.9g (atol %g, rtol %g)", what, got, want, atol, rtol);
	return ok;
}

static inline int tap_done(void)
{
	if (tap_planned < 0)
		printf("1..%d\n", tap_n);
	else if (tap_planned != tap_n) {
		printf("# planned %d tests, ran %d\n", tap_planned, tap_n);
		return 1;
	}
	return tap_failed ? 1 : 0;
}

#endif
