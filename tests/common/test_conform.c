/* test_conform - the decoder accepts what protobuf-c's unpack accepts, to
 * the same values, and refuses besides only frames bellows never writes
 * (docs/protocol.md): on every frame of the committed fuzz corpus
 * (tests/fuzz/corpus/wire, the directory given as argv[1]), and on the
 * over-long varints the two once disagreed on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "common/bellows.pb-c.h"
#include "common/wire.h"
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
	};

	if (argc != 2) {
		fprintf(stderr, "usage: test_conform CORPUS_DIR\n");
		return 2;
	}
	corpus_dir = argv[1];
	return cmocka_run_group_tests_name("conform", tests, NULL, NULL);
}
