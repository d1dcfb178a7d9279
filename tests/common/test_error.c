/* test_error - the error table's two readings: bellows_strerror's texts
 * and bellows_error_name's names, both for every code of
 * BELLOWS_ERROR_MAP, and the table's promise to bindings that codes run
 * from -1 down without a gap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <string.h>

#include <bellows/error.h>

struct entry {
	int code;         /* the value */
	const char *name; /* the symbol, as the source spells it */
	const char *text; /* its text in the table */
};

static const struct entry entries[] = {
#define ENTRY(name, value, text) { BELLOWS_##name, "BELLOWS_" #name, text },
	BELLOWS_ERROR_MAP(ENTRY)
#undef ENTRY
};
#define N_ENTRIES (sizeof(entries) / sizeof(entries[0]))

static void
test_error_name_spells_every_code_of_the_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ENTRIES; i++) {
		assert_non_null(bellows_error_name(entries[i].code));
		assert_string_equal(bellows_error_name(entries[i].code),
		    entries[i].name);
		assert_string_equal(bellows_strerror(entries[i].code),
		    entries[i].text);
	}
	assert_string_equal(bellows_error_name(BELLOWS_ETIMEDOUT),
	    "BELLOWS_ETIMEDOUT");
	assert_string_equal(bellows_error_name(-8), "BELLOWS_ETIMEDOUT");
	assert_string_equal(bellows_error_name(BELLOWS_OK), "BELLOWS_OK");
	assert_string_equal(bellows_strerror(BELLOWS_OK), "success");
}

static void
test_error_codes_run_from_minus_one_without_a_gap(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_ENTRIES; i++)
		assert_int_equal(entries[i].code, -(int)i - 1);
	/* So the first unknown below -1 ends the list a binding reads. */
	assert_null(bellows_error_name(-(int)N_ENTRIES - 1));
}

static void
test_error_name_is_null_for_an_unknown_code(void **state)
{
	static const int unknown[] = { 1, 2, -1000, INT_MIN, INT_MAX };

	(void)state;
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		assert_null(bellows_error_name(unknown[i]));
		assert_string_equal(bellows_strerror(unknown[i]),
		    "unknown error");
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_error_name_spells_every_code_of_the_table),
		cmocka_unit_test(
		    test_error_codes_run_from_minus_one_without_a_gap),
		cmocka_unit_test(test_error_name_is_null_for_an_unknown_code),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
