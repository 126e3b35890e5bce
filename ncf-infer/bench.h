/*
 * bench.h - ncf-infer --bench (bench.c): NVIDIA's inference benchmark.
 */
#ifndef NCF_INFER_BENCH_H
#define NCF_INFER_BENCH_H

#include <stdint.h>

#include "backend.h"

/*
 * For each of the nsizes batch sizes: warmup untimed and iterations timed
 * passes over pairs drawn from seed, measured twice: with the pairs kept on
 * the device (NVIDIA's inference.py) and from host memory to host memory.
 * Prints the table (or with json one JSON object) on stdout.  Returns 0, or
 * -1 after reporting a failure.
 */
int infer_bench(struct ncf_backend *be, const int64_t *sizes, int nsizes, int warmup,
		    int iterations, int json, uint64_t seed);

#endif
