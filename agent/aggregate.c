/* aggregate - one window's statistics reduced over a group of ranks, see
 * aggregate.h.
 */
#include "aggregate.h"

#include <bellows/agent.h>
#include <bellows/error.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
	AGG_SUM = BELLOWS_REDUCE_SUM,
	AGG_MAX = BELLOWS_REDUCE_MAX,
	AGG_MIN = BELLOWS_REDUCE_MIN
};

/* The values of every array statistic of one layer. */
#define AGGREGATE_ARRAY_LEN(name, len, ...) +(len)
enum {
	AGGREGATE_ARRAY_VALUES = 0 BELLOWS_LAYER_ARRAYS(AGGREGATE_ARRAY_LEN)
};

static bool
aggregate_is_step(const com_stat *st)
{
	return st->agg == BELLOWS_STAT_AGG_STEP_MEDIAN ||
	    st->agg == BELLOWS_STAT_AGG_STEP_MEDIAN_NZ;
}

static bool
aggregate_is_gated(const com_stat *st)
{
	return st->agg == BELLOWS_STAT_AGG_GATED_MEAN ||
	    st->agg == BELLOWS_STAT_AGG_GATED_MEDIAN;
}

/* The timing entries that are not reduced: the window's steps are the
 * reporting rank's; the fastest and the slowest rank's mean step time are
 * set from step_ms's gathered values. */
static bool
aggregate_is_own(const com_stat *st)
{
	return st == &com_timing_stat_table[COM_TSTAT_steps] ||
	    st == &com_timing_stat_table[COM_TSTAT_step_ms_rank_min] ||
	    st == &com_timing_stat_table[COM_TSTAT_step_ms_rank_max];
}

/* The entry a NORM entry of the table writes its group mean into (its
 * gate, acc_norm_mean): reduced with the NORM entry, not on its own. */
static bool
aggregate_is_norm_mean(const com_stat *table, size_t n, size_t k)
{
	for (size_t i = 0; i < n; i++)
		if (table[i].agg == BELLOWS_STAT_AGG_NORM &&
		    table[i].gate == (int)k)
			return true;
	return false;
}

/* Places the entries of one table: at[k] gets its operator and offset,
 * len[op] counts each buffer's doubles, `slots` doubles per STEP_*
 * entry (the gathered values). */
static void
aggregate_place(const com_stat *table, size_t n, agent_aggregate_at *at,
    uint32_t len[3], uint32_t slots)
{
	for (size_t k = 0; k < n; k++) {
		const com_stat *st = &table[k];
		int op;

		switch (st->agg) {
		case BELLOWS_STAT_AGG_MAX:
		case BELLOWS_STAT_AGG_GATED_MAX:
			op = AGG_MAX;
			break;
		case BELLOWS_STAT_AGG_MIN_NZ:
			op = AGG_MIN;
			break;
		case BELLOWS_STAT_AGG_NONE:
			/* Other history-only entries are the largest time
			 * or the summed count. */
			if (aggregate_is_own(st) ||
			    aggregate_is_norm_mean(table, n, k))
				op = -1;
			else
				op = st->type == BELLOWS_STAT_TYPE_F64
				    ? AGG_MAX
				    : AGG_SUM;
			break;
		default:
			op = AGG_SUM;
			break;
		}
		at[k].op = op;
		if (op < 0)
			continue;
		at[k].off = len[op];
		len[op] += aggregate_is_step(st) ? slots : 1;
		if (aggregate_is_gated(st))
			at[k].cnt = len[AGG_SUM]++;
	}
}

int
agent_aggregate_init(agent_aggregate *a, uint32_t n_layers, const bool *arrays,
    uint32_t group, uint32_t slot)
{
	uint32_t tlen[3] = { 0, 0, 0 };

	memset(a, 0, sizeof(*a));
	if (group == 0 || slot >= group || n_layers == 0)
		return BELLOWS_EINVAL;
	a->n_layers = n_layers;
	a->group = group;
	a->slot = slot;
	aggregate_place(com_layer_stat_table, COM_N_LSTATS, a->lat, a->lstride,
	    1);
	aggregate_place(com_timing_stat_table, COM_N_TSTATS, a->tat, tlen,
	    group);
	if ((a->arrays = calloc(n_layers, sizeof(bool))) == NULL)
		goto fail;
	for (uint32_t l = 0; arrays != NULL && l < n_layers; l++)
		if ((a->arrays[l] = arrays[l]))
			a->n_array_layers++;
	for (int op = 0; op < 3; op++) {
		a->tlen[op] = tlen[op];
		a->len[op] = (size_t)n_layers * a->lstride[op] + tlen[op];
	}
	a->len[AGG_SUM] += (size_t)a->n_array_layers * AGGREGATE_ARRAY_VALUES;
	for (int op = 0; op < 3; op++)
		if ((a->buf[op] = calloc(a->len[op] ? a->len[op] : 1,
			 sizeof(double))) == NULL)
			goto fail;
	a->scratch = malloc(sizeof(double) * group);
	a->out = calloc(n_layers, sizeof(*a->out));
	a->out_arrays = calloc((size_t)(a->n_array_layers ? a->n_array_layers
							  : 1) *
		AGGREGATE_ARRAY_VALUES,
	    sizeof(uint64_t));
	if (a->scratch == NULL || a->out == NULL || a->out_arrays == NULL)
		goto fail;
	for (uint32_t k = 0; k < COM_N_TSTATS; k++)
		a->spread[k][0] = a->spread[k][1] = NAN;
	return 0;
fail:
	agent_aggregate_fini(a);
	return BELLOWS_ENOMEM;
}

void
agent_aggregate_fini(agent_aggregate *a)
{
	if (a == NULL)
		return;
	free(a->arrays);
	for (int op = 0; op < 3; op++)
		free(a->buf[op]);
	free(a->scratch);
	free(a->out);
	free(a->out_arrays);
	memset(a, 0, sizeof(*a));
}

/* Stores d into entry st of the struct at base, in the entry's type:
 * integers rounded and clamped to their range. */
static void
aggregate_put(const com_stat *st, void *base, double d)
{
	char *p = (char *)base + st->offset;

	if (!(d > 0) && st->type != BELLOWS_STAT_TYPE_F64)
		d = 0;
	if (st->type == BELLOWS_STAT_TYPE_U32) {
		uint32_t v = d >= (double)UINT32_MAX ? UINT32_MAX
						     : (uint32_t)llround(d);

		memcpy(p, &v, sizeof(v));
	} else if (st->type == BELLOWS_STAT_TYPE_U64) {
		uint64_t v = d >= 18446744073709551616.0 ? UINT64_MAX
							 : (uint64_t)(d + 0.5);

		memcpy(p, &v, sizeof(v));
	} else {
		memcpy(p, &d, sizeof(d));
	}
}

/* One table's entries of the struct at base into the buffers at
 * b[op] + base_off[op]. */
static void
aggregate_pack_one(const agent_aggregate *a, const com_stat *table, size_t n,
    const agent_aggregate_at *at, const void *base, double steps,
    double *const b[3])
{
	for (size_t k = 0; k < n; k++) {
		const com_stat *st = &table[k];
		double v;

		if (at[k].op < 0)
			continue;
		v = com_stat_get_double(st, base);
		if (aggregate_is_step(st)) {
			double *slots = b[AGG_SUM] + at[k].off;

			memset(slots, 0, sizeof(double) * a->group);
			/* -1: not measured (a per-step time is never
			 * negative). */
			slots[a->slot] = st->agg ==
				    BELLOWS_STAT_AGG_STEP_MEDIAN ||
				v > 0
			    ? v / steps
			    : -1;
		} else if (aggregate_is_gated(st)) {
			bool gated = com_stat_get_double(&table[st->gate],
					 base) > 0;

			b[AGG_SUM][at[k].off] = gated ? v : 0;
			b[AGG_SUM][at[k].cnt] = gated ? 1 : 0;
		} else if (st->agg == BELLOWS_STAT_AGG_GATED_MAX) {
			bool gated = com_stat_get_double(&table[st->gate],
					 base) > 0;

			/* Values are not negative (MAG): 0 from a rank
			 * without it leaves the largest alone; the gate,
			 * summed, says whether any rank had it. */
			b[AGG_MAX][at[k].off] = gated ? v : 0;
		} else if (st->agg == BELLOWS_STAT_AGG_MIN_NZ) {
			b[AGG_MIN][at[k].off] = v > 0 ? v : DBL_MAX;
		} else {
			b[at[k].op][at[k].off] = v;
		}
	}
}

/* Where layer l's part of each buffer starts (l = n_layers: the timings'
 * part, after every layer's). */
static void
aggregate_part(const agent_aggregate *a, uint32_t l, double *b[3])
{
	for (int op = 0; op < 3; op++)
		b[op] = a->buf[op] + (size_t)l * a->lstride[op];
}

/* Where the array statistics start in the sum buffer: after the
 * timings. */
static double *
aggregate_arrays(const agent_aggregate *a)
{
	return a->buf[AGG_SUM] + (size_t)a->n_layers * a->lstride[AGG_SUM] +
	    a->tlen[AGG_SUM];
}

void
agent_aggregate_pack(agent_aggregate *a, const com_report *own)
{
	double *arr = aggregate_arrays(a);
	double steps = own->timings.steps > 0 ? own->timings.steps : 1.0;
	double *b[3];

	for (uint32_t l = 0; l < a->n_layers; l++) {
		const com_layer_stats *s = l < own->n_layers ? &own->layers[l]
							     : NULL;

		aggregate_part(a, l, b);
		if (s == NULL) {
			static const com_layer_stats none;

			s = &none;
		}
		aggregate_pack_one(a, com_layer_stat_table, COM_N_LSTATS,
		    a->lat, s, steps, b);
		if (!a->arrays[l])
			continue;
		for (uint32_t k = 0; k < COM_N_LARRAYS; k++) {
			const com_stat_array *ar = &com_layer_array_table[k];
			const uint64_t *x = com_stat_array_get(ar, s);

			for (uint32_t j = 0; j < ar->len; j++)
				arr[j] = x != NULL ? (double)x[j] : 0;
			arr += ar->len;
		}
	}
	aggregate_part(a, a->n_layers, b);
	aggregate_pack_one(a, com_timing_stat_table, COM_N_TSTATS, a->tat,
	    &own->timings, steps, b);
}

void
agent_aggregate_fold(agent_aggregate *a, double *const x[3])
{
	for (size_t i = 0; i < a->len[AGG_SUM]; i++)
		a->buf[AGG_SUM][i] += x[AGG_SUM][i];
	for (size_t i = 0; i < a->len[AGG_MAX]; i++)
		if (x[AGG_MAX][i] > a->buf[AGG_MAX][i])
			a->buf[AGG_MAX][i] = x[AGG_MAX][i];
	for (size_t i = 0; i < a->len[AGG_MIN]; i++)
		if (x[AGG_MIN][i] < a->buf[AGG_MIN][i])
			a->buf[AGG_MIN][i] = x[AGG_MIN][i];
}

/* The k-th smallest of v[0..n) (k < n, no NaN), moving the k smallest
 * before it: Hoare's selection, linear on average, where a sort of a
 * 10,000-rank group's times was the reporting rank's largest cost. */
static double
aggregate_select(double *v, int64_t n, int64_t k)
{
	int64_t lo = 0, hi = n - 1;

	while (lo < hi) {
		double pivot = v[lo + (hi - lo) / 2];
		int64_t i = lo, j = hi;

		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				double t = v[i];

				v[i++] = v[j];
				v[j--] = t;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

/* The median of the gathered per-step values of one STEP_* entry (-1:
 * not measured), NAN when none; their min and max into spread. */
static double
aggregate_median(agent_aggregate *a, const double *slots, double spread[2])
{
	uint32_t n = 0;
	double hi, lo;

	spread[0] = spread[1] = NAN;
	for (uint32_t r = 0; r < a->group; r++) {
		if (slots[r] < 0)
			continue;
		if (n == 0 || slots[r] < spread[0])
			spread[0] = slots[r];
		if (n == 0 || slots[r] > spread[1])
			spread[1] = slots[r];
		a->scratch[n++] = slots[r];
	}
	if (n == 0)
		return NAN;
	hi = aggregate_select(a->scratch, n, n / 2);
	if (n % 2)
		return hi;
	/* The lower middle value: the largest of those moved before. */
	lo = a->scratch[0];
	for (uint32_t i = 1; i < n / 2; i++)
		if (a->scratch[i] > lo)
			lo = a->scratch[i];
	return (lo + hi) / 2;
}

/* One table's entries from the reduced buffers b into the struct at out
 * (which holds the reporting rank's own values already). */
static void
aggregate_unpack_one(agent_aggregate *a, const com_stat *table, size_t n,
    const agent_aggregate_at *at, void *out, double steps, double *const b[3],
    bool timings)
{
	for (size_t k = 0; k < n; k++) {
		const com_stat *st = &table[k];
		double v, c;

		if (at[k].op < 0)
			continue;
		v = b[at[k].op][at[k].off];
		switch (st->agg) {
		case BELLOWS_STAT_AGG_STEP_MEDIAN:
		case BELLOWS_STAT_AGG_STEP_MEDIAN_NZ: {
			double *sp = timings ? a->spread[k] : (double[2]){ 0 };
			double m = aggregate_median(a, &b[AGG_SUM][at[k].off],
			    sp);

			aggregate_put(st, out, isnan(m) ? 0 : m * steps);
			break;
		}
		case BELLOWS_STAT_AGG_GATED_MEAN:
		case BELLOWS_STAT_AGG_GATED_MEDIAN:
			c = b[AGG_SUM][at[k].cnt];
			aggregate_put(st, out, c > 0 ? v / c : 0);
			break;
		case BELLOWS_STAT_AGG_MEAN:
			aggregate_put(st, out, v / a->group);
			break;
		case BELLOWS_STAT_AGG_NORM:
			/* The rank's own value stays; the mean beside it,
			 * in its gate (acc_norm_mean). */
			aggregate_put(&table[st->gate], out, v / a->group);
			break;
		case BELLOWS_STAT_AGG_MIN_NZ:
			aggregate_put(st, out, v >= DBL_MAX ? 0 : v);
			break;
		default:
			aggregate_put(st, out, v);
			break;
		}
	}
}

void
agent_aggregate_unpack(agent_aggregate *a, const com_report *own,
    com_report *ret)
{
	double *arr = aggregate_arrays(a);
	uint64_t *out_arr = a->out_arrays;
	double steps = own->timings.steps > 0 ? own->timings.steps : 1.0;
	com_report r = *own;
	const double *sp;
	double *b[3];

	for (uint32_t l = 0; l < a->n_layers; l++) {
		com_layer_stats *s = &a->out[l];

		if (l < own->n_layers)
			*s = own->layers[l];
		else
			*s = (com_layer_stats){ 0 };
		s->layer = l;
		aggregate_part(a, l, b);
		aggregate_unpack_one(a, com_layer_stat_table, COM_N_LSTATS,
		    a->lat, s, steps, b, false);
		if (!a->arrays[l])
			continue;
		for (uint32_t k = 0; k < COM_N_LARRAYS; k++) {
			const com_stat_array *ar = &com_layer_array_table[k];
			uint64_t **slot = (uint64_t **)((char *)s + ar->offset);

			if (*slot != NULL) {
				for (uint32_t j = 0; j < ar->len; j++)
					out_arr[j] = arr[j] >=
						18446744073709551616.0
					    ? UINT64_MAX
					    : (uint64_t)arr[j];
				*slot = out_arr;
			}
			arr += ar->len;
			out_arr += ar->len;
		}
	}
	aggregate_part(a, a->n_layers, b);
	aggregate_unpack_one(a, com_timing_stat_table, COM_N_TSTATS, a->tat,
	    &r.timings, steps, b, true);
	/* NAN (no rank measured) stays 0: none. */
	sp = a->spread[COM_TSTAT_step_ms];
	r.timings.step_ms_rank_min = sp[0] >= 0 ? sp[0] : 0;
	r.timings.step_ms_rank_max = sp[1] >= 0 ? sp[1] : 0;
	r.n_layers = a->n_layers;
	r.layers = a->out;
	r.ranks = a->group;
	*ret = r;
}
