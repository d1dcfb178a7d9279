/* store - the SQLite history and its writer thread, see store.h.
 *
 * Three threads touch the store. The event loop fills a batch (typed row
 * arrays, owned by the batch) and hands it to the writer by sending its
 * pointer over an inproc PAIR socket; from then on the writer owns it.
 * The writer appends batches to its queue and writes, first, the firm
 * rows (decisions, events, runs, windows...) of everything queued in one
 * transaction, with the timings rows queued up to them (a window's
 * timings commit with the window: a kill between two commits must not
 * leave a closed window without a rank's timings), telling the loop at
 * once that those decisions are durable (DURABLE); then the other metric
 * rows, a transaction of at most batch_rows
 * rows at a time, acknowledging each (ACK: the highest ticket done and the
 * rows it covered, so the loop knows how much is in flight), and looking
 * for new decisions every STORE_MULTI rows: a transaction under way
 * commits early when one arrives. A decision thus waits for STORE_MULTI
 * rows of statistics at most, and for the timings of its window not yet
 * written, never for a backlog of other statistics. A
 * checkpointer thread, poked by the writer shortly after a decision (or
 * by its WAL hook when the WAL is large), copies the WAL back into the
 * database with its own short-lived connection: a
 * checkpoint syncs the disk, and doing it beside the writer keeps that
 * out of the commit path of decisions.
 *
 * Failure model: bellowsd may be killed at any moment (SIGKILL, a crash);
 * WAL with synchronous=NORMAL makes every committed transaction survive
 * that. A power loss may lose the last transactions committed before it
 * (they are in the WAL, not yet synced): the price of not syncing on each
 * decision, documented in docs/history.md.
 *
 * When a transaction fails with an error of the environment (disk full,
 * I/O error, busy beyond the busy timeout, read-only, corrupt, cannot
 * open), the writer rolls back, closes its connection, tells the loop
 * (DEGRADED) and retries with backoff, reopening the file each time, the
 * batches kept in order. Any other error is a bug: the batch at the head
 * is dropped and logged so that the rest are not held up.
 *
 * This file is the loop's side: the batches, the messages from the
 * writer, the public recording API. The schema and opening a connection
 * are in store_schema.c, the writer and checkpointer threads in
 * store_writer.c, reading runs back in store_recover.c; store_int.h is
 * what they share.
 */
#include "store_int.h"

#include "common/clock.h"
#include "policyhost/log.h"
#include "controller/ctl_window.h"
#include "store_fault.h"
#include "ctl_window.h"

#include <bellows/error.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

/* ---- helpers --------------------------------------------------------- */

_Noreturn void
store_oom(void)
{
	ctl_log(CTL_LOG_ERROR, "store", "out of memory");
	abort();
}

/* Gives row r its own copies of the array statistics its view points to
 * (the window's, freed when it closes). */
static void
store_copy_arrays(store_stat_row *r)
{
	uint32_t n, len, total = 0, at = 0;
	const hist_array *ha = hist_arrays(&n);

	for (uint32_t k = 0; k < n; k++)
		if (hist_array_get(&ha[k], &r->v, &len) != NULL)
			total += ha[k].arr->len;
	if (total == 0)
		return;
	if ((r->arrays = malloc(sizeof(uint64_t) * total)) == NULL)
		store_oom();
	for (uint32_t k = 0; k < n; k++) {
		const uint64_t *v = hist_array_get(&ha[k], &r->v, &len);

		if (v == NULL || len != ha[k].arr->len) {
			hist_array_set(&ha[k], &r->v, NULL);
			continue;
		}
		memcpy(r->arrays + at, v, sizeof(uint64_t) * len);
		hist_array_set(&ha[k], &r->v, r->arrays + at);
		at += len;
	}
}

char *
store_strdup(const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		store_oom();
	return d;
}

void
store_grow(void *pv, uint32_t *cap, size_t size)
{
	uint32_t nc = *cap ? *cap * 2 : 16;
	void *old, *v;

	memcpy(&old, pv, sizeof(old));
	v = realloc(old, (size_t)nc * size);
	if (v == NULL)
		store_oom();
	memcpy(pv, &v, sizeof(v));
	*cap = nc;
}

void
ctl_store_hash(const char *text, size_t len, char out[CTL_STORE_HASH_LEN])
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)text[i];
		h *= 0x100000001b3ull;
	}
	snprintf(out, CTL_STORE_HASH_LEN, "%016" PRIx64, h);
}

void
store_batch_free(store_batch *b)
{
	if (b == NULL)
		return;
	for (uint32_t i = 0; i < b->files.n; i++) {
		free(b->files.v[i].path);
		free(b->files.v[i].text);
	}
	for (uint32_t i = 0; i < b->runs.n; i++) {
		free(b->runs.v[i].job);
		free(b->runs.v[i].run_key);
	}
	for (uint32_t i = 0; i < b->updates.n; i++)
		free(b->updates.v[i].run_key);
	for (uint32_t i = 0; i < b->stats.n; i++)
		free(b->stats.v[i].arrays);
	for (uint32_t i = 0; i < b->layers.n; i++)
		free(b->layers.v[i].name);
	for (uint32_t i = 0; i < b->decisions.n; i++)
		com_decision_fini(&b->decisions.v[i].d);
	for (uint32_t i = 0; i < b->metrics.n; i++)
		free(b->metrics.v[i].policy);
	for (uint32_t i = 0; i < b->events.n; i++) {
		free(b->events.v[i].job);
		free(b->events.v[i].kind);
		free(b->events.v[i].text);
		free(b->events.v[i].hash);
	}
	free(b->files.v);
	free(b->runs.v);
	free(b->layers.v);
	free(b->ranks.v);
	free(b->infos.v);
	free(b->stats.v);
	free(b->timings.v);
	free(b->comms.v);
	free(b->metrics.v);
	free(b->decisions.v);
	free(b->changes.v);
	free(b->events.v);
	free(b->updates.v);
	free(b);
}

/* ---- the loop's side --------------------------------------------------- */

static void store_add_event(ctl_store *s, const char *kind, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

static void
store_add_event(ctl_store *s, const char *kind, const char *fmt, ...)
{
	char text[CTL_EVENT_TEXT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (s->events != NULL)
		ctl_events_add(s->events, kind, NULL, "%s", text);
}

static atomic_uint store_serial; /* names the inproc endpoints */

static int
store_sockets(ctl_store *s, void *zctx)
{
	unsigned n = atomic_fetch_add(&store_serial, 1);
	char ep[64], ck[64];
	int zero = 0, one = 1;

	/* Not the address: a store opened after another was freed may get
	 * the same one while the old endpoint is still being unbound. */
	snprintf(ep, sizeof(ep), "inproc://bellows-store-%u", n);
	snprintf(ck, sizeof(ck), "inproc://bellows-checkpoint-%u", n);
	s->sock = zmq_socket(zctx, ZMQ_PAIR);
	s->w.sock = zmq_socket(zctx, ZMQ_PAIR);
	s->w.poke = zmq_socket(zctx, ZMQ_PAIR);
	s->ckpt_sock = zmq_socket(zctx, ZMQ_PAIR);
	if (s->sock == NULL || s->w.sock == NULL || s->w.poke == NULL ||
	    s->ckpt_sock == NULL)
		return BELLOWS_ESYS;
	/* Batches and acks are bounded by the store's own row accounting:
	 * the socket must never refuse one. Pokes coalesce. */
	zmq_setsockopt(s->sock, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->sock, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->w.sock, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->w.sock, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->w.poke, ZMQ_SNDHWM, &one, sizeof(one));
	zmq_setsockopt(s->ckpt_sock, ZMQ_RCVHWM, &one, sizeof(one));
	zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s->w.sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s->w.poke, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s->ckpt_sock, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_bind(s->sock, ep) != 0 || zmq_connect(s->w.sock, ep) != 0 ||
	    zmq_bind(s->ckpt_sock, ck) != 0 || zmq_connect(s->w.poke, ck) != 0)
		return BELLOWS_ESYS;
	return 0;
}

static void
store_close_sockets(ctl_store *s)
{
	void **socks[] = { &s->sock, &s->w.sock, &s->w.poke, &s->ckpt_sock };

	for (size_t i = 0; i < sizeof(socks) / sizeof(socks[0]); i++) {
		if (*socks[i] != NULL)
			zmq_close(*socks[i]);
		*socks[i] = NULL;
	}
}

/* `path` made absolute against the working directory of the moment (a
 * tool on the same machine opens the file by it). NULL when out of
 * memory or when the working directory cannot be read. */
static char *
store_abs_path(const char *path)
{
	char cwd[PATH_MAX], *p;
	size_t n;

	if (path[0] == '/')
		return strdup(path);
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		return NULL;
	n = strlen(cwd) + 1 + strlen(path) + 1;
	if ((p = malloc(n)) != NULL)
		snprintf(p, n, "%s%s%s", cwd,
		    cwd[strlen(cwd) - 1] == '/' ? "" : "/", path);
	return p;
}

int
ctl_store_open(const char *path, void *zctx, const ctl_store_conf *conf,
    uint64_t instance, ctl_events *events, ctl_store **ret_store)
{
	ctl_store *s = calloc(1, sizeof(*s));
	int64_t max_id = 0;
	int r;

	if (s == NULL)
		return BELLOWS_ENOMEM;
	s->conf = *conf;
	s->w.conf = *conf;
	s->instance = instance;
	s->events = events;
	s->next_ticket = 1;
	if ((s->w.path = strdup(path)) == NULL) {
		free(s);
		return BELLOWS_ENOMEM;
	}
	/* Without it STATUS names no file: nothing else depends on it. */
	s->abs_path = store_abs_path(path);
	if ((r = store_sockets(s, zctx)) != 0) {
		store_close_sockets(s);
		free(s->abs_path);
		free(s->w.path);
		free(s);
		return r;
	}
	if (store_db_open(&s->w) == 0 &&
	    store_query_int(&s->w, "SELECT coalesce(max(id), 0) FROM runs",
		&max_id) == 0) {
		s->next_run = max_id + 1;
		ctl_log(CTL_LOG_INFO, "store",
		    "history in '%s' (schema version %d)", path,
		    CTL_STORE_SCHEMA_VERSION);
	} else {
		/* Without the file's ids, wall-clock milliseconds stay above
		 * any id handed out before and are unique per daemon. */
		store_db_close(&s->w);
		s->next_run = (int64_t)com_clock_wall_ms();
		s->failed = true;
		s->w.failing = true;
		s->w.fail_since_ms = com_clock_ms();
		s->w.backoff_ms = STORE_RETRY_MIN_MS;
		s->w.retry_at_ms = s->w.fail_since_ms + STORE_RETRY_MIN_MS;
		snprintf(s->error, sizeof(s->error), "%s", s->w.error);
		ctl_log(CTL_LOG_ERROR, "store",
		    "%s; running without history until it can be written "
		    "(retrying)",
		    s->error);
		store_add_event(s, CTL_EVENT_STORE_DEGRADED, "%s", s->error);
	}
	*ret_store = s;
	return 0;
}

int
ctl_store_start(ctl_store *s)
{
	if (pthread_create(&s->checkpointer, NULL, store_checkpointer_main,
		s) != 0)
		return BELLOWS_ESYS;
	s->checkpointer_started = true;
	if (pthread_create(&s->writer, NULL, store_writer_main, &s->w) != 0)
		return BELLOWS_ESYS;
	s->writer_started = true;
	return 0;
}

static void store_on_socket(ctl_loop *loop, void *arg);

int
ctl_store_attach(ctl_store *s, ctl_loop *loop)
{
	int r = ctl_loop_add_socket(loop, s->sock, store_on_socket, s);

	if (r == 0)
		s->attached = true;
	return r;
}

void
ctl_store_set_durable_fn(ctl_store *s, ctl_store_durable_fn *fn, void *arg)
{
	s->durable = fn;
	s->durable_arg = arg;
}

bool
ctl_store_waits(const ctl_store *s)
{
	return s != NULL && s->writer_started && !s->failed && !s->slow;
}

static void
store_send(ctl_store *s, const store_msg *m)
{
	while (zmq_send(s->sock, m, sizeof(*m), 0) < 0) {
		if (zmq_errno() != EINTR) {
			ctl_log(CTL_LOG_ERROR, "store",
			    "cannot reach the writer: %s",
			    zmq_strerror(zmq_errno()));
			if (m->type == STORE_MSG_BATCH)
				store_batch_free(m->batch);
			return;
		}
	}
}

void
ctl_store_set_conf(ctl_store *s, const ctl_store_conf *conf)
{
	store_msg m = { .type = STORE_MSG_CONF };

	if (s == NULL)
		return;
	s->conf = *conf;
	m.conf = *conf;
	if (s->writer_started)
		store_send(s, &m);
	else
		s->w.conf = *conf;
}

/* Reports metric rows dropped since the last report, at most once a
 * second, as an event (and a log line a minute). */
static void
store_note_drops(ctl_store *s)
{
	uint64_t now = com_clock_ms();

	if (s->dropped_note == 0 || now - s->last_note_ms < STORE_NOTE_MS)
		return;
	store_add_event(s, CTL_EVENT_METRICS_DROPPED,
	    "%" PRIu64 " metric rows not written (%" PRIu64
	    " in all): the store is %s",
	    s->dropped_note, s->dropped_total,
	    s->failed || s->slow ? "degraded" : "behind");
	if (s->last_drop_log_ms == 0 ||
	    now - s->last_drop_log_ms >= STORE_DROP_LOG_MS) {
		ctl_log(CTL_LOG_WARN, "store",
		    "%" PRIu64 " metric rows not written so far (the store "
		    "is %s)",
		    s->dropped_total,
		    s->failed || s->slow ? "degraded" : "behind");
		s->last_drop_log_ms = now;
	}
	s->last_note_ms = now;
	s->dropped_note = 0;
}

uint64_t
ctl_store_flush(ctl_store *s)
{
	store_msg m = { .type = STORE_MSG_BATCH };
	store_batch *b;

	if (s == NULL)
		return 0;
	store_note_drops(s);
	b = s->cur;
	if (b == NULL || b->rows == 0)
		return s->sent_ticket;
	s->cur = NULL;
	s->next_ticket++;
	s->sent_ticket = b->ticket;
	s->rows_in_flight += b->rows;
	s->metric_in_flight += b->metric_rows;
	m.batch = b;
	store_send(s, &m);
	return s->sent_ticket;
}

static store_batch *
store_cur(ctl_store *s)
{
	if (s->cur == NULL) {
		s->cur = calloc(1, sizeof(*s->cur));
		if (s->cur == NULL)
			store_oom();
		s->cur->ticket = s->next_ticket;
	}
	return s->cur;
}

/* Counts rows added to the open batch and flushes it when full. */
static void
store_added(ctl_store *s, uint32_t rows, uint32_t metric_rows)
{
	s->cur->rows += rows;
	s->cur->metric_rows += metric_rows;
	if (s->cur->rows >= s->conf.batch_rows)
		ctl_store_flush(s);
}

/* Whether `rows` metric rows of `window` are written: all while the
 * writer keeps up, every STORE_THIN_EVERY-th window while it is up to
 * queue_rows behind, none beyond (counted). */
static bool
store_keep_metrics(ctl_store *s, uint64_t window, uint32_t rows)
{
	uint64_t in_flight = s->metric_in_flight +
	    (s->cur != NULL ? s->cur->metric_rows : 0) + rows;
	uint64_t q = s->conf.queue_rows;

	if (in_flight <= q ||
	    (in_flight <= 2 * q && window % STORE_THIN_EVERY == 0))
		return true;
	s->dropped_total += rows;
	s->dropped_note += rows;
	return false;
}

int64_t
ctl_store_run_begin(ctl_store *s, const char *job, const char *run_key,
    uint32_t world, const com_layer_info *layers, uint32_t n_layers,
    const ctl_config *cfg, uint64_t first_seq, uint64_t wall_ms)
{
	store_batch *b;
	int64_t id;

	if (s == NULL)
		return 0;
	ctl_store_config(s, cfg);
	b = store_cur(s);
	id = s->next_run++;
	*STORE_PUSH(b->runs) = (store_run_row){
		.id = id,
		.job = store_strdup(job),
		.run_key = store_strdup(run_key != NULL ? run_key : ""),
		.world = world,
		.n_layers = n_layers,
		.wall_ms = wall_ms,
		.instance = s->instance,
		.first_seq = first_seq,
	};
	memcpy(b->runs.v[b->runs.n - 1].hash, s->hash, sizeof(s->hash));
	for (uint32_t l = 0; l < n_layers; l++) {
		store_layer_row *r = STORE_PUSH(b->layers);

		*r = (store_layer_row){
			.run = id,
			.idx = l,
			.name = store_strdup(layers[l].name),
			.numel = layers[l].numel,
			.ndim = layers[l].ndim,
		};
		memcpy(r->shape, layers[l].shape, sizeof(r->shape));
	}
	/* A run and its layers are one unit: no flush in between. */
	b->rows += 1 + n_layers;
	return id;
}

/* Queues one update of a run's row (row.run set) in the current batch;
 * nothing without a store or for run 0. */
static void
store_push_update(ctl_store *s, store_update_row row)
{
	store_batch *b;

	if (s == NULL || row.run == 0)
		return;
	b = store_cur(s);
	*STORE_PUSH(b->updates) = row;
	store_added(s, 1, 0);
}

void
ctl_store_run_end(ctl_store *s, int64_t run, uint64_t wall_ms)
{
	store_push_update(s,
	    (store_update_row){
		.run = run,
		.kind = wall_ms != 0 ? STORE_UPDATE_END : STORE_UPDATE_REOPEN,
		.wall_ms = wall_ms,
	    });
}

void
ctl_store_run_recovered(ctl_store *s, int64_t run)
{
	store_push_update(s,
	    (store_update_row){
		.run = run,
		.kind = STORE_UPDATE_RECOVERED,
	    });
}

void
ctl_store_run_closed(ctl_store *s, int64_t run, uint64_t windows_closed)
{
	store_push_update(s,
	    (store_update_row){
		.run = run,
		.kind = STORE_UPDATE_CLOSED,
		.window = windows_closed,
	    });
}

void
ctl_store_rank_event(ctl_store *s, int64_t run, uint32_t rank,
    ctl_store_rank_kind kind, uint64_t step, uint64_t incarnation,
    uint64_t wall_ms)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	b = store_cur(s);
	*STORE_PUSH(b->ranks) = (store_rank_row){
		.run = run,
		.rank = rank,
		.wall_ms = wall_ms,
		.kind = kind,
		.step = step,
		.incarnation = incarnation,
	};
	store_added(s, 1, 0);
}

void
ctl_store_timing(ctl_store *s, int64_t run, uint64_t window, uint32_t rank,
    const com_timings *t)
{
	store_batch *b;

	if (s == NULL || run == 0 || !store_keep_metrics(s, window, 1))
		return;
	b = store_cur(s);
	*STORE_PUSH(b->timings) = (store_timing_row){
		.run = run,
		.window = window,
		.rank = rank,
		.t = *t,
	};
	store_added(s, 1, 1);
}

uint64_t
ctl_store_window(ctl_store *s, int64_t run, const bellows_window *w,
    uint32_t ranks_expected, uint32_t closed, const com_decision *in_force,
    uint64_t wall_ms)
{
	store_batch *b;
	uint32_t n_comm;
	uint64_t ticket;

	if (s == NULL || run == 0)
		return 0;
	/* window_info and the per-layer rows are what recovery replays into
	 * the policies: firm rows, never dropped, handed over ahead of the
	 * decision answering the window, so committed no later than it. The
	 * collectives are O(ranks), like timings: metric rows. */
	n_comm = w->n_comm > 0 && store_keep_metrics(s, w->window, w->n_comm)
	    ? w->n_comm
	    : 0;
	b = store_cur(s);
	ticket = b->ticket;
	*STORE_PUSH(b->infos) = (store_info_row){
		.run = run,
		.v = *w,
		.ranks_expected = ranks_expected,
		.complete = (closed & CTL_STORE_CLOSED_COMPLETE) != 0,
		.late = (closed & CTL_STORE_CLOSED_LATE) != 0,
		.wall_ms = wall_ms,
		.state_batch_size = in_force->batch_size,
		.state_threshold = in_force->size_threshold,
		.state_off = in_force->compression_off,
		.state_apply = in_force->apply_step,
		.state_calibrate = in_force->calibrate_steps,
	};
	/* The rows own no memory: nothing they point to is kept. */
	b->infos.v[b->infos.n - 1].v.job = NULL;
	b->infos.v[b->infos.n - 1].v.layers = NULL;
	b->infos.v[b->infos.n - 1].v.comm = NULL;
	for (uint32_t l = 0; l < w->n_layers; l++) {
		store_stat_row *r = STORE_PUSH(b->stats);

		*r = (store_stat_row){
			.run = run,
			.window = w->window,
			.layer = l,
			.v = w->layers[l],
		};
		r->v.name = NULL;
		r->v.shape = NULL;
		store_copy_arrays(r);
	}
	for (uint32_t i = 0; i < n_comm; i++) {
		const bellows_comm_sample *c = &w->comm[i];

		*STORE_PUSH(b->comms) = (store_comm_row){
			.run = run,
			.window = w->window,
			.rank = c->rank,
			.bytes = c->bytes,
			.ms = c->ms,
			.count = c->count,
			.compressed = c->compressed,
		};
	}
	/* The window's rows stay in one batch. */
	store_added(s, 1 + w->n_layers + n_comm, n_comm);
	return ticket;
}

void
ctl_store_policy_metrics(ctl_store *s, int64_t run, uint64_t window,
    const com_metric *metrics, uint32_t n)
{
	store_batch *b;

	if (s == NULL || run == 0 || n == 0 ||
	    !store_keep_metrics(s, window, n))
		return;
	b = store_cur(s);
	for (uint32_t i = 0; i < n; i++) {
		store_metric_row *r = STORE_PUSH(b->metrics);

		*r = (store_metric_row){
			.run = run,
			.window = window,
			.policy = store_strdup(
			    metrics[i].policy != NULL ? metrics[i].policy : ""),
			.layer = metrics[i].layer,
			.value = metrics[i].value,
		};
		snprintf(r->name, sizeof(r->name), "%s",
		    metrics[i].name != NULL ? metrics[i].name : "");
	}
	store_added(s, n, n);
}

static bool
store_differs(double a, double b)
{
	return a != b && !(isnan(a) && isnan(b));
}

static void
store_change(store_batch *b, int64_t run, uint64_t seq, const char *knob,
    int64_t layer, bool has_old, double old, double now)
{
	*STORE_PUSH(b->changes) = (store_change_row){
		.run = run,
		.seq = seq,
		.knob = knob,
		.layer = layer,
		.has_old = has_old,
		.old = old,
		.now = now,
	};
	b->rows++;
}

/* Layer l's residual plan in d: its group, rows and cols (the default
 * plan's when d has none). */
static void
store_resid_of(const com_decision *d, uint32_t l, double ret[3])
{
	bool plan = d != NULL && !com_resid_plan_is_default(d) &&
	    l < d->n_layers;

	ret[0] = plan ? (double)d->resid_group[l] : (double)l;
	ret[1] = plan ? d->resid_rows[l] : 1.0;
	ret[2] = plan ? d->resid_cols[l] : 1.0;
}

/* The residual plan's rows of decision_changes: per layer whose group
 * (knob resid_group), kept row or column fraction changed. */
static void
store_resid_changes(store_batch *b, int64_t run, const com_decision *d,
    const com_decision *prev)
{
	static const char *const knob[3] = { "resid_group", "resid_rows",
		"resid_cols" };

	for (uint32_t l = 0; l < d->n_layers; l++) {
		double now[3], old[3];

		store_resid_of(d, l, now);
		store_resid_of(prev, l, old);
		for (int k = 0; k < 3; k++)
			if (store_differs(now[k], old[k]))
				store_change(b, run, d->seq, knob[k], l,
				    prev != NULL, old[k], now[k]);
	}
}

/* Rows of decision_changes: d against prev, or against the blank state
 * (with no old value) for a run's first decision. */
static void
store_changes(store_batch *b, int64_t run, const com_decision *d,
    const com_decision *prev)
{
	bool has = prev != NULL;

	for (uint32_t l = 0; l < d->n_layers; l++) {
		bool in = has && l < prev->n_layers;
		double lv = in ? prev->level[l] : 0;
		double eb = in ? prev->error_bound[l] : 0;

		if (store_differs(d->level[l], lv))
			store_change(b, run, d->seq, "level", l, in, lv,
			    d->level[l]);
		if (store_differs(d->error_bound[l], eb))
			store_change(b, run, d->seq, "error_bound", l, in, eb,
			    d->error_bound[l]);
	}
	if (d->batch_size != (has ? prev->batch_size : 0))
		store_change(b, run, d->seq, "batch_size", -1, has,
		    has ? prev->batch_size : 0, d->batch_size);
	if (store_differs(d->lr_scale, has ? prev->lr_scale : 1))
		store_change(b, run, d->seq, "lr_scale", -1, has,
		    has ? prev->lr_scale : 1, d->lr_scale);
	if (d->size_threshold != (has ? prev->size_threshold : 0))
		store_change(b, run, d->seq, "size_threshold", -1, has,
		    has ? (double)prev->size_threshold : 0,
		    (double)d->size_threshold);
	if (d->compression_off != (has && prev->compression_off))
		store_change(b, run, d->seq, "compression", -1, has,
		    has && prev->compression_off ? 0 : 1,
		    d->compression_off ? 0 : 1);
	if (d->calibrate_steps != (has ? prev->calibrate_steps : 0))
		store_change(b, run, d->seq, "calibrate_steps", -1, has,
		    has ? (double)prev->calibrate_steps : 0,
		    (double)d->calibrate_steps);
	if (d->codec_table_len != (has ? prev->codec_table_len : 0) ||
	    (d->codec_table_len > 0 &&
		memcmp(d->codec_table, prev->codec_table, d->codec_table_len) !=
		    0))
		store_change(b, run, d->seq, "codec_table", -1, has,
		    has ? (double)prev->codec_table_len : 0,
		    (double)d->codec_table_len);
	store_resid_changes(b, run, d, prev);
}

uint64_t
ctl_store_decision(ctl_store *s, int64_t run, const com_decision *d,
    const com_decision *prev, ctl_store_source source, uint64_t wall_ms)
{
	store_decision_row *r;
	store_batch *b;
	uint64_t ticket;

	if (s == NULL || run == 0)
		return 0;
	b = store_cur(s);
	r = STORE_PUSH(b->decisions);
	r->run = run;
	r->source = source;
	r->wall_ms = wall_ms;
	if (com_decision_copy(&r->d, d) != 0)
		store_oom();
	b->rows++;
	store_changes(b, run, d, prev);
	ticket = ctl_store_flush(s);
	*STORE_PUSH(s->waits) = ticket;
	*STORE_PUSH(s->wait_ms) = com_clock_ms();
	return ticket;
}

void
ctl_store_config(ctl_store *s, const ctl_config *cfg)
{
	char hash[CTL_STORE_HASH_LEN];
	store_batch *b;

	if (s == NULL || cfg == NULL)
		return;
	ctl_store_hash(cfg->text != NULL ? cfg->text : "", cfg->text_len, hash);
	if (strcmp(hash, s->hash) == 0)
		return;
	memcpy(s->hash, hash, sizeof(hash));
	b = store_cur(s);
	*STORE_PUSH(b->files) = (store_file_row){
		.path = store_strdup(cfg->path),
		.text = store_strdup(cfg->text != NULL ? cfg->text : ""),
		.wall_ms = com_clock_wall_ms(),
	};
	memcpy(b->files.v[b->files.n - 1].hash, hash, sizeof(hash));
	store_added(s, 1, 0);
}

static void
store_event_row_put(ctl_store *s, uint64_t wall_ms, const char *job,
    const char *kind, const char *text)
{
	store_batch *b = store_cur(s);
	bool named = strcmp(kind, CTL_EVENT_RELOAD_OK) == 0 ||
	    strcmp(kind, CTL_EVENT_DAEMON_STARTED) == 0;

	*STORE_PUSH(b->events) = (store_event_row){
		.wall_ms = wall_ms,
		.job = job != NULL && job[0] != '\0' ? store_strdup(job) : NULL,
		.kind = store_strdup(kind),
		.text = store_strdup(text),
		.hash = named && s->hash[0] != '\0' ? store_strdup(s->hash)
						    : NULL,
	};
	store_added(s, 1, 0);
}

void
ctl_store_sync_events(ctl_store *s, const ctl_events *ev)
{
	uint64_t total, n;
	com_event *copy = NULL;
	uint32_t got = 0;

	if (s == NULL || ev == NULL)
		return;
	total = ctl_events_total(ev);
	if (total <= s->events_seen)
		return;
	n = total - s->events_seen;
	if (n > CTL_EVENTS_MAX) {
		char text[96];

		snprintf(text, sizeof(text),
		    "%" PRIu64 " events happened faster than they could be "
		    "recorded",
		    n - CTL_EVENTS_MAX);
		store_event_row_put(s, com_clock_wall_ms(), NULL,
		    CTL_EVENT_EVENTS_LOST, text);
		n = CTL_EVENTS_MAX;
	}
	if (ctl_events_copy(ev, NULL, (uint32_t)n, &copy, &got) != 0)
		store_oom();
	for (uint32_t i = 0; i < got; i++) {
		store_event_row_put(s, copy[i].wall_ms, copy[i].job,
		    copy[i].kind, copy[i].text);
		free(copy[i].kind);
		free(copy[i].job);
		free(copy[i].text);
	}
	free(copy);
	s->events_seen = total;
}

/* The decisions of every batch up to `ticket` are committed: they stop
 * waiting, and a store that was slow is not any more once it has caught
 * up with what it was handed then. */
static void
store_decisions_durable(ctl_store *s, uint64_t ticket, uint64_t now)
{
	if (ticket > s->durable_ticket)
		s->durable_ticket = ticket;
	while (
	    s->waits_head < s->waits.n && s->waits.v[s->waits_head] <= ticket)
		s->waits_head++;
	if (s->waits_head == s->waits.n)
		s->waits.n = s->wait_ms.n = s->waits_head = 0;
	if (s->slow && ticket >= s->slow_until) {
		s->slow = false;
		if (!s->failed) {
			ctl_log(CTL_LOG_INFO, "store",
			    "commits caught up after %" PRIu64 " ms",
			    now - s->slow_since_ms);
			store_add_event(s, CTL_EVENT_STORE_RECOVERED,
			    "commits caught up after %" PRIu64 " ms",
			    now - s->slow_since_ms);
			s->error[0] = '\0';
		}
	}
	if (s->durable != NULL)
		s->durable(s->durable_arg, ticket);
}

/* Handles one message of the writer. */
static void
store_handle(ctl_store *s, const store_msg *m)
{
	uint64_t now = com_clock_ms();

	switch (m->type) {
	case STORE_MSG_DURABLE:
		store_decisions_durable(s, m->ticket, now);
		break;
	case STORE_MSG_ACK:
		s->acked_ticket = m->ticket;
		s->rows_in_flight -= m->rows < s->rows_in_flight
		    ? m->rows
		    : s->rows_in_flight;
		s->metric_in_flight -= m->metric_rows < s->metric_in_flight
		    ? m->metric_rows
		    : s->metric_in_flight;
		store_decisions_durable(s, m->ticket, now);
		break;
	case STORE_MSG_DEGRADED:
		snprintf(s->error, sizeof(s->error), "%s", m->text);
		if (!s->failed) {
			s->failed = true;
			ctl_log(CTL_LOG_ERROR, "store",
			    "%s; decisions are published without waiting "
			    "and kept for writing, retrying",
			    m->text);
			store_add_event(s, CTL_EVENT_STORE_DEGRADED, "%s",
			    m->text);
			if (s->durable != NULL)
				s->durable(s->durable_arg, UINT64_MAX);
		}
		break;
	case STORE_MSG_RECOVERED:
		if (s->failed) {
			s->failed = false;
			ctl_log(CTL_LOG_INFO, "store",
			    "writing again after %" PRIu64 " ms (was: %s)",
			    m->ms, m->text);
			store_add_event(s, CTL_EVENT_STORE_RECOVERED,
			    "writing again after %" PRIu64 " ms (was: %s)",
			    m->ms, m->text);
			if (!s->slow)
				s->error[0] = '\0';
		}
		break;
	default:
		break;
	}
}

/* Reads every message the writer sent. */
static void
store_drain(ctl_store *s)
{
	store_msg m;

	while (zmq_recv(s->sock, &m, sizeof(m), ZMQ_DONTWAIT) == (int)sizeof(m))
		store_handle(s, &m);
}

static void
store_on_socket(ctl_loop *loop, void *arg)
{
	(void)loop;
	store_drain(arg);
}

int
ctl_store_wait(ctl_store *s, uint64_t ticket, uint32_t timeout_ms)
{
	uint64_t deadline = com_clock_ms() + timeout_ms;

	for (;;) {
		uint64_t now;
		zmq_pollitem_t item = { s->sock, 0, ZMQ_POLLIN, 0 };

		store_drain(s);
		if (s->acked_ticket >= ticket)
			return 0;
		if (s->failed)
			return BELLOWS_EIO;
		now = com_clock_ms();
		if (now >= deadline)
			return BELLOWS_ETIMEDOUT;
		zmq_poll(&item, 1, (long)(deadline - now));
	}
}

void
ctl_store_tick(ctl_store *s, uint64_t now_ms)
{
	uint64_t since;

	if (s == NULL || s->failed || s->slow || s->waits_head >= s->waits.n)
		return;
	since = s->wait_ms.v[s->waits_head];
	if (now_ms < since || now_ms - since < STORE_ACK_TIMEOUT_MS)
		return;
	s->slow = true;
	s->slow_until = s->sent_ticket;
	s->slow_since_ms = since;
	snprintf(s->error, sizeof(s->error),
	    "'%s': no commit for %" PRIu64 " ms", s->w.path, now_ms - since);
	ctl_log(CTL_LOG_WARN, "store",
	    "%s; decisions are published without waiting until it catches "
	    "up",
	    s->error);
	store_add_event(s, CTL_EVENT_STORE_DEGRADED, "%s", s->error);
	if (s->durable != NULL)
		s->durable(s->durable_arg, UINT64_MAX);
}

int
ctl_store_status(const ctl_store *s, com_status_reply *st)
{
	if (s == NULL) {
		/* No history (--no-db): not degraded, but say so, so that a
		 * reader does not take silence for a healthy store. */
		free(st->store_error);
		st->store_error = strdup("no history database (--no-db)");
		return st->store_error != NULL ? 0 : BELLOWS_ENOMEM;
	}
	st->store_degraded = s->failed || s->slow;
	st->store_pending = s->rows_in_flight +
	    (s->cur != NULL ? s->cur->rows : 0);
	st->store_dropped = s->dropped_total;
	free(st->store_error);
	st->store_error = strdup(s->error);
	return st->store_error != NULL ? 0 : BELLOWS_ENOMEM;
}

const char *
ctl_store_path(const ctl_store *s)
{
	return s != NULL && s->abs_path != NULL ? s->abs_path : "";
}

void
ctl_store_close(ctl_store **sp, uint32_t drain_ms)
{
	ctl_store *s;
	store_msg m = { .type = STORE_MSG_STOP };

	if (sp == NULL || *sp == NULL)
		return;
	s = *sp;
	if (s->writer_started) {
		ctl_store_flush(s);
		m.ms = drain_ms;
		store_send(s, &m);
		pthread_join(s->writer, NULL);
	} else {
		store_batch_free(s->cur);
		store_db_close(&s->w);
	}
	if (s->checkpointer_started) {
		while (
		    zmq_send(s->w.poke, "s", 1, 0) < 0 && zmq_errno() == EINTR)
			;
		pthread_join(s->checkpointer, NULL);
	}
	store_close_sockets(s);
	free(s->waits.v);
	free(s->wait_ms.v);
	free(s->w.thin.v);
	free(s->w.path);
	free(s->abs_path);
	free(s);
	*sp = NULL;
}

void
ctl_store_run_resumed(ctl_store *s, int64_t run, uint64_t window,
    const char *run_key)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	/* Alone in its batch: the rows of the abandoned windows recorded
	 * before are in earlier batches (written first), and the resumed
	 * run's rows go into later ones, which the move must not touch. */
	ctl_store_flush(s);
	b = store_cur(s);
	*STORE_PUSH(b->updates) = (store_update_row){
		.run = run,
		.kind = STORE_UPDATE_RESUMED,
		.window = window,
		.run_key = store_strdup(run_key != NULL ? run_key : ""),
	};
	store_added(s, 1, 0);
	ctl_store_flush(s);
}

bool
ctl_store_settled(ctl_store *s)
{
	if (s == NULL)
		return true;
	ctl_store_flush(s);
	return s->failed || s->acked_ticket >= s->sent_ticket;
}
