/* codec_fast - one-pass unpacking of canonical frames, see codec_fast.h.
 *
 * Two walks over each message's own bytes: the first counts the entries
 * of every field (and gives up on anything this path does not take), the
 * second, with the repeated fields' arrays sized, stores the values and
 * recurses into sub-messages. The nested messages' bytes are read once by
 * each walk of their parent, as protobuf-c does.
 */
#include "codec_fast.h"

#include <stdbool.h>
#include <string.h>

#define FAST_MAX_FIELDS 32 /* more fields than any message has */
#define FAST_MAX_DEPTH  8  /* deeper nesting than any message has */

static int
fast_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *ret)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64 && *off < len; shift += 7) {
		uint8_t b = p[(*off)++];

		v |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0) {
			*ret = v;
			return 0;
		}
	}
	return -1;
}

/* The wire type a scalar of type t is written with, -1: not taken. */
static int
fast_wire(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_INT64:
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
	default: /* zigzag, fixed and float types: not in the fast path */
		return -1;
	}
}

/* Bytes of one element of type t in a struct. */
static size_t
fast_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return sizeof(void *);
	}
}

/* Stores the varint v as a field of type t at dst. */
static void
fast_store_varint(ProtobufCType t, uint64_t v, void *dst)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_ENUM: {
		int32_t x = (int32_t)(uint32_t)v;

		memcpy(dst, &x, 4);
		break;
	}
	case PROTOBUF_C_TYPE_UINT32: {
		uint32_t x = (uint32_t)v;

		memcpy(dst, &x, 4);
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

/* Stores the length-delimited value v of vlen bytes as an element of
 * field f at dst; 0, or -1 to give up. */
static int fast_store_delimited(const ProtobufCFieldDescriptor *f,
    const uint8_t *v, size_t vlen, const com_limits *lim, com_arena *arena,
    unsigned depth, void *dst);

static void *fast_message(const ProtobufCMessageDescriptor *desc,
    const uint8_t *p, size_t len, const com_limits *lim, com_arena *arena,
    unsigned depth);

static int
fast_store_delimited(const ProtobufCFieldDescriptor *f, const uint8_t *v,
    size_t vlen, const com_limits *lim, com_arena *arena, unsigned depth,
    void *dst)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		char *s;

		if (memchr(v, 0, vlen) != NULL ||
		    (s = com_arena_alloc(arena, vlen + 1)) == NULL)
			return -1;
		memcpy(s, v, vlen);
		s[vlen] = '\0';
		memcpy(dst, &s, sizeof(s));
		return 0;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData b = { .len = vlen, .data = NULL };

		if (vlen > 0) {
			if ((b.data = com_arena_alloc(arena, vlen)) == NULL)
				return -1;
			memcpy(b.data, v, vlen);
		}
		memcpy(dst, &b, sizeof(b));
		return 0;
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		void *m = fast_message(f->descriptor, v, vlen, lim, arena,
		    depth + 1);

		if (m == NULL)
			return -1;
		memcpy(dst, &m, sizeof(m));
		return 0;
	}
	default:
		return -1;
	}
}

/* Entries of a packed array of type t in vlen bytes, or -1. */
static int64_t
fast_packed_count(ProtobufCType t, const uint8_t *v, size_t vlen)
{
	int64_t n = 0;
	unsigned run = 0;

	if (t == PROTOBUF_C_TYPE_DOUBLE)
		return vlen % 8 == 0 ? (int64_t)(vlen / 8) : -1;
	for (size_t i = 0; i < vlen; i++) {
		if (++run > 10)
			return -1; /* a varint longer than 64 bits */
		if ((v[i] & 0x80) == 0) {
			n++;
			run = 0;
		}
	}
	if (run != 0)
		return -1;
	return n;
}

static void *
fast_message(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
    size_t len, const com_limits *lim, com_arena *arena, unsigned depth)
{
	uint64_t count[FAST_MAX_FIELDS] = { 0 };
	size_t filled[FAST_MAX_FIELDS] = { 0 };
	uint32_t packed = 0; /* bit i: field i's packed array was seen */
	bool oneof = false;
	size_t off = 0;
	void *msg;

	if (depth > FAST_MAX_DEPTH || desc->n_fields > FAST_MAX_FIELDS)
		return NULL;
	/* Walk 1: count, and give up on what this path does not take. */
	while (off < len) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, v = 0;
		size_t i, start;
		unsigned wire;
		int want;

		if (fast_varint(p, len, &off, &key) != 0)
			return NULL;
		wire = key & 7;
		if ((key >> 3) > 0x1fffffff ||
		    (f = codec_scan_field(desc, key >> 3)) == NULL ||
		    (want = fast_wire(f->type)) < 0)
			return NULL;
		i = (size_t)(f - desc->fields);
		if (f->label == PROTOBUF_C_LABEL_REPEATED && want != 2) {
			if (wire != 2 || (packed & (1u << i)) != 0)
				return NULL; /* unpacked, or packed twice */
			packed |= 1u << i;
		} else if ((int)wire != want) {
			return NULL;
		}
		if (wire == 0) {
			if (fast_varint(p, len, &off, &v) != 0)
				return NULL;
		} else if (wire == 1) {
			if (len - off < 8)
				return NULL;
			off += 8;
		} else {
			if (fast_varint(p, len, &off, &v) != 0 || v > len - off)
				return NULL;
			start = off;
			off += v;
			if (f->label == PROTOBUF_C_LABEL_REPEATED &&
			    want != 2) {
				int64_t n = fast_packed_count(f->type,
				    p + start, v);

				if (n < 0)
					return NULL;
				count[i] = (uint64_t)n;
				continue;
			}
		}
		if (f->label != PROTOBUF_C_LABEL_REPEATED) {
			if (count[i] > 0)
				return NULL; /* repeated scalar: merged */
			if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0) {
				if (oneof)
					return NULL;
				oneof = true;
			}
		}
		count[i]++;
	}
	if ((msg = com_arena_alloc(arena, desc->sizeof_message)) == NULL)
		return NULL;
	desc->message_init(msg);
	for (size_t i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[i];
		void *arr;

		if (f->label != PROTOBUF_C_LABEL_REPEATED || count[i] == 0)
			continue;
		if (count[i] > com_codec_scan_limit(desc, f, lim) ||
		    (arr = com_arena_alloc(arena,
			 (size_t)count[i] * fast_size(f->type))) == NULL)
			return NULL;
		*(size_t *)((char *)msg +
		    f->quantifier_offset) = (size_t)count[i];
		memcpy((char *)msg + f->offset, &arr, sizeof(arr));
	}
	/* Walk 2: store. Walk 1 checked every key, length and wire type. */
	off = 0;
	while (off < len) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key = 0, v = 0;
		size_t i;
		char *dst;

		(void)fast_varint(p, len, &off, &key);
		f = codec_scan_field(desc, key >> 3);
		i = (size_t)(f - desc->fields);
		dst = (char *)msg + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			void *arr;

			memcpy(&arr, dst, sizeof(arr));
			/* NULL: an empty packed array, nothing to store. */
			dst = arr != NULL
			    ? (char *)arr + filled[i] * fast_size(f->type)
			    : NULL;
		} else if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0) {
			*(uint32_t *)((char *)msg +
			    f->quantifier_offset) = f->id;
		} else if (f->quantifier_offset != 0) {
			*(protobuf_c_boolean *)((char *)msg +
			    f->quantifier_offset) = 1;
		}
		switch (key & 7) {
		case 0:
			(void)fast_varint(p, len, &off, &v);
			fast_store_varint(f->type, v, dst);
			break;
		case 1:
			memcpy(dst, p + off, 8);
			off += 8;
			break;
		default: {
			size_t end;

			(void)fast_varint(p, len, &off, &v);
			end = off + (size_t)v;
			if (f->label == PROTOBUF_C_LABEL_REPEATED &&
			    fast_wire(f->type) != 2) {
				if (v == 0) {
					/* empty: no array */
				} else if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
					memcpy(dst, p + off, (size_t)v);
				} else {
					size_t k = 0;

					while (off < end) {
						uint64_t x = 0;

						(void)fast_varint(p, end, &off,
						    &x);
						fast_store_varint(f->type, x,
						    (char *)dst +
							k++ *
							    fast_size(f->type));
					}
				}
				off = end;
				continue;
			}
			if (fast_store_delimited(f, p + off, (size_t)v, lim,
				arena, depth, dst) != 0)
				return NULL;
			off = end;
			break;
		}
		}
		filled[i]++;
	}
	return msg;
}

void *
codec_fast_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
    size_t len, const com_limits *lim, com_arena *arena)
{
	return fast_message(desc, p, len, lim, arena, 0);
}
