/* jobs - jobs, ranks, windows and decisions, see jobs.h.
 *
 * Invariants of a job:
 * - the decision log holds the last JOBS_LOG decisions in seq order; seqs
 *   are consecutive and apply_steps never decrease, so "the decision in
 *   force at step s" is the last entry with apply_step <= s;
 * - windows close in index order; next_window is the lowest index not yet
 *   closed, and reports for lower indices are stale;
 * - a window is durably closed once the decision answering it is
 *   published (which waits for the store's commit of the window and the
 *   decision): job_windows_closed() is the lowest window not durably
 *   closed, never above next_window, and what agents are told they may
 *   stop keeping reports below;
 * - a (rank, window) report is taken once: a repeat of one taken (in an
 *   open window, or among the rank's last JOBS_TAKEN windows once closed)
 *   is ignored and counted, as agents resend what was not acknowledged;
 *   a report of a closed window the rank had not reported is stale;
 * - a rank is held by one routing id and one incarnation at a time, and,
 *   with security, by the authenticated client that opened its session:
 *   while it is alive no other client takes it, whatever incarnation it
 *   claims (a client not allowed for a job gets nothing of it: no job is
 *   created, no rank taken, no decision, no STATUS line);
 * - a job holds one run (one launch, run_key) at a time: a Hello of
 *   another launch is refused while a rank of the run is alive, and
 *   then replaces the run (a new one, or the recorded one resumed);
 * - a resume rewinds the job to the window it resumes at: the log is
 *   emptied and refilled with the decisions in force there, so apply
 *   steps again never decrease from there on.
 */
#include "jobs.h"

#include "common/clock.h"
#include "common/codec.h"
#include "log.h"
#include "policy_host.h"
#include "store.h"
#include "ctl_window.h"
#include "worker.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOBS_LOG               32   /* decisions kept per job */
#define JOBS_LATENCY_N         1024 /* decision latencies kept for STATUS */
#define JOBS_TELEMETRY_METRICS 4096 /* metrics one Telemetry carries */
#define JOBS_OPEN              8    /* windows aggregated at once per job */
#define JOBS_WELCOME_MAX       64 /* decisions sent in a welcome or snapshot */
#define JOBS_KEY_SHOWN         64 /* bytes of a launch identity in events */
#define JOBS_TAKEN             64 /* last windows a rank's reports are known */
#define JOBS_FRESH_MS                                                          \
	1000 /* a rank welcomed this recently also gets                        \
	      * decisions sent directly */

typedef struct job_rank {
	bool joined;                /* has said hello and not bye */
	bool alive;                 /* heard within rank_timeout_ms */
	uint8_t peer[CTL_PEER_MAX]; /* routing id holding the rank */
	uint8_t peer_len;           /* bytes in peer */
	uint64_t incarnation;       /* agent process holding it */
	uint64_t last_seen_ms;      /* monotonic */
	uint64_t step;              /* last step heard */
	uint64_t seq_in_force;      /* decision it applies */
	uint64_t reports;           /* reports accepted */
	uint32_t rejoins;           /* hellos after the first */
	uint64_t first_window;      /* first window it reports since joining:
				     * earlier ones close without it */
	bool left;                  /* said Bye and has not joined since */
	uint64_t welcomed_ms;       /* monotonic, when its hello was taken */
	bool resuming;              /* its hello carried a decision it
				     * applies: it ran before this hello
				     * (under another daemon instance) */
	uint64_t taken_top;         /* highest window whose report was
				     * taken from this incarnation, +1 */
	uint64_t taken_mask;        /* bit i: the report of window
				     * taken_top - 1 - i was taken */
	char *client;               /* authenticated client holding it, NULL
				     * without security */
} job_rank;

typedef struct job {
	char *name;                       /* job name */
	char *run_key;                    /* launch identity of its run, "" =
					   * unknown (an older agent) */
	char refused_key[JOBS_KEY_SHOWN]; /* the launch last refused while the
					   * run was alive: one event per
					   * launch, not per retried Hello */
	uint32_t world;                   /* ranks */
	uint32_t n_layers;                /* entries in layers */
	com_layer_info *layers;           /* the layer table */
	job_rank *ranks;                  /* world entries */
	uint32_t alive;                   /* ranks alive */
	uint64_t next_window;             /* lowest window not closed */
	ctl_window *open[JOBS_OPEN];      /* windows being aggregated */
	com_decision log[JOBS_LOG];       /* ring of recent decisions */
	uint64_t ticket[JOBS_LOG];        /* store ticket of each log entry */
	uint64_t closed_ns[JOBS_LOG];     /* when the window each entry answers
					   * closed (monotonic), 0: not a
					   * window's decision */
	uint32_t log_head;                /* index of the oldest entry */
	uint32_t log_n;                   /* entries used */
	uint64_t last_seq;                /* seq of the newest decision */
	uint64_t published_seq;           /* seq of the newest one published */
	int64_t run_id;                   /* its run in the store, 0 = none */
	bool ended;                       /* run ended: every rank said Bye */
	bool recovering;             /* rebuilt from the store and no window
				      * closed since: ranks resume the
				      * windows it expects */
	uint64_t max_step;           /* highest step heard from a rank */
	uint64_t idle_since_ms;      /* when the last rank went away */
	uint64_t resumed_ms;         /* when a launch last resumed it, 0 =
				      * never: resumes read the history on
				      * the loop, so they are spaced */
	uint64_t windows_incomplete; /* closed with ranks missing */
	uint64_t reports;            /* reports accepted by this daemon */
	uint64_t max_first_window;   /* highest first_window of a rank */
	ctl_policy_set *policies;    /* instances deciding for the job */
	char policy_names[256];      /* their names, for STATUS */
	size_t bytes;                /* the most it may hold, counted when
				      * it was admitted (jobs_job_bytes) */
} job;

struct ctl_jobs {
	const ctl_config *cfg;        /* settings in force (borrowed) */
	uint64_t instance;            /* this daemon run */
	ctl_jobs_publish_fn *publish; /* decision/telemetry sink */
	void *publish_arg;            /* its argument */
	ctl_jobs_send_fn *send;       /* to one peer, NULL = none */
	void *send_arg;               /* its argument */
	uint64_t now_ms;              /* the latest time a caller gave */
	job **jobs;                   /* table, n_jobs used */
	uint32_t n_jobs;              /* entries used */
	uint32_t cap_jobs;            /* entries allocated */
	job *last_hit;                /* lookup cache: reports come in runs */
	ctl_jobs_counters counters;   /* totals */
	ctl_events *events;           /* recent events, for STATUS */
	ctl_store *store;             /* history, NULL = none (borrowed) */
	uint64_t latency_ns[JOBS_LATENCY_N]; /* window close -> publish of
					      * the last decisions, a ring */
	uint64_t latency_n;                  /* decisions measured, ever */
	size_t bytes;                        /* sum of the jobs' bytes */
};

static void jobs_why(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
jobs_why(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* The Hello's launch identity, "" when it has none. */
static const char *
hello_run_id(const com_hello *h)
{
	return h->run_id != NULL ? h->run_id : "";
}

static int
jobs_error_reply(com_msg *reply, int code, const char *text)
{
	com_msg_init(reply, COM_MSG_ERROR);
	reply->u.error.code = code;
	reply->u.error.message = com_strdup(text);
	return code;
}

/* ---- decision log ---------------------------------------------------- */

static com_decision *
job_log_at(job *j, uint32_t i)
{
	return &j->log[(j->log_head + i) % JOBS_LOG];
}

static uint64_t *
job_ticket_at(job *j, uint32_t i)
{
	return &j->ticket[(j->log_head + i) % JOBS_LOG];
}

static const com_decision *
job_last(job *j)
{
	return j->log_n > 0 ? job_log_at(j, j->log_n - 1) : NULL;
}

static void jobs_publish_ready(ctl_jobs *jobs, job *j, uint64_t ticket);

/* The lowest window of j whose close is not durable yet: next_window,
 * or lower while a decision answering a closed window waits for its
 * commit. A repair waiting for its commit names a window already durable;
 * it only makes the answer lower than it could be, never wrong. */
static uint64_t
job_windows_closed(job *j)
{
	uint64_t w = j->next_window;

	for (uint32_t i = 0; i < j->log_n; i++) {
		const com_decision *d = job_log_at(j, i);

		if (d->seq > j->published_seq && d->window > 0 &&
		    d->window - 1 < w)
			w = d->window - 1;
	}
	return w;
}

/* Records the latency of a decision published now whose window closed at
 * `closed_ns` (0: not a window's decision, nothing to record). */
static void
jobs_latency_add(ctl_jobs *jobs, uint64_t closed_ns)
{
	uint64_t now = com_clock_ns();

	if (closed_ns == 0)
		return;
	jobs->latency_ns[jobs->latency_n % JOBS_LATENCY_N] = now > closed_ns
	    ? now - closed_ns
	    : 0;
	jobs->latency_n++;
}

/* Appends a decision, taking ownership of *d (zeroed on return); `ticket`
 * is the store's for it (0: nothing to wait for), `closed_ns` when the
 * window it answers closed (0: not a window's decision). */
static void
job_log_push(ctl_jobs *jobs, job *j, com_decision *d, uint64_t ticket,
    uint64_t closed_ns)
{
	if (j->log_n == JOBS_LOG) {
		/* A decision never leaves the log unpublished. */
		if (job_log_at(j, 0)->seq > j->published_seq)
			jobs_publish_ready(jobs, j, *job_ticket_at(j, 0));
		com_decision_fini(job_log_at(j, 0));
		j->log_head = (j->log_head + 1) % JOBS_LOG;
		j->log_n--;
	}
	*job_log_at(j, j->log_n) = *d;
	*job_ticket_at(j, j->log_n) = ticket;
	j->closed_ns[(j->log_head + j->log_n) % JOBS_LOG] = closed_ns;
	j->log_n++;
	j->last_seq = d->seq;
	memset(d, 0, sizeof(*d));
}

/* Index in the log of the decision in force at `step`, or -1 if that is
 * older than the log (or there are no decisions). */
static int
job_log_in_force(job *j, uint64_t step)
{
	int found = -1;

	for (uint32_t i = 0; i < j->log_n; i++) {
		if (job_log_at(j, i)->apply_step <= step)
			found = (int)i;
	}
	return found;
}

/* Copies the decisions an agent at `step` needs (the one in force and all
 * later ones, at most JOBS_WELCOME_MAX, the newest kept) into a fresh
 * array. Returns 0 or BELLOWS_ENOMEM. */
static int
job_log_tail(job *j, uint64_t step, com_decision **ret, uint32_t *ret_n)
{
	int from = job_log_in_force(j, step);
	uint32_t start, n;
	com_decision *out;

	start = from < 0 ? 0 : (uint32_t)from;
	n = j->log_n - start;
	if (n > JOBS_WELCOME_MAX) {
		start += n - JOBS_WELCOME_MAX;
		n = JOBS_WELCOME_MAX;
	}
	*ret = NULL;
	*ret_n = 0;
	if (n == 0)
		return 0;
	out = calloc(n, sizeof(*out));
	if (out == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		if (com_decision_copy(&out[i], job_log_at(j, start + i)) != 0) {
			for (uint32_t k = 0; k < i; k++)
				com_decision_fini(&out[k]);
			free(out);
			return BELLOWS_ENOMEM;
		}
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

/* Sends the decisions a rank needs (as a Snapshot) to every rank of j
 * that resumed (its hello carried a decision) less than JOBS_FRESH_MS
 * ago: its SUB may not be connected yet (see ctl_jobs_set_sender), and
 * it trains on while it reconnects, so a decision due at once would pass
 * it by. A rank starting afresh waits for its first decisions, which the
 * Welcome carries; not sending to those keeps a job of many new ranks
 * from flooding the control socket. Out of memory: those ranks rely on
 * the PUB and their own snapshot requests, as without a sender. */
static void
jobs_send_fresh(ctl_jobs *jobs, job *j)
{
	uint64_t now = jobs->now_ms;

	if (jobs->send == NULL)
		return;
	for (uint32_t r = 0; r < j->world; r++) {
		const job_rank *rk = &j->ranks[r];
		com_msg m;

		if (!rk->joined || rk->left || !rk->alive || !rk->resuming ||
		    now - rk->welcomed_ms >= JOBS_FRESH_MS)
			continue;
		com_msg_init(&m, COM_MSG_SNAPSHOT);
		m.u.snapshot.job = com_strdup(j->name);
		if (m.u.snapshot.job != NULL &&
		    job_log_tail(j, rk->step, &m.u.snapshot.decisions,
			&m.u.snapshot.n_decisions) == 0)
			jobs->send(jobs->send_arg, rk->peer, rk->peer_len, &m);
		com_msg_fini(&m);
	}
}

/* Publishes, in seq order, the logged decisions not yet published whose
 * store ticket is <= `ticket` (committed), stopping at the first that is
 * not; ranks welcomed moments ago get them directly too. */
static void
jobs_publish_ready(ctl_jobs *jobs, job *j, uint64_t ticket)
{
	bool published = false;

	for (uint32_t i = 0; i < j->log_n; i++) {
		com_decision *d = job_log_at(j, i);
		com_msg m;

		if (d->seq <= j->published_seq)
			continue;
		if (*job_ticket_at(j, i) > ticket)
			return;
		com_msg_init(&m, COM_MSG_DECISION);
		/* Shallow view of the logged decision: the log keeps
		 * ownership. */
		m.u.decision = *d;
		jobs->counters.decisions++;
		j->published_seq = d->seq;
		jobs->publish(jobs->publish_arg, &m);
		jobs_latency_add(jobs,
		    j->closed_ns[(j->log_head + i) % JOBS_LOG]);
		published = true;
	}
	if (published)
		jobs_send_fresh(jobs, j);
}

/* ctl_store_durable_fn: decisions up to `ticket` are committed. */
static void
jobs_on_durable(void *arg, uint64_t ticket)
{
	ctl_jobs *jobs = arg;

	for (uint32_t i = 0; i < jobs->n_jobs; i++)
		jobs_publish_ready(jobs, jobs->jobs[i], ticket);
}

/* Decides `state` as decision seq last+1 applying at `apply_step`: it is
 * recorded, and published once the store has committed it (at once
 * without a store, or while it is degraded). `closed_ns`: when the window
 * it answers closed, for the decision latency (0: not a window's).
 * Consumes state. */
static void
job_decide(ctl_jobs *jobs, job *j, com_decision *state, uint64_t apply_step,
    uint64_t window, ctl_store_source source, uint64_t closed_ns)
{
	const com_decision *prev = job_last(j);
	uint64_t ticket;

	if (prev != NULL && apply_step < prev->apply_step)
		apply_step = prev->apply_step;
	state->seq = j->last_seq + 1;
	state->apply_step = apply_step;
	state->window = window;
	ticket = ctl_store_decision(jobs->store, j->run_id, state, prev, source,
	    com_clock_wall_ms());
	job_log_push(jobs, j, state, ticket, closed_ns);
	jobs_publish_ready(jobs, j,
	    ctl_store_waits(jobs->store) ? 0 : UINT64_MAX);
}

/* Logs the state a rank says it applies as the job's newest decision, so
 * the sequence continues after it (a restarted daemon). The job name is
 * ours: the copy an agent sends may leave it empty, and every later
 * decision is derived from this one and published under its name. */
static void
job_adopt(ctl_jobs *jobs, job *j, const com_decision *in_force)
{
	com_decision adopted;
	char *name = com_strdup(j->name);

	if (name == NULL || com_decision_copy(&adopted, in_force) != 0) {
		free(name);
		return;
	}
	free(adopted.job);
	adopted.job = name;
	ctl_store_decision(jobs->store, j->run_id, &adopted, job_last(j),
	    CTL_STORE_ADOPTED, com_clock_wall_ms());
	j->last_seq = adopted.seq - 1;
	/* The ranks have it already: there is nothing to publish. */
	j->published_seq = adopted.seq;
	job_log_push(jobs, j, &adopted, 0, 0);
}

/* ---- jobs table -------------------------------------------------------- */

static void
job_destroy(job **jp)
{
	job *j = *jp;

	if (j == NULL)
		return;
	for (uint32_t i = 0; i < JOBS_OPEN; i++)
		ctl_window_destroy(&j->open[i]);
	for (uint32_t i = 0; i < j->log_n; i++)
		com_decision_fini(job_log_at(j, i));
	for (uint32_t l = 0; l < j->n_layers; l++)
		free(j->layers[l].name);
	ctl_policy_set_destroy(&j->policies);
	free(j->layers);
	for (uint32_t r = 0; j->ranks != NULL && r < j->world; r++)
		free(j->ranks[r].client);
	free(j->ranks);
	free(j->name);
	free(j->run_key);
	free(j);
	*jp = NULL;
}

static job *
jobs_find(ctl_jobs *jobs, const char *name)
{
	if (name == NULL)
		return NULL;
	if (jobs->last_hit != NULL && strcmp(jobs->last_hit->name, name) == 0)
		return jobs->last_hit;
	for (uint32_t i = 0; i < jobs->n_jobs; i++) {
		if (strcmp(jobs->jobs[i]->name, name) == 0)
			return jobs->last_hit = jobs->jobs[i];
	}
	return NULL;
}

static void
jobs_remove(ctl_jobs *jobs, uint32_t i)
{
	if (jobs->last_hit == jobs->jobs[i])
		jobs->last_hit = NULL;
	jobs->bytes -= jobs->jobs[i]->bytes;
	job_destroy(&jobs->jobs[i]);
	jobs->jobs[i] = jobs->jobs[--jobs->n_jobs];
}

/* A plug-in worker failed or was started again during a call for job
 * `name`
 * (worker.c logged it): the event goes into the ring, and from there to
 * STATUS and the history. */
static void
jobs_on_plugin_fault(void *arg, const char *kind, const char *name,
    const char *text)
{
	ctl_jobs *jobs = arg;

	ctl_events_add(jobs->events, kind, name, "%s", text);
}

int
ctl_jobs_new(const ctl_config *cfg, uint64_t instance,
    ctl_jobs_publish_fn *publish, void *publish_arg, ctl_jobs **ret_jobs)
{
	ctl_jobs *jobs = calloc(1, sizeof(*jobs));

	if (jobs == NULL || ctl_events_new(&jobs->events) != 0) {
		free(jobs);
		return BELLOWS_ENOMEM;
	}
	jobs->cfg = cfg;
	jobs->instance = instance;
	jobs->publish = publish;
	jobs->publish_arg = publish_arg;
	ctl_worker_set_limits(cfg->plugin_timeout_ms, cfg->plugin_memory_mb);
	ctl_worker_set_fault_fn(jobs_on_plugin_fault, jobs);
	*ret_jobs = jobs;
	return 0;
}

void
ctl_jobs_set_store(ctl_jobs *jobs, ctl_store *store)
{
	jobs->store = store;
	if (store != NULL)
		ctl_store_set_durable_fn(store, jobs_on_durable, jobs);
}

void
ctl_jobs_destroy(ctl_jobs **jobs)
{
	if (jobs == NULL || *jobs == NULL)
		return;
	for (uint32_t i = 0; i < (*jobs)->n_jobs; i++)
		job_destroy(&(*jobs)->jobs[i]);
	free((*jobs)->jobs);
	if (ctl_worker_fault_arg() == *jobs)
		ctl_worker_set_fault_fn(NULL, NULL);
	ctl_events_destroy(&(*jobs)->events);
	free(*jobs);
	*jobs = NULL;
}

/* Swaps in the prepared set `next` (NULL: the job now matches no entry)
 * for job j's policies. */
static void
job_commit_policies(ctl_jobs *jobs, job *j, ctl_policy_set *next)
{
	char note[BELLOWS_REASON_MAX];

	if (next == NULL) {
		if (j->policies != NULL)
			ctl_log(CTL_LOG_WARN, "jobs",
			    "no job entry matches '%s' any more: it runs "
			    "without policies",
			    j->name);
		ctl_policy_set_destroy(&j->policies);
	} else if (ctl_policy_set_commit(next, &j->policies, j->next_window,
		       j->alive, note, sizeof(note)) > 0) {
		ctl_log(CTL_LOG_WARN, "jobs", "job '%s': %s", j->name, note);
		ctl_events_add(jobs->events, CTL_EVENT_POLICY_RESTARTED,
		    j->name, "%s", note);
	}
	if (next != NULL)
		j->policies = next;
	ctl_policy_set_names(j->policies, j->policy_names,
	    sizeof(j->policy_names));
	ctl_log(CTL_LOG_INFO, "jobs", "job '%s' now runs policies '%s'",
	    j->name, j->policy_names);
}

int
ctl_jobs_reload(ctl_jobs *jobs, const ctl_config *cfg, char *errbuf,
    size_t errlen)
{
	char reason[BELLOWS_REASON_MAX];
	ctl_policy_set **next;
	com_decision *blank;
	uint32_t n = jobs->n_jobs, i;
	int r = BELLOWS_ENOMEM;

	/* Every job's new set is prepared before any is committed, so a
	 * policy that cannot start for one job leaves all of them as they
	 * were. Prepared sets borrow the state in force until the commit. */
	next = calloc(n ? n : 1, sizeof(*next));
	blank = calloc(n ? n : 1, sizeof(*blank));
	if (next == NULL || blank == NULL) {
		snprintf(errbuf, errlen, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		job *j = jobs->jobs[i];
		const ctl_job_conf *jc = ctl_config_match(cfg, j->name);
		const com_decision *state = job_last(j);

		if (jc == NULL)
			continue;
		/* Only an allocation failure leaves a job without a
		 * decision; its policies then start from a blank state. */
		if (state == NULL) {
			if (com_decision_init(&blank[i], j->name,
				j->n_layers) != 0) {
				snprintf(errbuf, errlen, "out of memory");
				r = BELLOWS_ENOMEM;
				goto fail;
			}
			state = &blank[i];
		}
		r = ctl_policy_set_prepare(j->policies, jc, j->name, j->world,
		    j->layers, j->n_layers, state, reason, sizeof(reason),
		    &next[i]);
		if (r != 0) {
			snprintf(errbuf, errlen, "job '%s': %s", j->name,
			    reason[0] != '\0' ? reason : bellows_strerror(r));
			goto fail;
		}
	}
	for (i = 0; i < n; i++)
		job_commit_policies(jobs, jobs->jobs[i], next[i]);
	jobs->cfg = cfg;
	ctl_worker_set_limits(cfg->plugin_timeout_ms, cfg->plugin_memory_mb);
	r = 0;
	goto out;
fail:
	for (i = 0; i < n; i++)
		ctl_policy_set_destroy(&next[i]);
out:
	for (i = 0; blank != NULL && i < n; i++)
		com_decision_fini(&blank[i]);
	free(blank);
	free(next);
	return r;
}

ctl_events *
ctl_jobs_events(ctl_jobs *jobs)
{
	return jobs->events;
}

void
ctl_jobs_set_sender(ctl_jobs *jobs, ctl_jobs_send_fn *send, void *arg)
{
	jobs->send = send;
	jobs->send_arg = arg;
}

void
ctl_jobs_get_counters(const ctl_jobs *jobs, ctl_jobs_counters *ret)
{
	*ret = jobs->counters;
}

static int
jobs_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void
ctl_jobs_latency(const ctl_jobs *jobs, ctl_jobs_latency_info *ret)
{
	uint64_t sorted[JOBS_LATENCY_N];
	uint32_t n = jobs->latency_n < JOBS_LATENCY_N
	    ? (uint32_t)jobs->latency_n
	    : JOBS_LATENCY_N;

	memset(ret, 0, sizeof(*ret));
	ret->samples = n;
	if (n == 0)
		return;
	memcpy(sorted, jobs->latency_ns, n * sizeof(sorted[0]));
	qsort(sorted, n, sizeof(sorted[0]), jobs_cmp_u64);
	/* Nearest rank: the smallest value with at least p % at or below. */
	ret->p50_ms = (double)sorted[(n * 50 + 99) / 100 - 1] / 1e6;
	ret->p99_ms = (double)sorted[(n * 99 + 99) / 100 - 1] / 1e6;
	ret->max_ms = (double)sorted[n - 1] / 1e6;
}

/* The most a job of `world` ranks and this layer table can come to hold
 * in the table, whatever its ranks send: the job and its names, its rank
 * slots, its decision log (every entry with the largest codec table and
 * texts the wire allows), every window it may aggregate at once at its
 * fullest (ctl_window_bytes_max) and its policies (ctl_policy_set_bytes).
 * Counted before anything is allocated, so that a Hello cannot make the
 * daemon hold more than max_job_mb for one job, or max_total_job_mb for
 * all of them. Saturates at SIZE_MAX. */
static size_t
jobs_job_bytes(const ctl_job_conf *jc, const char *name, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers)
{
	uint64_t names = strlen(name) + 1, n;
	com_limits lim;

	com_limits_default(&lim);
	for (uint32_t l = 0; l < n_layers; l++)
		names += strlen(layers[l].name) + 1;
	n = sizeof(job) + names + (uint64_t)world * sizeof(job_rank) +
	    (uint64_t)n_layers * sizeof(com_layer_info);
	n += JOBS_LOG *
	    ((uint64_t)n_layers * 2 * sizeof(double) + lim.max_codec_table +
		2 * (uint64_t)lim.max_text_len + strlen(name) + 1);
	n += JOBS_OPEN *
	    (uint64_t)ctl_window_bytes_max(world, n_layers, lim.max_comm);
	n += ctl_policy_set_bytes(jc, n_layers);
	return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/* Refuses a job that would hold more than the configured budgets, with
 * the reason in why. Returns 0 or BELLOWS_ELIMIT. */
static int
jobs_admit(ctl_jobs *jobs, const char *name, size_t bytes, char *why,
    size_t why_len)
{
	const ctl_config *cfg = jobs->cfg;
	uint64_t mib = ((uint64_t)bytes + (1u << 20) - 1) >> 20;
	uint64_t total = (uint64_t)cfg->max_total_job_mb << 20;

	if (bytes > (uint64_t)cfg->max_job_mb << 20) {
		jobs_why(why, why_len,
		    "job '%s' could hold up to %" PRIu64
		    " MiB, more than max_job_mb (%u)",
		    name, mib, cfg->max_job_mb);
		return BELLOWS_ELIMIT;
	}
	/* The held jobs may exceed a total lowered by a reload. */
	if (jobs->bytes > total || bytes > total - jobs->bytes) {
		jobs_why(why, why_len,
		    "job '%s' could hold up to %" PRIu64
		    " MiB, and the %u jobs held may hold %zu MiB: more than "
		    "max_total_job_mb (%u)",
		    name, mib, jobs->n_jobs, jobs->bytes >> 20,
		    cfg->max_total_job_mb);
		return BELLOWS_ELIMIT;
	}
	return 0;
}

/* Creates job `h->job` from its first hello: layer table, policies and,
 * unless the hello carries a state to adopt (a daemon restart), the
 * policies' initial decision. */
/* Makes room for one more job in the table and allocates a job with its
 * name, rank slots and a copy of the layer table; the caller fills the
 * rest and appends it. Returns 0 or BELLOWS_ENOMEM (nothing allocated). */
static int
job_alloc(ctl_jobs *jobs, const char *name, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers, job **ret)
{
	job *j;

	if (jobs->n_jobs == jobs->cap_jobs) {
		uint32_t cap = jobs->cap_jobs ? jobs->cap_jobs * 2 : 8;
		job **grown = realloc(jobs->jobs, cap * sizeof(*grown));

		if (grown == NULL)
			return BELLOWS_ENOMEM;
		jobs->jobs = grown;
		jobs->cap_jobs = cap;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return BELLOWS_ENOMEM;
	j->name = com_strdup(name);
	j->run_key = com_strdup("");
	j->world = world;
	j->n_layers = n_layers;
	j->layers = calloc(n_layers ? n_layers : 1, sizeof(*j->layers));
	j->ranks = calloc(world ? world : 1, sizeof(*j->ranks));
	if (j->name == NULL || j->run_key == NULL || j->layers == NULL ||
	    j->ranks == NULL)
		goto fail;
	for (uint32_t l = 0; l < n_layers; l++) {
		j->layers[l] = layers[l];
		j->layers[l].name = com_strdup(layers[l].name);
		if (j->layers[l].name == NULL)
			goto fail;
	}
	*ret = j;
	return 0;
fail:
	job_destroy(&j);
	return BELLOWS_ENOMEM;
}

static int
jobs_create(ctl_jobs *jobs, const com_hello *h, job **ret, char *why,
    size_t why_len)
{
	const ctl_job_conf *jc = ctl_config_match(jobs->cfg, h->job);
	com_decision state = { 0 };
	char reason[BELLOWS_REASON_MAX];
	size_t bytes;
	bool adopt;
	job *j;
	int r = BELLOWS_ENOMEM;

	if (jobs->n_jobs >= jobs->cfg->max_jobs) {
		jobs_why(why, why_len, "job table full (%u jobs)",
		    jobs->cfg->max_jobs);
		return BELLOWS_ELIMIT;
	}
	bytes = jobs_job_bytes(jc, h->job, h->world, h->layers, h->n_layers);
	if ((r = jobs_admit(jobs, h->job, bytes, why, why_len)) != 0)
		return r;
	if ((r = job_alloc(jobs, h->job, h->world, h->layers, h->n_layers,
		 &j)) != 0)
		return r;
	j->bytes = bytes;
	r = BELLOWS_ENOMEM;
	free(j->run_key);
	if ((j->run_key = com_strdup(hello_run_id(h))) == NULL)
		goto fail;
	j->next_window = h->last_window;
	if (com_decision_init(&state, h->job, h->n_layers) != 0)
		goto fail;
	if (jc != NULL) {
		r = ctl_policy_set_new(jc, h->job, h->world, j->layers,
		    j->n_layers, &state, reason, sizeof(reason), &j->policies);
		if (r != 0) {
			jobs_why(why, why_len, "%s", reason);
			goto fail;
		}
		ctl_policy_set_names(j->policies, j->policy_names,
		    sizeof(j->policy_names));
	} else {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "no job entry matches '%s': it runs without policies",
		    h->job);
		snprintf(reason, sizeof(reason), "no policy configured");
	}
	jobs->jobs[jobs->n_jobs++] = j;
	jobs->bytes += j->bytes;
	adopt = h->in_force.seq > 0 && h->in_force.n_layers == h->n_layers;
	j->run_id = ctl_store_run_begin(jobs->store, j->name, j->run_key,
	    j->world, j->layers, j->n_layers, jobs->cfg,
	    adopt ? h->in_force.seq : 1, com_clock_wall_ms());
	if (adopt) {
		/* A restarted daemon adopts what the ranks apply, so training
		 * goes on unchanged and the sequence continues. */
		uint64_t now = com_clock_ms();

		com_decision_fini(&state);
		job_adopt(jobs, j, &h->in_force);
		/* The other ranks are reconnecting too: expect every one of
		 * them (until rank_timeout_ms says otherwise), so that no
		 * window closes and no decision is published before all are
		 * back and waiting for it at its apply step. */
		for (uint32_t k = 0; k < j->world; k++) {
			j->ranks[k].alive = true;
			j->ranks[k].last_seen_ms = now;
			j->ranks[k].first_window = h->last_window;
		}
		j->alive = j->world;
		ctl_log(CTL_LOG_INFO, "jobs",
		    "job '%s' resumed at decision %" PRIu64 " from rank %u",
		    h->job, h->in_force.seq, h->rank);
	} else {
		free(state.reason);
		free(state.policy);
		state.reason = com_strdup(reason);
		state.policy = com_strdup(j->policy_names);
		job_decide(jobs, j, &state, h->step, 0, CTL_STORE_INITIAL, 0);
		com_decision_fini(&state);
	}
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s' created: world %u, %u layers, policies '%s'", h->job,
	    h->world, h->n_layers, j->policy_names);
	*ret = j;
	return 0;
fail:
	com_decision_fini(&state);
	job_destroy(&j);
	return r;
}

static bool
jobs_same_table(const job *j, const com_hello *h)
{
	if (j->n_layers != h->n_layers)
		return false;
	for (uint32_t l = 0; l < j->n_layers; l++) {
		const com_layer_info *a = &j->layers[l], *b = &h->layers[l];

		if (a->numel != b->numel || a->ndim != b->ndim ||
		    strcmp(a->name, b->name) != 0 ||
		    memcmp(a->shape, b->shape, sizeof(a->shape[0]) * a->ndim))
			return false;
	}
	return true;
}

static bool
rank_peer_is(const job_rank *rk, const uint8_t *peer, size_t len)
{
	return rk->peer_len == len && memcmp(rk->peer, peer, len) == 0;
}

/* Finds the rank a message claims and checks the sender holds it. */
/* True when the rank's session belongs to `client` (always without
 * security). */
static bool
rank_client_is(const ctl_jobs *jobs, const job_rank *rk, const char *client)
{
	if (!jobs->cfg->security.enabled)
		return true;
	return rk->client != NULL && client != NULL &&
	    strcmp(rk->client, client) == 0;
}

/* Refuses a client the configuration does not allow for job `name`. */
static int
jobs_check_client(const ctl_jobs *jobs, const char *name, const char *client,
    char *why, size_t why_len)
{
	if (ctl_config_client_allowed(jobs->cfg, name, client))
		return 0;
	jobs_why(why, why_len, "client '%s' is not allowed for job '%s'",
	    client != NULL ? client : "(unauthenticated)",
	    name != NULL ? name : "");
	return BELLOWS_EPERM;
}

static int
jobs_rank_of(ctl_jobs *jobs, const char *name, uint32_t rank,
    const uint8_t *peer, size_t peer_len, const char *client, job **ret_job,
    job_rank **ret_rank, char *why, size_t why_len)
{
	job *j;
	job_rank *rk;
	int r;

	if ((r = jobs_check_client(jobs, name, client, why, why_len)) != 0)
		return r;
	j = jobs_find(jobs, name);
	if (j == NULL) {
		jobs_why(why, why_len, "unknown job '%s'",
		    name != NULL ? name : "");
		return BELLOWS_ENOTJOINED;
	}
	if (rank >= j->world) {
		jobs_why(why, why_len, "rank %u outside world %u of job '%s'",
		    rank, j->world, name);
		return BELLOWS_EPROTO;
	}
	rk = &j->ranks[rank];
	if (!rk->joined || !rank_peer_is(rk, peer, peer_len) ||
	    !rank_client_is(jobs, rk, client)) {
		jobs_why(why, why_len,
		    "rank %u of job '%s' is not held by this peer", rank, name);
		return BELLOWS_ENOTJOINED;
	}
	*ret_job = j;
	*ret_rank = rk;
	return 0;
}

/* Remembers that the rank's report of window w was taken. */
static void
rank_taken_mark(job_rank *rk, uint64_t w)
{
	if (w >= rk->taken_top) {
		uint64_t shift = w + 1 - rk->taken_top;

		rk->taken_mask = shift >= JOBS_TAKEN ? 0
						     : rk->taken_mask << shift;
		rk->taken_mask |= 1;
		rk->taken_top = w + 1;
	} else if (rk->taken_top - 1 - w < JOBS_TAKEN) {
		rk->taken_mask |= (uint64_t)1 << (rk->taken_top - 1 - w);
	}
}

/* True when the rank's report of window w was taken (as far as the last
 * JOBS_TAKEN windows tell). */
static bool
rank_taken(const job_rank *rk, uint64_t w)
{
	return w < rk->taken_top && rk->taken_top - 1 - w < JOBS_TAKEN &&
	    ((rk->taken_mask >> (rk->taken_top - 1 - w)) & 1) != 0;
}

/* True when window w of the job waits for this rank's report. */
static bool
rank_expected(const job_rank *rk, uint64_t w)
{
	return rk->alive && w >= rk->first_window;
}

/* Tells the job's policies that a rank was lost or joined. */
static void
job_tell_policies(ctl_jobs *jobs, job *j, bellows_event_type type,
    uint32_t rank)
{
	const bellows_event ev = {
		.type = type,
		.rank = rank,
		.window = j->next_window,
		.ranks_alive = j->alive,
	};
	uint32_t failed;

	if (j->policies == NULL)
		return;
	failed = ctl_policy_set_event(j->policies, &ev);
	if (failed > 0) {
		jobs->counters.policy_errors += failed;
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s': %u policies failed on a rank event", j->name,
		    failed);
	}
}

static void
rank_seen(ctl_jobs *jobs, job *j, job_rank *rk, uint64_t now_ms)
{
	rk->last_seen_ms = now_ms;
	if (now_ms > jobs->now_ms)
		jobs->now_ms = now_ms;
	if (!rk->alive) {
		rk->alive = true;
		j->alive++;
	}
}

static void
rank_lost(ctl_jobs *jobs, job *j, uint32_t rank, uint64_t now_ms,
    const char *how, ctl_store_rank_kind kind)
{
	job_rank *rk = &j->ranks[rank];

	ctl_log(CTL_LOG_WARN, "jobs", "job '%s' rank %u %s at step %" PRIu64,
	    j->name, rank, how, rk->step);
	if (!rk->alive)
		return;
	ctl_store_rank_event(jobs->store, j->run_id, rank, kind, rk->step, 0,
	    com_clock_wall_ms());
	rk->alive = false;
	j->alive--;
	if (j->alive == 0)
		j->idle_since_ms = now_ms;
	ctl_events_add(jobs->events, CTL_EVENT_RANK_LOST, j->name,
	    "rank %u %s at step %" PRIu64 " (%u/%u alive)", rank, how, rk->step,
	    j->alive, j->world);
	job_tell_policies(jobs, j, BELLOWS_EVENT_RANK_LOST, rank);
}

static int job_take_over(ctl_jobs *jobs, job **jp, const com_hello *h,
    uint64_t now_ms, char *why, size_t why_len);
static int jobs_refuse_launch(ctl_jobs *jobs, job *j, const com_hello *h,
    com_msg *reply, char *why, size_t why_len);
static int job_resume(ctl_jobs *jobs, job **jp, const com_hello *h,
    uint64_t now_ms, char *why, size_t why_len);

/* What a Hello is to the run its job holds. */
typedef enum job_launch {
	JOB_LAUNCH_SAME, /* a rank of the run: joins or rejoins it */
	JOB_LAUNCH_NEW,  /* another launch, and the run's ranks are gone:
			  * it takes the job over */
	JOB_LAUNCH_BUSY, /* another launch while ranks of the run live */
} job_launch;

/* Ranks alive that said Hello to this daemon (not merely expected back
 * after a restart). */
static uint32_t
job_joined_alive(const job *j)
{
	uint32_t n = 0;

	for (uint32_t r = 0; r < j->world; r++)
		n += j->ranks[r].alive && j->ranks[r].joined;
	return n;
}

/* Tells a Hello of job j apart (docs/protocol.md, "Runs"). Two launch
 * identities that differ are two launches; the new one waits until no
 * rank of the run is alive, those expected back after a restart of the
 * daemon included (rank_timeout_ms bounds the wait). The same identity
 * after the run ended cleanly, or from a rank the run has not seen, is
 * a rank of it joining late. Otherwise
 * (no two identities to compare, or a launcher that reuses one after a
 * failure), a process starting afresh (it applies no decision yet)
 * behind the job, when no rank of the run is there, is a new launch
 * too; with ranks there it is one of them joining late or restarted
 * alone. */
static job_launch
job_launch_of(const job *j, const com_hello *h)
{
	const char *id = hello_run_id(h);
	/* A Hello of another launch may have another world. */
	const job_rank *rk = h->rank < j->world ? &j->ranks[h->rank] : NULL;

	bool named = id[0] != '\0' && j->run_key[0] != '\0';

	if (named && strcmp(id, j->run_key) != 0)
		return j->alive > 0 ? JOB_LAUNCH_BUSY : JOB_LAUNCH_NEW;
	/* The same launch after a clean end, or a rank of it the run has
	 * not seen yet: a straggler (ranks that never meet in a collective
	 * may finish apart), not a restart, which follows a failure of
	 * ranks that had joined. */
	if (named && !h->resume &&
	    (j->ended ||
		(rk != NULL && !rk->joined && !rk->left && rk->reports == 0)))
		return JOB_LAUNCH_SAME;
	if (h->in_force.seq == 0 && h->last_window < j->next_window &&
	    job_joined_alive(j) == 0)
		return JOB_LAUNCH_NEW;
	return JOB_LAUNCH_SAME;
}

int
ctl_jobs_hello(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_hello *h, uint64_t now_ms, com_msg *reply,
    char *why, size_t why_len)
{
	const ctl_config *cfg = jobs->cfg;
	char previous_key[JOBS_KEY_SHOWN] = "";
	int64_t previous = 0;
	bool replaced = false;
	job *j;
	job_rank *rk;
	bool resume;
	int r;

	if (peer_len == 0 || peer_len > CTL_PEER_MAX) {
		jobs_why(why, why_len, "routing id of %zu bytes", peer_len);
		return BELLOWS_EPROTO;
	}
	/* The codec checks these too; the rank indexes j->ranks below, so
	 * the table does not rely on it. */
	if (h->job == NULL || h->job[0] == '\0' || h->rank >= h->world) {
		jobs_why(why, why_len,
		    "hello for '%s' with rank %u of world %u",
		    h->job != NULL ? h->job : "", h->rank, h->world);
		return jobs_error_reply(reply, BELLOWS_EPROTO, why);
	}
	if (h->world > cfg->max_world || h->n_layers > cfg->max_layers ||
	    h->n_layers == 0) {
		jobs_why(why, why_len,
		    "hello for '%s' with world %u and %u layers exceeds this "
		    "daemon's limits (world <= %u, 1..%u layers)",
		    h->job, h->world, h->n_layers, cfg->max_world,
		    cfg->max_layers);
		return jobs_error_reply(reply, BELLOWS_ELIMIT, why);
	}
	for (uint32_t l = 0; l < h->n_layers; l++) {
		if (h->layers[l].name == NULL ||
		    h->layers[l].ndim > COM_MAX_NDIM) {
			jobs_why(why, why_len,
			    "hello for '%s' has a malformed layer %u", h->job,
			    l);
			return jobs_error_reply(reply, BELLOWS_EPROTO, why);
		}
	}
	/* Before anything is looked up: a client not allowed for the job
	 * creates nothing, takes nothing over, resumes nothing. */
	if ((r = jobs_check_client(jobs, h->job, client, why, why_len)) != 0)
		return jobs_error_reply(reply, r, why);
	j = jobs_find(jobs, h->job);
	if (j != NULL && jobs->cfg->security.enabled && h->rank < j->world) {
		const job_rank *held = &j->ranks[h->rank];

		/* A live rank's session stays with the client that opened
		 * it; the same incarnation claimed by another client is
		 * another process, not this one reconnecting. */
		if (held->joined && held->alive &&
		    !rank_client_is(jobs, held, client)) {
			jobs_why(why, why_len,
			    "rank %u of job '%s' is held by another client",
			    h->rank, h->job);
			return jobs_error_reply(reply, BELLOWS_EBUSY, why);
		}
	}
	if (j != NULL) {
		switch (job_launch_of(j, h)) {
		case JOB_LAUNCH_BUSY:
			return jobs_refuse_launch(jobs, j, h, reply, why,
			    why_len);
		case JOB_LAUNCH_NEW:
			snprintf(previous_key, sizeof(previous_key), "%s",
			    j->run_key);
			previous = j->run_id;
			r = job_take_over(jobs, &j, h, now_ms, why, why_len);
			if (r != 0)
				return jobs_error_reply(reply, r, why);
			replaced = j == NULL;
			break;
		case JOB_LAUNCH_SAME:
			break;
		}
	} else if (h->resume && h->last_window > 0) {
		/* A job this daemon forgot (or never ran): its recorded
		 * run, if the history has one, continues. */
		if ((r = job_resume(jobs, &j, h, now_ms, why, why_len)) != 0)
			return jobs_error_reply(reply, r, why);
	}
	if (j == NULL) {
		r = jobs_create(jobs, h, &j, why, why_len);
		if (r != 0)
			return jobs_error_reply(reply, r, why);
		if (replaced) {
			ctl_log(CTL_LOG_INFO, "jobs",
			    "job '%s': launch '%s' started run %" PRId64
			    " after run %" PRId64,
			    j->name, j->run_key, j->run_id, previous);
			ctl_events_add(jobs->events, CTL_EVENT_RUN_STARTED,
			    j->name,
			    "launch '%s' started a new run at step %" PRIu64
			    " after launch '%s' (run %" PRId64 ")",
			    j->run_key, h->step, previous_key, previous);
		}
	} else if (j->world != h->world || !jobs_same_table(j, h)) {
		jobs_why(why, why_len,
		    "hello for job '%s' rank %u does not match the job "
		    "(world %u, %u layers)",
		    h->job, h->rank, j->world, j->n_layers);
		return jobs_error_reply(reply, BELLOWS_EMISMATCH, why);
	}
	rk = &j->ranks[h->rank];
	if (rk->joined && rk->alive && rk->incarnation != h->incarnation &&
	    !rank_peer_is(rk, peer, peer_len)) {
		jobs_why(why, why_len,
		    "rank %u of job '%s' is held by a live agent", h->rank,
		    h->job);
		return jobs_error_reply(reply, BELLOWS_EBUSY, why);
	}
	if (rk->joined || rk->reports > 0)
		rk->rejoins++;
	/* A job rebuilt from the store knows which window comes next: a
	 * rank whose queued reports start there resumes it (the daemon
	 * restarted under it), rather than moving the job ahead. */
	resume = j->recovering && h->last_window >= j->next_window &&
	    h->last_window - j->next_window < JOBS_OPEN;
	if (rk->incarnation != h->incarnation)
		rk->taken_top = rk->taken_mask = 0;
	if (jobs->cfg->security.enabled &&
	    (rk->client == NULL || strcmp(rk->client, client) != 0)) {
		char *copy = com_strdup(client);

		if (copy == NULL)
			return BELLOWS_ENOMEM;
		free(rk->client);
		rk->client = copy;
	}
	rk->joined = true;
	rk->left = false;
	memcpy(rk->peer, peer, peer_len);
	rk->peer_len = (uint8_t)peer_len;
	rk->incarnation = h->incarnation;
	rk->step = h->step;
	rk->seq_in_force = h->in_force.seq;
	rk->welcomed_ms = now_ms;
	rk->resuming = h->in_force.seq > 0;
	rk->first_window = resume ? j->next_window : h->last_window;
	if (j->ended) {
		/* Taken up again after every rank had left. */
		j->ended = false;
		ctl_store_run_end(jobs->store, j->run_id, 0);
	}
	if (rk->first_window > j->max_first_window)
		j->max_first_window = rk->first_window;
	rank_seen(jobs, j, rk, now_ms);
	if (h->step > j->max_step)
		j->max_step = h->step;
	if (h->last_window > j->next_window && j->reports == 0 && !resume) {
		/* Ranks are past windows this daemon never saw close (it
		 * restarted): start aggregating from where they are. A rank
		 * that rejoins a running job does not move the job: it is
		 * simply not expected in the windows before its first. */
		for (uint32_t i = 0; i < JOBS_OPEN; i++) {
			if (j->open[i] != NULL &&
			    ctl_window_index(j->open[i]) < h->last_window)
				ctl_window_destroy(&j->open[i]);
		}
		j->next_window = h->last_window;
	}
	if (h->in_force.seq > j->last_seq &&
	    h->in_force.n_layers == j->n_layers) {
		ctl_log(CTL_LOG_INFO, "jobs",
		    "job '%s' resumed at decision %" PRIu64
		    " from rank %u (the daemon knew up to %" PRIu64 ")",
		    j->name, h->in_force.seq, h->rank, j->last_seq);
		job_adopt(jobs, j, &h->in_force);
	}
	ctl_store_rank_event(jobs->store, j->run_id, h->rank,
	    rk->rejoins > 0 ? CTL_STORE_RANK_REJOINED : CTL_STORE_RANK_JOINED,
	    h->step, h->incarnation, com_clock_wall_ms());
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s' rank %u %s at step %" PRIu64 " (%u/%u alive)", h->job,
	    h->rank, rk->rejoins > 0 ? "rejoined" : "joined", h->step, j->alive,
	    j->world);
	ctl_events_add(jobs->events, CTL_EVENT_RANK_JOINED, j->name,
	    "rank %u %s at step %" PRIu64 " (%u/%u alive)", h->rank,
	    rk->rejoins > 0 ? "rejoined" : "joined", h->step, j->alive,
	    j->world);
	job_tell_policies(jobs, j, BELLOWS_EVENT_RANK_JOINED, h->rank);

	com_msg_init(reply, COM_MSG_WELCOME);
	reply->u.welcome.job = com_strdup(h->job);
	reply->u.welcome.rank = h->rank;
	reply->u.welcome.apply_lag = cfg->apply_lag;
	reply->u.welcome.heartbeat_ms = cfg->heartbeat_ms;
	reply->u.welcome.instance = jobs->instance;
	reply->u.welcome.windows_closed = job_windows_closed(j);
	if (reply->u.welcome.job == NULL ||
	    job_log_tail(j, h->step, &reply->u.welcome.decisions,
		&reply->u.welcome.n_decisions) != 0) {
		com_msg_fini(reply);
		return BELLOWS_ENOMEM;
	}
	return 0;
}

/* Re-issues the job's current state under a new seq when a rank applies
 * something else than it should at `step`, unless a decision is already
 * pending (it will bring every rank to the same state). */
static void
job_check_divergence(ctl_jobs *jobs, job *j, uint32_t rank, uint64_t step,
    uint64_t seq_in_force)
{
	const ctl_config *cfg = jobs->cfg;
	const com_decision *last = job_last(j);
	int at = job_log_in_force(j, step);
	com_decision state;
	uint64_t expected;

	if (last == NULL || at < 0)
		return;
	expected = job_log_at(j, (uint32_t)at)->seq;
	/* seq 0: the rank has not begun a step yet; it is about to apply
	 * what its Welcome carried. */
	if (seq_in_force == 0 || seq_in_force == expected ||
	    last->apply_step > j->max_step)
		return;
	if (com_decision_copy(&state, last) != 0)
		return;
	free(state.reason);
	state.reason = NULL;
	{
		char text[160];

		snprintf(text, sizeof(text),
		    "repair: rank %u applied decision %" PRIu64
		    " at step %" PRIu64 ", expected %" PRIu64,
		    rank, seq_in_force, step, expected);
		state.reason = com_strdup(text);
		ctl_log(CTL_LOG_WARN, "jobs", "job '%s': %s", j->name, text);
	}
	jobs->counters.repairs++;
	job_decide(jobs, j, &state,
	    j->max_step + 1 + cfg->apply_lag + cfg->repair_margin, last->window,
	    CTL_STORE_REPAIR, 0);
	com_decision_fini(&state);
}

/* Publishes the window's summary with what the policies computed on it
 * (their metrics, borrowed from the policy set for the call). */
static void
jobs_publish_telemetry(ctl_jobs *jobs, job *j, const bellows_window *w)
{
	uint32_t n_metrics = 0;
	const com_metric *metrics = ctl_policy_set_metrics(j->policies,
	    &n_metrics);
	com_msg m;

	com_msg_init(&m, COM_MSG_TELEMETRY);
	/* The wire takes JOBS_TELEMETRY_METRICS (the codec's limit); a job
	 * of many policies sends the first ones, the history keeps all. */
	if (n_metrics > JOBS_TELEMETRY_METRICS)
		n_metrics = JOBS_TELEMETRY_METRICS;
	/* Borrowed for the call: the message is not finalised. */
	m.u.telemetry.n_metrics = n_metrics;
	m.u.telemetry.metrics = (com_metric *)metrics;
	m.u.telemetry.job = j->name; /* borrowed for the call */
	m.u.telemetry.window = w->window;
	m.u.telemetry.ranks_reported = w->ranks_reported;
	m.u.telemetry.ranks_expected = j->alive;
	m.u.telemetry.step_ms_median = isnan(w->step_ms_median)
	    ? 0
	    : w->step_ms_median;
	jobs->publish(jobs->publish_arg, &m);
}

/* Closes window `slot` of job j: runs the policies and publishes the
 * decision that answers it. */
static void
job_close_window(ctl_jobs *jobs, job *j, uint32_t slot, bool complete)
{
	ctl_window *win = j->open[slot];
	const com_decision *last = job_last(j);
	char policies[256], reason[1024];
	const com_metric *metrics;
	uint64_t closing_ns = com_clock_ns();
	com_decision state;
	bellows_window view;
	uint32_t failed = 0, n_metrics = 0;
	uint64_t apply_step;

	if (last != NULL)
		ctl_window_view(win, j->name, j->world, j->layers, last, &view);
	if (last == NULL || com_decision_copy(&state, last) != 0) {
		/* Out of memory: the window is dropped without a decision;
		 * agents time out and keep their state. */
		ctl_log(CTL_LOG_ERROR, "jobs",
		    "job '%s' window %" PRIu64 " closed without a decision",
		    j->name, ctl_window_index(win));
		j->next_window = ctl_window_index(win) + 1;
		ctl_window_destroy(&j->open[slot]);
		return;
	}
	if (!complete) {
		char missing[256] = "";
		size_t used = 0;

		for (uint32_t r = 0; r < j->world && used < 200; r++) {
			if (rank_expected(&j->ranks[r],
				ctl_window_index(win)) &&
			    !ctl_window_has(win, r)) {
				int n = snprintf(missing + used,
				    sizeof(missing) - used, "%s%u",
				    used ? "," : "", r);
				if (n > 0)
					used += (size_t)n;
			}
		}
		j->windows_incomplete++;
		jobs->counters.incomplete++;
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s' window %" PRIu64
		    " closed by timeout with %u of %u ranks (missing: %s)",
		    j->name, view.window, view.ranks_reported, j->alive,
		    missing);
		ctl_events_add(jobs->events, CTL_EVENT_WINDOW_INCOMPLETE,
		    j->name,
		    "window %" PRIu64
		    " closed by timeout with %u of %u ranks (missing: %s)",
		    view.window, view.ranks_reported, j->alive, missing);
	}
	policies[0] = reason[0] = '\0';
	/* Each decision asks for its own calibration, or none. */
	state.calibrate_steps = 0;
	if (j->policies != NULL) {
		ctl_policy_set_run(j->policies, &view, &state, policies,
		    sizeof(policies), reason, sizeof(reason), &failed);
		if (failed > 0) {
			jobs->counters.policy_errors += failed;
			ctl_log(CTL_LOG_WARN, "jobs",
			    "job '%s' window %" PRIu64 ": %u policies failed",
			    j->name, view.window, failed);
		}
	}
	free(state.policy);
	free(state.reason);
	state.policy = com_strdup(policies);
	state.reason = com_strdup(reason[0] != '\0' ? reason : "no change");
	apply_step = view.last_step + 1 + jobs->cfg->apply_lag;
	if (j->max_step + 1 > apply_step)
		apply_step = j->max_step + 1;
	if (!complete) {
		/* Closed late: ranks that gave up waiting are already past
		 * the usual apply step, and heartbeats lag. Leave them the
		 * same margin a repair gets. */
		uint64_t late = j->max_step + 1 + jobs->cfg->apply_lag +
		    jobs->cfg->repair_margin;

		if (late > apply_step)
			apply_step = late;
	}
	jobs->counters.windows++;
	jobs_publish_telemetry(jobs, j, &view);
	/* The window as the policies saw it, with `last`, the state in
	 * force during it: what a recovered job's policies are shown
	 * again. Recorded before the decision answering it, it is never
	 * dropped and commits no later than that decision. */
	ctl_store_window(jobs->store, j->run_id, &view, j->alive, complete,
	    last, com_clock_wall_ms());
	metrics = ctl_policy_set_metrics(j->policies, &n_metrics);
	ctl_store_policy_metrics(jobs->store, j->run_id, view.window, metrics,
	    n_metrics);
	job_decide(jobs, j, &state, apply_step, view.window + 1,
	    CTL_STORE_WINDOW, closing_ns);
	com_decision_fini(&state);
	j->next_window = view.window + 1;
	j->recovering = false;
	ctl_window_destroy(&j->open[slot]);
}

/* Closes, in order, every window that is complete or timed out. */
static void
job_try_close(ctl_jobs *jobs, job *j, uint64_t now_ms)
{
	for (;;) {
		int slot = -1;
		uint64_t lowest = UINT64_MAX;
		bool complete = true;

		for (uint32_t i = 0; i < JOBS_OPEN; i++) {
			if (j->open[i] != NULL &&
			    ctl_window_index(j->open[i]) < lowest) {
				lowest = ctl_window_index(j->open[i]);
				slot = (int)i;
			}
		}
		if (slot < 0)
			return;
		ctl_window *win = j->open[slot];
		if (ctl_window_reported(win) < j->alive &&
		    lowest >= j->max_first_window) {
			/* Every live rank is expected: fewer reports than
			 * live ranks cannot be complete. This keeps a report
			 * O(layers), not O(ranks). */
			complete = false;
		}
		for (uint32_t r = 0; r < j->world && complete; r++) {
			if (rank_expected(&j->ranks[r], lowest) &&
			    !ctl_window_has(win, r))
				complete = false;
		}
		if (!complete &&
		    now_ms - ctl_window_opened_ms(win) <
			jobs->cfg->window_timeout_ms)
			return;
		if (lowest > j->next_window) {
			ctl_log(CTL_LOG_WARN, "jobs",
			    "job '%s': no report of windows %" PRIu64
			    "..%" PRIu64 " arrived; skipping them",
			    j->name, j->next_window, lowest - 1);
			j->next_window = lowest;
		}
		job_close_window(jobs, j, (uint32_t)slot, complete);
	}
}

int
ctl_jobs_report(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_report *rep, uint64_t now_ms, com_msg *reply,
    char *why, size_t why_len)
{
	job *j;
	job_rank *rk;
	int slot = -1, r;

	r = jobs_rank_of(jobs, rep->job, rep->rank, peer, peer_len, client, &j,
	    &rk, why, why_len);
	if (r == BELLOWS_ENOTJOINED || r == BELLOWS_EPERM)
		return jobs_error_reply(reply, r, why);
	if (r != 0)
		return r;
	for (uint32_t i = 0; i < rep->n_layers; i++) {
		if (rep->layers[i].layer >= j->n_layers) {
			jobs_why(why, why_len,
			    "report names layer %u of a %u-layer job",
			    rep->layers[i].layer, j->n_layers);
			return BELLOWS_EPROTO;
		}
	}
	rank_seen(jobs, j, rk, now_ms);
	if (rep->last_step < rep->first_step) {
		jobs_why(why, why_len, "report steps %" PRIu64 "..%" PRIu64,
		    rep->first_step, rep->last_step);
		return BELLOWS_EPROTO;
	}
	if (rep->window < j->next_window && rank_taken(rk, rep->window)) {
		/* A resend racing the window's close: already counted in. */
		jobs->counters.duplicates++;
		return 0;
	}
	if (rep->window < j->next_window) {
		jobs_why(why, why_len,
		    "stale report of window %" PRIu64 " (next is %" PRIu64 ")",
		    rep->window, j->next_window);
		return BELLOWS_ESTATE;
	}
	if (rep->window >= j->next_window + JOBS_OPEN) {
		jobs_why(why, why_len,
		    "report of window %" PRIu64 " is too far ahead of %" PRIu64,
		    rep->window, j->next_window);
		return BELLOWS_ESTATE;
	}
	for (uint32_t i = 0; i < JOBS_OPEN; i++) {
		if (j->open[i] != NULL &&
		    ctl_window_index(j->open[i]) == rep->window)
			slot = (int)i;
	}
	if (slot < 0) {
		for (uint32_t i = 0; i < JOBS_OPEN && slot < 0; i++) {
			if (j->open[i] == NULL)
				slot = (int)i;
		}
		if (slot < 0 ||
		    ctl_window_new(rep->window, j->world, j->n_layers, now_ms,
			&j->open[slot]) != 0) {
			jobs_why(why, why_len, "cannot open window %" PRIu64,
			    rep->window);
			return BELLOWS_ENOMEM;
		}
	}
	if ((r = ctl_window_add(j->open[slot], rep)) != 0) {
		if (r == BELLOWS_ENOMEM) {
			jobs_why(why, why_len,
			    "no memory for the report of window %" PRIu64,
			    rep->window);
			return r;
		}
		/* A resend (the agent rejoined before the window closed):
		 * the first copy stands, and this is no peer's fault. */
		jobs->counters.duplicates++;
		return 0;
	}
	rank_taken_mark(rk, rep->window);
	rk->reports++;
	j->reports++;
	if (rep->last_step > rk->step)
		rk->step = rep->last_step;
	if (rk->step > j->max_step)
		j->max_step = rk->step;
	rk->seq_in_force = rep->seq_in_force;
	jobs->counters.reports++;
	jobs->counters.layer_stats += rep->n_layers;
	ctl_store_timing(jobs->store, j->run_id, rep->window, rep->rank,
	    &rep->timings);
	job_check_divergence(jobs, j, rep->rank, rep->last_step,
	    rep->seq_in_force);
	job_try_close(jobs, j, now_ms);
	return 0;
}

int
ctl_jobs_heartbeat(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_heartbeat *hb, uint64_t now_ms,
    com_msg *reply, char *why, size_t why_len)
{
	job *j;
	job_rank *rk;
	int r;

	r = jobs_rank_of(jobs, hb->job, hb->rank, peer, peer_len, client, &j,
	    &rk, why, why_len);
	if (r == BELLOWS_ENOTJOINED || r == BELLOWS_EPERM)
		return jobs_error_reply(reply, r, why);
	if (r != 0)
		return r;
	rank_seen(jobs, j, rk, now_ms);
	rk->step = hb->step;
	rk->seq_in_force = hb->seq_in_force;
	if (hb->step > j->max_step)
		j->max_step = hb->step;
	job_check_divergence(jobs, j, hb->rank, hb->step, hb->seq_in_force);
	com_msg_init(reply, COM_MSG_HEARTBEAT_ACK);
	reply->u.heartbeat_ack.instance = jobs->instance;
	reply->u.heartbeat_ack.last_seq = j->last_seq;
	reply->u.heartbeat_ack.windows_closed = job_windows_closed(j);
	return 0;
}

int
ctl_jobs_bye(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_bye *bye, uint64_t now_ms, char *why,
    size_t why_len)
{
	job *j;
	job_rank *rk;
	int r;

	r = jobs_rank_of(jobs, bye->job, bye->rank, peer, peer_len, client, &j,
	    &rk, why, why_len);
	if (r != 0)
		return r;
	rank_lost(jobs, j, bye->rank, now_ms, "left", CTL_STORE_RANK_LEFT);
	rk->joined = false;
	rk->left = true;
	job_try_close(jobs, j, now_ms);
	if (!j->ended) {
		bool all_left = true;

		for (uint32_t i = 0; i < j->world && all_left; i++)
			all_left = j->ranks[i].left;
		if (all_left) {
			j->ended = true;
			ctl_store_run_end(jobs->store, j->run_id,
			    com_clock_wall_ms());
			ctl_log(CTL_LOG_INFO, "jobs",
			    "job '%s': every rank has left, its run ended",
			    j->name);
		}
	}
	return 0;
}

int
ctl_jobs_snapshot(ctl_jobs *jobs, const char *client,
    const com_snapshot_request *req, com_msg *reply, char *why, size_t why_len)
{
	job *j;
	uint64_t step = 0;
	int r;

	if ((r = jobs_check_client(jobs, req->job, client, why, why_len)) != 0)
		return jobs_error_reply(reply, r, why);
	j = jobs_find(jobs, req->job);
	if (j == NULL) {
		jobs_why(why, why_len, "snapshot of unknown job '%s'",
		    req->job != NULL ? req->job : "");
		return jobs_error_reply(reply, BELLOWS_ENOTJOINED, why);
	}
	if (req->rank < j->world)
		step = j->ranks[req->rank].step;
	com_msg_init(reply, COM_MSG_SNAPSHOT);
	reply->u.snapshot.job = com_strdup(j->name);
	if (reply->u.snapshot.job == NULL ||
	    job_log_tail(j, step, &reply->u.snapshot.decisions,
		&reply->u.snapshot.n_decisions) != 0) {
		com_msg_fini(reply);
		return BELLOWS_ENOMEM;
	}
	return 0;
}

bool
ctl_jobs_client_may_read(const ctl_jobs *jobs, const char *name,
    const char *client)
{
	if (name == NULL)
		return ctl_config_client_allowed_all(jobs->cfg, client);
	return ctl_config_client_allowed(jobs->cfg, name, client);
}

/* Drops from a STATUS reply's events those of jobs `client` may not
 * read (the daemon's own, with no job, stay). */
static void
jobs_filter_events(const ctl_jobs *jobs, const char *client,
    com_status_reply *out)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < out->n_events; i++) {
		com_event *e = &out->events[i];

		if (e->job == NULL || e->job[0] == '\0' ||
		    ctl_config_client_allowed(jobs->cfg, e->job, client)) {
			out->events[kept++] = *e;
			continue;
		}
		free(e->kind);
		free(e->job);
		free(e->text);
	}
	out->n_events = kept;
}

int
ctl_jobs_status(ctl_jobs *jobs, const char *client,
    const com_status_request *req, uint64_t now_ms, com_status_reply *out)
{
	bool all = req->job == NULL || req->job[0] == '\0';
	uint32_t n = 0;
	int rc;

	out->jobs = calloc(jobs->n_jobs ? jobs->n_jobs : 1, sizeof(*out->jobs));
	if (out->jobs == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < jobs->n_jobs; i++) {
		job *j = jobs->jobs[i];
		com_job_status *js;

		if (!all && strcmp(j->name, req->job) != 0)
			continue;
		if (!ctl_config_client_allowed(jobs->cfg, j->name, client))
			continue;
		js = &out->jobs[n++];
		out->n_jobs = n;
		js->job = com_strdup(j->name);
		js->policy = com_strdup(j->policy_names);
		js->world = j->world;
		js->ranks_alive = j->alive;
		js->window = j->next_window;
		js->seq = j->last_seq;
		js->step = j->max_step;
		js->n_layers = j->n_layers;
		js->windows_incomplete = j->windows_incomplete;
		js->ranks = calloc(j->world, sizeof(*js->ranks));
		if (js->job == NULL || js->policy == NULL || js->ranks == NULL)
			return BELLOWS_ENOMEM;
		js->n_ranks = j->world;
		for (uint32_t r = 0; r < j->world; r++) {
			const job_rank *rk = &j->ranks[r];

			js->ranks[r] = (com_rank_status){
				.rank = r,
				.alive = rk->alive,
				.step = rk->step,
				.last_seen_ms = rk->last_seen_ms
				    ? now_ms - rk->last_seen_ms
				    : 0,
				.reports = rk->reports,
				.seq_in_force = rk->seq_in_force,
				.rejoins = rk->rejoins,
			};
		}
	}
	rc = ctl_events_copy(jobs->events, all ? NULL : req->job,
	    CTL_EVENTS_MAX, &out->events, &out->n_events);
	if (rc == 0 && jobs->cfg->security.enabled)
		jobs_filter_events(jobs, client, out);
	return rc;
}

void
ctl_jobs_tick(ctl_jobs *jobs, uint64_t now_ms)
{
	const ctl_config *cfg = jobs->cfg;

	if (now_ms > jobs->now_ms)
		jobs->now_ms = now_ms;
	for (uint32_t i = 0; i < jobs->n_jobs;) {
		job *j = jobs->jobs[i];

		for (uint32_t r = 0; r < j->world; r++) {
			job_rank *rk = &j->ranks[r];

			if (rk->alive &&
			    now_ms - rk->last_seen_ms >= cfg->rank_timeout_ms) {
				rank_lost(jobs, j, r, now_ms,
				    "lost (no message for rank_timeout_ms)",
				    CTL_STORE_RANK_LOST);
				jobs->counters.ranks_lost++;
			}
		}
		job_try_close(jobs, j, now_ms);
		if (j->alive == 0 &&
		    now_ms - j->idle_since_ms >= cfg->job_idle_ms) {
			ctl_log(CTL_LOG_INFO, "jobs",
			    "job '%s' forgotten after %u ms without ranks",
			    j->name, cfg->job_idle_ms);
			if (!j->ended)
				ctl_store_run_end(jobs->store, j->run_id,
				    com_clock_wall_ms());
			jobs_remove(jobs, i);
			continue;
		}
		i++;
	}
}

/* ---- recovery from the store ------------------------------------------- */

typedef struct jobs_recovery {
	ctl_jobs *jobs;     /* the table being rebuilt */
	uint64_t now_ms;    /* monotonic time of the rebuild */
	uint32_t recovered; /* jobs rebuilt */
	bool resuming;      /* one run read back for a resume: it is left
			     * out of the table, in `loaded` */
	job *loaded;        /* that run's job, NULL until read */
	uint64_t replayed;  /* its windows replayed into the policies */
} jobs_recovery;

/* Builds a job from a run the store holds, outside the table: its
 * layer table, decision log, position and launch, the ranks that were
 * there expected back, and fresh policies (the caller replays the
 * windows into them). Returns 0 or BELLOWS_ENOMEM. */
static int
job_from_run(ctl_jobs *jobs, const ctl_store_run *run, uint64_t now_ms,
    job **ret)
{
	const ctl_job_conf *jc = ctl_config_match(jobs->cfg, run->job);
	char reason[BELLOWS_REASON_MAX];
	com_decision blank = { 0 };
	job *j;
	int r;

	if (job_alloc(jobs, run->job, run->world, run->layers, run->n_layers,
		&j) != 0)
		return BELLOWS_ENOMEM;
	/* Every recorded decision was committed, so it may have been
	 * published: none is published again. */
	j->published_seq = run->decisions[run->n_decisions - 1].seq;
	for (uint32_t i = 0; i < run->n_decisions; i++) {
		com_decision d;

		if (com_decision_copy(&d, &run->decisions[i]) != 0)
			goto oom;
		job_log_push(jobs, j, &d, 0, 0);
	}
	free(j->run_key);
	if ((j->run_key = com_strdup(run->run_key)) == NULL)
		goto oom;
	/* Seqs go on after every decision the run had, also those not
	 * read (superseded by a resume, or older than the log). */
	if (run->last_seq > j->last_seq)
		j->last_seq = run->last_seq;
	j->next_window = run->next_window;
	j->max_step = run->max_step;
	j->run_id = run->id;
	j->recovering = true;
	for (uint32_t k = 0; k < run->world; k++) {
		if (!run->alive[k])
			continue;
		j->ranks[k].alive = true;
		j->ranks[k].last_seen_ms = now_ms;
		j->ranks[k].first_window = run->next_window;
		j->alive++;
	}
	if (j->alive == 0)
		j->idle_since_ms = now_ms;
	if (jc != NULL) {
		if (com_decision_init(&blank, j->name, j->n_layers) != 0)
			goto oom;
		r = ctl_policy_set_new(jc, j->name, j->world, j->layers,
		    j->n_layers, &blank, reason, sizeof(reason), &j->policies);
		com_decision_fini(&blank);
		if (r != 0)
			ctl_log(CTL_LOG_WARN, "jobs",
			    "job '%s' is read back without policies: %s",
			    j->name, reason);
	}
	ctl_policy_set_names(j->policies, j->policy_names,
	    sizeof(j->policy_names));
	*ret = j;
	return 0;
oom:
	job_destroy(&j);
	return BELLOWS_ENOMEM;
}

/* ctl_store_recover_ops.run: a live run becomes a job with no rank
 * joined, its ranks that were there expected back. */
static int
jobs_recover_run(void *arg, const ctl_store_run *run, void **ret_ctx)
{
	jobs_recovery *rec = arg;
	ctl_jobs *jobs = rec->jobs;
	const ctl_config *cfg = jobs->cfg;
	const ctl_job_conf *jc = ctl_config_match(cfg, run->job);
	char why[256];
	size_t bytes;
	job *j;

	if (rec->resuming) {
		/* The job it continues may still be in the table. */
		if (job_from_run(jobs, run, rec->now_ms, &j) != 0)
			return BELLOWS_ENOMEM;
		rec->loaded = j;
		*ret_ctx = j;
		return 0;
	}
	if (jobs_find(jobs, run->job) != NULL) {
		/* Runs come newest first: an older live run of the same job
		 * was left behind by a daemon that could not read the file. */
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s': run %" PRId64
		    " is older than the one recovered; it is ended",
		    run->job, run->id);
		ctl_store_run_end(jobs->store, run->id, com_clock_wall_ms());
		return BELLOWS_EBUSY;
	}
	if (jobs->n_jobs >= cfg->max_jobs || run->world > cfg->max_world ||
	    run->n_layers > cfg->max_layers) {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s' (run %" PRId64
		    ") is not recovered: it exceeds this daemon's limits",
		    run->job, run->id);
		return BELLOWS_ELIMIT;
	}
	bytes = jobs_job_bytes(jc, run->job, run->world, run->layers,
	    run->n_layers);
	if (jobs_admit(jobs, run->job, bytes, why, sizeof(why)) != 0) {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "run %" PRId64 " not recovered: %s", run->id, why);
		return BELLOWS_ELIMIT;
	}
	if (job_from_run(jobs, run, rec->now_ms, &j) != 0)
		return BELLOWS_ENOMEM;
	j->bytes = bytes;
	jobs->jobs[jobs->n_jobs++] = j;
	jobs->bytes += j->bytes;
	*ret_ctx = j;
	return 0;
}

/* ctl_store_recover_ops.window: the policies see a recorded window again,
 * exactly as they saw it then; what they propose is dropped (the decision
 * answering it is in the log already). */
static void
jobs_recover_window(void *arg, void *ctx, bellows_window *w,
    const com_decision *in_force)
{
	jobs_recovery *rec = arg;
	job *j = ctx;
	char policies[256], reason[1024];
	com_decision state;
	uint32_t failed = 0;

	if (j->policies == NULL || com_decision_copy(&state, in_force) != 0)
		return;
	ctl_policy_set_run(j->policies, w, &state, policies, sizeof(policies),
	    reason, sizeof(reason), &failed);
	rec->jobs->counters.policy_errors += failed;
	com_decision_fini(&state);
}

static void
jobs_recover_end(void *arg, void *ctx, uint64_t n_windows)
{
	jobs_recovery *rec = arg;
	job *j = ctx;

	rec->recovered++;
	if (rec->resuming) {
		rec->replayed = n_windows;
		return;
	}
	ctl_store_run_recovered(rec->jobs->store, j->run_id);
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s' recovered from the database: run %" PRId64
	    ", decision %" PRIu64 ", next window %" PRIu64 ", %" PRIu64
	    " windows replayed into policies '%s', %u of %u ranks expected",
	    j->name, j->run_id, j->last_seq, j->next_window, n_windows,
	    j->policy_names, j->alive, j->world);
	ctl_events_add(rec->jobs->events, CTL_EVENT_JOB_RECOVERED, j->name,
	    "recovered from the database at decision %" PRIu64
	    ", next window %" PRIu64 " (%" PRIu64 " windows replayed)",
	    j->last_seq, j->next_window, n_windows);
}

uint32_t
ctl_jobs_recover(ctl_jobs *jobs, uint64_t now_ms)
{
	static const ctl_store_recover_ops ops = {
		.run = jobs_recover_run,
		.window = jobs_recover_window,
		.end = jobs_recover_end,
	};
	jobs_recovery rec = { .jobs = jobs, .now_ms = now_ms };

	ctl_store_recover(jobs->store, JOBS_LOG, &ops, &rec);
	return rec.recovered;
}

/* ---- runs: new launches and resumes ------------------------------------ */

static int
jobs_refuse_launch(ctl_jobs *jobs, job *j, const com_hello *h, com_msg *reply,
    char *why, size_t why_len)
{
	jobs_why(why, why_len,
	    "job '%s' is still running as launch '%s' (run %" PRId64
	    ", %u of %u ranks alive): launch '%s' is admitted once they have "
	    "left or been silent for rank_timeout_ms (%u ms)",
	    j->name, j->run_key, j->run_id, j->alive, j->world, hello_run_id(h),
	    jobs->cfg->rank_timeout_ms);
	/* Its ranks retry every second: one line and event per launch. */
	if (strncmp(j->refused_key, hello_run_id(h),
		sizeof(j->refused_key) - 1) != 0) {
		snprintf(j->refused_key, sizeof(j->refused_key), "%s",
		    hello_run_id(h));
		ctl_log(CTL_LOG_WARN, "jobs", "%s", why);
		ctl_events_add(jobs->events, CTL_EVENT_RUN_REFUSED, j->name,
		    "launch '%s' refused: launch '%s' (run %" PRId64
		    ") still has %u of %u ranks alive",
		    hello_run_id(h), j->run_key, j->run_id, j->alive, j->world);
	}
	return jobs_error_reply(reply, BELLOWS_EBUSY, why);
}

/* Removes job j from the table and destroys it. */
static void
jobs_drop(ctl_jobs *jobs, job *j)
{
	for (uint32_t i = 0; i < jobs->n_jobs; i++) {
		if (jobs->jobs[i] == j) {
			jobs_remove(jobs, i);
			return;
		}
	}
}

/* A new launch takes job *jp over, its run's ranks gone: with resume
 * set it continues the recorded run (job_resume); otherwise the run
 * ends and *jp becomes NULL, for the caller to start the new run.
 * Returns 0 or the error to answer the Hello with (why filled). */
static int
job_take_over(ctl_jobs *jobs, job **jp, const com_hello *h, uint64_t now_ms,
    char *why, size_t why_len)
{
	job *j = *jp;

	if (h->resume)
		return job_resume(jobs, jp, h, now_ms, why, why_len);
	if (!j->ended)
		ctl_store_run_end(jobs->store, j->run_id, com_clock_wall_ms());
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s': run %" PRId64 " (launch '%s', window %" PRIu64
	    ") %s; launch '%s' starts a new run at step %" PRIu64,
	    j->name, j->run_id, j->run_key, j->next_window,
	    j->ended ? "ended" : "has no rank left", hello_run_id(h), h->step);
	jobs_drop(jobs, j);
	*jp = NULL;
	return 0;
}

/* Without a history to read back (no store, or it cannot be read):
 * forgets the decisions answering windows >= w, and restarts the
 * policies, whose state learned from those windows cannot be taken
 * back. */
static void
job_rewind_in_memory(ctl_jobs *jobs, job *j, uint64_t w)
{
	const ctl_job_conf *jc = ctl_config_match(jobs->cfg, j->name);
	char reason[BELLOWS_REASON_MAX];
	ctl_policy_set *fresh = NULL;
	com_decision state;
	int r;

	while (j->log_n > 1 && job_log_at(j, j->log_n - 1)->window > w) {
		com_decision_fini(job_log_at(j, j->log_n - 1));
		j->log_n--;
	}
	if (jc == NULL || job_last(j) == NULL ||
	    com_decision_copy(&state, job_last(j)) != 0)
		return;
	/* What the fresh policies would start from is not issued: the
	 * decisions in force at the resume are. */
	r = ctl_policy_set_new(jc, j->name, j->world, j->layers, j->n_layers,
	    &state, reason, sizeof(reason), &fresh);
	com_decision_fini(&state);
	if (r != 0) {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s': its policies cannot restart for the resume "
		    "(%s); the old ones go on",
		    j->name, reason);
		return;
	}
	ctl_policy_set_destroy(&j->policies);
	j->policies = fresh;
	ctl_log(CTL_LOG_WARN, "jobs",
	    "job '%s' resumes at window %" PRIu64
	    " without a history to read back: its policies start afresh",
	    j->name, w);
}

/* Job j continues at the Hello's window and step as launch h->run_id:
 * no rank is there yet, the windows from there on are superseded, and
 * the decisions in force there are issued again under new seqs (the
 * log restarts with them, so apply steps never go back). */
static void
job_resumed(ctl_jobs *jobs, job *j, const com_hello *h, uint64_t now_ms,
    uint64_t replayed)
{
	uint64_t w = h->last_window, from = j->next_window;
	com_decision *again = NULL;
	uint32_t n = 0, start;
	char *key = com_strdup(hello_run_id(h));
	int at;

	for (uint32_t i = 0; i < JOBS_OPEN; i++)
		ctl_window_destroy(&j->open[i]);
	for (uint32_t r = 0; r < j->world; r++)
		free(j->ranks[r].client);
	memset(j->ranks, 0, j->world * sizeof(*j->ranks));
	j->alive = 0;
	j->idle_since_ms = now_ms;
	j->max_first_window = 0;
	j->resumed_ms = now_ms != 0 ? now_ms : 1;
	j->next_window = w;
	j->max_step = h->step;
	j->recovering = false;
	j->ended = false;
	j->refused_key[0] = '\0';
	if (key != NULL) {
		free(j->run_key);
		j->run_key = key;
	}
	ctl_store_run_resumed(jobs->store, j->run_id, w, j->run_key);
	/* The decisions from the one in force at the resume step on. */
	at = job_log_in_force(j, h->step);
	start = at < 0 ? 0 : (uint32_t)at;
	if (j->log_n > start &&
	    (again = calloc(j->log_n - start, sizeof(*again))) != NULL) {
		for (uint32_t i = start; i < j->log_n; i++) {
			if (com_decision_copy(&again[n], job_log_at(j, i)) == 0)
				n++;
		}
	}
	for (uint32_t i = 0; i < j->log_n; i++)
		com_decision_fini(job_log_at(j, i));
	j->log_n = 0;
	j->log_head = 0;
	if (n == 0 && (again = calloc(1, sizeof(*again))) != NULL &&
	    com_decision_init(&again[0], j->name, j->n_layers) == 0)
		n = 1;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t apply = again[i].apply_step > h->step
		    ? again[i].apply_step
		    : h->step;

		free(again[i].reason);
		again[i].reason = com_strdup("resumed from a checkpoint");
		job_decide(jobs, j, &again[i], apply, again[i].window,
		    CTL_STORE_RESUMED, 0);
		com_decision_fini(&again[i]);
	}
	free(again);
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s': launch '%s' resumes run %" PRId64 " at window %" PRIu64
	    ", step %" PRIu64 " (%" PRIu64 " windows replayed into policies "
	    "'%s'; windows %" PRIu64 " on superseded), decision %" PRIu64,
	    j->name, j->run_key, j->run_id, w, h->step, replayed,
	    j->policy_names, w, j->last_seq);
	ctl_events_add(jobs->events, CTL_EVENT_RUN_RESUMED, j->name,
	    "launch '%s' resumed run %" PRId64 " at window %" PRIu64
	    ", step %" PRIu64 " (it was at window %" PRIu64 ")",
	    j->run_key, j->run_id, w, h->step, from);
}

static void jobs_recover_window(void *arg, void *ctx, bellows_window *w,
    const com_decision *in_force);
static void jobs_recover_end(void *arg, void *ctx, uint64_t n_windows);
static int jobs_recover_run(void *arg, const ctl_store_run *run,
    void **ret_ctx);

/* Why a resume of run j with Hello h's table is refused. */
static void
jobs_resume_mismatch(const job *j, const com_hello *h, char *why,
    size_t why_len)
{
	jobs_why(why, why_len,
	    "resume of job '%s' run %" PRId64
	    " with another world or layer table than the run's (world %u, "
	    "%u layers)",
	    h->job, j->run_id, j->world, j->n_layers);
}

/* A launch resumes job *jp (NULL: one not in the table) at window
 * h->last_window, step h->step: the run is read back from the history
 * up to there (the policies replay its windows), replaces *jp in the
 * table, and job_resumed sets it going. Without a history the job
 * rewinds in memory; with no job and no recorded run *jp stays NULL and
 * the caller starts a new run at that window. Returns 0,
 * BELLOWS_EMISMATCH when the run's layer table differs from the
 * Hello's, BELLOWS_EBUSY while the history still writes what the
 * resume must read (the rank retries), BELLOWS_ELIMIT when the table is
 * full. */
static int
job_resume(ctl_jobs *jobs, job **jp, const com_hello *h, uint64_t now_ms,
    char *why, size_t why_len)
{
	static const ctl_store_recover_ops ops = {
		.run = jobs_recover_run,
		.window = jobs_recover_window,
		.end = jobs_recover_end,
	};
	jobs_recovery rec = {
		.jobs = jobs,
		.now_ms = now_ms,
		.resuming = true,
	};
	job *old = *jp, *j;
	size_t bytes;
	int r;

	if (old != NULL &&
	    (old->world != h->world || !jobs_same_table(old, h))) {
		jobs_resume_mismatch(old, h, why, why_len);
		return BELLOWS_EMISMATCH;
	}
	if (old != NULL && old->resumed_ms != 0 &&
	    now_ms - old->resumed_ms < jobs->cfg->rank_timeout_ms) {
		/* Reading a run back costs what recovering it does: one a
		 * job per rank_timeout_ms keeps Hellos from stalling the
		 * loop with it. */
		jobs_why(why, why_len,
		    "job '%s' was resumed %" PRIu64
		    " ms ago; another resume is "
		    "taken %u ms after the last",
		    h->job, now_ms - old->resumed_ms,
		    jobs->cfg->rank_timeout_ms);
		return BELLOWS_EBUSY;
	}
	if (!ctl_store_settled(jobs->store)) {
		jobs_why(why, why_len,
		    "job '%s': the history is still being written; the resume "
		    "is taken once it is",
		    h->job);
		return BELLOWS_EBUSY;
	}
	if (old == NULL && jobs->n_jobs >= jobs->cfg->max_jobs) {
		jobs_why(why, why_len, "job table full (%u jobs)",
		    jobs->cfg->max_jobs);
		return BELLOWS_ELIMIT;
	}
	/* The run's table is the Hello's (checked below), so its budget
	 * is the one the Hello implies; a job in the table holds it. */
	bytes = old != NULL
	    ? old->bytes
	    : jobs_job_bytes(ctl_config_match(jobs->cfg, h->job), h->job,
		  h->world, h->layers, h->n_layers);
	if (old == NULL &&
	    (r = jobs_admit(jobs, h->job, bytes, why, why_len)) != 0)
		return r;
	r = ctl_store_load_run(jobs->store, old != NULL ? old->run_id : 0,
	    h->job, h->last_window, JOBS_LOG, &ops, &rec);
	j = rec.loaded;
	if (r != 0 || j == NULL) {
		job_destroy(&j);
		if (old == NULL)
			return 0;
		j = old;
		job_rewind_in_memory(jobs, j, h->last_window);
	} else if (j->world != h->world || !jobs_same_table(j, h)) {
		jobs_resume_mismatch(j, h, why, why_len);
		job_destroy(&j);
		return BELLOWS_EMISMATCH;
	} else {
		/* Seqs go on after every decision the run ever had. */
		if (old != NULL && old->last_seq > j->last_seq)
			j->last_seq = old->last_seq;
		if (old != NULL)
			jobs_drop(jobs, old);
		j->bytes = bytes;
		jobs->jobs[jobs->n_jobs++] = j;
		jobs->bytes += j->bytes;
	}
	job_resumed(jobs, j, h, now_ms, rec.replayed);
	*jp = j;
	return 0;
}
