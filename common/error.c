/* error - texts for the bellows error codes, generated from the one table
 * in bellows/error.h. */
#include <bellows/error.h>

const char *
bellows_strerror(int code)
{
	switch (code) {
	case BELLOWS_OK:
		return "success";
#define ERROR_CASE(name, value, text)                                          \
	case BELLOWS_##name:                                                   \
		return text;
		BELLOWS_ERROR_MAP(ERROR_CASE)
#undef ERROR_CASE
	default:
		return "unknown error";
	}
}
