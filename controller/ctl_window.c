/* window - per-window aggregation across ranks, see ctl_window.h.
 *
 * The statistics are folded in and handed to the policies by the
 * statistics table (bellows/stats.h, stat_table.h): each entry's
 * aggregation kind says how its ranks make one value, its window field
 * where the policies see it. Nothing below names a statistic except
 * `steps`, the divisor of the per-step medians, and the view's
 * grad_norm_rank0/grad_norm_mean pair that NORM fills beside its field.
 */
#include "controller/ctl_window.h"
#include "ctl_window.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/stat_table.h"

/* A growing list of per-rank values; empty (and unallocated) in the
 * windows where nobody measured them, which are most. */
typedef struct window_vals {
	double *v;    /* entries */
	uint32_t n;   /* used */
	uint32_t cap; /* allocated */
} window_vals;

/* An entry's running aggregate: a double for a statistic reported as a
 * double, an integer for an integer one. */
typedef union window_num {
	double d;   /* F64 statistics */
	uint64_t u; /* U32 and U64 statistics */
} window_num;

/* The GATED_MEDIAN entries of the layer table, and the STEP_MEDIAN ones
 * of the timings: each keeps one value per rank. */
#define WINDOW_IS_MEDIAN(name, type, tag, check, agg, ...)                     \
	+(BELLOWS_STAT_AGG_##agg == BELLOWS_STAT_AGG_GATED_MEDIAN)
#define WINDOW_IS_STEP(name, type, tag, check, agg, ...)                       \
	+(BELLOWS_STAT_AGG_##agg == BELLOWS_STAT_AGG_STEP_MEDIAN ||            \
	    BELLOWS_STAT_AGG_##agg == BELLOWS_STAT_AGG_STEP_MEDIAN_NZ)
enum {
	WINDOW_N_MEDIANS = 0 BELLOWS_LAYER_STATS(WINDOW_IS_MEDIAN),
	WINDOW_N_STEPS = 0 BELLOWS_RANK_TIMINGS(WINDOW_IS_STEP),
};

/* One layer's aggregate: per entry of the layer table (stat_table.h),
 * in table order. */
typedef struct window_layer_agg {
	uint32_t ranks;                     /* ranks that reported it */
	double norm_rank0;                  /* NORM: rank 0's, NAN until it
					     * reports */
	window_num acc[COM_N_LSTATS];       /* sum, max or min so far */
	uint32_t gated[COM_N_LSTATS];       /* GATED_MEAN, GATED_MAX: ranks
					     * whose gate was non-zero */
	window_vals vals[WINDOW_N_MEDIANS]; /* GATED_MEDIAN, in table order:
					     * one value per gated rank */
	uint64_t *arr[COM_N_LARRAYS];       /* array statistics: per-value
					     * sums, NULL until a rank
					     * reports one */
} window_layer_agg;

/* Layers of one window that may hold array statistics: beyond them a
 * report's arrays are left out (ctl_window_arrays_dropped), so that
 * a job's windows stay within their admitted memory whatever its ranks
 * send. Trainers select the few layers they need (GComp's). */
#define WINDOW_MAX_ARRAY_LAYERS 1024

/* The values of every array statistic of one layer. */
#define WINDOW_ARRAY_LEN(name, len, ...) +(len)
enum {
	WINDOW_ARRAY_VALUES = 0 BELLOWS_LAYER_ARRAYS(WINDOW_ARRAY_LEN)
};

/* Where each entry lands in the policy view (bellows_window_layer for the
 * layers, bellows_window for the timings); SIZE_MAX: not there. */
#define WINDOW_OFF_NONE(strct, f) SIZE_MAX
#define WINDOW_OFF_U32(strct, f)  offsetof(strct, f)
#define WINDOW_OFF_U64(strct, f)  offsetof(strct, f)
#define WINDOW_OFF_F64(strct, f)  offsetof(strct, f)
#define WINDOW_LAYER_OFF(name, type, tag, check, agg, gate, wtype, wfield,     \
    ...)                                                                       \
	WINDOW_OFF_##wtype(bellows_window_layer, wfield),
#define WINDOW_TIMING_OFF(name, type, tag, check, agg, gate, wtype, wfield,    \
    ...)                                                                       \
	WINDOW_OFF_##wtype(bellows_window, wfield),
static const size_t window_layer_off[COM_N_LSTATS] = { BELLOWS_LAYER_STATS(
    WINDOW_LAYER_OFF) };
static const size_t window_timing_off[COM_N_TSTATS] = { BELLOWS_RANK_TIMINGS(
    WINDOW_TIMING_OFF) };

/* The view's fields have the table's window types. */
#define WINDOW_TYPE_NONE(strct, f, t)
#define WINDOW_TYPE_SOME(strct, f, t)                                          \
	static_assert(COM_STAT_TYPE_OF(((strct *)0)->f) == t,                  \
	    #strct "." #f " has the statistics table's type");
#define WINDOW_TYPE_U32 WINDOW_TYPE_SOME
#define WINDOW_TYPE_U64 WINDOW_TYPE_SOME
#define WINDOW_TYPE_F64 WINDOW_TYPE_SOME
/* Each array's view field is a pointer to uint64_t, with a uint32_t
 * count beside it. */
#define WINDOW_ARRAY_TYPE(name, len, tag, check, agg, wfield, ...)             \
	static_assert(_Generic(((bellows_window_layer *)0)->wfield,            \
			  const uint64_t * : 1, default : 0) &&                \
		COM_STAT_TYPE_OF(((bellows_window_layer *)0)->wfield##_len) == \
		    BELLOWS_STAT_TYPE_U32,                                     \
	    "bellows_window_layer." #wfield " is a uint64_t array");
BELLOWS_LAYER_ARRAYS(WINDOW_ARRAY_TYPE)

#define WINDOW_LAYER_TYPE(name, type, tag, check, agg, gate, wtype, wfield,    \
    ...)                                                                       \
	WINDOW_TYPE_##wtype(bellows_window_layer, wfield,                      \
	    BELLOWS_STAT_TYPE_##wtype)
#define WINDOW_TIMING_TYPE(name, type, tag, check, agg, gate, wtype, wfield,   \
    ...)                                                                       \
	WINDOW_TYPE_##wtype(bellows_window, wfield, BELLOWS_STAT_TYPE_##wtype)
BELLOWS_LAYER_STATS(WINDOW_LAYER_TYPE)
BELLOWS_RANK_TIMINGS(WINDOW_TIMING_TYPE)

struct ctl_window {
	uint64_t index;                /* window number */
	uint64_t opened_ms;            /* first report */
	uint32_t world;                /* ranks in the job */
	uint32_t n_layers;             /* layers in the job */
	uint32_t n_reported;           /* ranks folded in (a report
					* covering several counts each) */
	uint8_t *reported;             /* world flags */
	uint64_t first_step;           /* min over ranks */
	uint64_t last_step;            /* max over ranks */
	uint64_t epoch;                /* rank 0's, else first reporter's */
	double lr;                     /* same */
	double lr_next;                /* same */
	uint32_t batch_size;           /* same */
	bool have_rank0;               /* rank 0 reported */
	window_num tacc[COM_N_TSTATS]; /* timings: sum, max or min so far */
	double *tvals[COM_N_TSTATS];   /* STEP_MEDIAN*: per rank, value per
					* step (NAN: none); NULL for others */
	bellows_comm_sample *comm;     /* every rank's collectives, in the
					* order the reports came */
	uint32_t n_comm;               /* used */
	uint32_t cap_comm;             /* allocated */
	window_layer_agg *agg;         /* per layer */
	bellows_window_layer *view;    /* per layer, built by ctl_window_view */
	double *scratch;               /* world doubles for medians */
	uint32_t array_layers;         /* layers holding array statistics */
	uint64_t arrays_dropped;       /* arrays left out past the cap */
};

/* True for the timings kept per rank (STEP_MEDIAN kinds). */
static bool
window_is_step(const com_stat *s)
{
	return s->agg == BELLOWS_STAT_AGG_STEP_MEDIAN ||
	    s->agg == BELLOWS_STAT_AGG_STEP_MEDIAN_NZ;
}

int
ctl_window_new(uint64_t index, uint32_t world, uint32_t n_layers,
    uint64_t now_ms, ctl_window **ret_window)
{
	ctl_window *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return BELLOWS_ENOMEM;
	w->index = index;
	w->opened_ms = now_ms;
	w->world = world;
	w->n_layers = n_layers;
	w->first_step = UINT64_MAX;
	w->reported = calloc(world, 1);
	w->scratch = malloc(sizeof(double) * world);
	w->agg = calloc(n_layers ? n_layers : 1, sizeof(*w->agg));
	w->view = calloc(n_layers ? n_layers : 1, sizeof(*w->view));
	if (w->reported == NULL || w->scratch == NULL || w->agg == NULL ||
	    w->view == NULL)
		goto fail;
	for (uint32_t i = 0; i < COM_N_TSTATS; i++) {
		if (!window_is_step(&com_timing_stat_table[i]))
			continue;
		if ((w->tvals[i] = malloc(sizeof(double) * world)) == NULL)
			goto fail;
		for (uint32_t r = 0; r < world; r++)
			w->tvals[i][r] = NAN;
	}
	for (uint32_t l = 0; l < n_layers; l++)
		w->agg[l].norm_rank0 = NAN;
	*ret_window = w;
	return 0;
fail:
	ctl_window_destroy(&w);
	return BELLOWS_ENOMEM;
}

size_t
ctl_window_bytes_max(uint32_t world, uint32_t n_layers, uint32_t max_comm)
{
	/* Per rank: its flag, its per-step timings and a scratch double;
	 * per layer: the aggregate, the policies' view and one value per
	 * rank of each per-tensor median (GATED_MEDIAN); per rank, its
	 * collectives. In 64 bits, so that no table a Hello may claim
	 * overflows. */
	uint64_t w = world, l = n_layers;
	uint64_t n = sizeof(ctl_window) +
	    w * (1 + (WINDOW_N_STEPS + 1) * sizeof(double)) +
	    l * (sizeof(window_layer_agg) + sizeof(bellows_window_layer)) +
	    l * w * WINDOW_N_MEDIANS * sizeof(double) +
	    w * max_comm * sizeof(bellows_comm_sample) +
	    (l < WINDOW_MAX_ARRAY_LAYERS ? l : WINDOW_MAX_ARRAY_LAYERS) *
		WINDOW_ARRAY_VALUES * sizeof(uint64_t);

	return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

void
ctl_window_destroy(ctl_window **window)
{
	ctl_window *w;

	if (window == NULL || *window == NULL)
		return;
	w = *window;
	free(w->reported);
	for (uint32_t i = 0; i < COM_N_TSTATS; i++)
		free(w->tvals[i]);
	free(w->scratch);
	for (uint32_t l = 0; w->agg != NULL && l < w->n_layers; l++) {
		for (uint32_t m = 0; m < WINDOW_N_MEDIANS; m++)
			free(w->agg[l].vals[m].v);
		for (uint32_t k = 0; k < COM_N_LARRAYS; k++)
			free(w->agg[l].arr[k]);
	}
	free(w->agg);
	free(w->comm);
	free(w->view);
	free(w);
	*window = NULL;
}

/* Makes room for one more value in v. Returns 0 or BELLOWS_ENOMEM. */
static int
window_vals_reserve(window_vals *v)
{
	uint32_t cap;
	double *g;

	if (v->n < v->cap)
		return 0;
	cap = v->cap ? v->cap * 2 : 4;
	if ((g = realloc(v->v, sizeof(double) * cap)) == NULL)
		return BELLOWS_ENOMEM;
	v->v = g;
	v->cap = cap;
	return 0;
}

/*
 * Folding a report in is the hot path (every layer of every rank's
 * report), so it is expanded from the table at compile time into straight
 * code, one statement per entry, chosen by the entry's aggregation kind:
 * WINDOW_ADD_<agg>(struct, field, type, gate, wtype, acc, k). `acc` is
 * the entry's running number; the GATED_MEDIAN lists are taken in table
 * order through the counter `m`.
 */
#define WINDOW_NUM_U32(x) (x).u
#define WINDOW_NUM_U64(x) (x).u
#define WINDOW_NUM_F64(x) (x).d
#define WINDOW_MAXOF_U32  UINT32_MAX
#define WINDOW_MAXOF_U64  UINT64_MAX

#define WINDOW_ADD_NONE(s, f, type, gate, wtype, acc, k)
#define WINDOW_ADD_SUM(s, f, type, gate, wtype, acc, k)                        \
	WINDOW_NUM_##type(acc[k]) += (s)->f;
/* Sums of counts that saturate do so at the window type's largest value:
 * a hostile rank cannot wrap them. */
#define WINDOW_ADD_SUM_SAT(s, f, type, gate, wtype, acc, k)                    \
	acc[k].u = (s)->f > WINDOW_MAXOF_##wtype - acc[k].u                    \
	    ? WINDOW_MAXOF_##wtype                                             \
	    : acc[k].u + (s)->f;
#define WINDOW_ADD_MAX(s, f, type, gate, wtype, acc, k)                        \
	if ((s)->f > WINDOW_NUM_##type(acc[k]))                                \
		WINDOW_NUM_##type(acc[k]) = (s)->f;
#define WINDOW_ADD_MIN_NZ(s, f, type, gate, wtype, acc, k)                     \
	if ((s)->f > 0 &&                                                      \
	    (WINDOW_NUM_##type(acc[k]) == 0 ||                                 \
		(s)->f < WINDOW_NUM_##type(acc[k])))                           \
		WINDOW_NUM_##type(acc[k]) = (s)->f;
/* A report covering several ranks carries their means, weighted here by
 * the ranks covered (`cover`), so that a mean over reports is the mean
 * over ranks. */
#define WINDOW_ADD_MEAN(s, f, type, gate, wtype, acc, k)                       \
	acc[k].d += (s)->f * (double)cover;
#define WINDOW_ADD_GATED_MEAN(s, f, type, gate, wtype, acc, k)                 \
	if ((s)->gate > 0) {                                                   \
		acc[k].d += (s)->f * (double)cover;                            \
		a->gated[k] += cover;                                          \
	}
/* The first gated rank's value is taken whatever it is: 0 is a value
 * here (a level of 0), not "none". */
#define WINDOW_ADD_GATED_MAX(s, f, type, gate, wtype, acc, k)                  \
	if ((s)->gate > 0) {                                                   \
		if (a->gated[k] == 0 || (s)->f > WINDOW_NUM_##type(acc[k]))    \
			WINDOW_NUM_##type(acc[k]) = (s)->f;                    \
		a->gated[k] += cover;                                          \
	}
#define WINDOW_ADD_GATED_MEDIAN(s, f, type, gate, wtype, acc, k)               \
	if ((s)->gate > 0) {                                                   \
		v = &a->vals[m];                                               \
		v->v[v->n++] = (s)->f;                                         \
	}                                                                      \
	m++;
#define WINDOW_ADD_NORM(s, f, type, gate, wtype, acc, k)                       \
	if (rank == 0)                                                         \
		a->norm_rank0 = (s)->f;                                        \
	acc[k].d += cover > 1 ? (s)->gate * (double)cover : (s)->f;
/* The per-step medians keep one value per rank (ctl_window_add). */
#define WINDOW_ADD_STEP_MEDIAN(s, f, type, gate, wtype, acc, k)
#define WINDOW_ADD_STEP_MEDIAN_NZ(s, f, type, gate, wtype, acc, k)

#define WINDOW_ADD_LAYER(name, type, tag, check, agg, gate, wtype, ...)        \
	WINDOW_ADD_##agg(s, name, type, gate, wtype, a->acc, COM_LSTAT_##name)
#define WINDOW_ADD_TIMING(name, type, tag, check, agg, gate, wtype, ...)       \
	WINDOW_ADD_##agg(t, name, type, gate, wtype, w->tacc, COM_TSTAT_##name)

/* Reserving: one value for each GATED_MEDIAN entry the rank measured. */
#define WINDOW_RESERVE_LAYER(name, type, tag, check, agg, gate, ...)           \
	if (BELLOWS_STAT_AGG_##agg == BELLOWS_STAT_AGG_GATED_MEDIAN) {         \
		if (WINDOW_GATE_##agg(s, gate) > 0 &&                          \
		    window_vals_reserve(&a->vals[m]) != 0)                     \
			return BELLOWS_ENOMEM;                                 \
		m++;                                                           \
	}
#define WINDOW_GATE_GATED_MEDIAN(s, gate) (s)->gate
#define WINDOW_GATE_NONE(s, gate)         0
#define WINDOW_GATE_SUM(s, gate)          0
#define WINDOW_GATE_SUM_SAT(s, gate)      0
#define WINDOW_GATE_MAX(s, gate)          0
#define WINDOW_GATE_MIN_NZ(s, gate)       0
#define WINDOW_GATE_MEAN(s, gate)         0
#define WINDOW_GATE_GATED_MEAN(s, gate)   0
#define WINDOW_GATE_GATED_MAX(s, gate)    0
#define WINDOW_GATE_NORM(s, gate)         0

/* True when layer aggregate a holds an array statistic. */
static bool
window_has_arrays(const window_layer_agg *a)
{
	for (uint32_t k = 0; k < COM_N_LARRAYS; k++)
		if (a->arr[k] != NULL)
			return true;
	return false;
}

/* Allocates the sums of the arrays layer stats s carries, within the
 * window's cap of layers with arrays. Returns 0 or BELLOWS_ENOMEM. */
static int
window_reserve_arrays(ctl_window *w, window_layer_agg *a,
    const com_layer_stats *s)
{
	for (uint32_t k = 0; k < COM_N_LARRAYS; k++) {
		const com_stat_array *ar = &com_layer_array_table[k];

		if (com_stat_array_get(ar, s) == NULL || a->arr[k] != NULL)
			continue;
		if (!window_has_arrays(a)) {
			if (w->array_layers >= WINDOW_MAX_ARRAY_LAYERS)
				continue; /* left out when folding in */
			w->array_layers++;
		}
		if ((a->arr[k] = calloc(ar->len, sizeof(uint64_t))) == NULL)
			return BELLOWS_ENOMEM;
	}
	return 0;
}

/* Makes room for everything `rep` adds to the lists, so that folding it
 * in cannot fail half-way. */
static int
window_reserve(ctl_window *w, const com_report *rep)
{
	for (uint32_t i = 0; i < rep->n_layers; i++) {
		const com_layer_stats *s = &rep->layers[i];
		window_layer_agg *a = &w->agg[s->layer];
		uint32_t m = 0;

		BELLOWS_LAYER_STATS(WINDOW_RESERVE_LAYER)
		(void)m;
		if (window_reserve_arrays(w, a, s) != 0)
			return BELLOWS_ENOMEM;
	}
	if (rep->n_comm > UINT32_MAX - w->n_comm)
		return BELLOWS_ENOMEM;
	if (w->n_comm + rep->n_comm > w->cap_comm) {
		uint32_t cap = w->cap_comm ? w->cap_comm : 64;
		bellows_comm_sample *g;

		while (cap < w->n_comm + rep->n_comm)
			cap = cap > UINT32_MAX / 2 ? w->n_comm + rep->n_comm
						   : cap * 2;
		if ((g = realloc(w->comm, sizeof(*g) * cap)) == NULL)
			return BELLOWS_ENOMEM;
		w->comm = g;
		w->cap_comm = cap;
	}
	return 0;
}

/* Folds in the statistics of one layer of rank `rank`'s report, covering
 * `cover` ranks, entry by entry of the layer table. */
static void
window_add_layer(ctl_window *w, uint32_t rank, uint32_t cover,
    const com_layer_stats *s)
{
	window_layer_agg *a = &w->agg[s->layer];
	window_vals *v;
	uint32_t m = 0;

	a->ranks += cover;
	BELLOWS_LAYER_STATS(WINDOW_ADD_LAYER)
	(void)v;
	(void)m;
	/* Arrays: SUM per value, saturating (a hostile rank cannot wrap
	 * them); one past the cap of layers has no sums and is left out. */
	for (uint32_t k = 0; k < COM_N_LARRAYS; k++) {
		const com_stat_array *ar = &com_layer_array_table[k];
		const uint64_t *x = com_stat_array_get(ar, s);
		uint64_t *sum = a->arr[k];

		if (x == NULL)
			continue;
		if (sum == NULL) {
			w->arrays_dropped++;
			continue;
		}
		for (uint32_t j = 0; j < ar->len; j++)
			sum[j] = x[j] > UINT64_MAX - sum[j] ? UINT64_MAX
							    : sum[j] + x[j];
	}
}

int
ctl_window_add(ctl_window *w, const com_report *rep)
{
	const com_timings *t = &rep->timings;
	uint32_t cover = rep->ranks > 1 ? rep->ranks : 1;
	bool first = w->n_reported == 0;
	double steps;

	if (rep->rank >= w->world || cover > w->world - rep->rank)
		return BELLOWS_EINVAL;
	for (uint32_t r = rep->rank; r < rep->rank + cover; r++)
		if (w->reported[r])
			return BELLOWS_EBUSY;
	if (window_reserve(w, rep) != 0)
		return BELLOWS_ENOMEM;
	memset(w->reported + rep->rank, 1, cover);
	w->n_reported += cover;
	if (rep->first_step < w->first_step)
		w->first_step = rep->first_step;
	if (rep->last_step > w->last_step)
		w->last_step = rep->last_step;
	if (rep->rank == 0 || first) {
		w->epoch = rep->epoch;
		w->lr = rep->lr;
		w->lr_next = rep->lr_next > 0 ? rep->lr_next : rep->lr;
		w->batch_size = rep->batch_size;
		w->have_rank0 = w->have_rank0 || rep->rank == 0;
	}
	/* Times per step; for STEP_MEDIAN_NZ, 0 is "not measured" (a minor
	 * 0 agent sends none of these). */
	steps = t->steps > 0 ? (double)t->steps : 1.0;
	for (uint32_t k = 0; k < COM_N_TSTATS; k++) {
		const com_stat *st = &com_timing_stat_table[k];
		double d;

		if (w->tvals[k] == NULL)
			continue;
		d = com_stat_get_double(st, t);
		if (st->agg == BELLOWS_STAT_AGG_STEP_MEDIAN || d > 0)
			w->tvals[k][rep->rank] = d / steps;
	}
	/* The timings' kinds (sums, max, min) need no list. */
	BELLOWS_RANK_TIMINGS(WINDOW_ADD_TIMING)
	for (uint32_t i = 0; i < rep->n_layers; i++)
		window_add_layer(w, rep->rank, cover, &rep->layers[i]);
	for (uint32_t i = 0; i < rep->n_comm; i++) {
		const com_comm_sample *c = &rep->comm[i];

		w->comm[w->n_comm++] = (bellows_comm_sample){
			.rank = rep->rank,
			.bytes = c->bytes,
			.ms = c->ms,
			.count = c->count,
			.compressed = c->compressed,
		};
	}
	return 0;
}

uint64_t
ctl_window_index(const ctl_window *w)
{
	return w->index;
}

uint64_t
ctl_window_opened_ms(const ctl_window *w)
{
	return w->opened_ms;
}

uint32_t
ctl_window_reported(const ctl_window *w)
{
	return w->n_reported;
}

bool
ctl_window_has(const ctl_window *w, uint32_t rank)
{
	return rank < w->world && w->reported[rank];
}

static int
window_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void
window_swap(double *v, int64_t i, int64_t j)
{
	double t = v[i];

	v[i] = v[j];
	v[j] = t;
}

/* The middle one of a, b and c. */
static double
window_mid3(double a, double b, double c)
{
	if (a < b)
		return b < c ? b : (a < c ? c : a);
	return a < c ? a : (b < c ? c : b);
}

/*
 * Moves the k-th smallest of v's n values (0-based) to v[k], every value
 * before it <= it and every one after it >= it: the order sorting would
 * put there, without sorting. A window's medians are taken over up to
 * `world` values (one per rank) when it closes, in the decision's path;
 * a sort costs O(n log n) comparisons through a function pointer, this
 * expected O(n) inline ones. Quickselect with a median-of-three pivot
 * and a three-way partition (ties, common in timings, end it at once);
 * past 2 log2(n) + 8 rounds, which only crafted values reach, what is
 * left is sorted, so the worst case stays O(n log n).
 */
static void
window_select(double *v, uint32_t n, uint32_t k)
{
	int64_t lo = 0, hi = (int64_t)n - 1, key = k;
	uint32_t rounds = 8;

	for (uint32_t m = n; m > 1; m >>= 1)
		rounds += 2;
	while (lo < hi) {
		double p = window_mid3(v[lo], v[lo + (hi - lo) / 2], v[hi]);
		int64_t lt = lo, i = lo, gt = hi;

		if (rounds-- == 0) {
			qsort(v + lo, (size_t)(hi - lo + 1), sizeof(double),
			    window_cmp_double);
			return;
		}
		/* [lo, lt) < p, [lt, i) == p, (gt, hi] > p. p is one of
		 * the values, so the middle part is never empty and every
		 * round narrows [lo, hi]. */
		while (i <= gt) {
			if (v[i] < p)
				window_swap(v, lt++, i++);
			else if (v[i] > p)
				window_swap(v, i, gt--);
			else
				i++;
		}
		if (key < lt)
			hi = lt - 1;
		else if (key > gt)
			lo = gt + 1;
		else
			return;
	}
}

/* Median of v's n values, as a sort would give it (v is reordered);
 * NAN if there are none. */
static double
window_median_of(double *v, uint32_t n)
{
	double below;

	if (n == 0)
		return NAN;
	window_select(v, n, n / 2);
	if (n % 2)
		return v[n / 2];
	/* The value just below the middle is the largest of those
	 * before it. */
	below = v[0];
	for (uint32_t i = 1; i < n / 2; i++) {
		if (v[i] > below)
			below = v[i];
	}
	return (below + v[n / 2]) / 2;
}

/* Median of v's values (reordered in place); NAN if there are none. */
static double
window_vals_median(window_vals *v)
{
	return window_median_of(v->v, v->n);
}

/* Median of the non-NAN entries of v (world of them); NAN if none. */
static double
window_median(ctl_window *w, const double *v)
{
	uint32_t n = 0;

	for (uint32_t r = 0; r < w->world; r++) {
		if (!isnan(v[r]))
			w->scratch[n++] = v[r];
	}
	return window_median_of(w->scratch, n);
}

uint64_t
ctl_window_calibrate_until(const com_decision *d)
{
	if (d->calibrate_steps == 0)
		return 0;
	return d->calibrate_steps > UINT64_MAX - d->apply_step
	    ? UINT64_MAX
	    : d->apply_step + d->calibrate_steps;
}

/* window_median with 0 for "nobody measured it". */
static double
window_median0(ctl_window *w, const double *v)
{
	double m = window_median(w, v);

	return isnan(m) ? 0 : m;
}

size_t
ctl_window_layer_col(uint32_t i, int col)
{
	const com_stat *st;

	if (i >= COM_N_LSTATS)
		return SIZE_MAX;
	st = &com_layer_stat_table[i];
	if (st->agg == BELLOWS_STAT_AGG_NORM)
		return col == 0
		    ? offsetof(bellows_window_layer, grad_norm_rank0)
		    : col == 1 ? offsetof(bellows_window_layer, grad_norm_mean)
			       : SIZE_MAX;
	if (col != 0 || st->wcol == NULL)
		return SIZE_MAX;
	return window_layer_off[i];
}

size_t
ctl_window_timing_col(uint32_t i)
{
	if (i >= COM_N_TSTATS || com_timing_stat_table[i].wcol == NULL)
		return SIZE_MAX;
	return window_timing_off[i];
}

/* Stores a result at `off` in the view struct at base, in type wtype:
 * d for a double field, u for an integer one. */
static void
window_put(void *base, size_t off, bellows_stat_type wtype, double d,
    uint64_t u)
{
	char *p = (char *)base + off;
	uint32_t u32 = (uint32_t)u;

	if (wtype == BELLOWS_STAT_TYPE_F64)
		memcpy(p, &d, sizeof(d));
	else if (wtype == BELLOWS_STAT_TYPE_U64)
		memcpy(p, &u, sizeof(u));
	else if (wtype == BELLOWS_STAT_TYPE_U32)
		memcpy(p, &u32, sizeof(u32));
}

/* Stores a running number (SUM, SUM_SAT, MAX, MIN_NZ) in the view. */
static void
window_put_acc(void *base, size_t off, const com_stat *st, window_num acc)
{
	bool dbl = st->type == BELLOWS_STAT_TYPE_F64;

	window_put(base, off, st->wtype, dbl ? acc.d : (double)acc.u,
	    dbl ? 0 : acc.u);
}

/* The layer entries of aggregate a into view v. */
static void
window_view_layer(window_layer_agg *a, bellows_window_layer *v)
{
	uint32_t m = 0;

	for (uint32_t k = 0; k < COM_N_LSTATS; k++) {
		const com_stat *st = &com_layer_stat_table[k];
		size_t off = window_layer_off[k];
		double mean, d;

		switch (st->agg) {
		case BELLOWS_STAT_AGG_NONE:
			continue;
		case BELLOWS_STAT_AGG_MEAN:
			d = a->ranks ? a->acc[k].d / a->ranks : 0;
			break;
		case BELLOWS_STAT_AGG_GATED_MEAN:
			d = a->acc[k].d /
			    (a->gated[k] ? (double)a->gated[k] : 1.0);
			break;
		case BELLOWS_STAT_AGG_GATED_MEDIAN:
			d = window_vals_median(&a->vals[m++]);
			break;
		case BELLOWS_STAT_AGG_GATED_MAX:
			if (a->gated[k] > 0) {
				window_put_acc(v, off, st, a->acc[k]);
				continue;
			}
			d = NAN;
			break;
		case BELLOWS_STAT_AGG_NORM:
			/* The configured source picks rank 0's or the mean;
			 * the view's default is rank 0's when it reported. */
			mean = a->ranks ? a->acc[k].d / a->ranks : NAN;
			v->grad_norm_rank0 = a->norm_rank0;
			v->grad_norm_mean = mean;
			d = !isnan(a->norm_rank0) ? a->norm_rank0 : mean;
			break;
		default:
			window_put_acc(v, off, st, a->acc[k]);
			continue;
		}
		window_put(v, off, st->wtype, d, 0);
	}
}

/* An array's sums into the view: NULL and 0 when no rank reported it. */
#define WINDOW_VIEW_ARRAY(name, len, tag, check, kind, wfield, ...)            \
	v->wfield = w->agg[l].arr[COM_LARRAY_##name];                          \
	v->wfield##_len = v->wfield != NULL ? (len) : 0;

uint64_t
ctl_window_arrays_dropped(const ctl_window *w)
{
	return w->arrays_dropped;
}

void
ctl_window_view(ctl_window *w, const char *job, uint32_t world,
    const com_layer_info *layers, const com_decision *in_force,
    bellows_window *ret)
{
	for (uint32_t l = 0; l < w->n_layers; l++) {
		bellows_window_layer *v = &w->view[l];

		v->name = layers[l].name;
		v->numel = layers[l].numel;
		v->ndim = layers[l].ndim;
		v->shape = layers[l].shape;
		v->level = l < in_force->n_layers ? in_force->level[l] : 0;
		v->error_bound = l < in_force->n_layers
		    ? in_force->error_bound[l]
		    : 0;
		window_view_layer(&w->agg[l], v);
		BELLOWS_LAYER_ARRAYS(WINDOW_VIEW_ARRAY)
	}
	*ret = (bellows_window){
		.job = job,
		.window = w->index,
		.first_step = w->first_step == UINT64_MAX ? 0 : w->first_step,
		.last_step = w->last_step,
		.epoch = w->epoch,
		.lr = w->lr,
		.lr_next = w->lr_next,
		.batch_size = w->batch_size,
		.lr_scale = in_force->lr_scale,
		.world = world,
		.ranks_reported = w->n_reported,
		.n_layers = w->n_layers,
		.layers = w->view,
		.compression_off = in_force->compression_off,
		.size_threshold = in_force->size_threshold,
		.calibrate_until = ctl_window_calibrate_until(in_force),
		.n_comm = w->n_comm,
		.comm = w->comm,
	};
	for (uint32_t k = 0; k < COM_N_TSTATS; k++) {
		const com_stat *st = &com_timing_stat_table[k];
		size_t off = window_timing_off[k];

		if (st->agg == BELLOWS_STAT_AGG_STEP_MEDIAN)
			window_put(ret, off, st->wtype,
			    window_median(w, w->tvals[k]), 0);
		else if (st->agg == BELLOWS_STAT_AGG_STEP_MEDIAN_NZ)
			window_put(ret, off, st->wtype,
			    window_median0(w, w->tvals[k]), 0);
		else if (st->agg != BELLOWS_STAT_AGG_NONE)
			window_put_acc(ret, off, st, w->tacc[k]);
	}
}
