/*
 * test_init - the pieces of starting a run from a model's weights
 * (ncf-train --init): a model's ids matched against a cache's
 * (common/idindex.c ncf_ids_match, ncf_id_say) and its parameters moved
 * onto the cache's rows (common/model.c ncf_params_remap), against
 * answers written by hand.
 */
#include <stdlib.h>
#include <string.h>

#include "idindex.h"
#include "model.h"
#include "tap.h"

static void t_match(void)
{
	static const uint32_t model[4] = {5, 9, 2, 70000000}, cache[5] = {2, 3, 5, 7, 70000000};
	struct ncf_id_list from = {4, model, NULL}, to = {5, cache, NULL};
	int64_t at[4];
	size_t first = 99;
	size_t missing = ncf_ids_match(&from, &to, at, &first);
	tap_ok(missing == 1 && first == 1, "one id missing, the model's row 1 (%zu, %zu)", missing,
	       first);
	tap_ok(at[0] == 2 && at[1] == -1 && at[2] == 0 && at[3] == 4,
	       "rows 0, 2, 3 at the cache's rows 2, 0, 4");
	char buf[16];
	tap_ok(!strcmp(ncf_id_say(&from, 1, buf, sizeof buf), "9"), "the missing id said as 9");
	struct ncf_id_list all = {5, cache, NULL};
	int64_t at5[5];
	tap_ok(ncf_ids_match(&all, &to, at5, NULL) == 0 && at5[0] == 0 && at5[4] == 4,
	       "a list against itself: every row in place");
	struct ncf_id_list none = {0, NULL, NULL};
	tap_ok(ncf_ids_match(&none, &to, at5, NULL) == 0, "an empty list: nothing missing");
}

/* Named ids (names.h): a named model's rows onto a named cache's by their
 * text, a numbered list onto a named one by the numbers' digits, and the
 * missing row said by its name. */
static void t_match_names(void)
{
	struct ncf_names mn = {0}, cn = {0};
	static const char *const model[3] = {"u9", "7", "alice"};
	static const char *const cache[5] = {"bob", "alice", "7", "u10", "u9"};
	for (int k = 0; k < 3; k++)
		ncf_names_add(&mn, model[k], strlen(model[k]));
	for (int k = 0; k < 5; k++)
		ncf_names_add(&cn, cache[k], strlen(cache[k]));
	static const uint32_t idx[5] = {0, 1, 2, 3, 4};
	struct ncf_id_list from = {3, idx, &mn}, to = {5, idx, &cn};
	int64_t at[3];
	size_t first = 99;
	tap_ok(ncf_ids_match(&from, &to, at, &first) == 0 && first == 99,
	       "every named row found");
	tap_ok(at[0] == 4 && at[1] == 2 && at[2] == 1, "u9, 7, alice at the cache's rows 4, 2, 1");
	struct ncf_id_list back = {5, idx, &cn}, few = {3, idx, &mn};
	int64_t at5[5];
	tap_ok(ncf_ids_match(&back, &few, at5, &first) == 2 && first == 0,
	       "the cache onto the model: bob and u10 missing, bob first");
	char buf[NCF_NAME_MAX + 1];
	tap_ok(!strcmp(ncf_id_say(&back, first, buf, sizeof buf), "'bob'"),
	       "the missing id said by its name (%s)", buf);
	static const uint32_t nums[2] = {7, 8};
	struct ncf_id_list numbered = {2, nums, NULL};
	tap_ok(ncf_ids_match(&numbered, &to, at, &first) == 1 && at[0] == 2 && at[1] == -1 &&
		       first == 1,
	       "numbers onto names: 7 is the name \"7\", 8 is missing");
	tap_ok(ncf_ids_match(&from, &numbered, at, &first) == 2 && at[1] == 0 && first == 0,
	       "names onto numbers: only \"7\" found");
	ncf_names_free(&mn);
	ncf_names_free(&cn);
}

/* Parameter v of a model: its flat index, so that every value says where
 * it came from. */
static void number(float *p, size_t n, float base)
{
	for (size_t k = 0; k < n; k++)
		p[k] = base + (float)k;
}

static void t_remap(void)
{
	struct ncf_shape fs = {2, 3, 2, 3, {4, 3, 2}}, ts = {4, 5, 2, 3, {4, 3, 2}};
	struct ncf_layout lf, lt;
	ncf_layout_make(&fs, &lf);
	ncf_layout_make(&ts, &lt);
	float *from = malloc(lf.total * sizeof *from), *to = malloc(lt.total * sizeof *to);
	number(from, lf.total, 0);
	number(to, lt.total, 100000);
	const int64_t user_at[2] = {3, 0}, item_at[3] = {4, 1, 2};
	ncf_params_remap(&fs, from, &ts, to, user_at, item_at);
	size_t F = 2, M = 2;
	int ok = 1;
	/* user rows: from's 0 -> 3, 1 -> 0; rows 1, 2 untouched */
	for (size_t f = 0; f < F; f++) {
		ok &= to[lt.gmf_user + 3 * F + f] == from[lf.gmf_user + 0 * F + f];
		ok &= to[lt.gmf_user + 0 * F + f] == from[lf.gmf_user + 1 * F + f];
		ok &= to[lt.gmf_user + 1 * F + f] == 100000 + (float)(lt.gmf_user + 1 * F + f);
		ok &= to[lt.gmf_user + 2 * F + f] == 100000 + (float)(lt.gmf_user + 2 * F + f);
	}
	for (size_t f = 0; f < M; f++) {
		ok &= to[lt.mlp_user + 3 * M + f] == from[lf.mlp_user + 0 * M + f];
		ok &= to[lt.mlp_user + 0 * M + f] == from[lf.mlp_user + 1 * M + f];
		ok &= to[lt.mlp_user + 2 * M + f] == 100000 + (float)(lt.mlp_user + 2 * M + f);
	}
	tap_ok(ok, "user rows moved, the others kept (GMF and MLP tables)");
	ok = 1;
	for (size_t r = 0; r < 3; r++)
		for (size_t f = 0; f < F; f++) {
			ok &= to[lt.gmf_item + (size_t)item_at[r] * F + f] == from[lf.gmf_item + r * F + f];
			ok &= to[lt.mlp_item + (size_t)item_at[r] * M + f] == from[lf.mlp_item + r * M + f];
		}
	for (size_t f = 0; f < F; f++) /* items 0 and 3: no row of the model */
		ok &= to[lt.gmf_item + 0 * F + f] == 100000 + (float)(lt.gmf_item + f) &&
		      to[lt.mlp_item + 3 * M + f] == 100000 + (float)(lt.mlp_item + 3 * M + f);
	tap_ok(ok, "item rows moved, the others kept");
	tap_ok(lt.total - lt.dense == lf.total - lf.dense &&
		       !memcmp(to + lt.dense, from + lf.dense, (lf.total - lf.dense) * sizeof *to),
	       "the dense part copied as it is (%zu floats)", lf.total - lf.dense);
	/* NULL: row for row */
	float *same = malloc(lf.total * sizeof *same);
	number(same, lf.total, 100000);
	ncf_params_remap(&fs, from, &fs, same, NULL, NULL);
	tap_ok(!memcmp(same, from, lf.total * sizeof *same), "no maps: a copy");
	free(from), free(to), free(same);
}

int main(void)
{
	TEST(t_match(), "a model's ids matched against a cache's");
	TEST(t_match_names(), "named ids matched by their text");
	TEST(t_remap(), "a model's parameters onto a cache's rows");
	return tap_done();
}
