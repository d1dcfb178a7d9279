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
 *
 * Each message's plain fields (names, texts, numbers, flags) go out by
 * its table (wire_field.h) through wire_out_fields; a message's own code
 * adds only its repeated sub-messages and arrays.
 */
#include "wire.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
#include "wire_fault.h"
#include "wire_field.h"
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

/* Every field of table t from the com_* struct com into protobuf-c's
 * struct pb (initialised). Returns BELLOWS_EINVAL for a byte string with
 * a length and no bytes, which it cannot read. */
static int
wire_out_fields(const com_wire_fields *t, const void *com, void *pb)
{
	for (uint32_t i = 0; i < t->n; i++) {
		const com_wire_field *f = &t->f[i];
		const char *src = (const char *)com + f->com;
		char *dst = (char *)pb + f->pb;

		switch (f->kind) {
		case COM_WIRE_NAME:
		case COM_WIRE_NAME_OPT:
		case COM_WIRE_TEXT:
			*(char **)dst = wire_out_str(*(char *const *)src);
			break;
		case COM_WIRE_BYTES: {
			ProtobufCBinaryData *b = (ProtobufCBinaryData *)dst;

			b->data = *(uint8_t *const *)src;
			b->len = *(
			    const size_t *)((const char *)com + f->com_len);
			if (b->len > 0 && b->data == NULL)
				return BELLOWS_EINVAL;
			break;
		}
		case COM_WIRE_BOOL:
			*(protobuf_c_boolean *)dst = *(const bool *)src;
			break;
		case COM_WIRE_U32:
		case COM_WIRE_INDEX:
			*(uint32_t *)dst = *(const uint32_t *)src;
			break;
		case COM_WIRE_U64:
			*(uint64_t *)dst = *(const uint64_t *)src;
			break;
		case COM_WIRE_I32:
		case COM_WIRE_ERRCODE:
			*(int32_t *)dst = *(const int32_t *)src;
			break;
		default: /* COM_WIRE_F64, COM_WIRE_MAG */
			*(double *)dst = *(const double *)src;
			break;
		}
	}
	return 0;
}

/* n sub-messages of type desc at pb (room for n), from the n com_* structs
 * of com_size bytes at com by table t, their addresses in ptrs[0..n-1]. */
static int
wire_out_rows(const com_wire_fields *t, const ProtobufCMessageDescriptor *desc,
    const void *com, size_t com_size, uint32_t n, void *pb, void **ptrs)
{
	int rc;

	for (uint32_t i = 0; i < n; i++) {
		void *p = (char *)pb + i * desc->sizeof_message;

		protobuf_c_message_init(desc, p);
		rc = wire_out_fields(t, (const char *)com + i * com_size, p);
		if (rc != 0)
			return rc;
		ptrs[i] = p;
	}
	return 0;
}

/* The n sub-messages of a repeated field from the com_* array com, in one
 * block: *ret the pointer array protobuf-c wants (untouched when n is 0).
 * BELLOWS_EINVAL when n > 0 and com is NULL. */
static int
wire_out_each(wire_out *o, const com_wire_fields *t,
    const ProtobufCMessageDescriptor *desc, const void *com, size_t com_size,
    uint32_t n, void ***ret)
{
	char *pb;

	if (n == 0)
		return 0;
	if (com == NULL)
		return BELLOWS_EINVAL;
	pb = wire_out_block(o, n, desc->sizeof_message + sizeof(void *));
	if (pb == NULL)
		return BELLOWS_ENOMEM;
	*ret = (void **)(pb + n * desc->sizeof_message);
	return wire_out_rows(t, desc, com, com_size, n, pb, *ret);
}

/* A decision's arrays, its plain fields being out. */
static int
wire_out_decision_arrays(const com_decision *d, Bellows__Decision *pd)
{
	if (d->n_layers > 0 && (d->level == NULL || d->error_bound == NULL))
		return BELLOWS_EINVAL;
	pd->n_level = d->n_layers;
	pd->level = d->level;
	pd->n_error_bound = d->n_layers;
	pd->error_bound = d->error_bound;
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

/* A decision inside another message. */
static int
wire_out_decision(const com_decision *d, Bellows__Decision *pd)
{
	int rc;

	bellows__decision__init(pd);
	rc = wire_out_fields(com_wire_bodies[COM_MSG_DECISION].fields, d, pd);
	return rc != 0 ? rc : wire_out_decision_arrays(d, pd);
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

/* A hello's layer table and the state in force. */
static int
wire_out_hello(wire_out *o, const com_hello *h, Bellows__Hello *ph)
{
	void **ptrs = NULL;
	int rc;

	for (uint32_t i = 0; i < h->n_layers && h->layers != NULL; i++)
		if (h->layers[i].ndim > COM_MAX_NDIM)
			return BELLOWS_EINVAL;
	if ((rc = wire_out_decision(&h->in_force, &o->in_force)) != 0 ||
	    (rc = wire_out_each(o, &com_wire_layer_info,
		 &bellows__layer_info__descriptor, h->layers,
		 sizeof(*h->layers), h->n_layers, &ptrs)) != 0)
		return rc;
	ph->layers = (Bellows__LayerInfo **)ptrs;
	ph->n_layers = h->n_layers;
	for (uint32_t i = 0; i < h->n_layers; i++) {
		ph->layers[i]->n_shape = h->layers[i].ndim;
		ph->layers[i]->shape = (uint32_t *)h->layers[i].shape;
	}
	/* A decision that packs to nothing stays off the wire and so decodes
	 * as the zeroed struct it was. */
	if (protobuf_c_message_get_packed_size(&o->in_force.base) > 0)
		ph->in_force = &o->in_force;
	return 0;
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

/* A report's layers (statistics by the statistics table), timings and
 * collectives. */
static int
wire_out_report(wire_out *o, const com_report *r, Bellows__Report *pr)
{
	Bellows__LayerStats *ps;
	void **ptrs = NULL;
	int rc;

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
	if ((rc = wire_out_each(o, &com_wire_comm_sample,
		 &bellows__comm_sample__descriptor, r->comm, sizeof(*r->comm),
		 r->n_comm, &ptrs)) != 0)
		return rc;
	pr->comm = (Bellows__CommSample **)ptrs;
	pr->n_comm = r->n_comm;
	wire_out_timings(&r->timings, &o->timings);
	pr->timings = &o->timings;
	return 0;
}

/* A status reply's jobs, their ranks (one array, each job taking its
 * n_ranks), peers and events. */
static int
wire_out_status_reply(wire_out *o, const com_status_reply *r,
    Bellows__StatusReply *ps)
{
	const ProtobufCMessageDescriptor
	    *rank = &bellows__rank_status__descriptor;
	void **jobs = NULL, **peers = NULL, **events = NULL, **ranks;
	char *pk = NULL;
	size_t n_ranks = 0, next = 0;
	int rc;

	for (uint32_t i = 0; i < r->n_jobs && r->jobs != NULL; i++) {
		if (r->jobs[i].n_ranks > 0 && r->jobs[i].ranks == NULL)
			return BELLOWS_EINVAL;
		n_ranks += r->jobs[i].n_ranks;
	}
	if ((rc = wire_out_each(o, &com_wire_job_status,
		 &bellows__job_status__descriptor, r->jobs, sizeof(*r->jobs),
		 r->n_jobs, &jobs)) != 0 ||
	    (rc = wire_out_each(o, &com_wire_peer_status,
		 &bellows__peer_status__descriptor, r->peers, sizeof(*r->peers),
		 r->n_peers, &peers)) != 0 ||
	    (rc = wire_out_each(o, &com_wire_event, &bellows__event__descriptor,
		 r->events, sizeof(*r->events), r->n_events, &events)) != 0)
		return rc;
	if (n_ranks > 0 &&
	    (pk = wire_out_block(o, n_ranks,
		 rank->sizeof_message + sizeof(void *))) == NULL)
		return BELLOWS_ENOMEM;
	ranks = n_ranks > 0 ? (void **)(pk + n_ranks * rank->sizeof_message)
			    : NULL;
	for (uint32_t i = 0; i < r->n_jobs; i++) {
		const com_job_status *j = &r->jobs[i];
		Bellows__JobStatus *pj = jobs[i];

		rc = wire_out_rows(&com_wire_rank_status, rank, j->ranks,
		    sizeof(*j->ranks), j->n_ranks,
		    pk + next * rank->sizeof_message, ranks + next);
		if (rc != 0)
			return rc;
		pj->n_ranks = j->n_ranks;
		pj->ranks = j->n_ranks > 0
		    ? (Bellows__RankStatus **)(ranks + next)
		    : NULL;
		next += j->n_ranks;
	}
	ps->jobs = (Bellows__JobStatus **)jobs;
	ps->n_jobs = r->n_jobs;
	ps->peers = (Bellows__PeerStatus **)peers;
	ps->n_peers = r->n_peers;
	ps->events = (Bellows__Event **)events;
	ps->n_events = r->n_events;
	return 0;
}

/* What a body's table cannot say: its repeated sub-messages. */
static int
wire_out_body(wire_out *o, const com_msg *m)
{
	void **ptrs = NULL;
	int rc;

	switch (m->type) {
	case COM_MSG_HELLO:
		return wire_out_hello(o, &m->u.hello, &o->body.hello);
	case COM_MSG_WELCOME:
		return wire_out_decisions(o, m->u.welcome.decisions,
		    m->u.welcome.n_decisions, &o->body.welcome.n_decisions,
		    &o->body.welcome.decisions);
	case COM_MSG_REPORT:
		return wire_out_report(o, &m->u.report, &o->body.report);
	case COM_MSG_DECISION:
		return wire_out_decision_arrays(&m->u.decision,
		    &o->body.decision);
	case COM_MSG_STATUS_REPLY:
		return wire_out_status_reply(o, &m->u.status_reply,
		    &o->body.status_reply);
	case COM_MSG_SNAPSHOT:
		return wire_out_decisions(o, m->u.snapshot.decisions,
		    m->u.snapshot.n_decisions, &o->body.snapshot.n_decisions,
		    &o->body.snapshot.decisions);
	case COM_MSG_TELEMETRY:
		rc = wire_out_each(o, &com_wire_metric,
		    &bellows__metric__descriptor, m->u.telemetry.metrics,
		    sizeof(*m->u.telemetry.metrics), m->u.telemetry.n_metrics,
		    &ptrs);
		o->body.telemetry.metrics = (Bellows__Metric **)ptrs;
		o->body.telemetry.n_metrics = m->u.telemetry.n_metrics;
		return rc;
	default: /* flat: the table said it all */
		return 0;
	}
}

int
com_wire_encode(const com_msg *m, uint8_t **ret_buf, size_t *ret_len)
{
	const ProtobufCFieldDescriptor *fd;
	const com_wire_body *b;
	wire_out o;
	uint8_t *buf;
	size_t len, packed;
	int rc;

	assert(m != NULL && ret_buf != NULL && ret_len != NULL);
	if (m->type <= COM_MSG_NONE || m->type >= COM_MSG_TYPE_MAX)
		return BELLOWS_EINVAL;
	memset(&o, 0, sizeof(o));
	bellows__envelope__init(&o.env);
	o.env.major = m->major;
	o.env.minor = m->minor;
	/* The body is the Envelope's field of number type + BASE, a pointer
	 * where its descriptor says. */
	b = &com_wire_bodies[m->type];
	o.env.body_case = (Bellows__Envelope__BodyCase)(m->type +
	    COM_WIRE_BODY_BASE);
	fd = protobuf_c_message_descriptor_get_field(
	    &bellows__envelope__descriptor, o.env.body_case);
	*(void **)((char *)&o.env + fd->offset) = &o.body;
	protobuf_c_message_init(b->desc, &o.body);
	if ((rc = wire_out_fields(b->fields, &m->u, &o.body)) != 0 ||
	    (rc = wire_out_body(&o, m)) != 0)
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
