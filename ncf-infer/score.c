/*
 * score.c - ncf-infer --score: "user item" lines in (original ids,
 * numbers or names), one probability out per line, in order.  Pairs are scored SCORE_BATCH at a
 * time, and whatever is pending is scored and written before the reader
 * blocks for more input, so that a pipe or a terminal gets each answer as
 * soon as its line is in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "infer.h"

#define SCORE_BATCH 65536 /* pairs scored per call */

struct pending {
	uint32_t *u, *it;
	uint8_t *known;
	float *out;
	size_t n;
};

static int flush_scores(struct ncf_backend *be, struct pending *pd)
{
	if (!pd->n)
		return 0;
	/* unknown pairs are scored as (0, 0) and printed as nan */
	if (ncf_backend_score(be, pd->u, pd->it, pd->n, pd->out) != 0)
		return -1;
	for (size_t j = 0; j < pd->n; j++) {
		if (pd->known[j])
			printf("%.9g\n", pd->out[j]);
		else
			fputs("nan\n", stdout);
	}
	pd->n = 0;
	if (fflush(stdout) != 0)
		return -1;
	return 0;
}

struct flush_ctx {
	struct ncf_backend *be;
	struct pending *pd;
};

static int flush_pending(void *arg)
{
	struct flush_ctx *f = arg;
	return flush_scores(f->be, f->pd);
}

int infer_score(struct ncf_backend *be, const struct infer_model *m, struct ncf_lines *l, int skip)
{
	struct pending pd = {0};
	pd.u = ncf_xmalloc(SCORE_BATCH * sizeof *pd.u);
	pd.it = ncf_xmalloc(SCORE_BATCH * sizeof *pd.it);
	pd.known = ncf_xmalloc(SCORE_BATCH);
	pd.out = ncf_xmalloc(SCORE_BATCH * sizeof *pd.out);
	uint64_t pairs = 0;
	int rc = -1;
	struct flush_ctx fc = {be, &pd};
	for (;;) {
		char *s;
		int got = ncf_lines_read(l, &s, flush_pending, &fc);
		if (got < 0)
			goto out;
		if (got == 0)
			break;
		struct ncf_id a, b;
		if (infer_read_ids(m, s, 2, &a, &b) != 0) {
			/* as for an unknown id: the lines before it are answered,
			 * whatever the reader had buffered */
			if (flush_scores(be, &pd) != 0)
				goto out;
			ncf_error("%s:%llu: expected 'user item' (two ids separated by spaces, a tab "
				  "or a comma), found '%s'; the %llu score%s before it %s written",
				  l->display, (unsigned long long)l->line, ncf_escape(s, strlen(s), 60),
				  (unsigned long long)pairs, pairs == 1 ? "" : "s",
				  pairs == 1 ? "is" : "are");
			goto out;
		}
		int64_t ui = ncf_idindex_find_id(&m->users, a), ii = ncf_idindex_find_id(&m->items, b);
		if ((ui < 0 || ii < 0) && !skip) {
			/* the lines before it are answered: scored and written */
			if (flush_scores(be, &pd) != 0)
				goto out;
			char id[160];
			ncf_error("%s:%llu: unknown %s id %s (the model knows %u users and %u items; "
				  "--skip-unknown writes nan instead); the %llu score%s before it %s "
				  "written",
				  l->display, (unsigned long long)l->line, ui < 0 ? "user" : "item",
				  ncf_id_quote(ui < 0 ? a : b, id, sizeof id), m->model.shape.users,
				  m->model.shape.items, (unsigned long long)pairs,
				  pairs == 1 ? "" : "s", pairs == 1 ? "is" : "are");
			goto out;
		}
		pd.known[pd.n] = ui >= 0 && ii >= 0;
		pd.u[pd.n] = ui >= 0 ? (uint32_t)ui : 0;
		pd.it[pd.n] = ii >= 0 ? (uint32_t)ii : 0;
		pd.n++;
		pairs++;
		if (pd.n == SCORE_BATCH && flush_scores(be, &pd) != 0)
			goto out;
	}
	if (pairs == 0) {
		ncf_error("%s: empty input, expected 'user item' lines", l->display);
		goto out;
	}
	ncf_debug("scored %llu pairs", (unsigned long long)pairs);
	rc = 0;
out:
	free(pd.u), free(pd.it), free(pd.known), free(pd.out);
	return rc;
}
