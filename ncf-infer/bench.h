/*
 * bench.h - ncf-infer --bench (bench.c): NVIDIA's inference benchmark.
 */
#ifndef NCF_INFER_BENCH_H
#define NCF_INFER_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define INFER_BENCH_MAX_SIZES 64

/* What to measure. */
struct infer_bench_opts {
	int64_t sizes[INFER_BENCH_MAX_SIZES]; /* batch sizes, in order */
	int nsizes;
	int warmup;	/* untimed passes per batch size; < 0: NVIDIA's 10, or
			 * fewer where they would take more than a second */
	int iterations; /* timed passes per batch size; 0: NVIDIA's 190, or
			 * fewer (at least 5) where they would take more than
			 * 3 s, so that the default ends well within a
			 * minute on a CPU */
	int json;	/* one JSON object instead of the table */
	uint64_t seed;	/* of the pairs (and of a random model) */
};

/* NVIDIA's batch sizes from 1024 to 2^20, the default passes, seed 1. */
void infer_bench_defaults(struct infer_bench_opts *b);

/* The passes per batch size, for the line that says what is measured:
 * "10 warm-up and 190 timed passes per batch size (at most 1 s and 3 s)". */
const char *infer_bench_describe(const struct ncf_backend *be, const struct infer_bench_opts *b,
				 char *buf, size_t len);

/*
 * For each batch size: the warm-up passes, then the timed ones over pairs
 * drawn from the seed, with the pairs kept where the backend computes
 * (NVIDIA's inference.py); on a GPU also from host memory to host memory
 * (on a CPU that is the same work, measured once).  Prints the table (or
 * one JSON object) on stdout, a row as each batch size ends (with --json a
 * line on stderr).  Returns 0, or -1 after reporting a failure.
 */
int infer_bench(struct ncf_backend *be, const struct infer_bench_opts *b);

#endif
