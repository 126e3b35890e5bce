/* cli.c - see cli.h. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <csv.h>
#include <zstd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef NCF_HAVE_MPI
#include <mpi.h>
#endif

#include "cli.h"
#include "dist.h"
#include "err.h"

/* OpenBLAS reports its configuration; declared here to avoid cblas.h. */
char *openblas_get_config(void);

int ncf_parse_i64(const char *s, int64_t *out)
{
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || end == s || (*s != '-' && *s != '+' && (*s < '0' || *s > '9')))
		return -1;
	*out = v;
	return 0;
}

int ncf_parse_u64(const char *s, uint64_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int ncf_parse_double(const char *s, double *out)
{
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || end == s || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

int ncf_opt_parse_int(const char *opt, const char *arg, int64_t min, int64_t max, int64_t *v)
{
	if (ncf_parse_i64(arg, v) == 0 && *v >= min && *v <= max)
		return 0;
	ncf_error("%s: '%s' is not an integer from %lld to %lld", opt,
		  ncf_escape(arg, strlen(arg), 40), (long long)min, (long long)max);
	return -1;
}

int ncf_opt_parse_u64(const char *opt, const char *arg, uint64_t *v)
{
	if (ncf_parse_u64(arg, v) == 0)
		return 0;
	ncf_error("%s: '%s' is not a non-negative integer below 2^64", opt,
		  ncf_escape(arg, strlen(arg), 40));
	return -1;
}

int ncf_opt_parse_real(const char *opt, const char *arg, double lo, int lo_open, double hi,
		       int hi_open, double *v)
{
	if (ncf_parse_double(arg, v) == 0 && (lo_open ? *v > lo : *v >= lo) &&
	    (hi_open ? *v < hi : *v <= hi))
		return 0;
	ncf_error("%s: '%s' is not a number in %c%g, %g%c", opt, ncf_escape(arg, strlen(arg), 40),
		  lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
	return -1;
}

int ncf_opt_parse_int_list(const char *opt, const char *arg, int64_t *out, int max, int64_t min,
			   int64_t max_v, int *n)
{
	const char *p = arg;
	char buf[32];
	for (*n = 0;; p++) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (*n == max || len == 0 || len >= sizeof buf) {
			ncf_error("%s: '%s' is not a list of at most %d integers like 256,256,128,64",
				  opt, ncf_escape(arg, strlen(arg), 60), max);
			return -1;
		}
		memcpy(buf, p, len);
		buf[len] = 0;
		NCF_TRY(ncf_opt_parse_int(opt, buf, min, max_v, &out[(*n)++]));
		if (!comma)
			return 0;
		p = comma;
	}
}

void ncf_print_version(int verbose, void (*extra)(FILE *))
{
	printf("%s (ncf) %s\n", ncf_progname(), NCF_VERSION);
	if (!verbose)
		return;
	printf("features:");
#ifdef _OPENMP
	printf(" openmp");
#endif
	printf(" openblas zstd libcsv");
#ifdef NCF_HAVE_MPI
	printf(" mpi");
#endif
	printf("\n");
#ifdef _OPENMP
	printf("openmp\t%d (max threads %d)\n", _OPENMP, omp_get_max_threads());
#endif
	printf("openblas\t%s\n", openblas_get_config());
	printf("zstd\t%s\n", ZSTD_versionString());
	printf("libcsv\t%d.%d.%d\n", CSV_MAJOR, CSV_MINOR, CSV_RELEASE);
#ifdef NCF_HAVE_MPI
	printf("mpi\t%s (MPI %d.%d)\n", ncf_dist_library(), MPI_VERSION, MPI_SUBVERSION);
#endif
	if (extra)
		extra(stdout);
}

void ncf_progress_init(struct ncf_progress *p, int force)
{
	memset(p, 0, sizeof *p);
	p->tty = isatty(STDERR_FILENO);
	p->enabled = ncf_verbosity >= 2 && (force || p->tty);
}

const char *ncf_progress_eta(char *buf, size_t len, double seconds)
{
	long s = seconds > 0 && seconds < 1e8 ? (long)(seconds + 0.5) : 0;
	if (s < 60)
		snprintf(buf, len, "%lds", s);
	else if (s < 3600)
		snprintf(buf, len, "%ld:%02ld", s / 60, s % 60);
	else
		snprintf(buf, len, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
	return buf;
}

/* x with k or M (or in MB for bytes), into buf. */
static const char *amount(char *buf, size_t len, double x, int bytes)
{
	if (bytes)
		snprintf(buf, len, "%.1f", x / 1e6);
	else if (x >= 1e6)
		snprintf(buf, len, "%.2fM", x / 1e6);
	else if (x >= 1e4)
		snprintf(buf, len, "%.1fk", x / 1e3);
	else
		snprintf(buf, len, "%.0f", x);
	return buf;
}

/* When the process last printed a plain progress line: at most one every
 * NCF_PROGRESS_PLAIN_S, whichever progress it came from. */
static double plain_last = -1e30;

/* The line, on a terminal in place of the last one, else as a line of
 * its own (the caller has checked the time). */
static void show(struct ncf_progress *p, const char *text, double t)
{
	if (p->tty)
		fprintf(stderr, "\r\033[K%s", text);
	else
		fprintf(stderr, "%s: %s\n", ncf_progname(), text);
	fflush(stderr);
	if (!p->tty)
		plain_last = t;
	p->last = t;
	p->shown = 1;
}

/* Is a line due at t (a new label on a terminal is shown at once)? */
static int due(const struct ncf_progress *p, double t, int new_label)
{
	if (!p->enabled)
		return 0;
	if (!p->tty)
		return t - plain_last >= NCF_PROGRESS_PLAIN_S;
	return !p->shown || new_label || t - p->last >= 0.16;
}

/* A new label starts its clock.  Returns 1 when it is new. */
static int relabel(struct ncf_progress *p, const char *label, double done, double t)
{
	if (!strncmp(p->label, label, sizeof p->label - 1))
		return 0;
	snprintf(p->label, sizeof p->label, "%s", label);
	p->since = t;
	p->done0 = done;
	return 1;
}

void ncf_progress_update(struct ncf_progress *p, const char *label, double done, double total,
			 const char *extra)
{
	if (!p->enabled)
		return;
	double t = ncf_now();
	int fresh = relabel(p, label, done, t);
	if (!due(p, t, fresh))
		return;
	int bytes = p->unit && !strcmp(p->unit, NCF_PROGRESS_BYTES);
	char line[512], a[32], b[32], r[32], eta[32];
	size_t n = (size_t)snprintf(line, sizeof line, "%s  %s", label,
				    amount(a, sizeof a, done, bytes));
	if (total > 0)
		n += (size_t)snprintf(line + n, sizeof line - n, "/%s%s (%.0f%%)",
				      amount(b, sizeof b, total, bytes), bytes ? " MB" : "",
				      100.0 * done / total);
	else if (bytes)
		n += (size_t)snprintf(line + n, sizeof line - n, " MB");
	double dt = t - p->since, rate = dt > 0.2 ? (done - p->done0) / dt : 0;
	if (p->unit && rate > 0 && n < sizeof line)
		n += (size_t)snprintf(line + n, sizeof line - n, "  %s %s/s",
				      amount(r, sizeof r, rate, bytes), bytes ? "MB" : p->unit);
	if (total > 0 && rate > 0 && done < total && n < sizeof line)
		n += (size_t)snprintf(line + n, sizeof line - n, "  ETA %s",
				      ncf_progress_eta(eta, sizeof eta, (total - done) / rate));
	if (extra && n < sizeof line)
		snprintf(line + n, sizeof line - n, "  %s", extra);
	show(p, line, t);
}

void ncf_progress_phase(struct ncf_progress *p, const char *label)
{
	if (!p->enabled)
		return;
	double t = ncf_now();
	if (due(p, t, relabel(p, label, 0, t)))
		show(p, label, t);
}

void ncf_progress_clear(struct ncf_progress *p)
{
	if (p->enabled && p->shown && p->tty) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
	}
	p->shown = 0;
	p->label[0] = 0;
}
