/* module.c - see module.h. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "module.h"

#ifndef NCF_MODULE_DIR
#define NCF_MODULE_DIR "/usr/local/lib/ncf"
#endif
#define MODULE_NAME "ncf-cuda.so"

typedef const struct ncf_cuda_api *(*entry_fn)(void);

static struct {
	int tried;
	const struct ncf_cuda_api *api;
	char path[PATH_MAX];
	char why[768];
} mod;

int ncf_cuda_driver_present(char *why, size_t len)
{
	static const char *const nodes[] = {"/dev/nvidiactl", "/proc/driver/nvidia/version",
					    "/dev/dxg"};
	for (size_t k = 0; k < sizeof nodes / sizeof *nodes; k++)
		if (access(nodes[k], F_OK) == 0)
			return 1;
	snprintf(why, len, "no NVIDIA driver on this machine (no /dev/nvidiactl)");
	return 0;
}

/* The table behind entry, if its ABI is ours; else NULL and why. */
static const struct ncf_cuda_api *check(entry_fn entry, const char *path)
{
	const struct ncf_cuda_api *api = entry();
	if (api && api->abi == NCF_CUDA_ABI && api->backend_size == sizeof(struct ncf_backend) &&
	    api->table_size == sizeof(struct ncf_backend_i))
		return api;
	if (!api)
		snprintf(mod.why, sizeof mod.why, "%s: the module gave no table", path);
	else
		snprintf(mod.why, sizeof mod.why,
			 "%s is of ncf %s, ABI %u (structs of %u and %u bytes); this program needs "
			 "ABI %u (%zu and %zu): install the module built with it",
			 path, api->version, (unsigned)api->abi, (unsigned)api->backend_size,
			 (unsigned)api->table_size, (unsigned)NCF_CUDA_ABI, sizeof(struct ncf_backend),
			 sizeof(struct ncf_backend_i));
	return NULL;
}

/* Open the module at path.  1 found (mod.api set, or mod.why says why it
 * cannot be used), 0 when there is no file there. */
static int open_at(const char *path)
{
	if (access(path, F_OK) != 0)
		return 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(mod.why, sizeof mod.why, "%s", dlerror());
		return 1;
	}
	entry_fn entry = (entry_fn)dlsym(h, "ncf_cuda_module");
	if (!entry) {
		snprintf(mod.why, sizeof mod.why, "%s: no ncf_cuda_module in it", path);
		dlclose(h);
		return 1;
	}
	mod.api = check(entry, path);
	if (!mod.api) {
		dlclose(h);
		return 1;
	}
	char real[PATH_MAX];
	snprintf(mod.path, sizeof mod.path, "%s", realpath(path, real) ? real : path);
	return 1;
}

/* DIR/../lib/ncf/MODULE_NAME for the directory of this program. */
static int beside_program(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = 0;
	int k = snprintf(out, len, "%s/../lib/ncf/%s", exe, MODULE_NAME);
	return k > 0 && (size_t)k < len ? 0 : -1;
}

static void load(void)
{
	entry_fn linked = (entry_fn)dlsym(RTLD_DEFAULT, "ncf_cuda_module");
	if (linked) {
		mod.api = check(linked, "the module linked into this program");
		snprintf(mod.path, sizeof mod.path, "linked in");
		return;
	}
	const char *env = getenv("NCF_CUDA_MODULE");
	if (env && *env) {
		if (!open_at(env))
			snprintf(mod.why, sizeof mod.why, "NCF_CUDA_MODULE=%s: %s", env, strerror(errno));
		return;
	}
	char here[PATH_MAX];
	if (beside_program(here, sizeof here) == 0 && open_at(here))
		return;
	if (open_at(NCF_MODULE_DIR "/" MODULE_NAME))
		return;
	snprintf(mod.why, sizeof mod.why,
		 "no cuda module (%s) beside this program or in %s: a build without CUDA, or not "
		 "installed",
		 MODULE_NAME, NCF_MODULE_DIR);
}

const struct ncf_cuda_api *ncf_cuda_load(char *why, size_t len)
{
	if (!mod.tried) {
		mod.tried = 1;
		load();
	}
	if (!mod.api && why)
		snprintf(why, len, "%s", mod.why);
	return mod.api;
}

const char *ncf_cuda_module_path(void)
{
	return mod.api ? mod.path : NULL;
}
