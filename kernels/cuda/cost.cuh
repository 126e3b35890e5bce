/*
 * cost.cuh - the cost recorder of the cuda backend: every launcher
 * (<op>_cuda), every GEMM, memset, copy and sort of the training step says
 * what it moves and computes (name, bytes read + written, FLOPs) to the
 * recorder of the calling host thread when one is active, right before it
 * launches.  With no recorder (every normal run) a note is one branch.
 *
 * Two modes:
 *  - live: the work runs as usual and is also recorded (the emulation test
 *    runs a step this way and checks that the notes match what emu.h saw
 *    launched: each launch noted once, none left out);
 *  - dry: nothing is launched, allocated or copied: device allocations get
 *    fake addresses that are never dereferenced, and a launcher whose note
 *    returns 1 returns 0 at once.  ncf_cuda_step_cost (cost.cu) runs the
 *    real step code this way, so `bench_gpu --cost` counts what the code
 *    launches, on a machine without a GPU, in an nvcc build as under
 *    emulation.
 *
 * The bytes of a note are a model, not a measurement: every array a kernel
 * reads or writes counted once per element touched, caches ignored, except
 * where a kernel reads a table row per batch row with the rows sorted by
 * that table's key (consecutive rows read the same table row): those count
 * each distinct table row once, at most min(rows, table rows) of them.
 * cuBLAS GEMMs count A, B and C once each (beta = 0) and 2 m n k FLOPs; a
 * sort counts CUB's onesweep radix sort from its dispatch code (see
 * sort.cu).
 *
 * The same notes time a step's launches (NCF_CUDA_PROFILE=1, struct
 * profile below): a live recorder that also records a CUDA event on the
 * step's stream at each note, so that the time between two notes is the
 * launch's time on the device (a step issues its launches on one stream,
 * one after the other).
 */
#ifndef NCF_CUDA_COST_CUH
#define NCF_CUDA_COST_CUH

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.cuh"

struct ncf_cuda_cost;	 /* cuda.h */
struct ncf_cuda_machine; /* cuda.h */

namespace NCF_CUDA_NS {

/* What a note is: our kernel (one NCF_LAUNCH), a cuBLAS GEMM, a memset, a
 * copy, or a piece of the sort (the iota and CUB's launches; under
 * emulation the sort's CPU twin launches nothing, so the emulation test
 * leaves these out of its count). */
enum cost_kind { COST_KERNEL, COST_GEMM, COST_MEMSET, COST_COPY, COST_SORT, COST_KINDS };

enum { COST_MAX_ITEMS = 512 };

/*
 * A kernel's launch facts, declared once beside it and read by both its
 * __launch_bounds__ (NCF_BOUNDS) and its cost note (cost_shape_for):
 * threads per block, and the blocks an SM must hold at once (the compiler
 * keeps registers to 65536 / (threads min_blocks) a thread).
 */
struct launch_facts {
	unsigned threads, min_blocks;
};
#define NCF_BOUNDS(f) __launch_bounds__((f).threads, (f).min_blocks)

/*
 * How a kernel keeps the memory system busy: what the model's latency
 * bound (Little's law) needs, noted by the kernel's launcher
 * (NCF_COST_SHAPED).  resident is the kernel's minimum of blocks per SM
 * (its launch_facts: the compiler holds registers to it; shared memory can
 * only lower it, and the launcher takes that into account); inflight the
 * bytes one thread has loading at once in its main loop (loads issued
 * before the first of them is used, cp.async stages); chain the dependent
 * round trips to memory of its longest thread, one after another (a loop
 * whose next load waits for the last one: a serial tail).  GEMMs and the
 * sort's launches note none: library kernels are taken to be pipelined.
 */
struct cost_shape {
	double blocks, threads; /* the grid */
	double resident;	/* blocks an SM runs at once */
	double inflight;	/* bytes a thread has in flight */
	double chain;		/* dependent round trips of the longest thread (0: one) */
	int mma;		/* its FLOPs run on mma.sync tiles (else plain arithmetic) */
	double reread;		/* bytes it loads again from L2 beyond its DRAM bytes (tiles
				 * every block reads whole): they need bytes in flight too */
	double issue;		/* warp instructions its matrix loops issue (the SASS's
				 * instructions per mma times its mma instructions; 0: none) */
};

/* The waves a grid of blocks runs in on the model's machine, resident
 * blocks an SM at once (cost.cu). */
double cost_waves(double blocks, double resident);

/* The model's machine (struct ncf_cuda_machine, cuda.h; cost.cu says what
 * is read, measured and assumed), found on first use: the device this
 * process uses, else the reference.  cost_machine_init finds it at a
 * moment of the caller's choosing (it may time a copy on the device: not
 * inside a capture); returns 0, or -1 when it failed (reported once; the
 * reference stands in). */
int cost_machine_init(void);
const struct ncf_cuda_machine *cost_machine(void);

/*
 * The longest key of a batch, as a share of its rows, for the chains of the
 * per-key sums (an assumption of the model, from MovieLens-20M: the
 * most-rated item has 67,310 positives, so with 4 uniform negatives per
 * positive over 26,744 items it holds (67,310 + 4 x 19,861,770 / 26,744) /
 * (5 x 19,861,770) = 7.1e-4 of the samples, 742 rows of a batch of 2^20;
 * the most active user, 9,254 positives: 4.7e-4, 489 rows).
 */
#define COST_LONGEST_ITEM 7.1e-4
#define COST_LONGEST_USER 4.7e-4

/* The shape of a launch of `blocks` blocks of a kernel of facts f, of
 * which an SM runs `resident` at once (f.min_blocks unless its shared
 * memory allows fewer): inflight and chain as above, no mma, issue or
 * reread (set them after where they apply). */
static inline struct cost_shape cost_shape_for(const launch_facts &f, double blocks,
					       double resident, double inflight, double chain)
{
	struct cost_shape c = {blocks, (double)f.threads, resident, inflight, chain, 0, 0, 0};
	return c;
}
static inline struct cost_shape cost_shape_for(const launch_facts &f, double blocks,
					       double inflight, double chain)
{
	return cost_shape_for(f, blocks, f.min_blocks, inflight, chain);
}

struct cost_item {
	const char *name; /* a static string: the op */
	const char *call; /* the library call it is a launch of, whose launches the profile
			   * times as one (CUB's sort: its launches are issued inside one
			   * call, so their events cannot part them), or NULL */
	int kind;
	double bytes, flops;
	int shaped;	  /* shape was noted */
	struct cost_shape shape;
};

struct cost_rec {
	int dry;		/* 1: record only, launch nothing */
	int prec;		/* the step's precision (enum ncf_precision), for GEMMs' FLOP rate */
	cudaEvent_t *events;	/* profiling: an event recorded on `stream` at each note, or NULL */
	cudaStream_t stream;
	unsigned n, dropped;	/* items kept; notes past COST_MAX_ITEMS (counted, not kept) */
	unsigned count[COST_KINDS];
	double bytes, flops;
	uintptr_t next_fake;	/* dry allocations: the next fake device address */
	struct cost_item item[COST_MAX_ITEMS];
};

/* The recorder of this host thread, NULL when none (cost.cu). */
extern thread_local struct cost_rec *cost_active;

/* Record one note (shape NULL: none).  Returns 1 in a dry run (the caller
 * must then do nothing and return success), else 0.  cost_note_in: a
 * launch of the library call `call` (struct cost_item). */
int cost_note(int kind, const char *name, double bytes, double flops,
	      const struct cost_shape *shape);
int cost_note_in(const char *call, int kind, const char *name, double bytes, double flops);

/*
 * The model's time of one launch on the model's machine (cost_machine:
 * the device's figures, every assumption in one place in cost.cu; the
 * export adds the named machines, H100 and H200, from their reference
 * figures): the largest of bytes / bandwidth, FLOPs / the matrix rate of
 * prec (mma.sync kernels: their rate), bytes / (the bytes in flight on the
 * whole GPU / the latency of a round trip), chain round trips, and the
 * warp instructions of its matrix loops / the SMs' issue rate (four a
 * clock an SM), plus the gap a launch costs.  *bound names the term that
 * binds ("bytes", "flops", "latency", "chain", "issue"; the gap alone:
 * "launch").
 */
double cost_predict(const struct cost_item *it, int prec, const char **bound);
/* The model's figures, for printing (key<TAB>value lines). */
void cost_model_describe(FILE *out);

/* 1 while a dry run is recording on this thread. */
static inline int cost_dry(void)
{
	return cost_active && cost_active->dry;
}

/* out = what recorder r holds (cuda.h's form). */
void cost_export(const struct cost_rec *r, struct ncf_cuda_cost *out);

/*
 * NCF_CUDA_PROFILE: per-launch times of training steps, kept per launch of
 * a step (launch k of every step is the same op on a given path) and
 * printed as a table when the backend closes.  Between profile_begin and
 * profile_end every note of this thread records an event on the step's
 * stream first; profile_collect, after the step's synchronisation, adds the
 * times between them.  The launches of one library call (cost_item's call:
 * CUB's sort) are one row, timed from the event before its first launch to
 * the one after its last, with their bytes and the model's times summed.
 * Steps whose launches differ from the first profiled step's are counted,
 * not added.
 */
struct profile;
/* A profile with its events.  NULL after reporting a failure. */
struct profile *profile_open(void);
void profile_close(struct profile *p);
/* Time the launches issued on stream s from now to profile_end, a step in
 * precision prec (enum ncf_precision). */
void profile_begin(struct profile *p, cudaStream_t s, int prec);
void profile_end(struct profile *p);
/* After the synchronisation that ends the step: add its times.  Returns 0
 * or -1 (reported). */
int profile_collect(struct profile *p);
/* The table on out: per launch the mean time in microseconds, the cost
 * model's time and what binds it, bytes and FLOPs, the achieved GB/s and
 * TFLOP/s, and their share of the model machine's bandwidth (measured) and
 * of its datasheet matrix peak in the steps' precision.  title names the
 * run. */
void profile_report(const struct profile *p, FILE *out, const char *title);

} /* namespace NCF_CUDA_NS */

/* The note of a launcher, before it launches: 1 (return 0 without
 * launching) in a dry run.  Arguments are evaluated only when a recorder is
 * active.  NCF_COST_SHAPED: a kernel's, with its cost_shape. */
#define NCF_COST(kind, name, bytes, flops)                                                 \
	(NCF_CUDA_NS::cost_active &&                                                       \
	 NCF_CUDA_NS::cost_note((kind), (name), (bytes), (flops), NULL))
#define NCF_COST_SHAPED(name, bytes, flops, shape)                                          \
	(NCF_CUDA_NS::cost_active &&                                                        \
	 NCF_CUDA_NS::cost_note(NCF_CUDA_NS::COST_KERNEL, (name), (bytes), (flops), &(shape)))

#endif
