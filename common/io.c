/* io.c - see io.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "io.h"

/*
 * Temporary names that a signal handler (or the dist watchdog, on its own
 * thread) must remove while a writer may be adding and dropping them on
 * another thread (ncf-train's checkpoint writer): fixed slots that hold a
 * copy of the name, claimed and released atomically, so that the cleanup
 * never follows a pointer that may just have been freed.  A name longer
 * than a slot is not registered (then a signal leaves it).
 */
#define NCF_MAX_TMP 16
#define NCF_TMP_NAME 4096
static char tmp_names[NCF_MAX_TMP][NCF_TMP_NAME];
static int tmp_state[NCF_MAX_TMP]; /* 0 free, 1 being filled, 2 registered */

static int registry_add(const char *path)
{
	size_t n = strlen(path);
	if (n >= NCF_TMP_NAME)
		return -1;
	for (int i = 0; i < NCF_MAX_TMP; i++) {
		int expected = 0;
		if (__atomic_compare_exchange_n(&tmp_state[i], &expected, 1, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			memcpy(tmp_names[i], path, n + 1);
			__atomic_store_n(&tmp_state[i], 2, __ATOMIC_RELEASE);
			return i;
		}
	}
	return -1;
}

void ncf_out_cleanup_all(void)
{
	for (int i = 0; i < NCF_MAX_TMP; i++)
		if (__atomic_load_n(&tmp_state[i], __ATOMIC_ACQUIRE) == 2)
			unlink(tmp_names[i]);
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

static void registry_drop(int slot)
{
	if (slot >= 0)
		__atomic_store_n(&tmp_state[slot], 0, __ATOMIC_RELEASE);
}

char *ncf_path_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return ncf_xstrdup(".");
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	char *d = ncf_xmalloc(n + 1);
	memcpy(d, path, n);
	d[n] = 0;
	return d;
}

char *ncf_out_final_name(const char *path)
{
	char *cur = ncf_xstrdup(path);
	for (int hops = 0; hops < 40; hops++) {
		struct stat st;
		if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
			break;
		char target[4096];
		ssize_t n = readlink(cur, target, sizeof target - 1);
		if (n <= 0)
			break;
		target[n] = 0;
		char *next;
		if (target[0] == '/') {
			next = ncf_xstrdup(target);
		} else {
			char *d = ncf_path_dir(cur);
			size_t len = strlen(d) + strlen(target) + 2;
			next = ncf_xmalloc(len);
			snprintf(next, len, "%s/%s", d, target);
			free(d);
		}
		free(cur);
		cur = next;
	}
	/* the directory made absolute, so that two spellings of one name
	 * compare equal (ncf_refuse_same_file) */
	char *d = ncf_path_dir(cur);
	char *real = realpath(d, NULL);
	free(d);
	if (!real)
		return cur;
	const char *slash = strrchr(cur, '/');
	const char *base = slash ? slash + 1 : cur;
	size_t len = strlen(real) + strlen(base) + 2;
	char *out = ncf_xmalloc(len);
	snprintf(out, len, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
	free(real);
	free(cur);
	return out;
}

/* The umask, read once while the process has one thread (first from
 * ncf_init_std_streams): reading it means setting it, which must not
 * happen while another thread creates files. */
static mode_t cached_umask;
static int have_umask;

static mode_t process_umask(void)
{
	if (!have_umask) {
		cached_umask = umask(0);
		umask(cached_umask);
		have_umask = 1;
	}
	return cached_umask;
}

void ncf_init_std_streams(void)
{
	process_umask();
	signal(SIGPIPE, SIG_DFL);
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
			int n = open("/dev/null", O_RDONLY);
			if (n >= 0 && n != fd) {
				dup2(n, fd);
				close(n);
			}
		}
}

/* Replace the six bytes at x by random letters and digits. */
static void fill_random(char *x)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char r[6];
	if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t v = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
		for (int i = 0; i < 6; i++, v >>= 8)
			r[i] = (unsigned char)v;
	}
	for (int i = 0; i < 6; i++)
		x[i] = set[r[i] % (sizeof set - 1)];
}

/* A temporary name for final in its directory: DIR/.NAME.XXXXXX. */
static char *temp_name(const char *final)
{
	const char *slash = strrchr(final, '/');
	size_t dirlen = slash ? (size_t)(slash - final) + 1 : 0;
	size_t n = strlen(final) + 16;
	char *t = ncf_xmalloc(n);
	snprintf(t, n, "%.*s.%s.XXXXXX", (int)dirlen, final, final + dirlen);
	return t;
}

/* Where an output to path goes, as ncf_out_open sees it before it
 * creates anything: -1 after reporting (a directory, a name that cannot
 * be looked up), 0 for a name to create or replace (*exists, *st), 1 for
 * a FIFO or device, written in place. */
static int out_target(const char *path, struct stat *st, int *exists)
{
	*exists = stat(path, st) == 0;
	if (!*exists && errno != ENOENT) { /* a loop of links, a file as a directory */
		ncf_error("%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	if (*exists && S_ISDIR(st->st_mode)) {
		ncf_error("%s: is a directory", path);
		return -1;
	}
	return *exists && !S_ISREG(st->st_mode);
}

/* "cannot create" for display (the name given) whose final name is
 * final: the system's words e, and where a link leads if it does. */
static void report_cannot_create(const char *display, const char *final, int e)
{
	struct stat ls;
	if (lstat(display, &ls) == 0 && S_ISLNK(ls.st_mode))
		ncf_error("%s: cannot create %s, where the link leads: %s", display, final,
			  strerror(e));
	else
		ncf_error("%s: cannot create a file in its directory: %s", display, strerror(e));
}

/* NCF_NO_TMPFILE (tests, file systems that misreport it): named
 * temporary files only. */
static int no_tmpfile(void)
{
	const char *no = getenv("NCF_NO_TMPFILE");
	return no && *no && strcmp(no, "0");
}

/* An unnamed file in dir (O_TMPFILE), or -1 (errno). */
static int open_unnamed(const char *dir)
{
	if (no_tmpfile()) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
}

int ncf_out_probe(const char *path, int in_place)
{
	struct stat st;
	int exists;
	int kind = out_target(path, &st, &exists);
	if (kind != 0)
		return kind < 0 ? -1 : 0;
	if (in_place && exists) {
		/* written where it is (ncf-train --log): the file must take writes */
		if (access(path, W_OK) != 0) {
			ncf_error("%s: cannot open: %s", path, strerror(errno));
			return -1;
		}
		return 0;
	}
	char *final = ncf_out_final_name(path);
	char *dir = ncf_path_dir(final);
	int fd = open_unnamed(dir);
	int rc = 0;
	if (fd >= 0) {
		close(fd); /* an unnamed file: gone with its descriptor */
	} else {
		/* a temporary name, made and removed at once */
		char *tmp = temp_name(final);
		fd = mkstemp(tmp);
		if (fd < 0) {
			report_cannot_create(path, final, errno);
			rc = -1;
		} else {
			unlink(tmp);
			close(fd);
		}
		free(tmp);
	}
	free(dir);
	free(final);
	return rc;
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
		o->kind = NCF_OUT_STDOUT;
		o->display = "<stdout>";
		return 0;
	}
	o->display = path;
	struct stat st;
	int exists;
	int kind = out_target(path, &st, &exists);
	if (kind < 0)
		return -1;
	if (kind) {
		/* a device, a FIFO, /dev/stdout: write to it as it is (there is
		 * no partial file to protect, and renaming would replace it) */
		o->fp = fopen(path, "wb");
		if (!o->fp) {
			ncf_error("%s: cannot open: %s", path, strerror(errno));
			return -1;
		}
		o->kind = NCF_OUT_INPLACE;
		return 0;
	}
	/* a symbolic link, dangling or not: write what it points to */
	o->path = ncf_out_final_name(path);
	o->replace = exists;
	/* keep the mode of the file replaced, else the mode creat() gives */
	mode_t mask = process_umask();
	mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~mask);
	char *dir = ncf_path_dir(o->path);
	int fd = open_unnamed(dir);
	free(dir);
	if (fd >= 0) {
		o->kind = NCF_OUT_UNNAMED;
	} else {
		/* no O_TMPFILE here (or no such directory: mkstemp says which) */
		o->tmp = temp_name(o->path);
		fd = mkstemp(o->tmp);
		if (fd < 0) {
			report_cannot_create(o->display, o->path, errno);
			free(o->tmp);
			free(o->path);
			o->tmp = o->path = NULL;
			return -1;
		}
		o->kind = NCF_OUT_TEMPNAME;
		o->slot = registry_add(o->tmp);
	}
	if (fchmod(fd, mode) != 0) {
		/* not fatal: the file still works */
	}
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
		registry_drop(o->slot);
		free(o->tmp);
		o->tmp = NULL;
	}
	free(o->path);
	o->path = NULL;
	o->slot = -1;
}

/*
 * Give the unnamed file fd the name o->path.  A new name is linked at once
 * (atomic, nothing to clean up); an existing one is replaced by linking a
 * temporary name and renaming it over, the only moment a SIGKILL could
 * leave a temporary file.  Returns 0 or an errno value.
 */
static int link_fd(int fd, const char *name)
{
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != ENOENT || access("/proc/self/fd", F_OK) == 0)
		return -1;
	/* no /proc: AT_EMPTY_PATH, which needs CAP_DAC_READ_SEARCH */
	return linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH);
}

static int link_unnamed(struct ncf_out *o, int fd)
{
	if (!o->replace) {
		if (link_fd(fd, o->path) == 0)
			return 0;
		if (errno != EEXIST)
			return errno;
		/* created meanwhile by someone else: replace it as below */
	}
	for (int tries = 0; tries < 100; tries++) {
		o->tmp = temp_name(o->path);
		fill_random(o->tmp + strlen(o->tmp) - 6);
		o->slot = registry_add(o->tmp);
		if (link_fd(fd, o->tmp) == 0)
			break;
		int e = errno;
		registry_drop(o->slot);
		o->slot = -1;
		free(o->tmp);
		o->tmp = NULL;
		if (e != EEXIST)
			return e;
	}
	if (!o->tmp)
		return EEXIST;
	if (rename(o->tmp, o->path) != 0)
		return errno;
	registry_drop(o->slot);
	o->slot = -1;
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

int ncf_out_end(struct ncf_out *o, int failed)
{
	if (!failed)
		return ncf_out_commit(o);
	ncf_out_abort(o);
	return -1;
}

/* ncf_out_commit of a file written in place (NCF_OUT_INPLACE): flushed
 * and closed. */
static int commit_inplace(struct ncf_out *o)
{
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

/* ncf_out_commit of stdout: flushed, left open (the tool closes it). */
static int commit_stdout(struct ncf_out *o)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		ncf_error("<stdout>: write failed: %s", strerror(errno ? errno : EIO));
		o->fp = NULL;
		return -1;
	}
	o->fp = NULL;
	return 0;
}

/* ncf_out_commit of a file written beside its final name (unnamed or
 * under a temporary name): flushed, synced, closed, then given its name;
 * on failure removed (ncf_out_abort). */
static int commit_file(struct ncf_out *o)
{
	int bad = 0;
	errno = 0;
	if (fflush(o->fp) != 0 || ferror(o->fp))
		bad = errno ? errno : EIO;
	if (!bad && fsync(fileno(o->fp)) != 0 && errno != EINVAL && errno != EROFS)
		bad = errno;
	if (!bad && o->kind == NCF_OUT_UNNAMED)
		bad = link_unnamed(o, fileno(o->fp));
	if (fclose(o->fp) != 0 && !bad)
		bad = errno ? errno : EIO;
	o->fp = NULL;
	if (!bad && o->kind == NCF_OUT_TEMPNAME && rename(o->tmp, o->path) != 0)
		bad = errno;
	if (bad) {
		ncf_error("%s: write failed: %s", o->display, strerror(bad));
		ncf_out_abort(o);
		return -1;
	}
	registry_drop(o->slot);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	o->slot = -1;
	return 0;
}

int ncf_out_commit(struct ncf_out *o)
{
	if (o->kind == NCF_OUT_INPLACE)
		return commit_inplace(o);
	if (o->kind == NCF_OUT_STDOUT)
		return commit_stdout(o);
	return commit_file(o);
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

const char *ncf_tmp_dir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}

int ncf_tmp_open(void)
{
	const char *dir = ncf_tmp_dir();
	int fd = no_tmpfile() ? -1 : open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	size_t n = strlen(dir) + 32;
	char *name = ncf_xmalloc(n);
	snprintf(name, n, "%s/.ncf-spill.XXXXXX", dir);
	fd = mkstemp(name);
	if (fd < 0) {
		ncf_error("cannot create a temporary file in %s (TMPDIR): %s", dir, strerror(errno));
		free(name);
		return -1;
	}
	int slot = registry_add(name);
	unlink(name);
	registry_drop(slot);
	free(name);
	return fd;
}

int ncf_tmp_write(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			ncf_error("a temporary file in %s: write failed: %s", ncf_tmp_dir(),
				  strerror(k < 0 ? errno : EIO));
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

ssize_t ncf_tmp_read(int fd, void *buf, size_t n, uint64_t offset)
{
	ssize_t k;
	do
		k = pread(fd, buf, n, (off_t)offset);
	while (k < 0 && errno == EINTR);
	if (k <= 0)
		ncf_error("a temporary file in %s: read failed: %s", ncf_tmp_dir(),
			  k < 0 ? strerror(errno) : "it ends early");
	return k <= 0 ? -1 : k;
}

/* Copy fd in to out in the kernel (copy_file_range: no copy through user
 * memory, shared blocks where the file system can).  Returns 1 when done,
 * 0 when the kernel cannot do it for these files (nothing copied), -1 on
 * an error (errno). */
static int copy_in_kernel(int in, int out)
{
	int any = 0;
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)1 << 30, 0);
		if (n == 0)
			return 1;
		if (n < 0) {
			if (!any && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
				     errno == EOPNOTSUPP || errno == EBADF))
				return 0;
			return -1;
		}
		any = 1;
	}
}

int ncf_out_copy(const char *src, const char *dst)
{
	FILE *in = fopen(src, "rb");
	if (!in) {
		ncf_error("%s: cannot open: %s", src, strerror(errno));
		return -1;
	}
	struct ncf_out o;
	if (ncf_out_open(&o, dst, 1) != 0) {
		fclose(in);
		return -1;
	}
	int done = copy_in_kernel(fileno(in), fileno(o.fp));
	int bad = done < 0 ? errno : 0;
	static __thread unsigned char buf[1 << 16];
	while (!done && !bad) {
		size_t n = fread(buf, 1, sizeof buf, in);
		if (n == 0) {
			if (ferror(in)) {
				ncf_error("%s: read failed: %s", src, strerror(errno ? errno : EIO));
				fclose(in);
				ncf_out_abort(&o);
				return -1;
			}
			break;
		}
		if (ncf_write_full(o.fp, buf, n) != 0)
			bad = errno ? errno : EIO;
	}
	fclose(in);
	if (bad) {
		ncf_error("%s: write failed: %s", o.display, strerror(bad));
		ncf_out_abort(&o);
		return -1;
	}
	return ncf_out_commit(&o);
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
