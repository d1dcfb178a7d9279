/* test_jobs - the job table driven directly with decoded messages.
 *
 * No sockets: every Hello, Report, Heartbeat and Bye is a com_msg built
 * here, the clock is a number the test passes in, and the publish
 * callback deep-copies every Decision and Telemetry it is handed, so the
 * tests see exactly what bellowsd would put on the PUB socket, in order.
 *
 * The configuration (a real YAML file) runs a schedule {0: 2, 2: 1} on
 * jobs named "job*", with apply_lag 1, window_timeout_ms 1000,
 * rank_timeout_ms 5000, repair_margin 2, max_jobs 2, max_world 8,
 * max_layers 4 and job_idle_ms 10000. The layer table has two 2-D
 * weights around a 1-D bias, so levels read [L, 0, L].
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <limits.h>

#include <bellows/error.h>
#include <bellows/policy.h>

#include "common/cert.h"
#include "policyhost/config.h"
#include "controller/jobs.h"
#include "policyhost/log.h"
#include "plugin_paths.h"

#define N_LAYERS 3
#define MAX_PUB  256
#define INSTANCE 42

static const char config_text[] = "daemon:\n"
				  "  apply_lag: 1\n"
				  "  window_timeout_ms: 1000\n"
				  "  rank_timeout_ms: 5000\n"
				  "  heartbeat_ms: 500\n"
				  "  repair_margin: 2\n"
				  "  max_jobs: 2\n"
				  "  max_world: 8\n"
				  "  max_layers: 4\n"
				  "  job_idle_ms: 10000\n"
				  "jobs:\n"
				  "  - match: \"job*\"\n"
				  "    policies:\n"
				  "      - type: schedule\n"
				  "        params:\n"
				  "          levels: {0: 2, 2: 1}\n";

static const com_layer_info table[N_LAYERS] = {
	{ .name = "conv.weight", .numel = 32, .ndim = 2, .shape = { 8, 4 } },
	{ .name = "conv.bias", .numel = 8, .ndim = 1, .shape = { 8 } },
	{ .name = "fc.weight", .numel = 32, .ndim = 2, .shape = { 4, 8 } },
};

typedef struct fixture {
	char dir[64];         /* private temporary directory */
	char path[128];       /* dir/bellows.yaml */
	ctl_config *cfg;      /* the configuration */
	ctl_jobs *jobs;       /* under test */
	com_msg pub[MAX_PUB]; /* deep copies of what was published */
	uint32_t n_pub;       /* entries in pub */
	com_msg reply;        /* last reply */
	char why[256];        /* last drop reason */
	const char *client;   /* authenticated client the messages come
			       * from, NULL: none (no security) */
} fixture;

/* ctl_jobs_publish_fn: keeps a deep copy of every publication. */
static void
record(void *arg, const com_msg *m)
{
	fixture *f = arg;
	com_msg *c;

	assert_true(f->n_pub < MAX_PUB);
	c = &f->pub[f->n_pub++];
	com_msg_init(c, m->type);
	if (m->type == COM_MSG_DECISION) {
		assert_int_equal(com_decision_copy(&c->u.decision,
				     &m->u.decision),
		    0);
	} else {
		assert_int_equal(m->type, COM_MSG_TELEMETRY);
		c->u.telemetry = m->u.telemetry;
		c->u.telemetry.job = com_strdup(m->u.telemetry.job);
		c->u.telemetry.metrics = NULL;
		c->u.telemetry.n_metrics = 0;
		if (m->u.telemetry.n_metrics > 0) {
			const com_metric *src = m->u.telemetry.metrics;
			com_metric *dst = calloc(m->u.telemetry.n_metrics,
			    sizeof(*dst));

			assert_non_null(dst);
			for (uint32_t i = 0; i < m->u.telemetry.n_metrics;
			     i++) {
				dst[i] = src[i];
				dst[i].policy = com_strdup(src[i].policy);
				dst[i].name = com_strdup(src[i].name);
			}
			c->u.telemetry.metrics = dst;
			c->u.telemetry.n_metrics = m->u.telemetry.n_metrics;
		}
	}
}

/* Writes `text` as f's configuration file, loads it and creates the job
 * table; *state becomes f. Returns 0 or -1. */
static int
fixture_start(fixture *f, const char *text, void **state)
{
	char err[CTL_CONFIG_ERR_MAX];
	FILE *fp;

	snprintf(f->path, sizeof(f->path), "%s/bellows.yaml", f->dir);
	fp = fopen(f->path, "w");
	if (fp == NULL || fputs(text, fp) < 0 || fclose(fp) != 0)
		return -1;
	if (ctl_config_load(f->path, &f->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	if (ctl_jobs_new(f->cfg, INSTANCE, record, f, &f->jobs) != 0)
		return -1;
	com_msg_init(&f->reply, COM_MSG_NONE);
	*state = f;
	return 0;
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-jobs-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	return fixture_start(f, config_text, state);
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_jobs_destroy(&f->jobs);
	for (uint32_t i = 0; i < f->n_pub; i++)
		com_msg_fini(&f->pub[i]);
	com_msg_fini(&f->reply);
	ctl_config_destroy(&f->cfg);
	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* ---- what was published -------------------------------------------- */

static uint32_t
n_decisions(const fixture *f)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < f->n_pub; i++)
		n += f->pub[i].type == COM_MSG_DECISION;
	return n;
}

/* The k-th decision published (from 0). */
static const com_decision *
decision(const fixture *f, uint32_t k)
{
	for (uint32_t i = 0; i < f->n_pub; i++) {
		if (f->pub[i].type == COM_MSG_DECISION && k-- == 0)
			return &f->pub[i].u.decision;
	}
	fail_msg("no decision %u", k);
	return NULL;
}

/* The last telemetry published. */
static const com_telemetry *
telemetry(const fixture *f)
{
	for (uint32_t i = f->n_pub; i-- > 0;) {
		if (f->pub[i].type == COM_MSG_TELEMETRY)
			return &f->pub[i].u.telemetry;
	}
	fail_msg("no telemetry");
	return NULL;
}

static void
assert_levels(const com_decision *d, double a, double b, double c)
{
	assert_int_equal(d->n_layers, N_LAYERS);
	if (d->level[0] != a || d->level[1] != b || d->level[2] != c)
		fail_msg("levels [%g, %g, %g], expected [%g, %g, %g]",
		    d->level[0], d->level[1], d->level[2], a, b, c);
}

static void
assert_error_reply(const fixture *f, int code)
{
	assert_int_equal(f->reply.type, COM_MSG_ERROR);
	assert_int_equal(f->reply.u.error.code, code);
	assert_non_null(f->reply.u.error.message);
	assert_string_equal(f->reply.u.error.message, f->why);
	assert_true(f->why[0] != '\0');
}

static void
assert_no_reply(const fixture *f)
{
	assert_int_equal(f->reply.type, COM_MSG_NONE);
}

/* ---- messages -------------------------------------------------------- */

static void
reply_reset(fixture *f)
{
	com_msg_fini(&f->reply);
	com_msg_init(&f->reply, COM_MSG_NONE);
	f->why[0] = '\0';
}

/* A Hello with the standard layer table; heap-owned, com_msg_fini it. */
static void
hello_msg(com_msg *m, const char *job, uint32_t rank, uint32_t world,
    uint64_t step, uint64_t incarnation)
{
	com_hello *h = &m->u.hello;

	com_msg_init(m, COM_MSG_HELLO);
	h->job = com_strdup(job);
	h->agent_version = com_strdup("0.1.0");
	h->rank = rank;
	h->world = world;
	h->step = step;
	h->incarnation = incarnation;
	h->n_layers = N_LAYERS;
	h->layers = calloc(N_LAYERS, sizeof(*h->layers));
	assert_non_null(h->layers);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		h->layers[l] = table[l];
		h->layers[l].name = com_strdup(table[l].name);
	}
}

static int
send_hello(fixture *f, const char *peer, com_msg *m, uint64_t now)
{
	reply_reset(f);
	return ctl_jobs_hello(f->jobs, (const uint8_t *)peer, strlen(peer),
	    f->client, &m->u.hello, now, &f->reply, f->why, sizeof(f->why));
}

/* Sends a standard Hello; the Welcome or Error is in f->reply. */
static int
join(fixture *f, const char *peer, const char *job, uint32_t rank,
    uint32_t world, uint64_t step, uint64_t incarnation, uint64_t now)
{
	com_msg m;
	int r;

	hello_msg(&m, job, rank, world, step, incarnation);
	r = send_hello(f, peer, &m, now);
	com_msg_fini(&m);
	return r;
}

static com_layer_stats report_stats[N_LAYERS + 1];

static com_report
report_of(const char *job, uint32_t rank, uint64_t window, uint64_t first,
    uint64_t last, uint64_t seq_in_force)
{
	for (uint32_t l = 0; l < N_LAYERS + 1; l++)
		report_stats[l] = (com_layer_stats){ .layer = l,
			.count = 8,
			.sum_sq = 1,
			.acc_norm = 1 };
	return (com_report){
		.job = (char *)job,
		.rank = rank,
		.window = window,
		.first_step = first,
		.last_step = last,
		.n_layers = N_LAYERS,
		.layers = report_stats,
		.timings = { .steps = (uint32_t)(last - first + 1),
		    .step_ms = 10.0 * (double)(last - first + 1) },
		.lr = 0.1,
		.seq_in_force = seq_in_force,
	};
}

static int
send_report(fixture *f, const char *peer, const com_report *rep, uint64_t now)
{
	reply_reset(f);
	return ctl_jobs_report(f->jobs, (const uint8_t *)peer, strlen(peer),
	    f->client, rep, now, &f->reply, f->why, sizeof(f->why));
}

static int
report(fixture *f, const char *peer, const char *job, uint32_t rank,
    uint64_t window, uint64_t first, uint64_t last, uint64_t seq, uint64_t now)
{
	com_report rep = report_of(job, rank, window, first, last, seq);

	return send_report(f, peer, &rep, now);
}

static int
beat(fixture *f, const char *peer, const char *job, uint32_t rank,
    uint64_t step, uint64_t seq, uint64_t now)
{
	com_heartbeat hb = { .job = (char *)job,
		.rank = rank,
		.step = step,
		.seq_in_force = seq,
		.incarnation = 1 };

	reply_reset(f);
	return ctl_jobs_heartbeat(f->jobs, (const uint8_t *)peer, strlen(peer),
	    f->client, &hb, now, &f->reply, f->why, sizeof(f->why));
}

static int
bye(fixture *f, const char *peer, const char *job, uint32_t rank, uint64_t now)
{
	com_bye b = { .job = (char *)job, .rank = rank };

	f->why[0] = '\0';
	return ctl_jobs_bye(f->jobs, (const uint8_t *)peer, strlen(peer),
	    f->client, &b, now, f->why, sizeof(f->why));
}

static int
snapshot(fixture *f, const char *job, uint32_t rank)
{
	com_snapshot_request req = { .job = (char *)job, .rank = rank };

	reply_reset(f);
	return ctl_jobs_snapshot(f->jobs, f->client, &req, &f->reply, f->why,
	    sizeof(f->why));
}

/* STATUS for `job` (NULL: all) into *m (com_msg_fini it). */
static void
status(fixture *f, const char *job, uint64_t now, com_msg *m)
{
	com_status_request req = { .job = (char *)job };

	com_msg_init(m, COM_MSG_STATUS_REPLY);
	assert_int_equal(ctl_jobs_status(f->jobs, f->client, &req, now,
			     &m->u.status_reply),
	    0);
}

static ctl_jobs_counters
counters(const fixture *f)
{
	ctl_jobs_counters c;

	ctl_jobs_get_counters(f->jobs, &c);
	return c;
}

/* Two ranks of "job" joined at `step` from peers "A" and "B". */
static void
join_two(fixture *f, uint64_t step, uint64_t now)
{
	assert_int_equal(join(f, "A", "job", 0, 2, step, 11, now), 0);
	assert_int_equal(join(f, "B", "job", 1, 2, step, 12, now), 0);
}

/* ---- joining ----------------------------------------------------------- */

static void
test_jobs_first_hello_creates_the_job_and_decision_one(void **state)
{
	fixture *f = *state;
	const com_welcome *w;
	const com_decision *d;

	assert_int_equal(join(f, "A", "job", 0, 2, 100, 11, 0), 0);
	assert_int_equal(f->n_pub, 1);
	d = decision(f, 0);
	assert_string_equal(d->job, "job");
	assert_int_equal(d->seq, 1);
	assert_int_equal(d->apply_step, 100);
	assert_int_equal(d->window, 0);
	assert_levels(d, 2, 0, 2);
	assert_true(d->lr_scale == 1.0);
	assert_string_equal(d->policy, "schedule");
	assert_string_equal(d->reason, "schedule: level 2 from window 0");

	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	w = &f->reply.u.welcome;
	assert_string_equal(w->job, "job");
	assert_int_equal(w->rank, 0);
	assert_int_equal(w->apply_lag, 1);
	assert_int_equal(w->heartbeat_ms, 500);
	assert_int_equal(w->instance, INSTANCE);
	assert_int_equal(w->n_decisions, 1);
	assert_int_equal(w->decisions[0].seq, 1);
	assert_int_equal(w->decisions[0].apply_step, 100);
	assert_true(com_decision_same_state(&w->decisions[0], d));
	assert_int_equal(counters(f).decisions, 1);
}

static void
test_jobs_second_rank_joins_with_the_same_snapshot(void **state)
{
	fixture *f = *state;
	com_msg st;

	assert_int_equal(join(f, "A", "job", 0, 2, 100, 11, 0), 0);
	assert_int_equal(join(f, "B", "job", 1, 2, 100, 12, 5), 0);
	assert_int_equal(f->n_pub, 1);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(f->reply.u.welcome.rank, 1);
	assert_int_equal(f->reply.u.welcome.n_decisions, 1);
	assert_int_equal(f->reply.u.welcome.decisions[0].seq, 1);
	assert_true(com_decision_same_state(&f->reply.u.welcome.decisions[0],
	    decision(f, 0)));
	status(f, "job", 10, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 1);
	assert_int_equal(st.u.status_reply.jobs[0].ranks_alive, 2);
	com_msg_fini(&st);
}

static void
test_jobs_unmatched_job_runs_without_policies(void **state)
{
	fixture *f = *state;

	assert_int_equal(join(f, "A", "other", 0, 1, 0, 11, 0), 0);
	assert_levels(decision(f, 0), 0, 0, 0);
	assert_string_equal(decision(f, 0)->reason, "no policy configured");
	assert_int_equal(report(f, "A", "other", 0, 0, 0, 9, 1, 1), 0);
	assert_int_equal(n_decisions(f), 2);
	assert_string_equal(decision(f, 1)->reason, "no change");
}

/* ---- windows ----------------------------------------------------------- */

static void
test_jobs_window_closes_only_when_every_live_rank_reported(void **state)
{
	fixture *f = *state;
	const com_decision *d;
	const com_telemetry *t;
	ctl_jobs_counters c;

	join_two(f, 100, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 100, 109, 1, 10), 0);
	assert_no_reply(f);
	assert_int_equal(f->n_pub, 1);
	assert_int_equal(report(f, "B", "job", 1, 0, 100, 109, 1, 20), 0);
	assert_int_equal(n_decisions(f), 2);
	d = decision(f, 1);
	assert_int_equal(d->seq, 2);
	assert_int_equal(d->window, 1);
	/* last_step 109 + 1 + apply_lag 1 */
	assert_int_equal(d->apply_step, 111);
	assert_levels(d, 2, 0, 2);
	assert_string_equal(d->reason, "no change");
	t = telemetry(f);
	assert_string_equal(t->job, "job");
	assert_int_equal(t->window, 0);
	assert_int_equal(t->ranks_reported, 2);
	assert_int_equal(t->ranks_expected, 2);
	assert_true(t->step_ms_median == 10);

	/* A rank heard at step 130 pushes the apply step past it. */
	assert_int_equal(beat(f, "A", "job", 0, 130, 2, 30), 0);
	assert_int_equal(report(f, "A", "job", 0, 1, 110, 119, 2, 40), 0);
	assert_int_equal(report(f, "B", "job", 1, 1, 110, 119, 2, 50), 0);
	assert_int_equal(n_decisions(f), 3);
	d = decision(f, 2);
	assert_int_equal(d->seq, 3);
	assert_int_equal(d->window, 2);
	assert_int_equal(d->apply_step, 131);
	assert_levels(d, 1, 0, 1);
	assert_string_equal(d->policy, "schedule");
	assert_string_equal(d->reason, "schedule: level 2 -> 1 from window 2");

	c = counters(f);
	assert_int_equal(c.windows, 2);
	assert_int_equal(c.reports, 4);
	assert_int_equal(c.layer_stats, 4 * N_LAYERS);
	assert_int_equal(c.decisions, 3);
	assert_int_equal(c.incomplete, 0);
}

/* What a ctl_jobs_send_fn was handed: peers and the decisions' seqs. */
typedef struct sent_log {
	uint32_t n;        /* sends */
	char peer[8][8];   /* routing ids, as text */
	uint64_t last[8];  /* newest seq in each snapshot */
	uint32_t n_dec[8]; /* decisions in each */
	com_msg_type type; /* of the last send */
} sent_log;

static void
record_send(void *arg, const uint8_t *peer, size_t peer_len, const com_msg *m)
{
	sent_log *l = arg;

	assert_true(l->n < 8);
	assert_true(peer_len < sizeof(l->peer[0]));
	memcpy(l->peer[l->n], peer, peer_len);
	l->peer[l->n][peer_len] = '\0';
	l->type = m->type;
	if (m->type == COM_MSG_SNAPSHOT) {
		assert_string_equal(m->u.snapshot.job, "job");
		l->n_dec[l->n] = m->u.snapshot.n_decisions;
		l->last[l->n] = m->u.snapshot.n_decisions > 0
		    ? m->u.snapshot.decisions[m->u.snapshot.n_decisions - 1].seq
		    : 0;
	}
	l->n++;
}

/* Ranks that resume under a restarted daemon may not receive its PUB
 * yet: a decision published then is also sent to each of them directly,
 * with the one in force; a second later, only published. Ranks starting
 * afresh get nothing directly (their Welcome has their decisions). */
static void
test_jobs_send_decisions_directly_to_ranks_just_resumed(void **state)
{
	fixture *f = *state;
	sent_log sent = { 0 };
	com_decision in_force;
	com_msg m;

	ctl_jobs_set_sender(f->jobs, record_send, &sent);
	join_two(f, 100, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 100, 109, 1, 10), 0);
	assert_int_equal(report(f, "B", "job", 1, 0, 100, 109, 1, 20), 0);
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(sent.n, 0);
	assert_int_equal(com_decision_copy(&in_force, decision(f, 1)), 0);

	/* The daemon restarts; both ranks come back applying seq 2. */
	ctl_jobs_destroy(&f->jobs);
	assert_int_equal(ctl_jobs_new(f->cfg, INSTANCE + 1, record, f,
			     &f->jobs),
	    0);
	ctl_jobs_set_sender(f->jobs, record_send, &sent);
	for (uint32_t r = 0; r < 2; r++) {
		hello_msg(&m, "job", r, 2, 115, 11 + r);
		assert_int_equal(com_decision_copy(&m.u.hello.in_force,
				     &in_force),
		    0);
		m.u.hello.last_window = 1;
		assert_int_equal(send_hello(f, r == 0 ? "A" : "B", &m, 30), 0);
		com_msg_fini(&m);
	}
	com_decision_fini(&in_force);
	assert_int_equal(report(f, "A", "job", 0, 1, 110, 119, 2, 40), 0);
	assert_int_equal(report(f, "B", "job", 1, 1, 110, 119, 2, 50), 0);
	assert_int_equal(sent.n, 2);
	assert_int_equal(sent.type, COM_MSG_SNAPSHOT);
	assert_string_equal(sent.peer[0], "A");
	assert_string_equal(sent.peer[1], "B");
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(sent.last[i], 3);
		assert_int_equal(sent.n_dec[i], 2); /* seq 2 in force, 3 */
	}
	/* A second later (the table's clock is the callers'). */
	assert_int_equal(report(f, "A", "job", 0, 2, 120, 129, 3, 1100), 0);
	assert_int_equal(report(f, "B", "job", 1, 2, 120, 129, 3, 1110), 0);
	assert_int_equal(sent.n, 2);
}

/* The two window decisions are measured from their window's close to
 * their publication; the initial decision is not a window's and is not. */
static void
test_jobs_measure_the_latency_of_window_decisions(void **state)
{
	fixture *f = *state;
	ctl_jobs_latency_info lat;

	ctl_jobs_latency(f->jobs, &lat);
	assert_int_equal(lat.samples, 0);
	assert_true(lat.p50_ms == 0 && lat.p99_ms == 0 && lat.max_ms == 0);
	join_two(f, 100, 0);
	ctl_jobs_latency(f->jobs, &lat);
	assert_int_equal(lat.samples, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 100, 109, 1, 10), 0);
	assert_int_equal(report(f, "B", "job", 1, 0, 100, 109, 1, 20), 0);
	assert_int_equal(report(f, "A", "job", 0, 1, 110, 119, 2, 40), 0);
	assert_int_equal(report(f, "B", "job", 1, 1, 110, 119, 2, 50), 0);
	assert_int_equal(n_decisions(f), 3);
	ctl_jobs_latency(f->jobs, &lat);
	assert_int_equal(lat.samples, 2);
	assert_true(lat.p50_ms >= 0.0);
	assert_true(lat.p50_ms <= lat.p99_ms);
	assert_true(lat.p99_ms <= lat.max_ms);
	/* Policies and a publish into the test's sink: well under a second
	 * however slow the machine. */
	assert_true(lat.max_ms < 1000.0);
}

/* A rank that rejoins at window 3 neither moves the job nor holds up the
 * windows before it, and its seq-0 heartbeat before its first step asks
 * for no repair. */
static void
test_jobs_rank_rejoining_later_is_expected_only_from_its_first_window(
    void **state)
{
	fixture *f = *state;
	com_msg m;

	join_two(f, 0, 0);
	/* Rank 1 goes silent and comes back as a new process at window 3. */
	ctl_jobs_tick(f->jobs, 20000);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 20000), 0);
	hello_msg(&m, "job", 1, 2, 30, 99);
	m.u.hello.last_window = 3;
	assert_int_equal(send_hello(f, "C", &m, 20001), 0);
	com_msg_fini(&m);
	/* The job still aggregates window 0; the Hello did not skip it. */
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 2, 20002), 0);
	/* Windows 0 and 1 close with rank 0 alone: rank 1 is not expected
	 * there. They were complete, so no timeout was needed. */
	assert_int_equal(n_decisions(f), 3);
	assert_int_equal(counters(f).incomplete, 0);
	/* Its heartbeat before its first step carries seq 0: no repair. */
	assert_int_equal(beat(f, "C", "job", 1, 30, 0, 20003), 0);
	assert_int_equal(counters(f).repairs, 0);
	assert_int_equal(n_decisions(f), 3);
}

static void
test_jobs_window_timeout_closes_an_incomplete_window(void **state)
{
	fixture *f = *state;
	const com_decision *d;
	com_msg st;

	join_two(f, 0, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 100), 0);
	ctl_jobs_tick(f->jobs, 1099);
	assert_int_equal(n_decisions(f), 1);
	ctl_jobs_tick(f->jobs, 1100);
	assert_int_equal(n_decisions(f), 2);
	d = decision(f, 1);
	assert_int_equal(d->seq, 2);
	assert_int_equal(d->window, 1);
	/* Closed late: max step 9 + 1 + apply_lag 1 + repair_margin 2. */
	assert_int_equal(d->apply_step, 13);
	assert_int_equal(telemetry(f)->ranks_reported, 1);
	assert_int_equal(telemetry(f)->ranks_expected, 2);
	assert_int_equal(counters(f).incomplete, 1);
	assert_int_equal(counters(f).windows, 1);
	status(f, "job", 1100, &st);
	assert_int_equal(st.u.status_reply.jobs[0].windows_incomplete, 1);
	assert_int_equal(st.u.status_reply.jobs[0].window, 1);
	com_msg_fini(&st);

	/* The late report is stale now. */
	assert_int_equal(report(f, "B", "job", 1, 0, 0, 9, 1, 1200),
	    BELLOWS_ESTATE);
	assert_no_reply(f);
}

static void
test_jobs_lost_rank_is_not_waited_for_and_can_rejoin(void **state)
{
	fixture *f = *state;
	com_msg st;
	const com_job_status *js;

	join_two(f, 0, 1000);
	assert_int_equal(beat(f, "A", "job", 0, 5, 1, 4000), 0);
	ctl_jobs_tick(f->jobs, 5999);
	assert_int_equal(counters(f).ranks_lost, 0);
	ctl_jobs_tick(f->jobs, 6000);
	assert_int_equal(counters(f).ranks_lost, 1);
	status(f, "job", 6000, &st);
	js = &st.u.status_reply.jobs[0];
	assert_int_equal(js->ranks_alive, 1);
	assert_int_equal(js->n_ranks, 2);
	assert_true(js->ranks[0].alive);
	assert_false(js->ranks[1].alive);
	assert_int_equal(js->ranks[1].last_seen_ms, 5000);
	com_msg_fini(&st);

	/* Its windows close without it, complete. */
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 6100), 0);
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(telemetry(f)->ranks_expected, 1);
	assert_int_equal(counters(f).incomplete, 0);

	/* Back with Hello: rejoins are counted. */
	assert_int_equal(join(f, "B", "job", 1, 2, 12, 12, 7000), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	status(f, "job", 7000, &st);
	js = &st.u.status_reply.jobs[0];
	assert_int_equal(js->ranks_alive, 2);
	assert_true(js->ranks[1].alive);
	assert_int_equal(js->ranks[1].rejoins, 1);
	assert_int_equal(js->ranks[0].rejoins, 0);
	com_msg_fini(&st);
}

/* A window is complete once every expected rank has reported, counted
 * as reports arrive: duplicates count once, a rank lost or gone stops
 * being waited for (its report, if any, stops counting), a rejoining
 * rank is waited for again and its earlier report counts again, and a
 * later window that is complete closes right after the one before it. */
static void
test_jobs_completeness_counts_follow_loss_leave_rejoin_and_duplicates(
    void **state)
{
	fixture *f = *state;

	assert_int_equal(join(f, "A", "job", 0, 3, 0, 11, 0), 0);
	assert_int_equal(join(f, "B", "job", 1, 3, 0, 12, 0), 0);
	assert_int_equal(join(f, "C", "job", 2, 3, 0, 13, 0), 0);
	assert_int_equal(counters(f).windows, 0);
	assert_int_equal(beat(f, "A", "job", 0, 0, 1, 4000), 0);
	assert_int_equal(beat(f, "C", "job", 2, 0, 1, 4000), 0);
	/* Window 0 opens with A; A's resend counts once. */
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 5000), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 5010), 0);
	assert_int_equal(counters(f).duplicates, 1);
	/* A is ahead: its window 1 arrives before the others' window 0. */
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 1, 5020), 0);
	assert_int_equal(report(f, "C", "job", 2, 0, 0, 9, 1, 5030), 0);
	assert_int_equal(counters(f).windows, 0);
	/* B is lost: window 0 then has all it waits for, A and C. */
	ctl_jobs_tick(f->jobs, 5100);
	assert_int_equal(counters(f).ranks_lost, 1);
	assert_int_equal(counters(f).windows, 1);
	/* B rejoins: window 1 waits for it again. */
	assert_int_equal(join(f, "B2", "job", 1, 3, 10, 99, 5200), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(report(f, "C", "job", 2, 1, 10, 19, 1, 5250), 0);
	assert_int_equal(counters(f).windows, 1);
	/* C leaves with its report in window 1: not counted any more, and
	 * the window still waits for B. */
	assert_int_equal(bye(f, "C", "job", 2, 5300), 0);
	assert_int_equal(counters(f).windows, 1);
	/* B's report completes it; a resend of it after the close is a
	 * duplicate, not a new window's start. */
	assert_int_equal(report(f, "B2", "job", 1, 1, 10, 19, 1, 5350), 0);
	assert_int_equal(counters(f).windows, 2);
	assert_int_equal(report(f, "B2", "job", 1, 1, 10, 19, 1, 5360), 0);
	assert_int_equal(counters(f).duplicates, 2);
	assert_int_equal(telemetry(f)->ranks_expected, 2);
	/* Window 2 waits for the two live ranks only. */
	assert_int_equal(report(f, "A", "job", 0, 2, 20, 29, 1, 5400), 0);
	assert_int_equal(counters(f).windows, 2);
	assert_int_equal(report(f, "B2", "job", 1, 2, 20, 29, 1, 5410), 0);
	assert_int_equal(counters(f).windows, 3);
	assert_int_equal(counters(f).incomplete, 0);
}

static void
test_jobs_a_report_covering_ranks_completes_them_through_loss_and_rejoin(
    void **state)
{
	fixture *f = *state;
	com_report rep;

	for (uint32_t r = 0; r < 4; r++) {
		char peer[2] = { (char)('A' + r), '\0' };

		assert_int_equal(join(f, peer, "job", r, 4, 0, 11 + r, 0), 0);
	}
	/* Rank 0's report covers the job: the window closes at once, with
	 * every rank reported. */
	rep = report_of("job", 0, 0, 0, 9, 1);
	rep.ranks = 4;
	assert_int_equal(send_report(f, "A", &rep, 100), 0);
	assert_int_equal(counters(f).windows, 1);
	assert_int_equal(telemetry(f)->ranks_reported, 4);
	assert_int_equal(telemetry(f)->ranks_expected, 4);
	/* Nodes of two: ranks 2..3 first, then 0..1 closes window 1. */
	rep = report_of("job", 2, 1, 10, 19, 1);
	rep.ranks = 2;
	assert_int_equal(send_report(f, "C", &rep, 200), 0);
	assert_int_equal(counters(f).windows, 1);
	rep = report_of("job", 0, 1, 10, 19, 1);
	rep.ranks = 2;
	assert_int_equal(send_report(f, "A", &rep, 210), 0);
	assert_int_equal(counters(f).windows, 2);
	/* A cover past the job's ranks is refused and counts nothing. */
	rep = report_of("job", 2, 2, 20, 29, 1);
	rep.ranks = 3;
	assert_int_equal(send_report(f, "C", &rep, 300), BELLOWS_EPROTO);
	/* Rank 3 is lost (it alone does not beat): the node report of 2..3
	 * still counts rank 2, and the window completes without 3. */
	assert_int_equal(beat(f, "A", "job", 0, 20, 1, 4000), 0);
	assert_int_equal(beat(f, "B", "job", 1, 20, 1, 4000), 0);
	assert_int_equal(beat(f, "C", "job", 2, 20, 1, 4000), 0);
	ctl_jobs_tick(f->jobs, 5100);
	assert_int_equal(counters(f).ranks_lost, 1);
	rep.ranks = 2;
	assert_int_equal(send_report(f, "C", &rep, 5110), 0);
	assert_int_equal(counters(f).windows, 2);
	rep = report_of("job", 0, 2, 20, 29, 1);
	rep.ranks = 2;
	assert_int_equal(send_report(f, "A", &rep, 5120), 0);
	assert_int_equal(counters(f).windows, 3);
	assert_int_equal(telemetry(f)->ranks_expected, 3);
	/* Rank 3 rejoins: window 3 waits for it again, and a report of
	 * rank 1 alone there is a duplicate of the one covering it. */
	assert_int_equal(join(f, "D2", "job", 3, 4, 30, 99, 5200), 0);
	rep = report_of("job", 0, 3, 30, 39, 1);
	rep.ranks = 2;
	assert_int_equal(send_report(f, "A", &rep, 5300), 0);
	rep = report_of("job", 1, 3, 30, 39, 1);
	assert_int_equal(send_report(f, "B", &rep, 5310), 0);
	assert_int_equal(counters(f).duplicates, 1);
	assert_int_equal(counters(f).windows, 3);
	rep = report_of("job", 2, 3, 30, 39, 1);
	rep.ranks = 2;
	assert_int_equal(send_report(f, "C", &rep, 5320), 0);
	assert_int_equal(counters(f).windows, 4);
	assert_int_equal(counters(f).incomplete, 0);
}

static void
test_jobs_bye_removes_a_rank_at_once(void **state)
{
	fixture *f = *state;

	join_two(f, 0, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	assert_int_equal(bye(f, "B", "job", 1, 20), 0);
	/* The open window was waiting only for B. */
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(counters(f).incomplete, 0);
	assert_int_equal(report(f, "B", "job", 1, 1, 10, 19, 2, 30),
	    BELLOWS_ENOTJOINED);
	assert_error_reply(f, BELLOWS_ENOTJOINED);
	assert_int_equal(bye(f, "A", "job", 1, 40), BELLOWS_ENOTJOINED);
}

/* ---- who holds a rank ---------------------------------------------------- */

static void
test_jobs_refuses_a_duplicate_rank_held_by_a_live_agent(void **state)
{
	fixture *f = *state;

	join_two(f, 0, 0);
	assert_int_equal(join(f, "C", "job", 0, 2, 0, 99, 100), BELLOWS_EBUSY);
	assert_error_reply(f, BELLOWS_EBUSY);
	/* A still holds it. */
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 200), 0);
	assert_int_equal(report(f, "C", "job", 0, 1, 10, 19, 1, 200),
	    BELLOWS_ENOTJOINED);

	/* Once A is declared lost, the newcomer may take the rank. */
	assert_int_equal(beat(f, "B", "job", 1, 10, 1, 4000), 0);
	ctl_jobs_tick(f->jobs, 5200);
	assert_int_equal(counters(f).ranks_lost, 1);
	assert_int_equal(join(f, "C", "job", 0, 2, 10, 99, 5300), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 1, 5400),
	    BELLOWS_ENOTJOINED);
	assert_error_reply(f, BELLOWS_ENOTJOINED);
}

static void
test_jobs_accepts_the_same_incarnation_from_a_new_peer(void **state)
{
	fixture *f = *state;
	com_msg st;

	join_two(f, 0, 0);
	/* The agent rebuilt its socket: same incarnation, new routing id. */
	assert_int_equal(join(f, "A2", "job", 0, 2, 0, 11, 100), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 200),
	    BELLOWS_ENOTJOINED);
	assert_int_equal(report(f, "A2", "job", 0, 0, 0, 9, 1, 200), 0);
	status(f, "job", 300, &st);
	assert_int_equal(st.u.status_reply.jobs[0].ranks[0].rejoins, 1);
	assert_int_equal(st.u.status_reply.jobs[0].ranks_alive, 2);
	com_msg_fini(&st);
}

static void
test_jobs_refuses_a_hello_that_does_not_match_the_job(void **state)
{
	fixture *f = *state;
	com_msg m;

	join_two(f, 0, 0);
	assert_int_equal(join(f, "C", "job", 2, 3, 0, 13, 10),
	    BELLOWS_EMISMATCH);
	assert_error_reply(f, BELLOWS_EMISMATCH);

	hello_msg(&m, "job", 1, 2, 0, 12);
	m.u.hello.layers[2].shape[0] = 8;
	m.u.hello.layers[2].shape[1] = 4;
	assert_int_equal(send_hello(f, "B", &m, 10), BELLOWS_EMISMATCH);
	assert_error_reply(f, BELLOWS_EMISMATCH);
	com_msg_fini(&m);

	hello_msg(&m, "job", 1, 2, 0, 12);
	free(m.u.hello.layers[1].name);
	m.u.hello.layers[1].name = com_strdup("conv.bias2");
	assert_int_equal(send_hello(f, "B", &m, 10), BELLOWS_EMISMATCH);
	com_msg_fini(&m);

	hello_msg(&m, "job", 1, 2, 0, 12);
	m.u.hello.n_layers = 2;
	assert_int_equal(send_hello(f, "B", &m, 10), BELLOWS_EMISMATCH);
	m.u.hello.n_layers = N_LAYERS;
	com_msg_fini(&m);

	assert_int_equal(f->n_pub, 1);
}

/* ---- reports that are refused ------------------------------------------- */

static void
test_jobs_refuses_a_report_from_a_peer_not_holding_the_rank(void **state)
{
	fixture *f = *state;

	join_two(f, 0, 0);
	assert_int_equal(report(f, "B", "job", 0, 0, 0, 9, 1, 10),
	    BELLOWS_ENOTJOINED);
	assert_error_reply(f, BELLOWS_ENOTJOINED);
	/* An unknown job (a restarted daemon) also asks for a Hello. */
	assert_int_equal(report(f, "A", "nojob", 0, 0, 0, 9, 1, 10),
	    BELLOWS_ENOTJOINED);
	assert_error_reply(f, BELLOWS_ENOTJOINED);
	assert_int_equal(beat(f, "Z", "job", 1, 5, 1, 10), BELLOWS_ENOTJOINED);
	assert_error_reply(f, BELLOWS_ENOTJOINED);
	/* A rank outside the world is malformed: dropped, no reply. */
	assert_int_equal(report(f, "A", "job", 2, 0, 0, 9, 1, 10),
	    BELLOWS_EPROTO);
	assert_no_reply(f);
	assert_int_equal(counters(f).reports, 0);
}

static void
test_jobs_refuses_a_report_naming_a_layer_outside_the_table(void **state)
{
	fixture *f = *state;
	com_report rep;

	join_two(f, 0, 0);
	rep = report_of("job", 0, 0, 0, 9, 1);
	rep.n_layers = N_LAYERS + 1; /* the extra entry names layer 3 */
	assert_int_equal(send_report(f, "A", &rep, 10), BELLOWS_EPROTO);
	assert_no_reply(f);
	assert_non_null(strstr(f->why, "layer 3 of a 3-layer job"));

	rep = report_of("job", 0, 0, 9, 0, 1); /* steps backwards */
	assert_int_equal(send_report(f, "A", &rep, 10), BELLOWS_EPROTO);
	assert_no_reply(f);
	assert_int_equal(counters(f).reports, 0);
	assert_int_equal(f->n_pub, 1);
}

static void
test_jobs_refuses_stale_and_far_ahead_reports(void **state)
{
	fixture *f = *state;

	join_two(f, 0, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	/* Window 0 closes by timeout without rank 1, whose report is then
	 * stale. */
	ctl_jobs_tick(f->jobs, 1010);
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(report(f, "B", "job", 1, 0, 0, 9, 1, 1020),
	    BELLOWS_ESTATE);
	assert_no_reply(f);
	assert_non_null(strstr(f->why, "stale"));
	/* At most 8 windows are aggregated at once: 1..8 fit, 9 does not. */
	assert_int_equal(report(f, "A", "job", 0, 9, 90, 99, 2, 1030),
	    BELLOWS_ESTATE);
	assert_no_reply(f);
	assert_non_null(strstr(f->why, "too far ahead"));
	assert_int_equal(report(f, "A", "job", 0, 8, 80, 89, 2, 1040), 0);
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(counters(f).reports, 2);
	assert_int_equal(counters(f).duplicates, 0);
}

static void
test_jobs_take_a_repeated_report_once_and_count_it(void **state)
{
	fixture *f = *state;
	com_report rep;
	com_msg st;

	join_two(f, 0, 0);
	/* Rank 0 reports window 0, then sends it again with other numbers
	 * (an agent resending after it rejoined): the first copy stands. */
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	rep = report_of("job", 0, 0, 0, 9, 1);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		report_stats[l].acc_norm = 100;
	assert_int_equal(send_report(f, "A", &rep, 20), 0);
	assert_no_reply(f);
	assert_int_equal(counters(f).reports, 1);
	assert_int_equal(counters(f).duplicates, 1);
	/* Still open: the repeat did not stand in for rank 1. */
	assert_int_equal(n_decisions(f), 1);
	assert_int_equal(report(f, "B", "job", 1, 0, 0, 9, 1, 30), 0);
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(telemetry(f)->ranks_reported, 2);
	assert_int_equal(counters(f).reports, 2);
	assert_int_equal(counters(f).windows, 1);
	/* Once closed, a repeat of a report taken is still no error. */
	assert_int_equal(report(f, "B", "job", 1, 0, 0, 9, 1, 40), 0);
	assert_no_reply(f);
	assert_int_equal(counters(f).duplicates, 2);
	/* Window 1 closes by timeout without rank 1: its late report is
	 * stale, rank 0's repeat is a duplicate. */
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 2, 100), 0);
	ctl_jobs_tick(f->jobs, 1100);
	assert_int_equal(n_decisions(f), 3);
	assert_int_equal(report(f, "B", "job", 1, 1, 10, 19, 2, 1200),
	    BELLOWS_ESTATE);
	assert_non_null(strstr(f->why, "stale"));
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 2, 1300), 0);
	assert_int_equal(counters(f).duplicates, 3);
	/* A new process holding rank 0 (a restart from a checkpoint) runs
	 * window 1 anew: not a repeat of the old one's report. */
	assert_int_equal(bye(f, "A", "job", 0, 1350), 0);
	assert_int_equal(join(f, "A2", "job", 0, 2, 10, 99, 1400), 0);
	assert_int_equal(report(f, "A2", "job", 0, 1, 10, 19, 2, 1500),
	    BELLOWS_ESTATE);
	assert_int_equal(counters(f).duplicates, 3);
	status(f, "job", 1600, &st);
	assert_int_equal(st.u.status_reply.jobs[0].ranks[0].reports, 2);
	com_msg_fini(&st);
}

static void
test_jobs_tell_ranks_which_windows_are_closed(void **state)
{
	fixture *f = *state;

	/* Without a history a decision is published at once, so a window
	 * is durably closed as soon as it closes. */
	join_two(f, 0, 0);
	assert_int_equal(f->reply.u.welcome.windows_closed, 0);
	assert_int_equal(beat(f, "A", "job", 0, 5, 1, 5), 0);
	assert_int_equal(f->reply.type, COM_MSG_HEARTBEAT_ACK);
	assert_int_equal(f->reply.u.heartbeat_ack.windows_closed, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	assert_int_equal(report(f, "B", "job", 1, 0, 0, 9, 1, 10), 0);
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 1, 20), 0);
	assert_int_equal(beat(f, "A", "job", 0, 20, 1, 25), 0);
	assert_int_equal(f->reply.u.heartbeat_ack.windows_closed, 1);
	/* A rank joining again hears it in its Welcome. */
	assert_int_equal(join(f, "A2", "job", 0, 2, 20, 11, 30), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(f->reply.u.welcome.windows_closed, 1);
}

static void
test_jobs_skips_windows_nobody_reported(void **state)
{
	fixture *f = *state;

	assert_int_equal(join(f, "A", "job", 0, 2, 0, 11, 0), 0);
	assert_int_equal(join(f, "B", "job", 1, 2, 0, 12, 0), 0);
	/* Window 0's reports never come; window 1 is complete. */
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 1, 10), 0);
	assert_int_equal(report(f, "B", "job", 1, 1, 10, 19, 1, 10), 0);
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(decision(f, 1)->window, 2);
	assert_int_equal(report(f, "B", "job", 1, 0, 0, 9, 1, 10),
	    BELLOWS_ESTATE);
}

/* ---- divergence and repair ----------------------------------------------- */

static void
test_jobs_repairs_a_rank_that_applies_another_decision(void **state)
{
	fixture *f = *state;
	const com_decision *d, *prev;

	assert_int_equal(join(f, "A", "job", 0, 1, 0, 11, 0), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	assert_int_equal(decision(f, 1)->apply_step, 11);
	/* At step 12 the rank should apply seq 2 but says 1. */
	assert_int_equal(beat(f, "A", "job", 0, 12, 1, 20), 0);
	assert_int_equal(n_decisions(f), 3);
	prev = decision(f, 1);
	d = decision(f, 2);
	assert_int_equal(d->seq, 3);
	assert_true(com_decision_same_state(d, prev));
	/* max step 12 + 1 + apply_lag 1 + repair_margin 2 */
	assert_int_equal(d->apply_step, 16);
	assert_string_equal(d->job, "job");
	assert_non_null(strstr(d->reason, "repair"));
	assert_int_equal(counters(f).repairs, 1);
	assert_int_equal(f->reply.type, COM_MSG_HEARTBEAT_ACK);
	assert_int_equal(f->reply.u.heartbeat_ack.instance, INSTANCE);
	assert_int_equal(f->reply.u.heartbeat_ack.last_seq, 3);

	/* The repair is pending: no second one for the same divergence. */
	assert_int_equal(beat(f, "A", "job", 0, 13, 1, 30), 0);
	assert_int_equal(n_decisions(f), 3);
	/* Applied at its step: consistent, nothing more. */
	assert_int_equal(beat(f, "A", "job", 0, 16, 3, 40), 0);
	assert_int_equal(beat(f, "A", "job", 0, 17, 3, 50), 0);
	assert_int_equal(n_decisions(f), 3);
	assert_int_equal(counters(f).repairs, 1);
}

static void
test_jobs_does_not_repair_while_a_decision_is_pending(void **state)
{
	fixture *f = *state;

	assert_int_equal(join(f, "A", "job", 0, 1, 0, 11, 0), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	/* Seq 2 applies at 11; at step 10 the rank reports seq 0, which
	 * differs from seq 1, but seq 2 will align every rank anyway. */
	assert_int_equal(beat(f, "A", "job", 0, 10, 0, 20), 0);
	assert_int_equal(n_decisions(f), 2);
	assert_int_equal(counters(f).repairs, 0);
	/* A report whose seq_in_force is right is no divergence. */
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 2, 30), 0);
	assert_int_equal(n_decisions(f), 3);
	assert_int_equal(counters(f).repairs, 0);
}

static void
test_jobs_repairs_a_divergence_seen_in_a_report(void **state)
{
	fixture *f = *state;
	const com_decision *d;

	assert_int_equal(join(f, "A", "job", 0, 1, 0, 11, 0), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	/* Window 1 (10..19) ran seq 1 although seq 2 applied at 11: one
	 * repair, then window 1's own decision. */
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 1, 20), 0);
	assert_int_equal(counters(f).repairs, 1);
	assert_int_equal(n_decisions(f), 4);
	d = decision(f, 2);
	assert_int_equal(d->seq, 3);
	assert_int_equal(d->apply_step, 19 + 1 + 1 + 2);
	d = decision(f, 3);
	assert_int_equal(d->seq, 4);
	assert_int_equal(d->window, 2);
	/* Never before the previous decision's apply step. */
	assert_int_equal(d->apply_step, 23);
}

/* ---- a restarted daemon -------------------------------------------------- */

static void
test_jobs_restarted_daemon_adopts_state_and_continues_seq(void **state)
{
	fixture *f = *state;
	const com_decision *d;
	com_msg m;

	assert_int_equal(join(f, "A", "job", 0, 1, 0, 11, 0), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 2, 20), 0);
	assert_int_equal(n_decisions(f), 3);

	/* The daemon restarts: a new table knows nothing. */
	ctl_jobs_destroy(&f->jobs);
	assert_null(f->jobs);
	assert_int_equal(ctl_jobs_new(f->cfg, INSTANCE + 1, record, f,
			     &f->jobs),
	    0);
	assert_int_equal(beat(f, "A", "job", 0, 25, 3, 30), BELLOWS_ENOTJOINED);
	assert_error_reply(f, BELLOWS_ENOTJOINED);

	hello_msg(&m, "job", 0, 1, 25, 11);
	assert_int_equal(com_decision_copy(&m.u.hello.in_force, decision(f, 2)),
	    0);
	/* An agent may leave the job name of its state empty. */
	free(m.u.hello.in_force.job);
	m.u.hello.in_force.job = NULL;
	m.u.hello.last_window = 2;
	assert_int_equal(send_hello(f, "A", &m, 40), 0);
	com_msg_fini(&m);
	assert_int_equal(n_decisions(f), 3); /* nothing new published */
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(f->reply.u.welcome.instance, INSTANCE + 1);
	assert_int_equal(f->reply.u.welcome.n_decisions, 1);
	assert_int_equal(f->reply.u.welcome.decisions[0].seq, 3);
	assert_true(com_decision_same_state(&f->reply.u.welcome.decisions[0],
	    decision(f, 2)));

	/* Windows before last_window are stale; the next one continues. */
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 3, 50),
	    BELLOWS_ESTATE);
	assert_int_equal(report(f, "A", "job", 0, 2, 20, 29, 3, 60), 0);
	assert_int_equal(n_decisions(f), 4);
	d = decision(f, 3);
	assert_int_equal(d->seq, 4);
	assert_int_equal(d->window, 3);
	assert_int_equal(d->apply_step, 31);
	assert_string_equal(d->job, "job");
	assert_levels(d, 1, 0, 1);
	assert_int_equal(counters(f).repairs, 0);
}

/* ---- snapshot and status ------------------------------------------------- */

static void
test_jobs_snapshot_holds_the_decision_in_force_and_later_ones(void **state)
{
	fixture *f = *state;
	const com_snapshot *s;

	assert_int_equal(join(f, "A", "job", 0, 1, 0, 11, 0), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	/* The rank is at step 9: seq 1 is in force, seq 2 pending. */
	assert_int_equal(snapshot(f, "job", 0), 0);
	assert_int_equal(f->reply.type, COM_MSG_SNAPSHOT);
	s = &f->reply.u.snapshot;
	assert_string_equal(s->job, "job");
	assert_int_equal(s->n_decisions, 2);
	assert_int_equal(s->decisions[0].seq, 1);
	assert_int_equal(s->decisions[1].seq, 2);
	assert_int_equal(s->decisions[1].apply_step, 11);

	assert_int_equal(beat(f, "A", "job", 0, 11, 2, 20), 0);
	assert_int_equal(snapshot(f, "job", 0), 0);
	s = &f->reply.u.snapshot;
	assert_int_equal(s->n_decisions, 1);
	assert_int_equal(s->decisions[0].seq, 2);
	assert_true(com_decision_same_state(&s->decisions[0], decision(f, 1)));

	assert_int_equal(snapshot(f, "nojob", 0), BELLOWS_ENOTJOINED);
	assert_error_reply(f, BELLOWS_ENOTJOINED);
}

static void
test_jobs_status_lists_jobs_and_ranks(void **state)
{
	fixture *f = *state;
	const com_job_status *js;
	com_msg st;

	join_two(f, 100, 1000);
	assert_int_equal(join(f, "C", "other", 0, 1, 7, 13, 1500), 0);
	assert_int_equal(beat(f, "B", "job", 1, 104, 1, 1800), 0);

	status(f, NULL, 2000, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 2);
	com_msg_fini(&st);
	status(f, "", 2000, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 2);
	com_msg_fini(&st);

	status(f, "job", 2000, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 1);
	js = &st.u.status_reply.jobs[0];
	assert_string_equal(js->job, "job");
	assert_string_equal(js->policy, "schedule");
	assert_int_equal(js->world, 2);
	assert_int_equal(js->ranks_alive, 2);
	assert_int_equal(js->window, 0);
	assert_int_equal(js->seq, 1);
	assert_int_equal(js->step, 104);
	assert_int_equal(js->n_layers, N_LAYERS);
	assert_int_equal(js->n_ranks, 2);
	assert_int_equal(js->ranks[0].rank, 0);
	assert_int_equal(js->ranks[0].step, 100);
	assert_int_equal(js->ranks[0].last_seen_ms, 1000);
	assert_int_equal(js->ranks[0].seq_in_force, 0);
	assert_int_equal(js->ranks[1].rank, 1);
	assert_int_equal(js->ranks[1].step, 104);
	assert_int_equal(js->ranks[1].last_seen_ms, 200);
	assert_int_equal(js->ranks[1].seq_in_force, 1);
	assert_int_equal(js->ranks[1].reports, 0);
	com_msg_fini(&st);

	status(f, "other", 2000, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 1);
	assert_string_equal(st.u.status_reply.jobs[0].policy, "");
	com_msg_fini(&st);

	status(f, "nojob", 2000, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 0);
	com_msg_fini(&st);
}

/* ---- limits and forgetting -------------------------------------------- */

static void
test_jobs_refuses_a_job_past_max_jobs(void **state)
{
	fixture *f = *state;

	assert_int_equal(join(f, "A", "job1", 0, 2, 0, 11, 0), 0);
	assert_int_equal(join(f, "B", "job2", 0, 1, 0, 12, 0), 0);
	assert_int_equal(join(f, "C", "job3", 0, 1, 0, 13, 0), BELLOWS_ELIMIT);
	assert_error_reply(f, BELLOWS_ELIMIT);
	assert_int_equal(n_decisions(f), 2);
	/* Existing jobs still take ranks. */
	assert_int_equal(join(f, "D", "job1", 1, 2, 0, 14, 0), 0);
}

static void
test_jobs_refuses_a_hello_over_the_world_or_layer_limits(void **state)
{
	fixture *f = *state;
	com_msg m;

	assert_int_equal(join(f, "A", "job", 0, 9, 0, 11, 0), BELLOWS_ELIMIT);
	assert_error_reply(f, BELLOWS_ELIMIT);
	assert_non_null(strstr(f->why, "world 9"));

	hello_msg(&m, "job", 0, 2, 0, 11);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		free(m.u.hello.layers[l].name);
	free(m.u.hello.layers);
	m.u.hello.n_layers = 5;
	m.u.hello.layers = calloc(5, sizeof(*m.u.hello.layers));
	assert_non_null(m.u.hello.layers);
	for (uint32_t l = 0; l < 5; l++) {
		char name[16];

		snprintf(name, sizeof(name), "l%u", l);
		m.u.hello.layers[l].name = com_strdup(name);
		m.u.hello.layers[l].numel = 1;
	}
	assert_int_equal(send_hello(f, "A", &m, 0), BELLOWS_ELIMIT);
	assert_error_reply(f, BELLOWS_ELIMIT);
	m.u.hello.n_layers = 0;
	assert_int_equal(send_hello(f, "A", &m, 0), BELLOWS_ELIMIT);
	m.u.hello.n_layers = 5;
	com_msg_fini(&m);
	assert_int_equal(f->n_pub, 0);
}

static void
test_jobs_refuses_a_hello_for_a_rank_outside_its_world(void **state)
{
	fixture *f = *state;

	assert_int_equal(join(f, "A", "job", 2, 2, 0, 11, 0), BELLOWS_EPROTO);
	assert_error_reply(f, BELLOWS_EPROTO);
	assert_int_equal(join(f, "A", "job", 0, 0, 0, 11, 0), BELLOWS_EPROTO);
	assert_int_equal(join(f, "A", "", 0, 1, 0, 11, 0), BELLOWS_EPROTO);
	assert_int_equal(f->n_pub, 0);
}

static void
test_jobs_forgets_a_job_idle_for_job_idle_ms(void **state)
{
	fixture *f = *state;
	com_msg st;

	assert_int_equal(join(f, "A", "job", 0, 1, 0, 11, 0), 0);
	assert_int_equal(bye(f, "A", "job", 0, 100), 0);
	ctl_jobs_tick(f->jobs, 10099);
	status(f, NULL, 10099, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 1);
	assert_int_equal(st.u.status_reply.jobs[0].ranks_alive, 0);
	com_msg_fini(&st);
	ctl_jobs_tick(f->jobs, 10100);
	status(f, NULL, 10100, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 0);
	com_msg_fini(&st);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10200),
	    BELLOWS_ENOTJOINED);

	/* A job whose ranks were lost is forgotten job_idle_ms later. */
	assert_int_equal(join(f, "A", "job", 0, 1, 0, 11, 20000), 0);
	assert_int_equal(decision(f, 1)->seq, 1); /* a new job */
	ctl_jobs_tick(f->jobs, 25000);
	assert_int_equal(counters(f).ranks_lost, 1);
	ctl_jobs_tick(f->jobs, 34999);
	status(f, NULL, 34999, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 1);
	com_msg_fini(&st);
	ctl_jobs_tick(f->jobs, 35000);
	status(f, NULL, 35000, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 0);
	com_msg_fini(&st);
}

/* ---- runs ------------------------------------------------------------- */

/* Sends a Hello of launch `run_id` ("" = none), resuming when `resume`
 * from window `window`. */
static int
join_launch(fixture *f, const char *peer, uint32_t rank, uint64_t step,
    uint64_t window, const char *run_id, bool resume, uint64_t now)
{
	com_msg m;
	int r;

	hello_msg(&m, "job", rank, 2, step, 100 + rank);
	m.u.hello.run_id = com_strdup(run_id);
	m.u.hello.last_window = window;
	m.u.hello.resume = resume;
	r = send_hello(f, peer, &m, now);
	com_msg_fini(&m);
	return r;
}

/* Runs windows [from, to) of 10 steps with both ranks at peers A and B,
 * each saying it applies decision `seq` (0: none yet, which no repair
 * answers). */
static void
run_windows(fixture *f, uint64_t from, uint64_t to, uint64_t seq, uint64_t now)
{
	for (uint64_t w = from; w < to; w++) {
		assert_int_equal(report(f, "A", "job", 0, w, 10 * w, 10 * w + 9,
				     seq, now),
		    0);
		assert_int_equal(report(f, "B", "job", 1, w, 10 * w, 10 * w + 9,
				     seq, now),
		    0);
	}
}

/* Launch "one" of the job runs `windows` windows to a clean end: both
 * ranks (peers A and B) join at step 0, report and say Bye. */
static void
run_launch_one(fixture *f, uint64_t windows)
{
	assert_int_equal(join_launch(f, "A", 0, 0, 0, "one", false, 0), 0);
	assert_int_equal(join_launch(f, "B", 1, 0, 0, "one", false, 0), 0);
	run_windows(f, 0, windows, 0, 10);
	assert_int_equal(n_decisions(f), windows + 1);
	assert_int_equal(bye(f, "A", "job", 0, 20), 0);
	assert_int_equal(bye(f, "B", "job", 1, 20), 0);
}

/* The number of STATUS events of `kind`, the text of the last in *text. */
static uint32_t
events_of(fixture *f, const char *kind, uint64_t now, char *text, size_t len)
{
	uint32_t n = 0;
	com_msg st;

	status(f, NULL, now, &st);
	for (uint32_t i = 0; i < st.u.status_reply.n_events; i++) {
		const com_event *e = &st.u.status_reply.events[i];

		if (strcmp(e->kind, kind) == 0) {
			n++;
			if (text != NULL)
				snprintf(text, len, "%s", e->text);
		}
	}
	com_msg_fini(&st);
	return n;
}

static void
test_jobs_a_new_launch_after_the_run_ended_starts_a_new_run(void **state)
{
	fixture *f = *state;
	const com_decision *d;
	char text[256];

	run_launch_one(f, 3);

	/* The same job from step 0 again, by another launch. */
	assert_int_equal(join_launch(f, "C", 0, 0, 0, "two", false, 30), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(f->reply.u.welcome.n_decisions, 1);
	assert_int_equal(f->reply.u.welcome.decisions[0].seq, 1);
	assert_int_equal(n_decisions(f), 5);
	d = decision(f, 4);
	assert_int_equal(d->seq, 1);
	assert_int_equal(d->apply_step, 0);
	assert_int_equal(join_launch(f, "D", 1, 0, 0, "two", false, 30), 0);
	/* Its window 0 is not stale: it is the new run's first. */
	assert_int_equal(report(f, "C", "job", 0, 0, 0, 9, 1, 40), 0);
	assert_int_equal(report(f, "D", "job", 1, 0, 0, 9, 1, 40), 0);
	assert_int_equal(n_decisions(f), 6);
	assert_int_equal(decision(f, 5)->seq, 2);
	assert_int_equal(events_of(f, "run_started", 50, text, sizeof(text)),
	    1);
	assert_string_equal(text,
	    "launch 'two' started a new run at step 0 after launch 'one' "
	    "(run 0)");
}

static void
test_jobs_a_late_rank_of_the_launch_that_ended_rejoins_its_run(void **state)
{
	fixture *f = *state;

	/* Rank 0 of launch "one" runs alone to its end (its ranks never
	 * meet in a collective); rank 1 of the same launch comes late. */
	assert_int_equal(join_launch(f, "A", 0, 0, 0, "one", false, 0), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 0, 10), 0);
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 0, 10), 0);
	assert_int_equal(bye(f, "A", "job", 0, 20), 0);
	assert_int_equal(n_decisions(f), 3);
	assert_int_equal(join_launch(f, "B", 1, 0, 0, "one", false, 30), 0);
	/* The same run: its decisions, no new seq 1. */
	assert_int_equal(f->reply.u.welcome.n_decisions, 3);
	assert_int_equal(n_decisions(f), 3);
	assert_int_equal(events_of(f, "run_started", 40, NULL, 0), 0);
}

static void
test_jobs_a_new_launch_waits_until_the_runs_ranks_are_gone(void **state)
{
	fixture *f = *state;
	char text[256];

	assert_int_equal(join_launch(f, "A", 0, 0, 0, "one", false, 0), 0);
	assert_int_equal(join_launch(f, "B", 1, 0, 0, "one", false, 0), 0);
	run_windows(f, 0, 2, 0, 10);
	/* Preempted: the ranks die without a Bye, the relaunch comes at
	 * once, while the daemon still counts them alive. */
	assert_int_equal(join_launch(f, "C", 0, 0, 0, "two", false, 100),
	    BELLOWS_EBUSY);
	assert_error_reply(f, BELLOWS_EBUSY);
	assert_non_null(strstr(f->why,
	    "job 'job' is still running as launch 'one' (run 0, 2 of 2 "
	    "ranks alive): launch 'two' is admitted once they have left or "
	    "been silent for rank_timeout_ms (5000 ms)"));
	assert_int_equal(join_launch(f, "C", 0, 0, 0, "two", false, 1100),
	    BELLOWS_EBUSY);
	/* One event per launch refused, not per retry. */
	assert_int_equal(events_of(f, "run_refused", 1200, text, sizeof(text)),
	    1);
	assert_string_equal(text,
	    "launch 'two' refused: launch 'one' (run "
	    "0) still has 2 of 2 ranks alive");
	ctl_jobs_tick(f->jobs, 5100);
	assert_int_equal(counters(f).ranks_lost, 2);
	assert_int_equal(join_launch(f, "C", 0, 0, 0, "two", false, 5200), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	assert_int_equal(f->reply.u.welcome.decisions[0].seq, 1);
	assert_int_equal(report(f, "C", "job", 0, 0, 0, 9, 1, 5300), 0);
	/* A rank of the old launch coming back now is the one refused. */
	assert_int_equal(join_launch(f, "A", 1, 25, 2, "one", false, 5300),
	    BELLOWS_EBUSY);
}

static void
test_jobs_without_launch_identities_a_fresh_rank_behind_is_a_new_run(
    void **state)
{
	fixture *f = *state;

	join_two(f, 0, 0);
	run_windows(f, 0, 3, 0, 10);
	/* A rank restarted alone while the other trains on is one of the
	 * run, not expected before its first window. */
	assert_int_equal(bye(f, "B", "job", 1, 15), 0);
	assert_int_equal(join(f, "B2", "job", 1, 2, 0, 77, 20), 0);
	assert_int_equal(f->reply.u.welcome.n_decisions, 4);
	assert_int_equal(n_decisions(f), 4);
	assert_int_equal(bye(f, "A", "job", 0, 30), 0);
	assert_int_equal(bye(f, "B2", "job", 1, 30), 0);
	/* Everyone gone, a fresh process at step 0: the job runs again. */
	assert_int_equal(join(f, "C", "job", 0, 2, 0, 78, 40), 0);
	assert_int_equal(f->reply.u.welcome.n_decisions, 1);
	assert_int_equal(f->reply.u.welcome.decisions[0].seq, 1);
	assert_int_equal(n_decisions(f), 5);
	assert_int_equal(report(f, "C", "job", 0, 0, 0, 9, 1, 50), 0);
}

static void
test_jobs_a_resume_rewinds_the_run_and_reissues_its_decisions(void **state)
{
	fixture *f = *state;
	uint32_t before;
	char text[256];

	run_launch_one(f, 5);
	before = n_decisions(f);

	/* From a checkpoint at window 2 (step 20), by a new launch; no
	 * history to read back here, so it rewinds in memory. */
	assert_int_equal(join_launch(f, "A", 0, 20, 2, "two", true, 30), 0);
	assert_int_equal(f->reply.type, COM_MSG_WELCOME);
	/* The decision in force at step 20 (answering window 0, applying
	 * at 11) and the one answering window 1 (at 21), under new seqs
	 * after the run's last (6). */
	assert_int_equal(n_decisions(f), before + 2);
	assert_int_equal(decision(f, before)->seq, 7);
	assert_int_equal(decision(f, before)->apply_step, 20);
	assert_int_equal(decision(f, before + 1)->seq, 8);
	assert_int_equal(decision(f, before + 1)->apply_step, 21);
	assert_int_equal(f->reply.u.welcome.n_decisions, 2);
	assert_int_equal(join_launch(f, "B", 1, 20, 2, "two", true, 30), 0);
	/* Window 2 again is the run's next one, not stale. */
	run_windows(f, 2, 3, 0, 40);
	assert_int_equal(n_decisions(f), before + 3);
	assert_int_equal(decision(f, before + 2)->seq, 9);
	assert_int_equal(decision(f, before + 2)->window, 3);
	assert_int_equal(events_of(f, "run_resumed", 50, text, sizeof(text)),
	    1);
	assert_string_equal(text,
	    "launch 'two' resumed run 0 at window 2, "
	    "step 20 (it was at window 5)");
	/* Its ranks gone at once, another resume must wait: reading a
	 * run back is not done for every Hello. */
	assert_int_equal(bye(f, "A", "job", 0, 60), 0);
	assert_int_equal(bye(f, "B", "job", 1, 60), 0);
	assert_int_equal(join_launch(f, "A", 0, 10, 1, "three", true, 70),
	    BELLOWS_EBUSY);
	assert_non_null(strstr(f->why, "was resumed 40 ms ago"));
	assert_int_equal(join_launch(f, "A", 0, 10, 1, "three", true, 5030), 0);
}

static void
test_jobs_a_resume_must_have_the_runs_layer_table(void **state)
{
	fixture *f = *state;
	com_msg m;

	join_two(f, 0, 0);
	run_windows(f, 0, 2, 0, 10);
	assert_int_equal(bye(f, "A", "job", 0, 20), 0);
	assert_int_equal(bye(f, "B", "job", 1, 20), 0);
	hello_msg(&m, "job", 0, 2, 10, 5);
	m.u.hello.last_window = 1;
	m.u.hello.resume = true;
	m.u.hello.layers[0].numel = 16;
	m.u.hello.layers[0].shape[0] = 4;
	assert_int_equal(send_hello(f, "C", &m, 30), BELLOWS_EMISMATCH);
	assert_error_reply(f, BELLOWS_EMISMATCH);
	com_msg_fini(&m);
}

/* Replaces the fixture's table with one under config_text with `from`
 * replaced by `to` (the table starts empty). */
static void
restart_with(fixture *f, const char *from, const char *to)
{
	char text[sizeof(config_text) + 256], err[CTL_CONFIG_ERR_MAX];
	const char *at = strstr(config_text, from);
	FILE *fp;

	assert_non_null(at);
	snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - config_text),
	    config_text, to, at + strlen(from));
	ctl_jobs_destroy(&f->jobs);
	ctl_config_destroy(&f->cfg);
	fp = fopen(f->path, "w");
	assert_non_null(fp);
	assert_true(fputs(text, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
	if (ctl_config_load(f->path, &f->cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(ctl_jobs_new(f->cfg, INSTANCE, record, f, &f->jobs),
	    0);
}

static void
test_jobs_refuses_a_job_that_could_hold_more_than_max_job_mb(void **state)
{
	fixture *f = *state;

	/* A job of one rank and three layers comes to some 2.4 MiB at
	 * most, its decision log mostly; 60,000 ranks' collectives in
	 * the windows it may aggregate come to gigabytes. */
	restart_with(f, "  max_world: 8\n",
	    "  max_world: 65536\n  max_job_mb: 3\n");
	assert_int_equal(join(f, "A", "job1", 0, 1, 0, 11, 0), 0);
	assert_int_equal(join(f, "B", "job2", 0, 60000, 0, 12, 0),
	    BELLOWS_ELIMIT);
	assert_error_reply(f, BELLOWS_ELIMIT);
	assert_non_null(strstr(f->why, "job 'job2' could hold up to "));
	assert_non_null(strstr(f->why, " MiB, more than max_job_mb (3)"));
	/* Nothing of it was kept: a smaller job of that name is taken.
	 */
	assert_int_equal(join(f, "B", "job2", 0, 2, 0, 12, 0), 0);
}

static void
test_jobs_refuses_jobs_past_max_total_job_mb_until_one_is_forgotten(
    void **state)
{
	fixture *f = *state;
	com_msg st;

	/* Two jobs of some 2.4 MiB fit in 5 MiB, a third does not. */
	restart_with(f, "  max_jobs: 2\n",
	    "  max_jobs: 100\n  max_total_job_mb: 5\n");
	assert_int_equal(join(f, "A", "job1", 0, 1, 0, 11, 0), 0);
	assert_int_equal(join(f, "B", "job2", 0, 1, 0, 12, 0), 0);
	assert_int_equal(join(f, "C", "job3", 0, 1, 0, 13, 0), BELLOWS_ELIMIT);
	assert_error_reply(f, BELLOWS_ELIMIT);
	assert_non_null(strstr(f->why, "job 'job3' could hold up to "));
	assert_non_null(strstr(f->why, "and the 2 jobs held may hold "));
	assert_non_null(strstr(f->why, "more than max_total_job_mb (5)"));
	/* Distinct names change nothing. */
	assert_int_equal(join(f, "D", "job4", 0, 1, 0, 14, 0), BELLOWS_ELIMIT);
	/* A forgotten job gives its share back. */
	assert_int_equal(bye(f, "A", "job1", 0, 100), 0);
	ctl_jobs_tick(f->jobs, 10100);
	status(f, NULL, 10100, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 1);
	com_msg_fini(&st);
	assert_int_equal(join(f, "C", "job3", 0, 1, 0, 13, 10200), 0);
}

/* ---- events
 * ------------------------------------------------------------ */

static void
assert_event_is(const com_event *e, const char *kind, const char *job,
    const char *text)
{
	assert_string_equal(e->kind, kind);
	assert_string_equal(e->job, job);
	assert_string_equal(e->text, text);
	assert_true(e->wall_ms > 0);
}

static void
test_jobs_status_lists_recent_events(void **state)
{
	fixture *f = *state;
	const com_status_reply *r;
	com_msg st;

	join_two(f, 0, 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	ctl_jobs_tick(f->jobs, 1010);
	assert_int_equal(beat(f, "A", "job", 0, 10, 1, 5000), 0);
	ctl_jobs_tick(f->jobs, 6000);

	status(f, NULL, 6000, &st);
	r = &st.u.status_reply;
	assert_int_equal(r->n_events, 4);
	assert_event_is(&r->events[0], "rank_joined", "job",
	    "rank 0 joined at step 0 (1/2 alive)");
	assert_event_is(&r->events[1], "rank_joined", "job",
	    "rank 1 joined at step 0 (2/2 alive)");
	assert_event_is(&r->events[2], "window_incomplete", "job",
	    "window 0 closed by timeout with 1 of 2 ranks (missing: 1)");
	assert_event_is(&r->events[3], "rank_lost", "job",
	    "rank 1 lost (no message for rank_timeout_ms) at step 0 (1/2 "
	    "alive)");
	com_msg_fini(&st);
	/* Another job's STATUS does not list this one's events. */
	status(f, "nope", 6000, &st);
	assert_int_equal(st.u.status_reply.n_jobs, 0);
	assert_int_equal(st.u.status_reply.n_events, 0);
	com_msg_fini(&st);
}

/* A Bye is a leave, recorded as rank_left; silence past rank_timeout_ms
 * stays rank_lost. */
static void
test_jobs_bye_is_an_event_rank_left_not_rank_lost(void **state)
{
	fixture *f = *state;
	com_msg st;
	const com_status_reply *r;

	join_two(f, 0, 0);
	assert_int_equal(bye(f, "B", "job", 1, 20), 0);
	status(f, NULL, 20, &st);
	r = &st.u.status_reply;
	assert_int_equal(r->n_events, 3);
	assert_event_is(&r->events[2], "rank_left", "job",
	    "rank 1 left at step 0 (1/2 alive)");
	com_msg_fini(&st);
}

/* The threshold example plug-in counts the rank events it is told of
 * and writes the counts in its reason. */
static void
test_jobs_tell_policies_of_ranks_joined_and_lost(void **state)
{
	fixture *f = *state;
	char so[PATH_MAX], text[PATH_MAX + 256], err[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;
	FILE *fp;

	plugin_path(so, sizeof(so), THRESHOLD_SO);
	snprintf(text, sizeof(text),
	    "jobs:\n"
	    "  - policies:\n"
	    "      - {type: threshold, plugin: %s, params: {threshold: 5}}\n",
	    so);
	fp = fopen(f->path, "w");
	assert_non_null(fp);
	assert_true(fputs(text, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(ctl_config_load(f->path, &cfg, err, sizeof(err)), 0);
	ctl_jobs_destroy(&f->jobs);
	assert_int_equal(ctl_jobs_new(cfg, INSTANCE, record, f, &f->jobs), 0);

	join_two(f, 0, 0);
	assert_int_equal(bye(f, "B", "job", 1, 5), 0);
	assert_int_equal(report(f, "A", "job", 0, 0, 0, 9, 1, 10), 0);
	assert_string_equal(decision(f, 1)->reason,
	    "threshold 5: 0 high, 2 low; seen 1 windows, 0 reloads, 2 ranks "
	    "joined, 1 lost");
	assert_int_equal(join(f, "B", "job", 1, 2, 10, 13, 20), 0);
	assert_int_equal(report(f, "A", "job", 0, 1, 10, 19, 2, 30), 0);
	assert_int_equal(report(f, "B", "job", 1, 1, 10, 19, 2, 30), 0);
	assert_string_equal(decision(f, 2)->reason,
	    "threshold 5: 0 high, 2 low; seen 2 windows, 0 reloads, 3 ranks "
	    "joined, 1 lost");
	assert_int_equal(counters(f).policy_errors, 0);

	/* The table borrows cfg: it goes first. */
	ctl_jobs_destroy(&f->jobs);
	ctl_config_destroy(&cfg);
}

static void
test_jobs_destroy_is_null_safe(void **state)
{
	ctl_jobs *jobs = NULL;

	(void)state;
	ctl_jobs_destroy(NULL);
	ctl_jobs_destroy(&jobs);
	assert_null(jobs);
}

/* ---- metrics, calibration and collectives through the table
 * ----------- */

/* Owns the size threshold: asks for a 6-step calibration when window 0
 * closes, reports what it saw as metrics (one of them invalid). */
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
	out->n_metrics = 3;
	out->metrics[0] = (bellows_metric){ .name = "n_comm",
		.layer = -1,
		.value = w->n_comm };
	out->metrics[1] = (bellows_metric){ .name = "calibrate_until",
		.layer = 0,
		.value = (double)w->calibrate_until };
	out->metrics[2] = (bellows_metric){ .name = "bad name", .layer = -1 };
	if (w->window == 0) {
		out->calibrate_steps = 6;
		snprintf(out->reason, sizeof(out->reason), "calibrate");
	}
	return 0;
}

static const bellows_policy_ops metering_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "metering",
	.summary = "reports metrics and calibrates",
	.knobs = BELLOWS_KNOB_SIZE_THRESHOLD,
	.init = metering_init,
	.on_window = metering_on_window,
};

static void
test_jobs_publish_metrics_in_telemetry_and_calibration_in_decisions(
    void **state)
{
	fixture *f = *state;
	static const com_comm_sample comm[2] = {
		{ .bytes = 4096, .ms = 0.5, .count = 3 },
		{ .bytes = 512, .ms = 0.25, .count = 3, .compressed = true },
	};
	const com_telemetry *t;
	const com_decision *d;
	com_report rep;

	/* The job entry's policy, swapped for one defined here (its
	 * parsed config is not read). */
	f->cfg->jobs[0].policies[0].ops = &metering_ops;
	assert_int_equal(join(f, "a", "job1", 0, 1, 0, 1, 0), 0);
	rep = report_of("job1", 0, 0, 0, 9, 1);
	rep.n_comm = 2;
	rep.comm = (com_comm_sample *)comm;
	assert_int_equal(send_report(f, "a", &rep, 10), 0);
	t = telemetry(f);
	assert_int_equal(t->window, 0);
	assert_int_equal(t->n_metrics, 2);
	assert_string_equal(t->metrics[0].policy,
	    f->cfg->jobs[0].policies[0].name);
	assert_string_equal(t->metrics[0].name, "n_comm");
	assert_true(t->metrics[0].value == 2);
	assert_int_equal(t->metrics[0].layer, -1);
	assert_string_equal(t->metrics[1].name, "calibrate_until");
	assert_int_equal(t->metrics[1].layer, 0);
	assert_true(t->metrics[1].value == 0);
	/* The calibration is the decision's only change: published. */
	assert_int_equal(n_decisions(f), 2);
	d = decision(f, 1);
	assert_int_equal(d->calibrate_steps, 6);
	assert_string_equal(d->reason, "calibrate");
	/* Window 1 ran under it: calibrate_until is its apply step + 6;
	 * the decision answering it asks for nothing. */
	assert_int_equal(report(f, "a", "job1", 0, 1, 10, 19, 2, 20), 0);
	t = telemetry(f);
	assert_int_equal(t->window, 1);
	assert_true(t->metrics[0].value == 0);
	assert_true(t->metrics[1].value == (double)(d->apply_step + 6));
	assert_int_equal(decision(f, 2)->calibrate_steps, 0);
}

/* ---- authorisation (daemon.security) ----------------------------------- */

/* The fixture with security: alice and bob are trusted, "job*" is
 * alice's alone, "open*" every trusted client's. */
static int
setup_secure(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	char err[CTL_CONFIG_ERR_MAX], keys[128], clients[128];
	const char *names[] = { "alice", "bob" };
	com_cert c;

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-jobs-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(keys, sizeof(keys), "%s/keys", f->dir);
	snprintf(clients, sizeof(clients), "%s/clients", f->dir);
	if (mkdir(keys, 0700) != 0 || mkdir(clients, 0700) != 0 ||
	    com_cert_generate(&c) != 0 ||
	    com_cert_save(&c, keys, "server", false, err, sizeof(err)) != 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		if (com_cert_generate(&c) != 0 ||
		    com_cert_save(&c, clients, names[i], false, err,
			sizeof(err)) != 0)
			return -1;
	}
	return fixture_start(f,
	    "daemon:\n"
	    "  rank_timeout_ms: 5000\n"
	    "  max_world: 8\n"
	    "  max_layers: 4\n"
	    "  security: {server_key: keys/server.key, clients: "
	    "clients}\n"
	    "jobs:\n"
	    "  - match: \"job*\"\n"
	    "    clients: [alice]\n"
	    "    policies:\n"
	    "      - type: schedule\n"
	    "        params: {levels: {0: 2}}\n"
	    "  - match: \"open*\"\n"
	    "    policies:\n"
	    "      - type: schedule\n"
	    "        params: {levels: {0: 3}}\n",
	    state);
}

static int
teardown_secure(void **state)
{
	fixture *f = *state;
	char cmd[200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/keys' '%s/clients'", f->dir,
	    f->dir);
	if (system(cmd) != 0)
		return -1;
	return teardown(state);
}

static void
test_jobs_refuse_a_client_not_allowed_and_create_nothing(void **state)
{
	fixture *f = *state;
	com_msg m;

	f->client = "bob";
	assert_int_equal(join(f, "B", "job1", 0, 1, 0, 7, 0), BELLOWS_EPERM);
	assert_error_reply(f, BELLOWS_EPERM);
	assert_non_null(strstr(f->why, "'bob' is not allowed for job 'job1'"));
	f->client = NULL; /* a connection the ZAP handler did not name */
	assert_int_equal(join(f, "N", "job1", 0, 1, 0, 7, 0), BELLOWS_EPERM);
	f->client = "alice";
	status(f, NULL, 1, &m);
	assert_int_equal(m.u.status_reply.n_jobs, 0);
	com_msg_fini(&m);
	/* Nor may bob act on alice's job once it exists. */
	assert_int_equal(join(f, "A", "job1", 0, 1, 0, 7, 0), 0);
	f->client = "bob";
	assert_int_equal(report(f, "A", "job1", 0, 0, 0, 9, 0, 10),
	    BELLOWS_EPERM);
	assert_error_reply(f, BELLOWS_EPERM);
	assert_int_equal(beat(f, "A", "job1", 0, 3, 0, 10), BELLOWS_EPERM);
	assert_int_equal(bye(f, "A", "job1", 0, 10), BELLOWS_EPERM);
	assert_int_equal(snapshot(f, "job1", 0), BELLOWS_EPERM);
	assert_error_reply(f, BELLOWS_EPERM);
	f->client = "alice";
	assert_int_equal(beat(f, "A", "job1", 0, 3, 0, 10), 0);
}

static void
test_jobs_bind_a_live_rank_to_the_client_that_opened_it(void **state)
{
	fixture *f = *state;

	f->client = "alice";
	assert_int_equal(join(f, "A", "open1", 0, 2, 0, 7, 0), 0);
	/* bob claims the rank with alice's incarnation from another
	 * connection: refused, the rank stays alice's. */
	f->client = "bob";
	assert_int_equal(join(f, "B", "open1", 0, 2, 0, 7, 10), BELLOWS_EBUSY);
	assert_error_reply(f, BELLOWS_EBUSY);
	assert_non_null(strstr(f->why, "held by another client"));
	/* Nor can it report as the rank, even through alice's routing id. */
	assert_int_equal(report(f, "A", "open1", 0, 0, 0, 9, 0, 10),
	    BELLOWS_ENOTJOINED);
	/* bob may take the other rank. */
	assert_int_equal(join(f, "B", "open1", 1, 2, 0, 8, 10), 0);
	/* alice reconnecting (same incarnation, new connection) is alice. */
	f->client = "alice";
	assert_int_equal(join(f, "C", "open1", 0, 2, 0, 7, 20), 0);
	assert_int_equal(report(f, "C", "open1", 0, 0, 0, 9, 0, 30), 0);
	/* Once the rank has left, another trusted client may take it. */
	assert_int_equal(bye(f, "C", "open1", 0, 40), 0);
	f->client = "bob";
	assert_int_equal(join(f, "D", "open1", 0, 2, 0, 9, 50), 0);
}

static void
test_jobs_status_shows_a_client_only_the_jobs_it_may_read(void **state)
{
	fixture *f = *state;
	com_msg m;

	f->client = "alice";
	assert_int_equal(join(f, "A", "job1", 0, 1, 0, 7, 0), 0);
	assert_int_equal(join(f, "A2", "open1", 0, 1, 0, 8, 0), 0);
	status(f, NULL, 1, &m);
	assert_int_equal(m.u.status_reply.n_jobs, 2);
	com_msg_fini(&m);
	f->client = "bob";
	status(f, NULL, 1, &m);
	assert_int_equal(m.u.status_reply.n_jobs, 1);
	assert_string_equal(m.u.status_reply.jobs[0].job, "open1");
	for (uint32_t i = 0; i < m.u.status_reply.n_events; i++)
		assert_true(
		    strcmp(m.u.status_reply.events[i].job, "job1") != 0);
	com_msg_fini(&m);
	status(f, "job1", 1, &m);
	assert_int_equal(m.u.status_reply.n_jobs, 0);
	assert_int_equal(m.u.status_reply.n_events, 0);
	com_msg_fini(&m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_jobs_first_hello_creates_the_job_and_decision_one),
		T(test_jobs_second_rank_joins_with_the_same_snapshot),
		T(test_jobs_unmatched_job_runs_without_policies),
		T(test_jobs_window_closes_only_when_every_live_rank_reported),
		T(test_jobs_measure_the_latency_of_window_decisions),
		T(test_jobs_send_decisions_directly_to_ranks_just_resumed),
		T(test_jobs_rank_rejoining_later_is_expected_only_from_its_first_window),
		T(test_jobs_window_timeout_closes_an_incomplete_window),
		T(test_jobs_lost_rank_is_not_waited_for_and_can_rejoin),
		T(test_jobs_completeness_counts_follow_loss_leave_rejoin_and_duplicates),
		T(test_jobs_a_report_covering_ranks_completes_them_through_loss_and_rejoin),
		T(test_jobs_bye_removes_a_rank_at_once),
		T(test_jobs_bye_is_an_event_rank_left_not_rank_lost),
		T(test_jobs_refuses_a_duplicate_rank_held_by_a_live_agent),
		T(test_jobs_accepts_the_same_incarnation_from_a_new_peer),
		T(test_jobs_refuses_a_hello_that_does_not_match_the_job),
		T(test_jobs_refuses_a_report_from_a_peer_not_holding_the_rank),
		T(test_jobs_refuses_a_report_naming_a_layer_outside_the_table),
		T(test_jobs_refuses_stale_and_far_ahead_reports),
		T(test_jobs_take_a_repeated_report_once_and_count_it),
		T(test_jobs_tell_ranks_which_windows_are_closed),
		T(test_jobs_skips_windows_nobody_reported),
		T(test_jobs_repairs_a_rank_that_applies_another_decision),
		T(test_jobs_does_not_repair_while_a_decision_is_pending),
		T(test_jobs_repairs_a_divergence_seen_in_a_report),
		T(test_jobs_restarted_daemon_adopts_state_and_continues_seq),
		T(test_jobs_snapshot_holds_the_decision_in_force_and_later_ones),
		T(test_jobs_status_lists_jobs_and_ranks),
		T(test_jobs_refuses_a_job_past_max_jobs),
		T(test_jobs_refuses_a_job_that_could_hold_more_than_max_job_mb),
		T(test_jobs_refuses_jobs_past_max_total_job_mb_until_one_is_forgotten),
		T(test_jobs_refuses_a_hello_over_the_world_or_layer_limits),
		T(test_jobs_refuses_a_hello_for_a_rank_outside_its_world),
		T(test_jobs_forgets_a_job_idle_for_job_idle_ms),
		T(test_jobs_a_new_launch_after_the_run_ended_starts_a_new_run),
		T(test_jobs_a_late_rank_of_the_launch_that_ended_rejoins_its_run),
		T(test_jobs_a_new_launch_waits_until_the_runs_ranks_are_gone),
		T(test_jobs_without_launch_identities_a_fresh_rank_behind_is_a_new_run),
		T(test_jobs_a_resume_rewinds_the_run_and_reissues_its_decisions),
		T(test_jobs_a_resume_must_have_the_runs_layer_table),
		T(test_jobs_status_lists_recent_events),
		T(test_jobs_tell_policies_of_ranks_joined_and_lost),
		T(test_jobs_publish_metrics_in_telemetry_and_calibration_in_decisions),
		T(test_jobs_destroy_is_null_safe),
		cmocka_unit_test_setup_teardown(
		    test_jobs_refuse_a_client_not_allowed_and_create_nothing,
		    setup_secure, teardown_secure),
		cmocka_unit_test_setup_teardown(
		    test_jobs_bind_a_live_rank_to_the_client_that_opened_it,
		    setup_secure, teardown_secure),
		cmocka_unit_test_setup_teardown(
		    test_jobs_status_shows_a_client_only_the_jobs_it_may_read,
		    setup_secure, teardown_secure),
#undef T
	};

	/* Warnings (lost ranks, repairs, timeouts) are part of what the
	 * tests provoke; the info lines of every join are not. */
	ctl_log_set_level(CTL_LOG_WARN);
	return cmocka_run_group_tests_name("jobs", tests, NULL, NULL);
}
