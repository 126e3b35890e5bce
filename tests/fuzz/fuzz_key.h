/*
 * fuzz_key.h - the hash key the fuzz harnesses pin (hash.h), so that ids
 * chosen to collide under it (tests/tools/crafted_ids fuzz-dict) collide in
 * every run and replay.
 */
#ifndef NCF_FUZZ_KEY_H
#define NCF_FUZZ_KEY_H

#include "hash.h"

#define FUZZ_HASH_KEY ((struct ncf_hash_key){0x6e63662d66757a7aull, 0x636f6c6c69646573ull})

#endif
