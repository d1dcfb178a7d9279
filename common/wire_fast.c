/* wire_fast - the wire reader: frames into protobuf-c's structs, and a
 * report's layers into com_layer_stats, see wire_fast.h.
 *
 * One walk over each message's bytes: every key, varint, length and wire
 * type is checked as it is read and the value stored at once, a
 * sub-message read by recursion where it stands. A repeated field's array
 * is allocated when its first entry comes (a packed array: all its
 * entries) and doubles when a further entry finds it full, so a frame as
 * bellows writes it allocates each array once, or log2(n) times for n
 * sub-messages. Everything comes from the frame's arena, but a report's
 * layers when the caller asks for them apart: each LayerStats is then read
 * by a walk of its own over a table made from the statistics table
 * (fast_layer_keys, a row per key), into the com_layer_stats the decoded
 * report keeps, with the same rules as the walk over a descriptor and the
 * checks wire_in.c makes of every other field, so that no protobuf-c
 * struct is built, initialised and copied for the layers (a Report is
 * almost all layers).
 */
#include "wire_fast.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "stat_table.h"
#include "wire_int.h"

#define FAST_MAX_FIELDS 32 /* more fields than any message has */
#define FAST_MAX_DEPTH  8  /* deeper nesting than any message has */

/* One unpack: what every level of the walk reads with. */
typedef struct fast_ctx {
	const com_limits *lim;    /* the frame's limits */
	com_arena *arena;         /* the protobuf-c structs go there */
	wire_fast_layers *layers; /* a Report's layers go there; NULL: into
				   * protobuf-c structs like any message */
} fast_ctx;

/* Reads a varint of at most max bytes at p[*off], advancing *off. A varint
 * is refused when it runs past len or max bytes, is not minimal (a last
 * byte of 0 after the first) or holds more than 64 bits. *off is at most
 * len, as everywhere in this file (every advance is checked against it). */
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
	/* Two bytes, the second not 0 (minimal): tags 16 to 2047, values
	 * up to 16383. */
	if (len - o > 1 && p[o + 1] < 0x80 && p[o + 1] != 0) {
		*ret = (uint64_t)(p[o] & 0x7f) | (uint64_t)p[o + 1] << 7;
		*off = o + 2;
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

static int fast_message(fast_ctx *ctx, const ProtobufCMessageDescriptor *desc,
    const uint8_t *p, size_t len, unsigned depth, void **ret);

/* Stores the length-delimited value v of vlen bytes as an element of
 * field f at dst: a string (walk 1 refused NULs), bytes or a message. */
static int
fast_store_delimited(fast_ctx *ctx, const ProtobufCFieldDescriptor *f,
    const uint8_t *v, size_t vlen, unsigned depth, void *dst)
{
	com_arena *arena = ctx->arena;

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
		int rc = fast_message(ctx, f->descriptor, v, vlen, depth + 1,
		    &m);

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
fast_room(fast_ctx *ctx, fast_msg *m, const ProtobufCFieldDescriptor *f,
    size_t i, uint64_t n, char **at)
{
	size_t *count = (size_t *)(m->msg + f->quantifier_offset);
	size_t size = fast_size(f->type);
	char *arr;

	memcpy(&arr, m->msg + f->offset, sizeof(arr));
	if (n > com_wire_scan_limit(m->desc, f, ctx->lim) - *count)
		return BELLOWS_EPROTO;
	if (*count + n > m->cap[i]) {
		size_t want = m->cap[i] * 2;
		char *grown;

		if (want < *count + n)
			want = *count + (size_t)n;
		if (want < 8 && f->type == PROTOBUF_C_TYPE_MESSAGE)
			want = 8;
		if ((grown = com_arena_alloc(ctx->arena, want * size)) == NULL)
			return com_arena_error(ctx->arena);
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
fast_packed(fast_ctx *ctx, fast_msg *m, const ProtobufCFieldDescriptor *f,
    size_t i, const uint8_t *p, size_t len, size_t *off)
{
	uint64_t v;
	int64_t n;
	char *dst;
	int rc;

	if (fast_varint(p, len, off, 5, &v) != 0 || v > len - *off ||
	    (n = fast_packed_count(f->type, p + *off, (size_t)v)) < 0)
		return BELLOWS_EPROTO;
	if (n > 0) {
		if ((rc = fast_room(ctx, m, f, i, (uint64_t)n, &dst)) != 0)
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
fast_slot(fast_ctx *ctx, fast_msg *m, const ProtobufCFieldDescriptor *f,
    size_t i, char **dst)
{
	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return fast_room(ctx, m, f, i, 1, dst);
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
fast_value(fast_ctx *ctx, fast_msg *m, const ProtobufCFieldDescriptor *f,
    size_t i, unsigned wire, const uint8_t *p, size_t len, size_t *off,
    unsigned depth)
{
	uint64_t v;
	char *dst;
	int rc;

	if (wire == 0) {
		if (fast_varint(p, len, off, 10, &v) != 0)
			return BELLOWS_EPROTO;
		if ((rc = fast_slot(ctx, m, f, i, &dst)) != 0)
			return rc;
		fast_store_varint(f->type, v, dst);
		return 0;
	}
	if (wire == 1) {
		if (len - *off < 8)
			return BELLOWS_EPROTO;
		if ((rc = fast_slot(ctx, m, f, i, &dst)) != 0)
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
	if ((rc = fast_slot(ctx, m, f, i, &dst)) != 0)
		return rc;
	*off += (size_t)v;
	return fast_store_delimited(ctx, f, p + *off - v, (size_t)v, depth,
	    dst);
}

/*
 * A report's layers, straight into com_layer_stats.
 */

/* How fast_layer_stats reads a LayerStats field, by key: the field's kind
 * when the key's wire type is the one the field takes. */
enum {
	FAST_L_NONE = 0, /* no field: skipped as unknown (fast_skip) */
	FAST_L_BAD,      /* tag 0, or a field's key with a wire type it
			  * never takes: refused */
	FAST_L_ARRAY,    /* repeated uint64, packed or one by one, absent
			  * or exactly len values */
	FAST_L_LAYER,    /* `layer`: uint32, below max_layers; this and
			  * the kinds below are the scalars */
	FAST_L_U32,      /* a varint, its low 32 bits kept (as protobuf-c) */
	FAST_L_U64,      /* a varint */
	FAST_L_F64,      /* a double, 8 bytes */
};

/* One key (tag << 3 | wire type) of LayerStats (fast_layer_keys). */
typedef struct fast_layer_field {
	uint16_t offset; /* in com_layer_stats */
	uint8_t kind;    /* FAST_L_* */
	uint8_t check;   /* bellows_stat_check, for a scalar */
	uint8_t bit;     /* of the `seen` mask (a scalar) or the array's
			  * index in BELLOWS_LAYER_ARRAYS */
	uint16_t len;    /* FAST_L_ARRAY: the values it holds */
} fast_layer_field;

/* Keys below this index fast_layer_keys: every tag up to
 * BELLOWS_STAT_TAG_MAX, so a statistic's key, one or two bytes long, is
 * found in one load. A larger key is an unknown field. */
#define FAST_L_KEYS ((BELLOWS_STAT_TAG_MAX + 1) * 8)

/* The wire types each kind is read from: a scalar's type's own, an
 * array's packed (2) or one value per key (0). */
#define FAST_L_WIRE_OK_BAD(w)   0
#define FAST_L_WIRE_OK_LAYER(w) ((w) == 0)
#define FAST_L_WIRE_OK_U32(w)   ((w) == 0)
#define FAST_L_WIRE_OK_U64(w)   ((w) == 0)
#define FAST_L_WIRE_OK_F64(w)   ((w) == 1)
#define FAST_L_WIRE_OK_ARRAY(w) ((w) == 0 || (w) == 2)

/* The eight keys of tag `tag`, a field of kind k (the rest of the row
 * in ...): the kind under the wire types it is read from, FAST_L_BAD
 * under the others. */
#define FAST_L_KEY(tag, w, k, ...)                                             \
	[(tag)*8 + (w)] = { .kind = FAST_L_WIRE_OK_##k(w) ? FAST_L_##k         \
							  : FAST_L_BAD,        \
		__VA_ARGS__ },
#define FAST_L_TAG(tag, k, ...)                                                \
	FAST_L_KEY(tag, 0, k, __VA_ARGS__)                                     \
	FAST_L_KEY(tag, 1, k, __VA_ARGS__)                                     \
	FAST_L_KEY(tag, 2, k, __VA_ARGS__)                                     \
	FAST_L_KEY(tag, 3, k, __VA_ARGS__)                                     \
	FAST_L_KEY(tag, 4, k, __VA_ARGS__)                                     \
	FAST_L_KEY(tag, 5, k, __VA_ARGS__)                                     \
	FAST_L_KEY(tag, 6, k, __VA_ARGS__)                                     \
	FAST_L_KEY(tag, 7, k, __VA_ARGS__)
#define FAST_L_STAT(name, type, tag, chk, ...)                                 \
	FAST_L_TAG(tag, type, .offset = offsetof(com_layer_stats, name),       \
	    .check = BELLOWS_STAT_CHECK_##chk, .bit = 1 + COM_LSTAT_##name)
#define FAST_L_ARRAY_ROW(name, len_, tag, ...)                                 \
	FAST_L_TAG(tag, ARRAY, .offset = offsetof(com_layer_stats, name),      \
	    .bit = COM_LARRAY_##name, .len = (len_))

/* LayerStats by key: tag 0 refused, tag 1 the layer's index (bellows/
 * stats.h's tag rules), the statistics table's rows; every other key up
 * to BELLOWS_STAT_TAG_MAX an unknown field (FAST_L_NONE, zero). stat_
 * table.c refuses at compile time a tag out of range or taken twice,
 * tests/common/test_stat_table.c holds the tags to the .proto. */
/* clang-format off */
static const fast_layer_field fast_layer_keys[FAST_L_KEYS] = {
	FAST_L_TAG(0, BAD, .check = BELLOWS_STAT_CHECK_ANY)
	FAST_L_TAG(1, LAYER, .offset = offsetof(com_layer_stats, layer),
	    .check = BELLOWS_STAT_CHECK_ANY)
	BELLOWS_LAYER_STATS(FAST_L_STAT) BELLOWS_LAYER_ARRAYS(FAST_L_ARRAY_ROW)
};
/* clang-format on */

/* The row of every key past fast_layer_keys: an unknown field. */
static const fast_layer_field fast_layer_unknown = { .kind = FAST_L_NONE };

/* com_stat_check_bound by check, for the doubles' check in the walk. */
static const uint64_t fast_layer_bounds[] = {
	[BELLOWS_STAT_CHECK_ANY] = COM_STAT_CHECK_BOUND_ANY,
	[BELLOWS_STAT_CHECK_MAG] = COM_STAT_CHECK_BOUND_MAG,
	[BELLOWS_STAT_CHECK_FRAC] = COM_STAT_CHECK_BOUND_FRAC,
};

/* One bit per scalar field in fast_layer_stats's `seen`, `layer` first. */
_Static_assert(1 + COM_N_LSTATS <= 64, "LayerStats: widen the seen mask");
_Static_assert(COM_N_LARRAYS <= 8, "LayerStats: more arrays than counted");
_Static_assert(FAST_L_KEYS <= 0x4000, "LayerStats: a key past two bytes");

/* Room for n more values of array field e in *s, of which *count are
 * there; *at is where they go. More values than the field's limit
 * (com_wire_scan_limit's for LayerStats: max_layers) are refused as the
 * walk over a descriptor refuses them, and more than the array holds
 * because they could never make exactly len. The array is allocated at
 * its first value, whole. */
static int
fast_layer_room(const fast_layer_field *e, uint64_t n, const com_limits *lim,
    com_layer_stats *s, uint32_t *count, uint64_t **at)
{
	uint64_t *arr;

	if (n > lim->max_layers - (uint64_t)*count || n > e->len - *count)
		return BELLOWS_EPROTO;
	memcpy(&arr, (char *)s + e->offset, sizeof(arr));
	if (arr == NULL) {
		if ((arr = com_wire_calloc(e->len, sizeof(*arr))) == NULL)
			return BELLOWS_ENOMEM;
		memcpy((char *)s + e->offset, &arr, sizeof(arr));
	}
	*at = arr + *count;
	*count += (uint32_t)n;
	return 0;
}

/* Reads the value of array field e, of wire type wire, at p[*off] into
 * *s: one varint, or a packed run of them. */
static int
fast_layer_array(const fast_layer_field *e, unsigned wire, const uint8_t *p,
    size_t len, size_t *off, const com_limits *lim, com_layer_stats *s,
    uint32_t *count)
{
	uint64_t v, *at;
	int64_t n;
	int rc;

	if (wire == 0) {
		if (fast_varint(p, len, off, 10, &v) != 0)
			return BELLOWS_EPROTO;
		if ((rc = fast_layer_room(e, 1, lim, s, count, &at)) != 0)
			return rc;
		*at = v;
		return 0;
	}
	if (wire != 2 || fast_varint(p, len, off, 5, &v) != 0 ||
	    v > len - *off ||
	    (n = fast_packed_count(PROTOBUF_C_TYPE_UINT64, p + *off,
		 (size_t)v)) < 0)
		return BELLOWS_EPROTO;
	if (n > 0) {
		if ((rc = fast_layer_room(e, (uint64_t)n, lim, s, count,
			 &at)) != 0)
			return rc;
		fast_store_packed(PROTOBUF_C_TYPE_UINT64, p + *off, (size_t)v,
		    (char *)at);
	}
	*off += (size_t)v;
	return 0;
}

/* Reads the field of key `key` (row e) at p[*off] that is not a scalar
 * statistic into *s: an array (count: the arrays' values so far), an
 * unknown field, skipped, or a refusal (FAST_L_BAD). Out of line: the
 * scalars are the walk's path. */
static int
fast_layer_other(const fast_layer_field *e, uint64_t key, const uint8_t *p,
    size_t len, size_t *off, const com_limits *lim, com_layer_stats *s,
    uint32_t *count)
{
	unsigned wire = key & 7;

	if (e->kind == FAST_L_ARRAY)
		return fast_layer_array(e, wire, p, len, off, lim, s,
		    &count[e->bit]);
	if (e->kind == FAST_L_BAD)
		return BELLOWS_EPROTO;
	return fast_skip(p, len, off, wire) == 0 ? 0 : BELLOWS_EPROTO;
}

/* Stores the varint v of integer field e into *s: its low 32 bits for a
 * uint32 (the layer's index below max_layers), if its check passes. */
static inline __attribute__((always_inline)) int
fast_layer_varint(const fast_layer_field *e, uint64_t v, const com_limits *lim,
    com_layer_stats *s)
{
	char *dst = (char *)s + e->offset;

	if (e->kind == FAST_L_U64) {
		if (e->check != BELLOWS_STAT_CHECK_ANY &&
		    !com_stat_check_passes(e->check, (double)v))
			return BELLOWS_EPROTO;
		memcpy(dst, &v, 8);
	} else {
		uint32_t x = (uint32_t)v;

		if ((e->kind == FAST_L_LAYER && x >= lim->max_layers) ||
		    (e->check != BELLOWS_STAT_CHECK_ANY &&
			!com_stat_check_passes(e->check, (double)x)))
			return BELLOWS_EPROTO;
		memcpy(dst, &x, 4);
	}
	return 0;
}

/* Frees the arrays of *s and clears their pointers. */
static void
fast_layer_arrays_free(com_layer_stats *s)
{
	for (size_t a = 0; a < COM_N_LARRAYS; a++) {
		char *at = (char *)s + com_layer_array_table[a].offset;
		uint64_t *arr;

		memcpy(&arr, at, sizeof(arr));
		free(arr);
		arr = NULL;
		memcpy(at, &arr, sizeof(arr));
	}
}

/* The walk reads every scalar in the loop, `off` in a register (the
 * other fields' functions take a copy): the key's row found in one load
 * (fast_layer_keys: the key's wire type already held to the field's), a
 * repeat caught by the `seen` mask, a double's check a compare of its
 * bits with its check's bound (com_stat_check_bound). */
int
wire_fast_layer_stats(const uint8_t *p, size_t len, const com_limits *lim,
    com_layer_stats *ret_stats)
{
	uint32_t count[COM_N_LARRAYS > 0 ? COM_N_LARRAYS : 1] = { 0 };
	uint64_t seen = 0;
	size_t off = 0;
	int rc = 0;

	while (off < len) {
		const fast_layer_field *e;
		uint64_t key, bit, v;

		/* Keys as fast_field reads them (tag 0 is FAST_L_BAD). */
		if (fast_varint(p, len, &off, 5, &key) != 0) {
			rc = BELLOWS_EPROTO;
			break;
		}
		e = key < FAST_L_KEYS ? &fast_layer_keys[key]
				      : &fast_layer_unknown;
		if (e->kind < FAST_L_LAYER) {
			size_t at = off;

			rc = fast_layer_other(e, key, p, len, &at, lim,
			    ret_stats, count);
			off = at;
			if (rc != 0)
				break;
			continue;
		}
		/* A scalar, once. */
		bit = (uint64_t)1 << e->bit;
		if ((seen & bit) != 0) {
			rc = BELLOWS_EPROTO;
			break;
		}
		seen |= bit;
		if (e->kind == FAST_L_F64) {
			if (len - off < 8) {
				rc = BELLOWS_EPROTO;
				break;
			}
			memcpy(&v, p + off, 8);
			if (v > fast_layer_bounds[e->check] &&
			    v != COM_STAT_NEG_ZERO_BITS) {
				rc = BELLOWS_EPROTO;
				break;
			}
			memcpy((char *)ret_stats + e->offset, &v, 8);
			off += 8;
			continue;
		}
		if (fast_varint(p, len, &off, 10, &v) != 0 ||
		    (rc = fast_layer_varint(e, v, lim, ret_stats)) != 0) {
			rc = BELLOWS_EPROTO;
			break;
		}
	}
	/* An array is absent or exactly its length (bellows/stats.h). */
	for (size_t a = 0; a < COM_N_LARRAYS && rc == 0; a++)
		if (count[a] != 0 && count[a] != com_layer_array_table[a].len)
			rc = BELLOWS_EPROTO;
	if (rc != 0)
		fast_layer_arrays_free(ret_stats);
	return rc;
}

/* Entries of field tag written length-delimited among the fields at
 * p[off..len): how many layers a Report's walk will find from here. The
 * count reads keys as fast_field does and skips every value as
 * fast_skip does, which accepts whatever the walk accepts, so it stops no
 * sooner than the walk: the count is never short of what the walk stores
 * before it ends or refuses the frame. */
static size_t
fast_layer_count(const uint8_t *p, size_t len, size_t off, uint64_t tag)
{
	size_t n = 0;

	while (off < len) {
		uint64_t key, v;
		size_t at;

		if (fast_varint(p, len, &off, 5, &key) != 0)
			break;
		n += (key >> 3) == tag && (key & 7) == 2;
		/* A length as the walk reads a layer's, inline; any other
		 * form as fast_skip reads it (the same length when both
		 * read one). */
		at = off;
		if ((key & 7) == 2 && fast_varint(p, len, &at, 5, &v) == 0 &&
		    v <= len - at)
			off = at + (size_t)v;
		else if (fast_skip(p, len, &off, key & 7) != 0)
			break;
	}
	return n;
}

/* Room for one more layer in ctx->layers, within the field's limit. The
 * first layer sizes the array from the count of those still to come
 * (fast_layer_count), so a report takes one allocation; should a layer
 * find it full all the same, it doubles. */
static int
fast_layer_room_entry(fast_ctx *ctx, const ProtobufCMessageDescriptor *desc,
    const ProtobufCFieldDescriptor *f, const uint8_t *p, size_t len,
    size_t next)
{
	wire_fast_layers *l = ctx->layers;
	size_t want;
	com_layer_stats *grown;

	if (l->n < l->cap)
		return 0; /* cap is within the limit */
	if (l->cap == 0)
		l->limit = com_wire_scan_limit(desc, f, ctx->lim);
	if (l->n >= l->limit)
		return BELLOWS_EPROTO;
	if (l->cap == 0)
		want = 1 + fast_layer_count(p, len, next, f->id);
	else
		want = l->cap * 2;
	if (want > l->limit)
		want = (size_t)l->limit;
	/* Zeroed whole, by one memset: zeroing each layer as it is read
	 * is inlined as a `rep stos` per layer, whose start-up made it 15 %
	 * of bellowsd's loop under bench/ingest (the memset was 4 %). */
	if ((grown = com_wire_calloc(want, sizeof(*grown))) == NULL)
		return BELLOWS_ENOMEM;
	if (l->n > 0)
		memcpy(grown, l->at, l->n * sizeof(*grown));
	free(l->at);
	l->at = grown;
	l->cap = want;
	return 0;
}

/* Reads one entry of the layers field f of a Report (desc), wire type 2,
 * at p[*off] into ctx->layers, its length read and checked as
 * fast_value reads any sub-message's. */
static int
fast_layer_entry(fast_ctx *ctx, const ProtobufCMessageDescriptor *desc,
    const ProtobufCFieldDescriptor *f, const uint8_t *p, size_t len,
    size_t *off)
{
	wire_fast_layers *l = ctx->layers;
	uint64_t v;
	int rc;

	if (fast_varint(p, len, off, 5, &v) != 0 || v > len - *off)
		return BELLOWS_EPROTO;
	if ((rc = fast_layer_room_entry(ctx, desc, f, p, len,
		 *off + (size_t)v)) != 0)
		return rc;
	if ((rc = wire_fast_layer_stats(p + *off, (size_t)v, ctx->lim,
		 &l->at[l->n])) != 0)
		return rc;
	l->n++;
	*off += (size_t)v;
	return 0;
}

void
wire_fast_layers_free(wire_fast_layers *layers)
{
	for (size_t i = 0; i < layers->n; i++)
		fast_layer_arrays_free(&layers->at[i]);
	free(layers->at);
	layers->at = NULL;
	layers->n = 0;
	layers->cap = 0;
}

/* Reads one field, key and value, at p[*off] into m. */
static int
fast_field(fast_ctx *ctx, fast_msg *m, const uint8_t *p, size_t len,
    size_t *off, unsigned depth)
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
		return fast_packed(ctx, m, f, i, p, len, off);
	if ((int)wire != want)
		return BELLOWS_EPROTO;
	if (ctx->layers != NULL &&
	    f->descriptor == &bellows__layer_stats__descriptor)
		return fast_layer_entry(ctx, m->desc, f, p, len, off);
	return fast_value(ctx, m, f, i, wire, p, len, off, depth);
}

/* Reads one message of type desc from the len bytes at p into a struct
 * from arena, *ret; depth counts the messages it is nested in. */
static int
fast_message(fast_ctx *ctx, const ProtobufCMessageDescriptor *desc,
    const uint8_t *p, size_t len, unsigned depth, void **ret)
{
	fast_msg m;
	size_t off = 0;
	int rc;

	if (depth > FAST_MAX_DEPTH || desc->n_fields > FAST_MAX_FIELDS)
		return BELLOWS_EPROTO;
	if ((m.msg = com_arena_alloc(ctx->arena, desc->sizeof_message)) == NULL)
		return com_arena_error(ctx->arena);
	desc->message_init((ProtobufCMessage *)(void *)m.msg);
	m.desc = desc;
	m.seen = 0;
	m.oneof = false;
	memset(m.cap, 0, desc->n_fields * sizeof(m.cap[0]));
	while (off < len)
		if ((rc = fast_field(ctx, &m, p, len, &off, depth)) != 0)
			return rc;
	*ret = m.msg;
	return 0;
}

int
wire_fast_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
    size_t len, const com_limits *lim, com_arena *arena,
    wire_fast_layers *layers, void **ret)
{
	fast_ctx ctx = { .lim = lim, .arena = arena, .layers = layers };

	return fast_message(&ctx, desc, p, len, 0, ret);
}
