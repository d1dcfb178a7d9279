#!/usr/bin/python3
"""bellowsd tells a service manager READY=1 once its sockets accept
connections and STOPPING=1 on SIGTERM (controller/notify.c).

The test owns a unix datagram socket, as systemd does for Type=notify,
and starts bellowsd (with a history database and the metrics listener)
with NOTIFY_SOCKET naming it and nothing else of systemd's. When READY=1
arrives, `bellows status` on the control endpoint and GET /metrics must
answer at once and the start line (written after the history is
recovered) must be in the log; SIGTERM must then bring STOPPING=1 and a
clean exit. Skipped (77) where bellowsd was built without libsystemd.
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request

BUILD = pathlib.Path(os.environ["BELLOWS_BUILD_ROOT"])
BELLOWSD = BUILD / "controller" / "bellowsd"
BELLOWS = BUILD / "tools" / "bellows"
POLICY = """\
daemon: {apply_lag: 1, heartbeat_ms: 200}
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 2}
"""


def fail(msg: str, log: pathlib.Path | None = None) -> None:
    print("FAIL:", msg)
    if log is not None and log.exists():
        print("---- bellowsd log ----\n" + log.read_text(errors="replace"))
    sys.exit(1)


def receive(sock: socket.socket, log: pathlib.Path) -> dict[str, str]:
    """One notification as KEY -> VALUE (30 s for bellowsd to send it)."""
    sock.settimeout(30)
    try:
        data = sock.recv(4096).decode()
    except socket.timeout:
        fail("no notification within 30 s", log)
    return dict(line.split("=", 1) for line in data.splitlines() if "=" in line)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    if os.environ.get("BELLOWS_HAVE_SYSTEMD") != "1":
        print("SKIP: bellowsd built without libsystemd")
        sys.exit(77)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bellows-notify."))
    (tmp / "policy.yaml").write_text(POLICY)
    log = tmp / "bellowsd.log"
    control = f"ipc://{tmp}/control"
    port = free_port()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp / "notify"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("NOTIFY_SOCKET", "JOURNAL_STREAM")}
    env["NOTIFY_SOCKET"] = str(tmp / "notify")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(BELLOWSD), "--policy", str(tmp / "policy.yaml"),
             "--control", control, "--publish", f"ipc://{tmp}/publish",
             "--db", str(tmp / "bellows.db"),
             "--metrics-listen", f"127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        ready = receive(sock, log)
        if ready.get("READY") != "1":
            fail(f"first notification is not READY=1: {ready}", log)
        # At once: no retry, the sockets must already accept.
        st = subprocess.run([str(BELLOWS), "status", "--control", control,
                             "--timeout-ms", "5000"], capture_output=True,
                            text=True, timeout=30)
        if st.returncode != 0:
            fail(f"READY=1 but status fails: {st.stdout}{st.stderr}", log)
        with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            if r.status != 200 or b"bellows_" not in r.read():
                fail("READY=1 but /metrics does not serve", log)
        if f"control {control}, publish" not in log.read_text():
            fail("READY=1 before the start line was logged", log)
        print(f"ok: READY=1 ({ready.get('STATUS', '')}) arrives when the "
              "control endpoint and /metrics already answer")
        proc.send_signal(signal.SIGTERM)
        stopping = receive(sock, log)
        if stopping.get("STOPPING") != "1":
            fail(f"after SIGTERM the notification is not STOPPING=1: "
                 f"{stopping}", log)
        rc = proc.wait(30)
        if rc != 0:
            fail(f"bellowsd exited {rc} after SIGTERM", log)
        print("ok: SIGTERM brings STOPPING=1 and a clean exit")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
        for p in sorted(tmp.rglob("*"), reverse=True):
            p.unlink() if not p.is_dir() else p.rmdir()
        tmp.rmdir()


if __name__ == "__main__":
    main()
