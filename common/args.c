/* args - the command line's options, see args.h.
 *
 * A subcommand's rows (the shared ones it takes, its own, --help) are
 * gathered into one list whose index is also getopt_long's `val` (from
 * ARGS_VAL0), so that the parser finds the row of what getopt returns
 * without a switch per subcommand. getopt's own messages are off
 * (opterr = 0, a leading ':'): they name the program, not the
 * subcommand, and cannot tell an ambiguous abbreviation from an unknown
 * option; the messages here do.
 */
#include "args.h"

#include "common/suggest.h"

#include <bellows/error.h>

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS_MAX     64  /* rows of one subcommand, --help included */
#define ARGS_VAL0    256 /* getopt_long's val of the first row */
#define ARGS_WIDTH   78  /* help lines are wrapped to this */
#define ARGS_COL_MAX 22  /* a wider "--name ARG" has its help below */
#define ARGS_WHO_MAX 64  /* "bellows SUBCOMMAND" or a program's name */

const com_opt com_args_shared_opts[COM_ARGS_N] = {
	[COM_ARGS_DB] = {
		.name = "db",
		.arg = "FILE",
		.help = "bellowsd's history database, read-only, also while "
			"bellowsd writes it",
		.kind = COM_OPT_TEXT,
		.at = offsetof(com_args_shared, db),
		.min = 1,
	},
	[COM_ARGS_RUN] = {
		.name = "run",
		.arg = "ID",
		.help = "the run of the history (default: the latest)",
		.kind = COM_OPT_I64,
		.at = offsetof(com_args_shared, run),
		.min = 1,
		.max = INT64_MAX,
	},
	[COM_ARGS_JOB] = {
		.name = "job",
		.arg = "NAME",
		.help = "a job name",
		.kind = COM_OPT_NAME,
		.at = offsetof(com_args_shared, job),
		.min = 1,
		.max = 255,
	},
};

static const com_opt args_help_row = {
	.name = "help",
	.help = "print this help and exit",
	.kind = COM_OPT_FLAG,
};

/* The rows of one subcommand: the shared ones it takes, its own, then
 * --help. */
typedef struct args_rows {
	const com_opt *row[ARGS_MAX]; /* the options */
	bool shared[ARGS_MAX];        /* stored in the com_args_shared */
	const char *note[ARGS_MAX];   /* the subcommand's note, or NULL */
	char letter[ARGS_MAX];        /* its short name, '\0': none */
	size_t n;                     /* rows */
} args_rows;

static void
args_rows_of(const com_args_cmd *cmd, args_rows *r)
{
	r->n = 0;
	for (int i = 0; i < COM_ARGS_N; i++) {
		if (!(cmd->shared & COM_ARGS_TAKES(i)))
			continue;
		r->row[r->n] = &com_args_shared_opts[i];
		r->shared[r->n] = true;
		r->note[r->n] = cmd->notes[i];
		r->letter[r->n] = cmd->letters[i];
		r->n++;
	}
	/* A subcommand with more options than the table holds is a bug. */
	assert(r->n + cmd->n_opts + 1 <= ARGS_MAX);
	for (size_t i = 0; i < cmd->n_opts; i++) {
		r->row[r->n] = &cmd->opts[i];
		r->shared[r->n] = false;
		r->note[r->n] = NULL;
		r->letter[r->n] = cmd->opts[i].letter;
		r->n++;
	}
	r->row[r->n] = &args_help_row;
	r->shared[r->n] = false;
	r->note[r->n] = NULL;
	r->letter[r->n] = '\0';
	r->n++;
}

static void *
args_where(const com_args_cmd *cmd, const args_rows *r, size_t i, void *opts)
{
	return (char *)opts + (r->shared[i] ? cmd->shared_at : 0) +
	    r->row[i]->at;
}

/* Who speaks in the messages of command `name`: "bellows export" for a
 * subcommand, the name itself ("bellowsd") for a program of its own. */
static const char *
args_who(const char *name, bool program, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s", program ? "" : "bellows ", name);
	return buf;
}

/* Parses `text`, the value of option `opt`, as a decimal integer in
 * [min, max] into *ret. Returns 0, or BELLOWS_EINVAL after saying why
 * on stderr as "WHO: ..." (*ret untouched). */
static int
args_u64(const char *who, const char *opt, const char *text, uint64_t min,
    uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end = NULL;

	/* strtoull accepts a sign and leading blanks; a count does not. */
	if (text == NULL || !isdigit((unsigned char)text[0]))
		goto fail;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
		goto fail;
	*ret = (uint64_t)v;
	return 0;
fail:
	fprintf(stderr,
	    "%s: %s must be an integer in [%" PRIu64 ", %" PRIu64
	    "], not '%s'\n",
	    who, opt, min, max, text != NULL ? text : "");
	return BELLOWS_EINVAL;
}

/* Checks `text`, the value of option `opt`: min..max bytes (max 0: no
 * upper bound), no control characters when `plain`. Returns 0, or
 * BELLOWS_EINVAL after saying why on stderr as "WHO: ...". */
static int
args_text(const char *who, const char *opt, const char *text, uint64_t min,
    uint64_t max, bool plain)
{
	size_t n = strlen(text);

	if (n < min || (max > 0 && n > max)) {
		if (n == 0 && min == 1)
			fprintf(stderr, "%s: %s must not be empty\n", who, opt);
		else if (max > 0)
			fprintf(stderr,
			    "%s: %s must have %" PRIu64 "..%" PRIu64
			    " bytes, not %zu\n",
			    who, opt, min, max, n);
		else
			fprintf(stderr,
			    "%s: %s must have at least %" PRIu64 " bytes\n",
			    who, opt, min);
		return BELLOWS_EINVAL;
	}
	for (size_t i = 0; plain && i < n; i++) {
		if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f) {
			fprintf(stderr,
			    "%s: %s must not contain control characters\n", who,
			    opt);
			return BELLOWS_EINVAL;
		}
	}
	return 0;
}

/* Checks row i's value `text` and stores it. Returns 0 or
 * BELLOWS_EINVAL (said). */
static int
args_store(const com_args_cmd *cmd, const char *who, const args_rows *r,
    size_t i, const char *text, void *opts)
{
	const com_opt *o = r->row[i];
	void *p = args_where(cmd, r, i, opts);
	char opt[80];
	uint64_t v;

	snprintf(opt, sizeof(opt), "--%s", o->name);
	switch (o->kind) {
	case COM_OPT_FLAG:
		*(bool *)p = true;
		return 0;
	case COM_OPT_TEXT:
	case COM_OPT_NAME:
		if (args_text(who, opt, text, o->min, o->max,
			o->kind == COM_OPT_NAME) != 0)
			return BELLOWS_EINVAL;
		*(const char **)p = text;
		return 0;
	case COM_OPT_U32:
		if (args_u64(who, opt, text, o->min, o->max, &v) != 0)
			return BELLOWS_EINVAL;
		*(uint32_t *)p = (uint32_t)v;
		return 0;
	case COM_OPT_U64:
		return args_u64(who, opt, text, o->min, o->max, p);
	case COM_OPT_I64:
		if (args_u64(who, opt, text, o->min,
			o->max <= INT64_MAX ? o->max : INT64_MAX, &v) != 0)
			return BELLOWS_EINVAL;
		*(int64_t *)p = (int64_t)v;
		return 0;
	case COM_OPT_PARSE:
		return o->parse(cmd->name, opt, text, opts);
	}
	return BELLOWS_EINVAL;
}

/* Says what is wrong with `arg`, which getopt_long did not take: a
 * value given to a flag, an abbreviation of more than one option, or
 * an option the subcommand does not have (and the nearest it has). */
static void
args_unknown(const char *who, const args_rows *r, const struct option *lo,
    const char *arg, int optopt_val)
{
	const char *name;
	size_t len, hits = 0;

	if (optopt_val >= ARGS_VAL0 &&
	    (size_t)(optopt_val - ARGS_VAL0) < r->n) {
		fprintf(stderr, "%s: --%s takes no value\n", who,
		    r->row[optopt_val - ARGS_VAL0]->name);
		return;
	}
	if (optopt_val > 0 && optopt_val < ARGS_VAL0) {
		fprintf(stderr, "%s: unknown option '-%c'\n", who, optopt_val);
		return;
	}
	if (arg == NULL || strncmp(arg, "--", 2) != 0) {
		fprintf(stderr, "%s: unknown option '%s'\n", who,
		    arg != NULL ? arg : "");
		return;
	}
	name = arg + 2;
	len = strcspn(name, "=");
	for (size_t i = 0; i < r->n; i++)
		hits += len > 0 && strncmp(r->row[i]->name, name, len) == 0;
	if (hits < 2) {
		const char *near = com_suggest_option(arg, lo);

		fprintf(stderr, "%s: unknown option '%.*s'", who,
		    (int)(len + 2), arg);
		if (near != NULL)
			fprintf(stderr, "; did you mean '--%s'?", near);
		fputc('\n', stderr);
		return;
	}
	fprintf(stderr, "%s: ambiguous option '%.*s' (", who, (int)(len + 2),
	    arg);
	for (size_t i = 0, k = 0; i < r->n; i++) {
		if (strncmp(r->row[i]->name, name, len) == 0)
			fprintf(stderr, "%s--%s", k++ ? ", " : "",
			    r->row[i]->name);
	}
	fputs(")\n", stderr);
}

/* The row whose short name is `c`, or r->n. */
static size_t
args_letter_row(const args_rows *r, int c)
{
	size_t i;

	for (i = 0; i < r->n; i++) {
		if (r->letter[i] != '\0' && r->letter[i] == c)
			break;
	}
	return i;
}

/* Fills getopt_long's long options (lo, r->n + 1 entries) and short
 * ones (`shorts`, ":h" and each row's letter) for the rows r. */
static void
args_getopt_of(const args_rows *r, struct option *lo, char *shorts)
{
	size_t k = 0;

	shorts[k++] = ':';
	shorts[k++] = 'h';
	for (size_t i = 0; i < r->n; i++) {
		bool value = r->row[i]->kind != COM_OPT_FLAG;

		lo[i] = (struct option){
			.name = r->row[i]->name,
			.has_arg = value ? required_argument : no_argument,
			.flag = NULL,
			.val = ARGS_VAL0 + (int)i,
		};
		if (r->letter[i] == '\0')
			continue;
		shorts[k++] = r->letter[i];
		if (value)
			shorts[k++] = ':';
	}
	shorts[k] = '\0';
	lo[r->n] = (struct option){ 0 };
}

int
com_args_parse(const com_args_cmd *cmd, int argc, char **argv, void *opts,
    int *ret_next)
{
	struct option lo[ARGS_MAX + 1];
	char shorts[2 * ARGS_MAX + 3];
	char who[ARGS_WHO_MAX];
	args_rows r;
	size_t help;
	int c;

	args_who(cmd->name, cmd->program, who, sizeof(who));
	args_rows_of(cmd, &r);
	help = r.n - 1;
	args_getopt_of(&r, lo, shorts);
	opterr = 0;
	optind = 0; /* glibc: start afresh, also on a second call */
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		size_t i = c >= ARGS_VAL0 ? (size_t)(c - ARGS_VAL0)
					  : args_letter_row(&r, c);

		if (c == 'h' || i == help) {
			cmd->usage(stdout);
			return 0;
		}
		if (c == ':') {
			i = optopt >= ARGS_VAL0 ? (size_t)(optopt - ARGS_VAL0)
						: args_letter_row(&r, optopt);
			fprintf(stderr, "%s: --%s needs a value (%s)\n", who,
			    i < r.n ? r.row[i]->name : "?",
			    i < r.n && r.row[i]->arg ? r.row[i]->arg : "?");
			cmd->usage(stderr);
			return 2;
		}
		if (i >= r.n) {
			args_unknown(who, &r, lo,
			    optind > 0 && optind <= argc ? argv[optind - 1]
							 : NULL,
			    optopt);
			cmd->usage(stderr);
			return 2;
		}
		if (args_store(cmd, who, &r, i, optarg, opts) != 0)
			return 2;
	}
	if (argc - optind > cmd->operands) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", who,
		    argv[optind + cmd->operands]);
		return 2;
	}
	*ret_next = optind;
	return -1;
}

/* Writes the words of s, wrapped at ARGS_WIDTH, continuing lines at
 * column `col`; the cursor is at column *pos. */
static void
args_wrap(FILE *f, const char *s, size_t col, size_t *pos)
{
	while (*s != '\0') {
		size_t n;

		while (*s == ' ')
			s++;
		n = strcspn(s, " ");
		if (n == 0)
			break;
		if (*pos > col && *pos + 1 + n > ARGS_WIDTH) {
			fprintf(f, "\n%*s", (int)col, "");
			*pos = col;
		} else if (*pos > col) {
			fputc(' ', f);
			(*pos)++;
		}
		fwrite(s, 1, n, f);
		*pos += n;
		s += n;
	}
}

void
com_args_help(FILE *f, const com_args_cmd *cmd, const void *defaults)
{
	size_t width = 0, col;
	args_rows r;

	args_rows_of(cmd, &r);
	for (size_t i = 0; i < r.n; i++) {
		const com_opt *o = r.row[i];
		size_t w = 2 + strlen(o->name) +
		    (o->arg ? 1 + strlen(o->arg) : 0);

		if (w <= ARGS_COL_MAX && w > width)
			width = w;
	}
	col = 2 + width + 2;
	for (size_t i = 0; i < r.n; i++) {
		const com_opt *o = r.row[i];
		size_t pos;
		int n;

		n = fprintf(f, "  --%s%s%s", o->name, o->arg ? " " : "",
		    o->arg ? o->arg : "");
		pos = n > 0 ? (size_t)n : 0;
		if (pos + 2 > col) {
			fputc('\n', f);
			pos = 0;
		}
		fprintf(f, "%*s", (int)(col - pos), "");
		pos = col;
		args_wrap(f, o->help, col, &pos);
		if (r.note[i] != NULL) {
			fputc(';', f);
			pos++;
			args_wrap(f, r.note[i], col, &pos);
		}
		if (r.shared[i] && defaults != NULL &&
		    (o->kind == COM_OPT_TEXT || o->kind == COM_OPT_NAME)) {
			const char *d = *(
			    const char *const *)((const char *)defaults +
			    cmd->shared_at + o->at);
			char buf[300];

			if (d != NULL) {
				snprintf(buf, sizeof(buf), "(default %s)", d);
				args_wrap(f, buf, col, &pos);
			}
		}
		fputc('\n', f);
	}
}

int
com_args_u64(const char *cmd, const char *opt, const char *text, uint64_t min,
    uint64_t max, uint64_t *ret)
{
	char who[ARGS_WHO_MAX];

	return args_u64(args_who(cmd, false, who, sizeof(who)), opt, text, min,
	    max, ret);
}

int
com_args_u32(const char *cmd, const char *opt, const char *text, uint32_t min,
    uint32_t max, uint32_t *ret)
{
	uint64_t v;
	int r;

	if ((r = com_args_u64(cmd, opt, text, min, max, &v)) != 0)
		return r;
	*ret = (uint32_t)v;
	return 0;
}

int
com_args_text(const char *cmd, const char *opt, const char *text, uint64_t min,
    uint64_t max, bool plain)
{
	char who[ARGS_WHO_MAX];

	return args_text(args_who(cmd, false, who, sizeof(who)), opt, text, min,
	    max, plain);
}
