/* resume - what a resume from a checkpoint costs bellowsd's event loop.
 *
 * Builds, through the store (controller/store.c, the code bellowsd
 * runs), a history of JOBS jobs of 1 rank x L layers and W windows each
 * (a decision every DECIDE_EVERY windows), then drives the job table
 * (controller/jobs.c) with that store on this thread exactly as the
 * event loop does, in time order:
 *
 *   stall     one Hello that resumes job 0 at its last window: how long
 *             the call holds the loop, how long until the launch is
 *             welcomed (the agent's Hello retried every HELLO_RETRY_MS)
 *             and the CPU time the resume took, on every thread (the
 *             figure the machine's load does not change much);
 *   load      for --seconds: a client resumes the jobs in turn,
 *             --rate times a second (a new launch each time, whose rank
 *             is then silent; `resumes` counts those welcomed or
 *             whose run is then read back), a STATUS request is due every
 *             STATUS_EVERY_MS and the cron ticks every CRON_MS. A STATUS
 *             answered late waited for whatever held the loop: its
 *             latency is (answered - due). `busy` is the share of the
 *             time the loop spent in Hellos.
 *
 * --db FILE keeps the history there, and a FILE that exists is taken as
 * written by an earlier run with the same --layers and --windows (the
 * runs resumed are then the ones earlier resumes left).
 *
 * The last line reads
 *   resume: stall_ms=S welcome_ms=T cpu_ms=C status_p50_ms=A status_p99_ms=B
 *   status_max_ms=M busy_pct=P resumes=N refused=R (windows=W layers=L)
 */
#include "common/clock.h"
#include "policyhost/config.h"
#include "controller/events.h"
#include "controller/jobs.h"
#include "policyhost/log.h"
#include "controller/store.h"

#include <bellows/error.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define JOBS            2      /* jobs in the history */
#define DECIDE_EVERY    100    /* windows per recorded decision */
#define PIPE_WINDOWS    64     /* windows in flight while writing */
#define WAIT_MS         600000 /* longest wait for a commit */
#define HELLO_RETRY_MS  1000   /* an agent's Hello retry after EBUSY */
#define STATUS_EVERY_MS 10     /* STATUS requests during the load */
#define CRON_MS         100    /* bellowsd's cron period */
#define MAX_STATUS      100000 /* STATUS latencies kept */

static const char config_text[] = "daemon:\n"
				  "  rank_timeout_ms: 3000\n"
				  "  max_layers: 4096\n"
				  "jobs:\n"
				  "  - match: \"*\"\n"
				  "    policies:\n"
				  "      - type: accordion\n";

typedef struct bench {
	uint32_t layers;       /* per job */
	uint32_t windows;      /* per job */
	double rate;           /* resumes a second during the load */
	double seconds;        /* length of the load */
	char dir[256];         /* private directory */
	char db[300];          /* dir/history.db, or --db */
	bool reuse;            /* --db names a history written before */
	char yaml[300];        /* dir/bellows.yaml */
	com_layer_info *table; /* the layer table */
	char (*names)[24];     /* its names */
	ctl_config *cfg;       /* loaded from yaml */
	void *zctx;            /* ZeroMQ context of the store */
	ctl_events *events;    /* the store's events */
	ctl_store *store;      /* open on db */
	ctl_jobs *jobs;        /* driven with store */
	uint64_t t0;           /* monotonic ms of the load's start */
	double hello_ms;       /* time spent in Hellos during the load */
	uint64_t resumes;      /* Hellos that resumed or started one */
	uint64_t refused;      /* Hellos refused (EBUSY, ELIMIT) */
	char last_why[512];    /* the last refusal's reason */
	char shown_why[512];   /* the last refusal of the load */
} bench;

static void
publish_nothing(void *arg, const com_msg *m)
{
	(void)arg;
	(void)m;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* CPU time of the process (every thread), in ms. */
static double
cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double
now_ms_f(void)
{
	return (double)com_clock_ns() / 1e6;
}

/* Writes job `name`'s W windows of L layers and a decision every
 * DECIDE_EVERY windows, then ends the run. Returns 0 or -1. */
static int
write_job(bench *b, const char *name)
{
	bellows_window_layer *wl = calloc(b->layers, sizeof(*wl));
	uint64_t *tickets = calloc(b->windows + 1, sizeof(*tickets));
	com_decision d;
	int64_t run;
	int rc = -1;

	if (wl == NULL || tickets == NULL ||
	    com_decision_init(&d, name, b->layers) != 0)
		goto out;
	d.policy = strdup("accordion");
	d.reason = strdup("bench");
	d.seq = 1;
	run = ctl_store_run_begin(b->store, name, "first", 1, b->table,
	    b->layers, b->cfg, 1, com_clock_wall_ms());
	ctl_store_decision(b->store, run, &d, NULL, CTL_STORE_INITIAL,
	    com_clock_wall_ms());
	for (uint32_t w = 0; w < b->windows; w++) {
		double sc = 1.0 + 0.01 * (double)(w % 100);
		bellows_window v = { .job = name,
			.window = w,
			.first_step = 10ull * w,
			.last_step = 10ull * w + 9,
			.lr = 0.1,
			.lr_next = 0.1,
			.batch_size = 128,
			.lr_scale = 1,
			.world = 1,
			.ranks_reported = 1,
			.n_layers = b->layers,
			.layers = wl };

		if (w >= PIPE_WINDOWS &&
		    ctl_store_wait(b->store, tickets[w - PIPE_WINDOWS],
			WAIT_MS) != 0)
			goto out;
		for (uint32_t l = 0; l < b->layers; l++)
			wl[l] = (bellows_window_layer){
				.grad_norm_rank0 = 1.5 * sc / (l + 1),
				.grad_norm_mean = 1.4 * sc / (l + 1),
				.sum_sq = 0.25 * sc * (l + 1),
				.abs_sum = 31.5 * sc,
				.max_abs = 0.0625 * sc,
				.count = 4096,
				.nonzero = 4096 - l,
				.level = d.level[l],
			};
		ctl_store_window(b->store, run, &v, 1, true, &d,
		    com_clock_wall_ms());
		if ((w + 1) % DECIDE_EVERY == 0) {
			/* The same levels again: nothing changes. */
			d.seq++;
			d.window = w + 1;
			d.apply_step = 10ull * w + 11;
			ctl_store_decision(b->store, run, &d, &d,
			    CTL_STORE_WINDOW, com_clock_wall_ms());
		}
		tickets[w] = ctl_store_flush(b->store);
	}
	ctl_store_run_end(b->store, run, com_clock_wall_ms());
	rc = ctl_store_wait(b->store, ctl_store_flush(b->store), WAIT_MS);
	com_decision_fini(&d);
out:
	free(wl);
	free(tickets);
	return rc;
}

/* The loop's cron and its reading of the store's acknowledgements. */
static void
cron(bench *b)
{
	ctl_store_flush(b->store);
	(void)ctl_store_wait(b->store, UINT64_MAX, 0);
	ctl_jobs_tick(b->jobs, com_clock_ms());
	ctl_store_tick(b->store, com_clock_ms());
}

/* A Hello of launch `key` resuming job `name`'s rank 0 at its last
 * window. Returns what ctl_jobs_hello returns; the time it took is
 * added to b->hello_ms. */
static int
resume_hello(bench *b, const char *name, const char *key, double *took)
{
	com_msg m, reply;
	char why[512];
	double a;
	int r;

	com_msg_init(&m, COM_MSG_HELLO);
	com_msg_init(&reply, COM_MSG_NONE);
	m.u.hello.job = strdup(name);
	m.u.hello.agent_version = strdup("0.1.0");
	m.u.hello.run_id = strdup(key);
	m.u.hello.world = 1;
	m.u.hello.step = 10ull * b->windows;
	m.u.hello.last_window = b->windows;
	m.u.hello.resume = true;
	m.u.hello.incarnation = com_clock_ns();
	m.u.hello.n_layers = b->layers;
	m.u.hello.layers = calloc(b->layers, sizeof(*m.u.hello.layers));
	for (uint32_t l = 0; m.u.hello.layers != NULL && l < b->layers; l++) {
		m.u.hello.layers[l] = b->table[l];
		m.u.hello.layers[l].name = strdup(b->names[l]);
	}
	a = now_ms_f();
	r = ctl_jobs_hello(b->jobs, (const uint8_t *)key, strlen(key), "",
	    &m.u.hello, com_clock_ms(), &reply, why, sizeof(why));
	if (r == 0 && reply.type != COM_MSG_WELCOME)
		r = reply.type == COM_MSG_ERROR ? reply.u.error.code : -1;
	if (r != 0)
		snprintf(b->last_why, sizeof(b->last_why), "%s", why);
	else
		b->last_why[0] = '\0';
	*took = now_ms_f() - a;
	com_msg_fini(&reply);
	com_msg_fini(&m);
	return r;
}

/* The stall of one resume, and how long until its launch is welcomed
 * (Hellos retried every HELLO_RETRY_MS, the cron ticking meanwhile). */
static int
one_resume(bench *b, double *stall, double *welcome)
{
	double t0 = now_ms_f(), took, next = t0;
	int r;

	*stall = 0;
	for (;;) {
		r = resume_hello(b, "job0", "stall", &took);
		if (took > *stall)
			*stall = took;
		if (r != BELLOWS_EBUSY)
			break;
		next += HELLO_RETRY_MS;
		while (now_ms_f() < next) {
			cron(b);
			usleep(CRON_MS * 1000);
		}
	}
	*welcome = now_ms_f() - t0;
	return r;
}

/* The load: resumes at b->rate a second, STATUS every STATUS_EVERY_MS,
 * cron every CRON_MS, each served when it is due and the loop is free.
 * Fills lat[] with STATUS latencies; returns their count. */
static uint32_t
load(bench *b, double *lat)
{
	double t0 = now_ms_f(), end = t0 + b->seconds * 1000;
	double next_resume = t0, next_status = t0, next_cron = t0;
	uint32_t n = 0, k = 0;

	while (now_ms_f() < end) {
		double now = now_ms_f(), took;
		char key[32];

		if (now >= next_resume) {
			snprintf(key, sizeof(key), "launch%u", k);
			/* Welcomed, or its run is being read back. */
			if (resume_hello(b, k % 2 ? "job1" : "job0", key,
				&took) == 0 ||
			    strstr(b->last_why, "read back for the resume")) {
				b->resumes++;
			} else {
				b->refused++;
				snprintf(b->shown_why, sizeof(b->shown_why),
				    "%s", b->last_why);
			}
			b->hello_ms += took;
			k++;
			next_resume += 1000.0 / b->rate;
		} else if (now >= next_status) {
			com_status_request req = { 0 };
			com_msg st;

			com_msg_init(&st, COM_MSG_STATUS_REPLY);
			ctl_jobs_status(b->jobs, NULL, &req, com_clock_ms(),
			    &st.u.status_reply);
			com_msg_fini(&st);
			if (n < MAX_STATUS)
				lat[n++] = now_ms_f() - next_status;
			next_status += STATUS_EVERY_MS;
		} else if (now >= next_cron) {
			cron(b);
			next_cron += CRON_MS;
		} else {
			usleep(500);
		}
	}
	/* Those due while something held the loop at the end wait for it
	 * too. */
	for (; next_status < end && n < MAX_STATUS;
	     next_status += STATUS_EVERY_MS)
		lat[n++] = now_ms_f() - next_status;
	return n;
}

static int
setup(bench *b)
{
	char err[CTL_CONFIG_ERR_MAX];
	ctl_store_conf conf = { .keep_every = 10,
		.batch_rows = 4096,
		.queue_rows = 100000000 };
	FILE *f;

	snprintf(b->dir, sizeof(b->dir), "/tmp/bellows-resume-bench.XXXXXX");
	if (mkdtemp(b->dir) == NULL)
		return -1;
	if (b->db[0] == '\0')
		snprintf(b->db, sizeof(b->db), "%s/history.db", b->dir);
	else
		b->reuse = access(b->db, F_OK) == 0;
	snprintf(b->yaml, sizeof(b->yaml), "%s/bellows.yaml", b->dir);
	f = fopen(b->yaml, "w");
	if (f == NULL || fputs(config_text, f) < 0 || fclose(f) != 0 ||
	    ctl_config_load(b->yaml, &b->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "resume: configuration: %s\n", err);
		return -1;
	}
	b->table = calloc(b->layers, sizeof(*b->table));
	b->names = calloc(b->layers, sizeof(*b->names));
	if (b->table == NULL || b->names == NULL)
		return -1;
	for (uint32_t l = 0; l < b->layers; l++) {
		snprintf(b->names[l], sizeof(b->names[l]), "layer%u.weight", l);
		b->table[l] = (com_layer_info){ .name = b->names[l],
			.numel = 64 * 64,
			.ndim = 2,
			.shape = { 64, 64 } };
	}
	b->zctx = zmq_ctx_new();
	if (b->zctx == NULL || ctl_events_new(&b->events) != 0 ||
	    ctl_store_open(b->db, b->zctx, &conf, 1, b->events, &b->store) !=
		0 ||
	    ctl_jobs_new(b->cfg, 1, publish_nothing, NULL, &b->jobs) != 0)
		return -1;
	ctl_jobs_set_store(b->jobs, b->store);
	return ctl_store_start(b->store);
}

static void
teardown(bench *b)
{
	char cmd[400];

	ctl_jobs_cancel_resumes(b->jobs);
	ctl_store_close(&b->store, 5000);
	ctl_jobs_destroy(&b->jobs);
	ctl_events_destroy(&b->events);
	ctl_config_destroy(&b->cfg);
	if (b->zctx != NULL)
		zmq_ctx_term(b->zctx);
	free(b->table);
	free(b->names);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b->dir);
	if (b->dir[0] != '\0' && system(cmd) != 0)
		fprintf(stderr, "resume: cannot remove %s\n", b->dir);
}

static int
parse(int argc, char **argv, bench *b)
{
	static const struct option longs[] = {
		{ "layers", required_argument, NULL, 'l' },
		{ "windows", required_argument, NULL, 'w' },
		{ "rate", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "db", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	b->layers = 100;
	b->windows = 20000;
	b->rate = 10;
	b->seconds = 20;
	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		if (c == 'l')
			b->layers = (uint32_t)strtoul(optarg, NULL, 10);
		else if (c == 'w')
			b->windows = (uint32_t)strtoul(optarg, NULL, 10);
		else if (c == 'r')
			b->rate = strtod(optarg, NULL);
		else if (c == 's')
			b->seconds = strtod(optarg, NULL);
		else if (c == 'd')
			snprintf(b->db, sizeof(b->db), "%s", optarg);
		else
			return -1;
	}
	if (b->layers == 0 || b->windows < DECIDE_EVERY || b->rate <= 0 ||
	    b->seconds <= 0) {
		fprintf(stderr,
		    "usage: resume [--layers L] [--windows W>=%d] "
		    "[--rate R] [--seconds S]\n",
		    DECIDE_EVERY);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static double lat[MAX_STATUS];
	bench b = { 0 };
	double stall, welcome, t, cpu;
	uint32_t n;
	int rc = 1;

	ctl_log_set_level(CTL_LOG_WARN);
	if (parse(argc, argv, &b) != 0)
		return 2;
	if (setup(&b) != 0) {
		fprintf(stderr, "resume: cannot set up in %s\n", b.dir);
		goto out;
	}
	t = now_ms_f();
	for (uint32_t k = 0; k < JOBS && !b.reuse; k++) {
		char name[16];

		snprintf(name, sizeof(name), "job%u", k);
		if (write_job(&b, name) != 0) {
			fprintf(stderr, "resume: writing %s failed\n", name);
			goto out;
		}
	}
	printf("resume: history of %d jobs x %u windows x %u layers written "
	       "in %.1f s\n",
	    JOBS, b.windows, b.layers, (now_ms_f() - t) / 1000);
	cpu = cpu_ms();
	if (one_resume(&b, &stall, &welcome) != 0) {
		fprintf(stderr, "resume: the resume was not welcomed\n");
		goto out;
	}
	cpu = cpu_ms() - cpu;
	b.t0 = com_clock_ms();
	t = now_ms_f();
	n = load(&b, lat);
	t = now_ms_f() - t;
	qsort(lat, n, sizeof(*lat), cmp_double);
	printf("resume: stall_ms=%.1f welcome_ms=%.0f cpu_ms=%.0f "
	       "status_p50_ms=%.2f "
	       "status_p99_ms=%.2f status_max_ms=%.1f busy_pct=%.1f "
	       "resumes=%" PRIu64 " refused=%" PRIu64
	       " (windows=%u layers=%u)\n",
	    stall, welcome, cpu, n ? lat[n / 2] : 0.0,
	    n ? lat[(size_t)(n * 0.99)] : 0.0, n ? lat[n - 1] : 0.0,
	    100.0 * b.hello_ms / t, b.resumes, b.refused, b.windows, b.layers);
	if (b.shown_why[0] != '\0')
		printf("resume: the last refusal: %s\n", b.shown_why);
	rc = 0;
out:
	teardown(&b);
	return rc;
}
