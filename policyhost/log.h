/* log - bellowsd's levelled, tagged log on stderr.
 *
 * Each line starts with its UTC time, unless stderr is the journal's
 * stream (JOURNAL_STREAM names it, as systemd sets it for a service):
 * journald stamps lines itself, so they start with the syslog priority
 * "<N>" it reads instead (3 error, 4 warn, 6 info, 7 debug).
 *
 * The level check happens in the macro, before any argument is formatted,
 * so a debug line on a hot path costs one comparison when it is off. The
 * tag is the module name; user- and wire-controlled strings go in single
 * quotes. Only the controller logs this way: the agent has its callback.
 */
#ifndef CTL_LOG_H
#define CTL_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum ctl_log_level {
	CTL_LOG_ERROR = 0,
	CTL_LOG_WARN = 1,
	CTL_LOG_INFO = 2,
	CTL_LOG_DEBUG = 3,
} ctl_log_level;

extern int ctl_log_level_current; /* lines above this level are skipped */

#define ctl_log(level, tag, ...)                                               \
	do {                                                                   \
		if ((int)(level) <= ctl_log_level_current)                     \
			ctl_log_emit((level), (tag), __VA_ARGS__);             \
	} while (0)

/* True when stderr is the stream JOURNAL_STREAM ("DEV:INODE") names.
 * Read once, at the first line logged. */
bool ctl_log_journal_stream(void);

/* Writes one line "TIME LEVEL tag: message" ("<N>LEVEL tag: message"
 * under journald) to stderr. Thread-safe (one
 * write(2) per line). Use the ctl_log macro instead. */
void ctl_log_emit(ctl_log_level level, const char *tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses "error", "warn", "info" or "debug" into *ret_level. Returns 0 or
 * BELLOWS_EINVAL. */
int ctl_log_parse_level(const char *text, ctl_log_level *ret_level);

/* Sets the highest level written. */
void ctl_log_set_level(ctl_log_level level);

/* Logs `fmt` at `level` and returns `code`: for "log and fail" in one
 * statement where a function is the one that reports a failure. */
int ctl_log_fail(int code, ctl_log_level level, const char *tag,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif /* CTL_LOG_H */
