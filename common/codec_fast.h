/* codec_fast - one-pass unpacking of canonical frames into an arena.
 *
 * For codec_in.c only (it sees protobuf-c's types). codec_fast_unpack builds
 * the same protobuf-c structs bellows__envelope__unpack would, straight
 * from the wire into an arena, and checks as it goes what codec_in.c's scan
 * checks (repeated fields within their limits, no NUL inside a string).
 * It only takes frames as bellows' encoder writes them: every field known,
 * a non-repeated field at most once, repeated scalars packed, at most one
 * member of a oneof. Anything else, malformed or merely unusual, makes it
 * give up (NULL) without an error: codec_in.c then decodes the frame the
 * general way, scan and protobuf-c, which decides what the frame is. So
 * for every frame the result is protobuf-c's.
 */
#ifndef COM_CODEC_FAST_H
#define COM_CODEC_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "common/bellows.pb-c.h"
#include "codec.h"
#include "codec_arena.h"

/* The limit on the entries of repeated field f of desc (codec_in.c). */
uint64_t com_codec_scan_limit(const ProtobufCMessageDescriptor *desc,
    const ProtobufCFieldDescriptor *f, const com_limits *lim);

/* The field of desc with the given tag, or NULL: what
 * protobuf_c_message_descriptor_get_field answers, by a walk over the
 * descriptor's few ranges of consecutive tags (ranges[i] starts at tag
 * start_value with field orig_index; the last entry holds n_fields). */
static inline const ProtobufCFieldDescriptor *
codec_scan_field(const ProtobufCMessageDescriptor *desc, uint64_t tag)
{
	const ProtobufCIntRange *r = desc->field_ranges;

	for (unsigned i = 0; i < desc->n_field_ranges; i++) {
		uint64_t start = (uint64_t)r[i].start_value;
		uint64_t n = (uint64_t)(r[i + 1].orig_index - r[i].orig_index);

		if (tag >= start && tag - start < n)
			return &desc->fields[r[i].orig_index + (tag - start)];
	}
	return NULL;
}

/* A message of type desc unpacked from the len bytes at p into arena, or
 * NULL when the frame is not one this path takes (see above). Everything
 * returned lives in the arena: nothing is to be freed. */
void *codec_fast_unpack(const ProtobufCMessageDescriptor *desc,
    const uint8_t *p, size_t len, const com_limits *lim, com_arena *arena);

#endif /* COM_CODEC_FAST_H */
