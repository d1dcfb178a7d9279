/* store - how many rows per second bellowsd's history store writes.
 *
 * Opens the store (controller/store.c, the code bellowsd runs) on a file
 * in a private temporary directory and feeds it, from this thread as
 * bellowsd's event loop would, what a job of R ranks x L layers records
 * per window: R timings rows (one per rank's report), one window_info
 * row, L windows rows, one decision and L decision_changes rows (every
 * level changes every window). Two modes:
 *
 *   batched   rows go to the writer in batches of batch_rows (the
 *             default configuration, 4096), one transaction each;
 *   single    batch_rows = 1: one row per batch, per transaction and per
 *             acknowledgement.
 *
 * rows/s = rows committed / (first row handed over -> last commit
 * acknowledged). At most PIPE_WINDOWS windows are in flight (the producer
 * waits for older ones), so the queue never downsamples; the run fails if
 * any metric row was dropped. `put us/row` is this thread's time spent
 * handing rows over: what the event loop pays.
 *
 * A third measurement is the commit round trip of a decision alone (what
 * the store adds to a decision's latency in bellowsd): one decision of L
 * layers with its window's L + 1 rows and L changed levels, handed over,
 * ACK_ROUNDS times, from the hand-over to the store's durable callback
 * (the moment bellowsd would publish it).
 *
 * The last line reads
 *   store: batched_rows/s=X single_rows/s=Y ack_p50_ms=A ack_p99_ms=B
 *   (ranks=R layers=L)
 */
#include "common/clock.h"
#include "policyhost/config.h"
#include "controller/events.h"
#include "policyhost/log.h"
#include "controller/store.h"

#include <bellows/error.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define PIPE_WINDOWS 4     /* windows in flight */
#define ACK_ROUNDS   500   /* decisions timed alone */
#define WAIT_MS      60000 /* longest wait for a commit */

typedef struct bench_opts {
	uint32_t ranks;       /* ranks per window */
	uint32_t layers;      /* layers per window */
	uint32_t windows;     /* windows of the batched mode */
	uint32_t single_rows; /* rows of the single mode (whole windows) */
	uint32_t batch_rows;  /* batch_rows of the batched mode */
	const char *dir;      /* where the file goes, default /tmp */
} bench_opts;

typedef struct bench_result {
	uint64_t rows;      /* rows committed */
	double secs;        /* first put -> last ack */
	double put_us;      /* producer time per row, microseconds */
	uint64_t db_bytes;  /* database file at the end */
	uint64_t wal_bytes; /* its WAL then */
	uint64_t dropped;   /* metric rows dropped (must be 0) */
	double ack_p50;     /* ms, decision commit round trip */
	double ack_p99;     /* ms */
} bench_result;

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: store [--ranks R] [--layers L] [--windows N]\n"
	    "             [--single-rows N] [--batch-rows N] [--dir DIR]\n"
	    "\n"
	    "  --ranks R          timings rows per window (default 1000)\n"
	    "  --layers L         windows rows per window (default 100)\n"
	    "  --windows N        windows of the batched mode (default 1000)\n"
	    "  --single-rows N    rows of the one-row-per-transaction mode\n"
	    "                     (default 30000)\n"
	    "  --batch-rows N     batch_rows of the batched mode (default\n"
	    "                     the configuration's, 4096)\n"
	    "  --dir DIR          directory for the database (default /tmp)\n");
}

/* ctl_store_durable_fn: when the decisions of `ticket` became durable. */
static void
on_durable(void *arg, uint64_t ticket)
{
	uint64_t *seen = arg;

	if (ticket != UINT64_MAX && ticket > seen[0]) {
		seen[0] = ticket;
		seen[1] = com_clock_ns();
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint64_t
file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* One mode: `windows` windows with batch_rows; with `acks`, then
 * ACK_ROUNDS windows of L layers and no timings, each waited for. */
static int
run_mode(const bench_opts *o, uint32_t batch_rows, uint32_t windows, bool acks,
    bench_result *res)
{
	double lat[ACK_ROUNDS];
	char dir[256], db[300], wal[310], cmd[400];
	ctl_store_conf conf = {
		.keep_every = 10,
		.batch_rows = batch_rows,
		.queue_rows = 100000000,
	};
	bellows_window_layer *layers = calloc(o->layers, sizeof(*layers));
	com_layer_info *table = calloc(o->layers, sizeof(*table));
	char(*names)[24] = calloc(o->layers, sizeof(*names));
	uint64_t *tickets = calloc(windows, sizeof(*tickets));
	ctl_config cfg = { .path = (char *)"bench.yaml",
		.text = (char *)"bench",
		.text_len = 5 };
	com_decision d[2];
	com_status_reply st = { 0 };
	uint64_t seen[2] = { 0, 0 };
	ctl_events *events = NULL;
	ctl_store *s = NULL;
	void *zctx = zmq_ctx_new();
	uint64_t t0, put_ns = 0, rows = 0;
	int64_t run;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	memset(d, 0, sizeof(d));
	snprintf(dir, sizeof(dir), "%s/bellows-store-bench.XXXXXX", o->dir);
	if (layers == NULL || table == NULL || names == NULL ||
	    tickets == NULL || zctx == NULL || mkdtemp(dir) == NULL ||
	    ctl_events_new(&events) != 0) {
		perror("store: setting up");
		goto out;
	}
	snprintf(db, sizeof(db), "%s/history.db", dir);
	snprintf(wal, sizeof(wal), "%s-wal", db);
	for (uint32_t l = 0; l < o->layers; l++) {
		snprintf(names[l], sizeof(names[l]), "layer%u.weight", l);
		table[l] = (com_layer_info){ .name = names[l],
			.numel = 64 * 64,
			.ndim = 2,
			.shape = { 64, 64 } };
	}
	for (int k = 0; k < 2; k++) {
		if (com_decision_init(&d[k], "bench", o->layers) != 0)
			goto out;
		d[k].policy = strdup("accordion");
		d[k].reason = strdup("window 10 vs window 0 (eta 0.5): 0 "
				     "critical (level 2), 100 stable (level "
				     "1)");
	}
	if (ctl_store_open(db, zctx, &conf, 1, events, &s) != 0 ||
	    ctl_store_start(s) != 0) {
		fprintf(stderr, "store: cannot open %s\n", db);
		goto out;
	}
	ctl_store_set_durable_fn(s, on_durable, seen);
	t0 = com_clock_ns();
	run = ctl_store_run_begin(s, "bench", "", o->ranks, table, o->layers,
	    &cfg, 1, com_clock_wall_ms());
	rows += 1 + o->layers + 1;
	for (uint32_t w = 0; w < windows; w++) {
		com_decision *now = &d[w % 2], *prev = &d[(w + 1) % 2];
		double sc = 1.0 + 0.01 * (double)(w % 100);
		bellows_window v = {
			.job = "bench",
			.window = w,
			.first_step = 10ull * w,
			.last_step = 10ull * w + 9,
			.lr = 0.1,
			.lr_next = 0.1,
			.batch_size = 128,
			.lr_scale = 1,
			.world = o->ranks,
			.ranks_reported = o->ranks,
			.step_ms_median = 100,
			.compute_ms_median = 70,
			.comm_ms_median = 30,
			.floats_sent = 100000ull * o->ranks,
			.floats_raw = 1000000ull * o->ranks,
			.n_layers = o->layers,
			.layers = layers,
		};
		uint64_t a;

		if (w >= PIPE_WINDOWS &&
		    ctl_store_wait(s, tickets[w - PIPE_WINDOWS], WAIT_MS) !=
			0) {
			fprintf(stderr, "store: window %u not committed\n",
			    w - PIPE_WINDOWS);
			goto out;
		}
		for (uint32_t l = 0; l < o->layers; l++) {
			layers[l] = (bellows_window_layer){
				.grad_norm_rank0 = 1.5 * sc / (l + 1),
				.grad_norm_mean = 1.4 * sc / (l + 1),
				.sum_sq = 0.25 * sc * (l + 1),
				.abs_sum = 31.5 * sc,
				.max_abs = 0.0625 * sc,
				.count = 40960,
				.nonzero = 40960 - l,
				.momentum_abs_mean = 0.001 * sc,
				.level = prev->level[l],
			};
			now->level[l] = (double)(1 + w % 2);
		}
		now->seq = w + 2;
		now->window = w + 1;
		now->apply_step = 10ull * w + 11;
		a = com_clock_ns();
		for (uint32_t r = 0; r < o->ranks; r++) {
			com_timings t = { .steps = 10,
				.step_ms = 1000 + r,
				.compute_ms = 700,
				.comm_ms = 300,
				.step_ms_max = 110,
				.bytes_sent = 400000,
				.floats_sent = 100000,
				.floats_raw = 1000000 };

			ctl_store_timing(s, run, w, r, &t);
		}
		ctl_store_window(s, run, &v, o->ranks,
		    CTL_STORE_CLOSED_COMPLETE, prev, com_clock_wall_ms());
		tickets[w] = ctl_store_decision(s, run, now, prev,
		    CTL_STORE_WINDOW, com_clock_wall_ms());
		put_ns += com_clock_ns() - a;
		rows += o->ranks + 1 + o->layers + 1 + o->layers;
	}
	if (ctl_store_wait(s, ctl_store_flush(s), WAIT_MS) != 0) {
		fprintf(stderr, "store: the last window was not committed\n");
		goto out;
	}
	res->secs = (double)(com_clock_ns() - t0) / 1e9;
	for (uint32_t k = 0; acks && k < ACK_ROUNDS; k++) {
		uint32_t w = windows + k;
		com_decision *now = &d[w % 2], *prev = &d[(w + 1) % 2];
		bellows_window v = { .job = "bench",
			.window = w,
			.world = o->ranks,
			.n_layers = o->layers,
			.layers = layers };
		uint64_t a = com_clock_ns(), t;

		now->seq = w + 2;
		now->window = w + 1;
		now->level[0] = (double)(w % 3);
		ctl_store_window(s, run, &v, o->ranks,
		    CTL_STORE_CLOSED_COMPLETE, prev, com_clock_wall_ms());
		t = ctl_store_decision(s, run, now, prev, CTL_STORE_WINDOW,
		    com_clock_wall_ms());
		if (ctl_store_wait(s, t, WAIT_MS) != 0 || seen[0] < t)
			goto out;
		lat[k] = (double)(seen[1] - a) / 1e6;
	}
	if (acks) {
		qsort(lat, ACK_ROUNDS, sizeof(lat[0]), cmp_double);
		res->ack_p50 = lat[ACK_ROUNDS / 2];
		res->ack_p99 = lat[ACK_ROUNDS * 99 / 100];
	}
	res->rows = rows;
	res->put_us = (double)put_ns / 1e3 / (double)rows;
	res->db_bytes = file_size(db);
	res->wal_bytes = file_size(wal);
	if (ctl_store_status(s, &st) == 0)
		res->dropped = st.store_dropped;
	free(st.store_error);
	rc = res->dropped == 0 ? 0 : -1;
	if (rc != 0)
		fprintf(stderr, "store: %" PRIu64 " metric rows dropped\n",
		    res->dropped);
out:
	ctl_store_close(&s, WAIT_MS);
	ctl_events_destroy(&events);
	if (zctx != NULL)
		zmq_ctx_term(zctx);
	com_decision_fini(&d[0]);
	com_decision_fini(&d[1]);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (strncmp(dir, o->dir, strlen(o->dir)) == 0 && system(cmd) != 0)
		fprintf(stderr, "store: could not remove %s\n", dir);
	free(layers);
	free(table);
	free(names);
	free(tickets);
	return rc;
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

static void
print_row(const char *mode, uint32_t batch_rows, const bench_result *r)
{
	printf("%-8s %10u %10" PRIu64 " %8.2f %12.0f %10.3f %7.1f %7.1f\n",
	    mode, batch_rows, r->rows, r->secs, (double)r->rows / r->secs,
	    r->put_us, (double)r->db_bytes / 1e6, (double)r->wal_bytes / 1e6);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ranks", required_argument, NULL, 'r' },
		{ "layers", required_argument, NULL, 'l' },
		{ "windows", required_argument, NULL, 'w' },
		{ "single-rows", required_argument, NULL, 's' },
		{ "batch-rows", required_argument, NULL, 'b' },
		{ "dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bench_opts o = { .ranks = 1000,
		.layers = 100,
		.windows = 1000,
		.single_rows = 30000,
		.batch_rows = 4096,
		.dir = "/tmp" };
	bench_result batched, single;
	uint32_t per_window, single_windows;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 'r':
			bad = parse_u32(optarg, 1, 100000, &o.ranks);
			break;
		case 'l':
			bad = parse_u32(optarg, 1, 65536, &o.layers);
			break;
		case 'w':
			bad = parse_u32(optarg, 1, 1000000, &o.windows);
			break;
		case 's':
			bad = parse_u32(optarg, 1, 100000000, &o.single_rows);
			break;
		case 'b':
			bad = parse_u32(optarg, 1, 1000000, &o.batch_rows);
			break;
		case 'd':
			o.dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (bad != 0) {
			fprintf(stderr, "store: bad value '%s'\n", optarg);
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	ctl_log_set_level(CTL_LOG_WARN);
	per_window = o.ranks + 2 * o.layers + 2;
	single_windows = o.single_rows / per_window;
	if (single_windows == 0)
		single_windows = 1;
	printf("store: %u ranks x %u layers: %u rows per window (%u timings, "
	       "%u windows, 1 window_info, 1 decision, %u decision_changes); "
	       "database in %s\n",
	    o.ranks, o.layers, per_window, o.ranks, o.layers, o.layers, o.dir);
	printf("%-8s %10s %10s %8s %12s %10s %7s %7s\n", "mode", "batch_rows",
	    "rows", "secs", "rows/s", "put us/row", "db MB", "wal MB");
	if (run_mode(&o, o.batch_rows, o.windows, true, &batched) != 0)
		return 1;
	print_row("batched", o.batch_rows, &batched);
	if (run_mode(&o, 1, single_windows, false, &single) != 0)
		return 1;
	print_row("single", 1, &single);
	printf("decision commit round trip (%u layers, %d rounds): p50 %.3f "
	       "ms, p99 %.3f ms\n",
	    o.layers, ACK_ROUNDS, batched.ack_p50, batched.ack_p99);
	printf("store: batched_rows/s=%.0f single_rows/s=%.0f ack_p50_ms=%.3f "
	       "ack_p99_ms=%.3f (ranks=%u layers=%u)\n",
	    (double)batched.rows / batched.secs,
	    (double)single.rows / single.secs, batched.ack_p50, batched.ack_p99,
	    o.ranks, o.layers);
	return 0;
}
