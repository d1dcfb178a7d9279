/* stats - the one table of bellows statistics.
 *
 * Every statistic an agent reports is declared once, here, as an entry of
 * an X-macro table; the structs that carry it (bellows_layer_stats,
 * bellows_step_info, com_layer_stats, com_timings), the wire mapping and its
 * checks (common/wire.c), the aggregation across ranks
 * (controller/ctl_window.c), the history columns (the store), the Python mirror
 * and docs/statistics.md are made from it. Adding a statistic is adding an
 * entry (docs/architecture.md, "Adding a statistic"); entries are never
 * renamed, reordered or removed: the order is the layout of the public struct
 * bellows_layer_stats and the tags are the wire's.
 *
 * An entry is X(name, type, tag, check, agg, gate, wtype, wfield, rcol,
 * wcol, wcol2, hist, unit, doc):
 *   name   the field in the C structs, the .proto and Python (identifier);
 *   type   its C type as one rank reports it: U32, U64 or F64;
 *   tag    the field number in common/bellows.proto (LayerStats, Timings);
 *   check  what a received value must pass, else the frame is refused:
 *          ANY (any value of the type), MAG (finite and not negative),
 *          FRAC (MAG and at most 1);
 *   agg    how bellowsd aggregates it across the ranks of a window
 *          (bellows_stat_agg below);
 *   gate   for GATED_*: the entry of the same table whose non-zero value
 *          says the rank measured this one; `_` for none;
 *   wtype  its type in the policy's window (bellows_window_layer for the
 *          layer table, bellows_window for the timings): U32, U64, F64,
 *          or NONE when it is not aggregated;
 *   wfield the field of that struct, `_` when wtype is NONE;
 *   rcol   the history column of the per-rank value (table `timings`),
 *          NULL when the history keeps no per-rank value;
 *   wcol   the history column of the aggregated value (table `windows`
 *          for the layer table, `window_info` for the timings), NULL for
 *          none; wcol2 a second one or NULL (NORM: wcol holds rank 0's
 *          value, wcol2 the mean);
 *   hist   how "not measured" is kept in those columns: NULLABLE (NULL
 *          for a NaN value, read back as NaN) or ZERO (0, and a NULL
 *          reads back as 0). A column is INTEGER NOT NULL for a U32/U64
 *          `type` (a view double, such as a byte count, is written as an
 *          integer), REAL for F64;
 *   unit   for people ("ms", "bytes", ...);
 *   doc    one line.
 *
 * A third table, BELLOWS_STEP_INFO, lists the fields of the per-step input
 * bellows_step_info and how the agent folds each into the window's
 * timings (its own columns are described with it).
 *
 * This header is installed: it is what bellows/agent.h builds
 * bellows_layer_stats and bellows_step_info from, and what
 * bellows_stats_schema() and bellows_step_info_schema() (agent.h)
 * describe at run time.
 */
#ifndef BELLOWS_STATS_H
#define BELLOWS_STATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* clang-format off */

/* Per layer, per rank, per window: LayerStats on the wire, in its tag
 * order (the order of bellows_layer_stats). */
#define BELLOWS_LAYER_STATS(X)                                                 \
	X(count, U64, 2, ANY, SUM, _, U64, count,                              \
	    NULL, "count", NULL, ZERO, "elements",                             \
	    "gradient elements observed in the window")                        \
	X(nonzero, U64, 3, ANY, SUM, _, U64, nonzero,                          \
	    NULL, "nonzero", NULL, ZERO, "elements",                           \
	    "finite elements that are not 0")                                  \
	X(nonfinite, U64, 4, ANY, SUM, _, U64, nonfinite,                      \
	    NULL, "nonfinite", NULL, ZERO, "elements",                         \
	    "NaN or Inf elements, left out of the sums")                       \
	X(sum_sq, F64, 5, MAG, SUM, _, F64, sum_sq,                            \
	    NULL, "sum_sq", NULL, NULLABLE, "grad^2",                          \
	    "sum of g^2 over the observed elements")                           \
	X(abs_sum, F64, 6, MAG, SUM, _, F64, abs_sum,                          \
	    NULL, "abs_sum", NULL, NULLABLE, "grad",                           \
	    "sum of |g| over the observed elements")                           \
	X(max_abs, F64, 7, MAG, MAX, _, F64, max_abs,                          \
	    NULL, "max_abs", NULL, NULLABLE, "grad",                           \
	    "largest |g|")                                                     \
	X(acc_norm, F64, 8, MAG, NORM, _, F64, grad_norm,                      \
	    NULL, "grad_norm_rank0", "grad_norm_mean", NULLABLE, "grad",       \
	    "L2 norm of the gradient summed over the window")                  \
	X(momentum_abs_mean, F64, 9, MAG, MEAN, _, F64, momentum_abs_mean,     \
	    NULL, "momentum_abs_mean", NULL, NULLABLE, "grad",                 \
	    "mean |m| at window end, m = beta m + (1 - beta) g; 0 if off")     \
	X(observed_steps, U32, 10, ANY, NONE, _, NONE, _,                      \
	    NULL, NULL, NULL, ZERO, "steps",                                   \
	    "steps in which the layer was observed")                           \
	X(act_steps, U32, 11, ANY, SUM, _, U64, act_steps,                     \
	    NULL, "act_steps", NULL, ZERO, "steps",                            \
	    "steps with activation statistics; 0: not measured")               \
	X(act_lbar, F64, 12, MAG, GATED_MEAN, act_steps, F64, act_lbar,        \
	    NULL, "act_lbar", NULL, ZERO, "grad",                              \
	    "L-bar: mean over samples of max |dLoss/dOutput|")                 \
	X(act_nonzero, F64, 13, FRAC, GATED_MEAN, act_steps, F64, act_nonzero, \
	    NULL, "act_nonzero", NULL, ZERO, "fraction",                       \
	    "R: non-zero fraction of the stored activation")                   \
	X(act_bytes, F64, 14, MAG, GATED_MEAN, act_steps, F64, act_bytes,      \
	    NULL, "act_bytes", NULL, ZERO, "bytes",                            \
	    "activation bytes stored for backward per step")                   \
	X(act_raw_bytes, F64, 15, MAG, GATED_MEAN, act_steps, F64,             \
	    act_raw_bytes, NULL, "act_raw_bytes", NULL, ZERO, "bytes",         \
	    "the same activation uncompressed, per step")                      \
	X(comm_raw_ms, F64, 16, MAG, GATED_MEDIAN, comm_raw_n, F64,            \
	    comm_raw_ms, NULL, "comm_raw_ms", NULL, NULLABLE, "ms",            \
	    "lower quartile of timed raw sends; comp and codec alike")         \
	X(comm_raw_n, U32, 17, ANY, SUM_SAT, _, U32, comm_raw_n,               \
	    NULL, "comm_raw_n", NULL, ZERO, "sends",                           \
	    "raw sends timed; 0: none")                                        \
	X(comm_comp_ms, F64, 18, MAG, GATED_MEDIAN, comm_comp_n, F64,          \
	    comm_comp_ms, NULL, "comm_comp_ms", NULL, NULLABLE, "ms",          \
	    "median of the layer's timed compressed sends, codec excluded")    \
	X(comm_comp_n, U32, 19, ANY, SUM_SAT, _, U32, comm_comp_n,             \
	    NULL, "comm_comp_n", NULL, ZERO, "sends",                          \
	    "compressed sends timed; 0: none")                                 \
	X(codec_ms, F64, 20, MAG, GATED_MEDIAN, comm_comp_n, F64, codec_ms,    \
	    NULL, "codec_ms", NULL, NULLABLE, "ms",                            \
	    "median encode + decode time of those compressed sends")          \
	X(resid_steps, U32, 30, ANY, SUM, _, U64, resid_steps,                 \
	    NULL, "resid_steps", NULL, ZERO, "steps",                          \
	    "steps with residual statistics (error feedback); 0: none")       \
	X(resid_l1, F64, 31, MAG, GATED_MEAN, resid_steps, F64, resid_l1,      \
	    NULL, "resid_l1", NULL, ZERO, "grad",                              \
	    "L1 norm of the layer's fresh residual G~ - Q(G~), step mean")     \
	X(resid_l2, F64, 32, MAG, GATED_MEAN, resid_steps, F64, resid_l2,      \
	    NULL, "resid_l2", NULL, ZERO, "grad",                              \
	    "L2 norm of the same residual, step mean")                         \
	X(resid_q50, F64, 33, MAG, GATED_MEAN, resid_steps, F64, resid_q50,    \
	    NULL, "resid_q50", NULL, ZERO, "rms",                              \
	    "median of |r| / rms(r), rms = L2 / sqrt(numel) (sampled)")        \
	X(resid_q90, F64, 34, MAG, GATED_MEAN, resid_steps, F64, resid_q90,    \
	    NULL, "resid_q90", NULL, ZERO, "rms",                              \
	    "90th percentile of |r| / rms(r) (sampled)")                       \
	X(resid_q99, F64, 35, MAG, GATED_MEAN, resid_steps, F64, resid_q99,    \
	    NULL, "resid_q99", NULL, ZERO, "rms",                              \
	    "99th percentile of |r| / rms(r) (sampled)")                       \
	X(resid_floats, F64, 36, MAG, GATED_MEAN, resid_steps, F64,            \
	    resid_floats, NULL, "resid_floats", NULL, ZERO, "floats",          \
	    "residual floats the layer holds under the plan in force")       \
	X(level_applied_n, U32, 37, ANY, NONE, _, NONE, _,                     \
	    NULL, NULL, NULL, ZERO, "ranks",                                   \
	    "ranks whose report carries level_applied (1 in a rank's own "   \
	    "report; 0: an agent older than the statistic)")                 \
	X(level_applied, F64, 38, MAG, GATED_MAX, level_applied_n, F64,        \
	    level_applied, NULL, "level_applied", NULL, NULLABLE, "level",     \
	    "level the layer was sent at in the window's last step (0: raw; " \
	    "after the size threshold, the gate and raw-only tensors)")

/* clang-format on */

/* Each layer statistic's position in BELLOWS_LAYER_STATS, which never
 * changes: bit i of a set of layer statistics (the policies' stats_read,
 * the decisions' stats_skip) is entry i. */
#define BELLOWS_STAT_INDEX_(name, ...) BELLOWS_STAT_INDEX_##name,
enum bellows_stat_index {
	BELLOWS_LAYER_STATS(BELLOWS_STAT_INDEX_) BELLOWS_STAT_INDEX_N_
};
#undef BELLOWS_STAT_INDEX_

/* clang-format off */

/* Per rank, per window: Timings on the wire, in its tag order. The
 * STEP_MEDIAN kinds divide a rank's value by its `steps` (1 if 0). */
#define BELLOWS_RANK_TIMINGS(X)                                                \
	X(steps, U32, 1, ANY, NONE, _, NONE, _,                                \
	    "steps", NULL, NULL, ZERO, "steps",                                \
	    "steps in the window")                                             \
	X(step_ms, F64, 2, MAG, STEP_MEDIAN, _, F64, step_ms_median,           \
	    "step_ms", "step_ms_median", NULL, NULLABLE, "ms",                 \
	    "sum of the window's step times")                                  \
	X(compute_ms, F64, 3, MAG, STEP_MEDIAN, _, F64, compute_ms_median,     \
	    "compute_ms", "compute_ms_median", NULL, NULLABLE, "ms",           \
	    "sum of compute (forward + backward) times")                       \
	X(comm_ms, F64, 4, MAG, STEP_MEDIAN, _, F64, comm_ms_median,           \
	    "comm_ms", "comm_ms_median", NULL, NULLABLE, "ms",                 \
	    "sum of gradient communication times")                             \
	X(step_ms_max, F64, 5, MAG, NONE, _, NONE, _,                          \
	    "step_ms_max", NULL, NULL, NULLABLE, "ms",                         \
	    "slowest step of the window")                                      \
	X(bytes_sent, U64, 6, ANY, NONE, _, NONE, _,                           \
	    "bytes_sent", NULL, NULL, ZERO, "bytes",                           \
	    "gradient bytes the rank sent")                                    \
	X(floats_sent, U64, 7, ANY, SUM, _, U64, floats_sent,                  \
	    "floats_sent", "floats_sent", NULL, ZERO, "floats",                \
	    "floats the rank sent")                                            \
	X(floats_raw, U64, 8, ANY, SUM, _, U64, floats_raw,                    \
	    "floats_raw", "floats_raw", NULL, ZERO, "floats",                  \
	    "floats the same steps would send uncompressed")                   \
	X(decision_misses, U32, 9, ANY, NONE, _, NONE, _,                      \
	    "decision_misses", NULL, NULL, ZERO, "steps",                      \
	    "apply steps reached without the decision")                        \
	X(reports_dropped, U64, 10, ANY, NONE, _, NONE, _,                     \
	    "reports_dropped", NULL, NULL, ZERO, "reports",                    \
	    "reports the agent's queue had to drop")                           \
	X(backward_ms, F64, 11, MAG, STEP_MEDIAN_NZ, _, F64,                   \
	    backward_ms_median, "backward_ms", "backward_ms_median", NULL,     \
	    ZERO, "ms", "sum of backward compute times, communication excluded") \
	X(codec_ms, F64, 12, MAG, STEP_MEDIAN_NZ, _, F64, codec_ms_median,     \
	    "codec_ms", "codec_ms_median", NULL, ZERO, "ms",                   \
	    "sum of encode + decode times")                                    \
	X(mem_device_used, U64, 13, ANY, MAX, _, F64, mem_device_used,         \
	    "mem_device_used", "mem_device_used", NULL, ZERO, "bytes",         \
	    "device memory in use, largest seen in the window")                \
	X(mem_device_total, U64, 14, ANY, MIN_NZ, _, F64, mem_device_total,    \
	    "mem_device_total", "mem_device_total", NULL, ZERO, "bytes",       \
	    "device memory the device has")                                    \
	X(mem_host_used, U64, 15, ANY, MAX, _, F64, mem_host_used,             \
	    "mem_host_used", "mem_host_used", NULL, ZERO, "bytes",             \
	    "host memory in use, largest seen in the window")                  \
	X(saved_bytes, U64, 16, ANY, MAX, _, F64, saved_bytes,                 \
	    NULL, "act_saved_bytes", NULL, ZERO, "bytes",                      \
	    "bytes one step saved for backward (every activation), largest")  \
	X(eval_accuracy, F64, 17, FRAC, MAX, _, F64, eval_accuracy,            \
	    NULL, "eval_accuracy", NULL, ZERO, "fraction",                     \
	    "evaluation accuracy the trainer measured (e.g. on its test "      \
	    "split), the window's last; largest over ranks")                   \
	X(eval_loss, F64, 18, MAG, MAX, _, F64, eval_loss,                     \
	    NULL, "eval_loss", NULL, ZERO, "loss",                             \
	    "evaluation loss the trainer measured, the window's last; "        \
	    "largest over ranks")                                              \
	X(step_ms_rank_min, F64, 19, MAG, NONE, _, NONE, _,                    \
	    "step_ms_rank_min", NULL, NULL, ZERO, "ms",                        \
	    "a report covering several ranks (aggregation in the job): the "   \
	    "smallest of their mean step times; 0 in a rank's own report")     \
	X(step_ms_rank_max, F64, 20, MAG, NONE, _, NONE, _,                    \
	    "step_ms_rank_max", NULL, NULL, ZERO, "ms",                        \
	    "a report covering several ranks: the largest of their mean step " \
	    "times; 0 in a rank's own report")

/* Per step: bellows_step_info (bellows/agent.h), what a trainer hands to
 * bellows_agent_step_end(), in its field order (the struct's public
 * layout). X(name, type, fold, check, unit, doc): `fold` is how the agent
 * makes the window's BELLOWS_RANK_TIMINGS entry of the same name from its
 * steps: SUM, MAX, LAST_NZ (the last non-zero value), or OWN (folded by
 * the agent's own code: the step time it measures itself when not given,
 * and the LR, batch size and epoch, which go into the report rather than
 * its timings); `check` is what step_end requires of a value (else
 * BELLOWS_EINVAL). Zero means "not measured". */
#define BELLOWS_STEP_INFO(X)                                                   \
	X(step_ms, F64, OWN, ANY, "ms",                                        \
	    "whole step; anything but a positive finite value: measured by "   \
	    "the agent from step_begin to step_end")                           \
	X(compute_ms, F64, SUM, MAG, "ms", "forward + backward")               \
	X(comm_ms, F64, SUM, MAG, "ms", "gradient communication")              \
	X(bytes_sent, U64, SUM, ANY, "bytes",                                  \
	    "gradient bytes this rank sent")                                   \
	X(floats_sent, U64, SUM, ANY, "floats", "floats this rank sent")       \
	X(floats_raw, U64, SUM, ANY, "floats",                                 \
	    "floats it would have sent uncompressed")                          \
	X(lr, F64, OWN, MAG, "",                                               \
	    "learning rate used in this step; a window reports its first "     \
	    "step's")                                                          \
	X(lr_next, F64, OWN, MAG, "",                                          \
	    "learning rate of the next step (0: = lr); a window reports its "  \
	    "last step's, so bellowsd sees an LR drop anywhere in or right "   \
	    "after it")                                                        \
	X(batch_size, U32, OWN, ANY, "samples", "per-rank batch size used")    \
	X(epoch, U64, OWN, ANY, "epochs", "trainer's epoch counter")           \
	X(backward_ms, F64, SUM, MAG, "ms",                                    \
	    "backward compute, communication excluded")                        \
	X(codec_ms, F64, SUM, MAG, "ms",                                       \
	    "encode + decode of the step's sends")                             \
	X(mem_device_used, U64, MAX, ANY, "bytes",                             \
	    "device bytes in use (e.g. the peak of the step)")                 \
	X(mem_device_total, U64, LAST_NZ, ANY, "bytes",                        \
	    "bytes the device has")                                            \
	X(mem_host_used, U64, MAX, ANY, "bytes",                               \
	    "host bytes in use (e.g. RSS)")                                    \
	X(saved_bytes, U64, MAX, ANY, "bytes",                                 \
	    "bytes of every activation the step's forward saved for "          \
	    "backward (storages counted once, parameters excluded, "           \
	    "compressed ones at their stored size)")                           \
	X(eval_accuracy, F64, LAST_NZ, FRAC, "fraction",                       \
	    "accuracy of an evaluation the trainer ran (0 to 1; 0: none), "    \
	    "given with the step it follows; a window reports its last")      \
	X(eval_loss, F64, LAST_NZ, MAG, "loss",                                \
	    "loss of that evaluation (0: none); a window reports its last")

/* Per layer, per rank, per window, fixed-size arrays of uint64_t:
 * LayerStats on the wire as packed repeated uint64 fields (each entry a
 * field of its own, tags after the scalars'), in the C structs a pointer
 * to `len` values, NULL when the rank did not measure it. Only the layers
 * the trainer asks for carry one (e.g. BELLOWS_LAYER_EXP_HIST), so other
 * layers and jobs pay nothing. An entry gives (name, len, tag, check, agg,
 * wfield, wcol, unit, doc):
 *   name   the field in the C structs, the .proto and Python;
 *   len    the array's length (a received one of another length, but for
 *          an absent one, is refused);
 *   tag    its field number in LayerStats;
 *   check  LEN: exactly len values or none;
 *   agg    SUM: per element over the ranks that reported it, saturating
 *          at UINT64_MAX;
 *   wfield the policy window's pointer field (bellows_window_layer), with
 *          wfield##_len beside it (0 and NULL: no rank reported it);
 *   wcol   the history column of the sum (table `windows`): a BLOB of
 *          len little-endian uint64, NULL when no rank reported it;
 *   unit, doc as above. */
#define BELLOWS_LAYER_ARRAYS(X)                                                \
	X(exp_hist, 256, 21, LEN, SUM, exp_hist, "exp_hist", "values",        \
	    "gradient values per float32 biased exponent (bin 0: zeros and "  \
	    "denormals, 255: Inf and NaN; float16 and bfloat16 values in "   \
	    "the bin of their exact float32 widening)")

/* clang-format on */

/* C types of the `type` and `wtype` columns. */
#define BELLOWS_STAT_CTYPE_U32 uint32_t
#define BELLOWS_STAT_CTYPE_U64 uint64_t
#define BELLOWS_STAT_CTYPE_F64 double

/* One struct field per entry: `TABLE(BELLOWS_STAT_FIELD)` inside a struct
 * declares the table's fields in order, with their reported types. */
#define BELLOWS_STAT_FIELD(name, type, ...) BELLOWS_STAT_CTYPE_##type name;

/* One pointer field per array entry: `TABLE(BELLOWS_STAT_ARRAY_FIELD)`
 * inside a struct declares the arrays, NULL for an absent one. */
#define BELLOWS_STAT_ARRAY_FIELD(name, ...) uint64_t *name;

/* The `type` and `wtype` columns as values. */
typedef enum bellows_stat_type {
	BELLOWS_STAT_TYPE_NONE = 0, /* not present (wtype: not aggregated) */
	BELLOWS_STAT_TYPE_U32 = 1,  /* uint32_t */
	BELLOWS_STAT_TYPE_U64 = 2,  /* uint64_t */
	BELLOWS_STAT_TYPE_F64 = 3,  /* double */
} bellows_stat_type;

/* The `check` column: what a received value must pass. */
typedef enum bellows_stat_check {
	BELLOWS_STAT_CHECK_ANY = 0,  /* any value of its type */
	BELLOWS_STAT_CHECK_MAG = 1,  /* finite and >= 0 */
	BELLOWS_STAT_CHECK_FRAC = 2, /* finite, >= 0 and <= 1 */
} bellows_stat_check;

/* The `agg` column: how a window's ranks make one value. "Ranks that
 * reported" means, for the layer table, the ranks whose report carried
 * the layer. */
typedef enum bellows_stat_agg {
	BELLOWS_STAT_AGG_NONE = 0,         /* not aggregated (history only) */
	BELLOWS_STAT_AGG_SUM = 1,          /* sum over ranks (0: none) */
	BELLOWS_STAT_AGG_SUM_SAT = 2,      /* sum, saturating at the wtype's
					    * largest value */
	BELLOWS_STAT_AGG_MAX = 3,          /* largest over ranks (0: none) */
	BELLOWS_STAT_AGG_MIN_NZ = 4,       /* smallest over the ranks that
					    * gave a non-zero value (0: none) */
	BELLOWS_STAT_AGG_MEAN = 5,         /* mean over the ranks that
					    * reported (0: none) */
	BELLOWS_STAT_AGG_GATED_MEAN = 6,   /* mean over the ranks whose gate
					    * is non-zero (0: none) */
	BELLOWS_STAT_AGG_GATED_MEDIAN = 7, /* median over the ranks whose
					    * gate is non-zero (NaN: none) */
	BELLOWS_STAT_AGG_NORM = 8,         /* acc_norm: rank 0's value
					    * (field wfield##_rank0, NaN if
					    * rank 0 did not report) and the
					    * mean over ranks (wfield##_mean,
					    * NaN: none); wfield is rank 0's
					    * when there, else the mean */
	BELLOWS_STAT_AGG_STEP_MEDIAN = 9,  /* median over ranks of value /
					    * steps (NaN: none) */
	BELLOWS_STAT_AGG_STEP_MEDIAN_NZ = 10, /* same over the ranks whose
					       * value is > 0 (0: none) */
	BELLOWS_STAT_AGG_GATED_MAX = 11,      /* largest over the ranks whose
					       * gate is non-zero (NaN: none):
					       * a value where 0 means
					       * something, from ranks that
					       * may not send it */
} bellows_stat_agg;

/* An array statistic described at run time (bellows_layer_arrays_schema
 * in bellows/agent.h): an array of them ends with an entry whose name is
 * NULL. */
typedef struct bellows_stat_array {
	const char *name; /* field name, NULL: end of the array */
	uint32_t len;     /* values */
	uint32_t index;   /* position in BELLOWS_LAYER_ARRAYS */
	const char *unit; /* table's unit */
	const char *doc;  /* table's one line */
} bellows_stat_array;

/* The `hist` column: "not measured" in the history. */
typedef enum bellows_stat_hist {
	BELLOWS_STAT_HIST_ZERO = 0,     /* 0; NULL reads back as 0 */
	BELLOWS_STAT_HIST_NULLABLE = 1, /* NULL for NaN, reads back as NaN */
} bellows_stat_hist;

/* One field of a struct described at run time (bellows_stats_schema in
 * bellows/agent.h): an array of them ends with an entry whose name is
 * NULL and whose offset is the size of the whole struct. */
typedef struct bellows_stat_field {
	const char *name; /* field name, NULL: end of the array */
	uint32_t type;    /* bellows_stat_type */
	uint32_t offset;  /* offsetof in the struct; at the end: sizeof */
	const char *unit; /* table's unit, "" for a key (e.g. window) */
	const char *doc;  /* table's one line */
} bellows_stat_field;

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_STATS_H */
