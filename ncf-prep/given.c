/* given.c - see given.h. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "given.h"
#include "io.h"

static FILE *open_file(void *ctx, const char *path, const char **display)
{
	(void)ctx;
	return ncf_in_open(path, display);
}

static void close_file(void *ctx, FILE *fp)
{
	(void)ctx;
	ncf_in_close(fp);
}

const struct prep_opener prep_open_files = {open_file, close_file, NULL};

void prep_given_init(struct prep_given *g)
{
	memset(g, 0, sizeof *g);
	ncf_idmap_init(&g->users);
	ncf_idmap_init(&g->items);
}

void prep_given_free(struct prep_given *g)
{
	ncf_idmap_free(&g->users);
	ncf_idmap_free(&g->items);
	prep_rows_free(&g->pos);
	free(g->neg_user);
	free(g->neg_item);
	free(g->test);
	free(g->cand);
	free(g->test_line);
	free(g->test_file);
	free(g->first_line);
	free(g->first_file);
	for (uint32_t k = 0; k < g->n_files; k++)
		free(g->files[k]);
	free(g->files);
	memset(g, 0, sizeof *g);
}

const char *prep_given_file(struct prep_given *g, const char *display)
{
	g->files = ncf_xrealloc(g->files, ((size_t)g->n_files + 1) * sizeof *g->files);
	g->files[g->n_files] = ncf_xstrdup(display);
	return g->files[g->n_files++];
}

/* The index of id in m into *x, the next one when id is new (at most
 * UINT32_MAX - 1 ids, as a ratings file's; one look-up while there is
 * room).  Returns 0, or -1 after reporting. */
static int index_of(struct ncf_idmap *m, uint32_t id, const char *what, const char *file,
		    uint64_t line, uint32_t *x)
{
	if (m->count >= UINT32_MAX - 1 && ncf_idmap_find(m, id) < 0) {
		ncf_error("%s:%llu: more than %u %s", file, (unsigned long long)line,
			  UINT32_MAX - 1, what);
		return -1;
	}
	*x = ncf_idmap_get(m, id);
	return 0;
}

/* The first line and file of each user, grown with the users. */
static void note_user(struct prep_given *g, uint32_t u, const char *file, uint64_t line)
{
	if (u >= g->first_cap) {
		size_t n = g->first_cap ? 2 * g->first_cap : 1024;
		g->first_line = ncf_xrealloc(g->first_line, n * sizeof *g->first_line);
		g->first_file = ncf_xrealloc(g->first_file, n * sizeof *g->first_file);
		g->first_cap = n;
	}
	g->first_line[u] = line;
	g->first_file[u] = file;
}

int prep_given_train(struct prep_given *g, uint32_t user, uint32_t item, int label, int64_t ts,
		     const char *file, uint64_t line)
{
	uint32_t u, i, users = g->users.count;
	NCF_TRY(index_of(&g->users, user, "users", file, line, &u));
	if (g->users.count != users)
		note_user(g, u, file, line);
	NCF_TRY(index_of(&g->items, item, "items", file, line, &i));
	if (label) {
		NCF_TRY(prep_rows_check_count((uint64_t)g->pos.n + 1));
		prep_rows_push(&g->pos, u, i, ts);
		return 0;
	}
	if (g->n_neg == g->cap_neg) {
		g->cap_neg = g->cap_neg ? 2 * g->cap_neg : 65536;
		g->neg_user = ncf_xrealloc(g->neg_user, g->cap_neg * sizeof *g->neg_user);
		g->neg_item = ncf_xrealloc(g->neg_item, g->cap_neg * sizeof *g->neg_item);
	}
	g->neg_user[g->n_neg] = u;
	g->neg_item[g->n_neg++] = i;
	return 0;
}

int prep_given_end_train(struct prep_given *g, const char *display)
{
	g->U = g->users.count;
	if (!g->U) {
		ncf_error("%s: no training rows", display);
		return -1;
	}
	g->test = ncf_xmalloc((size_t)g->U * sizeof *g->test);
	g->test_line = ncf_xcalloc(g->U, sizeof *g->test_line);
	g->test_file = ncf_xcalloc(g->U, sizeof *g->test_file);
	return 0;
}

int prep_given_test_user(const struct prep_given *g, uint32_t user, const char *file,
			 uint64_t line, uint32_t *u)
{
	int64_t x = ncf_idmap_find(&g->users, user);
	if (x < 0) {
		ncf_error("%s:%llu: user %u has no training rows (every test user needs some)", file,
			  (unsigned long long)line, user);
		return -1;
	}
	*u = (uint32_t)x;
	return 0;
}

int prep_given_series(struct prep_given *g, uint32_t user, uint32_t positive,
		      const uint32_t *negatives, uint32_t n, const char *file, uint64_t line)
{
	uint32_t u;
	NCF_TRY(prep_given_test_user(g, user, file, line, &u));
	if (g->test_line[u]) {
		ncf_error("%s:%llu: a second test series of user %u (the first is at %s:%llu)", file,
			  (unsigned long long)line, user, g->test_file[u],
			  (unsigned long long)g->test_line[u]);
		return -1;
	}
	if (g->series == 0) {
		if (n < 1 || n > NCF_CACHE_MAX_NEGATIVES) {
			ncf_error("%s:%llu: a series of %u negative candidates (1 to %u)", file,
				  (unsigned long long)line, n, NCF_CACHE_MAX_NEGATIVES);
			return -1;
		}
		if ((uint64_t)g->U * n > NCF_CACHE_MAX_SCORES) {
			ncf_error("%s:%llu: %u users x %u negative candidates is more than the 2^36 a "
				  "cache may hold",
				  file, (unsigned long long)line, g->U, n);
			return -1;
		}
		g->N = n;
		g->cand = ncf_xmalloc((size_t)g->U * n * sizeof *g->cand + 4);
	} else if (n != g->N) {
		ncf_error("%s:%llu: %u negative candidates, where the series before have %u (every "
			  "user has as many)",
			  file, (unsigned long long)line, n, g->N);
		return -1;
	}
	NCF_TRY(index_of(&g->items, positive, "items", file, line, &g->test[u]));
	uint32_t *c = g->cand + (size_t)u * g->N;
	for (uint32_t k = 0; k < n; k++)
		NCF_TRY(index_of(&g->items, negatives[k], "items", file, line, &c[k]));
	g->test_line[u] = line;
	g->test_file[u] = file;
	g->series++;
	return 0;
}

int prep_given_end_test(struct prep_given *g, const char *test)
{
	if (g->series == g->U)
		return 0;
	for (uint32_t u = 0; u < g->U; u++)
		if (!g->test_line[u]) {
			ncf_error("%s: no test series of user %u (its training rows begin at %s:%llu); "
				  "every user needs one",
				  test, g->users.ids[u], g->first_file[u],
				  (unsigned long long)g->first_line[u]);
			return -1;
		}
	return 0;
}

void prep_given_ids(struct prep_given *g, struct prep_rows *rows)
{
	rows->n_users = g->users.count;
	rows->n_items = g->items.count;
	rows->user_ids = ncf_idmap_take_ids(&g->users);
	rows->item_ids = ncf_idmap_take_ids(&g->items);
}
