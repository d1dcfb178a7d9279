/* reload - replacing the configuration in force, see reload.h.
 *
 * The reader thread and the loop exchange reload_msg values over one
 * inproc PAIR pair. The loop sends READ only while no reading is out
 * (r->out is false), so the thread holds one reading at a time and the
 * cancel flag, which the loop clears before each READ and sets to abandon
 * one, always speaks of the reading out. Each READ carries a serial; the
 * DONE that answers it carries it back, with the configuration or the
 * errors, which the loop then owns.
 */
#include "reload.h"

#include "common/clock.h"
#include "events.h"
#include "policyhost/log.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define RELOAD_TICK_MS 20 /* how often the loop looks at the deadline */

typedef enum reload_msg_type {
	RELOAD_MSG_READ, /* loop -> reader: read the file */
	RELOAD_MSG_STOP, /* loop -> reader: end the thread */
	RELOAD_MSG_DONE, /* reader -> loop: a reading's result */
} reload_msg_type;

typedef struct reload_msg {
	reload_msg_type type;    /* what it says */
	uint64_t serial;         /* the reading it is about */
	int rc;                  /* DONE: the load's return */
	ctl_config *cfg;         /* DONE: the configuration when rc == 0 */
	ctl_config_errors *errs; /* DONE: its errors (or NULL: no memory) */
} reload_msg;

/* What the reader thread holds. */
typedef struct reload_reader {
	void *sock;         /* its end of the pair */
	const char *path;   /* the file (the reload's, outlives the thread) */
	atomic_bool cancel; /* set by the loop: stop the reading out */
} reload_reader;

struct ctl_reload {
	char *path;                   /* the file */
	ctl_config *cfg;              /* in force, owned */
	ctl_jobs *jobs;               /* runs with cfg, borrowed */
	ctl_reload_counters counters; /* totals */
	reload_reader reader;         /* the reader thread's part */
	void *sock;                   /* the loop's end of the pair */
	pthread_t thread;             /* the reader */
	bool started;                 /* thread runs (attached) */
	bool out;                     /* a READ is unanswered */
	bool out_force;               /* ... and it was forced */
	bool abandoned;               /* ... and it was given up */
	uint64_t serial;              /* of the last READ */
	uint64_t deadline_ms;         /* monotonic: abandon it then */
	uint32_t timeout_ms;          /* the deadline it was given */
	bool waiting;                 /* a request waits for the reader */
	bool waiting_force;           /* ... forced */
};

int
ctl_reload_new(const char *path, ctl_config **cfg, ctl_jobs *jobs,
    ctl_reload **ret_reload)
{
	ctl_reload *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->path = strdup(path)) == NULL) {
		free(r);
		return BELLOWS_ENOMEM;
	}
	r->cfg = *cfg;
	*cfg = NULL;
	r->jobs = jobs;
	*ret_reload = r;
	return 0;
}

/* Frees what a DONE hands over. */
static void
reload_msg_free(reload_msg *m)
{
	ctl_config_destroy(&m->cfg);
	free(m->errs);
	m->errs = NULL;
}

static void
reload_send(void *sock, const reload_msg *m)
{
	while (zmq_send(sock, m, sizeof(*m), 0) < 0 && zmq_errno() == EINTR)
		;
}

/* The reader thread: one READ at a time, until STOP. */
static void *
reload_reader_main(void *arg)
{
	reload_reader *rd = arg;
	reload_msg m;

	for (;;) {
		int n = zmq_recv(rd->sock, &m, sizeof(m), 0);

		if (n < 0 && zmq_errno() == EINTR)
			continue;
		if (n != (int)sizeof(m) || m.type == RELOAD_MSG_STOP)
			break;
		m = (reload_msg){ .type = RELOAD_MSG_DONE,
			.serial = m.serial,
			.errs = malloc(sizeof(*m.errs)) };
		if (m.errs == NULL)
			m.rc = BELLOWS_ENOMEM;
		else
			m.rc = ctl_config_load_cancellable(rd->path,
			    &rd->cancel, &m.cfg, m.errs);
		reload_send(rd->sock, &m);
	}
	return NULL;
}

void
ctl_reload_destroy(ctl_reload **r)
{
	if (r == NULL || *r == NULL)
		return;
	if ((*r)->started) {
		reload_msg m = { .type = RELOAD_MSG_STOP };

		/* A reading out stops within a chunk of the file. */
		atomic_store(&(*r)->reader.cancel, true);
		reload_send((*r)->sock, &m);
		pthread_join((*r)->thread, NULL);
		/* What it answered after the loop stopped. */
		while (zmq_recv((*r)->sock, &m, sizeof(m), ZMQ_DONTWAIT) ==
		    (int)sizeof(m))
			reload_msg_free(&m);
	}
	if ((*r)->sock != NULL)
		zmq_close((*r)->sock);
	if ((*r)->reader.sock != NULL)
		zmq_close((*r)->reader.sock);
	ctl_config_destroy(&(*r)->cfg);
	free((*r)->path);
	free(*r);
	*r = NULL;
}

const ctl_config *
ctl_reload_config(const ctl_reload *r)
{
	return r->cfg;
}

/* Keeps the configuration in force after `err`, the first of 1 + `more`
 * errors: counts, logs and records one refusal. The event's text ends
 * with " (and N more)" even when the first error fills an entry, so that
 * STATUS says there is more to read in the log. */
static int
reload_refuse(ctl_reload *r, int code, const char *err, uint32_t more)
{
	char tail[32] = "";
	int room;

	if (more > 0)
		snprintf(tail, sizeof(tail), " (and %" PRIu32 " more)", more);
	room = CTL_EVENT_TEXT_MAX - 1 - (int)strlen(tail);
	r->counters.refused++;
	ctl_log(CTL_LOG_ERROR, "reload",
	    "reload refused, the running configuration stays: %s%s", err, tail);
	ctl_events_add(ctl_jobs_events(r->jobs), CTL_EVENT_RELOAD_REFUSED, NULL,
	    "%.*s%s", room, err, tail);
	return code;
}

/* Where reload_line sends a failed load's lines: the first is the
 * refusal, each other one a log line after it. */
typedef struct reload_report {
	ctl_reload *r; /* refusing */
	int code;      /* the load's error */
	uint32_t more; /* errors after the first */
	bool refused;  /* the first line was given */
} reload_report;

static void
reload_line(void *arg, const char *text)
{
	reload_report *rep = arg;
	char err[CTL_CONFIG_ERR_MAX];

	if (rep->refused) {
		ctl_log(CTL_LOG_ERROR, "reload", "%s", text);
		return;
	}
	/* A refusal's text is at most one error message long. */
	snprintf(err, sizeof(err), "%s", text);
	reload_refuse(rep->r, rep->code, err, rep->more);
	rep->refused = true;
}

/* Refuses a load that returned `rc` (not 0) with *errs (NULL when there
 * was no memory for them): the first error is the refusal, each other
 * one a log line of its own at the refusal's level. */
static int
reload_refuse_load(ctl_reload *r, int rc, const ctl_config_errors *errs)
{
	char err[CTL_CONFIG_ERR_MAX];
	reload_report rep = { .r = r, .code = rc };

	if (errs == NULL) {
		snprintf(err, sizeof(err), "%s: %s", r->path,
		    bellows_strerror(rc));
		return reload_refuse(r, rc, err, 0);
	}
	rep.more = errs->n > 0 ? errs->n - 1 : 0;
	ctl_config_errors_emit(errs, rc, r->path, reload_line, &rep);
	return rc;
}

/* Puts cfg (the caller's; taken over) in force unless its text is the
 * one in force and `force` is false, or a job's policies cannot start
 * with it (then refused). */
static int
reload_apply(ctl_reload *r, ctl_config *cfg, bool force)
{
	char err[CTL_CONFIG_ERR_MAX];
	int rc;

	if (!force && cfg->text_len == r->cfg->text_len &&
	    memcmp(cfg->text, r->cfg->text, cfg->text_len) == 0) {
		ctl_config_destroy(&cfg);
		r->counters.unchanged++;
		ctl_log(CTL_LOG_DEBUG, "reload", "'%s' rewritten unchanged",
		    r->path);
		return 0;
	}
	rc = ctl_jobs_reload(r->jobs, cfg, err, sizeof(err));
	if (rc != 0) {
		char where[CTL_CONFIG_ERR_MAX + 64];

		snprintf(where, sizeof(where), "%s: %s", r->path, err);
		ctl_config_destroy(&cfg);
		return reload_refuse(r, rc, where, 0);
	}
	/* No job borrows the old configuration any more. */
	ctl_config_destroy(&r->cfg);
	r->cfg = cfg;
	r->counters.done++;
	ctl_log(CTL_LOG_INFO, "reload", "configuration reloaded from '%s'",
	    r->path);
	if (ctl_config_timing_warning(cfg, err, sizeof(err)))
		ctl_log(CTL_LOG_WARN, "reload", "%s: %s", r->path, err);
	ctl_events_add(ctl_jobs_events(r->jobs), CTL_EVENT_RELOAD_OK, NULL,
	    "configuration reloaded from '%s'", r->path);
	return 0;
}

int
ctl_reload_now(ctl_reload *r, bool force)
{
	ctl_config_errors *errs = malloc(sizeof(*errs));
	ctl_config *cfg = NULL;
	int rc;

	if (errs == NULL)
		return reload_refuse_load(r, BELLOWS_ENOMEM, NULL);
	rc = ctl_config_load_all(r->path, &cfg, errs);
	if (rc != 0) {
		reload_refuse_load(r, rc, errs);
		free(errs);
		return rc;
	}
	free(errs);
	return reload_apply(r, cfg, force);
}

/* Sends the reader a READ; no reading may be out. */
static void
reload_start(ctl_reload *r, bool force)
{
	reload_msg m = { .type = RELOAD_MSG_READ, .serial = ++r->serial };

	/* The reader is idle: nobody reads the flag now. */
	atomic_store(&r->reader.cancel, false);
	r->out = true;
	r->out_force = force;
	r->abandoned = false;
	r->timeout_ms = r->cfg->reload_timeout_ms;
	r->deadline_ms = com_clock_ms() + r->timeout_ms;
	reload_send(r->sock, &m);
}

void
ctl_reload_request(ctl_reload *r, bool force)
{
	if (!r->started) {
		ctl_reload_now(r, force);
		return;
	}
	if (!r->out) {
		reload_start(r, force);
		return;
	}
	if (r->waiting)
		r->counters.coalesced++;
	r->waiting = true;
	r->waiting_force = r->waiting_force || force;
}

bool
ctl_reload_busy(const ctl_reload *r)
{
	return r->out || r->waiting;
}

/* The loop's timer: gives up a reading out past its deadline. */
static void
reload_on_tick(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	ctl_reload *r = arg;
	char err[CTL_CONFIG_ERR_MAX];

	(void)loop;
	if (!r->out || r->abandoned || now_ms < r->deadline_ms)
		return;
	r->abandoned = true;
	atomic_store(&r->reader.cancel, true);
	r->counters.abandoned++;
	snprintf(err, sizeof(err),
	    "%s: reading took longer than reload_timeout_ms (%" PRIu32
	    " ms) and was abandoned",
	    r->path, r->timeout_ms);
	reload_refuse(r, BELLOWS_ETIMEDOUT, err, 0);
}

/* The loop's socket: a reading's result. */
static void
reload_on_done(ctl_loop *loop, void *arg)
{
	ctl_reload *r = arg;
	reload_msg m;

	(void)loop;
	while (
	    zmq_recv(r->sock, &m, sizeof(m), ZMQ_DONTWAIT) == (int)sizeof(m)) {
		if (m.type != RELOAD_MSG_DONE || !r->out ||
		    m.serial != r->serial) {
			reload_msg_free(&m);
			continue;
		}
		r->out = false;
		if (r->abandoned) {
			/* Refused when it was given up. */
			ctl_log(CTL_LOG_DEBUG, "reload",
			    "an abandoned reading of '%s' ended", r->path);
			reload_msg_free(&m);
		} else if (m.rc != 0) {
			reload_refuse_load(r, m.rc, m.errs);
			reload_msg_free(&m);
		} else {
			ctl_config *cfg = m.cfg;

			m.cfg = NULL;
			reload_msg_free(&m);
			reload_apply(r, cfg, r->out_force);
		}
		if (r->waiting) {
			bool force = r->waiting_force;

			r->waiting = false;
			r->waiting_force = false;
			reload_start(r, force);
		}
	}
}

static atomic_uint reload_endpoints; /* names the inproc endpoints */

int
ctl_reload_attach(ctl_reload *r, void *zctx, ctl_loop *loop)
{
	char ep[64];
	int zero = 0, rc;

	if (r->started)
		return BELLOWS_ESTATE;
	snprintf(ep, sizeof(ep), "inproc://bellows-reload-%u",
	    atomic_fetch_add(&reload_endpoints, 1));
	r->sock = zmq_socket(zctx, ZMQ_PAIR);
	r->reader.sock = zmq_socket(zctx, ZMQ_PAIR);
	rc = BELLOWS_ESYS;
	if (r->sock == NULL || r->reader.sock == NULL)
		goto fail;
	/* At most one READ, one STOP and one DONE are ever in flight. */
	zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(r->reader.sock, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_bind(r->sock, ep) != 0 || zmq_connect(r->reader.sock, ep) != 0)
		goto fail;
	if ((rc = ctl_loop_add_socket(loop, r->sock, reload_on_done, r)) != 0 ||
	    (rc = ctl_loop_add_timer(loop, RELOAD_TICK_MS, reload_on_tick,
		 r)) != 0)
		goto fail;
	r->reader.path = r->path;
	atomic_init(&r->reader.cancel, false);
	rc = BELLOWS_ESYS;
	if (pthread_create(&r->thread, NULL, reload_reader_main, &r->reader) !=
	    0)
		goto fail;
	r->started = true;
	return 0;
fail:
	/* The loop may hold r->sock already: it stays open until
	 * ctl_reload_destroy. */
	return rc;
}

void
ctl_reload_on_change(void *r)
{
	ctl_reload_request(r, false);
}

void
ctl_reload_get_counters(const ctl_reload *r, ctl_reload_counters *ret)
{
	*ret = r->counters;
}
