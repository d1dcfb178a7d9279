/* test_msg - the lifecycle of the protocol message structs.
 *
 * Every message type is built with heap data in every owning field and
 * finalised; leaks show up under the sanitizer run. Finalising must also be
 * safe on zeroed and on already finalised messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "common/msg.h"

static double *
doubles(uint32_t n, double first)
{
	double *d = calloc(n, sizeof(*d));

	assert_non_null(d);
	for (uint32_t i = 0; i < n; i++)
		d[i] = first + i;
	return d;
}

static void
fill_decision(com_decision *d, const char *job, uint32_t n)
{
	assert_int_equal(com_decision_init(d, job, n), 0);
	for (uint32_t i = 0; i < n; i++) {
		d->level[i] = 1.0 + i;
		d->error_bound[i] = 0.5 * i;
	}
	d->codec_table = malloc(3);
	assert_non_null(d->codec_table);
	memcpy(d->codec_table, "abc", 3);
	d->codec_table_len = 3;
	d->policy = com_strdup("accordion");
	d->reason = com_strdup("critical regime");
}

/* Fills every owning field of a message of the given type. */
static void
fill_msg(com_msg *m, com_msg_type type)
{
	com_msg_init(m, type);
	switch (type) {
	case COM_MSG_HELLO:
		m->u.hello.job = com_strdup("job");
		m->u.hello.agent_version = com_strdup("0.1.0");
		m->u.hello.n_layers = 2;
		m->u.hello.layers = calloc(2, sizeof(com_layer_info));
		m->u.hello.layers[0].name = com_strdup("a");
		m->u.hello.layers[1].name = com_strdup("b");
		fill_decision(&m->u.hello.in_force, "job", 2);
		break;
	case COM_MSG_WELCOME:
		m->u.welcome.job = com_strdup("job");
		m->u.welcome.n_decisions = 2;
		m->u.welcome.decisions = calloc(2, sizeof(com_decision));
		fill_decision(&m->u.welcome.decisions[0], "job", 3);
		fill_decision(&m->u.welcome.decisions[1], NULL, 0);
		break;
	case COM_MSG_REPORT:
		m->u.report.job = com_strdup("job");
		m->u.report.n_layers = 4;
		m->u.report.layers = calloc(4, sizeof(com_layer_stats));
		m->u.report.n_comm = 2;
		m->u.report.comm = calloc(2, sizeof(com_comm_sample));
		break;
	case COM_MSG_DECISION:
		fill_decision(&m->u.decision, "job", 5);
		break;
	case COM_MSG_HEARTBEAT:
		m->u.heartbeat.job = com_strdup("job");
		break;
	case COM_MSG_BYE:
		m->u.bye.job = com_strdup("job");
		break;
	case COM_MSG_STATUS_REQUEST:
		m->u.status_request.job = com_strdup("job");
		break;
	case COM_MSG_STATUS_REPLY:
		m->u.status_reply.n_jobs = 2;
		m->u.status_reply.jobs = calloc(2, sizeof(com_job_status));
		m->u.status_reply.jobs[0].job = com_strdup("a");
		m->u.status_reply.jobs[0].policy = com_strdup("p");
		m->u.status_reply.jobs[0].n_ranks = 3;
		m->u.status_reply.jobs[0].ranks = calloc(3,
		    sizeof(com_rank_status));
		m->u.status_reply.n_peers = 1;
		m->u.status_reply.peers = calloc(1, sizeof(com_peer_status));
		m->u.status_reply.peers[0].peer = malloc(5);
		m->u.status_reply.peers[0].peer_len = 5;
		m->u.status_reply.peers[0].last_error = com_strdup("bad");
		break;
	case COM_MSG_SNAPSHOT_REQUEST:
		m->u.snapshot_request.job = com_strdup("job");
		break;
	case COM_MSG_SNAPSHOT:
		m->u.snapshot.job = com_strdup("job");
		m->u.snapshot.n_decisions = 1;
		m->u.snapshot.decisions = calloc(1, sizeof(com_decision));
		fill_decision(&m->u.snapshot.decisions[0], "job", 1);
		break;
	case COM_MSG_ERROR:
		m->u.error.code = BELLOWS_EVERSION;
		m->u.error.message = com_strdup("upgrade");
		break;
	case COM_MSG_TELEMETRY:
		m->u.telemetry.job = com_strdup("job");
		m->u.telemetry.n_metrics = 2;
		m->u.telemetry.metrics = calloc(2, sizeof(com_metric));
		m->u.telemetry.metrics[0].policy = com_strdup("slimgc");
		m->u.telemetry.metrics[0].name = com_strdup("ratio");
		m->u.telemetry.metrics[1].name = com_strdup("fit_r2");
		break;
	case COM_MSG_NONE:
	case COM_MSG_HEARTBEAT_ACK:
	default:
		m->u.heartbeat_ack.instance = 7;
		break;
	}
}

static void
assert_is_empty(const com_msg *m)
{
	com_msg empty;

	com_msg_init(&empty, COM_MSG_NONE);
	assert_memory_equal(m, &empty, sizeof(empty));
}

static void
test_msg_init_sets_type_and_version(void **state)
{
	com_msg m;

	memset(&m, 0xa5, sizeof(m));
	com_msg_init(&m, COM_MSG_REPORT);
	assert_int_equal(m.type, COM_MSG_REPORT);
	assert_int_equal(m.major, BELLOWS_PROTO_MAJOR);
	assert_int_equal(m.minor, BELLOWS_PROTO_MINOR);
	assert_null(m.u.report.job);
	assert_null(m.u.report.layers);
	assert_int_equal(m.u.report.n_layers, 0);
}

static void
test_msg_fini_releases_every_type(void **state)
{
	for (int t = COM_MSG_NONE; t < COM_MSG_TYPE_MAX; t++) {
		com_msg m;

		fill_msg(&m, (com_msg_type)t);
		com_msg_fini(&m);
		assert_is_empty(&m);
		/* Idempotent: a second fini finds nothing to free. */
		com_msg_fini(&m);
		assert_is_empty(&m);
	}
}

static void
test_msg_fini_is_safe_on_zeroed_messages(void **state)
{
	for (int t = COM_MSG_NONE; t < COM_MSG_TYPE_MAX; t++) {
		com_msg m;

		memset(&m, 0, sizeof(m));
		m.type = (com_msg_type)t;
		com_msg_fini(&m);
		assert_is_empty(&m);
	}
}

static void
test_msg_fini_frees_half_built_arrays(void **state)
{
	com_msg m;

	/* Counted arrays allocated but only partly filled, as the codec
	 * leaves them when it fails in the middle of a message. */
	com_msg_init(&m, COM_MSG_WELCOME);
	m.u.welcome.n_decisions = 3;
	m.u.welcome.decisions = calloc(3, sizeof(com_decision));
	m.u.welcome.decisions[0].job = com_strdup("only the first");
	com_msg_fini(&m);
	assert_is_empty(&m);

	com_msg_init(&m, COM_MSG_STATUS_REPLY);
	m.u.status_reply.n_jobs = 4;
	m.u.status_reply.jobs = calloc(4, sizeof(com_job_status));
	m.u.status_reply.jobs[1].policy = com_strdup("x");
	com_msg_fini(&m);
	assert_is_empty(&m);

	com_msg_init(&m, COM_MSG_TELEMETRY);
	m.u.telemetry.n_metrics = 3;
	m.u.telemetry.metrics = calloc(3, sizeof(com_metric));
	m.u.telemetry.metrics[0].name = com_strdup("only a name");
	com_msg_fini(&m);
	assert_is_empty(&m);
}

static void
test_msg_type_names_are_distinct_and_bounded(void **state)
{
	assert_string_equal(com_msg_type_name(COM_MSG_HELLO), "hello");
	assert_string_equal(com_msg_type_name(COM_MSG_TELEMETRY), "telemetry");
	assert_string_equal(com_msg_type_name(COM_MSG_TYPE_MAX), "unknown");
	assert_string_equal(com_msg_type_name((com_msg_type)-1), "unknown");
	for (int a = 0; a < COM_MSG_TYPE_MAX; a++) {
		const char *name = com_msg_type_name((com_msg_type)a);

		assert_non_null(name);
		for (int b = a + 1; b < COM_MSG_TYPE_MAX; b++)
			assert_string_not_equal(name,
			    com_msg_type_name((com_msg_type)b));
	}
}

static void
test_msg_strdup_passes_null_through(void **state)
{
	char *s = com_strdup("layer");

	assert_null(com_strdup(NULL));
	assert_string_equal(s, "layer");
	free(s);
}

static void
test_decision_init_gives_neutral_state(void **state)
{
	com_decision d;

	assert_int_equal(com_decision_init(&d, "job", 4), 0);
	assert_string_equal(d.job, "job");
	assert_int_equal(d.n_layers, 4);
	for (int i = 0; i < 4; i++) {
		assert_true(d.level[i] == 0.0);
		assert_true(d.error_bound[i] == 0.0);
	}
	assert_true(d.lr_scale == 1.0);
	assert_int_equal(d.seq, 0);
	assert_null(d.codec_table);
	com_decision_fini(&d);

	assert_int_equal(com_decision_init(&d, NULL, 0), 0);
	assert_null(d.job);
	assert_null(d.level);
	assert_null(d.error_bound);
	com_decision_fini(&d);
}

static void
test_decision_fini_zeroes_and_is_idempotent(void **state)
{
	com_decision d, zero;

	memset(&zero, 0, sizeof(zero));
	fill_decision(&d, "job", 3);
	com_decision_fini(&d);
	assert_memory_equal(&d, &zero, sizeof(d));
	com_decision_fini(&d);
	assert_memory_equal(&d, &zero, sizeof(d));
}

static void
test_decision_copy_is_deep(void **state)
{
	com_decision src, dst;

	fill_decision(&src, "job", 3);
	src.seq = 9;
	src.apply_step = 100;
	src.window = 4;
	src.batch_size = 64;
	src.lr_scale = 0.5;
	src.size_threshold = 4096;
	src.compression_off = true;
	src.calibrate_steps = 40;
	assert_int_equal(com_decision_copy(&dst, &src), 0);

	assert_ptr_not_equal(dst.job, src.job);
	assert_ptr_not_equal(dst.level, src.level);
	assert_ptr_not_equal(dst.error_bound, src.error_bound);
	assert_ptr_not_equal(dst.codec_table, src.codec_table);
	assert_ptr_not_equal(dst.policy, src.policy);
	assert_ptr_not_equal(dst.reason, src.reason);
	assert_string_equal(dst.job, "job");
	assert_string_equal(dst.policy, "accordion");
	assert_string_equal(dst.reason, "critical regime");
	assert_int_equal(dst.seq, 9);
	assert_int_equal(dst.apply_step, 100);
	assert_int_equal(dst.window, 4);
	assert_int_equal(dst.calibrate_steps, 40);
	assert_int_equal(dst.n_layers, 3);
	assert_memory_equal(dst.level, src.level, 3 * sizeof(double));
	assert_memory_equal(dst.error_bound, src.error_bound,
	    3 * sizeof(double));
	assert_int_equal(dst.codec_table_len, 3);
	assert_memory_equal(dst.codec_table, "abc", 3);
	assert_true(com_decision_same_state(&src, &dst));

	/* Changing the copy leaves the original alone. */
	dst.level[0] = 42.0;
	dst.job[0] = 'J';
	assert_true(src.level[0] == 1.0);
	assert_string_equal(src.job, "job");

	com_decision_fini(&src);
	com_decision_fini(&dst);
}

static void
test_decision_copy_of_empty_decision_owns_nothing(void **state)
{
	com_decision src, dst;

	memset(&src, 0, sizeof(src));
	assert_int_equal(com_decision_copy(&dst, &src), 0);
	assert_null(dst.job);
	assert_null(dst.level);
	assert_null(dst.codec_table);
	assert_null(dst.policy);
	com_decision_fini(&dst);
}

static void
test_decision_same_state_ignores_seq_steps_and_texts(void **state)
{
	com_decision a, b;

	fill_decision(&a, "job", 2);
	fill_decision(&b, "other", 2);
	a.seq = 1;
	b.seq = 2;
	a.apply_step = 10;
	b.apply_step = 20;
	a.window = 1;
	b.window = 2;
	free(b.reason);
	b.reason = com_strdup("another reason");
	free(b.policy);
	b.policy = NULL;
	assert_true(com_decision_same_state(&a, &b));
	com_decision_fini(&a);
	com_decision_fini(&b);
}

static void
test_decision_same_state_sees_every_knob(void **state)
{
	com_decision a, b;

	fill_decision(&a, "job", 2);
	for (int knob = 0; knob < 10; knob++) {
		assert_int_equal(com_decision_copy(&b, &a), 0);
		switch (knob) {
		case 0:
			b.level[1] = 7.0;
			break;
		case 1:
			b.error_bound[0] = 1e-3;
			break;
		case 2:
			b.batch_size = 128;
			break;
		case 3:
			b.lr_scale = 2.0;
			break;
		case 4:
			b.size_threshold = 1;
			break;
		case 5:
			b.compression_off = true;
			break;
		case 6:
			b.codec_table[2] = 'x';
			break;
		case 7:
			b.codec_table_len = 2;
			break;
		case 8:
			b.calibrate_steps = 20; /* SlimGC: a calibration */
			break;
		default:
			com_decision_fini(&b);
			assert_int_equal(com_decision_init(&b, "job", 3), 0);
			break;
		}
		assert_false(com_decision_same_state(&a, &b));
		com_decision_fini(&b);
	}
	com_decision_fini(&a);
}

/* The residual plan: copied deep, compared (the default one equal to
 * none), each of its fields a difference. */
static void
test_decision_residual_plan_is_copied_and_compared(void **state)
{
	com_decision a, b;

	(void)state;
	fill_decision(&a, "job", 3);
	assert_int_equal(com_decision_copy(&b, &a), 0);
	assert_null(b.resid_group);
	/* The default plan spelled out is the same state as none. */
	assert_int_equal(com_resid_plan_alloc(&b), 0);
	assert_true(com_resid_plan_is_default(&b));
	assert_true(com_decision_same_state(&a, &b));
	assert_true(com_decision_same_state(&b, &a));
	com_decision_fini(&b);

	assert_int_equal(com_resid_plan_alloc(&a), 0);
	a.resid_group[1] = 0;
	a.resid_phi[0] = 0.25;
	a.resid_rows[2] = 0.5;
	a.resid_cols[2] = 0.5;
	assert_true(com_resid_plan_valid(3, a.resid_group, a.resid_phi,
	    a.resid_rows, a.resid_cols));
	assert_int_equal(com_decision_copy(&b, &a), 0);
	assert_ptr_not_equal(b.resid_group, a.resid_group);
	assert_memory_equal(b.resid_group, a.resid_group, 3 * sizeof(uint32_t));
	assert_true(com_decision_same_state(&a, &b));
	for (int field = 0; field < 5; field++) {
		com_decision c;

		assert_int_equal(com_decision_copy(&c, &a), 0);
		switch (field) {
		case 0:
			c.resid_group[1] = 1;
			break;
		case 1:
			c.resid_phi[0] = 0.5;
			break;
		case 2:
			c.resid_rows[2] = 0.25;
			break;
		case 3:
			c.resid_cols[2] = 1.0;
			break;
		default: /* no plan: the default one */
			free(c.resid_group);
			c.resid_group = NULL;
			break;
		}
		assert_false(com_decision_same_state(&a, &c));
		com_decision_fini(&c);
	}
	/* A member's phi is not read. */
	b.resid_phi[1] = 0.9;
	assert_true(com_decision_same_state(&a, &b));
	/* Rules: a reduced layer may not be in a group, a member must name
	 * a leader. */
	b.resid_rows[1] = 0.5;
	assert_false(com_resid_plan_valid(3, b.resid_group, b.resid_phi,
	    b.resid_rows, b.resid_cols));
	b.resid_rows[1] = 1.0;
	b.resid_group[0] = 1;
	assert_false(com_resid_plan_valid(3, b.resid_group, b.resid_phi,
	    b.resid_rows, b.resid_cols));
	com_decision_fini(&a);
	com_decision_fini(&b);
}

static void
test_decision_same_state_reads_lr_scale_zero_as_one(void **state)
{
	com_decision a, b;
	double *la = doubles(2, 0.0), *lb = doubles(2, 0.0);

	assert_int_equal(com_decision_init(&a, NULL, 0), 0);
	assert_int_equal(com_decision_init(&b, NULL, 0), 0);
	a.lr_scale = 0.0;
	b.lr_scale = 1.0;
	assert_true(com_decision_same_state(&a, &b));
	/* 0.0 and -0.0 are the same level. */
	a.n_layers = b.n_layers = 2;
	a.level = la;
	b.level = lb;
	a.error_bound = doubles(2, 0.0);
	b.error_bound = doubles(2, 0.0);
	b.level[0] = -0.0;
	assert_true(com_decision_same_state(&a, &b));
	com_decision_fini(&a);
	com_decision_fini(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_msg_init_sets_type_and_version),
		cmocka_unit_test(test_msg_fini_releases_every_type),
		cmocka_unit_test(test_msg_fini_is_safe_on_zeroed_messages),
		cmocka_unit_test(test_msg_fini_frees_half_built_arrays),
		cmocka_unit_test(test_msg_type_names_are_distinct_and_bounded),
		cmocka_unit_test(test_msg_strdup_passes_null_through),
		cmocka_unit_test(test_decision_init_gives_neutral_state),
		cmocka_unit_test(test_decision_fini_zeroes_and_is_idempotent),
		cmocka_unit_test(test_decision_copy_is_deep),
		cmocka_unit_test(
		    test_decision_copy_of_empty_decision_owns_nothing),
		cmocka_unit_test(
		    test_decision_same_state_ignores_seq_steps_and_texts),
		cmocka_unit_test(test_decision_same_state_sees_every_knob),
		cmocka_unit_test(
		    test_decision_residual_plan_is_copied_and_compared),
		cmocka_unit_test(
		    test_decision_same_state_reads_lr_scale_zero_as_one),
	};

	return cmocka_run_group_tests_name("msg", tests, NULL, NULL);
}
