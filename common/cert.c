/* cert - CURVE certificates in ZeroMQ's certificate text format, see
 * cert.h.
 *
 * ZPL is line-based: '#' starts a comment line, a name at column 0 opens
 * a section, and a line indented under it (czmq writes four spaces) is
 * `name = value` with the value in double or single quotes, or bare.
 * Only the `curve` section's two keys matter here; everything else (the
 * metadata czmq and pyzmq write) is read past.
 */
#include "cert.h"

#include <bellows/error.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#define CERT_KEY_BYTES 32 /* a CURVE key */
#define CERT_Z85_CHARS 40 /* ... in Z85 */

int
com_cert_generate(com_cert *ret)
{
	com_cert c;

	if (!zmq_has("curve"))
		return BELLOWS_ENOTSUP;
	if (zmq_curve_keypair(c.public_key, c.secret_key) != 0)
		return BELLOWS_ESYS;
	*ret = c;
	return 0;
}

/* True when `z` is 40 characters of Z85 that decode to a 32-byte key. */
static bool
cert_z85_ok(const char *z)
{
	uint8_t raw[CERT_KEY_BYTES];

	return strlen(z) == CERT_Z85_CHARS && zmq_z85_decode(raw, z) != NULL;
}

/* Reads at most COM_CERT_MAX_FILE bytes of `path` into a fresh
 * NUL-terminated buffer. */
static int
cert_read(const char *path, char **ret, char *errbuf, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;

	if (f == NULL) {
		snprintf(errbuf, errlen, "%s: cannot open: %s", path,
		    strerror(errno));
		return errno == ENOENT ? BELLOWS_ENOTFOUND : BELLOWS_EIO;
	}
	if ((buf = malloc(COM_CERT_MAX_FILE + 2)) == NULL) {
		fclose(f);
		snprintf(errbuf, errlen, "%s: out of memory", path);
		return BELLOWS_ENOMEM;
	}
	n = fread(buf, 1, COM_CERT_MAX_FILE + 1, f);
	if (ferror(f) || n > COM_CERT_MAX_FILE) {
		snprintf(errbuf, errlen,
		    ferror(f) ? "%s: cannot read it"
			      : "%s: larger than a certificate (%d bytes)",
		    path, COM_CERT_MAX_FILE);
		fclose(f);
		free(buf);
		return BELLOWS_EIO;
	}
	fclose(f);
	buf[n] = '\0';
	*ret = buf;
	return 0;
}

/* Copies the value of `name = value` (quoted or bare, trailing blanks
 * dropped) into out. Returns false for a line without '=' or a value
 * that does not fit. */
static bool
cert_value(const char *line, char *out, size_t len)
{
	const char *eq = strchr(line, '='), *v, *end;
	size_t n;

	if (eq == NULL)
		return false;
	for (v = eq + 1; *v == ' ' || *v == '\t'; v++)
		;
	if (*v == '"' || *v == '\'') {
		if ((end = strchr(v + 1, *v)) == NULL)
			return false;
		v++;
	} else {
		for (end = v + strlen(v);
		     end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
			;
	}
	n = (size_t)(end - v);
	if (n >= len)
		return false;
	memcpy(out, v, n);
	out[n] = '\0';
	return true;
}

/* The name of `name = value` (or of a section line): its first word. */
static bool
cert_name_is(const char *s, const char *name)
{
	size_t n = strlen(name);

	return strncmp(s, name, n) == 0 &&
	    (s[n] == '\0' || s[n] == ' ' || s[n] == '\t' || s[n] == '=');
}

int
com_cert_load(const char *path, com_cert *ret, char *errbuf, size_t errlen)
{
	com_cert c = { 0 };
	char derived[COM_CERT_Z85];
	char *buf, *line, *next;
	bool in_curve = false;
	unsigned lineno = 0;
	int r;

	if ((r = cert_read(path, &buf, errbuf, errlen)) != 0)
		return r;
	r = BELLOWS_EINVAL;
	for (line = buf; line != NULL; line = next) {
		char *s = line, *nl = strchr(line, '\n');
		char *key = NULL;
		size_t n;

		next = nl != NULL ? nl + 1 : NULL;
		if (nl != NULL)
			*nl = '\0';
		lineno++;
		if ((n = strlen(s)) > 0 && s[n - 1] == '\r')
			s[n - 1] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0' || *s == '#')
			continue;
		if (s == line) {
			/* A section at column 0. */
			in_curve = cert_name_is(s, "curve");
			continue;
		}
		if (!in_curve)
			continue;
		if (cert_name_is(s, "public-key"))
			key = c.public_key;
		else if (cert_name_is(s, "secret-key"))
			key = c.secret_key;
		else
			continue;
		if (!cert_value(s, key, COM_CERT_Z85) || !cert_z85_ok(key)) {
			snprintf(errbuf, errlen,
			    "%s:%u: %.10s is not a CURVE key (40 characters "
			    "of Z85)",
			    path, lineno, s);
			goto out;
		}
	}
	if (c.public_key[0] == '\0') {
		snprintf(errbuf, errlen,
		    "%s: not a CURVE certificate (no public-key in a curve "
		    "section)",
		    path);
		goto out;
	}
	if (c.secret_key[0] != '\0' &&
	    (zmq_curve_public(derived, c.secret_key) != 0 ||
		strcmp(derived, c.public_key) != 0)) {
		snprintf(errbuf, errlen,
		    "%s: its secret-key does not belong to its public-key",
		    path);
		goto out;
	}
	*ret = c;
	r = 0;
out:
	free(buf);
	return r;
}

bool
com_cert_name_ok(const char *name)
{
	size_t n;

	if (name == NULL || name[0] == '\0' || name[0] == '.')
		return false;
	n = strnlen(name, COM_CERT_NAME_MAX + 1);
	if (n > COM_CERT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			(ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
			ch == '-'))
			return false;
	}
	return true;
}

/* Writes `text` to `path` with `mode` through a temporary file renamed
 * over it, so that a reader never sees half a certificate. */
static int
cert_write(const char *path, const char *text, mode_t mode, char *errbuf,
    size_t errlen)
{
	char tmp[4200];
	size_t len = strlen(text);
	int fd, err = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", path,
		(long)getpid()) >= sizeof(tmp)) {
		snprintf(errbuf, errlen, "%s: the path is too long", path);
		return BELLOWS_EINVAL;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) {
		snprintf(errbuf, errlen, "%s: cannot create: %s", path,
		    strerror(errno));
		return BELLOWS_EIO;
	}
	/* The umask may only narrow it; the secret one must be exactly
	 * 0600 whatever the umask. */
	if (fchmod(fd, mode) != 0 || write(fd, text, len) != (ssize_t)len ||
	    fsync(fd) != 0)
		err = errno != 0 ? errno : EIO;
	if (close(fd) != 0 && err == 0)
		err = errno;
	if (err == 0 && rename(tmp, path) != 0)
		err = errno;
	if (err != 0) {
		unlink(tmp);
		snprintf(errbuf, errlen, "%s: cannot write: %s", path,
		    strerror(err));
		return BELLOWS_EIO;
	}
	return 0;
}

int
com_cert_save(const com_cert *c, const char *dir, const char *name, bool force,
    char *errbuf, size_t errlen)
{
	char key_path[4096], pub_path[4096], date[32], text[1024];
	time_t now = time(NULL);
	struct tm tm;
	int r;

	if (!com_cert_name_ok(name)) {
		snprintf(errbuf, errlen,
		    "'%s' is not a certificate name (1..255 letters, digits, "
		    "'.', '_' or '-', not starting with '.')",
		    name != NULL ? name : "");
		return BELLOWS_EINVAL;
	}
	if (!cert_z85_ok(c->public_key) || !cert_z85_ok(c->secret_key)) {
		snprintf(errbuf, errlen, "the certificate has no keypair");
		return BELLOWS_EINVAL;
	}
	if ((size_t)snprintf(key_path, sizeof(key_path), "%s/%s.key", dir,
		name) >= sizeof(key_path) ||
	    (size_t)snprintf(pub_path, sizeof(pub_path), "%s/%s.pub", dir,
		name) >= sizeof(pub_path)) {
		snprintf(errbuf, errlen, "%s: the path is too long", dir);
		return BELLOWS_EINVAL;
	}
	if (!force) {
		const char *there = access(key_path, F_OK) == 0 ? key_path
		    : access(pub_path, F_OK) == 0               ? pub_path
								: NULL;

		if (there != NULL) {
			snprintf(errbuf, errlen,
			    "%s exists (--force replaces it)", there);
			return BELLOWS_EBUSY;
		}
	}
	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(text, sizeof(text),
	    "#   ****  Generated on %s by bellows  ****\n"
	    "#   ZeroMQ CURVE **Secret** Certificate\n"
	    "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its "
	    "permissions.\n"
	    "\n"
	    "metadata\n"
	    "    name = \"%s\"\n"
	    "curve\n"
	    "    public-key = \"%s\"\n"
	    "    secret-key = \"%s\"\n",
	    date, name, c->public_key, c->secret_key);
	if ((r = cert_write(key_path, text, 0600, errbuf, errlen)) != 0)
		return r;
	snprintf(text, sizeof(text),
	    "#   ****  Generated on %s by bellows  ****\n"
	    "#   ZeroMQ CURVE Public Certificate\n"
	    "#   Exchange securely, or use a secure mechanism to verify the "
	    "contents\n"
	    "#   of this file after exchange.\n"
	    "\n"
	    "metadata\n"
	    "    name = \"%s\"\n"
	    "curve\n"
	    "    public-key = \"%s\"\n",
	    date, name, c->public_key);
	if ((r = cert_write(pub_path, text, 0644, errbuf, errlen)) != 0) {
		unlink(key_path);
		return r;
	}
	return 0;
}
