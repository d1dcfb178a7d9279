/* conform - the decoder held to protobuf-c's unpack, see conform.h. */
#include "conform.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
#include "common/stat_table.h"
#include "common/wire.h"
#include "common/wire_arena.h"
#include "common/wire_fast.h"

/* Limits that refuse nothing: the reader's own limits are a documented
 * strictness, not a disagreement. */
static void
conform_limits(com_limits *lim)
{
	lim->max_msg_bytes = SIZE_MAX;
	lim->max_layers = UINT32_MAX;
	lim->max_world = UINT32_MAX;
	lim->max_name_len = UINT32_MAX;
	lim->max_text_len = UINT32_MAX;
	lim->max_decisions = UINT32_MAX;
	lim->max_codec_table = UINT32_MAX;
	lim->max_jobs = UINT32_MAX;
	lim->max_peers = UINT32_MAX;
	lim->max_comm = UINT32_MAX;
	lim->max_metrics = UINT32_MAX;
	lim->max_ndim = UINT32_MAX;
}

/* Drops the unknown fields protobuf-c kept, in m and every sub-message,
 * so that m compares with what the reader (which skips them) built. */
static void
conform_strip(ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < m->n_unknown_fields; i++)
		free(m->unknown_fields[i].data);
	free(m->unknown_fields);
	m->unknown_fields = NULL;
	m->n_unknown_fields = 0;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		char *at = (char *)m + f->offset;

		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(
			    size_t *)((char *)m + f->quantifier_offset);
			ProtobufCMessage **arr;

			memcpy(&arr, at, sizeof(arr));
			for (size_t k = 0; k < n; k++)
				conform_strip(arr[k]);
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0 &&
		    *(uint32_t *)((char *)m + f->quantifier_offset) != f->id)
			continue;
		{
			ProtobufCMessage *sub;

			memcpy(&sub, at, sizeof(sub));
			if (sub != NULL)
				conform_strip(sub);
		}
	}
}

/* m written by protobuf-c; *len set. Aborts when memory runs out. */
static uint8_t *
conform_pack(const ProtobufCMessage *m, size_t *len)
{
	uint8_t *buf;

	*len = protobuf_c_message_get_packed_size(m);
	if ((buf = malloc(*len + 1)) == NULL)
		abort();
	(void)protobuf_c_message_pack(m, buf);
	return buf;
}

/* The reader's result for the frame at p, written back by protobuf-c
 * (NULL: refused); *rc set. */
static uint8_t *
conform_read(const uint8_t *p, size_t n, com_arena *arena, int *rc, size_t *len)
{
	com_limits lim;
	void *env = NULL;
	uint8_t *out = NULL;

	conform_limits(&lim);
	com_arena_begin(arena, SIZE_MAX);
	*rc = wire_fast_unpack(&bellows__envelope__descriptor, p, n, &lim,
	    arena, NULL, &env);
	if (*rc == 0)
		out = conform_pack(env, len);
	com_arena_reset(arena);
	return out;
}

static bool
conform_same(const uint8_t *a, size_t la, const uint8_t *b, size_t lb)
{
	return la == lb && (la == 0 || memcmp(a, b, la) == 0);
}

/* True when protobuf-c's unpack accepts the n bytes at p. */
static bool
conform_rereads(const uint8_t *p, size_t n)
{
	ProtobufCMessage *m;

	m = (ProtobufCMessage *)bellows__envelope__unpack(NULL, n, p);
	if (m == NULL)
		return false;
	protobuf_c_message_free_unpacked(m, NULL);
	return true;
}

/* The reader against protobuf-c on one frame. */
static const char *
conform_wire(const uint8_t *data, size_t size, com_arena *arena)
{
	ProtobufCMessage *ref;
	uint8_t *mine, *canon, *again = NULL, *want;
	size_t lm = 0, lc, la = 0, lw;
	const char *why = NULL;
	int rc, rc2;

	mine = conform_read(data, size, arena, &rc, &lm);
	ref = (ProtobufCMessage *)bellows__envelope__unpack(NULL, size, data);
	if (ref == NULL) {
		free(mine);
		return rc == 0 ? "the reader accepts what protobuf-c refuses"
			       : NULL;
	}
	canon = conform_pack(ref, &lc);
	conform_strip(ref);
	want = conform_pack(ref, &lw);
	protobuf_c_message_free_unpacked(ref, NULL);
	if (rc == 0 && !conform_same(mine, lm, want, lw))
		why = "the reader and protobuf-c decode different values";
	else if (rc != 0 && conform_same(data, size, canon, lc))
		why = "the reader refuses a canonical frame";
	/* protobuf-c writes back an unknown field of field number 0 (read
	 * from a key in a longer form than needed) in a form it refuses
	 * itself: only what it reads back binds the reader. */
	if (why == NULL && conform_rereads(canon, lc)) {
		again = conform_read(canon, lc, arena, &rc2, &la);
		if (rc2 != 0)
			why = "the reader refuses protobuf-c's own writing";
		else if (!conform_same(again, la, want, lw))
			why =
			    "protobuf-c's writing reads back different values";
	}
	free(mine);
	free(canon);
	free(again);
	free(want);
	return why;
}

/*
 * A report's layers, read straight into com_layer_stats
 * (wire_fast_layer_stats), against protobuf-c's unpack followed by the
 * checks the statistics table states (the reference below, which finds
 * each field in protobuf-c's descriptor by its name, not by the tag the
 * reader's table holds).
 */

/* The field of message d called name; aborts if none. */
static const ProtobufCFieldDescriptor *
conform_pb_field_of(const ProtobufCMessageDescriptor *d, const char *name)
{
	const ProtobufCFieldDescriptor *f;

	if ((f = protobuf_c_message_descriptor_get_field_by_name(d, name)) ==
	    NULL)
		abort();
	return f;
}

/* The field of protobuf-c's LayerStats called name; aborts if none. */
static const ProtobufCFieldDescriptor *
conform_pb_field(const char *name)
{
	return conform_pb_field_of(&bellows__layer_stats__descriptor, name);
}

/* The check column as docs/protocol.md states it, written again rather
 * than taken from common/ (com_stat_check_passes): the reference must not
 * share the reader's mistakes. */
static bool
conform_check_value(bellows_stat_check check, double v)
{
	switch (check) {
	case BELLOWS_STAT_CHECK_MAG:
		return isfinite(v) && v >= 0.0;
	case BELLOWS_STAT_CHECK_FRAC:
		return isfinite(v) && v >= 0.0 && v <= 1.0;
	default:
		return true;
	}
}

/* protobuf-c's LayerStats p as a com_layer_stats *s (zeroed, its arrays
 * pointing into p), checked as the statistics table says: BELLOWS_EPROTO
 * when a check fails. */
static int
conform_layer_ref(const Bellows__LayerStats *p, const com_limits *lim,
    com_layer_stats *s)
{
	const char *pb = (const char *)p;

	if (p->layer >= lim->max_layers)
		return BELLOWS_EPROTO;
	s->layer = p->layer;
	for (size_t i = 0; i < COM_N_LSTATS; i++) {
		const com_stat *e = &com_layer_stat_table[i];
		const ProtobufCFieldDescriptor *f = conform_pb_field(e->name);
		char *dst = (char *)s + e->offset;
		double d;

		if (e->type == BELLOWS_STAT_TYPE_F64) {
			memcpy(&d, pb + f->offset, 8);
			memcpy(dst, &d, 8);
		} else if (e->type == BELLOWS_STAT_TYPE_U64) {
			uint64_t v;

			memcpy(&v, pb + f->offset, 8);
			memcpy(dst, &v, 8);
			d = (double)v;
		} else {
			uint32_t v;

			memcpy(&v, pb + f->offset, 4);
			memcpy(dst, &v, 4);
			d = (double)v;
		}
		if (!conform_check_value(e->check, d))
			return BELLOWS_EPROTO;
	}
	for (size_t i = 0; i < COM_N_LARRAYS; i++) {
		const com_stat_array *a = &com_layer_array_table[i];
		const ProtobufCFieldDescriptor *f = conform_pb_field(a->name);
		size_t n;
		uint64_t *v;

		memcpy(&n, pb + f->quantifier_offset, sizeof(n));
		memcpy(&v, pb + f->offset, sizeof(v));
		if (n != 0 && n != a->len)
			return BELLOWS_EPROTO;
		if (n == 0)
			v = NULL;
		memcpy((char *)s + a->offset, &v, sizeof(v));
	}
	return 0;
}

/* The same statistics in a and b (bit for bit), the same arrays. */
static bool
conform_layer_same(const com_layer_stats *a, const com_layer_stats *b)
{
	if (a->layer != b->layer)
		return false;
	for (size_t i = 0; i < COM_N_LSTATS; i++) {
		const com_stat *e = &com_layer_stat_table[i];
		size_t size = e->type == BELLOWS_STAT_TYPE_U32 ? 4 : 8;

		if (memcmp((const char *)a + e->offset,
			(const char *)b + e->offset, size) != 0)
			return false;
	}
	for (size_t i = 0; i < COM_N_LARRAYS; i++) {
		const com_stat_array *t = &com_layer_array_table[i];
		const uint64_t *x = com_stat_array_get(t, a);
		const uint64_t *y = com_stat_array_get(t, b);

		if ((x == NULL) != (y == NULL) ||
		    (x != NULL && memcmp(x, y, t->len * sizeof(*x)) != 0))
			return false;
	}
	return true;
}

static void
conform_layer_free(com_layer_stats *s)
{
	for (size_t i = 0; i < COM_N_LARRAYS; i++)
		free((void *)com_stat_array_get(&com_layer_array_table[i], s));
}

/* The layer reader on the n bytes at p: its code, *ret set on success
 * (the caller frees its arrays, conform_layer_free). */
static int
conform_layer_read(const uint8_t *p, size_t n, const com_limits *lim,
    com_layer_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	return wire_fast_layer_stats(p, n, lim, ret);
}

const char *
conform_layer_check(const uint8_t *data, size_t size, const com_limits *lim)
{
	Bellows__LayerStats *ref, *back;
	com_layer_stats mine, want, again, want2;
	uint8_t *canon;
	size_t lc;
	const char *why = NULL;
	int rc, rref, rc2, rref2;

	rc = conform_layer_read(data, size, lim, &mine);
	if (rc != 0 && rc != BELLOWS_EPROTO)
		return "the layer reader fails other than by refusing";
	ref = bellows__layer_stats__unpack(NULL, size, data);
	if (ref == NULL) {
		if (rc == 0)
			conform_layer_free(&mine);
		return rc == 0 ? "the layer reader accepts what protobuf-c "
				 "refuses"
			       : NULL;
	}
	memset(&want, 0, sizeof(want));
	rref = conform_layer_ref(ref, lim, &want);
	canon = conform_pack(&ref->base, &lc);
	if (rc == 0 && rref != 0)
		why = "the layer reader accepts values the checks refuse";
	else if (rc == 0 && !conform_layer_same(&mine, &want))
		why = "the layer reader and protobuf-c decode different "
		      "statistics";
	else if (rc != 0 && rref == 0 && conform_same(data, size, canon, lc))
		why = "the layer reader refuses a canonical layer";
	/* What protobuf-c writes back (and reads again) binds the reader:
	 * the statistics protobuf-c reads from it, or a refusal when the
	 * checks refuse them. Those of that reading, not of the input:
	 * protobuf-c writes a double of -0.0 as it writes 0.0 (not at all,
	 * proto3's default), so its writing reads back +0.0 where the input
	 * said -0.0 (docs/protocol.md, What a frame may be). */
	if (why == NULL &&
	    (back = bellows__layer_stats__unpack(NULL, lc, canon)) != NULL) {
		memset(&want2, 0, sizeof(want2));
		rref2 = conform_layer_ref(back, lim, &want2);
		rc2 = conform_layer_read(canon, lc, lim, &again);
		if (rref2 == 0 && rc2 != 0)
			why = "the layer reader refuses protobuf-c's own "
			      "writing";
		else if (rref2 != 0 && rc2 == 0)
			why = "the layer reader accepts, written back, values "
			      "the checks refuse";
		else if (rc2 == 0 && !conform_layer_same(&again, &want2))
			why = "protobuf-c's writing reads back different "
			      "statistics";
		if (rc2 == 0)
			conform_layer_free(&again);
		bellows__layer_stats__free_unpacked(back, NULL);
	}
	bellows__layer_stats__free_unpacked(ref, NULL);
	if (rc == 0)
		conform_layer_free(&mine);
	free(canon);
	return why;
}

/* com_wire_decode with a fresh arena against one reused (bellowsd's). */
static const char *
conform_arena(const uint8_t *data, size_t size, com_arena *arena)
{
	com_limits lim;
	com_msg a, b;
	uint8_t *ea = NULL, *eb = NULL;
	size_t la = 0, lb = 0;
	const char *why = NULL;
	int ra, rb;

	com_limits_default(&lim);
	lim.max_msg_bytes = 1 << 20;
	ra = com_wire_decode(data, size, &lim, &a);
	rb = com_wire_decode_arena(data, size, &lim, arena, &b);
	if (ra != rb)
		return "a fresh arena and a reused one decode differently";
	if (ra == 0) {
		int ca = com_wire_encode(&a, &ea, &la);
		int cb = com_wire_encode(&b, &eb, &lb);

		if (ca != cb || (ca == 0 && !conform_same(ea, la, eb, lb)))
			why = "a fresh arena and a reused one decode "
			      "different messages";
		free(ea);
		free(eb);
	}
	if (ra == 0 || ra == BELLOWS_EVERSION) {
		com_msg_fini(&a);
		com_msg_fini(&b);
	}
	return why;
}

/* Reads a varint at p[*off] (any form of at most 10 bytes); false when
 * there is none. */
static bool
conform_varint(const uint8_t *p, size_t n, size_t *off, uint64_t *ret)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 10 && *off < n; i++) {
		uint8_t b = p[(*off)++];

		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if ((b & 0x80) == 0) {
			*ret = v;
			return true;
		}
	}
	return false;
}

/* Calls fn on the value of every length-delimited field `tag` among the
 * fields at p, as far as they can be walked; the findings of the first
 * that has one. */
static const char *
conform_each(const uint8_t *p, size_t n, uint64_t tag,
    const char *(*fn)(const uint8_t *, size_t, const void *), const void *arg)
{
	size_t off = 0;
	const char *why = NULL;

	while (off < n && why == NULL) {
		uint64_t key, v = 0;

		if (!conform_varint(p, n, &off, &key))
			break;
		switch (key & 7) {
		case 0:
			if (!conform_varint(p, n, &off, &v))
				return why;
			continue;
		case 1:
			v = 8;
			break;
		case 5:
			v = 4;
			break;
		case 2:
			if (!conform_varint(p, n, &off, &v))
				return why;
			break;
		default:
			return why;
		}
		if (v > n - off)
			break;
		if ((key & 7) == 2 && (key >> 3) == tag)
			why = fn(p + off, (size_t)v, arg);
		off += (size_t)v;
	}
	return why;
}

/* The layer check on one LayerStats's bytes, with limits that refuse
 * nothing and with the defaults (max_layers bounds `layer`). */
static const char *
conform_one_layer(const uint8_t *p, size_t n, const void *arg)
{
	com_limits lim;
	const char *why;

	(void)arg;
	conform_limits(&lim);
	if ((why = conform_layer_check(p, n, &lim)) != NULL)
		return why;
	com_limits_default(&lim);
	return conform_layer_check(p, n, &lim);
}

/* The layer check on every layer of a Report's bytes. */
static const char *
conform_report_bytes(const uint8_t *p, size_t n, const void *arg)
{
	(void)arg;
	return conform_each(p, n,
	    conform_pb_field_of(&bellows__report__descriptor, "layers")->id,
	    conform_one_layer, NULL);
}

/* The layers of the report com_wire_decode made of a frame against
 * protobuf-c's unpack of it and the reference checks: the same layers,
 * in the same order. */
static const char *
conform_report_layers(const uint8_t *data, size_t size)
{
	com_limits lim;
	com_msg m;
	Bellows__Envelope *env;
	const char *why = NULL;
	int rc;

	com_limits_default(&lim);
	lim.max_msg_bytes = 1 << 20;
	rc = com_wire_decode(data, size, &lim, &m);
	if (rc != 0) {
		if (rc == BELLOWS_EVERSION)
			com_msg_fini(&m);
		return NULL;
	}
	if (m.type != COM_MSG_REPORT) {
		com_msg_fini(&m);
		return NULL;
	}
	env = bellows__envelope__unpack(NULL, size, data);
	if (env == NULL || env->body_case != BELLOWS__ENVELOPE__BODY_REPORT)
		why = "protobuf-c refuses a report the decoder accepts";
	else if (env->report->n_layers != m.u.report.n_layers)
		why = "the decoder and protobuf-c read a different number of "
		      "layers";
	for (size_t i = 0; why == NULL && i < m.u.report.n_layers; i++) {
		com_layer_stats want;

		memset(&want, 0, sizeof(want));
		if (conform_layer_ref(env->report->layers[i], &lim, &want) != 0)
			why = "the decoder accepts a layer the checks refuse";
		else if (!conform_layer_same(&m.u.report.layers[i], &want))
			why = "the decoder and protobuf-c decode a report's "
			      "layer differently";
	}
	if (env != NULL)
		bellows__envelope__free_unpacked(env, NULL);
	com_msg_fini(&m);
	return why;
}

const char *
conform_check(const uint8_t *data, size_t size)
{
	static com_arena *arena; /* reused across inputs, as bellowsd does */
	const char *why;

	if (arena == NULL && com_arena_new(16384, &arena) != 0)
		abort();
	if ((why = conform_wire(data, size, arena)) != NULL)
		return why;
	if ((why = conform_arena(data, size, arena)) != NULL)
		return why;
	/* The layer reader: on the input itself, as if it were a layer (the
	 * fuzzer's bytes are as good a layer as a frame), on every layer of
	 * a report in it, and on the report the decoder makes of it. */
	if ((why = conform_one_layer(data, size, NULL)) != NULL)
		return why;
	if ((why = conform_each(data, size,
		 conform_pb_field_of(&bellows__envelope__descriptor, "report")
		     ->id,
		 conform_report_bytes, NULL)) != NULL)
		return why;
	return conform_report_layers(data, size);
}
