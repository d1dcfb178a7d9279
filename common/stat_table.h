/* stat_table - the statistics table (bellows/stats.h) as data.
 *
 * One descriptor per entry of BELLOWS_LAYER_STATS and BELLOWS_RANK_TIMINGS,
 * in table order, for code that walks the statistics instead of naming
 * them: the wire module's mapping and checks, the controller's aggregation,
 * the history's columns, binds and readers, the generated documentation.
 * Offsets are into the message structs of msg.h (com_layer_stats,
 * com_timings); a consumer with a struct of its own (the policy window,
 * bellows_layer_stats) pairs its offsets with these descriptors by index.
 * Everything here is constant: safe from any thread.
 */
#ifndef COM_STAT_TABLE_H
#define COM_STAT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <bellows/stats.h>

/* The entries of each table, in order, as enum values: COM_LSTAT_count,
 * ..., COM_N_LSTATS; COM_TSTAT_steps, ..., COM_N_TSTATS. */
#define COM_STAT_LENUM(name, ...) COM_LSTAT_##name,
#define COM_STAT_TENUM(name, ...) COM_TSTAT_##name,
enum {
	BELLOWS_LAYER_STATS(COM_STAT_LENUM) COM_N_LSTATS
};
enum {
	BELLOWS_RANK_TIMINGS(COM_STAT_TENUM) COM_N_TSTATS
};

/* The array statistics (BELLOWS_LAYER_ARRAYS), in order: COM_LARRAY_exp_hist,
 * ..., COM_N_LARRAYS. */
#define COM_STAT_AENUM(name, ...) COM_LARRAY_##name,
enum {
	BELLOWS_LAYER_ARRAYS(COM_STAT_AENUM) COM_N_LARRAYS
};

/* The bellows_stat_type of expression x's type (NONE for another type),
 * for static assertions that a struct field has a table's type. */
/* clang-format off */
#define COM_STAT_TYPE_OF(x)                                                    \
	_Generic((x),                                                          \
	    uint32_t: BELLOWS_STAT_TYPE_U32,                                   \
	    uint64_t: BELLOWS_STAT_TYPE_U64,                                   \
	    double: BELLOWS_STAT_TYPE_F64,                                     \
	    default: BELLOWS_STAT_TYPE_NONE)
/* clang-format on */

/* One entry of a table (the columns of bellows/stats.h). */
typedef struct com_stat {
	const char *name;         /* field, proto field and Python name */
	bellows_stat_type type;   /* as one rank reports it */
	uint32_t tag;             /* proto field number */
	bellows_stat_check check; /* what a received value must pass */
	bellows_stat_agg agg;     /* across the ranks of a window */
	int gate;                 /* GATED_*: index of the gate entry in the
				   * same table; -1: none */
	bellows_stat_type wtype;  /* in the policy window; NONE: not there */
	const char *wfield;       /* its field there; NULL when wtype NONE */
	size_t offset;            /* in com_layer_stats or com_timings */
	const char *rcol;         /* history column per rank, NULL: none */
	const char *wcol;         /* history column aggregated, NULL: none */
	const char *wcol2;        /* a second one (NORM's mean), NULL: none */
	bellows_stat_hist hist;   /* how "not measured" is kept there */
	const char *unit;         /* for people */
	const char *doc;          /* one line */
} com_stat;

/* One entry of BELLOWS_LAYER_ARRAYS. */
typedef struct com_stat_array {
	const char *name;     /* field, proto field and Python name */
	uint32_t len;         /* values; a present one has exactly these */
	uint32_t tag;         /* proto field number (repeated uint64) */
	bellows_stat_agg agg; /* SUM: per value over the ranks */
	const char *wfield;   /* pointer field of bellows_window_layer, with
			       * wfield##_len beside it */
	size_t offset;        /* of the pointer in com_layer_stats */
	const char *wcol;     /* history column (BLOB), NULL: none */
	const char *unit;     /* for people */
	const char *doc;      /* one line */
} com_stat_array;

/* The array table: COM_N_LARRAYS entries, offsets in com_layer_stats. */
extern const com_stat_array com_layer_array_table[];

/* The array the entry `a` points to in the com_layer_stats at base, NULL
 * when absent. */
const uint64_t *com_stat_array_get(const com_stat_array *a, const void *base);

/* The per-layer table: COM_N_LSTATS entries, offsets in com_layer_stats. */
extern const com_stat com_layer_stat_table[];

/* The per-rank timings: COM_N_TSTATS entries, offsets in com_timings. */
extern const com_stat com_timing_stat_table[];

/* The entry of table (n entries) called `name`, or NULL if there is none
 * (or name is NULL). */
const com_stat *com_stat_find(const com_stat *table, size_t n,
    const char *name);

/* The value of entry s in the struct at `base` (a com_layer_stats or a
 * com_timings as the table says), as a double. */
double com_stat_get_double(const com_stat *s, const void *base);

/* The value as an unsigned integer; 0 for an F64 entry. */
uint64_t com_stat_get_u64(const com_stat *s, const void *base);

/* "U32", "U64", "F64" or "NONE"; the C type's name with ctype. */
const char *com_stat_type_name(bellows_stat_type type);

/* The bits of -0.0 read as an unsigned integer: the one value with its
 * sign bit set that MAG and FRAC let pass. */
#define COM_STAT_NEG_ZERO_BITS ((uint64_t)1 << 63)

/* The largest value passing each check, as the bits of an IEEE 754
 * double read as an unsigned integer: positive doubles order as their
 * bits do, and every NaN, infinity and negative number (-0 aside) lies
 * above the largest finite one, so a value v passes when its bits are at
 * most the bound or v is -0 (com_stat_check_passes). As constants for
 * tables built at compile time (common/wire_fast.c's). */
#define COM_STAT_CHECK_BOUND_ANY  UINT64_MAX
#define COM_STAT_CHECK_BOUND_MAG  UINT64_C(0x7fefffffffffffff) /* DBL_MAX */
#define COM_STAT_CHECK_BOUND_FRAC UINT64_C(0x3ff0000000000000) /* 1.0 */

/* The bound of check (COM_STAT_CHECK_BOUND_*); a check out of the enum
 * lets any value pass, as ANY does. */
static inline uint64_t
com_stat_check_bound(bellows_stat_check check)
{
	switch (check) {
	case BELLOWS_STAT_CHECK_MAG:
		return COM_STAT_CHECK_BOUND_MAG;
	case BELLOWS_STAT_CHECK_FRAC:
		return COM_STAT_CHECK_BOUND_FRAC;
	default:
		return COM_STAT_CHECK_BOUND_ANY;
	}
}

/* True when a received value v (an integer statistic as a double) passes
 * check, the table's check column: ANY any value, MAG finite and not
 * negative (-0 passes), FRAC MAG and at most 1; a value out of the enum
 * passes. The decoder refuses a frame carrying a value that does not.
 * Inline: it runs for every statistic of every report; the decoder's
 * per-field table keeps com_stat_check_bound's answer instead. */
static inline bool
com_stat_check_passes(bellows_stat_check check, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	return u <= com_stat_check_bound(check) || u == COM_STAT_NEG_ZERO_BITS;
}

/* "ANY", "MAG", "FRAC"; "?" for a value out of the enum. */
const char *com_stat_check_name(bellows_stat_check check);

/* The aggregation's token in bellows/stats.h ("SUM", "GATED_MEDIAN",
 * ...); "?" for a value out of the enum. */
const char *com_stat_agg_name(bellows_stat_agg agg);

#endif /* COM_STAT_TABLE_H */
