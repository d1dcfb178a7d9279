/* top - the `bellows top` subcommand, see top.h.
 */
#include "top.h"

#include "common/args.h"
#include "client/client.h"
#include "common/clock.h"
#include "common/msg.h"
#include "layout.h"
#include "model.h"
#include "source.h"
#include "dash_text.h"
#include "tui/screen.h"

#include <bellows/error.h>

#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOP_DEFAULT_CONTROL COM_DEFAULT_CONTROL
#define TOP_DEFAULT_PUBLISH COM_DEFAULT_PUBLISH
#define TOP_DEFAULT_DB      "bellows.db"
#define TOP_REFRESH_MS      1000 /* live: STATUS this often */
#define TOP_MIN_FETCH_MS    250  /* telemetry: not more often than this */

/* --control EP: an endpoint given, which also means live. */
static int
top_control(const char *cmd, const char *opt, const char *text, void *opts)
{
	dash_top_opts *o = opts;

	if (com_args_text(cmd, opt, text, 1, 0, false) != 0)
		return BELLOWS_EINVAL;
	o->control = text;
	o->control_given = true;
	return 0;
}

static int
top_view(const char *cmd, const char *opt, const char *text, void *opts)
{
	dash_top_opts *o = opts;
	int v;

	for (v = 0; v < DASH_VIEW_LAYER; v++) {
		if (strcasecmp(text, dash_view_name((dash_view)v)) == 0)
			break;
	}
	if (v == DASH_VIEW_LAYER) {
		fprintf(stderr,
		    "bellows %s: %s must be jobs, ranks, layers, decisions or "
		    "events, not '%s'\n",
		    cmd, opt, text);
		return BELLOWS_EINVAL;
	}
	o->view = (dash_view)v;
	return 0;
}

static int
top_size(const char *cmd, const char *opt, const char *text, void *opts)
{
	dash_top_opts *o = opts;
	unsigned r = 0, k = 0;
	char end = 0;

	if (sscanf(text, "%ux%u%c", &r, &k, &end) != 2 || r < 8 || r > 1000 ||
	    k < 40 || k > 1000) {
		fprintf(stderr,
		    "bellows %s: %s must be ROWSxCOLS, 8..1000 x 40..1000, "
		    "not '%s'\n",
		    cmd, opt, text);
		return BELLOWS_EINVAL;
	}
	o->rows = r;
	o->cols = k;
	return 0;
}

static const com_opt top_rows[] = {
	{ .name = "control",
	    .arg = "EP",
	    .help = "bellowsd's control endpoint (default $BELLOWS_CONTROL, "
		    "else " TOP_DEFAULT_CONTROL ")",
	    .kind = COM_OPT_PARSE,
	    .parse = top_control },
	{ .name = "publish",
	    .arg = "EP",
	    .help = "bellowsd's publish endpoint (default $BELLOWS_PUBLISH, "
		    "else " TOP_DEFAULT_PUBLISH ")",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(dash_top_opts, publish),
	    .min = 1 },
	{ .name = "offline",
	    .help = "browse --db without a daemon (the default when --db or "
		    "--run is given without --control)",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(dash_top_opts, offline) },
	{ .name = "all-decisions",
	    .help = "show every decision, also those that change nothing "
		    "(key c toggles)",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(dash_top_opts, all_decisions) },
	{ .name = "once",
	    .help = "print one screen as text and exit, 1 when bellowsd did "
		    "not answer (also what happens when not on a terminal)",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(dash_top_opts, once) },
	{ .name = "view",
	    .arg = "V",
	    .help = "--once: jobs, ranks, layers (default), decisions or "
		    "events",
	    .kind = COM_OPT_PARSE,
	    .parse = top_view },
	{ .name = "size",
	    .arg = "RxC",
	    .help = "--once: screen size (default 24x80)",
	    .kind = COM_OPT_PARSE,
	    .parse = top_size },
	{ .name = "server-key",
	    .arg = "FILE",
	    .help = "bellowsd's public certificate (default "
		    "$BELLOWS_SERVER_KEY)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(dash_top_opts, server_key) },
	{ .name = "client-key",
	    .arg = "FILE",
	    .help = "this client's secret certificate (default "
		    "$BELLOWS_CLIENT_KEY); with both, CURVE",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(dash_top_opts, client_key) },
	{ .name = "no-color",
	    .help = "no colours (bold, underline and dim instead); also when "
		    "$NO_COLOR is set or the terminal has none",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(dash_top_opts, no_color) },
};

static const com_args_cmd top_cmd = {
	.name = "top",
	.shared = COM_ARGS_TAKES(COM_ARGS_DB) | COM_ARGS_TAKES(COM_ARGS_RUN) |
	    COM_ARGS_TAKES(COM_ARGS_JOB),
	.shared_at = offsetof(dash_top_opts, sh),
	.notes = {
		[COM_ARGS_DB] = "live, per-layer rows come from it (default: "
				"the file bellowsd's STATUS names when "
				"readable here, else " TOP_DEFAULT_DB ")",
		[COM_ARGS_RUN] = "offline: open this run",
		[COM_ARGS_JOB] = "open this job (default $BELLOWS_JOB)",
	},
	.opts = top_rows,
	.n_opts = sizeof(top_rows) / sizeof(top_rows[0]),
	.usage = dash_top_usage,
};

void
dash_top_usage(FILE *f)
{
	fputs("usage: bellows top [--control EP] [--publish EP] [--db FILE]\n"
	      "                   [--offline] [--run ID] [--job NAME]\n"
	      "                   [--all-decisions]\n"
	      "                   [--once [--view V] [--size ROWSxCOLS]]\n"
	      "                   [--server-key FILE --client-key FILE]\n"
	      "                   [--no-color]\n"
	      "\n",
	    f);
	com_args_help(f, &top_cmd, NULL);
	fputs("\n"
	      "keys: arrows/j/k move, Tab view, Enter open (a job, layer or\n"
	      "decision) and close, Esc back, / filter layers, s sort, c "
	      "changed\n"
	      "decisions only/all, p pause, Left/Right window (offline), ? "
	      "help\n"
	      "and legend, q quit. docs/top.md describes the views.\n",
	    f);
}

int
dash_top_parse(int argc, char **argv, dash_top_opts *ret)
{
	int next, r;

	*ret = (dash_top_opts){
		.control = tool_client_env("BELLOWS_CONTROL",
		    TOP_DEFAULT_CONTROL),
		.publish = tool_client_env("BELLOWS_PUBLISH",
		    TOP_DEFAULT_PUBLISH),
		.sh = { .job = tool_client_env("BELLOWS_JOB", NULL) },
		.run = DASH_NONE,
		.view = DASH_VIEW_LAYERS,
		.rows = 24,
		.cols = 80,
	};
	if ((r = com_args_parse(&top_cmd, argc, argv, ret, &next)) >= 0)
		return r;
	if (ret->sh.run != 0)
		ret->run = ret->sh.run;
	if (ret->offline && ret->control_given) {
		fprintf(stderr,
		    "bellows top: --offline and --control exclude each "
		    "other\n");
		return 2;
	}
	if (ret->offline ||
	    (!ret->control_given &&
		(ret->sh.db != NULL || ret->run != DASH_NONE)))
		ret->control = NULL;
	return -1;
}

/* Offline --run ID: the job name the source gives that run. */
static void
top_open_run(dash_model *m, int64_t run)
{
	for (uint32_t i = 0; i < m->snap.n_jobs; i++) {
		if (m->snap.jobs[i].run == run) {
			dash_copy(m->job, sizeof(m->job), m->snap.jobs[i].name);
			return;
		}
	}
}

static int
top_fetch(dash_source *src, dash_model *m)
{
	dash_snapshot s;
	int r;

	dash_source_all_decisions(src, m->all_decisions);
	r = dash_source_fetch(src, dash_model_job(m), m->window, &s);

	if (r != 0)
		return r;
	return dash_model_update(m, &s);
}

static int
top_once(dash_source *src, dash_model *m, const dash_top_opts *o)
{
	dash_canvas c;
	int r;

	if ((r = top_fetch(src, m)) < 0)
		return r;
	/* The detail views are of the first job when none is named. */
	if (m->job[0] == '\0' && m->snap.n_jobs > 0)
		dash_copy(m->job, sizeof(m->job), m->snap.jobs[0].name);
	m->view = o->view;
	if ((r = dash_canvas_init(&c, (int)o->rows, (int)o->cols)) != 0)
		return r;
	dash_layout_render(m, &c);
	r = dash_text_print(&c, stdout);
	dash_canvas_fini(&c);
	/* The screen shows why; the status says it to scripts too. */
	if (r == 0 && m->snap.health.live && !m->snap.health.connected) {
		fprintf(stderr, "bellows top: not connected to %s%s%s\n",
		    m->snap.health.where,
		    m->snap.health.note[0] != '\0' ? ": " : "",
		    m->snap.health.note);
		return BELLOWS_ENOTFOUND;
	}
	return r;
}

/* Colour unless --no-color or NO_COLOR (set and not empty, as
 * no-color.org has it) says otherwise. */
static bool
top_colour(const dash_top_opts *o)
{
	const char *no = getenv("NO_COLOR");

	return !o->no_color && (no == NULL || no[0] == '\0');
}

static int
top_loop(dash_source *src, dash_model *m, bool colour)
{
	dash_canvas c = { 0 };
	uint64_t last_fetch = com_clock_ms();
	bool dirty = true;
	int r;

	if ((r = dash_screen_open(colour)) != 0)
		return r;
	for (;;) {
		uint64_t now = com_clock_ms();
		bool key_ready = false, tel = false, fetch = false;
		int rows, cols, k, wait_ms;

		if (dash_screen_stop_requested())
			break;
		dash_screen_size(&rows, &cols);
		if (c.rows != rows || c.cols != cols) {
			dash_canvas_fini(&c);
			if (dash_canvas_init(&c, rows, cols) != 0)
				dash_fatal("out of memory");
			dirty = true;
		}
		if (dirty) {
			dash_layout_render(m, &c);
			dash_screen_draw(&c);
			dirty = false;
		}
		/* Idle: one wake-up per refresh period, nothing else. */
		wait_ms = TOP_REFRESH_MS;
		if (!m->offline && now - last_fetch < TOP_REFRESH_MS)
			wait_ms = (int)(TOP_REFRESH_MS - (now - last_fetch));
		if (dash_source_wait(src, STDIN_FILENO, wait_ms, &key_ready,
			&tel) != 0)
			dash_fatal("polling failed");
		while ((k = dash_screen_key()) != -1) {
			int act;

			if (k == 0) {
				dirty = true;
				continue;
			}
			act = dash_model_key(m, k);
			if (act & DASH_ACT_QUIT)
				goto done;
			/* A detail scrolls no further than its last line,
			 * so that Up moves it at once after End. */
			if (m->scroll > dash_layout_scroll_max(m, rows, cols))
				m->scroll = dash_layout_scroll_max(m, rows,
				    cols);
			if (act & DASH_ACT_REDRAW)
				dirty = true;
			if (act & DASH_ACT_REFETCH)
				fetch = true;
		}
		now = com_clock_ms();
		if (!m->offline && !m->paused &&
		    (now - last_fetch >= TOP_REFRESH_MS ||
			(tel && now - last_fetch >= TOP_MIN_FETCH_MS)))
			fetch = true;
		if (fetch) {
			if ((r = top_fetch(src, m)) < 0)
				dash_fatal("%s", bellows_strerror(r));
			last_fetch = com_clock_ms();
			dirty = dirty || r != 0;
		}
	}
done:
	dash_screen_close();
	dash_canvas_fini(&c);
	return 0;
}

int
dash_top_main(int argc, char **argv)
{
	dash_source_opts so;
	tool_keys keys;
	dash_source *src = NULL;
	dash_model m;
	dash_top_opts o;
	char err[512] = "";
	int r;

	if ((r = dash_top_parse(argc, argv, &o)) >= 0)
		return r;
	if (!o.once && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
		o.once = true;
	if (o.control != NULL &&
	    tool_client_keys("top", o.server_key, o.client_key, &keys) != 0)
		return 2;
	so.control = o.control;
	so.publish = o.publish;
	so.db = o.sh.db;
	so.keys = o.control != NULL ? &keys : NULL;
	r = dash_source_open(&so, &src, err, sizeof(err));
	explicit_bzero(&keys, sizeof(keys));
	if (r != 0) {
		fprintf(stderr, "bellows top: %s\n",
		    err[0] != '\0' ? err : bellows_strerror(r));
		return 1;
	}
	dash_model_init(&m, o.control == NULL);
	m.all_decisions = o.all_decisions;
	if (o.sh.job != NULL) {
		dash_copy(m.job, sizeof(m.job), o.sh.job);
		m.view = DASH_VIEW_LAYERS;
	}
	if (o.run != DASH_NONE) {
		if ((r = top_fetch(src, &m)) < 0)
			goto out;
		top_open_run(&m, o.run);
		if (m.job[0] == '\0') {
			fprintf(stderr, "bellows top: no run %lld in %s\n",
			    (long long)o.run,
			    o.sh.db != NULL ? o.sh.db : TOP_DEFAULT_DB);
			r = BELLOWS_ENOTFOUND;
			goto out;
		}
		m.view = DASH_VIEW_LAYERS;
	}
	if (o.once) {
		r = top_once(src, &m, &o);
	} else {
		if ((r = top_fetch(src, &m)) >= 0)
			r = top_loop(src, &m, top_colour(&o));
	}
out:
	dash_model_fini(&m);
	dash_source_close(&src);
	if (r < 0) {
		if (r != BELLOWS_ENOTFOUND)
			fprintf(stderr, "bellows top: %s\n",
			    bellows_strerror(r));
		return 1;
	}
	return 0;
}
