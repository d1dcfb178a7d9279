/* stat_table - the statistics table as data, see stat_table.h.
 *
 * Generated from bellows/stats.h by the preprocessor: nothing below names
 * a statistic. The static assertions tie the generated message structs to
 * the table (every entry a field of the declared type).
 */
#include "stat_table.h"

#include <assert.h>
#include <string.h>

#include "msg.h"

/* A token `_` of the table stands for "none". */
#define STAT_STR(tok)       #tok
#define STAT_WFIELD_NONE(f) NULL
#define STAT_WFIELD_U32(f)  STAT_STR(f)
#define STAT_WFIELD_U64(f)  STAT_STR(f)
#define STAT_WFIELD_F64(f)  STAT_STR(f)

/* The gate's index: -1 for `_`. */
#define COM_LSTAT__ (-1)
#define COM_TSTAT__ (-1)

#define STAT_ENTRY(prefix, strct, name, type, tag, check, agg, gate, wtype,    \
    wfield, rcol, wcol, wcol2, hist, unit, doc)                                \
	{                                                                      \
		#name,                                                         \
		BELLOWS_STAT_TYPE_##type,                                      \
		tag,                                                           \
		BELLOWS_STAT_CHECK_##check,                                    \
		BELLOWS_STAT_AGG_##agg,                                        \
		prefix##gate,                                                  \
		BELLOWS_STAT_TYPE_##wtype,                                     \
		STAT_WFIELD_##wtype(wfield),                                   \
		offsetof(strct, name),                                         \
		rcol,                                                          \
		wcol,                                                          \
		wcol2,                                                         \
		BELLOWS_STAT_HIST_##hist,                                      \
		unit,                                                          \
		doc,                                                           \
	},
#define STAT_LAYER(...)  STAT_ENTRY(COM_LSTAT_, com_layer_stats, __VA_ARGS__)
#define STAT_TIMING(...) STAT_ENTRY(COM_TSTAT_, com_timings, __VA_ARGS__)

const com_stat com_layer_stat_table[] = { BELLOWS_LAYER_STATS(STAT_LAYER) };
const com_stat com_timing_stat_table[] = { BELLOWS_RANK_TIMINGS(STAT_TIMING) };

#define STAT_ARRAY(name, len, tag, check, agg, wfield, wcol, unit, doc)        \
	{                                                                      \
		#name,                                                         \
		len,                                                           \
		tag,                                                           \
		BELLOWS_STAT_AGG_##agg,                                        \
		#wfield,                                                       \
		offsetof(com_layer_stats, name),                               \
		wcol,                                                          \
		unit,                                                          \
		doc,                                                           \
	},
const com_stat_array com_layer_array_table[] = { BELLOWS_LAYER_ARRAYS(
    STAT_ARRAY) };

/* Tags: within 1..BELLOWS_STAT_TAG_MAX (LayerStats' 1 is `layer`), and
 * each taken once within its message (a tag taken twice is a duplicate
 * case value, which does not compile). The function is never called
 * (marked unused: clang warns of an unused static inline in a .c file). */
#define STAT_TAG_RANGE(min, name, type, tag, ...)                              \
	static_assert((tag) >= (min) && (tag) <= BELLOWS_STAT_TAG_MAX,         \
	    #name "'s tag is within its message's range (bellows/stats.h)");
#define STAT_TAG_RANGE_LAYER(...)  STAT_TAG_RANGE(2, __VA_ARGS__)
#define STAT_TAG_RANGE_TIMING(...) STAT_TAG_RANGE(1, __VA_ARGS__)
BELLOWS_LAYER_STATS(STAT_TAG_RANGE_LAYER)
BELLOWS_LAYER_ARRAYS(STAT_TAG_RANGE_LAYER)
BELLOWS_RANK_TIMINGS(STAT_TAG_RANGE_TIMING)
#define STAT_TAG_CASE(name, type, tag, ...) case tag:
__attribute__((unused)) static void
stat_tags_unique(int layer_tag, int timing_tag)
{
	switch (layer_tag) {
	case 1: /* layer */
		BELLOWS_LAYER_STATS(STAT_TAG_CASE)
		BELLOWS_LAYER_ARRAYS(STAT_TAG_CASE)
		break;
	default:
		break;
	}
	switch (timing_tag) {
		BELLOWS_RANK_TIMINGS(STAT_TAG_CASE)
		break;
	default:
		break;
	}
}

/* Every row has a one-line doc (a missing one is NULL, which does not
 * concatenate with ""). */
#define STAT_HAS_DOC(name, type, tag, check, agg, gate, wtype, wfield, rcol,   \
    wcol, wcol2, hist, unit, doc)                                              \
	static_assert(sizeof("" doc) > 1, #name " has a doc");
#define STAT_ARRAY_HAS_DOC(name, len, tag, check, agg, wfield, wcol, unit,     \
    doc)                                                                       \
	static_assert(sizeof("" doc) > 1, #name " has a doc");
BELLOWS_LAYER_STATS(STAT_HAS_DOC)
BELLOWS_RANK_TIMINGS(STAT_HAS_DOC)
BELLOWS_LAYER_ARRAYS(STAT_ARRAY_HAS_DOC)

/* Bit i of a stats_read or stats_skip set is layer statistic i; bit 63 is
 * BELLOWS_STATS_DECLARED (bellows/policy.h). */
static_assert(COM_N_LSTATS <= 63, "a layer statistic per bit of stats_read");

static_assert(sizeof(com_layer_stat_table) / sizeof(com_stat) == COM_N_LSTATS,
    "one descriptor per layer statistic");
static_assert(sizeof(com_timing_stat_table) / sizeof(com_stat) == COM_N_TSTATS,
    "one descriptor per timing");

/* Every generated field has the table's type. */
#define STAT_CHECK_TYPE(strct, name, type, ...)                                \
	static_assert(COM_STAT_TYPE_OF(((strct *)0)->name) ==                  \
		BELLOWS_STAT_TYPE_##type,                                      \
	    #strct "." #name " has the table's type");
#define STAT_CHECK_LAYER(...)  STAT_CHECK_TYPE(com_layer_stats, __VA_ARGS__)
#define STAT_CHECK_TIMING(...) STAT_CHECK_TYPE(com_timings, __VA_ARGS__)
BELLOWS_LAYER_STATS(STAT_CHECK_LAYER)
BELLOWS_RANK_TIMINGS(STAT_CHECK_TIMING)

const uint64_t *
com_stat_array_get(const com_stat_array *a, const void *base)
{
	const uint64_t *v;

	memcpy(&v, (const char *)base + a->offset, sizeof(v));
	return v;
}

const com_stat *
com_stat_find(const com_stat *table, size_t n, const char *name)
{
	if (name == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

double
com_stat_get_double(const com_stat *s, const void *base)
{
	const char *p = (const char *)base + s->offset;
	uint32_t u32;
	uint64_t u64;
	double d;

	switch (s->type) {
	case BELLOWS_STAT_TYPE_U32:
		memcpy(&u32, p, sizeof(u32));
		return (double)u32;
	case BELLOWS_STAT_TYPE_U64:
		memcpy(&u64, p, sizeof(u64));
		return (double)u64;
	case BELLOWS_STAT_TYPE_F64:
		memcpy(&d, p, sizeof(d));
		return d;
	default:
		return 0.0;
	}
}

uint64_t
com_stat_get_u64(const com_stat *s, const void *base)
{
	const char *p = (const char *)base + s->offset;
	uint32_t u32;
	uint64_t u64;

	switch (s->type) {
	case BELLOWS_STAT_TYPE_U32:
		memcpy(&u32, p, sizeof(u32));
		return u32;
	case BELLOWS_STAT_TYPE_U64:
		memcpy(&u64, p, sizeof(u64));
		return u64;
	default:
		return 0;
	}
}

const char *
com_stat_type_name(bellows_stat_type type)
{
	switch (type) {
	case BELLOWS_STAT_TYPE_U32:
		return "U32";
	case BELLOWS_STAT_TYPE_U64:
		return "U64";
	case BELLOWS_STAT_TYPE_F64:
		return "F64";
	default:
		return "NONE";
	}
}

const char *
com_stat_check_name(bellows_stat_check check)
{
	switch (check) {
	case BELLOWS_STAT_CHECK_ANY:
		return "ANY";
	case BELLOWS_STAT_CHECK_MAG:
		return "MAG";
	case BELLOWS_STAT_CHECK_FRAC:
		return "FRAC";
	default:
		return "?";
	}
}

const char *
com_stat_agg_name(bellows_stat_agg agg)
{
	static const char *const names[] = {
		[BELLOWS_STAT_AGG_NONE] = "NONE",
		[BELLOWS_STAT_AGG_SUM] = "SUM",
		[BELLOWS_STAT_AGG_SUM_SAT] = "SUM_SAT",
		[BELLOWS_STAT_AGG_MAX] = "MAX",
		[BELLOWS_STAT_AGG_MIN_NZ] = "MIN_NZ",
		[BELLOWS_STAT_AGG_MEAN] = "MEAN",
		[BELLOWS_STAT_AGG_GATED_MEAN] = "GATED_MEAN",
		[BELLOWS_STAT_AGG_GATED_MEDIAN] = "GATED_MEDIAN",
		[BELLOWS_STAT_AGG_NORM] = "NORM",
		[BELLOWS_STAT_AGG_STEP_MEDIAN] = "STEP_MEDIAN",
		[BELLOWS_STAT_AGG_STEP_MEDIAN_NZ] = "STEP_MEDIAN_NZ",
		[BELLOWS_STAT_AGG_GATED_MAX] = "GATED_MAX",
	};

	if ((unsigned)agg >= sizeof(names) / sizeof(names[0]))
		return "?";
	return names[agg];
}
