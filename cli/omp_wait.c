/* omp_wait.c - see omp_wait.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "omp_wait.h"

/* Set beside the default in the environment of the program run again:
 * the policy is ncf's, and it must not be run a third time. */
#define MARK "NCF_OMP_WAIT_DEFAULT"

static const char *why_not; /* why the default could not be set, or NULL */

void ncf_omp_wait_init(char **argv)
{
	if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv(MARK))
		return;
	char name[64];
	const char *eq = strchr(NCF_OMP_WAIT_DEFAULT, '=');
	snprintf(name, sizeof name, "%.*s", (int)(eq - NCF_OMP_WAIT_DEFAULT), NCF_OMP_WAIT_DEFAULT);
	if (setenv(name, eq + 1, 1) != 0 || setenv(MARK, "1", 1) != 0) {
		why_not = strerror(errno);
		return;
	}
	execv("/proc/self/exe", argv);
	why_not = strerror(errno); /* no /proc: libgomp's default stays */
	unsetenv(name);
}

const char *ncf_omp_wait_note(void)
{
	static char buf[256];
	const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
	if (!policy && !spin)
		snprintf(buf, sizeof buf, "libgomp's default (about 300,000 rounds of spinning)%s%s",
			 why_not ? "; ncf's could not be set: " : "", why_not ? why_not : "");
	else if (getenv(MARK))
		snprintf(buf, sizeof buf,
			 "%s (ncf's default; OMP_WAIT_POLICY or GOMP_SPINCOUNT overrides it)",
			 NCF_OMP_WAIT_DEFAULT);
	else
		snprintf(buf, sizeof buf, "%s%s%s%s%s (from the environment)",
			 policy ? "OMP_WAIT_POLICY=" : "", policy ? policy : "",
			 policy && spin ? ", " : "", spin ? "GOMP_SPINCOUNT=" : "", spin ? spin : "");
	return buf;
}
