/* wire - bellows messages to protobuf frames and back, see wire.h.
 *
 * This file owns the limits' defaults, the wire module's allocator (where tests
 * inject failures, wire_fault.h) and the encoder; the decoder is in
 * wire_in.c, and what the two share is declared in wire_int.h.
 *
 * Encoding points the generated structs at the com_* data wherever the
 * types agree (strings, shapes, double arrays, byte strings); the only
 * copies are the packed frame itself and the arrays of sub-message structs
 * protobuf-c wants behind its pointer arrays. The encoder refuses only what
 * it cannot read safely or what the wire cannot express; whether the values
 * make sense is for the decoder to judge, so tests of other modules can
 * build hostile frames with it.
 */
#include "wire.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
#include "wire_fault.h"
#include "wire_int.h"

/* Allocations before the injected failure, or -1 when none is armed. */
static _Thread_local long wire_fault_countdown = -1;
static _Thread_local bool wire_fault_hit; /* the armed failure happened */

void
com_limits_default(com_limits *lim)
{
	lim->max_msg_bytes = (size_t)16 << 20;
	lim->max_layers = 65536;
	lim->max_world = 65536;
	lim->max_name_len = 256;
	lim->max_text_len = 4096;
	lim->max_decisions = 64;
	lim->max_codec_table = COM_CODEC_TABLE_MAX;
	lim->max_jobs = 4096;
	lim->max_peers = 4096;
	lim->max_comm = 256;
	lim->max_metrics = 4096;
	lim->max_ndim = COM_MAX_NDIM;
}

void
com_wire_fault_arm(long n)
{
	wire_fault_countdown = n < 0 ? -1 : n;
	wire_fault_hit = false;
}

bool
com_wire_fault_fired(void)
{
	return wire_fault_hit;
}

/* Every allocation of the wire module, protobuf-c's included, comes here so
 * that a test can fail any one of them. See wire_int.h. */
void *
com_wire_malloc(size_t size)
{
	if (wire_fault_countdown >= 0 && wire_fault_countdown-- == 0) {
		wire_fault_hit = true;
		return NULL;
	}
	return malloc(size > 0 ? size : 1);
}

/* Zeroed n * size bytes; NULL also when the product overflows. See
 * wire_int.h. */
void *
com_wire_calloc(size_t n, size_t size)
{
	void *p;

	if (size != 0 && n > SIZE_MAX / size)
		return NULL;
	if ((p = com_wire_malloc(n * size)) != NULL)
		memset(p, 0, n * size);
	return p;
}

/*
 * Encoding.
 */

/* The generated structs of one message being encoded. They point into the
 * com_msg and into `block`, which holds the repeated sub-messages. */
typedef struct wire_out {
	Bellows__Envelope env; /* what gets packed */
	union {
		Bellows__Hello hello;
		Bellows__Welcome welcome;
		Bellows__Report report;
		Bellows__Decision decision;
		Bellows__Heartbeat heartbeat;
		Bellows__HeartbeatAck heartbeat_ack;
		Bellows__Bye bye;
		Bellows__StatusRequest status_request;
		Bellows__StatusReply status_reply;
		Bellows__SnapshotRequest snapshot_request;
		Bellows__Snapshot snapshot;
		Bellows__Error error;
		Bellows__Telemetry telemetry;
	} body;                     /* env's body */
	Bellows__Decision in_force; /* a hello's embedded decision */
	Bellows__Timings timings;   /* a report's embedded timings */
	void *block[4];   /* sub-message arrays, freed after packing */
	unsigned n_block; /* entries used in block */
} wire_out;

/* protobuf-c only reads strings while packing; NULL goes out as "". */
static char *
wire_out_str(char *s)
{
	return s != NULL ? s : (char *)protobuf_c_empty_string;
}

/* One allocation for n elements of `size` bytes each, kept in o->block.
 * Callers put n sub-message structs first and the n pointers protobuf-c
 * wants after them: a struct's size is a multiple of a pointer's
 * alignment, so the pointers are aligned. */
static void *
wire_out_block(wire_out *o, size_t n, size_t size)
{
	assert(o->n_block < sizeof(o->block) / sizeof(o->block[0]));
	return o->block[o->n_block++] = com_wire_calloc(n, size);
}

static int
wire_out_decision(const com_decision *d, Bellows__Decision *pd)
{
	bellows__decision__init(pd);
	if (d->n_layers > 0 && (d->level == NULL || d->error_bound == NULL))
		return BELLOWS_EINVAL;
	if (d->codec_table_len > 0 && d->codec_table == NULL)
		return BELLOWS_EINVAL;
	pd->job = wire_out_str(d->job);
	pd->seq = d->seq;
	pd->apply_step = d->apply_step;
	pd->window = d->window;
	pd->n_level = d->n_layers;
	pd->level = d->level;
	pd->n_error_bound = d->n_layers;
	pd->error_bound = d->error_bound;
	pd->batch_size = d->batch_size;
	pd->lr_scale = d->lr_scale;
	pd->size_threshold = d->size_threshold;
	pd->compression_off = d->compression_off;
	pd->codec_table.len = d->codec_table_len;
	pd->codec_table.data = d->codec_table;
	pd->policy = wire_out_str(d->policy);
	pd->reason = wire_out_str(d->reason);
	pd->calibrate_steps = d->calibrate_steps;
	pd->stats_skip = d->stats_skip;
	/* The default plan goes out as none: older peers see no change. */
	if (!com_resid_plan_is_default(d)) {
		pd->n_resid_group = d->n_layers;
		pd->resid_group = d->resid_group;
		pd->n_resid_phi = d->n_layers;
		pd->resid_phi = d->resid_phi;
		pd->n_resid_rows = d->n_layers;
		pd->resid_rows = d->resid_rows;
		pd->n_resid_cols = d->n_layers;
		pd->resid_cols = d->resid_cols;
	}
	return 0;
}

static int
wire_out_decisions(wire_out *o, const com_decision *d, uint32_t n,
    size_t *ret_n, Bellows__Decision ***ret)
{
	Bellows__Decision *pd;
	int rc;

	if (n == 0)
		return 0;
	if (d == NULL)
		return BELLOWS_EINVAL;
	pd = wire_out_block(o, n, sizeof(*pd) + sizeof(*ret));
	if (pd == NULL)
		return BELLOWS_ENOMEM;
	*ret = (Bellows__Decision **)(pd + n);
	for (uint32_t i = 0; i < n; i++) {
		if ((rc = wire_out_decision(&d[i], &pd[i])) != 0)
			return rc;
		(*ret)[i] = &pd[i];
	}
	*ret_n = n;
	return 0;
}

static int
wire_out_hello(wire_out *o, const com_hello *h)
{
	Bellows__Hello *ph = &o->body.hello;
	Bellows__LayerInfo *pl;
	int rc;

	bellows__hello__init(ph);
	if (h->n_layers > 0 && h->layers == NULL)
		return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < h->n_layers; i++)
		if (h->layers[i].ndim > COM_MAX_NDIM)
			return BELLOWS_EINVAL;
	if ((rc = wire_out_decision(&h->in_force, &o->in_force)) != 0)
		return rc;
	if (h->n_layers > 0) {
		pl = wire_out_block(o, h->n_layers,
		    sizeof(*pl) + sizeof(*ph->layers));
		if (pl == NULL)
			return BELLOWS_ENOMEM;
		ph->layers = (Bellows__LayerInfo **)(pl + h->n_layers);
		for (uint32_t i = 0; i < h->n_layers; i++) {
			bellows__layer_info__init(&pl[i]);
			pl[i].name = wire_out_str(h->layers[i].name);
			pl[i].numel = h->layers[i].numel;
			pl[i].n_shape = h->layers[i].ndim;
			pl[i].shape = h->layers[i].shape;
			ph->layers[i] = &pl[i];
		}
		ph->n_layers = h->n_layers;
	}
	ph->job = wire_out_str(h->job);
	ph->rank = h->rank;
	ph->world = h->world;
	ph->agent_version = wire_out_str(h->agent_version);
	ph->step = h->step;
	ph->incarnation = h->incarnation;
	ph->last_window = h->last_window;
	ph->run_id = wire_out_str(h->run_id);
	ph->resume = h->resume;
	/* A decision that packs to nothing stays off the wire and so decodes
	 * as the zeroed struct it was. */
	if (protobuf_c_message_get_packed_size(&o->in_force.base) > 0)
		ph->in_force = &o->in_force;
	o->env.body_case = BELLOWS__ENVELOPE__BODY_HELLO;
	o->env.hello = ph;
	return 0;
}

static int
wire_out_welcome(wire_out *o, const com_welcome *w)
{
	Bellows__Welcome *pw = &o->body.welcome;

	bellows__welcome__init(pw);
	pw->job = wire_out_str(w->job);
	pw->rank = w->rank;
	pw->apply_lag = w->apply_lag;
	pw->heartbeat_ms = w->heartbeat_ms;
	pw->instance = w->instance;
	pw->windows_closed = w->windows_closed;
	o->env.body_case = BELLOWS__ENVELOPE__BODY_WELCOME;
	o->env.welcome = pw;
	return wire_out_decisions(o, w->decisions, w->n_decisions,
	    &pw->n_decisions, &pw->decisions);
}

/* One statistic onto the wire: protobuf-c's structs have the table's
 * field names (test_stat_table checks their tags and types). */
#define WIRE_OUT_STAT(name, ...) p->name = s->name;

/* An array statistic: its len values, or absent (protobuf-c only reads
 * them). */
#define WIRE_OUT_ARRAY(name, len, ...)                                         \
	if (s->name != NULL) {                                                 \
		p->n_##name = len;                                             \
		p->name = s->name;                                             \
	}

static void
wire_out_layer_stats(const com_layer_stats *s, Bellows__LayerStats *p)
{
	bellows__layer_stats__init(p);
	p->layer = s->layer;
	BELLOWS_LAYER_STATS(WIRE_OUT_STAT)
	BELLOWS_LAYER_ARRAYS(WIRE_OUT_ARRAY)
}

static void
wire_out_timings(const com_timings *s, Bellows__Timings *p)
{
	bellows__timings__init(p);
	BELLOWS_RANK_TIMINGS(WIRE_OUT_STAT)
}

static int
wire_out_comm(wire_out *o, const com_report *r, Bellows__Report *pr)
{
	Bellows__CommSample *pc;

	if (r->n_comm == 0)
		return 0;
	if (r->comm == NULL)
		return BELLOWS_EINVAL;
	pc = wire_out_block(o, r->n_comm, sizeof(*pc) + sizeof(*pr->comm));
	if (pc == NULL)
		return BELLOWS_ENOMEM;
	pr->comm = (Bellows__CommSample **)(pc + r->n_comm);
	for (uint32_t i = 0; i < r->n_comm; i++) {
		bellows__comm_sample__init(&pc[i]);
		pc[i].bytes = r->comm[i].bytes;
		pc[i].ms = r->comm[i].ms;
		pc[i].count = r->comm[i].count;
		pc[i].compressed = r->comm[i].compressed;
		pr->comm[i] = &pc[i];
	}
	pr->n_comm = r->n_comm;
	return 0;
}

static int
wire_out_report(wire_out *o, const com_report *r)
{
	Bellows__Report *pr = &o->body.report;
	Bellows__Timings *pt = &o->timings;
	Bellows__LayerStats *ps;
	int rc;

	bellows__report__init(pr);
	if (r->n_layers > 0) {
		if (r->layers == NULL)
			return BELLOWS_EINVAL;
		ps = wire_out_block(o, r->n_layers,
		    sizeof(*ps) + sizeof(*pr->layers));
		if (ps == NULL)
			return BELLOWS_ENOMEM;
		pr->layers = (Bellows__LayerStats **)(ps + r->n_layers);
		for (uint32_t i = 0; i < r->n_layers; i++) {
			wire_out_layer_stats(&r->layers[i], &ps[i]);
			pr->layers[i] = &ps[i];
		}
		pr->n_layers = r->n_layers;
	}
	if ((rc = wire_out_comm(o, r, pr)) != 0)
		return rc;
	wire_out_timings(&r->timings, pt);
	pr->timings = pt;
	pr->job = wire_out_str(r->job);
	pr->rank = r->rank;
	pr->window = r->window;
	pr->first_step = r->first_step;
	pr->last_step = r->last_step;
	pr->lr = r->lr;
	pr->batch_size = r->batch_size;
	pr->epoch = r->epoch;
	pr->seq_in_force = r->seq_in_force;
	pr->lr_next = r->lr_next;
	pr->ranks = r->ranks;
	o->env.body_case = BELLOWS__ENVELOPE__BODY_REPORT;
	o->env.report = pr;
	return 0;
}

static int
wire_out_status_reply(wire_out *o, const com_status_reply *r)
{
	Bellows__StatusReply *ps = &o->body.status_reply;
	Bellows__JobStatus *pj = NULL;
	Bellows__RankStatus *pk = NULL, **pk_ptrs;
	Bellows__PeerStatus *pp = NULL;
	Bellows__Event *pe = NULL;
	size_t n_ranks = 0, next = 0;

	bellows__status_reply__init(ps);
	if ((r->n_jobs > 0 && r->jobs == NULL) ||
	    (r->n_peers > 0 && r->peers == NULL) ||
	    (r->n_events > 0 && r->events == NULL))
		return BELLOWS_EINVAL;
	for (uint32_t i = 0; i < r->n_jobs; i++) {
		if (r->jobs[i].n_ranks > 0 && r->jobs[i].ranks == NULL)
			return BELLOWS_EINVAL;
		n_ranks += r->jobs[i].n_ranks;
	}
	for (uint32_t i = 0; i < r->n_peers; i++)
		if (r->peers[i].peer_len > 0 && r->peers[i].peer == NULL)
			return BELLOWS_EINVAL;
	if ((r->n_jobs > 0 &&
		(pj = wire_out_block(o, r->n_jobs,
		     sizeof(*pj) + sizeof(*ps->jobs))) == NULL) ||
	    (n_ranks > 0 &&
		(pk = wire_out_block(o, n_ranks,
		     sizeof(*pk) + sizeof(*pk_ptrs))) == NULL) ||
	    (r->n_peers > 0 &&
		(pp = wire_out_block(o, r->n_peers,
		     sizeof(*pp) + sizeof(*ps->peers))) == NULL) ||
	    (r->n_events > 0 &&
		(pe = wire_out_block(o, r->n_events,
		     sizeof(*pe) + sizeof(*ps->events))) == NULL))
		return BELLOWS_ENOMEM;
	if (r->n_jobs > 0)
		ps->jobs = (Bellows__JobStatus **)(pj + r->n_jobs);
	/* The jobs share one array of ranks, each taking its n_ranks. */
	pk_ptrs = n_ranks > 0 ? (Bellows__RankStatus **)(pk + n_ranks) : NULL;
	for (uint32_t i = 0; i < r->n_jobs; i++) {
		const com_job_status *j = &r->jobs[i];

		bellows__job_status__init(&pj[i]);
		pj[i].job = wire_out_str(j->job);
		pj[i].world = j->world;
		pj[i].ranks_alive = j->ranks_alive;
		pj[i].window = j->window;
		pj[i].seq = j->seq;
		pj[i].step = j->step;
		pj[i].n_layers = j->n_layers;
		pj[i].windows_incomplete = j->windows_incomplete;
		pj[i].policy = wire_out_str(j->policy);
		pj[i].n_ranks = j->n_ranks;
		pj[i].ranks = j->n_ranks > 0 ? pk_ptrs + next : NULL;
		for (uint32_t k = 0; k < j->n_ranks; k++, next++) {
			const com_rank_status *s = &j->ranks[k];
			Bellows__RankStatus *p = &pk[next];

			bellows__rank_status__init(p);
			p->rank = s->rank;
			p->alive = s->alive;
			p->step = s->step;
			p->last_seen_ms = s->last_seen_ms;
			p->reports = s->reports;
			p->seq_in_force = s->seq_in_force;
			p->rejoins = s->rejoins;
			pk_ptrs[next] = p;
		}
		ps->jobs[i] = &pj[i];
	}
	if (r->n_peers > 0)
		ps->peers = (Bellows__PeerStatus **)(pp + r->n_peers);
	for (uint32_t i = 0; i < r->n_peers; i++) {
		bellows__peer_status__init(&pp[i]);
		pp[i].peer.len = r->peers[i].peer_len;
		pp[i].peer.data = r->peers[i].peer;
		pp[i].dropped = r->peers[i].dropped;
		pp[i].last_error = wire_out_str(r->peers[i].last_error);
		ps->peers[i] = &pp[i];
	}
	if (r->n_events > 0)
		ps->events = (Bellows__Event **)(pe + r->n_events);
	for (uint32_t i = 0; i < r->n_events; i++) {
		bellows__event__init(&pe[i]);
		pe[i].wall_ms = r->events[i].wall_ms;
		pe[i].kind = wire_out_str(r->events[i].kind);
		pe[i].job = wire_out_str(r->events[i].job);
		pe[i].text = wire_out_str(r->events[i].text);
		ps->events[i] = &pe[i];
	}
	ps->n_jobs = r->n_jobs;
	ps->n_peers = r->n_peers;
	ps->n_events = r->n_events;
	ps->instance = r->instance;
	ps->uptime_ms = r->uptime_ms;
	ps->messages = r->messages;
	ps->dropped = r->dropped;
	ps->reports = r->reports;
	ps->decisions = r->decisions;
	ps->layer_stats = r->layer_stats;
	ps->store_degraded = r->store_degraded;
	ps->store_pending = r->store_pending;
	ps->store_dropped = r->store_dropped;
	ps->store_error = wire_out_str(r->store_error);
	ps->latency_p50_ms = r->latency_p50_ms;
	ps->latency_p99_ms = r->latency_p99_ms;
	ps->latency_max_ms = r->latency_max_ms;
	ps->latency_samples = r->latency_samples;
	ps->reports_duplicate = r->reports_duplicate;
	ps->store_path = wire_out_str(r->store_path);
	o->env.body_case = BELLOWS__ENVELOPE__BODY_STATUS_REPLY;
	o->env.status_reply = ps;
	return 0;
}

static int
wire_out_snapshot(wire_out *o, const com_snapshot *s)
{
	Bellows__Snapshot *ps = &o->body.snapshot;

	bellows__snapshot__init(ps);
	ps->job = wire_out_str(s->job);
	o->env.body_case = BELLOWS__ENVELOPE__BODY_SNAPSHOT;
	o->env.snapshot = ps;
	return wire_out_decisions(o, s->decisions, s->n_decisions,
	    &ps->n_decisions, &ps->decisions);
}

static int
wire_out_telemetry(wire_out *o, const com_telemetry *t)
{
	Bellows__Telemetry *p = &o->body.telemetry;
	Bellows__Metric *pm;

	bellows__telemetry__init(p);
	p->job = wire_out_str(t->job);
	p->window = t->window;
	p->ranks_reported = t->ranks_reported;
	p->ranks_expected = t->ranks_expected;
	p->step_ms_median = t->step_ms_median;
	o->env.body_case = BELLOWS__ENVELOPE__BODY_TELEMETRY;
	o->env.telemetry = p;
	if (t->n_metrics == 0)
		return 0;
	if (t->metrics == NULL)
		return BELLOWS_EINVAL;
	pm = wire_out_block(o, t->n_metrics, sizeof(*pm) + sizeof(*p->metrics));
	if (pm == NULL)
		return BELLOWS_ENOMEM;
	p->metrics = (Bellows__Metric **)(pm + t->n_metrics);
	for (uint32_t i = 0; i < t->n_metrics; i++) {
		bellows__metric__init(&pm[i]);
		pm[i].policy = wire_out_str(t->metrics[i].policy);
		pm[i].name = wire_out_str(t->metrics[i].name);
		pm[i].layer = t->metrics[i].layer;
		pm[i].value = t->metrics[i].value;
		p->metrics[i] = &pm[i];
	}
	p->n_metrics = t->n_metrics;
	return 0;
}

/* The message types whose bodies are flat: scalars and strings only. */
static int
wire_out_flat(wire_out *o, const com_msg *m)
{
	switch (m->type) {
	case COM_MSG_HEARTBEAT: {
		Bellows__Heartbeat *p = &o->body.heartbeat;

		bellows__heartbeat__init(p);
		p->job = wire_out_str(m->u.heartbeat.job);
		p->rank = m->u.heartbeat.rank;
		p->step = m->u.heartbeat.step;
		p->seq_in_force = m->u.heartbeat.seq_in_force;
		p->incarnation = m->u.heartbeat.incarnation;
		o->env.body_case = BELLOWS__ENVELOPE__BODY_HEARTBEAT;
		o->env.heartbeat = p;
		return 0;
	}
	case COM_MSG_HEARTBEAT_ACK: {
		Bellows__HeartbeatAck *p = &o->body.heartbeat_ack;

		bellows__heartbeat_ack__init(p);
		p->instance = m->u.heartbeat_ack.instance;
		p->last_seq = m->u.heartbeat_ack.last_seq;
		p->windows_closed = m->u.heartbeat_ack.windows_closed;
		o->env.body_case = BELLOWS__ENVELOPE__BODY_HEARTBEAT_ACK;
		o->env.heartbeat_ack = p;
		return 0;
	}
	case COM_MSG_BYE: {
		Bellows__Bye *p = &o->body.bye;

		bellows__bye__init(p);
		p->job = wire_out_str(m->u.bye.job);
		p->rank = m->u.bye.rank;
		o->env.body_case = BELLOWS__ENVELOPE__BODY_BYE;
		o->env.bye = p;
		return 0;
	}
	case COM_MSG_STATUS_REQUEST: {
		Bellows__StatusRequest *p = &o->body.status_request;

		bellows__status_request__init(p);
		p->job = wire_out_str(m->u.status_request.job);
		o->env.body_case = BELLOWS__ENVELOPE__BODY_STATUS_REQUEST;
		o->env.status_request = p;
		return 0;
	}
	case COM_MSG_SNAPSHOT_REQUEST: {
		Bellows__SnapshotRequest *p = &o->body.snapshot_request;

		bellows__snapshot_request__init(p);
		p->job = wire_out_str(m->u.snapshot_request.job);
		p->rank = m->u.snapshot_request.rank;
		o->env.body_case = BELLOWS__ENVELOPE__BODY_SNAPSHOT_REQUEST;
		o->env.snapshot_request = p;
		return 0;
	}
	case COM_MSG_ERROR: {
		Bellows__Error *p = &o->body.error;

		bellows__error__init(p);
		p->code = m->u.error.code;
		p->message = wire_out_str(m->u.error.message);
		o->env.body_case = BELLOWS__ENVELOPE__BODY_ERROR;
		o->env.error = p;
		return 0;
	}
	default:
		return BELLOWS_EINVAL;
	}
}

int
com_wire_encode(const com_msg *m, uint8_t **ret_buf, size_t *ret_len)
{
	wire_out o;
	uint8_t *buf;
	size_t len, packed;
	int rc;

	assert(m != NULL && ret_buf != NULL && ret_len != NULL);
	memset(&o, 0, sizeof(o));
	bellows__envelope__init(&o.env);
	o.env.major = m->major;
	o.env.minor = m->minor;
	switch (m->type) {
	case COM_MSG_HELLO:
		rc = wire_out_hello(&o, &m->u.hello);
		break;
	case COM_MSG_WELCOME:
		rc = wire_out_welcome(&o, &m->u.welcome);
		break;
	case COM_MSG_REPORT:
		rc = wire_out_report(&o, &m->u.report);
		break;
	case COM_MSG_DECISION:
		rc = wire_out_decision(&m->u.decision, &o.body.decision);
		o.env.body_case = BELLOWS__ENVELOPE__BODY_DECISION;
		o.env.decision = &o.body.decision;
		break;
	case COM_MSG_STATUS_REPLY:
		rc = wire_out_status_reply(&o, &m->u.status_reply);
		break;
	case COM_MSG_SNAPSHOT:
		rc = wire_out_snapshot(&o, &m->u.snapshot);
		break;
	case COM_MSG_TELEMETRY:
		rc = wire_out_telemetry(&o, &m->u.telemetry);
		break;
	default:
		rc = wire_out_flat(&o, m);
		break;
	}
	if (rc != 0)
		goto done;
	len = protobuf_c_message_get_packed_size(&o.env.base);
	if ((buf = com_wire_malloc(len)) == NULL) {
		rc = BELLOWS_ENOMEM;
		goto done;
	}
	packed = protobuf_c_message_pack(&o.env.base, buf);
	assert(packed == len);
	(void)packed;
	*ret_buf = buf;
	*ret_len = len;
done:
	for (unsigned i = 0; i < o.n_block; i++)
		free(o.block[i]);
	return rc;
}
