/* error - texts and names of the bellows error codes, generated from the
 * one table in bellows/error.h. */
#include <bellows/error.h>

#include <stddef.h>

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

const char *
bellows_error_name(int code)
{
	switch (code) {
	case BELLOWS_OK:
		return "BELLOWS_OK";
#define ERROR_NAME(name, value, text)                                          \
	case BELLOWS_##name:                                                   \
		return "BELLOWS_" #name;
		BELLOWS_ERROR_MAP(ERROR_NAME)
#undef ERROR_NAME
	default:
		return NULL;
	}
}
