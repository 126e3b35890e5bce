/*
 * recommend.c - ncf-infer --recommend K: user ids in, each user's K best
 * items out (user<TAB>item<TAB>probability, best first).  Every item is
 * scored for the user (ncf_backend_logits); a min-heap of K candidates
 * keeps the best, ties going to the lower item index; --exclude-seen
 * leaves out the user's training items.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "infer.h"
#include "ncf_hd.h"

static int flush_stdout(void *unused)
{
	(void)unused;
	return fflush(stdout) != 0 ? -1 : 0;
}

struct cand {
	float logit;
	uint32_t item;
};

/* Better first: higher logit, then lower item index. */
static int cand_better(const struct cand *a, const struct cand *b)
{
	return a->logit > b->logit || (a->logit == b->logit && a->item < b->item);
}

static void heap_down(struct cand *h, size_t n, size_t i)
{
	/* a min-heap by "better": the root is the worst of the kept */
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		if (l < n && cand_better(&h[w], &h[l]))
			w = l;
		if (r < n && cand_better(&h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		struct cand t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	return cand_better(x, y) ? -1 : cand_better(y, x) ? 1 : 0;
}

/* Mark (on 1) or unmark (0) user ui's training items in excluded (I);
 * nothing without seen. */
static void mark_seen(const struct ncf_cache *seen, int64_t ui, uint8_t *excluded, uint8_t on)
{
	if (!seen)
		return;
	for (int64_t k = seen->offsets[ui]; k < seen->offsets[ui + 1]; k++)
		excluded[seen->train_items[k]] = on;
}

/* The K best of the I logits lg that are not excluded into heap, best
 * first.  Returns how many (K, or fewer when fewer items are left). */
static size_t top_k(const float *lg, uint32_t I, const uint8_t *excluded, uint32_t K,
		    struct cand *heap)
{
	size_t n = 0;
	for (uint32_t i = 0; i < I; i++) {
		if (excluded[i])
			continue;
		struct cand c = {lg[i], i};
		if (n < K) {
			heap[n++] = c;
			if (n == K)
				for (size_t k = K / 2 + 1; k-- > 0;)
					heap_down(heap, n, k);
		} else if (cand_better(&c, &heap[0])) {
			heap[0] = c;
			heap_down(heap, n, 0);
		}
	}
	qsort(heap, n, sizeof *heap, cmp_cand);
	return n;
}

int infer_recommend(struct ncf_backend *be, const struct infer_model *m, struct ncf_lines *l,
		    uint32_t K, const struct ncf_cache *seen, int skip)
{
	uint32_t I = m->model.shape.items;
	uint32_t *u = ncf_xmalloc((size_t)I * sizeof *u), *it = ncf_xmalloc((size_t)I * sizeof *it);
	float *lg = ncf_xmalloc((size_t)I * sizeof *lg);
	struct cand *heap = ncf_xmalloc(((size_t)K + 1) * sizeof *heap);
	uint8_t *excluded = ncf_xcalloc(I, 1);
	for (uint32_t i = 0; i < I; i++)
		it[i] = i;
	uint64_t users = 0;
	int rc = -1;
	for (;;) {
		char *s;
		int got = ncf_lines_read(l, &s, flush_stdout, NULL);
		if (got < 0)
			goto out;
		if (got == 0)
			break;
		struct ncf_id a, dummy;
		if (infer_read_ids(m, s, 1, &a, &dummy) != 0) {
			ncf_error("%s:%llu: expected a user id, found '%s'", l->display,
				  (unsigned long long)l->line, ncf_escape(s, strlen(s), 60));
			goto out;
		}
		users++;
		int64_t ui = ncf_idindex_find_id(&m->users, a);
		if (ui < 0) {
			if (skip) {
				ncf_id_print(stdout, a);
				fputs("\tnan\tnan\n", stdout);
				continue;
			}
			char id[160];
			ncf_error("%s:%llu: unknown user id %s (the model knows %u users; "
				  "--skip-unknown writes nan instead); the lists of the %llu user%s "
				  "before it are written",
				  l->display, (unsigned long long)l->line, ncf_id_quote(a, id, sizeof id),
				  m->model.shape.users, (unsigned long long)users - 1,
				  users == 2 ? "" : "s");
			goto out;
		}
		for (uint32_t i = 0; i < I; i++)
			u[i] = (uint32_t)ui;
		int lrc = ncf_backend_logits(be, u, it, I, lg);
		if (lrc != 0)
			goto out;
		mark_seen(seen, ui, excluded, 1);
		size_t n = top_k(lg, I, excluded, K, heap);
		mark_seen(seen, ui, excluded, 0);
		/* the user as the model has it, on each of its lines */
		struct ncf_id user =
			ncf_id_at(m->model.user_ids, &m->model.user_names, (uint32_t)ui);
		for (size_t k = 0; k < n; k++) {
			float p = ncf_sigmoid(heap[k].logit);
			ncf_id_print(stdout, user);
			putchar('\t');
			ncf_id_print(stdout, ncf_id_at(m->model.item_ids, &m->model.item_names,
						       heap[k].item));
			printf("\t%.9g\n", p);
		}
	}
	if (users == 0) {
		ncf_error("%s: empty input, expected user ids, one per line", l->display);
		goto out;
	}
	rc = 0;
out:
	free(u), free(it), free(lg), free(heap), free(excluded);
	return rc;
}
