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
 * --live runs none of that, but starts a real bellowsd (--bellowsd, the
 * one built beside the bench) on the history, a third job's ranks
 * (`bellows sim`, --bellows), and measures two phases of --seconds,
 * without and with a client resuming the jobs --rate times a second
 * over ZeroMQ: --statuses runs of `bellows status` (wall time), a
 * STATUS round trip every STATUS_EVERY_MS, and the third job's decision
 * latency from /metrics. Its last lines read
 *   resume: live quiet|resuming: status_p50_ms=A status_p99_ms=B ...
 *
 * --live --secure does the same with daemon.security on: CURVE keys
 * made by `bellows keygen` (server, alice, bob, ops), a configuration
 * whose `clients` lists allow job0 to alice, job1 to bob and every job
 * to ops, and /metrics behind ops' bearer token. The resuming load then
 * comes from two client threads of their own keys, alice resuming job0
 * and bob job1, each --rate times a second, so two read-backs (one per
 * client, the limit bellowsd keeps per authenticated name) may run at
 * once; `bellows status`, the STATUS round trips and the third job's
 * ranks are ops. A Hello refused by a limit (EBUSY) counts as refused;
 * a failed CURVE handshake or an EPERM reply is an auth failure,
 * counted apart (`auth_failed=`), and fails the bench. Its phase lines
 * end in `clients=2 auth_failed=N`, each after a line per client.
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

#include "common/cert.h"
#include "common/wire.h"
#include "common/zmonitor.h"
#include "benchwire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

extern char **environ;

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
	bool live;             /* --live: against a real bellowsd */
	const char *bellowsd;  /* --bellowsd: the daemon --live runs */
	const char *cli;       /* --bellows: the CLI --live runs */
	uint32_t statuses;     /* --statuses: `bellows status` per phase */
	bool secure;           /* --secure: --live with daemon.security */
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

/* Fills m (initialised here; com_msg_fini frees it) with the Hello of
 * launch `key` resuming job `name`'s rank 0 at its last window, as the
 * agent of a restarted training job sends it. */
static void
hello_build(const bench *b, const char *name, const char *key,
    uint64_t incarnation, com_msg *m)
{
	com_msg_init(m, COM_MSG_HELLO);
	m->u.hello.job = strdup(name);
	m->u.hello.agent_version = strdup("0.1.0");
	m->u.hello.run_id = strdup(key);
	m->u.hello.world = 1;
	m->u.hello.step = 10ull * b->windows;
	m->u.hello.last_window = b->windows;
	m->u.hello.resume = true;
	m->u.hello.incarnation = incarnation;
	m->u.hello.n_layers = b->layers;
	m->u.hello.layers = calloc(b->layers, sizeof(*m->u.hello.layers));
	for (uint32_t l = 0; m->u.hello.layers != NULL && l < b->layers; l++) {
		m->u.hello.layers[l] = b->table[l];
		m->u.hello.layers[l].name = strdup(b->names[l]);
	}
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

	hello_build(b, name, key, com_clock_ns(), &m);
	com_msg_init(&reply, COM_MSG_NONE);
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

/* ---- --live: against a real bellowsd ---------------------------------- */

/* The STATUS round trips of one phase (the pinging client's). */
typedef struct live_phase {
	double rtt[MAX_STATUS]; /* STATUS round trips over ZeroMQ, ms */
	uint32_t n_rtt;         /* of them */
} live_phase;

/* What one resuming client counts in one phase. */
typedef struct live_count {
	uint64_t hellos;      /* resume Hellos sent */
	uint64_t started;     /* of them, read-backs started */
	uint64_t welcomed;    /* launches welcomed after a read-back */
	uint64_t refused;     /* Hellos refused otherwise (limits: EBUSY) */
	uint64_t auth_failed; /* handshakes refused, EPERM replies */
} live_count;

#define LIVE_CLIENTS 2 /* resuming clients with --secure (one without) */

typedef struct live live;

/* A resuming client: its thread, its key, its job, its counts. */
typedef struct live_client {
	live *lv;             /* the run it belongs to */
	const char *name;     /* its client name, the launch keys' prefix */
	const char *job;      /* the job it resumes; NULL: job0, job1 in turn */
	bool curve;           /* its sockets are CURVE clients */
	com_cert key;         /* its keys, with curve */
	bool ping;            /* it also sends the STATUS round trips */
	pthread_t thread;     /* its thread */
	bool started;         /* thread is to be joined */
	live_count counts[2]; /* per phase */
	uint64_t auth_failed; /* over the whole run */
	char why[512];        /* the last refusal's reason */
	char auth_why[512];   /* the last auth failure */
} live_client;

struct live {
	bench *b;             /* the history's shape */
	const char *bellowsd; /* the daemon run */
	const char *cli;      /* the `bellows` run for status and sim */
	uint32_t statuses;    /* `bellows status` runs per phase */
	char ctl[320];        /* control endpoint */
	char pub[320];        /* publish endpoint */
	char port[16];        /* /metrics on 127.0.0.1:port */
	char log[300];        /* bellowsd's and sim's output */
	pid_t daemon;         /* bellowsd, 0 before */
	pid_t sim;            /* the third job's ranks, 0 before */
	void *zctx;           /* the client threads' context */
	live_client clients[LIVE_CLIENTS]; /* the resuming clients */
	uint32_t n_clients;    /* of them: 1, or LIVE_CLIENTS with secure */
	atomic_int phase;      /* index into phases, -1: none */
	atomic_bool resuming;  /* the clients send resumes */
	atomic_bool stop;      /* the client threads end */
	live_phase phases[2];  /* without and with resumes */
	const char *yaml;      /* bellowsd's configuration */
	bool secure;           /* daemon.security on, CURVE everywhere */
	char secure_yaml[300]; /* dir/secure.yaml, with secure */
	char server_pub[320];  /* dir/keys/server.pub, with secure */
	char ops_key[320];     /* dir/keys/ops.key: status, sim, STATUS */
	com_cert server;       /* bellowsd's public key, with secure */
	com_cert ops;          /* the ops client's keys, with secure */
	char token[64];        /* /metrics' bearer token, with secure */
};

/* A free TCP port on 127.0.0.1 into ret (a race with other programs
 * is possible: bellowsd then fails to start, said). Returns 0 or -1. */
static int
live_free_port(char *ret, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc = -1;

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &alen) == 0) {
		snprintf(ret, len, "%u", (unsigned)ntohs(a.sin_port));
		rc = 0;
	}
	close(fd);
	return rc;
}

/* Runs argv with stdout and stderr to `out`; returns its pid or -1. */
static pid_t
live_spawn(const char *const argv[], const char *out)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int r;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out,
	    O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
	r = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return r == 0 ? pid : -1;
}

/* bellowsd and the sim, for the signal handler: an interrupted bench
 * stops them as a finished one does. */
static volatile pid_t live_children[2];

static void
live_on_signal(int sig)
{
	for (size_t i = 0; i < 2; i++)
		if (live_children[i] > 0)
			kill(live_children[i], SIGTERM);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Stops the bellowsd and sim of lv (once spawned) when the bench is
 * interrupted or terminated. */
static void
live_stop_on_signal(void)
{
	struct sigaction sa = { .sa_handler = live_on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static void
live_stop_process(pid_t *pid)
{
	int status;

	if (*pid <= 0)
		return;
	kill(*pid, SIGTERM);
	waitpid(*pid, &status, 0);
	*pid = 0;
}

/* The histogram of decision latency from bellowsd's /metrics: le[i]
 * cumulative counts at ctl_jobs_latency_bounds_ms[i], count all. */
typedef struct live_hist {
	uint64_t le[CTL_JOBS_LATENCY_BUCKETS]; /* cumulative */
	uint64_t count;                        /* decisions */
} live_hist;

/* Scrapes /metrics into *ret (with the bearer token, with secure).
 * Returns 0, or -1 with no answer. */
static int
live_scrape(const live *lv, live_hist *ret)
{
	static const char bucket[] = "bellows_decision_latency_seconds_bucket"
				     "{le=\"";
	static const char count[] = "bellows_decision_latency_seconds_count ";
	struct sockaddr_in a = { .sin_family = AF_INET };
	size_t len = 0, cap = 1 << 16;
	char *text = malloc(cap), *line;
	live_hist h = { 0 };
	uint32_t i = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
	char get[160];
	int get_len = snprintf(get, sizeof(get),
	    "GET /metrics HTTP/1.0\r\n%s%s%s\r\n",
	    lv->secure ? "Authorization: Bearer " : "",
	    lv->secure ? lv->token : "", lv->secure ? "\r\n" : "");

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)atoi(lv->port));
	if (text == NULL || fd < 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write(fd, get, (size_t)get_len) != get_len)
		goto out;
	while ((n = read(fd, text + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 4096) {
			char *t = realloc(text, cap * 2);

			if (t == NULL)
				goto out;
			text = t;
			cap *= 2;
		}
	}
	text[len] = '\0';
	for (line = strtok(text, "\n"); line != NULL;
	     line = strtok(NULL, "\n")) {
		if (strncmp(line, bucket, sizeof(bucket) - 1) == 0 &&
		    i < CTL_JOBS_LATENCY_BUCKETS &&
		    strstr(line, "+Inf") == NULL)
			h.le[i++] = strtoull(strchr(line, '}') + 1, NULL, 10);
		else if (strncmp(line, count, sizeof(count) - 1) == 0)
			h.count = strtoull(line + sizeof(count) - 1, NULL, 10);
	}
	if (i == CTL_JOBS_LATENCY_BUCKETS) {
		*ret = h;
		rc = 0;
	}
out:
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}

/* The bound of the bucket holding the p-quantile of the decisions
 * between scrapes a and z, in ms; INFINITY above the last bound, NAN
 * with none. */
static double
live_quantile(const live_hist *a, const live_hist *z, double p)
{
	uint64_t n = z->count - a->count;

	if (n == 0)
		return NAN;
	for (uint32_t i = 0; i < CTL_JOBS_LATENCY_BUCKETS; i++) {
		if ((double)(z->le[i] - a->le[i]) >= p * (double)n)
			return ctl_jobs_latency_bounds_ms[i];
	}
	return INFINITY;
}

/* Receives one message from sock if one is there. Returns 0 or -1. */
static int
live_recv(void *sock, const com_limits *lim, com_msg *ret)
{
	zmq_msg_t frame;
	int r;

	zmq_msg_init(&frame);
	if (zmq_msg_recv(&frame, sock, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&frame);
		return -1;
	}
	r = com_wire_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), lim,
	    ret);
	zmq_msg_close(&frame);
	if (r != 0) {
		com_msg_fini(ret);
		return -1;
	}
	return 0;
}

/* A STATUS request of no job (the reply stays small) on sock. */
static int
live_ping(void *sock)
{
	com_msg req;

	com_msg_init(&req, COM_MSG_STATUS_REQUEST);
	req.u.status_request.job = (char *)"-";
	return bench_send_msg(sock, &req);
}

#define LIVE_KEYS 256 /* Hellos awaiting their answer, at most */

/* Makes sock a CURVE client of bellowsd with `key`. Returns 0 or -1. */
static int
live_curve(const live *lv, void *sock, const com_cert *key)
{
	return zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, lv->server.public_key,
		   40) != 0 ||
		zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, key->public_key,
		    40) != 0 ||
		zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, key->secret_key,
		    40) != 0
	    ? -1
	    : 0;
}

/* Counts the handshakes the monitor `mon` (NULL: none) saw fail as
 * auth failures of c (and of phase p, when in one). */
static void
live_handshakes(live_client *c, void *mon, live_count *p)
{
	uint16_t event = 0;
	uint32_t value = 0;
	int r;

	while (mon != NULL &&
	    (r = com_monitor_recv(mon, &event, &value)) != BELLOWS_EAGAIN) {
		if (r != 0 ||
		    (event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH &&
			event != ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
			event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL))
			continue;
		c->auth_failed++;
		if (p != NULL)
			p->auth_failed++;
		snprintf(c->auth_why, sizeof(c->auth_why),
		    "a CURVE handshake failed (ZeroMQ event 0x%x, value %u)",
		    event, value);
	}
}

/* A resuming client: while lv->resuming, a resume Hello of a new
 * launch every 1/rate s (of c->job, or job0 and job1 in turn); the
 * launch whose run is then read back says Hello again every
 * HELLO_RETRY_MS until welcomed, as its agent would. With c->ping,
 * always a STATUS round trip every STATUS_EVERY_MS (one at a time), for
 * the loop's responsiveness without a process start (with curve, as
 * the ops client). Replies come in the order the Hellos went, so a FIFO
 * of launch keys tells which launch each answers. With curve, a
 * handshake that fails and an EPERM reply are auth failures, counted
 * apart from the refusals of the limits. */
static void *
live_client_run(void *arg)
{
	live_client *c = arg;
	live *lv = c->lv;
	bench *b = lv->b;
	com_limits lim;
	void *hs = zmq_socket(lv->zctx, ZMQ_DEALER);
	void *ps = c->ping ? zmq_socket(lv->zctx, ZMQ_DEALER) : NULL;
	void *hs_mon = NULL, *ps_mon = NULL;
	int watch = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
	    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
	    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
	char keys[LIVE_KEYS][32], pending[32] = "";
	const char *jobs[LIVE_KEYS], *pending_job = NULL;
	uint32_t head = 0, tail = 0, k = 0;
	uint64_t pending_inc = 0;
	double next_hello = now_ms_f(), next_retry = 0, next_ping = 0;
	double ping_sent = -1;
	int zero = 0;

	com_limits_default(&lim);
	lim.max_layers = 4096;
	zmq_setsockopt(hs, ZMQ_LINGER, &zero, sizeof(zero));
	if (ps != NULL)
		zmq_setsockopt(ps, ZMQ_LINGER, &zero, sizeof(zero));
	if (c->curve) {
		/* A send waits for a connection whose handshake is done:
		 * one that never is must not stop the thread. */
		int wait_ms = 1000;

		zmq_setsockopt(hs, ZMQ_SNDTIMEO, &wait_ms, sizeof(wait_ms));
		if (ps != NULL)
			zmq_setsockopt(ps, ZMQ_SNDTIMEO, &wait_ms,
			    sizeof(wait_ms));
		/* Watched before they connect: no failure goes unseen. */
		if (live_curve(lv, hs, &c->key) != 0 ||
		    (ps != NULL && live_curve(lv, ps, &lv->ops) != 0) ||
		    com_monitor_open(lv->zctx, hs, watch, "bench-hs",
			&hs_mon) != 0 ||
		    (ps != NULL &&
			com_monitor_open(lv->zctx, ps, watch, "bench-ps",
			    &ps_mon) != 0)) {
			c->auth_failed++;
			snprintf(c->auth_why, sizeof(c->auth_why),
			    "cannot make a CURVE client: %s",
			    zmq_strerror(zmq_errno()));
		}
	}
	zmq_connect(hs, lv->ctl);
	if (ps != NULL)
		zmq_connect(ps, lv->ctl);
	while (!atomic_load(&lv->stop)) {
		int ph = atomic_load(&lv->phase);
		live_phase *p = ph >= 0 ? &lv->phases[ph] : NULL;
		live_count *pc = ph >= 0 ? &c->counts[ph] : NULL;
		zmq_pollitem_t items[2] = { { hs, 0, ZMQ_POLLIN, 0 },
			{ ps, 0, ZMQ_POLLIN, 0 } };
		double now = now_ms_f();
		com_msg m;

		if (atomic_load(&lv->resuming) && now >= next_hello &&
		    head - tail < LIVE_KEYS) {
			const char *job = c->job != NULL ? c->job
			    : k % 2                      ? "job1"
							 : "job0";
			char *key = keys[head % LIVE_KEYS];

			/* Queued for its answer only once sent. */
			jobs[head % LIVE_KEYS] = job;
			snprintf(key, 32, "%s%u", c->name, k);
			hello_build(b, job, key, com_clock_ns(), &m);
			if (bench_send_msg(hs, &m) == 0) {
				head++;
				if (pc != NULL)
					pc->hellos++;
			}
			com_msg_fini(&m);
			k++;
			next_hello += 1000.0 / b->rate;
		} else if (!atomic_load(&lv->resuming)) {
			next_hello = now;
		}
		if (pending[0] != '\0' && now >= next_retry &&
		    head - tail < LIVE_KEYS) {
			jobs[head % LIVE_KEYS] = pending_job;
			snprintf(keys[head % LIVE_KEYS], 32, "%s", pending);
			hello_build(b, pending_job, pending, pending_inc, &m);
			if (bench_send_msg(hs, &m) == 0)
				head++;
			com_msg_fini(&m);
			next_retry = now + HELLO_RETRY_MS;
		}
		if (ps != NULL && ping_sent < 0 && now >= next_ping &&
		    live_ping(ps) == 0) {
			ping_sent = now;
			next_ping = now + STATUS_EVERY_MS;
		}
		(void)zmq_poll(items, ps != NULL ? 2 : 1, 2);
		live_handshakes(c, hs_mon, pc);
		live_handshakes(c, ps_mon, pc);
		while (ps != NULL && live_recv(ps, &lim, &m) == 0) {
			if (m.type == COM_MSG_STATUS_REPLY && ping_sent >= 0) {
				if (p != NULL && p->n_rtt < MAX_STATUS)
					p->rtt[p->n_rtt++] = now_ms_f() -
					    ping_sent;
				ping_sent = -1;
			} else if (m.type == COM_MSG_ERROR &&
			    m.u.error.code == BELLOWS_EPERM) {
				c->auth_failed++;
				if (pc != NULL)
					pc->auth_failed++;
				snprintf(c->auth_why, sizeof(c->auth_why),
				    "STATUS: %s",
				    m.u.error.message != NULL
					? m.u.error.message
					: "EPERM");
			}
			com_msg_fini(&m);
		}
		while (tail != head && live_recv(hs, &lim, &m) == 0) {
			const char *job = jobs[tail % LIVE_KEYS];
			const char *key = keys[tail++ % LIVE_KEYS];
			const char *text = m.type == COM_MSG_ERROR &&
				m.u.error.message != NULL
			    ? m.u.error.message
			    : "";
			bool mine = strcmp(key, pending) == 0;

			if (m.type == COM_MSG_WELCOME) {
				if (pc != NULL)
					pc->welcomed++;
				if (mine)
					pending[0] = '\0';
			} else if (strstr(text,
				       "its run is read back for "
				       "the resume") != NULL) {
				if (pc != NULL)
					pc->started++;
				snprintf(pending, sizeof(pending), "%s", key);
				pending_job = job;
				pending_inc = com_clock_ns();
				next_retry = now_ms_f() + HELLO_RETRY_MS;
			} else if (mine && m.type == COM_MSG_ERROR &&
			    m.u.error.code == BELLOWS_EBUSY) {
				/* Still read back: retry. */
			} else if (m.type == COM_MSG_ERROR &&
			    m.u.error.code == BELLOWS_EPERM) {
				/* Not a limit: this client was refused the
				 * job it is allowed. */
				c->auth_failed++;
				if (pc != NULL)
					pc->auth_failed++;
				snprintf(c->auth_why, sizeof(c->auth_why), "%s",
				    text);
				if (mine)
					pending[0] = '\0';
			} else {
				if (pc != NULL)
					pc->refused++;
				snprintf(c->why, sizeof(c->why), "%s", text);
				if (mine)
					pending[0] = '\0';
			}
			com_msg_fini(&m);
		}
	}
	com_monitor_close(hs, &hs_mon); /* before their sockets */
	com_monitor_close(ps, &ps_mon);
	zmq_close(hs);
	if (ps != NULL)
		zmq_close(ps);
	return NULL;
}

/* With secure, writes the ops client's key options of `bellows status`
 * and `bellows sim` to argv[0..3]; without, leaves argv alone. */
static void
live_key_args(const live *lv, const char **argv)
{
	if (!lv->secure)
		return;
	argv[0] = "--server-key";
	argv[1] = lv->server_pub;
	argv[2] = "--client-key";
	argv[3] = lv->ops_key;
}

/* Runs `bellows status` n times, one after another, the i-th due at
 * i/n of the phase's --seconds (at once when the one before ended
 * later), and fills ms[] with each one's wall time. Returns the number
 * of runs that failed. */
static uint32_t
live_statuses(const live *lv, uint32_t n, double *ms)
{
	double t0 = now_ms_f(), every = lv->b->seconds * 1000 / n;

	const char *argv[11] = { lv->cli, "status", "--control", lv->ctl,
		"--timeout-ms", "10000", NULL };
	uint32_t failed = 0;

	live_key_args(lv, argv + 6);
	for (uint32_t i = 0; i < n; i++) {
		double a;
		pid_t pid;
		int st = 1;

		while (now_ms_f() < t0 + every * i)
			usleep(1000);
		a = now_ms_f();
		pid = live_spawn(argv, "/dev/null");

		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			failed++;
		ms[i] = now_ms_f() - a;
	}
	return failed;
}

/* One phase: `bellows status` lv->statuses times, the client resuming
 * or not; prints its line. Returns 0, or -1 when /metrics fails. */
static int
live_phase_run(live *lv, int ph, bool resumes)
{
	static double ms[MAX_STATUS];
	live_phase *p = &lv->phases[ph];
	live_count sum = { 0 };
	live_hist a, z;
	uint32_t failed, n = lv->statuses;
	double t = now_ms_f(), wall;

	if (live_scrape(lv, &a) != 0)
		return -1;
	atomic_store(&lv->phase, ph);
	atomic_store(&lv->resuming, resumes);
	failed = live_statuses(lv, n, ms);
	atomic_store(&lv->resuming, false);
	atomic_store(&lv->phase, -1);
	wall = (now_ms_f() - t) / 1000;
	usleep(100 * 1000); /* the thread leaves the phase's record */
	if (live_scrape(lv, &z) != 0)
		return -1;
	qsort(ms, n, sizeof(*ms), cmp_double);
	qsort(p->rtt, p->n_rtt, sizeof(*p->rtt), cmp_double);
	for (uint32_t i = 0; i < lv->n_clients; i++) {
		const live_client *c = &lv->clients[i];
		const live_count *k = &c->counts[ph];

		sum.hellos += k->hellos;
		sum.started += k->started;
		sum.welcomed += k->welcomed;
		sum.refused += k->refused;
		sum.auth_failed += k->auth_failed;
		if (lv->secure)
			printf(
			    "resume: live %s: client %s (%s): hellos=%" PRIu64
			    " started=%" PRIu64 " welcomed=%" PRIu64
			    " refused=%" PRIu64 " auth_failed=%" PRIu64 "\n",
			    resumes ? "resuming" : "quiet", c->name, c->job,
			    k->hellos, k->started, k->welcomed, k->refused,
			    k->auth_failed);
	}
	printf("resume: live %s: status_p50_ms=%.1f status_p99_ms=%.1f "
	       "status_max_ms=%.1f failed=%u decisions=%" PRIu64
	       " decision_p50_ms<=%g decision_p99_ms<=%g rtt_p50_ms=%.2f "
	       "rtt_p99_ms=%.2f rtt_max_ms=%.1f hellos=%" PRIu64
	       " started=%" PRIu64 " welcomed=%" PRIu64 " refused=%" PRIu64
	       " seconds=%.1f",
	    resumes ? "resuming" : "quiet", ms[n / 2], ms[(size_t)(n * 0.99)],
	    ms[n - 1], failed, z.count - a.count, live_quantile(&a, &z, 0.5),
	    live_quantile(&a, &z, 0.99), p->n_rtt ? p->rtt[p->n_rtt / 2] : 0.0,
	    p->n_rtt ? p->rtt[(size_t)(p->n_rtt * 0.99)] : 0.0,
	    p->n_rtt ? p->rtt[p->n_rtt - 1] : 0.0, sum.hellos, sum.started,
	    sum.welcomed, sum.refused, wall);
	if (lv->secure)
		printf(" clients=%u auth_failed=%" PRIu64, lv->n_clients,
		    sum.auth_failed);
	printf("\n");
	return 0;
}

/* Starts bellowsd on b's history and lv->yaml, /metrics on a free
 * port, and waits (up to WAIT_MS) until it answers STATUS (with secure,
 * asked as the ops client). Returns 0, or -1 said. */
static int
live_daemon(live *lv)
{
	const char *argv[] = { lv->bellowsd, "--policy", lv->yaml, "--control",
		lv->ctl, "--publish", lv->pub, "--db", lv->b->db,
		"--metrics-listen", lv->port, "--log-level", "info", NULL };
	const char *st[11] = { lv->cli, "status", "--control", lv->ctl,
		"--timeout-ms", "500", NULL };
	double end = now_ms_f() + WAIT_MS;

	live_key_args(lv, st + 6);
	live_stop_on_signal();
	if (live_free_port(lv->port, sizeof(lv->port)) != 0 ||
	    (lv->daemon = live_spawn(argv, lv->log)) < 0) {
		lv->daemon = 0;
		return -1;
	}
	live_children[0] = lv->daemon;
	while (now_ms_f() < end) {
		pid_t pid = live_spawn(st, "/dev/null");
		int s = 1;

		if (pid > 0 && waitpid(pid, &s, 0) == pid && WIFEXITED(s) &&
		    WEXITSTATUS(s) == 0)
			return 0;
		if (waitpid(lv->daemon, &s, WNOHANG) == lv->daemon) {
			lv->daemon = 0;
			return -1;
		}
		usleep(100 * 1000);
	}
	return -1;
}

/* Starts the third job: 2 real agents (`bellows sim`, with secure as
 * the ops client) of the history's layers, closing a window every 5
 * steps of 10 ms, for far longer than the run. Returns 0 or -1. */
static int
live_sim(live *lv)
{
	char layers[16];
	const char *argv[26] = { lv->cli, "sim", "--control", lv->ctl,
		"--publish", lv->pub, "--quiet", "--job", "third", "--ranks",
		"2", "--layers", layers, "--windows", "1000000",
		"--steps-per-window", "5", "--step-ms", "10",
		"--decision-timeout-ms", "60000", NULL };

	live_key_args(lv, argv + 21);
	snprintf(layers, sizeof(layers), "%u", lv->b->layers);
	lv->sim = live_spawn(argv, lv->log);
	if (lv->sim < 0) {
		lv->sim = 0;
		return -1;
	}
	live_children[1] = lv->sim;
	return 0;
}

/* bellowsd's configuration with --secure: the bench's, with
 * daemon.security and /metrics' token, and each resumed job allowed to
 * its own client and to `ops` (`bellows status`, the STATUS round
 * trips, the third job's ranks and /metrics, who must read every job).
 * Filled with the key directory, the clients directory and the token
 * file. */
static const char secure_config_fmt[] = "daemon:\n"
					"  rank_timeout_ms: 3000\n"
					"  max_layers: 4096\n"
					"  security:\n"
					"    server_key: %s/server.key\n"
					"    clients: %s\n"
					"  metrics:\n"
					"    token_file: %s\n"
					"    client: ops\n"
					"jobs:\n"
					"  - match: \"job0\"\n"
					"    clients: [alice, ops]\n"
					"    policies:\n"
					"      - type: accordion\n"
					"  - match: \"job1\"\n"
					"    clients: [bob, ops]\n"
					"    policies:\n"
					"      - type: accordion\n"
					"  - match: \"*\"\n"
					"    clients: [ops]\n"
					"    policies:\n"
					"      - type: accordion\n";

/* With --secure: CURVE keys made by `bellows keygen` in dir/keys
 * (server, alice, bob, ops), the clients' .pub linked into dir/clients,
 * a bearer token in dir/token (0600), and dir/secure.yaml; the keys the
 * bench's own sockets need loaded into lv. Returns 0, or -1 said. */
static int
live_secure(live *lv)
{
	static const char *const names[] = { "server", "alice", "bob", "ops" };
	const char *dir = lv->b->dir;
	char keys[272], clients[272], token[272], a[400], z[400];
	char err[512] = "";
	unsigned char raw[24];
	FILE *f = NULL;
	int fd;

	snprintf(keys, sizeof(keys), "%s/keys", dir);
	snprintf(clients, sizeof(clients), "%s/clients", dir);
	snprintf(token, sizeof(token), "%s/token", dir);
	if (mkdir(keys, 0700) != 0 || mkdir(clients, 0700) != 0) {
		snprintf(err, sizeof(err),
		    "cannot make keys/ and clients/ in %s", dir);
		goto fail;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *argv[] = { lv->cli, "keygen", "--out", keys,
			"--name", names[i], NULL };
		pid_t pid = live_spawn(argv, lv->log);
		int st = 1;

		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			snprintf(err, sizeof(err),
			    "bellows keygen --name %s failed", names[i]);
			goto fail;
		}
		snprintf(a, sizeof(a), "%s/%s.pub", keys, names[i]);
		snprintf(z, sizeof(z), "%s/%s.pub", clients, names[i]);
		if (i > 0 && link(a, z) != 0) {
			snprintf(err, sizeof(err), "cannot link %s", z);
			goto fail;
		}
	}
	snprintf(lv->server_pub, sizeof(lv->server_pub), "%s/server.pub", keys);
	snprintf(lv->ops_key, sizeof(lv->ops_key), "%s/ops.key", keys);
	snprintf(a, sizeof(a), "%s/alice.key", keys);
	snprintf(z, sizeof(z), "%s/bob.key", keys);
	if (com_cert_load(lv->server_pub, &lv->server, err, sizeof(err)) != 0 ||
	    com_cert_load(lv->ops_key, &lv->ops, err, sizeof(err)) != 0 ||
	    com_cert_load(a, &lv->clients[0].key, err, sizeof(err)) != 0 ||
	    com_cert_load(z, &lv->clients[1].key, err, sizeof(err)) != 0)
		goto fail;
	/* The token: 24 random bytes as hex, in a file only we read. */
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, raw, sizeof(raw)) != (ssize_t)sizeof(raw)) {
		if (fd >= 0)
			close(fd);
		snprintf(err, sizeof(err), "cannot read /dev/urandom");
		goto fail;
	}
	close(fd);
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(lv->token + 2 * i, 3, "%02x", raw[i]);
	fd = open(token, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL ||
	    fprintf(f, "%s\n", lv->token) < 0 || fclose(f) != 0) {
		if (f == NULL && fd >= 0)
			close(fd);
		snprintf(err, sizeof(err), "cannot write %s", token);
		goto fail;
	}
	snprintf(lv->secure_yaml, sizeof(lv->secure_yaml), "%s/secure.yaml",
	    dir);
	f = fopen(lv->secure_yaml, "w");
	if (f == NULL ||
	    fprintf(f, secure_config_fmt, keys, clients, token) < 0 ||
	    fclose(f) != 0) {
		snprintf(err, sizeof(err), "cannot write %s", lv->secure_yaml);
		goto fail;
	}
	lv->yaml = lv->secure_yaml;
	return 0;
fail:
	fprintf(stderr, "resume: --secure: %s\n", err);
	return -1;
}

/* The live run: bellowsd on the history, the third job's ranks, then a
 * phase without resumes and one with. Returns 0, or -1 said. */
static int
live_run(bench *b)
{
	static live lv;
	live_hist h = { 0 };
	uint64_t auth_failed = 0;
	double end;
	int rc = -1;

	lv.b = b;
	lv.bellowsd = b->bellowsd;
	lv.statuses = b->statuses;
	lv.yaml = b->yaml;
	lv.secure = b->secure;
	snprintf(lv.ctl, sizeof(lv.ctl), "ipc://%s/control", b->dir);
	snprintf(lv.pub, sizeof(lv.pub), "ipc://%s/publish", b->dir);
	snprintf(lv.log, sizeof(lv.log), "%s/bellowsd.log", b->dir);
	atomic_init(&lv.phase, -1);
	atomic_init(&lv.resuming, false);
	atomic_init(&lv.stop, false);
	lv.cli = b->cli;
	/* Without security one client resumes both jobs (every local
	 * client is one to bellowsd's limits); with it, two clients of
	 * their own keys, one job each. */
	lv.n_clients = lv.secure ? LIVE_CLIENTS : 1;
	lv.clients[0] = (live_client){ .lv = &lv,
		.name = lv.secure ? "alice" : "live",
		.job = lv.secure ? "job0" : NULL,
		.curve = lv.secure,
		.ping = true };
	lv.clients[1] = (live_client){ .lv = &lv,
		.name = "bob",
		.job = "job1",
		.curve = true };
	if (lv.secure && live_secure(&lv) != 0)
		goto out;
	if (live_daemon(&lv) != 0) {
		fprintf(stderr, "resume: bellowsd did not start\n");
		goto out;
	}
	if (live_sim(&lv) != 0 || (lv.zctx = zmq_ctx_new()) == NULL) {
		fprintf(stderr,
		    "resume: cannot start the third job's ranks "
		    "or the client\n");
		goto out;
	}
	for (uint32_t i = 0; i < lv.n_clients; i++) {
		if (pthread_create(&lv.clients[i].thread, NULL, live_client_run,
			&lv.clients[i]) != 0) {
			fprintf(stderr, "resume: cannot start the client\n");
			goto out;
		}
		lv.clients[i].started = true;
	}
	/* The third job's decisions flowing first. */
	end = now_ms_f() + 60000;
	while (now_ms_f() < end && (live_scrape(&lv, &h) != 0 || h.count < 20))
		usleep(100 * 1000);
	if (h.count < 20) {
		fprintf(stderr, "resume: the third job has no decisions\n");
		goto out;
	}
	if (live_phase_run(&lv, 0, false) != 0 ||
	    live_phase_run(&lv, 1, true) != 0) {
		fprintf(stderr, "resume: bellowsd's /metrics did not answer\n");
		goto out;
	}
	rc = 0;
out:
	atomic_store(&lv.stop, true);
	for (uint32_t i = 0; i < lv.n_clients; i++) {
		live_client *c = &lv.clients[i];

		if (c->started)
			pthread_join(c->thread, NULL);
		if (c->why[0] != '\0' && lv.secure)
			printf("resume: the last refusal of %s: %s\n", c->name,
			    c->why);
		else if (c->why[0] != '\0')
			printf("resume: the last refusal: %s\n", c->why);
		if (c->auth_failed > 0)
			fprintf(stderr,
			    "resume: %" PRIu64 " auth failure(s) of client "
			    "%s, the last: %s\n",
			    c->auth_failed, c->name, c->auth_why);
		auth_failed += c->auth_failed;
	}
	if (auth_failed > 0)
		rc = -1; /* a refusal by the limits is expected, not these */
	live_stop_process(&lv.sim);
	live_stop_process(&lv.daemon);
	if (lv.zctx != NULL)
		zmq_ctx_term(lv.zctx);
	if (rc != 0) {
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", lv.log);
		if (system(cmd) != 0)
			fprintf(stderr, "resume: no log in %s\n", lv.log);
	}
	return rc;
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
		{ "live", no_argument, NULL, 'L' },
		{ "bellowsd", required_argument, NULL, 'B' },
		{ "bellows", required_argument, NULL, 'C' },
		{ "statuses", required_argument, NULL, 'n' },
		{ "secure", no_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	b->layers = 100;
	b->windows = 20000;
	b->rate = 10;
	b->seconds = 20;
	b->bellowsd = BENCH_BELLOWSD;
	b->cli = BENCH_BELLOWS;
	b->statuses = 200;
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
		else if (c == 'L')
			b->live = true;
		else if (c == 'B')
			b->bellowsd = optarg;
		else if (c == 'C')
			b->cli = optarg;
		else if (c == 'n')
			b->statuses = (uint32_t)strtoul(optarg, NULL, 10);
		else if (c == 'S')
			b->secure = true;
		else
			return -1;
	}
	if (b->layers == 0 || b->windows < DECIDE_EVERY || b->rate <= 0 ||
	    b->seconds <= 0 || b->statuses == 0 || b->statuses > MAX_STATUS ||
	    (b->secure && !b->live)) {
		fprintf(stderr,
		    "usage: resume [--layers L] [--windows W>=%d] "
		    "[--rate R] [--seconds S] [--db FILE]\n"
		    "              [--live [--secure] [--statuses N] "
		    "[--bellowsd PATH] [--bellows PATH]]\n",
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
	setvbuf(stdout, NULL, _IOLBF, 0); /* a long run's progress shown */
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
	if (b.live) {
		/* bellowsd opens the history itself. */
		ctl_jobs_destroy(&b.jobs);
		ctl_store_close(&b.store, 5000);
		rc = live_run(&b) == 0 ? 0 : 1;
		goto out;
	}
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
