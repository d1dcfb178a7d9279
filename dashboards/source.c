/* source - live and offline data of `bellows top`, see source.h.
 */
#include "source.h"

#include "client/client.h"
#include "common/clock.h"
#include "client/historydb.h"
#include "client/historyrows.h"
#include "common/msg.h"
#include "rate.h"

#include <bellows/error.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SOURCE_STATUS_MS  1000 /* wait for a STATUS reply */
#define SOURCE_DECISIONS  64   /* last decisions shown */
#define SOURCE_EVENTS     64   /* last events shown (offline) */
#define SOURCE_MAX_LAYERS 4096 /* layers read per fetch */
#define SOURCE_MAX_JOBS   64   /* jobs whose rows are read */
#define SOURCE_SUB_HWM    8    /* telemetry queued while the screen waits */
#define SOURCE_DEFAULT_DB "bellows.db" /* no --db, nothing from STATUS */

struct dash_source {
	bool live;                     /* a daemon, not only a file */
	char *control;                 /* control endpoint, owned */
	char *db_path;                 /* history file, owned; NULL = none */
	bool db_given;                 /* --db: never replaced by STATUS's */
	const char *db_from;           /* "--db", "bellowsd" or "default" */
	bool all_decisions;            /* also those that change nothing */
	tool_client *client;           /* STATUS requests; NULL after failure */
	tool_keys keys;                /* CURVE keys of both sockets */
	tool_telemetry *tel;           /* telemetry; NULL offline */
	tool_hdb *db;                  /* open history, NULL = not (yet) */
	char db_err[TOOL_HDB_ERR_MAX]; /* why it is not open */
	com_msg last;                  /* last STATUS reply answered */
	bool have_last;                /* last is valid */
	uint64_t last_ms;              /* when it arrived */
	uint64_t rate_instance;        /* daemon instance of the rates */
	dash_rate reports;             /* reports accepted, by uptime */
	dash_rate decisions;           /* decisions published, same */
	int64_t lv_run;                /* run whose maxima lv_max holds */
	int64_t lv_upto;               /* last window read into lv_max */
	double *lv_max;                /* highest level per layer index
					* (SOURCE_MAX_LAYERS), NAN = none */
	int64_t acc_run;               /* run of acc_interval, DASH_NONE */
	uint32_t acc_interval;         /* Accordion's, last seen (live) */
	double acc_eta;                /* same */
};

/* ---- cells ------------------------------------------------------------ */

/* With CURVE keys, follows the telemetry of each job the last STATUS
 * listed (those this client may read) not followed yet, at most
 * TOOL_TELEMETRY_MAX_JOBS. Out of memory: that job's telemetry stays
 * unheard until the next STATUS. */
static void
source_subscribe(dash_source *s)
{
	const com_status_reply *st = &s->last.u.status_reply;

	for (uint32_t i = 0; i < st->n_jobs; i++) {
		const char *job = st->jobs[i].job != NULL ? st->jobs[i].job
							  : "";

		if (tool_telemetry_follow(s->tel, job) == BELLOWS_ENOMEM)
			return;
	}
}

/* The columns the dashboard reads, by name once per question
 * (client/historyrows.h), and those each question it asks must have. */
enum {
	SC_CALIBRATE_UNTIL,
	SC_COMPRESSION_OFF,
	SC_ERROR_BOUND,
	SC_EVENT_STEP,
	SC_FLOATS_RAW,
	SC_FLOATS_SENT,
	SC_ID,
	SC_JOB,
	SC_KIND,
	SC_LAST_EVENT,
	SC_LAST_STEP,
	SC_LAST_WINDOW,
	SC_LAYER,
	SC_LEVEL,
	SC_LEVEL_APPLIED,
	SC_LEVEL_MAX,
	SC_N_CHANGES,
	SC_NAME,
	SC_NORM_MEAN,
	SC_NUMEL,
	SC_POLICY,
	SC_RANK,
	SC_REASON,
	SC_REPORTS_DROPPED,
	SC_SEQ,
	SC_STATE,
	SC_STEP_MS_MEAN,
	SC_STEP_MS_MEDIAN,
	SC_TEXT,
	SC_THRESHOLD,
	SC_TIME,
	SC_VALUE,
	SC_WINDOW,
	SC_WINDOW_STEP,
	SC_WORLD,
	SC_N,
};

static const char *const source_cols[SC_N] = {
	[SC_CALIBRATE_UNTIL] = "calibrate_until",
	[SC_COMPRESSION_OFF] = "compression_off",
	[SC_ERROR_BOUND] = "error_bound",
	[SC_EVENT_STEP] = "event_step",
	[SC_FLOATS_RAW] = "floats_raw",
	[SC_FLOATS_SENT] = "floats_sent",
	[SC_ID] = "id",
	[SC_JOB] = "job",
	[SC_KIND] = "kind",
	[SC_LAST_EVENT] = "last_event",
	[SC_LAST_STEP] = "last_step",
	[SC_LAST_WINDOW] = "last_window",
	[SC_LAYER] = "layer",
	[SC_LEVEL] = "level",
	[SC_LEVEL_APPLIED] = "level_applied",
	[SC_LEVEL_MAX] = "level_max",
	[SC_N_CHANGES] = "n_changes",
	[SC_NAME] = "name",
	[SC_NORM_MEAN] = "norm_mean",
	[SC_NUMEL] = "numel",
	[SC_POLICY] = "policy",
	[SC_RANK] = "rank",
	[SC_REASON] = "reason",
	[SC_REPORTS_DROPPED] = "reports_dropped",
	[SC_SEQ] = "seq",
	[SC_STATE] = "state",
	[SC_STEP_MS_MEAN] = "step_ms_mean",
	[SC_STEP_MS_MEDIAN] = "step_ms_median",
	[SC_TEXT] = "text",
	[SC_THRESHOLD] = "threshold",
	[SC_TIME] = "time",
	[SC_VALUE] = "value",
	[SC_WINDOW] = "window",
	[SC_WINDOW_STEP] = "window_step",
	[SC_WORLD] = "world",
};

static const uint64_t source_need[TOOL_HDB_Q_N] = {
	[TOOL_HDB_Q_WINDOWS] = TOOL_HDB_COL(SC_FLOATS_RAW) |
	    TOOL_HDB_COL(SC_FLOATS_SENT) | TOOL_HDB_COL(SC_LAST_STEP) |
	    TOOL_HDB_COL(SC_STEP_MS_MEDIAN) | TOOL_HDB_COL(SC_WINDOW),
	[TOOL_HDB_Q_RANK_STATES] = TOOL_HDB_COL(SC_LAST_EVENT) |
	    TOOL_HDB_COL(SC_RANK) | TOOL_HDB_COL(SC_WINDOW_STEP) |
	    TOOL_HDB_COL(SC_EVENT_STEP) | TOOL_HDB_COL(SC_LAST_WINDOW),
	[TOOL_HDB_Q_TIMINGS_ALL] = TOOL_HDB_COL(SC_RANK) |
	    TOOL_HDB_COL(SC_REPORTS_DROPPED) | TOOL_HDB_COL(SC_STEP_MS_MEAN) |
	    TOOL_HDB_COL(SC_WINDOW),
	[TOOL_HDB_Q_LAYER_LEVELS] = TOOL_HDB_COL(SC_LAYER) |
	    TOOL_HDB_COL(SC_LEVEL_MAX) | TOOL_HDB_COL(SC_WINDOW),
	[TOOL_HDB_Q_LAYERS_RECENT] = TOOL_HDB_COL(SC_ERROR_BOUND) |
	    TOOL_HDB_COL(SC_LAYER) | TOOL_HDB_COL(SC_LEVEL) |
	    TOOL_HDB_COL(SC_LEVEL_APPLIED) | TOOL_HDB_COL(SC_NAME) |
	    TOOL_HDB_COL(SC_NORM_MEAN) | TOOL_HDB_COL(SC_NUMEL) |
	    TOOL_HDB_COL(SC_WINDOW),
	[TOOL_HDB_Q_METRICS] = TOOL_HDB_COL(SC_LAYER) | TOOL_HDB_COL(SC_NAME) |
	    TOOL_HDB_COL(SC_VALUE) | TOOL_HDB_COL(SC_WINDOW) |
	    TOOL_HDB_COL(SC_POLICY),
	[TOOL_HDB_Q_STATS] = TOOL_HDB_COL(SC_WINDOW) |
	    TOOL_HDB_COL(SC_THRESHOLD) | TOOL_HDB_COL(SC_COMPRESSION_OFF) |
	    TOOL_HDB_COL(SC_CALIBRATE_UNTIL),
	[TOOL_HDB_Q_DECISIONS] = TOOL_HDB_COL(SC_N_CHANGES) |
	    TOOL_HDB_COL(SC_POLICY) | TOOL_HDB_COL(SC_REASON) |
	    TOOL_HDB_COL(SC_SEQ) | TOOL_HDB_COL(SC_TIME) |
	    TOOL_HDB_COL(SC_WINDOW),
	[TOOL_HDB_Q_DECISIONS_LAST] = TOOL_HDB_COL(SC_N_CHANGES) |
	    TOOL_HDB_COL(SC_POLICY) | TOOL_HDB_COL(SC_REASON) |
	    TOOL_HDB_COL(SC_SEQ) | TOOL_HDB_COL(SC_TIME) |
	    TOOL_HDB_COL(SC_WINDOW),
	[TOOL_HDB_Q_DECISIONS_CHANGED_LAST] = TOOL_HDB_COL(SC_N_CHANGES) |
	    TOOL_HDB_COL(SC_POLICY) | TOOL_HDB_COL(SC_REASON) |
	    TOOL_HDB_COL(SC_SEQ) | TOOL_HDB_COL(SC_TIME) |
	    TOOL_HDB_COL(SC_WINDOW),
	[TOOL_HDB_Q_RUNS] = TOOL_HDB_COL(SC_ID) | TOOL_HDB_COL(SC_JOB) |
	    TOOL_HDB_COL(SC_STATE) | TOOL_HDB_COL(SC_WORLD),
	[TOOL_HDB_Q_EVENTS] = TOOL_HDB_COL(SC_JOB) | TOOL_HDB_COL(SC_KIND) |
	    TOOL_HDB_COL(SC_TEXT) | TOOL_HDB_COL(SC_TIME),
};

/* Column col of row r as an integer, DASH_NONE when not available. */
static int64_t
source_int(const tool_hdb_result *rows, uint64_t r, uint32_t col)
{
	return tool_hdb_int(rows, r, col, DASH_NONE);
}

/* "2026-11-22T03:00:34.703Z" -> "03:00:34". */
static void
source_hms(const char *iso, char *buf, size_t len)
{
	const char *t = strchr(iso, 'T');

	dash_copy(buf, len > 9 ? 9 : len, t != NULL ? t + 1 : iso);
}

static void
source_wall_hms(uint64_t wall_ms, char *buf, size_t len)
{
	time_t t = (time_t)(wall_ms / 1000);
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(buf, len, "%H:%M:%S", &tm) == 0)
		dash_copy(buf, len, "?");
}

/* Asks question q, rows into *rows (zeroed before). Returns 0 or an
 * error. */
static int
source_ask(dash_source *s, tool_hdb_question q, const tool_hdb_filter *f,
    tool_hdb_result *rows)
{
	tool_hdb_sink sink;

	tool_hdb_result_sink(rows, source_cols, SC_N, source_need[q], &sink);
	return tool_hdb_query(s->db, q, f, &sink);
}

static void
source_filter(tool_hdb_filter *f, int64_t run)
{
	f->run = run;
	f->job = NULL;
	f->layer = TOOL_HDB_NONE;
	f->window_lo = TOOL_HDB_NONE;
	f->window_hi = TOOL_HDB_NONE;
	f->time_lo = TOOL_HDB_NONE;
	f->time_hi = TOOL_HDB_NONE;
	f->changed_only = false;
}

/* ---- open / close ------------------------------------------------------ */

static void
source_db_open(dash_source *s)
{
	if (s->db != NULL || s->db_path == NULL)
		return;
	if (tool_hdb_open(s->db_path, &s->db, s->db_err, sizeof(s->db_err)) !=
	    0)
		s->db = NULL;
}

int
dash_source_open(const dash_source_opts *o, dash_source **ret, char *errbuf,
    size_t errlen)
{
	dash_source *s = calloc(1, sizeof(*s));
	int r = BELLOWS_ENOMEM;

	if (s == NULL)
		return BELLOWS_ENOMEM;
	s->lv_run = DASH_NONE;
	s->lv_upto = DASH_NONE;
	s->acc_run = DASH_NONE;
	dash_rate_init(&s->reports, DASH_RATE_SPAN_MS);
	dash_rate_init(&s->decisions, DASH_RATE_SPAN_MS);
	s->live = o->control != NULL;
	s->db_given = o->db != NULL;
	s->db_from = s->db_given ? "--db" : "default";
	if ((s->db_path = strdup(o->db != NULL ? o->db : SOURCE_DEFAULT_DB)) ==
	    NULL)
		goto fail;
	if (!s->live) {
		r = tool_hdb_open(s->db_path, &s->db, errbuf, errlen);
		if (r != 0)
			goto fail;
		*ret = s;
		return 0;
	}
	if ((s->control = strdup(o->control)) == NULL)
		goto fail;
	if (o->keys != NULL)
		s->keys = *o->keys;
	if ((r = tool_client_open(s->control, &s->keys, &s->client)) != 0) {
		snprintf(errbuf, errlen, "cannot use control endpoint '%s'",
		    o->control);
		goto fail;
	}
	/* A dashboard stopped on a terminal holds a few messages, and
	 * bellowsd drops the rest for it (peer_queue_mb). With keys, each
	 * job STATUS lists is followed by name (source_subscribe). */
	r = tool_telemetry_open(o->publish, &s->keys, SOURCE_SUB_HWM, &s->tel);
	if (r == BELLOWS_ESYS)
		snprintf(errbuf, errlen, "cannot create a ZeroMQ socket");
	else if (r == BELLOWS_ENOTSUP)
		snprintf(errbuf, errlen, "this libzmq cannot use CURVE keys");
	else if (r == BELLOWS_EINVAL)
		snprintf(errbuf, errlen, "cannot use publish endpoint '%s'",
		    o->publish);
	if (r != 0)
		goto fail;
	source_db_open(s);
	*ret = s;
	return 0;
fail:
	dash_source_close(&s);
	return r;
}

void
dash_source_close(dash_source **sp)
{
	dash_source *s;

	if (sp == NULL || *sp == NULL)
		return;
	s = *sp;
	tool_client_close(&s->client);
	tool_telemetry_close(&s->tel);
	tool_hdb_close(&s->db);
	if (s->have_last)
		com_msg_fini(&s->last);
	explicit_bzero(&s->keys, sizeof(s->keys));
	free(s->control);
	free(s->db_path);
	free(s->lv_max);
	free(s);
	*sp = NULL;
}

void
dash_source_all_decisions(dash_source *s, bool all)
{
	s->all_decisions = all;
}

/* Telemetry arrived: only "something closed" matters, not what. */
static void
source_telemetry(void *arg, const com_msg *msg)
{
	*(bool *)arg = true;
}

int
dash_source_wait(dash_source *s, int fd, int timeout_ms, bool *ret_fd,
    bool *ret_telemetry)
{
	*ret_telemetry = false;
	return tool_telemetry_wait(s->tel, fd, timeout_ms, source_telemetry,
	    ret_telemetry, ret_fd);
}

/* ---- reading ------------------------------------------------------------ */

/* Feeds the counters of the last STATUS to the rates, on bellowsd's own
 * clock (its uptime: when it read them, not when the reply came). */
static void
source_rates(dash_source *s)
{
	const com_status_reply *st = &s->last.u.status_reply;

	if (st->instance != s->rate_instance) {
		dash_rate_init(&s->reports, DASH_RATE_SPAN_MS);
		dash_rate_init(&s->decisions, DASH_RATE_SPAN_MS);
		s->rate_instance = st->instance;
	}
	dash_rate_add(&s->reports, st->uptime_ms, st->reports);
	dash_rate_add(&s->decisions, st->uptime_ms, st->decisions);
}

/* Without --db, the history bellowsd says it writes, when this machine
 * can read that file (the same machine, or a shared path); else the
 * default file in the working directory, as before STATUS named one. */
static void
source_db_follow(dash_source *s)
{
	const char *path = s->last.u.status_reply.store_path;
	char *p;

	if (s->db_given || path == NULL || path[0] == '\0' ||
	    strcmp(path, s->db_path) == 0 || access(path, R_OK) != 0)
		return;
	if ((p = strdup(path)) == NULL)
		return;
	free(s->db_path);
	s->db_path = p;
	s->db_from = "bellowsd";
	tool_hdb_close(&s->db);
	s->db_err[0] = '\0';
	/* Run ids of another file are other runs. */
	s->lv_run = DASH_NONE;
	s->lv_upto = DASH_NONE;
	s->acc_run = DASH_NONE;
	source_db_open(s);
}

/* Asks bellowsd for STATUS; keeps the reply in s->last. */
static void
source_status(dash_source *s, dash_snapshot *snap)
{
	com_msg req, reply;
	int r;

	snap->health.connected = false;
	if (s->client == NULL &&
	    tool_client_open(s->control, &s->keys, &s->client) != 0) {
		dash_copy(snap->health.note, sizeof(snap->health.note),
		    "cannot open the control socket");
		return;
	}
	com_msg_init(&req, COM_MSG_STATUS_REQUEST);
	r = tool_client_request(s->client, &req, SOURCE_STATUS_MS, &reply);
	com_msg_fini(&req);
	if (r == 0 && reply.type != COM_MSG_STATUS_REPLY) {
		com_msg_fini(&reply);
		r = BELLOWS_EPROTO;
	}
	if (r != 0) {
		/* A reply that comes late must not answer the next request:
		 * start over with a new socket. */
		snprintf(snap->health.note, sizeof(snap->health.note),
		    "%s; reconnecting",
		    s->client != NULL && tool_client_why(s->client)[0] != '\0'
			? tool_client_why(s->client)
			: bellows_strerror(r));
		tool_client_close(&s->client);
		return;
	}
	if (s->have_last)
		com_msg_fini(&s->last);
	s->last = reply;
	s->have_last = true;
	source_subscribe(s);
	s->last_ms = com_clock_ms();
	snap->health.connected = true;
	source_rates(s);
	source_db_follow(s);
}

static void
source_health(dash_source *s, dash_snapshot *snap)
{
	const com_status_reply *st = &s->last.u.status_reply;
	dash_health *h = &snap->health;

	h->reports_per_s = NAN;
	h->decisions_per_s = NAN;
	h->latency_ms = NAN;
	h->latency_p99_ms = NAN;
	if (!s->have_last)
		return;
	h->uptime_ms = st->uptime_ms;
	if (st->latency_samples > 0) {
		h->latency_ms = st->latency_p50_ms;
		h->latency_p99_ms = st->latency_p99_ms;
	}
	h->store_pending = st->store_pending;
	h->store_degraded = st->store_degraded;
	h->dropped = st->dropped;
	h->reports_per_s = dash_rate_get(&s->reports);
	h->decisions_per_s = dash_rate_get(&s->decisions);
}

/* Fills step time and bytes of the job's window `w` (DASH_NONE: latest)
 * from the history. */
static void
source_job_window(dash_source *s, dash_job *j, int64_t w)
{
	tool_hdb_filter f;
	tool_hdb_result rows;

	if (s->db == NULL || j->run == DASH_NONE)
		return;
	source_filter(&f, j->run);
	f.window_hi = w;
	if (w != DASH_NONE)
		f.window_lo = w;
	else if (j->window != DASH_NONE)
		f.window_lo = j->window > 2 ? j->window - 2 : 0;
	if (source_ask(s, TOOL_HDB_Q_WINDOWS, &f, &rows) == 0 &&
	    rows.rows.n_rows > 0) {
		uint64_t r = rows.rows.n_rows - 1;
		int64_t sent = source_int(&rows, r, SC_FLOATS_SENT);
		int64_t raw = source_int(&rows, r, SC_FLOATS_RAW);

		int64_t last = source_int(&rows, r, SC_LAST_STEP);

		j->window = source_int(&rows, r, SC_WINDOW);
		if (last >= 0 && (uint64_t)last > j->step)
			j->step = (uint64_t)last;
		if (isnan(j->step_ms))
			j->step_ms = tool_hdb_real(&rows, r, SC_STEP_MS_MEDIAN);
		j->bytes_sent = sent == DASH_NONE ? DASH_NONE : sent * 4;
		j->bytes_raw = raw == DASH_NONE ? DASH_NONE : raw * 4;
	}
	tool_hdb_result_fini(&rows);
}

static int
source_live_jobs(dash_source *s, dash_snapshot *snap)
{
	const com_status_reply *st = &s->last.u.status_reply;

	if (!s->have_last || st->n_jobs == 0)
		return 0;
	snap->jobs = calloc(st->n_jobs, sizeof(*snap->jobs));
	if (snap->jobs == NULL)
		return BELLOWS_ENOMEM;
	snap->n_jobs = st->n_jobs;
	for (uint32_t i = 0; i < st->n_jobs; i++) {
		const com_job_status *js = &st->jobs[i];
		dash_job *j = &snap->jobs[i];
		tool_hdb_run run;

		dash_copy(j->name, sizeof(j->name), js->job);
		j->run = DASH_NONE;
		j->alive = js->ranks_alive;
		j->world = js->world;
		j->step = js->step;
		j->window = js->window > 0 ? (int64_t)js->window - 1
					   : DASH_NONE;
		j->step_ms = NAN;
		j->bytes_sent = DASH_NONE;
		j->bytes_raw = DASH_NONE;
		dash_copy(j->policy, sizeof(j->policy), js->policy);
		/* The latest (re)load of the configuration in the ring. */
		for (uint32_t e = 0; e < st->n_events; e++) {
			const char *k = st->events[e].kind;

			if (k != NULL &&
			    (strcmp(k, "reload_ok") == 0 ||
				strcmp(k, "daemon_started") == 0))
				source_wall_hms(st->events[e].wall_ms,
				    j->reloaded, sizeof(j->reloaded));
		}
		if (s->db != NULL && i < SOURCE_MAX_JOBS &&
		    tool_hdb_run_find(s->db, TOOL_HDB_NONE, j->name, &run) ==
			0) {
			j->run = run.id;
			/* Every rank left: bellowsd ended the run. */
			j->ended = !run.live && j->alive == 0;
			tool_hdb_run_fini(&run);
			source_job_window(s, j, DASH_NONE);
		}
	}
	return 0;
}

/* Live ranks STATUS says are not alive: those whose last rank event in
 * the history is a goodbye left (a clean exit), the others are lost.
 * Only the run's rank events and its last few windows are read. */
static void
source_live_ends(dash_source *s, dash_snapshot *snap, const dash_job *j)
{
	tool_hdb_filter f;
	tool_hdb_result rows;

	if (s->db == NULL || j->run == DASH_NONE)
		return;
	source_filter(&f, j->run);
	if (j->window != DASH_NONE)
		f.window_lo = j->window > 4 ? j->window - 4 : 0;
	if (source_ask(s, TOOL_HDB_Q_RANK_STATES, &f, &rows) == 0) {
		for (uint64_t r = 0; r < rows.rows.n_rows; r++) {
			int64_t rank = source_int(&rows, r, SC_RANK);

			if (strcmp(tool_hdb_text(&rows, r, SC_LAST_EVENT),
				"left") != 0)
				continue;
			for (uint32_t i = 0; i < snap->n_ranks; i++) {
				dash_rank *k = &snap->ranks[i];

				if (!k->alive && (int64_t)k->rank == rank)
					k->end = DASH_RANK_LEFT;
			}
		}
	}
	tool_hdb_result_fini(&rows);
}

static int
source_live_ranks(dash_source *s, dash_snapshot *snap, const dash_job *j)
{
	const com_status_reply *st = &s->last.u.status_reply;
	const com_job_status *js = NULL;
	tool_hdb_filter f;
	tool_hdb_result rows = { 0 };
	bool any_down = false;

	for (uint32_t i = 0; i < st->n_jobs; i++) {
		if (st->jobs[i].job != NULL &&
		    strcmp(st->jobs[i].job, j->name) == 0)
			js = &st->jobs[i];
	}
	if (js == NULL || js->n_ranks == 0)
		return 0;
	snap->ranks = calloc(js->n_ranks, sizeof(*snap->ranks));
	if (snap->ranks == NULL)
		return BELLOWS_ENOMEM;
	snap->n_ranks = js->n_ranks;
	if (s->db != NULL && j->run != DASH_NONE && j->window != DASH_NONE) {
		source_filter(&f, j->run);
		f.window_lo = j->window > 4 ? j->window - 4 : 0;
		f.window_hi = j->window;
		if (source_ask(s, TOOL_HDB_Q_TIMINGS_ALL, &f, &rows) != 0)
			tool_hdb_result_fini(&rows);
	}
	for (uint32_t i = 0; i < js->n_ranks; i++) {
		dash_rank *k = &snap->ranks[i];

		k->rank = js->ranks[i].rank;
		k->alive = js->ranks[i].alive;
		if (!k->alive)
			any_down = true;
		k->step = js->ranks[i].step;
		k->seen_ms = (int64_t)js->ranks[i].last_seen_ms;
		k->step_ms = NAN;
		k->window = DASH_NONE;
		/* Its latest window's row (rows are by window, rank). */
		for (uint64_t r = 0; r < rows.rows.n_rows; r++) {
			if (source_int(&rows, r, SC_RANK) != (int64_t)k->rank)
				continue;
			k->window = source_int(&rows, r, SC_WINDOW);
			k->step_ms = tool_hdb_real(&rows, r, SC_STEP_MS_MEAN);
			k->drops = (uint64_t)source_int(&rows, r,
			    SC_REPORTS_DROPPED);
		}
	}
	tool_hdb_result_fini(&rows);
	if (any_down)
		source_live_ends(s, snap, j);
	return 0;
}

static int
source_live_events(dash_source *s, dash_snapshot *snap, const char *job)
{
	const com_status_reply *st = &s->last.u.status_reply;
	uint32_t n = 0;

	if (st->n_events == 0)
		return 0;
	snap->events = calloc(st->n_events, sizeof(*snap->events));
	if (snap->events == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < st->n_events; i++) {
		const com_event *e = &st->events[i];
		dash_event *d;

		/* The job's own and the daemon's. */
		if (e->job != NULL && e->job[0] != '\0' && job[0] != '\0' &&
		    strcmp(e->job, job) != 0)
			continue;
		d = &snap->events[n++];
		source_wall_hms(e->wall_ms, d->time, sizeof(d->time));
		dash_copy(d->kind, sizeof(d->kind), e->kind);
		dash_copy(d->job, sizeof(d->job), e->job);
		dash_copy(d->text, sizeof(d->text), e->text);
	}
	snap->n_events = n;
	return 0;
}

/* The highest level of each layer of run `run` up to window `hi`
 * (DASH_NONE: the newest) into levels[SOURCE_MAX_LAYERS] (NAN: none).
 * Live, the maxima are kept between refreshes and only the windows
 * closed since the last one are read, so that a refresh costs the same
 * at window 10 and at window 100,000; offline the window slider moves
 * both ways and every fetch reads the run up to `hi`. */
static const double *
source_levels(dash_source *s, int64_t run, int64_t hi)
{
	tool_hdb_filter f;
	tool_hdb_result rows;

	if (s->lv_max == NULL &&
	    (s->lv_max = malloc(SOURCE_MAX_LAYERS * sizeof(double))) == NULL)
		return NULL;
	if (!s->live || s->lv_run != run) {
		for (uint32_t i = 0; i < SOURCE_MAX_LAYERS; i++)
			s->lv_max[i] = NAN;
		s->lv_run = run;
		s->lv_upto = DASH_NONE;
	}
	source_filter(&f, run);
	f.window_lo = s->lv_upto == DASH_NONE ? DASH_NONE : s->lv_upto + 1;
	f.window_hi = hi;
	if (source_ask(s, TOOL_HDB_Q_LAYER_LEVELS, &f, &rows) == 0) {
		for (uint64_t r = 0; r < rows.rows.n_rows; r++) {
			int64_t idx = source_int(&rows, r, SC_LAYER);
			int64_t win = source_int(&rows, r, SC_WINDOW);
			double v = tool_hdb_real(&rows, r, SC_LEVEL_MAX);

			if (idx < 0 || idx >= SOURCE_MAX_LAYERS)
				continue;
			if (!isnan(v) &&
			    (isnan(s->lv_max[idx]) || v > s->lv_max[idx]))
				s->lv_max[idx] = v;
			if (win != DASH_NONE && win > s->lv_upto)
				s->lv_upto = win;
		}
	}
	tool_hdb_result_fini(&rows);
	return s->lv_max;
}

/* The layers of run j->run as of window w (DASH_NONE: the newest, live):
 * one question for every layer's recent windows (level, norm sparkline,
 * error bound), then their highest levels. */
static int
source_layers(dash_source *s, dash_snapshot *snap, const dash_job *j, int64_t w)
{
	tool_hdb_filter f;
	tool_hdb_result rows;
	const double *levels;
	int64_t hi = w != DASH_NONE ? w : j->window;
	int64_t prev = DASH_NONE;
	uint32_t n = 0;

	if (s->db == NULL || j->run == DASH_NONE)
		return 0;
	source_filter(&f, j->run);
	f.window_hi = hi;
	if (hi != DASH_NONE)
		f.window_lo = hi >= DASH_SPARK_MAX ? hi - DASH_SPARK_MAX + 1
						   : 0;
	if (source_ask(s, TOOL_HDB_Q_LAYERS_RECENT, &f, &rows) != 0 ||
	    rows.rows.n_rows == 0) {
		tool_hdb_result_fini(&rows);
		return 0;
	}
	for (uint64_t r = 0; r < rows.rows.n_rows; r++) {
		int64_t idx = source_int(&rows, r, SC_LAYER);

		if (r == 0 || idx != prev)
			n++;
		prev = idx;
	}
	if (n > SOURCE_MAX_LAYERS)
		n = SOURCE_MAX_LAYERS;
	snap->layers = calloc(n, sizeof(*snap->layers));
	if (snap->layers == NULL) {
		tool_hdb_result_fini(&rows);
		return BELLOWS_ENOMEM;
	}
	for (uint64_t r = 0; r < rows.rows.n_rows; r++) {
		int64_t idx = source_int(&rows, r, SC_LAYER);
		dash_layer *l;
		double v;

		if (snap->n_layers == 0 || idx != prev) {
			int64_t numel = source_int(&rows, r, SC_NUMEL);

			if (snap->n_layers == n)
				break;
			l = &snap->layers[snap->n_layers++];
			l->idx = idx >= 0 ? (uint32_t)idx : 0;
			dash_copy(l->name, sizeof(l->name),
			    tool_hdb_text(&rows, r, SC_NAME));
			l->numel = numel >= 0 ? (uint64_t)numel : 0;
			l->level = NAN;
			l->level_applied = NAN;
			l->level_prev = NAN;
			l->level_max = NAN;
			l->error_bound = NAN;
			l->r = NAN;
			l->r_window = DASH_NONE;
			l->r_eta = NAN;
		}
		prev = idx;
		l = &snap->layers[snap->n_layers - 1];
		if (source_int(&rows, r, SC_WINDOW) == DASH_NONE)
			continue;
		/* Rows go by window: the last one is the one in force. */
		l->level_prev = l->level;
		l->level = tool_hdb_real(&rows, r, SC_LEVEL);
		l->level_applied = tool_hdb_real(&rows, r, SC_LEVEL_APPLIED);
		l->error_bound = tool_hdb_real(&rows, r, SC_ERROR_BOUND);
		v = tool_hdb_real(&rows, r, SC_NORM_MEAN);
		if (l->n_norms == DASH_SPARK_MAX) {
			memmove(l->norms, l->norms + 1,
			    (DASH_SPARK_MAX - 1) * sizeof(*l->norms));
			l->n_norms--;
		}
		l->norms[l->n_norms++] = v;
	}
	tool_hdb_result_fini(&rows);
	levels = source_levels(s, j->run, hi);
	if (levels == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < snap->n_layers; i++) {
		dash_layer *l = &snap->layers[i];

		if (l->idx < SOURCE_MAX_LAYERS)
			l->level_max = levels[l->idx];
	}
	return 0;
}

#define SOURCE_JUDGED_SPAN 1024 /* windows searched for Accordion's r */

/* Accordion's r of each layer as judged at its last check before window
 * w (DASH_NONE: the newest), with that check's window and eta: the r
 * that decided the level in force in w (a check's decision is in force
 * from the window after it), not one of a later window. A check falls
 * every acc_interval windows, so that many are read (at most
 * SOURCE_JUDGED_SPAN; the last 32 when the interval is not known). */
static void
source_judged(dash_source *s, dash_snapshot *snap, const dash_job *j, int64_t w)
{
	int64_t shown = w != DASH_NONE ? w : j->window;
	int64_t hi = shown != DASH_NONE ? shown - 1 : -1;
	int64_t span = snap->acc_interval != 0 ? snap->acc_interval
					       : DASH_SPARK_MAX;
	tool_hdb_filter f;
	tool_hdb_result rows;
	uint32_t at = 0;

	if (s->db == NULL || j->run == DASH_NONE || hi < 0 ||
	    snap->n_layers == 0)
		return;
	if (span > SOURCE_JUDGED_SPAN)
		span = SOURCE_JUDGED_SPAN;
	source_filter(&f, j->run);
	f.window_lo = hi >= span ? hi - span : 0;
	f.window_hi = hi;
	if (source_ask(s, TOOL_HDB_Q_METRICS, &f, &rows) != 0) {
		tool_hdb_result_fini(&rows);
		return;
	}
	/* Rows go by window, then as the policy wrote them (layer order):
	 * the search for a layer starts after the last one found. */
	for (uint64_t i = 0; i < rows.rows.n_rows; i++) {
		const char *name = tool_hdb_text(&rows, i, SC_NAME);
		const char *layer = tool_hdb_text(&rows, i, SC_LAYER);
		int64_t win = source_int(&rows, i, SC_WINDOW);

		if (strcmp(name, "r") != 0 || layer[0] == '\0')
			continue;
		for (uint32_t k = 0; k < snap->n_layers; k++) {
			dash_layer
			    *l = &snap->layers[(at + k) % snap->n_layers];

			if (strcmp(l->name, layer) != 0)
				continue;
			l->r = tool_hdb_real(&rows, i, SC_VALUE);
			l->r_window = win;
			l->r_eta = NAN;
			at = (at + k + 1) % snap->n_layers;
			break;
		}
	}
	/* The eta each r was compared with: the job's "eta" of its
	 * window. */
	for (uint64_t i = 0; i < rows.rows.n_rows; i++) {
		const char *layer = tool_hdb_text(&rows, i, SC_LAYER);
		int64_t win = source_int(&rows, i, SC_WINDOW);

		if (strcmp(tool_hdb_text(&rows, i, SC_NAME), "eta") != 0 ||
		    layer[0] != '\0')
			continue;
		for (uint32_t k = 0; k < snap->n_layers; k++)
			if (snap->layers[k].r_window == win)
				snap->layers[k].r_eta = tool_hdb_real(&rows, i,
				    SC_VALUE);
	}
	tool_hdb_result_fini(&rows);
}

/* The threshold, gate and calibration in force in the last window of run
 * j->run up to window w, and the metrics the policies computed for it. */
static void
source_knobs(dash_source *s, dash_snapshot *snap, const dash_job *j, int64_t w)
{
	dash_knobs *k = &snap->knobs;
	tool_hdb_filter f;
	tool_hdb_result rows;
	int64_t until;
	uint64_t last;

	k->window = DASH_NONE;
	if (s->db == NULL || j->run == DASH_NONE)
		return;
	source_filter(&f, j->run);
	f.window_hi = w;
	/* Live, the newest few windows, not the run's every one. */
	if (w == DASH_NONE && j->window != DASH_NONE)
		f.window_lo = j->window > 8 ? j->window - 8 : 0;
	if (source_ask(s, TOOL_HDB_Q_STATS, &f, &rows) != 0 ||
	    rows.rows.n_rows == 0) {
		tool_hdb_result_fini(&rows);
		return;
	}
	last = rows.rows.n_rows - 1;
	k->window = source_int(&rows, last, SC_WINDOW);
	k->threshold = source_int(&rows, last, SC_THRESHOLD);
	if (k->threshold == DASH_NONE || k->threshold < 0)
		k->threshold = 0;
	k->gate_off = source_int(&rows, last, SC_COMPRESSION_OFF) > 0;
	until = source_int(&rows, last, SC_CALIBRATE_UNTIL);
	k->calibrating = until != DASH_NONE && (uint64_t)until > j->step;
	tool_hdb_result_fini(&rows);
	if (k->window == DASH_NONE)
		return;
	source_filter(&f, j->run);
	f.window_lo = k->window;
	f.window_hi = k->window;
	if (source_ask(s, TOOL_HDB_Q_METRICS, &f, &rows) == 0) {
		for (uint64_t i = 0;
		     i < rows.rows.n_rows && k->n_metrics < DASH_METRICS_MAX;
		     i++) {
			dash_metric *mt = &k->metrics[k->n_metrics++];

			dash_copy(mt->policy, sizeof(mt->policy),
			    tool_hdb_text(&rows, i, SC_POLICY));
			dash_copy(mt->name, sizeof(mt->name),
			    tool_hdb_text(&rows, i, SC_NAME));
			dash_copy(mt->layer, sizeof(mt->layer),
			    tool_hdb_text(&rows, i, SC_LAYER));
			mt->value = tool_hdb_real(&rows, i, SC_VALUE);
		}
	}
	tool_hdb_result_fini(&rows);
}

/* Whether decision row r is shown: every one when all are asked for,
 * else those that changed a knob. */
static bool
source_decision_shown(const dash_source *s, const tool_hdb_result *rows,
    uint64_t r)
{
	return s->all_decisions || source_int(rows, r, SC_N_CHANGES) > 0;
}

static int
source_decisions(dash_source *s, dash_snapshot *snap, const dash_job *j,
    int64_t w)
{
	tool_hdb_filter f;
	tool_hdb_result rows;
	uint64_t first = 0, n = 0;

	if (s->db == NULL || j->run == DASH_NONE)
		return 0;
	source_filter(&f, j->run);
	/* A decision's window is the one it is in force for: w + 1. */
	if (w != DASH_NONE)
		f.window_hi = w + 1;
	/* Live, only the newest decisions (that changed something, unless
	 * all are asked for) are read: a refresh must not grow with the
	 * run. Offline, all up to w, for Accordion's configuration below,
	 * the newest of those asked for kept. */
	if (source_ask(s,
		!s->live               ? TOOL_HDB_Q_DECISIONS
		    : s->all_decisions ? TOOL_HDB_Q_DECISIONS_LAST
				       : TOOL_HDB_Q_DECISIONS_CHANGED_LAST,
		&f, &rows) != 0 ||
	    rows.rows.n_rows == 0) {
		tool_hdb_result_fini(&rows);
		return 0;
	}
	/* The first row of the newest SOURCE_DECISIONS shown. */
	for (first = rows.rows.n_rows; first > 0 && n < SOURCE_DECISIONS;
	     first--)
		n += source_decision_shown(s, &rows, first - 1);
	snap->decisions = n > 0 ? calloc(n, sizeof(*snap->decisions)) : NULL;
	if (n > 0 && snap->decisions == NULL) {
		tool_hdb_result_fini(&rows);
		return BELLOWS_ENOMEM;
	}
	for (uint64_t r = first; r < rows.rows.n_rows; r++) {
		dash_decision *d;
		int64_t seq = source_int(&rows, r, SC_SEQ);
		int64_t changes = source_int(&rows, r, SC_N_CHANGES);

		if (!source_decision_shown(s, &rows, r))
			continue;
		d = &snap->decisions[snap->n_decisions++];
		d->seq = seq >= 0 ? (uint64_t)seq : 0;
		d->n_changes = changes > 0 && changes <= UINT32_MAX
		    ? (uint32_t)changes
		    : 0;
		d->window = source_int(&rows, r, SC_WINDOW);
		source_hms(tool_hdb_text(&rows, r, SC_TIME), d->time,
		    sizeof(d->time));
		dash_copy(d->policy, sizeof(d->policy),
		    tool_hdb_text(&rows, r, SC_POLICY));
		dash_copy(d->reason, sizeof(d->reason),
		    tool_hdb_text(&rows, r, SC_REASON));
	}
	/* Accordion names its interval and eta when it compares windows;
	 * the newest such reason is the configuration in force. */
	for (uint64_t i = rows.rows.n_rows; i > 0; i--) {
		if (dash_reason_accordion(tool_hdb_text(&rows, i - 1,
					      SC_REASON),
			&snap->acc_interval, &snap->acc_eta))
			break;
	}
	/* Live, one seen in an earlier refresh stays in force until a
	 * newer one replaces it. */
	if (s->live && snap->acc_interval != 0) {
		s->acc_run = j->run;
		s->acc_interval = snap->acc_interval;
		s->acc_eta = snap->acc_eta;
	} else if (s->live && s->acc_run == j->run) {
		snap->acc_interval = s->acc_interval;
		snap->acc_eta = s->acc_eta;
	}
	tool_hdb_result_fini(&rows);
	return 0;
}

/* Offline: the runs of the file as jobs; the latest run of a job goes by
 * the job's name, older ones as "name#run". */
static int
source_offline_jobs(dash_source *s, dash_snapshot *snap)
{
	tool_hdb_filter f;
	tool_hdb_result rows;

	source_filter(&f, TOOL_HDB_NONE);
	if (source_ask(s, TOOL_HDB_Q_RUNS, &f, &rows) != 0 ||
	    rows.rows.n_rows == 0) {
		tool_hdb_result_fini(&rows);
		return 0;
	}
	snap->jobs = calloc(rows.rows.n_rows, sizeof(*snap->jobs));
	if (snap->jobs == NULL) {
		tool_hdb_result_fini(&rows);
		return BELLOWS_ENOMEM;
	}
	/* Newest run first. */
	for (uint64_t k = rows.rows.n_rows; k > 0; k--) {
		uint64_t i = k - 1;
		dash_job *j = &snap->jobs[snap->n_jobs];
		const char *name = tool_hdb_text(&rows, i, SC_JOB);
		bool older = false;
		int64_t world = source_int(&rows, i, SC_WORLD);

		for (uint32_t p = 0; p < snap->n_jobs; p++) {
			if (strncmp(snap->jobs[p].name, name,
				sizeof(j->name) - 1) == 0)
				older = true;
		}
		j->run = source_int(&rows, i, SC_ID);
		if (older) {
			char buf[DASH_NAME_MAX + 24];

			snprintf(buf, sizeof(buf), "%s#%lld", name,
			    (long long)j->run);
			dash_copy(j->name, sizeof(j->name), buf);
		} else {
			dash_copy(j->name, sizeof(j->name), name);
		}
		j->world = world > 0 ? (uint32_t)world : 0;
		j->window = DASH_NONE;
		j->step_ms = NAN;
		j->bytes_sent = DASH_NONE;
		j->bytes_raw = DASH_NONE;
		j->ended = strcmp(tool_hdb_text(&rows, i, SC_STATE), "live") !=
		    0;
		/* The policies: those of its decisions, once the run is
		 * opened (source_offline_policy). */
		j->policy[0] = '\0';
		snap->n_jobs++;
	}
	tool_hdb_result_fini(&rows);
	return 0;
}

/* Offline: how rank d stood at window w from its row of RANK_STATES
 * (row r): its last step is the later of its last window's last step and
 * the step its last event recorded; the event says whether it was alive,
 * lost or had left; a rank still in when its run ended (`ended`) ended
 * with it. A file without rank events: alive when it reported window
 * w. */
static void
source_rank_state(const tool_hdb_result *rows, uint64_t r, int64_t w,
    bool ended, dash_rank *d)
{
	const char *ev = tool_hdb_text(rows, r, SC_LAST_EVENT);
	int64_t ws = source_int(rows, r, SC_WINDOW_STEP);
	int64_t es = source_int(rows, r, SC_EVENT_STEP);

	d->window = source_int(rows, r, SC_LAST_WINDOW);
	if (ws >= 0)
		d->step = (uint64_t)ws;
	if (es >= 0 && (uint64_t)es > d->step)
		d->step = (uint64_t)es;
	if (strcmp(ev, "lost") == 0) {
		d->alive = false;
	} else if (strcmp(ev, "left") == 0) {
		d->alive = false;
		d->end = DASH_RANK_LEFT;
	} else {
		d->alive = ev[0] != '\0' || d->window == w;
	}
	if (d->alive && ended) {
		d->alive = false;
		d->end = DASH_RANK_ENDED;
	}
}

/* Offline ranks at window w (the history up to the time w closed; at the
 * run's last window, everything it recorded): each rank's last window
 * and step, alive, lost, left, or ended with the run; then its step time
 * and drops from its latest of the last few windows. */
static int
source_offline_ranks(dash_source *s, dash_snapshot *snap, dash_job *j,
    int64_t w)
{
	tool_hdb_filter f;
	tool_hdb_result rows;
	uint32_t alive = 0;
	int64_t closed = TOOL_HDB_NONE;

	if (j->world == 0 || j->world > 65536)
		return 0;
	snap->ranks = calloc(j->world, sizeof(*snap->ranks));
	if (snap->ranks == NULL)
		return BELLOWS_ENOMEM;
	snap->n_ranks = j->world;
	for (uint32_t i = 0; i < j->world; i++) {
		snap->ranks[i].rank = i;
		snap->ranks[i].window = DASH_NONE;
		snap->ranks[i].step_ms = NAN;
		snap->ranks[i].seen_ms = DASH_NONE;
	}
	source_filter(&f, j->run);
	f.window_hi = w;
	if (w < snap->window_hi &&
	    tool_hdb_window_closed(s->db, j->run, w, &closed) == 0 &&
	    closed != TOOL_HDB_NONE)
		f.time_hi = closed;
	if (source_ask(s, TOOL_HDB_Q_RANK_STATES, &f, &rows) == 0) {
		for (uint64_t r = 0; r < rows.rows.n_rows; r++) {
			int64_t k = source_int(&rows, r, SC_RANK);

			if (k >= 0 && k < (int64_t)j->world)
				source_rank_state(&rows, r, w, j->ended,
				    &snap->ranks[k]);
		}
	}
	tool_hdb_result_fini(&rows);
	source_filter(&f, j->run);
	f.window_lo = w > 4 ? w - 4 : 0;
	f.window_hi = w;
	if (source_ask(s, TOOL_HDB_Q_TIMINGS_ALL, &f, &rows) == 0) {
		for (uint64_t r = 0; r < rows.rows.n_rows; r++) {
			int64_t k = source_int(&rows, r, SC_RANK);
			dash_rank *d;

			if (k < 0 || k >= (int64_t)j->world)
				continue;
			d = &snap->ranks[k];
			d->step_ms = tool_hdb_real(&rows, r, SC_STEP_MS_MEAN);
			d->drops = (uint64_t)source_int(&rows, r,
			    SC_REPORTS_DROPPED);
		}
	}
	tool_hdb_result_fini(&rows);
	for (uint32_t i = 0; i < j->world; i++)
		alive += snap->ranks[i].alive;
	j->alive = alive;
	return 0;
}

/* Offline events of the run as of window w: those up to the time w
 * closed, like every other view; at the run's last window (the end of
 * the slider) all of them, also those after it closed (the ranks
 * leaving, the run ending). */
static int
source_offline_events(dash_source *s, dash_snapshot *snap, const dash_job *j,
    int64_t w)
{
	tool_hdb_filter f;
	tool_hdb_result rows;
	uint64_t first, n;
	int64_t closed = TOOL_HDB_NONE;

	source_filter(&f, j->run);
	if (w != DASH_NONE && w < snap->window_hi) {
		if (tool_hdb_window_closed(s->db, j->run, w, &closed) != 0)
			return 0;
		/* A window never closed (none recorded): nothing yet. */
		if (closed == TOOL_HDB_NONE)
			return 0;
		f.time_hi = closed;
	}
	if (source_ask(s, TOOL_HDB_Q_EVENTS, &f, &rows) != 0 ||
	    rows.rows.n_rows == 0) {
		tool_hdb_result_fini(&rows);
		return 0;
	}
	first = rows.rows.n_rows > SOURCE_EVENTS
	    ? rows.rows.n_rows - SOURCE_EVENTS
	    : 0;
	n = rows.rows.n_rows - first;
	snap->events = calloc(n, sizeof(*snap->events));
	if (snap->events == NULL) {
		tool_hdb_result_fini(&rows);
		return BELLOWS_ENOMEM;
	}
	snap->n_events = (uint32_t)n;
	for (uint64_t i = 0; i < n; i++) {
		dash_event *e = &snap->events[i];

		source_hms(tool_hdb_text(&rows, first + i, SC_TIME), e->time,
		    sizeof(e->time));
		dash_copy(e->kind, sizeof(e->kind),
		    tool_hdb_text(&rows, first + i, SC_KIND));
		dash_copy(e->job, sizeof(e->job),
		    tool_hdb_text(&rows, first + i, SC_JOB));
		dash_copy(e->text, sizeof(e->text),
		    tool_hdb_text(&rows, first + i, SC_TEXT));
	}
	tool_hdb_result_fini(&rows);
	return 0;
}

/* Offline: the run's window range and the window shown. */
static void
source_offline_window(dash_source *s, dash_snapshot *snap, dash_job *j,
    int64_t w)
{
	tool_hdb_filter f;
	tool_hdb_result rows;

	source_filter(&f, j->run);
	if (source_ask(s, TOOL_HDB_Q_WINDOWS, &f, &rows) == 0 &&
	    rows.rows.n_rows > 0) {
		snap->window_lo = source_int(&rows, 0, SC_WINDOW);
		snap->window_hi = source_int(&rows, rows.rows.n_rows - 1,
		    SC_WINDOW);
	}
	tool_hdb_result_fini(&rows);
	if (snap->window_hi == DASH_NONE)
		return;
	if (w == DASH_NONE || w > snap->window_hi)
		w = snap->window_hi;
	if (w < snap->window_lo)
		w = snap->window_lo;
	snap->window_at = w;
	/* Before its last window closed, an ended run still ran. */
	if (w < snap->window_hi)
		j->ended = false;
	source_job_window(s, j, w);
}

/* Offline: the policies of run j as its newest decision read names them
 * (a decision that changed nothing names none). */
static void
source_offline_policy(const dash_snapshot *snap, dash_job *j)
{
	for (uint32_t i = snap->n_decisions; i > 0; i--) {
		const char *p = snap->decisions[i - 1].policy;

		if (p[0] != '\0') {
			dash_copy(j->policy, sizeof(j->policy), p);
			return;
		}
	}
}

static dash_job *
source_pick(dash_snapshot *snap, const char *job)
{
	for (uint32_t i = 0; i < snap->n_jobs; i++) {
		if (strcmp(snap->jobs[i].name, job) == 0)
			return &snap->jobs[i];
	}
	return snap->n_jobs > 0 && job[0] == '\0' ? &snap->jobs[0] : NULL;
}

int
dash_source_fetch(dash_source *s, const char *job, int64_t window,
    dash_snapshot *ret)
{
	dash_snapshot snap;
	dash_job *j;
	int r = 0;

	memset(&snap, 0, sizeof(snap));
	snap.acc_eta = NAN;
	snap.window_lo = DASH_NONE;
	snap.window_hi = DASH_NONE;
	snap.window_at = DASH_NONE;
	snap.health.live = s->live;
	snap.health.reports_per_s = NAN;
	snap.health.decisions_per_s = NAN;
	snap.health.latency_ms = NAN;
	snap.health.latency_p99_ms = NAN;
	if (s->live) {
		dash_copy(snap.health.where, sizeof(snap.health.where),
		    s->control);
		source_db_open(s);
		source_status(s, &snap);
		source_health(s, &snap);
		dash_copy(snap.health.db, sizeof(snap.health.db), s->db_path);
		dash_copy(snap.health.db_from, sizeof(snap.health.db_from),
		    s->db_from);
	} else {
		dash_copy(snap.health.where, sizeof(snap.health.where),
		    s->db_path != NULL ? s->db_path : "bellows.db");
	}
	if (s->db != NULL && tool_hdb_begin(s->db) != 0) {
		/* Busy for longer than the timeout: try again next time. */
		tool_hdb_close(&s->db);
		dash_copy(s->db_err, sizeof(s->db_err),
		    "history database busy");
	}
	if (s->live)
		r = source_live_jobs(s, &snap);
	else if (s->db != NULL)
		r = source_offline_jobs(s, &snap);
	if (r != 0)
		goto done;
	j = source_pick(&snap, job);
	if (j != NULL) {
		dash_copy(snap.job, sizeof(snap.job), j->name);
		if (s->live) {
			r = source_live_ranks(s, &snap, j);
			if (r == 0)
				r = source_live_events(s, &snap, j->name);
			if (r == 0)
				r = source_layers(s, &snap, j, DASH_NONE);
			if (r == 0)
				source_knobs(s, &snap, j, DASH_NONE);
			if (r == 0)
				r = source_decisions(s, &snap, j, DASH_NONE);
			if (r == 0)
				source_judged(s, &snap, j, DASH_NONE);
		} else {
			source_offline_window(s, &snap, j, window);
			if (snap.window_at != DASH_NONE)
				r = source_offline_ranks(s, &snap, j,
				    snap.window_at);
			if (r == 0)
				r = source_offline_events(s, &snap, j,
				    snap.window_at);
			if (r == 0)
				r = source_layers(s, &snap, j, snap.window_at);
			if (r == 0)
				source_knobs(s, &snap, j, snap.window_at);
			if (r == 0)
				r = source_decisions(s, &snap, j,
				    snap.window_at);
			if (r == 0)
				source_offline_policy(&snap, j);
			if (r == 0)
				source_judged(s, &snap, j, snap.window_at);
		}
	} else if (s->live && s->have_last) {
		r = source_live_events(s, &snap, "");
	}
	if (!s->live)
		snprintf(snap.health.note, sizeof(snap.health.note),
		    "%u run%s recorded; Left/Right move the window",
		    snap.n_jobs, snap.n_jobs == 1 ? "" : "s");
done:
	if (s->db != NULL)
		tool_hdb_end(s->db);
	if (s->live && snap.health.connected && s->db == NULL &&
	    s->db_path != NULL)
		snprintf(snap.health.note, sizeof(snap.health.note),
		    "no history: %.100s", s->db_err);
	if (r != 0) {
		dash_snapshot_fini(&snap);
		return r;
	}
	*ret = snap;
	return 0;
}
