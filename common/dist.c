/* dist.c - see dist.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef NCF_HAVE_MPI
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
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
/* The statement form, one call each: on a failure (reported) return -1. */
#define NCF_MPI_TRY(call)                                \
	do {                                             \
		if (NCF_MPI_CHECK(call) != MPI_SUCCESS)  \
			return -1;                       \
	} while (0)
#endif

#ifdef NCF_HAVE_MPI
/*
 * The watchdog (jobs of several ranks only).  A rank that dies is noticed
 * by its launcher, which ends the job; a rank that hangs, a node that
 * stops or a network that goes down is not, and the other ranks would
 * wait in their next collective for ever.  So every collective below is
 * bracketed by watch_begin/watch_end, and a thread looks at it four times
 * a second:
 *   - blocked for NCF_DIST_TIMEOUT seconds (default 300, 0: never): say
 *     which rank waited in which call, remove temporary files and call the
 *     tool's on_hang, which ends the process (the tools: status 1; the
 *     launcher then ends the others; under srun without
 *     --kill-on-bad-exit each waiting rank does the same);
 *   - still blocked 0.25 s after a signal (SIGTERM from a launcher ending
 *     the job after another rank died, before its SIGKILL): say so, once.
 * The thread never calls MPI (MPI_THREAD_FUNNELED); 300 s is well above
 * the legitimate waits (a slow rank reading its cache, rank 0 finishing a
 * checkpoint) and far below "for ever".  What happens outside these calls
 * (NCCL's all-reduce on GPUs, MPI_Init, MPI_Finalize) is not watched.
 */
static struct {
	int on;
	pthread_t thread;
	sem_t wake; /* posted by ncf_dist_note_signal and ncf_dist_finish */
	atomic_int stop;
	atomic_llong since_ns; /* start of the collective in progress, 0: none */
	const char *_Atomic what;
	double timeout;
	int rank, size;
	void (*on_hang)(void); /* the tool's end of a hung job; NULL: report only */
} watch;
static volatile sig_atomic_t watch_signal;

static long long mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void watch_begin(const char *what)
{
	atomic_store(&watch.what, what);
	atomic_store(&watch.since_ns, mono_ns());
}

static void watch_end(void)
{
	atomic_store(&watch.since_ns, 0);
}

static void *watch_main(void *arg)
{
	(void)arg;
	long long sig_ns = 0;		  /* when the signal was first seen */
	long long last = mono_ns(), resumed = 0; /* see below */
	int told = 0;
	while (!atomic_load(&watch.stop)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (sem_timedwait(&watch.wake, &ts) != 0 && errno == EINTR)
			;
		if (atomic_load(&watch.stop))
			break;
		long long now = mono_ns(), since = atomic_load(&watch.since_ns);
		/* A wake-up seconds late means this process itself did not run
		 * (SIGSTOP, a starved machine): its wait counts from now on, or a
		 * rank stopped and continued would blame the others. */
		if (now - last > 2000000000LL)
			resumed = now;
		last = now;
		if (since && since < resumed)
			since = resumed;
		int sig = watch_signal;
		if (sig && !sig_ns)
			sig_ns = now;
		if (!since)
			continue;
		const char *what = atomic_load(&watch.what);
		double waited = (double)(now - since) * 1e-9;
		if (sig && !told && now - (since > sig_ns ? since : sig_ns) >= 250000000LL) {
			ncf_error("rank %d of %d: signal %d (%s) while waiting %.1f s for the other "
				  "ranks in %s; if the launcher is ending the job, another rank has "
				  "failed",
				  watch.rank, watch.size, sig, strsignal(sig), waited, what);
			told = 1;
		}
		if (watch.timeout > 0 && waited >= watch.timeout) {
			ncf_error("rank %d of %d: no answer from the other ranks for %.0f s in %s: a "
				  "rank has died or hung, or the network between them is down; "
				  "stopping (NCF_DIST_TIMEOUT=%g)",
				  watch.rank, watch.size, waited, what, watch.timeout);
			ncf_out_cleanup_all();
			if (watch.on_hang)
				watch.on_hang(); /* does not return */
			watch.timeout = 0; /* said once */
		}
	}
	return NULL;
}

/* Start the watchdog; a failure to start it only warns. */
static void watch_start(struct ncf_dist *d)
{
	watch.timeout = 300;
	const char *t = getenv("NCF_DIST_TIMEOUT");
	if (t && *t) {
		char *end;
		errno = 0;
		double v = strtod(t, &end);
		if (errno == 0 && *end == 0 && v >= 0 && v <= 1e9) /* rejects NaN too */
			watch.timeout = v;
		else if (d->rank == 0)
			ncf_warn("NCF_DIST_TIMEOUT='%s' is not a number of seconds >= 0; using %g",
				 t, watch.timeout);
	}
	watch.rank = d->rank;
	watch.size = d->size;
	if (sem_init(&watch.wake, 0, 0) != 0)
		return;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the other threads */
	int rc = pthread_create(&watch.thread, NULL, watch_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		ncf_warn("cannot start the MPI watchdog thread: %s", strerror(rc));
		sem_destroy(&watch.wake);
		return;
	}
	watch.on = 1;
}

static void watch_stop(void)
{
	if (!watch.on)
		return;
	atomic_store(&watch.stop, 1);
	sem_post(&watch.wake);
	pthread_join(watch.thread, NULL);
	sem_destroy(&watch.wake);
	watch.on = 0;
	atomic_store(&watch.stop, 0);
}

/* A collective call, watched: evaluates call once, reports its failure. */
#define NCF_MPI_WATCHED(name, call)                   \
	({                                            \
		watch_begin(name);                    \
		int w__ = NCF_MPI_CHECK(call);        \
		watch_end();                          \
		w__;                                  \
	})
/* The statement form: on a failure (reported) return -1. */
#define NCF_MPI_TRY_WATCHED(name, call)                          \
	do {                                                     \
		if (NCF_MPI_WATCHED(name, call) != MPI_SUCCESS)  \
			return -1;                               \
	} while (0)
#endif

void ncf_dist_on_hang(void (*fn)(void))
{
#ifdef NCF_HAVE_MPI
	watch.on_hang = fn;
#else
	(void)fn;
#endif
}

void ncf_dist_note_signal(int sig)
{
#ifdef NCF_HAVE_MPI
	watch_signal = sig;
	if (watch.on)
		sem_post(&watch.wake); /* async-signal-safe */
#else
	(void)sig;
#endif
}

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
	/* srun (a job step, not the batch script): PMIx puts no size in the
	 * environment, Slurm does. */
	if (getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID")) {
		const char *n = getenv("SLURM_STEP_NUM_TASKS");
		if (!n)
			n = getenv("SLURM_NTASKS");
		return n && atoi(n) >= 1 ? atoi(n) : 1;
	}
	if (getenv("PMIX_RANK") || getenv("PMI_RANK"))
		return 1;
	return 0;
}

#ifdef NCF_HAVE_MPI
/* Started by srun with no PMI for the MPI library to talk to (srun
 * --mpi=none, or MpiDefault=none in slurm.conf)? */
static int srun_without_pmi(void)
{
	return getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID") && !getenv("PMIX_RANK") &&
	       !getenv("PMI_RANK") && !getenv("PMI_FD") && !getenv("OMPI_COMM_WORLD_SIZE");
}
#endif

int ncf_dist_init(struct ncf_dist *d, int *argc, char ***argv)
{
	memset(d, 0, sizeof *d);
	d->size = 1;
	d->local_size = 1;
#ifdef NCF_HAVE_MPI
	/* Without a launcher this is a job of one: skip MPI_Init, which would
	 * start a singleton runtime (Open MPI forks an orted) for nothing. */
	int n = launcher_size();
	if (n == 0)
		return 0;
	if (srun_without_pmi()) {
		/* MPI_Init would fail (Open MPI: at length), or start n jobs of one */
		if (n == 1)
			return 0;
		ncf_error("started by srun as one of %d tasks, but without PMIx: run srun "
			  "--mpi=pmix (srun --mpi=list shows the plugins; MpiDefault=pmix in "
			  "slurm.conf makes it the default)",
			  n);
		return -1;
	}
	int inited = 0;
	MPI_Initialized(&inited);
	if (!inited) {
		int provided;
		NCF_MPI_TRY(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
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
	/* Every rank says who it is at -v: the launcher's view, through MPI. */
	char host[MPI_MAX_PROCESSOR_NAME] = "?";
	int hlen = 0;
	MPI_Get_processor_name(host, &hlen);
	ncf_debug("rank %d of %d, local rank %d of %d on %s", d->rank, d->size, d->local_rank,
		  d->local_size, host);
	if (d->size > 1 && !watch.on)
		watch_start(d);
	if (d->rank != 0 && ncf_verbosity > 1)
		ncf_verbosity = 1; /* only rank 0 prints; the others warn and fail */
	return 0;
#else
	(void)argc;
	(void)argv;
	int n = launcher_size();
	if (n > 1) {
		ncf_error("this build has no MPI support, but it was started as one of %d processes "
			  "(mpirun, srun?); rebuild with MPI (apt-get install libopenmpi-dev) or run one "
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
		/* Not watched: the ranks done wait there for rank 0 to write
		 * the model, which may take long on a slow file system. */
		watch_stop();
		MPI_Finalize();
		d->mpi = 0;
	}
#else
	(void)d;
#endif
}

int ncf_dist_fail(struct ncf_dist *d, int code)
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
	return code;
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
		NCF_MPI_TRY_WATCHED("MPI_Allreduce (the gradient sum)",
				    MPI_Allreduce(MPI_IN_PLACE, x + o, (int)c, MPI_FLOAT, MPI_SUM,
						  MPI_COMM_WORLD));
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
	NCF_MPI_TRY_WATCHED("MPI_Allreduce (a sum)",
			    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
#endif
	return 0;
}

int ncf_dist_max_int(struct ncf_dist *d, int x)
{
#ifdef NCF_HAVE_MPI
	if (d->size > 1) {
		int y = x;
		if (NCF_MPI_WATCHED("MPI_Allreduce (an agreement)",
				    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD)))
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
	int rc = NCF_MPI_WATCHED("MPI_Allgatherv",
				 MPI_Allgatherv(x, counts[d->rank], MPI_UINT32_T, out, counts,
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
	NCF_MPI_TRY_WATCHED("MPI_Bcast", MPI_Bcast(x, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD));
	return 0;
#else
	return -1;
#endif
}

void ncf_dist_barrier(struct ncf_dist *d)
{
#ifdef NCF_HAVE_MPI
	if (d->size > 1)
		NCF_MPI_WATCHED("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD));
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
