/*
 * synth.h - synthetic MovieLens-shaped data (the model is described at the
 * top of synth.c).
 */
#ifndef NCF_SYNTH_H
#define NCF_SYNTH_H

#include <stdint.h>
#include <stdio.h>

#include "cache.h"
#include "rows.h"

struct prep_synth {
	char spec[32];		/* "ml-20mx4" */
	uint32_t users, items;	/* U, I of the generator */
	uint64_t ratings;	/* the shape's rating count (the target mean) */
	uint64_t seed;
	uint32_t min_per_user, max_per_user;
	double mean_excess;	/* mean ratings per user above the minimum */
	uint32_t *cluster;	/* (I) cluster of each item */
	double *weight;		/* (I) popularity */
	uint32_t *cl_start;	/* (K+1) */
	uint32_t *cl_items;	/* (I) items grouped by cluster */
	double *cl_cum;		/* (I) cumulative weights within a cluster */
	double *cl_total;	/* (K) */
};

/* Set up the generator for "SHAPE[xSCALE]".  Returns 0, -1 for an unknown
 * shape or scale. */
int prep_synth_init(struct prep_synth *s, const char *spec, uint64_t seed);
void prep_synth_free(struct prep_synth *s);
/* The shape names, for messages. */
const char *prep_synth_shapes(void);
/* Append every rating (original ids, file order) to rows: in blocks of
 * users that fit before the rows spill when they have a budget (spill.h),
 * stopping early when a spill fails (rows->failed). */
void prep_synth_rows(const struct prep_synth *s, struct prep_rows *rows);
/* Write the ratings as ml-20m CSV.  Returns 0 or -1 (write error). */
int prep_synth_write_csv(const struct prep_synth *s, FILE *fp);
/* The planted score of generator user u, generator item i. */
double prep_synth_score(const struct prep_synth *s, uint32_t u, uint32_t i);
/* Ratings of generator user u. */
uint32_t prep_synth_count(const struct prep_synth *s, uint32_t u);
/* Timestamp of user u's first rating. */
uint64_t prep_synth_user_time(const struct prep_synth *s, uint32_t u);
/* Generate user u's ratings sorted by item: items, ts, rating (half
 * stars 1..10), each with room for max_per_user; stamp is (I) scratch,
 * zero or stamped by other users.  Returns the count. */
uint32_t prep_synth_user(const struct prep_synth *s, uint32_t u, uint32_t *items, int64_t *ts,
			uint8_t *rating, uint32_t *stamp);
/* Original movie id of generator item i, and back (-1: not one). */
uint32_t prep_synth_item_id(uint32_t i);
int prep_synth_item_index(uint32_t id, uint32_t *i);
/* HR@topk of ranking each user's evaluation candidates of c by the
 * planted scores; NaN when c was not made by this generator. */
double prep_synth_oracle(const struct prep_synth *s, const struct ncf_cache *c, uint32_t topk);
/* The same a batch of users at a time, for a cache whose arrays are
 * never all in memory (the spilled protocol's hook): begin with c's
 * sizes and ids set, then users first .. first + n with their test items
 * (n) and negatives (n, N), every user once, then end (frees q). */
struct prep_synth_oracle;
struct prep_synth_oracle *prep_synth_oracle_begin(const struct prep_synth *s,
						const struct ncf_cache *c);
void prep_synth_oracle_users(struct prep_synth_oracle *q, const struct ncf_cache *c, uint32_t first,
			    uint32_t n, const uint32_t *test, const uint32_t *neg);
double prep_synth_oracle_end(struct prep_synth_oracle *q, const struct ncf_cache *c, uint32_t topk);

#endif
