/*
 * ckpt.h - the checkpoint (.ncfm) that ncf-train writes and ncf-eval,
 * ncf-infer and ncf-train --resume read.  The byte layout is documented at
 * the top of ckpt.c and in ncf-model(5).
 */
#ifndef NCF_CKPT_H
#define NCF_CKPT_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "names.h"

/* Version 1: numbered ids; version 2: the same with the users' or the
 * items' ids as names (names.h), for a cache whose ids are text.  A
 * checkpoint of numbered ids is written as version 1, as before. */
#define NCF_CKPT_VERSION 1
#define NCF_CKPT_VERSION_NAMES 2

struct ncf_ckpt {
	struct ncf_shape shape;
	struct ncf_hparams hp;
	uint32_t fingerprint;	  /* ncf_cache_fingerprint of the training cache */
	uint64_t train_positives; /* P of that cache */
	uint64_t train_negatives; /* E of that cache (explicit negatives) */
	uint64_t step;		  /* Adam steps taken */
	uint32_t epoch;		  /* the epoch in progress, 0-based */
	uint64_t position;	  /* next position of that epoch's stream (0: its start) */
	double epoch_loss;	  /* loss sum of the epoch so far */
	uint32_t epochs_done;	  /* epochs finished and evaluated */
	uint32_t topk;		  /* K of the HR@K below */
	double best_hr, best_ndcg;/* best HR@K so far, its NDCG; -1 none */
	uint32_t best_epoch;	  /* 1-based epoch of the best HR, 0 none */
	double last_hr, last_ndcg;/* of the last finished epoch; -1 none */
	uint32_t *user_ids;	  /* (U) original ids (the indices where named) */
	uint32_t *item_ids;	  /* (I) */
	struct ncf_names user_names, item_names; /* (U), (I) where named, else empty */
	float *params;		  /* (layout total) */
	float *m, *v;		  /* (layout total) Adam moments; NULL when not loaded */
};

/* Write ck to path atomically, compressed by workers zstd threads (0: on
 * the caller's; any number from 1 on gives the same bytes, container.h).
 * Returns 0 or -1 (reported). */
int ncf_ckpt_write(const struct ncf_ckpt *ck, const char *path, int workers);
/* Read and validate a checkpoint ("-": stdin); with_adam 0 skips keeping
 * the moments (they are still checked).  Returns 0 or -1 (reported). */
int ncf_ckpt_read(const char *path, struct ncf_ckpt *ck, int with_adam);
/* The same from an open stream (not closed), named display in messages. */
int ncf_ckpt_read_fp(FILE *fp, const char *display, struct ncf_ckpt *ck, int with_adam);
void ncf_ckpt_free(struct ncf_ckpt *ck);

#endif
