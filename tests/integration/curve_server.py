"""curve_server - a CURVE server made with pyzmq, for test_keygen_curve.sh.

    curve_server.py SECRET_CERT ALLOWED_DIR ENDPOINT_FILE

Binds a ROUTER on a loopback TCP port as a CURVE server with the keypair
of SECRET_CERT (loaded by zmq.auth.load_certificate, so a certificate
`bellows keygen` wrote must load there), and runs pyzmq's ZAP handler
(ThreadAuthenticator) allowing the public certificates in ALLOWED_DIR.
Writes the endpoint to ENDPOINT_FILE, then prints "request N bytes" for
every message that arrives (proof that a client's handshake succeeded)
and answers nothing. Runs until killed.
"""

import sys

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator


def main() -> None:
    secret, allowed, endpoint_file = sys.argv[1:4]
    public, secret_key = zmq.auth.load_certificate(secret)
    if secret_key is None:
        sys.exit(f"{secret}: no secret key")
    ctx = zmq.Context()
    auth = ThreadAuthenticator(ctx)
    auth.start()
    auth.configure_curve(domain="*", location=allowed)
    router = ctx.socket(zmq.ROUTER)
    router.curve_secretkey = secret_key
    router.curve_publickey = public
    router.curve_server = True
    router.bind("tcp://127.0.0.1:*")
    with open(endpoint_file + ".tmp", "w") as f:
        f.write(router.getsockopt_string(zmq.LAST_ENDPOINT))
    import os
    os.rename(endpoint_file + ".tmp", endpoint_file)
    while True:
        parts = router.recv_multipart()
        print(f"request {len(parts[-1])} bytes", flush=True)


if __name__ == "__main__":
    main()
