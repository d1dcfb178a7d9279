/* test_layout - bellows_layer_stats and bellows_step_info keep their ABI
 * layout.
 *
 * Both structs are generated from the statistics tables (bellows/stats.h);
 * programs compiled against an earlier header use that header's offsets,
 * so the generated layouts must be exactly the ones written out by hand
 * below (the 0.4 header's), and bellows_stats_schema() and
 * bellows_step_info_schema() must describe the library's own layouts
 * field for field.
 */
#include <assert.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/agent.h>

/* bellows_layer_stats as the 0.4 header wrote it by hand. */
typedef struct frozen_layer_stats {
	uint64_t window;          /* window index */
	uint64_t count;           /* elements observed */
	uint64_t nonzero;         /* finite elements != 0 */
	uint64_t nonfinite;       /* NaN/Inf, excluded from the sums */
	double sum_sq;            /* sum of g^2 */
	double abs_sum;           /* sum of |g| */
	double max_abs;           /* largest |g| */
	double acc_norm;          /* L2 norm of the window-summed gradient */
	double momentum_abs_mean; /* mean |m| at window end; 0 if off */
	uint32_t observed_steps;  /* steps in which the layer was observed */
	uint32_t act_steps;       /* observe_activation calls */
	double act_lbar;          /* mean of their lbar */
	double act_nonzero;       /* mean of their nonzero */
	double act_bytes;         /* mean of their stored_bytes */
	double act_raw_bytes;     /* mean of their raw_bytes */
	double comm_raw_ms;       /* median of the timed raw sends */
	uint32_t comm_raw_n;      /* raw sends timed */
	double comm_comp_ms;      /* median of the timed compressed sends */
	uint32_t comm_comp_n;     /* compressed sends timed */
	double codec_ms;          /* median codec time of the compressed ones */
} frozen_layer_stats;

#define SAME_FIELD(f)                                                          \
	static_assert(offsetof(bellows_layer_stats, f) ==                      \
		offsetof(frozen_layer_stats, f),                               \
	    #f " keeps its offset");                                           \
	static_assert(sizeof(((bellows_layer_stats *)0)->f) ==                 \
		sizeof(((frozen_layer_stats *)0)->f),                          \
	    #f " keeps its size");
SAME_FIELD(window)
SAME_FIELD(count)
SAME_FIELD(nonzero)
SAME_FIELD(nonfinite)
SAME_FIELD(sum_sq)
SAME_FIELD(abs_sum)
SAME_FIELD(max_abs)
SAME_FIELD(acc_norm)
SAME_FIELD(momentum_abs_mean)
SAME_FIELD(observed_steps)
SAME_FIELD(act_steps)
SAME_FIELD(act_lbar)
SAME_FIELD(act_nonzero)
SAME_FIELD(act_bytes)
SAME_FIELD(act_raw_bytes)
SAME_FIELD(comm_raw_ms)
SAME_FIELD(comm_raw_n)
SAME_FIELD(comm_comp_ms)
SAME_FIELD(comm_comp_n)
SAME_FIELD(codec_ms)
/* Statistics are only appended: the struct may grow, never shrink. */
static_assert(sizeof(bellows_layer_stats) >= sizeof(frozen_layer_stats),
    "bellows_layer_stats keeps its fields");

/* bellows_step_info as the 0.4 header wrote it by hand. */
typedef struct frozen_step_info {
	double step_ms;            /* whole step */
	double compute_ms;         /* forward + backward */
	double comm_ms;            /* gradient communication */
	uint64_t bytes_sent;       /* gradient bytes this rank sent */
	uint64_t floats_sent;      /* floats this rank sent */
	uint64_t floats_raw;       /* floats it would have sent uncompressed */
	double lr;                 /* learning rate used in this step */
	double lr_next;            /* learning rate of the next step */
	uint32_t batch_size;       /* per-rank batch size used */
	uint64_t epoch;            /* trainer's epoch counter */
	double backward_ms;        /* backward compute */
	double codec_ms;           /* encode + decode */
	uint64_t mem_device_used;  /* device bytes in use */
	uint64_t mem_device_total; /* bytes the device has */
	uint64_t mem_host_used;    /* host bytes in use */
	uint64_t saved_bytes;      /* bytes saved for backward */
} frozen_step_info;

#define SAME_STEP(f)                                                           \
	static_assert(offsetof(bellows_step_info, f) ==                        \
		offsetof(frozen_step_info, f),                                 \
	    #f " keeps its offset");                                           \
	static_assert(sizeof(((bellows_step_info *)0)->f) ==                   \
		sizeof(((frozen_step_info *)0)->f),                            \
	    #f " keeps its size");
SAME_STEP(step_ms)
SAME_STEP(compute_ms)
SAME_STEP(comm_ms)
SAME_STEP(bytes_sent)
SAME_STEP(floats_sent)
SAME_STEP(floats_raw)
SAME_STEP(lr)
SAME_STEP(lr_next)
SAME_STEP(batch_size)
SAME_STEP(epoch)
SAME_STEP(backward_ms)
SAME_STEP(codec_ms)
SAME_STEP(mem_device_used)
SAME_STEP(mem_device_total)
SAME_STEP(mem_host_used)
SAME_STEP(saved_bytes)
static_assert(sizeof(bellows_step_info) >= sizeof(frozen_step_info),
    "bellows_step_info keeps its fields");

static void
test_layer_stats_keep_the_hand_written_layout(void **state)
{
	(void)state;
	/* The static assertions above are the test; this one also shows
	 * in the test log. */
	assert_true(sizeof(bellows_layer_stats) >= sizeof(frozen_layer_stats));
	assert_int_equal(offsetof(bellows_layer_stats, codec_ms),
	    offsetof(frozen_layer_stats, codec_ms));
	assert_true(sizeof(bellows_step_info) >= sizeof(frozen_step_info));
}

static void
test_step_info_schema_describes_the_struct_field_for_field(void **state)
{
	const bellows_stat_field *f = bellows_step_info_schema();
	size_t n = 0;

	(void)state;
	assert_non_null(f);
	for (; f[n].name != NULL; n++) {
		assert_non_null(f[n].unit);
		assert_true(strlen(f[n].doc) > 0);
	}
	assert_true(n >= 16);
	assert_int_equal(f[n].offset, sizeof(bellows_step_info));
	assert_string_equal(f[0].name, "step_ms");
	assert_int_equal(f[8].offset, offsetof(bellows_step_info, batch_size));
	assert_int_equal(f[8].type, BELLOWS_STAT_TYPE_U32);
	assert_string_equal(f[15].name, "saved_bytes");
	assert_int_equal(f[15].offset,
	    offsetof(bellows_step_info, saved_bytes));
}

static void
test_stats_schema_describes_the_struct_field_for_field(void **state)
{
	const bellows_stat_field *f = bellows_stats_schema();
	size_t n = 0, prev_end = 0;

	(void)state;
	assert_non_null(f);
	assert_string_equal(f[0].name, "window");
	assert_int_equal(f[0].offset, offsetof(bellows_layer_stats, window));
	assert_string_equal(f[1].name, "count");
	assert_int_equal(f[1].offset, offsetof(bellows_layer_stats, count));
	assert_int_equal(f[1].type, BELLOWS_STAT_TYPE_U64);
	for (; f[n].name != NULL; n++) {
		size_t size = f[n].type == BELLOWS_STAT_TYPE_U32 ? 4 : 8;

		assert_true(f[n].type == BELLOWS_STAT_TYPE_U32 ||
		    f[n].type == BELLOWS_STAT_TYPE_U64 ||
		    f[n].type == BELLOWS_STAT_TYPE_F64);
		/* In order, aligned, not overlapping. */
		assert_true(f[n].offset >= prev_end);
		assert_int_equal(f[n].offset % size, 0);
		prev_end = f[n].offset + size;
		assert_non_null(f[n].unit);
		assert_non_null(f[n].doc);
		if (strcmp(f[n].name, "momentum_abs_mean") == 0) {
			assert_int_equal(f[n].offset,
			    offsetof(bellows_layer_stats, momentum_abs_mean));
			assert_int_equal(f[n].type, BELLOWS_STAT_TYPE_F64);
		}
		if (strcmp(f[n].name, "comm_comp_n") == 0) {
			assert_int_equal(f[n].offset,
			    offsetof(bellows_layer_stats, comm_comp_n));
			assert_int_equal(f[n].type, BELLOWS_STAT_TYPE_U32);
		}
	}
	/* The window and every table entry (the 0.4 ones first), then the
	 * end with the size. */
	assert_true(n >= 20);
	assert_int_equal(f[n].offset, sizeof(bellows_layer_stats));
	assert_true(prev_end <= sizeof(bellows_layer_stats));
	assert_string_equal(f[19].name, "codec_ms");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layer_stats_keep_the_hand_written_layout),
		cmocka_unit_test(
		    test_stats_schema_describes_the_struct_field_for_field),
		cmocka_unit_test(
		    test_step_info_schema_describes_the_struct_field_for_field),
	};

	return cmocka_run_group_tests_name("layout", tests, NULL, NULL);
}
