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
 * single limit does (repeats nested in repeats). Then the conversion to
 * com_* structs checks every field. Decoded strings are never NULL (an
 * absent string is ""); an absent sub-message decodes as zeroes.
 */
#include "wire.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
#include "common/utf8.h"
#include "wire_arena.h"
#include "wire_fast.h"
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

/* A decision's level and error_bound arrays each hold n_layers values or
 * none at all (then zeroes); n_layers is the longer one. */
static int
wire_in_decision(const Bellows__Decision *pd, const com_limits *lim,
    bool job_optional, com_decision *d)
{
	size_t n = pd->n_level > pd->n_error_bound ? pd->n_level
						   : pd->n_error_bound;
	int rc;

	if (n > lim->max_layers || (pd->n_level != 0 && pd->n_level != n) ||
	    (pd->n_error_bound != 0 && pd->n_error_bound != n))
		return BELLOWS_EPROTO;
	if (!wire_in_magnitude(pd->lr_scale))
		return BELLOWS_EPROTO;
	for (size_t i = 0; i < pd->n_level; i++)
		if (!wire_in_magnitude(pd->level[i]))
			return BELLOWS_EPROTO;
	for (size_t i = 0; i < pd->n_error_bound; i++)
		if (!wire_in_magnitude(pd->error_bound[i]))
			return BELLOWS_EPROTO;
	rc = wire_in_name(pd->job, lim, job_optional, &d->job);
	if (rc == 0)
		rc = wire_in_text(pd->policy, lim->max_text_len, &d->policy);
	if (rc == 0)
		rc = wire_in_text(pd->reason, lim->max_text_len, &d->reason);
	if (rc != 0 ||
	    (rc = wire_in_bytes(&pd->codec_table, lim->max_codec_table,
		 &d->codec_table, &d->codec_table_len)) != 0)
		return rc;
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
	d->seq = pd->seq;
	d->apply_step = pd->apply_step;
	d->window = pd->window;
	d->batch_size = pd->batch_size;
	d->lr_scale = pd->lr_scale == 0.0 ? 1.0 : pd->lr_scale;
	d->size_threshold = pd->size_threshold;
	d->compression_off = pd->compression_off;
	d->calibrate_steps = pd->calibrate_steps;
	/* Any bits: an agent acts only on those it knows. */
	d->stats_skip = pd->stats_skip;
	return wire_in_resid_plan(pd, d);
}

/* The decisions of a welcome or snapshot: in force and pending, by strictly
 * ascending seq. Their job may be left empty: the message names it. */
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
		if ((rc = wire_in_decision(pd[i], lim, true, &(*ret)[i])) != 0)
			return rc;
	}
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

/* A shape, when given, multiplies to numel; none means 1-D [numel]. */
static int
wire_in_layer(const Bellows__LayerInfo *pl, const com_limits *lim,
    com_layer_info *l)
{
	uint64_t product = 1;

	if (pl->n_shape > COM_MAX_NDIM)
		return BELLOWS_EPROTO;
	for (size_t i = 0; i < pl->n_shape; i++)
		if (__builtin_mul_overflow(product, pl->shape[i], &product))
			return BELLOWS_EPROTO;
	if (pl->n_shape > 0 && product != pl->numel)
		return BELLOWS_EPROTO;
	l->numel = pl->numel;
	l->ndim = (uint32_t)pl->n_shape;
	if (pl->n_shape > 0)
		memcpy(l->shape, pl->shape, pl->n_shape * sizeof(*l->shape));
	return wire_in_name(pl->name, lim, false, &l->name);
}

static int
wire_in_hello(const Bellows__Hello *ph, const com_limits *lim, com_hello *h)
{
	int rc;

	if (ph->world == 0 || ph->world > lim->max_world ||
	    ph->rank >= ph->world || ph->n_layers > lim->max_layers ||
	    (ph->run_id != NULL &&
		strnlen(ph->run_id, COM_RUN_ID_MAX + 1) > COM_RUN_ID_MAX))
		return BELLOWS_EPROTO;
	if ((rc = wire_in_name(ph->job, lim, false, &h->job)) != 0 ||
	    (rc = wire_in_text(ph->agent_version, lim->max_text_len,
		 &h->agent_version)) != 0 ||
	    (rc = wire_in_name(ph->run_id, lim, true, &h->run_id)) != 0)
		return rc;
	if (ph->n_layers > 0) {
		h->layers = com_wire_calloc(ph->n_layers, sizeof(*h->layers));
		if (h->layers == NULL)
			return BELLOWS_ENOMEM;
		h->n_layers = (uint32_t)ph->n_layers;
	}
	for (size_t i = 0; i < ph->n_layers && rc == 0; i++)
		rc = wire_in_layer(ph->layers[i], lim, &h->layers[i]);
	if (rc == 0)
		rc = wire_in_unique_names(h);
	if (rc != 0)
		return rc;
	if (ph->in_force != NULL) {
		rc = wire_in_decision(ph->in_force, lim, true, &h->in_force);
		if (rc != 0)
			return rc;
		/* The state a rank applies is for its layer table, or none. */
		if (h->in_force.n_layers != 0 &&
		    h->in_force.n_layers != h->n_layers)
			return BELLOWS_EPROTO;
	}
	h->rank = ph->rank;
	h->world = ph->world;
	h->step = ph->step;
	h->incarnation = ph->incarnation;
	h->last_window = ph->last_window;
	h->resume = ph->resume;
	return 0;
}

static int
wire_in_welcome(const Bellows__Welcome *pw, const com_limits *lim,
    com_welcome *w)
{
	int rc;

	if (pw->rank >= lim->max_world)
		return BELLOWS_EPROTO;
	if ((rc = wire_in_name(pw->job, lim, false, &w->job)) != 0 ||
	    (rc = wire_in_decisions(pw->decisions, pw->n_decisions, lim,
		 &w->decisions, &w->n_decisions)) != 0)
		return rc;
	w->rank = pw->rank;
	w->apply_lag = pw->apply_lag;
	w->heartbeat_ms = pw->heartbeat_ms;
	w->instance = pw->instance;
	/* Any value: it can only make an agent let go of kept reports. */
	w->windows_closed = pw->windows_closed;
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

/* The check column of the statistics table (bellows/stats.h). */
#define WIRE_CHECK_ANY(v)  true
#define WIRE_CHECK_MAG(v)  wire_in_magnitude(v)
#define WIRE_CHECK_FRAC(v) (wire_in_magnitude(v) && (v) <= 1.0)

/* One statistic off the wire: refused unless it passes its check. */
#define WIRE_IN_STAT(name, type, tag, check, ...)                              \
	if (!WIRE_CHECK_##check(p->name))                                      \
		return BELLOWS_EPROTO;                                         \
	s->name = p->name;

/* One array statistic off the wire: absent, or exactly its length
 * (check LEN), copied to the heap (com_msg_fini frees it). */
#define WIRE_IN_ARRAY(name, len, tag, check, ...)                              \
	if (p->n_##name != 0 && p->n_##name != (len))                          \
		return BELLOWS_EPROTO;                                         \
	if (p->n_##name != 0) {                                                \
		if ((s->name = com_wire_calloc(len, sizeof(uint64_t))) ==      \
		    NULL)                                                      \
			return BELLOWS_ENOMEM;                                 \
		memcpy(s->name, p->name, (len) * sizeof(uint64_t));            \
	}

static int
wire_in_layer_stats(const Bellows__LayerStats *p, const com_limits *lim,
    com_layer_stats *s)
{
	if (p->layer >= lim->max_layers)
		return BELLOWS_EPROTO;
	s->layer = p->layer;
	BELLOWS_LAYER_STATS(WIRE_IN_STAT)
	BELLOWS_LAYER_ARRAYS(WIRE_IN_ARRAY)
	return 0;
}

static int
wire_in_timings(const Bellows__Timings *p, com_timings *s)
{
	BELLOWS_RANK_TIMINGS(WIRE_IN_STAT)
	return 0;
}

/* A report's collective timings: at most max_comm, durations finite and
 * not negative. */
static int
wire_in_comm(const Bellows__Report *pr, const com_limits *lim, com_report *r)
{
	if (pr->n_comm > lim->max_comm)
		return BELLOWS_EPROTO;
	for (size_t i = 0; i < pr->n_comm; i++)
		if (!wire_in_magnitude(pr->comm[i]->ms))
			return BELLOWS_EPROTO;
	if (pr->n_comm == 0)
		return 0;
	if ((r->comm = com_wire_calloc(pr->n_comm, sizeof(*r->comm))) == NULL)
		return BELLOWS_ENOMEM;
	r->n_comm = (uint32_t)pr->n_comm;
	for (size_t i = 0; i < pr->n_comm; i++) {
		r->comm[i].bytes = pr->comm[i]->bytes;
		r->comm[i].ms = pr->comm[i]->ms;
		r->comm[i].count = pr->comm[i]->count;
		r->comm[i].compressed = pr->comm[i]->compressed;
	}
	return 0;
}

static int
wire_in_report(const Bellows__Report *pr, const com_limits *lim, com_report *r)
{
	int rc;

	if (pr->rank >= lim->max_world || pr->n_layers > lim->max_layers ||
	    pr->ranks > lim->max_world - pr->rank ||
	    !wire_in_magnitude(pr->lr) || !wire_in_magnitude(pr->lr_next))
		return BELLOWS_EPROTO;
	if ((rc = wire_in_name(pr->job, lim, false, &r->job)) != 0)
		return rc;
	if (pr->timings != NULL &&
	    (rc = wire_in_timings(pr->timings, &r->timings)) != 0)
		return rc;
	if (pr->n_layers > 0) {
		r->layers = com_wire_calloc(pr->n_layers, sizeof(*r->layers));
		if (r->layers == NULL)
			return BELLOWS_ENOMEM;
		r->n_layers = (uint32_t)pr->n_layers;
	}
	for (size_t i = 0; i < pr->n_layers; i++)
		if ((rc = wire_in_layer_stats(pr->layers[i], lim,
			 &r->layers[i])) != 0)
			return rc;
	if ((rc = wire_in_unique_layers(r)) != 0 ||
	    (rc = wire_in_comm(pr, lim, r)) != 0)
		return rc;
	r->rank = pr->rank;
	r->window = pr->window;
	r->first_step = pr->first_step;
	r->last_step = pr->last_step;
	r->lr = pr->lr;
	r->batch_size = pr->batch_size;
	r->epoch = pr->epoch;
	r->seq_in_force = pr->seq_in_force;
	r->lr_next = pr->lr_next;
	r->ranks = pr->ranks;
	return 0;
}

static int
wire_in_job_status(const Bellows__JobStatus *pj, const com_limits *lim,
    com_job_status *j)
{
	int rc;

	if (pj->world > lim->max_world || pj->ranks_alive > lim->max_world ||
	    pj->n_ranks > lim->max_world || pj->n_layers > lim->max_layers)
		return BELLOWS_EPROTO;
	rc = wire_in_name(pj->job, lim, false, &j->job);
	if (rc == 0)
		rc = wire_in_text(pj->policy, lim->max_text_len, &j->policy);
	if (rc != 0)
		return rc;
	if (pj->n_ranks > 0) {
		j->ranks = com_wire_calloc(pj->n_ranks, sizeof(*j->ranks));
		if (j->ranks == NULL)
			return BELLOWS_ENOMEM;
		j->n_ranks = (uint32_t)pj->n_ranks;
	}
	for (size_t i = 0; i < pj->n_ranks; i++) {
		const Bellows__RankStatus *pk = pj->ranks[i];
		com_rank_status *k = &j->ranks[i];

		if (pk->rank >= lim->max_world)
			return BELLOWS_EPROTO;
		k->rank = pk->rank;
		k->alive = pk->alive;
		k->step = pk->step;
		k->last_seen_ms = pk->last_seen_ms;
		k->reports = pk->reports;
		k->seq_in_force = pk->seq_in_force;
		k->rejoins = pk->rejoins;
	}
	j->world = pj->world;
	j->ranks_alive = pj->ranks_alive;
	j->window = pj->window;
	j->seq = pj->seq;
	j->step = pj->step;
	j->n_layers = pj->n_layers;
	j->windows_incomplete = pj->windows_incomplete;
	return 0;
}

static int
wire_in_status_reply(const Bellows__StatusReply *ps, const com_limits *lim,
    com_status_reply *r)
{
	int rc;

	if (ps->n_jobs > lim->max_jobs || ps->n_peers > lim->max_peers ||
	    ps->n_events > lim->max_peers)
		return BELLOWS_EPROTO;
	if (ps->n_jobs > 0) {
		r->jobs = com_wire_calloc(ps->n_jobs, sizeof(*r->jobs));
		if (r->jobs == NULL)
			return BELLOWS_ENOMEM;
		r->n_jobs = (uint32_t)ps->n_jobs;
	}
	for (size_t i = 0; i < ps->n_jobs; i++) {
		rc = wire_in_job_status(ps->jobs[i], lim, &r->jobs[i]);
		if (rc != 0)
			return rc;
	}
	if (ps->n_peers > 0) {
		r->peers = com_wire_calloc(ps->n_peers, sizeof(*r->peers));
		if (r->peers == NULL)
			return BELLOWS_ENOMEM;
		r->n_peers = (uint32_t)ps->n_peers;
	}
	for (size_t i = 0; i < ps->n_peers; i++) {
		const Bellows__PeerStatus *pp = ps->peers[i];
		com_peer_status *p = &r->peers[i];

		/* Routing ids are at most 255 bytes, like names. */
		if ((rc = wire_in_bytes(&pp->peer, lim->max_name_len, &p->peer,
			 &p->peer_len)) != 0 ||
		    (rc = wire_in_text(pp->last_error, lim->max_text_len,
			 &p->last_error)) != 0)
			return rc;
		p->dropped = pp->dropped;
	}
	if (ps->n_events > 0) {
		r->events = com_wire_calloc(ps->n_events, sizeof(*r->events));
		if (r->events == NULL)
			return BELLOWS_ENOMEM;
		r->n_events = (uint32_t)ps->n_events;
	}
	for (size_t i = 0; i < ps->n_events; i++) {
		const Bellows__Event *pe = ps->events[i];
		com_event *e = &r->events[i];

		if ((rc = wire_in_name(pe->kind, lim, false, &e->kind)) != 0 ||
		    (rc = wire_in_name(pe->job, lim, true, &e->job)) != 0 ||
		    (rc = wire_in_text(pe->text, lim->max_text_len,
			 &e->text)) != 0)
			return rc;
		e->wall_ms = pe->wall_ms;
	}
	r->instance = ps->instance;
	r->uptime_ms = ps->uptime_ms;
	r->messages = ps->messages;
	r->dropped = ps->dropped;
	r->reports = ps->reports;
	r->decisions = ps->decisions;
	r->layer_stats = ps->layer_stats;
	r->store_degraded = ps->store_degraded;
	r->store_pending = ps->store_pending;
	r->store_dropped = ps->store_dropped;
	if (!wire_in_magnitude(ps->latency_p50_ms) ||
	    !wire_in_magnitude(ps->latency_p99_ms) ||
	    !wire_in_magnitude(ps->latency_max_ms))
		return BELLOWS_EPROTO;
	r->latency_p50_ms = ps->latency_p50_ms;
	r->latency_p99_ms = ps->latency_p99_ms;
	r->latency_max_ms = ps->latency_max_ms;
	r->latency_samples = ps->latency_samples;
	r->reports_duplicate = ps->reports_duplicate;
	if ((rc = wire_in_text(ps->store_path, lim->max_text_len,
		 &r->store_path)) != 0)
		return rc;
	return wire_in_text(ps->store_error, lim->max_text_len,
	    &r->store_error);
}

/* A policy's metric: a name as for layers, the policy's instance name (may
 * be empty), a layer index or -1, a finite value of any sign. */
static int
wire_in_metric(const Bellows__Metric *pm, const com_limits *lim, com_metric *m)
{
	int rc;

	if (pm->layer < -1 ||
	    (pm->layer >= 0 && (uint32_t)pm->layer >= lim->max_layers) ||
	    !isfinite(pm->value))
		return BELLOWS_EPROTO;
	if ((rc = wire_in_name(pm->policy, lim, true, &m->policy)) != 0 ||
	    (rc = wire_in_name(pm->name, lim, false, &m->name)) != 0)
		return rc;
	m->layer = pm->layer;
	m->value = pm->value;
	return 0;
}

static int
wire_in_telemetry(const Bellows__Telemetry *p, const com_limits *lim,
    com_telemetry *t)
{
	int rc;

	if (p->ranks_reported > lim->max_world ||
	    p->ranks_expected > lim->max_world ||
	    !wire_in_magnitude(p->step_ms_median) ||
	    p->n_metrics > lim->max_metrics)
		return BELLOWS_EPROTO;
	if ((rc = wire_in_name(p->job, lim, false, &t->job)) != 0)
		return rc;
	if (p->n_metrics > 0) {
		t->metrics = com_wire_calloc(p->n_metrics, sizeof(*t->metrics));
		if (t->metrics == NULL)
			return BELLOWS_ENOMEM;
		t->n_metrics = (uint32_t)p->n_metrics;
	}
	for (size_t i = 0; i < p->n_metrics; i++)
		if ((rc = wire_in_metric(p->metrics[i], lim, &t->metrics[i])) !=
		    0)
			return rc;
	t->window = p->window;
	t->ranks_reported = p->ranks_reported;
	t->ranks_expected = p->ranks_expected;
	t->step_ms_median = p->step_ms_median;
	return 0;
}

/* A job and a rank, the fields every flat request starts with. */
static int
wire_in_job_rank(const char *job, uint32_t rank, const com_limits *lim,
    char **ret_job)
{
	if (rank >= lim->max_world)
		return BELLOWS_EPROTO;
	return wire_in_name(job, lim, false, ret_job);
}

static int
wire_in_body(const Bellows__Envelope *env, const com_limits *lim, com_msg *m)
{
	int rc;

	switch (env->body_case) {
	case BELLOWS__ENVELOPE__BODY_HELLO:
		return wire_in_hello(env->hello, lim, &m->u.hello);
	case BELLOWS__ENVELOPE__BODY_WELCOME:
		return wire_in_welcome(env->welcome, lim, &m->u.welcome);
	case BELLOWS__ENVELOPE__BODY_REPORT:
		return wire_in_report(env->report, lim, &m->u.report);
	case BELLOWS__ENVELOPE__BODY_DECISION:
		return wire_in_decision(env->decision, lim, false,
		    &m->u.decision);
	case BELLOWS__ENVELOPE__BODY_HEARTBEAT: {
		const Bellows__Heartbeat *p = env->heartbeat;
		com_heartbeat *h = &m->u.heartbeat;

		h->rank = p->rank;
		h->step = p->step;
		h->seq_in_force = p->seq_in_force;
		h->incarnation = p->incarnation;
		return wire_in_job_rank(p->job, p->rank, lim, &h->job);
	}
	case BELLOWS__ENVELOPE__BODY_HEARTBEAT_ACK:
		m->u.heartbeat_ack.instance = env->heartbeat_ack->instance;
		m->u.heartbeat_ack.last_seq = env->heartbeat_ack->last_seq;
		m->u.heartbeat_ack.windows_closed = env->heartbeat_ack
							->windows_closed;
		return 0;
	case BELLOWS__ENVELOPE__BODY_BYE:
		m->u.bye.rank = env->bye->rank;
		return wire_in_job_rank(env->bye->job, env->bye->rank, lim,
		    &m->u.bye.job);
	case BELLOWS__ENVELOPE__BODY_STATUS_REQUEST:
		return wire_in_name(env->status_request->job, lim, true,
		    &m->u.status_request.job);
	case BELLOWS__ENVELOPE__BODY_STATUS_REPLY:
		return wire_in_status_reply(env->status_reply, lim,
		    &m->u.status_reply);
	case BELLOWS__ENVELOPE__BODY_SNAPSHOT_REQUEST:
		m->u.snapshot_request.rank = env->snapshot_request->rank;
		return wire_in_job_rank(env->snapshot_request->job,
		    env->snapshot_request->rank, lim,
		    &m->u.snapshot_request.job);
	case BELLOWS__ENVELOPE__BODY_SNAPSHOT:
		if ((rc = wire_in_name(env->snapshot->job, lim, false,
			 &m->u.snapshot.job)) != 0)
			return rc;
		return wire_in_decisions(env->snapshot->decisions,
		    env->snapshot->n_decisions, lim, &m->u.snapshot.decisions,
		    &m->u.snapshot.n_decisions);
	case BELLOWS__ENVELOPE__BODY_ERROR:
		/* Codes are negative BELLOWS_E* values, including ones
		 * appended after this build. */
		if (env->error->code >= 0)
			return BELLOWS_EPROTO;
		m->u.error.code = env->error->code;
		return wire_in_text(env->error->message, lim->max_text_len,
		    &m->u.error.message);
	case BELLOWS__ENVELOPE__BODY_TELEMETRY:
		return wire_in_telemetry(env->telemetry, lim, &m->u.telemetry);
	case BELLOWS__ENVELOPE__BODY__NOT_SET:
	default:
		return BELLOWS_EPROTO;
	}
}

static com_msg_type
wire_in_type(Bellows__Envelope__BodyCase body)
{
	switch (body) {
	case BELLOWS__ENVELOPE__BODY_HELLO:
		return COM_MSG_HELLO;
	case BELLOWS__ENVELOPE__BODY_WELCOME:
		return COM_MSG_WELCOME;
	case BELLOWS__ENVELOPE__BODY_REPORT:
		return COM_MSG_REPORT;
	case BELLOWS__ENVELOPE__BODY_DECISION:
		return COM_MSG_DECISION;
	case BELLOWS__ENVELOPE__BODY_HEARTBEAT:
		return COM_MSG_HEARTBEAT;
	case BELLOWS__ENVELOPE__BODY_HEARTBEAT_ACK:
		return COM_MSG_HEARTBEAT_ACK;
	case BELLOWS__ENVELOPE__BODY_BYE:
		return COM_MSG_BYE;
	case BELLOWS__ENVELOPE__BODY_STATUS_REQUEST:
		return COM_MSG_STATUS_REQUEST;
	case BELLOWS__ENVELOPE__BODY_STATUS_REPLY:
		return COM_MSG_STATUS_REPLY;
	case BELLOWS__ENVELOPE__BODY_SNAPSHOT_REQUEST:
		return COM_MSG_SNAPSHOT_REQUEST;
	case BELLOWS__ENVELOPE__BODY_SNAPSHOT:
		return COM_MSG_SNAPSHOT;
	case BELLOWS__ENVELOPE__BODY_ERROR:
		return COM_MSG_ERROR;
	case BELLOWS__ENVELOPE__BODY_TELEMETRY:
		return COM_MSG_TELEMETRY;
	case BELLOWS__ENVELOPE__BODY__NOT_SET:
	default:
		return COM_MSG_NONE;
	}
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
	    arena, (void **)&env);
	if (rc == 0) {
		com_msg_init(&m, wire_in_type(env->body_case));
		m.major = env->major;
		m.minor = env->minor;
		if (m.type == COM_MSG_NONE)
			rc = BELLOWS_EPROTO;
		else if (m.major != BELLOWS_PROTO_MAJOR)
			rc = BELLOWS_EVERSION;
		else
			rc = wire_in_body(env, lim, &m);
		if (rc == 0 || rc == BELLOWS_EVERSION)
			*ret_msg = m;
		else
			com_msg_fini(&m);
	}
	if (own != NULL)
		com_arena_destroy(&own); /* its chunks with it */
	else
		com_arena_reset(arena);
	return rc;
}
