/* ingest - how fast bellowsd ingests reports and answers windows.
 *
 * Starts a real bellowsd (fixed level 2, or --policy FILE's jobs
 * section; generous timeouts) on ipc:// endpoints (--tcp: on
 * tcp://127.0.0.1) and plays R simulated ranks x L layers against it
 * without agents: a few DEALER sockets, each holding many ranks (a rank
 * belongs to the routing id that said Hello), send pre-encoded Reports
 * as fast as ZeroMQ takes them, and a SUB receives the decisions. The
 * ranks are spread over N jobs (--jobs, default 1) named ingest-0 ..
 * ingest-(N-1) (--job-prefix): rank g is job g % N's rank g / N, each
 * job with its own windows and decisions, and a window counts as
 * answered once every job's decision for it came. bellowsd answers
 * every window it closes whatever its policies decide, so every wait
 * has a time limit (WAIT_MS) and a missing answer is an error. Three
 * phases per rank count:
 *
 *   burst      windows one at a time: all R reports of window w at once,
 *              then wait for the decision answering it (window w + 1);
 *              latency = last report about to be handed to ZeroMQ ->
 *              decision received, so it includes draining the window's
 *              backlog;
 *   last       the same, but the first R - 1 reports are sent and seen
 *              ingested (STATUS) before the last one is timed: the
 *              latency of closing a window, policies and publication;
 *   pipelined  up to PIPE_DEPTH windows in flight, for throughput:
 *              layer statistics per second = reports x L / (first send ->
 *              last decision received), and bellowsd's CPU time per
 *              report from /proc. It begins once every job has closed
 *              (with the store: committed) `hist` windows: the 2 x K of
 *              the latency phases, or --history H when more, the windows
 *              between played untimed.
 *
 * Each rank count runs twice by default: with bellowsd's history store
 * on (--db in the private directory; a decision is then published only
 * after its commit) and off (--no-db), so the store's cost shows as the
 * difference. --curve both runs each of those with and without
 * daemon.security (CURVE on both endpoints, every socket of the bench a
 * trusted client), so the cost of encryption shows the same way.
 *
 * At the end STATUS must show every report ingested and nothing dropped
 * (no message, and with the store no metric row either). The last lines
 * read
 *   ingest: layer_stats/s=X p50_ms=Y p99_ms=Z (ranks=R, jobs=N,
 *       store on, policy P, after H windows)
 * for the largest R, with the "last" latencies.
 */
#include "common/cert.h"
#include "common/clock.h"
#include "common/wire.h"
#include "common/msg.h"
#include "benchwire.h"

#include <bellows/error.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#ifndef BENCH_BELLOWSD
#define BENCH_BELLOWSD "bellowsd"
#endif

#define BENCH_STEPS     10    /* steps per window, for the step fields */
#define PIPE_DEPTH      4     /* windows in flight (bellowsd holds 8) */
#define MAX_SOCKETS     64    /* DEALERs sharing the ranks */
#define MAX_RANK_COUNTS 8     /* entries in --ranks */
#define MAX_JOBS        4096  /* --jobs */
#define JOB_NAME_MAX    64    /* a job's name, with its NUL */
#define JOB_PREFIX_MAX  40    /* --job-prefix, so that PREFIX-N fits */
#define WAIT_MS         20000 /* longest wait for any answer */

typedef struct bench_opts {
	const char *bellowsd;            /* daemon binary */
	uint32_t ranks[MAX_RANK_COUNTS]; /* rank counts to run */
	uint32_t n_ranks;                /* entries in ranks */
	uint32_t layers;                 /* layers per report */
	uint32_t windows;       /* windows of the burst and last phases */
	uint32_t pipe_reports;  /* reports in the pipelined phase */
	uint32_t sockets;       /* DEALERs (capped by the rank count) */
	const char *perf_out;   /* perf record output, NULL = none */
	bool store_on;          /* run with the history store */
	bool store_off;         /* run without it */
	bool curve_on;          /* run with daemon.security (CURVE) */
	bool curve_off;         /* run without it */
	uint32_t jobs;          /* jobs the ranks of a run are spread over */
	const char *job_prefix; /* jobs are named PREFIX-0 .. PREFIX-(N-1) */
	const char *policy;     /* --policy FILE, NULL: fixed level 2 */
	char *policy_text;      /* its `jobs:` section, read once, or NULL */
	bool tcp;               /* endpoints on tcp://127.0.0.1, not ipc:// */
	uint32_t history;       /* windows closed before the pipelined phase,
				 * at least (more when the latency phases
				 * closed more) */
} bench_opts;

typedef struct bench_run {
	const bench_opts *o;         /* options */
	uint32_t world;              /* ranks in this run, all jobs */
	uint32_t nsock;              /* DEALERs in use */
	uint32_t n_jobs;             /* jobs; rank g is job g % n_jobs's */
	char (*names)[JOB_NAME_MAX]; /* each job's name, n_jobs */
	char dir[64];                /* private temp directory */
	char ctl[128];               /* control endpoint */
	char pub[128];               /* publish endpoint */
	char cfg[128];               /* YAML file */
	char log[128];               /* bellowsd's stderr */
	bool store;                  /* bellowsd keeps history (--db) */
	bool curve;                  /* daemon.security: CURVE everywhere */
	com_cert server;             /* bellowsd's keys, with curve */
	com_cert client;             /* the bench's keys, with curve */
	char db[128];                /* its database */
	pid_t daemon;                /* bellowsd's pid */
	void *zctx;                  /* ZeroMQ context */
	void *status;                /* DEALER for STATUS */
	void *sub;                   /* decisions */
	void *dealers[MAX_SOCKETS];  /* ranks' DEALERs */
	com_limits limits;           /* decoding limits */
	uint64_t *answered;          /* per job: highest decision window seen */
	uint64_t answered_ns;        /* when any job's last rose */
	uint64_t changed;      /* decisions a policy changed something in */
	uint64_t reports_sent; /* reports handed to ZeroMQ */
	uint64_t bytes_sent;   /* their bytes */
} bench_run;

typedef struct bench_result {
	uint32_t world;         /* ranks, all jobs */
	uint32_t jobs;          /* jobs they were spread over */
	uint64_t history;       /* windows every job had closed (with the
				 * store: committed) when the pipelined
				 * phase began */
	bool store;             /* with the history store */
	bool curve;             /* with CURVE */
	double burst_p50;       /* ms */
	double burst_p99;       /* ms */
	double last_p50;        /* ms */
	double last_p99;        /* ms */
	double stats_per_s;     /* layer statistics per second */
	double reports_per_s;   /* reports per second */
	double mb_per_s;        /* report bytes per second */
	double loop_cpu;        /* event loop CPU / wall time, pipelined */
	double io_cpu;          /* ZeroMQ threads' CPU / wall time */
	double us_per_report;   /* event loop CPU per report, pipelined */
	uint64_t reports;       /* STATUS: reports ingested */
	uint64_t layer_stats;   /* STATUS: layer statistics */
	uint64_t dropped;       /* STATUS: messages dropped */
	uint64_t decisions;     /* STATUS: decisions published */
	uint64_t store_dropped; /* STATUS: metric rows not written */
	bool store_degraded;    /* STATUS: the store was degraded */
	char policy[128];       /* STATUS: the policies job 0 runs */
	uint64_t changed;       /* decisions received that a policy changed */
	bool ok;                /* counters as expected */
} bench_result;

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ingest [--bellowsd PATH] [--ranks N,N,...] [--layers L]\n"
	    "              [--windows K] [--pipe-reports N] [--sockets S]\n"
	    "              [--perf-record FILE] [--store on|off|both]\n"
	    "              [--curve on|off|both] [--jobs N] [--job-prefix P]\n"
	    "              [--policy FILE] [--tcp] [--history H]\n"
	    "\n"
	    "  --bellowsd PATH      daemon to start (default %s)\n"
	    "  --ranks LIST         rank counts (default 10,100,1000)\n"
	    "  --layers L           layers per report (default 100)\n"
	    "  --windows K          windows of the latency phases (default "
	    "50)\n"
	    "  --pipe-reports N     reports of the throughput phase (default "
	    "30000)\n"
	    "  --sockets S          DEALER sockets (default 8)\n"
	    "  --perf-record FILE   record bellowsd with perf during the\n"
	    "                       throughput phase of the largest run\n"
	    "  --store MODE         on (--db), off (--no-db) or both\n"
	    "                       (default both)\n"
	    "  --curve MODE         with daemon.security (on), without\n"
	    "                       (off, the default) or both\n"
	    "  --jobs N             spread each run's ranks over N jobs\n"
	    "                       (default 1; at most the smallest rank\n"
	    "                       count); rank g is job g %% N's\n"
	    "  --job-prefix P       the jobs are named P-0 .. P-(N-1)\n"
	    "                       (default ingest)\n"
	    "  --policy FILE        bellowsd runs FILE's `jobs:` (its\n"
	    "                       entries must match those names; no\n"
	    "                       `daemon:`) instead of fixed level 2\n"
	    "  --tcp                endpoints on tcp://127.0.0.1:PORT (free\n"
	    "                       ports) instead of ipc://\n"
	    "  --history H          measure the pipelined rate once every\n"
	    "                       job has closed H windows (default 0:\n"
	    "                       after the latency phases' 2 x K);\n"
	    "                       the windows short of H are played\n"
	    "                       untimed first; the table's `hist`\n"
	    "                       says how many there were\n",
	    BENCH_BELLOWSD);
}

static uint64_t
now_ns(void)
{
	return com_clock_ns();
}

static void
sleep_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
percentile(double *v, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	i = (size_t)ceil(p * (double)n) - 1;
	return v[i < n ? i : n - 1];
}

/* ---- the daemon -------------------------------------------------------- */

/* Writes bellowsd's configuration for a run of n_jobs jobs to `path`:
 * `jobs` (a policy file's text, whose entries must match the bench's job
 * names) or, when NULL, one entry of every job running fixed level 2;
 * then the bench's daemon section. The policy file comes first so that
 * the line numbers of bellowsd's complaints about it are its own.
 * Returns 0, or -1 with errno set. */
static int
write_config(const char *path, bool curve, uint32_t n_jobs, const char *jobs)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	fputs(jobs != NULL ? jobs
			   : "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: fixed\n"
			     "        params:\n"
			     "          level: 2\n",
	    f);
	if (jobs != NULL && jobs[0] != '\0' && jobs[strlen(jobs) - 1] != '\n')
		fputc('\n', f);
	if (curve)
		fprintf(f,
		    "daemon:\n"
		    "  security: {server_key: server.key, clients: clients}\n");
	/* An apply lag far beyond the run keeps every decision pending, so
	 * the seq_in_force the reports carry (1) is always the one bellowsd
	 * expects and no repair is ever issued: the run measures ingestion,
	 * not the divergence path. */
	/* Each DEALER here holds many ranks, whose Welcomes arrive in one
	 * burst; an agent holds one. The send queue per connection is sized
	 * for the largest reply the limits allow (8 at the default
	 * peer_queue_mb), so the bench asks for the most it may have. */
	fprintf(f,
	    "%s"
	    "  peer_queue_mb: 4096\n"
	    "  apply_lag: 1000000\n"
	    "  window_timeout_ms: 600000\n"
	    "  rank_timeout_ms: 600000\n"
	    "  heartbeat_ms: 60000\n"
	    "  max_jobs: %u\n",
	    curve ? "" : "daemon:\n", n_jobs > 256 ? n_jobs : 256);
	return fclose(f) == 0 ? 0 : -1;
}

static pid_t
spawn(const char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	return pid;
}

static void
stop_process(pid_t pid, int sig)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, sig);
	waitpid(pid, &status, 0);
}

/* CPU time of a process so far, in seconds, from the schedulers' per-
 * thread nanosecond counters: *ret_main for the main thread (bellowsd's
 * event loop), *ret_other for the rest (ZeroMQ's I/O threads). */
static int
process_cpu(pid_t pid, double *ret_main, double *ret_other)
{
	char path[300];
	struct dirent *e;
	double main_s = 0, other_s = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		unsigned long long ns = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat",
		    (int)pid, e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fscanf(f, "%llu", &ns) != 1)
			ns = 0;
		fclose(f);
		if (atoi(e->d_name) == (int)pid)
			main_s += (double)ns / 1e9;
		else
			other_s += (double)ns / 1e9;
	}
	closedir(d);
	*ret_main = main_s;
	*ret_other = other_s;
	return 0;
}

/* ---- messages ---------------------------------------------------------- */

/* Receives one Envelope from sock within timeout_ms. Returns 0, or -1. */
static int
recv_msg(bench_run *b, void *sock, int timeout_ms, com_msg *ret)
{
	zmq_pollitem_t item = { sock, 0, ZMQ_POLLIN, 0 };
	zmq_msg_t frame;
	int r;

	if (zmq_poll(&item, 1, timeout_ms) <= 0)
		return -1;
	zmq_msg_init(&frame);
	if (zmq_msg_recv(&frame, sock, 0) < 0) {
		zmq_msg_close(&frame);
		return -1;
	}
	r = com_wire_decode(zmq_msg_data(&frame), zmq_msg_size(&frame),
	    &b->limits, ret);
	zmq_msg_close(&frame);
	if (r != 0) {
		com_msg_fini(ret);
		return -1;
	}
	return 0;
}

/* True when `m` is the STATUS reply to a request of `job`: one naming
 * it, or for "-" (no such job) one of no job. A reply to an earlier
 * request that timed out is not: bellowsd answers every request the
 * DEALER queued while it started, so more replies than the first may
 * come. */
static bool
status_answers(const com_msg *m, const char *job)
{
	const com_status_reply *st = &m->u.status_reply;

	if (m->type != COM_MSG_STATUS_REPLY)
		return false;
	if (strcmp(job, "-") == 0)
		return st->n_jobs == 0;
	return st->n_jobs > 0 && st->jobs[0].job != NULL &&
	    strcmp(st->jobs[0].job, job) == 0;
}

/* Asks STATUS of `job` for the daemon's counters (*ret, its pointers
 * NULL) and, with ret_policy, the policies bellowsd configured for the
 * job ("" when no entry matches it). Replies left from earlier requests
 * are dropped. Returns 0, or -1 with no answer within timeout_ms (for a
 * job bellowsd does not know, always). */
static int
status_of(bench_run *b, const char *job, int timeout_ms, com_status_reply *ret,
    char *ret_policy, size_t policy_len)
{
	uint64_t deadline = com_clock_ms() + (uint64_t)timeout_ms;
	com_msg req, reply;

	while (recv_msg(b, b->status, 0, &reply) == 0)
		com_msg_fini(&reply);
	com_msg_init(&req, COM_MSG_STATUS_REQUEST);
	req.u.status_request.job = (char *)job;
	if (bench_send_msg(b->status, &req) != 0)
		return -1;
	for (;;) {
		uint64_t now = com_clock_ms();

		if (now >= deadline ||
		    recv_msg(b, b->status, (int)(deadline - now), &reply) != 0)
			return -1;
		if (status_answers(&reply, job))
			break;
		com_msg_fini(&reply);
	}
	if (ret_policy != NULL)
		snprintf(ret_policy, policy_len, "%s",
		    reply.u.status_reply.n_jobs > 0 &&
			    reply.u.status_reply.jobs[0].policy != NULL
			? reply.u.status_reply.jobs[0].policy
			: "");
	*ret = reply.u.status_reply;
	ret->jobs = NULL;
	ret->n_jobs = 0;
	ret->peers = NULL;
	ret->n_peers = 0;
	ret->events = NULL;
	ret->n_events = 0;
	ret->store_error = NULL;
	ret->store_path = NULL;
	com_msg_fini(&reply);
	return 0;
}

/* Asks STATUS (of no job, so the reply stays small) for the counters. */
static int
status(bench_run *b, int timeout_ms, com_status_reply *ret)
{
	return status_of(b, "-", timeout_ms, ret, NULL, 0); /* no such job */
}

/* Ranks of job j: rank g of the run is job g % n_jobs's rank
 * g / n_jobs. */
static uint32_t
job_world(const bench_run *b, uint32_t j)
{
	return b->world / b->n_jobs + (j < b->world % b->n_jobs ? 1 : 0);
}

/* The index of the job called `name` (PREFIX-j), or -1 for a name the
 * bench did not give. */
static int
job_index(const bench_run *b, const char *name)
{
	size_t n = strlen(b->o->job_prefix);
	unsigned long j;
	char *end;

	if (name == NULL || strncmp(name, b->o->job_prefix, n) != 0 ||
	    name[n] != '-' || name[n + 1] < '0' || name[n + 1] > '9')
		return -1;
	j = strtoul(name + n + 1, &end, 10);
	return *end == '\0' && j < b->n_jobs ? (int)j : -1;
}

/* Reads the decisions that arrived; waits up to timeout_ms for the
 * first. Tracks each job's highest window answered, and when the last
 * of those rose. */
static void
read_decisions(bench_run *b, int timeout_ms)
{
	for (;;) {
		zmq_pollitem_t item = { b->sub, 0, ZMQ_POLLIN, 0 };
		zmq_msg_t topic, body;
		com_msg m;
		uint64_t t;

		if (zmq_poll(&item, 1, timeout_ms) <= 0)
			return;
		timeout_ms = 0;
		t = now_ns();
		zmq_msg_init(&topic);
		zmq_msg_init(&body);
		if (zmq_msg_recv(&topic, b->sub, 0) < 0 ||
		    !zmq_msg_more(&topic) ||
		    zmq_msg_recv(&body, b->sub, 0) < 0) {
			zmq_msg_close(&topic);
			zmq_msg_close(&body);
			continue;
		}
		if (com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body),
			&b->limits, &m) == 0 &&
		    m.type == COM_MSG_DECISION) {
			int j = job_index(b, m.u.decision.job);

			if (j >= 0 && m.u.decision.window > b->answered[j]) {
				b->answered[j] = m.u.decision.window;
				b->answered_ns = t;
			}
			if (m.u.decision.policy != NULL &&
			    m.u.decision.policy[0] != '\0')
				b->changed++;
		}
		com_msg_fini(&m);
		zmq_msg_close(&topic);
		zmq_msg_close(&body);
	}
}

/* Waits until every job's decision answering window w (window field
 * w + 1) was received; b->answered_ns is then when the last of them
 * came. Returns 0, or -1 (said on stderr) when a job has none within
 * WAIT_MS: bellowsd answers every window it closes, whatever its
 * policies decide, so a missing decision means a lost report or a
 * stalled daemon, never a quiet policy. */
static int
wait_answered(bench_run *b, uint64_t w)
{
	uint64_t deadline = com_clock_ms() + WAIT_MS;
	uint32_t j = 0;

	for (;;) {
		uint64_t now = com_clock_ms();

		while (j < b->n_jobs && b->answered[j] >= w + 1)
			j++;
		if (j == b->n_jobs)
			return 0;
		if (now >= deadline) {
			fprintf(stderr,
			    "ingest: no decision for job '%s' window %" PRIu64
			    " within %d ms (last answered %" PRIu64 ")\n",
			    b->names[j], w, WAIT_MS, b->answered[j]);
			return -1;
		}
		read_decisions(b, (int)(deadline - now));
	}
}

static void
layer_table(const bench_opts *o, com_layer_info *layers, char (*names)[24])
{
	for (uint32_t l = 0; l < o->layers; l++) {
		snprintf(names[l], sizeof(names[l]), "layer%u.weight", l);
		layers[l] = (com_layer_info){ .name = names[l],
			.numel = 64 * 64,
			.ndim = 2,
			.shape = { 64, 64 } };
	}
}

/* Encodes rank r's report of window w (r counts the ranks of all jobs;
 * the report is its job's rank r / n_jobs). */
static int
encode_report(const bench_run *b, com_layer_stats *ls, uint32_t r, uint64_t w,
    uint8_t **ret_buf, size_t *ret_len)
{
	com_msg m;
	com_report *rep = &m.u.report;
	double s = 1.0 + 0.001 * (double)r + 0.01 * (double)(w % 100);

	for (uint32_t l = 0; l < b->o->layers; l++) {
		ls[l] = (com_layer_stats){ .layer = l,
			.count = 64 * 64 * BENCH_STEPS,
			.nonzero = 64 * 64 * BENCH_STEPS - l,
			.sum_sq = 0.25 * s * (l + 1),
			.abs_sum = 31.5 * s,
			.max_abs = 0.0625 * s,
			.acc_norm = 1.5 * s / (l + 1),
			.momentum_abs_mean = 0.001 * s,
			.observed_steps = BENCH_STEPS };
	}
	com_msg_init(&m, COM_MSG_REPORT);
	rep->job = b->names[r % b->n_jobs];
	rep->rank = r / b->n_jobs;
	rep->window = w;
	rep->first_step = w * BENCH_STEPS;
	rep->last_step = w * BENCH_STEPS + BENCH_STEPS - 1;
	rep->n_layers = b->o->layers;
	rep->layers = ls;
	rep->timings = (com_timings){ .steps = BENCH_STEPS,
		.step_ms = 100.0 * BENCH_STEPS,
		.compute_ms = 70.0 * BENCH_STEPS,
		.comm_ms = 30.0 * BENCH_STEPS,
		.step_ms_max = 110.0,
		.bytes_sent = 4u * 100000 * BENCH_STEPS,
		.floats_sent = 100000u * BENCH_STEPS,
		.floats_raw = 1000000u * BENCH_STEPS };
	rep->lr = 0.1;
	rep->batch_size = 128;
	rep->epoch = w;
	rep->seq_in_force = 1;
	return com_wire_encode(&m, ret_buf, ret_len);
}

static int
send_report(bench_run *b, uint32_t r, const uint8_t *buf, size_t len)
{
	if (zmq_send(b->dealers[r % b->nsock], buf, len, 0) < 0) {
		fprintf(stderr, "ingest: send failed: %s\n",
		    zmq_strerror(zmq_errno()));
		return -1;
	}
	b->reports_sent++;
	b->bytes_sent += len;
	return 0;
}

/* ---- setup ------------------------------------------------------------- */

static void
print_log_tail(const char *log)
{
	char line[512];
	FILE *f = fopen(log, "r");

	if (f == NULL)
		return;
	fprintf(stderr, "---- %s ----\n", log);
	while (fgets(line, sizeof(line), f) != NULL)
		fputs(line, stderr);
	fclose(f);
}

/* With curve, makes `sock` a CURVE client with the bench's keys. */
static void
curve_client(const bench_run *b, void *sock)
{
	if (!b->curve)
		return;
	zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, b->server.public_key, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, b->client.public_key, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, b->client.secret_key, 40);
}

/* Names the run's jobs and makes their decision counters. Returns 0, or
 * -1 out of memory. */
static int
run_jobs(bench_run *b)
{
	b->n_jobs = b->o->jobs;
	b->names = calloc(b->n_jobs, sizeof(*b->names));
	b->answered = calloc(b->n_jobs, sizeof(*b->answered));
	if (b->names == NULL || b->answered == NULL)
		return -1;
	for (uint32_t j = 0; j < b->n_jobs; j++)
		snprintf(b->names[j], sizeof(b->names[j]), "%s-%u",
		    b->o->job_prefix, j);
	return 0;
}

/* A TCP port on 127.0.0.1 that was free a moment ago (the kernel's
 * choice for port 0), for bellowsd to bind; or -1. Another process may
 * take it before bellowsd does: the run then fails at the start, said. */
static int
free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* Makes the private directory, the endpoints' and files' names, the
 * keys (with curve) and bellowsd's configuration. Returns 0, or -1 said
 * on stderr. */
static int
run_files(bench_run *b)
{
	snprintf(b->dir, sizeof(b->dir), "/tmp/bellows-ingest.XXXXXX");
	if (mkdtemp(b->dir) == NULL) {
		perror("ingest: mkdtemp");
		return -1;
	}
	if (b->o->tcp) {
		int ctl = free_port(), pub = free_port();

		if (ctl < 0 || pub < 0 || ctl == pub) {
			fprintf(stderr,
			    "ingest: no free TCP port on 127.0.0.1\n");
			return -1;
		}
		snprintf(b->ctl, sizeof(b->ctl), "tcp://127.0.0.1:%d", ctl);
		snprintf(b->pub, sizeof(b->pub), "tcp://127.0.0.1:%d", pub);
	} else {
		snprintf(b->ctl, sizeof(b->ctl), "ipc://%s/control", b->dir);
		snprintf(b->pub, sizeof(b->pub), "ipc://%s/publish", b->dir);
	}
	snprintf(b->cfg, sizeof(b->cfg), "%s/bench.yaml", b->dir);
	snprintf(b->log, sizeof(b->log), "%s/bellowsd.log", b->dir);
	snprintf(b->db, sizeof(b->db), "%s/history.db", b->dir);
	if (b->curve) {
		char err[256], clients[160];

		snprintf(clients, sizeof(clients), "%s/clients", b->dir);
		if (mkdir(clients, 0700) != 0 ||
		    com_cert_generate(&b->server) != 0 ||
		    com_cert_generate(&b->client) != 0 ||
		    com_cert_save(&b->server, b->dir, "server", true, err,
			sizeof(err)) != 0 ||
		    com_cert_save(&b->client, clients, "bench", true, err,
			sizeof(err)) != 0) {
			fprintf(stderr, "ingest: cannot make keys\n");
			return -1;
		}
	}
	if (write_config(b->cfg, b->curve, b->n_jobs, b->o->policy_text) != 0) {
		perror("ingest: writing the configuration");
		return -1;
	}
	return 0;
}

/* Starts bellowsd on the run's files. Returns 0, or -1 said on stderr. */
static int
run_daemon(bench_run *b)
{
	const char *argv[14];

	argv[0] = b->o->bellowsd;
	argv[1] = "--policy";
	argv[2] = b->cfg;
	argv[3] = "--control";
	argv[4] = b->ctl;
	argv[5] = "--publish";
	argv[6] = b->pub;
	argv[7] = "--log-level";
	argv[8] = "warn";
	if (b->store) {
		argv[9] = "--db";
		argv[10] = b->db;
		argv[11] = NULL;
	} else {
		argv[9] = "--no-db";
		argv[10] = NULL;
	}
	/* Forked before this process has a ZeroMQ context. */
	b->daemon = spawn(argv, b->log);
	if (b->daemon < 0) {
		perror("ingest: fork");
		return -1;
	}
	return 0;
}

/* Starts bellowsd, waits for its STATUS answer and connects the bench's
 * sockets: the SUB subscribed to every job's decisions. Returns 0, or -1
 * said on stderr; run_close undoes a half-done open. */
static int
run_open(bench_run *b)
{
	com_status_reply st;
	uint64_t deadline;
	int zero = 0, hwm = 100000;

	if (run_jobs(b) != 0 || run_files(b) != 0 || run_daemon(b) != 0)
		return -1;
	com_limits_default(&b->limits);
	b->zctx = zmq_ctx_new();
	b->status = zmq_socket(b->zctx, ZMQ_DEALER);
	b->sub = zmq_socket(b->zctx, ZMQ_SUB);
	zmq_setsockopt(b->status, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(b->sub, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(b->sub, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	for (uint32_t j = 0; j < b->n_jobs; j++) {
		char topic[JOB_NAME_MAX + 2];
		int n = snprintf(topic, sizeof(topic), "d:%s", b->names[j]);

		/* With its NUL: exactly this job (bellowsd's topics end in
		 * one), which CURVE's per-job read rights also accept. */
		zmq_setsockopt(b->sub, ZMQ_SUBSCRIBE, topic, (size_t)n + 1);
	}
	curve_client(b, b->status);
	curve_client(b, b->sub);
	if (zmq_connect(b->status, b->ctl) != 0 ||
	    zmq_connect(b->sub, b->pub) != 0)
		return -1;
	deadline = com_clock_ms() + 5000;
	while (status(b, 200, &st) != 0) {
		if (com_clock_ms() >= deadline) {
			fprintf(stderr, "ingest: %s did not answer at %s\n",
			    b->o->bellowsd, b->ctl);
			if (b->o->policy != NULL)
				fprintf(stderr,
				    "ingest: its configuration is %s, line "
				    "for line, then the bench's daemon "
				    "section\n",
				    b->o->policy);
			print_log_tail(b->log);
			return -1;
		}
	}
	b->nsock = b->o->sockets < b->world ? b->o->sockets : b->world;
	for (uint32_t i = 0; i < b->nsock; i++) {
		char id[32];

		b->dealers[i] = zmq_socket(b->zctx, ZMQ_DEALER);
		snprintf(id, sizeof(id), "bench-%u", i);
		zmq_setsockopt(b->dealers[i], ZMQ_ROUTING_ID, id, strlen(id));
		zmq_setsockopt(b->dealers[i], ZMQ_LINGER, &zero, sizeof(zero));
		curve_client(b, b->dealers[i]);
		if (zmq_connect(b->dealers[i], b->ctl) != 0)
			return -1;
	}
	/* The SUB's subscriptions travel asynchronously: give them time to
	 * reach the PUB before the first decision is published. */
	sleep_ms(200);
	return 0;
}

static void
run_close(bench_run *b)
{
	char path[160];

	for (uint32_t i = 0; i < b->nsock; i++)
		zmq_close(b->dealers[i]);
	if (b->status != NULL)
		zmq_close(b->status);
	if (b->sub != NULL)
		zmq_close(b->sub);
	if (b->zctx != NULL)
		zmq_ctx_term(b->zctx);
	stop_process(b->daemon, SIGTERM);
	unlink(b->cfg);
	unlink(b->log);
	snprintf(path, sizeof(path), "%s/control", b->dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/publish", b->dir);
	unlink(path);
	if (b->curve) {
		static const char *const keys[] = { "server.key", "server.pub",
			"clients/bench.key", "clients/bench.pub" };

		for (size_t i = 0; i < 4; i++) {
			snprintf(path, sizeof(path), "%s/%s", b->dir, keys[i]);
			unlink(path);
		}
		snprintf(path, sizeof(path), "%s/clients", b->dir);
		rmdir(path);
	}
	free(b->names);
	free(b->answered);
	if (b->store) {
		static const char *const ext[] = { "", "-wal", "-shm" };

		for (size_t i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s%s", b->db, ext[i]);
			unlink(path);
		}
	}
	rmdir(b->dir);
}

/* Every rank says Hello; every one must be welcomed. */
static int
run_join(bench_run *b)
{
	com_layer_info *layers = calloc(b->o->layers, sizeof(*layers));
	char(*names)[24] = calloc(b->o->layers, sizeof(*names));
	uint32_t welcomed = 0, refused = 0;
	uint64_t deadline;
	int rc = -1;

	if (layers == NULL || names == NULL)
		goto out;
	layer_table(b->o, layers, names);
	for (uint32_t r = 0; r < b->world; r++) {
		com_msg m;

		com_msg_init(&m, COM_MSG_HELLO);
		m.u.hello.job = b->names[r % b->n_jobs];
		m.u.hello.rank = r / b->n_jobs;
		m.u.hello.world = job_world(b, r % b->n_jobs);
		m.u.hello.n_layers = b->o->layers;
		m.u.hello.layers = layers;
		m.u.hello.agent_version = (char *)"bench";
		m.u.hello.incarnation = r + 1;
		if (bench_send_msg(b->dealers[r % b->nsock], &m) != 0)
			goto out;
	}
	deadline = com_clock_ms() + WAIT_MS;
	while (welcomed + refused < b->world && com_clock_ms() < deadline) {
		zmq_pollitem_t items[MAX_SOCKETS];

		for (uint32_t i = 0; i < b->nsock; i++)
			items[i] = (zmq_pollitem_t){ b->dealers[i], 0,
				ZMQ_POLLIN, 0 };
		if (zmq_poll(items, (int)b->nsock, 100) <= 0)
			continue;
		for (uint32_t i = 0; i < b->nsock; i++) {
			com_msg m;

			if (!(items[i].revents & ZMQ_POLLIN) ||
			    recv_msg(b, b->dealers[i], 0, &m) != 0)
				continue;
			if (m.type == COM_MSG_WELCOME)
				welcomed++;
			else
				refused++;
			com_msg_fini(&m);
		}
	}
	if (welcomed != b->world)
		fprintf(stderr, "ingest: %u of %u ranks welcomed\n", welcomed,
		    b->world);
	else
		rc = 0;
out:
	free(layers);
	free(names);
	return rc;
}

/* Asks STATUS which policies each job runs: a job that matches no
 * entry of the configuration would run none, and the run would measure
 * bellowsd without them, so that is an error. Job 0's go to
 * res->policy. Returns 0, or -1 said on stderr. */
static int
run_policies(bench_run *b, bench_result *res)
{
	for (uint32_t j = 0; j < b->n_jobs; j++) {
		char policy[sizeof(res->policy)];
		com_status_reply st;

		if (status_of(b, b->names[j], WAIT_MS, &st, policy,
			sizeof(policy)) != 0) {
			fprintf(stderr, "ingest: no STATUS of job '%s'\n",
			    b->names[j]);
			return -1;
		}
		if (policy[0] == '\0') {
			fprintf(stderr,
			    "ingest: job '%s' matches no `match:` of %s: it "
			    "would run without policies (name the jobs with "
			    "--job-prefix)\n",
			    b->names[j],
			    b->o->policy != NULL ? b->o->policy
						 : "the configuration");
			return -1;
		}
		if (j == 0)
			memcpy(res->policy, policy, sizeof(policy));
	}
	return 0;
}

/* ---- phases ------------------------------------------------------------ */

/* Encodes the reports of window w for all ranks into bufs/lens. */
static int
encode_window(const bench_run *b, com_layer_stats *ls, uint64_t w,
    uint8_t **bufs, size_t *lens)
{
	for (uint32_t r = 0; r < b->world; r++) {
		if (encode_report(b, ls, r, w, &bufs[r], &lens[r]) != 0)
			return -1;
	}
	return 0;
}

static void
free_window(const bench_run *b, uint8_t **bufs)
{
	for (uint32_t r = 0; r < b->world; r++) {
		free(bufs[r]);
		bufs[r] = NULL;
	}
}

/* Waits until STATUS shows `expected` reports ingested. */
static int
wait_ingested(bench_run *b, uint64_t expected)
{
	uint64_t deadline = com_clock_ms() + WAIT_MS;
	com_status_reply st;

	while (com_clock_ms() < deadline) {
		if (status(b, 1000, &st) == 0 && st.reports >= expected)
			return 0;
		sleep_ms(1);
	}
	fprintf(stderr,
	    "ingest: bellowsd did not ingest %" PRIu64 " reports in time\n",
	    expected);
	return -1;
}

/* Windows [w0, w0 + n) one at a time. With `isolated`, the last report
 * of each window is sent only after the others were ingested. Latencies
 * in ms go to lat (n entries; window w0 is a warm-up and not counted when
 * n > 1). */
static int
phase_sequential(bench_run *b, uint64_t w0, uint32_t n, bool isolated,
    double *lat, size_t *ret_n)
{
	uint8_t **bufs = calloc(b->world, sizeof(*bufs));
	size_t *lens = calloc(b->world, sizeof(*lens));
	com_layer_stats *ls = calloc(b->o->layers, sizeof(*ls));
	size_t k = 0;
	int rc = -1;

	if (bufs == NULL || lens == NULL || ls == NULL)
		goto out;
	for (uint64_t w = w0; w < w0 + n; w++) {
		uint64_t sent;

		if (encode_window(b, ls, w, bufs, lens) != 0)
			goto out;
		for (uint32_t r = 0; r + 1 < b->world; r++) {
			if (send_report(b, r, bufs[r], lens[r]) != 0)
				goto out;
		}
		if (isolated && wait_ingested(b, b->reports_sent) != 0)
			goto out;
		/* Stamped before the send: on two cores this thread is often
		 * preempted right after handing the report over, by the very
		 * threads that answer it, and a stamp taken then would hide
		 * most of the latency. */
		sent = now_ns();
		if (send_report(b, b->world - 1, bufs[b->world - 1],
			lens[b->world - 1]) != 0)
			goto out;
		if (wait_answered(b, w) != 0)
			goto out;
		if (w > w0 || n == 1)
			lat[k++] = (double)(b->answered_ns - sent) / 1e6;
		free_window(b, bufs);
	}
	*ret_n = k;
	rc = 0;
out:
	if (bufs != NULL)
		free_window(b, bufs);
	free(bufs);
	free(lens);
	free(ls);
	return rc;
}

/* Windows [w0, w0 + n), untimed, up to PIPE_DEPTH in flight: history
 * for the pipelined phase to be measured after (--history). Each window
 * is encoded as it is sent, so n is bounded by time, not memory.
 * Returns 0 once every job's decision for the last came, or -1 said on
 * stderr. */
static int
phase_fill(bench_run *b, uint64_t w0, uint32_t n)
{
	uint8_t **bufs = calloc(b->world, sizeof(*bufs));
	size_t *lens = calloc(b->world, sizeof(*lens));
	com_layer_stats *ls = calloc(b->o->layers, sizeof(*ls));
	int rc = -1;

	if (bufs == NULL || lens == NULL || ls == NULL)
		goto out;
	for (uint64_t w = w0; w < w0 + n; w++) {
		if (w >= w0 + PIPE_DEPTH &&
		    wait_answered(b, w - PIPE_DEPTH) != 0)
			goto out;
		if (encode_window(b, ls, w, bufs, lens) != 0)
			goto out;
		for (uint32_t r = 0; r < b->world; r++) {
			if (send_report(b, r, bufs[r], lens[r]) != 0)
				goto out;
		}
		free_window(b, bufs);
		read_decisions(b, 0);
	}
	rc = n > 0 ? wait_answered(b, w0 + n - 1) : 0;
out:
	if (bufs != NULL)
		free_window(b, bufs);
	free(bufs);
	free(lens);
	free(ls);
	return rc;
}

static pid_t
perf_start(const bench_run *b)
{
	char pid[16];
	const char *argv[] = { "/usr/bin/perf", "record", "-g", "-o",
		b->o->perf_out, "-p", pid, NULL };

	snprintf(pid, sizeof(pid), "%d", (int)b->daemon);
	return spawn(argv, "/dev/null");
}

/* Windows [w0, w0 + n) with up to PIPE_DEPTH in flight. */
static int
phase_pipelined(bench_run *b, uint64_t w0, uint32_t n, bool perf,
    bench_result *res)
{
	size_t total = (size_t)b->world * n;
	uint8_t **bufs = calloc(total, sizeof(*bufs));
	size_t *lens = calloc(total, sizeof(*lens));
	com_layer_stats *ls = calloc(b->o->layers, sizeof(*ls));
	uint64_t t0, bytes0 = b->bytes_sent;
	double main0 = 0, other0 = 0, main1 = 0, other1 = 0;
	pid_t perf_pid = -1;
	int rc = -1;

	if (bufs == NULL || lens == NULL || ls == NULL)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		if (encode_window(b, ls, w0 + i, bufs + (size_t)i * b->world,
			lens + (size_t)i * b->world) != 0)
			goto out;
	}
	if (perf) {
		perf_pid = perf_start(b);
		sleep_ms(500); /* perf attaches */
	}
	process_cpu(b->daemon, &main0, &other0);
	t0 = now_ns();
	for (uint32_t i = 0; i < n; i++) {
		uint64_t w = w0 + i;

		if (w >= w0 + PIPE_DEPTH &&
		    wait_answered(b, w - PIPE_DEPTH) != 0)
			goto out;
		for (uint32_t r = 0; r < b->world; r++) {
			size_t at = (size_t)i * b->world + r;

			if (send_report(b, r, bufs[at], lens[at]) != 0)
				goto out;
		}
		read_decisions(b, 0);
	}
	if (wait_answered(b, w0 + n - 1) != 0)
		goto out;
	{
		double secs = (double)(b->answered_ns - t0) / 1e9;

		process_cpu(b->daemon, &main1, &other1);
		res->reports_per_s = (double)total / secs;
		res->stats_per_s = res->reports_per_s * b->o->layers;
		res->mb_per_s = (double)(b->bytes_sent - bytes0) / secs / 1e6;
		res->loop_cpu = (main1 - main0) / secs;
		res->io_cpu = (other1 - other0) / secs;
		res->us_per_report = (main1 - main0) * 1e6 / (double)total;
	}
	rc = 0;
out:
	if (perf_pid > 0)
		stop_process(perf_pid, SIGINT);
	for (size_t i = 0; bufs != NULL && i < total; i++)
		free(bufs[i]);
	free(bufs);
	free(lens);
	free(ls);
	return rc;
}

static int
run_one(const bench_opts *o, uint32_t world, bool store, bool curve, bool perf,
    bench_result *res)
{
	bench_run b = { .o = o, .world = world, .daemon = -1 };
	uint32_t pipe_windows = o->pipe_reports / world;
	double *lat = calloc(o->windows, sizeof(*lat));
	com_status_reply st;
	size_t n = 0;
	uint64_t w = 0;
	int rc = -1;

	if (pipe_windows < 2 * PIPE_DEPTH)
		pipe_windows = 2 * PIPE_DEPTH;
	memset(res, 0, sizeof(*res));
	res->world = world;
	res->store = store;
	res->curve = curve;
	res->jobs = o->jobs;
	b.store = store;
	b.curve = curve;
	if (lat == NULL || run_open(&b) != 0 || run_join(&b) != 0 ||
	    run_policies(&b, res) != 0)
		goto out;
	if (phase_sequential(&b, w, o->windows, false, lat, &n) != 0)
		goto out;
	res->burst_p50 = percentile(lat, n, 0.50);
	res->burst_p99 = percentile(lat, n, 0.99);
	w += o->windows;
	if (phase_sequential(&b, w, o->windows, true, lat, &n) != 0)
		goto out;
	res->last_p50 = percentile(lat, n, 0.50);
	res->last_p99 = percentile(lat, n, 0.99);
	w += o->windows;
	if (o->history > w && phase_fill(&b, w, o->history - w) != 0)
		goto out;
	w = o->history > w ? o->history : w;
	res->history = w;
	if (phase_pipelined(&b, w, pipe_windows, perf, res) != 0)
		goto out;
	if (wait_ingested(&b, b.reports_sent) != 0 ||
	    status(&b, WAIT_MS, &st) != 0)
		goto out;
	res->reports = st.reports;
	res->layer_stats = st.layer_stats;
	res->dropped = st.dropped;
	res->decisions = st.decisions;
	res->changed = b.changed;
	res->store_dropped = st.store_dropped;
	res->store_degraded = st.store_degraded;
	res->ok = st.reports == b.reports_sent &&
	    st.layer_stats == b.reports_sent * o->layers && st.dropped == 0 &&
	    st.store_dropped == 0 && !st.store_degraded;
	if (!res->ok)
		fprintf(stderr,
		    "ingest: ranks=%u: sent %" PRIu64 " reports, bellowsd "
		    "ingested %" PRIu64 " (%" PRIu64
		    " layer stats), dropped %" PRIu64 ", store dropped %" PRIu64
		    "%s\n",
		    world, b.reports_sent, st.reports, st.layer_stats,
		    st.dropped, st.store_dropped,
		    st.store_degraded ? ", store degraded" : "");
	rc = 0;
out:
	if (rc != 0)
		print_log_tail(b.log);
	run_close(&b);
	free(lat);
	return rc;
}

static int
parse_ranks(const char *text, bench_opts *o)
{
	char *copy = strdup(text), *save = NULL, *tok;

	o->n_ranks = 0;
	for (tok = strtok_r(copy, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		long v = strtol(tok, NULL, 10);

		if (v < 1 || v > 65536 || o->n_ranks == MAX_RANK_COUNTS) {
			free(copy);
			return -1;
		}
		o->ranks[o->n_ranks++] = (uint32_t)v;
	}
	free(copy);
	return o->n_ranks > 0 ? 0 : -1;
}

static int
parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno != 0 || *end != '\0' || end == text || v < (long)min ||
	    v > (long)max)
		return -1;
	*ret = (uint32_t)v;
	return 0;
}

/* Reads the policy file `path` into *ret_text (the caller's), for
 * write_config to put after the bench's own daemon section: so it may
 * hold no `daemon:` key and no document marker (one document, jobs
 * only). Returns 0, or -1 said on stderr. */
static int
read_policy(const char *path, char **ret_text)
{
	FILE *f = fopen(path, "r");
	char *text = NULL, line[1024];
	size_t len = 0;

	if (f == NULL) {
		fprintf(stderr, "ingest: --policy: cannot read '%s': %s\n",
		    path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		size_t n = strlen(line);
		char *grown;

		if (strncmp(line, "daemon", 6) == 0 ||
		    strncmp(line, "---", 3) == 0 || line[0] == '%') {
			fprintf(stderr,
			    "ingest: --policy: '%s': the bench writes the "
			    "daemon section itself; give only `jobs:` (one "
			    "document, no `daemon:`)\n",
			    path);
			goto fail;
		}
		if ((grown = realloc(text, len + n + 1)) == NULL)
			goto fail;
		text = grown;
		memcpy(text + len, line, n + 1);
		len += n;
	}
	if (ferror(f) || text == NULL) {
		fprintf(stderr, "ingest: --policy: cannot read '%s'%s\n", path,
		    text == NULL ? ": empty" : "");
		goto fail;
	}
	fclose(f);
	*ret_text = text;
	return 0;
fail:
	fclose(f);
	free(text);
	return -1;
}

/* True when `prefix` may start the jobs' names: 1 to JOB_PREFIX_MAX
 * letters, digits, '.', '_' or '-', so that a name is a plain word in
 * bellowsd's log, STATUS and a configuration's `match:` glob. */
static bool
prefix_valid(const char *prefix)
{
	size_t n = strlen(prefix);

	if (n == 0 || n > JOB_PREFIX_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = prefix[i];

		if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
		    !(c >= '0' && c <= '9') && c != '.' && c != '_' && c != '-')
			return false;
	}
	return true;
}

/* The value of a `--store` or `--curve` MODE: on, off or both. Returns 0,
 * or -1 for anything else (*ret_on, *ret_off untouched). */
static int
parse_mode(const char *text, bool *ret_on, bool *ret_off)
{
	bool both = strcmp(text, "both") == 0;

	if (!both && strcmp(text, "on") != 0 && strcmp(text, "off") != 0)
		return -1;
	*ret_on = both || strcmp(text, "on") == 0;
	*ret_off = both || strcmp(text, "off") == 0;
	return 0;
}

/* Parses the command line into *o. Returns 0 to run, 1 when --help was
 * printed, or 2 (usage printed to stderr) on an unknown option, a value
 * out of range or an extra argument: main's exit status. */
static int
parse_args(int argc, char **argv, bench_opts *o)
{
	static const struct option opts[] = {
		{ "bellowsd", required_argument, NULL, 'b' },
		{ "ranks", required_argument, NULL, 'r' },
		{ "layers", required_argument, NULL, 'l' },
		{ "windows", required_argument, NULL, 'w' },
		{ "pipe-reports", required_argument, NULL, 'p' },
		{ "sockets", required_argument, NULL, 's' },
		{ "perf-record", required_argument, NULL, 'P' },
		{ "store", required_argument, NULL, 'S' },
		{ "curve", required_argument, NULL, 'C' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "job-prefix", required_argument, NULL, 'J' },
		{ "policy", required_argument, NULL, 'F' },
		{ "tcp", no_argument, NULL, 'T' },
		{ "history", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, at = 0;

	while ((c = getopt_long(argc, argv, "h", opts, &at)) != -1) {
		int bad = 0;

		switch (c) {
		case 'b':
			o->bellowsd = optarg;
			break;
		case 'r':
			bad = parse_ranks(optarg, o);
			break;
		case 'l':
			bad = parse_u32(optarg, 1, 65536, &o->layers);
			break;
		case 'w':
			bad = parse_u32(optarg, 1, 100000, &o->windows);
			break;
		case 'p':
			bad = parse_u32(optarg, 1, 10000000, &o->pipe_reports);
			break;
		case 's':
			bad = parse_u32(optarg, 1, MAX_SOCKETS, &o->sockets);
			break;
		case 'P':
			o->perf_out = optarg;
			break;
		case 'S':
			bad = parse_mode(optarg, &o->store_on, &o->store_off);
			break;
		case 'C':
			bad = parse_mode(optarg, &o->curve_on, &o->curve_off);
			break;
		case 'j':
			bad = parse_u32(optarg, 1, MAX_JOBS, &o->jobs);
			break;
		case 'J':
			o->job_prefix = optarg;
			bad = prefix_valid(optarg) ? 0 : -1;
			break;
		case 'T':
			o->tcp = true;
			break;
		case 'H':
			bad = parse_u32(optarg, 0, 10000000, &o->history);
			break;
		case 'F':
			o->policy = optarg;
			free(o->policy_text);
			o->policy_text = NULL;
			if (read_policy(optarg, &o->policy_text) != 0)
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
		if (bad != 0) {
			fprintf(stderr, "ingest: --%s: bad value '%s'\n",
			    opts[at].name, optarg);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ingest: unexpected argument '%s'\n",
		    argv[optind]);
		usage(stderr);
		return 2;
	}
	for (uint32_t i = 0; i < o->n_ranks; i++) {
		if (o->ranks[i] < o->jobs) {
			fprintf(stderr,
			    "ingest: --jobs %u: more jobs than the %u ranks "
			    "of a run\n",
			    o->jobs, o->ranks[i]);
			return 2;
		}
	}
	return 0;
}

/* One line of the results table, as the run ends. */
static void
print_result(const bench_result *r)
{
	printf("%6u %5u %5s %5s %6" PRIu64
	       " %10.0f %9.0f %6.1f %7.2f %4.0f%% %4.0f%% "
	       "%8.3f %8.3f %7.3f %7.3f\n",
	    r->world, r->jobs, r->store ? "on" : "off", r->curve ? "on" : "off",
	    r->history, r->stats_per_s, r->reports_per_s, r->mb_per_s,
	    r->us_per_report, 100.0 * r->loop_cpu, 100.0 * r->io_cpu,
	    r->burst_p50, r->burst_p99, r->last_p50, r->last_p99);
	fflush(stdout);
}

/* STATUS's counters of every run, then the summary line of each run at
 * the largest rank count. */
static void
print_totals(const bench_opts *o, const bench_result *res, uint32_t n_res)
{
	printf("\n%7s %5s %5s %12s %12s %9s %9s %9s %9s %s\n", "ranks", "jobs",
	    "store", "reports", "layer_stats", "dropped", "decisions",
	    "changed", "rows_lost",
	    "(bellowsd STATUS at the end, all jobs; changed: decisions "
	    "received that a policy changed something in)");
	for (uint32_t i = 0; i < n_res; i++)
		printf("%7u %5u %5s %12" PRIu64 " %12" PRIu64 " %9" PRIu64
		       " %9" PRIu64 " %9" PRIu64 " %9" PRIu64 " %s\n",
		    res[i].world, res[i].jobs, res[i].store ? "on" : "off",
		    res[i].reports, res[i].layer_stats, res[i].dropped,
		    res[i].decisions, res[i].changed, res[i].store_dropped,
		    res[i].ok ? "ok" : "MISMATCH");
	for (uint32_t i = 0; i < n_res; i++) {
		const bench_result *last = &res[i];

		if (last->world != o->ranks[o->n_ranks - 1])
			continue;
		printf("ingest: layer_stats/s=%.0f p50_ms=%.3f p99_ms=%.3f "
		       "(ranks=%u, jobs=%u, store %s%s%s, policy %s, after "
		       "%" PRIu64 " windows)\n",
		    last->stats_per_s, last->last_p50, last->last_p99,
		    last->world, last->jobs, last->store ? "on" : "off",
		    last->curve ? ", curve on" : "", o->tcp ? ", tcp" : "",
		    last->policy, last->history);
	}
}

int
main(int argc, char **argv)
{
	bench_opts o = { .bellowsd = BENCH_BELLOWSD,
		.ranks = { 10, 100, 1000 },
		.n_ranks = 3,
		.layers = 100,
		.windows = 50,
		.pipe_reports = 30000,
		.sockets = 8,
		.store_on = true,
		.store_off = true,
		.curve_off = true,
		.jobs = 1,
		.job_prefix = "ingest" };
	bench_result res[4 * MAX_RANK_COUNTS];
	uint32_t n_res = 0;
	bool ok = true;
	int rc;

	if ((rc = parse_args(argc, argv, &o)) != 0)
		return rc == 1 ? 0 : rc;
	signal(SIGPIPE, SIG_IGN);
	printf("ingest: bellowsd %s, %u layers per report, %u sockets, "
	       "%u windows per latency phase, %u reports pipelined, "
	       "%u jobs (%s-0..), policies %s, %s endpoints\n",
	    o.bellowsd, o.layers, o.sockets, o.windows, o.pipe_reports, o.jobs,
	    o.job_prefix,
	    o.policy != NULL ? o.policy : "fixed level 2 (built in)",
	    o.tcp ? "tcp://127.0.0.1" : "ipc://");
	printf("%6s %5s %5s %5s %6s %10s %9s %6s %7s %5s %5s %8s %8s %7s "
	       "%7s\n",
	    "ranks", "jobs", "store", "curve", "hist", "stats/s", "reports/s",
	    "MB/s", "us/rep", "loop", "zmq", "burst50", "burst99", "last50",
	    "last99");
	fflush(stdout);
	for (uint32_t i = 0; i < o.n_ranks; i++) {
		for (int m = 0; m < 4; m++) {
			bool store = (m & 1) == 0, curve = (m & 2) != 0;
			bool perf = o.perf_out != NULL && i + 1 == o.n_ranks &&
			    store && !curve;
			bench_result *r = &res[n_res];

			if ((store && !o.store_on) ||
			    (!store && !o.store_off) ||
			    (curve && !o.curve_on) || (!curve && !o.curve_off))
				continue;
			if (run_one(&o, o.ranks[i], store, curve, perf, r) !=
			    0) {
				fprintf(stderr,
				    "ingest: ranks=%u store %s curve %s "
				    "failed\n",
				    o.ranks[i], store ? "on" : "off",
				    curve ? "on" : "off");
				free(o.policy_text);
				return 1;
			}
			n_res++;
			print_result(r);
			ok = ok && r->ok;
		}
	}
	print_totals(&o, res, n_res);
	free(o.policy_text);
	return ok ? 0 : 1;
}
