/* usage.c - see usage.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "err.h"
#include "io.h"
#include "usage.h"

const char *ncf_synopsis = "";

void ncf_usage_exit(void)
{
	fprintf(stderr, "usage: %s\nTry '%s --help' for more information.\n", ncf_synopsis,
		ncf_progname());
	exit(NCF_EXIT_USAGE);
}

void ncf_usage_error(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ncf_error("%s", buf);
	ncf_usage_exit();
}

void ncf_cli_common(int c, char **argv, void (*usage)(void), int *version)
{
	switch (c) {
	case 'q':
		ncf_verbosity = ncf_verbosity > 0 ? ncf_verbosity - 1 : 0;
		return;
	case 'v':
		ncf_verbosity++;
		return;
	case 'V':
		*version = 1;
		return;
	case 'h':
		usage();
		exit(ncf_close_stdout() ? NCF_EXIT_FAIL : 0);
	case ':':
		ncf_usage_error("option '%s' needs a value", argv[optind - 1]);
	default:
		ncf_usage_error("unknown option '%s'", argv[optind - 1]);
	}
}

int64_t ncf_opt_int(const char *opt, const char *arg, int64_t min, int64_t max)
{
	int64_t v;
	if (ncf_opt_parse_int(opt, arg, min, max, &v) != 0)
		ncf_usage_exit();
	return v;
}

uint64_t ncf_opt_u64(const char *opt, const char *arg)
{
	uint64_t v;
	if (ncf_opt_parse_u64(opt, arg, &v) != 0)
		ncf_usage_exit();
	return v;
}

double ncf_opt_real(const char *opt, const char *arg, double lo, int lo_open, double hi,
		    int hi_open)
{
	double v;
	if (ncf_opt_parse_real(opt, arg, lo, lo_open, hi, hi_open, &v) != 0)
		ncf_usage_exit();
	return v;
}

int ncf_opt_int_list(const char *opt, const char *arg, int64_t *out, int max, int64_t min,
		     int64_t max_v)
{
	int n;
	if (ncf_opt_parse_int_list(opt, arg, out, max, min, max_v, &n) != 0)
		ncf_usage_exit();
	return n;
}

int ncf_backend_option(int c, const char *arg, struct ncf_backend_opts *o)
{
	int r = ncf_backend_opt_parse(c, arg, o);
	if (r < 0)
		ncf_usage_exit();
	return r;
}

void ncf_backend_opts_finish(struct ncf_backend_opts *o)
{
	if (ncf_backend_opts_check(o) != 0)
		ncf_usage_exit();
}

void ncf_exit_hung(void)
{
	_exit(NCF_EXIT_FAIL);
}
