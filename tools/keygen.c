/* keygen - `bellows keygen`, see keygen.h.
 */
#include "keygen.h"

#include "common/cert.h"

#include <bellows/error.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void
tool_keygen_usage(FILE *f)
{
	fprintf(f,
	    "usage: bellows keygen --out DIR --name NAME [--force]\n"
	    "\n"
	    "  Writes a new CURVE keypair as DIR/NAME.key (secret, mode 0600)\n"
	    "  and DIR/NAME.pub (public), in ZeroMQ's certificate format\n"
	    "  (czmq's zcert_save, pyzmq's zmq.auth). Give bellowsd its\n"
	    "  NAME.key and each client its own NAME.key; the .pub files are\n"
	    "  what the other side trusts (docs/security.md).\n"
	    "\n"
	    "  --out DIR    the folder to write into (must exist)\n"
	    "  --name NAME  1..255 letters, digits, '.', '_', '-' (no leading\n"
	    "               '.'); a client's NAME is how bellowsd's job table\n"
	    "               names it\n"
	    "  --force      replace an existing NAME.key / NAME.pub\n"
	    "\n"
	    "  Prints the public key and the two paths. Exits 0 when written,\n"
	    "  1 when not (a file exists without --force, DIR cannot be\n"
	    "  written), 2 on a usage error.\n");
}

int
tool_keygen_main(int argc, char **argv)
{
	const char *dir = NULL, *name = NULL;
	bool force = false;
	char err[512];
	com_cert c;
	int r;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			tool_keygen_usage(stdout);
			return 0;
		} else if (strcmp(a, "--force") == 0) {
			force = true;
		} else if ((strcmp(a, "--out") == 0 ||
			       strcmp(a, "--name") == 0) &&
		    i + 1 < argc) {
			if (a[2] == 'o')
				dir = argv[++i];
			else
				name = argv[++i];
		} else {
			fprintf(stderr, "bellows keygen: %s '%s'\n",
			    strcmp(a, "--out") == 0 || strcmp(a, "--name") == 0
				? "missing the value of"
				: "unknown argument",
			    a);
			tool_keygen_usage(stderr);
			return 2;
		}
	}
	if (dir == NULL || dir[0] == '\0' || name == NULL) {
		fprintf(stderr, "bellows keygen: missing %s\n",
		    dir == NULL || dir[0] == '\0' ? "--out DIR"
						  : "--name NAME");
		tool_keygen_usage(stderr);
		return 2;
	}
	if (!com_cert_name_ok(name)) {
		fprintf(stderr,
		    "bellows keygen: --name must be 1..255 letters, digits, "
		    "'.', '_' or '-' not starting with '.', not '%s'\n",
		    name);
		return 2;
	}
	if ((r = com_cert_generate(&c)) != 0) {
		fprintf(stderr, "bellows keygen: cannot draw a keypair: %s\n",
		    r == BELLOWS_ENOTSUP ? "this libzmq has no CURVE"
					 : bellows_strerror(r));
		return 1;
	}
	r = com_cert_save(&c, dir, name, force, err, sizeof(err));
	explicit_bzero(c.secret_key, sizeof(c.secret_key));
	if (r != 0) {
		fprintf(stderr, "bellows keygen: %s\n", err);
		return 1;
	}
	printf("public-key %s\n"
	       "secret     %s/%s.key\n"
	       "public     %s/%s.pub\n",
	    c.public_key, dir, name, dir, name);
	return fflush(stdout) == 0 ? 0 : 1;
}
