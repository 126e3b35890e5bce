/* names.c - see names.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "err.h"
#include "names.h"

void ncf_names_add(struct ncf_names *m, const char *s, size_t len)
{
	if (m->n == m->start_cap) {
		m->start_cap = m->start_cap ? 2 * m->start_cap : 1024;
		m->start = ncf_xrealloc(m->start, m->start_cap * sizeof *m->start);
	}
	if (m->bytes + len + 1 > m->cap) {
		uint64_t cap = m->cap ? m->cap : 16384;
		while (cap < m->bytes + len + 1)
			cap *= 2;
		m->text = ncf_xrealloc(m->text, (size_t)cap);
		m->cap = cap;
	}
	m->start[m->n++] = m->bytes;
	memcpy(m->text + m->bytes, s, len);
	m->text[m->bytes + len] = 0;
	m->bytes += len + 1;
}

void ncf_names_free(struct ncf_names *m)
{
	free(m->text);
	free(m->start);
	memset(m, 0, sizeof *m);
}

void ncf_names_copy(struct ncf_names *dst, const struct ncf_names *src)
{
	ncf_names_free(dst);
	if (!src->n)
		return;
	dst->n = src->n;
	dst->bytes = dst->cap = src->bytes;
	dst->start_cap = src->n;
	dst->text = ncf_xmalloc((size_t)src->bytes);
	memcpy(dst->text, src->text, (size_t)src->bytes);
	dst->start = ncf_xmalloc((size_t)src->n * sizeof *dst->start);
	memcpy(dst->start, src->start, (size_t)src->n * sizeof *dst->start);
}

int ncf_text_is_u32(const char *s, size_t len, uint32_t *v)
{
	size_t i = len && s[0] == '+' ? 1 : 0;
	if (i == len)
		return 0;
	uint64_t x = 0;
	for (; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9)
			return 0;
		x = x * 10 + d;
		if (x > UINT32_MAX)
			return 0;
	}
	*v = (uint32_t)x;
	return 1;
}

const char *ncf_name_check(const char *s, size_t len)
{
	if (len == 0)
		return "empty";
	if (len > NCF_NAME_MAX)
		return "longer than 256 bytes";
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return "holds a control character";
	uint32_t v;
	if (ncf_text_is_u32(s, len, &v)) {
		char buf[NCF_ID_BUF];
		int n = snprintf(buf, sizeof buf, "%u", v);
		if ((size_t)n != len || memcmp(buf, s, len))
			return "an integer not in canonical form (7, not 07 or +7)";
	}
	return NULL;
}

/* The bytes of name k and their number. */
static const char *name_of(const struct ncf_names *m, uint32_t k, size_t *len)
{
	return ncf_names_at(m, k, len);
}

int ncf_names_cmp(const struct ncf_names *m, uint32_t k, const char *s, size_t len)
{
	size_t n;
	const char *a = name_of(m, k, &n);
	int c = memcmp(a, s, n < len ? n : len);
	return c ? c : (n > len) - (n < len);
}

static int cmp_two(const struct ncf_names *m, uint32_t a, uint32_t b)
{
	size_t n;
	const char *s = name_of(m, b, &n);
	return ncf_names_cmp(m, a, s, n);
}

void ncf_names_sort(const struct ncf_names *m, uint32_t *order)
{
	uint32_t n = m->n;
	for (uint32_t k = 0; k < n; k++)
		order[k] = k;
	if (n < 2)
		return;
	uint32_t *tmp = ncf_xmalloc((size_t)n * sizeof *tmp), *a = order, *b = tmp;
	/* bottom-up merge sort: runs of width 1, 2, 4, ... */
	for (uint64_t w = 1; w < n; w *= 2) {
		for (uint64_t lo = 0; lo < n; lo += 2 * w) {
			uint64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			uint64_t i = lo, j = mid, o = lo;
			while (i < mid && j < hi)
				b[o++] = cmp_two(m, a[j], a[i]) < 0 ? a[j++] : a[i++];
			while (i < mid)
				b[o++] = a[i++];
			while (j < hi)
				b[o++] = a[j++];
		}
		uint32_t *t = a;
		a = b;
		b = t;
	}
	if (a != order)
		memcpy(order, a, (size_t)n * sizeof *order);
	free(tmp);
}

int ncf_names_load(struct ncf_names *m, char *text, uint64_t bytes, uint32_t n, char *why,
		   size_t cap)
{
	if (n == 0 || bytes == 0 || text[bytes - 1] != 0) {
		snprintf(why, cap, "%s", n == 0 ? "names for no ids" : "the last name has no NUL");
		return -1;
	}
	struct ncf_names t = {.n = 0, .bytes = bytes, .text = text, .cap = bytes};
	t.start = ncf_xmalloc((size_t)n * sizeof *t.start);
	t.start_cap = n;
	uint64_t at = 0;
	while (at < bytes) {
		const char *s = text + at;
		size_t len = strnlen(s, (size_t)(bytes - at));
		if (t.n == n) {
			snprintf(why, cap, "more than the %u names expected", n);
			goto bad;
		}
		const char *wrong = ncf_name_check(s, len);
		if (wrong) {
			snprintf(why, cap, "name %u ('%s'): %s", t.n, ncf_escape(s, len, 40), wrong);
			goto bad;
		}
		t.start[t.n++] = at;
		at += len + 1;
	}
	if (t.n != n) {
		snprintf(why, cap, "%u names, expected %u", t.n, n);
		goto bad;
	}
	uint32_t *order = ncf_xmalloc((size_t)n * sizeof *order);
	ncf_names_sort(&t, order);
	for (uint32_t k = 1; k < n; k++)
		if (cmp_two(&t, order[k - 1], order[k]) == 0) {
			snprintf(why, cap, "name '%s' appears twice",
				 ncf_escape(name_of(&t, order[k], NULL),
					    strlen(name_of(&t, order[k], NULL)), 40));
			free(order);
			goto bad;
		}
	free(order);
	*m = t;
	return 0;
bad:
	free(t.start);
	return -1;
}

struct ncf_id ncf_id_at(const uint32_t *ids, const struct ncf_names *names, uint32_t k)
{
	if (names && names->n) {
		size_t len;
		const char *s = ncf_names_at(names, k, &len);
		return (struct ncf_id){s, (uint32_t)len, 0};
	}
	return (struct ncf_id){NULL, 0, ids[k]};
}

struct ncf_id ncf_id_from_text(const char *s, size_t len)
{
	uint32_t v;
	if (ncf_text_is_u32(s, len, &v))
		return (struct ncf_id){NULL, 0, v};
	return (struct ncf_id){s, (uint32_t)len, 0};
}

int ncf_id_equal(struct ncf_id a, struct ncf_id b)
{
	char buf[NCF_ID_BUF];
	if (!a.text && !b.text)
		return a.num == b.num;
	if (!a.text) {
		struct ncf_id t = a;
		a = b;
		b = t;
	}
	if (!b.text) { /* a names, b numbers: the number's digits */
		int n = snprintf(buf, sizeof buf, "%u", b.num);
		return a.len == (uint32_t)n && !memcmp(a.text, buf, (size_t)n);
	}
	return a.len == b.len && !memcmp(a.text, b.text, a.len);
}

const char *ncf_id_str(struct ncf_id id, char buf[NCF_ID_BUF])
{
	if (id.text)
		return id.text;
	snprintf(buf, NCF_ID_BUF, "%u", id.num);
	return buf;
}

const char *ncf_id_quote(struct ncf_id id, char *buf, size_t len)
{
	if (id.text)
		snprintf(buf, len, "'%s'", ncf_escape(id.text, id.len, 60));
	else
		snprintf(buf, len, "%u", id.num);
	return buf;
}

int ncf_id_print(FILE *fp, struct ncf_id id)
{
	char buf[NCF_ID_BUF];
	if (id.text)
		return fwrite(id.text, 1, id.len, fp) == id.len ? 0 : EOF;
	return fputs(ncf_id_str(id, buf), fp) < 0 ? EOF : 0;
}

/* s (len bytes) without the spaces around it, as an id: 0, or -1. */
static int one_id(const char *s, size_t len, struct ncf_id *id)
{
	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	*id = ncf_id_from_text(s, len);
	return id->text && ncf_name_check(s, len) ? -1 : 0;
}

int ncf_id_split(const char *s, int want, struct ncf_id *a, struct ncf_id *b)
{
	size_t len = strlen(s);
	if (want == 1)
		return one_id(s, len, a);
	char sep = strchr(s, '\t') ? '\t' : strchr(s, ',') ? ',' : ' ';
	size_t k = 0;
	while (sep == ' ' && k < len && s[k] == ' ')
		k++; /* spaces before the first id */
	const char *cut = memchr(s + k, sep, len - k);
	if (!cut)
		return -1;
	const char *rest = cut + 1;
	while (sep == ' ' && *rest == ' ')
		rest++; /* one run of spaces between the two */
	size_t rlen = strlen(rest);
	while (sep == ' ' && rlen && rest[rlen - 1] == ' ')
		rlen--;
	if (memchr(rest, sep, rlen))
		return -1; /* a third id */
	if (one_id(s, (size_t)(cut - s), a) != 0 || one_id(rest, rlen, b) != 0)
		return -1;
	return 0;
}

int ncf_names_read(struct ncf_cr *r, const char *tag, size_t n, struct ncf_names *names,
		   const uint32_t *ids, char *why, size_t cap)
{
	uint64_t bytes = names->bytes;
	names->bytes = 0;
	why[0] = 0;
	if (!bytes)
		return 0;
	void *text;
	size_t got;
	NCF_TRY(ncf_cr_section(r, tag, (size_t)bytes, 1, &text, &got));
	char load[160];
	if (ncf_names_load(names, text, bytes, (uint32_t)n, load, sizeof load) != 0) {
		free(text);
		snprintf(why, cap, "section '%s': %s", tag, load);
		return -1;
	}
	for (size_t k = 0; k < n; k++)
		if (ids[k] != k) {
			snprintf(why, cap,
				 "section '%s' names the ids, but the numbered ids are not the "
				 "indices (id %u at %zu)",
				 tag, ids[k], k);
			return -1;
		}
	return 0;
}
