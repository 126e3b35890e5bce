/* clock.c - see clock.h. */
#include <sys/resource.h>
#include <time.h>

#include "clock.h"

double ncf_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

uint64_t ncf_peak_rss(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (uint64_t)ru.ru_maxrss * 1024u;
}
