/* store - the SQLite history and its writer thread, see store.h.
 *
 * Three threads touch the store. The event loop fills a batch (typed row
 * arrays, owned by the batch) and hands it to the writer by sending its
 * pointer over an inproc PAIR socket; from then on the writer owns it.
 * The writer appends batches to its queue and writes, first, the firm
 * rows (decisions, events, runs...) of everything queued in one
 * transaction, telling the loop at once that those decisions are durable
 * (DURABLE); then the metric rows, a transaction of at most batch_rows
 * rows at a time, acknowledging each (ACK: the highest ticket done and the
 * rows it covered, so the loop knows how much is in flight), and looking
 * for new decisions between them. A decision thus waits for one
 * transaction of statistics at most, never for a backlog of them. A
 * checkpointer thread, poked by the writer's WAL hook, copies the WAL
 * back into the database with its own short-lived connection: a
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
 */
#include "store_int.h"

#include "clock.h"
#include "log.h"
#include "window.h"

#include <bellows/error.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
	if ((r = store_sockets(s, zctx)) != 0) {
		store_close_sockets(s);
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

void
ctl_store_run_end(ctl_store *s, int64_t run, uint64_t wall_ms)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	b = store_cur(s);
	*STORE_PUSH(b->updates) = (store_update_row){
		.run = run,
		.kind = wall_ms != 0 ? STORE_UPDATE_END : STORE_UPDATE_REOPEN,
		.wall_ms = wall_ms,
	};
	store_added(s, 1, 0);
}

void
ctl_store_run_recovered(ctl_store *s, int64_t run)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	b = store_cur(s);
	*STORE_PUSH(b->updates) = (store_update_row){
		.run = run,
		.kind = STORE_UPDATE_RECOVERED,
	};
	store_added(s, 1, 0);
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

void
ctl_store_window(ctl_store *s, int64_t run, const bellows_window *w,
    uint32_t ranks_expected, bool complete, const com_decision *in_force,
    uint64_t wall_ms)
{
	store_batch *b;
	uint32_t n_comm;

	if (s == NULL || run == 0)
		return;
	/* window_info and the per-layer rows are what recovery replays into
	 * the policies: firm rows, never dropped, handed over ahead of the
	 * decision answering the window, so committed no later than it. The
	 * collectives are O(ranks), like timings: metric rows. */
	n_comm = w->n_comm > 0 && store_keep_metrics(s, w->window, w->n_comm)
	    ? w->n_comm
	    : 0;
	b = store_cur(s);
	*STORE_PUSH(b->infos) = (store_info_row){
		.run = run,
		.window = w->window,
		.first_step = w->first_step,
		.last_step = w->last_step,
		.epoch = w->epoch,
		.lr = w->lr,
		.lr_next = w->lr_next,
		.batch_size = w->batch_size,
		.lr_scale = w->lr_scale,
		.world = w->world,
		.ranks_reported = w->ranks_reported,
		.ranks_expected = ranks_expected,
		.complete = complete,
		.step_ms_median = w->step_ms_median,
		.compute_ms_median = w->compute_ms_median,
		.comm_ms_median = w->comm_ms_median,
		.floats_sent = w->floats_sent,
		.floats_raw = w->floats_raw,
		.wall_ms = wall_ms,
		.state_batch_size = in_force->batch_size,
		.state_threshold = in_force->size_threshold,
		.state_off = in_force->compression_off,
		.backward_ms_median = w->backward_ms_median,
		.codec_ms_median = w->codec_ms_median,
		.mem_device_used = w->mem_device_used,
		.mem_device_total = w->mem_device_total,
		.mem_host_used = w->mem_host_used,
		.state_apply = in_force->apply_step,
		.state_calibrate = in_force->calibrate_steps,
		.saved_bytes = w->saved_bytes,
	};
	for (uint32_t l = 0; l < w->n_layers; l++) {
		const bellows_window_layer *v = &w->layers[l];

		*STORE_PUSH(b->stats) = (store_stat_row){
			.run = run,
			.window = w->window,
			.layer = l,
			.norm_rank0 = v->grad_norm_rank0,
			.norm_mean = v->grad_norm_mean,
			.sum_sq = v->sum_sq,
			.abs_sum = v->abs_sum,
			.max_abs = v->max_abs,
			.count = v->count,
			.nonzero = v->nonzero,
			.nonfinite = v->nonfinite,
			.momentum_abs_mean = v->momentum_abs_mean,
			.level = v->level,
			.error_bound = v->error_bound,
			.act_steps = v->act_steps,
			.act_lbar = v->act_lbar,
			.act_nonzero = v->act_nonzero,
			.act_bytes = v->act_bytes,
			.act_raw_bytes = v->act_raw_bytes,
			.comm_raw_ms = v->comm_raw_ms,
			.comm_comp_ms = v->comm_comp_ms,
			.codec_ms = v->codec_ms,
			.comm_raw_n = v->comm_raw_n,
			.comm_comp_n = v->comm_comp_n,
		};
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
	free(s);
	*sp = NULL;
}

/* ---- recovery ---------------------------------------------------------- */

static double
store_col_real(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL
	    ? NAN
	    : sqlite3_column_double(st, i);
}

/* A REAL column where NULL means "not measured": 0. */
static double
store_col_real0(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL
	    ? 0
	    : sqlite3_column_double(st, i);
}

static uint64_t
store_col_u64(sqlite3_stmt *st, int i)
{
	int64_t v = sqlite3_column_int64(st, i);

	return v < 0 ? 0 : (uint64_t)v;
}

/* Reads n little-endian doubles from a BLOB column; false if its size is
 * not n * 8. */
static bool
store_col_doubles(sqlite3_stmt *st, int i, double *out, uint32_t n)
{
	const uint8_t *p = sqlite3_column_blob(st, i);
	int len = sqlite3_column_bytes(st, i);

	if (len != (int)(n * 8) || (n > 0 && p == NULL))
		return false;
	for (uint32_t k = 0; k < n; k++) {
		uint64_t bits = 0;

		for (int b = 0; b < 8; b++)
			bits |= (uint64_t)p[k * 8 + b] << (8 * b);
		memcpy(&out[k], &bits, 8);
	}
	return true;
}

static char *
store_col_strdup(sqlite3_stmt *st, int i)
{
	const char *t = (const char *)sqlite3_column_text(st, i);

	return store_strdup(t != NULL ? t : "");
}

typedef struct store_loaded {
	ctl_store_run run;       /* what the callback sees */
	int64_t below;           /* windows read: those below this */
	com_layer_info *layers;  /* owned */
	com_decision *decisions; /* owned */
	char *run_key;           /* owned, runs.run_key */
	uint32_t n_decisions;    /* entries filled */
	bool *alive;             /* owned, world flags */
} store_loaded;

static void
store_loaded_fini(store_loaded *ld)
{
	for (uint32_t l = 0; ld->layers != NULL && l < ld->run.n_layers; l++)
		free(ld->layers[l].name);
	for (uint32_t i = 0; i < ld->n_decisions; i++)
		com_decision_fini(&ld->decisions[i]);
	free(ld->layers);
	free(ld->decisions);
	free(ld->alive);
	free(ld->run_key);
}

static bool
store_parse_shape(const char *text, com_layer_info *l)
{
	const char *p = text;

	l->ndim = 0;
	while (*p != '\0') {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || l->ndim == COM_MAX_NDIM || v > UINT32_MAX)
			return false;
		l->shape[l->ndim++] = (uint32_t)v;
		p = end;
		if (*p == 'x')
			p++;
		else if (*p != '\0')
			return false;
	}
	return true;
}

static const char *
store_load_layers(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT idx, name, numel, ndim, shape FROM layers WHERE run_id = "
	    "?1 ORDER BY idx",
	    ld->run.id, 0);
	uint32_t n = 0;
	const char *why = NULL;

	if (st == NULL)
		return "cannot read its layers";
	ld->layers = calloc(ld->run.n_layers ? ld->run.n_layers : 1,
	    sizeof(*ld->layers));
	if (ld->layers == NULL)
		store_oom();
	while (why == NULL && sqlite3_step(st) == SQLITE_ROW) {
		com_layer_info *l = &ld->layers[n];
		const char *shape = (const char *)sqlite3_column_text(st, 4);

		if (n >= ld->run.n_layers || sqlite3_column_int64(st, 0) != n) {
			why = "its layer table has gaps or extra rows";
			break;
		}
		l->name = store_col_strdup(st, 1);
		l->numel = store_col_u64(st, 2);
		n++;
		if (!store_parse_shape(shape != NULL ? shape : "", l) ||
		    l->ndim != sqlite3_column_int64(st, 3))
			why = "a layer's shape cannot be read";
	}
	if (why == NULL && n != ld->run.n_layers)
		why = "its layer table is incomplete";
	sqlite3_finalize(st);
	return why;
}

static const char *
store_load_decisions(store_writer *w, store_loaded *ld, uint32_t max)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT seq, apply_step, window, policy, reason, n_layers, levels, "
	    "error_bounds, batch_size, lr_scale, size_threshold, "
	    "compression_off, codec_table, calibrate_steps FROM decisions "
	    "WHERE run_id = ?1 AND window <= ?3 ORDER BY seq DESC LIMIT ?2",
	    ld->run.id, max);
	const char *why = NULL;
	uint32_t n = 0;

	if (st == NULL)
		return "cannot read its decisions";
	/* A decision's window is the one it answers + 1. */
	sqlite3_bind_int64(st, 3, ld->below);
	ld->decisions = calloc(max ? max : 1, sizeof(*ld->decisions));
	if (ld->decisions == NULL)
		store_oom();
	while (why == NULL && n < max && sqlite3_step(st) == SQLITE_ROW) {
		com_decision *d = &ld->decisions[n];
		const void *ct = sqlite3_column_blob(st, 12);
		int ct_len = sqlite3_column_bytes(st, 12);

		if (sqlite3_column_int64(st, 5) != ld->run.n_layers) {
			why = "a decision's layer count differs from the run's";
			break;
		}
		if (com_decision_init(d, ld->run.job, ld->run.n_layers) != 0)
			store_oom();
		ld->n_decisions = ++n;
		d->seq = store_col_u64(st, 0);
		d->apply_step = store_col_u64(st, 1);
		d->window = store_col_u64(st, 2);
		d->policy = store_col_strdup(st, 3);
		d->reason = store_col_strdup(st, 4);
		if (!store_col_doubles(st, 6, d->level, d->n_layers) ||
		    !store_col_doubles(st, 7, d->error_bound, d->n_layers)) {
			why = "a decision's levels cannot be read";
			break;
		}
		d->batch_size = (uint32_t)sqlite3_column_int64(st, 8);
		d->lr_scale = store_col_real(st, 9);
		d->size_threshold = store_col_u64(st, 10);
		d->compression_off = sqlite3_column_int(st, 11) != 0;
		d->calibrate_steps = store_col_u64(st, 13);
		if (ct != NULL && ct_len > 0) {
			d->codec_table = malloc((size_t)ct_len);
			if (d->codec_table == NULL)
				store_oom();
			memcpy(d->codec_table, ct, (size_t)ct_len);
			d->codec_table_len = (size_t)ct_len;
		}
	}
	sqlite3_finalize(st);
	if (why != NULL)
		return why;
	if (n == 0)
		return "it has no decision";
	/* Read newest first; the log wants ascending seqs. */
	for (uint32_t i = 0; i < n / 2; i++) {
		com_decision t = ld->decisions[i];

		ld->decisions[i] = ld->decisions[n - 1 - i];
		ld->decisions[n - 1 - i] = t;
	}
	return NULL;
}

/* Which ranks were there when the run was last written: those whose
 * latest rank event is a join. */
static void
store_load_ranks(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT rank, kind FROM rank_events WHERE run_id = ?1 ORDER BY "
	    "rowid",
	    ld->run.id, 0);

	ld->alive = calloc(ld->run.world, sizeof(*ld->alive));
	if (ld->alive == NULL)
		store_oom();
	while (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		int64_t r = sqlite3_column_int64(st, 0);
		const char *kind = (const char *)sqlite3_column_text(st, 1);

		if (r >= 0 && r < (int64_t)ld->run.world && kind != NULL)
			ld->alive[r] = strcmp(kind, "joined") == 0 ||
			    strcmp(kind, "rejoined") == 0;
	}
	sqlite3_finalize(st);
}

/* next_window and max_step from the decisions and windows recorded. */
static void
store_load_position(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT (SELECT coalesce(max(window), 0) FROM decisions WHERE "
	    "run_id = ?1 AND window <= ?3), (SELECT coalesce(max(window) + 1, "
	    "0) FROM window_info WHERE run_id = ?1 AND window < ?3), (SELECT "
	    "coalesce(max(last_step), 0) FROM window_info WHERE run_id = ?1 "
	    "AND window < ?3), (SELECT coalesce(max(seq), 0) FROM decisions "
	    "WHERE run_id = ?1), (SELECT run_key FROM runs WHERE id = ?1)",
	    ld->run.id, 0);
	uint64_t a, b;

	if (st != NULL)
		sqlite3_bind_int64(st, 3, ld->below);
	if (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		a = store_col_u64(st, 0);
		b = store_col_u64(st, 1);
		ld->run.next_window = a > b ? a : b;
		ld->run.max_step = store_col_u64(st, 2);
		ld->run.last_seq = store_col_u64(st, 3);
		ld->run_key = store_col_strdup(st, 4);
	}
	sqlite3_finalize(st);
}

/* Streams the run's windows into ops->window: window_info rows in order,
 * each with its layers' rows from a second cursor in the same order. */
static uint64_t
store_load_windows(store_writer *w, store_loaded *ld,
    const ctl_store_recover_ops *ops, void *arg, void *ctx)
{
	sqlite3_stmt *wi = store_select(w,
	    "SELECT window, first_step, last_step, epoch, lr, lr_next, "
	    "batch_size, lr_scale, world, ranks_reported, step_ms_median, "
	    "compute_ms_median, comm_ms_median, floats_sent, floats_raw, "
	    "state_batch_size, state_size_threshold, state_compression_off, "
	    "backward_ms_median, codec_ms_median, mem_device_used, "
	    "mem_device_total, mem_host_used, state_apply_step, "
	    "state_calibrate_steps, saved_bytes FROM window_info WHERE run_id "
	    "= ?1 AND window < ?3 ORDER BY window",
	    ld->run.id, 0);
	sqlite3_stmt *wl = store_select(w,
	    "SELECT window, layer, grad_norm_rank0, grad_norm_mean, sum_sq, "
	    "abs_sum, max_abs, count, nonzero, nonfinite, momentum_abs_mean, "
	    "level, error_bound, act_steps, act_lbar, act_nonzero, act_bytes, "
	    "act_raw_bytes, comm_raw_ms, comm_comp_ms, codec_ms, comm_raw_n, "
	    "comm_comp_n FROM windows WHERE run_id = ?1 AND window < ?3 ORDER "
	    "BY window, layer",
	    ld->run.id, 0);
	sqlite3_stmt *wc = store_select(w,
	    "SELECT window, rank, bytes, ms, count, compressed FROM "
	    "comm_samples WHERE run_id = ?1 AND window < ?3 ORDER BY window, "
	    "rowid",
	    ld->run.id, 0);
	STORE_VEC(bellows_comm_sample) comm = { 0 };
	bool have_comm = false;
	uint32_t n = ld->run.n_layers;
	bellows_window_layer *layers = calloc(n ? n : 1, sizeof(*layers));
	com_decision in_force;
	bool have_row = false;
	uint64_t count = 0;

	if (layers == NULL || com_decision_init(&in_force, ld->run.job, n) != 0)
		store_oom();
	if (wi == NULL || wl == NULL || wc == NULL)
		goto out;
	sqlite3_bind_int64(wi, 3, ld->below);
	sqlite3_bind_int64(wl, 3, ld->below);
	sqlite3_bind_int64(wc, 3, ld->below);
	have_row = sqlite3_step(wl) == SQLITE_ROW;
	have_comm = sqlite3_step(wc) == SQLITE_ROW;
	while (sqlite3_step(wi) == SQLITE_ROW) {
		uint64_t win = store_col_u64(wi, 0);
		bellows_window v = {
			.job = ld->run.job,
			.window = win,
			.first_step = store_col_u64(wi, 1),
			.last_step = store_col_u64(wi, 2),
			.epoch = store_col_u64(wi, 3),
			.lr = store_col_real(wi, 4),
			.lr_next = store_col_real(wi, 5),
			.batch_size = (uint32_t)sqlite3_column_int64(wi, 6),
			.lr_scale = store_col_real(wi, 7),
			.world = (uint32_t)sqlite3_column_int64(wi, 8),
			.ranks_reported = (uint32_t)sqlite3_column_int64(wi, 9),
			.step_ms_median = store_col_real(wi, 10),
			.compute_ms_median = store_col_real(wi, 11),
			.comm_ms_median = store_col_real(wi, 12),
			.floats_sent = store_col_u64(wi, 13),
			.floats_raw = store_col_u64(wi, 14),
			.n_layers = n,
			.layers = layers,
			.backward_ms_median = store_col_real0(wi, 18),
			.codec_ms_median = store_col_real0(wi, 19),
			.mem_device_used = (double)store_col_u64(wi, 20),
			.mem_device_total = (double)store_col_u64(wi, 21),
			.mem_host_used = (double)store_col_u64(wi, 22),
			.saved_bytes = (double)store_col_u64(wi, 25),
		};

		in_force.apply_step = store_col_u64(wi, 23);
		in_force.calibrate_steps = store_col_u64(wi, 24);
		v.compression_off = sqlite3_column_int(wi, 17) != 0;
		v.size_threshold = store_col_u64(wi, 16);
		v.calibrate_until = ctl_window_calibrate_until(&in_force);
		in_force.batch_size = (uint32_t)sqlite3_column_int64(wi, 15);
		in_force.lr_scale = v.lr_scale;
		in_force.size_threshold = store_col_u64(wi, 16);
		in_force.compression_off = sqlite3_column_int(wi, 17) != 0;
		for (uint32_t l = 0; l < n; l++) {
			layers[l] = (bellows_window_layer){
				.name = ld->layers[l].name,
				.numel = ld->layers[l].numel,
				.ndim = ld->layers[l].ndim,
				.shape = ld->layers[l].shape,
				.grad_norm = NAN,
				.grad_norm_rank0 = NAN,
				.grad_norm_mean = NAN,
				.comm_raw_ms = NAN,
				.comm_comp_ms = NAN,
				.codec_ms = NAN,
			};
			in_force.level[l] = 0;
			in_force.error_bound[l] = 0;
		}
		while (have_row && store_col_u64(wl, 0) < win)
			have_row = sqlite3_step(wl) == SQLITE_ROW;
		while (have_row && store_col_u64(wl, 0) == win) {
			int64_t l = sqlite3_column_int64(wl, 1);

			if (l >= 0 && l < (int64_t)n) {
				bellows_window_layer *x = &layers[l];

				x->grad_norm_rank0 = store_col_real(wl, 2);
				x->grad_norm_mean = store_col_real(wl, 3);
				/* As the daemon computes it (window.c). */
				x->grad_norm = !isnan(x->grad_norm_rank0)
				    ? x->grad_norm_rank0
				    : x->grad_norm_mean;
				x->sum_sq = store_col_real(wl, 4);
				x->abs_sum = store_col_real(wl, 5);
				x->max_abs = store_col_real(wl, 6);
				x->count = store_col_u64(wl, 7);
				x->nonzero = store_col_u64(wl, 8);
				x->nonfinite = store_col_u64(wl, 9);
				x->momentum_abs_mean = store_col_real(wl, 10);
				x->level = store_col_real(wl, 11);
				x->error_bound = store_col_real(wl, 12);
				x->act_steps = store_col_u64(wl, 13);
				x->act_lbar = store_col_real0(wl, 14);
				x->act_nonzero = store_col_real0(wl, 15);
				x->act_bytes = store_col_real0(wl, 16);
				x->act_raw_bytes = store_col_real0(wl, 17);
				x->comm_raw_ms = store_col_real(wl, 18);
				x->comm_comp_ms = store_col_real(wl, 19);
				x->codec_ms = store_col_real(wl, 20);
				x->comm_raw_n = (uint32_t)store_col_u64(wl, 21);
				x->comm_comp_n = (uint32_t)store_col_u64(wl,
				    22);
				in_force.level[l] = x->level;
				in_force.error_bound[l] = x->error_bound;
			}
			have_row = sqlite3_step(wl) == SQLITE_ROW;
		}
		comm.n = 0;
		while (have_comm && store_col_u64(wc, 0) < win)
			have_comm = sqlite3_step(wc) == SQLITE_ROW;
		while (have_comm && store_col_u64(wc, 0) == win) {
			*STORE_PUSH(comm) = (bellows_comm_sample){
				.rank = (uint32_t)store_col_u64(wc, 1),
				.bytes = store_col_u64(wc, 2),
				.ms = store_col_real(wc, 3),
				.count = (uint32_t)store_col_u64(wc, 4),
				.compressed = sqlite3_column_int(wc, 5) != 0,
			};
			have_comm = sqlite3_step(wc) == SQLITE_ROW;
		}
		v.n_comm = comm.n;
		v.comm = comm.v;
		ops->window(arg, ctx, &v, &in_force);
		count++;
	}
out:
	sqlite3_finalize(wi);
	sqlite3_finalize(wl);
	sqlite3_finalize(wc);
	free(comm.v);
	com_decision_fini(&in_force);
	free(layers);
	return count;
}

/* Reads run ld->run.id (job, world and layer count filled in) from w,
 * its windows below ld->below, into the callbacks. Returns 1 when the
 * run was handed to ops->run, 0 when it could not be read (logged) or
 * ops->run refused it. */
static uint32_t
store_hand_run(store_writer *w, store_loaded *ld, uint32_t max_decisions,
    const ctl_store_recover_ops *ops, void *arg)
{
	const char *why;
	void *ctx = NULL;
	uint64_t n;

	why = ld->run.world == 0 || ld->run.n_layers == 0
	    ? "it has no ranks or no layers"
	    : store_load_layers(w, ld);
	if (why == NULL)
		why = store_load_decisions(w, ld,
		    max_decisions ? max_decisions : 1);
	if (why != NULL) {
		ctl_log(CTL_LOG_WARN, "store",
		    "'%s': run %" PRId64 " of job '%s' cannot be read: %s",
		    w->path, ld->run.id, ld->run.job, why);
		return 0;
	}
	store_load_position(w, ld);
	store_load_ranks(w, ld);
	if ((uint64_t)ld->below < ld->run.next_window)
		ld->run.next_window = (uint64_t)ld->below;
	ld->run.alive = ld->alive;
	ld->run.layers = ld->layers;
	ld->run.decisions = ld->decisions;
	ld->run.n_decisions = ld->n_decisions;
	ld->run.run_key = ld->run_key != NULL ? ld->run_key : "";
	if (ops->run(arg, &ld->run, &ctx) != 0)
		return 0;
	n = store_load_windows(w, ld, ops, arg, ctx);
	ops->end(arg, ctx, n);
	return 1;
}

/* Fills ld->run's id, job, world, layer count and configuration hash
 * from a row of "SELECT id, job, world, n_layers, config_hash". */
static void
store_loaded_row(store_loaded *ld, sqlite3_stmt *runs)
{
	const char *hash = (const char *)sqlite3_column_text(runs, 4);

	ld->run.id = sqlite3_column_int64(runs, 0);
	ld->run.job = store_col_strdup(runs, 1);
	ld->run.world = (uint32_t)sqlite3_column_int64(runs, 2);
	ld->run.n_layers = (uint32_t)sqlite3_column_int64(runs, 3);
	snprintf(ld->run.config_hash, sizeof(ld->run.config_hash), "%s",
	    hash != NULL ? hash : "");
}

uint32_t
ctl_store_recover(ctl_store *s, uint32_t max_decisions,
    const ctl_store_recover_ops *ops, void *arg)
{
	sqlite3_stmt *runs;
	uint32_t handed = 0;

	if (s == NULL || s->w.db == NULL)
		return 0;
	assert(!s->writer_started);
	runs = store_select(&s->w,
	    "SELECT id, job, world, n_layers, config_hash FROM runs WHERE "
	    "ended_wall_ms IS NULL ORDER BY id DESC",
	    0, 0);
	while (runs != NULL && sqlite3_step(runs) == SQLITE_ROW) {
		store_loaded ld = { .below = INT64_MAX };

		store_loaded_row(&ld, runs);
		handed += store_hand_run(&s->w, &ld, max_decisions, ops, arg);
		free((char *)ld.run.job);
		store_loaded_fini(&ld);
	}
	sqlite3_finalize(runs);
	return handed;
}

int
ctl_store_load_run(ctl_store *s, int64_t run, const char *job, uint64_t below,
    uint32_t max_decisions, const ctl_store_recover_ops *ops, void *arg)
{
	store_writer rd = { 0 };
	sqlite3_stmt *st;
	int r = BELLOWS_ENOTFOUND;

	if (s == NULL || s->w.path == NULL)
		return BELLOWS_ENOTFOUND;
	/* A connection of the loop's own: the writer thread keeps its
	 * own, and WAL lets this one read what is committed meanwhile. */
	rd.path = s->w.path;
	if (sqlite3_open_v2(s->w.path, &rd.db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		ctl_log(CTL_LOG_WARN, "store", "'%s': cannot read: %s",
		    s->w.path, rd.db != NULL ? sqlite3_errmsg(rd.db) : "");
		sqlite3_close(rd.db);
		return BELLOWS_EIO;
	}
	sqlite3_busy_timeout(rd.db, STORE_BUSY_MS);
	st = run != 0 ? store_select(&rd,
			    "SELECT id, job, world, n_layers, config_hash "
			    "FROM runs WHERE id = ?1",
			    run, 0)
		      : store_select(&rd,
			    "SELECT id, job, world, n_layers, config_hash "
			    "FROM runs WHERE job = ?3 ORDER BY id DESC LIMIT 1",
			    0, 0);
	if (st == NULL) {
		r = BELLOWS_EIO;
	} else {
		if (run == 0)
			store_bind_text(st, 3, job != NULL ? job : "");
		if (sqlite3_step(st) == SQLITE_ROW) {
			store_loaded ld = {
				.below = below > INT64_MAX ? INT64_MAX
							   : (int64_t)below,
			};

			store_loaded_row(&ld, st);
			r = store_hand_run(&rd, &ld, max_decisions, ops, arg)
			    ? 0
			    : BELLOWS_EIO;
			free((char *)ld.run.job);
			store_loaded_fini(&ld);
		}
	}
	sqlite3_finalize(st);
	sqlite3_close(rd.db);
	return r;
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
