/*
 * report.c - what ncf-train tells people and programs: the lines on
 * stderr (ncf_info: the plan, one line per epoch, the summary), the
 * progress line, and the --log file, one JSON object per epoch:
 *
 *   {"epoch": 1, "train_loss": 0.512345, "hr@10": 0.412345, "ndcg@10": 0.223456,
 *    "train_time": 1.2345, "eval_time": 0.1234, "train_throughput": 123456.7,
 *    "eval_throughput": 98765.4, "ranks": 1, "rank_throughput": 123456.7,
 *    "best": true, "save_time": null, "save_wait": 0.0123}
 *
 * and, when the run ends having trained, one summary object as NVIDIA's
 * DLLogger ends its run:
 *
 *   {"summary": true, "epochs": 3, "best_epoch": 2, "best_hr@10": 0.43,
 *    "best_ndcg@10": 0.24, "threshold": 0.42, "time_to_target": 2.61,
 *    "time_to_best_model": 2.61, "mean_train_throughput": 123000.0,
 *    "mean_eval_throughput": 99000.0, "train_time": 3.7, "eval_time": 0.37,
 *    "save_wait": 0.04, "last_save_time": 0.11, "last_save_wait": 0.02}
 *
 * (the cuda backend adds its dense layers' choices, "dense_layer_2":
 * "fused (256 -> 128, timed; fused 0.412 ms; ...)", one member a layer)
 *
 * (each on one line; K of hr@K and ndcg@K is --topk; null for a figure
 * that does not exist: save_time before the first write finished,
 * threshold and time_to_target when none was given or it was not
 * reached).  The times are seconds; time_to_target runs from the start of
 * training to the end of the evaluation of the first epoch that reached
 * the threshold.  Only rank 0 writes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "err.h"
#include "omp_wait.h"
#include "train.h"

void train_report_fmt_rate(char *buf, size_t len, double x)
{
	if (x >= 1e6)
		snprintf(buf, len, "%.2fM", x / 1e6);
	else if (x >= 1e3)
		snprintf(buf, len, "%.1fk", x / 1e3);
	else
		snprintf(buf, len, "%.0f", x);
}

static double mean_rate(double count, double seconds)
{
	return seconds > 0 ? count / seconds : 0;
}

int train_report_open_log(struct train_run *r)
{
	const struct train_opts *o = r->o;
	if (r->dist.rank != 0 || !o->log_path)
		return 0;
	if (!strcmp(o->log_path, "-")) {
		r->log = stdout;
		return 0;
	}
	r->log = fopen(o->log_path, o->resume ? "a" : "w");
	if (!r->log) {
		ncf_error("%s: cannot open the log", o->log_path);
		return -1;
	}
	return 0;
}

int train_report_close_log(struct train_run *r)
{
	int rc = 0;
	if (r->log && r->log != stdout && fclose(r->log) != 0) {
		ncf_error("%s: write failed: %s", r->o->log_path, strerror(errno ? errno : EIO));
		rc = -1;
	}
	r->log = NULL;
	return rc;
}

/* word, quoted for a POSIX shell where it needs it, appended to buf at *n
 * (len bytes in all). */
static void shell_word(char *buf, size_t len, size_t *n, const char *word)
{
	int plain = *word != 0;
	for (const char *p = word; *p && plain; p++)
		plain = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:,+@%=-",
			       *p) != NULL;
	size_t at = *n;
	if (at && at < len)
		buf[at++] = ' ';
	if (!plain && at < len)
		buf[at++] = '\'';
	for (const char *p = word; *p && at < len; p++) {
		if (*p == '\'' && !plain) {
			at += (size_t)snprintf(buf + at, len - at, "'\\''");
			continue;
		}
		buf[at++] = *p;
	}
	if (!plain && at < len)
		buf[at++] = '\'';
	if (at >= len)
		at = len - 1;
	buf[at] = 0;
	*n = at;
}

const char *train_report_resume_command(const struct train_run *r, char *buf, size_t len)
{
	const struct train_opts *o = r->o;
	size_t n = 0;
	char num[64];
	buf[0] = 0;
	shell_word(buf, len, &n, o->argv0);
	shell_word(buf, len, &n, o->cache_path);
	shell_word(buf, len, &n, "-o");
	shell_word(buf, len, &n, o->output);
	shell_word(buf, len, &n, "--resume");
	shell_word(buf, len, &n, o->checkpoint);
	snprintf(num, sizeof num, "%u", o->epochs);
	shell_word(buf, len, &n, "-e");
	shell_word(buf, len, &n, num);
	char *dflt = train_suffixed(o->output, ".last");
	if (strcmp(dflt, o->checkpoint) != 0) {
		shell_word(buf, len, &n, "--checkpoint");
		shell_word(buf, len, &n, o->checkpoint);
	}
	free(dflt);
	if (o->keep_epochs)
		shell_word(buf, len, &n, "--keep-epochs");
	if (o->threshold >= 0) {
		snprintf(num, sizeof num, "%.17g", o->threshold);
		shell_word(buf, len, &n, "-t");
		shell_word(buf, len, &n, num);
	}
	if (o->log_path) {
		shell_word(buf, len, &n, "--log");
		shell_word(buf, len, &n, o->log_path);
	}
	if (o->progress)
		shell_word(buf, len, &n, "--progress");
	if (o->bo.device != NCF_DEVICE_AUTO) {
		shell_word(buf, len, &n, "--device");
		shell_word(buf, len, &n, o->bo.device == NCF_DEVICE_CPU ? "cpu" : "cuda");
	}
	if (o->bo.precision != NCF_PRECISION_DEFAULT) {
		shell_word(buf, len, &n, "--precision");
		shell_word(buf, len, &n, ncf_precision_name(o->bo.precision));
	}
	if (o->bo.threads > 0) {
		snprintf(num, sizeof num, "%d", o->bo.threads);
		shell_word(buf, len, &n, "--threads");
		shell_word(buf, len, &n, num);
	}
	return buf;
}

void train_report_start(struct train_run *r)
{
	const struct train_opts *o = r->o;
	const struct ncf_shape *s = &r->ck.shape;
	int nthreads = 1;
#ifdef _OPENMP
	nthreads = omp_get_max_threads();
#endif
	char made[160] = "";
	uint64_t P = (uint64_t)r->cache.train_positives, E = r->cache.train_negatives;
	if (E)
		snprintf(made, sizeof made, " (%llu positives, %llu drawn and %llu explicit negatives)",
			 (unsigned long long)P, (unsigned long long)(P * r->ck.hp.negatives),
			 (unsigned long long)E);
	ncf_info("training %s on %s: %u users, %u items, %llu samples per epoch%s, batch %llu "
		 "(%llu step%s), %s backend, %d thread%s",
		 o->output, o->cache_path, s->users, s->items, (unsigned long long)r->samples, made,
		 (unsigned long long)r->ck.hp.batch, (unsigned long long)r->steps_per_epoch,
		 r->steps_per_epoch == 1 ? "" : "s", ncf_backend_name(&r->be), nthreads,
		 nthreads == 1 ? "" : "s");
	ncf_debug("openmp threads wait: %s", ncf_omp_wait_note());
	if (r->dist.size > 1)
		ncf_info("%d ranks, each taking 1/%d of every global batch", r->dist.size,
			 r->dist.size);
	if (o->resume)
		ncf_info("resuming from %s at epoch %u, position %llu of %llu", o->resume,
			 r->ck.epoch + 1, (unsigned long long)r->ck.position,
			 (unsigned long long)r->samples);
}

void train_report_progress(struct train_run *r, uint32_t e, uint64_t pos, uint64_t start_pos,
			   double t0, double loss_sum)
{
	if (!r->prog.enabled)
		return;
	const struct train_stats *st = &r->stats;
	char label[64], extra[96], eta[32];
	snprintf(label, sizeof label, "epoch %u/%u", e + 1, r->epochs);
	double dt = ncf_now() - t0;
	double rate = dt > 0 ? (double)(pos - start_pos) / dt : 0;
	/* the epochs after this one at the run's mean rate so far (this
	 * epoch's before one has ended), each with an evaluation as long as
	 * the mean one so far */
	double mean = st->total_train > 0 ? (double)st->total_samples / st->total_train : rate;
	double eval = st->epochs_run ? st->total_eval / st->epochs_run : 0;
	double left = r->epochs - e - 1;
	double run = rate > 0 && mean > 0 ? (double)(r->samples - pos) / rate + eval +
						    left * ((double)r->samples / mean + eval)
					  : -1;
	int n = snprintf(extra, sizeof extra, "loss %.4f",
			 loss_sum / (double)pos * (double)r->dist.size);
	if (run >= 0 && left > 0)
		snprintf(extra + n, sizeof extra - (size_t)n, "  run ETA %s",
			 ncf_progress_eta(eta, sizeof eta, run));
	ncf_progress_update(&r->prog, label, (double)pos, (double)r->samples, extra);
}

void train_report_epoch(struct train_run *r, const struct train_epoch_result *er)
{
	char rate[16], erate[16];
	train_report_fmt_rate(rate, sizeof rate, er->train_tput);
	train_report_fmt_rate(erate, sizeof erate, er->eval_tput);
	ncf_info("epoch %u/%u: loss %.4f  hr@%u %.4f  ndcg@%u %.4f  train %.2f s (%s "
		 "samples/s)  eval %.2f s (%s/s)%s",
		 er->epoch, r->epochs, er->loss, r->topk, er->hr, r->topk, er->ndcg, er->train_time,
		 rate, er->eval_time, erate, er->best ? "  best" : "");
}

/* x seconds as JSON: null when x < 0 (none). */
static const char *json_seconds(char *buf, size_t len, double x)
{
	if (x < 0)
		return "null";
	snprintf(buf, len, "%.4f", x);
	return buf;
}

/* The log after an object: 0, or -1 when it cannot be written (reported,
 * the log closed); epoch: the last epoch saved, for the message. */
static int flush_log(struct train_run *r, uint32_t epoch)
{
	errno = 0;
	if (fflush(r->log) == 0 && !ferror(r->log))
		return 0;
	int err = errno ? errno : EIO;
	if (train_save_finish(r) != 0) /* the state's write ends first, so that this is true */
		ncf_error("%s: write failed: %s", r->log == stdout ? "<stdout>" : r->o->log_path,
			  strerror(err));
	else
		ncf_error("%s: write failed: %s (the state after epoch %u is saved in %s)",
			  r->log == stdout ? "<stdout>" : r->o->log_path, strerror(err), epoch,
			  r->o->checkpoint);
	if (r->log != stdout)
		fclose(r->log);
	r->log = NULL;
	return -1;
}

int train_report_log_epoch(struct train_run *r, const struct train_epoch_result *er)
{
	if (!r->log)
		return 0;
	char st[32];
	fprintf(r->log,
		"{\"epoch\": %u, \"train_loss\": %.6f, \"hr@%u\": %.6f, \"ndcg@%u\": "
		"%.6f, \"train_time\": %.4f, \"eval_time\": %.4f, "
		"\"train_throughput\": %.1f, \"eval_throughput\": %.1f, \"ranks\": %d, "
		"\"rank_throughput\": %.1f, \"best\": %s, \"save_time\": %s, \"save_wait\": "
		"%.4f}\n",
		er->epoch, er->loss, r->topk, er->hr, r->topk, er->ndcg, er->train_time,
		er->eval_time, er->train_tput, er->eval_tput, r->dist.size,
		er->train_tput / r->dist.size, er->best ? "true" : "false",
		json_seconds(st, sizeof st, er->save_time), er->save_wait);
	return flush_log(r, er->epoch);
}

/*
 * The choices the backend made as it ran, as JSON members `, "KEY":
 * "VALUE"` into buf (len bytes; "" when none): its description's
 * key<TAB>value lines whose key starts "dense_" (the cuda backend: each
 * dense layer's implementation and the times that chose it).
 */
static void backend_choices(struct train_run *r, char *buf, size_t len)
{
	char *text = NULL;
	size_t n = 0, at = 0;
	buf[0] = 0;
	FILE *f = open_memstream(&text, &n);
	if (!f)
		return;
	ncf_backend_describe(&r->be, f);
	fclose(f);
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *tab = strchr(line, '\t');
		if (strncmp(line, "dense_", 6) || !tab)
			continue;
		*tab = 0;
		int k = snprintf(buf + at, len - at, ", \"%s\": \"", line);
		for (const char *c = tab + 1; k > 0 && at + k + 3 < len && *c; c++)
			if (*c != '"' && *c != '\\')
				buf[at + k++] = *c;
		if (k > 0 && at + k + 2 < len) {
			buf[at + k++] = '"';
			buf[at + k] = 0;
			at += k;
		} else {
			buf[at] = 0;
		}
	}
	free(text);
}

/* The summary object on --log (rank 0).  Returns 0 or -1 (reported). */
static int report_log_summary(struct train_run *r)
{
	const struct train_opts *o = r->o;
	const struct train_stats *st = &r->stats;
	if (!r->log)
		return 0;
	char thr[32], ttt[32], tbest[32], lst[32], choices[1024];
	backend_choices(r, choices, sizeof choices);
	if (o->threshold >= 0)
		snprintf(thr, sizeof thr, "%.4f", o->threshold);
	fprintf(r->log,
		"{\"summary\": true, \"epochs\": %u, \"best_epoch\": %u, \"best_hr@%u\": %.6f, "
		"\"best_ndcg@%u\": %.6f, \"threshold\": %s, \"time_to_target\": %s, "
		"\"time_to_best_model\": %s, \"mean_train_throughput\": %.1f, "
		"\"mean_eval_throughput\": %.1f, \"train_time\": %.4f, \"eval_time\": %.4f, "
		"\"ranks\": %d, \"save_wait\": %.4f, \"last_save_time\": %s, "
		"\"last_save_wait\": %.4f%s}\n",
		st->epochs_run, r->ck.best_epoch, r->topk, r->ck.best_hr, r->topk, r->ck.best_ndcg,
		o->threshold >= 0 ? thr : "null",
		json_seconds(ttt, sizeof ttt, st->threshold_epoch ? st->t_threshold : -1),
		json_seconds(tbest, sizeof tbest, st->t_best),
		mean_rate((double)st->total_samples, st->total_train),
		mean_rate((double)st->total_candidates, st->total_eval), st->total_train,
		st->total_eval, r->dist.size, st->total_save_wait,
		json_seconds(lst, sizeof lst, st->last_save_time), st->last_save_wait, choices);
	return flush_log(r, r->ck.epochs_done);
}

int train_report_summary(struct train_run *r)
{
	const struct train_opts *o = r->o;
	const struct train_stats *st = &r->stats;
	if (!st->epochs_run)
		return 0;
	char mean[16], bst[16];
	double rate = mean_rate((double)st->total_samples, st->total_train);
	train_report_fmt_rate(mean, sizeof mean, rate);
	train_report_fmt_rate(bst, sizeof bst, st->best_tput);
	if (st->saved_best)
		ncf_info("best hr@%u %.4f (ndcg@%u %.4f) at epoch %u, saved in %s; latest state "
			 "in %s",
			 r->topk, r->ck.best_hr, r->topk, r->ck.best_ndcg, r->ck.best_epoch, o->output,
			 o->checkpoint);
	else
		ncf_info("best hr@%u %.4f (ndcg@%u %.4f) at epoch %u, before --resume: this run "
			 "did not improve on it, so %s was not written; latest state in %s",
			 r->topk, r->ck.best_hr, r->topk, r->ck.best_ndcg, r->ck.best_epoch, o->output,
			 o->checkpoint);
	if (st->threshold_epoch)
		ncf_info("reached the threshold %.4f at epoch %u after %.2f s of the run (time to "
			 "target)",
			 o->threshold, st->threshold_epoch, st->t_threshold);
	else if (o->threshold >= 0)
		ncf_info("did not reach the threshold %.4f", o->threshold);
	ncf_info("train throughput: mean %s samples/s, best %s samples/s over %u epoch%s "
		 "(%.1f s)",
		 mean, bst, st->epochs_run, st->epochs_run == 1 ? "" : "s", st->total_train);
	if (r->dist.rank == 0 && st->last_save_time >= 0)
		ncf_info("checkpoints: %s; training waited %.2f s for them in all, the last "
			 "took %.2f s to write",
			 st->background ? "written while the next epoch trained"
					: "written between epochs (NCF_SAVE_SYNC)",
			 st->total_save_wait, st->last_save_time);
	if (r->dist.size > 1) {
		char per[16];
		train_report_fmt_rate(per, sizeof per, rate / r->dist.size);
		ncf_info("%d ranks: %s samples/s per rank; %.1f%% of training time in the "
			 "gradient all-reduce",
			 r->dist.size, per,
			 st->total_train > 0 ? 100.0 * r->dist.allreduce_seconds / st->total_train
					     : 0.0);
	}
	return report_log_summary(r);
}
