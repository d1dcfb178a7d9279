/* test_huffman - GComp's exponent table: canonical, length-limited Huffman
 * codes with the escape, built from histograms (skewed, single-symbol, the
 * paper's Table 1 shape, random), checked as prefix codes, serialised and
 * read back, and every malformed table refused with its reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/huffman.h"

/* Kraft sum of a table (escape included), in units of 2^-max_bits. */
static uint64_t
kraft(const com_huff_table *t)
{
	uint64_t k = UINT64_C(1) << (t->max_bits - t->esc_len);

	for (int s = 0; s < 256; s++)
		if (t->len[s])
			k += UINT64_C(1) << (t->max_bits - t->len[s]);
	return k;
}

/* No code (escape included) is a prefix of another. */
static void
assert_prefix_free(const com_huff_table *t)
{
	uint16_t code[257];
	uint8_t len[257];

	for (int s = 0; s < 256; s++) {
		code[s] = t->code[s];
		len[s] = t->len[s];
	}
	code[256] = t->esc_code;
	len[256] = t->esc_len;
	for (int a = 0; a < 257; a++) {
		if (len[a] == 0)
			continue;
		assert_true(len[a] <= t->max_bits);
		for (int b = 0; b < 257; b++) {
			if (a == b || len[b] == 0 || len[b] < len[a])
				continue;
			assert_false((code[b] >> (len[b] - len[a])) == code[a]);
		}
	}
	assert_true(kraft(t) <= (UINT64_C(1) << t->max_bits));
}

/* Fully skewed (1, 2, 4, ... doubling): native Huffman is a chain, so the
 * rare symbols' native codes are long and must be escaped; the result is
 * a complete prefix code no longer than max_bits. */
static void
test_skewed_histogram_is_limited_and_escapes_the_tail(void **state)
{
	uint64_t hist[256] = { 0 };
	com_huff_table t;

	(void)state;
	for (int s = 0; s < 40; s++)
		hist[100 + s] = UINT64_C(1) << s;
	assert_int_equal(com_huff_build(hist, 8, 7, &t), 0);
	assert_int_equal(t.version, 7);
	assert_int_equal(t.max_bits, 8);
	assert_prefix_free(&t);
	assert_int_equal(kraft(&t), 256); /* complete */
	/* Most frequent symbol: 1 bit; the chain down to depth 7 keeps its
	 * native lengths, everything deeper is escaped. */
	assert_int_equal(t.len[139], 1);
	assert_int_equal(t.len[138], 2);
	assert_int_equal(t.len[133], 7);
	for (int s = 100; s < 132; s++)
		assert_int_equal(t.len[s], 0);
	assert_int_equal(t.len[0], 0);   /* count 0: escaped */
	assert_int_equal(t.len[255], 0); /* count 0: escaped */
	assert_true(t.esc_len >= 1 && t.esc_len <= 8);
	/* Cross-entropy under its own table is within 1 bit of the entropy
	 * plus the escape's raw bits of the escaped mass. */
	assert_true(com_huff_bits(&t, hist) >= com_huff_entropy(hist));
}

/* One symbol: it gets 1 bit and the escape the other 1-bit code. */
static void
test_one_symbol_histogram_gets_one_bit_and_an_escape(void **state)
{
	uint64_t hist[256] = { 0 };
	com_huff_table t;

	(void)state;
	hist[0] = 1000;
	assert_int_equal(com_huff_build(hist, 8, 1, &t), 0);
	assert_int_equal(t.len[0], 1);
	assert_int_equal(t.esc_len, 1);
	assert_int_equal(t.code[0], 0);
	assert_int_equal(t.esc_code, 1);
	for (int s = 1; s < 256; s++)
		assert_int_equal(t.len[s], 0);
	assert_prefix_free(&t);
	assert_true(fabs(com_huff_bits(&t, hist) - 1.0) < 1e-12);
	assert_true(com_huff_entropy(hist) == 0.0);
	/* Empty: only the escape. */
	memset(hist, 0, sizeof(hist));
	assert_int_equal(com_huff_build(hist, 8, 1, &t), 0);
	assert_int_equal(t.esc_len, 1);
	for (int s = 0; s < 256; s++)
		assert_int_equal(t.len[s], 0);
}

/* The paper's Table 1 shape: 0, 1 and 255 frequent (native 3, 4 and 4
 * bits), 32 and 138 among a long tail of rare exponents whose native codes
 * run to 18 bits. With n_theta = 8, 32 and 138 are escaped (sent as the
 * escape then their raw 8 bits: 00100000, 10001010), and share the one
 * escape code; the frequent ones keep their native lengths. */
static void
test_paper_table_1_long_codes_share_one_escape(void **state)
{
	uint64_t hist[256] = { 0 };
	unsigned bits;
	com_huff_table t;

	(void)state;
	hist[0] = 1u << 20;
	hist[1] = 1u << 19;
	hist[255] = 1u << 19;
	/* A geometric tail: native depths grow one per symbol. */
	for (int s = 2; s < 20; s++)
		hist[s] = 1u << (20 - s);
	hist[32] = 1;
	hist[138] = 1;
	hist[100] = 1u << 20;
	hist[101] = 1u << 20;
	hist[102] = 1u << 19;
	assert_int_equal(com_huff_build(hist, 8, 3, &t), 0);
	assert_prefix_free(&t);
	assert_int_equal(t.len[32], 0);
	assert_int_equal(t.len[138], 0);
	assert_true(t.len[0] > 0 && t.len[0] <= 3);
	assert_true(t.len[1] > 0 && t.len[1] <= 4);
	assert_true(t.len[255] > 0 && t.len[255] <= 4);
	assert_true(t.esc_len <= 8);
	/* The escape is the rarest thing left: the longest code. */
	for (int s = 0; s < 256; s++)
		assert_true(t.len[s] <= t.esc_len);
	/* Cost of 32: the escape plus 8 raw bits. */
	bits = t.esc_len + COM_HUFF_RAW_BITS;
	assert_true(bits <= 16);
}

/* All 256 exponents equally frequent: 255 of them fit with the escape in
 * 8 bits, the highest one (the lightest on ties) is escaped. */
static void
test_uniform_histogram_escapes_one_exponent_to_make_room(void **state)
{
	uint64_t hist[256];
	com_huff_table t;
	int escaped = 0;

	(void)state;
	for (int s = 0; s < 256; s++)
		hist[s] = 10;
	assert_int_equal(com_huff_build(hist, 8, 1, &t), 0);
	assert_prefix_free(&t);
	for (int s = 0; s < 256; s++)
		escaped += t.len[s] == 0;
	assert_int_equal(escaped, 1);
	assert_int_equal(t.len[255], 0);
	assert_int_equal(kraft(&t), 256);
}

/* Random histograms at every max_bits: always a prefix code within
 * bounds, the same table twice, and never worse than 8 raw bits plus the
 * escape for any exponent. */
static void
test_random_histograms_give_deterministic_prefix_codes(void **state)
{
	uint64_t hist[256];
	com_huff_table a, b;

	(void)state;
	srand(7);
	for (int round = 0; round < 300; round++) {
		unsigned bits = 1 + (unsigned)round % COM_HUFF_MAX_BITS;
		int used = rand() % 257;

		memset(hist, 0, sizeof(hist));
		for (int k = 0; k < used; k++)
			hist[rand() % 256] += rand() % 3 == 0
			    ? (uint64_t)(rand() % 4)
			    : (uint64_t)rand() << (rand() % 20);
		assert_int_equal(com_huff_build(hist, bits, 9, &a), 0);
		assert_int_equal(com_huff_build(hist, bits, 9, &b), 0);
		assert_memory_equal(&a, &b, sizeof(a));
		assert_prefix_free(&a);
		assert_true(a.esc_len >= 1 && a.esc_len <= bits);
		/* Package-merge gives complete codes (two items or more). */
		if (kraft(&a) != (UINT64_C(1) << bits))
			assert_int_equal(a.esc_len, 1);
		if (com_huff_entropy(hist) > 0)
			assert_true(com_huff_bits(&a, hist) + 1e-9 >=
			    com_huff_entropy(hist));
	}
}

/* Written and read back: the same table; every malformed table refused
 * with a reason naming the byte. */
static void
test_serialised_table_round_trips_and_bad_ones_are_refused(void **state)
{
	uint64_t hist[256] = { 0 };
	uint8_t buf[COM_HUFF_TABLE_BYTES + 4], bad[COM_HUFF_TABLE_BYTES];
	com_huff_table t, r;
	char err[256];
	size_t used = 0;

	(void)state;
	for (int s = 90; s < 130; s++)
		hist[s] = (uint64_t)(s - 89) * (uint64_t)(s - 89);
	hist[0] = 5000;
	assert_int_equal(com_huff_build(hist, 8, 0xdeadbeef, &t), 0);
	assert_int_equal(com_huff_write(&t, buf, 10), BELLOWS_EMSGSIZE);
	assert_int_equal(com_huff_write(&t, buf, sizeof(buf)), 0);
	assert_int_equal(com_huff_read(buf, sizeof(buf), &r, &used, err,
			     sizeof(err)),
	    0);
	assert_int_equal(used, COM_HUFF_TABLE_BYTES);
	assert_memory_equal(&t, &r, sizeof(t));

	memcpy(bad, buf, sizeof(bad));
	bad[0] = 'X';
	assert_int_equal(com_huff_read(bad, sizeof(bad), &r, NULL, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "byte 0"));

	assert_int_equal(com_huff_read(buf, 100, &r, NULL, err, sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "truncated"));

	memcpy(bad, buf, sizeof(bad));
	bad[4] = 2;
	assert_int_equal(com_huff_read(bad, sizeof(bad), &r, NULL, err,
			     sizeof(err)),
	    BELLOWS_EVERSION);

	/* Not a prefix code: every exponent given 1 bit. */
	memcpy(bad, buf, sizeof(bad));
	memset(bad + 12, 1, 256);
	assert_int_equal(com_huff_read(bad, sizeof(bad), &r, NULL, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "not a prefix code"));

	/* A length above max_code_bits. */
	memcpy(bad, buf, sizeof(bad));
	bad[12 + 7] = 9;
	assert_int_equal(com_huff_read(bad, sizeof(bad), &r, NULL, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "exponent 7"));
	assert_non_null(strstr(err, "byte 19"));

	/* No escape. */
	memcpy(bad, buf, sizeof(bad));
	bad[6] = 0;
	assert_int_equal(com_huff_read(bad, sizeof(bad), &r, NULL, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_non_null(strstr(err, "escape"));

	/* max_code_bits out of range. */
	memcpy(bad, buf, sizeof(bad));
	bad[5] = 16;
	assert_int_equal(com_huff_read(bad, sizeof(bad), &r, NULL, err,
			     sizeof(err)),
	    BELLOWS_EPROTO);
	assert_memory_equal(&t, &r, sizeof(t)); /* untouched on failure */

	assert_int_equal(com_huff_build(hist, 0, 1, &r), BELLOWS_EINVAL);
	assert_int_equal(com_huff_build(hist, 16, 1, &r), BELLOWS_EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_skewed_histogram_is_limited_and_escapes_the_tail),
		cmocka_unit_test(
		    test_one_symbol_histogram_gets_one_bit_and_an_escape),
		cmocka_unit_test(
		    test_paper_table_1_long_codes_share_one_escape),
		cmocka_unit_test(
		    test_uniform_histogram_escapes_one_exponent_to_make_room),
		cmocka_unit_test(
		    test_random_histograms_give_deterministic_prefix_codes),
		cmocka_unit_test(
		    test_serialised_table_round_trips_and_bad_ones_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
