/* fuzz_wire - libFuzzer target: the decoder conforms to protobuf-c.
 *
 * Every input goes through conform_check (conform.h): the decoder's reader
 * against protobuf-c's unpack, and the arena reused against a fresh one.
 * Any finding aborts; so do crashes, leaks and sanitizer reports. Built
 * with -Dfuzz=enabled and clang, the decoder instrumented with it
 * (docs/building.md); the `fuzz` suite runs it for a bounded time and
 * test_conform replays its committed corpus in every build.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "conform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = conform_check(data, size);

	if (why != NULL) {
		fprintf(stderr, "fuzz_wire: %s (%zu bytes)\n", why, size);
		abort();
	}
	return 0;
}
