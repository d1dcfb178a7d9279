/* wire_fast - the wire reader: the one place bytes become structs.
 *
 * For wire_in.c only (it sees protobuf-c's types). wire_fast_unpack
 * builds the protobuf-c structs of a frame straight from the wire into an
 * arena, in two walks over each message, checking as it goes the
 * acceptance rules of docs/protocol.md ("What a frame may be"): it accepts
 * only what protobuf-c's unpack accepts and decodes it to the same values,
 * and refuses, besides, what bellows' encoder never writes (a varint that
 * is not minimal or holds more than 64 bits, a non-repeated field written
 * twice, two members of a oneof, a NUL inside a string, a repeated field
 * past its limit). Repeated scalars may come packed or one by one.
 * Unknown fields are skipped. tests/common/conform.c holds it to that
 * against protobuf-c's unpack.
 *
 * A Report's layers may be read apart, straight into the com_layer_stats
 * of the decoded report (wire_fast_layers): by the same rules, with the
 * checks of a statistic's value (its check column, `layer` below
 * max_layers, an array absent or whole) made as each is read, and no
 * protobuf-c struct built for them. tests/common/conform.c holds that
 * reader to protobuf-c's unpack followed by those checks.
 */
#ifndef COM_WIRE_FAST_H
#define COM_WIRE_FAST_H

#include <stddef.h>
#include <stdint.h>

#include "common/bellows.pb-c.h"
#include "wire.h"
#include "wire_arena.h"

/* The limit on the entries of repeated field f of desc (wire_in.c). */
uint64_t com_wire_scan_limit(const ProtobufCMessageDescriptor *desc,
    const ProtobufCFieldDescriptor *f, const com_limits *lim);

/* The field of desc with the given tag, or NULL: what
 * protobuf_c_message_descriptor_get_field answers, by a walk over the
 * descriptor's few ranges of consecutive tags (ranges[i] starts at tag
 * start_value with field orig_index; the last entry holds n_fields).
 * The fields are in tag order and most messages number them from 1
 * without gaps, so field tag - 1 is looked at first: one compare instead
 * of the walk. */
static inline const ProtobufCFieldDescriptor *
wire_scan_field(const ProtobufCMessageDescriptor *desc, uint64_t tag)
{
	const ProtobufCIntRange *r = desc->field_ranges;

	if (tag - 1 < desc->n_fields && desc->fields[tag - 1].id == tag)
		return &desc->fields[tag - 1];
	for (unsigned i = 0; i < desc->n_field_ranges; i++) {
		uint64_t start = (uint64_t)r[i].start_value;
		uint64_t n = (uint64_t)(r[i + 1].orig_index - r[i].orig_index);

		if (tag >= start && tag - start < n)
			return &desc->fields[r[i].orig_index + (tag - start)];
	}
	return NULL;
}

/* The layers of a Report, read apart from its struct (wire_fast_unpack).
 * Zero it before the unpack; the caller owns what it holds afterwards,
 * success or not, and either takes the array (at, with n entries, into a
 * com_report, which then owns their arrays) and zeroes it, or frees it
 * with wire_fast_layers_free. */
typedef struct wire_fast_layers {
	com_layer_stats *at; /* n entries read of cap allocated (heap, from
			      * com_wire_calloc); NULL before the first */
	size_t n;            /* entries read, each whole and checked */
	size_t cap;          /* entries allocated, zeroed beyond n; at most
			      * limit */
	uint64_t limit;      /* the field's limit (com_wire_scan_limit),
			      * set with the first entry */
} wire_fast_layers;

/* Unpacks a message of type desc from the len bytes at p into arena and
 * sets *ret to it. When layers is not NULL, the layers of a Report
 * (anywhere in the frame) go there instead of into the Report's struct,
 * whose n_layers stays 0. Returns BELLOWS_EPROTO for a frame the rules
 * refuse (with layers, also for a layer whose values their checks
 * refuse), BELLOWS_EMSGSIZE when it would take more than the arena's
 * budget, BELLOWS_ENOMEM; *ret untouched on failure, *layers holding
 * what was read (see there). Everything returned in *ret lives in the
 * arena: nothing of it is to be freed. */
int wire_fast_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
    size_t len, const com_limits *lim, com_arena *arena,
    wire_fast_layers *layers, void **ret);

/* Reads one LayerStats from the len bytes at p into *ret_stats, which
 * must be zeroed: by the rules of wire_fast_unpack, every value checked
 * as the statistics table's check column says, `layer` below
 * lim->max_layers, an array statistic absent or exactly its length (on
 * the heap, owned by *ret_stats: com_msg_fini frees it in a report); a
 * field not written stays 0. Returns BELLOWS_EPROTO for bytes the rules
 * or the checks refuse, BELLOWS_ENOMEM; on failure *ret_stats holds no
 * array, its other fields are unspecified. */
int wire_fast_layer_stats(const uint8_t *p, size_t len, const com_limits *lim,
    com_layer_stats *ret_stats);

/* Frees every entry's arrays and the entries of *layers, and zeroes it.
 * Never fails. */
void wire_fast_layers_free(wire_fast_layers *layers);

#endif /* COM_WIRE_FAST_H */
