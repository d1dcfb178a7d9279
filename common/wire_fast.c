/* wire_fast - the wire reader: frames into protobuf-c's structs, see
 * wire_fast.h.
 *
 * One walk over each message's bytes: every key, varint, length and wire
 * type is checked as it is read and the value stored at once, a
 * sub-message read by recursion where it stands. A repeated field's array
 * is allocated when its first entry comes (a packed array: all its
 * entries) and doubles when a further entry finds it full, so a frame as
 * bellows writes it allocates each array once, or log2(n) times for n
 * sub-messages. Everything comes from the frame's arena.
 */
#include "wire_fast.h"

#include <stdbool.h>
#include <string.h>

#include <bellows/error.h>

#define FAST_MAX_FIELDS 32 /* more fields than any message has */
#define FAST_MAX_DEPTH  8  /* deeper nesting than any message has */

/* Reads a varint of at most max bytes at p[*off], advancing *off. A varint
 * is refused when it runs past len or max bytes, is not minimal (a last
 * byte of 0 after the first) or holds more than 64 bits. */
static inline int
fast_varint(const uint8_t *p, size_t len, size_t *off, unsigned max,
    uint64_t *ret)
{
	size_t o = *off;
	uint64_t v = 0;

	if (o < len && p[o] < 0x80) {
		*ret = p[o];
		*off = o + 1;
		return 0;
	}
	for (unsigned i = 0; i < max && o < len; i++) {
		uint8_t b = p[o++];

		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if ((b & 0x80) == 0) {
			if ((i > 0 && b == 0) || (i == 9 && b > 1))
				return -1;
			*off = o;
			*ret = v;
			return 0;
		}
	}
	return -1;
}

/* The wire type a scalar of type t is written with, -1: no field of the
 * schema has the type. */
static int
fast_wire(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_BOOL:
	case PROTOBUF_C_TYPE_ENUM:
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		return 1;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE:
		return 2;
	default: /* fixed and float types */
		return -1;
	}
}

/* Bytes of one element of type t in a struct. */
static size_t
fast_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return sizeof(void *);
	}
}

/* Stores the varint v as a field of type t at dst, as protobuf-c does:
 * 32-bit types keep the low 32 bits, zigzag types are unfolded. Inlined
 * by force, as fast_slot: each is on the path of every scalar of every
 * frame and GCC kept them out of line (-7 % instructions per decode). */
static inline __attribute__((always_inline)) void
fast_store_varint(ProtobufCType t, uint64_t v, void *dst)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_ENUM: {
		uint32_t x = (uint32_t)v;

		memcpy(dst, &x, 4);
		break;
	}
	case PROTOBUF_C_TYPE_SINT32: {
		uint32_t u = (uint32_t)v;
		uint32_t x = (u >> 1) ^ (0u - (u & 1));

		memcpy(dst, &x, 4);
		break;
	}
	case PROTOBUF_C_TYPE_SINT64: {
		uint64_t x = (v >> 1) ^ (0ull - (v & 1));

		memcpy(dst, &x, 8);
		break;
	}
	case PROTOBUF_C_TYPE_BOOL: {
		protobuf_c_boolean x = v != 0;

		memcpy(dst, &x, sizeof(x));
		break;
	}
	default:
		memcpy(dst, &v, 8);
		break;
	}
}

static int fast_message(const ProtobufCMessageDescriptor *desc,
    const uint8_t *p, size_t len, const com_limits *lim, com_arena *arena,
    unsigned depth, void **ret);

/* Stores the length-delimited value v of vlen bytes as an element of
 * field f at dst: a string (walk 1 refused NULs), bytes or a message. */
static int
fast_store_delimited(const ProtobufCFieldDescriptor *f, const uint8_t *v,
    size_t vlen, const com_limits *lim, com_arena *arena, unsigned depth,
    void *dst)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		char *s;

		if ((s = com_arena_alloc(arena, vlen + 1)) == NULL)
			return com_arena_error(arena);
		memcpy(s, v, vlen);
		s[vlen] = '\0';
		memcpy(dst, &s, sizeof(s));
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData b = { .len = vlen, .data = NULL };

		if (vlen > 0) {
			if ((b.data = com_arena_alloc(arena, vlen)) == NULL)
				return com_arena_error(arena);
			memcpy(b.data, v, vlen);
		}
		memcpy(dst, &b, sizeof(b));
		return 0;
	}
	default: {
		void *m;
		int rc = fast_message(f->descriptor, v, vlen, lim, arena,
		    depth + 1, &m);

		if (rc == 0)
			memcpy(dst, &m, sizeof(m));
		return rc;
	}
	}
}

/* Entries of a packed array of type t in vlen bytes, or -1 when the bytes
 * are not whole entries (every varint checked as fast_varint does). */
static int64_t
fast_packed_count(ProtobufCType t, const uint8_t *v, size_t vlen)
{
	int64_t n = 0;
	size_t off = 0;

	if (t == PROTOBUF_C_TYPE_DOUBLE)
		return vlen % 8 == 0 ? (int64_t)(vlen / 8) : -1;
	while (off < vlen) {
		uint64_t x;

		if (fast_varint(v, vlen, &off, 10, &x) != 0)
			return -1;
		n++;
	}
	return n;
}

/* Skips the value of an unknown field of wire type wire at p[*off]. Its
 * varints are read as protobuf-c reads them (at most 10 bytes, lengths
 * at most 5, any form): protobuf-c keeps unknown fields and writes them
 * back byte for byte, so their form is the writer's business. */
static int
fast_skip(const uint8_t *p, size_t len, size_t *off, unsigned wire)
{
	unsigned max = wire == 0 ? 10 : 5;
	uint64_t v = 0;
	bool ended = false;

	switch (wire) {
	case 0:
	case 2:
		for (unsigned i = 0; i < max && *off < len && !ended; i++) {
			uint8_t b = p[(*off)++];

			v |= (uint64_t)(b & 0x7f) << (7 * i);
			ended = (b & 0x80) == 0;
		}
		if (!ended)
			return -1; /* too long, or cut off */
		if (wire == 0)
			return 0;
		break;
	case 1:
	case 5:
		v = wire == 1 ? 8 : 4;
		break;
	default: /* groups and reserved wire types */
		return -1;
	}
	if (v > len - *off)
		return -1;
	*off += (size_t)v;
	return 0;
}

/* Stores a packed array of vlen bytes at v (fast_packed_count checked
 * it) into dst; the number of entries stored. */
static size_t
fast_store_packed(ProtobufCType t, const uint8_t *v, size_t vlen, char *dst)
{
	size_t off = 0, k = 0;

	if (t == PROTOBUF_C_TYPE_DOUBLE) {
		memcpy(dst, v, vlen);
		return vlen / 8;
	}
	for (; off < vlen; k++) {
		uint64_t x = 0;

		(void)fast_varint(v, vlen, &off, 10, &x);
		fast_store_varint(t, x, dst + k * fast_size(t));
	}
	return k;
}

/* One message being read: its struct, and per repeated field how many
 * entries its array has room for. */
typedef struct fast_msg {
	const ProtobufCMessageDescriptor *desc;
	char *msg;
	uint32_t seen;               /* bit i: non-repeated field i was read */
	bool oneof;                  /* a member of the oneof was read */
	size_t cap[FAST_MAX_FIELDS]; /* entries allocated, repeated fields */
} fast_msg;

/* Room in repeated field f (index i) of m for n more entries, within the
 * field's limit; *at is where they go. The array doubles as it grows
 * (one allocation for a field written packed once). */
static int
fast_room(fast_msg *m, const ProtobufCFieldDescriptor *f, size_t i, uint64_t n,
    const com_limits *lim, com_arena *arena, char **at)
{
	size_t *count = (size_t *)(m->msg + f->quantifier_offset);
	size_t size = fast_size(f->type);
	char *arr;

	memcpy(&arr, m->msg + f->offset, sizeof(arr));
	if (n > com_wire_scan_limit(m->desc, f, lim) - *count)
		return BELLOWS_EPROTO;
	if (*count + n > m->cap[i]) {
		size_t want = m->cap[i] * 2;
		char *grown;

		if (want < *count + n)
			want = *count + (size_t)n;
		if (want < 8 && f->type == PROTOBUF_C_TYPE_MESSAGE)
			want = 8;
		if ((grown = com_arena_alloc(arena, want * size)) == NULL)
			return com_arena_error(arena);
		if (*count > 0)
			memcpy(grown, arr, *count * size);
		arr = grown;
		memcpy(m->msg + f->offset, &arr, sizeof(arr));
		m->cap[i] = want;
	}
	*at = arr + *count * size;
	*count += (size_t)n;
	return 0;
}

/* Reads a packed array of field f (index i) at p[*off] into m. */
static int
fast_packed(fast_msg *m, const ProtobufCFieldDescriptor *f, size_t i,
    const uint8_t *p, size_t len, size_t *off, const com_limits *lim,
    com_arena *arena)
{
	uint64_t v;
	int64_t n;
	char *dst;
	int rc;

	if (fast_varint(p, len, off, 5, &v) != 0 || v > len - *off ||
	    (n = fast_packed_count(f->type, p + *off, (size_t)v)) < 0)
		return BELLOWS_EPROTO;
	if (n > 0) {
		if ((rc = fast_room(m, f, i, (uint64_t)n, lim, arena, &dst)) !=
		    0)
			return rc;
		fast_store_packed(f->type, p + *off, (size_t)v, dst);
	}
	*off += (size_t)v;
	return 0;
}

/* Where the value of field f (index i) goes in m: a new entry of a
 * repeated field, or the field itself, marked present (a field or a
 * oneof member read twice is refused). */
static inline __attribute__((always_inline)) int
fast_slot(fast_msg *m, const ProtobufCFieldDescriptor *f, size_t i,
    const com_limits *lim, com_arena *arena, char **dst)
{
	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return fast_room(m, f, i, 1, lim, arena, dst);
	if ((m->seen & (1u << i)) != 0)
		return BELLOWS_EPROTO;
	m->seen |= 1u << i;
	if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0) {
		if (m->oneof)
			return BELLOWS_EPROTO;
		m->oneof = true;
		*(uint32_t *)(m->msg + f->quantifier_offset) = f->id;
	} else if (f->quantifier_offset != 0) {
		*(protobuf_c_boolean *)(m->msg + f->quantifier_offset) = 1;
	}
	*dst = m->msg + f->offset;
	return 0;
}

/* Reads the value of field f (index i) of the given wire type at
 * p[*off] into m. */
static int
fast_value(fast_msg *m, const ProtobufCFieldDescriptor *f, size_t i,
    unsigned wire, const uint8_t *p, size_t len, size_t *off,
    const com_limits *lim, com_arena *arena, unsigned depth)
{
	uint64_t v;
	char *dst;
	int rc;

	if (wire == 0) {
		if (fast_varint(p, len, off, 10, &v) != 0)
			return BELLOWS_EPROTO;
		if ((rc = fast_slot(m, f, i, lim, arena, &dst)) != 0)
			return rc;
		fast_store_varint(f->type, v, dst);
		return 0;
	}
	if (wire == 1) {
		if (len - *off < 8)
			return BELLOWS_EPROTO;
		if ((rc = fast_slot(m, f, i, lim, arena, &dst)) != 0)
			return rc;
		memcpy(dst, p + *off, 8);
		*off += 8;
		return 0;
	}
	if (fast_varint(p, len, off, 5, &v) != 0 || v > len - *off)
		return BELLOWS_EPROTO;
	/* A C string ends at its first NUL: refuse what would be silently
	 * cut there. */
	if (f->type == PROTOBUF_C_TYPE_STRING &&
	    memchr(p + *off, 0, (size_t)v) != NULL)
		return BELLOWS_EPROTO;
	if ((rc = fast_slot(m, f, i, lim, arena, &dst)) != 0)
		return rc;
	*off += (size_t)v;
	return fast_store_delimited(f, p + *off - v, (size_t)v, lim, arena,
	    depth, dst);
}

/* Reads one field, key and value, at p[*off] into m. */
static int
fast_field(fast_msg *m, const uint8_t *p, size_t len, size_t *off,
    const com_limits *lim, com_arena *arena, unsigned depth)
{
	const ProtobufCFieldDescriptor *f;
	uint64_t key;
	unsigned wire;
	size_t i;
	int want;

	/* A key of at most 5 bytes: field numbers up to 2^32 - 1, as
	 * protobuf-c reads them (protobuf's own stop at 2^29 - 1). */
	if (fast_varint(p, len, off, 5, &key) != 0 || (key >> 3) == 0)
		return BELLOWS_EPROTO;
	wire = key & 7;
	if ((f = wire_scan_field(m->desc, key >> 3)) == NULL)
		return fast_skip(p, len, off, wire) == 0 ? 0 : BELLOWS_EPROTO;
	if ((want = fast_wire(f->type)) < 0)
		return BELLOWS_EPROTO;
	i = (size_t)(f - m->desc->fields);
	if (f->label == PROTOBUF_C_LABEL_REPEATED && want != 2 && wire == 2)
		return fast_packed(m, f, i, p, len, off, lim, arena);
	if ((int)wire != want)
		return BELLOWS_EPROTO;
	return fast_value(m, f, i, wire, p, len, off, lim, arena, depth);
}

/* Reads one message of type desc from the len bytes at p into a struct
 * from arena, *ret; depth counts the messages it is nested in. */
static int
fast_message(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
    size_t len, const com_limits *lim, com_arena *arena, unsigned depth,
    void **ret)
{
	fast_msg m;
	size_t off = 0;
	int rc;

	if (depth > FAST_MAX_DEPTH || desc->n_fields > FAST_MAX_FIELDS)
		return BELLOWS_EPROTO;
	if ((m.msg = com_arena_alloc(arena, desc->sizeof_message)) == NULL)
		return com_arena_error(arena);
	desc->message_init((ProtobufCMessage *)(void *)m.msg);
	m.desc = desc;
	m.seen = 0;
	m.oneof = false;
	memset(m.cap, 0, desc->n_fields * sizeof(m.cap[0]));
	while (off < len)
		if ((rc = fast_field(&m, p, len, &off, lim, arena, depth)) != 0)
			return rc;
	*ret = m.msg;
	return 0;
}

int
wire_fast_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
    size_t len, const com_limits *lim, com_arena *arena, void **ret)
{
	return fast_message(desc, p, len, lim, arena, 0, ret);
}
