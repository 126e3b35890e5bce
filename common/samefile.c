/* samefile.c - see samefile.h. */
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

int ncf_refuse_same_file(const struct ncf_named *f, size_t n)
{
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
	return rc;
}
