/* test_errbuf - com_errf, the one writer of a caller's error-message
 * buffer: the whole message when it fits, cut at len - 1 bytes with a NUL
 * when it does not, nothing at all for a NULL buffer or a length of 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "common/errbuf.h"

static void
test_errf_formats_the_whole_message_when_it_fits(void **state)
{
	char buf[64];

	(void)state;
	com_errf(buf, sizeof(buf), "byte %d: %s", 12, "bad chunk count");
	assert_string_equal(buf, "byte 12: bad chunk count");
	com_errf(buf, sizeof(buf), "no arguments");
	assert_string_equal(buf, "no arguments");
}

static void
test_errf_cuts_a_long_message_and_writes_nothing_past_len(void **state)
{
	char buf[16];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	com_errf(buf, 8, "job '%s' is unknown", "resnet");
	assert_string_equal(buf, "job 're");
	assert_memory_equal(buf + 8, "xxxxxxxx", 8);
	/* One byte holds the NUL only. */
	com_errf(buf, 1, "%s", "anything");
	assert_string_equal(buf, "");
	assert_int_equal(buf[1], 'o');
}

static void
test_errf_takes_a_null_buffer_or_a_zero_length(void **state)
{
	char buf[8];

	(void)state;
	com_errf(NULL, 0, "%s", "no message wanted");
	com_errf(NULL, 64, "%s", "no buffer, whatever its length");
	memset(buf, 'x', sizeof(buf));
	com_errf(buf, 0, "%s", "no room");
	assert_memory_equal(buf, "xxxxxxxx", 8);
}

/* A formatter with a prefix of its own, as the file readers have. */
__attribute__((format(printf, 4, 5))) static void
prefixed(char *buf, size_t len, int line, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	com_errf(buf, len, "f.yaml:%d: ", line);
	n = strlen(buf);
	va_start(ap, fmt);
	com_verrf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

static void
test_verrf_continues_after_a_prefix(void **state)
{
	char buf[32];

	(void)state;
	prefixed(buf, sizeof(buf), 3, "%s must be %d", "steps", 4);
	assert_string_equal(buf, "f.yaml:3: steps must be 4");
	prefixed(buf, 12, 3, "%s", "cut here");
	assert_string_equal(buf, "f.yaml:3: c");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_errf_formats_the_whole_message_when_it_fits),
		cmocka_unit_test(
		    test_errf_cuts_a_long_message_and_writes_nothing_past_len),
		cmocka_unit_test(
		    test_errf_takes_a_null_buffer_or_a_zero_length),
		cmocka_unit_test(test_verrf_continues_after_a_prefix),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
