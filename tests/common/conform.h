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

/* Checks one input and returns NULL, or a static text naming the finding:
 *   - what the reader accepts, protobuf-c accepts, to the same values;
 *   - what protobuf-c accepts, written back by protobuf-c (the canonical
 *     form, unknown fields kept), the reader accepts, to the same values;
 *   - what protobuf-c accepts and the reader refuses is not canonical:
 *     protobuf-c does not write it back byte for byte;
 *   - com_wire_decode gives the same code and message with a fresh arena
 *     as with one reused across inputs (bellowsd's loop).
 * Never fails otherwise; aborts only when memory runs out. */
const char *conform_check(const uint8_t *data, size_t size);

#endif /* TEST_CONFORM_H */
