/* codec_check - what the codec tests check of every message: include
 * after <cmocka.h> and <bellows/codec.h>. */
#ifndef TESTS_KERNELS_CODEC_CHECK_H
#define TESTS_KERNELS_CODEC_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A message `msg` of `len` bytes for n values is refused (EPROTO) cut
 * anywhere short, each cut in a buffer of exactly that size (ASan sees a
 * read beyond it), and with a trailing byte. */
static void
assert_cut_messages_refused(const uint8_t *msg, size_t len, float *out,
    size_t n)
{
	uint8_t *p;

	for (size_t cut = 0; cut < len; cut++) {
		p = malloc(cut > 0 ? cut : 1);
		assert_non_null(p);
		memcpy(p, msg, cut);
		assert_int_equal(bellows_codec_decode(p, cut, out, n, 0),
		    BELLOWS_EPROTO);
		free(p);
	}
	p = malloc(len + 1);
	assert_non_null(p);
	memcpy(p, msg, len);
	p[len] = 0;
	assert_int_equal(bellows_codec_decode(p, len + 1, out, n, 0),
	    BELLOWS_EPROTO);
	free(p);
}

#endif /* TESTS_KERNELS_CODEC_CHECK_H */
