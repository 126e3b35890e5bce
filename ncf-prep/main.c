/*
 * ncf-prep - MovieLens ratings (or synthetic data) in, a cache out.
 *
 * The thin main: options, then parse (parse.c) or generate (synth.c),
 * index (rows.c), run the protocol (protocol.c) and write the cache
 * (common/cache.c).  See ncf-prep(1).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "err.h"
#include "io.h"
#include "parse.h"
#include "protocol.h"
#include "rows.h"
#include "samefile.h"
#include "synth.h"

static void usage(void)
{
	printf("usage: ncf-prep [options] [FILE]\n"
	       "       ncf-prep --synthetic SHAPE[xSCALE] [options]\n"
	       "       ncf-prep --info CACHE\n"
	       "\n"
	       "Turn MovieLens ratings (FILE or stdin) into an ncf cache: leave-one-out\n"
	       "split by time, training positives, evaluation negatives.\n"
	       "\n"
	       "  -o, --output FILE        write the cache to FILE (default stdout)\n"
	       "      --format NAME        input format: ml-20m, ml-1m, ml-100k, csv\n"
	       "                           (default: detected from the first line)\n"
	       "      --min-ratings N      drop users with fewer than N distinct items (0: off)\n"
	       "      --eval-negatives N   evaluation negatives per user (default 100)\n"
	       "      --seed N             seed of the negatives and synthetic data (default 1)\n"
	       "      --synthetic SPEC     generate data: SHAPE[xSCALE], SHAPE one of\n"
	       "                           %s\n"
	       "      --emit-csv           with --synthetic: write the ratings as ml-20m CSV\n"
	       "      --info CACHE         print the summary of CACHE as key<TAB>value lines\n"
	       "      --progress           show progress even when stderr is not a terminal\n"
	       "  -q, --quiet              less output (-q: warnings and errors, -qq: errors)\n"
	       "  -v, --verbose            print stage timings\n"
	       "  -h, --help               show this help\n"
	       "  -V, --version            show the version (-vV: libraries)\n"
	       "\n"
	       "Exit status: 0 ok, 1 bad input or I/O error, 2 usage error.\n",
	       ncf_synth_shapes());
}

enum { OPT_FORMAT = 256, OPT_MIN, OPT_NEG, OPT_SEED, OPT_SYNTH, OPT_EMIT, OPT_INFO, OPT_PROG };

static double mb(uint64_t bytes)
{
	return (double)bytes / 1e6;
}

int main(int argc, char **argv)
{
	ncf_set_progname(argv[0]);
	ncf_init_std_streams();
	ncf_synopsis = "ncf-prep [-o CACHE] [--format NAME] [--min-ratings N] [--eval-negatives N] "
		       "[--seed N] [FILE | --synthetic SPEC [--emit-csv]] | --info CACHE";
	static const struct option opts[] = {
		{"output", required_argument, 0, 'o'},
		{"format", required_argument, 0, OPT_FORMAT},
		{"min-ratings", required_argument, 0, OPT_MIN},
		{"eval-negatives", required_argument, 0, OPT_NEG},
		{"seed", required_argument, 0, OPT_SEED},
		{"synthetic", required_argument, 0, OPT_SYNTH},
		{"emit-csv", no_argument, 0, OPT_EMIT},
		{"info", required_argument, 0, OPT_INFO},
		{"progress", no_argument, 0, OPT_PROG},
		NCF_COMMON_LONGOPTS,
		{0, 0, 0, 0},
	};
	const char *output = NULL, *synthetic = NULL, *info = NULL;
	enum ncf_format format = NCF_FORMAT_UNKNOWN;
	struct ncf_protocol_opts po = {.min_ratings = 0, .eval_negatives = 100, .seed = 1};
	int emit_csv = 0, progress = 0, version = 0, c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:qvhV", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case OPT_FORMAT:
			format = ncf_format_parse(optarg);
			if (format == NCF_FORMAT_UNKNOWN)
				ncf_usage_error("--format: unknown format '%s' (ml-20m, ml-1m, ml-100k, "
						"csv)",
						ncf_escape(optarg, strlen(optarg), 40));
			break;
		case OPT_MIN:
			po.min_ratings = (uint32_t)ncf_opt_int("--min-ratings", optarg, 0, UINT32_MAX);
			break;
		case OPT_NEG:
			po.eval_negatives = (uint32_t)ncf_opt_int("--eval-negatives", optarg, 1, 100000);
			break;
		case OPT_SEED:
			po.seed = ncf_opt_u64("--seed", optarg);
			break;
		case OPT_SYNTH:
			synthetic = optarg;
			break;
		case OPT_EMIT:
			emit_csv = 1;
			break;
		case OPT_INFO:
			info = optarg;
			break;
		case OPT_PROG:
			progress = 1;
			break;
		default:
			ncf_cli_common(c, argv, usage, &version);
		}
	}
	if (version) {
		ncf_print_version(ncf_verbosity > 2, NULL);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	if (info) {
		if (optind < argc || output || synthetic)
			ncf_usage_error("--info takes one cache and no other input or output");
		struct ncf_named files[] = {{.path = info, .what = "--info"},
					    {.path = "-", .output = 1}};
		if (ncf_refuse_same_file(files, 2) != 0)
			return NCF_EXIT_USAGE;
		struct ncf_cache cache;
		if (ncf_cache_read(info, &cache) != 0)
			return NCF_EXIT_FAIL;
		ncf_cache_print_info(&cache, stdout);
		ncf_cache_free(&cache);
		return ncf_close_stdout() ? NCF_EXIT_FAIL : 0;
	}
	if (argc - optind > 1)
		ncf_usage_error("one input file at most ('%s' is extra)", argv[optind + 1]);
	if (synthetic && optind < argc)
		ncf_usage_error("--synthetic takes no input file");
	if (emit_csv && !synthetic)
		ncf_usage_error("--emit-csv needs --synthetic");
	if (synthetic && format != NCF_FORMAT_UNKNOWN)
		ncf_usage_error("--format applies to input files, not --synthetic");
	const char *input = optind < argc ? argv[optind] : NULL;
	struct ncf_named files[] = {
		{.path = synthetic ? NULL : input ? input : "-", .what = "the input"},
		{.path = output ? output : "-", .what = "-o", .output = 1}};
	if (ncf_refuse_same_file(files, 2) != 0)
		return NCF_EXIT_USAGE;
	ncf_out_cleanup_on_signals();

	double t0 = ncf_now();
	struct ncf_synth synth;
	memset(&synth, 0, sizeof synth);
	if (synthetic && ncf_synth_init(&synth, synthetic, po.seed) != 0)
		ncf_usage_error("--synthetic: '%s' is not SHAPE[xSCALE] with SHAPE one of %s and "
				"SCALE 1 to 1000",
				ncf_escape(synthetic, strlen(synthetic), 40), ncf_synth_shapes());
	if (synthetic && emit_csv) {
		struct ncf_out o;
		if (ncf_out_open(&o, output, 0) != 0)
			return NCF_EXIT_FAIL;
		if (ncf_synth_write_csv(&synth, o.fp) != 0) {
			ncf_error("%s: write failed: %s", o.display, strerror(errno ? errno : EIO));
			ncf_out_abort(&o);
			ncf_synth_free(&synth);
			return NCF_EXIT_FAIL;
		}
		if (ncf_out_commit(&o) != 0) {
			ncf_synth_free(&synth);
			return NCF_EXIT_FAIL;
		}
		ncf_info("wrote synthetic %s ratings (%u users, %u items) to %s in %.2f s", synthetic,
			 synth.users, synth.items, output ? output : "<stdout>", ncf_now() - t0);
		ncf_synth_free(&synth);
		return 0;
	}
	/* Fail early on a terminal before reading a large input. */
	if ((!output || !strcmp(output, "-")) && isatty(STDOUT_FILENO)) {
		ncf_error("refusing to write binary data to a terminal; use -o FILE or redirect "
			  "stdout");
		ncf_synth_free(&synth);
		return NCF_EXIT_FAIL;
	}

	struct ncf_rows rows = {0};
	struct ncf_cache cache;
	memset(&cache, 0, sizeof cache);
	cache.oracle_hr = NAN;
	const char *display = "<synthetic>";
	if (synthetic) {
		ncf_synth_rows(&synth, &rows);
		cache.format = NCF_FORMAT_SYNTHETIC;
		snprintf(cache.synthetic, sizeof cache.synthetic, "%s", synthetic);
	} else {
		FILE *in = ncf_in_open(input, &display);
		if (!in)
			goto fail;
		struct ncf_parse_info pi;
		int rc = ncf_parse(in, display, format, &rows, &pi, progress);
		ncf_in_close(in);
		if (rc != 0)
			goto fail;
		cache.format = pi.format;
		cache.source_bytes = pi.bytes;
		cache.source_crc = pi.crc;
	}
	cache.ratings_read = rows.n;
	double t_read = ncf_now();
	ncf_rows_index(&rows);
	double t_index = ncf_now();
	if (ncf_protocol_run(&rows, &po, &cache) != 0)
		goto fail;
	ncf_rows_free(&rows);
	double t_proto = ncf_now();
	if (synthetic) {
		cache.oracle_hr = ncf_synth_oracle(&synth, &cache, 10);
		ncf_synth_free(&synth);
	}
	double t_oracle = ncf_now();
	struct ncf_out o;
	if (ncf_out_open(&o, output, 1) != 0)
		goto fail;
	if (ncf_cache_write_fp(&cache, o.fp, o.display) != 0) {
		ncf_out_abort(&o);
		goto fail;
	}
	long out_bytes = o.fp != stdout ? ftell(o.fp) : -1;
	if (ncf_out_commit(&o) != 0)
		goto fail;
	double t_write = ncf_now();
	ncf_info("%s: %llu ratings, %u users, %u items -> %lld training positives, %u test "
		 "positives, %u negatives each",
		 display, (unsigned long long)cache.ratings_read, cache.users, cache.items,
		 (long long)cache.train_positives, cache.users, cache.eval_negatives);
	if (cache.duplicates_dropped || cache.users_dropped || cache.test_only_users)
		ncf_info("dropped %llu duplicate ratings, %llu users under --min-ratings (%llu "
			 "ratings, %llu items); %llu users have only a test positive",
			 (unsigned long long)cache.duplicates_dropped,
			 (unsigned long long)cache.users_dropped,
			 (unsigned long long)cache.ratings_dropped,
			 (unsigned long long)cache.items_dropped,
			 (unsigned long long)cache.test_only_users);
	if (!isnan(cache.oracle_hr))
		ncf_info("oracle HR@10 of the planted scores: %.4f", cache.oracle_hr);
	ncf_debug("time read %.3f s (%.1f MB/s), index %.3f s, protocol %.3f s, oracle %.3f s, "
		  "write %.3f s, total %.3f s",
		  t_read - t0, cache.source_bytes ? mb(cache.source_bytes) / (t_read - t0) : 0.0,
		  t_index - t_read, t_proto - t_index, t_oracle - t_proto, t_write - t_oracle,
		  t_write - t0);
	if (out_bytes >= 0)
		ncf_debug("cache %ld bytes%s", out_bytes,
			  cache.source_bytes ? "" : " (synthetic source)");
	if (out_bytes >= 0 && cache.source_bytes)
		ncf_debug("cache/source size ratio %.4f", (double)out_bytes / (double)cache.source_bytes);
	ncf_debug("peak memory %.1f MB", mb(ncf_peak_rss()));
	ncf_cache_free(&cache);
	return 0;
fail:
	ncf_rows_free(&rows);
	ncf_cache_free(&cache);
	ncf_synth_free(&synth);
	return NCF_EXIT_FAIL;
}
