/* conform - the decoder held to protobuf-c's unpack, see conform.h. */
#include "conform.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
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

const char *
conform_check(const uint8_t *data, size_t size)
{
	static com_arena *arena; /* reused across inputs, as bellowsd does */
	const char *why;

	if (arena == NULL && com_arena_new(16384, &arena) != 0)
		abort();
	if ((why = conform_wire(data, size, arena)) != NULL)
		return why;
	return conform_arena(data, size, arena);
}
