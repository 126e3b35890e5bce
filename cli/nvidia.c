/* nvidia.c - see nvidia.h. */
#include <stdio.h>
#include <string.h>

#include "nvidia.h"

#define TRAIN "ncf-train"
#define EVAL "ncf-eval"
#define PREP "ncf-prep"
#define INFER "ncf-infer"

/* The rows in the order of NVIDIA's scripts: ncf.py, convert.py,
 * inference.py. */
const struct ncf_nvidia_name ncf_nvidia_names[] = {
	{"--data", "ncf.py", 1, TRAIN, NULL, NULL, NULL,
	 "ncf-train reads a cache, its operand: ncf-prep -o data.ncfc ratings.csv, then "
	 "ncf-train data.ncfc -o model.ncfm"},
	{"--data", "ncf.py", 1, EVAL, NULL, NULL, NULL,
	 "ncf-eval reads a cache, its operand: ncf-eval -m MODEL data.ncfc"},
	{"--feature_spec_file", "ncf.py", 1, TRAIN, NULL, NULL, NULL,
	 "ncf-train reads a cache made by ncf-prep, not a feature specification: "
	 "ncf-prep -o data.ncfc ratings.csv"},
	{"--batch_size", "ncf.py", 1, TRAIN, NULL, "batch-size", NULL, NULL},
	{"--valid_batch_size", "ncf.py", 1, TRAIN, NULL, NULL, NULL,
	 "the evaluation sizes its own batches (a score does not depend on them): leave it out"},
	{"--valid_batch_size", "ncf.py", 1, EVAL, NULL, NULL, NULL,
	 "the evaluation sizes its own batches (a score does not depend on them): leave it out"},
	{"--negative_samples", "ncf.py", 1, TRAIN, NULL, "negative-samples", NULL, NULL},
	{"--learning_rate", "ncf.py", 1, TRAIN, NULL, "learning-rate", NULL, NULL},
	{"--checkpoint_dir", "ncf.py", 1, TRAIN, NULL, NULL, NULL,
	 "name the model file instead: -o DIR/model.ncfm (the latest state goes beside it, "
	 "DIR/model.ncfm.last)"},
	{"--load_checkpoint_path", "ncf.py", 1, TRAIN, NULL, "init", NULL, NULL},
	{"--load_checkpoint_path", "ncf.py", 1, EVAL, NULL, "model", NULL, NULL},
	{"--mode", "ncf.py", 1, TRAIN, "train", "", NULL, NULL},
	{"--mode", "ncf.py", 1, TRAIN, "test", NULL, NULL,
	 "evaluate with ncf-eval -m MODEL CACHE"},
	{"--mode", "ncf.py", 1, EVAL, "test", "", NULL, NULL},
	{"--mode", "ncf.py", 1, EVAL, "train", NULL, NULL, "train with ncf-train CACHE -o MODEL"},
	{"--grads_accumulated", "ncf.py", 1, TRAIN, "1", "", NULL, NULL},
	{"--grads_accumulated", "ncf.py", 1, TRAIN, NULL, NULL, NULL,
	 "ncf-train does not accumulate gradients: for one step per N batches give "
	 "--batch-size N times the batch"},
	{"--log_path", "ncf.py", 1, TRAIN, NULL, "log", NULL, NULL},
	{"--log_path", "ncf.py", 1, EVAL, NULL, NULL, NULL,
	 "--json writes the metrics as one JSON object on stdout: ncf-eval --json ... > FILE"},
	{"--path", "convert.py", 1, PREP, NULL, "path", NULL, NULL},
	{"--output", "convert.py", 1, PREP, NULL, "output", NULL, NULL},
	{"--valid_negative", "convert.py", 1, PREP, NULL, "eval-negatives", NULL, NULL},
	{"--load_checkpoint_path", "inference.py", 1, INFER, NULL, "model", NULL, NULL},
	{"--n_users", "inference.py", 1, INFER, NULL, "users", NULL, NULL},
	{"--n_items", "inference.py", 1, INFER, NULL, "items", NULL, NULL},
	{"--dropout", "inference.py", 1, INFER, NULL, NULL, NULL,
	 "scoring applies no dropout (inference.py's model.eval()): leave it out"},
	{"--batch_sizes", "inference.py", 1, INFER, NULL, "batch-sizes", NULL, NULL},
	{"--num_batches", "inference.py", 1, INFER, NULL, "num_batches", NULL, NULL},
	{"--fp16", "inference.py", 0, INFER, NULL, "precision", "fp16", NULL},
	{"--log_path", "inference.py", 1, INFER, NULL, NULL, NULL,
	 "--json writes the benchmark as one JSON object on stdout: ncf-infer --bench --json "
	 "... > FILE"},
	{NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL},
};

/* ncf.py's one-dash spellings of Adam's betas. */
static const struct {
	const char *word, *tool, *ours;
} shorts[] = {
	{"-b1", TRAIN, "--beta1"},
	{"-b2", TRAIN, "--beta2"},
};

/* Does row r hold for tool and arg? */
static int row_holds(const struct ncf_nvidia_name *r, const char *tool, const char *arg)
{
	return !strcmp(r->tool, tool) && (!r->value || (arg && !strcmp(arg, r->value)));
}

/* The line for a name that belongs to other tools than tool: the one
 * synonym there, or the tools it is for. */
static void other_tools(const struct ncf_nvidia_name *first, char *buf, size_t len)
{
	const struct ncf_nvidia_name *only = first;
	int n = 0;
	char tools[128] = "";
	for (const struct ncf_nvidia_name *r = first; r->name; r++) {
		if (strcmp(r->name, first->name) != 0 || strstr(tools, r->tool))
			continue;
		size_t used = strlen(tools);
		snprintf(tools + used, sizeof tools - used, "%s%s", n ? " and " : "", r->tool);
		if (n++ == 0)
			only = r;
	}
	if (n == 1 && only->ours && *only->ours && !only->value)
		snprintf(buf, len, "%s is NVIDIA's %s option, %s's --%s%s%s here", first->name,
			 first->script, only->tool, only->ours, only->ours_arg ? " " : "",
			 only->ours_arg ? only->ours_arg : "");
	else
		snprintf(buf, len, "%s is NVIDIA's %s option, for %s (ncf(7), NVIDIA'S OPTIONS)",
			 first->name, first->script, tools);
}

const struct ncf_nvidia_name *ncf_nvidia_lookup(const char *name, const char *arg,
						const char *tool, const char **why, char *buf,
						size_t len)
{
	const struct ncf_nvidia_name *first = NULL, *mine = NULL;
	*why = NULL;
	for (const struct ncf_nvidia_name *r = ncf_nvidia_names; r->name; r++) {
		if (strcmp(r->name, name) != 0)
			continue;
		if (!first)
			first = r;
		if (!strcmp(r->tool, tool) && !mine)
			mine = r;
		if (row_holds(r, tool, arg)) {
			if (r->ours)
				return r;
			snprintf(buf, len, "%s%s%s is NVIDIA's %s option; %s", name,
				 r->value ? " " : "", r->value ? r->value : "", r->script, r->refusal);
			*why = buf;
			return NULL;
		}
	}
	if (!first)
		return NULL;
	*why = buf;
	if (mine) /* rows for this tool, but for other values */
		snprintf(buf, len, "%s: '%s' is not a value NVIDIA's %s takes here", name,
			 arg ? arg : "", mine->script);
	else
		other_tools(first, buf, len);
	return NULL;
}

const char *ncf_nvidia_short(const char *word, const char *tool)
{
	for (size_t k = 0; k < sizeof shorts / sizeof shorts[0]; k++)
		if (!strcmp(word, shorts[k].word) && !strcmp(tool, shorts[k].tool))
			return shorts[k].ours;
	return NULL;
}
