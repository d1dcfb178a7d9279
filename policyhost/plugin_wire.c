/* plugin_wire - frames between bellowsd and a plug-in worker, see
 * plugin_wire.h. */
#include "plugin_wire.h"

#include <bellows/error.h>
#include <bellows/stats.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void
pwire_reserve(ctl_pwire_buf *b, size_t more)
{
	size_t cap;
	uint8_t *data;

	if (b->err != 0)
		return;
	if (more > CTL_PWIRE_PAYLOAD_MAX + sizeof(ctl_pwire_header) - b->len) {
		b->err = BELLOWS_EMSGSIZE;
		return;
	}
	if (b->len + more <= b->cap)
		return;
	cap = b->cap > 0 ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	data = realloc(b->data, cap);
	if (data == NULL) {
		b->err = BELLOWS_ENOMEM;
		return;
	}
	b->data = data;
	b->cap = cap;
}

void
ctl_pwire_put(ctl_pwire_buf *b, const void *data, size_t n)
{
	pwire_reserve(b, n);
	if (b->err != 0 || n == 0)
		return;
	memcpy(b->data + b->len, data, n);
	b->len += n;
}

void
ctl_pwire_begin(ctl_pwire_buf *b, uint32_t type, uint32_t instance)
{
	const ctl_pwire_header h = {
		.magic = CTL_PWIRE_MAGIC,
		.type = type,
		.instance = instance,
	};

	b->len = 0;
	b->err = 0;
	ctl_pwire_put(b, &h, sizeof(h));
}

int
ctl_pwire_end(ctl_pwire_buf *b)
{
	uint32_t len;

	if (b->err != 0)
		return b->err;
	len = (uint32_t)(b->len - sizeof(ctl_pwire_header));
	memcpy(b->data + offsetof(ctl_pwire_header, len), &len, sizeof(len));
	return 0;
}

void
ctl_pwire_buf_fini(ctl_pwire_buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void
ctl_pwire_put_str(ctl_pwire_buf *b, const char *s)
{
	uint32_t n;

	s = s != NULL ? s : "";
	n = (uint32_t)strlen(s) + 1;
	ctl_pwire_put(b, &n, sizeof(n));
	ctl_pwire_put(b, s, n);
}

int
ctl_pwire_view(ctl_pwire_reader *r, size_t n, const uint8_t **ret)
{
	if (r->err != 0 || n > r->left) {
		r->err = BELLOWS_EPROTO;
		*ret = NULL;
		return BELLOWS_EPROTO;
	}
	*ret = r->p;
	r->p += n;
	r->left -= n;
	return 0;
}

int
ctl_pwire_get(ctl_pwire_reader *r, void *out, size_t n)
{
	const uint8_t *p;

	if (ctl_pwire_view(r, n, &p) != 0) {
		memset(out, 0, n);
		return BELLOWS_EPROTO;
	}
	memcpy(out, p, n);
	return 0;
}

int
ctl_pwire_get_str(ctl_pwire_reader *r, const char **ret)
{
	const uint8_t *p;
	uint32_t n;

	if (ctl_pwire_get(r, &n, sizeof(n)) != 0 || n == 0 ||
	    ctl_pwire_view(r, n, &p) != 0 || p[n - 1] != '\0' ||
	    memchr(p, '\0', n) != p + n - 1) {
		r->err = BELLOWS_EPROTO;
		return BELLOWS_EPROTO;
	}
	*ret = (const char *)p;
	return 0;
}

/* The proposal's scalars, in this order after the layer count. */
typedef struct pwire_knobs {
	uint32_t batch_size;      /* bellows_proposal.batch_size */
	uint32_t compression_off; /* 0 or 1 */
	double lr_scale;          /* bellows_proposal.lr_scale */
	uint64_t size_threshold;  /* bellows_proposal.size_threshold */
	uint64_t calibrate_steps; /* bellows_proposal.calibrate_steps */
	uint32_t n_metrics;       /* as the policy set it */
	uint32_t codec_table_len; /* as the policy set it */
	uint32_t resid_plan;      /* 1: the four residual plan arrays
				   * follow the codec table */
} pwire_knobs;

void
ctl_pwire_put_proposal(ctl_pwire_buf *b, const bellows_proposal *p)
{
	const pwire_knobs k = {
		.batch_size = p->batch_size,
		.compression_off = p->compression_off ? 1 : 0,
		.lr_scale = p->lr_scale,
		.size_threshold = p->size_threshold,
		.calibrate_steps = p->calibrate_steps,
		.n_metrics = p->n_metrics,
		.codec_table_len = p->codec_table_len,
		.resid_plan = p->resid_group != NULL && p->resid_phi != NULL &&
		    p->resid_rows != NULL && p->resid_cols != NULL,
	};
	uint32_t n_metrics = p->n_metrics < BELLOWS_METRICS_MAX
	    ? p->n_metrics
	    : BELLOWS_METRICS_MAX;
	uint32_t table = p->codec_table_len < BELLOWS_CODEC_TABLE_MAX
	    ? p->codec_table_len
	    : BELLOWS_CODEC_TABLE_MAX;

	ctl_pwire_put(b, &p->n_layers, sizeof(p->n_layers));
	ctl_pwire_put(b, &k, sizeof(k));
	ctl_pwire_put(b, p->level, sizeof(double) * p->n_layers);
	ctl_pwire_put(b, p->error_bound, sizeof(double) * p->n_layers);
	ctl_pwire_put(b, p->reason, strnlen(p->reason, sizeof(p->reason)));
	ctl_pwire_put(b, "", 1);
	ctl_pwire_put(b, p->metrics, sizeof(bellows_metric) * n_metrics);
	if (table > 0 && p->codec_table != NULL)
		ctl_pwire_put(b, p->codec_table, table);
	if (k.resid_plan) {
		ctl_pwire_put(b, p->resid_group,
		    sizeof(uint32_t) * p->n_layers);
		ctl_pwire_put(b, p->resid_phi, sizeof(double) * p->n_layers);
		ctl_pwire_put(b, p->resid_rows, sizeof(double) * p->n_layers);
		ctl_pwire_put(b, p->resid_cols, sizeof(double) * p->n_layers);
	}
}

int
ctl_pwire_get_proposal(ctl_pwire_reader *r, bellows_proposal *p)
{
	const uint8_t *nul;
	uint32_t n_layers, n_metrics, table;
	size_t len;
	pwire_knobs k;

	if (ctl_pwire_get(r, &n_layers, sizeof(n_layers)) != 0 ||
	    n_layers != p->n_layers || ctl_pwire_get(r, &k, sizeof(k)) != 0 ||
	    ctl_pwire_get(r, p->level, sizeof(double) * n_layers) != 0 ||
	    ctl_pwire_get(r, p->error_bound, sizeof(double) * n_layers) != 0)
		return BELLOWS_EPROTO;
	nul = r->left > 0 ? memchr(r->p, '\0', r->left) : NULL;
	if (nul == NULL)
		return r->err = BELLOWS_EPROTO;
	len = (size_t)(nul - r->p);
	if (len > sizeof(p->reason) - 1)
		len = sizeof(p->reason) - 1;
	memcpy(p->reason, r->p, len);
	p->reason[len] = '\0';
	r->left -= (size_t)(nul - r->p) + 1;
	r->p = nul + 1;
	n_metrics = k.n_metrics < BELLOWS_METRICS_MAX ? k.n_metrics
						      : BELLOWS_METRICS_MAX;
	table = k.codec_table_len < BELLOWS_CODEC_TABLE_MAX
	    ? k.codec_table_len
	    : BELLOWS_CODEC_TABLE_MAX;
	if (ctl_pwire_get(r, p->metrics, sizeof(bellows_metric) * n_metrics) !=
		0 ||
	    (table > 0 &&
		(p->codec_table == NULL ||
		    ctl_pwire_get(r, p->codec_table, table) != 0)))
		return BELLOWS_EPROTO;
	if (k.resid_plan &&
	    (p->resid_group == NULL || p->resid_phi == NULL ||
		p->resid_rows == NULL || p->resid_cols == NULL ||
		ctl_pwire_get(r, p->resid_group, sizeof(uint32_t) * n_layers) !=
		    0 ||
		ctl_pwire_get(r, p->resid_phi, sizeof(double) * n_layers) !=
		    0 ||
		ctl_pwire_get(r, p->resid_rows, sizeof(double) * n_layers) !=
		    0 ||
		ctl_pwire_get(r, p->resid_cols, sizeof(double) * n_layers) !=
		    0))
		return BELLOWS_EPROTO;
	p->batch_size = k.batch_size;
	p->compression_off = k.compression_off != 0;
	p->lr_scale = k.lr_scale;
	p->size_threshold = k.size_threshold;
	p->calibrate_steps = k.calibrate_steps;
	p->n_metrics = k.n_metrics;
	p->codec_table_len = k.codec_table_len;
	return 0;
}

/* The array statistics' pointer and count in bellows_window_layer
 * (bellows/stats.h, BELLOWS_LAYER_ARRAYS) and their length. */
typedef struct pwire_array {
	size_t ptr;   /* offset of the const uint64_t * */
	size_t count; /* offset of the uint32_t count */
	uint32_t len; /* the table's length */
} pwire_array;
#define PWIRE_ARRAY(name, len, tag, check, kind, wfield, ...)                  \
	{ offsetof(bellows_window_layer, wfield),                              \
		offsetof(bellows_window_layer, wfield##_len), len },
static const pwire_array pwire_arrays[] = { BELLOWS_LAYER_ARRAYS(PWIRE_ARRAY) };
#define PWIRE_N_ARRAYS (sizeof(pwire_arrays) / sizeof(pwire_arrays[0]))

/* The values of array a of layer l, NULL unless it has exactly the
 * table's length. */
static const uint64_t *
pwire_array_of(const bellows_window_layer *l, const pwire_array *a)
{
	const uint64_t *v;
	uint32_t n;

	memcpy(&v, (const char *)l + a->ptr, sizeof(v));
	memcpy(&n, (const char *)l + a->count, sizeof(n));
	return v != NULL && n == a->len ? v : NULL;
}

void
ctl_pwire_put_layers(ctl_pwire_buf *b, const bellows_window_layer *l,
    uint32_t n)
{
	ctl_pwire_put(b, l, sizeof(*l) * n);
	for (uint32_t i = 0; i < n; i++) {
		ctl_pwire_put_str(b, l[i].name);
		for (uint32_t d = 0; d < l[i].ndim; d++) {
			uint32_t v = l[i].shape != NULL ? l[i].shape[d] : 0;

			ctl_pwire_put(b, &v, sizeof(v));
		}
	}
	/* The array statistics: every layer's counts, then the values. */
	for (uint32_t i = 0; i < n; i++)
		for (size_t k = 0; k < PWIRE_N_ARRAYS; k++) {
			uint32_t c = pwire_array_of(&l[i], &pwire_arrays[k])
			    ? pwire_arrays[k].len
			    : 0;

			ctl_pwire_put(b, &c, sizeof(c));
		}
	for (uint32_t i = 0; i < n; i++)
		for (size_t k = 0; k < PWIRE_N_ARRAYS; k++) {
			const uint64_t *v = pwire_array_of(&l[i],
			    &pwire_arrays[k]);

			if (v != NULL)
				ctl_pwire_put(b, v,
				    sizeof(uint64_t) * pwire_arrays[k].len);
		}
}

/* Reads the array statistics ctl_pwire_put_layers wrote after the n
 * layers' names and shapes into *arrays (grown, *arrays_cap values) and
 * points the layers at them. */
static int
pwire_get_arrays(ctl_pwire_reader *r, bellows_window_layer *out, uint32_t n,
    uint64_t **arrays, size_t *arrays_cap)
{
	size_t total = 0, at = 0;

	for (uint32_t i = 0; i < n; i++)
		for (size_t k = 0; k < PWIRE_N_ARRAYS; k++) {
			const pwire_array *a = &pwire_arrays[k];
			uint32_t c;
			const uint64_t *none = NULL;

			if (ctl_pwire_get(r, &c, sizeof(c)) != 0 ||
			    (c != 0 && c != a->len))
				return r->err = BELLOWS_EPROTO;
			memcpy((char *)&out[i] + a->count, &c, sizeof(c));
			memcpy((char *)&out[i] + a->ptr, &none, sizeof(none));
			total += c;
		}
	if (total > *arrays_cap) {
		uint64_t *grown = realloc(*arrays, sizeof(uint64_t) * total);

		if (grown == NULL)
			return BELLOWS_ENOMEM;
		*arrays = grown;
		*arrays_cap = total;
	}
	for (uint32_t i = 0; i < n; i++)
		for (size_t k = 0; k < PWIRE_N_ARRAYS; k++) {
			const pwire_array *a = &pwire_arrays[k];
			const uint64_t *v;
			uint32_t c;

			memcpy(&c, (char *)&out[i] + a->count, sizeof(c));
			if (c == 0)
				continue;
			if (ctl_pwire_get(r, *arrays + at,
				sizeof(uint64_t) * c) != 0)
				return BELLOWS_EPROTO;
			v = *arrays + at;
			memcpy((char *)&out[i] + a->ptr, &v, sizeof(v));
			at += c;
		}
	return 0;
}

int
ctl_pwire_get_layers(ctl_pwire_reader *r, bellows_window_layer *out, uint32_t n,
    uint32_t **shapes, size_t *shapes_cap, uint64_t **arrays,
    size_t *arrays_cap)
{
	size_t dims = 0, at = 0;

	if (ctl_pwire_get(r, out, sizeof(*out) * n) != 0)
		return BELLOWS_EPROTO;
	for (uint32_t i = 0; i < n; i++) {
		if (out[i].ndim > 64)
			return r->err = BELLOWS_EPROTO;
		dims += out[i].ndim;
	}
	if (dims > *shapes_cap) {
		uint32_t *grown = realloc(*shapes, sizeof(uint32_t) * dims);

		if (grown == NULL)
			return BELLOWS_ENOMEM;
		*shapes = grown;
		*shapes_cap = dims;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (ctl_pwire_get_str(r, &out[i].name) != 0 ||
		    ctl_pwire_get(r, *shapes + at,
			sizeof(uint32_t) * out[i].ndim) != 0)
			return BELLOWS_EPROTO;
		out[i].shape = out[i].ndim > 0 ? *shapes + at : NULL;
		at += out[i].ndim;
	}
	return pwire_get_arrays(r, out, n, arrays, arrays_cap);
}

void
ctl_pwire_put_window(ctl_pwire_buf *b, const bellows_window *w)
{
	ctl_pwire_put(b, w, sizeof(*w));
	ctl_pwire_put_str(b, w->job);
	ctl_pwire_put_layers(b, w->layers, w->n_layers);
	if (w->n_comm > 0)
		ctl_pwire_put(b, w->comm, sizeof(*w->comm) * w->n_comm);
}
