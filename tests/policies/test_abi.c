/* test_abi - the policy ABI's window structs keep their layout.
 *
 * bellows_window_layer and bellows_window are what out-of-tree policies
 * (BELLOWS_POLICY_ABI 4 and 5) read by offset. Their fields up to ABI 6 stay
 * written out by hand in policies/bellows/policy.h, the layer's later
 * statistics are generated from the table; the controller fills their
 * statistics from the statistics table (bellows/stats.h) by offsetof. Moving a
 * field breaks every compiled plug-in, and this test. bellows_window may grow
 * (appended fields); so may bellows_window_layer since ABI 6, whose
 * policies step through the layers by the window's layer_size (before,
 * ABI 3 appended the residual and array statistics and ABI 4 the level
 * applied, each a new ABI). ABI 5 appended `stats_read` to the ops, not
 * to these.
 */
#include <assert.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <bellows/policy.h>

/* As policy.h wrote them for ABI 4: ABI 2's (0.4), with the residual
 * statistics and the array statistics appended to the layer (ABI 3),
 * then the level applied (ABI 4). */
typedef struct frozen_window_layer {
	const char *name;         /* layer name */
	uint64_t numel;           /* elements */
	uint32_t ndim;            /* dimensions in shape */
	const uint32_t *shape;    /* dimensions */
	bool selected;            /* the policy's layer selectors match it */
	double grad_norm;         /* norm of the window-summed gradient, from
				   * the configured source (rank 0 or mean) */
	double grad_norm_rank0;   /* rank 0's, NAN if rank 0 did not report */
	double grad_norm_mean;    /* mean over reporting ranks */
	double sum_sq;            /* summed over ranks */
	double abs_sum;           /* summed over ranks */
	double max_abs;           /* largest over ranks */
	uint64_t count;           /* elements observed, summed over ranks */
	uint64_t nonzero;         /* summed over ranks */
	uint64_t nonfinite;       /* summed over ranks */
	double momentum_abs_mean; /* mean over ranks */
	double level;             /* level in force during the window */
	double error_bound;       /* bound in force during the window */

	/* Activation statistics (COMET), over the ranks that measured them;
	 * act_steps 0: not measured in this window (the rest then 0). */
	uint64_t act_steps;   /* steps measured, summed over ranks */
	double act_lbar;      /* L-bar: mean over samples of the per-sample
			       * max |dLoss/dOutput|, mean over ranks */
	double act_nonzero;   /* R: non-zero fraction of the stored
			       * activation (after the zero filter), mean
			       * over ranks */
	double act_bytes;     /* stored bytes per step, mean over ranks */
	double act_raw_bytes; /* uncompressed bytes per step, mean over ranks */

	/* Per-tensor communication timings (SlimGC): medians over the
	 * reporting ranks of each rank's median over its window; NAN when no
	 * rank measured it. Sizes are numel * 4 bytes (float32). */
	double comm_raw_ms;   /* one raw collective of this tensor */
	double comm_comp_ms;  /* one compressed collective (codec excluded) */
	double codec_ms;      /* encode + decode around one compressed one */
	uint32_t comm_raw_n;  /* raw samples, summed over ranks */
	uint32_t comm_comp_n; /* compressed samples, summed over ranks */
	uint64_t resid_steps; /* ABI 3 */
	double resid_l1;      /* ABI 3 */
	double resid_l2;      /* ABI 3 */
	double resid_q50;     /* ABI 3 */
	double resid_q90;     /* ABI 3 */
	double resid_q99;     /* ABI 3 */
	double resid_floats;  /* ABI 3 */
	const uint64_t *exp_hist; /* ABI 3 */
	uint32_t exp_hist_len;    /* ABI 3 */
	double level_applied;     /* ABI 4 */
} frozen_window_layer;

typedef struct frozen_window {
	const char *job;                   /* job name */
	uint64_t window;                   /* window index, from 0 */
	uint64_t first_step;               /* first step */
	uint64_t last_step;                /* last step (max over ranks) */
	uint64_t epoch;                    /* trainer's epoch (rank 0) */
	double lr;                         /* LR of the window's first step */
	double lr_next;                    /* LR the next window starts with */
	uint32_t batch_size;               /* per-rank batch size in force */
	double lr_scale;                   /* LR scale in force */
	uint32_t world;                    /* ranks in the job */
	uint32_t ranks_reported;           /* ranks that reported it */
	double step_ms_median;             /* median over ranks, mean/step */
	double compute_ms_median;          /* same, compute time */
	double comm_ms_median;             /* same, communication time */
	uint64_t floats_sent;              /* summed over ranks */
	uint64_t floats_raw;               /* summed over ranks */
	uint32_t n_layers;                 /* entries in layers */
	const frozen_window_layer *layers; /* the layer table */

	/* Appended in 0.2 (performance model, COMET, SlimGC). Zero: not
	 * reported by any rank. */
	double backward_ms_median; /* median over ranks, mean per step:
				    * backward compute, communication
				    * excluded */
	double codec_ms_median;    /* same: encode + decode per step */
	double mem_device_used;    /* bytes, max over ranks */
	double mem_device_total;   /* bytes, min over ranks */
	double mem_host_used;      /* bytes, max over ranks */
	bool compression_off;      /* gate in force during the window */
	uint64_t size_threshold;   /* threshold in force (bytes) */
	uint64_t calibrate_until;  /* calibration in force up to this
				    * step (exclusive); 0: none */
	uint32_t n_comm;           /* entries in comm */
	const void *comm;          /* every rank's collectives */

	/* Appended in 0.3. */
	double saved_bytes; /* bytes one step saved for backward (every
			     * activation, compressed ones as stored), max
			     * over ranks; 0: not reported */

	/* Appended in 0.4. */
	double eval_accuracy; /* trainer's last evaluation, max over ranks */
	double eval_loss;     /* its loss, max over ranks */
} frozen_window;

#define SAME(real, frozen, f)                                                  \
	static_assert(offsetof(real, f) == offsetof(frozen, f),                \
	    #real "." #f " keeps its offset");                                 \
	static_assert(sizeof(((real *)0)->f) == sizeof(((frozen *)0)->f),      \
	    #real "." #f " keeps its size");
#define SAME_LAYER(f)  SAME(bellows_window_layer, frozen_window_layer, f)
#define SAME_WINDOW(f) SAME(bellows_window, frozen_window, f)
SAME_LAYER(name)
SAME_LAYER(numel)
SAME_LAYER(ndim)
SAME_LAYER(shape)
SAME_LAYER(selected)
SAME_LAYER(grad_norm)
SAME_LAYER(grad_norm_rank0)
SAME_LAYER(grad_norm_mean)
SAME_LAYER(sum_sq)
SAME_LAYER(abs_sum)
SAME_LAYER(max_abs)
SAME_LAYER(count)
SAME_LAYER(nonzero)
SAME_LAYER(nonfinite)
SAME_LAYER(momentum_abs_mean)
SAME_LAYER(level)
SAME_LAYER(error_bound)
SAME_LAYER(act_steps)
SAME_LAYER(act_lbar)
SAME_LAYER(act_nonzero)
SAME_LAYER(act_bytes)
SAME_LAYER(act_raw_bytes)
SAME_LAYER(comm_raw_ms)
SAME_LAYER(comm_comp_ms)
SAME_LAYER(codec_ms)
SAME_LAYER(comm_raw_n)
SAME_LAYER(comm_comp_n)
SAME_LAYER(resid_steps)
SAME_LAYER(resid_l1)
SAME_LAYER(resid_l2)
SAME_LAYER(resid_q50)
SAME_LAYER(resid_q90)
SAME_LAYER(resid_q99)
SAME_LAYER(resid_floats)
SAME_LAYER(exp_hist)
SAME_LAYER(exp_hist_len)
SAME_LAYER(level_applied)
SAME_WINDOW(job)
SAME_WINDOW(window)
SAME_WINDOW(first_step)
SAME_WINDOW(last_step)
SAME_WINDOW(epoch)
SAME_WINDOW(lr)
SAME_WINDOW(lr_next)
SAME_WINDOW(batch_size)
SAME_WINDOW(lr_scale)
SAME_WINDOW(world)
SAME_WINDOW(ranks_reported)
SAME_WINDOW(step_ms_median)
SAME_WINDOW(compute_ms_median)
SAME_WINDOW(comm_ms_median)
SAME_WINDOW(floats_sent)
SAME_WINDOW(floats_raw)
SAME_WINDOW(n_layers)
SAME_WINDOW(layers)
SAME_WINDOW(backward_ms_median)
SAME_WINDOW(codec_ms_median)
SAME_WINDOW(mem_device_used)
SAME_WINDOW(mem_device_total)
SAME_WINDOW(mem_host_used)
SAME_WINDOW(compression_off)
SAME_WINDOW(size_threshold)
SAME_WINDOW(calibrate_until)
SAME_WINDOW(n_comm)
SAME_WINDOW(comm)
SAME_WINDOW(saved_bytes)
SAME_WINDOW(eval_accuracy)
SAME_WINDOW(eval_loss)
/* ABI 6: policies step through the layers by the window's layer_size, so
 * fields may be appended; ABI 4 and 5 ones get a copy at the frozen size,
 * which is BELLOWS_WINDOW_LAYER_SIZE_5. */
static_assert(sizeof(bellows_window_layer) >= sizeof(frozen_window_layer),
    "bellows_window_layer keeps its fields");
static_assert(BELLOWS_WINDOW_LAYER_SIZE_5 == sizeof(frozen_window_layer),
    "ABI 4 and 5 policies step by the frozen size");
/* The generated tail: every field of a row appended to the layer table
 * after ABI 6 (BELLOWS_LAYER_STATS_APPENDED) lies after the frozen
 * fields, so a row added there moves none of them. */
#define AFTER_ABI6(name, type, tag, check, agg, gate, wtype, wfield, ...)      \
	AFTER_ABI6_##wtype(wfield)
#define AFTER_ABI6_NONE(f)
#define AFTER_ABI6_U32(f) AFTER_ABI6_FIELD(f)
#define AFTER_ABI6_U64(f) AFTER_ABI6_FIELD(f)
#define AFTER_ABI6_F64(f) AFTER_ABI6_FIELD(f)
#define AFTER_ABI6_FIELD(f)                                                    \
	static_assert(offsetof(bellows_window_layer, f) >=                     \
		sizeof(frozen_window_layer),                                   \
	    "bellows_window_layer." #f " is appended after the ABI 6 fields");
BELLOWS_LAYER_STATS_APPENDED(AFTER_ABI6)
/* bellows_window is handed by pointer: fields may be appended. */
static_assert(sizeof(bellows_window) >= sizeof(frozen_window),
    "bellows_window keeps its fields");

static void
test_window_structs_keep_the_abi_4_layout(void **state)
{
	(void)state;
	/* The static assertions above are the test; these show in the log. */
	assert_true(
	    sizeof(bellows_window_layer) >= sizeof(frozen_window_layer));
	assert_true(sizeof(bellows_window) >= sizeof(frozen_window));
	/* ABI 5 changed the ops only; ABI 6 appended layer_size to
	 * bellows_window: the layers are ABI 4's, and their size is
	 * BELLOWS_WINDOW_LAYER_SIZE_5 until a field is appended. */
	assert_int_equal(BELLOWS_POLICY_ABI, 6);
	assert_int_equal(BELLOWS_WINDOW_LAYER_SIZE_5,
	    sizeof(frozen_window_layer));
	assert_int_equal(BELLOWS_POLICY_ABI_OLDEST, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_structs_keep_the_abi_4_layout),
	};

	return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
