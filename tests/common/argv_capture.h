/* argv_capture - run a command line parser from a test, its stderr
 * captured: the one copy of what the option tests of bellowsd, `bellows
 * status` and `bellows top` need. Include after <cmocka.h>; failures are
 * cmocka assertions. */
#ifndef BELLOWS_TESTS_ARGV_CAPTURE_H
#define BELLOWS_TESTS_ARGV_CAPTURE_H

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#define ARGV_CAPTURE_MAX 32 /* arguments, the program's name included */

typedef struct argv_capture {
	char *argv[ARGV_CAPTURE_MAX + 1]; /* {prog, args..., NULL} */
	int argc;                         /* entries before the NULL */
	FILE *tmp;                        /* where stderr goes meanwhile */
	int saved;                        /* stderr's descriptor before */
} argv_capture;

/* Fills c->argv with prog and the NULL-terminated arguments of ap (at
 * most ARGV_CAPTURE_MAX in all), then sends stderr to a temporary file
 * until argv_capture_end. */
static inline void
argv_capture_begin(argv_capture *c, const char *prog, const char *first,
    va_list ap)
{
	c->argc = 0;
	c->argv[c->argc++] = (char *)prog;
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) {
		assert_true(c->argc < ARGV_CAPTURE_MAX);
		c->argv[c->argc++] = (char *)a;
	}
	c->argv[c->argc] = NULL;
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	fflush(stderr);
	c->saved = dup(2);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->tmp), 2) >= 0);
}

/* Gives stderr back and copies what was written to it into err (len
 * bytes, NUL-terminated, cut where longer). */
static inline void
argv_capture_end(argv_capture *c, char *err, size_t len)
{
	size_t n;

	fflush(stderr);
	assert_true(dup2(c->saved, 2) >= 0);
	close(c->saved);
	rewind(c->tmp);
	n = fread(err, 1, len - 1, c->tmp);
	err[n] = '\0';
	fclose(c->tmp);
}

/* Defines `static int NAME(T *o, char *err, const char *first, ...)`:
 * runs `FN(argc, argv, o)` on PROG and the NULL-terminated arguments,
 * its stderr captured into err (ARGV_CAPTURE_ERR bytes); returns what
 * FN returned. */
#define ARGV_CAPTURE_ERR 4096
#define ARGV_CAPTURE_PARSER(NAME, T, PROG, FN)                                 \
	static int NAME(T *o, char *err, const char *first, ...)               \
	{                                                                      \
		argv_capture c;                                                \
		va_list ap;                                                    \
		int rc;                                                        \
                                                                               \
		va_start(ap, first);                                           \
		argv_capture_begin(&c, PROG, first, ap);                       \
		va_end(ap);                                                    \
		rc = FN(c.argc, c.argv, o);                                    \
		argv_capture_end(&c, err, ARGV_CAPTURE_ERR);                   \
		return rc;                                                     \
	}

#endif
