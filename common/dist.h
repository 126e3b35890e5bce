/*
 * dist.h - many processes without ifdef sprawl (DESIGN.md section 7).
 *
 * struct ncf_dist exists in every build.  Without MPI, or run without
 * mpirun, it is rank 0 of 1 and every collective does nothing.  With MPI
 * it wraps MPI_COMM_WORLD: rank, size and the local rank (the rank within
 * the node, which picks the GPU).  Only rank 0 prints and writes files.
 */
#ifndef NCF_DIST_H
#define NCF_DIST_H

#include <stddef.h>
#include <stdint.h>

struct ncf_dist {
	int rank;	/* 0..size-1 */
	int size;	/* processes in the job */
	int local_rank; /* rank within this node */
	int local_size; /* processes on this node */
	int mpi;	/* MPI was initialised by us */
	double allreduce_seconds; /* time spent in all-reduces so far */
};

/*
 * Start: MPI_Init when built with MPI and started by a launcher (mpirun,
 * srun: seen in the environment); without one it is a job of one and MPI
 * is not initialised.  Rank, size and local rank (MPI_Comm_split_type
 * SHARED) come from MPI under every launcher.  A build without MPI started
 * as one of several processes, or srun of several tasks without PMIx
 * (--mpi=none), is refused with a message: returns -1.  Returns 0.
 */
int ncf_dist_init(struct ncf_dist *d, int *argc, char ***argv);
/*
 * With several ranks a watchdog thread watches every collective below:
 * one blocked for NCF_DIST_TIMEOUT seconds (environment; default 300, 0:
 * never) means a rank died, hung or lost its network: it says so, removes
 * temporary files and calls fn, which must end the process (the tools
 * give ncf_exit_hung, status 1, cli/usage.h), so that no job waits for
 * ever; without fn it only says so.  Set fn before ncf_dist_init.  A
 * collective still blocked shortly after a signal is reported too (a
 * launcher ending the job after another rank failed).
 */
void ncf_dist_on_hang(void (*fn)(void));
/* Tell the watchdog about a signal: async-signal-safe, for the tool's handler. */
void ncf_dist_note_signal(int sig);
/* Finish (MPI_Finalize). */
void ncf_dist_finish(struct ncf_dist *d);
/* The job fails with status code: with several ranks MPI_Abort ends every
 * rank (it does not return); alone this returns code, for main to return. */
int ncf_dist_fail(struct ncf_dist *d, int code);
/* Sum n floats (doubles) in place across ranks.  Returns 0 or -1. */
int ncf_dist_sum_f32(struct ncf_dist *d, float *x, size_t n);
int ncf_dist_sum_f64(struct ncf_dist *d, double *x, size_t n);
/* Minimum / maximum of an int across ranks (agreement on failure). */
int ncf_dist_max_int(struct ncf_dist *d, int x);
/* Gather u32 arrays of counts[r] elements from each rank into out on
 * every rank, rank order.  Returns 0 or -1. */
int ncf_dist_allgather_u32(struct ncf_dist *d, const uint32_t *x, const int *counts,
			   uint32_t *out);
/* Broadcast n bytes from rank 0. */
int ncf_dist_bcast(struct ncf_dist *d, void *x, size_t n);
/* Wait for every rank. */
void ncf_dist_barrier(struct ncf_dist *d);
/* The part [*lo, *hi) of [0, n) that rank r of size takes. */
static inline void ncf_dist_slice(uint64_t n, int r, int size, uint64_t *lo, uint64_t *hi)
{
	*lo = n * (uint64_t)r / (uint64_t)size;
	*hi = n * (uint64_t)(r + 1) / (uint64_t)size;
}
/* The MPI library in words, or "none". */
const char *ncf_dist_library(void);

#endif
