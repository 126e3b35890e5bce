/* model_file.c - see model_file.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "ckpt.h"
#include "err.h"
#include "io.h"
#include "model_file.h"
#include "safetensors.h"

uint32_t ncf_model_file_fingerprint(const struct ncf_model *m)
{
	/* the cache's function on a cache holding only the sizes and ids */
	struct ncf_cache c;
	memset(&c, 0, sizeof c);
	c.users = m->shape.users;
	c.items = m->shape.items;
	c.user_ids = m->user_ids;
	c.item_ids = m->item_ids;
	c.user_names = m->user_names;
	c.item_names = m->item_names;
	return ncf_cache_fingerprint(&c);
}

static int from_ckpt(FILE *fp, const char *display, struct ncf_model *m)
{
	struct ncf_ckpt ck;
	if (ncf_ckpt_read_fp(fp, display, &ck, 0) != 0)
		return -1;
	m->shape = ck.shape;
	m->hp = ck.hp;
	m->user_ids = ck.user_ids;
	m->item_ids = ck.item_ids;
	m->user_names = ck.user_names;
	m->item_names = ck.item_names;
	m->params = ck.params;
	return 0;
}

void ncf_model_file_note_no_ids(const char *model_path, const char *cache_path,
				const struct ncf_cache *c)
{
	static int said;
	if (said++)
		return;
	char ub[NCF_ID_BUF], ib[NCF_ID_BUF];
	ncf_warn("%s has no original ids: its rows are taken as %s's users and items in "
		 "ncf-prep's order (row 0: user %s, item %s), right only if %s was made from the "
		 "ratings file the model was trained on; check that file's first rating and its "
		 "size against source_bytes in ncf-prep --info %s",
		 model_path, cache_path, c->users ? ncf_id_str(ncf_cache_user_id(c, 0), ub) : "0",
		 c->items ? ncf_id_str(ncf_cache_item_id(c, 0), ib) : "0", cache_path, cache_path);
}

/* Does the file look like safetensors: no "NCF" magic, and either the
 * name says so or byte 8 opens the JSON header? */
static int looks_safetensors(const char *path, const unsigned char *head, size_t n)
{
	if (n >= 3 && !memcmp(head, "NCF", 3))
		return 0;
	size_t len = strlen(path);
	if (len >= 12 && !strcmp(path + len - 12, ".safetensors"))
		return 1;
	return n >= 9 && head[8] == '{';
}

/*
 * What a file that neither reader takes is, judged by its first n bytes,
 * with the way to a file ncf reads; NULL when it is not one of these:
 *  - a zip archive ("PK\3\4"), as torch.save writes a .pth, or a pickle
 *    (0x80, protocol 2 to 5), as torch.save wrote one before PyTorch 1.6;
 *  - an ONNX ModelProto: field 1 (ir_version, a small varint: 08 NN)
 *    followed by another field of the message's (key byte 0x12 to 0x42).
 * A safetensors file (byte 8 opens its JSON header) is never one.
 */
static const char *foreign_model(const unsigned char *head, size_t n)
{
	if (n >= 9 && head[8] == '{')
		return NULL;
	if ((n >= 4 && !memcmp(head, "PK\3\4", 4)) || (n >= 2 && head[0] == 0x80 && head[1] >= 2 &&
							 head[1] <= 5))
		return "a PyTorch checkpoint (torch.save's .pth), not a file ncf reads: save its "
		       "state_dict as safetensors (three lines of Python in ncf-infer(1), EXPORT, "
		       "\"Models trained by NVIDIA's PyTorch NCF\")";
	if (n >= 3 && head[0] == 0x08 && head[1] >= 1 && head[1] < 0x80 && head[2] >= 0x12 &&
	    head[2] <= 0x42 && (head[2] & 7) <= 2)
		return "an ONNX model, which ncf writes (ncf-infer --export) but does not read: give "
		       "the checkpoint or safetensors file it was exported from, or for a model "
		       "from PyTorch its state_dict as safetensors (ncf-infer(1), EXPORT)";
	return NULL;
}

int ncf_model_file_read(const char *path, const struct ncf_model_want *want,
			struct ncf_model *m)
{
	memset(m, 0, sizeof *m);
	if (!path || !strcmp(path, "-")) {
		/* a pipe: one byte can be put back */
		int c = getc(stdin);
		if (c == EOF && ferror(stdin)) {
			ncf_error("<stdin>: read failed: %s", strerror(errno));
			return -1;
		}
		if (c != EOF)
			ungetc(c, stdin);
		if (c == 'N' || c == EOF)
			return from_ckpt(stdin, "<stdin>", m);
		return ncf_safetensors_read(stdin, "<stdin>", want, m);
	}
	const char *display;
	FILE *fp = ncf_in_open(path, &display);
	if (!fp)
		return -1;
	struct stat st;
	int regular = fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode);
	unsigned char head[9];
	/* a FIFO or device cannot be looked into and read again: its name decides */
	size_t n = regular ? fread(head, 1, sizeof head, fp) : 0;
	int rc;
	const char *foreign = foreign_model(head, n);
	if (regular && fseek(fp, 0, SEEK_SET) != 0) {
		ncf_error("%s: %s", display, strerror(errno));
		rc = -1;
	} else if (foreign) {
		ncf_error("%s: %s", display, foreign);
		rc = -1;
	} else if (looks_safetensors(path, head, n)) {
		rc = ncf_safetensors_read(fp, display, want, m);
	} else {
		/* a checkpoint, or a file that is neither: the checkpoint reader
		 * says what it is */
		rc = from_ckpt(fp, display, m);
	}
	ncf_in_close(fp);
	return rc;
}
