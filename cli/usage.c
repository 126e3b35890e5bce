/* usage.c - see usage.h. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "err.h"
#include "io.h"
#include "nvidia.h"
#include "usage.h"

const char *ncf_synopsis = "";

void ncf_usage_exit(void)
{
	fprintf(stderr, "usage: %s\nTry '%s --help' for more information.\n", ncf_synopsis,
		ncf_progname());
	exit(NCF_EXIT_USAGE);
}

void ncf_usage_help(void)
{
	printf("usage: %s\n", ncf_synopsis);
	exit(ncf_close_stdout() ? 1 : 0);
}

void ncf_usage_error(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ncf_error("%s", buf);
	ncf_usage_exit();
}

static const struct option *find_long(const struct option *opts, const char *name)
{
	for (; opts->name; opts++)
		if (!strcmp(opts->name, name))
			return opts;
	return NULL;
}

/* getopt's values of NVIDIA's names that are not synonyms: NCF_OPT_NVIDIA
 * plus the row's index; their getopt names are a byte no one types and
 * the index, which argv's "--name" words are rewritten to, so that only
 * the exact name reaches them (NVIDIA's --mode is no abbreviation of
 * ncf-eval's --model) and no abbreviation of ncf's becomes ambiguous. */
#define NCF_OPT_NVIDIA 0x5000
#define HIDDEN '\001'

/* Is r the first row of its name? */
static int first_of_name(const struct ncf_nvidia_name *r)
{
	for (const struct ncf_nvidia_name *x = ncf_nvidia_names; x < r; x++)
		if (!strcmp(x->name, r->name))
			return 0;
	return 1;
}

/* The tool's options; under NVIDIA's names, those of the same meaning
 * that take NVIDIA's argument as it is (the same getopt entry under
 * another name: an abbreviation shared by both is not ambiguous); and
 * every other NVIDIA name under its hidden name. */
static struct option *with_nvidia(const struct ncf_cli *cli)
{
	size_t n = 0, rows = 0;
	while (cli->long_opts[n].name)
		n++;
	for (const struct ncf_nvidia_name *r = ncf_nvidia_names; r->name; r++)
		rows++;
	struct option *all = ncf_xcalloc(n + 2 * rows + 1, sizeof *all);
	memcpy(all, cli->long_opts, n * sizeof *all);
	for (const struct ncf_nvidia_name *r = ncf_nvidia_names; r->name; r++) {
		const struct option *ours = r->ours ? find_long(cli->long_opts, r->ours) : NULL;
		if (strcmp(r->tool, cli->tool) || !ours || r->value || r->ours_arg ||
		    find_long(all, r->name + 2))
			continue;
		all[n] = *ours;
		all[n++].name = r->name + 2;
	}
	for (const struct ncf_nvidia_name *r = ncf_nvidia_names; r->name; r++) {
		if (!first_of_name(r) || find_long(all, r->name + 2))
			continue;
		char *hidden = ncf_xmalloc(16);
		snprintf(hidden, 16, "%c%d", HIDDEN, (int)(r - ncf_nvidia_names));
		all[n++] = (struct option){hidden, r->takes_arg ? required_argument : no_argument, 0,
					   NCF_OPT_NVIDIA + (int)(r - ncf_nvidia_names)};
	}
	return all;
}

/* argv's words that are NVIDIA's names with a hidden getopt name,
 * rewritten to it ("--mode=test": "--\001N=test"), up to "--". */
static void rewrite_nvidia(struct ncf_cli *cli, int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strncmp(argv[i], "--", 2) != 0)
			continue;
		size_t len = strcspn(argv[i], "=");
		for (const struct option *o = cli->opts; o->name; o++) {
			const char *name;
			if (o->val < NCF_OPT_NVIDIA || o->val >= NCF_OPT_NVIDIA + 0x1000)
				continue;
			name = ncf_nvidia_names[o->val - NCF_OPT_NVIDIA].name;
			if (strlen(name) != len || strncmp(argv[i], name, len) != 0)
				continue;
			size_t size = strlen(o->name) + strlen(argv[i] + len) + 3;
			char *w = ncf_xmalloc(size);
			snprintf(w, size, "--%s%s", o->name, argv[i] + len);
			cli->rewritten[2 * cli->nrewritten] = w;
			cli->rewritten[2 * cli->nrewritten++ + 1] = argv[i];
			argv[i] = w;
			break;
		}
	}
}

/* NVIDIA's option row (getopt's c - NCF_OPT_NVIDIA) given with optarg:
 * the option it stands for (optarg set), or 0 when it has nothing to do;
 * a refused one ends here. */
static int nvidia_option(const struct ncf_cli *cli, int c)
{
	const char *name = ncf_nvidia_names[c - NCF_OPT_NVIDIA].name, *why = NULL;
	char buf[512];
	const struct ncf_nvidia_name *r = ncf_nvidia_lookup(name, optarg, cli->tool, &why, buf,
							    sizeof buf);
	if (!r)
		ncf_usage_error("%s", why);
	if (!*r->ours)
		return 0;
	optarg = (char *)(r->ours_arg ? r->ours_arg : optarg);
	return find_long(cli->long_opts, r->ours)->val;
}

int ncf_cli_next(struct ncf_cli *cli, int argc, char **argv)
{
	if (!cli->opts) {
		cli->opts = with_nvidia(cli);
		cli->argc = argc;
		cli->argv = argv;
		cli->given = ncf_xmalloc(((size_t)argc + 1) * sizeof *cli->given);
		memcpy(cli->given, argv, ((size_t)argc + 1) * sizeof *argv);
		cli->rewritten = ncf_xcalloc(2 * (size_t)argc + 1, sizeof *cli->rewritten);
		rewrite_nvidia(cli, argc, argv);
		opterr = 0;
	}
	for (;;) {
		int c = getopt_long(argc, argv, cli->short_opts, cli->opts, NULL);
		if (c < NCF_OPT_NVIDIA || c >= NCF_OPT_NVIDIA + 0x1000)
			return c;
		c = nvidia_option(cli, c);
		if (c != 0)
			return c;
	}
}

void ncf_cli_free(struct ncf_cli *cli)
{
	for (const struct option *o = cli->opts; o && o->name; o++)
		if (o->name[0] == HIDDEN)
			free((char *)o->name);
	/* argv gets its own words back (MPI_Init reads it after) */
	for (int k = 0; k < cli->nrewritten; k++) {
		for (int i = 0; i < cli->argc; i++)
			if (cli->argv[i] == cli->rewritten[2 * k])
				cli->argv[i] = cli->rewritten[2 * k + 1];
		free(cli->rewritten[2 * k]);
	}
	free(cli->rewritten);
	free(cli->opts);
	free(cli->given);
	cli->opts = NULL;
	cli->given = NULL;
	cli->rewritten = NULL;
	cli->nrewritten = 0;
}

/* Optimal string alignment distance of a and b (at most 63 bytes each),
 * case and '_' against '-' not counted. */
static int distance(const char *a, const char *b)
{
	int la = (int)strlen(a), lb = (int)strlen(b);
	if (la > 63 || lb > 63)
		return 99;
	int d[64][64];
	for (int i = 0; i <= la; i++)
		d[i][0] = i;
	for (int j = 0; j <= lb; j++)
		d[0][j] = j;
	for (int i = 1; i <= la; i++)
		for (int j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
			ca = ca == '_' ? '-' : ca;
			cb = cb == '_' ? '-' : cb;
			int v = d[i - 1][j - 1] + (ca != cb);
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

/* The known long option nearest to word ("--batchsize"), NULL when none
 * is near: ncf's and the NVIDIA names the tool takes or refuses. */
static const char *nearest(const struct ncf_cli *cli, const char *word)
{
	char name[64];
	size_t len = strcspn(word + 2, "=");
	if (strncmp(word, "--", 2) != 0 || len == 0 || len >= sizeof name)
		return NULL;
	memcpy(name, word + 2, len);
	name[len] = 0;
	const char *best = NULL;
	int best_d = 1 + (int)len / 4;
	for (const struct option *o = cli->opts; o && o->name; o++) {
		if (o->name[0] == HIDDEN)
			continue;
		int d = distance(name, o->name);
		if (d <= best_d && (d < best_d || !best)) {
			best = o->name;
			best_d = d;
		}
	}
	for (const struct ncf_nvidia_name *r = ncf_nvidia_names; r->name; r++) {
		int d = distance(name, r->name + 2);
		if (!strcmp(r->tool, cli->tool) && d < best_d) {
			best = r->name + 2;
			best_d = d;
		}
	}
	return best;
}

/* argv's word as given, where it was rewritten for getopt. */
static const char *as_given(const struct ncf_cli *cli, const char *word)
{
	for (int k = 0; k < cli->nrewritten; k++)
		if (cli->rewritten[2 * k] == word)
			return cli->rewritten[2 * k + 1];
	return word;
}

void ncf_cli_common(int c, struct ncf_cli *cli)
{
	const char *word = as_given(cli, cli->argv[optind - 1]);
	const char *near;
	switch (c) {
	case 'q':
		ncf_verbosity = ncf_verbosity > 0 ? ncf_verbosity - 1 : 0;
		return;
	case 'v':
		ncf_verbosity++;
		return;
	case 'V':
		cli->version = 1;
		return;
	case 'h':
		cli->usage();
		exit(ncf_close_stdout() ? NCF_EXIT_FAIL : 0);
	case ':':
		ncf_usage_error("option '%s' needs a value", word);
	default:
		near = optopt ? NULL : nearest(cli, word);
		if (near)
			ncf_usage_error("unknown option '%s' (did you mean --%s?)", word, near);
		ncf_usage_error("unknown option '%s'", word);
	}
}

void ncf_cli_operand(const struct ncf_cli *cli, const char *operand, const char *what)
{
	double v;
	struct stat st;
	if (ncf_parse_double(operand, &v) != 0 || stat(operand, &st) == 0)
		return;
	int j = 1;
	while (j < cli->argc && cli->given[j] != operand)
		j++;
	const char *prev = j < cli->argc ? cli->given[j - 1] : "";
	if (j < 2 || prev[0] != '-' || prev[1] == '-' || !prev[1])
		return;
	/* the short options of the word, up to the one that takes the rest */
	for (const char *p = prev + 1; *p; p++) {
		const char *s = *p != ':' ? strchr(cli->short_opts, *p) : NULL;
		if (!s || s[1] != ':')
			continue;
		if (!p[1])
			return; /* its value was the next word, not this operand */
		const char *name = NULL;
		for (const struct option *o = cli->long_opts; o->name && !name; o++)
			if (o->val == *p)
				name = o->name;
		char took[160], hint[256] = "";
		if (name)
			snprintf(took, sizeof took, "-%c %s (--%s %s)", *p, p + 1, name, p + 1);
		else
			snprintf(took, sizeof took, "-%c %s", *p, p + 1);
		const char *nv = ncf_nvidia_short(prev, cli->tool);
		if (nv)
			snprintf(hint, sizeof hint, "; NVIDIA's %s is %s here: %s %s", prev, nv, nv,
				 operand);
		ncf_usage_error("'%s' where %s was expected: %s was read as %s%s", operand, what,
				prev, took, hint);
	}
}

int64_t ncf_opt_int(const char *opt, const char *arg, int64_t min, int64_t max)
{
	int64_t v;
	if (ncf_opt_parse_int(opt, arg, min, max, &v) != 0)
		ncf_usage_exit();
	return v;
}

uint64_t ncf_opt_u64(const char *opt, const char *arg)
{
	uint64_t v;
	if (ncf_opt_parse_u64(opt, arg, &v) != 0)
		ncf_usage_exit();
	return v;
}

double ncf_opt_real(const char *opt, const char *arg, double lo, int lo_open, double hi,
		    int hi_open)
{
	double v;
	if (ncf_opt_parse_real(opt, arg, lo, lo_open, hi, hi_open, &v) != 0)
		ncf_usage_exit();
	return v;
}

int ncf_opt_int_list(const char *opt, const char *arg, int64_t *out, int max, int64_t min,
		     int64_t max_v)
{
	int n;
	if (ncf_opt_parse_int_list(opt, arg, out, max, min, max_v, &n) != 0)
		ncf_usage_exit();
	return n;
}

/* NVIDIA's ncf.py takes the sizes as separate arguments (--layers 256
 * 256 128 64), which leaves all but the first here as operands, or as one
 * argument with spaces when quoted: say the form ours takes, from the
 * sizes given.  Returns only when arg is not spelled that way. */
static void refuse_nvidia_layers(const char *arg, char *const *rest)
{
	int64_t v;
	int spaced = strchr(arg, ' ') != NULL;
	int separate = !strchr(arg, ',') && ncf_parse_i64(arg, &v) == 0 && rest[0] &&
		       ncf_parse_i64(rest[0], &v) == 0;
	if (!spaced && !separate)
		return;
	char form[256];
	size_t n = 0;
	for (const char *p = arg; *p && n + 1 < sizeof form; p++) {
		if (*p != ' ')
			form[n++] = *p;
		else if (n && form[n - 1] != ',' && p[1] && p[1] != ' ')
			form[n++] = ',';
	}
	form[n] = 0;
	for (int k = 0; separate && rest[k] && ncf_parse_i64(rest[k], &v) == 0; k++)
		if (n + strlen(rest[k]) + 2 < sizeof form)
			n += (size_t)sprintf(form + n, ",%s", rest[k]);
	ncf_usage_error("--layers takes the sizes as one comma-separated argument, not as "
			"separate ones: --layers %s",
			ncf_escape(form, n, 80));
}

int ncf_opt_layers(const char *arg, char *const *rest, uint32_t *layers, int max)
{
	refuse_nvidia_layers(arg, rest);
	int64_t v[64];
	int n = ncf_opt_int_list("--layers", arg, v, max < 64 ? max : 64, 1, 8192);
	if (n < 2)
		ncf_usage_error("--layers needs at least two sizes (input, one layer)");
	if (v[0] % 2)
		ncf_usage_error("--layers: the first size (%lld) is the user and item MLP "
				"embeddings side by side and must be even",
				(long long)v[0]);
	for (int k = 0; k < n; k++)
		layers[k] = (uint32_t)v[k];
	return n;
}

/* K is refused or warned about: at or above c's candidates per user. */
static int topk_trivial(uint32_t k, const struct ncf_cache *c)
{
	return k >= c->eval_negatives + 1;
}

int ncf_topk_refuse(uint32_t k, int given, const char *path, const struct ncf_cache *c)
{
	if (!topk_trivial(k, c) || !given || c->split_given)
		return 0;
	uint32_t n = c->eval_negatives + 1;
	ncf_error("--topk %u: %s has %u candidates per user (the test item and %u negatives), "
		  "so HR@%u would be 1 whatever the model; give K below %u",
		  k, path, n, c->eval_negatives, k, n);
	return -1;
}

int ncf_topk_warn(uint32_t k, int given, const char *path, const struct ncf_cache *c)
{
	if (!topk_trivial(k, c) || (given && !c->split_given))
		return 0;
	uint32_t n = c->eval_negatives + 1;
	ncf_warn("HR@%u is 1 whatever the model: %s has %u candidates per user (the test item "
		 "and %u negatives); give -k below %u",
		 k, path, n, c->eval_negatives, n);
	return 1;
}

int ncf_backend_option(int c, const char *arg, struct ncf_backend_opts *o)
{
	int r = ncf_backend_opt_parse(c, arg, o);
	if (r < 0)
		ncf_usage_exit();
	return r;
}

void ncf_backend_opts_finish(struct ncf_backend_opts *o)
{
	if (ncf_backend_opts_check(o) != 0)
		ncf_usage_exit();
}

void ncf_exit_hung(void)
{
	_exit(NCF_EXIT_FAIL);
}
