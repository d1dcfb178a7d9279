/* top - the `bellows top` subcommand, see top.h.
 */
#include "top.h"

#include "common/args.h"
#include "client/client.h"
#include "common/clock.h"
#include "common/msg.h"
#include "common/suggest.h"
#include "layout.h"
#include "model.h"
#include "source.h"
#include "dash_text.h"
#include "tui/screen.h"

#include <bellows/error.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOP_DEFAULT_CONTROL COM_DEFAULT_CONTROL
#define TOP_DEFAULT_PUBLISH COM_DEFAULT_PUBLISH
#define TOP_DEFAULT_DB      "bellows.db"
#define TOP_REFRESH_MS      1000 /* live: STATUS this often */
#define TOP_MIN_FETCH_MS    250  /* telemetry: not more often than this */

typedef struct top_opts {
	const char *control;    /* NULL = offline */
	const char *publish;    /* bellowsd's PUB */
	const char *db;         /* history file; NULL = not given */
	const char *job;        /* job to open, NULL = none */
	int64_t run;            /* offline: run to open */
	bool once;              /* print one screen and leave */
	bool all_decisions;     /* also decisions that change nothing */
	dash_view view;         /* --once: view printed */
	uint32_t rows;          /* --once: screen size */
	uint32_t cols;          /* same */
	const char *server_key; /* --server-key, NULL: not given */
	const char *client_key; /* --client-key, NULL: not given */
	bool no_color;          /* --no-color */
} top_opts;

void
dash_top_usage(FILE *f)
{
	fprintf(f,
	    "usage: bellows top [--control EP] [--publish EP] [--db FILE]\n"
	    "                   [--offline] [--run ID] [--job NAME]\n"
	    "                   [--all-decisions]\n"
	    "                   [--once [--view V] [--size ROWSxCOLS]]\n"
	    "                   [--server-key FILE --client-key FILE]\n"
	    "                   [--no-color]\n"
	    "\n"
	    "  --control EP   bellowsd's control endpoint (default\n"
	    "                 $BELLOWS_CONTROL, else %s)\n"
	    "  --publish EP   bellowsd's publish endpoint (default\n"
	    "                 $BELLOWS_PUBLISH, else %s)\n"
	    "  --db FILE      the history bellowsd writes; live, per-layer\n"
	    "                 rows come from it (default: the file\n"
	    "                 bellowsd's STATUS names when readable here,\n"
	    "                 else %s)\n"
	    "  --offline      browse --db without a daemon (the default\n"
	    "                 when --db or --run is given without --control)\n"
	    "  --run ID       offline: open this run (default the latest)\n"
	    "  --job NAME     open this job (default $BELLOWS_JOB)\n"
	    "  --all-decisions  show every decision, also those that\n"
	    "                 change nothing (key c toggles)\n"
	    "  --once         print one screen as text and exit, 1 when\n"
	    "                 bellowsd did not answer (also\n"
	    "                 what happens when not on a terminal)\n"
	    "  --view V       --once: jobs, ranks, layers (default),\n"
	    "                 decisions or events\n"
	    "  --size RxC     --once: screen size (default 24x80)\n"
	    "  --server-key FILE  bellowsd's public certificate (default\n"
	    "                 $BELLOWS_SERVER_KEY)\n"
	    "  --client-key FILE  this client's secret certificate (default\n"
	    "                 $BELLOWS_CLIENT_KEY); with both, CURVE\n"
	    "  --no-color     no colours (bold, underline and dim instead);\n"
	    "                 also when $NO_COLOR is set or the terminal\n"
	    "                 has none\n"
	    "\n"
	    "keys: arrows/j/k move, Tab view, Enter open (a job, layer or\n"
	    "decision) and close, Esc back, / filter layers, s sort, c changed\n"
	    "decisions only/all, p pause, Left/Right window (offline), ? help\n"
	    "and legend, q quit. docs/top.md describes the views.\n",
	    TOP_DEFAULT_CONTROL, TOP_DEFAULT_PUBLISH, TOP_DEFAULT_DB);
}

static int
top_parse(int argc, char **argv, top_opts *o)
{
	static const struct option longopts[] = {
		{ "control", required_argument, NULL, 'c' },
		{ "publish", required_argument, NULL, 'P' },
		{ "db", required_argument, NULL, 'd' },
		{ "offline", no_argument, NULL, 'o' },
		{ "run", required_argument, NULL, 'r' },
		{ "job", required_argument, NULL, 'j' },
		{ "all-decisions", no_argument, NULL, 'a' },
		{ "once", no_argument, NULL, '1' },
		{ "view", required_argument, NULL, 'v' },
		{ "size", required_argument, NULL, 's' },
		{ "server-key", required_argument, NULL, 'S' },
		{ "client-key", required_argument, NULL, 'C' },
		{ "no-color", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool offline = false, control = false, db = false;
	uint64_t run;
	int c;

	memset(o, 0, sizeof(*o));
	o->control = tool_client_env("BELLOWS_CONTROL", TOP_DEFAULT_CONTROL);
	o->publish = tool_client_env("BELLOWS_PUBLISH", TOP_DEFAULT_PUBLISH);
	o->job = tool_client_env("BELLOWS_JOB", NULL);
	o->db = NULL;
	o->run = DASH_NONE;
	o->view = DASH_VIEW_LAYERS;
	o->rows = 24;
	o->cols = 80;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'S':
			o->server_key = optarg;
			break;
		case 'C':
			o->client_key = optarg;
			break;
		case 'N':
			o->no_color = true;
			break;
		case 'c':
			o->control = optarg;
			control = true;
			break;
		case 'P':
			o->publish = optarg;
			break;
		case 'd':
			o->db = optarg;
			db = true;
			break;
		case 'o':
			offline = true;
			break;
		case 'r':
			if (com_args_u64("bellows top", "--run", optarg, 0,
				INT64_MAX, &run) != 0)
				return 2;
			o->run = (int64_t)run;
			break;
		case 'j':
			o->job = optarg;
			break;
		case 'a':
			o->all_decisions = true;
			break;
		case '1':
			o->once = true;
			break;
		case 'v': {
			int v;

			for (v = 0; v < DASH_VIEW_LAYER; v++) {
				if (strcasecmp(optarg,
					dash_view_name((dash_view)v)) == 0)
					break;
			}
			if (v == DASH_VIEW_LAYER) {
				fprintf(stderr,
				    "bellows top: --view must be jobs, ranks, "
				    "layers, decisions or events, not '%s'\n",
				    optarg);
				return 2;
			}
			o->view = (dash_view)v;
			break;
		}
		case 's': {
			unsigned r = 0, k = 0;
			char end = 0;

			if (sscanf(optarg, "%ux%u%c", &r, &k, &end) != 2 ||
			    r < 8 || r > 1000 || k < 40 || k > 1000) {
				fprintf(stderr,
				    "bellows top: --size must be ROWSxCOLS, "
				    "8..1000 x 40..1000, not '%s'\n",
				    optarg);
				return 2;
			}
			o->rows = r;
			o->cols = k;
			break;
		}
		case 'h':
			dash_top_usage(stdout);
			return -1;
		default: {
			const char *near = com_suggest_option(argv[optind - 1],
			    longopts);

			if (near != NULL)
				fprintf(stderr,
				    "bellows top: did you mean '--%s'?\n",
				    near);
			dash_top_usage(stderr);
			return 2;
		}
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bellows top: unexpected argument '%s'\n",
		    argv[optind]);
		return 2;
	}
	if (offline && control) {
		fprintf(stderr,
		    "bellows top: --offline and --control exclude each "
		    "other\n");
		return 2;
	}
	if (offline || (!control && (db || o->run != DASH_NONE)))
		o->control = NULL;
	return 0;
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
top_once(dash_source *src, dash_model *m, const top_opts *o)
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
top_colour(const top_opts *o)
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
	top_opts o;
	char err[512] = "";
	int r;

	if ((r = top_parse(argc, argv, &o)) != 0)
		return r < 0 ? 0 : r;
	if (!o.once && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
		o.once = true;
	if (o.control != NULL &&
	    tool_client_keys("top", o.server_key, o.client_key, &keys) != 0)
		return 2;
	so.control = o.control;
	so.publish = o.publish;
	so.db = o.db;
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
	if (o.job != NULL) {
		dash_copy(m.job, sizeof(m.job), o.job);
		m.view = DASH_VIEW_LAYERS;
	}
	if (o.run != DASH_NONE) {
		if ((r = top_fetch(src, &m)) < 0)
			goto out;
		top_open_run(&m, o.run);
		if (m.job[0] == '\0') {
			fprintf(stderr, "bellows top: no run %lld in %s\n",
			    (long long)o.run,
			    o.db != NULL ? o.db : TOP_DEFAULT_DB);
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
