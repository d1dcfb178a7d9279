"""support - shared helpers of the Python tests: paths, bellowsd, ports.

The tests run a real bellowsd on ipc endpoints in a private temporary
directory (as tests/integration/lib.sh does) and real torch.distributed
processes on the gloo backend over loopback TCP.
"""

from __future__ import annotations

import faulthandler
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SRC = pathlib.Path(os.environ.get(
    "BELLOWS_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("BELLOWS_BUILD_ROOT", SRC / "build"))
BELLOWSD = BUILD / "controller" / "bellowsd"
BELLOWS = BUILD / "tools" / "bellows"


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bellows_has(command: str) -> bool:
    """True if `bellows help` lists ``command``."""
    out = subprocess.run([str(BELLOWS), "help"], capture_output=True,
                         text=True, timeout=10)
    return any(line.split()[:1] == [command]
               for line in (out.stdout + out.stderr).splitlines())


def bellowsd_has(option: str) -> bool:
    """True if `bellowsd --help` mentions ``option``."""
    out = subprocess.run([str(BELLOWSD), "--help"], capture_output=True,
                         text=True, timeout=10)
    return option in out.stdout + out.stderr


class Daemon:
    """A bellowsd on ipc endpoints in its own temporary directory.

    ``policy`` is the YAML text. With ``db=True`` it records its history
    in ``self.db`` when this bellowsd knows --db. Use as a context manager;
    the log is kept in ``self.log`` and printed by ``tail()``.
    """

    def __init__(self, policy: str, db: bool = False):
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="bellows-py."))
        self.control = f"ipc://{self.tmp}/control"
        self.publish = f"ipc://{self.tmp}/publish"
        self.policy = self.tmp / "policy.yaml"
        self.policy.write_text(policy)
        self.log = self.tmp / "bellowsd.log"
        self.db = self.tmp / "history.db" if db else None
        self.proc = None

    def __enter__(self) -> "Daemon":
        args = [str(BELLOWSD), "--control", self.control, "--publish",
                self.publish, "--policy", str(self.policy), "--log-level",
                "info"]
        if self.db is not None:
            args += ["--db", str(self.db)]
        elif bellowsd_has("--no-db"):
            # A bellowsd that records by default would write bellows.db
            # into the working directory.
            args += ["--no-db"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         cwd=self.tmp)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("bellowsd exited:\n" + self.tail())
            r = subprocess.run([str(BELLOWS), "status", "--control",
                                self.control, "--timeout-ms", "200"],
                               capture_output=True)
            if r.returncode == 0:
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("bellowsd did not answer STATUS:\n" + self.tail())

    def stop(self) -> int | None:
        """SIGTERM, and the exit status (None if it had to be killed)."""
        if self.proc is None:
            return None
        rc = None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            rc = self.proc.returncode
        self.proc = None
        return rc

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def __exit__(self, *exc) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def end_group() -> None:
    """Ends a spawned rank's process group: a barrier, then the teardown.

    Without the barrier, a rank that finishes first can close its gloo
    pairs while its peer still completes the last collective, and torch
    2.x aborts that peer ('terminate called without an active
    exception', SIGABRT). Callers delete their DDP models first.
    """
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def _rank_entry(rank, fn, *args) -> None:
    """A spawned rank: dumps every thread's Python stack on SIGUSR1 (to
    its stderr, the test's log), then runs fn(rank, *args)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    fn(rank, *args)


def spawn(fn, args, nprocs: int, timeout: float) -> None:
    """Runs fn(rank, *args) in ``nprocs`` torch.multiprocessing processes.

    Raises if one fails, and kills them all (then raises TimeoutError)
    if they have not finished within ``timeout`` seconds: a hung
    collective must fail the test, not the CI run. Before a hung rank is
    killed, its Python stacks are printed, to show where it hung.
    """
    import torch.multiprocessing as mp

    ctx = mp.start_processes(_rank_entry, args=(fn, *args), nprocs=nprocs,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + timeout
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        os.kill(p.pid, signal.SIGUSR1)
                time.sleep(1)
                raise TimeoutError(f"ranks still running after {timeout} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join()
