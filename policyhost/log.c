/* log - bellowsd's stderr log, see log.h. */
#include "log.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int ctl_log_level_current = CTL_LOG_INFO;

static const char *const log_names[] = { "error", "warn", "info", "debug" };

/* syslog priorities of the levels: err, warning, info, debug. */
static const int log_priorities[] = { 3, 4, 6, 7 };

static atomic_int
    log_journal = -1; /* stderr is journald's stream; -1: unknown */

bool
ctl_log_journal_stream(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	uintmax_t dev, ino;
	struct stat st;
	char tail;

	/* "DEV:INODE" of the stream systemd connected; it only counts while
	 * stderr is still that stream (not redirected since). */
	if (env == NULL || sscanf(env, "%ju:%ju%c", &dev, &ino, &tail) != 2 ||
	    fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (uintmax_t)st.st_dev == dev && (uintmax_t)st.st_ino == ino;
}

static void
log_vemit(ctl_log_level level, const char *tag, const char *fmt, va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	size_t len;
	int n;

	if (log_journal < 0)
		log_journal = ctl_log_journal_stream();
	if (log_journal) {
		/* journald stamps each line itself, and reads the <N>
		 * prefix as the line's priority (sd-daemon(3)). */
		n = snprintf(line, sizeof(line),
		    "<%d>%-5s %s: ", log_priorities[level], log_names[level],
		    tag);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line),
		    "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s: ",
		    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		    log_names[level], tag);
	}
	if (n < 0)
		return;
	len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
	n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	if (n > 0)
		len += (size_t)n < sizeof(line) - len ? (size_t)n
						      : sizeof(line) - len - 1;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	/* One write per line so lines of concurrent threads never mix. */
	if (write(STDERR_FILENO, line, len) < 0)
		return;
}

void
ctl_log_emit(ctl_log_level level, const char *tag, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vemit(level, tag, fmt, ap);
	va_end(ap);
}

int
ctl_log_fail(int code, ctl_log_level level, const char *tag, const char *fmt,
    ...)
{
	va_list ap;

	if ((int)level <= ctl_log_level_current) {
		va_start(ap, fmt);
		log_vemit(level, tag, fmt, ap);
		va_end(ap);
	}
	return code;
}

int
ctl_log_parse_level(const char *text, ctl_log_level *ret_level)
{
	for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++) {
		if (text != NULL && strcmp(text, log_names[i]) == 0) {
			*ret_level = (ctl_log_level)i;
			return 0;
		}
	}
	return BELLOWS_EINVAL;
}

void
ctl_log_set_level(ctl_log_level level)
{
	ctl_log_level_current = (int)level;
}
