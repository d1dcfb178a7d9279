/* error - the one table of bellows error codes.
 *
 * Every fallible function in bellows returns int: 0 on success, a negative
 * BELLOWS_E* on failure. The table below is the only place codes are
 * defined; it also generates bellows_strerror() and bellows_error_name(),
 * which bindings read instead of keeping a copy (agent/python). Codes are
 * part of the ABI and travel on the wire inside Error replies: never
 * renumber, only append, at the next value down (they run from -1 without
 * a gap, so a binding can list them by asking until the first unknown).
 */
#ifndef BELLOWS_ERROR_H
#define BELLOWS_ERROR_H

#include <bellows/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define BELLOWS_ERROR_MAP(X)                                                   \
	X(ENOMEM, -1, "out of memory")                                         \
	X(EINVAL, -2, "invalid argument")                                      \
	X(EPROTO, -3, "malformed message")                                     \
	X(EMSGSIZE, -4, "message too large")                                   \
	X(EVERSION, -5, "protocol version mismatch")                           \
	X(ENOTFOUND, -6, "not found")                                          \
	X(EBUSY, -7, "resource busy")                                          \
	X(ETIMEDOUT, -8, "timed out")                                          \
	X(ECLOSED, -9, "closed")                                               \
	X(ECONFIG, -10, "invalid configuration")                               \
	X(EIO, -11, "input/output error")                                      \
	X(ENOTJOINED, -12, "rank has not joined")                              \
	X(ESTATE, -13, "not valid in this state")                              \
	X(ELIMIT, -14, "limit exceeded")                                       \
	X(EAGAIN, -15, "try again")                                            \
	X(ESYS, -16, "system call failed")                                     \
	X(EMISMATCH, -17, "does not match the job")                            \
	X(ENOTSUP, -18, "not supported")                                       \
	X(EPERM, -19, "not permitted")

enum bellows_error {
	BELLOWS_OK = 0, /* not an error */
#define BELLOWS_ERROR_ENUM(name, value, text) BELLOWS_##name = (value),
	BELLOWS_ERROR_MAP(BELLOWS_ERROR_ENUM)
#undef BELLOWS_ERROR_ENUM
};

/* Returns a static, human-readable text for a bellows error code (or
 * "success" for 0, "unknown error" for anything not in the table). Never
 * returns NULL; safe from any thread. */
BELLOWS_EXPORT const char *bellows_strerror(int code);

/* Returns the static name of a bellows error code as the C source spells
 * it: "BELLOWS_ETIMEDOUT" for BELLOWS_ETIMEDOUT, "BELLOWS_OK" for 0, or
 * NULL for a code that is not in the table (a binding older or newer than
 * this library; codes run from -1 down without a gap, so the first NULL
 * ends them). Safe from any thread. */
BELLOWS_EXPORT const char *bellows_error_name(int code);

#ifdef __cplusplus
}
#endif

#endif /* BELLOWS_ERROR_H */
