/* test_conform - the decoder accepts what protobuf-c's unpack accepts, to
 * the same values, and refuses besides only frames bellows never writes
 * (docs/protocol.md): on every frame of the committed fuzz corpus
 * (tests/fuzz/corpus/wire, the directory given as argv[1]), and on the
 * over-long varints the two once disagreed on. A report's layers, which
 * the decoder reads straight into com_layer_stats, are held to protobuf-c
 * and the statistics table's checks on generated layers as well.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
#include "common/stat_table.h"
#include "common/wire.h"
#include "common/wire_fast.h"
#include "conform.h"

static const char *corpus_dir;

/* The whole file at path; *len set. */
static uint8_t *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	assert_true((n = ftell(f)) >= 0);
	rewind(f);
	assert_non_null(buf = malloc((size_t)n + 1));
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* com_wire_decode's code for the frame, the message freed. */
static int
decode_rc(const uint8_t *p, size_t n)
{
	com_limits lim;
	com_msg m;
	int rc;

	com_limits_default(&lim);
	rc = com_wire_decode(p, n, &lim, &m);
	if (rc == 0 || rc == BELLOWS_EVERSION)
		com_msg_fini(&m);
	return rc;
}

/* True when protobuf-c's unpack accepts the frame. */
static bool
protobuf_c_accepts(const uint8_t *p, size_t n)
{
	Bellows__Envelope *env = bellows__envelope__unpack(NULL, n, p);

	if (env == NULL)
		return false;
	bellows__envelope__free_unpacked(env, NULL);
	return true;
}

static void
test_conform_every_frame_of_the_committed_corpus_conforms(void **state)
{
	DIR *d;
	struct dirent *e;
	unsigned files = 0, accepted = 0;

	(void)state;
	assert_non_null(d = opendir(corpus_dir));
	while ((e = readdir(d)) != NULL) {
		char path[4096];
		const char *why;
		uint8_t *buf;
		size_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", corpus_dir, e->d_name);
		buf = slurp(path, &len);
		if ((why = conform_check(buf, len)) != NULL)
			fail_msg("%s: %s", e->d_name, why);
		accepted += decode_rc(buf, len) == 0;
		files++;
		free(buf);
	}
	closedir(d);
	print_message("%u frames, %u decoded, every one as protobuf-c reads "
		      "it\n",
	    files, accepted);
	/* The seeds (one frame of each type) decode; the rest are the
	 * fuzzer's, mostly refused. */
	assert_true(files >= 20);
	assert_true(accepted >= 14);
}

/* Major 1, then a StatusRequest (field 17) of 2 bytes (job "") whose
 * length is written in the given bytes. */
static size_t
status_request(const uint8_t *length, size_t n, uint8_t *out)
{
	static const uint8_t head[] = { 0x08, 0x01, 0x8a, 0x01 };
	static const uint8_t body[] = { 0x0a, 0x00 };

	memcpy(out, head, sizeof(head));
	memcpy(out + sizeof(head), length, n);
	memcpy(out + sizeof(head) + n, body, sizeof(body));
	return sizeof(head) + n + sizeof(body);
}

static void
test_conform_a_length_of_six_bytes_is_refused_as_protobuf_c_refuses_it(
    void **state)
{
	static const uint8_t six[] = { 0x82, 0x80, 0x80, 0x80, 0x80, 0x00 };
	static const uint8_t one[] = { 0x02 };
	uint8_t frame[32];
	size_t n;

	(void)state;
	n = status_request(one, sizeof(one), frame);
	assert_true(protobuf_c_accepts(frame, n));
	assert_int_equal(decode_rc(frame, n), 0);
	assert_null(conform_check(frame, n));

	n = status_request(six, sizeof(six), frame);
	assert_false(protobuf_c_accepts(frame, n));
	assert_int_equal(decode_rc(frame, n), BELLOWS_EPROTO);
	assert_null(conform_check(frame, n));
}

/* A length of 2 written in 2 to 5 bytes: protobuf-c reads it, bellows
 * writes only the shortest form and refuses the others (the documented
 * stricter rule), and the conformance check allows exactly that. */
static void
test_conform_a_length_longer_than_its_shortest_form_is_refused(void **state)
{
	uint8_t len[5] = { 0x82, 0x80, 0x80, 0x80, 0x00 };
	uint8_t frame[32];

	(void)state;
	for (size_t k = 2; k <= 5; k++) {
		size_t n;

		len[k - 1] = 0x00;
		n = status_request(len, k, frame);
		assert_true(protobuf_c_accepts(frame, n));
		assert_int_equal(decode_rc(frame, n), BELLOWS_EPROTO);
		assert_null(conform_check(frame, n));
		len[k - 1] = 0x80;
	}
}

/* A key (tag and wire type) of 6 bytes is refused by both; one of 5
 * bytes naming a field number above protobuf's 2^29 - 1 is an unknown
 * field to both; a known field's key of 2 bytes with a zero last byte is
 * refused by bellows only. */
static void
test_conform_an_over_long_key_is_refused(void **state)
{
	/* major = 1 with its key 0x08 written in 6, 5 and 2 bytes. */
	static const uint8_t key6[] = { 0x88, 0x80, 0x80, 0x80, 0x80, 0x00,
		0x01 };
	static const uint8_t big5[] = { 0x88, 0x80, 0x80, 0x80, 0x7f, 0x01 };
	static const uint8_t key2[] = { 0x88, 0x00, 0x01 };

	(void)state;
	assert_false(protobuf_c_accepts(key6, sizeof(key6)));
	assert_int_equal(decode_rc(key6, sizeof(key6)), BELLOWS_EPROTO);
	assert_null(conform_check(key6, sizeof(key6)));
	assert_true(protobuf_c_accepts(big5, sizeof(big5)));
	assert_null(conform_check(big5, sizeof(big5)));
	assert_true(protobuf_c_accepts(key2, sizeof(key2)));
	assert_int_equal(decode_rc(key2, sizeof(key2)), BELLOWS_EPROTO);
	assert_null(conform_check(key2, sizeof(key2)));
}

/* A layer whose comm_comp_ms (field 18, a double) is -0.0, what
 * libFuzzer found in 264 k runs (corpus file regress-minus-zero-double):
 * the layer reader reads -0.0, bit for bit, as protobuf-c's unpack does,
 * and the checks pass it (-0.0 >= 0); protobuf-c writes it back as it
 * writes 0.0, not at all, so its writing reads back +0.0, which the
 * reader reads as protobuf-c does. The conformance check holds. */
static void
test_conform_a_statistic_of_minus_zero_reads_as_protobuf_c_reads_it(
    void **state)
{
	static const uint8_t layer[] = { 0x91, 0x01, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x80 };
	const uint64_t minus_zero = 0x8000000000000000ull;
	Bellows__LayerStats *ref;
	com_limits lim;
	com_layer_stats s;
	uint64_t bits;

	(void)state;
	assert_non_null(
	    ref = bellows__layer_stats__unpack(NULL, sizeof(layer), layer));
	memcpy(&bits, &ref->comm_comp_ms, sizeof(bits));
	assert_int_equal(bits, minus_zero);
	assert_int_equal(protobuf_c_message_get_packed_size(&ref->base), 0);
	bellows__layer_stats__free_unpacked(ref, NULL);

	com_limits_default(&lim);
	memset(&s, 0, sizeof(s));
	assert_int_equal(wire_fast_layer_stats(layer, sizeof(layer), &lim, &s),
	    0);
	memcpy(&bits, &s.comm_comp_ms, sizeof(bits));
	assert_int_equal(bits, minus_zero);
	for (size_t a = 0; a < COM_N_LARRAYS; a++)
		free((void *)com_stat_array_get(&com_layer_array_table[a], &s));

	assert_null(conform_layer_check(layer, sizeof(layer), &lim));
	assert_null(conform_check(layer, sizeof(layer)));
}

/*
 * Generated layers: the layer reader against protobuf-c (conform.h).
 */

/* A LayerStats being written by hand. */
typedef struct lbuf {
	uint8_t b[8192]; /* the bytes */
	size_t n;        /* bytes used */
} lbuf;

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* v as a varint, with `pad` more bytes than it needs (0x80 ... 0x00:
 * a form protobuf-c reads and bellows refuses) when pad > 0. */
static void
put_varint(lbuf *w, uint64_t v, unsigned pad)
{
	while (v >= 0x80 || pad > 0) {
		if (v < 0x80 && pad > 0) {
			w->b[w->n++] = (uint8_t)(v | 0x80);
			v = 0;
			while (--pad > 0)
				w->b[w->n++] = 0x80;
			w->b[w->n++] = 0x00;
			return;
		}
		w->b[w->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	w->b[w->n++] = (uint8_t)v;
}

/* A random varint value: small, 32-bit, or 64-bit. */
static uint64_t
rand_value(uint64_t *seed)
{
	switch (xorshift(seed) % 4) {
	case 0:
		return xorshift(seed) % 100;
	case 1:
		return xorshift(seed) % 70000;
	case 2:
		return xorshift(seed) & 0xffffffffu;
	default:
		return xorshift(seed);
	}
}

/* A random double: in range for every check, out of some, or not a
 * number. The pick is drawn apart from the choice of random bits: with
 * one draw for both (r % 5, then r % 10) 0.0 and -0.0 were never
 * picked. */
static double
rand_double(uint64_t *seed)
{
	static const double pick[] = { 0.0, 0.5, 1.0, 1.5, 1e300, -0.0, -1.0,
		INFINITY, -INFINITY, NAN };
	uint64_t r = xorshift(seed);

	if (xorshift(seed) % 5 == 0) {
		double d;
		uint64_t bits = xorshift(seed);

		memcpy(&d, &bits, sizeof(d));
		return d;
	}
	return pick[r % (sizeof(pick) / sizeof(pick[0]))];
}

/* A packed exp_hist of n values (tag 21), its length written with pad
 * extra bytes. */
static void
put_packed(lbuf *w, uint32_t tag, unsigned n, unsigned pad, uint64_t *seed)
{
	lbuf v = { .n = 0 };

	for (unsigned i = 0; i < n; i++)
		put_varint(&v, rand_value(seed) % 5000, 0);
	put_varint(w, (uint64_t)tag << 3 | 2, 0);
	put_varint(w, v.n, pad);
	memcpy(w->b + w->n, v.b, v.n);
	w->n += v.n;
}

/* One field: mostly a known one with its own wire type, at times an
 * unknown one, a wrong wire type, a padded varint or an array in pieces. */
static void
put_field(lbuf *w, uint64_t *seed)
{
	uint64_t r = xorshift(seed) % 100;
	unsigned pad = xorshift(seed) % 12 == 0 ? 1 + xorshift(seed) % 5 : 0;
	uint32_t tag, wire;
	const com_stat_array *a = &com_layer_array_table[0];

	if (r < 60) {
		const com_stat
		    *e = &com_layer_stat_table[xorshift(seed) % COM_N_LSTATS];

		tag = e->tag;
		wire = e->type == BELLOWS_STAT_TYPE_F64 ? 1 : 0;
	} else if (r < 66) {
		tag = 1;
		wire = 0;
	} else if (r < 76) {
		/* The array: whole, short, in two pieces, or one by one. */
		switch (xorshift(seed) % 4) {
		case 0:
			put_packed(w, a->tag, a->len, pad, seed);
			return;
		case 1:
			put_packed(w, a->tag, xorshift(seed) % (a->len + 2), 0,
			    seed);
			return;
		case 2:
			put_packed(w, a->tag, a->len / 2, 0, seed);
			put_packed(w, a->tag, a->len - a->len / 2, 0, seed);
			return;
		default:
			for (unsigned i = 0; i < a->len; i++) {
				put_varint(w, (uint64_t)a->tag << 3, 0);
				put_varint(w, rand_value(seed), 0);
			}
			return;
		}
	} else if (r < 90) {
		/* Unknown: a free tag, one past the table's range, a huge
		 * one. */
		static const uint32_t free_tags[] = { 22, 29, 39, 41, 127, 128,
			1000, 536870911 };

		tag = free_tags[xorshift(seed) % 8];
		wire = (uint32_t)(xorshift(seed) % 3);
	} else {
		tag = (uint32_t)(xorshift(seed) % 45);
		wire = (uint32_t)(xorshift(seed) % 8);
	}
	put_varint(w, (uint64_t)tag << 3 | wire, xorshift(seed) % 40 == 0);
	switch (wire) {
	case 0: {
		uint64_t v = tag == 1 ? xorshift(seed) % 70000
				      : rand_value(seed);

		put_varint(w, v, pad);
		break;
	}
	case 1: {
		double d = rand_double(seed);

		memcpy(w->b + w->n, &d, 8);
		w->n += 8;
		break;
	}
	case 2: {
		unsigned n = (unsigned)(xorshift(seed) % 6);

		put_varint(w, n, pad);
		for (unsigned i = 0; i < n; i++)
			w->b[w->n++] = (uint8_t)xorshift(seed);
		break;
	}
	case 5:
		for (unsigned i = 0; i < 4; i++)
			w->b[w->n++] = (uint8_t)xorshift(seed);
		break;
	default: /* a group's or a reserved wire type: nothing after it */
		break;
	}
}

/* 20,000 generated layers: each is read by the layer reader as
 * protobuf-c and the table's checks read it, under limits that refuse
 * nothing and under the defaults, and enough of them are accepted and
 * refused for that to say something. */
static void
test_conform_the_layer_reader_decodes_generated_layers_as_protobuf_c_does(
    void **state)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned accepted = 0, total = 20000;

	(void)state;
	for (unsigned k = 0; k < total; k++) {
		lbuf w = { .n = 0 };
		unsigned fields = (unsigned)(xorshift(&seed) % 14);
		com_limits lim;
		com_layer_stats s;
		const char *why;

		for (unsigned i = 0; i < fields && w.n < 4096; i++)
			put_field(&w, &seed);
		if (xorshift(&seed) % 10 == 0 && w.n > 0)
			w.n = xorshift(&seed) % w.n; /* cut short */
		com_limits_default(&lim);
		if ((why = conform_layer_check(w.b, w.n, &lim)) != NULL)
			fail_msg("layer %u (%zu bytes): %s", k, w.n, why);
		lim.max_layers = UINT32_MAX;
		if ((why = conform_layer_check(w.b, w.n, &lim)) != NULL)
			fail_msg("layer %u (%zu bytes), no limit: %s", k, w.n,
			    why);
		memset(&s, 0, sizeof(s));
		if (wire_fast_layer_stats(w.b, w.n, &lim, &s) == 0) {
			accepted++;
			for (size_t a = 0; a < COM_N_LARRAYS; a++)
				free((void *)com_stat_array_get(
				    &com_layer_array_table[a], &s));
		}
	}
	print_message("%u generated layers, %u accepted, every one as "
		      "protobuf-c reads it\n",
	    total, accepted);
	assert_true(accepted > total / 20);
	assert_true(accepted < total - total / 20);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_conform_every_frame_of_the_committed_corpus_conforms),
		cmocka_unit_test(
		    test_conform_a_length_of_six_bytes_is_refused_as_protobuf_c_refuses_it),
		cmocka_unit_test(
		    test_conform_a_length_longer_than_its_shortest_form_is_refused),
		cmocka_unit_test(test_conform_an_over_long_key_is_refused),
		cmocka_unit_test(
		    test_conform_a_statistic_of_minus_zero_reads_as_protobuf_c_reads_it),
		cmocka_unit_test(
		    test_conform_the_layer_reader_decodes_generated_layers_as_protobuf_c_does),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: test_conform CORPUS_DIR\n");
		return 2;
	}
	corpus_dir = argv[1];
	return cmocka_run_group_tests_name("conform", tests, NULL, NULL);
}
