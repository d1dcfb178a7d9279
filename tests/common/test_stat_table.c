/* test_stat_table - the statistics table agrees with the wire and itself.
 *
 * The .proto is the wire's own declaration of LayerStats and Timings; the
 * table (bellows/stats.h) must name exactly its fields, with its tags and
 * types, or the codec would map a statistic to the wrong field. The rest
 * checks the table's columns against each other: what the aggregation,
 * the history and the docs rely on.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/bellows.pb-c.h"
#include "common/msg.h"
#include "common/stat_table.h"

static ProtobufCType
proto_type(bellows_stat_type t)
{
	switch (t) {
	case BELLOWS_STAT_TYPE_U32:
		return PROTOBUF_C_TYPE_UINT32;
	case BELLOWS_STAT_TYPE_U64:
		return PROTOBUF_C_TYPE_UINT64;
	default:
		return PROTOBUF_C_TYPE_DOUBLE;
	}
}

/* Every field of message `d` is either one of `keys`, an entry of the
 * table with the same tag and type, or one of n_arrays array statistics,
 * and every entry is a field. */
static void
check_against_proto(const ProtobufCMessageDescriptor *d, const com_stat *table,
    size_t n, const char *const *keys, size_t n_keys, size_t n_arrays)
{
	assert_int_equal(d->n_fields, n + n_keys + n_arrays);
	for (size_t i = 0; i < n; i++) {
		const ProtobufCFieldDescriptor
		    *f = protobuf_c_message_descriptor_get_field_by_name(d,
			table[i].name);

		if (f == NULL)
			fail_msg("%s: no field %s", d->name, table[i].name);
		assert_int_equal(f->id, table[i].tag);
		assert_int_equal(f->type, proto_type(table[i].type));
		assert_int_equal(f->label, PROTOBUF_C_LABEL_NONE);
	}
	for (size_t i = 0; i < n_keys; i++)
		assert_non_null(
		    protobuf_c_message_descriptor_get_field_by_name(d,
			keys[i]));
}

static void
test_stat_table_names_the_proto_fields_with_their_tags_and_types(void **st)
{
	static const char *const layer_keys[] = { "layer" };

	(void)st;
	check_against_proto(&bellows__layer_stats__descriptor,
	    com_layer_stat_table, COM_N_LSTATS, layer_keys, 1, COM_N_LARRAYS);
	for (size_t i = 0; i < COM_N_LARRAYS; i++) {
		const com_stat_array *a = &com_layer_array_table[i];
		const ProtobufCFieldDescriptor
		    *f = protobuf_c_message_descriptor_get_field_by_name(
			&bellows__layer_stats__descriptor, a->name);

		if (f == NULL)
			fail_msg("LayerStats: no field %s", a->name);
		assert_int_equal(f->id, a->tag);
		assert_int_equal(f->type, PROTOBUF_C_TYPE_UINT64);
		assert_int_equal(f->label, PROTOBUF_C_LABEL_REPEATED);
		assert_true(a->len > 0);
		assert_true(a->agg == BELLOWS_STAT_AGG_SUM);
		for (size_t k = 0; k < COM_N_LSTATS; k++)
			assert_int_not_equal(com_layer_stat_table[k].tag,
			    a->tag);
	}
	assert_int_equal(protobuf_c_message_descriptor_get_field_by_name(
			     &bellows__layer_stats__descriptor, "layer")
			     ->id,
	    1);
	check_against_proto(&bellows__timings__descriptor,
	    com_timing_stat_table, COM_N_TSTATS, NULL, 0, 0);
}

/* The columns of one table agree with each other. */
static void
check_table(const com_stat *t, size_t n, size_t struct_size, bool layer)
{
	for (size_t i = 0; i < n; i++) {
		const com_stat *s = &t[i];
		bool gated = s->agg == BELLOWS_STAT_AGG_GATED_MEAN ||
		    s->agg == BELLOWS_STAT_AGG_GATED_MEDIAN ||
		    s->agg == BELLOWS_STAT_AGG_GATED_MAX;

		assert_ptr_equal(com_stat_find(t, n, s->name), s);
		if (i > 0) {
			assert_true(s->offset > t[i - 1].offset);
			assert_true(s->tag > t[i - 1].tag);
		}
		assert_true(s->offset < struct_size);
		/* Integers take any value, doubles at least MAG. */
		assert_int_equal(s->check == BELLOWS_STAT_CHECK_ANY,
		    s->type != BELLOWS_STAT_TYPE_F64);
		/* A gate is an integer entry of the same table; NORM's is
		 * the F64 entry of the group's mean, not aggregated. */
		assert_int_equal(gated || s->agg == BELLOWS_STAT_AGG_NORM,
		    s->gate >= 0);
		if (s->agg == BELLOWS_STAT_AGG_NORM) {
			assert_int_equal(t[s->gate].type, s->type);
			assert_int_equal(t[s->gate].agg, BELLOWS_STAT_AGG_NONE);
		}
		if (gated) {
			assert_true((size_t)s->gate < n);
			assert_int_not_equal(t[s->gate].type,
			    BELLOWS_STAT_TYPE_F64);
		}
		/* Aggregated exactly when the window has a field for it. */
		assert_int_equal(s->agg == BELLOWS_STAT_AGG_NONE,
		    s->wtype == BELLOWS_STAT_TYPE_NONE);
		assert_int_equal(s->wfield == NULL,
		    s->wtype == BELLOWS_STAT_TYPE_NONE);
		assert_int_equal(s->wcol2 != NULL,
		    s->agg == BELLOWS_STAT_AGG_NORM);
		/* An aggregated column holds an aggregate. */
		if (s->wcol != NULL)
			assert_int_not_equal(s->agg, BELLOWS_STAT_AGG_NONE);
		/* Only the timings are kept per rank and divided by steps. */
		if (layer) {
			assert_null(s->rcol);
			assert_true(s->agg != BELLOWS_STAT_AGG_STEP_MEDIAN &&
			    s->agg != BELLOWS_STAT_AGG_STEP_MEDIAN_NZ);
		} else {
			assert_true(s->agg != BELLOWS_STAT_AGG_NORM &&
			    s->agg != BELLOWS_STAT_AGG_MEAN && !gated);
		}
		/* NULL for "not measured" needs a REAL column. */
		if (s->hist == BELLOWS_STAT_HIST_NULLABLE)
			assert_int_equal(s->type, BELLOWS_STAT_TYPE_F64);
		assert_true(strlen(s->unit) > 0 && strlen(s->doc) > 0);
		assert_string_not_equal(com_stat_agg_name(s->agg), "?");
	}
	assert_null(com_stat_find(t, n, "no_such_statistic"));
	assert_null(com_stat_find(t, n, NULL));
}

static void
test_stat_table_columns_agree_with_each_other(void **st)
{
	(void)st;
	check_table(com_layer_stat_table, COM_N_LSTATS, sizeof(com_layer_stats),
	    true);
	check_table(com_timing_stat_table, COM_N_TSTATS, sizeof(com_timings),
	    false);
	assert_int_equal(com_layer_stat_table[COM_LSTAT_act_lbar].gate,
	    COM_LSTAT_act_steps);
	assert_int_equal(com_layer_stat_table[COM_LSTAT_codec_ms].gate,
	    COM_LSTAT_comm_comp_n);
	/* A level of 0 is a value: "not reported" needs the gate and a
	 * NULL in the history. */
	assert_int_equal(com_layer_stat_table[COM_LSTAT_level_applied].gate,
	    COM_LSTAT_level_applied_n);
	assert_int_equal(com_layer_stat_table[COM_LSTAT_level_applied].hist,
	    BELLOWS_STAT_HIST_NULLABLE);
}

/* common/wire_fast.c marks the fields of a message it has read in a
 * 32-bit mask and refuses a message with more fields (bellows/stats.h,
 * tag rules): a statistic past that needs the decoder widened first. */
static void
test_stat_table_layer_stats_fit_the_one_pass_decoder(void **st)
{
	(void)st;
	if (bellows__layer_stats__descriptor.n_fields > 32)
		fail_msg("LayerStats has %u fields; common/wire_fast.c "
			 "decodes at most 32",
		    bellows__layer_stats__descriptor.n_fields);
	assert_int_equal(bellows__layer_stats__descriptor.n_fields,
	    1 + COM_N_LSTATS + COM_N_LARRAYS);
}

/* The NORM entry's gate carries the group's mean: a row of the same
 * table, not aggregated on its own. */
static void
test_stat_table_norm_gate_is_the_group_mean(void **st)
{
	const com_stat *s = &com_layer_stat_table[COM_LSTAT_acc_norm];

	(void)st;
	assert_int_equal(s->agg, BELLOWS_STAT_AGG_NORM);
	assert_int_equal(s->gate, COM_LSTAT_acc_norm_mean);
	assert_int_equal(com_layer_stat_table[s->gate].agg,
	    BELLOWS_STAT_AGG_NONE);
	assert_int_equal(com_layer_stat_table[s->gate].tag, 40);
}

/* The check column as docs/protocol.md states it, in floating point. */
static bool
check_by_definition(bellows_stat_check check, double v)
{
	if (check == BELLOWS_STAT_CHECK_ANY)
		return true;
	if (!isfinite(v) || !(v >= 0.0))
		return false;
	return check != BELLOWS_STAT_CHECK_FRAC || v <= 1.0;
}

/* com_stat_check_passes compares a value's bits with a bound
 * (com_stat_check_bound): it must say what the floating-point definition
 * says at every edge, signed zeros, denormals, the largest finite value,
 * 1 and its neighbours, infinities and NaNs of either sign. */
static void
test_stat_table_checks_pass_by_bits_what_the_definition_passes(void **st)
{
	const double v[] = { 0.0, -0.0, DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_MIN,
		0.5, 1.0, nextafter(1.0, 0.0), nextafter(1.0, 2.0), -1.0, 2.0,
		DBL_MAX, -DBL_MAX, INFINITY, -INFINITY, NAN, -NAN, 1e300,
		3.0e-310 };
	const bellows_stat_check checks[] = { BELLOWS_STAT_CHECK_ANY,
		BELLOWS_STAT_CHECK_MAG, BELLOWS_STAT_CHECK_FRAC };

	(void)st;
	for (size_t c = 0; c < sizeof(checks) / sizeof(checks[0]); c++)
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			if (com_stat_check_passes(checks[c], v[i]) !=
			    check_by_definition(checks[c], v[i]))
				fail_msg("check %s on %a: %d, the definition "
					 "says %d",
				    com_stat_check_name(checks[c]), v[i],
				    com_stat_check_passes(checks[c], v[i]),
				    check_by_definition(checks[c], v[i]));
	/* A check out of the enum lets everything pass. */
	assert_true(com_stat_check_passes((bellows_stat_check)7, -NAN));
}

static void
test_stat_table_reads_values_by_descriptor(void **st)
{
	com_layer_stats s = { .layer = 3 };
	com_timings t = { 0 };

	(void)st;
	s.comm_raw_n = 7;
	s.count = (uint64_t)1 << 40;
	s.act_nonzero = 0.25;
	t.saved_bytes = 12345;
	assert_int_equal(com_stat_get_u64(&com_layer_stat_table
					      [COM_LSTAT_comm_raw_n],
			     &s),
	    7);
	assert_true(com_stat_get_double(&com_layer_stat_table[COM_LSTAT_count],
			&s) == (double)((uint64_t)1 << 40));
	assert_true(
	    com_stat_get_double(&com_layer_stat_table[COM_LSTAT_act_nonzero],
		&s) == 0.25);
	assert_int_equal(com_stat_get_u64(&com_layer_stat_table
					      [COM_LSTAT_act_nonzero],
			     &s),
	    0);
	assert_int_equal(com_stat_get_u64(com_stat_find(com_timing_stat_table,
					      COM_N_TSTATS, "saved_bytes"),
			     &t),
	    12345);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_stat_table_names_the_proto_fields_with_their_tags_and_types),
		cmocka_unit_test(test_stat_table_columns_agree_with_each_other),
		cmocka_unit_test(test_stat_table_reads_values_by_descriptor),
		cmocka_unit_test(
		    test_stat_table_layer_stats_fit_the_one_pass_decoder),
		cmocka_unit_test(test_stat_table_norm_gate_is_the_group_mean),
		cmocka_unit_test(
		    test_stat_table_checks_pass_by_bits_what_the_definition_passes),
	};

	return cmocka_run_group_tests_name("stat_table", tests, NULL, NULL);
}
