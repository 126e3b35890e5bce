/*
 * hash.h - keyed hashing of what an input chooses (ids, names), so that no
 * input can aim many keys at one slot of a hash table.
 *
 * The hash is SipHash-1-3 (Aumasson and Bernstein; 1 compression round, 3
 * final rounds, as Python and Rust hash their tables), a pseudo-random
 * function of a 128-bit key: without the key, which inputs collide cannot
 * be told, so a table's expected cost is the same for any input.  The key
 * is drawn once per process from the kernel's random source; nothing that
 * a tool writes may depend on it (a table's slots never order its
 * output), so runs stay reproducible.
 */
#ifndef NCF_HASH_H
#define NCF_HASH_H

#include <stddef.h>
#include <stdint.h>

struct ncf_hash_key {
	uint64_t k0, k1;
};

/* The process's key: random, drawn at the first call (thread-safe). */
struct ncf_hash_key ncf_hash_key(void);
/* Fix the process's key from here on (tests and fuzzers, which need
 * collisions they can reproduce); maps made before keep theirs. */
void ncf_hash_key_pin(struct ncf_hash_key key);

/* SipHash-1-3 of n bytes at p under key. */
uint64_t ncf_siphash(struct ncf_hash_key key, const void *p, size_t n);
/* The same of a 32-bit value's 4 little-endian bytes, without the loop
 * (a numeric id): ncf_siphash_u32(k, x) == ncf_siphash(k, le32(x), 4). */
uint64_t ncf_siphash_u32(struct ncf_hash_key key, uint32_t x);
/* SipHash-c-d, for the published test vectors of SipHash-2-4 (tests). */
uint64_t ncf_siphash_rounds(struct ncf_hash_key key, const void *p, size_t n, int c, int d);

#endif
