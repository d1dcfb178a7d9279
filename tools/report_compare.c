/* report_compare - `bellows history compare`, see report.h.
 *
 * This file owns the command: its options (two databases or one, two
 * runs as ID or FILE:ID, a job, --html) and what it says about two runs:
 * the outcome first (accuracy, loss, the time to the accuracy both
 * reached, wall and step time, bytes), the policies, then the counts
 * and the layers side by side, marking a line whose values differ by
 * more than 1%; the HTML page holds that text and both runs' curves on
 * the same axes. Loading a run and summing it are report.c's, drawing a
 * plot report_html.c's (report_int.h).
 */
#include "report.h"
#include "report_int.h"

#include "common/args.h"
#include "client/historydb.h"
#include "common/units.h"
#include "policyhost/config.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct compare_opts {
	const char *db[2];  /* --db, in order */
	int n_db;           /* given */
	const char *run[2]; /* --run, as typed: ID or FILE:ID */
	int n_run;          /* given */
	const char *job;    /* --job */
	const char *html;   /* --html FILE */
} compare_opts;

static int
compare_opt_db(const char *cmd, const char *opt, const char *text, void *opts)
{
	compare_opts *o = opts;

	if (com_args_text(cmd, opt, text, 1, 0, false) != 0)
		return BELLOWS_EINVAL;
	if (o->n_db == 2) {
		fprintf(stderr, "bellows %s: --db given more than twice\n",
		    cmd);
		return BELLOWS_EINVAL;
	}
	o->db[o->n_db++] = text;
	return 0;
}

static int
compare_opt_run(const char *cmd, const char *opt, const char *text, void *opts)
{
	compare_opts *o = opts;

	if (com_args_text(cmd, opt, text, 1, 0, false) != 0)
		return BELLOWS_EINVAL;
	if (o->n_run == 2) {
		fprintf(stderr, "bellows %s: --run given more than twice\n",
		    cmd);
		return BELLOWS_EINVAL;
	}
	o->run[o->n_run++] = text;
	return 0;
}

static const com_opt compare_opt_rows[] = {
	{ .name = "db",
	    .arg = "FILE",
	    .help = "a history database (default bellows.db); twice: the "
		    "first run from the first, the second from the second",
	    .kind = COM_OPT_PARSE,
	    .parse = compare_opt_db },
	{ .name = "run",
	    .arg = "[FILE:]ID",
	    .help = "a run, twice; FILE:ID names its database too (then "
		    "without --db)",
	    .kind = COM_OPT_PARSE,
	    .parse = compare_opt_run },
	{ .name = "job",
	    .arg = "NAME",
	    .help = "a run not named by --run is this job's latest",
	    .kind = COM_OPT_NAME,
	    .at = offsetof(compare_opts, job),
	    .min = 1,
	    .max = 255 },
	{ .name = "html",
	    .arg = "FILE",
	    .help = "write the comparison as one self-contained HTML page, "
		    "the runs on the same axes (inline SVG, no script, no "
		    "network), instead of printing it",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(compare_opts, html),
	    .min = 1 },
};

static const com_args_cmd compare_cmd = {
	.name = "history compare",
	.opts = compare_opt_rows,
	.n_opts = sizeof(compare_opt_rows) / sizeof(compare_opt_rows[0]),
	.operands = 0,
	.usage = tool_report_compare_usage,
};

void
tool_report_compare_usage(FILE *f)
{
	fputs("usage: bellows history compare --run A --run B [--db FILE]\n"
	      "       bellows history compare --db A.db --db B.db "
	      "[--run A --run B]\n"
	      "       bellows history compare --run A.db:ID --run B.db:ID\n"
	      "       ... [--html FILE]\n"
	      "\n"
	      "  Which run was better: final test accuracy and loss, the\n"
	      "  time and step to the accuracy both reached, wall time,\n"
	      "  step time of raw and compressed windows, bytes, policies;\n"
	      "  then per layer and overall: levels applied (as sent)\n"
	      "  weighted by steps, floats sent, windows, decisions. Lines\n"
	      "  that differ are marked '*'; percentages differ in points\n"
	      "  (pp). Runs of two jobs are warned about.\n"
	      "  Without --run, each database's latest run (of --job).\n"
	      "\n",
	    f);
	com_args_help(f, &compare_cmd, NULL);
}

/* Splits "FILE:ID" or "ID". Returns 0, or 2 after saying why. */
static int
compare_split(const char *text, const char **ret_file, char *fbuf, size_t flen,
    int64_t *ret_id)
{
	const char *colon = strrchr(text, ':'), *num = colon ? colon + 1 : text;
	uint64_t v;

	if (colon != NULL) {
		size_t n = (size_t)(colon - text);

		if (n == 0 || n >= flen) {
			fprintf(stderr,
			    "bellows history compare: --run '%s': the file "
			    "before ':' is empty or too long\n",
			    text);
			return 2;
		}
		memcpy(fbuf, text, n);
		fbuf[n] = '\0';
		*ret_file = fbuf;
	}
	if (com_args_u64("history compare", "--run", num, 1, INT64_MAX, &v) !=
	    0)
		return 2;
	*ret_id = (int64_t)v;
	return 0;
}

/* Marks a line whose two values differ by more than 1%. */
static const char *
compare_mark(double a, double b)
{
	if (isnan(a) && isnan(b))
		return " ";
	if (isnan(a) || isnan(b))
		return "*";
	if (a == b)
		return " ";
	return fabs(a - b) > 0.01 * fmax(fabs(a), fabs(b)) ? "*" : " ";
}

/* A line of two amounts, B against A in per cent. */
static void
compare_line(FILE *f, const char *what, double a, double b, const char *ta,
    const char *tb)
{
	fprintf(f, "%s %-26s %18s %18s", compare_mark(a, b), what, ta, tb);
	if (isfinite(a) && isfinite(b) && a != 0 && a != b)
		fprintf(f, "  %+.1f%%", 100.0 * (b - a) / fabs(a));
	fputc('\n', f);
}

static void
compare_num(FILE *f, const char *what, double a, double b,
    void (*fmt)(double, char *, size_t))
{
	char ta[64], tb[64];

	fmt(a, ta, sizeof(ta));
	fmt(b, tb, sizeof(tb));
	compare_line(f, what, a, b, ta, tb);
}

/* A line of two percentages (0..100) with `dec` decimals: B against A in
 * points, a difference of percentages not being a per cent of one. */
static void
compare_pct(FILE *f, const char *what, double a, double b, int dec)
{
	char t[2][64];
	const double p[2] = { a, b };

	for (int i = 0; i < 2; i++)
		if (isfinite(p[i]))
			snprintf(t[i], sizeof(t[i]), "%.*f%%", dec, p[i]);
		else
			snprintf(t[i], sizeof(t[i]), "-");
	fprintf(f, "%s %-26s %18s %18s", compare_mark(a, b), what, t[0], t[1]);
	/* Points as shown: 91.3% and 91.4% differ by +0.1 pp. */
	if (isfinite(a) && isfinite(b) && strcmp(t[0], t[1]) != 0)
		fprintf(f, "  %+.*f pp", dec,
		    round(b * pow(10, dec)) / pow(10, dec) -
			round(a * pow(10, dec)) / pow(10, dec));
	fputc('\n', f);
}

/* Where run rr first reached `target` (0..1): the wall time from the
 * run's start to the close of its first window evaluated at or above it,
 * and that window's last step; NAN for both when it never did. */
static void
compare_reach(const rep_run *rr, double target, double *ret_ms,
    double *ret_step)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	double t0 = tool_hdb_real(&rr->t[R_RUNS], 0, RC_STARTED_WALL_MS);

	*ret_ms = *ret_step = NAN;
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		if (!tool_report_is_eval(wi, i) ||
		    tool_hdb_real(wi, i, RC_EVAL_ACCURACY) < target)
			continue;
		*ret_ms = tool_hdb_real(wi, i, RC_CLOSED_WALL_MS) - t0;
		*ret_step = tool_hdb_real(wi, i, RC_LAST_STEP);
		return;
	}
}

/* Time to the same accuracy: the lower of the two best evaluations, the
 * accuracy both runs reached, and when each first did. */
static void
compare_time_to(FILE *f, const rep_run *r)
{
	rep_evals e[2];
	double best[2], target, ms[2], step[2];
	char what[64];

	for (int i = 0; i < 2; i++) {
		tool_report_evals(&r[i], &e[i]);
		best[i] = e[i].n > 0 ? tool_hdb_real(&r[i].t[R_WINFO],
					   e[i].best, RC_EVAL_ACCURACY)
				     : NAN;
	}
	compare_pct(f, "best test accuracy", 100 * best[0], 100 * best[1], 2);
	if (e[0].n == 0 || e[1].n == 0) {
		fprintf(f, "  time to the same accuracy: not comparable (%s)\n",
		    e[0].n == 0 && e[1].n == 0
			? "neither run reported an evaluation"
			: e[0].n == 0 ? "A reported no evaluation"
				      : "B reported no evaluation");
		return;
	}
	target = fmin(best[0], best[1]);
	fprintf(f,
	    "  target accuracy %.2f%%: the lower of the two best, reached "
	    "by both\n",
	    100 * target);
	compare_reach(&r[0], target, &ms[0], &step[0]);
	compare_reach(&r[1], target, &ms[1], &step[1]);
	snprintf(what, sizeof(what), "time to %.2f%%", 100 * target);
	compare_num(f, what, ms[0], ms[1], tool_report_dur);
	snprintf(what, sizeof(what), "step reaching %.2f%%", 100 * target);
	compare_num(f, what, step[0], step[1], tool_report_num);
}

/* The bytes sent and saved, and the share saved of raw in points. */
static void
compare_bytes(FILE *f, const rep_sums *s)
{
	double p[2];

	compare_num(f, "bytes sent", s[0].floats_sent * 4, s[1].floats_sent * 4,
	    com_fmt_bytes);
	compare_num(f, "bytes saved", (s[0].floats_raw - s[0].floats_sent) * 4,
	    (s[1].floats_raw - s[1].floats_sent) * 4, com_fmt_bytes);
	for (int i = 0; i < 2; i++)
		p[i] = s[i].floats_raw > 0 ? 100.0 *
			(s[i].floats_raw - s[i].floats_sent) / s[i].floats_raw
					   : 0;
	compare_pct(f, "saved of raw", p[0], p[1], 1);
}

/* What decides which run was better: accuracy and loss, the time to the
 * same accuracy, wall and step time, bytes. */
static void
compare_outcome(FILE *f, const rep_run *r, const rep_sums *s)
{
	fprintf(f, "\n  %-26s %18s %18s  B vs A\n", "outcome", "A", "B");
	compare_pct(f, "final test accuracy", 100 * s[0].accuracy,
	    100 * s[1].accuracy, 2);
	compare_num(f, "final test loss", s[0].eval_loss, s[1].eval_loss,
	    tool_report_num);
	compare_time_to(f, r);
	compare_num(f, "wall time", s[0].run_ms, s[1].run_ms, tool_report_dur);
	compare_num(f, "step, windows sent raw", s[0].step_raw_med,
	    s[1].step_raw_med, tool_report_dur);
	compare_num(f, "step, windows compressing", s[0].step_comp_med,
	    s[1].step_comp_med, tool_report_dur);
	compare_bytes(f, s);
}

/* The policies run rr ran, as "name (type), ..." into buf: from its
 * policy file as the history holds it, matched to its job. A file that
 * names a plug-in is not read (that would load the plug-in): the
 * instance names its decisions carry stand in, without types. */
static void
compare_policies_of(const rep_run *rr, char *buf, size_t len)
{
	const tool_hdb_result *pf = &rr->t[R_FILES], *dec = &rr->t[R_DEC];
	const char *hash = tool_hdb_text(&rr->t[R_RUNS], 0, RC_CONFIG_HASH);
	const char *text = NULL, *path = "policy.yaml";
	const ctl_job_conf *jc;
	ctl_config *cfg = NULL;
	char err[256];
	size_t at = 0;

	buf[0] = '\0';
	for (uint64_t i = 0; i < pf->rows.n_rows && text == NULL; i++)
		if (strcmp(tool_hdb_text(pf, i, RC_HASH), hash) == 0) {
			text = tool_hdb_text(pf, i, RC_TEXT);
			path = tool_hdb_text(pf, i, RC_PATH);
		}
	if (text != NULL && strstr(text, "plugin") == NULL &&
	    ctl_config_parse(text, strlen(text), path, &cfg, err,
		sizeof(err)) == 0 &&
	    (jc = ctl_config_match(cfg, rr->run.job)) != NULL) {
		for (uint32_t k = 0; k < jc->n_policies && at < len; k++)
			at += (size_t)snprintf(buf + at, len - at, "%s%s (%s)",
			    k > 0 ? ", " : "", jc->policies[k].name,
			    jc->policies[k].ops->name);
		if (jc->n_policies == 0)
			snprintf(buf, len, "none");
		ctl_config_destroy(&cfg);
		return;
	}
	ctl_config_destroy(&cfg);
	for (uint64_t d = 0; d < dec->rows.n_rows && at < len; d++) {
		const char *nm = tool_hdb_text(dec, d, RC_POLICY);

		if (nm[0] == '\0' || (strstr(buf, nm) != NULL))
			continue;
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
		    at ? ", " : "", nm);
	}
	snprintf(buf + at, at < len ? len - at : 0, "%s(%s)", at ? " " : "",
	    "types not known: the policy file is not in the history or "
	    "names a plug-in");
}

static void
compare_policies(FILE *f, const rep_run *r)
{
	char p[2][1024];

	compare_policies_of(&r[0], p[0], sizeof(p[0]));
	compare_policies_of(&r[1], p[1], sizeof(p[1]));
	fprintf(f, "\n%s policies A: %s\n", strcmp(p[0], p[1]) ? "*" : " ",
	    p[0]);
	fprintf(f, "%s policies B: %s\n", strcmp(p[0], p[1]) ? "*" : " ", p[1]);
}

/* The counts: ranks, layers, windows, decisions, floats, step times. */
static void
compare_overall(FILE *f, const rep_run *r, const rep_sums *s)
{
	fprintf(f, "\n  %-26s %18s %18s  B vs A\n", "overall", "A", "B");
	compare_num(f, "ranks", (double)r[0].run.world, (double)r[1].run.world,
	    tool_report_num);
	compare_num(f, "layers", r[0].n_layers, r[1].n_layers, tool_report_num);
	compare_num(f, "windows", (double)r[0].n_win, (double)r[1].n_win,
	    tool_report_num);
	compare_num(f, "windows incomplete", (double)s[0].incomplete,
	    (double)s[1].incomplete, tool_report_num);
	compare_num(f, "decisions", (double)s[0].decisions,
	    (double)s[1].decisions, tool_report_num);
	compare_num(f, "decisions with a change", (double)s[0].changed,
	    (double)s[1].changed, tool_report_num);
	compare_num(f, "floats sent", s[0].floats_sent, s[1].floats_sent,
	    com_fmt_count);
	compare_num(f, "floats raw", s[0].floats_raw, s[1].floats_raw,
	    com_fmt_count);
	compare_num(f, "step time, median", s[0].step_med, s[1].step_med,
	    tool_report_dur);
	compare_num(f, "step time, slowest window", s[0].step_max,
	    s[1].step_max, tool_report_dur);
	compare_num(f, "activations held/step", s[0].act_med, s[1].act_med,
	    com_fmt_bytes);
}

/* Layer `l` of side `side` against the layer of that name in the other
 * run, or "A only"/"B only". */
static void
compare_layer(FILE *f, const rep_run *r, int side, uint32_t l, int64_t other)
{
	const char *nm = tool_hdb_text(&r[side].t[R_LAYERS], l, RC_NAME);
	rep_layer_sum ls[2];
	char ta[32], tb[32], la[32], lb[32];
	bool diff;

	if (other < 0) {
		fprintf(f, "* %-26s %s only\n", nm, side == 0 ? "A" : "B");
		return;
	}
	tool_report_layer(&r[side], l, &ls[side]);
	tool_report_layer(&r[!side], (uint32_t)other, &ls[!side]);
	diff = compare_mark(ls[0].level_tw, ls[1].level_tw)[0] == '*' ||
	    compare_mark(ls[0].level_last, ls[1].level_last)[0] == '*' ||
	    ls[0].changes != ls[1].changes;
	tool_report_num(ls[0].level_tw, ta, sizeof(ta));
	tool_report_num(ls[1].level_tw, tb, sizeof(tb));
	tool_report_num(ls[0].level_last, la, sizeof(la));
	tool_report_num(ls[1].level_last, lb, sizeof(lb));
	fprintf(f,
	    "%s %-26s %9s %9s %7s %7s %9" PRIu64 " %9" PRIu64 " %9" PRIu64
	    " %9" PRIu64 "\n",
	    diff ? "*" : " ", nm, ta, tb, la, lb, ls[0].changes, ls[1].changes,
	    ls[0].windows, ls[1].windows);
}

static void
compare_layers(FILE *f, const rep_run *r)
{
	fprintf(f, "\n  %-26s %9s %9s %7s %7s %9s %9s %9s %9s\n",
	    "layer (applied, weighted)", "applied A", "applied B", "last A",
	    "last B", "changes A", "changes B", "windows A", "windows B");
	for (int side = 0; side < 2; side++) {
		for (uint32_t l = 0; l < r[side].n_layers; l++) {
			const char *nm = tool_hdb_text(&r[side].t[R_LAYERS], l,
			    RC_NAME);
			int64_t other = -1;

			for (uint32_t k = 0; k < r[!side].n_layers; k++)
				if (strcmp(nm,
					tool_hdb_text(&r[!side].t[R_LAYERS], k,
					    RC_NAME)) == 0)
					other = k;
			/* Layers of both are listed from A's side. */
			if (side == 0 || other < 0)
				compare_layer(f, r, side, l, other);
		}
	}
	for (int side = 0; side < 2; side++)
		if (r[side].applied_missing > 0)
			fprintf(f,
			    "note: %c: %" PRIu64 " of %" PRIu64
			    " layer windows recorded no applied level (a "
			    "history or agents older than it): the level "
			    "decided stands in for them\n",
			    side == 0 ? 'A' : 'B', r[side].applied_missing,
			    r[side].level_rows);
}

/* The warning for runs of two jobs, one line, without its end. */
static void
compare_jobs_warning(FILE *f, const rep_run *r)
{
	fprintf(f,
	    "warning: A and B are runs of different jobs ('%s' and '%s'): "
	    "a model or data set of its own each, their accuracy and times "
	    "may not be comparable",
	    r[0].run.job, r[1].run.job);
}

/* The comparison as text into f. */
static void
compare_print(FILE *f, const rep_run *r)
{
	rep_sums s[2];

	tool_report_sum(&r[0], &s[0]);
	tool_report_sum(&r[1], &s[1]);
	fprintf(f, "A: run %" PRId64 " of job '%s' in %s\n", r[0].run.id,
	    r[0].run.job, r[0].path);
	fprintf(f, "B: run %" PRId64 " of job '%s' in %s\n", r[1].run.id,
	    r[1].run.job, r[1].path);
	if (strcmp(r[0].run.job, r[1].run.job) != 0) {
		compare_jobs_warning(f, r);
		fputc('\n', f);
	}
	compare_outcome(f, r, s);
	compare_policies(f, r);
	compare_overall(f, r, s);
	compare_layers(f, r);
}

/* ---- the HTML page ------------------------------------------------------ */

/* A run's curves for the page: per evaluation its step, wall seconds,
 * accuracy (%) and loss; per window its last step, step time and the
 * bytes sent up to it. */
typedef struct compare_curves {
	uint64_t n_eval, n_win;
	double *buf;                          /* all the arrays below */
	double *e_step, *e_wall, *acc, *loss; /* n_eval each */
	double *w_step, *step_ms, *bytes;     /* n_win each */
} compare_curves;

static int
compare_curves_of(const rep_run *rr, compare_curves *c)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	double t0 = tool_hdb_real(&rr->t[R_RUNS], 0, RC_STARTED_WALL_MS);
	uint64_t n = wi->rows.n_rows, sum = 0;

	memset(c, 0, sizeof(*c));
	if ((c->buf = calloc(7 * n + 1, sizeof(double))) == NULL)
		return BELLOWS_ENOMEM;
	c->e_step = c->buf;
	c->e_wall = c->e_step + n;
	c->acc = c->e_wall + n;
	c->loss = c->acc + n;
	c->w_step = c->loss + n;
	c->step_ms = c->w_step + n;
	c->bytes = c->step_ms + n;
	for (uint64_t i = 0; i < n; i++) {
		double step = tool_hdb_real(wi, i, RC_LAST_STEP);
		double sent = tool_hdb_real(wi, i, RC_FLOATS_SENT);

		c->w_step[c->n_win] = step;
		c->step_ms[c->n_win] = tool_hdb_real(wi, i, RC_STEP_MS_MEDIAN);
		sum += isfinite(sent) ? (uint64_t)sent : 0;
		c->bytes[c->n_win++] = 4.0 * (double)sum;
		if (!tool_report_is_eval(wi, i))
			continue;
		c->e_step[c->n_eval] = step;
		c->e_wall[c->n_eval] = (tool_hdb_real(wi, i,
					    RC_CLOSED_WALL_MS) -
					   t0) /
		    1000;
		c->acc[c->n_eval] = 100 *
		    tool_hdb_real(wi, i, RC_EVAL_ACCURACY);
		c->loss[c->n_eval++] = tool_hdb_real(wi, i, RC_EVAL_LOSS);
	}
	return 0;
}

/* One plot of both runs: y of each against its own x. */
static void
compare_plot(FILE *f, const rep_run *r, const rep_axes *ax,
    const double *const x[2], const double *const y[2], const uint64_t n[2])
{
	rep_series s[2] = { 0 };

	for (int i = 0; i < 2; i++) {
		snprintf(s[i].name, sizeof(s[i].name), "%c: run %" PRId64,
		    "AB"[i], r[i].run.id);
		s[i].y = y[i];
		s[i].stride = 1;
		s[i].x = x[i];
		s[i].n = n[i];
		s[i].dashed = i == 1;
	}
	tool_report_plot(f, ax, NULL, 0, s, 2);
}

static void
compare_plots(FILE *f, const rep_run *r, const compare_curves *c)
{
	const uint64_t ne[2] = { c[0].n_eval, c[1].n_eval };
	const uint64_t nw[2] = { c[0].n_win, c[1].n_win };

	compare_plot(f, r,
	    &(rep_axes){ .title = "Test accuracy against step",
		.xlabel = "step",
		.ylabel = "%" },
	    (const double *const[]){ c[0].e_step, c[1].e_step },
	    (const double *const[]){ c[0].acc, c[1].acc }, ne);
	compare_plot(f, r,
	    &(rep_axes){ .title = "Test accuracy against wall time",
		.xlabel = "seconds from the run's start",
		.ylabel = "%" },
	    (const double *const[]){ c[0].e_wall, c[1].e_wall },
	    (const double *const[]){ c[0].acc, c[1].acc }, ne);
	compare_plot(f, r,
	    &(rep_axes){ .title = "Test loss against step",
		.xlabel = "step",
		.ylabel = "loss",
		.y_from_zero = true },
	    (const double *const[]){ c[0].e_step, c[1].e_step },
	    (const double *const[]){ c[0].loss, c[1].loss }, ne);
	compare_plot(f, r,
	    &(rep_axes){ .title = "Test loss against wall time",
		.xlabel = "seconds from the run's start",
		.ylabel = "loss",
		.y_from_zero = true },
	    (const double *const[]){ c[0].e_wall, c[1].e_wall },
	    (const double *const[]){ c[0].loss, c[1].loss }, ne);
	compare_plot(f, r,
	    &(rep_axes){ .title = "Step time per window (median over ranks)",
		.xlabel = "step",
		.ylabel = "ms",
		.y_from_zero = true },
	    (const double *const[]){ c[0].w_step, c[1].w_step },
	    (const double *const[]){ c[0].step_ms, c[1].step_ms }, nw);
	compare_plot(f, r,
	    &(rep_axes){ .title = "Gradient bytes sent, cumulative, all ranks",
		.xlabel = "step",
		.ylabel = "bytes",
		.y_from_zero = true,
		.yfmt = com_fmt_bytes },
	    (const double *const[]){ c[0].w_step, c[1].w_step },
	    (const double *const[]){ c[0].bytes, c[1].bytes }, nw);
}

/* The page: the text (escaped), then the plots of both runs on the same
 * axes. Returns 0, or BELLOWS_ENOMEM with nothing written. */
static int
compare_html(FILE *f, const rep_run *r)
{
	compare_curves c[2];
	char *text = NULL;
	size_t len = 0;
	FILE *m;

	if ((m = open_memstream(&text, &len)) == NULL)
		return BELLOWS_ENOMEM;
	compare_print(m, r);
	if (ferror(m) | (fclose(m) != 0) ||
	    compare_curves_of(&r[0], &c[0]) != 0) {
		free(text);
		return BELLOWS_ENOMEM;
	}
	if (compare_curves_of(&r[1], &c[1]) != 0) {
		free(c[0].buf);
		free(text);
		return BELLOWS_ENOMEM;
	}
	fputs(
	    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	    "<title>bellows history compare</title><style>body{font-family:"
	    "sans-serif;margin:2em;max-width:1000px;color:#222;"
	    "background:#fff}pre{background:#f4f4f4;padding:0.6em;"
	    "white-space:pre-wrap}figure{margin:1em 0}h1{font-size:1.5em}"
	    "h2{font-size:1.2em;border-bottom:1px solid #ccc}</style></head>"
	    "<body>\n<h1>",
	    f);
	fprintf(f, "Run %" PRId64 " (A) against run %" PRId64 " (B)",
	    r[0].run.id, r[1].run.id);
	fputs("</h1>\n<pre>", f);
	tool_report_esc(f, text);
	fputs("</pre>\n<h2>A and B on the same axes (B dashed)</h2>\n", f);
	compare_plots(f, r, c);
	fputs("</body></html>\n", f);
	free(c[0].buf);
	free(c[1].buf);
	free(text);
	return 0;
}

/* Writes the page to `path`, nothing on stdout. Returns the exit code. */
static int
compare_html_file(const char *path, const rep_run *r)
{
	FILE *hf = fopen(path, "w");
	int r2;

	if (hf == NULL) {
		fprintf(stderr, "bellows history compare: %s: %s\n", path,
		    strerror(errno));
		return 1;
	}
	r2 = compare_html(hf, r);
	if (ferror(hf) | (fclose(hf) != 0) || r2 != 0) {
		fprintf(stderr, "bellows history compare: %s: %s\n", path,
		    r2 != 0 ? bellows_strerror(r2) : "write error");
		return 1;
	}
	return 0;
}

int
tool_report_compare_main(int argc, char **argv)
{
	compare_opts o = { 0 };
	const char *file[2];
	char fbuf[2][4096];
	int64_t id[2] = { TOOL_HDB_NONE, TOOL_HDB_NONE };
	bool named[2] = { false, false };
	rep_run r[2];
	int next, rc;

	if ((rc = com_args_parse(&compare_cmd, argc, argv, &o, &next)) >= 0)
		return rc;
	for (int i = 0; i < o.n_run; i++) {
		file[i] = NULL;
		if (compare_split(o.run[i], &file[i], fbuf[i], sizeof(fbuf[i]),
			&id[i]) != 0)
			return 2;
		named[i] = file[i] != NULL;
	}
	if (named[0] || named[1]) {
		if (o.n_db > 0) {
			fprintf(stderr,
			    "bellows history compare: --run FILE:ID names the "
			    "database; give it without --db\n");
			return 2;
		}
		if (o.n_run != 2 || !named[0] || !named[1]) {
			fprintf(stderr,
			    "bellows history compare: give both runs as "
			    "FILE:ID, or both as IDs with --db\n");
			return 2;
		}
	} else if (o.n_db == 2) {
		if (o.n_run == 1) {
			fprintf(stderr,
			    "bellows history compare: two --db and one --run: "
			    "which database is run %s in? Give two --run (one "
			    "per --db, in order) or none (each one's "
			    "latest)\n",
			    o.run[0]);
			return 2;
		}
		file[0] = o.db[0];
		file[1] = o.db[1];
	} else {
		if (o.n_run != 2) {
			fprintf(stderr,
			    "bellows history compare: two runs needed: --run A "
			    "--run B (one --db or none), or --db A.db --db "
			    "B.db\n");
			tool_report_compare_usage(stderr);
			return 2;
		}
		file[0] = file[1] = o.n_db == 1 ? o.db[0]
						: TOOL_HDB_DEFAULT_PATH;
	}
	if (tool_report_run_load("history compare", file[0], id[0], o.job, true,
		&r[0]) != 0)
		return 1;
	if (tool_report_run_load("history compare", file[1], id[1], o.job, true,
		&r[1]) != 0) {
		tool_report_run_fini(&r[0]);
		return 1;
	}
	if (r[0].run.id == r[1].run.id && strcmp(file[0], file[1]) == 0)
		fprintf(stderr,
		    "bellows history compare: A and B are the same run "
		    "(%s, run %" PRId64 ")\n",
		    file[0], r[0].run.id);
	if (strcmp(r[0].run.job, r[1].run.job) != 0) {
		fputs("bellows history compare: ", stderr);
		compare_jobs_warning(stderr, r);
		fputc('\n', stderr);
	}
	if (o.html != NULL) {
		rc = compare_html_file(o.html, r);
	} else {
		compare_print(stdout, r);
		rc = fflush(stdout) != 0 || ferror(stdout) ? 1 : 0;
		if (rc != 0)
			fprintf(stderr,
			    "bellows history compare: cannot "
			    "write the output\n");
	}
	tool_report_run_fini(&r[0]);
	tool_report_run_fini(&r[1]);
	return rc;
}
