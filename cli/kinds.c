/* kinds.c - see kinds.h. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "kinds.h"

/* Text: no NUL and no control byte but tab, CR and LF in the first n
 * bytes, and valid UTF-8 (a character cut by the end of the sample
 * counts). */
static int is_text(const unsigned char *b, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		if (b[k] < 0x20 && b[k] != '\t' && b[k] != '\r' && b[k] != '\n')
			return 0;
		if (b[k] < 0x80)
			continue;
		int more = b[k] >= 0xf0 && b[k] < 0xf5 ? 3 : b[k] >= 0xe0 ? 2 : b[k] >= 0xc2 ? 1 : -1;
		if (more < 0 || b[k] >= 0xf5)
			return 0;
		for (; more > 0 && k + 1 < n; more--)
			if ((b[++k] & 0xc0) != 0x80)
				return 0;
	}
	return n > 0;
}

enum ncf_kind ncf_kind_of(const char *path)
{
	struct stat st;
	if (!path || !strcmp(path, "-") || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return NCF_KIND_UNKNOWN;
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NCF_KIND_UNKNOWN;
	unsigned char b[256];
	size_t n = fread(b, 1, sizeof b, fp);
	fclose(fp);
	if (n >= 8 && !memcmp(b, "NCFCACHE", 8))
		return NCF_KIND_CACHE;
	if (n >= 8 && !memcmp(b, "NCFMODEL", 8))
		return NCF_KIND_MODEL;
	if (n >= 3 && !memcmp(b, "NCF", 3))
		return NCF_KIND_UNKNOWN; /* another ncf file: the reader says which */
	/* safetensors: a little-endian u64 header length, then the JSON header */
	uint64_t hl = 0;
	for (int k = 7; n >= 9 && k >= 0; k--)
		hl = hl << 8 | b[k];
	if (n >= 9 && b[8] == '{' && hl >= 2 && hl < (uint64_t)st.st_size)
		return NCF_KIND_SAFETENSORS;
	if (n < 8)
		return NCF_KIND_UNKNOWN;
	return is_text(b, n) ? NCF_KIND_TEXT : NCF_KIND_OTHER;
}

const char *ncf_kind_says(enum ncf_kind k)
{
	switch (k) {
	case NCF_KIND_CACHE:
		return "a cache (ncf-prep's)";
	case NCF_KIND_MODEL:
		return "a model (ncf-train's checkpoint)";
	case NCF_KIND_SAFETENSORS:
		return "a model (safetensors)";
	case NCF_KIND_TEXT:
		return "a text file";
	default:
		return "a file of another kind";
	}
}

const char *ncf_kind_cache_name(const char *path, char *buf, size_t len)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');
	size_t stem = dot && dot != base ? (size_t)(dot - base) : strlen(base);
	snprintf(buf, len, "%.*s.ncfc", (int)stem, base);
	return buf;
}
