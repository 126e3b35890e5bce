/*
 * clock.h - time and memory of this process: a leaf that any file may
 * include (it includes nothing of ncf's), so that the clock does not tie
 * the command-line helpers (cli.c) and the ranks (dist.c) to each other.
 * (zstd programs/timefn.c.)
 */
#ifndef NCF_CLOCK_H
#define NCF_CLOCK_H

#include <stdint.h>

/* Monotonic seconds (CLOCK_MONOTONIC); only differences mean anything. */
double ncf_now(void);
/* Peak resident memory of this process in bytes (0 when unknown). */
uint64_t ncf_peak_rss(void);

#endif
