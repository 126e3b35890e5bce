/*
 * spill.h - ncf-prep in bounded memory (ncf-prep(1), -S, --buffer-size).
 *
 * While the ratings are read, rows pile up (rows.h) until the budget's
 * worth: then they are given dense ids (the maps stay in memory and go on
 * growing with distinct users and items), ordered by (user, timestamp,
 * row) and written as a run, zstd-compressed, to an unnamed file in
 * TMPDIR (io.h's ncf_tmp_open: no name ever leads to it, so nothing is
 * left behind however the process ends).  An input that never fills the
 * budget never spills and takes the in-memory path, as before.  After the
 * input the runs are merged (in several passes when there are more than
 * the budget can read at once) and read back in (user, timestamp, row)
 * order by the protocol (protocol.c's prep_protocol_run_spilled), which
 * writes the cache's two large sections, the training items and the
 * evaluation negatives, as byte planes into more such files
 * (prep_planes), read back by the cache writer in the order its filters
 * lay them out.
 *
 * A run is one zstd frame of records, 20 bytes each in host order:
 *   0 u32 user  dense index      8 u32 row  the rating's place among all
 *   4 u32 item  dense index               ratings read, from 0
 *  12 i64 timestamp
 * sorted by (user, timestamp, row); runs lie one after another in their
 * file.
 */
#ifndef NCF_SPILL_H
#define NCF_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "rows.h"

/* The memory a rating costs in the rows and in ordering them (the
 * in-memory protocol's row arrays: 16 read, 4 grouped, 4 as a training
 * item): the budget holds budget / PREP_SPILL_ROW_BYTES rows. */
#define PREP_SPILL_ROW_BYTES 24

struct prep_spill_rec {
	uint32_t user, item, row;
	int64_t ts;
};

struct prep_spill;

/*
 * Set rows up to spill beyond budget bytes: at most budget /
 * PREP_SPILL_ROW_BYTES rows (4096 at least) are held, and a push past
 * them writes them as a run (rows->failed set, after a report, when that
 * fails).  rows must be empty.
 */
struct prep_spill *prep_spill_attach(struct prep_rows *rows, uint64_t budget);
/* Did the input overflow the budget (a run was written)? */
int prep_spill_used(const struct prep_spill *sp);
/*
 * After the whole input, when it spilled: the last rows as a run, the id
 * maps into rows (n_users, n_items, user_ids, item_ids; its row arrays
 * freed), and the runs merged until the budget can read them all at once.
 * Returns 0 or -1 (reported).
 */
int prep_spill_finish(struct prep_spill *sp, struct prep_rows *rows);
/* Ratings read into runs. */
uint64_t prep_spill_rows(const struct prep_spill *sp);
/* The budget, bytes. */
uint64_t prep_spill_budget(const struct prep_spill *sp);
void prep_spill_free(struct prep_spill *sp);

/* The runs read back merged, records in (user, timestamp, row) order. */
struct prep_merge;
/* Returns NULL after reporting. */
struct prep_merge *prep_merge_open(struct prep_spill *sp);
/* The next record into *rec: 1, or 0 after the last, -1 on an error
 * (reported). */
int prep_merge_next(struct prep_merge *m, struct prep_spill_rec *rec);
void prep_merge_close(struct prep_merge *m);

/*
 * An array of u32 written as the byte planes of a shuffled section
 * (container.h): byte 0 of every element, then byte 1, ..., each plane a
 * zstd stream in its own unnamed file; with delta, each element less the
 * one before it (the first less 0), as the section's delta filter makes.
 */
struct prep_planes;
struct prep_planes *prep_planes_open(int delta);
/* Append n elements.  Returns 0 or -1 (reported). */
int prep_planes_put(struct prep_planes *p, const uint32_t *v, size_t n);
/* An ncf_cache_source's feed (ctx: the planes): every plane in order to
 * the section stream.  Returns 0 or -1 (reported). */
struct ncf_cw_stream;
int prep_planes_feed(void *ctx, struct ncf_cw_stream *s);
void prep_planes_free(struct prep_planes *p);

#endif
