/* stats - the one table of bellows statistics.
 *
 * Every statistic an agent reports is declared once, here, as a row of a
 * table; the structs that carry it (bellows_layer_stats, bellows_step_info,
 * com_layer_stats, com_timings), the wire mapping and its checks
 * (common/wire.c, common/wire_in.c), the aggregation across ranks
 * (controller/ctl_window.c, agent/aggregate.c), the policies' window, the
 * history columns (history/hist_cols.c), the Python mirror and
 * docs/statistics.md are made from it. Adding a statistic is adding a row
 * (docs/architecture.md, "Adding a statistic"); rows are never renamed,
 * reordered or removed: the order is the layout of the public struct
 * bellows_layer_stats and the tags are the wire's. A new row goes at the
 * end of its table (for the layer table, the end of
 * BELLOWS_LAYER_STATS_APPENDED, whose rows are also the generated tail
 * of the policies' bellows_window_layer).
 *
 *   name   the field in the C structs, the .proto and Python (identifier);
 *   type   its C type as one rank reports it: U32, U64 or F64;
 *   tag    the field number in common/bellows.proto (LayerStats, Timings;
 *          the tag rules are below);
 *   check  what a received value must pass, else the frame is refused:
 *          ANY (any value of the type), MAG (finite and not negative),
 *          FRAC (MAG and at most 1);
 * and the options:
 *   agg(K)      how bellowsd aggregates it across the ranks of a window
 *               (bellows_stat_agg below); default NONE: not aggregated;
 *   gate(E)     for GATED_*: the row of the same table whose non-zero value
 *               says the rank measured this one; for NORM: the row that
 *               carries the mean over the ranks a report covers; default
 *               none;
 *   view(T)     its type in the policy's window (bellows_window_layer for
 *               the layer table, bellows_window for the timings): U32, U64
 *               or F64; default: not in the window. Every aggregated row is
 *               in the window;
 *   field(F)    the window's field when not `name`;
 *   wcol("c")   the history column of the aggregated value (table
 *               `windows` for the layer table, `window_info` for the
 *               timings); default: the window field's name for a row in
 *               the window, none otherwise;
 *   wcol2("c")  a second one (NORM: wcol holds rank 0's value, wcol2 the
 *               mean); default none;
 *   rcol("c")   the history column of the per-rank value (table
 *               `timings`); default: the timings keep `name`, the layer
 *               table none; rcol(NULL): none;
 *   hist(H)     how "not measured" is kept in those columns: ZERO (the
 *               default: 0, and a NULL reads back as 0) or NULLABLE (NULL
 *               for a NaN value, read back as NaN). A column is INTEGER
 *               NOT NULL for a U32/U64 `type` (a view double, such as a
 *               byte count, is written as an integer), REAL for F64;
 *   unit("u")   for people ("ms", "bytes", ...);
 *   doc("...")  one line; required.
 * A misspelt option does not compile (BELLOWS_STAT_OPT_ below); a row
 * takes at most 11 options. The tables are then read as
 * X(name, type, tag, check, agg, gate, wtype, wfield, rcol, wcol, wcol2,
 * hist, unit, doc), every column filled (wtype NONE, gate and wfield `_`
 * or NULL for none), by consumers that need not know the defaults.
 *
 * Tag rules. LayerStats: tag 1 is `layer`; the scalar rows and the arrays
 * (BELLOWS_LAYER_ARRAYS) share tags 2 to BELLOWS_STAT_TAG_MAX. Taken: 2-21,
 * 30-38, 40. Tags increase along each table (tests/common/test_stat_table.c),
 * so a new scalar row takes the last row's tag + 1 (41-127 are free for
 * them) and 22-29 and 39 are left to new arrays. Timings: tags 1 to
 * BELLOWS_STAT_TAG_MAX, taken 1-20, free 21-127. A tag once used is never
 * given to another statistic, even after a row is retired. Tags up to 15
 * take one byte of key on the wire, up to 2047 two: 127 keeps every key
 * within two bytes and the free list short enough to read. common/
 * stat_table.c refuses at compile time a tag out of range or taken twice
 * within a message; tests/common/test_stat_table.c checks them against the
 * .proto. LayerStats has at most 32 fields while common/wire_fast.c
 * decodes it (one bit each in its `seen` mask): `layer`, 29 rows and 1
 * array today, so one more statistic fits before that decoder is widened
 * (the test says so when it does not).
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

/* The largest tag a statistic may take, in either message (tag rules
 * above). */
#define BELLOWS_STAT_TAG_MAX 127

/* How a row becomes the full column list. BELLOWS_STAT_OPT_(key, def,
 * options...) is the value of the option key(v) among the options, else
 * def: each option is split into `key, v` by BELLOWS_STAT_KV_<key> (one
 * per option; a misspelt key is not split, and BELLOWS_STAT_STEP_ then
 * lacks an argument, which does not compile) and compared with the key
 * wanted by pasting them (BELLOWS_STAT_EQ_<key>_<key> is the only match).
 * The chain reads 11 options, then sentinels end(). Every column is
 * expanded (BELLOWS_STAT_APPLY_) before X sees it, so that X may paste
 * them. */
#define BELLOWS_STAT_CAT_(a, b)       BELLOWS_STAT_CAT2_(a, b)
#define BELLOWS_STAT_CAT2_(a, b)      a##b
#define BELLOWS_STAT_SECOND_(a, b, ...) b
#define BELLOWS_STAT_PROBE_(...)      BELLOWS_STAT_SECOND_(__VA_ARGS__, 0, ~)
#define BELLOWS_STAT_IF_0(t, f)       f
#define BELLOWS_STAT_IF_1(t, f)       t
#define BELLOWS_STAT_IF_(c, t, f)     BELLOWS_STAT_CAT_(BELLOWS_STAT_IF_, c)(t, f)
#define BELLOWS_STAT_EQ_(a, b)        BELLOWS_STAT_PROBE_(BELLOWS_STAT_EQ_##a##_##b)
#define BELLOWS_STAT_KV_agg(v)        agg, v
#define BELLOWS_STAT_KV_gate(v)       gate, v
#define BELLOWS_STAT_KV_view(v)       view, v
#define BELLOWS_STAT_KV_field(v)      field, v
#define BELLOWS_STAT_KV_wcol(v)       wcol, v
#define BELLOWS_STAT_KV_wcol2(v)      wcol2, v
#define BELLOWS_STAT_KV_rcol(v)       rcol, v
#define BELLOWS_STAT_KV_hist(v)       hist, v
#define BELLOWS_STAT_KV_unit(v)       unit, v
#define BELLOWS_STAT_KV_doc(v)        doc, v
#define BELLOWS_STAT_KV_end()         end, ~
#define BELLOWS_STAT_EQ_agg_agg       ~, 1
#define BELLOWS_STAT_EQ_gate_gate     ~, 1
#define BELLOWS_STAT_EQ_view_view     ~, 1
#define BELLOWS_STAT_EQ_field_field   ~, 1
#define BELLOWS_STAT_EQ_wcol_wcol     ~, 1
#define BELLOWS_STAT_EQ_wcol2_wcol2   ~, 1
#define BELLOWS_STAT_EQ_rcol_rcol     ~, 1
#define BELLOWS_STAT_EQ_hist_hist     ~, 1
#define BELLOWS_STAT_EQ_unit_unit     ~, 1
#define BELLOWS_STAT_EQ_doc_doc       ~, 1
#define BELLOWS_STAT_STEP_(key, kv, rest) BELLOWS_STAT_STEP2_(key, kv, rest)
#define BELLOWS_STAT_STEP2_(key, k, v, rest)                                   \
	BELLOWS_STAT_IF_(BELLOWS_STAT_EQ_(key, k), v, rest)
#define BELLOWS_STAT_OPT_(key, def, ...)                                       \
	BELLOWS_STAT_O1_(key, def, __VA_ARGS__, end(), end(), end(), end(),    \
	    end(), end(), end(), end(), end(), end(), end(), end())
#define BELLOWS_STAT_O1_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O2_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O2_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O3_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O3_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O4_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O4_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O5_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O5_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O6_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O6_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O7_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O7_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O8_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O8_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O9_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O9_(k, d, o, ...)                                         \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O10_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O10_(k, d, o, ...)                                        \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, BELLOWS_STAT_O11_(k, d, __VA_ARGS__))
#define BELLOWS_STAT_O11_(k, d, o, ...)                                        \
	BELLOWS_STAT_STEP_(k, BELLOWS_STAT_KV_##o, d)
#define BELLOWS_STAT_APPLY_(X, ...) X(__VA_ARGS__)

/* The default history column of a row: its window field's name when it is
 * in the window. */
#define BELLOWS_STAT_WCOL_NONE(f) NULL
#define BELLOWS_STAT_WCOL_U32(f)  #f
#define BELLOWS_STAT_WCOL_U64(f)  #f
#define BELLOWS_STAT_WCOL_F64(f)  #f

/* A row of BELLOWS_LAYER_STATS or BELLOWS_RANK_TIMINGS, as X of the full
 * column list (above). */
#define BELLOWS_LAYER_STAT(X, name, type, tag, check, ...)                     \
	BELLOWS_STAT_ROW_(X, NULL, name, type, tag, check, __VA_ARGS__)
#define BELLOWS_RANK_TIMING(X, name, type, tag, check, ...)                    \
	BELLOWS_STAT_ROW_(X, #name, name, type, tag, check, __VA_ARGS__)
#define BELLOWS_STAT_ROW_(X, rdef, name, type, tag, check, ...)                \
	BELLOWS_STAT_ROW2_(X, name, type, tag, check,                          \
	    BELLOWS_STAT_OPT_(agg, NONE, __VA_ARGS__),                         \
	    BELLOWS_STAT_OPT_(gate, _, __VA_ARGS__),                           \
	    BELLOWS_STAT_OPT_(view, NONE, __VA_ARGS__),                        \
	    BELLOWS_STAT_OPT_(field, name, __VA_ARGS__),                       \
	    BELLOWS_STAT_OPT_(rcol, rdef, __VA_ARGS__), __VA_ARGS__)
#define BELLOWS_STAT_ROW2_(X, name, type, tag, check, agg, gate, wtype,        \
    wfield, rcol, ...)                                                         \
	BELLOWS_STAT_APPLY_(X, name, type, tag, check, agg, gate, wtype,       \
	    wfield, rcol,                                                      \
	    BELLOWS_STAT_OPT_(wcol,                                            \
		BELLOWS_STAT_CAT_(BELLOWS_STAT_WCOL_, wtype)(wfield),          \
		__VA_ARGS__),                                                  \
	    BELLOWS_STAT_OPT_(wcol2, NULL, __VA_ARGS__),                       \
	    BELLOWS_STAT_OPT_(hist, ZERO, __VA_ARGS__),                        \
	    BELLOWS_STAT_OPT_(unit, "", __VA_ARGS__),                          \
	    BELLOWS_STAT_OPT_(doc, NULL, __VA_ARGS__))

/* A row of BELLOWS_LAYER_ARRAYS, as X(name, len, tag, check, agg, wfield,
 * wcol, unit, doc) (columns there). */
#define BELLOWS_LAYER_ARRAY(X, name, len, tag, check, ...)                     \
	BELLOWS_STAT_APPLY_(X, name, len, tag, check,                          \
	    BELLOWS_STAT_OPT_(agg, SUM, __VA_ARGS__),                          \
	    BELLOWS_STAT_OPT_(field, name, __VA_ARGS__),                       \
	    BELLOWS_STAT_OPT_(wcol, #name, __VA_ARGS__),                       \
	    BELLOWS_STAT_OPT_(unit, "", __VA_ARGS__),                          \
	    BELLOWS_STAT_OPT_(doc, NULL, __VA_ARGS__))
/* clang-format off */

/* Per layer, per rank, per window: LayerStats on the wire (the order of
 * bellows_layer_stats): the rows of ABI 6, then those appended after it.
 * A new row goes at the end of BELLOWS_LAYER_STATS_APPENDED, never here
 * (see there). */
#define BELLOWS_LAYER_STATS(X)                                                 \
	BELLOWS_LAYER_STATS_ABI6(X) BELLOWS_LAYER_STATS_APPENDED(X)

/* The rows of policy ABI 6, whose fields of the policies' window
 * (bellows_window_layer in bellows/policy.h) are written out by hand in
 * a layout older than this table (another order, with fields that are
 * not statistics among them). Closed: no row is added here. */
#define BELLOWS_LAYER_STATS_ABI6(X)                                            \
	BELLOWS_LAYER_STAT(X, count, U64, 2, ANY, agg(SUM), view(U64),         \
	    unit("elements"),                                                  \
	    doc("gradient elements observed in the window"))                   \
	BELLOWS_LAYER_STAT(X, nonzero, U64, 3, ANY, agg(SUM), view(U64),       \
	    unit("elements"), doc("finite elements that are not 0"))           \
	BELLOWS_LAYER_STAT(X, nonfinite, U64, 4, ANY, agg(SUM), view(U64),     \
	    unit("elements"),                                                  \
	    doc("NaN or Inf elements, left out of the sums"))                  \
	BELLOWS_LAYER_STAT(X, sum_sq, F64, 5, MAG, agg(SUM), view(F64),        \
	    hist(NULLABLE), unit("grad^2"),                                    \
	    doc("sum of g^2 over the observed elements"))                      \
	BELLOWS_LAYER_STAT(X, abs_sum, F64, 6, MAG, agg(SUM), view(F64),       \
	    hist(NULLABLE), unit("grad"),                                      \
	    doc("sum of |g| over the observed elements"))                      \
	BELLOWS_LAYER_STAT(X, max_abs, F64, 7, MAG, agg(MAX), view(F64),       \
	    hist(NULLABLE), unit("grad"), doc("largest |g|"))                  \
	BELLOWS_LAYER_STAT(X, acc_norm, F64, 8, MAG, agg(NORM),                \
	    gate(acc_norm_mean), view(F64), field(grad_norm),                  \
	    wcol("grad_norm_rank0"), wcol2("grad_norm_mean"), hist(NULLABLE),  \
	    unit("grad"),                                                      \
	    doc("L2 norm of the gradient summed over the window"))             \
	BELLOWS_LAYER_STAT(X, momentum_abs_mean, F64, 9, MAG, agg(MEAN),       \
	    view(F64), hist(NULLABLE), unit("grad"),                           \
	    doc("mean |m| at window end, m = beta m + (1 - beta) g; 0 if off")) \
	BELLOWS_LAYER_STAT(X, observed_steps, U32, 10, ANY, unit("steps"),     \
	    doc("steps in which the layer was observed"))                      \
	BELLOWS_LAYER_STAT(X, act_steps, U32, 11, ANY, agg(SUM), view(U64),    \
	    unit("steps"),                                                     \
	    doc("steps with activation statistics; 0: not measured"))          \
	BELLOWS_LAYER_STAT(X, act_lbar, F64, 12, MAG, agg(GATED_MEAN),         \
	    gate(act_steps), view(F64), unit("grad"),                          \
	    doc("L-bar: mean over samples of max |dLoss/dOutput|"))            \
	BELLOWS_LAYER_STAT(X, act_nonzero, F64, 13, FRAC, agg(GATED_MEAN),     \
	    gate(act_steps), view(F64), unit("fraction"),                      \
	    doc("R: non-zero fraction of the stored activation"))              \
	BELLOWS_LAYER_STAT(X, act_bytes, F64, 14, MAG, agg(GATED_MEAN),        \
	    gate(act_steps), view(F64), unit("bytes"),                         \
	    doc("activation bytes stored for backward per step"))              \
	BELLOWS_LAYER_STAT(X, act_raw_bytes, F64, 15, MAG, agg(GATED_MEAN),    \
	    gate(act_steps), view(F64), unit("bytes"),                         \
	    doc("the same activation uncompressed, per step"))                 \
	BELLOWS_LAYER_STAT(X, comm_raw_ms, F64, 16, MAG, agg(GATED_MEDIAN),    \
	    gate(comm_raw_n), view(F64), hist(NULLABLE), unit("ms"),           \
	    doc("lower quartile of timed raw sends; comp and codec alike"))    \
	BELLOWS_LAYER_STAT(X, comm_raw_n, U32, 17, ANY, agg(SUM_SAT),          \
	    view(U32), unit("sends"), doc("raw sends timed; 0: none"))         \
	BELLOWS_LAYER_STAT(X, comm_comp_ms, F64, 18, MAG, agg(GATED_MEDIAN),   \
	    gate(comm_comp_n), view(F64), hist(NULLABLE), unit("ms"),          \
	    doc("median of the layer's timed compressed sends, codec "         \
		"excluded"))                                                   \
	BELLOWS_LAYER_STAT(X, comm_comp_n, U32, 19, ANY, agg(SUM_SAT),         \
	    view(U32), unit("sends"), doc("compressed sends timed; 0: none"))  \
	BELLOWS_LAYER_STAT(X, codec_ms, F64, 20, MAG, agg(GATED_MEDIAN),       \
	    gate(comm_comp_n), view(F64), hist(NULLABLE), unit("ms"),          \
	    doc("median encode + decode time of those compressed sends"))      \
	BELLOWS_LAYER_STAT(X, resid_steps, U32, 30, ANY, agg(SUM), view(U64),  \
	    unit("steps"),                                                     \
	    doc("steps with residual statistics (error feedback); 0: none"))   \
	BELLOWS_LAYER_STAT(X, resid_l1, F64, 31, MAG, agg(GATED_MEAN),         \
	    gate(resid_steps), view(F64), unit("grad"),                        \
	    doc("L1 norm of the layer's fresh residual G~ - Q(G~), step "      \
		"mean"))                                                       \
	BELLOWS_LAYER_STAT(X, resid_l2, F64, 32, MAG, agg(GATED_MEAN),         \
	    gate(resid_steps), view(F64), unit("grad"),                        \
	    doc("L2 norm of the same residual, step mean"))                    \
	BELLOWS_LAYER_STAT(X, resid_q50, F64, 33, MAG, agg(GATED_MEAN),        \
	    gate(resid_steps), view(F64), unit("rms"),                         \
	    doc("median of |r| / rms(r), rms = L2 / sqrt(numel) (sampled)"))   \
	BELLOWS_LAYER_STAT(X, resid_q90, F64, 34, MAG, agg(GATED_MEAN),        \
	    gate(resid_steps), view(F64), unit("rms"),                         \
	    doc("90th percentile of |r| / rms(r) (sampled)"))                  \
	BELLOWS_LAYER_STAT(X, resid_q99, F64, 35, MAG, agg(GATED_MEAN),        \
	    gate(resid_steps), view(F64), unit("rms"),                         \
	    doc("99th percentile of |r| / rms(r) (sampled)"))                  \
	BELLOWS_LAYER_STAT(X, resid_floats, F64, 36, MAG, agg(GATED_MEAN),     \
	    gate(resid_steps), view(F64), unit("floats"),                      \
	    doc("residual floats the layer holds under the plan in force"))    \
	BELLOWS_LAYER_STAT(X, level_applied_n, U32, 37, ANY, unit("ranks"),    \
	    doc("ranks whose report carries level_applied (1 in a rank's "     \
		"own report; 0: an agent older than the statistic)"))          \
	BELLOWS_LAYER_STAT(X, level_applied, F64, 38, MAG, agg(GATED_MAX),     \
	    gate(level_applied_n), view(F64), hist(NULLABLE), unit("level"),   \
	    doc("level the layer was sent at in the window's last step (0: "   \
		"raw; after the size threshold, the gate and raw-only "        \
		"tensors)"))                                                   \
	BELLOWS_LAYER_STAT(X, acc_norm_mean, F64, 40, MAG, unit("grad"),       \
	    doc("in a report covering several ranks, the mean of acc_norm "    \
		"over them (acc_norm is then the reporting rank's own); 0 in " \
		"a rank's own report. bellowsd folds it into acc_norm's mean "  \
		"(acc_norm's gate)"))

/* The rows appended after policy ABI 6: a new per-layer statistic is a
 * row at the end of this list, and nowhere else in this table. The
 * policies' window is generated from it: each row in the window (view)
 * becomes a field of bellows_window_layer after the ABI 6 fields, in the
 * order of this list (BELLOWS_WINDOW_LAYER_FIELD, two more for a NORM
 * row), so the rule that rows are only appended is the rule that keeps
 * that public struct's layout: appended fields need no ABI bump (policies
 * step through the layers by the window's layer_size), and a plug-in
 * built against a newer header checks one with BELLOWS_WINDOW_LAYER_HAS
 * before reading it. tests/policies/test_abi.c proves at compile time
 * that every ABI 6 field keeps its offset and size and that these come
 * after them. A row is never inserted, reordered, retyped or removed,
 * and its view type never changes. Empty today. (An array row,
 * BELLOWS_LAYER_ARRAYS, has no generated window field yet: a new one
 * needs this tail extended to carry its pointer and count first.) */
#define BELLOWS_LAYER_STATS_APPENDED(X)

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
	BELLOWS_RANK_TIMING(X, steps, U32, 1, ANY, unit("steps"),              \
	    doc("steps in the window"))                                        \
	BELLOWS_RANK_TIMING(X, step_ms, F64, 2, MAG, agg(STEP_MEDIAN),         \
	    view(F64), field(step_ms_median), hist(NULLABLE), unit("ms"),      \
	    doc("sum of the window's step times"))                             \
	BELLOWS_RANK_TIMING(X, compute_ms, F64, 3, MAG, agg(STEP_MEDIAN),      \
	    view(F64), field(compute_ms_median), hist(NULLABLE), unit("ms"),   \
	    doc("sum of compute (forward + backward) times"))                  \
	BELLOWS_RANK_TIMING(X, comm_ms, F64, 4, MAG, agg(STEP_MEDIAN),         \
	    view(F64), field(comm_ms_median), hist(NULLABLE), unit("ms"),      \
	    doc("sum of gradient communication times"))                        \
	BELLOWS_RANK_TIMING(X, step_ms_max, F64, 5, MAG, hist(NULLABLE),       \
	    unit("ms"), doc("slowest step of the window"))                     \
	BELLOWS_RANK_TIMING(X, bytes_sent, U64, 6, ANY, unit("bytes"),         \
	    doc("gradient bytes the rank sent"))                               \
	BELLOWS_RANK_TIMING(X, floats_sent, U64, 7, ANY, agg(SUM), view(U64),  \
	    unit("floats"), doc("floats the rank sent"))                       \
	BELLOWS_RANK_TIMING(X, floats_raw, U64, 8, ANY, agg(SUM), view(U64),   \
	    unit("floats"),                                                    \
	    doc("floats the same steps would send uncompressed"))              \
	BELLOWS_RANK_TIMING(X, decision_misses, U32, 9, ANY, unit("steps"),    \
	    doc("apply steps reached without the decision"))                   \
	BELLOWS_RANK_TIMING(X, reports_dropped, U64, 10, ANY,                  \
	    unit("reports"), doc("reports the agent's queue had to drop"))     \
	BELLOWS_RANK_TIMING(X, backward_ms, F64, 11, MAG,                      \
	    agg(STEP_MEDIAN_NZ), view(F64), field(backward_ms_median),         \
	    unit("ms"),                                                        \
	    doc("sum of backward compute times, communication excluded"))      \
	BELLOWS_RANK_TIMING(X, codec_ms, F64, 12, MAG, agg(STEP_MEDIAN_NZ),    \
	    view(F64), field(codec_ms_median), unit("ms"),                     \
	    doc("sum of encode + decode times"))                               \
	BELLOWS_RANK_TIMING(X, mem_device_used, U64, 13, ANY, agg(MAX),        \
	    view(F64), unit("bytes"),                                          \
	    doc("device memory in use, largest seen in the window"))           \
	BELLOWS_RANK_TIMING(X, mem_device_total, U64, 14, ANY, agg(MIN_NZ),    \
	    view(F64), unit("bytes"), doc("device memory the device has"))     \
	BELLOWS_RANK_TIMING(X, mem_host_used, U64, 15, ANY, agg(MAX),          \
	    view(F64), unit("bytes"),                                          \
	    doc("host memory in use, largest seen in the window"))             \
	BELLOWS_RANK_TIMING(X, saved_bytes, U64, 16, ANY, agg(MAX), view(F64), \
	    rcol(NULL), wcol("act_saved_bytes"), unit("bytes"),                \
	    doc("bytes one step saved for backward (every activation), "       \
		"largest"))                                                    \
	BELLOWS_RANK_TIMING(X, eval_accuracy, F64, 17, FRAC, agg(MAX),         \
	    view(F64), rcol(NULL), unit("fraction"),                           \
	    doc("evaluation accuracy the trainer measured (e.g. on its test "  \
		"split), the window's last; largest over ranks"))              \
	BELLOWS_RANK_TIMING(X, eval_loss, F64, 18, MAG, agg(MAX), view(F64),   \
	    rcol(NULL), unit("loss"),                                          \
	    doc("evaluation loss the trainer measured, the window's last; "    \
		"largest over ranks"))                                         \
	BELLOWS_RANK_TIMING(X, step_ms_rank_min, F64, 19, MAG, unit("ms"),     \
	    doc("a report covering several ranks (aggregation in the job): "   \
		"the smallest of their mean step times; 0 in a rank's own "    \
		"report"))                                                     \
	BELLOWS_RANK_TIMING(X, step_ms_rank_max, F64, 20, MAG, unit("ms"),     \
	    doc("a report covering several ranks: the largest of their mean "  \
		"step times; 0 in a rank's own report"))

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
 * LayerStats on the wire as packed repeated uint64 fields (each row a
 * field of its own, sharing the scalars' tag space), in the C structs a
 * pointer to `len` values, NULL when the rank did not measure it. Only the
 * layers the trainer asks for carry one (e.g. BELLOWS_LAYER_EXP_HIST), so
 * other layers and jobs pay nothing. A row is
 * BELLOWS_LAYER_ARRAY(X, name, len, tag, check, options...):
 *   name   the field in the C structs, the .proto and Python;
 *   len    the array's length (a received one of another length, but for
 *          an absent one, is refused);
 *   tag    its field number in LayerStats;
 *   check  LEN: exactly len values or none;
 * options (see the top of the file):
 *   agg(SUM)   per element over the ranks that reported it, saturating at
 *              UINT64_MAX (the default and only kind);
 *   field(F)   the policy window's pointer field (bellows_window_layer)
 *              when not `name`, with F##_len beside it (0 and NULL: no
 *              rank reported it);
 *   wcol("c")  the history column of the sum (table `windows`), default
 *              `name`: a BLOB of len little-endian uint64, NULL when no
 *              rank reported it;
 *   unit, doc  as above.
 * They are read as X(name, len, tag, check, agg, wfield, wcol, unit,
 * doc). */
#define BELLOWS_LAYER_ARRAYS(X)                                                \
	BELLOWS_LAYER_ARRAY(X, exp_hist, 256, 21, LEN, unit("values"),         \
	    doc("gradient values per float32 biased exponent (bin 0: zeros "   \
		"and denormals, 255: Inf and NaN; float16 and bfloat16 "       \
		"values in the bin of their exact float32 widening)"))

/* clang-format on */

/* C types of the `type` and `wtype` columns. */
#define BELLOWS_STAT_CTYPE_U32 uint32_t
#define BELLOWS_STAT_CTYPE_U64 uint64_t
#define BELLOWS_STAT_CTYPE_F64 double

/* One struct field per entry: `TABLE(BELLOWS_STAT_FIELD)` inside a struct
 * declares the table's fields in order, with their reported types. */
#define BELLOWS_STAT_FIELD(name, type, ...) BELLOWS_STAT_CTYPE_##type name;

/* The policies' window field(s) of a row: `TABLE(BELLOWS_WINDOW_LAYER_FIELD)`
 * inside bellows_window_layer declares wfield with the C type of wtype
 * for each row in the window (none for a row without view), and for a
 * NORM row wfield##_rank0 and wfield##_mean after it (doubles, as
 * bellowsd fills them). */
#define BELLOWS_WINDOW_LAYER_FIELD(name, type, tag, check, agg, gate, wtype,   \
    wfield, ...)                                                               \
	BELLOWS_STAT_WFIELD_##wtype(wfield) BELLOWS_STAT_WNORM_##agg(wfield)
#define BELLOWS_STAT_WFIELD_NONE(f)
#define BELLOWS_STAT_WFIELD_U32(f) uint32_t f;
#define BELLOWS_STAT_WFIELD_U64(f) uint64_t f;
#define BELLOWS_STAT_WFIELD_F64(f) double f;
#define BELLOWS_STAT_WNORM_NONE(f)
#define BELLOWS_STAT_WNORM_SUM(f)
#define BELLOWS_STAT_WNORM_SUM_SAT(f)
#define BELLOWS_STAT_WNORM_MAX(f)
#define BELLOWS_STAT_WNORM_MIN_NZ(f)
#define BELLOWS_STAT_WNORM_MEAN(f)
#define BELLOWS_STAT_WNORM_GATED_MEAN(f)
#define BELLOWS_STAT_WNORM_GATED_MEDIAN(f)
#define BELLOWS_STAT_WNORM_GATED_MAX(f)
#define BELLOWS_STAT_WNORM_STEP_MEDIAN(f)
#define BELLOWS_STAT_WNORM_STEP_MEDIAN_NZ(f)
#define BELLOWS_STAT_WNORM_NORM(f)                                             \
	double f##_rank0;                                                      \
	double f##_mean;

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
