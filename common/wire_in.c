/* wire_in - protobuf frames to bellows messages, see wire.h.
 *
 * This file owns the decoder: com_wire_decode, com_wire_decode_arena and
 * com_wire_scan_limit (which wire_fast.c shares). Its allocations go
 * through com_wire_malloc (wire.c, declared in wire_int.h), so the
 * failures tests inject reach it too.
 *
 * Decoding takes two steps over an untrusted frame, one path for every
 * frame. wire_fast.c unpacks the wire into protobuf-c's structs in an
 * arena (wire_arena.c), refusing what the acceptance rules refuse and
 * counting every repeated field against its limit before sizing its
 * array; the arena holds the frame to a byte budget, which bounds what no
 * single limit does (repeats nested in repeats). A report's layers, the
 * bulk of bellowsd's traffic, are the exception: the reader decodes and
 * checks them straight into the com_layer_stats the report keeps, on the
 * heap (wire_fast_layers). Then the conversion to com_* structs checks
 * every other field: a message's plain fields by its table (wire_field.h)
 * through wire_in_fields, the timings by the statistics table's macros,
 * and what no table can say (repeated sub-messages, checks across fields)
 * by the message's own code. Decoded strings are never NULL (an absent string
 * is ""); an absent sub-message decodes as zeroes.
 */
#include "wire.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
#include "common/utf8.h"
#include "stat_table.h"
#include "wire_arena.h"
#include "wire_fast.h"
#include "wire_field.h"
#include "wire_int.h"

/* The limit on the number of entries of a repeated field. */
uint64_t
com_wire_scan_limit(const ProtobufCMessageDescriptor *desc,
    const ProtobufCFieldDescriptor *f, const com_limits *lim)
{
	if (desc == &bellows__layer_info__descriptor)
		return lim->max_ndim;
	if (desc == &bellows__welcome__descriptor ||
	    desc == &bellows__snapshot__descriptor)
		return lim->max_decisions;
	if (desc == &bellows__job_status__descriptor)
		return lim->max_world;
	if (desc == &bellows__report__descriptor &&
	    f->offset == offsetof(Bellows__Report, comm))
		return lim->max_comm;
	if (desc == &bellows__telemetry__descriptor)
		return lim->max_metrics;
	/* Peers and events of a status reply share one limit. */
	if (desc == &bellows__status_reply__descriptor)
		return f->offset == offsetof(Bellows__StatusReply, jobs)
		    ? lim->max_jobs
		    : lim->max_peers;
	/* Hello and Report layers, Decision level and error_bound. */
	return lim->max_layers;
}

/*
 * Decoding, step 1: the wire into protobuf-c's structs (wire_fast.c),
 * within a budget.
 */

/* What unpacking a frame of len bytes may allocate. The structs of a
 * frame take a few times its size, plus up to ~250 bytes for each repeated
 * sub-message however small on the wire (a LayerStats, the largest, and
 * its com_layer_stats); the allowance per layer admits
 * any layer table or report within the limits. A frame needing more (the
 * ranks of thousands of jobs; unknown fields are skipped, they take
 * nothing) is refused rather
 * than allowed memory in proportion to its nesting. */
static size_t
wire_budget(size_t len, const com_limits *lim)
{
	uint64_t b;

	if (len > SIZE_MAX / 8)
		return SIZE_MAX;
	b = (uint64_t)len * 4 + (uint64_t)lim->max_layers * 384 + 65536;
	return b < SIZE_MAX ? (size_t)b : SIZE_MAX;
}

/*
 * Decoding, step 2: conversion to com_* structs, checking every field.
 */

static int
wire_in_strn(const char *s, size_t n, char **ret)
{
	char *p;

	if ((p = com_wire_malloc(n + 1)) == NULL)
		return BELLOWS_ENOMEM;
	memcpy(p, s, n);
	p[n] = '\0';
	*ret = p;
	return 0;
}

/* A job or layer name: 1..max_name_len bytes (0.. when optional) of
 * UTF-8 without control bytes, so it is safe in logs, topics, SQL text,
 * JSON and Prometheus labels. */
static int
wire_in_name(const char *s, const com_limits *lim, bool optional, char **ret)
{
	size_t n;

	if (s == NULL)
		s = "";
	n = strnlen(s, (size_t)lim->max_name_len + 1);
	if (n > lim->max_name_len || (n == 0 && !optional))
		return BELLOWS_EPROTO;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return BELLOWS_EPROTO;
	if (!com_utf8_valid(s, n))
		return BELLOWS_EPROTO;
	return wire_in_strn(s, n, ret);
}

static int
wire_in_text(const char *s, uint32_t max, char **ret)
{
	size_t n;

	if (s == NULL)
		s = "";
	if ((n = strnlen(s, (size_t)max + 1)) > max)
		return BELLOWS_EPROTO;
	return wire_in_strn(s, n, ret);
}

static int
wire_in_bytes(const ProtobufCBinaryData *b, size_t max, uint8_t **ret,
    size_t *ret_len)
{
	if (b->len > max)
		return BELLOWS_EPROTO;
	if (b->len > 0) {
		if ((*ret = com_wire_malloc(b->len)) == NULL)
			return BELLOWS_ENOMEM;
		memcpy(*ret, b->data, b->len);
	}
	*ret_len = b->len;
	return 0;
}

/* Sums, norms, times and levels are finite and never negative. */
static bool
wire_in_magnitude(double v)
{
	return isfinite(v) && v >= 0.0;
}

/* The bound a field's limit column names (wire_field.h). */
static uint64_t
wire_in_limit(const com_limits *lim, uint8_t limit)
{
	switch (limit) {
	case COM_WIRE_WORLD:
		return lim->max_world;
	case COM_WIRE_LAYERS:
		return lim->max_layers;
	case COM_WIRE_NAME_LEN:
		return lim->max_name_len;
	case COM_WIRE_CODEC_TABLE:
		return lim->max_codec_table;
	default:
		return UINT64_MAX;
	}
}

/* One field of a table into the com_* struct at c, checked as its kind
 * requires. */
static inline int
wire_in_field(const com_wire_field *f, const char *p, const com_limits *lim,
    char *c)
{
	const void *src = p + f->pb;
	void *dst = c + f->com;

	switch (f->kind) {
	case COM_WIRE_NAME:
	case COM_WIRE_NAME_OPT:
		return wire_in_name(*(char *const *)src, lim,
		    f->kind == COM_WIRE_NAME_OPT, dst);
	case COM_WIRE_TEXT:
		return wire_in_text(*(char *const *)src, lim->max_text_len,
		    dst);
	case COM_WIRE_BYTES:
		return wire_in_bytes(src, wire_in_limit(lim, f->limit), dst,
		    (size_t *)(c + f->com_len));
	case COM_WIRE_BOOL:
		*(bool *)dst = *(const protobuf_c_boolean *)src != 0;
		return 0;
	case COM_WIRE_U32:
	case COM_WIRE_INDEX: {
		uint32_t v = *(const uint32_t *)src;
		uint64_t max;

		if (f->limit == COM_WIRE_NONE)
			max = UINT64_MAX;
		else
			max = wire_in_limit(lim, f->limit);
		if (v > max || (f->kind == COM_WIRE_INDEX && v == max))
			return BELLOWS_EPROTO;
		*(uint32_t *)dst = v;
		return 0;
	}
	case COM_WIRE_U64:
		*(uint64_t *)dst = *(const uint64_t *)src;
		return 0;
	case COM_WIRE_I32:
	case COM_WIRE_ERRCODE:
		if (f->kind == COM_WIRE_ERRCODE && *(const int32_t *)src >= 0)
			return BELLOWS_EPROTO;
		*(int32_t *)dst = *(const int32_t *)src;
		return 0;
	case COM_WIRE_F64:
	case COM_WIRE_MAG: {
		double v = *(const double *)src;

		if (!isfinite(v) || (f->kind == COM_WIRE_MAG && v < 0.0))
			return BELLOWS_EPROTO;
		*(double *)dst = v;
		return 0;
	}
	default:
		assert(!"a kind wire_field.h does not have");
		return BELLOWS_EPROTO;
	}
}

/* Every field of table t from protobuf-c's struct pb into the com_* struct
 * com. On failure what was copied stays for com_msg_fini to release. */
static int
wire_in_fields(const com_wire_fields *t, const void *pb, const com_limits *lim,
    void *com)
{
	int rc;

	for (uint32_t i = 0; i < t->n; i++)
		if ((rc = wire_in_field(&t->f[i], pb, lim, com)) != 0)
			return rc;
	return 0;
}

/* A decision's residual plan: its four arrays all empty (the default
 * plan) or all of n_layers entries forming a valid plan
 * (com_resid_plan_valid), else BELLOWS_EPROTO. */
static int
wire_in_resid_plan(const Bellows__Decision *pd, com_decision *d)
{
	size_t n = d->n_layers;

	if (pd->n_resid_group == 0 && pd->n_resid_phi == 0 &&
	    pd->n_resid_rows == 0 && pd->n_resid_cols == 0)
		return 0;
	if (pd->n_resid_group != n || pd->n_resid_phi != n ||
	    pd->n_resid_rows != n || pd->n_resid_cols != n || n == 0 ||
	    !com_resid_plan_valid((uint32_t)n, pd->resid_group, pd->resid_phi,
		pd->resid_rows, pd->resid_cols))
		return BELLOWS_EPROTO;
	d->resid_group = com_wire_calloc(n, sizeof(*d->resid_group));
	d->resid_phi = com_wire_calloc(n, sizeof(*d->resid_phi));
	d->resid_rows = com_wire_calloc(n, sizeof(*d->resid_rows));
	d->resid_cols = com_wire_calloc(n, sizeof(*d->resid_cols));
	if (d->resid_group == NULL || d->resid_phi == NULL ||
	    d->resid_rows == NULL || d->resid_cols == NULL)
		return BELLOWS_ENOMEM;
	memcpy(d->resid_group, pd->resid_group, n * sizeof(*d->resid_group));
	memcpy(d->resid_phi, pd->resid_phi, n * sizeof(*d->resid_phi));
	memcpy(d->resid_rows, pd->resid_rows, n * sizeof(*d->resid_rows));
	memcpy(d->resid_cols, pd->resid_cols, n * sizeof(*d->resid_cols));
	return 0;
}

/* A decision's arrays, its plain fields being in: level and error_bound
 * each hold n_layers values or none at all (then zeroes), n_layers being
 * the longer one, and the residual plan. An lr_scale of 0 reads as 1. */
static int
wire_in_decision_arrays(const Bellows__Decision *pd, const com_limits *lim,
    com_decision *d)
{
	size_t n = pd->n_level > pd->n_error_bound ? pd->n_level
						   : pd->n_error_bound;

	if (n > lim->max_layers || (pd->n_level != 0 && pd->n_level != n) ||
	    (pd->n_error_bound != 0 && pd->n_error_bound != n))
		return BELLOWS_EPROTO;
	for (size_t i = 0; i < pd->n_level; i++)
		if (!wire_in_magnitude(pd->level[i]))
			return BELLOWS_EPROTO;
	for (size_t i = 0; i < pd->n_error_bound; i++)
		if (!wire_in_magnitude(pd->error_bound[i]))
			return BELLOWS_EPROTO;
	if (n > 0) {
		d->level = com_wire_calloc(n, sizeof(*d->level));
		d->error_bound = com_wire_calloc(n, sizeof(*d->error_bound));
		if (d->level == NULL || d->error_bound == NULL)
			return BELLOWS_ENOMEM;
		if (pd->n_level > 0)
			memcpy(d->level, pd->level, n * sizeof(*d->level));
		if (pd->n_error_bound > 0)
			memcpy(d->error_bound, pd->error_bound,
			    n * sizeof(*d->error_bound));
	}
	d->n_layers = (uint32_t)n;
	if (d->lr_scale == 0.0)
		d->lr_scale = 1.0;
	return wire_in_resid_plan(pd, d);
}

/* A decision inside a hello, welcome or snapshot: its job may be empty. */
static int
wire_in_decision(const Bellows__Decision *pd, const com_limits *lim,
    com_decision *d)
{
	int rc;

	if ((rc = wire_in_fields(com_wire_bodies[COM_MSG_DECISION].fields, pd,
		 lim, d)) != 0)
		return rc;
	return wire_in_decision_arrays(pd, lim, d);
}

/* The decisions of a welcome or snapshot: in force and pending, by strictly
 * ascending seq. */
static int
wire_in_decisions(Bellows__Decision *const *pd, size_t n, const com_limits *lim,
    com_decision **ret, uint32_t *ret_n)
{
	int rc;

	if (n > lim->max_decisions)
		return BELLOWS_EPROTO;
	if (n == 0)
		return 0;
	if ((*ret = com_wire_calloc(n, sizeof(**ret))) == NULL)
		return BELLOWS_ENOMEM;
	*ret_n = (uint32_t)n;
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && pd[i]->seq <= pd[i - 1]->seq)
			return BELLOWS_EPROTO;
		if ((rc = wire_in_decision(pd[i], lim, &(*ret)[i])) != 0)
			return rc;
	}
	return 0;
}

/* The n sub-messages at pb, each converted by table t, into a zeroed array
 * of n com_* structs of `size` bytes at *ret (none: NULL), *ret_n set once
 * it exists; n was checked against its limit. */
static int
wire_in_each(const com_wire_fields *t, void *const *pb, size_t n, size_t size,
    const com_limits *lim, void **ret, uint32_t *ret_n)
{
	char *a;
	int rc;

	if (n == 0)
		return 0;
	if ((a = com_wire_calloc(n, size)) == NULL)
		return BELLOWS_ENOMEM;
	*ret = a;
	*ret_n = (uint32_t)n;
	for (size_t i = 0; i < n; i++)
		if ((rc = wire_in_fields(t, pb[i], lim, a + i * size)) != 0)
			return rc;
	return 0;
}

static int
wire_in_strcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted, equal names are neighbours: O(n log n) for any table. */
static int
wire_in_unique_names(const com_hello *h)
{
	const char **names;
	int rc = 0;

	if (h->n_layers < 2)
		return 0;
	if ((names = com_wire_calloc(h->n_layers, sizeof(*names))) == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < h->n_layers; i++)
		names[i] = h->layers[i].name;
	qsort(names, h->n_layers, sizeof(*names), wire_in_strcmp);
	for (uint32_t i = 1; i < h->n_layers && rc == 0; i++)
		if (strcmp(names[i - 1], names[i]) == 0)
			rc = BELLOWS_EPROTO;
	free(names);
	return rc;
}

/* A layer table: plain fields by table; a shape, when given, multiplies
 * to numel (none means 1-D [numel]); names unique. */
static int
wire_in_layers(const Bellows__Hello *ph, const com_limits *lim, com_hello *h)
{
	int rc;

	if (ph->n_layers > lim->max_layers)
		return BELLOWS_EPROTO;
	if ((rc = wire_in_each(&com_wire_layer_info, (void *const *)ph->layers,
		 ph->n_layers, sizeof(*h->layers), lim, (void **)&h->layers,
		 &h->n_layers)) != 0)
		return rc;
	for (size_t i = 0; i < ph->n_layers; i++) {
		const Bellows__LayerInfo *pl = ph->layers[i];
		uint64_t product = 1;

		if (pl->n_shape > COM_MAX_NDIM)
			return BELLOWS_EPROTO;
		for (size_t k = 0; k < pl->n_shape; k++)
			if (__builtin_mul_overflow(product, pl->shape[k],
				&product))
				return BELLOWS_EPROTO;
		if (pl->n_shape > 0 && product != pl->numel)
			return BELLOWS_EPROTO;
		h->layers[i].ndim = (uint32_t)pl->n_shape;
		if (pl->n_shape > 0)
			memcpy(h->layers[i].shape, pl->shape,
			    pl->n_shape * sizeof(*pl->shape));
	}
	return wire_in_unique_names(h);
}

/* What a hello's table cannot say: rank < world, world > 0, the run id's
 * fixed limit, the layer table and the state in force. */
static int
wire_in_hello(const Bellows__Hello *ph, const com_limits *lim, com_hello *h)
{
	int rc;

	if (h->world == 0 || h->rank >= h->world ||
	    strlen(h->run_id) > COM_RUN_ID_MAX)
		return BELLOWS_EPROTO;
	if ((rc = wire_in_layers(ph, lim, h)) != 0)
		return rc;
	if (ph->in_force != NULL) {
		rc = wire_in_decision(ph->in_force, lim, &h->in_force);
		if (rc != 0)
			return rc;
		/* The state a rank applies is for its layer table, or none. */
		if (h->in_force.n_layers != 0 &&
		    h->in_force.n_layers != h->n_layers)
			return BELLOWS_EPROTO;
	}
	return 0;
}

static int
wire_in_uint32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* Agents send layers in table order, so a strictly ascending run settles
 * it in one pass; anything else is sorted. */
static int
wire_in_unique_layers(const com_report *r)
{
	uint32_t *idx;
	uint32_t i;
	int rc = 0;

	for (i = 1; i < r->n_layers; i++)
		if (r->layers[i].layer <= r->layers[i - 1].layer)
			break;
	if (i >= r->n_layers)
		return 0;
	if ((idx = com_wire_calloc(r->n_layers, sizeof(*idx))) == NULL)
		return BELLOWS_ENOMEM;
	for (i = 0; i < r->n_layers; i++)
		idx[i] = r->layers[i].layer;
	qsort(idx, r->n_layers, sizeof(*idx), wire_in_uint32_cmp);
	for (i = 1; i < r->n_layers && rc == 0; i++)
		if (idx[i - 1] == idx[i])
			rc = BELLOWS_EPROTO;
	free(idx);
	return rc;
}

/* One statistic off the wire: refused unless it passes its check
 * (com_stat_check_passes). */
#define WIRE_IN_STAT(name, type, tag, check, ...)                              \
	if (!com_stat_check_passes(BELLOWS_STAT_CHECK_##check,                 \
		(double)p->name))                                              \
		return BELLOWS_EPROTO;                                         \
	s->name = p->name;

static int
wire_in_timings(const Bellows__Timings *p, com_timings *s)
{
	BELLOWS_RANK_TIMINGS(WIRE_IN_STAT)
	return 0;
}

/* A report's collective timings: at most max_comm. */
static int
wire_in_comm(const Bellows__Report *pr, const com_limits *lim, com_report *r)
{
	if (pr->n_comm > lim->max_comm)
		return BELLOWS_EPROTO;
	return wire_in_each(&com_wire_comm_sample, (void *const *)pr->comm,
	    pr->n_comm, sizeof(*r->comm), lim, (void **)&r->comm, &r->n_comm);
}

/* What a report's table cannot say: the ranks it covers end within
 * max_world, its timings, layers and collectives. The layers were read
 * and checked by the wire reader (wire_fast_layer_stats); the report
 * takes them from *layers. */
static int
wire_in_report(const Bellows__Report *pr, wire_fast_layers *layers,
    const com_limits *lim, com_report *r)
{
	int rc;

	if (layers->n > lim->max_layers || r->ranks > lim->max_world - r->rank)
		return BELLOWS_EPROTO;
	if (pr->timings != NULL &&
	    (rc = wire_in_timings(pr->timings, &r->timings)) != 0)
		return rc;
	if (layers->n > 0) {
		r->layers = layers->at;
		r->n_layers = (uint32_t)layers->n;
		*layers = (wire_fast_layers){ 0 };
	}
	if ((rc = wire_in_unique_layers(r)) != 0)
		return rc;
	return wire_in_comm(pr, lim, r);
}

/* A status reply's jobs, each with its ranks, its peers and its events,
 * the plain fields of every one by its table. */
static int
wire_in_status_reply(const Bellows__StatusReply *ps, const com_limits *lim,
    com_status_reply *r)
{
	int rc;

	if (ps->n_jobs > lim->max_jobs || ps->n_peers > lim->max_peers ||
	    ps->n_events > lim->max_peers)
		return BELLOWS_EPROTO;
	rc = wire_in_each(&com_wire_job_status, (void *const *)ps->jobs,
	    ps->n_jobs, sizeof(*r->jobs), lim, (void **)&r->jobs, &r->n_jobs);
	for (size_t i = 0; i < ps->n_jobs && rc == 0; i++) {
		const Bellows__JobStatus *pj = ps->jobs[i];

		if (pj->n_ranks > lim->max_world)
			return BELLOWS_EPROTO;
		rc = wire_in_each(&com_wire_rank_status,
		    (void *const *)pj->ranks, pj->n_ranks,
		    sizeof(*r->jobs[i].ranks), lim, (void **)&r->jobs[i].ranks,
		    &r->jobs[i].n_ranks);
	}
	if (rc == 0)
		rc = wire_in_each(&com_wire_peer_status,
		    (void *const *)ps->peers, ps->n_peers, sizeof(*r->peers),
		    lim, (void **)&r->peers, &r->n_peers);
	if (rc == 0)
		rc = wire_in_each(&com_wire_event, (void *const *)ps->events,
		    ps->n_events, sizeof(*r->events), lim, (void **)&r->events,
		    &r->n_events);
	return rc;
}

/* A telemetry's metrics: a layer index or -1 each. */
static int
wire_in_telemetry(const Bellows__Telemetry *p, const com_limits *lim,
    com_telemetry *t)
{
	int rc;

	if (p->n_metrics > lim->max_metrics)
		return BELLOWS_EPROTO;
	if ((rc = wire_in_each(&com_wire_metric, (void *const *)p->metrics,
		 p->n_metrics, sizeof(*t->metrics), lim, (void **)&t->metrics,
		 &t->n_metrics)) != 0)
		return rc;
	for (uint32_t i = 0; i < t->n_metrics; i++)
		if (t->metrics[i].layer < -1 ||
		    (t->metrics[i].layer >= 0 &&
			(uint32_t)t->metrics[i].layer >= lim->max_layers))
			return BELLOWS_EPROTO;
	return 0;
}

/* The body of env, converted into m->u: its plain fields by its table,
 * then what only its own code can check; a report takes the layers read
 * apart into *layers. */
static int
wire_in_body(const Bellows__Envelope *env, wire_fast_layers *layers,
    const com_limits *lim, com_msg *m)
{
	/* Every body is a pointer to a struct in one union, so any member
	 * reads it (pointers to structs share one representation). */
	const void *body = env->hello;
	int rc;

	if ((rc = wire_in_fields(com_wire_bodies[m->type].fields, body, lim,
		 &m->u)) != 0)
		return rc;
	switch (m->type) {
	case COM_MSG_HELLO:
		return wire_in_hello(env->hello, lim, &m->u.hello);
	case COM_MSG_WELCOME:
		return wire_in_decisions(env->welcome->decisions,
		    env->welcome->n_decisions, lim, &m->u.welcome.decisions,
		    &m->u.welcome.n_decisions);
	case COM_MSG_REPORT:
		return wire_in_report(env->report, layers, lim, &m->u.report);
	case COM_MSG_DECISION:
		/* Only inside another message may the job be left empty. */
		if (m->u.decision.job[0] == '\0')
			return BELLOWS_EPROTO;
		return wire_in_decision_arrays(env->decision, lim,
		    &m->u.decision);
	case COM_MSG_STATUS_REPLY:
		return wire_in_status_reply(env->status_reply, lim,
		    &m->u.status_reply);
	case COM_MSG_SNAPSHOT:
		return wire_in_decisions(env->snapshot->decisions,
		    env->snapshot->n_decisions, lim, &m->u.snapshot.decisions,
		    &m->u.snapshot.n_decisions);
	case COM_MSG_TELEMETRY:
		return wire_in_telemetry(env->telemetry, lim, &m->u.telemetry);
	default: /* flat: the table said it all */
		return 0;
	}
}

/* The message type of an Envelope's body, COM_MSG_NONE for none or one
 * this build does not know. */
static com_msg_type
wire_in_type(Bellows__Envelope__BodyCase body)
{
	if (body <= COM_WIRE_BODY_BASE ||
	    body >= COM_MSG_TYPE_MAX + COM_WIRE_BODY_BASE)
		return COM_MSG_NONE;
	return (com_msg_type)(body - COM_WIRE_BODY_BASE);
}

int
com_wire_decode(const uint8_t *buf, size_t len, const com_limits *lim,
    com_msg *ret_msg)
{
	return com_wire_decode_arena(buf, len, lim, NULL, ret_msg);
}

int
com_wire_decode_arena(const uint8_t *buf, size_t len, const com_limits *lim,
    com_arena *arena, com_msg *ret_msg)
{
	com_arena *own = NULL;
	Bellows__Envelope *env = NULL;
	wire_fast_layers layers = { 0 };
	com_msg m;
	int rc;

	assert((buf != NULL || len == 0) && lim != NULL && ret_msg != NULL);
	memset(ret_msg, 0, sizeof(*ret_msg));
	if (len > lim->max_msg_bytes)
		return BELLOWS_EMSGSIZE;
	if (arena == NULL) {
		/* Sized from the frame: most frames then take one block. */
		size_t bytes = len < COM_ARENA_KEEP_MAX / 4
		    ? len * 4 + 1024
		    : COM_ARENA_KEEP_MAX;

		if (com_arena_new(bytes, &own) != 0)
			return BELLOWS_ENOMEM;
		arena = own;
	}
	com_arena_begin(arena, wire_budget(len, lim));
	rc = wire_fast_unpack(&bellows__envelope__descriptor, buf, len, lim,
	    arena, &layers, (void **)&env);
	if (rc == 0) {
		com_msg_init(&m, wire_in_type(env->body_case));
		m.major = env->major;
		m.minor = env->minor;
		if (m.type == COM_MSG_NONE)
			rc = BELLOWS_EPROTO;
		else if (m.major != BELLOWS_PROTO_MAJOR)
			rc = BELLOWS_EVERSION;
		else
			rc = wire_in_body(env, &layers, lim, &m);
		if (rc == 0 || rc == BELLOWS_EVERSION)
			*ret_msg = m;
		else
			com_msg_fini(&m);
	}
	wire_fast_layers_free(&layers); /* what no report took */
	if (own != NULL)
		com_arena_destroy(&own); /* its chunks with it */
	else
		com_arena_reset(arena);
	return rc;
}
