/*
 * train.h - the parts of ncf-train and what they share.
 *
 *   main.c    the options, into struct train_opts; then open, epochs, close
 *   run.c     the run's setup (cache, fresh or resumed state, backend, the
 *             ranks' agreement) and its end
 *   init.c    --init: a new run's state from a model's weights
 *   epoch.c   the epoch loop: steps, signals, evaluation, the stop rules
 *   save.c    checkpoints: the best model, the latest state, --keep-epochs
 *   report.c  people's lines on stderr, progress, the --log JSON objects,
 *             the final summary
 *
 * Failures: a function that fails reports it and returns -1 with
 * r->status set to the exit status; main then ends the whole job
 * (ncf_dist_fail: with several ranks the others cannot go on).  A run
 * that stops on purpose (a signal, a log that cannot be written: every
 * rank agrees) returns 0 with r->stopped set and ends normally.
 */
#ifndef NCF_TRAIN_H
#define NCF_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "backend_opts.h"
#include "cache.h"
#include "ckpt.h"
#include "cli.h"
#include "dist.h"
#include "model.h"

/* The model's shape and hyperparameter options, as bits of
 * train_opts.given: a resumed run takes them from its checkpoint and names
 * the ones given. */
enum train_setting {
	TRAIN_SET_BATCH, TRAIN_SET_FACTORS, TRAIN_SET_LAYERS, TRAIN_SET_NEGATIVES,
	TRAIN_SET_TRUENEG, TRAIN_SET_LR, TRAIN_SET_BETA1, TRAIN_SET_BETA2, TRAIN_SET_EPS,
	TRAIN_SET_DROPOUT, TRAIN_SET_SEED, TRAIN_SETTINGS
};

/* The command line, as main parsed it. */
struct train_opts {
	const char *argv0;	 /* the program as it was run, for the command
				  * that resumes an interrupted run */
	const char *cache_path;	 /* CACHE */
	const char *output;	 /* -o: the best model */
	const char *checkpoint;	 /* --checkpoint (default MODEL.last) */
	const char *resume;	 /* --resume, or NULL */
	const char *init;	 /* --init: a model whose weights start the run, or NULL */
	const char *log_path;	 /* --log, or NULL */
	int keep_epochs;	 /* --keep-epochs */
	int progress;		 /* --progress */
	uint32_t epochs, topk;	 /* -e, -k */
	int topk_given;		 /* -k was given */
	double threshold;	 /* -t; < 0: none */
	uint32_t given;		 /* 1 << TRAIN_SET_*: the model options given */
	struct ncf_shape shape;	 /* of a fresh model (users, items: the cache's) */
	struct ncf_hparams hp;
	struct ncf_backend_opts bo;
};

/* One finished epoch, as the loop hands it to saving and reporting. */
struct train_epoch_result {
	uint32_t epoch;		  /* 1-based */
	double loss;		  /* mean training loss over the epoch's samples */
	uint64_t samples;	  /* trained in this run (less after a resume mid-epoch) */
	double train_time, eval_time; /* seconds */
	double train_tput, eval_tput; /* samples/s, candidates/s */
	double hr, ndcg;	  /* HR@K, NDCG@K */
	int best;		  /* HR@K improved: the best model is rewritten */
	double t_end;		  /* seconds from the start of training to the
				   * end of this epoch's evaluation */
	double save_time;	  /* seconds the last finished checkpoint write
				   * took (save.c), < 0: none yet */
	double save_wait;	  /* seconds this epoch's end held training for
				   * checkpoints */
};

/* What the summary needs, gathered over the run's epochs. */
struct train_stats {
	double run_start;	  /* ncf_now() when training began */
	double total_train;	  /* seconds of training (evaluation excluded) */
	uint64_t total_samples;	  /* samples trained */
	double best_tput;	  /* the best epoch's samples/s */
	uint32_t epochs_run;	  /* epochs finished in this run */
	uint32_t threshold_epoch; /* the epoch that reached --threshold, 0: none */
	double t_threshold;	  /* seconds from run_start to its end */
	double t_best;		  /* ... to the end of the best epoch, < 0: none */
	double total_eval;	  /* seconds of evaluation */
	uint64_t total_candidates;/* items ranked in those */
	int saved_best;		  /* this run wrote -o */
	double last_save_time;	  /* seconds the last finished write took, < 0: none */
	double last_save_wait;	  /* the end's wait for the last write */
	double total_save_wait;	  /* training held for checkpoints, in all */
	int save_failed;	  /* a checkpoint write failed */
	int background;		  /* checkpoints were written by the writer thread */
};

struct train_saver;

struct train_run {
	const struct train_opts *o;
	uint32_t epochs;	  /* -e, or fewer when a resumed run is done already */
	uint32_t topk;		  /* -k, or the resumed model's */
	uint64_t samples;	  /* S = P (1 + negatives) + E: samples per epoch
				   * (ncf_epoch_samples) */
	uint64_t steps_per_epoch;
	struct ncf_dist dist;
	struct ncf_backend be;
	struct ncf_cache cache;
	struct ncf_ckpt ck;	  /* the state to save: ids borrowed from the cache */
	uint8_t *mask;		  /* (U, N) evaluation mask from load_cache */
	FILE *log;		  /* --log, or NULL */
	struct ncf_progress prog;
	struct train_stats stats;
	struct train_saver *saver;  /* the checkpoint writer (save.c), or NULL */
	int pinned;		  /* ck's arrays are the backend's host memory */
	int status;		  /* the exit status */
	int stopped;		  /* stopped before the last epoch, on purpose */
};

/* run.c */
/* With r zeroed but for r->dist (ncf_dist_init done): read the cache,
 * make or resume the state, open the backend, check that every rank
 * starts from the same place, open the log, catch signals, say what will
 * run.  Returns 0 or -1 (r->status). */
int train_open(struct train_run *r, const struct train_opts *o);
/* Close the log, free the run, leave MPI, close stdout.  Returns status,
 * or 1 when the log or stdout cannot be closed. */
int train_close(struct train_run *r, int status);

/* init.c */
/* With r->cache read: r->ck as a new run from --init's model (its shape
 * and weights, rows matched by original id; o's settings, a fresh
 * optimizer).  Returns 0 or -1 (reported). */
int train_init_state(struct train_run *r, const struct train_opts *o);

/* epoch.c */
/* SIGINT and SIGTERM stop the run at the next step, state saved. */
void train_catch_signals(void);
/* Train from the state's epoch to r->epochs: each epoch trained,
 * evaluated, saved and logged.  Returns 0 (finished, threshold reached or
 * r->stopped) or -1 (r->status). */
int train_epochs(struct train_run *r);

/* save.c */
/* Start the checkpoint writer thread (rank 0).  Returns 0 or -1. */
int train_save_open(struct train_run *r);
/* Save this epoch's state: the latest state (--checkpoint), the best
 * model when er->best, MODEL.epoch-NNN with --keep-epochs, written in the
 * background while the next epoch trains; first waits for the previous
 * epoch's write.  Sets er->save_time and er->save_wait.  Rank 0 writes.
 * Returns 0, or -1 (reported; also when the previous write failed). */
int train_save_epoch(struct train_run *r, struct train_epoch_result *er);
/* Save the state of an epoch interrupted at r->ck.position, now. */
int train_save_interrupted(struct train_run *r);
/* --keep-epochs names MODEL TRAIN_EPOCH_SERIES NNN, NNN the epoch as
 * "%03u" writes it: MODEL.epoch-001 (samefile.h's series). */
#define TRAIN_EPOCH_SERIES ".epoch-"
/* path + suffix, malloc'd (MODEL.last, MODEL.epoch-NNN). */
char *train_suffixed(const char *path, const char *suffix);
/* Wait for the last write and stop the writer.  Returns 0, or -1 when a
 * write failed (reported, r->status 1).  Safe to call twice. */
int train_save_finish(struct train_run *r);

/* report.c */
/* Open --log (rank 0; appended to on --resume).  Returns 0 or -1. */
int train_report_open_log(struct train_run *r);
/* Close it; returns 0 or -1 (reported). */
int train_report_close_log(struct train_run *r);
/* The lines before the first epoch: sizes, backend, threads, ranks, resume. */
void train_report_start(struct train_run *r);
/* The progress line during an epoch: pos of S samples, loss_sum so far. */
void train_report_progress(struct train_run *r, uint32_t e, uint64_t pos, uint64_t start_pos,
		     double t0, double loss_sum);
/* This epoch's line on stderr. */
void train_report_epoch(struct train_run *r, const struct train_epoch_result *er);
/* This epoch's JSON object on --log.  Returns 0, or -1 when the log
 * cannot be written (reported; the log is closed). */
int train_report_log_epoch(struct train_run *r, const struct train_epoch_result *er);
/* The end of a run that trained: best model, threshold, throughput,
 * checkpoints; on stderr and as the summary object on --log.  Returns 0,
 * or -1 when the log cannot be written (reported). */
int train_report_summary(struct train_run *r);
/* The command that resumes the run from its --checkpoint as it was
 * started: the program as it was run, the cache, -o, --resume, -e and the
 * run's other settings (never the model's, which the checkpoint holds),
 * each quoted for a POSIX shell; into buf (len bytes). */
const char *train_report_resume_command(const struct train_run *r, char *buf, size_t len);
/* x as "1.23M", "4.5k" or "678". */
void train_report_fmt_rate(char *buf, size_t len, double x);

#endif
