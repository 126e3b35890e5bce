/*
 * replay.c - run a fuzz harness on files, without libFuzzer: make check
 * replays tests/fuzz/regress/TARGET/ with it (under the normal build and
 * under ASan+UBSan+LSan).  Exits 0 when every input ran to its end (a
 * harness aborts on a broken invariant, a sanitizer on a bug).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int n = 0;
	for (int i = 1; i < argc; i++) {
		FILE *fp = fopen(argv[i], "rb");
		if (!fp) {
			perror(argv[i]);
			return 2;
		}
		size_t cap = 1 << 16, len = 0;
		uint8_t *buf = malloc(cap);
		size_t got;
		while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
			len += got;
			if (len == cap)
				buf = realloc(buf, cap *= 2);
		}
		fclose(fp);
		if (!buf)
			return 2;
		LLVMFuzzerTestOneInput(buf, len);
		free(buf);
		n++;
	}
	printf("replayed %d input%s\n", n, n == 1 ? "" : "s");
	return 0;
}
