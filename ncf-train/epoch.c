/*
 * epoch.c - the epoch loop of ncf-train: the steps of an epoch over the
 * sample stream (DESIGN.md section 4), a stop on SIGINT/SIGTERM with the
 * state saved, a stop on a NaN or infinite loss, the evaluation after
 * every epoch, then saving (save.c) and reporting (report.c).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "evaluate.h"
#include "io.h"
#include "train.h"

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
	ncf_dist_note_signal(sig); /* a rank blocked by a failed one says so */
}

void train_catch_signals(void)
{
	ncf_out_cleanup_on_signals(); /* SIGHUP: remove temporary files, die */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* The signal any rank got, 0 for none (every rank gets the same answer). */
static int signal_agreed(struct train_run *r)
{
	return ncf_dist_max_int(&r->dist, (int)got_signal);
}

/* How many ranks the resumed run needs, for the resume line: nothing
 * with one. */
static const char *ranks_note(const struct train_run *r)
{
	static char buf[48];
	if (r->dist.size == 1)
		return "";
	snprintf(buf, sizeof buf, " (as %d ranks)", r->dist.size);
	return buf;
}

static int signal_status(int sig)
{
	return sig == SIGINT ? NCF_EXIT_SIGINT : NCF_EXIT_SIGTERM;
}

/* The loss of the step at pos was not finite: say where, and what is left
 * on disk. */
static void report_bad_loss(struct train_run *r, uint32_t e, uint64_t pos, double loss)
{
	const struct train_opts *o = r->o;
	ncf_progress_clear(&r->prog);
	int saved = r->ck.epochs_done > 0 || o->resume;
	ncf_error("epoch %u, step %llu: the loss is %s; stopping (%s%s; try a "
		  "lower --learning-rate)",
		  e + 1, (unsigned long long)(pos / r->ck.hp.batch + 1), isnan(loss) ? "NaN" : "infinite",
		  saved ? "left as it was: " : "no checkpoint was written",
		  saved ? (o->resume && !r->ck.epochs_done ? o->resume : o->checkpoint) : "");
}

/* A signal stopped epoch e at pos: save the state there for --resume.
 * loss is this rank's loss sum so far.  Returns 0 or -1. */
static int stop_mid_epoch(struct train_run *r, uint32_t e, uint64_t pos, double loss, int sig)
{
	ncf_progress_clear(&r->prog);
	r->ck.epoch = e;
	r->ck.position = pos;
	double all = loss;
	ncf_dist_sum_f64(&r->dist, &all, 1);
	r->ck.epoch_loss = all;
	if (train_save_interrupted(r) != 0)
		return -1;
	char cmd[4096];
	ncf_info("interrupted in epoch %u at position %llu of %llu; resume with%s: %s", e + 1,
		 (unsigned long long)pos, (unsigned long long)r->samples, ranks_note(r),
		 train_report_resume_command(r, cmd, sizeof cmd));
	r->status = signal_status(sig);
	r->stopped = 1;
	return 0;
}

/*
 * The steps of epoch e, from the saved position when it is the state's
 * epoch (a resumed run).  Fills er's loss, samples and training time.
 * Returns 0 (r->stopped: a signal stopped it, the state saved) or -1.
 */
static int train_epoch(struct train_run *r, uint32_t e, struct train_epoch_result *er)
{
	const uint64_t S = r->samples, batch = r->ck.hp.batch;
	uint64_t pos = e == r->ck.epoch ? r->ck.position : 0;
	double loss = e == r->ck.epoch ? r->ck.epoch_loss : 0;
	const uint64_t start_pos = pos;
	double t0 = ncf_now();
	/* where the backend keeps the steps' losses (a GPU's stay on the
	 * device) they stay there until the epoch ends, progress shows them or
	 * a signal stops it: no wait per step */
	int keep = ncf_backend_keeps_loss(&r->be);
	int show = ncf_dist_max_int(&r->dist, r->prog.enabled);
	while (pos < S) {
		uint64_t n = S - pos < batch ? S - pos : batch;
		double ls = 0;
		if (ncf_backend_train_step(&r->be, e, pos, n, keep ? NULL : &ls) != 0)
			return -1;
		uint64_t step_pos = pos;
		pos += n;
		int sig = signal_agreed(r);
		if (keep && pos < S && !sig && !show)
			continue;
		if (keep && ncf_backend_take_loss(&r->be, &ls) != 0)
			return -1;
		double gl = ls;
		ncf_dist_sum_f64(&r->dist, &gl, 1);
		if (!isfinite(gl)) { /* every rank sees it: all stop, the last write ends */
			report_bad_loss(r, e, step_pos, gl);
			r->status = NCF_EXIT_FAIL;
			r->stopped = 1;
			return 0;
		}
		loss += ls;
		train_report_progress(r, e, pos, start_pos, t0, loss);
		if (sig && pos < S)
			return stop_mid_epoch(r, e, pos, loss, sig);
	}
	ncf_progress_clear(&r->prog);
	er->train_time = ncf_now() - t0;
	double gloss = loss;
	ncf_dist_sum_f64(&r->dist, &gloss, 1);
	er->loss = gloss / (double)S;
	er->samples = S - start_pos;
	er->train_tput = er->train_time > 0 ? (double)er->samples / er->train_time : 0;
	return 0;
}

/* HR@K and NDCG@K after epoch e into er, and the epoch into the state and
 * the run's statistics.  Returns 0 or -1. */
static int evaluate_epoch(struct train_run *r, uint32_t e, struct train_epoch_result *er)
{
	struct train_stats *st = &r->stats;
	st->total_train += er->train_time;
	st->total_samples += er->samples;
	if (er->train_tput > st->best_tput)
		st->best_tput = er->train_tput;
	double t1 = ncf_now();
	if (ncf_evaluate(&r->be, &r->cache, r->topk, &er->hr, &er->ndcg) != 0)
		return -1;
	double t2 = ncf_now();
	er->eval_time = t2 - t1;
	er->t_end = t2 - st->run_start;
	double candidates = (double)r->cache.users * (1.0 + r->cache.eval_negatives);
	er->eval_tput = er->eval_time > 0 ? candidates / er->eval_time : 0;
	st->total_eval += er->eval_time;
	st->total_candidates += (uint64_t)candidates;
	st->epochs_run++;
	er->epoch = e + 1;
	r->ck.epoch = e + 1;
	r->ck.position = 0;
	r->ck.epoch_loss = 0;
	r->ck.epochs_done = e + 1;
	r->ck.last_hr = er->hr;
	r->ck.last_ndcg = er->ndcg;
	er->best = er->hr > r->ck.best_hr;
	if (er->best) {
		r->ck.best_hr = er->hr;
		r->ck.best_ndcg = er->ndcg;
		r->ck.best_epoch = e + 1;
		st->t_best = er->t_end;
	}
	return 0;
}

/* After epoch e, saved and logged: has the run reached its threshold, or
 * did a signal come during the epoch's last step or its evaluation?
 * Returns 1 to stop (r->stopped for a signal), 0 to go on. */
static int stop_after_epoch(struct train_run *r, uint32_t e, const struct train_epoch_result *er)
{
	const struct train_opts *o = r->o;
	if (o->threshold >= 0 && er->hr >= o->threshold) {
		r->stats.threshold_epoch = e + 1;
		r->stats.t_threshold = er->t_end;
		return 1;
	}
	/* the state after the epoch is being saved; every rank agrees to stop */
	int sig = signal_agreed(r);
	if (!sig)
		return 0;
	r->stopped = 1;
	if (train_save_finish(r) != 0) /* what it says next must be true */
		return 1;
	char cmd[4096];
	if (e + 1 < r->epochs)
		ncf_info("interrupted after epoch %u; its state is in %s; resume with%s: %s", e + 1,
			 o->checkpoint, ranks_note(r), train_report_resume_command(r, cmd, sizeof cmd));
	else
		ncf_info("interrupted during the last epoch's evaluation; the finished run is saved "
			 "in %s",
			 o->checkpoint);
	r->status = signal_status(sig);
	return 1;
}

int train_epochs(struct train_run *r)
{
	for (uint32_t e = r->ck.epoch; e < r->epochs; e++) {
		struct train_epoch_result er;
		memset(&er, 0, sizeof er);
		r->status = NCF_EXIT_FAIL;
		if (train_epoch(r, e, &er) != 0)
			return -1;
		if (r->stopped)
			return 0;
		if (evaluate_epoch(r, e, &er) != 0)
			return -1;
		train_report_epoch(r, &er);
		if (train_save_epoch(r, &er) != 0)
			return -1;
		/* the log after the files: a log that cannot be written stops the
		 * run (every rank), with the epoch's state saved */
		int log_bad = train_report_log_epoch(r, &er) != 0;
		if (ncf_dist_max_int(&r->dist, log_bad)) {
			r->status = NCF_EXIT_FAIL;
			r->stopped = 1;
			return 0;
		}
		r->status = 0;
		if (stop_after_epoch(r, e, &er))
			return 0;
	}
	r->status = 0;
	return 0;
}
