/*
 * fuzz_prep.c - libFuzzer harness of ncf-prep's path from text to cache:
 * the ratings parser (ncf-prep/parse.c) in every input format, the
 * protocol behind it (ncf-prep/rows.c, protocol.c) and the cache writer.
 *
 * Input: byte 0 picks the format (detected, ml-20m, ml-1m, ml-100k, csv),
 * byte 1 --min-ratings (0..3) and --eval-negatives (1..4); the rest is the
 * file.  Invariants: a refusal has a message naming the input; every cache
 * the protocol makes is one the reader accepts, with the counts of the
 * rows read.
 */
#include <math.h>
#include <omp.h>

#include "cache.h"
#include "fuzz.h"
#include "parse.h"
#include "protocol.h"
#include "rows.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	omp_set_num_threads(1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	static const enum ncf_format formats[] = {NCF_FORMAT_UNKNOWN, NCF_FORMAT_ML20M,
						  NCF_FORMAT_ML1M, NCF_FORMAT_ML100K, NCF_FORMAT_CSV};
	enum ncf_format format = formats[data[0] % 5];
	struct prep_protocol_opts po = {.min_ratings = data[1] & 3,
				       .eval_negatives = 1 + ((data[1] >> 2) & 3), .seed = 1};
	fuzz_messages_reset();
	FILE *fp = fuzz_open(data + 2, size - 2);
	struct prep_rows rows = {0};
	struct prep_parse_info pi;
	int rc = prep_parse(fp, "<fuzz>", format, &rows, &pi, 0);
	fclose(fp);
	if (rc != 0) {
		fuzz_check_refusal();
		FUZZ_ASSERT(!strncmp(fuzz_last_message, "fuzz: <fuzz>", 12), "message '%s'",
			    fuzz_last_message);
		FUZZ_ASSERT(rows.user == NULL && rows.n == 0, "rows kept after a refusal");
		return 0;
	}
	FUZZ_ASSERT(rows.n > 0 && pi.bytes == size - 2, "rows %zu, bytes %llu", rows.n,
		    (unsigned long long)pi.bytes);
	struct ncf_cache c;
	memset(&c, 0, sizeof c);
	c.oracle_hr = NAN;
	c.format = pi.format;
	c.source_bytes = pi.bytes;
	c.source_crc = pi.crc;
	c.ratings_read = rows.n;
	prep_rows_index(&rows);
	if (prep_protocol_run(&rows, &po, &c) != 0) {
		fuzz_check_refusal(); /* no user left under --min-ratings */
		prep_rows_free(&rows);
		ncf_cache_free(&c);
		return 0;
	}
	prep_rows_free(&rows);
	char *buf = NULL;
	size_t len = 0;
	FILE *ms = open_memstream(&buf, &len);
	FUZZ_ASSERT(ncf_cache_write_fp(&c, ms, "<cache>") == 0, "write");
	fclose(ms);
	FILE *in = fuzz_open((const uint8_t *)buf, len);
	struct ncf_cache r;
	FUZZ_ASSERT(ncf_cache_read_fp(in, "<cache>", &r) == 0,
		    "the reader refuses what the protocol made: %s", fuzz_last_message);
	fclose(in);
	FUZZ_ASSERT(r.users == c.users && r.items == c.items &&
			    r.train_positives == c.train_positives &&
			    r.ratings_read == c.ratings_read,
		    "read back differently");
	ncf_cache_free(&r);
	ncf_cache_free(&c);
	free(buf);
	return 0;
}
