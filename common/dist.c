/* dist.c - see dist.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef NCF_HAVE_MPI
#include <mpi.h>
#endif

#include "clock.h"
#include "dist.h"
#include "err.h"

#ifdef NCF_HAVE_MPI
/* Report an MPI failure with MPI's own words; evaluates call once. */
#define NCF_MPI_CHECK(call)                                                                   \
	({                                                                                    \
		int rc__ = (call);                                                            \
		if (rc__ != MPI_SUCCESS) {                                                    \
			char msg__[MPI_MAX_ERROR_STRING];                                     \
			int len__ = 0;                                                        \
			MPI_Error_string(rc__, msg__, &len__);                                \
			ncf_error("%s failed (%s:%d): %s", #call, __FILE__, __LINE__, msg__); \
		}                                                                             \
		rc__;                                                                         \
	})
#endif

/* Launchers announce the job in the environment: 0 when none did, else
 * the job size they give (1 for a launcher that gives no size). */
static int launcher_size(void)
{
	static const char *sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
				      "MPI_LOCALNRANKS", NULL};
	for (int i = 0; sizes[i]; i++) {
		const char *v = getenv(sizes[i]);
		if (v && atoi(v) >= 1)
			return atoi(v);
	}
	if (getenv("PMIX_RANK") || getenv("PMI_RANK"))
		return 1;
	const char *slurm = getenv("SLURM_NTASKS");
	if (slurm && getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID"))
		return atoi(slurm) >= 1 ? atoi(slurm) : 1;
	return 0;
}

int ncf_dist_init(struct ncf_dist *d, int *argc, char ***argv)
{
	memset(d, 0, sizeof *d);
	d->size = 1;
	d->local_size = 1;
#ifdef NCF_HAVE_MPI
	/* Without a launcher this is a job of one: skip MPI_Init, which would
	 * start a singleton runtime (Open MPI forks an orted) for nothing. */
	if (launcher_size() == 0)
		return 0;
	int inited = 0;
	MPI_Initialized(&inited);
	if (!inited) {
		int provided;
		if (NCF_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided)))
			return -1;
		if (provided < MPI_THREAD_FUNNELED) /* MPI is called from the main thread only */
			ncf_warn("the MPI library gives thread level %d, below MPI_THREAD_FUNNELED; "
				 "OpenMP threads may not be safe with it",
				 provided);
		d->mpi = 1;
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &d->size);
	MPI_Comm local;
	if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL,
				&local) == MPI_SUCCESS) {
		MPI_Comm_rank(local, &d->local_rank);
		MPI_Comm_size(local, &d->local_size);
		MPI_Comm_free(&local);
	}
	if (d->rank != 0 && ncf_verbosity > 1)
		ncf_verbosity = 1; /* only rank 0 prints; the others warn and fail */
	return 0;
#else
	(void)argc;
	(void)argv;
	int n = launcher_size();
	if (n > 1) {
		ncf_error("this build has no MPI support, but it was started as one of %d processes "
			  "(mpirun?); rebuild with MPI (apt-get install libopenmpi-dev) or run one "
			  "process",
			  n);
		return -1;
	}
	return 0;
#endif
}

void ncf_dist_finish(struct ncf_dist *d)
{
#ifdef NCF_HAVE_MPI
	if (d->mpi) {
		MPI_Finalize();
		d->mpi = 0;
	}
#else
	(void)d;
#endif
}

void ncf_dist_abort(struct ncf_dist *d, int code)
{
#ifdef NCF_HAVE_MPI
	if (d->size > 1) {
		fflush(stdout);
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, code);
	}
#else
	(void)d;
#endif
	exit(code);
}

int ncf_dist_sum_f32(struct ncf_dist *d, float *x, size_t n)
{
	if (d->size == 1)
		return 0;
#ifdef NCF_HAVE_MPI
	double t = ncf_now();
	/* MPI counts are int: go in pieces. */
	for (size_t o = 0; o < n;) {
		size_t c = n - o < (1u << 30) ? n - o : (1u << 30);
		if (NCF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x + o, (int)c, MPI_FLOAT, MPI_SUM,
						MPI_COMM_WORLD)))
			return -1;
		o += c;
	}
	d->allreduce_seconds += ncf_now() - t;
#endif
	return 0;
}

int ncf_dist_sum_f64(struct ncf_dist *d, double *x, size_t n)
{
	if (d->size == 1)
		return 0;
#ifdef NCF_HAVE_MPI
	if (NCF_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_DOUBLE, MPI_SUM,
					MPI_COMM_WORLD)))
		return -1;
#endif
	return 0;
}

int ncf_dist_max_int(struct ncf_dist *d, int x)
{
#ifdef NCF_HAVE_MPI
	if (d->size > 1) {
		int y = x;
		if (NCF_MPI_CHECK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD)))
			return x;
		return y;
	}
#else
	(void)d;
#endif
	return x;
}

int ncf_dist_allgather_u32(struct ncf_dist *d, const uint32_t *x, const int *counts,
			   uint32_t *out)
{
	if (d->size == 1) {
		memcpy(out, x, (size_t)counts[0] * sizeof *x);
		return 0;
	}
#ifdef NCF_HAVE_MPI
	int *displs = ncf_xmalloc((size_t)d->size * sizeof *displs);
	int o = 0;
	for (int r = 0; r < d->size; r++) {
		displs[r] = o;
		o += counts[r];
	}
	int rc = NCF_MPI_CHECK(MPI_Allgatherv(x, counts[d->rank], MPI_UINT32_T, out, counts,
					      displs, MPI_UINT32_T, MPI_COMM_WORLD));
	free(displs);
	return rc ? -1 : 0;
#else
	return -1;
#endif
}

int ncf_dist_bcast(struct ncf_dist *d, void *x, size_t n)
{
	if (d->size == 1)
		return 0;
#ifdef NCF_HAVE_MPI
	return NCF_MPI_CHECK(MPI_Bcast(x, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD)) ? -1 : 0;
#else
	return -1;
#endif
}

void ncf_dist_barrier(struct ncf_dist *d)
{
#ifdef NCF_HAVE_MPI
	if (d->size > 1)
		MPI_Barrier(MPI_COMM_WORLD);
#else
	(void)d;
#endif
}

const char *ncf_dist_library(void)
{
#ifdef NCF_HAVE_MPI
	static char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	MPI_Get_library_version(lib, &len);
	char *nl = strchr(lib, '\n');
	if (nl)
		*nl = 0;
	char *comma = strchr(lib, ',');
	if (comma)
		*comma = 0;
	return lib;
#else
	return "none";
#endif
}
