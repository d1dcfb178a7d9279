/* fuzz_codec - libFuzzer target: the decoder on arbitrary frames.
 *
 * Every input is decoded with com_codec_decode and with
 * com_codec_decode_arena (one arena reused across inputs, as bellowsd's
 * loop does); the two must return the same code and, when they decode,
 * messages that encode to the same bytes. Any disagreement, crash, leak
 * or sanitizer report is a finding. Built with -Dfuzz=enabled and clang
 * (docs/building.md); the `fuzz` suite runs it for a bounded time.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/codec.h"
#include "common/codec_arena.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Encodes m, or NULL when it cannot be (an EVERSION stub). */
static uint8_t *
fuzz_encode(const com_msg *m, size_t *len)
{
	uint8_t *buf = NULL;

	*len = 0;
	if (com_codec_encode(m, &buf, len) != 0)
		return NULL;
	return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static com_arena *arena;
	com_limits lim;
	com_msg a, b;
	int ra, rb;

	if (arena == NULL && com_arena_new(16384, &arena) != 0)
		abort();
	com_limits_default(&lim);
	lim.max_msg_bytes = 1 << 20;
	ra = com_codec_decode(data, size, &lim, &a);
	rb = com_codec_decode_arena(data, size, &lim, arena, &b);
	if (ra != rb)
		abort();
	if (ra == 0) {
		size_t la, lb;
		uint8_t *ea = fuzz_encode(&a, &la), *eb = fuzz_encode(&b, &lb);

		if ((ea == NULL) != (eb == NULL) || la != lb ||
		    (ea != NULL && memcmp(ea, eb, la) != 0))
			abort();
		free(ea);
		free(eb);
	}
	if (ra == 0 || ra == BELLOWS_EVERSION) {
		com_msg_fini(&a);
		com_msg_fini(&b);
	}
	return 0;
}
