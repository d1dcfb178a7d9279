/* history - `bellows history`, see history.h.
 *
 * The subcommands differ only in their question and in what they may be
 * restricted by, so they are rows of one table (history_subs) and share
 * one path: parse, open, pick the run inside one read transaction (the
 * run and its rows come from the same snapshot while bellowsd writes),
 * ask, print. Window-keyed questions take a time bound through the
 * windows that closed in it; decisions, runs and events carry their own
 * times.
 */
#include "history.h"

#include "client/cellfmt.h"
#include "client/historyrows.h"

#include "common/args.h"
#include "client/metrics.h"
#include "common/stat_table.h"
#include "common/suggest.h"
#include "common/units.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HISTORY_SEP "  " /* between table columns */

/* What a subcommand may be restricted by. A time bound applies to the
 * rows' own times with BY_TIME, else to the windows that closed then. */
enum {
	BY_WINDOW = 1 << 0, /* --since/--until take window numbers */
	BY_TIME = 1 << 1,   /* the rows have times of their own */
	NEEDS_RUN = 1 << 2, /* a run: --run or the latest */
	HAS_LAYER = 1 << 3, /* --layer */
};

typedef enum history_sub_id {
	SUB_RUNS,
	SUB_LAYERS,
	SUB_WINDOWS,
	SUB_DECISIONS,
	SUB_EVENTS,
	SUB_TIMINGS,
	SUB_STATS,
	SUB_METRICS,
	SUB_COMM,
	SUB_RESIDUALS,
	SUB_N,
} history_sub_id;

typedef struct history_sub {
	const char *name;    /* the subcommand */
	tool_hdb_question q; /* its question */
	unsigned flags;      /* BY_*, NEEDS_RUN, HAS_LAYER */
	const char *summary; /* for the usage text */
} history_sub;

/* Summaries continue on lines indented by 13 columns, under the first. */
#define MORE "\n             "

static const history_sub history_subs[SUB_N] = {
	[SUB_RUNS] = { "runs", TOOL_HDB_Q_RUNS, BY_TIME,
	    "every run: job, ranks, layers, start and end," MORE
	    "windows, decisions, bytes saved" },
	[SUB_LAYERS] = { "layers", TOOL_HDB_Q_LAYERS, BY_WINDOW | NEEDS_RUN,
	    "per layer: shape, the levels it was sent at" MORE
	    "(applied) and the level decided, how often" MORE
	    "decisions changed it" },
	[SUB_WINDOWS] = { "windows", TOOL_HDB_Q_WINDOWS,
	    BY_WINDOW | NEEDS_RUN | HAS_LAYER,
	    "per window: steps, LR, ranks, step time, floats" MORE
	    "sent, bytes saved, layers compressed as applied" MORE
	    "and as decided; with --layer, that layer's" MORE
	    "norms and level applied and decided" },
	[SUB_DECISIONS] = { "decisions", TOOL_HDB_Q_DECISIONS,
	    BY_WINDOW | BY_TIME | NEEDS_RUN | HAS_LAYER,
	    "every decision: when, which policy, why, what" MORE "changed" },
	[SUB_EVENTS] = { "events", TOOL_HDB_Q_EVENTS, BY_TIME,
	    "what happened: reloads, ranks lost and joined," MORE
	    "store trouble" },
	[SUB_TIMINGS] = { "timings", TOOL_HDB_Q_TIMINGS, BY_WINDOW | NEEDS_RUN,
	    "per rank, slowest first, against the median" MORE
	    "rank; --per-window: per rank and window" },
	[SUB_STATS] = { "stats", TOOL_HDB_Q_STATS,
	    BY_WINDOW | NEEDS_RUN | HAS_LAYER,
	    "per window: backward, codec, compute and comm" MORE
	    "time, memory, threshold, gate, calibration," MORE
	    "collectives; with --layer, that layer's" MORE
	    "level, error bound and every statistic the" MORE
	    "history keeps of it, window by window" },
	[SUB_METRICS] = { "metrics", TOOL_HDB_Q_METRICS,
	    BY_WINDOW | NEEDS_RUN | HAS_LAYER,
	    "what the policies computed per window (fitted" MORE
	    "parameters, predicted times, bounds); with" MORE
	    "--layer, that layer's only" },
	[SUB_COMM] = { "comm", TOOL_HDB_Q_COMM, BY_WINDOW | NEEDS_RUN,
	    "every rank's collectives per window: bytes," MORE
	    "compressed or not, count, median ms, GB/s" },
	[SUB_RESIDUALS] = { "residuals", TOOL_HDB_Q_RESIDUALS,
	    BY_WINDOW | NEEDS_RUN | HAS_LAYER,
	    "per window: error-feedback residual floats kept" MORE
	    "under the residual plan, of one per parameter;" MORE
	    "with --layer, that layer's residual norms and" MORE
	    "|r|/rms quantiles" },
};

#undef MORE

/* ---- option values ----------------------------------------------------- */

/* Reads exactly `n` digits at *s into *ret and advances *s. */
static bool
history_digits(const char **s, int n, int *ret)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if ((*s)[i] < '0' || (*s)[i] > '9')
			return false;
		v = v * 10 + ((*s)[i] - '0');
	}
	*s += n;
	*ret = v;
	return true;
}

static int
history_days_in_month(int year, int month)
{
	static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
		30, 31 };
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return month == 2 && leap ? 29 : days[month - 1];
}

/* Parses a UTC time into its first millisecond and the length of what
 * it names (a day, minute, second, or 100/10/1 ms). */
static bool
history_parse_time(const char *s, int64_t *ret_ms, int64_t *ret_unit)
{
	int year, month, day, hour = 0, min = 0, sec = 0, frac = 0;
	int64_t unit = 86400000;
	struct tm tm = { 0 };
	time_t t;

	if (!history_digits(&s, 4, &year) || *s++ != '-' ||
	    !history_digits(&s, 2, &month) || *s++ != '-' ||
	    !history_digits(&s, 2, &day))
		return false;
	if (month < 1 || month > 12 || day < 1 ||
	    day > history_days_in_month(year, month))
		return false;
	if (*s == 'T' || *s == ' ') {
		s++;
		if (!history_digits(&s, 2, &hour) || *s++ != ':' ||
		    !history_digits(&s, 2, &min) || hour > 23 || min > 59)
			return false;
		unit = 60000;
		if (*s == ':') {
			s++;
			if (!history_digits(&s, 2, &sec) || sec > 59)
				return false;
			unit = 1000;
			if (*s == '.') {
				int digits = 0;

				for (s++; *s >= '0' && *s <= '9' && digits < 3;
				     s++, digits++)
					frac = frac * 10 + (*s - '0');
				if (digits == 0)
					return false;
				for (unit = 1000; digits > 0; digits--) {
					unit /= 10;
				}
				frac *= (int)unit;
			}
		}
	}
	if (*s == 'Z')
		s++;
	if (*s != '\0')
		return false;
	tm.tm_year = year - 1900;
	tm.tm_mon = month - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	if ((t = timegm(&tm)) == (time_t)-1 && year != 1969)
		return false;
	*ret_ms = (int64_t)t * 1000 + frac;
	*ret_unit = unit;
	return true;
}

int
tool_history_parse_bound(const char *cmd, const char *opt, const char *text,
    bool until, tool_history_bound *ret)
{
	int64_t ms, unit;
	size_t n = strspn(text, "0123456789");

	if (n > 0 && text[n] == '\0') {
		char *end;
		unsigned long long v;

		v = strtoull(text, &end, 10);
		if (n > 19 || v > INT64_MAX) {
			fprintf(stderr,
			    "bellows %s: %s: window %s is too large\n", cmd,
			    opt, text);
			return BELLOWS_EINVAL;
		}
		*ret = (tool_history_bound){ .set = true, .value = (int64_t)v };
		return 0;
	}
	if (!history_parse_time(text, &ms, &unit)) {
		fprintf(stderr,
		    "bellows %s: %s must be a window number or a UTC time "
		    "like 2026-11-22T10:00 (YYYY-MM-DD[THH:MM[:SS[.mmm]]][Z]"
		    "), not '%s'\n",
		    cmd, opt, text);
		return BELLOWS_EINVAL;
	}
	*ret = (tool_history_bound){
		.set = true,
		.is_time = true,
		.value = until ? ms + unit - 1 : ms,
	};
	return 0;
}

int
tool_history_parse_format(const char *cmd, const char *text,
    tool_history_format *ret)
{
	static const char *const names[] = { "table", "csv", "json" };

	for (int i = 0; i < 3; i++) {
		if (strcmp(text, names[i]) == 0) {
			*ret = (tool_history_format)i;
			return 0;
		}
	}
	fprintf(stderr,
	    "bellows %s: --format must be table, csv or json, not '%s'\n", cmd,
	    text);
	return BELLOWS_EINVAL;
}

/* ---- cells ------------------------------------------------------------- */

/* ---- tables ------------------------------------------------------------ */

/* A growing text buffer for one rendered cell. */
typedef struct history_buf {
	char *s;    /* NUL-terminated text */
	size_t len; /* bytes used */
	size_t cap; /* bytes allocated */
} history_buf;

static int
history_buf_put(history_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 64;
		char *g;

		while (nc < b->len + n + 1)
			nc *= 2;
		if ((g = realloc(b->s, nc)) == NULL)
			return BELLOWS_ENOMEM;
		b->s = g;
		b->cap = nc;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

static bool
history_numeric(const tool_hdb_cell *c)
{
	return c->type == TOOL_HDB_INT || c->type == TOOL_HDB_REAL;
}

/* What a column's numbers measure, from its name: tables show them with
 * their unit (CSV and JSON keep the exact numbers). */
typedef enum history_unit {
	UNIT_NONE,      /* a plain number */
	UNIT_BYTES,     /* a size: 1.17 GB */
	UNIT_FLOATS,    /* a count of floats: 300.92M */
	UNIT_MS,        /* milliseconds: 12.3 ms, 1.52 s */
	UNIT_THRESHOLD, /* a size threshold: "all raw" past every tensor */
} history_unit;

/* The unit the statistics table gives the history column `name` (an
 * entry's wcol, wcol2 or rcol) as a history_unit, UNIT_NONE when no
 * entry names it or its unit is none of bytes and ms: a statistic added
 * to the table is shown with its unit without an edit here. */
static history_unit
history_unit_of_stat(const char *name)
{
	static const struct {
		const com_stat *table; /* the layer or the timings table */
		size_t n;              /* its entries */
	} tables[] = { { com_layer_stat_table, COM_N_LSTATS },
		{ com_timing_stat_table, COM_N_TSTATS } };

	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		for (size_t i = 0; i < tables[t].n; i++) {
			const com_stat *s = &tables[t].table[i];
			bool named = (s->wcol != NULL &&
					 strcmp(s->wcol, name) == 0) ||
			    (s->wcol2 != NULL && strcmp(s->wcol2, name) == 0) ||
			    (s->rcol != NULL && strcmp(s->rcol, name) == 0);

			if (!named)
				continue;
			if (strcmp(s->unit, "bytes") == 0)
				return UNIT_BYTES;
			if (strcmp(s->unit, "ms") == 0)
				return UNIT_MS;
			return UNIT_NONE;
		}
	}
	return UNIT_NONE;
}

/* A column's unit: the statistics table's for a statistic column, else
 * by the names the questions give their derived columns. */
static history_unit
history_unit_of(const char *name)
{
	static const char *const bytes[] = { "bytes_saved", "bytes_sent",
		"bytes_raw", "bytes", "act_bytes", "act_raw_bytes",
		"mem_device", "device", "mem_host", "resid_bytes" };
	size_t n = strlen(name);
	history_unit u = history_unit_of_stat(name);

	if (u != UNIT_NONE)
		return u;
	if (strcmp(name, "threshold") == 0 ||
	    strcmp(name, "size_threshold") == 0)
		return UNIT_THRESHOLD;
	for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
		if (strcmp(name, bytes[i]) == 0)
			return UNIT_BYTES;
	}
	if (strcmp(name, "floats_sent") == 0 || strcmp(name, "floats_raw") == 0)
		return UNIT_FLOATS;
	if ((n > 3 && strcmp(name + n - 3, "_ms") == 0) ||
	    strstr(name, "_ms_") != NULL)
		return UNIT_MS;
	return UNIT_NONE;
}

/* Writes v in `unit` into num, or returns false to print it plain. */
static bool
history_human(double v, history_unit unit, char *num, size_t len)
{
	double a = fabs(v);

	switch (unit) {
	case UNIT_THRESHOLD:
		if (v >= 9.2e18) { /* above every tensor: nothing compressed */
			snprintf(num, len, "all raw");
			return true;
		}
		/* FALLTHROUGH */
	case UNIT_BYTES:
		com_fmt_bytes(v, num, len);
		return true;
	case UNIT_FLOATS:
		com_fmt_count(v, num, len);
		return true;
	case UNIT_MS:
		if (a < 1000.0)
			snprintf(num, len, "%.3g ms", v);
		else if (a < 60000.0)
			snprintf(num, len, "%.3g s", v / 1000.0);
		else
			snprintf(num, len, "%.1f min", v / 60000.0);
		return true;
	case UNIT_NONE:
	default:
		return false;
	}
}

/* Renders a cell for a table into b and returns its width in characters
 * (UTF-8 code points), or -1 when out of memory. */
static int64_t
history_render(const tool_hdb_cell *c, history_unit unit, bool wide,
    history_buf *b)
{
	char num[48], *hex = NULL;
	const char *s = num;
	size_t n, width = 0, cut = 0, chars = 0;

	b->len = 0;
	switch (c->type) {
	case TOOL_HDB_INT:
		if (history_human((double)c->i, unit, num, sizeof(num)))
			n = strlen(num);
		else
			n = (size_t)snprintf(num, sizeof(num), "%" PRId64,
			    c->i);
		break;
	case TOOL_HDB_REAL:
		if (history_human(c->d, unit, num, sizeof(num)))
			n = strlen(num);
		else
			n = (size_t)snprintf(num, sizeof(num), "%.6g", c->d);
		break;
	case TOOL_HDB_TEXT:
		s = c->s;
		n = c->len;
		break;
	case TOOL_HDB_BLOB:
		if ((hex = malloc(2 * c->len + 1)) == NULL)
			return -1;
		for (size_t i = 0; i < c->len; i++)
			snprintf(hex + 2 * i, 3, "%02x",
			    (unsigned char)c->s[i]);
		hex[2 * c->len] = '\0';
		s = hex;
		n = 2 * c->len;
		break;
	case TOOL_HDB_NULL:
	default:
		n = 1;
		num[0] = '-';
		break;
	}
	/* More than CELL_MAX characters: keep CELL_MAX - 3 and "...". */
	for (size_t i = 0; !wide && i < n; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (chars == TOOL_HISTORY_CELL_MAX - 3)
				cut = i;
			chars++;
		}
	}
	if (chars <= TOOL_HISTORY_CELL_MAX)
		cut = 0;
	if (history_buf_put(b, "", 0) != 0)
		goto oom;
	for (size_t i = 0; i < (cut ? cut : n); i++) {
		unsigned char ch = (unsigned char)s[i];
		char out = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;

		if (history_buf_put(b, &out, 1) != 0)
			goto oom;
		if ((ch & 0xc0) != 0x80)
			width++;
	}
	if (cut) {
		if (history_buf_put(b, "...", 3) != 0)
			goto oom;
		width += 3;
	}
	free(hex);
	return (int64_t)width;
oom:
	free(hex);
	return -1;
}

static void
history_pad(FILE *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fputc(' ', f);
}

static size_t
history_text_width(const char *s)
{
	size_t w = 0;

	for (; *s != '\0'; s++) {
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	}
	return w;
}

static int
history_print_table(FILE *f, const tool_hdb_rows *rows, bool wide)
{
	uint32_t nc = rows->n_cols;
	size_t *width = calloc(nc ? nc : 1, sizeof(*width));
	bool *right = calloc(nc ? nc : 1, sizeof(*right));
	history_buf b = { 0 };
	int r = BELLOWS_ENOMEM;

	if (width == NULL || right == NULL)
		goto out;
	for (uint32_t c = 0; c < nc; c++) {
		bool any = false, all = true;

		width[c] = history_text_width(rows->names[c]);
		for (uint64_t i = 0; i < rows->n_rows; i++) {
			const tool_hdb_cell *cell = tool_hdb_rows_cell(rows, i,
			    c);
			int64_t w = history_render(cell,
			    history_unit_of(rows->names[c]), wide, &b);

			if (w < 0)
				goto out;
			if ((size_t)w > width[c])
				width[c] = (size_t)w;
			if (cell->type != TOOL_HDB_NULL) {
				any = true;
				all = all && history_numeric(cell);
			}
		}
		right[c] = any && all;
	}
	for (int64_t i = -1; i < (int64_t)rows->n_rows; i++) {
		for (uint32_t c = 0; c < nc; c++) {
			const char *s;
			size_t w;

			if (i < 0) {
				s = rows->names[c];
				w = history_text_width(s);
			} else {
				int64_t
				    rw = history_render(tool_hdb_rows_cell(rows,
							    (uint64_t)i, c),
					history_unit_of(rows->names[c]), wide,
					&b);

				if (rw < 0)
					goto out;
				s = b.s;
				w = (size_t)rw;
			}
			if (c > 0)
				fputs(HISTORY_SEP, f);
			if (right[c])
				history_pad(f, width[c] - w);
			fputs(s, f);
			if (!right[c] && c + 1 < nc)
				history_pad(f, width[c] - w);
		}
		fputc('\n', f);
	}
	r = ferror(f) ? BELLOWS_EIO : 0;
out:
	free(b.s);
	free(width);
	free(right);
	return r;
}

/* CSV and JSON are written row by row, as the rows arrive: a long run's
 * per-window timings need not fit in memory. */
typedef struct history_out {
	FILE *f;                  /* destination */
	tool_history_format fmt;  /* CSV or JSON */
	uint32_t n_cols;          /* columns */
	const char *const *names; /* their names, valid while rows come */
	uint64_t n_rows;          /* rows written */
} history_out;

static int
history_out_columns(void *arg, uint32_t n, const char *const *names)
{
	history_out *o = arg;

	o->n_cols = n;
	o->names = names;
	if (o->fmt == TOOL_HISTORY_CSV)
		return tool_cellfmt_header(o->f, n, names);
	return fputc('[', o->f) == EOF ? BELLOWS_EIO : 0;
}

static int
history_out_row(void *arg, const tool_hdb_cell *cells)
{
	history_out *o = arg;
	bool json = o->fmt == TOOL_HISTORY_JSON;

	if (json)
		fputs(o->n_rows > 0 ? ",\n  {" : "\n  {", o->f);
	for (uint32_t c = 0; c < o->n_cols; c++) {
		if (c > 0)
			fputs(json ? ", " : ",", o->f);
		if (json) {
			if (tool_cellfmt_json_string(o->f, o->names[c],
				strlen(o->names[c])) != 0)
				return BELLOWS_EIO;
			fputs(": ", o->f);
		}
		if (tool_cellfmt_put(o->f, o->fmt == TOOL_HISTORY_JSON,
			&cells[c]) != 0)
			return BELLOWS_EIO;
	}
	fputc(json ? '}' : '\n', o->f);
	o->n_rows++;
	return ferror(o->f) ? BELLOWS_EIO : 0;
}

static int
history_out_end(history_out *o)
{
	if (o->fmt == TOOL_HISTORY_JSON)
		fputs(o->n_rows > 0 ? "\n]\n" : "]\n", o->f);
	return ferror(o->f) ? BELLOWS_EIO : 0;
}

int
tool_history_print(FILE *f, const tool_hdb_rows *rows, tool_history_format fmt,
    bool wide)
{
	history_out o = { .f = f, .fmt = fmt };
	int r;

	if (fmt == TOOL_HISTORY_TABLE)
		return history_print_table(f, rows, wide);
	if ((r = history_out_columns(&o, rows->n_cols,
		 (const char *const *)rows->names)) != 0)
		return r;
	for (uint64_t i = 0; i < rows->n_rows; i++) {
		if ((r = history_out_row(&o, tool_hdb_rows_cell(rows, i, 0))) !=
		    0)
			return r;
	}
	return history_out_end(&o);
}

/* ---- the subcommand ---------------------------------------------------- */

typedef struct history_opts {
	com_args_shared sh;       /* --db, --run, --job */
	const history_sub *sub;   /* the question */
	const char *layer;        /* --layer */
	tool_history_bound since; /* --since */
	tool_history_bound until; /* --until */
	tool_history_format fmt;  /* --format */
	bool wide;                /* --wide */
	bool changed;             /* --changed */
	bool per_window;          /* --per-window */
} history_opts;

static const char HISTORY_CMD[] = "history";

static int
history_opt_since(const char *cmd, const char *opt, const char *text,
    void *opts)
{
	return tool_history_parse_bound(cmd, opt, text, false,
	    &((history_opts *)opts)->since);
}

static int
history_opt_until(const char *cmd, const char *opt, const char *text,
    void *opts)
{
	return tool_history_parse_bound(cmd, opt, text, true,
	    &((history_opts *)opts)->until);
}

static int
history_opt_format(const char *cmd, const char *opt, const char *text,
    void *opts)
{
	(void)opt;
	return tool_history_parse_format(cmd, text,
	    &((history_opts *)opts)->fmt);
}

static const history_opts history_defaults = {
	.sh = { .db = TOOL_HISTORY_DEFAULT_DB },
};

static const com_opt history_opt_rows[] = {
	{ .name = "layer",
	    .arg = "NAME",
	    .help = "windows: this layer per window; decisions: those that "
		    "changed it; stats: every statistic kept of it; "
		    "metrics: its own",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(history_opts, layer) },
	{ .name = "since",
	    .arg = "W|TIME",
	    .help = "from this window number (\"12\") or UTC time "
		    "(\"2026-11-22T10:00\", to the ms), inclusive; runs and "
		    "events take times only",
	    .kind = COM_OPT_PARSE,
	    .parse = history_opt_since },
	{ .name = "until",
	    .arg = "W|TIME",
	    .help = "to this window number or UTC time, inclusive; a time "
		    "covers all of what it names (\"10:05\" up to "
		    "10:05:59.999); runs and events take times only",
	    .kind = COM_OPT_PARSE,
	    .parse = history_opt_until },
	{ .name = "format",
	    .arg = "F",
	    .help = "table (default), csv or json",
	    .kind = COM_OPT_PARSE,
	    .parse = history_opt_format },
	{ .name = "wide",
	    .help = "tables: do not cut long text",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(history_opts, wide) },
	{ .name = "changed",
	    .help = "decisions: only those that changed a knob",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(history_opts, changed) },
	{ .name = "per-window",
	    .help = "timings: a row per rank and window",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(history_opts, per_window) },
};

static const com_args_cmd history_cmd = {
	.name = HISTORY_CMD,
	.shared = COM_ARGS_TAKES(COM_ARGS_DB) |
	    COM_ARGS_TAKES(COM_ARGS_RUN) | COM_ARGS_TAKES(COM_ARGS_JOB),
	.shared_at = offsetof(history_opts, sh),
	.notes = {
		[COM_ARGS_RUN] = "with --job, its latest; runs and events "
				  "show every run without it",
		[COM_ARGS_JOB] = "only this job's runs and events, and its "
				  "latest run",
	},
	.operands = 1, /* the question */
	.opts = history_opt_rows,
	.n_opts = sizeof(history_opt_rows) / sizeof(history_opt_rows[0]),
	.usage = tool_history_usage,
};

void
tool_history_usage(FILE *f)
{
	fputs("usage: bellows history runs|layers|windows|decisions|events|"
	      "timings|\n"
	      "                       stats|metrics|comm|residuals\n"
	      "                       [--db FILE] [--run ID] [--job NAME] "
	      "[--layer NAME]\n"
	      "                       [--since W|TIME] [--until W|TIME]\n"
	      "                       [--format table|csv|json] [--wide]\n"
	      "                       [--changed] [--per-window]\n"
	      "\n",
	    f);
	for (int i = 0; i < SUB_N; i++)
		fprintf(f, "  %-10s %s\n", history_subs[i].name,
		    history_subs[i].summary);
	fprintf(f, "  %-10s %s\n", "compare",
	    "two runs side by side (bellows history compare --help)");
	fputc('\n', f);
	com_args_help(f, &history_cmd, &history_defaults);
	fputs("\n  See docs/history.md.\n", f);
}

/* Checks that the options given make sense for the subcommand. Returns
 * -1 to go on, else the exit code. */
static int
history_check(const history_opts *o)
{
	const history_sub *s = o->sub;
	const tool_history_bound *b[2] = { &o->since, &o->until };
	const char *bname[2] = { "--since", "--until" };

	if (o->layer != NULL && !(s->flags & HAS_LAYER)) {
		fprintf(stderr,
		    "bellows history: --layer applies to windows, "
		    "decisions, stats and metrics, not %s\n",
		    s->name);
		return 2;
	}
	if (o->changed && s != &history_subs[SUB_DECISIONS]) {
		fprintf(stderr,
		    "bellows history: --changed applies to decisions only\n");
		return 2;
	}
	if (o->per_window && s != &history_subs[SUB_TIMINGS]) {
		fprintf(stderr,
		    "bellows history: --per-window applies to timings only\n");
		return 2;
	}
	for (int i = 0; i < 2; i++) {
		if (b[i]->set && !b[i]->is_time && !(s->flags & BY_WINDOW)) {
			fprintf(stderr,
			    "bellows history: %s takes a time for %s (%s "
			    "have no window), not a window number\n",
			    bname[i], s->name, s->name);
			return 2;
		}
	}
	return -1;
}

/* Writes every history's name, as "runs, layers, ... or residuals". */
static void
history_list(FILE *f)
{
	for (int i = 0; i < SUB_N; i++)
		fprintf(f, "%s%s",
		    i == 0               ? ""
			: i == SUB_N - 1 ? " or "
					 : ", ",
		    history_subs[i].name);
}

/* Says that `name` is no history: the nearest one, and every one. */
static void
history_unknown(const char *name)
{
	const char *names[SUB_N];
	const char *near;

	for (int i = 0; i < SUB_N; i++)
		names[i] = history_subs[i].name;
	near = com_suggest(name, names, SUB_N);
	fprintf(stderr, "bellows history: unknown history '%s'", name);
	if (near != NULL)
		fprintf(stderr, "; did you mean '%s'?", near);
	fputs(" (", stderr);
	history_list(stderr);
	fputs(")\n", stderr);
}

/* Returns -1 to go on, else the exit code. */
static int
history_parse(int argc, char **argv, history_opts *o)
{
	const char *name;
	int next, rc;

	*o = history_defaults;
	if ((rc = com_args_parse(&history_cmd, argc, argv, o, &next)) >= 0)
		return rc;
	/* argv[0] is "history"; the one word left is the question. */
	if (next >= argc) {
		fputs("bellows history: which history? ", stderr);
		history_list(stderr);
		fputc('\n', stderr);
		tool_history_usage(stderr);
		return 2;
	}
	name = argv[next];
	for (int i = 0; i < SUB_N; i++) {
		if (strcmp(name, history_subs[i].name) == 0)
			o->sub = &history_subs[i];
	}
	if (o->sub == NULL) {
		history_unknown(name);
		return 2;
	}
	return history_check(o);
}

/* Turns a bound into the filter: window numbers as they are; times on
 * the rows' own times, or through the windows closed then. */
static int
history_bound(tool_hdb *db, const history_opts *o, int64_t run, bool until,
    tool_hdb_filter *f)
{
	const tool_history_bound *b = until ? &o->until : &o->since;
	int64_t w;
	int r;

	if (!b->set)
		return 0;
	if (!b->is_time) {
		*(until ? &f->window_hi : &f->window_lo) = b->value;
		return 0;
	}
	if (o->sub->flags & BY_TIME) {
		*(until ? &f->time_hi : &f->time_lo) = b->value;
		return 0;
	}
	if ((r = tool_hdb_window_at(db, run, b->value, !until, &w)) != 0)
		return r;
	/* No window closed in that span: a range that holds none. */
	if (w == TOOL_HDB_NONE)
		w = until ? -1 : INT64_MAX;
	*(until ? &f->window_hi : &f->window_lo) = w;
	return 0;
}

/* Says on stderr how many windows rows within filter f have no applied
 * level (a history, or agents, older than it), which the questions show
 * at the decided level. Returns 0 or as tool_hdb_query. */
static int
history_note_applied(tool_hdb *db, const tool_hdb_filter *f)
{
	enum {
		A_ROWS,
		A_MISSING,
		A_N
	};
	static const char *const want[A_N] = { "rows", "missing" };
	tool_hdb_result res;
	tool_hdb_sink sink;
	int64_t missing;
	int r;

	tool_hdb_result_sink(&res, want, A_N,
	    TOOL_HDB_COL(A_ROWS) | TOOL_HDB_COL(A_MISSING), &sink);
	r = tool_hdb_query(db, TOOL_HDB_Q_APPLIED_MISSING, f, &sink);
	missing = tool_hdb_int(&res, 0, A_MISSING, 0);
	if (r == 0 && missing > 0)
		fprintf(stderr,
		    "bellows history: %" PRId64 " of %" PRId64
		    " layer windows recorded no applied level (a "
		    "history or agents older than it): the applied "
		    "columns show the decided level there\n",
		    missing, tool_hdb_int(&res, 0, A_ROWS, 0));
	tool_hdb_result_fini(&res);
	return r;
}

/* Picks the run, builds the filter and asks; the rows go to `sink`.
 * Returns 0 or an error with tool_hdb_error saying why. */
static int
history_ask(tool_hdb *db, const history_opts *o, const tool_hdb_sink *sink)
{
	tool_hdb_filter f = {
		.run = TOOL_HDB_NONE,
		.layer = TOOL_HDB_NONE,
		.window_lo = TOOL_HDB_NONE,
		.window_hi = TOOL_HDB_NONE,
		.time_lo = TOOL_HDB_NONE,
		.time_hi = TOOL_HDB_NONE,
		.changed_only = o->changed,
	};
	tool_hdb_question q = o->sub->q;
	tool_hdb_run run = { 0 };
	int r;

	if ((o->sub->flags & NEEDS_RUN) || o->sh.run != 0) {
		if ((r = tool_hdb_run_find(db,
			 o->sh.run != 0 ? o->sh.run : TOOL_HDB_NONE, o->sh.job,
			 &run)) != 0)
			return r;
		f.run = run.id;
		if (o->sh.run == 0)
			fprintf(stderr,
			    "bellows history: run %" PRId64
			    " (job '%s', %s), the latest%s; --run picks "
			    "another\n",
			    run.id, run.job, run.live ? "live" : "ended",
			    o->sh.job != NULL ? " of the job" : "");
	}
	if (f.run == TOOL_HDB_NONE && o->sh.job != NULL) {
		/* A job with no run is a name mistyped, not an empty view. */
		if ((r = tool_hdb_run_find(db, TOOL_HDB_NONE, o->sh.job,
			 &run)) != 0)
			return r;
		f.job = o->sh.job;
	}
	if (o->layer != NULL) {
		if ((r = tool_hdb_layer_find(db, f.run, o->layer, &f.layer)) !=
		    0)
			goto out;
		if (q == TOOL_HDB_Q_WINDOWS)
			q = TOOL_HDB_Q_LAYER_WINDOWS;
		else if (q == TOOL_HDB_Q_STATS)
			q = TOOL_HDB_Q_LAYER_STATS;
		else if (q == TOOL_HDB_Q_RESIDUALS)
			q = TOOL_HDB_Q_LAYER_RESIDUALS;
	}
	if (o->per_window)
		q = TOOL_HDB_Q_TIMINGS_ALL;
	if ((r = history_bound(db, o, f.run, false, &f)) != 0 ||
	    (r = history_bound(db, o, f.run, true, &f)) != 0)
		goto out;
	r = tool_hdb_query(db, q, &f, sink);
	if (r == 0 &&
	    (o->sub == &history_subs[SUB_LAYERS] ||
		o->sub == &history_subs[SUB_WINDOWS]))
		r = history_note_applied(db, &f);
out:
	tool_hdb_run_fini(&run);
	return r;
}

/* Copies what was spooled in tmp to f. Returns 0 or BELLOWS_EIO. */
static int
history_copy(FILE *tmp, FILE *f)
{
	char buf[65536];
	size_t n;

	if (fflush(tmp) != 0 || fseek(tmp, 0, SEEK_SET) != 0)
		return BELLOWS_EIO;
	while ((n = fread(buf, 1, sizeof(buf), tmp)) > 0) {
		if (fwrite(buf, 1, n, f) != n)
			return BELLOWS_EIO;
	}
	return ferror(tmp) ? BELLOWS_EIO : 0;
}

int
tool_history_main(int argc, char **argv)
{
	char err[TOOL_HDB_ERR_MAX];
	tool_hdb_rows rows = { 0 };
	tool_hdb *db = NULL;
	FILE *spool = NULL;
	history_opts o;
	history_out out = { .f = stdout };
	tool_hdb_sink sink = {
		.columns = history_out_columns,
		.row = history_out_row,
		.arg = &out,
	};
	int rc, r;

	if ((rc = history_parse(argc, argv, &o)) >= 0)
		return rc;
	rc = 1;
	out.fmt = o.fmt;
	/* Nothing is written while the snapshot is held: a reader blocked
	 * on a pager would keep bellowsd's checkpoints from resetting the
	 * WAL. A table is aligned over all its rows, kept in memory; CSV
	 * and JSON are spooled to a temporary file (or, without one,
	 * written as they come). */
	if (o.fmt == TOOL_HISTORY_TABLE)
		tool_hdb_rows_sink(&rows, &sink);
	else if ((spool = tmpfile()) != NULL)
		out.f = spool;
	if (tool_hdb_open(o.sh.db, &db, err, sizeof(err)) != 0) {
		fprintf(stderr, "bellows history: %s\n", err);
		goto out;
	}
	if ((r = tool_hdb_begin(db)) != 0) {
		fprintf(stderr, "bellows history: %s: %s\n", o.sh.db,
		    tool_hdb_error(db));
		goto out;
	}
	r = history_ask(db, &o, &sink);
	(void)tool_hdb_end(db);
	if (r == BELLOWS_EIO && ferror(out.f))
		goto write_error;
	if (r != 0) {
		fprintf(stderr, "bellows history: %s: %s\n", o.sh.db,
		    r == BELLOWS_ENOMEM ? bellows_strerror(r)
					: tool_hdb_error(db));
		goto out;
	}
	if (o.fmt == TOOL_HISTORY_TABLE)
		r = tool_history_print(stdout, &rows, o.fmt, o.wide);
	else if ((r = history_out_end(&out)) == 0 && spool != NULL)
		r = history_copy(spool, stdout);
	if (r != 0 || fflush(stdout) != 0)
		goto write_error;
	rc = 0;
	goto out;
write_error:
	fprintf(stderr, "bellows history: cannot write the output\n");
out:
	if (spool != NULL)
		fclose(spool);
	tool_hdb_rows_fini(&rows);
	tool_hdb_close(&db);
	return rc;
}
