/* window - per-window aggregation across ranks, see window.h. */
#include "ctl_window.h"

#include <bellows/error.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A growing list of per-rank values; empty (and unallocated) in the
 * windows where nobody measured them, which are most. */
typedef struct window_vals {
	double *v;    /* entries */
	uint32_t n;   /* used */
	uint32_t cap; /* allocated */
} window_vals;

typedef struct window_layer_agg {
	double norm_rank0;   /* rank 0's acc_norm, NAN until it reports */
	double norm_sum;     /* sum of acc_norm over ranks */
	double sum_sq;       /* summed */
	double abs_sum;      /* summed */
	double max_abs;      /* max */
	double momentum_sum; /* sum of momentum_abs_mean */
	uint64_t count;      /* summed */
	uint64_t nonzero;    /* summed */
	uint64_t nonfinite;  /* summed */
	uint32_t ranks;      /* ranks that reported this layer */
	uint32_t act_ranks;  /* ranks with activation statistics */
	uint64_t act_steps;  /* summed */
	double act_lbar;     /* summed over act_ranks */
	double act_nonzero;  /* summed over act_ranks */
	double act_bytes;    /* summed over act_ranks */
	double act_raw;      /* summed over act_ranks */
	uint32_t raw_n;      /* raw sends timed, summed */
	uint32_t comp_n;     /* compressed sends timed, summed */
	window_vals raw;     /* per rank that timed raw sends: its median */
	window_vals comp;    /* same, compressed sends */
	window_vals codec;   /* same ranks as comp: their codec median */
} window_layer_agg;

struct ctl_window {
	uint64_t index;             /* window number */
	uint64_t opened_ms;         /* first report */
	uint32_t world;             /* ranks in the job */
	uint32_t n_layers;          /* layers in the job */
	uint32_t n_reported;        /* ranks folded in */
	uint8_t *reported;          /* world flags */
	uint64_t first_step;        /* min over ranks */
	uint64_t last_step;         /* max over ranks */
	uint64_t epoch;             /* rank 0's, else first reporter's */
	double lr;                  /* same */
	double lr_next;             /* same */
	uint32_t batch_size;        /* same */
	bool have_rank0;            /* rank 0 reported */
	uint64_t floats_sent;       /* summed */
	uint64_t floats_raw;        /* summed */
	double *step_ms;            /* per rank, mean per step (NAN: none) */
	double *compute_ms;         /* per rank, mean per step */
	double *comm_ms;            /* per rank, mean per step */
	double *backward_ms;        /* per rank, mean per step (NAN: none) */
	double *codec_ms;           /* per rank, mean per step (NAN: none) */
	uint64_t mem_device_used;   /* max */
	uint64_t mem_device_total;  /* min over the ranks that gave it */
	uint64_t mem_host_used;     /* max */
	uint64_t saved_bytes;       /* max */
	bellows_comm_sample *comm;  /* every rank's collectives, in the
				     * order the reports came */
	uint32_t n_comm;            /* used */
	uint32_t cap_comm;          /* allocated */
	window_layer_agg *agg;      /* per layer */
	bellows_window_layer *view; /* per layer, built by ctl_window_view */
	double *scratch;            /* world doubles for medians */
};

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
	w->step_ms = malloc(sizeof(double) * world);
	w->compute_ms = malloc(sizeof(double) * world);
	w->comm_ms = malloc(sizeof(double) * world);
	w->backward_ms = malloc(sizeof(double) * world);
	w->codec_ms = malloc(sizeof(double) * world);
	w->scratch = malloc(sizeof(double) * world);
	w->agg = calloc(n_layers ? n_layers : 1, sizeof(*w->agg));
	w->view = calloc(n_layers ? n_layers : 1, sizeof(*w->view));
	if (w->reported == NULL || w->step_ms == NULL ||
	    w->compute_ms == NULL || w->comm_ms == NULL ||
	    w->backward_ms == NULL || w->codec_ms == NULL ||
	    w->scratch == NULL || w->agg == NULL || w->view == NULL) {
		ctl_window_destroy(&w);
		return BELLOWS_ENOMEM;
	}
	for (uint32_t r = 0; r < world; r++)
		w->step_ms[r] = w->compute_ms[r] = w->comm_ms[r] =
		    w->backward_ms[r] = w->codec_ms[r] = NAN;
	for (uint32_t l = 0; l < n_layers; l++)
		w->agg[l].norm_rank0 = NAN;
	*ret_window = w;
	return 0;
}

size_t
ctl_window_bytes_max(uint32_t world, uint32_t n_layers, uint32_t max_comm)
{
	/* Per rank: its flag and six timing doubles; per layer: the
	 * aggregate, the policies' view and up to three values per rank
	 * (raw, compressed and codec medians); per rank, its collectives.
	 * In 64 bits, so that no table a Hello may claim overflows. */
	uint64_t w = world, l = n_layers;
	uint64_t n = sizeof(ctl_window) + w * (1 + 6 * sizeof(double)) +
	    l * (sizeof(window_layer_agg) + sizeof(bellows_window_layer)) +
	    l * w * 3 * sizeof(double) +
	    w * max_comm * sizeof(bellows_comm_sample);

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
	free(w->step_ms);
	free(w->compute_ms);
	free(w->comm_ms);
	free(w->backward_ms);
	free(w->codec_ms);
	free(w->scratch);
	for (uint32_t l = 0; w->agg != NULL && l < w->n_layers; l++) {
		free(w->agg[l].raw.v);
		free(w->agg[l].comp.v);
		free(w->agg[l].codec.v);
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

/* Makes room for everything `rep` adds to the lists, so that folding it
 * in cannot fail half-way. */
static int
window_reserve(ctl_window *w, const com_report *rep)
{
	for (uint32_t i = 0; i < rep->n_layers; i++) {
		const com_layer_stats *s = &rep->layers[i];
		window_layer_agg *a = &w->agg[s->layer];

		if (s->comm_raw_n > 0 && window_vals_reserve(&a->raw) != 0)
			return BELLOWS_ENOMEM;
		if (s->comm_comp_n > 0 &&
		    (window_vals_reserve(&a->comp) != 0 ||
			window_vals_reserve(&a->codec) != 0))
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

/* Folds in the statistics of one layer of rank `rank`'s report. */
static void
window_add_layer(ctl_window *w, uint32_t rank, const com_layer_stats *s)
{
	window_layer_agg *a = &w->agg[s->layer];

	if (rank == 0)
		a->norm_rank0 = s->acc_norm;
	a->norm_sum += s->acc_norm;
	a->sum_sq += s->sum_sq;
	a->abs_sum += s->abs_sum;
	if (s->max_abs > a->max_abs)
		a->max_abs = s->max_abs;
	a->momentum_sum += s->momentum_abs_mean;
	a->count += s->count;
	a->nonzero += s->nonzero;
	a->nonfinite += s->nonfinite;
	a->ranks++;
	if (s->act_steps > 0) {
		a->act_ranks++;
		a->act_steps += s->act_steps;
		a->act_lbar += s->act_lbar;
		a->act_nonzero += s->act_nonzero;
		a->act_bytes += s->act_bytes;
		a->act_raw += s->act_raw_bytes;
	}
	/* Sums of counts saturate: a hostile rank cannot wrap them. */
	if (s->comm_raw_n > 0) {
		a->raw.v[a->raw.n++] = s->comm_raw_ms;
		a->raw_n = s->comm_raw_n > UINT32_MAX - a->raw_n
		    ? UINT32_MAX
		    : a->raw_n + s->comm_raw_n;
	}
	if (s->comm_comp_n > 0) {
		a->comp.v[a->comp.n++] = s->comm_comp_ms;
		a->codec.v[a->codec.n++] = s->codec_ms;
		a->comp_n = s->comm_comp_n > UINT32_MAX - a->comp_n
		    ? UINT32_MAX
		    : a->comp_n + s->comm_comp_n;
	}
}

int
ctl_window_add(ctl_window *w, const com_report *rep)
{
	const com_timings *t = &rep->timings;
	double steps;

	if (w->reported[rep->rank])
		return BELLOWS_EBUSY;
	if (window_reserve(w, rep) != 0)
		return BELLOWS_ENOMEM;
	w->reported[rep->rank] = 1;
	w->n_reported++;
	if (rep->first_step < w->first_step)
		w->first_step = rep->first_step;
	if (rep->last_step > w->last_step)
		w->last_step = rep->last_step;
	if (rep->rank == 0 || w->n_reported == 1) {
		w->epoch = rep->epoch;
		w->lr = rep->lr;
		w->lr_next = rep->lr_next > 0 ? rep->lr_next : rep->lr;
		w->batch_size = rep->batch_size;
		w->have_rank0 = w->have_rank0 || rep->rank == 0;
	}
	w->floats_sent += t->floats_sent;
	w->floats_raw += t->floats_raw;
	steps = t->steps > 0 ? (double)t->steps : 1.0;
	w->step_ms[rep->rank] = t->step_ms / steps;
	w->compute_ms[rep->rank] = t->compute_ms / steps;
	w->comm_ms[rep->rank] = t->comm_ms / steps;
	/* 0 is "not measured" (a minor 0 agent sends none of these). */
	if (t->backward_ms > 0)
		w->backward_ms[rep->rank] = t->backward_ms / steps;
	if (t->codec_ms > 0)
		w->codec_ms[rep->rank] = t->codec_ms / steps;
	if (t->mem_device_used > w->mem_device_used)
		w->mem_device_used = t->mem_device_used;
	if (t->mem_device_total > 0 &&
	    (w->mem_device_total == 0 ||
		t->mem_device_total < w->mem_device_total))
		w->mem_device_total = t->mem_device_total;
	if (t->mem_host_used > w->mem_host_used)
		w->mem_host_used = t->mem_host_used;
	if (t->saved_bytes > w->saved_bytes)
		w->saved_bytes = t->saved_bytes;
	for (uint32_t i = 0; i < rep->n_layers; i++)
		window_add_layer(w, rep->rank, &rep->layers[i]);
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

/* Median of v's n values (sorted in place); NAN if there are none. */
static double
window_vals_median(window_vals *v)
{
	if (v->n == 0)
		return NAN;
	qsort(v->v, v->n, sizeof(double), window_cmp_double);
	return v->n % 2 ? v->v[v->n / 2]
			: (v->v[v->n / 2 - 1] + v->v[v->n / 2]) / 2;
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
	if (n == 0)
		return NAN;
	qsort(w->scratch, n, sizeof(double), window_cmp_double);
	return n % 2 ? w->scratch[n / 2]
		     : (w->scratch[n / 2 - 1] + w->scratch[n / 2]) / 2;
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

void
ctl_window_view(ctl_window *w, const char *job, uint32_t world,
    const com_layer_info *layers, const com_decision *in_force,
    bellows_window *ret)
{
	for (uint32_t l = 0; l < w->n_layers; l++) {
		window_layer_agg *a = &w->agg[l];
		double act = a->act_ranks ? (double)a->act_ranks : 1.0;
		bellows_window_layer *v = &w->view[l];
		double mean = a->ranks ? a->norm_sum / a->ranks : NAN;

		v->name = layers[l].name;
		v->numel = layers[l].numel;
		v->ndim = layers[l].ndim;
		v->shape = layers[l].shape;
		v->grad_norm_rank0 = a->norm_rank0;
		v->grad_norm_mean = mean;
		v->grad_norm = !isnan(a->norm_rank0) ? a->norm_rank0 : mean;
		v->sum_sq = a->sum_sq;
		v->abs_sum = a->abs_sum;
		v->max_abs = a->max_abs;
		v->count = a->count;
		v->nonzero = a->nonzero;
		v->nonfinite = a->nonfinite;
		v->momentum_abs_mean = a->ranks ? a->momentum_sum / a->ranks
						: 0;
		v->level = l < in_force->n_layers ? in_force->level[l] : 0;
		v->error_bound = l < in_force->n_layers
		    ? in_force->error_bound[l]
		    : 0;
		v->act_steps = a->act_steps;
		v->act_lbar = a->act_lbar / act;
		v->act_nonzero = a->act_nonzero / act;
		v->act_bytes = a->act_bytes / act;
		v->act_raw_bytes = a->act_raw / act;
		v->comm_raw_ms = window_vals_median(&a->raw);
		v->comm_comp_ms = window_vals_median(&a->comp);
		v->codec_ms = window_vals_median(&a->codec);
		v->comm_raw_n = a->raw_n;
		v->comm_comp_n = a->comp_n;
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
		.step_ms_median = window_median(w, w->step_ms),
		.compute_ms_median = window_median(w, w->compute_ms),
		.comm_ms_median = window_median(w, w->comm_ms),
		.floats_sent = w->floats_sent,
		.floats_raw = w->floats_raw,
		.n_layers = w->n_layers,
		.layers = w->view,
		.backward_ms_median = window_median0(w, w->backward_ms),
		.codec_ms_median = window_median0(w, w->codec_ms),
		.mem_device_used = (double)w->mem_device_used,
		.mem_device_total = (double)w->mem_device_total,
		.mem_host_used = (double)w->mem_host_used,
		.compression_off = in_force->compression_off,
		.size_threshold = in_force->size_threshold,
		.calibrate_until = ctl_window_calibrate_until(in_force),
		.n_comm = w->n_comm,
		.comm = w->comm,
		.saved_bytes = (double)w->saved_bytes,
	};
}
