/*
 * nvidia.h - NVIDIA's option names: every option of NVIDIA's PyTorch NCF
 * scripts (ncf.py, convert.py, inference.py) that ncf does not spell the
 * same way, with what it is here.  One row per (name, tool, value):
 *
 *  - a synonym: ncf's option of the same meaning in that tool
 *    (--batch_size is ncf-train's --batch-size), with a fixed argument
 *    where NVIDIA's is a switch (--fp16 is --precision fp16);
 *  - a value with nothing to do (--mode train to ncf-train, which only
 *    trains): accepted;
 *  - or a refusal: one line saying ncf's way (--mode test: ncf-eval).
 *
 * A name given to a tool it means nothing to says which tool it belongs
 * to.  The options NVIDIA spells as ncf does (--epochs, --factors,
 * --seed, ...) need no row, nor do those a tool takes under NVIDIA's name
 * itself (ncf-prep --path, ncf-infer --num_batches).  ncf(7), NVIDIA'S
 * OPTIONS, has the table; tests/cli/nvidia.t runs every row.
 */
#ifndef NCF_NVIDIA_H
#define NCF_NVIDIA_H

#include <stddef.h>

struct ncf_nvidia_name {
	const char *name;     /* NVIDIA's spelling, "--batch_size" */
	const char *script;   /* where NVIDIA has it: "ncf.py" */
	int takes_arg;	      /* NVIDIA's takes a value */
	const char *tool;     /* the ncf tool the row is for */
	const char *value;    /* the row holds for this value only (NULL: any) */
	const char *ours;     /* ncf's long option of the same meaning in tool,
			       * without its dashes ("batch-size"); "" when
			       * there is nothing to do; NULL: refused */
	const char *ours_arg; /* the argument ours takes in place of NVIDIA's
			       * (--fp16: "fp16"), or NULL: NVIDIA's */
	const char *refusal;  /* for a refused row: ncf's way, one line */
};

/* The table, ending with a row whose name is NULL. */
extern const struct ncf_nvidia_name ncf_nvidia_names[];

/* What NVIDIA's option name, given with arg (NULL: none), means to tool.
 * Returns its row when the tool takes it (a synonym, or nothing to do);
 * NULL when it is not one of NVIDIA's names (*why NULL) or is refused
 * (*why the line that says why, in buf of len bytes). */
const struct ncf_nvidia_name *ncf_nvidia_lookup(const char *name, const char *arg,
						const char *tool, const char **why, char *buf,
						size_t len);

/* NVIDIA's one-dash option spelled like a short option with its value
 * (ncf.py's -b1 and -b2, Adam's betas, which getopt reads as -b 1):
 * ncf's spelling in tool ("--beta1"), or NULL. */
const char *ncf_nvidia_short(const char *word, const char *tool);

#endif
