/* conform - the decoder held to protobuf-c's unpack, one frame at a time.
 *
 * Shared by the libFuzzer target (fuzz_codec.c) and the replay of the
 * committed corpus (test_conform.c). protobuf-c stays the reference for
 * what a frame means; bellows decodes with its own reader
 * (common/wire_fast.c), whose acceptance is protobuf-c's or stricter
 * (docs/protocol.md).
 */
#ifndef TEST_CONFORM_H
#define TEST_CONFORM_H

#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

/* Checks one input and returns NULL, or a static text naming the finding
 * (the first of them):
 *   - what the reader accepts, protobuf-c accepts, to the same values;
 *   - what protobuf-c accepts, written back by protobuf-c (the canonical
 *     form, unknown fields kept), the reader accepts, to the same values;
 *   - what protobuf-c accepts and the reader refuses is not canonical:
 *     protobuf-c does not write it back byte for byte;
 *   - com_wire_decode gives the same code and message with a fresh arena
 *     as with one reused across inputs (bellowsd's loop);
 *   - conform_layer_check holds, under limits that refuse nothing and
 *     under the defaults, for the input read as one LayerStats and for
 *     every LayerStats of a Report in it;
 *   - a report com_wire_decode accepts has, layer for layer, the
 *     statistics protobuf-c's unpack gives, which the table's checks
 *     pass.
 * Never fails otherwise; aborts only when memory runs out. */
const char *conform_check(const uint8_t *data, size_t size);

/* Checks the layer reader (wire_fast_layer_stats), which decodes a
 * report's layers straight into com_layer_stats, on one LayerStats's
 * bytes under lim, against protobuf-c's unpack followed by the checks of
 * the statistics table (`layer` below max_layers, each value its check
 * column, an array absent or whole); returns NULL or the finding:
 *   - what the reader accepts, protobuf-c accepts, the checks pass and
 *     the statistics are the same, bit for bit;
 *   - what the reader refuses, protobuf-c refuses, the checks refuse, or
 *     protobuf-c does not write back byte for byte (the reader's
 *     stricter rules, docs/protocol.md);
 *   - protobuf-c's writing of what it accepts, the reader reads to the
 *     statistics protobuf-c reads from that writing (which differ from
 *     the input's where it said -0.0: protobuf-c writes a double of -0.0
 *     as 0.0, not at all), or refuses when the checks do.
 * Never fails otherwise; aborts only when memory runs out. */
const char *conform_layer_check(const uint8_t *data, size_t size,
    const com_limits *lim);

#endif /* TEST_CONFORM_H */
