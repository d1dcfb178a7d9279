/* test_wire - bellows messages through the real protobuf wire format.
 *
 * Every message type goes through encode and decode with every field set
 * and comes back equal, field by field. Malformed frames, built with the
 * encoder where it allows it and byte by byte where the structs cannot
 * express the fault, are refused with the exact error code. Run with the
 * argument "fault", the executable instead feeds the decoder truncated,
 * bit-flipped and random frames and fails each of its allocations in turn:
 * it must answer every one with an error or a valid message, never crash
 * and never leak (the sanitizer run checks the leaks). The decode through
 * an arena reused from frame to frame (common/wire_arena.h, as bellowsd's loop
 * does) must give the result or error code of a fresh one
 * (com_wire_decode) for every frame: the corpus, its truncations and bit
 * flips, and a
 * bounded fuzz of corrupted frames (3 s in the fault suite;
 * `test_wire fuzz SECONDS` runs only that fuzz, for that long).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include <bellows/error.h>

#include "common/clock.h"
#include "common/wire.h"
#include "common/wire_fault.h"
#include "common/msg.h"
#include "common/stat_table.h"
#include "common/wire_arena.h"

/*
 * Building messages.
 */

static char *
xstrdup(const char *s)
{
	char *p = com_strdup(s);

	assert_non_null(p);
	return p;
}

static void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n > 0 ? n : 1, size);

	assert_non_null(p);
	return p;
}

static void
make_decision(com_decision *d, const char *job, uint32_t n, uint64_t seq)
{
	assert_int_equal(com_decision_init(d, job, n), 0);
	for (uint32_t i = 0; i < n; i++) {
		d->level[i] = (double)seq + 0.25 * i;
		d->error_bound[i] = 1e-3 * (i + 1);
	}
	d->seq = seq;
	d->apply_step = 1000 + seq;
	d->window = 10 + seq;
	d->batch_size = 256;
	d->lr_scale = 0.5;
	d->size_threshold = 65536;
	d->compression_off = true;
	d->codec_table = xcalloc(5, 1);
	memcpy(d->codec_table, "\x00\x01\xfeZ\x7f", 5);
	d->codec_table_len = 5;
	d->policy = xstrdup("accordion,comet");
	d->reason = xstrdup("critical regime ended");
	d->calibrate_steps = 500 + seq;
	d->stats_skip = UINT64_C(1) << 6 | seq;
	/* A residual plan: layers 0 and 1 share layer 0's residual (phi
	 * 0.25), the last keeps 0.5 x 0.75 of its own. */
	if (n >= 3) {
		assert_int_equal(com_resid_plan_alloc(d), 0);
		d->resid_group[1] = 0;
		d->resid_phi[0] = 0.25;
		d->resid_rows[n - 1] = 0.5;
		d->resid_cols[n - 1] = 0.75;
	}
}

static void
make_hello(com_msg *m, uint32_t n_layers)
{
	com_hello *h = &m->u.hello;
	char name[32];

	com_msg_init(m, COM_MSG_HELLO);
	h->job = xstrdup("resnet50");
	h->rank = 3;
	h->world = 8;
	h->n_layers = n_layers;
	h->layers = xcalloc(n_layers, sizeof(*h->layers));
	for (uint32_t i = 0; i < n_layers; i++) {
		com_layer_info *l = &h->layers[i];

		snprintf(name, sizeof(name), "layer%u.weight", i);
		l->name = xstrdup(name);
		l->ndim = 1 + i % COM_MAX_NDIM;
		l->numel = 1;
		for (uint32_t d = 0; d < l->ndim; d++) {
			l->shape[d] = d + 1 + i % 3;
			l->numel *= l->shape[d];
		}
	}
	h->agent_version = xstrdup("0.1.0-test");
	h->step = (uint64_t)1 << 40;
	h->incarnation = 0xdeadbeefcafef00dull;
	h->last_window = 77;
	make_decision(&h->in_force, "resnet50", n_layers, 5);
}

static void
make_report(com_msg *m, uint32_t n_layers)
{
	com_report *r = &m->u.report;

	com_msg_init(m, COM_MSG_REPORT);
	r->job = xstrdup("resnet50");
	r->rank = 2;
	r->window = 9;
	r->first_step = 100;
	r->last_step = 149;
	r->n_layers = n_layers;
	r->layers = xcalloc(n_layers, sizeof(*r->layers));
	for (uint32_t i = 0; i < n_layers; i++) {
		com_layer_stats *s = &r->layers[i];

		s->layer = i * 2 + 1;
		s->count = 1000 + i;
		s->nonzero = 900 + i;
		s->nonfinite = i;
		s->sum_sq = 1.5 + i;
		s->abs_sum = 2.5 + i;
		s->max_abs = 0.75;
		s->acc_norm = 3.25 * i;
		s->acc_norm_mean = 3.5 * i;
		s->momentum_abs_mean = 1e-4;
		s->observed_steps = 50;
		s->act_steps = 40 + i;
		s->act_lbar = 0.125 + i;
		s->act_nonzero = 0.375;
		s->act_bytes = 4096.5 * (i + 1);
		s->act_raw_bytes = 16384.25 * (i + 1);
		s->comm_raw_ms = 1.75 + i;
		s->comm_raw_n = 25 + i;
		s->comm_comp_ms = 0.875 + i;
		s->comm_comp_n = 24 + i;
		s->codec_ms = 0.0625 * (i + 1);
	}
	r->n_comm = 3;
	r->comm = xcalloc(3, sizeof(*r->comm));
	for (uint32_t i = 0; i < 3; i++) {
		r->comm[i].bytes = ((uint64_t)1 << (20 + i)) + i;
		r->comm[i].ms = 2.5 * (i + 1);
		r->comm[i].count = 50 - i;
		r->comm[i].compressed = i == 1;
	}
	r->timings.steps = 50;
	r->timings.step_ms = 5000.5;
	r->timings.compute_ms = 3000.25;
	r->timings.comm_ms = 1999.125;
	r->timings.step_ms_max = 120.0;
	r->timings.bytes_sent = (uint64_t)3 << 33;
	r->timings.floats_sent = 123456789;
	r->timings.floats_raw = 987654321;
	r->timings.decision_misses = 2;
	r->timings.reports_dropped = 1;
	r->timings.backward_ms = 2200.75;
	r->timings.codec_ms = 150.125;
	r->timings.mem_device_used = (uint64_t)7 << 30;
	r->timings.mem_device_total = (uint64_t)16 << 30;
	r->timings.mem_host_used = (uint64_t)5 << 29;
	r->timings.saved_bytes = (uint64_t)3 << 30;
	r->timings.eval_accuracy = 0.8765;
	r->timings.eval_loss = 0.375;
	r->lr = 0.1;
	r->batch_size = 32;
	r->epoch = 3;
	r->seq_in_force = 4;
	r->lr_next = 0.0125;
	r->ranks = 3;
}

static void
make_status_reply(com_msg *m)
{
	com_status_reply *r = &m->u.status_reply;

	com_msg_init(m, COM_MSG_STATUS_REPLY);
	r->instance = 0x1122334455667788ull;
	r->uptime_ms = 86400000;
	r->latency_p50_ms = 0.25;
	r->latency_p99_ms = 1.5;
	r->latency_max_ms = 3.75;
	r->latency_samples = 1024;
	r->reports_duplicate = 12;
	r->n_jobs = 2;
	r->jobs = xcalloc(2, sizeof(*r->jobs));
	for (uint32_t j = 0; j < 2; j++) {
		com_job_status *s = &r->jobs[j];

		s->job = xstrdup(j == 0 ? "alpha" : "beta");
		s->world = 4;
		s->ranks_alive = 3 - j;
		s->window = 40 + j;
		s->seq = 12 + j;
		s->step = 4000 + j;
		s->n_ranks = 3 - j;
		s->ranks = xcalloc(s->n_ranks, sizeof(*s->ranks));
		for (uint32_t k = 0; k < s->n_ranks; k++) {
			s->ranks[k].rank = k;
			s->ranks[k].alive = k != 1;
			s->ranks[k].step = 4000 - k;
			s->ranks[k].last_seen_ms = 10 * k + 1;
			s->ranks[k].reports = 40 + k;
			s->ranks[k].seq_in_force = 11 + j;
			s->ranks[k].rejoins = k;
		}
		s->n_layers = 161;
		s->windows_incomplete = 1 + j;
		s->policy = xstrdup("accordion");
	}
	r->n_peers = 2;
	r->peers = xcalloc(2, sizeof(*r->peers));
	r->peers[0].peer = xcalloc(5, 1);
	memcpy(r->peers[0].peer, "\x00\x80\x00\x41\xff", 5);
	r->peers[0].peer_len = 5;
	r->peers[0].dropped = 17;
	r->peers[0].last_error = xstrdup("malformed message");
	r->peers[1].peer = xcalloc(1, 1);
	r->peers[1].peer_len = 1;
	r->peers[1].dropped = 1;
	r->peers[1].last_error = xstrdup("protocol version mismatch");
	r->messages = 1000000;
	r->dropped = 18;
	r->reports = 999000;
	r->decisions = 13;
	r->layer_stats = 160000000;
	r->n_events = 2;
	r->events = xcalloc(2, sizeof(*r->events));
	r->events[0].wall_ms = 1700000000123ull;
	r->events[0].kind = xstrdup("reload_refused");
	r->events[0].job = xstrdup("");
	r->events[0].text = xstrdup("bellows.yaml:3:7: unknown key 'x'");
	r->events[1].wall_ms = 1700000000456ull;
	r->events[1].kind = xstrdup("rank_lost");
	r->events[1].job = xstrdup("alpha");
	r->events[1].text = xstrdup("rank 1 lost at step 3999");
	r->store_degraded = true;
	r->store_pending = 123456789012ull;
	r->store_dropped = 4096;
	r->store_error = xstrdup("'bellows.db': cannot commit: database or "
				 "disk is full");
	r->store_path = xstrdup("/var/lib/bellows/bellows.db");
}

/* A message of the given type with every field set to something other
 * than its default. */
static void
make_msg(com_msg *m, com_msg_type type)
{
	switch (type) {
	case COM_MSG_HELLO:
		make_hello(m, 6);
		return;
	case COM_MSG_REPORT:
		make_report(m, 5);
		return;
	case COM_MSG_STATUS_REPLY:
		make_status_reply(m);
		return;
	default:
		break;
	}
	com_msg_init(m, type);
	switch (type) {
	case COM_MSG_WELCOME:
		m->u.welcome.job = xstrdup("resnet50");
		m->u.welcome.rank = 5;
		m->u.welcome.apply_lag = 2;
		m->u.welcome.heartbeat_ms = 1500;
		m->u.welcome.instance = 0xabcdef0123456789ull;
		m->u.welcome.windows_closed = 0x1234567890ull;
		m->u.welcome.n_decisions = 3;
		m->u.welcome.decisions = xcalloc(3, sizeof(com_decision));
		for (uint32_t i = 0; i < 3; i++)
			make_decision(&m->u.welcome.decisions[i], "resnet50", 3,
			    4 + i);
		break;
	case COM_MSG_DECISION:
		make_decision(&m->u.decision, "resnet50", 7, 42);
		break;
	case COM_MSG_HEARTBEAT:
		m->u.heartbeat.job = xstrdup("resnet50");
		m->u.heartbeat.rank = 7;
		m->u.heartbeat.step = 123456;
		m->u.heartbeat.seq_in_force = 41;
		m->u.heartbeat.incarnation = UINT64_MAX;
		break;
	case COM_MSG_HEARTBEAT_ACK:
		m->u.heartbeat_ack.instance = 99;
		m->u.heartbeat_ack.last_seq = 41;
		m->u.heartbeat_ack.windows_closed = 17;
		break;
	case COM_MSG_BYE:
		m->u.bye.job = xstrdup("resnet50");
		m->u.bye.rank = 65535;
		break;
	case COM_MSG_STATUS_REQUEST:
		m->u.status_request.job = xstrdup("resnet50");
		break;
	case COM_MSG_SNAPSHOT_REQUEST:
		m->u.snapshot_request.job = xstrdup("resnet50");
		m->u.snapshot_request.rank = 1;
		break;
	case COM_MSG_SNAPSHOT:
		m->u.snapshot.job = xstrdup("resnet50");
		m->u.snapshot.n_decisions = 2;
		m->u.snapshot.decisions = xcalloc(2, sizeof(com_decision));
		make_decision(&m->u.snapshot.decisions[0], "resnet50", 2, 8);
		make_decision(&m->u.snapshot.decisions[1], NULL, 2, 9);
		break;
	case COM_MSG_ERROR:
		m->u.error.code = BELLOWS_EBUSY;
		m->u.error.message = xstrdup("rank 3 is held by a live peer");
		break;
	case COM_MSG_TELEMETRY:
		m->u.telemetry.job = xstrdup("resnet50");
		m->u.telemetry.window = 40;
		m->u.telemetry.ranks_reported = 7;
		m->u.telemetry.ranks_expected = 8;
		m->u.telemetry.step_ms_median = 101.5;
		m->u.telemetry.n_metrics = 3;
		m->u.telemetry.metrics = xcalloc(3, sizeof(com_metric));
		m->u.telemetry.metrics[0].policy = xstrdup("slimgc");
		m->u.telemetry.metrics[0].name = xstrdup("threshold_bytes");
		m->u.telemetry.metrics[0].layer = -1;
		m->u.telemetry.metrics[0].value = 2.2e6;
		m->u.telemetry.metrics[1].policy = xstrdup("comet");
		m->u.telemetry.metrics[1].name = xstrdup("eb");
		m->u.telemetry.metrics[1].layer = 4;
		m->u.telemetry.metrics[1].value = 3.5e-3;
		m->u.telemetry.metrics[2].policy = xstrdup("perfmodel");
		m->u.telemetry.metrics[2].name = xstrdup("fit_r2");
		m->u.telemetry.metrics[2].layer = -1;
		m->u.telemetry.metrics[2].value = -0.25;
		break;
	default:
		fail_msg("no sample for type %d", type);
	}
}

/*
 * Comparing messages.
 */

static void
assert_str_equal(const char *a, const char *b)
{
	assert_string_equal(a != NULL ? a : "", b != NULL ? b : "");
}

static void
assert_doubles_equal(const double *a, const double *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		assert_memory_equal(&a[i], &b[i], sizeof(double));
}

static void
assert_decision_equal(const com_decision *a, const com_decision *b)
{
	assert_str_equal(a->job, b->job);
	assert_int_equal(a->seq, b->seq);
	assert_int_equal(a->apply_step, b->apply_step);
	assert_int_equal(a->window, b->window);
	assert_int_equal(a->n_layers, b->n_layers);
	assert_doubles_equal(a->level, b->level, a->n_layers);
	assert_doubles_equal(a->error_bound, b->error_bound, a->n_layers);
	assert_int_equal(a->batch_size, b->batch_size);
	assert_true(a->lr_scale == b->lr_scale);
	assert_int_equal(a->size_threshold, b->size_threshold);
	assert_int_equal(a->compression_off, b->compression_off);
	assert_int_equal(a->codec_table_len, b->codec_table_len);
	if (a->codec_table_len > 0)
		assert_memory_equal(a->codec_table, b->codec_table,
		    a->codec_table_len);
	assert_str_equal(a->policy, b->policy);
	assert_str_equal(a->reason, b->reason);
	assert_int_equal(a->calibrate_steps, b->calibrate_steps);
	assert_true(a->stats_skip == b->stats_skip);
	assert_int_equal(a->resid_group == NULL, b->resid_group == NULL);
	if (a->resid_group != NULL) {
		assert_memory_equal(a->resid_group, b->resid_group,
		    a->n_layers * sizeof(uint32_t));
		assert_doubles_equal(a->resid_phi, b->resid_phi, a->n_layers);
		assert_doubles_equal(a->resid_rows, b->resid_rows, a->n_layers);
		assert_doubles_equal(a->resid_cols, b->resid_cols, a->n_layers);
	}
	assert_true(com_decision_same_state(a, b));
}

static void
assert_hello_equal(const com_hello *a, const com_hello *b)
{
	assert_str_equal(a->job, b->job);
	assert_int_equal(a->rank, b->rank);
	assert_int_equal(a->world, b->world);
	assert_int_equal(a->n_layers, b->n_layers);
	for (uint32_t i = 0; i < a->n_layers; i++) {
		assert_str_equal(a->layers[i].name, b->layers[i].name);
		assert_int_equal(a->layers[i].numel, b->layers[i].numel);
		assert_int_equal(a->layers[i].ndim, b->layers[i].ndim);
		assert_memory_equal(a->layers[i].shape, b->layers[i].shape,
		    a->layers[i].ndim * sizeof(uint32_t));
	}
	assert_str_equal(a->agent_version, b->agent_version);
	assert_int_equal(a->step, b->step);
	assert_int_equal(a->incarnation, b->incarnation);
	assert_decision_equal(&a->in_force, &b->in_force);
	assert_int_equal(a->last_window, b->last_window);
}

static void
assert_report_equal(const com_report *a, const com_report *b)
{
	assert_str_equal(a->job, b->job);
	assert_int_equal(a->rank, b->rank);
	assert_int_equal(a->window, b->window);
	assert_int_equal(a->first_step, b->first_step);
	assert_int_equal(a->last_step, b->last_step);
	assert_int_equal(a->n_layers, b->n_layers);
	for (uint32_t i = 0; i < a->n_layers; i++) {
		const com_layer_stats *x = &a->layers[i], *y = &b->layers[i];

		assert_int_equal(x->layer, y->layer);
		assert_int_equal(x->count, y->count);
		assert_int_equal(x->nonzero, y->nonzero);
		assert_int_equal(x->nonfinite, y->nonfinite);
		assert_true(x->sum_sq == y->sum_sq);
		assert_true(x->abs_sum == y->abs_sum);
		assert_true(x->max_abs == y->max_abs);
		assert_true(x->acc_norm == y->acc_norm);
		assert_true(x->acc_norm_mean == y->acc_norm_mean);
		assert_true(x->momentum_abs_mean == y->momentum_abs_mean);
		assert_int_equal(x->observed_steps, y->observed_steps);
		assert_int_equal(x->act_steps, y->act_steps);
		assert_true(x->act_lbar == y->act_lbar);
		assert_true(x->act_nonzero == y->act_nonzero);
		assert_true(x->act_bytes == y->act_bytes);
		assert_true(x->act_raw_bytes == y->act_raw_bytes);
		assert_true(x->comm_raw_ms == y->comm_raw_ms);
		assert_int_equal(x->comm_raw_n, y->comm_raw_n);
		assert_true(x->comm_comp_ms == y->comm_comp_ms);
		assert_int_equal(x->comm_comp_n, y->comm_comp_n);
		assert_true(x->codec_ms == y->codec_ms);
		for (size_t k = 0; k < COM_N_LARRAYS; k++) {
			const com_stat_array *ar = &com_layer_array_table[k];
			const uint64_t *u = com_stat_array_get(ar, x),
				       *v = com_stat_array_get(ar, y);

			assert_true((u == NULL) == (v == NULL));
			if (u != NULL)
				assert_memory_equal(u, v,
				    ar->len * sizeof(uint64_t));
		}
	}
	assert_int_equal(a->n_comm, b->n_comm);
	for (uint32_t i = 0; i < a->n_comm; i++) {
		assert_int_equal(a->comm[i].bytes, b->comm[i].bytes);
		assert_true(a->comm[i].ms == b->comm[i].ms);
		assert_int_equal(a->comm[i].count, b->comm[i].count);
		assert_int_equal(a->comm[i].compressed, b->comm[i].compressed);
	}
	assert_int_equal(a->timings.steps, b->timings.steps);
	assert_true(a->timings.step_ms == b->timings.step_ms);
	assert_true(a->timings.compute_ms == b->timings.compute_ms);
	assert_true(a->timings.comm_ms == b->timings.comm_ms);
	assert_true(a->timings.step_ms_max == b->timings.step_ms_max);
	assert_int_equal(a->timings.bytes_sent, b->timings.bytes_sent);
	assert_int_equal(a->timings.floats_sent, b->timings.floats_sent);
	assert_int_equal(a->timings.floats_raw, b->timings.floats_raw);
	assert_int_equal(a->timings.decision_misses,
	    b->timings.decision_misses);
	assert_int_equal(a->timings.reports_dropped,
	    b->timings.reports_dropped);
	assert_true(a->timings.backward_ms == b->timings.backward_ms);
	assert_true(a->timings.codec_ms == b->timings.codec_ms);
	assert_int_equal(a->timings.mem_device_used,
	    b->timings.mem_device_used);
	assert_int_equal(a->timings.mem_device_total,
	    b->timings.mem_device_total);
	assert_int_equal(a->timings.mem_host_used, b->timings.mem_host_used);
	assert_int_equal(a->timings.saved_bytes, b->timings.saved_bytes);
	assert_true(a->timings.eval_accuracy == b->timings.eval_accuracy);
	assert_true(a->timings.eval_loss == b->timings.eval_loss);
	assert_true(a->lr == b->lr);
	assert_int_equal(a->batch_size, b->batch_size);
	assert_int_equal(a->epoch, b->epoch);
	assert_int_equal(a->seq_in_force, b->seq_in_force);
	assert_true(a->lr_next == b->lr_next);
	assert_int_equal(a->ranks, b->ranks);
}

static void
assert_status_reply_equal(const com_status_reply *a, const com_status_reply *b)
{
	assert_int_equal(a->instance, b->instance);
	assert_int_equal(a->uptime_ms, b->uptime_ms);
	assert_true(a->latency_p50_ms == b->latency_p50_ms);
	assert_true(a->latency_p99_ms == b->latency_p99_ms);
	assert_true(a->latency_max_ms == b->latency_max_ms);
	assert_int_equal(a->latency_samples, b->latency_samples);
	assert_int_equal(a->reports_duplicate, b->reports_duplicate);
	assert_int_equal(a->n_jobs, b->n_jobs);
	for (uint32_t j = 0; j < a->n_jobs; j++) {
		const com_job_status *x = &a->jobs[j], *y = &b->jobs[j];

		assert_str_equal(x->job, y->job);
		assert_int_equal(x->world, y->world);
		assert_int_equal(x->ranks_alive, y->ranks_alive);
		assert_int_equal(x->window, y->window);
		assert_int_equal(x->seq, y->seq);
		assert_int_equal(x->step, y->step);
		assert_int_equal(x->n_ranks, y->n_ranks);
		for (uint32_t k = 0; k < x->n_ranks; k++) {
			const com_rank_status *p = &x->ranks[k];
			const com_rank_status *q = &y->ranks[k];

			assert_int_equal(p->rank, q->rank);
			assert_int_equal(p->alive, q->alive);
			assert_int_equal(p->step, q->step);
			assert_int_equal(p->last_seen_ms, q->last_seen_ms);
			assert_int_equal(p->reports, q->reports);
			assert_int_equal(p->seq_in_force, q->seq_in_force);
			assert_int_equal(p->rejoins, q->rejoins);
		}
		assert_int_equal(x->n_layers, y->n_layers);
		assert_int_equal(x->windows_incomplete, y->windows_incomplete);
		assert_str_equal(x->policy, y->policy);
	}
	assert_int_equal(a->n_peers, b->n_peers);
	for (uint32_t i = 0; i < a->n_peers; i++) {
		assert_int_equal(a->peers[i].peer_len, b->peers[i].peer_len);
		assert_memory_equal(a->peers[i].peer, b->peers[i].peer,
		    a->peers[i].peer_len);
		assert_int_equal(a->peers[i].dropped, b->peers[i].dropped);
		assert_str_equal(a->peers[i].last_error,
		    b->peers[i].last_error);
	}
	assert_int_equal(a->messages, b->messages);
	assert_int_equal(a->dropped, b->dropped);
	assert_int_equal(a->reports, b->reports);
	assert_int_equal(a->decisions, b->decisions);
	assert_int_equal(a->layer_stats, b->layer_stats);
	assert_int_equal(a->n_events, b->n_events);
	for (uint32_t i = 0; i < a->n_events; i++) {
		assert_int_equal(a->events[i].wall_ms, b->events[i].wall_ms);
		assert_str_equal(a->events[i].kind, b->events[i].kind);
		assert_str_equal(a->events[i].job, b->events[i].job);
		assert_str_equal(a->events[i].text, b->events[i].text);
	}
	assert_int_equal(a->store_degraded, b->store_degraded);
	assert_int_equal(a->store_pending, b->store_pending);
	assert_int_equal(a->store_dropped, b->store_dropped);
	assert_str_equal(a->store_error, b->store_error);
	assert_str_equal(a->store_path, b->store_path);
}

static void
assert_msg_equal(const com_msg *a, const com_msg *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->major, b->major);
	assert_int_equal(a->minor, b->minor);
	switch (a->type) {
	case COM_MSG_HELLO:
		assert_hello_equal(&a->u.hello, &b->u.hello);
		break;
	case COM_MSG_WELCOME:
		assert_str_equal(a->u.welcome.job, b->u.welcome.job);
		assert_int_equal(a->u.welcome.rank, b->u.welcome.rank);
		assert_int_equal(a->u.welcome.apply_lag,
		    b->u.welcome.apply_lag);
		assert_int_equal(a->u.welcome.heartbeat_ms,
		    b->u.welcome.heartbeat_ms);
		assert_int_equal(a->u.welcome.instance, b->u.welcome.instance);
		assert_int_equal(a->u.welcome.windows_closed,
		    b->u.welcome.windows_closed);
		assert_int_equal(a->u.welcome.n_decisions,
		    b->u.welcome.n_decisions);
		for (uint32_t i = 0; i < a->u.welcome.n_decisions; i++)
			assert_decision_equal(&a->u.welcome.decisions[i],
			    &b->u.welcome.decisions[i]);
		break;
	case COM_MSG_REPORT:
		assert_report_equal(&a->u.report, &b->u.report);
		break;
	case COM_MSG_DECISION:
		assert_decision_equal(&a->u.decision, &b->u.decision);
		break;
	case COM_MSG_HEARTBEAT:
		assert_str_equal(a->u.heartbeat.job, b->u.heartbeat.job);
		assert_int_equal(a->u.heartbeat.rank, b->u.heartbeat.rank);
		assert_int_equal(a->u.heartbeat.step, b->u.heartbeat.step);
		assert_int_equal(a->u.heartbeat.seq_in_force,
		    b->u.heartbeat.seq_in_force);
		assert_int_equal(a->u.heartbeat.incarnation,
		    b->u.heartbeat.incarnation);
		break;
	case COM_MSG_HEARTBEAT_ACK:
		assert_int_equal(a->u.heartbeat_ack.instance,
		    b->u.heartbeat_ack.instance);
		assert_int_equal(a->u.heartbeat_ack.last_seq,
		    b->u.heartbeat_ack.last_seq);
		assert_int_equal(a->u.heartbeat_ack.windows_closed,
		    b->u.heartbeat_ack.windows_closed);
		break;
	case COM_MSG_BYE:
		assert_str_equal(a->u.bye.job, b->u.bye.job);
		assert_int_equal(a->u.bye.rank, b->u.bye.rank);
		break;
	case COM_MSG_STATUS_REQUEST:
		assert_str_equal(a->u.status_request.job,
		    b->u.status_request.job);
		break;
	case COM_MSG_STATUS_REPLY:
		assert_status_reply_equal(&a->u.status_reply,
		    &b->u.status_reply);
		break;
	case COM_MSG_SNAPSHOT_REQUEST:
		assert_str_equal(a->u.snapshot_request.job,
		    b->u.snapshot_request.job);
		assert_int_equal(a->u.snapshot_request.rank,
		    b->u.snapshot_request.rank);
		break;
	case COM_MSG_SNAPSHOT:
		assert_str_equal(a->u.snapshot.job, b->u.snapshot.job);
		assert_int_equal(a->u.snapshot.n_decisions,
		    b->u.snapshot.n_decisions);
		for (uint32_t i = 0; i < a->u.snapshot.n_decisions; i++)
			assert_decision_equal(&a->u.snapshot.decisions[i],
			    &b->u.snapshot.decisions[i]);
		break;
	case COM_MSG_ERROR:
		assert_int_equal(a->u.error.code, b->u.error.code);
		assert_str_equal(a->u.error.message, b->u.error.message);
		break;
	case COM_MSG_TELEMETRY:
		assert_str_equal(a->u.telemetry.job, b->u.telemetry.job);
		assert_int_equal(a->u.telemetry.window, b->u.telemetry.window);
		assert_int_equal(a->u.telemetry.ranks_reported,
		    b->u.telemetry.ranks_reported);
		assert_int_equal(a->u.telemetry.ranks_expected,
		    b->u.telemetry.ranks_expected);
		assert_true(a->u.telemetry.step_ms_median ==
		    b->u.telemetry.step_ms_median);
		assert_int_equal(a->u.telemetry.n_metrics,
		    b->u.telemetry.n_metrics);
		for (uint32_t i = 0; i < a->u.telemetry.n_metrics; i++) {
			const com_metric *x = &a->u.telemetry.metrics[i];
			const com_metric *y = &b->u.telemetry.metrics[i];

			assert_str_equal(x->policy, y->policy);
			assert_str_equal(x->name, y->name);
			assert_int_equal(x->layer, y->layer);
			assert_true(x->value == y->value);
		}
		break;
	default:
		fail_msg("unexpected type %d", a->type);
	}
}

/*
 * Encoding and decoding.
 */

static com_limits
limits(void)
{
	com_limits lim;

	com_limits_default(&lim);
	return lim;
}

static void
assert_zeroed(const com_msg *m)
{
	com_msg zero;

	memset(&zero, 0, sizeof(zero));
	assert_memory_equal(m, &zero, sizeof(zero));
}

static void
encode(const com_msg *m, uint8_t **buf, size_t *len)
{
	assert_int_equal(com_wire_encode(m, buf, len), 0);
	assert_non_null(*buf);
}

/* Decodes; checks that a failure left the message as the contract says. */
static int
decode(const uint8_t *buf, size_t len, const com_limits *lim, com_msg *out)
{
	int rc;

	memset(out, 0x5a, sizeof(*out)); /* must not be read */
	rc = com_wire_decode(buf, len, lim, out);
	if (rc != 0 && rc != BELLOWS_EVERSION)
		assert_zeroed(out);
	return rc;
}

/* Encodes m, decodes it with lim, returns the code and frees everything;
 * m is finalised too. */
static int
round_trip_rc(com_msg *m, const com_limits *lim)
{
	uint8_t *buf;
	size_t len;
	com_msg out;
	int rc;

	encode(m, &buf, &len);
	rc = decode(buf, len, lim, &out);
	com_msg_fini(&out);
	com_msg_fini(m);
	free(buf);
	return rc;
}

static int
round_trip_default(com_msg *m)
{
	com_limits lim = limits();

	return round_trip_rc(m, &lim);
}

/*
 * Writing protobuf by hand, for faults the structs cannot express.
 */

typedef struct wire {
	uint8_t *b; /* bytes written */
	size_t n;   /* bytes used */
	size_t cap; /* bytes allocated */
} wire;

static void
w_raw(wire *w, const void *p, size_t n)
{
	if (w->n + n > w->cap) {
		w->cap = (w->n + n) * 2 + 64;
		w->b = realloc(w->b, w->cap);
		assert_non_null(w->b);
	}
	if (n > 0)
		memcpy(w->b + w->n, p, n);
	w->n += n;
}

static void
w_varint(wire *w, uint64_t v)
{
	do {
		uint8_t b = (uint8_t)(v & 0x7f);

		v >>= 7;
		if (v != 0)
			b |= 0x80;
		w_raw(w, &b, 1);
	} while (v != 0);
}

static void
w_tag(wire *w, unsigned field, unsigned type)
{
	w_varint(w, (uint64_t)field << 3 | type);
}

static void
w_uint(wire *w, unsigned field, uint64_t v)
{
	w_tag(w, field, 0);
	w_varint(w, v);
}

static void
w_bytes(wire *w, unsigned field, const void *p, size_t n)
{
	w_tag(w, field, 2);
	w_varint(w, n);
	w_raw(w, p, n);
}

static void
w_str(wire *w, unsigned field, const char *s)
{
	w_bytes(w, field, s, strlen(s));
}

/* Appends sub as an embedded message and frees it. */
static void
w_msg(wire *w, unsigned field, wire *sub)
{
	w_bytes(w, field, sub->b, sub->n);
	free(sub->b);
	memset(sub, 0, sizeof(*sub));
}

static void
w_doubles(wire *w, unsigned field, const double *d, size_t n)
{
	w_bytes(w, field, d, n * sizeof(*d)); /* little-endian hosts */
}

static void
w_double(wire *w, unsigned field, double v)
{
	w_tag(w, field, 1);
	w_raw(w, &v, sizeof(v)); /* little-endian hosts */
}

/* Wraps body in an Envelope of version 1.0; frees body. */
static wire
w_envelope(unsigned body_field, wire *body)
{
	wire env = { 0 };

	w_uint(&env, 1, BELLOWS_PROTO_MAJOR);
	w_msg(&env, body_field, body);
	return env;
}

enum { /* Envelope body field numbers, from bellows.proto */
	F_HELLO = 10,
	F_REPORT = 12,
	F_DECISION = 13,
	F_BYE = 16,
	F_STATUS_REPLY = 18,
	F_TELEMETRY = 22,
};

static int
decode_wire(wire *w, const com_limits *lim)
{
	com_msg out;
	int rc = decode(w->b, w->n, lim, &out);

	com_msg_fini(&out);
	free(w->b);
	memset(w, 0, sizeof(*w));
	return rc;
}

/* A Hello body with one layer whose shape is given. */
static wire
w_hello_with_shape(const uint32_t *shape, size_t ndim, uint64_t numel)
{
	wire layer = { 0 }, packed = { 0 }, hello = { 0 };

	w_str(&layer, 1, "conv1.weight");
	w_uint(&layer, 2, numel);
	for (size_t i = 0; i < ndim; i++)
		w_varint(&packed, shape[i]);
	w_bytes(&layer, 3, packed.b, packed.n);
	free(packed.b);
	w_str(&hello, 1, "job");
	w_uint(&hello, 3, 1);
	w_msg(&hello, 4, &layer);
	return hello;
}

/*
 * Round trips.
 */

static void
test_wire_round_trips_every_message_type(void **state)
{
	com_limits lim = limits();

	for (int t = COM_MSG_HELLO; t < COM_MSG_TYPE_MAX; t++) {
		com_msg in, out;
		uint8_t *buf;
		size_t len;

		make_msg(&in, (com_msg_type)t);
		encode(&in, &buf, &len);
		assert_int_equal(decode(buf, len, &lim, &out), 0);
		assert_msg_equal(&in, &out);
		com_msg_fini(&in);
		com_msg_fini(&out);
		free(buf);
	}
}

static void
test_wire_decodes_absent_strings_as_empty(void **state)
{
	com_limits lim = limits();
	com_msg in, out;
	uint8_t *buf;
	size_t len;

	com_msg_init(&in, COM_MSG_STATUS_REQUEST);
	encode(&in, &buf, &len);
	assert_int_equal(decode(buf, len, &lim, &out), 0);
	assert_non_null(out.u.status_request.job);
	assert_string_equal(out.u.status_request.job, "");
	com_msg_fini(&out);
	free(buf);

	com_msg_init(&in, COM_MSG_ERROR);
	in.u.error.code = BELLOWS_ENOTJOINED;
	encode(&in, &buf, &len);
	assert_int_equal(decode(buf, len, &lim, &out), 0);
	assert_int_equal(out.u.error.code, BELLOWS_ENOTJOINED);
	assert_non_null(out.u.error.message);
	assert_string_equal(out.u.error.message, "");
	com_msg_fini(&out);
	free(buf);

	/* A welcome to a job without decisions yet. */
	com_msg_init(&in, COM_MSG_WELCOME);
	in.u.welcome.job = xstrdup("new");
	encode(&in, &buf, &len);
	assert_int_equal(decode(buf, len, &lim, &out), 0);
	assert_string_equal(out.u.welcome.job, "new");
	assert_int_equal(out.u.welcome.n_decisions, 0);
	assert_null(out.u.welcome.decisions);
	com_msg_fini(&out);
	com_msg_fini(&in);
	free(buf);
}

static void
test_wire_keeps_an_empty_in_force_off_the_wire(void **state)
{
	com_limits lim = limits();
	com_msg in, out;
	com_decision zero;
	uint8_t *buf;
	size_t len, len_empty;

	memset(&zero, 0, sizeof(zero));
	make_hello(&in, 2);
	com_decision_fini(&in.u.hello.in_force);
	encode(&in, &buf, &len_empty);
	assert_int_equal(decode(buf, len_empty, &lim, &out), 0);
	assert_memory_equal(&out.u.hello.in_force, &zero, sizeof(zero));
	com_msg_fini(&out);
	free(buf);

	/* A decision with seq 0 but a state is still sent whole. */
	assert_int_equal(com_decision_init(&in.u.hello.in_force, NULL, 2), 0);
	in.u.hello.in_force.level[1] = 3.0;
	encode(&in, &buf, &len);
	assert_true(len > len_empty);
	assert_int_equal(decode(buf, len, &lim, &out), 0);
	assert_int_equal(out.u.hello.in_force.n_layers, 2);
	assert_true(out.u.hello.in_force.level[1] == 3.0);
	assert_true(out.u.hello.in_force.lr_scale == 1.0);
	com_msg_fini(&out);
	com_msg_fini(&in);
	free(buf);
}

static void
test_wire_fills_an_absent_decision_array_with_zeros(void **state)
{
	com_limits lim = limits();
	double bound[3] = { 0.1, 0.2, 0.3 };
	wire d = { 0 }, env;
	com_msg out;

	/* No level array, no lr_scale: three layers, raw, LR unchanged. */
	w_str(&d, 1, "job");
	w_uint(&d, 2, 4);
	w_doubles(&d, 6, bound, 3);
	env = w_envelope(F_DECISION, &d);
	assert_int_equal(decode(env.b, env.n, &lim, &out), 0);
	assert_int_equal(out.u.decision.n_layers, 3);
	for (int i = 0; i < 3; i++) {
		assert_true(out.u.decision.level[i] == 0.0);
		assert_true(out.u.decision.error_bound[i] == bound[i]);
	}
	assert_true(out.u.decision.lr_scale == 1.0);
	assert_int_equal(out.u.decision.seq, 4);
	com_msg_fini(&out);
	free(env.b);
}

static void
test_wire_accepts_newer_minor_and_unknown_fields(void **state)
{
	com_limits lim = limits();
	wire hello, env = { 0 };
	uint32_t shape[2] = { 3, 4 };
	com_msg out;

	hello = w_hello_with_shape(shape, 2, 12);
	w_uint(&hello, 99, 12345); /* a field of a later minor */
	w_str(&hello, 100, "future text");
	w_uint(&env, 1, BELLOWS_PROTO_MAJOR);
	w_uint(&env, 2, BELLOWS_PROTO_MINOR + 7);
	w_msg(&env, F_HELLO, &hello);
	w_uint(&env, 30, 1);
	assert_int_equal(decode(env.b, env.n, &lim, &out), 0);
	assert_int_equal(out.type, COM_MSG_HELLO);
	assert_int_equal(out.minor, BELLOWS_PROTO_MINOR + 7);
	assert_int_equal(out.u.hello.n_layers, 1);
	assert_int_equal(out.u.hello.layers[0].numel, 12);
	com_msg_fini(&out);
	free(env.b);
}

static void
test_wire_accepts_a_layer_without_shape(void **state)
{
	com_msg m;

	make_hello(&m, 3);
	m.u.hello.layers[1].ndim = 0; /* 1-D of numel elements */
	assert_int_equal(round_trip_default(&m), 0);
}

/* Offsets of the fields minor 1 appended, to set them one at a time. */
static const size_t new_stats_doubles[] = {
	offsetof(com_layer_stats, act_lbar),
	offsetof(com_layer_stats, act_nonzero),
	offsetof(com_layer_stats, act_bytes),
	offsetof(com_layer_stats, act_raw_bytes),
	offsetof(com_layer_stats, comm_raw_ms),
	offsetof(com_layer_stats, comm_comp_ms),
	offsetof(com_layer_stats, codec_ms),
};
static const size_t new_stats_counts[] = {
	offsetof(com_layer_stats, act_steps),
	offsetof(com_layer_stats, comm_raw_n),
	offsetof(com_layer_stats, comm_comp_n),
};
static const size_t new_timings_doubles[] = {
	offsetof(com_timings, backward_ms),
	offsetof(com_timings, codec_ms),
};
static const size_t new_timings_bytes[] = {
	offsetof(com_timings, mem_device_used),
	offsetof(com_timings, mem_device_total),
	offsetof(com_timings, mem_host_used),
	offsetof(com_timings, saved_bytes),
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* A report of one layer whose every field is zero. */
static void
make_empty_report(com_msg *m)
{
	com_msg_init(m, COM_MSG_REPORT);
	m->u.report.job = xstrdup("job");
	m->u.report.n_layers = 1;
	m->u.report.layers = xcalloc(1, sizeof(com_layer_stats));
}

/* Encodes and decodes m, checks that it comes back equal, frees both. */
static void
assert_round_trip(com_msg *m)
{
	com_limits lim = limits();
	com_msg out;
	uint8_t *buf;
	size_t len;

	encode(m, &buf, &len);
	assert_int_equal(decode(buf, len, &lim, &out), 0);
	assert_msg_equal(m, &out);
	com_msg_fini(&out);
	com_msg_fini(m);
	free(buf);
}

static void
test_wire_round_trips_each_new_field_alone(void **state)
{
	com_msg m;

	/* Alone, a field swapped with another or dropped would show. */
	for (size_t i = 0; i < N_OF(new_stats_doubles); i++) {
		make_empty_report(&m);
		*(double *)((char *)&m.u.report.layers[0] +
		    new_stats_doubles[i]) = 0.75;
		assert_round_trip(&m);
	}
	for (size_t i = 0; i < N_OF(new_stats_counts); i++) {
		make_empty_report(&m);
		*(uint32_t *)((char *)&m.u.report.layers[0] +
		    new_stats_counts[i]) = UINT32_MAX;
		assert_round_trip(&m);
	}
	for (size_t i = 0; i < N_OF(new_timings_doubles); i++) {
		make_empty_report(&m);
		*(double *)((char *)&m.u.report.timings +
		    new_timings_doubles[i]) = 1e9;
		assert_round_trip(&m);
	}
	for (size_t i = 0; i < N_OF(new_timings_bytes); i++) {
		make_empty_report(&m);
		*(uint64_t *)((char *)&m.u.report.timings +
		    new_timings_bytes[i]) = UINT64_MAX;
		assert_round_trip(&m);
	}
	/* Each field of a comm sample; an all-zero sample still counts. */
	for (int c = 0; c < 5; c++) {
		make_empty_report(&m);
		m.u.report.n_comm = 1;
		m.u.report.comm = xcalloc(1, sizeof(com_comm_sample));
		if (c == 0)
			m.u.report.comm[0].bytes = UINT64_MAX;
		else if (c == 1)
			m.u.report.comm[0].ms = 0.5;
		else if (c == 2)
			m.u.report.comm[0].count = UINT32_MAX;
		else if (c == 3)
			m.u.report.comm[0].compressed = true;
		assert_round_trip(&m);
	}
	/* Each field of a metric beside its required name. */
	for (int c = 0; c < 4; c++) {
		com_msg_init(&m, COM_MSG_TELEMETRY);
		m.u.telemetry.job = xstrdup("job");
		m.u.telemetry.n_metrics = 1;
		m.u.telemetry.metrics = xcalloc(1, sizeof(com_metric));
		m.u.telemetry.metrics[0].name = xstrdup("alpha_ms");
		if (c == 0)
			m.u.telemetry.metrics[0].policy = xstrdup("perfmodel");
		else if (c == 1)
			m.u.telemetry.metrics[0].layer = 65535;
		else if (c == 2)
			m.u.telemetry.metrics[0].layer = -1;
		else
			m.u.telemetry.metrics[0].value = -1e300;
		assert_round_trip(&m);
	}
	com_msg_init(&m, COM_MSG_DECISION);
	assert_int_equal(com_decision_init(&m.u.decision, "job", 2), 0);
	m.u.decision.seq = 1;
	m.u.decision.calibrate_steps = UINT64_MAX;
	/* Any bits of stats_skip go through: agents act on those they
	 * know. */
	m.u.decision.stats_skip = UINT64_MAX;
	assert_round_trip(&m);
}

/* Writes v into entry st of the struct at base, in the entry's type. */
static void
set_stat(const com_stat *st, void *base, double v)
{
	char *p = (char *)base + st->offset;

	if (st->type == BELLOWS_STAT_TYPE_F64) {
		memcpy(p, &v, sizeof(v));
	} else if (st->type == BELLOWS_STAT_TYPE_U32) {
		uint32_t u = v < 0 ? UINT32_MAX : (uint32_t)v;

		memcpy(p, &u, sizeof(u));
	} else {
		uint64_t u = v < 0 ? UINT64_MAX : (uint64_t)v;

		memcpy(p, &u, sizeof(u));
	}
}

/* A report of one layer with entry st (of the layer table when `layer`,
 * else of the timings) set to v alone, through the wire module: the decoder's
 * code; on success the value must come back. */
static int
stat_round_trip(const com_stat *st, bool layer, double v)
{
	com_limits lim = limits();
	com_msg m, out;
	uint8_t *buf;
	size_t len;
	int rc;

	make_empty_report(&m);
	set_stat(st,
	    layer ? (void *)&m.u.report.layers[0] : (void *)&m.u.report.timings,
	    v);
	encode(&m, &buf, &len);
	rc = decode(buf, len, &lim, &out);
	if (rc == 0) {
		const void *a = layer ? (const void *)&m.u.report.layers[0]
				      : (const void *)&m.u.report.timings;
		const void *b = layer ? (const void *)&out.u.report.layers[0]
				      : (const void *)&out.u.report.timings;

		assert_memory_equal((const char *)a + st->offset,
		    (const char *)b + st->offset,
		    st->type == BELLOWS_STAT_TYPE_U32 ? 4 : 8);
		assert_msg_equal(&m, &out);
		com_msg_fini(&out);
	}
	com_msg_fini(&m);
	free(buf);
	return rc;
}

/* Each statistic of the table, alone: the largest value of an integer
 * and a plain double come back; a double failing the table's check (NaN,
 * infinite, negative, a fraction above 1) is refused. */
static void
test_wire_checks_every_statistic_as_the_table_says(void **state)
{
	for (int t = 0; t < 2; t++) {
		const com_stat *table = t == 0 ? com_layer_stat_table
					       : com_timing_stat_table;
		size_t n = t == 0 ? COM_N_LSTATS : COM_N_TSTATS;

		for (size_t i = 0; i < n; i++) {
			const com_stat *st = &table[i];

			if (st->check == BELLOWS_STAT_CHECK_ANY) {
				assert_int_equal(stat_round_trip(st, t == 0,
						     -1),
				    0);
				continue;
			}
			assert_int_equal(stat_round_trip(st, t == 0, 0.75), 0);
			assert_int_equal(stat_round_trip(st, t == 0, 1.0), 0);
			assert_int_equal(stat_round_trip(st, t == 0, -0.5),
			    BELLOWS_EPROTO);
			assert_int_equal(stat_round_trip(st, t == 0, NAN),
			    BELLOWS_EPROTO);
			assert_int_equal(stat_round_trip(st, t == 0, INFINITY),
			    BELLOWS_EPROTO);
			assert_int_equal(stat_round_trip(st, t == 0, 1.5),
			    st->check == BELLOWS_STAT_CHECK_FRAC
				? BELLOWS_EPROTO
				: 0);
		}
	}
}

/* Each array statistic alone: its full length of values round-trips
 * (the largest included), absent stays absent, and a layer carrying one
 * value fewer or more than its length is refused. */
static void
test_wire_round_trips_each_array_statistic_and_refuses_other_lengths(
    void **state)
{
	com_limits lim = limits();
	com_msg m, out;

	(void)state;
	for (size_t k = 0; k < COM_N_LARRAYS; k++) {
		const com_stat_array *ar = &com_layer_array_table[k];
		uint64_t *v = xcalloc(ar->len, sizeof(uint64_t));

		for (uint32_t i = 0; i < ar->len; i++)
			v[i] = i == 0 ? UINT64_MAX : (uint64_t)i * 1000003u;
		make_empty_report(&m);
		memcpy((char *)&m.u.report.layers[0] + ar->offset, &v,
		    sizeof(v));
		assert_round_trip(&m);

		for (uint32_t n = ar->len - 1; n <= ar->len + 1; n++) {
			wire stats = { 0 }, report = { 0 }, env = { 0 };
			int want = n == ar->len ? 0 : BELLOWS_EPROTO;

			w_uint(&stats, 1, 0);
			for (uint32_t i = 0; i < n; i++)
				w_uint(&stats, ar->tag, i);
			w_str(&report, 1, "job");
			w_msg(&report, 6, &stats);
			w_uint(&env, 1, BELLOWS_PROTO_MAJOR);
			w_msg(&env, F_REPORT, &report);
			assert_int_equal(decode(env.b, env.n, &lim, &out),
			    want);
			if (want == 0) {
				const uint64_t *got = com_stat_array_get(ar,
				    &out.u.report.layers[0]);

				assert_non_null(got);
				assert_int_equal(got[ar->len - 1], ar->len - 1);
				com_msg_fini(&out);
			}
			free(env.b);
		}
	}
}

static void
test_wire_decodes_minor_0_messages_with_the_new_fields_zero(void **state)
{
	com_limits lim = limits();
	wire stats = { 0 }, timings = { 0 }, report = { 0 }, body = { 0 };
	wire env = { 0 };
	com_layer_stats zero_stats;
	com_msg out;

	/* A report as a minor-0 agent writes it. */
	w_uint(&stats, 1, 2);
	w_uint(&stats, 2, 100);
	w_double(&stats, 5, 4.5);
	w_uint(&stats, 10, 3);
	w_uint(&timings, 1, 3);
	w_double(&timings, 2, 30.0);
	w_str(&report, 1, "job");
	w_uint(&report, 3, 7);
	w_msg(&report, 6, &stats);
	w_msg(&report, 7, &timings);
	w_uint(&env, 1, BELLOWS_PROTO_MAJOR);
	w_uint(&env, 2, 0);
	w_msg(&env, F_REPORT, &report);
	assert_int_equal(decode(env.b, env.n, &lim, &out), 0);
	assert_int_equal(out.minor, 0);
	assert_int_equal(out.u.report.window, 7);
	assert_int_equal(out.u.report.n_layers, 1);
	assert_int_equal(out.u.report.layers[0].layer, 2);
	assert_int_equal(out.u.report.layers[0].count, 100);
	assert_true(out.u.report.layers[0].sum_sq == 4.5);
	assert_int_equal(out.u.report.layers[0].observed_steps, 3);
	memset(&zero_stats, 0, sizeof(zero_stats));
	memcpy(&zero_stats, out.u.report.layers,
	    offsetof(com_layer_stats, act_steps));
	assert_memory_equal(&zero_stats, out.u.report.layers,
	    sizeof(zero_stats));
	assert_true(out.u.report.timings.step_ms == 30.0);
	assert_true(out.u.report.timings.backward_ms == 0.0);
	assert_true(out.u.report.timings.codec_ms == 0.0);
	assert_int_equal(out.u.report.timings.mem_device_used, 0);
	assert_int_equal(out.u.report.timings.mem_device_total, 0);
	assert_int_equal(out.u.report.timings.mem_host_used, 0);
	assert_int_equal(out.u.report.n_comm, 0);
	assert_null(out.u.report.comm);
	com_msg_fini(&out);
	free(env.b);

	/* A decision and a telemetry of minor 0. */
	memset(&env, 0, sizeof(env));
	w_str(&body, 1, "job");
	w_uint(&body, 2, 9);
	w_uint(&body, 9, 4096);
	w_uint(&env, 1, BELLOWS_PROTO_MAJOR);
	w_msg(&env, F_DECISION, &body);
	assert_int_equal(decode(env.b, env.n, &lim, &out), 0);
	assert_int_equal(out.u.decision.seq, 9);
	assert_int_equal(out.u.decision.size_threshold, 4096);
	assert_int_equal(out.u.decision.calibrate_steps, 0);
	/* A daemon before minor 5 sends no stats_skip: compute everything. */
	assert_true(out.u.decision.stats_skip == 0);
	com_msg_fini(&out);
	free(env.b);

	memset(&env, 0, sizeof(env));
	w_str(&body, 1, "job");
	w_uint(&body, 2, 12);
	w_double(&body, 5, 99.5);
	w_uint(&env, 1, BELLOWS_PROTO_MAJOR);
	w_msg(&env, F_TELEMETRY, &body);
	assert_int_equal(decode(env.b, env.n, &lim, &out), 0);
	assert_int_equal(out.u.telemetry.window, 12);
	assert_true(out.u.telemetry.step_ms_median == 99.5);
	assert_int_equal(out.u.telemetry.n_metrics, 0);
	assert_null(out.u.telemetry.metrics);
	com_msg_fini(&out);
	free(env.b);
}

/*
 * Frames refused as a whole.
 */

static void
test_wire_rejects_other_major_version_but_reports_type(void **state)
{
	com_limits lim = limits();
	com_msg in, out;
	uint8_t *buf;
	size_t len;

	make_msg(&in, COM_MSG_HELLO);
	in.major = BELLOWS_PROTO_MAJOR + 1;
	in.minor = 3;
	encode(&in, &buf, &len);
	com_msg_fini(&in);
	assert_int_equal(decode(buf, len, &lim, &out), BELLOWS_EVERSION);
	assert_int_equal(out.type, COM_MSG_HELLO);
	assert_int_equal(out.major, BELLOWS_PROTO_MAJOR + 1);
	assert_int_equal(out.minor, 3);
	assert_null(out.u.hello.job);
	assert_null(out.u.hello.layers);
	com_msg_fini(&out);
	free(buf);

	/* Major 0 (a struct never initialised) is another version too. */
	make_msg(&in, COM_MSG_HEARTBEAT);
	in.major = 0;
	encode(&in, &buf, &len);
	com_msg_fini(&in);
	assert_int_equal(decode(buf, len, &lim, &out), BELLOWS_EVERSION);
	assert_int_equal(out.type, COM_MSG_HEARTBEAT);
	com_msg_fini(&out);
	free(buf);
}

static void
test_wire_rejects_oversize_frame(void **state)
{
	com_limits lim = limits();
	com_msg in, out;
	uint8_t *buf;
	size_t len;

	make_msg(&in, COM_MSG_REPORT);
	encode(&in, &buf, &len);
	com_msg_fini(&in);
	lim.max_msg_bytes = len - 1;
	assert_int_equal(decode(buf, len, &lim, &out), BELLOWS_EMSGSIZE);
	lim.max_msg_bytes = len;
	assert_int_equal(decode(buf, len, &lim, &out), 0);
	com_msg_fini(&out);
	free(buf);
}

static void
test_wire_rejects_empty_frame_and_missing_body(void **state)
{
	com_limits lim = limits();
	static const uint8_t version_only[] = { 0x08, 0x01, 0x10, 0x00 };
	static const uint8_t unknown_body[] = { 0x08, 0x01, 0xba, 0x01, 0x00 };
	com_msg out;

	assert_int_equal(decode(NULL, 0, &lim, &out), BELLOWS_EPROTO);
	assert_int_equal(decode(version_only, sizeof(version_only), &lim, &out),
	    BELLOWS_EPROTO);
	/* Field 23: a body type this build does not know. */
	assert_int_equal(decode(unknown_body, sizeof(unknown_body), &lim, &out),
	    BELLOWS_EPROTO);
}

static void
test_wire_rejects_broken_wire_format(void **state)
{
	com_limits lim = limits();
	static const uint8_t *const frames[] = {
		(const uint8_t *)"\x08",         /* varint cut */
		(const uint8_t *)"\x52\x05\x0a", /* length past end */
		(const uint8_t *)"\x0b\x01",     /* start group */
		(const uint8_t *)"\x0f\x01",     /* wire type 7 */
		(const uint8_t *)"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff"
				 "\xff\x01", /* 11-byte varint */
	};
	static const size_t lens[] = { 1, 3, 2, 2, 12 };
	com_msg out;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		assert_int_equal(decode(frames[i], lens[i], &lim, &out),
		    BELLOWS_EPROTO);
}

/*
 * Fields out of their limits, each by one.
 */

static void
test_wire_rejects_bad_names(void **state)
{
	com_limits lim = limits();
	char name[258];
	com_msg m;

	memset(name, 'n', sizeof(name));
	name[256] = '\0';
	make_msg(&m, COM_MSG_HEARTBEAT);
	free(m.u.heartbeat.job);
	m.u.heartbeat.job = xstrdup(name);
	assert_int_equal(round_trip_rc(&m, &lim), 0);

	name[256] = 'n';
	name[257] = '\0';
	make_msg(&m, COM_MSG_HEARTBEAT);
	free(m.u.heartbeat.job);
	m.u.heartbeat.job = xstrdup(name);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* Empty job names: NULL and "" go out the same way. */
	make_msg(&m, COM_MSG_BYE);
	free(m.u.bye.job);
	m.u.bye.job = NULL;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_DECISION);
	m.u.decision.job[0] = '\0';
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* Control bytes, in a job and in a layer name. */
	make_msg(&m, COM_MSG_REPORT);
	m.u.report.job[2] = '\n';
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_HELLO);
	m.u.hello.layers[4].name[0] = 0x7f;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_HELLO);
	m.u.hello.layers[4].name[1] = 0x1f;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_HELLO);
	free(m.u.hello.layers[2].name);
	m.u.hello.layers[2].name = xstrdup("");
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* Names are UTF-8 (protobuf strings): a well-formed multi-byte
	 * character is fine; a stray byte, a sequence cut short, an overlong
	 * form or a surrogate is refused, in a job name as in a layer's. */
	make_msg(&m, COM_MSG_HELLO);
	m.u.hello.layers[4].name[0] = (char)0xc3;
	m.u.hello.layers[4].name[1] = (char)0xa9;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_msg(&m, COM_MSG_HELLO);
	m.u.hello.layers[4].name[0] = (char)0xc3;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_HELLO);
	m.u.hello.layers[4].name[0] = (char)0xa9;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_HELLO);
	m.u.hello.layers[4].name[0] = (char)0xc0; /* overlong '/' */
	m.u.hello.layers[4].name[1] = (char)0xaf;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_HELLO);
	m.u.hello.layers[4].name[0] = (char)0xed; /* U+D800 */
	m.u.hello.layers[4].name[1] = (char)0xa0;
	m.u.hello.layers[4].name[2] = (char)0x80;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_REPORT);
	m.u.report.job[1] = (char)0xd4;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* A smaller configured limit is honoured exactly. */
	lim.max_name_len = 8;
	make_msg(&m, COM_MSG_BYE); /* "resnet50": 8 bytes */
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	lim.max_name_len = 7;
	make_msg(&m, COM_MSG_BYE);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_refuses_a_run_id_over_255_bytes(void **state)
{
	com_limits lim = limits();
	char id[257];
	com_msg m;

	memset(id, 'r', sizeof(id));
	id[255] = '\0';
	make_msg(&m, COM_MSG_HELLO);
	free(m.u.hello.run_id);
	m.u.hello.run_id = xstrdup(id);
	assert_int_equal(round_trip_rc(&m, &lim), 0);

	/* 256 bytes: refused although job names may have 256. */
	id[255] = 'r';
	id[256] = '\0';
	make_msg(&m, COM_MSG_HELLO);
	free(m.u.hello.run_id);
	m.u.hello.run_id = xstrdup(id);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* A larger name limit does not widen it. */
	lim.max_name_len = 1024;
	make_msg(&m, COM_MSG_HELLO);
	free(m.u.hello.run_id);
	m.u.hello.run_id = xstrdup(id);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_names_with_embedded_nul(void **state)
{
	com_limits lim = limits();
	wire bye = { 0 }, env;

	w_bytes(&bye, 1, "res\0net", 7);
	env = w_envelope(F_BYE, &bye);
	assert_int_equal(decode_wire(&env, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_long_texts(void **state)
{
	com_limits lim = limits();
	com_msg m;

	lim.max_text_len = 21; /* "critical regime ended" */
	make_msg(&m, COM_MSG_DECISION);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	lim.max_text_len = 20;
	make_msg(&m, COM_MSG_DECISION);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	lim = limits();
	lim.max_text_len = 10; /* "0.1.0-test" */
	make_msg(&m, COM_MSG_HELLO);
	free(m.u.hello.in_force.policy);
	free(m.u.hello.in_force.reason);
	m.u.hello.in_force.policy = NULL;
	m.u.hello.in_force.reason = NULL;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	lim.max_text_len = 9;
	make_msg(&m, COM_MSG_HELLO);
	free(m.u.hello.in_force.policy);
	free(m.u.hello.in_force.reason);
	m.u.hello.in_force.policy = NULL;
	m.u.hello.in_force.reason = NULL;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	lim = limits();
	lim.max_text_len = 5;
	make_msg(&m, COM_MSG_ERROR);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_STATUS_REPLY);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_too_many_layers(void **state)
{
	com_limits lim = limits();
	com_msg m;

	lim.max_layers = 6;
	make_hello(&m, 6);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_hello(&m, 7);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* Report indices run 1, 3, 5...: 3 layers reach index 5. */
	make_report(&m, 3);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_report(&m, 7);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	com_msg_init(&m, COM_MSG_DECISION);
	make_decision(&m.u.decision, "job", 6, 1);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	com_msg_init(&m, COM_MSG_DECISION);
	make_decision(&m.u.decision, "job", 7, 1);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* A report layer index must lie inside any possible table. */
	make_report(&m, 1);
	m.u.report.layers[0].layer = 5;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_report(&m, 1);
	m.u.report.layers[0].layer = 6;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_bad_world_and_rank(void **state)
{
	com_limits lim = limits();
	com_msg m;

	lim.max_world = 8;
	make_hello(&m, 1); /* rank 3 of 8 */
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_hello(&m, 1);
	m.u.hello.world = 9;
	m.u.hello.rank = 0;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_hello(&m, 1);
	m.u.hello.world = 0;
	m.u.hello.rank = 0;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_hello(&m, 1);
	m.u.hello.rank = 8;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_hello(&m, 1);
	m.u.hello.world = 4;
	m.u.hello.rank = 4;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* Messages without a world bound their rank by max_world. */
	make_msg(&m, COM_MSG_HEARTBEAT);
	m.u.heartbeat.rank = 7;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_msg(&m, COM_MSG_HEARTBEAT);
	m.u.heartbeat.rank = 8;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_REPORT);
	m.u.report.rank = 8;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_BYE);
	m.u.bye.rank = 8;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_SNAPSHOT_REQUEST);
	m.u.snapshot_request.rank = 8;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_WELCOME);
	m.u.welcome.rank = 8;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_TELEMETRY);
	m.u.telemetry.ranks_expected = 9;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_shape_that_does_not_multiply_to_numel(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_hello(&m, 4);
	m.u.hello.layers[3].numel += 1;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* 2^32-1 cubed wraps around 64 bits: the product must not. */
	make_hello(&m, 1);
	m.u.hello.layers[0].ndim = 3;
	for (int d = 0; d < 3; d++)
		m.u.hello.layers[0].shape[d] = UINT32_MAX;
	m.u.hello.layers[0].numel = (uint64_t)UINT32_MAX * UINT32_MAX *
	    UINT32_MAX;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* A zero dimension is a legal empty tensor. */
	make_hello(&m, 1);
	m.u.hello.layers[0].ndim = 2;
	m.u.hello.layers[0].shape[0] = 0;
	m.u.hello.layers[0].shape[1] = 5;
	m.u.hello.layers[0].numel = 0;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
}

static void
test_wire_rejects_more_than_eight_dimensions(void **state)
{
	com_limits lim = limits();
	uint32_t shape[COM_MAX_NDIM + 1];
	wire hello, env;

	for (int i = 0; i <= COM_MAX_NDIM; i++)
		shape[i] = 1;
	hello = w_hello_with_shape(shape, COM_MAX_NDIM, 1);
	env = w_envelope(F_HELLO, &hello);
	assert_int_equal(decode_wire(&env, &lim), 0);
	hello = w_hello_with_shape(shape, COM_MAX_NDIM + 1, 1);
	env = w_envelope(F_HELLO, &hello);
	assert_int_equal(decode_wire(&env, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_duplicate_layer_names(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_hello(&m, 6);
	free(m.u.hello.layers[5].name);
	m.u.hello.layers[5].name = xstrdup(m.u.hello.layers[0].name);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	make_hello(&m, 6);
	free(m.u.hello.layers[3].name);
	m.u.hello.layers[3].name = xstrdup(m.u.hello.layers[2].name);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_duplicate_report_indices(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_report(&m, 5);
	m.u.report.layers[1].layer = m.u.report.layers[0].layer;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	make_report(&m, 5);
	m.u.report.layers[4].layer = m.u.report.layers[1].layer;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* Out of order but unique is fine. */
	make_report(&m, 5);
	m.u.report.layers[0].layer = 100;
	m.u.report.layers[4].layer = 0;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
}

static void
test_wire_refuses_a_report_covering_ranks_past_the_world_limit(void **state)
{
	com_limits lim = limits();
	com_msg m;

	(void)state;
	lim.max_world = 8;
	make_report(&m, 2); /* rank 2 */
	m.u.report.ranks = 6;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_report(&m, 2);
	m.u.report.ranks = 7;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_report(&m, 2);
	m.u.report.ranks = UINT32_MAX;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_report(&m, 2);
	m.u.report.layers[1].acc_norm_mean = NAN;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_report(&m, 2);
	m.u.report.layers[0].acc_norm_mean = -1;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_mismatched_decision_arrays(void **state)
{
	com_limits lim = limits();
	double v[3] = { 1.0, 2.0, 3.0 };
	wire d = { 0 }, env;

	w_str(&d, 1, "job");
	w_doubles(&d, 5, v, 2);
	w_doubles(&d, 6, v, 3);
	env = w_envelope(F_DECISION, &d);
	assert_int_equal(decode_wire(&env, &lim), BELLOWS_EPROTO);

	w_str(&d, 1, "job");
	w_doubles(&d, 5, v, 3);
	w_doubles(&d, 6, v, 1);
	env = w_envelope(F_DECISION, &d);
	assert_int_equal(decode_wire(&env, &lim), BELLOWS_EPROTO);

	w_str(&d, 1, "job");
	w_doubles(&d, 5, v, 3);
	w_doubles(&d, 6, v, 3);
	env = w_envelope(F_DECISION, &d);
	assert_int_equal(decode_wire(&env, &lim), 0);
}

static void
test_wire_refuses_residual_plans_that_break_the_rules(void **state)
{
	com_limits lim = limits();
	com_msg m;

	(void)state;
	for (int c = 0; c < 7; c++) {
		com_decision *d;

		make_msg(&m, COM_MSG_DECISION);
		d = &m.u.decision;
		switch (c) {
		case 0: /* layer 2 shares layer 1's, which is not a leader */
			d->resid_group[2] = 1;
			break;
		case 1: /* no such layer */
			d->resid_group[2] = d->n_layers;
			break;
		case 2: /* phi outside [0, 1] at a leader */
			d->resid_phi[0] = 1.5;
			break;
		case 3: /* nothing kept */
			d->resid_rows[3] = 0.0;
			break;
		case 4: /* more than whole */
			d->resid_cols[3] = 1.25;
			break;
		case 5: /* a reduced layer inside a group */
			d->resid_rows[1] = 0.5;
			break;
		case 6: /* NaN */
			d->resid_cols[2] = NAN;
			break;
		}
		assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	}
	/* A phi out of range at a member (not read) is no error; a plan
	 * equal to the default one goes out as none and comes back none. */
	make_msg(&m, COM_MSG_DECISION);
	m.u.decision.resid_phi[1] = 7.0;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	{
		com_msg out;
		uint8_t *buf;
		size_t len;
		com_decision *d;

		make_msg(&m, COM_MSG_DECISION);
		d = &m.u.decision;
		d->resid_group[1] = 1;
		d->resid_phi[0] = 0.5;
		d->resid_rows[d->n_layers - 1] = 1.0;
		d->resid_cols[d->n_layers - 1] = 1.0;
		encode(&m, &buf, &len);
		assert_int_equal(decode(buf, len, &lim, &out), 0);
		assert_null(out.u.decision.resid_group);
		assert_true(
		    com_decision_same_state(&m.u.decision, &out.u.decision));
		com_msg_fini(&out);
		com_msg_fini(&m);
		free(buf);
	}
}

static void
test_wire_rejects_non_finite_and_negative_values(void **state)
{
	com_limits lim = limits();
	com_msg m;

	for (int c = 0; c < 10; c++) {
		if (c < 6)
			make_msg(&m, COM_MSG_DECISION);
		else
			make_msg(&m, COM_MSG_REPORT);
		switch (c) {
		case 0:
			m.u.decision.level[3] = NAN;
			break;
		case 1:
			m.u.decision.level[0] = -1.0;
			break;
		case 2:
			m.u.decision.error_bound[6] = INFINITY;
			break;
		case 3:
			m.u.decision.error_bound[6] = -1e-9;
			break;
		case 4:
			m.u.decision.lr_scale = NAN;
			break;
		case 5:
			m.u.decision.lr_scale = -0.5;
			break;
		case 6:
			m.u.report.layers[2].sum_sq = NAN;
			break;
		case 7:
			m.u.report.layers[4].acc_norm = -INFINITY;
			break;
		case 8:
			m.u.report.timings.comm_ms = INFINITY;
			break;
		default:
			m.u.report.lr = NAN;
			break;
		}
		assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	}

	make_msg(&m, COM_MSG_TELEMETRY);
	m.u.telemetry.step_ms_median = NAN;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	make_msg(&m, COM_MSG_STATUS_REPLY);
	m.u.status_reply.latency_p99_ms = -1.0;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_STATUS_REPLY);
	m.u.status_reply.latency_max_ms = INFINITY;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* -0.0 is zero, not negative. */
	make_msg(&m, COM_MSG_DECISION);
	m.u.decision.level[0] = -0.0;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
}

static void
test_wire_rejects_bad_activation_timing_and_comm_values(void **state)
{
	com_limits lim = limits();
	com_msg m;

	for (int c = 0; c < 14; c++) {
		com_layer_stats *s;

		make_msg(&m, COM_MSG_REPORT);
		s = &m.u.report.layers[1];
		switch (c) {
		case 0:
			s->act_lbar = NAN;
			break;
		case 1:
			s->act_lbar = -1e-3;
			break;
		case 2:
			s->act_nonzero = 1.0 + 1e-12;
			break;
		case 3:
			s->act_nonzero = -0.5;
			break;
		case 4:
			s->act_bytes = INFINITY;
			break;
		case 5:
			s->act_raw_bytes = -1.0;
			break;
		case 6:
			s->comm_raw_ms = NAN;
			break;
		case 7:
			s->comm_comp_ms = -2.0;
			break;
		case 8:
			s->codec_ms = INFINITY;
			break;
		case 9:
			m.u.report.timings.backward_ms = -1.0;
			break;
		case 10:
			m.u.report.timings.codec_ms = NAN;
			break;
		case 11:
			m.u.report.comm[2].ms = NAN;
			break;
		case 12:
			m.u.report.comm[0].ms = -0.5;
			break;
		default:
			m.u.report.comm[1].ms = INFINITY;
			break;
		}
		if (round_trip_rc(&m, &lim) != BELLOWS_EPROTO)
			fail_msg("case %d was not refused", c);
	}

	/* The ends of the ranges are inside. */
	make_msg(&m, COM_MSG_REPORT);
	m.u.report.layers[0].act_nonzero = 1.0;
	m.u.report.layers[1].act_nonzero = 0.0;
	m.u.report.comm[0].ms = 0.0;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
}

static void
test_wire_rejects_bad_metrics(void **state)
{
	com_limits lim = limits();
	char name[258];
	com_msg m;

	memset(name, 'm', sizeof(name));
	name[257] = '\0';
	for (int c = 0; c < 10; c++) {
		com_metric *x;

		make_msg(&m, COM_MSG_TELEMETRY);
		x = &m.u.telemetry.metrics[1];
		switch (c) {
		case 0:
			x->value = NAN;
			break;
		case 1:
			x->value = -INFINITY;
			break;
		case 2:
			x->layer = -2;
			break;
		case 3:
			x->layer = (int32_t)lim.max_layers;
			break;
		case 4:
			free(x->name);
			x->name = xstrdup("");
			break;
		case 5:
			free(x->name);
			x->name = NULL;
			break;
		case 6:
			free(x->name);
			x->name = xstrdup("e\tb");
			break;
		case 7:
			free(x->name);
			x->name = xstrdup(name);
			break;
		case 8:
			free(x->policy);
			x->policy = xstrdup(name);
			break;
		default:
			free(x->policy);
			x->policy = xstrdup("com\x1b[2Jet");
			break;
		}
		if (round_trip_rc(&m, &lim) != BELLOWS_EPROTO)
			fail_msg("case %d was not refused", c);
	}

	/* 256 bytes is a name; a metric may lack a policy name. */
	name[256] = '\0';
	make_msg(&m, COM_MSG_TELEMETRY);
	free(m.u.telemetry.metrics[0].name);
	m.u.telemetry.metrics[0].name = xstrdup(name);
	free(m.u.telemetry.metrics[0].policy);
	m.u.telemetry.metrics[0].policy = NULL;
	m.u.telemetry.metrics[2].layer = (int32_t)lim.max_layers - 1;
	assert_int_equal(round_trip_rc(&m, &lim), 0);
}

/* A report of n comm samples or a telemetry of n metrics. */
static void
make_many(com_msg *m, com_msg_type type, uint32_t n)
{
	char name[32];

	if (type == COM_MSG_REPORT) {
		make_report(m, 1);
		free(m->u.report.comm);
		m->u.report.comm = xcalloc(n, sizeof(com_comm_sample));
		m->u.report.n_comm = n;
		for (uint32_t i = 0; i < n; i++) {
			m->u.report.comm[i].bytes = 1000 + i;
			m->u.report.comm[i].ms = 0.5;
			m->u.report.comm[i].count = 1;
		}
		return;
	}
	com_msg_init(m, COM_MSG_TELEMETRY);
	m->u.telemetry.job = xstrdup("job");
	m->u.telemetry.metrics = xcalloc(n, sizeof(com_metric));
	m->u.telemetry.n_metrics = n;
	for (uint32_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "m%u", i);
		m->u.telemetry.metrics[i].name = xstrdup(name);
		m->u.telemetry.metrics[i].policy = xstrdup("perfmodel");
		m->u.telemetry.metrics[i].layer = -1;
		m->u.telemetry.metrics[i].value = i;
	}
}

static void
test_wire_limits_comm_samples_and_metrics(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_many(&m, COM_MSG_REPORT, 256);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_many(&m, COM_MSG_REPORT, 257);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_many(&m, COM_MSG_TELEMETRY, 4096);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_many(&m, COM_MSG_TELEMETRY, 4097);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);

	/* The limits are the caller's, and only these two fields count. */
	lim.max_comm = 2;
	lim.max_metrics = 3;
	make_many(&m, COM_MSG_REPORT, 2);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_many(&m, COM_MSG_REPORT, 3);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_many(&m, COM_MSG_TELEMETRY, 3);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_many(&m, COM_MSG_TELEMETRY, 4);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
make_decisions(com_msg *m, com_msg_type type, uint32_t n)
{
	com_decision *d = xcalloc(n, sizeof(*d));

	com_msg_init(m, type);
	for (uint32_t i = 0; i < n; i++)
		make_decision(&d[i], NULL, 1, i + 1);
	if (type == COM_MSG_WELCOME) {
		m->u.welcome.job = xstrdup("job");
		m->u.welcome.decisions = d;
		m->u.welcome.n_decisions = n;
	} else {
		m->u.snapshot.job = xstrdup("job");
		m->u.snapshot.decisions = d;
		m->u.snapshot.n_decisions = n;
	}
}

static void
test_wire_rejects_too_many_decisions(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_decisions(&m, COM_MSG_WELCOME, 64);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_decisions(&m, COM_MSG_WELCOME, 65);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_decisions(&m, COM_MSG_SNAPSHOT, 64);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	make_decisions(&m, COM_MSG_SNAPSHOT, 65);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_decisions_out_of_seq_order(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_decisions(&m, COM_MSG_SNAPSHOT, 3);
	m.u.snapshot.decisions[2].seq = 2;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_decisions(&m, COM_MSG_WELCOME, 3);
	m.u.welcome.decisions[0].seq = 3;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_oversize_codec_table(void **state)
{
	com_limits lim = limits();
	com_msg m;

	lim.max_codec_table = 5;
	make_msg(&m, COM_MSG_DECISION);
	assert_int_equal(round_trip_rc(&m, &lim), 0);
	lim.max_codec_table = 4;
	make_msg(&m, COM_MSG_DECISION);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_carries_a_64_kib_codec_table_by_default_and_no_more(void **state)
{
	com_limits lim = limits();
	com_msg m;
	uint8_t *buf;
	size_t len;
	com_msg out;

	for (size_t n = COM_CODEC_TABLE_MAX - 1; n <= COM_CODEC_TABLE_MAX + 1;
	     n++) {
		make_msg(&m, COM_MSG_DECISION);
		free(m.u.decision.codec_table);
		m.u.decision.codec_table = xcalloc(n, 1);
		m.u.decision.codec_table_len = n;
		for (size_t i = 0; i < n; i++)
			m.u.decision.codec_table[i] = (uint8_t)(i * 7 + n);
		encode(&m, &buf, &len);
		if (n > COM_CODEC_TABLE_MAX) {
			assert_int_equal(decode(buf, len, &lim, &out),
			    BELLOWS_EPROTO);
		} else {
			assert_int_equal(decode(buf, len, &lim, &out), 0);
			assert_int_equal(out.u.decision.codec_table_len, n);
			assert_memory_equal(out.u.decision.codec_table,
			    m.u.decision.codec_table, n);
		}
		com_msg_fini(&out);
		com_msg_fini(&m);
		free(buf);
	}
}

static void
test_wire_rejects_in_force_for_another_layer_table(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_hello(&m, 4);
	com_decision_fini(&m.u.hello.in_force);
	make_decision(&m.u.hello.in_force, "resnet50", 3, 2);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_hello(&m, 4);
	m.u.hello.in_force.level[2] = NAN;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_status_reply_over_limits(void **state)
{
	com_limits lim = limits();
	com_msg m;

	lim.max_jobs = 2;
	lim.max_peers = 2;
	lim.max_world = 4;
	make_status_reply(&m);
	assert_int_equal(round_trip_rc(&m, &lim), 0);

	lim.max_jobs = 1;
	make_status_reply(&m);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	lim.max_jobs = 2;
	lim.max_peers = 1;
	make_status_reply(&m);
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	lim.max_peers = 2;
	lim.max_world = 2; /* job alpha lists 3 ranks */
	make_status_reply(&m);
	m.u.status_reply.jobs[0].world = 2;
	m.u.status_reply.jobs[1].world = 2;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	lim.max_world = 4;
	make_status_reply(&m);
	m.u.status_reply.jobs[1].ranks[0].rank = 4;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	lim.max_name_len = 4; /* a routing id of 5 bytes */
	make_status_reply(&m);
	free(m.u.status_reply.jobs[0].job);
	m.u.status_reply.jobs[0].job = xstrdup("a");
	free(m.u.status_reply.jobs[1].job);
	m.u.status_reply.jobs[1].job = xstrdup("b");
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	lim.max_name_len = 256;
	lim.max_peers = 1; /* events count against it like peers */
	make_status_reply(&m);
	for (uint32_t i = 0; i < m.u.status_reply.n_peers; i++) {
		free(m.u.status_reply.peers[i].peer);
		free(m.u.status_reply.peers[i].last_error);
	}
	free(m.u.status_reply.peers);
	m.u.status_reply.peers = NULL;
	m.u.status_reply.n_peers = 0;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	lim.max_peers = 2;
	make_status_reply(&m);
	free(m.u.status_reply.events[1].kind);
	m.u.status_reply.events[1].kind = xstrdup(""); /* a kind is required */
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
}

static void
test_wire_rejects_error_without_error_code(void **state)
{
	com_limits lim = limits();
	com_msg m;

	make_msg(&m, COM_MSG_ERROR);
	m.u.error.code = 0;
	assert_int_equal(round_trip_rc(&m, &lim), BELLOWS_EPROTO);
	make_msg(&m, COM_MSG_ERROR);
	m.u.error.code = -1000; /* appended after this build */
	assert_int_equal(round_trip_rc(&m, &lim), 0);
}

static void
test_wire_counts_merged_sub_messages(void **state)
{
	com_limits lim = limits();
	double v = 1.0;
	wire a = { 0 }, b = { 0 }, hello = { 0 }, env;

	/* protobuf merges an embedded message sent twice: the two in_force
	 * decisions become one with both level lists, together over the
	 * limit that each is within. */
	lim.max_layers = 1;
	w_doubles(&a, 5, &v, 1);
	w_doubles(&b, 5, &v, 1);
	w_str(&hello, 1, "job");
	w_uint(&hello, 3, 1);
	w_msg(&hello, 8, &a);
	w_msg(&hello, 8, &b);
	env = w_envelope(F_HELLO, &hello);
	assert_int_equal(decode_wire(&env, &lim), BELLOWS_EPROTO);
}

static void
test_wire_counts_unpacked_repeated_fields(void **state)
{
	com_limits lim = limits();
	double v = 1.0;
	wire d = { 0 }, env;

	/* Repeated doubles may also come one field each. */
	lim.max_layers = 2;
	w_str(&d, 1, "job");
	for (int i = 0; i < 2; i++) {
		w_tag(&d, 5, 1);
		w_raw(&d, &v, sizeof(v));
	}
	env = w_envelope(F_DECISION, &d);
	assert_int_equal(decode_wire(&env, &lim), 0);

	w_str(&d, 1, "job");
	for (int i = 0; i < 3; i++) {
		w_tag(&d, 5, 1);
		w_raw(&d, &v, sizeof(v));
	}
	env = w_envelope(F_DECISION, &d);
	assert_int_equal(decode_wire(&env, &lim), BELLOWS_EPROTO);
}

static void
test_wire_accepts_65536_layers_and_refuses_65537(void **state)
{
	com_limits lim = limits();
	com_msg in, out;
	uint8_t *buf;
	size_t len;
	uint64_t t0, ms;

	make_hello(&in, 65536);
	encode(&in, &buf, &len);
	t0 = com_clock_ms();
	assert_int_equal(decode(buf, len, &lim, &out), 0);
	ms = com_clock_ms() - t0;
	print_message(
	    "decoded a hello of 65536 layers (%zu bytes) in %llu ms\n", len,
	    (unsigned long long)ms);
	assert_int_equal(out.u.hello.n_layers, 65536);
	assert_string_equal(out.u.hello.layers[65535].name,
	    "layer65535.weight");
	com_msg_fini(&out);
	com_msg_fini(&in);
	free(buf);

	/* Duplicates are found in a table this size too. */
	make_hello(&in, 65536);
	free(in.u.hello.layers[40000].name);
	in.u.hello.layers[40000].name = xstrdup("layer7.weight");
	assert_int_equal(round_trip_rc(&in, &lim), BELLOWS_EPROTO);

	make_hello(&in, 65537);
	assert_int_equal(round_trip_rc(&in, &lim), BELLOWS_EPROTO);
}

static void
test_wire_accepts_a_full_report_and_welcome(void **state)
{
	com_limits lim = limits();
	com_msg m;

	/* The largest legal frames must fit the decoder's memory budget,
	 * even with most fields zero (cheap on the wire, not in memory). */
	make_report(&m, 65536);
	for (uint32_t i = 0; i < 65536; i++) {
		memset(&m.u.report.layers[i], 0, sizeof(com_layer_stats));
		m.u.report.layers[i].layer = i;
	}
	free(m.u.report.comm);
	m.u.report.n_comm = 256;
	m.u.report.comm = xcalloc(256, sizeof(com_comm_sample));
	assert_int_equal(round_trip_rc(&m, &lim), 0);

	/* A telemetry of 4096 metrics of empty values, likewise. */
	make_many(&m, COM_MSG_TELEMETRY, 4096);
	for (uint32_t i = 0; i < 4096; i++) {
		m.u.telemetry.metrics[i].value = 0.0;
		m.u.telemetry.metrics[i].layer = 0;
	}
	assert_int_equal(round_trip_rc(&m, &lim), 0);

	make_decisions(&m, COM_MSG_WELCOME, 64);
	for (uint32_t i = 0; i < 64; i++) {
		com_decision_fini(&m.u.welcome.decisions[i]);
		make_decision(&m.u.welcome.decisions[i], NULL, 8192, i + 1);
		/* Levels and bounds fill the frame; a residual plan (28
		 * more bytes per layer) in all 64 would pass 16 MiB. */
		free(m.u.welcome.decisions[i].resid_group);
		free(m.u.welcome.decisions[i].resid_phi);
		free(m.u.welcome.decisions[i].resid_rows);
		free(m.u.welcome.decisions[i].resid_cols);
		m.u.welcome.decisions[i].resid_group = NULL;
		m.u.welcome.decisions[i].resid_phi = NULL;
		m.u.welcome.decisions[i].resid_rows = NULL;
		m.u.welcome.decisions[i].resid_cols = NULL;
	}
	assert_int_equal(round_trip_rc(&m, &lim), 0);
}

static void
test_wire_encode_rejects_broken_invariants(void **state)
{
	com_msg m;
	uint8_t *buf = (uint8_t *)&m;
	size_t len = 12345;

	com_msg_init(&m, COM_MSG_NONE);
	assert_int_equal(com_wire_encode(&m, &buf, &len), BELLOWS_EINVAL);
	m.type = COM_MSG_TYPE_MAX;
	assert_int_equal(com_wire_encode(&m, &buf, &len), BELLOWS_EINVAL);

	for (int c = 0; c < 11; c++) {
		void *keep = NULL;

		/* Break one invariant, check, then mend it for com_msg_fini. */
		switch (c) {
		case 0:
			make_msg(&m, COM_MSG_DECISION);
			keep = m.u.decision.level;
			m.u.decision.level = NULL;
			break;
		case 1:
			make_msg(&m, COM_MSG_HELLO);
			keep = m.u.hello.in_force.error_bound;
			m.u.hello.in_force.error_bound = NULL;
			break;
		case 2:
			make_msg(&m, COM_MSG_HELLO);
			m.u.hello.layers[1].ndim = COM_MAX_NDIM + 1;
			break;
		case 3:
			make_msg(&m, COM_MSG_REPORT);
			keep = m.u.report.layers;
			m.u.report.layers = NULL;
			break;
		case 4:
			make_msg(&m, COM_MSG_WELCOME);
			m.u.welcome.decisions[1].codec_table_len = 99;
			keep = m.u.welcome.decisions[1].codec_table;
			m.u.welcome.decisions[1].codec_table = NULL;
			break;
		case 5:
			make_msg(&m, COM_MSG_SNAPSHOT);
			keep = m.u.snapshot.decisions;
			m.u.snapshot.decisions = NULL;
			break;
		case 6:
			make_msg(&m, COM_MSG_STATUS_REPLY);
			keep = m.u.status_reply.jobs[1].ranks;
			m.u.status_reply.jobs[1].ranks = NULL;
			break;
		case 7:
			make_msg(&m, COM_MSG_STATUS_REPLY);
			keep = m.u.status_reply.peers[0].peer;
			m.u.status_reply.peers[0].peer = NULL;
			break;
		case 8:
			make_msg(&m, COM_MSG_REPORT);
			keep = m.u.report.comm;
			m.u.report.comm = NULL;
			break;
		case 9:
			make_msg(&m, COM_MSG_TELEMETRY);
			keep = m.u.telemetry.metrics;
			m.u.telemetry.metrics = NULL;
			break;
		default:
			make_msg(&m, COM_MSG_HELLO);
			keep = m.u.hello.layers;
			m.u.hello.layers = NULL;
			break;
		}
		assert_int_equal(com_wire_encode(&m, &buf, &len),
		    BELLOWS_EINVAL);
		/* Outputs untouched on failure. */
		assert_ptr_equal(buf, (uint8_t *)&m);
		assert_int_equal(len, 12345);
		switch (c) {
		case 0:
			m.u.decision.level = keep;
			break;
		case 1:
			m.u.hello.in_force.error_bound = keep;
			break;
		case 2:
			m.u.hello.layers[1].ndim = 1;
			break;
		case 3:
			m.u.report.layers = keep;
			break;
		case 4:
			m.u.welcome.decisions[1].codec_table = keep;
			break;
		case 5:
			m.u.snapshot.decisions = keep;
			break;
		case 6:
			m.u.status_reply.jobs[1].ranks = keep;
			break;
		case 7:
			m.u.status_reply.peers[0].peer = keep;
			break;
		case 8:
			m.u.report.comm = keep;
			break;
		case 9:
			m.u.telemetry.metrics = keep;
			break;
		default:
			m.u.hello.layers = keep;
			break;
		}
		com_msg_fini(&m);
	}
}

static void
test_wire_default_limits_match_the_contract(void **state)
{
	com_limits lim;

	com_limits_default(&lim);
	assert_int_equal(lim.max_msg_bytes, 16u << 20);
	assert_int_equal(lim.max_layers, 65536);
	assert_int_equal(lim.max_world, 65536);
	assert_int_equal(lim.max_name_len, 256);
	assert_int_equal(lim.max_text_len, 4096);
	assert_int_equal(lim.max_decisions, 64);
	assert_int_equal(lim.max_codec_table, 65536);
	assert_int_equal(lim.max_jobs, 4096);
	assert_int_equal(lim.max_peers, 4096);
	assert_int_equal(lim.max_comm, 256);
	assert_int_equal(lim.max_metrics, 4096);
}

/*
 * The fault suite: hostile and broken input, failed allocations.
 */

/* Any answer but a crash: an error with a zeroed message, or a message
 * valid enough to encode again. Returns the code. */
static int
assert_survives(const uint8_t *buf, size_t len, const com_limits *lim)
{
	com_msg out;
	uint8_t *again;
	size_t again_len;
	int rc = decode(buf, len, lim, &out);

	switch (rc) {
	case 0:
		assert_int_equal(com_wire_encode(&out, &again, &again_len), 0);
		free(again);
		break;
	case BELLOWS_EVERSION:
		assert_in_range(out.type, COM_MSG_HELLO, COM_MSG_TYPE_MAX - 1);
		break;
	case BELLOWS_EPROTO:
	case BELLOWS_EMSGSIZE:
		break;
	default:
		fail_msg("unexpected code %d", rc);
	}
	com_msg_fini(&out);
	return rc;
}

/* Decodes every proper prefix of m's frame; finalises m. */
static void
assert_survives_every_truncation(com_msg *in)
{
	com_limits lim = limits();
	com_msg out;
	uint8_t *buf;
	size_t len;

	encode(in, &buf, &len);
	com_msg_fini(in);
	for (size_t n = 0; n < len; n++) {
		/* A copy of exactly n bytes, so that ASan sees any read
		 * past the prefix. */
		uint8_t *prefix = malloc(n > 0 ? n : 1);
		int rc;

		assert_non_null(prefix);
		memcpy(prefix, buf, n);
		rc = decode(prefix, n, &lim, &out);
		if (rc != 0)
			assert_int_equal(rc, BELLOWS_EPROTO);
		com_msg_fini(&out);
		free(prefix);
	}
	free(buf);
}

static void
test_wire_survives_every_truncation_of_every_message_type(void **state)
{
	com_msg in;

	make_hello(&in, 12);
	assert_survives_every_truncation(&in);
	for (int t = COM_MSG_WELCOME; t < COM_MSG_TYPE_MAX; t++) {
		make_msg(&in, (com_msg_type)t);
		assert_survives_every_truncation(&in);
	}
}

static void
test_wire_survives_bit_flips_of_every_message_type(void **state)
{
	com_limits lim = limits();
	unsigned frames = 0, decoded = 0;

	for (int t = COM_MSG_HELLO; t < COM_MSG_TYPE_MAX; t++) {
		com_msg in;
		uint8_t *buf;
		size_t len;

		make_msg(&in, (com_msg_type)t);
		encode(&in, &buf, &len);
		com_msg_fini(&in);
		for (size_t bit = 0; bit < len * 8; bit++, frames++) {
			buf[bit / 8] ^= (uint8_t)(1u << bit % 8);
			decoded += assert_survives(buf, len, &lim) == 0;
			buf[bit / 8] ^= (uint8_t)(1u << bit % 8);
		}
		free(buf);
	}
	print_message("%u bit-flipped frames: %u decoded, %u refused\n", frames,
	    decoded, frames - decoded);
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void
test_wire_survives_random_garbage(void **state)
{
	com_limits lim = limits();
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint8_t buf[512];
	unsigned decoded = 0;

	for (int i = 0; i < 4000; i++) {
		size_t len = xorshift(&seed) % sizeof(buf);
		size_t start = 0;

		/* Half the buffers open like a real envelope: version 1 and
		 * a body of some type (fields 10..22, a two-byte tag from 16
		 * on) holding the rest, so the garbage reaches the message
		 * decoders too. */
		if (i % 2 == 1 && len >= 6) {
			unsigned tag = (10 + xorshift(&seed) % 13) << 3 | 2;

			if (len > 5 + 0x7f)
				len = 5 + 0x7f;
			buf[start++] = 0x08;
			buf[start++] = 0x01;
			if (tag >= 0x80) {
				buf[start++] = (uint8_t)(tag | 0x80);
				buf[start++] = (uint8_t)(tag >> 7);
			} else {
				buf[start++] = (uint8_t)tag;
			}
			buf[start] = (uint8_t)(len - start - 1);
			start++;
		}
		for (size_t k = start; k < len; k++)
			buf[k] = (uint8_t)xorshift(&seed);
		decoded += assert_survives(buf, len, &lim) == 0;
	}
	print_message("4000 random frames: %u decoded, %u refused\n", decoded,
	    4000 - decoded);
}

/* Fails each allocation of one decode in turn until it needs no more;
 * returns how many it failed. */
static long
assert_decode_reports_every_failed_allocation(const uint8_t *buf, size_t len,
    const com_limits *lim)
{
	for (long n = 0;; n++) {
		com_msg out;
		bool fired;
		int rc;

		com_wire_fault_arm(n);
		rc = decode(buf, len, lim, &out);
		fired = com_wire_fault_fired();
		com_wire_fault_arm(-1);
		com_msg_fini(&out);
		if (!fired) {
			assert_int_equal(rc, 0);
			assert_true(n > 0);
			return n;
		}
		assert_int_equal(rc, BELLOWS_ENOMEM);
	}
}

static void
test_wire_reports_every_failed_allocation_in_decode(void **state)
{
	com_limits lim = limits();

	for (int t = COM_MSG_HELLO; t < COM_MSG_TYPE_MAX; t++) {
		com_msg in;
		uint8_t *buf;
		size_t len;

		make_msg(&in, (com_msg_type)t);
		if (t == COM_MSG_REPORT) /* out of order: the sort allocates */
			in.u.report.layers[0].layer = 1000;
		encode(&in, &buf, &len);
		com_msg_fini(&in);
		print_message("%s: %ld allocations failed in turn\n",
		    com_msg_type_name((com_msg_type)t),
		    assert_decode_reports_every_failed_allocation(buf, len,
			&lim));
		free(buf);
	}
}

static void
test_wire_reports_every_failed_allocation_in_encode(void **state)
{
	for (int t = COM_MSG_HELLO; t < COM_MSG_TYPE_MAX; t++) {
		com_msg in;

		make_msg(&in, (com_msg_type)t);
		for (long n = 0;; n++) {
			uint8_t *buf = NULL;
			size_t len = 0;
			bool fired;
			int rc;

			com_wire_fault_arm(n);
			rc = com_wire_encode(&in, &buf, &len);
			fired = com_wire_fault_fired();
			com_wire_fault_arm(-1);
			if (!fired) {
				assert_int_equal(rc, 0);
				free(buf);
				break;
			}
			assert_int_equal(rc, BELLOWS_ENOMEM);
			assert_null(buf);
			assert_int_equal(len, 0);
		}
		com_msg_fini(&in);
	}
}

static void
test_wire_bounds_memory_of_nested_repeats(void **state)
{
	com_limits lim = limits();
	wire job = { 0 }, reply = { 0 }, env;
	uint64_t t0 = com_clock_ms();

	/* Each job within max_world ranks, but 1000 jobs of 8000 empty
	 * ranks would cost protobuf-c over a gigabyte: refused within the
	 * decoder's budget. */
	w_str(&job, 1, "j");
	for (int k = 0; k < 8000; k++)
		w_bytes(&job, 7, "", 0);
	for (int j = 0; j < 1000; j++)
		w_bytes(&reply, 3, job.b, job.n);
	free(job.b);
	env = w_envelope(F_STATUS_REPLY, &reply);
	assert_true(env.n <= lim.max_msg_bytes);
	assert_int_equal(decode_wire(&env, &lim), BELLOWS_EMSGSIZE);
	print_message("refused a %u-rank status reply in %llu ms\n", 8000000u,
	    (unsigned long long)(com_clock_ms() - t0));
}

/* Unknown fields are skipped, not kept: a frame of nothing else decodes
 * and takes no more memory than the message it carries. */
static void
test_wire_skips_unknown_field_floods_without_memory(void **state)
{
	com_limits lim = limits();
	wire bye = { 0 }, env;
	com_arena *arena = NULL;
	com_arena_stats st;
	com_msg out;

	w_str(&bye, 1, "job");
	while (bye.n < lim.max_msg_bytes - 64)
		w_uint(&bye, 50, 0);
	env = w_envelope(F_BYE, &bye);
	assert_int_equal(com_arena_new(0, &arena), 0);
	assert_int_equal(com_wire_decode_arena(env.b, env.n, &lim, arena, &out),
	    0);
	assert_string_equal(out.u.bye.job, "job");
	com_msg_fini(&out);
	com_arena_stats_get(arena, &st);
	assert_true(st.high_water < 1024);
	assert_int_equal(st.chunks, 0);
	com_arena_destroy(&arena);
	free(env.b);
}

/*
 * A reused arena against a fresh one (com_wire_decode): the same result
 * or the same error code for every frame.
 */

/* Decodes buf both ways (the arena's block is reused from frame to frame)
 * and fails unless they agree; returns the code. */
static int
assert_arena_agrees(const uint8_t *buf, size_t len, const com_limits *lim,
    com_arena *arena)
{
	com_msg a, b;
	int ra, rb;

	ra = com_wire_decode(buf, len, lim, &a);
	rb = com_wire_decode_arena(buf, len, lim, arena, &b);
	if (ra != rb)
		fail_msg("fresh arena %d, reused arena %d (%zu bytes)", ra, rb,
		    len);
	if (ra == 0) {
		assert_msg_equal(&a, &b);
	} else if (ra == BELLOWS_EVERSION) {
		assert_int_equal(a.type, b.type);
		assert_int_equal(a.major, b.major);
		assert_int_equal(a.minor, b.minor);
	}
	com_msg_fini(&a);
	com_msg_fini(&b);
	return ra;
}

/* Frames of every type, a 100-layer report and one too large for the
 * default block (so the arena takes chunks and grows); *ret_n set. */
static void
arena_corpus(uint8_t **frames, size_t *lens, unsigned *ret_n)
{
	unsigned n = 0;
	com_msg in;

	for (int t = COM_MSG_HELLO; t < COM_MSG_TYPE_MAX; t++) {
		make_msg(&in, (com_msg_type)t);
		encode(&in, &frames[n], &lens[n]);
		com_msg_fini(&in);
		n++;
	}
	make_report(&in, 100);
	encode(&in, &frames[n], &lens[n]);
	com_msg_fini(&in);
	n++;
	/* Larger than the default block: a layer table's structs come from
	 * the arena (a report's layers do not). */
	make_hello(&in, 3000);
	encode(&in, &frames[n], &lens[n]);
	com_msg_fini(&in);
	n++;
	*ret_n = n;
}

/* Writes a frame of every type and a 100-layer report into dir as
 * seed-TYPE files, the start of the fuzz corpus (tests/fuzz/corpus). */
static int
write_seeds(const char *dir)
{
	uint8_t *frames[COM_MSG_TYPE_MAX + 2];
	size_t lens[COM_MSG_TYPE_MAX + 2];
	unsigned n;
	int rc = 0;

	arena_corpus(frames, lens, &n);
	for (unsigned i = 0; i < n; i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/seed-%02u", dir, i);
		if (i + 1 < n &&
		    ((f = fopen(path, "wb")) == NULL ||
			fwrite(frames[i], 1, lens[i], f) != lens[i] ||
			fclose(f) != 0)) {
			perror(path);
			rc = 1;
		}
		free(frames[i]);
	}
	return rc;
}

/* For `seconds` (and at least min_rounds frames): corrupts frames of the
 * corpus (bit flips, overwritten bytes, truncations, spliced and
 * repeated runs, pure garbage) and decodes each with and without the
 * arena, through a default block and a 1 KiB one. */
static void
fuzz_arena_for(double seconds, uint64_t min_rounds)
{
	com_limits lim = limits();
	uint8_t *frames[COM_MSG_TYPE_MAX + 2];
	size_t lens[COM_MSG_TYPE_MAX + 2];
	uint64_t seed = 0x2545f4914f6cdd1dull, rounds = 0, decoded = 0;
	uint64_t t0 = com_clock_ns();
	com_arena *big = NULL, *tiny = NULL;
	com_arena_stats st;
	unsigned n;

	assert_int_equal(com_arena_new(0, &big), 0);
	assert_int_equal(com_arena_new(1024, &tiny), 0);
	arena_corpus(frames, lens, &n);
	while (rounds < min_rounds ||
	    (double)(com_clock_ns() - t0) / 1e9 < seconds) {
		unsigned k = (unsigned)(xorshift(&seed) % n);
		size_t len = lens[k], cap = len * 2 + 320;
		uint8_t *buf = malloc(cap);
		unsigned op = (unsigned)(xorshift(&seed) % 6);

		assert_non_null(buf);
		memcpy(buf, frames[k], len);
		switch (op) {
		case 0: /* a few bit flips */
			for (int i = 1 + (int)(xorshift(&seed) % 8); i > 0; i--)
				buf[xorshift(&seed) % len] ^= (uint8_t)(1u
				    << xorshift(&seed) % 8);
			break;
		case 1: /* bytes overwritten */
			for (int i = 1 + (int)(xorshift(&seed) % 4); i > 0; i--)
				buf[xorshift(&seed) % len] = (uint8_t)xorshift(
				    &seed);
			break;
		case 2: /* truncated */
			len = xorshift(&seed) % len;
			break;
		case 3: { /* a run repeated at the end (fields merge) */
			size_t from = xorshift(&seed) % len;
			size_t run = xorshift(&seed) % (len - from + 1);

			memcpy(buf + len, buf + from, run);
			len += run;
			break;
		}
		case 4: { /* garbage spliced in */
			size_t at = xorshift(&seed) % len;
			size_t run = 1 + xorshift(&seed) % 32;

			memmove(buf + at + run, buf + at, len - at);
			for (size_t i = 0; i < run; i++)
				buf[at + i] = (uint8_t)xorshift(&seed);
			len += run;
			break;
		}
		default: /* garbage */
			len = xorshift(&seed) % 256;
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)xorshift(&seed);
			break;
		}
		decoded += assert_arena_agrees(buf, len, &lim,
			       rounds % 2 == 0 ? big : tiny) == 0;
		free(buf);
		rounds++;
	}
	com_arena_stats_get(big, &st);
	printf("fuzz: %llu corrupted frames decoded both ways, %llu accepted; "
	       "default block: %llu frames, %llu chunks, high water %zu "
	       "bytes\n",
	    (unsigned long long)rounds, (unsigned long long)decoded,
	    (unsigned long long)st.frames, (unsigned long long)st.chunks,
	    st.high_water);
	for (unsigned i = 0; i < n; i++)
		free(frames[i]);
	com_arena_destroy(&big);
	com_arena_destroy(&tiny);
	assert_null(big);
}

static void
test_wire_arena_decodes_every_corrupted_frame_as_malloc_does(void **state)
{
	fuzz_arena_for(3.0, 2000);
}

/* The corpus itself, every truncation of it and every bit flip of the
 * 100-layer report give the same results both ways; the report's
 * protobuf-c structs all come from the block, with no chunk, and its
 * layers take none of them (they are read straight into the report). */
static void
test_wire_arena_agrees_on_the_corpus_and_takes_no_malloc(void **state)
{
	com_limits lim = limits();
	uint8_t *frames[COM_MSG_TYPE_MAX + 2];
	size_t lens[COM_MSG_TYPE_MAX + 2];
	com_arena *arena = NULL;
	com_arena_stats st;
	unsigned n;

	assert_int_equal(com_arena_new(0, &arena), 0);
	arena_corpus(frames, lens, &n);
	for (unsigned k = 0; k < n; k++)
		assert_int_equal(assert_arena_agrees(frames[k], lens[k], &lim,
				     arena),
		    0);
	com_arena_stats_get(arena, &st);
	/* The 3000-layer hello did not fit the block: it took chunks, and
	 * the block grew to hold it... */
	assert_true(st.chunks > 0);
	assert_true(st.block >= st.high_water);
	/* ...so the next one takes none. */
	assert_int_equal(assert_arena_agrees(frames[n - 1], lens[n - 1], &lim,
			     arena),
	    0);
	{
		com_arena_stats again;

		com_arena_stats_get(arena, &again);
		assert_int_equal(again.chunks, st.chunks);
	}
	com_arena_destroy(&arena);
	assert_int_equal(com_arena_new(0, &arena), 0);
	assert_int_equal(assert_arena_agrees(frames[n - 2], lens[n - 2], &lim,
			     arena),
	    0);
	com_arena_stats_get(arena, &st);
	assert_int_equal(st.frames, 1);
	assert_int_equal(st.chunks, 0);
	/* The envelope, the report and its few other sub-messages and
	 * strings: no struct per layer. */
	assert_true(st.allocs >= 2 && st.allocs < 16);
	print_message("100-layer report: %llu allocations from the block, "
		      "%zu bytes, 0 chunks\n",
	    (unsigned long long)st.allocs, st.high_water);
	for (size_t len = 0; len < lens[n - 2]; len++)
		assert_arena_agrees(frames[n - 2], len, &lim, arena);
	for (size_t bit = 0; bit < lens[n - 2] * 8; bit++) {
		frames[n - 2][bit / 8] ^= (uint8_t)(1u << bit % 8);
		assert_arena_agrees(frames[n - 2], lens[n - 2], &lim, arena);
		frames[n - 2][bit / 8] ^= (uint8_t)(1u << bit % 8);
	}
	for (unsigned i = 0; i < n; i++)
		free(frames[i]);
	com_arena_destroy(&arena);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest unit[] = {
		cmocka_unit_test(test_wire_round_trips_every_message_type),
		cmocka_unit_test(test_wire_decodes_absent_strings_as_empty),
		cmocka_unit_test(
		    test_wire_keeps_an_empty_in_force_off_the_wire),
		cmocka_unit_test(
		    test_wire_fills_an_absent_decision_array_with_zeros),
		cmocka_unit_test(
		    test_wire_accepts_newer_minor_and_unknown_fields),
		cmocka_unit_test(test_wire_accepts_a_layer_without_shape),
		cmocka_unit_test(test_wire_round_trips_each_new_field_alone),
		cmocka_unit_test(
		    test_wire_checks_every_statistic_as_the_table_says),
		cmocka_unit_test(
		    test_wire_decodes_minor_0_messages_with_the_new_fields_zero),
		cmocka_unit_test(
		    test_wire_rejects_other_major_version_but_reports_type),
		cmocka_unit_test(test_wire_rejects_oversize_frame),
		cmocka_unit_test(
		    test_wire_rejects_empty_frame_and_missing_body),
		cmocka_unit_test(test_wire_rejects_broken_wire_format),
		cmocka_unit_test(test_wire_rejects_bad_names),
		cmocka_unit_test(test_wire_refuses_a_run_id_over_255_bytes),
		cmocka_unit_test(test_wire_rejects_names_with_embedded_nul),
		cmocka_unit_test(test_wire_rejects_long_texts),
		cmocka_unit_test(test_wire_rejects_too_many_layers),
		cmocka_unit_test(test_wire_rejects_bad_world_and_rank),
		cmocka_unit_test(
		    test_wire_rejects_shape_that_does_not_multiply_to_numel),
		cmocka_unit_test(test_wire_rejects_more_than_eight_dimensions),
		cmocka_unit_test(test_wire_rejects_duplicate_layer_names),
		cmocka_unit_test(test_wire_rejects_duplicate_report_indices),
		cmocka_unit_test(
		    test_wire_round_trips_each_array_statistic_and_refuses_other_lengths),
		cmocka_unit_test(
		    test_wire_refuses_a_report_covering_ranks_past_the_world_limit),
		cmocka_unit_test(test_wire_rejects_mismatched_decision_arrays),
		cmocka_unit_test(
		    test_wire_refuses_residual_plans_that_break_the_rules),
		cmocka_unit_test(
		    test_wire_rejects_non_finite_and_negative_values),
		cmocka_unit_test(
		    test_wire_rejects_bad_activation_timing_and_comm_values),
		cmocka_unit_test(test_wire_rejects_bad_metrics),
		cmocka_unit_test(test_wire_limits_comm_samples_and_metrics),
		cmocka_unit_test(test_wire_rejects_too_many_decisions),
		cmocka_unit_test(test_wire_rejects_decisions_out_of_seq_order),
		cmocka_unit_test(test_wire_rejects_oversize_codec_table),
		cmocka_unit_test(
		    test_wire_carries_a_64_kib_codec_table_by_default_and_no_more),
		cmocka_unit_test(
		    test_wire_rejects_in_force_for_another_layer_table),
		cmocka_unit_test(test_wire_rejects_status_reply_over_limits),
		cmocka_unit_test(test_wire_rejects_error_without_error_code),
		cmocka_unit_test(test_wire_counts_merged_sub_messages),
		cmocka_unit_test(test_wire_counts_unpacked_repeated_fields),
		cmocka_unit_test(
		    test_wire_accepts_65536_layers_and_refuses_65537),
		cmocka_unit_test(test_wire_accepts_a_full_report_and_welcome),
		cmocka_unit_test(test_wire_encode_rejects_broken_invariants),
		cmocka_unit_test(test_wire_default_limits_match_the_contract),
		cmocka_unit_test(
		    test_wire_arena_agrees_on_the_corpus_and_takes_no_malloc),
	};
	const struct CMUnitTest fault[] = {
		cmocka_unit_test(
		    test_wire_survives_every_truncation_of_every_message_type),
		cmocka_unit_test(
		    test_wire_survives_bit_flips_of_every_message_type),
		cmocka_unit_test(test_wire_survives_random_garbage),
		cmocka_unit_test(
		    test_wire_reports_every_failed_allocation_in_decode),
		cmocka_unit_test(
		    test_wire_reports_every_failed_allocation_in_encode),
		cmocka_unit_test(test_wire_bounds_memory_of_nested_repeats),
		cmocka_unit_test(
		    test_wire_skips_unknown_field_floods_without_memory),
		cmocka_unit_test(
		    test_wire_arena_decodes_every_corrupted_frame_as_malloc_does),
	};

	if (argc == 3 && strcmp(argv[1], "fuzz") == 0) {
		fuzz_arena_for(atof(argv[2]), 1);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "seeds") == 0)
		return write_seeds(argv[2]);
	if (argc > 1 && strcmp(argv[1], "fault") == 0)
		return cmocka_run_group_tests_name("codec fault", fault, NULL,
		    NULL);
	return cmocka_run_group_tests_name("codec", unit, NULL, NULL);
}
