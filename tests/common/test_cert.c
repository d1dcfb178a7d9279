/* test_cert - CURVE certificates written and read back, czmq's and
 * pyzmq's text read as theirs, and every malformed file refused with its
 * reason. Real files in a private temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include <bellows/error.h>

#include "common/cert.h"

typedef struct fixture {
	char dir[64];  /* private temporary directory */
	char err[512]; /* last error text */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-cert-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Writes `text` to DIR/name and returns the path in buf. */
static const char *
write_file(fixture *f, const char *name, const char *text, char *buf,
    size_t len)
{
	FILE *fp;

	snprintf(buf, len, "%s/%s", f->dir, name);
	fp = fopen(buf, "w");
	assert_non_null(fp);
	assert_true(fputs(text, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
	return buf;
}

static mode_t
mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 0777;
}

static void
test_cert_saved_keypair_reads_back_with_its_modes(void **state)
{
	fixture *f = *state;
	com_cert c, back, pub;
	char path[256];

	assert_int_equal(com_cert_generate(&c), 0);
	assert_int_equal(strlen(c.public_key), 40);
	assert_int_equal(strlen(c.secret_key), 40);
	assert_int_equal(com_cert_save(&c, f->dir, "trainer", false, f->err,
			     sizeof(f->err)),
	    0);
	snprintf(path, sizeof(path), "%s/trainer.key", f->dir);
	assert_int_equal(mode_of(path), 0600);
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)), 0);
	assert_string_equal(back.public_key, c.public_key);
	assert_string_equal(back.secret_key, c.secret_key);
	snprintf(path, sizeof(path), "%s/trainer.pub", f->dir);
	assert_int_equal(mode_of(path) & 0600, 0600);
	assert_int_equal(com_cert_load(path, &pub, f->err, sizeof(f->err)), 0);
	assert_string_equal(pub.public_key, c.public_key);
	assert_string_equal(pub.secret_key, "");
}

static void
test_cert_save_refuses_to_overwrite_without_force(void **state)
{
	fixture *f = *state;
	com_cert a, b, back;
	char path[256];

	assert_int_equal(com_cert_generate(&a), 0);
	assert_int_equal(com_cert_generate(&b), 0);
	assert_int_equal(com_cert_save(&a, f->dir, "srv", false, f->err,
			     sizeof(f->err)),
	    0);
	assert_int_equal(com_cert_save(&b, f->dir, "srv", false, f->err,
			     sizeof(f->err)),
	    BELLOWS_EBUSY);
	assert_non_null(strstr(f->err, "srv.key exists (--force replaces it)"));
	snprintf(path, sizeof(path), "%s/srv.key", f->dir);
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)), 0);
	assert_string_equal(back.public_key, a.public_key);
	assert_int_equal(com_cert_save(&b, f->dir, "srv", true, f->err,
			     sizeof(f->err)),
	    0);
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)), 0);
	assert_string_equal(back.public_key, b.public_key);
	assert_int_equal(mode_of(path), 0600);
}

static void
test_cert_save_refuses_bad_names_and_public_certificates(void **state)
{
	fixture *f = *state;
	com_cert c, pub = { 0 };

	assert_int_equal(com_cert_generate(&c), 0);
	assert_int_equal(com_cert_save(&c, f->dir, "../up", false, f->err,
			     sizeof(f->err)),
	    BELLOWS_EINVAL);
	assert_non_null(strstr(f->err, "is not a certificate name"));
	assert_int_equal(com_cert_save(&c, f->dir, ".hidden", false, f->err,
			     sizeof(f->err)),
	    BELLOWS_EINVAL);
	assert_int_equal(com_cert_save(&c, f->dir, "", false, f->err,
			     sizeof(f->err)),
	    BELLOWS_EINVAL);
	memcpy(pub.public_key, c.public_key, sizeof(pub.public_key));
	assert_int_equal(com_cert_save(&pub, f->dir, "pub", false, f->err,
			     sizeof(f->err)),
	    BELLOWS_EINVAL);
	assert_true(com_cert_name_ok("train-01_a.b"));
	assert_false(com_cert_name_ok("a b"));
	assert_int_equal(com_cert_save(&c, "/nonexistent/dir", "x", false,
			     f->err, sizeof(f->err)),
	    BELLOWS_EIO);
}

static void
test_cert_reads_the_text_czmq_and_pyzmq_write(void **state)
{
	fixture *f = *state;
	com_cert c, back;
	char text[1024], path[256];

	/* czmq's zcert_save, with metadata and CRLF line ends. */
	assert_int_equal(com_cert_generate(&c), 0);
	snprintf(text, sizeof(text),
	    "#   ****  Generated on 2026-11-25 10:00:00 by CZMQ  ****\r\n"
	    "#   ZeroMQ CURVE **Secret** Certificate\r\n"
	    "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its "
	    "permissions.\r\n"
	    "\r\n"
	    "metadata\r\n"
	    "    email = \"ops@example.org\"\r\n"
	    "curve\r\n"
	    "    public-key = \"%s\"\r\n"
	    "    secret-key = \"%s\"\r\n",
	    c.public_key, c.secret_key);
	write_file(f, "czmq.cert_secret", text, path, sizeof(path));
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)), 0);
	assert_string_equal(back.public_key, c.public_key);
	assert_string_equal(back.secret_key, c.secret_key);
	/* pyzmq's public certificate: metadata section empty. */
	snprintf(text, sizeof(text),
	    "#   ****  Generated on 2026-11-25 by pyzmq  ****\n"
	    "#   ZeroMQ CURVE Public Certificate\n"
	    "\n"
	    "metadata\n"
	    "curve\n"
	    "    public-key = \"%s\"\n",
	    c.public_key);
	write_file(f, "client.key", text, path, sizeof(path));
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)), 0);
	assert_string_equal(back.public_key, c.public_key);
	assert_string_equal(back.secret_key, "");
}

static void
test_cert_refuses_what_is_not_a_certificate(void **state)
{
	fixture *f = *state;
	com_cert c, other, back = { .public_key = "untouched" };
	char text[1024], path[256];

	assert_int_equal(com_cert_load("/nonexistent/x.pub", &back, f->err,
			     sizeof(f->err)),
	    BELLOWS_ENOTFOUND);
	assert_non_null(strstr(f->err, "/nonexistent/x.pub: cannot open"));
	write_file(f, "empty.pub", "# nothing\nmetadata\n", path, sizeof(path));
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)),
	    BELLOWS_EINVAL);
	assert_non_null(strstr(f->err, "not a CURVE certificate"));
	write_file(f, "short.pub", "curve\n    public-key = \"abc\"\n", path,
	    sizeof(path));
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)),
	    BELLOWS_EINVAL);
	assert_non_null(strstr(f->err, "short.pub:2: public-key"));
	/* A key outside the curve section does not count. */
	assert_int_equal(com_cert_generate(&c), 0);
	snprintf(text, sizeof(text), "metadata\n    public-key = \"%s\"\n",
	    c.public_key);
	write_file(f, "misplaced.pub", text, path, sizeof(path));
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)),
	    BELLOWS_EINVAL);
	/* A secret key of another pair. */
	assert_int_equal(com_cert_generate(&other), 0);
	snprintf(text, sizeof(text),
	    "curve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
	    c.public_key, other.secret_key);
	write_file(f, "mixed.key", text, path, sizeof(path));
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)),
	    BELLOWS_EINVAL);
	assert_non_null(strstr(f->err, "does not belong to its public-key"));
	assert_string_equal(back.public_key, "untouched");
}

static void
test_cert_refuses_a_file_larger_than_a_certificate(void **state)
{
	fixture *f = *state;
	com_cert back;
	char path[256];
	char *big = malloc(COM_CERT_MAX_FILE + 2);

	assert_non_null(big);
	memset(big, '#', COM_CERT_MAX_FILE + 1);
	big[COM_CERT_MAX_FILE + 1] = '\0';
	write_file(f, "big.pub", big, path, sizeof(path));
	free(big);
	assert_int_equal(com_cert_load(path, &back, f->err, sizeof(f->err)),
	    BELLOWS_EIO);
	assert_non_null(strstr(f->err, "larger than a certificate"));
	assert_int_equal(com_cert_load("/dev/zero", &back, f->err,
			     sizeof(f->err)),
	    BELLOWS_EIO);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_cert_saved_keypair_reads_back_with_its_modes, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_cert_save_refuses_to_overwrite_without_force, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_cert_save_refuses_bad_names_and_public_certificates,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_cert_reads_the_text_czmq_and_pyzmq_write, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_cert_refuses_what_is_not_a_certificate, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_cert_refuses_a_file_larger_than_a_certificate, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
