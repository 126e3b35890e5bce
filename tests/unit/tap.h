/*
 * tap.h - a minimal TAP producer for the C unit tests.  A test fails by its
 * exit status: tap_done() returns non-zero when any check failed or the
 * plan was not met.
 *
 * One case, one function (git's t/unit-tests): a static function per case
 * holds its checks, and main runs each with a TEST() line, which prints one
 * TAP line for the case; tap_done() prints the plan at the end:
 *
 *	static void t_empty_mask(void)
 *	{
 *		uint8_t *m = ncf_eval_mask(...);
 *		tap_ok(m[0] == 0, "the positive itself is not counted");
 *		free(m);
 *	}
 *	int main(void)
 *	{
 *		TEST(t_empty_mask(), "an empty candidate list");
 *		return tap_done();
 *	}
 *
 * Inside a case a check (tap_ok, TAP_CHECK) prints nothing when it holds and
 * a "# check failed" diagnostic with its words (TAP_CHECK: the expression,
 * file and line) when it does not; the case fails when any check failed,
 * and also when it ran no check at all (a case that cannot fail is a bug).
 * tap_skip_case(why) inside a case prints the case as skipped.  Outside a
 * case, tap_ok prints its own TAP line as before.
 */
#ifndef NCF_TAP_H
#define NCF_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed, tap_planned = -1;
/* the case that TEST() is running: in one, its checks so far, failed checks, skip reason */
static int tap_in_case, tap_case_checks, tap_case_failed;
static const char *tap_case_skip;

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
	if (tap_in_case) {
		tap_case_checks++;
		if (!cond) {
			tap_case_failed++;
			printf("# check failed: ");
			vprintf(fmt, ap);
			printf("\n");
			fflush(stdout);
		}
		va_end(ap);
		return cond;
	}
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

/* A check that names itself: the expression, file and line when it fails. */
#define TAP_CHECK(cond) tap_ok((cond) != 0, "%s at %s:%d", #cond, __FILE__, __LINE__)

/* Inside a case: the case cannot run here (a missing file, a feature this
 * build lacks); TEST() prints it as skipped, with why, unless a check failed. */
static inline void tap_skip_case(const char *why)
{
	tap_case_skip = why;
}

static inline void tap_case_begin(void)
{
	tap_in_case = 1;
	tap_case_checks = tap_case_failed = 0;
	tap_case_skip = NULL;
}

static inline int tap_case_end(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int tap_case_end(const char *fmt, ...)
{
	va_list ap;
	tap_in_case = 0;
	int ok = !tap_case_failed && (tap_case_checks > 0 || tap_case_skip);
	if (!ok)
		tap_failed++;
	printf("%sok %d - ", ok ? "" : "not ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (ok && tap_case_skip)
		printf(" # SKIP %s", tap_case_skip);
	printf("\n");
	if (!tap_case_failed && !tap_case_checks && !tap_case_skip)
		printf("# the case ran no check\n");
	fflush(stdout);
	return ok;
}

/* TEST(call, "description", ...): run one case (a call of its function) and
 * print its TAP line.  Evaluates to 1 when the case passed. */
#define TEST(call, ...) (tap_case_begin(), (call), tap_case_end(__VA_ARGS__))

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
