/*
 * save.c - ncf-train's checkpoints (the format is common/ckpt.c's): after
 * every epoch the latest state (--checkpoint, default MODEL.last), the
 * best model (-o, when HR@K improved) and with --keep-epochs
 * MODEL.epoch-NNN; after a signal, the state mid-epoch.  Each is a whole,
 * resumable checkpoint, written by rank 0 only, atomically (io.h).
 *
 * Off the training clock: at an epoch's end the training thread waits for
 * the previous epoch's write (if it is still going), copies the state
 * into r->ck (a device-to-pinned-host copy on a GPU, a memcpy on the CPU:
 * the snapshot) and hands it to the writer thread, which compresses it
 * (zstd workers), writes the latest state and copies its bytes to -o and
 * MODEL.epoch-NNN, each atomically, while the next epoch trains.  One
 * snapshot is in flight at most, so the state arrays are the writer's
 * from the hand-over until the next wait, and the training thread does
 * not touch them in between.
 *
 *   epoch e trains | e: wait, snapshot | epoch e+1 trains   | e+1: wait ...
 *                                      | writer: write e    |
 *
 * The writer's messages (a failure, the -v lines) are kept and printed by
 * the training thread when it next waits, so a failed write is reported,
 * and ends the run with status 1, at the next epoch boundary or at the
 * end of the run, which always waits for the last write.
 * NCF_SAVE_SYNC=1 writes on the training thread instead (same bytes).
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "io.h"
#include "train.h"

/* One snapshot to write: the state (arrays borrowed from r->ck), then the
 * same bytes under further names. */
struct save_job {
	struct ncf_ckpt ck;
	char *paths[3];	      /* paths[0] is written, the others copied */
	const char *what[3];  /* for the -v lines */
	int n;
	uint32_t epoch;	      /* whose state it is (1-based), 0: mid-epoch */
};

struct train_saver {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int busy;	/* a job is handed over and not yet done */
	int quit;
	struct save_job job;
	int failed;	/* the last job failed */
	uint32_t failed_epoch;
	double time;	/* seconds the last job took */
	char *msgs;	/* the writer's messages since the last wait */
	size_t msgs_len;
};

/* The writer thread's messages go here, not to stderr. */
static void keep_message(const char *line, void *ctx)
{
	struct train_saver *s = ctx;
	size_t n = strlen(line);
	pthread_mutex_lock(&s->mu);
	s->msgs = ncf_xrealloc(s->msgs, s->msgs_len + n + 2);
	memcpy(s->msgs + s->msgs_len, line, n);
	s->msgs[s->msgs_len + n] = '\n';
	s->msgs_len += n + 1;
	s->msgs[s->msgs_len] = 0;
	pthread_mutex_unlock(&s->mu);
}

/* zstd workers for a checkpoint: one per processor, at most 8 (the
 * bytes do not depend on the number: ckpt.h). */
static int save_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

/* Write job: compress once, copy to the other names.  Returns 0 or -1
 * (reported). */
static int write_job(const struct save_job *job)
{
	int workers = save_workers();
	if (ncf_ckpt_write(&job->ck, job->paths[0], workers) != 0)
		return -1;
	ncf_debug("saved %s to %s", job->what[0], job->paths[0]);
	/* copied from the file just written; written again when that is not
	 * a regular file (--checkpoint /dev/null keeps nothing to copy) */
	struct stat st;
	int copy = stat(job->paths[0], &st) == 0 && S_ISREG(st.st_mode);
	for (int i = 1; i < job->n; i++) {
		if (copy ? ncf_out_copy(job->paths[0], job->paths[i]) != 0
			 : ncf_ckpt_write(&job->ck, job->paths[i], workers) != 0)
			return -1;
		ncf_debug("saved %s to %s", job->what[i], job->paths[i]);
	}
	return 0;
}

static void free_job(struct save_job *job)
{
	for (int i = 0; i < job->n; i++)
		free(job->paths[i]);
	memset(job, 0, sizeof *job);
}

static void *writer_main(void *arg)
{
	struct train_saver *s = arg;
	ncf_set_thread_message_sink(keep_message, s);
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->busy && !s->quit)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->busy)
			break;
		pthread_mutex_unlock(&s->mu);
		double t0 = ncf_now();
		int rc = write_job(&s->job);
		double dt = ncf_now() - t0;
		pthread_mutex_lock(&s->mu);
		s->failed_epoch = s->job.epoch;
		free_job(&s->job);
		s->failed = rc != 0;
		s->time = dt;
		s->busy = 0;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The writer running, for the exit handler below. */
static struct train_saver *running;

/* exit() from the training thread while a write is going on (an
 * allocation that fails, say) waits for the write first: registered
 * after the CUDA runtime's handlers, it runs before them, so the pinned
 * arrays the writer reads stay valid until it is done. */
static void wait_at_exit(void)
{
	struct train_saver *s = running;
	if (!s || pthread_equal(pthread_self(), s->thread))
		return;
	pthread_mutex_lock(&s->mu);
	while (s->busy)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

static int sync_saves(void)
{
	const char *e = getenv("NCF_SAVE_SYNC");
	return e && *e && strcmp(e, "0");
}

/* Start the writer thread (rank 0, not NCF_SAVE_SYNC).  Returns 0, or -1
 * (reported). */
static int saver_start(struct train_run *r)
{
	struct train_saver *s = ncf_xcalloc(1, sizeof *s);
	s->time = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the training thread */
	int rc = pthread_create(&s->thread, NULL, writer_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		ncf_warn("cannot start the checkpoint writer (%s); checkpoints are written between "
			 "epochs",
			 strerror(rc));
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		free(s);
		return 0;
	}
	static int registered;
	if (!registered)
		registered = atexit(wait_at_exit) == 0;
	running = s;
	r->saver = s;
	r->stats.background = 1;
	return 0;
}

/* Wait for the job in flight, print what the writer said.  Returns 0, or
 * -1 when that job failed (r->status 1). */
static int saver_wait(struct train_run *r)
{
	struct train_saver *s = r->saver;
	if (!s)
		return 0;
	pthread_mutex_lock(&s->mu);
	while (s->busy)
		pthread_cond_wait(&s->cv, &s->mu);
	char *msgs = s->msgs;
	s->msgs = NULL;
	s->msgs_len = 0;
	int failed = s->failed;
	uint32_t epoch = s->failed_epoch;
	s->failed = 0;
	r->stats.last_save_time = s->time;
	pthread_mutex_unlock(&s->mu);
	if (msgs) {
		ncf_progress_clear(&r->prog);
		fputs(msgs, stderr);
		fflush(stderr);
		free(msgs);
	}
	if (failed) {
		ncf_error("the checkpoints after epoch %u could not be written (above); stopping", epoch);
		r->status = NCF_EXIT_FAIL;
		r->stats.save_failed = 1;
		return -1;
	}
	return 0;
}

/* Copy the backend's state into r->ck: the snapshot.  Returns 0 or -1. */
static int snapshot(struct train_run *r)
{
	if (ncf_backend_get_state(&r->be, r->ck.params, r->ck.m, r->ck.v) != 0)
		return -1;
	r->ck.step = r->be.step;
	return 0;
}

/* Write job now, or hand it to the writer.  Takes job's paths. */
static int save_job(struct train_run *r, struct save_job *job, int now)
{
	struct train_saver *s = r->saver;
	if (!s || now) {
		double t0 = ncf_now();
		int rc = write_job(job);
		r->stats.last_save_time = ncf_now() - t0;
		free_job(job);
		if (rc != 0) {
			r->status = NCF_EXIT_FAIL;
			r->stats.save_failed = 1;
		}
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	s->job = *job;
	s->busy = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	memset(job, 0, sizeof *job);
	return 0;
}

/* Add path (malloc'd; the job takes it) to job. */
static void add_path(struct save_job *job, char *path, const char *what)
{
	job->paths[job->n] = path;
	job->what[job->n++] = what;
}

char *train_suffixed(const char *path, const char *suffix)
{
	size_t n = strlen(path) + strlen(suffix) + 1;
	char *s = ncf_xmalloc(n);
	snprintf(s, n, "%s%s", path, suffix);
	return s;
}

int train_save_open(struct train_run *r)
{
	if (r->dist.rank != 0 || sync_saves())
		return 0;
	return saver_start(r);
}

int train_save_epoch(struct train_run *r, struct train_epoch_result *er)
{
	const struct train_opts *o = r->o;
	er->save_time = -1;
	if (r->dist.rank != 0)
		return 0;
	double t0 = ncf_now();
	if (saver_wait(r) != 0) /* the previous epoch's write */
		return -1;
	if (snapshot(r) != 0)
		return -1;
	struct save_job job;
	memset(&job, 0, sizeof job);
	job.ck = r->ck;
	job.epoch = er->epoch;
	add_path(&job, ncf_xstrdup(o->checkpoint), "the latest state");
	if (er->best)
		add_path(&job, ncf_xstrdup(o->output), "the best model");
	if (o->keep_epochs) {
		char suffix[32];
		snprintf(suffix, sizeof suffix, "%s%03u", TRAIN_EPOCH_SERIES, er->epoch);
		add_path(&job, train_suffixed(o->output, suffix), "the epoch's state");
	}
	r->stats.saved_best |= er->best;
	int rc = save_job(r, &job, 0);
	/* the last finished write: the previous epoch's (none before the
	 * first), or with no writer thread this one's */
	er->save_time = r->stats.last_save_time;
	er->save_wait = ncf_now() - t0;
	r->stats.total_save_wait += er->save_wait;
	return rc;
}

int train_save_interrupted(struct train_run *r)
{
	if (r->dist.rank != 0)
		return 0;
	/* the interrupted state is written even when the previous epoch's
	 * write failed (the run still ends with status 1) */
	int earlier = saver_wait(r);
	if (snapshot(r) != 0)
		return -1;
	struct save_job job;
	memset(&job, 0, sizeof job);
	job.ck = r->ck;
	add_path(&job, ncf_xstrdup(r->o->checkpoint), "the interrupted state");
	return save_job(r, &job, 1) != 0 || earlier != 0 ? -1 : 0;
}

int train_save_finish(struct train_run *r)
{
	struct train_saver *s = r->saver;
	if (!s)
		return r->stats.save_failed ? -1 : 0;
	double t0 = ncf_now();
	int rc = saver_wait(r);
	r->stats.last_save_wait = ncf_now() - t0;
	r->stats.total_save_wait += r->stats.last_save_wait;
	pthread_mutex_lock(&s->mu);
	s->quit = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	running = NULL;
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->msgs);
	free(s);
	r->saver = NULL;
	return rc;
}
