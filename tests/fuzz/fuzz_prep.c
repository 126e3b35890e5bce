/*
 * fuzz_prep.c - libFuzzer harness of ncf-prep's path from text to cache:
 * the ratings parser (ncf-prep/parse.c) in every input format, the
 * protocol behind it (ncf-prep/rows.c, protocol.c) and the cache writer.
 *
 * Input: byte 0 picks the format (detected, ml-20m, ml-1m, ml-100k, csv:
 * byte 0 % 5) and how a CSV is read (byte 0 / 5 % 4: as detected,
 * --delimiter ';', --columns user=1,item=2,time=4, --columns
 * user=u,item=i,time=t,rating=r with --delimiter tab; the last three
 * read the file as CSV, so ids may be text and timestamps dates), byte 1
 * --min-ratings (bits 0-1: 0..3), --eval-negatives (bits 2-3: 1..4)
 * and whether the file is expanded (bit 4); the rest is the file.  An
 * expanded file repeats: the marker F5 F5 C stands for the byte before it
 * (or 'x' at the start) (C + 1) x 16 KiB times, up to 6 MiB of them, so
 * that a few bytes make lines past the 1 MiB limit anywhere (the first
 * line, the last, inside a quoted field) which inputs of libFuzzer's
 * -max_len never reach.  The hash key of the id maps is pinned
 * (fuzz_key.h): the ids of tests/tools/crafted_ids fuzz-dict, in the
 * dictionary and a seed, then share one slot.
 *
 * Invariants: a refusal has a message naming the input; what is accepted
 * has no line over 1 MiB, no NUL and no CR but before an LF; the id maps
 * give each original id (or a CSV's key) the index of its first
 * appearance; a named column's names are valid (names.h); every cache the
 * protocol makes is one the reader accepts (its names distinct), with the
 * counts of the rows read.
 */
#include <math.h>
#include <omp.h>

#include "cache.h"
#include "fuzz.h"
#include "fuzz_key.h"
#include "lines.h"
#include "parse.h"
#include "protocol.h"
#include "rows.h"

#define EXPAND_UNIT (16u << 10)
#define EXPAND_MAX (6u << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	omp_set_num_threads(1);
	ncf_hash_key_pin(FUZZ_HASH_KEY);
	return 0;
}

/* d (n bytes) with its markers expanded into out (NULL: only counted);
 * returns the expanded size. */
static size_t expand_into(const uint8_t *d, size_t n, uint8_t *out)
{
	size_t o = 0;
	uint8_t last = 'x';
	for (size_t i = 0; i < n; i++) {
		if (i + 2 < n && d[i] == 0xf5 && d[i + 1] == 0xf5) {
			size_t rep = ((size_t)d[i + 2] + 1) * EXPAND_UNIT;
			if (o + rep <= EXPAND_MAX) {
				if (out)
					memset(out + o, last, rep);
				o += rep;
			}
			i += 2;
			continue;
		}
		if (out)
			out[o] = d[i];
		last = d[i];
		o++;
	}
	return o;
}

/* d (n bytes) with its markers expanded, into a new buffer (*len). */
static uint8_t *expand(const uint8_t *d, size_t n, size_t *len)
{
	*len = expand_into(d, n, NULL);
	uint8_t *out = malloc(*len ? *len : 1);
	FUZZ_ASSERT(out, "malloc");
	expand_into(d, n, out);
	return out;
}

/* Does the accepted file d (n bytes) keep the line rules of lines.h? */
static void check_lines(const uint8_t *d, size_t n)
{
	size_t pos = n >= 3 && !memcmp(d, "\xEF\xBB\xBF", 3) ? 3 : 0;
	while (pos < n) {
		const uint8_t *p = d + pos, *nl = memchr(p, '\n', n - pos);
		FUZZ_ASSERT(nl, "a last line without its end was accepted");
		size_t all = (size_t)(nl - p), body = all && p[all - 1] == '\r' ? all - 1 : all;
		FUZZ_ASSERT(body <= NCF_LINES_MAX, "a line of %zu bytes was accepted", body);
		FUZZ_ASSERT(!memchr(p, 0, all), "a NUL byte was accepted");
		FUZZ_ASSERT(!memchr(p, '\r', body), "a bare CR was accepted");
		pos += all + 1;
	}
}

/* The id maps: each row's index names its original id, and indices come
 * in order of first appearance (ids, n rows, the original ids). */
static void check_ids(const struct prep_rows *r, const uint32_t *user, const uint32_t *item)
{
	uint32_t next_user = 0, next_item = 0;
	for (size_t k = 0; k < r->n; k++) {
		FUZZ_ASSERT(r->user[k] <= next_user && r->user_ids[r->user[k]] == user[k],
			    "row %zu: user %u is index %u", k, user[k], r->user[k]);
		FUZZ_ASSERT(r->item[k] <= next_item && r->item_ids[r->item[k]] == item[k],
			    "row %zu: item %u is index %u", k, item[k], r->item[k]);
		next_user += r->user[k] == next_user;
		next_item += r->item[k] == next_item;
	}
	FUZZ_ASSERT(next_user == r->n_users && next_item == r->n_items, "index counts");
}

/* A named column's names: one per index, each one a valid name. */
static void check_names(const struct ncf_names *m, uint32_t n)
{
	if (!m->n)
		return;
	FUZZ_ASSERT(m->n == n, "%u names for %u ids", m->n, n);
	for (uint32_t k = 0; k < n; k++) {
		size_t len;
		const char *s = ncf_names_at(m, k, &len);
		FUZZ_ASSERT(!ncf_name_check(s, len), "name %u: %s", k, ncf_name_check(s, len));
	}
}

static void write_and_read_back(struct ncf_cache *c)
{
	char *buf;
	struct ncf_cache r;
	fuzz_cache_round_trip(c, "<cache>", &r, &buf);
	FUZZ_ASSERT(r.users == c->users && r.items == c->items &&
			    r.train_positives == c->train_positives &&
			    r.ratings_read == c->ratings_read &&
			    r.user_names.n == c->user_names.n && r.item_names.n == c->item_names.n,
		    "read back differently");
	ncf_cache_free(&r);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	static const enum ncf_format formats[] = {NCF_FORMAT_UNKNOWN, NCF_FORMAT_ML20M,
						  NCF_FORMAT_ML1M, NCF_FORMAT_ML100K, NCF_FORMAT_CSV};
	struct prep_parse_opts o = {.format = formats[data[0] % 5]};
	switch (data[0] / 5 % 4) {
	case 1:
		o.delimiter = ';';
		break;
	case 2:
		o.columns = "user=1,item=2,time=4";
		break;
	case 3:
		o.columns = "user=u,item=i,time=t,rating=r";
		o.delimiter = '\t';
		break;
	}
	if (o.columns || o.delimiter) /* ncf-prep refuses them with a MovieLens --format */
		o.format = o.format == NCF_FORMAT_CSV ? NCF_FORMAT_CSV : NCF_FORMAT_UNKNOWN;
	struct prep_protocol_opts po = {.min_ratings = data[1] & 3,
				       .eval_negatives = 1 + ((data[1] >> 2) & 3), .seed = 1};
	const uint8_t *file = data + 2;
	size_t n = size - 2;
	uint8_t *big = NULL;
	if (data[1] & 0x10)
		file = big = expand(data + 2, size - 2, &n);
	fuzz_messages_reset();
	FILE *fp = fuzz_open(file, n);
	struct prep_rows rows = {0};
	struct prep_parse_info pi;
	int rc = prep_parse(fp, "<fuzz>", &o, &rows, &pi);
	fclose(fp);
	if (rc != 0) {
		fuzz_check_refusal();
		FUZZ_ASSERT(!strncmp(fuzz_last_message, "fuzz: <fuzz>", 12), "message '%s'",
			    fuzz_last_message);
		FUZZ_ASSERT(rows.user == NULL && rows.n == 0, "rows kept after a refusal");
		free(big);
		return 0;
	}
	FUZZ_ASSERT(rows.n > 0 && pi.bytes == n, "rows %zu, bytes %llu", rows.n,
		    (unsigned long long)pi.bytes);
	check_lines(file, n);
	free(big);
	struct ncf_cache c;
	memset(&c, 0, sizeof c);
	c.oracle_hr = NAN;
	c.format = pi.format;
	c.source_bytes = pi.bytes;
	c.source_crc = pi.crc;
	c.ratings_read = rows.n;
	uint32_t *user = malloc(rows.n * sizeof *user), *item = malloc(rows.n * sizeof *item);
	FUZZ_ASSERT(user && item, "malloc");
	memcpy(user, rows.user, rows.n * sizeof *user);
	memcpy(item, rows.item, rows.n * sizeof *item);
	prep_rows_index(&rows);
	check_ids(&rows, user, item);
	free(user);
	free(item);
	prep_parse_ids(&pi, &rows);
	check_names(&rows.user_names, rows.n_users);
	check_names(&rows.item_names, rows.n_items);
	if (prep_protocol_run(&rows, &po, &c) != 0) {
		fuzz_check_refusal(); /* no user left under --min-ratings */
		prep_rows_free(&rows);
		ncf_cache_free(&c);
		return 0;
	}
	prep_rows_free(&rows);
	write_and_read_back(&c);
	ncf_cache_free(&c);
	return 0;
}
