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
	p->enabled = ncf_verbosity >= 2 && (force || isatty(STDERR_FILENO));
	p->last = 0;
	p->shown = 0;
}

void ncf_progress_update(struct ncf_progress *p, const char *label, double done, double total,
			 const char *extra)
{
	if (!p->enabled)
		return;
	double t = ncf_now();
	if (p->shown && t - p->last < 0.16)
		return;
	p->last = t;
	p->shown = 1;
	if (total > 0)
		fprintf(stderr, "\r\033[K%s  %.0f/%.0f (%.0f%%)%s%s", label, done, total,
			100.0 * done / total, extra ? "  " : "", extra ? extra : "");
	else
		fprintf(stderr, "\r\033[K%s  %.0f%s%s", label, done, extra ? "  " : "",
			extra ? extra : "");
	fflush(stderr);
}

void ncf_progress_clear(struct ncf_progress *p)
{
	if (p->enabled && p->shown) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
	}
	p->shown = 0;
}
