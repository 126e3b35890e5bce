/*
 * protocol.h - the leave-one-out protocol (see protocol.c for the rules).
 */
#ifndef NCF_PROTOCOL_H
#define NCF_PROTOCOL_H

#include "cache.h"
#include "rows.h"

struct prep_protocol_opts {
	uint32_t min_ratings;	 /* 0: keep every user */
	uint32_t eval_negatives; /* per user, NVIDIA: 100 */
	uint64_t seed;		 /* of the evaluation negatives */
};

/*
 * Turn indexed rows (prep_rows_index done) into the arrays and counts of c:
 * sizes, id maps, CSR, test items, evaluation negatives and the protocol
 * counters.  Source fields (format, bytes, crc) are the caller's.
 * Returns 0, or -1 after reporting (nothing left after --min-ratings).
 */
int prep_protocol_run(struct prep_rows *r, const struct prep_protocol_opts *o, struct ncf_cache *c);

/* Draw the (U, N) evaluation negatives of c for seed (step 5). */
void prep_protocol_draw_negatives(struct ncf_cache *c, uint32_t N, uint64_t seed);

#endif
