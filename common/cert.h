/* cert - CURVE certificates in ZeroMQ's certificate text format.
 *
 * A certificate is a keypair (a secret certificate) or a public key alone
 * (a public certificate), written as ZPL, the text czmq's zcert_save and
 * pyzmq's zmq.auth write: comment lines, a `metadata` section, and a
 * `curve` section holding `public-key` and, for a secret certificate,
 * `secret-key`, each 40 characters of Z85. So certificates made with those
 * tools load here, and ours load there. bellows names them NAME.key
 * (secret, mode 0600) and NAME.pub (public), but loading takes any name.
 * Keys come from libzmq (zmq_curve_keypair): no cryptography here.
 * Thread-safe: no state.
 */
#ifndef COM_CERT_H
#define COM_CERT_H

#include <stdbool.h>
#include <stddef.h>

#define COM_CERT_Z85      41    /* a Z85 key's 40 characters and a NUL */
#define COM_CERT_MAX_FILE 65536 /* bytes of a certificate file read */
#define COM_CERT_NAME_MAX 255   /* bytes of a certificate's NAME */

typedef struct com_cert {
	char public_key[COM_CERT_Z85]; /* Z85 */
	char secret_key[COM_CERT_Z85]; /* Z85; "" in a public certificate */
} com_cert;

/* Draws a new keypair into *ret. Returns 0, BELLOWS_ENOTSUP when libzmq
 * was built without CURVE, or BELLOWS_ESYS when it cannot make one; *ret
 * is untouched on failure. */
int com_cert_generate(com_cert *ret);

/* Reads the certificate at `path` into *ret (a public one leaves
 * secret_key ""). Returns 0; BELLOWS_ENOTFOUND when there is no such
 * file, BELLOWS_EIO when it cannot be read (or is larger than
 * COM_CERT_MAX_FILE), BELLOWS_EINVAL when it is not a certificate (no
 * curve section, no public key, a key that is not Z85 of 32 bytes, a
 * secret key that does not match the public one); errbuf then holds a
 * message naming the file (and the line, where there is one) and *ret is
 * untouched. */
int com_cert_load(const char *path, com_cert *ret, char *errbuf, size_t errlen);

/* Writes `c` as DIR/NAME.key (both keys, mode 0600, created that way) and
 * DIR/NAME.pub (the public key, mode 0644). NAME is 1..255 bytes of
 * letters, digits, '.', '_' and '-', not starting with '.'. Without
 * `force` an existing file is left alone. Returns 0; BELLOWS_EINVAL for a
 * bad name or a certificate without a secret key; BELLOWS_EBUSY when a
 * file exists and `force` is false; BELLOWS_EIO when a file cannot be
 * written (nothing half-written is left behind). errbuf holds why. */
int com_cert_save(const com_cert *c, const char *dir, const char *name,
    bool force, char *errbuf, size_t errlen);

/* True when `name` is a valid certificate NAME (see com_cert_save). */
bool com_cert_name_ok(const char *name);

#endif /* COM_CERT_H */
