/* test_store - the history database on real files: schema creation and
 * migration, refusal of newer and foreign files, commits before acks,
 * recovery of runs and of a job's policy history, and the failures the
 * daemon must survive: a concurrent writer holding the lock (SQLITE_BUSY),
 * a full disk, a read-only directory, a corrupt file.
 *
 * Each test has a private temporary directory. As root, the full disk is
 * a 512 KiB tmpfs mounted in it and the read-only directory a tmpfs
 * remounted read-only; otherwise the full disk is an injected SQLITE_FULL
 * (store_fault.h) and the read-only directory is chmod 0555 (skipped as
 * root without mount rights). The files are read back with a second
 * SQLite connection, as the `sqlite3` shell would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <zmq.h>

#include <bellows/error.h>

#include "common/clock.h"
#include "history/hist_cols.h"
#include "history/hist_read.h"
#include "policyhost/config.h"
#include "controller/jobs.h"
#include "policyhost/log.h"
#include "controller/store.h"
#include "controller/store_fault.h"
#include "controller/ctl_window.h"

#define N_LAYERS 3
#define MAX_PUB  256
#define WAIT_MS  10000

static const char config_text[] = "daemon:\n"
				  "  apply_lag: 1\n"
				  "  window_timeout_ms: 1000\n"
				  "  rank_timeout_ms: 5000\n"
				  "  heartbeat_ms: 500\n"
				  "store:\n"
				  "  batch_rows: 64\n"
				  "  queue_rows: 1000\n"
				  "jobs:\n"
				  "  - match: \"*\"\n"
				  "    policies:\n"
				  "      - type: accordion\n"
				  "        params: {interval: 2, eta: 0.5}\n";

static const com_layer_info table[N_LAYERS] = {
	{ .name = "conv.weight", .numel = 32, .ndim = 2, .shape = { 8, 4 } },
	{ .name = "conv.bias", .numel = 8, .ndim = 1, .shape = { 8 } },
	{ .name = "fc.weight", .numel = 32, .ndim = 2, .shape = { 4, 8 } },
};

typedef struct fixture {
	char dir[64];              /* private temporary directory */
	char yaml[128];            /* dir/bellows.yaml */
	char db[160];              /* the database under test */
	char mnt[128];             /* dir/mnt, when a tmpfs is mounted there */
	bool mounted;              /* mnt is a mount point */
	void *zctx;                /* ZeroMQ context */
	ctl_config *cfg;           /* the configuration */
	ctl_events *events;        /* ring for store-only tests */
	ctl_store *store;          /* under test */
	ctl_jobs *jobs;            /* for the job-level tests */
	uint64_t durable;          /* highest ticket the store reported */
	uint32_t released;         /* "degraded: stop waiting" calls */
	uint64_t check_seq;        /* seq the durable callback must find */
	bool checked;              /* it found it */
	uint64_t pub_seq[MAX_PUB]; /* seqs published, in order */
	uint32_t n_pub;            /* entries in pub_seq */
	char last_reason[1024];    /* reason of the last decision published */
	bool check_windows;        /* durable: decisions' windows are in */
	uint32_t windows_checked;  /* durable callbacks that looked */
	uint32_t windows_missing;  /* durable decisions without their window */
} fixture;

/* ---- reading the file back -------------------------------------------- */

static sqlite3 *
db_open(const char *path)
{
	sqlite3 *db = NULL;

	assert_int_equal(sqlite3_open_v2(path, &db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
	    SQLITE_OK);
	sqlite3_busy_timeout(db, 2000);
	return db;
}

/* The first column of the first row of `sql` as an integer; -1 if there
 * is no row. */
static int64_t
db_int(const char *path, const char *fmt, ...)
{
	char sql[1024];
	sqlite3 *db = db_open(path);
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_type(st, 0) == SQLITE_NULL
		    ? -2
		    : sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void
db_text(const char *path, char *out, size_t len, const char *sql)
{
	sqlite3 *db = db_open(path);
	sqlite3_stmt *st = NULL;

	out[0] = '\0';
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_text(st, 0) != NULL)
		snprintf(out, len, "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static void
db_exec(const char *path, const char *sql)
{
	sqlite3 *db = db_open(path);
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		fail_msg("%s: %s", sql, err);
	sqlite3_close(db);
}

static bool
db_has(const char *path, const char *type, const char *name)
{
	return db_int(path,
		   "SELECT count(*) FROM sqlite_master WHERE type = '%s' AND "
		   "name = '%s'",
		   type, name) == 1;
}

/* ---- fixture ----------------------------------------------------------- */

static void
on_durable(void *arg, uint64_t ticket)
{
	fixture *f = arg;

	if (ticket == UINT64_MAX) {
		f->released++;
		return;
	}
	if (ticket > f->durable)
		f->durable = ticket;
	if (f->check_seq != 0) {
		/* The ack must follow the commit: a new connection sees the
		 * decision already. */
		f->checked = db_int(f->db,
				 "SELECT count(*) FROM decisions WHERE seq = "
				 "%llu",
				 (unsigned long long)f->check_seq) == 1;
		f->check_seq = 0;
	}
	if (f->check_windows) {
		/* A committed decision implies the window it answers (the
		 * window before its own) is committed too. */
		f->windows_checked++;
		if (db_int(f->db,
			"SELECT count(*) FROM decisions d WHERE d.window > 0 "
			"AND d.source = 'window' AND NOT EXISTS (SELECT 1 FROM "
			"window_info i WHERE i.run_id = d.run_id AND "
			"i.window = d.window - 1)") != 0)
			f->windows_missing++;
	}
}

static void
on_publish(void *arg, const com_msg *m)
{
	fixture *f = arg;

	if (m->type != COM_MSG_DECISION)
		return;
	assert_true(f->n_pub < MAX_PUB);
	f->pub_seq[f->n_pub++] = m->u.decision.seq;
	if (f->check_windows && m->u.decision.window > 0) {
		/* Published once committed: the window it answers is in. */
		f->windows_checked++;
		if (db_int(f->db,
			"SELECT count(*) FROM window_info WHERE window = %llu",
			(unsigned long long)m->u.decision.window - 1) != 1)
			f->windows_missing++;
	}
	snprintf(f->last_reason, sizeof(f->last_reason), "%s",
	    m->u.decision.reason != NULL ? m->u.decision.reason : "");
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	char err[CTL_CONFIG_ERR_MAX];
	FILE *fp;

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-store-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->yaml, sizeof(f->yaml), "%s/bellows.yaml", f->dir);
	snprintf(f->db, sizeof(f->db), "%s/history.db", f->dir);
	snprintf(f->mnt, sizeof(f->mnt), "%s/mnt", f->dir);
	fp = fopen(f->yaml, "w");
	if (fp == NULL || fputs(config_text, fp) < 0 || fclose(fp) != 0)
		return -1;
	if (ctl_config_load(f->yaml, &f->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	if ((f->zctx = zmq_ctx_new()) == NULL ||
	    ctl_events_new(&f->events) != 0)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;
	char cmd[300];

	ctl_store_fault_arm(0, 0);
	ctl_jobs_cancel_resumes(f->jobs);
	ctl_store_close(&f->store, 2000);
	ctl_jobs_destroy(&f->jobs);
	ctl_events_destroy(&f->events);
	ctl_config_destroy(&f->cfg);
	zmq_ctx_term(f->zctx);
	if (f->mounted)
		umount2(f->mnt, MNT_DETACH);
	chmod(f->dir, 0700);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", f->dir);
	free(f);
	return 0;
}

/* Opens the store on f->db with the fixture's configuration and starts
 * it; the ring is the job table's when there is one. */
static void
open_store(fixture *f)
{
	ctl_events *ev = f->jobs != NULL ? ctl_jobs_events(f->jobs) : f->events;

	assert_int_equal(ctl_store_open(f->db, f->zctx, &f->cfg->store, 0x42,
			     ev, &f->store),
	    0);
	ctl_store_set_durable_fn(f->store, on_durable, f);
}

static void
start_store(fixture *f)
{
	assert_int_equal(ctl_store_start(f->store), 0);
}

static com_status_reply
store_status(const fixture *f)
{
	com_status_reply st = { 0 };

	assert_int_equal(ctl_store_status(f->store, &st), 0);
	return st;
}

static bool
store_degraded(const fixture *f, char *why, size_t len)
{
	com_status_reply st = store_status(f);
	bool d = st.store_degraded;

	if (why != NULL)
		snprintf(why, len, "%s", st.store_error ? st.store_error : "");
	free(st.store_error);
	return d;
}

static void
sleep_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Waits until `ticket` is committed, through degradation and retries. */
static void
wait_committed(fixture *f, uint64_t ticket)
{
	uint64_t deadline = com_clock_ms() + WAIT_MS;

	while (ctl_store_wait(f->store, ticket, 50) != 0) {
		if (com_clock_ms() > deadline)
			fail_msg("ticket %llu not committed within %d ms",
			    (unsigned long long)ticket, WAIT_MS);
		sleep_ms(10);
	}
}

/* Waits until the store reports itself degraded. */
static void
wait_degraded(fixture *f)
{
	uint64_t deadline = com_clock_ms() + WAIT_MS;

	for (;;) {
		ctl_store_wait(f->store, UINT64_MAX, 20);
		if (store_degraded(f, NULL, 0))
			return;
		if (com_clock_ms() > deadline)
			fail_msg("the store did not degrade");
	}
}

/* Copies the ring's events into the store and waits for them. */
static void
sync_events(fixture *f)
{
	ctl_events *ev = f->jobs != NULL ? ctl_jobs_events(f->jobs) : f->events;

	ctl_store_sync_events(f->store, ev);
	wait_committed(f, ctl_store_flush(f->store));
}

static int64_t
run_begin(fixture *f, const char *job, uint32_t world)
{
	return ctl_store_run_begin(f->store, job, "", world, table, N_LAYERS,
	    f->cfg, 1, com_clock_wall_ms());
}

/* A decision with levels a, b, c. */
static void
make_decision(com_decision *d, uint64_t seq, double a, double b, double c)
{
	assert_int_equal(com_decision_init(d, "job", N_LAYERS), 0);
	d->seq = seq;
	d->apply_step = 10 * seq;
	d->window = seq - 1;
	d->level[0] = a;
	d->level[1] = b;
	d->level[2] = c;
	d->policy = com_strdup("accordion");
	d->reason = com_strdup("because");
}

static uint64_t
put_decision(fixture *f, int64_t run, uint64_t seq, const com_decision *prev)
{
	com_decision d;
	uint64_t t;

	make_decision(&d, seq, (double)seq, 0, 1);
	t = ctl_store_decision(f->store, run, &d, prev, CTL_STORE_WINDOW,
	    com_clock_wall_ms());
	com_decision_fini(&d);
	return t;
}

/* Window w of a run as the policies saw it, with `n` layers (n >
 * N_LAYERS repeats the table's names, which the store does not check),
 * closed as `closed` says (CTL_STORE_CLOSED_*). */
static void
put_window_closed(fixture *f, int64_t run, uint64_t w, uint32_t n,
    uint64_t wall, uint32_t closed)
{
	bellows_window_layer *layers = calloc(n, sizeof(*layers));
	com_decision in_force;
	bellows_window v = {
		.job = "job",
		.window = w,
		.first_step = 10 * w,
		.last_step = 10 * w + 9,
		.epoch = w / 4,
		.lr = 0.1,
		.lr_next = 0.1,
		.batch_size = 32,
		.lr_scale = 1,
		.world = 2,
		.ranks_reported = 2,
		.step_ms_median = 12.5,
		.compute_ms_median = NAN,
		.comm_ms_median = 2,
		.floats_sent = 100,
		.floats_raw = 400,
		.n_layers = n,
		.layers = layers,
	};

	assert_non_null(layers);
	assert_int_equal(com_decision_init(&in_force, "job", n), 0);
	for (uint32_t l = 0; l < n; l++) {
		layers[l] = (bellows_window_layer){
			.name = table[l % N_LAYERS].name,
			.grad_norm_rank0 = l == 1 ? NAN : 1.0 + (double)w,
			.grad_norm_mean = 0.5 + (double)w,
			.sum_sq = 2,
			.abs_sum = 3,
			.max_abs = 0.25,
			.count = 64,
			.nonzero = 60,
			.nonfinite = 1,
			.momentum_abs_mean = 0.01,
			.level = (double)l,
			.error_bound = 0.001,
		};
		in_force.level[l] = (double)l;
	}
	ctl_store_window(f->store, run, &v, 2, closed, &in_force, wall);
	com_decision_fini(&in_force);
	free(layers);
}

/* Window w, complete and on time. */
static void
put_window(fixture *f, int64_t run, uint64_t w, uint32_t n, uint64_t wall)
{
	put_window_closed(f, run, w, n, wall, CTL_STORE_CLOSED_COMPLETE);
}

/* n policy metrics of window w (metric rows, kept or dropped together). */
static void
put_metrics(fixture *f, int64_t run, uint64_t w, uint32_t n)
{
	com_metric *m = calloc(n, sizeof(*m));

	assert_non_null(m);
	for (uint32_t i = 0; i < n; i++)
		m[i] = (com_metric){ .policy = (char *)"accordion",
			.name = (char *)"norm",
			.layer = (int32_t)i,
			.value = (double)w };
	ctl_store_policy_metrics(f->store, run, w, m, n);
	free(m);
}

/* ---- schema ------------------------------------------------------------- */

static void
assert_current_schema(const char *path)
{
	static const char *const tables[] = { "runs", "layers", "rank_events",
		"window_info", "windows", "timings", "decisions",
		"decision_changes", "events", "policy_files", "comm_samples",
		"policy_metrics" };

	assert_int_equal(db_int(path, "PRAGMA user_version"),
	    CTL_STORE_SCHEMA_VERSION);
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (!db_has(path, "table", tables[i]))
			fail_msg("table %s is missing", tables[i]);
	assert_true(db_has(path, "view", "ranks"));
	assert_true(db_has(path, "index", "window_info_closed"));
	assert_true(db_has(path, "index", "decision_changes_layer"));
	assert_true(db_has(path, "index", "comm_samples_window"));
	assert_true(db_has(path, "index", "policy_metrics_window"));
	assert_int_equal(
	    db_int(path,
		"SELECT count(*) FROM pragma_table_info('windows') "
		"WHERE name IN ('act_steps', 'comm_comp_ms', "
		"'codec_ms')"),
	    3);
	assert_int_equal(db_int(path,
			     "SELECT count(*) FROM "
			     "pragma_table_info('decisions') WHERE name = "
			     "'calibrate_steps'"),
	    1);
	assert_int_equal(db_int(path,
			     "SELECT count(*) FROM pragma_table_info('runs') "
			     "WHERE name = 'recoveries'"),
	    1);
	assert_int_equal(db_int(path,
			     "SELECT count(*) FROM pragma_table_info("
			     "'window_info') WHERE name = 'late'"),
	    1);
	db_text(path, (char[16]){ 0 }, 16, "PRAGMA journal_mode");
}

static void
test_store_creates_the_current_schema_in_an_empty_file(void **state)
{
	fixture *f = *state;
	char mode[16];

	open_store(f);
	assert_false(store_degraded(f, NULL, 0));
	assert_current_schema(f->db);
	db_text(f->db, mode, sizeof(mode), "PRAGMA journal_mode");
	assert_string_equal(mode, "wal");
}

/* STATUS names the file by an absolute path, also when bellowsd was
 * given a relative one: a tool on the machine opens it from anywhere. */
static void
test_store_path_for_status_is_absolute(void **state)
{
	fixture *f = *state;
	char cwd[4096], want[sizeof(f->db)];

	open_store(f);
	assert_string_equal(ctl_store_path(f->store), f->db);
	ctl_store_close(&f->store, 2000);

	/* Relative to the working directory it was opened in. */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s", f->db);
	assert_int_equal(chdir(f->dir), 0);
	snprintf(f->db, sizeof(f->db), "%s", "history.db");
	open_store(f);
	assert_int_equal(chdir(cwd), 0);
	snprintf(f->db, sizeof(f->db), "%s", want);
	assert_string_equal(ctl_store_path(f->store), want);
	/* No history, no file. */
	assert_string_equal(ctl_store_path(NULL), "");
}

/* The mode of `path` (its permission bits), -1 if it does not exist. */
static int
file_mode(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

static void
test_store_creates_the_file_and_its_wal_with_store_mode(void **state)
{
	fixture *f = *state;
	char wal[sizeof(f->db) + 8], shm[sizeof(f->db) + 8];
	mode_t old = umask(0);

	/* A umask that would leave the file world-writable: the mode is
	 * store.mode all the same. */
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	snprintf(shm, sizeof(shm), "%s-shm", f->db);
	f->cfg->store.mode = 0640;
	open_store(f);
	umask(old);
	assert_false(store_degraded(f, NULL, 0));
	assert_int_equal(file_mode(f->db), 0640);
	assert_int_equal(file_mode(wal), 0640);
	assert_true(file_mode(shm) == -1 || file_mode(shm) == 0640);
	ctl_store_close(&f->store, 2000);
	/* The default: owner only, and an existing file keeps its mode. */
	f->cfg->store.mode = 0600;
	open_store(f);
	assert_int_equal(file_mode(f->db), 0640);
	ctl_store_close(&f->store, 2000);
	unlink(f->db);
	unlink(wal);
	unlink(shm);
	open_store(f);
	assert_int_equal(file_mode(f->db), 0600);
	assert_int_equal(file_mode(wal), 0600);
}

/* Version 1 exactly as it was first released: the fixture a migration
 * starts from. */
static const char schema_v1[] =
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, job TEXT NOT NULL,"
    " world INTEGER NOT NULL, n_layers INTEGER NOT NULL,"
    " started_wall_ms INTEGER NOT NULL, ended_wall_ms INTEGER,"
    " instance TEXT NOT NULL, config_hash TEXT NOT NULL,"
    " first_seq INTEGER NOT NULL);"
    "CREATE INDEX runs_job ON runs (job, id);"
    "CREATE TABLE layers (run_id INTEGER NOT NULL, idx INTEGER NOT NULL,"
    " name TEXT NOT NULL, numel INTEGER NOT NULL, ndim INTEGER NOT NULL,"
    " shape TEXT NOT NULL, PRIMARY KEY (run_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE rank_events (run_id INTEGER NOT NULL,"
    " rank INTEGER NOT NULL, wall_ms INTEGER NOT NULL, kind TEXT NOT NULL,"
    " step INTEGER NOT NULL, incarnation TEXT);"
    "CREATE INDEX rank_events_rank ON rank_events (run_id, rank, wall_ms);"
    "CREATE VIEW ranks AS SELECT run_id, rank,"
    " min(wall_ms) AS first_wall_ms, max(wall_ms) AS last_wall_ms,"
    " sum(kind IN ('joined', 'rejoined')) AS joins,"
    " sum(kind = 'lost') AS losses,"
    " (SELECT e.kind FROM rank_events e WHERE e.run_id = r.run_id"
    "  AND e.rank = r.rank ORDER BY e.wall_ms DESC, e.rowid DESC LIMIT 1)"
    " AS last_kind FROM rank_events r GROUP BY run_id, rank;"
    "CREATE TABLE window_info (run_id INTEGER NOT NULL,"
    " window INTEGER NOT NULL, first_step INTEGER NOT NULL,"
    " last_step INTEGER NOT NULL, epoch INTEGER NOT NULL, lr REAL,"
    " lr_next REAL, batch_size INTEGER NOT NULL, lr_scale REAL,"
    " world INTEGER NOT NULL, ranks_reported INTEGER NOT NULL,"
    " ranks_expected INTEGER NOT NULL, complete INTEGER NOT NULL,"
    " step_ms_median REAL, compute_ms_median REAL, comm_ms_median REAL,"
    " floats_sent INTEGER NOT NULL, floats_raw INTEGER NOT NULL,"
    " closed_wall_ms INTEGER NOT NULL, state_batch_size INTEGER NOT NULL,"
    " state_size_threshold INTEGER NOT NULL,"
    " state_compression_off INTEGER NOT NULL,"
    " PRIMARY KEY (run_id, window)) WITHOUT ROWID;"
    "CREATE TABLE windows (run_id INTEGER NOT NULL, window INTEGER NOT NULL,"
    " layer INTEGER NOT NULL, grad_norm_rank0 REAL, grad_norm_mean REAL,"
    " sum_sq REAL, abs_sum REAL, max_abs REAL, count INTEGER NOT NULL,"
    " nonzero INTEGER NOT NULL, nonfinite INTEGER NOT NULL,"
    " momentum_abs_mean REAL, level REAL, error_bound REAL,"
    " PRIMARY KEY (run_id, window, layer)) WITHOUT ROWID;"
    "CREATE TABLE timings (run_id INTEGER NOT NULL, window INTEGER NOT NULL,"
    " rank INTEGER NOT NULL, steps INTEGER NOT NULL, step_ms REAL,"
    " compute_ms REAL, comm_ms REAL, step_ms_max REAL,"
    " bytes_sent INTEGER NOT NULL, floats_sent INTEGER NOT NULL,"
    " floats_raw INTEGER NOT NULL, decision_misses INTEGER NOT NULL,"
    " reports_dropped INTEGER NOT NULL,"
    " PRIMARY KEY (run_id, window, rank)) WITHOUT ROWID;"
    "CREATE TABLE decisions (run_id INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " apply_step INTEGER NOT NULL, window INTEGER NOT NULL,"
    " wall_ms INTEGER NOT NULL, source TEXT NOT NULL, policy TEXT NOT NULL,"
    " reason TEXT NOT NULL, n_layers INTEGER NOT NULL,"
    " levels BLOB NOT NULL, error_bounds BLOB NOT NULL,"
    " batch_size INTEGER NOT NULL, lr_scale REAL,"
    " size_threshold INTEGER NOT NULL, compression_off INTEGER NOT NULL,"
    " codec_table BLOB, PRIMARY KEY (run_id, seq));"
    "CREATE TABLE decision_changes (run_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, knob TEXT NOT NULL, layer INTEGER, old REAL,"
    " new REAL);"
    "CREATE INDEX decision_changes_seq ON decision_changes (run_id, seq);"
    "CREATE INDEX decision_changes_layer ON decision_changes"
    " (run_id, layer, seq);"
    "CREATE TABLE events (id INTEGER PRIMARY KEY, wall_ms INTEGER NOT NULL,"
    " run_id INTEGER, job TEXT, kind TEXT NOT NULL, text TEXT NOT NULL,"
    " policy_hash TEXT);"
    "CREATE INDEX events_run ON events (run_id, id);"
    "CREATE INDEX events_kind ON events (kind, wall_ms);"
    "CREATE TABLE policy_files (hash TEXT PRIMARY KEY, path TEXT NOT NULL,"
    " text TEXT NOT NULL, first_seen_wall_ms INTEGER NOT NULL);"
    "INSERT INTO runs VALUES (7, 'old', 2, 3, 1000, NULL, "
    " '0000000000000001', 'abc', 1);"
    "PRAGMA user_version = 1;";

static void
test_store_migrates_a_version_1_file_keeping_its_rows(void **state)
{
	fixture *f = *state;
	char job[16];

	db_exec(f->db, schema_v1);
	assert_int_equal(db_int(f->db, "PRAGMA user_version"), 1);
	assert_false(db_has(f->db, "index", "window_info_closed"));
	open_store(f);
	assert_false(store_degraded(f, NULL, 0));
	assert_current_schema(f->db);
	db_text(f->db, job, sizeof(job), "SELECT job FROM runs WHERE id = 7");
	assert_string_equal(job, "old");
	assert_int_equal(db_int(f->db,
			     "SELECT recoveries FROM runs WHERE id = 7"),
	    0);
	/* New runs continue after the ids the file holds. */
	start_store(f);
	assert_int_equal(run_begin(f, "job", 2), 8);
}

/* A window recorded late (after a restart of bellowsd) is marked so, apart
 * from whether it was complete, and keeps its mark when a resume moves it
 * to superseded_window_info (same columns, same order). */
static void
test_store_marks_a_window_recorded_late(void **state)
{
	fixture *f = *state;
	char rows[64];
	int64_t run;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	put_window(f, run, 0, N_LAYERS, 10);
	put_window_closed(f, run, 1, N_LAYERS, 11,
	    CTL_STORE_CLOSED_COMPLETE | CTL_STORE_CLOSED_LATE);
	put_window_closed(f, run, 2, N_LAYERS, 12, CTL_STORE_CLOSED_LATE);
	wait_committed(f, ctl_store_flush(f->store));
	assert_false(store_degraded(f, NULL, 0));
	/* window:complete:late */
	db_text(f->db, rows, sizeof(rows),
	    "SELECT group_concat(window || ':' || complete || ':' || late, "
	    "' ') FROM (SELECT * FROM window_info ORDER BY window)");
	assert_string_equal(rows, "0:1:0 1:1:1 2:0:1");
	ctl_store_run_resumed(f->store, run, 1, "again");
	wait_committed(f, ctl_store_flush(f->store));
	db_text(f->db, rows, sizeof(rows),
	    "SELECT group_concat(window || ':' || complete || ':' || late, "
	    "' ') FROM (SELECT * FROM superseded_window_info ORDER BY "
	    "window)");
	assert_string_equal(rows, "1:1:1 2:0:1");
}

/* A file written before some statistics were in the statistics table:
 * opening it adds their columns (to each table and its superseded_
 * twin, in the same order), and the store then writes and resumes into
 * them. */
static void
test_store_adds_the_columns_of_new_statistics_to_an_old_file(void **state)
{
	fixture *f = *state;
	static const char *const twins[][2] = {
		{ "windows", "superseded_windows" },
		{ "window_info", "superseded_window_info" },
		{ "timings", "superseded_timings" },
	};
	char a[2048], b[2048];
	int64_t run;
	com_timings t = { .steps = 10, .mem_host_used = 4096 };

	open_store(f);
	start_store(f);
	ctl_store_close(&f->store, 2000);
	/* As if codec_ms, act_saved_bytes and mem_host_used were new. */
	db_exec(f->db,
	    "ALTER TABLE windows DROP COLUMN codec_ms;"
	    "ALTER TABLE superseded_windows DROP COLUMN codec_ms;"
	    "ALTER TABLE window_info DROP COLUMN act_saved_bytes;"
	    "ALTER TABLE superseded_window_info DROP COLUMN act_saved_bytes;"
	    "ALTER TABLE timings DROP COLUMN mem_host_used;"
	    "ALTER TABLE superseded_timings DROP COLUMN mem_host_used;");
	assert_int_equal(
	    db_int(f->db,
		"SELECT count(*) FROM pragma_table_info('windows') "
		"WHERE name = 'codec_ms'"),
	    0);

	open_store(f);
	assert_false(store_degraded(f, NULL, 0));
	assert_current_schema(f->db);
	/* The columns SELECT * gives, generated ones included (a resume
	 * copies rows so). */
	for (size_t i = 0; i < 3; i++) {
		char sql[256];

		snprintf(sql, sizeof(sql),
		    "SELECT group_concat(name, ',') FROM (SELECT name FROM "
		    "pragma_table_xinfo('%s') ORDER BY cid)",
		    twins[i][0]);
		db_text(f->db, a, sizeof(a), sql);
		snprintf(sql, sizeof(sql),
		    "SELECT group_concat(name, ',') FROM (SELECT name FROM "
		    "pragma_table_xinfo('%s') WHERE name != 'resume' ORDER BY "
		    "cid)",
		    twins[i][1]);
		db_text(f->db, b, sizeof(b), sql);
		assert_string_equal(a, b);
	}
	assert_non_null(strstr(a, "mem_host_used"));
	assert_int_equal(
	    db_int(f->db,
		"SELECT count(*) FROM pragma_table_info('windows') "
		"WHERE name = 'codec_ms'"),
	    1);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM "
			     "pragma_table_info('window_info') WHERE name = "
			     "'act_saved_bytes'"),
	    1);

	start_store(f);
	run = run_begin(f, "job", 2);
	put_window(f, run, 0, N_LAYERS, 10);
	put_window(f, run, 1, N_LAYERS, 11);
	ctl_store_timing(f->store, run, 1, 0, &t);
	wait_committed(f, ctl_store_flush(f->store));
	assert_int_equal(db_int(f->db,
			     "SELECT mem_host_used FROM timings WHERE window = "
			     "1"),
	    4096);
	ctl_store_run_resumed(f->store, run, 1, "again");
	wait_committed(f, ctl_store_flush(f->store));
	assert_false(store_degraded(f, NULL, 0));
	assert_int_equal(db_int(f->db,
			     "SELECT mem_host_used FROM superseded_timings"),
	    4096);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM superseded_windows"),
	    N_LAYERS);
}

/* Sets the field of every column of `t` in the struct at `base` to a
 * value of its own (`seed` + the column's index), as its type holds it. */
static void
set_stat_fields(hist_table t, void *base, uint32_t seed)
{
	uint32_t n;
	const hist_col *hc = hist_cols(t, &n);

	for (uint32_t c = 0; c < n; c++) {
		char *p = (char *)base + hc[c].offset;
		uint32_t u32 = seed + c;
		uint64_t u64 = seed + c;
		double d = (double)(seed + c);

		if (hc[c].vtype == BELLOWS_STAT_TYPE_U32)
			memcpy(p, &u32, sizeof(u32));
		else if (hc[c].vtype == BELLOWS_STAT_TYPE_U64)
			memcpy(p, &u64, sizeof(u64));
		else
			memcpy(p, &d, sizeof(d));
	}
}

/* Checks that every column of `t` reads back as set_stat_fields set it. */
static void
check_stat_fields(hist_table t, const void *base, uint32_t seed)
{
	uint32_t n;
	const hist_col *hc = hist_cols(t, &n);

	for (uint32_t c = 0; c < n; c++) {
		const char *p = (const char *)base + hc[c].offset;
		uint32_t u32;
		uint64_t u64;
		double d;

		if (hc[c].vtype == BELLOWS_STAT_TYPE_U32) {
			memcpy(&u32, p, sizeof(u32));
			d = u32;
		} else if (hc[c].vtype == BELLOWS_STAT_TYPE_U64) {
			memcpy(&u64, p, sizeof(u64));
			d = (double)u64;
		} else {
			memcpy(&d, p, sizeof(d));
		}
		if (d != (double)(seed + c))
			fail_msg("%s.%s read back %g, not %u",
			    hist_table_name(t), hc[c].name, d, seed + c);
	}
}

/* Every statistic column the statistics table names is written by name
 * and read back by the history reader into the field it came from:
 * a statistic added to the table round-trips without an edit here. */
static void
test_store_round_trips_every_statistic_of_the_table_by_name(void **state)
{
	fixture *f = *state;
	bellows_window_layer layers[N_LAYERS] = { 0 };
	bellows_window v = { .job = "job",
		.window = 0,
		.last_step = 9,
		.world = 2,
		.ranks_reported = 2,
		.n_layers = N_LAYERS,
		.layers = layers };
	com_timings t = { 0 };
	com_decision in_force;
	com_layer_info info[N_LAYERS];
	hist_windows *c = NULL;
	bellows_window got;
	hist_state st;
	uint32_t rows, n;
	const hist_col *hc;
	sqlite3 *db;
	sqlite3_stmt *ts = NULL;
	char err[256];
	int64_t run;
	uint32_t n_arr;
	const hist_array *ha = hist_arrays(&n_arr);
	uint64_t *arrays[COM_N_LARRAYS + 1] = { 0 };

	memcpy(info, table, sizeof(info));
	assert_int_equal(com_decision_init(&in_force, "job", N_LAYERS), 0);
	set_stat_fields(HIST_WINDOW_INFO, &v, 100);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		layers[l].name = table[l].name;
		layers[l].level = 1;
		set_stat_fields(HIST_WINDOWS, &layers[l], 200 + 50 * l);
	}
	set_stat_fields(HIST_TIMINGS, &t, 400);
	/* Layer 0 carries every array statistic, layer 1 none. */
	for (uint32_t k = 0; k < n_arr; k++) {
		arrays[k] = calloc(ha[k].arr->len, sizeof(uint64_t));
		assert_non_null(arrays[k]);
		for (uint32_t i = 0; i < ha[k].arr->len; i++)
			arrays[k][i] = i == 1 ? UINT64_MAX - 1 : 1000 * k + i;
		hist_array_set(&ha[k], &layers[0], arrays[k]);
	}
	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	ctl_store_window(f->store, run, &v, 2, CTL_STORE_CLOSED_COMPLETE,
	    &in_force, 1);
	/* The store keeps its own copy: the window's arrays may go. */
	for (uint32_t k = 0; k < n_arr; k++) {
		memset(arrays[k], 0xee, ha[k].arr->len * sizeof(uint64_t));
	}
	ctl_store_timing(f->store, run, 0, 1, &t);
	wait_committed(f, ctl_store_flush(f->store));
	ctl_store_close(&f->store, 2000);
	com_decision_fini(&in_force);

	db = db_open(f->db);
	assert_int_equal(hist_windows_open(db, run, UINT64_MAX, info, N_LAYERS,
			     &c, err, sizeof(err)),
	    0);
	assert_int_equal(hist_windows_next(c, &got, &st, &rows, err,
			     sizeof(err)),
	    1);
	assert_int_equal(rows, N_LAYERS);
	check_stat_fields(HIST_WINDOW_INFO, &got, 100);
	for (uint32_t k = 0; k < n_arr; k++) {
		uint32_t len;
		const uint64_t *x = hist_array_get(&ha[k], &got.layers[0],
		    &len);

		assert_non_null(x);
		assert_int_equal(len, ha[k].arr->len);
		for (uint32_t i = 0; i < len; i++)
			assert_int_equal(x[i],
			    i == 1 ? UINT64_MAX - 1 : 1000 * k + i);
		assert_null(hist_array_get(&ha[k], &got.layers[1], &len));
		assert_int_equal(len, 0);
		free(arrays[k]);
	}
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		check_stat_fields(HIST_WINDOWS, &got.layers[l], 200 + 50 * l);
		assert_string_equal(got.layers[l].name, table[l].name);
		assert_true(got.layers[l].level == 1);
	}
	assert_int_equal(hist_windows_next(c, &got, &st, &rows, err,
			     sizeof(err)),
	    0);
	hist_windows_close(&c);

	/* timings has no reader of its own: its columns by name. */
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT * FROM timings", -1,
			     &ts, NULL),
	    SQLITE_OK);
	assert_int_equal(sqlite3_step(ts), SQLITE_ROW);
	memset(&t, 0, sizeof(t));
	hc = hist_cols(HIST_TIMINGS, &n);
	for (uint32_t k = 0; k < n; k++)
		hist_col_read(ts, hist_col_index(ts, hc[k].name), &hc[k], &t);
	check_stat_fields(HIST_TIMINGS, &t, 400);
	sqlite3_finalize(ts);
	/* A BLOB of little-endian uint64: bin 1 is UINT64_MAX - 1. */
	if (n_arr > 0) {
		char sql[256];

		snprintf(sql, sizeof(sql),
		    "SELECT hex(substr(%s, 9, 8)) || ':' || length(%s) FROM "
		    "windows WHERE layer = 0",
		    ha[0].name, ha[0].name);
		assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &ts, NULL),
		    SQLITE_OK);
		assert_int_equal(sqlite3_step(ts), SQLITE_ROW);
		snprintf(err, sizeof(err), "FEFFFFFFFFFFFFFF:%u",
		    8 * ha[0].arr->len);
		assert_string_equal((const char *)sqlite3_column_text(ts, 0),
		    err);
		sqlite3_finalize(ts);
	}
	sqlite3_close(db);
}

/* The history's columns land where the window puts their values: the
 * history library's offsets (hist_cols.h) and the aggregation's
 * (window.h) are made from the same table and must agree. */
static void
test_store_history_columns_are_where_the_window_puts_them(void **state)
{
	uint32_t n;
	const hist_col *hc;

	(void)state;
	hc = hist_cols(HIST_WINDOWS, &n);
	assert_true(n > 0);
	for (uint32_t c = 0; c < n; c++) {
		uint32_t i = (uint32_t)(hc[c].stat - com_layer_stat_table);
		int col = strcmp(hc[c].name, hc[c].stat->wcol) == 0 ? 0 : 1;

		if (ctl_window_layer_col(i, col) != hc[c].offset)
			fail_msg("windows.%s", hc[c].name);
	}
	hc = hist_cols(HIST_WINDOW_INFO, &n);
	assert_true(n > 0);
	for (uint32_t c = 0; c < n; c++) {
		uint32_t i = (uint32_t)(hc[c].stat - com_timing_stat_table);

		if (ctl_window_timing_col(i) != hc[c].offset)
			fail_msg("window_info.%s", hc[c].name);
	}
}

/* Version 2 as it was released: version 1 and its one migration, with
 * rows in every table a run fills, so that version 3's migration shows
 * it keeps them and adds columns that read as "not measured". */
static const char schema_v2_tail[] =
    "ALTER TABLE runs ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;"
    "CREATE INDEX window_info_closed ON window_info (closed_wall_ms);"
    "INSERT INTO layers VALUES (7, 0, 'conv.weight', 32, 2, '8x4');"
    "INSERT INTO layers VALUES (7, 1, 'conv.bias', 8, 1, '8');"
    "INSERT INTO layers VALUES (7, 2, 'fc.weight', 32, 2, '4x8');"
    "INSERT INTO window_info VALUES (7, 0, 0, 9, 0, 0.1, 0.1, 32, 1, 2, 2,"
    " 2, 1, 12.5, 10, 2, 100, 400, 1000, 0, 4096, 0);"
    "INSERT INTO windows VALUES (7, 0, 0, 1.5, 1.25, 2, 3, 0.25, 64, 60,"
    " 0, 0.01, 2, 0.001);"
    "INSERT INTO windows VALUES (7, 0, 1, 1.5, 1.25, 2, 3, 0.25, 64, 60,"
    " 0, 0.01, 0, 0);"
    "INSERT INTO windows VALUES (7, 0, 2, 1.5, 1.25, 2, 3, 0.25, 64, 60,"
    " 0, 0.01, 1, 0);"
    "INSERT INTO timings VALUES (7, 0, 1, 10, 120, 100, 20, 15, 4096,"
    " 1024, 4096, 0, 0);"
    "INSERT INTO decisions VALUES (7, 1, 0, 0, 1000, 'initial', 'a', 'r',"
    " 3, zeroblob(24), zeroblob(24), 0, 1, 4096, 0, NULL);"
    "INSERT INTO rank_events VALUES (7, 0, 1000, 'joined', 0, NULL);"
    "PRAGMA user_version = 2;";

typedef struct v2_window {
	uint32_t windows;   /* windows recovered */
	bellows_window w;   /* the last one (layers and comm not kept) */
	double comm_raw;    /* its layer 0's comm_raw_ms */
	uint64_t act;       /* its layer 0's act_steps */
	uint64_t threshold; /* size threshold shown */
	uint64_t calibrate; /* calibrate_steps of the state in force */
} v2_window;

static int
v2_run(void *arg, const ctl_store_run *run, void **ret_ctx)
{
	assert_int_equal(run->decisions[run->n_decisions - 1].calibrate_steps,
	    0);
	*ret_ctx = arg;
	return 0;
}

static bool
v2_win(void *arg, void *ctx, bellows_window *w, const com_decision *in_force)
{
	v2_window *v = ctx;

	(void)arg;
	v->windows++;
	v->w = *w;
	v->comm_raw = w->layers[0].comm_raw_ms;
	v->act = w->layers[0].act_steps;
	v->threshold = w->size_threshold;
	v->calibrate = in_force->calibrate_steps;
	return true;
}

static void
v2_end(void *arg, void *ctx, uint64_t n)
{
	(void)arg;
	(void)ctx;
	(void)n;
}

static void
test_store_migrates_a_version_2_file_keeping_its_rows(void **state)
{
	fixture *f = *state;
	static const ctl_store_recover_ops ops = { v2_run, v2_win, v2_end };
	char sql[sizeof(schema_v1) + sizeof(schema_v2_tail)];
	v2_window v = { 0 };

	/* schema_v1 ends by setting version 1: the tail sets 2. */
	snprintf(sql, sizeof(sql), "%s%s", schema_v1, schema_v2_tail);
	db_exec(f->db, sql);
	assert_int_equal(db_int(f->db, "PRAGMA user_version"), 2);
	assert_false(db_has(f->db, "table", "comm_samples"));
	open_store(f);
	assert_false(store_degraded(f, NULL, 0));
	assert_current_schema(f->db);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM windows"), 3);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM timings"), 1);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM decisions"), 1);
	/* Old rows read as "not measured": 0 counts, NULL times. */
	assert_int_equal(db_int(f->db,
			     "SELECT sum(act_steps) + sum(comm_raw_n) FROM "
			     "windows"),
	    0);
	assert_int_equal(db_int(f->db,
			     "SELECT comm_raw_ms FROM windows WHERE layer = 0"),
	    -2);
	assert_int_equal(db_int(f->db,
			     "SELECT mem_device_used + state_calibrate_steps "
			     "FROM window_info"),
	    0);
	assert_int_equal(db_int(f->db,
			     "SELECT backward_ms + mem_host_used FROM timings"),
	    0);
	assert_int_equal(db_int(f->db, "SELECT calibrate_steps FROM decisions"),
	    0);
	/* And the recorded window comes back whole, its new fields empty. */
	assert_int_equal(ctl_store_recover(f->store, 32, &ops, &v), 1);
	assert_int_equal(v.windows, 1);
	assert_true(isnan(v.comm_raw));
	assert_int_equal(v.act, 0);
	assert_int_equal(v.threshold, 4096);
	assert_int_equal(v.calibrate, 0);
	assert_int_equal(v.w.calibrate_until, 0);
	assert_int_equal(v.w.n_comm, 0);
	assert_true(v.w.backward_ms_median == 0);
	/* New rows go in after the old ones. */
	start_store(f);
	assert_int_equal(run_begin(f, "job", 2), 8);
}

static void
test_store_refuses_a_newer_schema_with_a_clear_message(void **state)
{
	fixture *f = *state;
	char why[400], sql[80], want[120];

	snprintf(sql, sizeof(sql),
	    "CREATE TABLE future (x); PRAGMA user_version = %d;",
	    CTL_STORE_SCHEMA_VERSION + 1);
	db_exec(f->db, sql);
	open_store(f);
	assert_true(store_degraded(f, why, sizeof(why)));
	snprintf(want, sizeof(want),
	    "has schema version %d; this bellowsd understands up to %d: not "
	    "writing to it",
	    CTL_STORE_SCHEMA_VERSION + 1, CTL_STORE_SCHEMA_VERSION);
	if (strstr(why, want) == NULL)
		fail_msg("unexpected message '%s'", why);
	assert_false(ctl_store_waits(f->store));
	/* Nothing was written to it, and nothing to recover. */
	assert_int_equal(db_int(f->db, "PRAGMA user_version"),
	    CTL_STORE_SCHEMA_VERSION + 1);
	assert_false(db_has(f->db, "table", "runs"));
	assert_int_equal(ctl_store_recover(f->store, 32, NULL, NULL), 0);
}

static void
test_store_refuses_a_file_that_is_not_a_bellows_history(void **state)
{
	fixture *f = *state;
	char why[400];

	db_exec(f->db, "CREATE TABLE photos (id INTEGER);");
	open_store(f);
	assert_true(store_degraded(f, why, sizeof(why)));
	assert_non_null(strstr(why, "not a bellows history"));
	assert_false(db_has(f->db, "table", "runs"));
}

static void
test_store_runs_without_history_when_the_file_is_corrupt(void **state)
{
	fixture *f = *state;
	char junk[8192], why[400];
	uint64_t t;
	int64_t run;
	FILE *fp = fopen(f->db, "w");

	memset(junk, 'x', sizeof(junk));
	assert_non_null(fp);
	assert_int_equal(fwrite(junk, 1, sizeof(junk), fp), sizeof(junk));
	assert_int_equal(fclose(fp), 0);
	open_store(f);
	assert_true(store_degraded(f, why, sizeof(why)));
	assert_non_null(strstr(why, "not a database"));
	start_store(f);
	/* Still accepts what the daemon records, without waiting. */
	run = run_begin(f, "job", 2);
	assert_true(run > 0);
	t = put_decision(f, run, 1, NULL);
	assert_int_equal(ctl_store_wait(f->store, t, 200), BELLOWS_EIO);
	/* The operator moves the file away: the retry starts a new one and
	 * writes what was kept. */
	assert_int_equal(unlink(f->db), 0);
	wait_committed(f, t);
	assert_false(store_degraded(f, NULL, 0));
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM decisions"), 1);
	sync_events(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM events WHERE kind = "
			     "'store_degraded' AND text LIKE '%%not a "
			     "database%%'"),
	    1);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM events WHERE kind = "
			     "'store_recovered'"),
	    1);
}

/* ---- writing --------------------------------------------------------------
 */

static void
test_store_acknowledges_a_decision_only_after_its_commit(void **state)
{
	fixture *f = *state;
	int64_t run;
	uint64_t t;

	open_store(f);
	start_store(f);
	assert_true(ctl_store_waits(f->store));
	run = run_begin(f, "job", 2);
	f->check_seq = 1;
	t = put_decision(f, run, 1, NULL);
	assert_true(t > 0);
	assert_int_equal(ctl_store_wait(f->store, t, WAIT_MS), 0);
	assert_true(f->checked);
	assert_true(f->durable >= t);
	assert_int_equal(f->released, 0);
}

static void
test_store_records_runs_layers_windows_and_what_changed(void **state)
{
	fixture *f = *state;
	com_decision d1, d2;
	char text[64];
	int64_t run;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	ctl_store_rank_event(f->store, run, 0, CTL_STORE_RANK_JOINED, 0,
	    0xabcdef, 1000);
	ctl_store_rank_event(f->store, run, 1, CTL_STORE_RANK_JOINED, 0, 7,
	    1001);
	ctl_store_rank_event(f->store, run, 1, CTL_STORE_RANK_LOST, 40, 0,
	    2000);
	make_decision(&d1, 1, 2, 0, 2);
	make_decision(&d2, 2, 1, 0, 2);
	d2.batch_size = 64;
	ctl_store_decision(f->store, run, &d1, NULL, CTL_STORE_INITIAL, 5);
	put_window(f, run, 0, N_LAYERS, 6);
	for (uint32_t r = 0; r < 70; r++)
		ctl_store_timing(f->store, run, 0, r,
		    &(com_timings){ .steps = 10,
			.step_ms = 1200,
			.bytes_sent = 99 + r });
	wait_committed(f,
	    ctl_store_decision(f->store, run, &d2, &d1, CTL_STORE_WINDOW, 7));
	com_decision_fini(&d1);
	com_decision_fini(&d2);

	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(shape, ',') FROM layers");
	assert_string_equal(text, "8x4,8,4x8");
	db_text(f->db, text, sizeof(text),
	    "SELECT last_kind || ':' || joins || ':' || losses FROM ranks "
	    "WHERE rank = 1");
	assert_string_equal(text, "lost:1:1");
	db_text(f->db, text, sizeof(text),
	    "SELECT incarnation FROM rank_events WHERE rank = 0");
	assert_string_equal(text, "0000000000abcdef");
	/* NaN is NULL. */
	assert_int_equal(db_int(f->db,
			     "SELECT grad_norm_rank0 FROM windows WHERE "
			     "layer = 1"),
	    -2);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM windows WHERE window = 0"),
	    N_LAYERS);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) * 10000 + sum(bytes_sent - rank) "
			     "FROM timings"),
	    70 * 10000 + 70 * 99);
	/* The first decision against the blank state (no old), the second
	 * against the first. */
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(knob || layer || ':' || ifnull(old, '-') || "
	    "'>' || new, ' ') FROM (SELECT * FROM decision_changes WHERE seq "
	    "= 1 ORDER BY rowid)");
	assert_string_equal(text, "level0:->2.0 level2:->2.0");
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(knob || ifnull(layer, '') || ':' || old || "
	    "'>' || new, ' ') FROM (SELECT * FROM decision_changes WHERE seq "
	    "= 2 ORDER BY rowid)");
	assert_string_equal(text, "level0:2.0>1.0 batch_size:0.0>64.0");
	db_text(f->db, text, sizeof(text),
	    "SELECT source || ':' || hex(levels) FROM decisions WHERE seq = 1");
	assert_string_equal(text,
	    "initial:"
	    "0000000000000040"
	    "0000000000000000"
	    "0000000000000040");
}

static void
test_store_records_configurations_and_events_with_their_hash(void **state)
{
	fixture *f = *state;
	char hash[CTL_STORE_HASH_LEN], text[64];

	open_store(f);
	start_store(f);
	ctl_store_config(f->store, f->cfg);
	ctl_store_config(f->store, f->cfg); /* the same text: one row */
	ctl_events_add(f->events, "reload_ok", NULL, "reloaded");
	ctl_events_add(f->events, "rank_lost", "job", "rank 1 lost");
	sync_events(f);
	ctl_store_hash(f->cfg->text, f->cfg->text_len, hash);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM policy_files"), 1);
	db_text(f->db, text, sizeof(text), "SELECT hash FROM policy_files");
	assert_string_equal(text, hash);
	db_text(f->db, text, sizeof(text),
	    "SELECT policy_hash FROM events WHERE kind = 'reload_ok'");
	assert_string_equal(text, hash);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM events WHERE kind = "
			     "'rank_lost' AND job = 'job' AND policy_hash IS "
			     "NULL"),
	    1);
	/* FNV-1a 64 of "a", the published test vector. */
	ctl_store_hash("a", 1, hash);
	assert_string_equal(hash, "af63dc4c8601ec8c");
}

/* ---- failures -------------------------------------------------------------
 */

static void
test_store_degrades_on_a_locked_file_and_writes_everything_after(void **state)
{
	fixture *f = *state;
	sqlite3 *other;
	char why[400];
	int64_t run;
	uint64_t t1, t2;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	wait_committed(f, put_decision(f, run, 1, NULL));
	/* Another writer holds the write lock. */
	other = db_open(f->db);
	assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL,
			     NULL),
	    SQLITE_OK);
	t1 = put_decision(f, run, 2, NULL);
	assert_int_equal(ctl_store_wait(f->store, t1, WAIT_MS), BELLOWS_EIO);
	assert_true(store_degraded(f, why, sizeof(why)));
	assert_non_null(strstr(why, "locked"));
	assert_int_equal(f->released, 1);
	assert_false(ctl_store_waits(f->store));
	/* Decisions keep coming while degraded; none is lost. */
	t2 = put_decision(f, run, 3, NULL);
	assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(other);
	wait_committed(f, t2);
	assert_false(store_degraded(f, NULL, 0));
	assert_true(ctl_store_waits(f->store));
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) || max(seq) FROM decisions"),
	    33);
	sync_events(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM events WHERE kind = "
			     "'store_degraded' AND text LIKE '%%locked%%'"),
	    1);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM events WHERE kind = "
			     "'store_recovered'"),
	    1);
}

static void
test_store_stops_holding_decisions_when_commits_lag(void **state)
{
	fixture *f = *state;
	char why[400];
	int64_t run;
	uint64_t t;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	t = put_decision(f, run, 1, NULL);
	/* Its acknowledgement has not been read: as far as the loop knows,
	 * the commit is late. */
	ctl_store_tick(f->store, com_clock_ms() + 100);
	assert_int_equal(f->released, 0);
	ctl_store_tick(f->store, com_clock_ms() + 300);
	assert_int_equal(f->released, 1);
	assert_true(store_degraded(f, why, sizeof(why)));
	assert_non_null(strstr(why, "no commit for"));
	assert_false(ctl_store_waits(f->store));
	/* It catches up: decisions wait for their commit again. */
	wait_committed(f, t);
	assert_false(store_degraded(f, NULL, 0));
	assert_true(ctl_store_waits(f->store));
	sync_events(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM events WHERE kind = "
			     "'store_recovered' AND text LIKE 'commits caught "
			     "up%%'"),
	    1);
}

/* Reads the writer's messages until it has said ticket's decisions are
 * committed. */
static void
wait_durable(fixture *f, uint64_t ticket)
{
	uint64_t deadline = com_clock_ms() + WAIT_MS;

	while (f->durable < ticket) {
		ctl_store_wait(f->store, UINT64_MAX, 5);
		if (com_clock_ms() > deadline)
			fail_msg("ticket %llu not durable within %d ms",
			    (unsigned long long)ticket, WAIT_MS);
	}
}

/* A decision made while the writer is in a long transaction of
 * statistics (policy metrics, more than batch_rows would usually allow)
 * is committed before that transaction's end: the transaction stops,
 * commits what it wrote, and resumes after the decision, every row
 * written once. The window's timings are not among them: they commit
 * with the window. */
static void
test_store_a_decision_cuts_a_long_transaction_of_statistics_short(void **state)
{
	enum {
		N_TIMINGS = 20000,
		N_METRICS = 60000
	};
	fixture *f = *state;
	ctl_store_conf conf = f->cfg->store;
	com_timings tm = { .steps = 10, .step_ms = 100 };
	int64_t run, rows = 0;
	uint64_t t1, seq = 2;

	conf.batch_rows = 1000000;
	conf.queue_rows = 10000000;
	open_store(f);
	ctl_store_set_conf(f->store, &conf);
	start_store(f);
	run = run_begin(f, "job", N_TIMINGS);
	wait_committed(f, put_decision(f, run, 1, NULL));
	/* One batch: the ranks' timings and window 0 as the policies saw
	 * it (firm), then its policy metrics. */
	for (uint32_t r = 0; r < N_TIMINGS; r++)
		ctl_store_timing(f->store, run, 0, r, &tm);
	put_window(f, run, 0, 1, com_clock_wall_ms());
	put_metrics(f, run, 0, N_METRICS);
	t1 = ctl_store_flush(f->store);
	/* Its window is committed, with its timings: the writer is on its
	 * metrics now. */
	wait_durable(f, t1);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM timings"),
	    N_TIMINGS);
	/* Decisions, one at a time, each committed while part of the
	 * metrics is not (without giving way, the first would wait for
	 * all of them); the metrics get on between them. */
	do {
		uint64_t t = put_decision(f, run, seq++, NULL);

		wait_durable(f, t);
		rows = db_int(f->db, "SELECT count(*) FROM policy_metrics");
		if (seq == 3)
			assert_true(rows < N_METRICS);
	} while (rows < N_METRICS && seq < 1000);
	wait_committed(f, ctl_store_flush(f->store));
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM timings"),
	    N_TIMINGS);
	assert_int_equal(db_int(f->db,
			     "SELECT count(DISTINCT rank) FROM timings"),
	    N_TIMINGS);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM policy_metrics"),
	    N_METRICS);
	assert_int_equal(
	    db_int(f->db, "SELECT count(DISTINCT layer) FROM policy_metrics"),
	    N_METRICS);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM decisions"),
	    (int64_t)seq - 1);
}

/* Size of the file at path in bytes (0 if it cannot be read). */
static int64_t
file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* Size of the store's WAL in bytes. */
static int64_t
wal_size(const fixture *f)
{
	char path[200];

	snprintf(path, sizeof(path), "%s-wal", f->db);
	return file_size(path);
}

/* The checkpointer copies the WAL back into the database once it has
 * grown past STORE_CHECKPOINT_FRAMES (1,000 pages) and a decision was
 * committed, long before the writer would have to stop and do it itself
 * (STORE_WAL_MAX_FRAMES, 16,384): in WAL mode only a checkpoint writes
 * pages into the database file, so the file grows while the WAL holds
 * ~ 2,000 pages. */
static void
test_store_checkpoints_the_wal_in_the_background(void **state)
{
	enum {
		N_TIMINGS = 50000,
		N_WINDOWS = 4
	};
	fixture *f = *state;
	ctl_store_conf conf = f->cfg->store;
	com_timings tm = { .steps = 10, .step_ms = 100, .compute_ms = 70 };
	uint64_t deadline;
	int64_t run, size0;

	conf.batch_rows = 4096;
	conf.queue_rows = 10000000;
	open_store(f);
	ctl_store_set_conf(f->store, &conf);
	start_store(f);
	run = run_begin(f, "job", N_TIMINGS);
	wait_committed(f, put_decision(f, run, 1, NULL));
	size0 = file_size(f->db);
	for (uint64_t w = 0; w < N_WINDOWS; w++) {
		for (uint32_t r = 0; r < N_TIMINGS; r++)
			ctl_store_timing(f->store, run, w, r, &tm);
		wait_committed(f, ctl_store_flush(f->store));
	}
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM timings"),
	    N_WINDOWS * N_TIMINGS);
	/* The checkpoint starts right after a decision's commit. */
	wait_committed(f, put_decision(f, run, 2, NULL));
	deadline = com_clock_ms() + WAIT_MS;
	while (file_size(f->db) < size0 + 2 * 1024 * 1024) {
		if (com_clock_ms() > deadline)
			fail_msg("the database file stayed at %lld bytes (was "
				 "%lld) with a WAL of %lld: not checkpointed",
			    (long long)file_size(f->db), (long long)size0,
			    (long long)wal_size(f));
		sleep_ms(10);
	}
}

static void
test_store_survives_an_injected_full_disk(void **state)
{
	fixture *f = *state;
	char why[400];
	int64_t run;
	uint64_t t;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	wait_committed(f, put_decision(f, run, 1, NULL));
	ctl_store_fault_arm(13 /* SQLITE_FULL */, 3);
	t = put_decision(f, run, 2, NULL);
	assert_int_equal(ctl_store_wait(f->store, t, WAIT_MS), BELLOWS_EIO);
	assert_true(store_degraded(f, why, sizeof(why)));
	assert_non_null(strstr(why, "full"));
	/* Three retries fail, the fourth writes. */
	wait_committed(f, t);
	assert_false(store_degraded(f, NULL, 0));
	assert_int_equal(db_int(f->db, "SELECT max(seq) FROM decisions"), 2);
}

/* Rows of window w in table `name`. */
static int64_t
window_rows(const fixture *f, const char *name, uint64_t w)
{
	return db_int(f->db, "SELECT count(*) FROM %s WHERE window = %llu",
	    name, (unsigned long long)w);
}

/* A window's per-rank timings rows commit in the transaction of its
 * window row, never in a later one (which a kill could cut off after
 * the decision answering the window was published, and no rank sends a
 * closed window's report again): with the transaction after the
 * window's failing, the window is there with every rank's timings; with
 * the window's own failing, neither is, until it commits. */
static void
test_store_a_windows_timings_land_with_its_window_or_not_at_all(void **state)
{
	enum {
		RANKS = 40
	};
	fixture *f = *state;
	com_timings tm = { .steps = 10, .step_ms = 100 };
	int64_t run;
	uint64_t t;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", RANKS);
	wait_committed(f, put_decision(f, run, 1, NULL));

	/* The ranks' reports, the window they close, a policy metric and
	 * the decision, in one batch; every transaction after the first
	 * fails. */
	ctl_store_fault_arm_after(13 /* SQLITE_FULL */, 1, 1000);
	for (uint32_t r = 0; r < RANKS; r++)
		ctl_store_timing(f->store, run, 0, r, &tm);
	put_window(f, run, 0, N_LAYERS, com_clock_wall_ms());
	put_metrics(f, run, 0, 1);
	t = put_decision(f, run, 2, NULL);
	wait_durable(f, t);
	assert_int_equal(window_rows(f, "window_info", 0), 1);
	assert_int_equal(window_rows(f, "timings", 0), RANKS);
	/* The metric row's transaction came next, and failed. */
	wait_degraded(f);
	assert_int_equal(window_rows(f, "policy_metrics", 0), 0);
	assert_int_equal(window_rows(f, "timings", 0), RANKS);
	ctl_store_fault_arm(0, 0);
	wait_committed(f, t);
	assert_int_equal(window_rows(f, "policy_metrics", 0), 1);

	/* The window's own transaction fails: nothing of it is written,
	 * then all of it. */
	ctl_store_fault_arm(13 /* SQLITE_FULL */, 1000);
	for (uint32_t r = 0; r < RANKS; r++)
		ctl_store_timing(f->store, run, 1, r, &tm);
	put_window(f, run, 1, N_LAYERS, com_clock_wall_ms());
	t = put_decision(f, run, 3, NULL);
	wait_degraded(f);
	assert_int_equal(window_rows(f, "window_info", 1), 0);
	assert_int_equal(window_rows(f, "timings", 1), 0);
	ctl_store_fault_arm(0, 0);
	wait_committed(f, t);
	assert_int_equal(window_rows(f, "window_info", 1), 1);
	assert_int_equal(window_rows(f, "timings", 1), RANKS);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM timings"),
	    2 * RANKS);
}

/* Mounts a tmpfs of `size` on f->mnt; false when that is not allowed. */
static bool
mount_tmpfs(fixture *f, const char *opts)
{
	if (mkdir(f->mnt, 0700) != 0 ||
	    mount("tmpfs", f->mnt, "tmpfs", 0, opts) != 0) {
		print_message("      cannot mount a tmpfs (%s): skipped\n",
		    geteuid() == 0 ? "no mount rights" : "not root");
		return false;
	}
	f->mounted = true;
	snprintf(f->db, sizeof(f->db), "%s/history.db", f->mnt);
	return true;
}

static void
test_store_survives_a_real_full_disk_and_catches_up(void **state)
{
	fixture *f = *state;
	uint64_t t = 0, deadline;
	com_decision prev;
	int64_t run;
	uint64_t seq = 1;

	if (!mount_tmpfs(f, "size=512k")) {
		skip();
		return;
	}
	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	make_decision(&prev, 0, 0, 0, 0);
	/* Windows of 200 layers until the 512 KiB are full. */
	deadline = com_clock_ms() + WAIT_MS;
	for (uint64_t w = 0; !store_degraded(f, NULL, 0); w++) {
		put_window(f, run, w, 200, com_clock_wall_ms());
		t = put_decision(f, run, seq++, &prev);
		ctl_store_wait(f->store, t, 1000);
		if (com_clock_ms() > deadline)
			fail_msg("512 KiB never filled up");
	}
	print_message("      full after %llu decisions\n",
	    (unsigned long long)seq - 1);
	assert_int_equal(f->released, 1);
	/* The daemon goes on deciding. */
	for (int i = 0; i < 5; i++)
		t = put_decision(f, run, seq++, &prev);
	assert_int_equal(mount("tmpfs", f->mnt, "tmpfs", MS_REMOUNT,
			     "size=16m"),
	    0);
	wait_committed(f, t);
	assert_false(store_degraded(f, NULL, 0));
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) = max(seq) FROM decisions"),
	    1);
	assert_int_equal(db_int(f->db, "SELECT max(seq) FROM decisions"),
	    (int64_t)seq - 1);
	sync_events(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM events WHERE kind = "
			     "'store_recovered'"),
	    1);
	com_decision_fini(&prev);
}

static void
test_store_waits_out_a_read_only_directory(void **state)
{
	fixture *f = *state;
	char why[400];
	int64_t run;
	uint64_t t;
	bool tmpfs = geteuid() == 0;

	if (tmpfs) {
		/* chmod does not stop root: a read-only mount does. */
		if (!mount_tmpfs(f, "size=4m")) {
			skip();
			return;
		}
		assert_int_equal(mount("tmpfs", f->mnt, "tmpfs",
				     MS_REMOUNT | MS_RDONLY, "size=4m"),
		    0);
	} else {
		assert_int_equal(chmod(f->dir, 0555), 0);
	}
	open_store(f);
	assert_true(store_degraded(f, why, sizeof(why)));
	print_message("      %s\n", why);
	start_store(f);
	run = run_begin(f, "job", 2);
	t = put_decision(f, run, 1, NULL);
	assert_int_equal(ctl_store_wait(f->store, t, 300), BELLOWS_EIO);
	if (tmpfs)
		assert_int_equal(mount("tmpfs", f->mnt, "tmpfs", MS_REMOUNT,
				     "size=4m"),
		    0);
	else
		assert_int_equal(chmod(f->dir, 0700), 0);
	wait_committed(f, t);
	assert_false(store_degraded(f, NULL, 0));
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM decisions"), 1);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM runs"), 1);
}

static void
test_store_downsamples_metrics_when_behind_and_counts_them(void **state)
{
	fixture *f = *state;
	com_status_reply st;
	sqlite3 *other;
	int64_t run, kept;
	uint64_t t = 0;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	wait_committed(f, put_decision(f, run, 1, NULL));
	other = db_open(f->db);
	assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL,
			     NULL),
	    SQLITE_OK);
	/* 40 windows of 101 metric rows against a queue of 1000, each
	 * with the window the policies saw (100 layers). */
	f->check_windows = true;
	for (uint64_t w = 0; w < 40; w++) {
		put_window(f, run, w, 100, com_clock_wall_ms());
		put_metrics(f, run, w, 101);
		t = put_decision(f, run, w + 2, NULL);
		ctl_store_flush(f->store);
	}
	st = store_status(f);
	assert_true(st.store_dropped > 0);
	assert_true(st.store_pending > 0);
	free(st.store_error);
	assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(other);
	wait_committed(f, t);
	/* Every decision and every window the policies saw, each whole
	 * (multi-row inserts of 32 rows and single ones for the rest), and
	 * each window committed no later than the decision answering it. */
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM decisions"), 41);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM window_info"), 40);
	assert_int_equal(
	    db_int(f->db,
		"SELECT count(*) * 10000 + sum(layer) FROM windows "
		"WHERE window = 39"),
	    100 * 10000 + 4950);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM windows"), 4000);
	assert_true(f->windows_checked > 0);
	assert_int_equal(f->windows_missing, 0);
	/* Some windows' metric rows, each window's kept or dropped
	 * together. */
	kept = db_int(f->db,
	    "SELECT count(DISTINCT window) FROM policy_metrics");
	assert_true(kept > 0 && kept < 40);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM policy_metrics"),
	    kept * 101);
	st = store_status(f);
	assert_int_equal(st.store_dropped, (uint64_t)(40 - kept) * 101);
	free(st.store_error);
	/* Beyond the queue only every 8th window kept its metric rows. */
	assert_int_equal(db_int(f->db,
			     "SELECT count(DISTINCT window) FROM "
			     "policy_metrics WHERE window >= 10 AND window "
			     "%% 8 != 0"),
	    0);
	/* The loss is recorded, not silent. */
	sleep_ms(1100);
	sync_events(f);
	assert_true(db_int(f->db,
			"SELECT count(*) FROM events WHERE kind = "
			"'metrics_dropped' AND text LIKE '%%metric rows not "
			"written%%'") >= 1);
}

static void
test_store_thins_old_windows_past_the_per_run_limit(void **state)
{
	fixture *f = *state;
	ctl_store_conf conf = f->cfg->store;
	uint64_t deadline;
	int64_t run;

	conf.max_windows_per_run = 10;
	conf.keep_every = 5;
	open_store(f);
	ctl_store_set_conf(f->store, &conf);
	start_store(f);
	run = run_begin(f, "job", 2);
	for (uint64_t w = 0; w < 100; w++)
		put_window(f, run, w, 1, com_clock_wall_ms());
	wait_committed(f, ctl_store_flush(f->store));
	/* Windows 0..88 keep every 5th; 89..99 are whole. */
	deadline = com_clock_ms() + WAIT_MS;
	while (db_int(f->db, "SELECT count(*) FROM window_info") != 18 + 11) {
		if (com_clock_ms() > deadline)
			fail_msg("%lld windows left, not 29",
			    (long long)db_int(f->db,
				"SELECT count(*) FROM window_info"));
		sleep_ms(20);
	}
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM windows WHERE window < 89 "
			     "AND window %% 5 != 0"),
	    0);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM windows"),
	    18 + 11);
}

static void
test_store_thins_windows_older_than_the_age_limit(void **state)
{
	fixture *f = *state;
	ctl_store_conf conf = f->cfg->store;
	uint64_t now = com_clock_wall_ms(), deadline;
	int64_t run;

	conf.max_age_days = 1;
	conf.keep_every = 4;
	conf.batch_rows = 100000; /* one batch: the pass sees every window */
	open_store(f);
	ctl_store_set_conf(f->store, &conf);
	start_store(f);
	run = run_begin(f, "job", 2);
	for (uint64_t w = 0; w < 20; w++)
		put_window(f, run, w, 2, w < 12 ? now - 3 * 86400000ull : now);
	wait_committed(f, ctl_store_flush(f->store));
	deadline = com_clock_ms() + WAIT_MS;
	while (db_int(f->db, "SELECT count(*) FROM window_info") != 3 + 8) {
		if (com_clock_ms() > deadline)
			fail_msg("age retention did not run");
		sleep_ms(20);
	}
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM windows WHERE window < 12"),
	    3 * 2);
}

/* ---- recovery ------------------------------------------------------------ */

typedef struct recovered {
	uint32_t runs;         /* run callbacks */
	char job[32];          /* the run's job */
	uint32_t world;        /* its world */
	char layer1[32];       /* name of layer 1 */
	uint32_t shape2[2];    /* shape of layer 2 */
	uint32_t n_decisions;  /* decisions handed */
	uint64_t first_seq;    /* oldest of them */
	uint64_t last_seq;     /* newest */
	uint64_t next_window;  /* where it resumes */
	bool alive[4];         /* ranks there */
	uint64_t windows[8];   /* windows replayed, in order */
	uint32_t n_windows;    /* entries */
	double rank0_norm_l1;  /* layer 1's rank-0 norm of window 1 */
	double norm_l0;        /* layer 0's policy norm of window 1 */
	double level_l2;       /* layer 2's level in force, window 1 */
	double compute_median; /* window 1's compute median */
	uint64_t ended;        /* end callbacks, windows counted */
	uint64_t run_last_seq; /* the run's highest seq, also unread */
	char run_key[32];      /* its launch */
	uint64_t miss_from[4]; /* spans of windows it lacks from the mark */
	uint64_t miss_to[4];   /* on, [miss_from, miss_to) */
	uint32_t n_missing;    /* entries */
} recovered;

static int
rec_run(void *arg, const ctl_store_run *run, void **ret_ctx)
{
	recovered *r = arg;

	r->runs++;
	snprintf(r->job, sizeof(r->job), "%s", run->job);
	r->world = run->world;
	snprintf(r->layer1, sizeof(r->layer1), "%s", run->layers[1].name);
	r->shape2[0] = run->layers[2].shape[0];
	r->shape2[1] = run->layers[2].shape[1];
	r->n_decisions = run->n_decisions;
	r->first_seq = run->decisions[0].seq;
	r->last_seq = run->decisions[run->n_decisions - 1].seq;
	r->next_window = run->next_window;
	r->run_last_seq = run->last_seq;
	snprintf(r->run_key, sizeof(r->run_key), "%s", run->run_key);
	for (uint32_t k = 0; k < 4 && k < run->world; k++)
		r->alive[k] = run->alive[k];
	r->n_missing = run->n_missing;
	for (uint32_t i = 0; i < 4 && i < run->n_missing; i++) {
		r->miss_from[i] = run->missing[i].from;
		r->miss_to[i] = run->missing[i].to;
	}
	*ret_ctx = r;
	return 0;
}

static bool
rec_window(void *arg, void *ctx, bellows_window *w,
    const com_decision *in_force)
{
	recovered *r = ctx;

	assert_ptr_equal(arg, ctx);
	if (r->n_windows < 8)
		r->windows[r->n_windows++] = w->window;
	if (w->window == 1) {
		r->rank0_norm_l1 = w->layers[1].grad_norm_rank0;
		r->norm_l0 = w->layers[0].grad_norm;
		r->level_l2 = in_force->level[2];
		r->compute_median = w->compute_ms_median;
	}
	return true;
}

static void
rec_end(void *arg, void *ctx, uint64_t n)
{
	recovered *r = ctx;

	(void)arg;
	r->ended += n;
}

static void
test_store_recovers_live_runs_with_their_tail_and_windows(void **state)
{
	fixture *f = *state;
	static const ctl_store_recover_ops ops = { rec_run, rec_window,
		rec_end };
	recovered r = { 0 };
	int64_t live, done;
	uint64_t t = 0;

	open_store(f);
	start_store(f);
	done = ctl_store_run_begin(f->store, "finished", "", 2, table, N_LAYERS,
	    f->cfg, 1, 1);
	put_decision(f, done, 1, NULL);
	ctl_store_run_end(f->store, done, 2);
	live = ctl_store_run_begin(f->store, "live", "", 4, table, N_LAYERS,
	    f->cfg, 1, 1);
	ctl_store_rank_event(f->store, live, 0, CTL_STORE_RANK_JOINED, 0, 1, 1);
	ctl_store_rank_event(f->store, live, 1, CTL_STORE_RANK_JOINED, 0, 2, 1);
	ctl_store_rank_event(f->store, live, 2, CTL_STORE_RANK_JOINED, 0, 3, 1);
	ctl_store_rank_event(f->store, live, 2, CTL_STORE_RANK_LOST, 9, 0, 2);
	ctl_store_rank_event(f->store, live, 1, CTL_STORE_RANK_LEFT, 9, 0, 3);
	ctl_store_rank_event(f->store, live, 1, CTL_STORE_RANK_REJOINED, 9, 5,
	    4);
	for (uint64_t w = 0; w < 3; w++)
		put_window(f, live, w, N_LAYERS, 10);
	for (uint64_t s = 1; s <= 40; s++)
		t = put_decision(f, live, s, NULL);
	wait_committed(f, t);
	ctl_store_close(&f->store, 2000);

	open_store(f);
	assert_int_equal(ctl_store_recover(f->store, 32, &ops, &r), 1);
	assert_int_equal(r.runs, 1);
	assert_string_equal(r.job, "live");
	assert_int_equal(r.world, 4);
	assert_string_equal(r.layer1, "conv.bias");
	assert_int_equal(r.shape2[0], 4);
	assert_int_equal(r.shape2[1], 8);
	assert_int_equal(r.n_decisions, 32);
	assert_int_equal(r.first_seq, 9);
	assert_int_equal(r.last_seq, 40);
	/* The newest decision answers window 38: max(39, 3). */
	assert_int_equal(r.next_window, 39);
	assert_true(r.alive[0] && r.alive[1]);
	assert_false(r.alive[2] || r.alive[3]);
	assert_int_equal(r.n_windows, 3);
	assert_int_equal(r.windows[0], 0);
	assert_int_equal(r.windows[2], 2);
	assert_true(isnan(r.rank0_norm_l1));
	assert_true(r.norm_l0 == 2.0);
	assert_true(r.level_l2 == 2.0);
	assert_true(isnan(r.compute_median));
	assert_int_equal(r.ended, 3);
	/* Written without a mark (as before schema 9): nothing below the
	 * newest window is taken late again. */
	assert_int_equal(r.n_missing, 0);
}

/* The windows a restarted daemon takes late again: those from the mark
 * the agents were told (runs.windows_closed) up to the window it
 * recovers at that the run lacks, in spans; none below the mark. */
static void
test_store_recovers_the_windows_missing_above_the_agents_mark(void **state)
{
	fixture *f = *state;
	static const ctl_store_recover_ops ops = { rec_run, rec_window,
		rec_end };
	static const uint64_t held[] = { 0, 1, 3, 4, 8, 11 };
	recovered r = { 0 };
	int64_t run;

	open_store(f);
	start_store(f);
	run = ctl_store_run_begin(f->store, "job", "", 2, table, N_LAYERS,
	    f->cfg, 1, 1);
	put_decision(f, run, 1, NULL);
	for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
		ctl_store_run_closed(f->store, run, held[i] < 3 ? 0 : 2);
		put_window(f, run, held[i], N_LAYERS, 10);
	}
	wait_committed(f, ctl_store_flush(f->store));
	ctl_store_close(&f->store, 2000);

	open_store(f);
	assert_int_equal(ctl_store_recover(f->store, 32, &ops, &r), 1);
	assert_int_equal(r.next_window, 12);
	assert_int_equal(r.n_missing, 3);
	assert_int_equal(r.miss_from[0], 2);
	assert_int_equal(r.miss_to[0], 3);
	assert_int_equal(r.miss_from[1], 5);
	assert_int_equal(r.miss_to[1], 8);
	assert_int_equal(r.miss_from[2], 9);
	assert_int_equal(r.miss_to[2], 11);
	ctl_store_close(&f->store, 3000);
}

static void
test_store_resume_reads_a_run_back_and_supersedes_its_later_windows(
    void **state)
{
	fixture *f = *state;
	static const ctl_store_recover_ops ops = { rec_run, rec_window,
		rec_end };
	recovered r = { 0 }, newest = { 0 }, none = { 0 };
	com_timings t = { .steps = 10 };
	char key[32];
	uint64_t ticket = 0;
	int64_t run;

	open_store(f);
	start_store(f);
	run = ctl_store_run_begin(f->store, "job", "launch-a", 2, table,
	    N_LAYERS, f->cfg, 1, 1);
	for (uint64_t w = 0; w < 6; w++) {
		put_window(f, run, w, N_LAYERS, 10);
		ctl_store_timing(f->store, run, w, 0, &t);
	}
	/* Decision s answers window s - 2 (its window field is s - 1). */
	for (uint64_t s = 1; s <= 7; s++)
		ticket = put_decision(f, run, s, NULL);
	wait_committed(f, ticket);
	for (int i = 0; i < 100 && !ctl_store_settled(f->store); i++)
		ctl_store_wait(f->store, UINT64_MAX, 20);
	assert_true(ctl_store_settled(f->store));

	/* Read back as far as window 3, on a connection of its own. */
	assert_int_equal(ctl_store_load_run(f->store, run, NULL, 3, 32, &ops,
			     &r),
	    0);
	assert_string_equal(r.run_key, "launch-a");
	assert_int_equal(r.n_windows, 3);
	assert_int_equal(r.windows[2], 2);
	assert_int_equal(r.first_seq, 1);
	assert_int_equal(r.last_seq, 4);
	assert_int_equal(r.run_last_seq, 7);
	assert_int_equal(r.next_window, 3);
	assert_int_equal(ctl_store_load_run(f->store, 0, "job", UINT64_MAX, 32,
			     &ops, &newest),
	    0);
	assert_int_equal(newest.n_windows, 6);
	assert_int_equal(newest.last_seq, 7);
	assert_int_equal(ctl_store_load_run(f->store, 0, "other", 3, 32, &ops,
			     &none),
	    BELLOWS_ENOTFOUND);
	assert_int_equal(none.runs, 0);
	assert_int_equal(ctl_store_load_run(NULL, run, NULL, 3, 32, &ops,
			     &none),
	    BELLOWS_ENOTFOUND);

	/* Resumed at window 3: windows 3.. and the decisions answering
	 * them move aside; what the resumed run records after stays. */
	ctl_store_run_resumed(f->store, run, 3, "launch-b");
	put_window(f, run, 3, N_LAYERS, 20);
	ticket = put_decision(f, run, 8, NULL);
	wait_committed(f, ticket);
	assert_int_equal(db_int(f->db, "SELECT resumes FROM runs"), 1);
	db_text(f->db, key, sizeof(key), "SELECT run_key FROM runs");
	assert_string_equal(key, "launch-b");
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM superseded_window_info "
			     "WHERE resume = 1 AND window >= 3"),
	    3);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM superseded_windows WHERE "
			     "resume = 1"),
	    3 * N_LAYERS);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM superseded_timings"),
	    3);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM superseded_decisions WHERE "
			     "seq IN (5, 6, 7)"),
	    3);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM superseded_decision_changes "
			     "WHERE seq < 5"),
	    0);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM window_info"), 4);
	assert_int_equal(db_int(f->db,
			     "SELECT closed_wall_ms FROM window_info WHERE "
			     "window = 3"),
	    20);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM timings"), 3);
	assert_int_equal(db_int(f->db,
			     "SELECT group_concat(seq, '') FROM (SELECT seq "
			     "FROM decisions ORDER BY seq)"),
	    12348);
	assert_int_equal(db_int(f->db,
			     "SELECT ended_wall_ms IS NULL FROM runs"),
	    1);
}

/* What a recovered window of the round trip below held. */
typedef struct rt_window {
	uint32_t windows;            /* recovered */
	bellows_window w;            /* window-level fields */
	bellows_window_layer l0;     /* layer 0 (name etc. not kept) */
	bellows_window_layer l1;     /* layer 1 */
	uint32_t n_comm;             /* collectives */
	bellows_comm_sample comm[3]; /* the first three */
	uint64_t decision_calibrate; /* newest decision's calibrate_steps */
} rt_window;

static int
rt_run(void *arg, const ctl_store_run *run, void **ret_ctx)
{
	rt_window *r = arg;

	r->decision_calibrate = run->decisions[run->n_decisions - 1]
				    .calibrate_steps;
	*ret_ctx = arg;
	return 0;
}

static bool
rt_win(void *arg, void *ctx, bellows_window *w, const com_decision *in_force)
{
	rt_window *r = ctx;

	(void)arg;
	(void)in_force;
	r->windows++;
	r->w = *w;
	r->l0 = w->layers[0];
	r->l1 = w->layers[1];
	r->n_comm = w->n_comm;
	for (uint32_t i = 0; i < w->n_comm && i < 3; i++)
		r->comm[i] = w->comm[i];
	return true;
}

static void
test_store_round_trips_new_statistics_collectives_metrics_calibration(
    void **state)
{
	fixture *f = *state;
	static const ctl_store_recover_ops ops = { rt_run, rt_win, v2_end };
	const bellows_comm_sample comm[3] = {
		{ .rank = 1, .bytes = 4096, .ms = 0.5, .count = 7 },
		{ .rank = 0,
		    .bytes = 1 << 20,
		    .ms = 3.25,
		    .count = 2,
		    .compressed = true },
		{ .rank = 1, .bytes = 1 << 20, .ms = NAN, .count = 1 },
	};
	bellows_window_layer layers[N_LAYERS] = { 0 };
	const com_metric metrics[2] = {
		{ .policy = (char *)"slim",
		    .name = (char *)"threshold_bytes",
		    .layer = -1,
		    .value = 2.2e6 },
		{ .policy = (char *)"slim",
		    .name = (char *)"ratio",
		    .layer = 2,
		    .value = 1.5 },
	};
	com_decision in_force, d;
	bellows_window v = {
		.job = "job",
		.window = 0,
		.last_step = 9,
		.lr = 0.1,
		.lr_next = 0.1,
		.lr_scale = 1,
		.world = 2,
		.ranks_reported = 2,
		.n_layers = N_LAYERS,
		.layers = layers,
		.backward_ms_median = 7.5,
		.codec_ms_median = 0.25,
		.mem_device_used = 3e9,
		.mem_device_total = 8e9,
		.mem_host_used = 1e9,
		.compression_off = true,
		.size_threshold = 2200000,
		.calibrate_until = 150,
		.n_comm = 3,
		.comm = comm,
	};
	rt_window r = { 0 };
	char text[128];
	int64_t run;

	for (uint32_t l = 0; l < N_LAYERS; l++)
		layers[l] = (bellows_window_layer){ .grad_norm_rank0 = 1,
			.grad_norm_mean = 1,
			.comm_raw_ms = NAN,
			.comm_comp_ms = NAN,
			.codec_ms = NAN };
	layers[0].act_steps = 20;
	layers[0].act_lbar = 0.125;
	layers[0].act_nonzero = 0.5;
	layers[0].act_bytes = 1000;
	layers[0].act_raw_bytes = 4000;
	layers[1].comm_raw_ms = 1.5;
	layers[1].comm_comp_ms = 0.75;
	layers[1].codec_ms = 0.125;
	layers[1].comm_raw_n = 6;
	layers[1].comm_comp_n = 4;
	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	make_decision(&in_force, 1, 1, 1, 1);
	in_force.apply_step = 100;
	in_force.calibrate_steps = 50;
	in_force.compression_off = true;
	in_force.size_threshold = 2200000;
	ctl_store_decision(f->store, run, &in_force, NULL, CTL_STORE_INITIAL,
	    1);
	ctl_store_window(f->store, run, &v, 2, CTL_STORE_CLOSED_COMPLETE,
	    &in_force, 2);
	ctl_store_policy_metrics(f->store, run, 0, metrics, 2);
	make_decision(&d, 2, 1, 1, 1);
	d.compression_off = true;
	d.size_threshold = 2200000;
	wait_committed(f,
	    ctl_store_decision(f->store, run, &d, &in_force, CTL_STORE_WINDOW,
		3));

	/* The rows, as a reader of the file sees them. */
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(rank || ':' || bytes || ':' || ifnull(ms, "
	    "'-') || ':' || count || ':' || compressed, ' ') FROM (SELECT * "
	    "FROM comm_samples ORDER BY rowid)");
	assert_string_equal(text,
	    "1:4096:0.5:7:0 0:1048576:3.25:2:1 "
	    "1:1048576:-:1:0");
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(policy || ':' || name || ':' || ifnull(layer, "
	    "'job') || ':' || value, ' ') FROM (SELECT * FROM policy_metrics "
	    "ORDER BY rowid)");
	assert_string_equal(text,
	    "slim:threshold_bytes:job:2200000.0 "
	    "slim:ratio:2:1.5");
	assert_int_equal(db_int(f->db,
			     "SELECT mem_device_used FROM window_info"),
	    3000000000);
	assert_int_equal(db_int(f->db,
			     "SELECT state_apply_step * 1000 + "
			     "state_calibrate_steps FROM window_info"),
	    100050);
	assert_int_equal(db_int(f->db,
			     "SELECT calibrate_steps FROM decisions WHERE seq "
			     "= 1"),
	    50);
	/* The second decision ends the calibration: a change. */
	db_text(f->db, text, sizeof(text),
	    "SELECT old || '>' || new FROM decision_changes WHERE seq = 2 AND "
	    "knob = 'calibrate_steps'");
	assert_string_equal(text, "50.0>0.0");
	ctl_store_close(&f->store, 2000);

	/* A restarted daemon shows its policies the same window. */
	open_store(f);
	assert_int_equal(ctl_store_recover(f->store, 32, &ops, &r), 1);
	assert_int_equal(r.windows, 1);
	assert_int_equal(r.decision_calibrate, 0);
	assert_true(r.w.backward_ms_median == 7.5);
	assert_true(r.w.codec_ms_median == 0.25);
	assert_true(r.w.mem_device_used == 3e9);
	assert_true(r.w.mem_device_total == 8e9);
	assert_true(r.w.mem_host_used == 1e9);
	assert_true(r.w.compression_off);
	assert_int_equal(r.w.size_threshold, 2200000);
	assert_int_equal(r.w.calibrate_until, 150);
	assert_int_equal(r.l0.act_steps, 20);
	assert_true(r.l0.act_lbar == 0.125 && r.l0.act_nonzero == 0.5);
	assert_true(r.l0.act_bytes == 1000 && r.l0.act_raw_bytes == 4000);
	assert_true(isnan(r.l0.comm_raw_ms) && isnan(r.l0.codec_ms));
	assert_true(r.l1.comm_raw_ms == 1.5 && r.l1.comm_comp_ms == 0.75);
	assert_true(r.l1.codec_ms == 0.125);
	assert_int_equal(r.l1.comm_raw_n, 6);
	assert_int_equal(r.l1.comm_comp_n, 4);
	assert_int_equal(r.n_comm, 3);
	assert_int_equal(r.comm[0].rank, 1);
	assert_int_equal(r.comm[0].bytes, 4096);
	assert_true(r.comm[0].ms == 0.5 && !r.comm[0].compressed);
	assert_int_equal(r.comm[0].count, 7);
	assert_true(r.comm[1].compressed && r.comm[1].ms == 3.25);
	assert_true(isnan(r.comm[2].ms));
	com_decision_fini(&in_force);
	com_decision_fini(&d);
}

/* The plan of the newest decision a recovery read back. */
typedef struct rp_plan {
	uint32_t group[N_LAYERS]; /* resid_group */
	double rows[N_LAYERS];    /* resid_rows */
	bool none;                /* the decision had no plan */
	uint32_t n_decisions;     /* decisions read back */
} rp_plan;

static int
rp_run(void *arg, const ctl_store_run *run, void **ret_ctx)
{
	rp_plan *r = arg;
	const com_decision *d = &run->decisions[run->n_decisions - 1];

	r->n_decisions = run->n_decisions;
	r->none = d->resid_group == NULL;
	for (uint32_t l = 0; !r->none && l < N_LAYERS; l++) {
		r->group[l] = d->resid_group[l];
		r->rows[l] = d->resid_rows[l];
	}
	*ret_ctx = arg;
	return 0;
}

static bool
rp_win(void *arg, void *ctx, bellows_window *w, const com_decision *in_force)
{
	(void)arg;
	(void)ctx;
	(void)w;
	(void)in_force;
	return true;
}

static void
test_store_round_trips_a_residual_plan(void **state)
{
	fixture *f = *state;
	static const ctl_store_recover_ops ops = { rp_run, rp_win, v2_end };
	com_decision d1, d2;
	rp_plan r = { 0 };
	char text[256];
	int64_t run;

	open_store(f);
	start_store(f);
	run = run_begin(f, "job", 2);
	/* Layers 0 and 1 share layer 0's residual (phi 0.25), layer 2 keeps
	 * half its rows and a quarter of its columns. */
	make_decision(&d1, 1, 1, 1, 1);
	assert_int_equal(com_resid_plan_alloc(&d1), 0);
	d1.resid_group[1] = 0;
	d1.resid_phi[0] = 0.25;
	d1.resid_rows[2] = 0.5;
	d1.resid_cols[2] = 0.25;
	wait_committed(f,
	    ctl_store_decision(f->store, run, &d1, NULL, CTL_STORE_INITIAL, 1));
	assert_int_equal(db_int(f->db,
			     "SELECT length(resid_group) FROM decisions WHERE "
			     "seq = 1"),
	    8 * N_LAYERS);
	assert_int_equal(
	    db_int(f->db,
		"SELECT count(*) FROM decisions WHERE seq = 1 AND "
		"hex(resid_phi) = '000000000000D03F000000000000E03F"
		"000000000000E03F'"),
	    1);
	ctl_store_close(&f->store, 2000);

	/* A restarted daemon reads the plan back. */
	open_store(f);
	assert_int_equal(ctl_store_recover(f->store, 32, &ops, &r), 1);
	assert_false(r.none);
	assert_int_equal(r.group[0], 0);
	assert_int_equal(r.group[1], 0);
	assert_int_equal(r.group[2], 2);
	assert_true(r.rows[2] == 0.5 && r.rows[0] == 1.0);
	start_store(f);

	/* The next decision splits the group again: the default plan, kept
	 * as none, and what changed per layer. */
	make_decision(&d2, 2, 1, 1, 1);
	wait_committed(f,
	    ctl_store_decision(f->store, run, &d2, &d1, CTL_STORE_WINDOW, 2));
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM decisions WHERE seq = 2 AND "
			     "resid_group IS NULL"),
	    1);
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(seq || ':' || knob || ':' || layer || ':' || "
	    "ifnull(old, '-') || '>' || new, ' ') FROM (SELECT * FROM "
	    "decision_changes WHERE knob LIKE 'resid_%%' ORDER BY rowid)");
	assert_string_equal(text,
	    "1:resid_group:1:->0.0 1:resid_rows:2:->0.5 "
	    "1:resid_cols:2:->0.25 2:resid_group:1:0.0>1.0 "
	    "2:resid_rows:2:0.5>1.0 2:resid_cols:2:0.25>1.0");
	com_decision_fini(&d1);
	com_decision_fini(&d2);
}

/* ---- the job table on a store -------------------------------------------- */

static void
new_jobs(fixture *f)
{
	assert_int_equal(ctl_jobs_new(f->cfg, 0x42, on_publish, f, &f->jobs),
	    0);
	open_store(f);
	ctl_jobs_set_store(f->jobs, f->store);
}

/* Joins `rank` from `peer`; returns the Welcome's windows_closed. */
static uint64_t
hello(fixture *f, const char *peer, uint32_t rank, uint64_t step,
    uint64_t last_window, uint64_t seq, uint64_t now)
{
	com_layer_info layers[N_LAYERS];
	char why[256] = "";
	uint64_t closed;
	com_msg reply;
	com_hello h = {
		.job = (char *)"job",
		.rank = rank,
		.world = 2,
		.n_layers = N_LAYERS,
		.layers = layers,
		.agent_version = (char *)"test",
		.step = step,
		.incarnation = rank + 100,
		.last_window = last_window,
	};

	memcpy(layers, table, sizeof(layers));
	h.in_force.seq = seq;
	com_msg_init(&reply, COM_MSG_NONE);
	if (ctl_jobs_hello(f->jobs, (const uint8_t *)peer, strlen(peer), NULL,
		&h, now, &reply, why, sizeof(why)) != 0)
		fail_msg("hello refused: %s", why);
	assert_int_equal(reply.type, COM_MSG_WELCOME);
	closed = reply.u.welcome.windows_closed;
	com_msg_fini(&reply);
	return closed;
}

/* A heartbeat of rank 0 from peer "A"; returns the ack's windows_closed. */
static uint64_t
beat_closed(fixture *f, uint64_t step, uint64_t now)
{
	com_heartbeat hb = { .job = (char *)"job",
		.rank = 0,
		.step = step,
		.incarnation = 100 };
	char why[256] = "";
	uint64_t closed;
	com_msg reply;

	com_msg_init(&reply, COM_MSG_NONE);
	if (ctl_jobs_heartbeat(f->jobs, (const uint8_t *)"A", 1, NULL, &hb, now,
		&reply, why, sizeof(why)) != 0)
		fail_msg("heartbeat refused: %s", why);
	assert_int_equal(reply.type, COM_MSG_HEARTBEAT_ACK);
	closed = reply.u.heartbeat_ack.windows_closed;
	com_msg_fini(&reply);
	return closed;
}

/* Collectives every report of report_window carries (none: NULL). */
static const com_comm_sample *report_comm;
static uint32_t report_n_comm;

/* Rank r (from peer "A" or "B") reports window w with layer norms
 * `norm` (accordion's signal). */
static void
report_rank(fixture *f, uint32_t r, uint64_t w, double norm, uint64_t now)
{
	static const char *const peers[] = { "A", "B" };

	{
		com_layer_stats ls[N_LAYERS];
		char why[256] = "";
		com_msg reply;
		com_report rep = {
			.job = (char *)"job",
			.rank = r,
			.window = w,
			.first_step = 10 * w,
			.last_step = 10 * w + 9,
			.n_layers = N_LAYERS,
			.layers = ls,
			.timings = { .steps = 10, .step_ms = 100 },
			.lr = 0.1,
			.lr_next = 0.1,
			.seq_in_force = f->n_pub > 0 ? f->pub_seq[f->n_pub - 1]
						     : 0,
			.n_comm = report_n_comm,
			.comm = (com_comm_sample *)report_comm,
		};

		for (uint32_t l = 0; l < N_LAYERS; l++)
			ls[l] = (com_layer_stats){ .layer = l,
				.count = 32,
				.sum_sq = 1,
				.acc_norm = norm };
		com_msg_init(&reply, COM_MSG_NONE);
		if (ctl_jobs_report(f->jobs, (const uint8_t *)peers[r], 1, NULL,
			&rep, now, &reply, why, sizeof(why)) != 0)
			fail_msg("report refused: %s", why);
		com_msg_fini(&reply);
	}
}

/* Both ranks report window w. */
static void
report_window(fixture *f, uint64_t w, double norm, uint64_t now)
{
	report_rank(f, 0, w, norm, now);
	report_rank(f, 1, w, norm, now);
}

/* Lets the store acknowledge what it was handed, publishing it. */
static void
settle(fixture *f)
{
	wait_committed(f, ctl_store_flush(f->store));
}

/* Reports two metrics per window, one of them per layer. */
static int
metering_init(void *st, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	return 0;
}

static int
metering_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	out->n_metrics = 2;
	out->metrics[0] = (bellows_metric){ .name = "n_comm",
		.layer = -1,
		.value = w->n_comm };
	out->metrics[1] = (bellows_metric){ .name = "norm",
		.layer = 2,
		.value = w->layers[2].grad_norm };
	return 0;
}

static const bellows_policy_ops metering_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "metering",
	.summary = "reports metrics",
	.knobs = BELLOWS_KNOB_COMPRESSION,
	.init = metering_init,
	.on_window = metering_on_window,
};

static void
test_store_records_a_jobs_collectives_and_policy_metrics(void **state)
{
	fixture *f = *state;
	static const com_comm_sample comm[1] = {
		{ .bytes = 4096, .ms = 0.5, .count = 3 },
	};
	char text[128];

	f->cfg->jobs[0].policies[0].ops = &metering_ops;
	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	hello(f, "B", 1, 0, 0, 0, 1000);
	report_comm = comm;
	report_n_comm = 1;
	report_window(f, 0, 1.5, 1100);
	report_comm = NULL;
	report_n_comm = 0;
	settle(f);
	report_window(f, 1, 2.5, 1200);
	settle(f);
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(window || ':' || rank || ':' || bytes, ' ') "
	    "FROM (SELECT * FROM comm_samples ORDER BY rowid)");
	assert_string_equal(text, "0:0:4096 0:1:4096");
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(window || ':' || policy || ':' || name || ':' "
	    "|| ifnull(layer, '-') || ':' || value, ' ') FROM (SELECT * FROM "
	    "policy_metrics ORDER BY rowid)");
	assert_string_equal(text,
	    "0:accordion:n_comm:-:2.0 0:accordion:norm:2:1.5 "
	    "1:accordion:n_comm:-:0.0 1:accordion:norm:2:2.5");
}

static void
test_store_decisions_are_published_after_their_commit(void **state)
{
	fixture *f = *state;

	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	/* Decided, not yet published: the store has not answered. */
	assert_int_equal(f->n_pub, 0);
	settle(f);
	assert_int_equal(f->n_pub, 1);
	assert_int_equal(db_int(f->db, "SELECT seq FROM decisions"), 1);
	hello(f, "B", 1, 0, 0, 0, 1000);
	report_window(f, 0, 1.0, 1100);
	settle(f);
	assert_int_equal(f->n_pub, 2);
	assert_int_equal(f->pub_seq[1], 2);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM windows WHERE window = 0"),
	    N_LAYERS);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM timings"), 2);
}

static void
test_store_degraded_store_does_not_hold_up_decisions(void **state)
{
	fixture *f = *state;
	sqlite3 *other;

	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	hello(f, "B", 1, 0, 0, 0, 1000);
	settle(f);
	other = db_open(f->db);
	assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL,
			     NULL),
	    SQLITE_OK);
	report_window(f, 0, 1.0, 1100);
	assert_int_equal(f->n_pub, 1);
	wait_degraded(f);
	/* Released when the store degraded, and from then on at once. */
	assert_int_equal(f->n_pub, 2);
	report_window(f, 1, 1.0, 1200);
	assert_int_equal(f->n_pub, 3);
	assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(other);
	settle(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) || max(seq) FROM decisions"),
	    33);
}

/* The first daemon of a restart: ranks A and B (rank 0 and 1) record
 * windows 0..4 at times 1100... */
static void
record_five_windows(fixture *f)
{
	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	hello(f, "B", 1, 0, 0, 0, 1000);
	for (uint64_t w = 0; w < 5; w++) {
		report_window(f, w, 1.0, 1100 + w);
		settle(f);
	}
}

/* A daemon killed at stop_ms and started again at now_ms: the store
 * closes and the job table goes, as a killed daemon's would; a new
 * table recovers the one run from the history, and the store starts
 * again. The publications counted restart from 0. */
static void
restart_daemon(fixture *f, uint64_t stop_ms, uint64_t now_ms)
{
	ctl_store_close(&f->store, stop_ms);
	ctl_jobs_destroy(&f->jobs);
	f->n_pub = 0;
	new_jobs(f);
	assert_int_equal(ctl_jobs_recover(f->jobs, now_ms), 1);
	start_store(f);
}

static void
test_store_rebuilds_a_job_and_its_policy_history_after_a_restart(void **state)
{
	fixture *f = *state;
	char text[64];

	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	hello(f, "B", 1, 0, 0, 0, 1000);
	/* Windows 0..4; window 4 is the last before the "crash". */
	for (uint64_t w = 0; w < 5; w++) {
		report_window(f, w, 1.0 + 0.1 * (double)w, 1100 + w);
		settle(f);
	}
	assert_int_equal(f->n_pub, 6);
	restart_daemon(f, 2000, 5000);
	/* Both ranks come back with reports of window 5 queued. */
	hello(f, "A", 0, 50, 6, 6, 5000);
	hello(f, "B", 1, 50, 6, 6, 5000);
	assert_int_equal(f->n_pub, 0); /* nothing adopted or re-published */
	report_window(f, 5, 1.5, 5100);
	settle(f);
	report_window(f, 6, 1.6, 5200);
	settle(f);
	assert_int_equal(f->n_pub, 2);
	/* The sequence continues, and the check at window 6 found window
	 * 4's norms, recorded before the restart. */
	assert_int_equal(f->pub_seq[0], 7);
	assert_int_equal(f->pub_seq[1], 8);
	if (strncmp(f->last_reason,
		"window 6 vs window 4 (eta 0.5): 0 "
		"critical (level 2), 2 stable",
		60) != 0)
		fail_msg("unexpected reason '%s'", f->last_reason);
	assert_null(strstr(f->last_reason, "no norm"));
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM runs"), 1);
	assert_int_equal(db_int(f->db, "SELECT recoveries FROM runs"), 1);
	sync_events(f);
	db_text(f->db, text, sizeof(text),
	    "SELECT job FROM events WHERE kind = 'job_recovered'");
	assert_string_equal(text, "job");
}

/* Rank r's report of window w from its peer; returns ctl_jobs_report's
 * answer (0, or the refusal's code). */
static int
report_rc(fixture *f, uint32_t r, uint64_t w, uint64_t now)
{
	static const char *const peers[] = { "A", "B" };
	com_layer_stats ls[N_LAYERS];
	char why[256] = "";
	com_msg reply;
	int rc;
	com_report rep = {
		.job = (char *)"job",
		.rank = r,
		.window = w,
		.first_step = 10 * w,
		.last_step = 10 * w + 9,
		.n_layers = N_LAYERS,
		.layers = ls,
		.timings = { .steps = 10, .step_ms = 100 },
		.lr = 0.1,
		.lr_next = 0.1,
	};

	for (uint32_t l = 0; l < N_LAYERS; l++)
		ls[l] = (com_layer_stats){ .layer = l,
			.count = 32,
			.sum_sq = 1,
			.acc_norm = 1 };
	com_msg_init(&reply, COM_MSG_NONE);
	rc = ctl_jobs_report(f->jobs, (const uint8_t *)peers[r], 1, NULL, &rep,
	    now, &reply, why, sizeof(why));
	com_msg_fini(&reply);
	return rc;
}

/* bellowsd restarted after the ranks had gone 15 windows on: the windows
 * it had not closed are taken from the reports the agents send again,
 * closed in order and recorded late, with no decision; one no rank kept
 * is skipped, one only a rank kept is recorded with it alone, a repeat
 * is ignored, and the agents are told to keep their reports until the
 * late windows are in. */
static void
test_store_windows_a_restart_had_not_closed_are_recorded_late(void **state)
{
	fixture *f = *state;
	char text[128];

	record_five_windows(f);
	restart_daemon(f, 2000, 5000);
	/* The ranks are at window 20: windows 5..19 are late, and the
	 * agents are told to send them again. */
	assert_int_equal(hello(f, "A", 0, 200, 20, 6, 5000), 5);
	assert_int_equal(hello(f, "B", 1, 200, 20, 6, 5000), 5);
	/* Rank 0 kept 5..19 but 9; rank 1 5..19 but 9 and 12. */
	for (uint64_t w = 5; w < 20; w++)
		if (w != 9)
			assert_int_equal(report_rc(f, 0, w, 5100), 0);
	assert_int_equal(beat_closed(f, 200, 5100), 5);
	assert_int_equal(report_rc(f, 0, 6, 5100), 0); /* a repeat */
	for (uint64_t w = 5; w < 20; w++)
		if (w != 9 && w != 12)
			assert_int_equal(report_rc(f, 1, w, 5200), 0);
	/* Windows below the late ones are stale. */
	assert_int_equal(report_rc(f, 1, 4, 5200), BELLOWS_ESTATE);
	report_window(f, 20, 1.0, 5300);
	settle(f);
	assert_int_equal(beat_closed(f, 210, 5300), 21);
	/* Only window 20 was decided. */
	assert_int_equal(f->n_pub, 1);
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(window, ' ') FROM (SELECT window FROM "
	    "window_info WHERE late ORDER BY window)");
	assert_string_equal(text, "5 6 7 8 10 11 12 13 14 15 16 17 18 19");
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(window || ':' || ranks_reported || ':' || "
	    "complete, ' ') FROM window_info WHERE late AND (window = 12 OR "
	    "window = 13)");
	assert_string_equal(text, "12:1:0 13:2:1");
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM window_info WHERE NOT late "
			     "AND window >= 5"),
	    1);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM decisions WHERE window > 5 "
			     "AND window <= 20 AND source = 'window'"),
	    0);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM timings WHERE window >= 5 "
			     "AND window < 20"),
	    14 + 13);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM windows WHERE window = 19"),
	    N_LAYERS);
}

/* A late window has no decision to wait for, but the agents are told
 * they may drop its reports only once its rows are committed: until the
 * store acknowledges them, a daemon killed would lose it for good. The
 * acknowledgements are read only by settle(), so here the commits are
 * "delayed" until then. */
static void
test_store_late_windows_count_as_closed_once_their_rows_are_committed(
    void **state)
{
	fixture *f = *state;

	record_five_windows(f);
	restart_daemon(f, 2000, 5000);
	/* The ranks are at window 20: windows 5..19 are late. */
	assert_int_equal(hello(f, "A", 0, 200, 20, 6, 5000), 5);
	assert_int_equal(hello(f, "B", 1, 200, 20, 6, 5000), 5);
	settle(f);
	for (uint64_t w = 5; w < 20; w++)
		assert_int_equal(report_rc(f, 0, w, 5100), 0);
	/* Rank 1's reports close late windows 5..9, not yet committed. */
	for (uint64_t w = 5; w < 10; w++)
		assert_int_equal(report_rc(f, 1, w, 5200), 0);
	assert_int_equal(beat_closed(f, 200, 5200), 5);
	settle(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM window_info WHERE late"),
	    5);
	assert_int_equal(beat_closed(f, 200, 5201), 10);
	/* The rest, each in a batch of its own (more batches than a job
	 * tracks): the late range is done, its last rows still in flight. */
	for (uint64_t w = 10; w < 20; w++) {
		assert_int_equal(report_rc(f, 1, w, 5300), 0);
		ctl_store_flush(f->store);
	}
	assert_int_equal(beat_closed(f, 200, 5300), 10);
	settle(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM window_info WHERE late"),
	    15);
	assert_int_equal(beat_closed(f, 200, 5301), 20);
}

/* bellowsd is killed a second time while late windows are open: rank 1
 * had not rejoined the second daemon when window 20 closed without it
 * (window_timeout_ms) and was recorded, above late windows 5..19 that
 * wait for its reports. The store's mark (runs.windows_closed) says the
 * agents may still keep those: the third daemon takes them late again,
 * with the windows the ranks moved past meanwhile, and records every
 * window once; the repeats of window 20 are ignored. */
static void
test_store_late_windows_a_second_kill_left_open_are_taken_again(void **state)
{
	fixture *f = *state;
	ctl_jobs_counters c;
	char text[256];

	record_five_windows(f);
	/* The second daemon: rank 0 is back at window 20, 5..19 are late;
	 * rank 1 is not back yet. */
	restart_daemon(f, 2000, 5000);
	assert_int_equal(hello(f, "A", 0, 200, 20, 6, 5000), 5);
	for (uint64_t w = 5; w < 21; w++)
		assert_int_equal(report_rc(f, 0, w, 5100), 0);
	ctl_jobs_tick(f->jobs, 6200);
	settle(f);
	assert_int_equal(beat_closed(f, 210, 6200), 5);
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(window, ' ') FROM (SELECT window FROM "
	    "window_info ORDER BY window)");
	assert_string_equal(text, "0 1 2 3 4 20");
	/* The third daemon recovers after window 20 and finds 5..19
	 * missing above the mark; the ranks are at window 30. */
	restart_daemon(f, 7000, 8000);
	assert_int_equal(hello(f, "A", 0, 300, 30, 7, 8000), 5);
	assert_int_equal(hello(f, "B", 1, 300, 30, 7, 8000), 5);
	/* Below the mark is closed for good. */
	assert_int_equal(report_rc(f, 1, 4, 8100), BELLOWS_ESTATE);
	for (uint32_t r = 0; r < 2; r++)
		for (uint64_t w = 5; w < 30; w++)
			assert_int_equal(report_rc(f, r, w, 8100), 0);
	report_window(f, 30, 1.0, 8200);
	settle(f);
	assert_int_equal(beat_closed(f, 310, 8300), 31);
	ctl_jobs_get_counters(f->jobs, &c);
	assert_int_equal(c.duplicates, 2);
	assert_int_equal(c.windows_late, 24);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) = 31 AND count(DISTINCT window) "
			     "= 31 AND max(window) = 30 FROM window_info"),
	    1);
	db_text(f->db, text, sizeof(text),
	    "SELECT group_concat(window, ' ') FROM (SELECT window FROM "
	    "window_info WHERE late ORDER BY window)");
	assert_string_equal(text,
	    "5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 21 22 23 24 25 26 27 "
	    "28 29");
	/* With both ranks' reports; window 20 as it closed. */
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM window_info WHERE late AND "
			     "ranks_reported = 2 AND complete"),
	    24);
	assert_int_equal(db_int(f->db,
			     "SELECT ranks_reported FROM window_info WHERE "
			     "window = 20"),
	    1);
	/* The mark went with window 30's rows, when the late ones' commit
	 * was not acknowledged yet: never above what the agents were told. */
	assert_int_equal(db_int(f->db, "SELECT windows_closed FROM runs"), 5);
}

/* The store degrades while late windows are recorded: decisions stop
 * waiting for commits, but the agents' reports of a late window are its
 * only copy outside bellowsd, so windows_closed stays below the late
 * windows until the store writes them again. */
static void
test_store_a_degraded_store_holds_the_mark_below_late_windows(void **state)
{
	fixture *f = *state;

	record_five_windows(f);
	restart_daemon(f, 2000, 5000);
	assert_int_equal(hello(f, "A", 0, 200, 20, 6, 5000), 5);
	assert_int_equal(hello(f, "B", 1, 200, 20, 6, 5000), 5);
	for (uint64_t w = 5; w < 20; w++)
		assert_int_equal(report_rc(f, 0, w, 5100), 0);
	for (uint64_t w = 5; w < 10; w++)
		assert_int_equal(report_rc(f, 1, w, 5100), 0);
	settle(f);
	assert_int_equal(beat_closed(f, 200, 5100), 10);
	/* The store degrades; then windows 10..19 are recorded late. */
	ctl_store_fault_arm(13 /* SQLITE_FULL */, 1000);
	ctl_store_rank_event(f->store, 1, 1, CTL_STORE_RANK_REJOINED, 200, 101,
	    5150);
	ctl_store_flush(f->store);
	wait_degraded(f);
	for (uint64_t w = 10; w < 20; w++)
		assert_int_equal(report_rc(f, 1, w, 5200), 0);
	ctl_store_flush(f->store);
	assert_int_equal(beat_closed(f, 200, 5200), 10);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM window_info WHERE late"),
	    5);
	ctl_store_fault_arm(0, 0);
	settle(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM window_info WHERE late"),
	    15);
	assert_int_equal(beat_closed(f, 200, 5300), 20);
}

static void
test_store_windows_count_as_closed_once_their_close_is_committed(void **state)
{
	fixture *f = *state;

	new_jobs(f);
	start_store(f);
	assert_int_equal(hello(f, "A", 0, 0, 0, 0, 1000), 0);
	hello(f, "B", 1, 0, 0, 0, 1000);
	settle(f);
	report_window(f, 0, 1.0, 1100);
	/* Closed, but its decision waits for the commit: a daemon dying now
	 * would lose the window, so the ranks must keep its reports. */
	assert_int_equal(f->n_pub, 1);
	assert_int_equal(beat_closed(f, 10, 1101), 0);
	settle(f);
	assert_int_equal(f->n_pub, 2);
	assert_int_equal(beat_closed(f, 10, 1102), 1);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM window_info WHERE "
			     "window = 0"),
	    1);
}

static void
test_store_resent_reports_close_the_window_a_crash_left_open(void **state)
{
	fixture *f = *state;
	ctl_jobs_counters c;

	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	hello(f, "B", 1, 0, 0, 0, 1000);
	for (uint64_t w = 0; w < 3; w++) {
		report_window(f, w, 1.0 + 0.1 * (double)w, 1100 + w);
		settle(f);
	}
	/* Window 3: rank 0's report reached the daemon, rank 1's was on its
	 * way; then the daemon dies with the window open. */
	report_rank(f, 0, 3, 1.3, 1200);
	settle(f);
	assert_int_equal(f->n_pub, 4);
	restart_daemon(f, 2000, 5000);
	/* Both ranks have reported window 3; it is the first the history
	 * does not hold, so they send it (again). */
	assert_int_equal(hello(f, "A", 0, 40, 4, 4, 5000), 3);
	assert_int_equal(hello(f, "B", 1, 40, 4, 4, 5000), 3);
	report_rank(f, 0, 3, 1.3, 5100);
	/* Rank 0 lost this daemon too for a moment and resent it again. */
	report_rank(f, 0, 3, 1.3, 5110);
	settle(f);
	assert_int_equal(f->n_pub, 0);
	report_rank(f, 1, 3, 1.3, 5150);
	settle(f);
	assert_int_equal(f->n_pub, 1);
	assert_int_equal(f->pub_seq[0], 5);
	assert_int_equal(beat_closed(f, 41, 5200), 4);
	ctl_jobs_get_counters(f->jobs, &c);
	assert_int_equal(c.reports, 2);
	assert_int_equal(c.duplicates, 1);
	assert_int_equal(db_int(f->db,
			     "SELECT ranks_reported FROM window_info WHERE "
			     "window = 3"),
	    2);
	assert_int_equal(db_int(f->db,
			     "SELECT count(DISTINCT window) || count(*) FROM "
			     "windows"),
	    4 * 100 + 4 * N_LAYERS);
}

static void
test_store_rebuilds_accordion_from_windows_recorded_while_behind(void **state)
{
	fixture *f = *state;
	com_status_reply st;

	/* A queue of one metric row: the store is behind from the first
	 * window on, and every window's metric rows past the first are
	 * downsampled (all but every 8th window's dropped). */
	f->cfg->store.queue_rows = 1;
	new_jobs(f);
	f->check_windows = true;
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	hello(f, "B", 1, 0, 0, 0, 1000);
	for (uint64_t w = 0; w < 5; w++) {
		report_window(f, w, 1.0 + 0.1 * (double)w, 1100 + w);
		settle(f);
	}
	assert_int_equal(f->n_pub, 6);
	st = store_status(f);
	assert_true(st.store_dropped > 0);
	free(st.store_error);
	/* Timings were dropped; the windows the policies saw were not, and
	 * each was committed by the time its decision was. */
	assert_true(db_int(f->db, "SELECT count(*) FROM timings") < 10);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM window_info"), 5);
	assert_int_equal(db_int(f->db, "SELECT count(*) FROM windows"),
	    5 * N_LAYERS);
	assert_true(f->windows_checked > 0);
	assert_int_equal(f->windows_missing, 0);
	f->check_windows = false;
	restart_daemon(f, 2000, 5000);
	hello(f, "A", 0, 50, 6, 6, 5000);
	hello(f, "B", 1, 50, 6, 6, 5000);
	report_window(f, 5, 1.5, 5100);
	settle(f);
	report_window(f, 6, 1.6, 5200);
	settle(f);
	assert_int_equal(f->n_pub, 2);
	assert_int_equal(f->pub_seq[1], 8);
	/* Window 4, recorded while behind and not a multiple of 8, is what
	 * the check at window 6 compares with. */
	if (strncmp(f->last_reason,
		"window 6 vs window 4 (eta 0.5): 0 "
		"critical (level 2), 2 stable",
		60) != 0)
		fail_msg("unexpected reason '%s'", f->last_reason);
	assert_null(strstr(f->last_reason, "no norm"));
}

static void
test_store_ends_a_run_when_every_rank_leaves(void **state)
{
	fixture *f = *state;
	char why[64];

	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 1000);
	hello(f, "B", 1, 0, 0, 0, 1000);
	assert_int_equal(ctl_jobs_bye(f->jobs, (const uint8_t *)"A", 1, NULL,
			     &(com_bye){ .job = (char *)"job", .rank = 0 },
			     1100, why, sizeof(why)),
	    0);
	settle(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM runs WHERE ended_wall_ms "
			     "IS NULL"),
	    1);
	assert_int_equal(ctl_jobs_bye(f->jobs, (const uint8_t *)"B", 1, NULL,
			     &(com_bye){ .job = (char *)"job", .rank = 1 },
			     1100, why, sizeof(why)),
	    0);
	settle(f);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM runs WHERE ended_wall_ms "
			     "IS NULL"),
	    0);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM rank_events WHERE kind = "
			     "'left'"),
	    2);
	/* An ended run is not recovered. */
	ctl_store_close(&f->store, 2000);
	ctl_jobs_destroy(&f->jobs);
	new_jobs(f);
	assert_int_equal(ctl_jobs_recover(f->jobs, 5000), 0);
}

/* A Hello of launch `key` (also its routing id) from `client` resuming
 * rank 0 of `job` (world 2) at window w, step 10 w. Returns 0 when it
 * is welcomed, else the error it is answered with (the reason in why). */
static int
resume_hello(fixture *f, const char *job, const char *client, const char *key,
    uint64_t w, uint64_t now, char *why, size_t why_len)
{
	com_layer_info layers[N_LAYERS];
	com_msg reply;
	com_hello h = {
		.job = (char *)job,
		.world = 2,
		.n_layers = N_LAYERS,
		.layers = layers,
		.agent_version = (char *)"test",
		.step = 10 * w,
		.incarnation = 7,
		.last_window = w,
		.run_id = (char *)key,
		.resume = true,
	};
	int r;

	memcpy(layers, table, sizeof(layers));
	com_msg_init(&reply, COM_MSG_NONE);
	r = ctl_jobs_hello(f->jobs, (const uint8_t *)key, strlen(key), client,
	    &h, now, &reply, why, why_len);
	if (r == 0 && reply.type != COM_MSG_WELCOME)
		r = reply.type == COM_MSG_ERROR ? reply.u.error.code : -1;
	com_msg_fini(&reply);
	return r;
}

/* Repeats a resume Hello, as its agent would, until it is not told to
 * retry (at most 10,000 times, a millisecond apart). */
static int
resume_until_answered(fixture *f, const char *job, const char *client,
    const char *key, uint64_t w, char *why, size_t why_len)
{
	int r = BELLOWS_EBUSY;

	for (int i = 0; i < 10000 && r == BELLOWS_EBUSY; i++) {
		usleep(1000);
		r = resume_hello(f, job, client, key, w, 200, why, why_len);
	}
	return r;
}

static void
test_store_a_resume_reads_its_run_back_off_the_loop_one_per_client(void **state)
{
	fixture *f = *state;
	char why[512];
	com_msg rep;

	new_jobs(f);
	start_store(f);
	hello(f, "A", 0, 0, 0, 0, 0);
	hello(f, "B", 1, 0, 0, 0, 0);
	for (uint64_t w = 0; w < 6; w++)
		report_window(f, w, 1.0 + (double)w, 10 + w);
	for (uint32_t r = 0; r < 2; r++)
		assert_int_equal(ctl_jobs_bye(f->jobs,
				     (const uint8_t *)(r ? "B" : "A"), 1, NULL,
				     &(com_bye){ .job = (char *)"job",
					 .rank = r },
				     50, why, sizeof(why)),
		    0);
	settle(f);

	/* The first Hello starts the read-back and is told to retry. */
	assert_int_equal(resume_hello(f, "job", "alice", "two", 3, 100, why,
			     sizeof(why)),
	    BELLOWS_EBUSY);
	if (strstr(why, "read back for the resume, off the loop") == NULL)
		fail_msg("%s", why);
	/* Meanwhile alice may not resume another job; bob may. */
	assert_int_equal(resume_hello(f, "other", "alice", "x", 3, 101, why,
			     sizeof(why)),
	    BELLOWS_EBUSY);
	assert_string_equal(why,
	    "client alice already has 1 resume(s) being read back (job "
	    "'job'), the most one client may have; retry once it has joined");
	assert_int_equal(resume_hello(f, "other", "bob", "y", 3, 102, why,
			     sizeof(why)),
	    BELLOWS_EBUSY);
	assert_non_null(strstr(why, "read back for the resume, off the loop"));
	/* Another launch of the job waits, and the old launch's ranks
	 * (even one that was thought gone) move nothing of it. */
	assert_int_equal(resume_hello(f, "job", "bob", "three", 3, 103, why,
			     sizeof(why)),
	    BELLOWS_EBUSY);
	assert_non_null(strstr(why,
	    "job 'job' is being resumed by launch 'two' at window 3"));
	com_msg_init(&rep, COM_MSG_NONE);
	assert_int_equal(ctl_jobs_heartbeat(f->jobs, (const uint8_t *)"A", 1,
			     NULL,
			     &(com_heartbeat){ .job = (char *)"job",
				 .rank = 0,
				 .step = 70,
				 .incarnation = 100 },
			     104, &rep, why, sizeof(why)),
	    BELLOWS_ENOTJOINED);
	assert_non_null(strstr(why,
	    "job 'job' is being resumed by launch 'two': rank 0 is not "
	    "joined"));
	com_msg_fini(&rep);

	/* Once read back, the launch's next Hello takes the run: run 1
	 * resumed at window 3; bob's job without a history starts anew. */
	assert_int_equal(resume_until_answered(f, "job", "alice", "two", 3, why,
			     sizeof(why)),
	    0);
	assert_int_equal(resume_until_answered(f, "other", "bob", "y", 3, why,
			     sizeof(why)),
	    0);
	settle(f);
	assert_int_equal(db_int(f->db,
			     "SELECT resumes FROM runs WHERE job = 'job'"),
	    1);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM superseded_window_info"),
	    3);
	assert_int_equal(db_int(f->db,
			     "SELECT count(*) FROM runs WHERE job = 'other'"),
	    1);
}

/* ---- configuration --------------------------------------------------------
 */

static int
load_text(fixture *f, const char *text, char *err, size_t len)
{
	ctl_config *cfg = NULL;
	int r = ctl_config_parse(text, strlen(text), "t.yaml", &cfg, err, len);

	if (r == 0) {
		ctl_config_destroy(&f->cfg);
		f->cfg = cfg;
	}
	return r;
}

static void
test_store_settings_parse_with_defaults_and_refusals(void **state)
{
	fixture *f = *state;
	char err[CTL_CONFIG_ERR_MAX];

	assert_int_equal(load_text(f,
			     "jobs:\n  - policies:\n      - type: fixed\n", err,
			     sizeof(err)),
	    0);
	assert_int_equal(f->cfg->store.max_windows_per_run, 0);
	assert_int_equal(f->cfg->store.max_age_days, 0);
	assert_int_equal(f->cfg->store.keep_every, 10);
	assert_int_equal(f->cfg->store.batch_rows, 4096);
	assert_int_equal(f->cfg->store.queue_rows, 262144);
	assert_int_equal(load_text(f,
			     "store: {max_windows_per_run: 500, "
			     "max_age_days: 30, keep_every: 4, batch_rows: 1, "
			     "queue_rows: 5000}\n"
			     "jobs:\n  - policies:\n      - type: fixed\n",
			     err, sizeof(err)),
	    0);
	assert_int_equal(f->cfg->store.max_windows_per_run, 500);
	assert_int_equal(f->cfg->store.max_age_days, 30);
	assert_int_equal(f->cfg->store.keep_every, 4);
	assert_int_equal(f->cfg->store.batch_rows, 1);
	assert_int_equal(f->cfg->store.queue_rows, 5000);
	assert_int_equal(load_text(f,
			     "store: {keep_evry: 4}\n"
			     "jobs:\n  - policies:\n      - type: fixed\n",
			     err, sizeof(err)),
	    BELLOWS_ECONFIG);
	assert_non_null(strstr(err,
	    "t.yaml:1:9: unknown key 'keep_evry' in "
	    "store"));
	assert_int_equal(load_text(f,
			     "store: {queue_rows: 10}\n"
			     "jobs:\n  - policies:\n      - type: fixed\n",
			     err, sizeof(err)),
	    BELLOWS_ECONFIG);
	assert_non_null(strstr(err, "t.yaml:1:21:"));
	assert_non_null(strstr(err, "queue_rows"));
}

static void
test_store_functions_are_no_ops_without_a_store(void **state)
{
	com_status_reply st = { 0 };

	(void)state;
	assert_int_equal(ctl_store_run_begin(NULL, "j", "", 1, table, 1, NULL,
			     1, 0),
	    0);
	assert_int_equal(ctl_store_decision(NULL, 1, NULL, NULL,
			     CTL_STORE_WINDOW, 0),
	    0);
	assert_int_equal(ctl_store_flush(NULL), 0);
	assert_false(ctl_store_waits(NULL));
	assert_int_equal(ctl_store_status(NULL, &st), 0);
	assert_false(st.store_degraded);
	assert_string_equal(st.store_error, "no history database (--no-db)");
	free(st.store_error);
	ctl_store_close(NULL, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_store_creates_the_current_schema_in_an_empty_file),
		T(test_store_path_for_status_is_absolute),
		T(test_store_creates_the_file_and_its_wal_with_store_mode),
		T(test_store_migrates_a_version_1_file_keeping_its_rows),
		T(test_store_migrates_a_version_2_file_keeping_its_rows),
		T(test_store_adds_the_columns_of_new_statistics_to_an_old_file),
		T(test_store_marks_a_window_recorded_late),
		T(test_store_round_trips_every_statistic_of_the_table_by_name),
		T(test_store_history_columns_are_where_the_window_puts_them),
		T(test_store_refuses_a_newer_schema_with_a_clear_message),
		T(test_store_refuses_a_file_that_is_not_a_bellows_history),
		T(test_store_runs_without_history_when_the_file_is_corrupt),
		T(test_store_acknowledges_a_decision_only_after_its_commit),
		T(test_store_records_runs_layers_windows_and_what_changed),
		T(test_store_records_configurations_and_events_with_their_hash),
		T(test_store_degrades_on_a_locked_file_and_writes_everything_after),
		T(test_store_stops_holding_decisions_when_commits_lag),
		T(test_store_survives_an_injected_full_disk),
		T(test_store_a_windows_timings_land_with_its_window_or_not_at_all),
		T(test_store_survives_a_real_full_disk_and_catches_up),
		T(test_store_waits_out_a_read_only_directory),
		T(test_store_downsamples_metrics_when_behind_and_counts_them),
		T(test_store_a_decision_cuts_a_long_transaction_of_statistics_short),
		T(test_store_checkpoints_the_wal_in_the_background),
		T(test_store_thins_old_windows_past_the_per_run_limit),
		T(test_store_thins_windows_older_than_the_age_limit),
		T(test_store_recovers_live_runs_with_their_tail_and_windows),
		T(test_store_resume_reads_a_run_back_and_supersedes_its_later_windows),
		T(test_store_round_trips_new_statistics_collectives_metrics_calibration),
		T(test_store_round_trips_a_residual_plan),
		T(test_store_decisions_are_published_after_their_commit),
		T(test_store_records_a_jobs_collectives_and_policy_metrics),
		T(test_store_degraded_store_does_not_hold_up_decisions),
		T(test_store_rebuilds_a_job_and_its_policy_history_after_a_restart),
		T(test_store_windows_a_restart_had_not_closed_are_recorded_late),
		T(test_store_late_windows_count_as_closed_once_their_rows_are_committed),
		T(test_store_late_windows_a_second_kill_left_open_are_taken_again),
		T(test_store_recovers_the_windows_missing_above_the_agents_mark),
		T(test_store_a_degraded_store_holds_the_mark_below_late_windows),
		T(test_store_windows_count_as_closed_once_their_close_is_committed),
		T(test_store_resent_reports_close_the_window_a_crash_left_open),
		T(test_store_rebuilds_accordion_from_windows_recorded_while_behind),
		T(test_store_ends_a_run_when_every_rank_leaves),
		T(test_store_a_resume_reads_its_run_back_off_the_loop_one_per_client),
		T(test_store_settings_parse_with_defaults_and_refusals),
		T(test_store_functions_are_no_ops_without_a_store),
#undef T
	};

	ctl_log_set_level(CTL_LOG_ERROR);
	return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
