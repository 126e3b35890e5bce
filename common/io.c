/* io.c - see io.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "io.h"

/* Temporary names that a signal handler must remove. */
#define NCF_MAX_TMP 16
static char *volatile tmp_registry[NCF_MAX_TMP];

static int registry_add(char *path)
{
	for (int i = 0; i < NCF_MAX_TMP; i++)
		if (!tmp_registry[i]) {
			tmp_registry[i] = path;
			return i;
		}
	return -1;
}

void ncf_out_cleanup_all(void)
{
	for (int i = 0; i < NCF_MAX_TMP; i++) {
		char *p = tmp_registry[i];
		if (p)
			unlink(p);
	}
}

static void on_signal(int sig)
{
	ncf_out_cleanup_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

void ncf_out_cleanup_on_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

int ncf_out_open(struct ncf_out *o, const char *path, int binary)
{
	memset(o, 0, sizeof *o);
	o->slot = -1;
	if (!path || !strcmp(path, "-")) {
		if (binary && isatty(STDOUT_FILENO)) {
			ncf_error("refusing to write binary data to a terminal; use -o FILE or "
				  "redirect stdout");
			return -1;
		}
		o->fp = stdout;
		o->display = "<stdout>";
		return 0;
	}
	struct stat st;
	int exists = stat(path, &st) == 0;
	if (exists && S_ISDIR(st.st_mode)) {
		ncf_error("%s: is a directory", path);
		return -1;
	}
	if (exists && !S_ISREG(st.st_mode)) {
		/* a device, a FIFO, /dev/stdout: write to it as it is (there is
		 * no partial file to protect, and renaming would replace it) */
		o->fp = fopen(path, "wb");
		if (!o->fp) {
			ncf_error("%s: cannot open: %s", path, strerror(errno));
			return -1;
		}
		o->display = path;
		return 0;
	}
	/* a symbolic link: write next to, and rename over, what it points to */
	char *real = exists ? realpath(path, NULL) : NULL;
	o->path = real ? real : ncf_xstrdup(path);
	o->display = path;
	path = o->path;
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	size_t n = strlen(path) + 16;
	o->tmp = ncf_xmalloc(n);
	snprintf(o->tmp, n, "%.*s.%s.XXXXXX", (int)dirlen, path, path + dirlen);
	int fd = mkstemp(o->tmp);
	if (fd < 0) {
		ncf_error("%s: cannot create a file in its directory: %s", o->display,
			  strerror(errno));
		free(o->tmp);
		free(o->path);
		o->tmp = o->path = NULL;
		return -1;
	}
	/* mkstemp makes 0600: keep the mode of the file replaced, else give the
	 * mode a plain creat() would */
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(fd, exists ? (st.st_mode & 07777) : (0666 & ~mask)) != 0) {
		/* not fatal: the file still works */
	}
	o->slot = registry_add(o->tmp);
	o->fp = fdopen(fd, "wb");
	if (!o->fp) {
		ncf_error("%s: %s", o->display, strerror(errno));
		close(fd);
		ncf_out_abort(o);
		return -1;
	}
	return 0;
}

void ncf_out_abort(struct ncf_out *o)
{
	if (o->fp && o->fp != stdout)
		fclose(o->fp);
	o->fp = NULL;
	if (o->tmp) {
		unlink(o->tmp);
		if (o->slot >= 0)
			tmp_registry[o->slot] = NULL;
		free(o->tmp);
		o->tmp = NULL;
	}
	free(o->path);
	o->path = NULL;
	o->slot = -1;
}

int ncf_out_commit(struct ncf_out *o)
{
	if (o->fp && o->fp != stdout && !o->tmp) { /* a device or FIFO, written in place */
		int bad = fflush(o->fp) != 0 || ferror(o->fp);
		int err = errno;
		if (fclose(o->fp) != 0 && !bad)
			bad = 1, err = errno;
		o->fp = NULL;
		if (bad) {
			ncf_error("%s: write failed: %s", o->display, strerror(err ? err : EIO));
			return -1;
		}
		return 0;
	}
	if (o->fp == stdout) {
		if (fflush(stdout) != 0 || ferror(stdout)) {
			ncf_error("<stdout>: write failed: %s", strerror(errno));
			o->fp = NULL;
			return -1;
		}
		o->fp = NULL;
		return 0;
	}
	int bad = 0;
	if (fflush(o->fp) != 0 || ferror(o->fp))
		bad = errno ? errno : EIO;
	if (!bad && fsync(fileno(o->fp)) != 0 && errno != EINVAL && errno != EROFS)
		bad = errno;
	if (fclose(o->fp) != 0 && !bad)
		bad = errno ? errno : EIO;
	o->fp = NULL;
	if (!bad && rename(o->tmp, o->path) != 0)
		bad = errno;
	if (bad) {
		ncf_error("%s: write failed: %s", o->display, strerror(bad));
		ncf_out_abort(o);
		return -1;
	}
	if (o->slot >= 0)
		tmp_registry[o->slot] = NULL;
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	o->slot = -1;
	return 0;
}

FILE *ncf_in_open(const char *path, const char **display)
{
	if (!path || !strcmp(path, "-")) {
		*display = "<stdin>";
		return stdin;
	}
	*display = path;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		ncf_error("%s: is a directory", path);
		return NULL;
	}
	FILE *fp = fopen(path, "rb");
	if (!fp)
		ncf_error("%s: %s", path, strerror(errno));
	return fp;
}

void ncf_in_close(FILE *fp)
{
	if (fp && fp != stdin)
		fclose(fp);
}

int ncf_read_full(FILE *fp, void *buf, size_t n)
{
	errno = 0;
	size_t got = fread(buf, 1, n, fp);
	if (got == n)
		return 0;
	if (!ferror(fp))
		errno = 0;
	return -1;
}

int ncf_write_full(FILE *fp, const void *buf, size_t n)
{
	if (n && fwrite(buf, 1, n, fp) != n)
		return -1;
	return 0;
}

int ncf_close_stdout(void)
{
	int bad = 0;
	if (fflush(stdout) != 0 || ferror(stdout))
		bad = errno ? errno : EIO;
	if (fclose(stdout) != 0 && !bad)
		bad = errno ? errno : EIO;
	if (bad) {
		if (bad == EPIPE)
			return 0; /* the reader went away: not our error (... | head) */
		ncf_error("<stdout>: write failed: %s", strerror(bad));
		return -1;
	}
	return 0;
}
