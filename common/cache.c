/*
 * cache.c - reading and writing the prepared data set, ncf-cache(5).
 *
 * A cache is a container file (container.h) with magic "NCFCACHE",
 * version 1 (or 2, below), and these sections in this order (U users, I
 * items, P training positives, N evaluation negatives per user, E
 * explicit training negatives, UB and IB the bytes of the names):
 *
 *   tag       bytes       filters         contents
 *   meta      256         -               fixed fields below
 *   userids   4 U         shuffle 4       u32 original user id per index
 *   itemids   4 I         shuffle 4       u32 original item id per index
 *   offsets   8 (U+1)     shuffle 8       i64 CSR row offsets, [0]=0, [U]=P
 *   trainitm  4 P         delta, shuffle 4  u32 item indices, ascending per row
 *   testitm   4 U         shuffle 4       u32 test positive per user
 *   evalneg   4 U N       shuffle 4       u32 N negatives per user, as drawn
 *   negoffs   8 (U+1)     shuffle 8       version 2, E > 0: i64 CSR of negitems
 *   negitems  4 E         shuffle 4       version 2, E > 0: u32 explicit negatives
 *   usernams  UB          -               version 2, named users: U NUL-ended names
 *   itemnams  IB          -               version 2, named items: I NUL-ended names
 *   end
 *
 * Version 2 is written only for a cache that has names, a given split
 * (split_given: test positives and negatives given, not drawn) or
 * explicit negatives; every other cache is version 1, byte for byte as
 * before, so that a file read today gives the bytes it gave.  A named
 * column's u32 ids are its indices, its names the original ids.
 *
 * meta (all little-endian):
 *   0 u32 users           4 u32 items           8 u64 train_positives
 *  16 u32 eval_negatives 20 u32 min_ratings    24 u64 seed
 *  32 u32 source_format  36 u32 source_crc32c  40 u64 source_bytes
 *  48 u64 ratings_read   56 u64 duplicates_dropped
 *  64 u64 users_dropped  72 u64 ratings_dropped 80 u64 items_dropped
 *  88 u64 test_only_users 96 u64 test_ties     104 f64 oracle_hr@10 (NaN: none)
 * 112 char[32] synthetic shape, NUL padded
 * version 2 (zero in version 1):
 * 144 u32 split_given (0/1)  148 zero  152 u64 train_negatives (E)
 * 160 u64 user_names_bytes (UB)        168 u64 item_names_bytes (IB)
 * 176..255 zero
 *
 * Worked example: the cache of the three-line CSV
 *   userId,movieId,rating,timestamp / 1,10,4.0,100 / 1,20,3.0,200
 * made with --eval-negatives 1 (one user, two items, P = 1) has 459
 * bytes; xxd shows its start as
 *
 *   00000000: 4e43 4643 4143 4845 0100 0000 0000 0000  NCFCACHE........
 *   00000010: 0000 0000 0000 0000 0000 0000 8a74 bdb6  .............t..
 *   00000020: 6d65 7461 0000 0000 0001 0000 0000 0000  meta............
 *   00000030: 3c00 0000 0000 0000 0000 0000 9b9d 20c0  <............. .
 *   00000040: 28b5 2ffd 6400 0075 0100 a001 0000 0002  (./.d..u........
 *   ...
 *   00000070: 019d 98ae d080 0124 9b74 288a 7573 6572  .......$.t(.user
 *   00000080: 6964 7300 0400 0000 0000 0000 1100 0000  ids.............
 *   00000090: 0000 0000 0204 0000 2276 2e6f 28b5 2ffd  ........"v.o(./.
 *
 * that is: the file header (magic, version 1, flags 0, created 0, reserved
 * 0, CRC-32C b6bd748a of bytes 0..27), then the header of section "meta"
 * (256 raw bytes, 0x3c = 60 compressed bytes, no filters, its CRC c0209d9b)
 * and its zstd frame (magic 28 b5 2f fd) up to 0x7b; at 0x7c the header of
 * "userids" (4 raw bytes, 0x11 = 17 compressed, filters 0x402: shuffle of
 * 4-byte elements) and its frame.  The other section headers are at 0xad
 * itemids, 0xe2 offsets, 0x118 trainitm (filters 0x403), 0x149 testitm,
 * 0x17a evalneg, 0x1ab end.  Decompressed: meta starts 01 00 00 00 (users
 * 1), 02 00 00 00 (items 2), 01 00 .. 00 (P 1), 01 00 00 00 (N 1), holds
 * source_format 1 (ml-20m), source_crc32c 2ce25c98, source_bytes 58,
 * ratings_read 2 and oracle_hr@10 NaN (00 00 00 00 00 00 f8 7f); userids
 * {1}, itemids {10, 20}, offsets {0, 1}, trainitm {0}, testitm {1},
 * evalneg {1} (the only item that is not a training positive is the test
 * item itself).  The zstd frames, and with them comp_size and the section
 * CRCs, may differ with another zstd version (these are zstd 1.5.4's at
 * level 3); the layout does not.
 * tests/unit/test_cache.c checks this layout.
 *
 * A reader checks, beyond the container's checksums, before it reads an
 * array: the sizes in meta against each other (U, I >= 1; 1 <= N <=
 * 100000; P <= U (I - 1), as no user's training items repeat or include
 * its test item; I <= P + U, as every item is rated; U N <= 2^36), the
 * counters (ratings_read = P + U + duplicates_dropped + ratings_dropped;
 * users_dropped and items_dropped at most ratings_dropped; test_ties at
 * most U), format 1..7 with a synthetic name exactly for format 5 (6
 * and 7 exactly for a given split, whose P <= U I and I <= P + U + U N +
 * E instead), oracle_hr NaN or in [0, 1], reserved bytes zero.  Then each section
 * against the size meta gives it, and the arrays: ids distinct, offsets
 * non-decreasing from 0 to P, test_only_users the number of empty rows,
 * training items ascending below I, test items below I and not among
 * the user's training items (unless the split was given), negatives
 * below I; in version 2 the explicit negatives' CSR (offsets from 0 to E,
 * never decreasing, items below I) and the names (names.h: valid,
 * distinct, one per id; the numbered ids of a named column its indices).
 * ncf-cache(5) has a worked example of each version.  Any failure is reported
 * as a corrupt cache naming the field, with the hint to re-run ncf-prep.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "container.h"
#include "crc32c.h"
#include "err.h"
#include "io.h"
#include "ncf_hd.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ncf stores arrays in host order and needs a little-endian host"
#endif

#define META_SIZE 256
static const char MAGIC[8] = {'N', 'C', 'F', 'C', 'A', 'C', 'H', 'E'};
static const char HINT[] = " (re-run ncf-prep to rebuild it)";

const char *ncf_format_name(enum ncf_format f)
{
	switch (f) {
	case NCF_FORMAT_ML20M:
		return "ml-20m";
	case NCF_FORMAT_ML1M:
		return "ml-1m";
	case NCF_FORMAT_ML100K:
		return "ml-100k";
	case NCF_FORMAT_CSV:
		return "csv";
	case NCF_FORMAT_SYNTHETIC:
		return "synthetic";
	case NCF_FORMAT_FEATURE_SPEC:
		return "feature-spec";
	case NCF_FORMAT_NCF_PAPER:
		return "ncf-paper";
	default:
		return "unknown";
	}
}

static void meta_pack(const struct ncf_cache *c, unsigned char *m)
{
	memset(m, 0, META_SIZE);
	ncf_put_u32(m + 0, c->users);
	ncf_put_u32(m + 4, c->items);
	ncf_put_u64(m + 8, (uint64_t)c->train_positives);
	ncf_put_u32(m + 16, c->eval_negatives);
	ncf_put_u32(m + 20, c->min_ratings);
	ncf_put_u64(m + 24, c->seed);
	ncf_put_u32(m + 32, c->format);
	ncf_put_u32(m + 36, c->source_crc);
	ncf_put_u64(m + 40, c->source_bytes);
	ncf_put_u64(m + 48, c->ratings_read);
	ncf_put_u64(m + 56, c->duplicates_dropped);
	ncf_put_u64(m + 64, c->users_dropped);
	ncf_put_u64(m + 72, c->ratings_dropped);
	ncf_put_u64(m + 80, c->items_dropped);
	ncf_put_u64(m + 88, c->test_only_users);
	ncf_put_u64(m + 96, c->test_ties);
	ncf_put_f64(m + 104, c->oracle_hr);
	memcpy(m + 112, c->synthetic, 32);
	m[143] = 0;
	ncf_put_u32(m + 144, c->split_given);
	ncf_put_u64(m + 152, c->train_negatives);
	ncf_put_u64(m + 160, c->user_names.n ? c->user_names.bytes : 0);
	ncf_put_u64(m + 168, c->item_names.n ? c->item_names.bytes : 0);
}

static void meta_unpack(struct ncf_cache *c, const unsigned char *m)
{
	c->users = ncf_get_u32(m + 0);
	c->items = ncf_get_u32(m + 4);
	c->train_positives = (int64_t)ncf_get_u64(m + 8);
	c->eval_negatives = ncf_get_u32(m + 16);
	c->min_ratings = ncf_get_u32(m + 20);
	c->seed = ncf_get_u64(m + 24);
	c->format = ncf_get_u32(m + 32);
	c->source_crc = ncf_get_u32(m + 36);
	c->source_bytes = ncf_get_u64(m + 40);
	c->ratings_read = ncf_get_u64(m + 48);
	c->duplicates_dropped = ncf_get_u64(m + 56);
	c->users_dropped = ncf_get_u64(m + 64);
	c->ratings_dropped = ncf_get_u64(m + 72);
	c->items_dropped = ncf_get_u64(m + 80);
	c->test_only_users = ncf_get_u64(m + 88);
	c->test_ties = ncf_get_u64(m + 96);
	c->oracle_hr = ncf_get_f64(m + 104);
	memcpy(c->synthetic, m + 112, 32);
	c->synthetic[31] = 0;
	c->split_given = ncf_get_u32(m + 144);
	c->train_negatives = ncf_get_u64(m + 152);
	/* the names' sizes, until their sections are read */
	c->user_names.bytes = ncf_get_u64(m + 160);
	c->item_names.bytes = ncf_get_u64(m + 168);
}

uint32_t ncf_cache_version(const struct ncf_cache *c)
{
	/* names count when there are some, or (while a cache is read) when
	 * its meta section gives their size */
	int named = c->user_names.n || c->item_names.n || c->user_names.bytes ||
		    c->item_names.bytes;
	return c->split_given || c->train_negatives || named ? NCF_CACHE_VERSION_GIVEN
							     : NCF_CACHE_VERSION;
}

struct ncf_id ncf_cache_user_id(const struct ncf_cache *c, uint32_t u)
{
	return ncf_id_at(c->user_ids, &c->user_names, u);
}

struct ncf_id ncf_cache_item_id(const struct ncf_cache *c, uint32_t i)
{
	return ncf_id_at(c->item_ids, &c->item_names, i);
}

/* One array section: from data, or fed by src when it is given. */
static int write_array(struct ncf_cw *w, const char *tag, const void *data, size_t size,
		       uint32_t filters, const struct ncf_cache_source *src)
{
	if (!src)
		return ncf_cw_section(w, tag, data, size, filters);
	struct ncf_cw_stream s;
	NCF_TRY(ncf_cw_stream_begin(w, &s, tag, size, filters));
	if (src->feed(src->ctx, &s) != 0) {
		ncf_cw_stream_abort(&s);
		return -1;
	}
	return ncf_cw_stream_end(&s);
}

int ncf_cache_write_fp(const struct ncf_cache *c, FILE *fp, const char *display)
{
	return ncf_cache_write_sourced(c, fp, display, NULL, NULL);
}

int ncf_cache_write_sourced(const struct ncf_cache *c, FILE *fp, const char *display,
			    const struct ncf_cache_source *train_items,
			    const struct ncf_cache_source *eval_neg)
{
	struct ncf_cw w = {0};
	unsigned char meta[META_SIZE];
	meta_pack(c, meta);
	size_t U = c->users, I = c->items, P = (size_t)c->train_positives;
	size_t N = c->eval_negatives;
	uint32_t s4 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(4);
	uint32_t s8 = NCF_FILTER_SHUFFLE | NCF_FILTER_SHUFFLE_ELEM(8);
	NCF_TRY(ncf_cw_begin(&w, fp, display, MAGIC, ncf_cache_version(c)));
	NCF_TRY(ncf_cw_section(&w, "meta", meta, META_SIZE, 0));
	NCF_TRY(ncf_cw_section(&w, "userids", c->user_ids, 4 * U, s4));
	NCF_TRY(ncf_cw_section(&w, "itemids", c->item_ids, 4 * I, s4));
	NCF_TRY(ncf_cw_section(&w, "offsets", c->offsets, 8 * (U + 1), s8));
	NCF_TRY(write_array(&w, "trainitm", c->train_items, 4 * P, s4 | NCF_FILTER_DELTA32,
			    train_items));
	NCF_TRY(ncf_cw_section(&w, "testitm", c->test_items, 4 * U, s4));
	NCF_TRY(write_array(&w, "evalneg", c->eval_neg, 4 * U * N, s4, eval_neg));
	if (c->train_negatives) {
		NCF_TRY(ncf_cw_section(&w, "negoffs", c->neg_offsets, 8 * (U + 1), s8));
		NCF_TRY(ncf_cw_section(&w, "negitems", c->neg_items, 4 * (size_t)c->train_negatives,
				       s4));
	}
	if (c->user_names.n)
		NCF_TRY(ncf_cw_section(&w, "usernams", c->user_names.text,
				       (size_t)c->user_names.bytes, 0));
	if (c->item_names.n)
		NCF_TRY(ncf_cw_section(&w, "itemnams", c->item_names.text,
				       (size_t)c->item_names.bytes, 0));
	NCF_TRY(ncf_cw_end(&w));
	return 0;
}

int ncf_cache_write(const struct ncf_cache *c, const char *path)
{
	struct ncf_out o;
	NCF_TRY(ncf_out_open(&o, path, 1));
	return ncf_out_end(&o, ncf_cache_write_fp(c, o.fp, o.display));
}

void ncf_cache_free(struct ncf_cache *c)
{
	free(c->user_ids);
	free(c->item_ids);
	free(c->offsets);
	free(c->train_items);
	free(c->test_items);
	free(c->eval_neg);
	free(c->entry_user);
	free(c->neg_offsets);
	free(c->neg_items);
	ncf_names_free(&c->user_names);
	ncf_names_free(&c->item_names);
	c->user_ids = c->item_ids = c->train_items = c->test_items = c->eval_neg = NULL;
	c->entry_user = c->neg_items = NULL;
	c->offsets = c->neg_offsets = NULL;
}

void ncf_cache_derive(struct ncf_cache *c)
{
	free(c->entry_user);
	c->entry_user = ncf_xmalloc(sizeof(uint32_t) * (size_t)(c->train_positives ? c->train_positives : 1));
#pragma omp parallel for schedule(static)
	for (int64_t u = 0; u < (int64_t)c->users; u++)
		for (int64_t k = c->offsets[u]; k < c->offsets[u + 1]; k++)
			c->entry_user[k] = (uint32_t)u;
}

static int corrupt(const char *display, const char *what)
{
	ncf_error("%s: corrupt cache: %s%s", display, what, HINT);
	return -1;
}

int ncf_ids_distinct(const uint32_t *ids, size_t n, uint32_t *dup)
{
	if (n < 2)
		return 1;
	for (size_t i = 1; i < n; i++) /* neighbours first: no copy for a run of one id */
		if (ids[i] == ids[i - 1]) {
			*dup = ids[i];
			return 0;
		}
	uint32_t *a = ncf_xmalloc(n * sizeof *a), *b = ncf_xmalloc(n * sizeof *b);
	size_t *count = ncf_xmalloc(65537 * sizeof *count);
	memcpy(a, ids, n * sizeof *a);
	for (int shift = 0; shift < 32; shift += 16) {
		memset(count, 0, 65537 * sizeof *count);
		for (size_t i = 0; i < n; i++)
			count[((a[i] >> shift) & 0xFFFF) + 1]++;
		for (size_t k = 0; k < 65536; k++)
			count[k + 1] += count[k];
		for (size_t i = 0; i < n; i++)
			b[count[(a[i] >> shift) & 0xFFFF]++] = a[i];
		uint32_t *t = a;
		a = b;
		b = t;
	}
	int ok = 1;
	for (size_t i = 1; i < n && ok; i++)
		if (a[i] == a[i - 1]) {
			ok = 0;
			*dup = a[i];
		}
	free(a);
	free(b);
	free(count);
	return ok;
}

/* corrupt() with the reason formatted as printf does.  Returns -1. */
static int corruptf(const char *display, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int corruptf(const char *display, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return corrupt(display, msg);
}

/* The meta section's sizes: U, I, N, P in range and possible together. */
static int check_sizes(const struct ncf_cache *c, const char *display)
{
	static const char what[] = "impossible sizes in its meta section";
	uint64_t U = c->users, I = c->items, N = c->eval_negatives;
	uint64_t P = (uint64_t)c->train_positives;
	if (U == 0)
		return corruptf(display, "%s: users is 0", what);
	if (I == 0)
		return corruptf(display, "%s: items is 0", what);
	if (N == 0 || N > NCF_CACHE_MAX_NEGATIVES)
		return corruptf(display, "%s: eval_negatives is %llu (1 to %u)", what,
				(unsigned long long)N, NCF_CACHE_MAX_NEGATIVES);
	/* a given split's test positive may also be a training positive */
	uint64_t per_user = c->split_given ? I : I - 1;
	if (P > ((uint64_t)1 << 40) || P > U * per_user)
		return corruptf(display, "%s: train_positives is %llu, more than %s", what,
				(unsigned long long)P,
				P > ((uint64_t)1 << 40) ? "2^40"
				: c->split_given	? "users x items"
							: "users x (items - 1)");
	if (U * N > NCF_CACHE_MAX_SCORES)
		return corruptf(display, "%s: users x eval_negatives is %llu, more than 2^36", what,
				(unsigned long long)(U * N));
	if (!c->split_given && I > P + U)
		return corruptf(display,
				"%s: items is %llu, more than train_positives + users (every item "
				"is rated)",
				what, (unsigned long long)I);
	/* given: every item is a positive, a candidate or an explicit negative */
	if (c->split_given && I > P + U + U * N + c->train_negatives)
		return corruptf(display,
				"%s: items is %llu, more than the positives, candidates and "
				"explicit negatives that name items",
				what, (unsigned long long)I);
	return 0;
}

/* The fields of a version 2 cache's meta (bytes 144..175): the split's
 * origin, explicit negatives, the names' sizes; in a version 1 cache they
 * are reserved (zero). */
static int check_given(const struct ncf_cache *c, const char *display)
{
	static const char what[] = "impossible sizes in its meta section";
	uint64_t U = c->users, I = c->items, E = c->train_negatives;
	if (c->split_given > 1)
		return corruptf(display, "meta field split_given is %u (0 or 1)", c->split_given);
	if (E && !c->split_given)
		return corruptf(display,
				"%s: train_negatives is %llu in a cache whose split was not given",
				what, (unsigned long long)E);
	if (E > ((uint64_t)1 << 40))
		return corruptf(display, "%s: train_negatives is %llu, more than 2^40", what,
				(unsigned long long)E);
	uint64_t ub = c->user_names.bytes, ib = c->item_names.bytes;
	if (!ncf_names_size_ok(ub, U))
		return corruptf(display,
				"%s: user_names_bytes is %llu, not 2 to %d bytes for each of %llu "
				"users",
				what, (unsigned long long)ub, NCF_NAME_MAX + 1, (unsigned long long)U);
	if (!ncf_names_size_ok(ib, I))
		return corruptf(display,
				"%s: item_names_bytes is %llu, not 2 to %d bytes for each of %llu "
				"items",
				what, (unsigned long long)ib, NCF_NAME_MAX + 1, (unsigned long long)I);
	return 0;
}

/* The protocol's counters: every row read was kept (P + U), a repeat or
 * dropped, and the rest no more than what they count among. */
static int check_counts(const struct ncf_cache *c, const char *display)
{
	static const char what[] = "impossible counts in its meta section";
	uint64_t U = c->users, P = (uint64_t)c->train_positives, kept = P + U;
	if (c->ratings_read < kept || c->ratings_read - kept < c->duplicates_dropped ||
	    c->ratings_read - kept - c->duplicates_dropped != c->ratings_dropped)
		return corruptf(display,
				"%s: ratings_read %llu is not train_positives + users + "
				"duplicates_dropped + ratings_dropped (%llu + %llu + %llu + %llu)",
				what, (unsigned long long)c->ratings_read, (unsigned long long)P,
				(unsigned long long)U, (unsigned long long)c->duplicates_dropped,
				(unsigned long long)c->ratings_dropped);
	if (c->users_dropped > c->ratings_dropped)
		return corruptf(display, "%s: users_dropped %llu is more than ratings_dropped",
				what, (unsigned long long)c->users_dropped);
	if (c->items_dropped > c->ratings_dropped)
		return corruptf(display, "%s: items_dropped %llu is more than ratings_dropped",
				what, (unsigned long long)c->items_dropped);
	if (c->test_only_users > U)
		return corruptf(display, "%s: test_only_users %llu is more than users", what,
				(unsigned long long)c->test_only_users);
	if (c->test_ties > U - c->test_only_users)
		return corruptf(display,
				"%s: test_ties %llu is more than the users with training positives",
				what, (unsigned long long)c->test_ties);
	return 0;
}

/* The source's fields (format, the synthetic name at byte 112, the
 * oracle) and the reserved bytes of the meta section m. */
static int check_source(const struct ncf_cache *c, const unsigned char *m, uint32_t version,
			const char *display)
{
	if (c->format < NCF_FORMAT_ML20M || c->format > NCF_FORMAT_NCF_PAPER)
		return corruptf(display, "meta field source_format is %u (1 to 7)", c->format);
	if ((c->format >= NCF_FORMAT_FEATURE_SPEC) != (c->split_given == 1))
		return corruptf(display, "meta field source_format is %u (%s) with split_given %u",
				c->format, ncf_format_name(c->format), c->split_given);
	size_t name = strnlen((const char *)m + 112, 32);
	int padded = name < 32;
	for (size_t k = name; k < 32; k++)
		padded &= m[112 + k] == 0;
	if (!padded || (name > 0) != (c->format == NCF_FORMAT_SYNTHETIC))
		return corruptf(display, "meta field synthetic is %s",
				!padded ? "not a NUL-padded name"
				: name	? "set for a cache of real data"
					: "empty for a synthetic cache");
	if (!isnan(c->oracle_hr) && !(c->oracle_hr >= 0 && c->oracle_hr <= 1))
		return corruptf(display, "meta field oracle_hr@10 is %g (NaN or 0 to 1)",
				c->oracle_hr);
	int v2 = version >= NCF_CACHE_VERSION_GIVEN;
	for (int k = 144; k < META_SIZE; k++) {
		int used = v2 && ((k >= 144 && k < 148) || (k >= 152 && k < 176));
		if (m[k] && !used)
			return corruptf(display, "meta byte %d is %u, not 0 (reserved)", k, m[k]);
	}
	if (version >= NCF_CACHE_VERSION_GIVEN && ncf_cache_version(c) == NCF_CACHE_VERSION)
		return corruptf(display, "version %u, but its meta section holds nothing of version "
				"%u (names, a given split, explicit negatives)",
				version, version);
	return 0;
}

/*
 * The meta section's fields, against each other (see the top of this
 * file), before any array is read: sizes, counters, source.  Returns 0,
 * or -1 after a report that names the field.
 */
static int check_meta(const struct ncf_cache *c, const unsigned char *m, uint32_t version,
		      const char *display)
{
	NCF_TRY(check_given(c, display));
	NCF_TRY(check_sizes(c, display));
	NCF_TRY(check_counts(c, display));
	return check_source(c, m, version, display);
}

/* The explicit negatives' CSR (negoffs, negitems): offsets from 0 to E,
 * never decreasing, items below I. */
static int validate_negatives(const struct ncf_cache *c, const char *display)
{
	if (!c->train_negatives)
		return 0;
	const int64_t *o = c->neg_offsets;
	if (o[0] != 0)
		return corrupt(display, "section 'negoffs': the first offset is not 0");
	for (uint32_t u = 0; u < c->users; u++)
		if (o[u + 1] < o[u])
			return corruptf(display, "section 'negoffs': offsets decrease at user %u", u);
	if ((uint64_t)o[c->users] != c->train_negatives)
		return corruptf(display,
				"section 'negoffs': the offsets end at %lld, not at train_negatives "
				"%llu",
				(long long)o[c->users], (unsigned long long)c->train_negatives);
	for (uint64_t k = 0; k < c->train_negatives; k++)
		if (c->neg_items[k] >= c->items)
			return corruptf(display,
					"section 'negitems': item %u at %llu is not below items %u",
					c->neg_items[k], (unsigned long long)k, c->items);
	return 0;
}

/* The checks a reader makes beyond checksums (see the top of this file). */
static int validate(const struct ncf_cache *c, const char *display)
{
	if (c->offsets[0] != 0)
		return corrupt(display, "first row offset is not 0");
	for (uint32_t u = 0; u < c->users; u++)
		if (c->offsets[u + 1] < c->offsets[u])
			return corruptf(display, "row offsets decrease at user %u", u);
	if (c->offsets[c->users] != c->train_positives)
		return corrupt(display, "row offsets do not end at the number of positives");
	uint64_t empty = 0;
	for (uint32_t u = 0; u < c->users; u++)
		empty += c->offsets[u + 1] == c->offsets[u];
	if (empty != c->test_only_users)
		return corruptf(display,
				"meta field test_only_users is %llu, but %llu users have no "
				"training positives",
				(unsigned long long)c->test_only_users, (unsigned long long)empty);
	int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
	for (int64_t u = 0; u < (int64_t)c->users; u++) {
		for (int64_t k = c->offsets[u]; k < c->offsets[u + 1]; k++)
			if (c->train_items[k] >= c->items ||
			    (k > c->offsets[u] && c->train_items[k] <= c->train_items[k - 1]))
				bad |= 1;
		if (c->test_items[u] >= c->items)
			bad |= 2;
		else if (ncf_row_has(c->train_items + c->offsets[u], c->offsets[u + 1] - c->offsets[u],
				     c->test_items[u]))
			bad |= 8;
		for (size_t k = 0; k < c->eval_negatives; k++)
			if (c->eval_neg[(size_t)u * c->eval_negatives + k] >= c->items)
				bad |= 4;
	}
	if (bad & 1)
		return corrupt(display, "training items out of range or out of order");
	if (bad & 2)
		return corrupt(display, "test item out of range");
	if ((bad & 8) && !c->split_given)
		return corrupt(display, "a test item that is also a training positive of its user");
	if (bad & 4)
		return corrupt(display, "evaluation negative out of range");
	return validate_negatives(c, display);
}

/* Read the id map of tag (n ids) and check that its ids are distinct. */
static int read_ids(struct ncf_cr *r, const char *tag, size_t n, uint32_t **ids,
		    const char *display)
{
	size_t got;
	if (ncf_cr_section(r, tag, 4 * n, 1, (void **)ids, &got) != 0)
		return -1;
	uint32_t dup;
	if (!ncf_ids_distinct(*ids, n, &dup))
		return corruptf(display, "section '%s': id %u appears twice", tag, dup);
	return 0;
}

/* The names of tag (names.h: ncf_names_read), what is wrong said as this
 * file's corruption. */
static int read_names(struct ncf_cr *r, const char *tag, size_t n, struct ncf_names *names,
		      const uint32_t *ids, const char *display)
{
	char why[300];
	if (ncf_names_read(r, tag, n, names, ids, why, sizeof why) == 0)
		return 0;
	return why[0] ? corruptf(display, "%s", why) : -1;
}

int ncf_cache_read_fp(FILE *fp, const char *display, struct ncf_cache *c)
{
	memset(c, 0, sizeof *c);
	struct ncf_cr r = {0};
	void *meta = NULL;
	size_t n;
	int rc = -1;
	NCF_TRY_GOTO(ncf_cr_open(&r, fp, display, MAGIC, NCF_CACHE_VERSION, NCF_CACHE_VERSION_GIVEN,
				 HINT),
		     out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "meta", META_SIZE, 1, &meta, &n), out);
	meta_unpack(c, meta);
	if (r.version < NCF_CACHE_VERSION_GIVEN) { /* bytes 144.. are reserved, checked 0 */
		c->split_given = 0;
		c->train_negatives = 0;
		c->user_names.bytes = c->item_names.bytes = 0;
	}
	/* Sizes that do not agree would make huge allocations: refuse them
	 * before reading any array. */
	if (check_meta(c, meta, r.version, display) != 0)
		goto out;
	size_t U = c->users, I = c->items, P = (size_t)c->train_positives;
	size_t N = c->eval_negatives, E = (size_t)c->train_negatives;
	/* check_meta bounds these: no overflow */
	uint64_t arrays = 4 * (uint64_t)U + 4 * (uint64_t)I + 8 * ((uint64_t)U + 1) + 4 * (uint64_t)P +
			  4 * (uint64_t)U + 4 * (uint64_t)U * N +
			  (E ? 8 * ((uint64_t)U + 1) + 4 * (uint64_t)E : 0) + c->user_names.bytes +
			  c->item_names.bytes;
	if (!ncf_cr_can_hold(&r, arrays)) {
		corruptf(display,
			 "its meta section implies %llu bytes of arrays, more than the rest of the "
			 "file can hold",
			 (unsigned long long)arrays);
		goto out;
	}
	NCF_TRY_GOTO(read_ids(&r, "userids", U, &c->user_ids, display), out);
	NCF_TRY_GOTO(read_ids(&r, "itemids", I, &c->item_ids, display), out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "offsets", 8 * (U + 1), 1, (void **)&c->offsets, &n), out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "trainitm", 4 * P, 1, (void **)&c->train_items, &n), out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "testitm", 4 * U, 1, (void **)&c->test_items, &n), out);
	NCF_TRY_GOTO(ncf_cr_section(&r, "evalneg", 4 * U * N, 1, (void **)&c->eval_neg, &n), out);
	if (E) {
		NCF_TRY_GOTO(ncf_cr_section(&r, "negoffs", 8 * (U + 1), 1, (void **)&c->neg_offsets, &n),
			     out);
		NCF_TRY_GOTO(ncf_cr_section(&r, "negitems", 4 * E, 1, (void **)&c->neg_items, &n), out);
	}
	NCF_TRY_GOTO(read_names(&r, "usernams", U, &c->user_names, c->user_ids, display), out);
	NCF_TRY_GOTO(read_names(&r, "itemnams", I, &c->item_names, c->item_ids, display), out);
	NCF_TRY_GOTO(ncf_cr_end(&r), out);
	if (P == 0) { /* a zero-byte section decompresses to a NULL-free 1-byte buffer */
		free(c->train_items);
		c->train_items = ncf_xmalloc(4);
	}
	if (validate(c, display) != 0)
		goto out;
	ncf_cache_derive(c);
	rc = 0;
out:
	free(meta);
	ncf_cr_close(&r);
	if (rc != 0)
		ncf_cache_free(c);
	return rc;
}

int ncf_cache_read(const char *path, struct ncf_cache *c)
{
	memset(c, 0, sizeof *c);
	const char *display;
	FILE *fp = ncf_in_open(path, &display);
	if (!fp)
		return -1;
	int rc = ncf_cache_read_fp(fp, display, c);
	ncf_in_close(fp);
	return rc;
}

uint32_t ncf_cache_fingerprint(const struct ncf_cache *c)
{
	unsigned char h[8];
	ncf_put_u32(h, c->users);
	ncf_put_u32(h + 4, c->items);
	uint32_t crc = ncf_crc32c(0, h, 8);
	crc = ncf_crc32c(crc, c->user_ids, 4 * (size_t)c->users);
	crc = ncf_crc32c(crc, c->item_ids, 4 * (size_t)c->items);
	/* names, where there are: a numbered cache's fingerprint is as it was */
	if (c->user_names.n)
		crc = ncf_crc32c(crc, c->user_names.text, (size_t)c->user_names.bytes);
	if (c->item_names.n)
		crc = ncf_crc32c(crc, c->item_names.text, (size_t)c->item_names.bytes);
	return crc;
}

uint32_t ncf_cache_train_users(const struct ncf_cache *c)
{
	uint32_t n = 0;
	for (uint32_t u = 0; u < c->users; u++)
		n += c->offsets[u + 1] > c->offsets[u];
	return n;
}

void ncf_cache_print_info(const struct ncf_cache *c, FILE *out)
{
	fprintf(out, "format\t%s\n", ncf_format_name(c->format));
	if (c->synthetic[0])
		fprintf(out, "synthetic\t%s\n", c->synthetic);
	fprintf(out, "version\t%u\n", ncf_cache_version(c));
	fprintf(out, "users\t%u\n", c->users);
	fprintf(out, "items\t%u\n", c->items);
	fprintf(out, "train_positives\t%lld\n", (long long)c->train_positives);
	fprintf(out, "test_positives\t%u\n", c->users);
	fprintf(out, "eval_negatives_per_user\t%u\n", c->eval_negatives);
	fprintf(out, "split\t%s\n", c->split_given ? "given" : "leave-one-out");
	fprintf(out, "train_negatives\t%llu\n", (unsigned long long)c->train_negatives);
	fprintf(out, "user_ids\t%s\n", c->user_names.n ? "names" : "numbers");
	fprintf(out, "item_ids\t%s\n", c->item_names.n ? "names" : "numbers");
	fprintf(out, "seed\t%llu\n", (unsigned long long)c->seed);
	fprintf(out, "min_ratings\t%u\n", c->min_ratings);
	fprintf(out, "ratings_read\t%llu\n", (unsigned long long)c->ratings_read);
	fprintf(out, "duplicates_dropped\t%llu\n", (unsigned long long)c->duplicates_dropped);
	fprintf(out, "users_dropped\t%llu\n", (unsigned long long)c->users_dropped);
	fprintf(out, "ratings_dropped\t%llu\n", (unsigned long long)c->ratings_dropped);
	fprintf(out, "items_dropped\t%llu\n", (unsigned long long)c->items_dropped);
	fprintf(out, "test_only_users\t%llu\n", (unsigned long long)c->test_only_users);
	fprintf(out, "test_timestamp_ties\t%llu\n", (unsigned long long)c->test_ties);
	fprintf(out, "source_bytes\t%llu\n", (unsigned long long)c->source_bytes);
	fprintf(out, "source_crc32c\t%08x\n", c->source_crc);
	fprintf(out, "fingerprint\t%08x\n", ncf_cache_fingerprint(c));
	if (!isnan(c->oracle_hr))
		fprintf(out, "oracle_hr@10\t%.6f\n", c->oracle_hr);
}
