/* samefile.c - see samefile.h. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "io.h"
#include "samefile.h"

struct ident {
	int kind;	 /* 0 nothing to compare, 1 dev/ino, 2 a name to be created */
	dev_t dev;
	ino_t ino;
	char *name;
};

static void identify(const struct ncf_named *f, struct ident *id)
{
	memset(id, 0, sizeof *id);
	struct stat st;
	if (!strcmp(f->path, "-")) {
		if (fstat(f->output ? STDOUT_FILENO : STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode))
			id->kind = 1, id->dev = st.st_dev, id->ino = st.st_ino;
		return;
	}
	if (stat(f->path, &st) == 0) {
		if (S_ISREG(st.st_mode))
			id->kind = 1, id->dev = st.st_dev, id->ino = st.st_ino;
		return;
	}
	/* not there yet (or a dangling link): the name it would be created as */
	id->kind = 2;
	id->name = ncf_out_final_name(f->path);
}

static int same(const struct ident *a, const struct ident *b)
{
	if (a->kind != b->kind || !a->kind)
		return 0;
	if (a->kind == 1)
		return a->dev == b->dev && a->ino == b->ino;
	return !strcmp(a->name, b->name);
}

/* "-o r.csv", or "standard output" for "-". */
static void describe(const struct ncf_named *f, char *buf, size_t n)
{
	if (!strcmp(f->path, "-"))
		snprintf(buf, n, "%s", f->output ? "standard output" : "standard input");
	else
		snprintf(buf, n, "%s %s", f->what, ncf_escape(f->path, strlen(f->path), 200));
}

/* The part of a path after its last slash. */
static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Is name (a file name, no directory) member 1..last of the series whose
 * prefix has the file name base: base, the series text, then the number
 * as "%03u" writes it? */
static int is_member(const char *name, const char *base, const char *series, unsigned last)
{
	size_t nb = strlen(base), ns = strlen(series);
	if (strncmp(name, base, nb) != 0 || strncmp(name + nb, series, ns) != 0)
		return 0;
	const char *digits = name + nb + ns;
	if (!*digits || strlen(digits) > 10 || strspn(digits, "0123456789") != strlen(digits))
		return 0;
	unsigned long v = strtoul(digits, NULL, 10);
	char again[16];
	snprintf(again, sizeof again, "%03lu", v);
	return v >= 1 && v <= last && !strcmp(again, digits);
}

/* Members of the growing list *out (*m of them). */
static void add_member(struct ncf_named **out, size_t *m, size_t *cap, const struct ncf_named *s,
		       const char *name)
{
	for (size_t k = 0; k < *m; k++)
		if ((*out)[k].series == s->series && !strcmp(base_of((*out)[k].path), name))
			return; /* found both ways */
	if (*m == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*out = ncf_xrealloc(*out, *cap * sizeof **out);
	}
	size_t dir = (size_t)(base_of(s->path) - s->path), len = dir + strlen(name) + 1;
	char *path = ncf_xmalloc(len);
	snprintf(path, len, "%.*s%s", (int)dir, s->path, name);
	(*out)[*m] = (struct ncf_named){.path = path, .what = s->what, .output = 1,
					.series = s->series};
	(*m)++;
}

/*
 * f's n files with each series replaced by its members that can meet
 * another file: the names in the prefix's directory, and the names the
 * other files lead to (ncf_out_final_name) when they fall in the series.
 * Members are marked by their series field (their paths are malloc'd).
 */
static struct ncf_named *expand(const struct ncf_named *f, size_t n, size_t *m)
{
	struct ncf_named *out = NULL;
	size_t cap = 0;
	*m = 0;
	for (size_t j = 0; j < n; j++) {
		if (!f[j].series || !f[j].path) {
			if (*m == cap) {
				cap = cap ? cap * 2 : 16;
				out = ncf_xrealloc(out, cap * sizeof *out);
			}
			out[(*m)++] = f[j];
			out[*m - 1].series = NULL;
			continue;
		}
		const char *base = base_of(f[j].path);
		char *dir = ncf_path_dir(f[j].path);
		DIR *d = opendir(dir);
		for (struct dirent *e; d && (e = readdir(d));)
			if (is_member(e->d_name, base, f[j].series, f[j].series_last))
				add_member(&out, m, &cap, &f[j], e->d_name);
		if (d)
			closedir(d);
		char *real_dir = realpath(dir, NULL);
		for (size_t i = 0; i < n && real_dir; i++) {
			if (i == j || !f[i].path || f[i].series || !strcmp(f[i].path, "-"))
				continue;
			char *final = ncf_out_final_name(f[i].path);
			char *final_dir = ncf_path_dir(final);
			if (!strcmp(final_dir, real_dir) &&
			    is_member(base_of(final), base, f[j].series, f[j].series_last))
				add_member(&out, m, &cap, &f[j], base_of(final));
			free(final_dir);
			free(final);
		}
		free(real_dir);
		free(dir);
	}
	return out;
}

static void free_expanded(struct ncf_named *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (f[i].series)
			free((char *)f[i].path);
	free(f);
}

int ncf_refuse_same_file(const struct ncf_named *given, size_t given_n)
{
	size_t n;
	struct ncf_named *f = expand(given, given_n, &n);
	struct ident *id = ncf_xcalloc(n ? n : 1, sizeof *id);
	for (size_t i = 0; i < n; i++)
		if (f[i].path)
			identify(&f[i], &id[i]);
	int rc = 0;
	for (size_t j = 0; j < n && !rc; j++) {
		if (!f[j].path || !f[j].output)
			continue;
		for (size_t i = 0; i < n && !rc; i++) {
			if (i == j || !f[i].path || !same(&id[i], &id[j]))
				continue;
			if (!f[i].output && f[i].read_first && !f[j].appends)
				continue; /* read in full first: replacing it is safe */
			if (f[i].output && (i > j || (!strcmp(f[i].path, "-") && !strcmp(f[j].path, "-"))))
				continue; /* each pair of outputs once; stdout may be shared */
			/* i: an input, or an earlier output */
			char a[512], b[512];
			describe(&f[j], a, sizeof a);
			describe(&f[i], b, sizeof b);
			ncf_error("%s is the same file as %s; %s", a, b,
				  f[i].output ? "name two different files"
					      : "refusing to overwrite an input");
			rc = -1;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(id[i].name);
	free(id);
	free_expanded(f, n);
	return rc;
}

int ncf_probe_outputs(const struct ncf_named *given, size_t given_n)
{
	size_t n;
	struct ncf_named *f = expand(given, given_n, &n);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		if (f[i].output && f[i].path && strcmp(f[i].path, "-"))
			rc = ncf_out_probe(f[i].path, f[i].appends);
	/* the members not there yet: the first one stands for them all */
	for (size_t j = 0; j < given_n && !rc; j++) {
		if (!given[j].series || !given[j].path || !given[j].series_last)
			continue;
		size_t len = strlen(given[j].path) + strlen(given[j].series) + 4;
		char *first = ncf_xmalloc(len);
		snprintf(first, len, "%s%s001", given[j].path, given[j].series);
		rc = ncf_out_probe(first, 0);
		free(first);
	}
	free_expanded(f, n);
	return rc;
}
