"""benchkit - what the PyTorch benchmark runners under bench/ share.

bench/accordion/run.py, bench/slimgc/run.py, bench/perfmodel/run.py and
bench/comet/run.py each start a private bellowsd with their policy file,
train on Fashion-MNIST (the first three through
examples/pytorch/fashion_mnist.py, 2 ranks, one job per configuration and
seed), read what bellowsd recorded in its history and write a markdown
report. The pieces of that they have in common live here:

    add_run_options, split_configs   --out, --build, --train-limit,
                                     --report-only; checking --configs
    Daemon, has_history              bellowsd on ipc endpoints in a private
                                     directory, waited for until it answers
    link, link_bps                   a network namespace whose loopback a
                                     token bucket limits (root only)
    job_name, run_jobs               the trainer's jobs under one bellowsd
    write_command, read_command      command.txt in the output directory
    load_runs                        the trainer's JSON summaries
    history_run, policy_metrics      the history database, read-only
    mean_std, median, table,         report helpers
    machine_line

A runner imports it with its own directory's parent on sys.path:

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    import benchkit
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Iterator, Sequence

SRC = pathlib.Path(__file__).resolve().parents[1]
TRAINER = SRC / "examples" / "pytorch" / "fashion_mnist.py"
# The trainers run under the interpreter that runs the bench when it has
# torch: run it with the torch to measure (/var/cache/bellows/torch2/bin/
# python for PyPI's torch 2.x, /usr/bin/python3 for Debian's 1.13), as
# bench/hook does; else under Debian's.
PYTHON = (sys.executable if sys.executable and
          importlib.util.find_spec("torch") is not None
          else "/usr/bin/python3")


def add_run_options(p: argparse.ArgumentParser,
                    here: pathlib.Path) -> None:
    """Adds the options every runner has: --out (default here/results),
    --build (default $BELLOWS_BUILD_DIR or build/ in the source tree),
    --train-limit and --report-only."""
    p.add_argument("--out", default=str(here / "results"))
    p.add_argument("--build", default=os.environ.get(
        "BELLOWS_BUILD_DIR", str(SRC / "build")))
    p.add_argument("--train-limit", type=int, default=0,
                   help="train on the first N images only (quick checks)")
    p.add_argument("--report-only", action="store_true",
                   help="rebuild the report from the files in --out")


def split_configs(p: argparse.ArgumentParser, value: str,
                  known: Sequence[str]) -> list[str]:
    """The comma-separated configurations of ``value``; an unknown one
    is a usage error (p.error exits)."""
    configs = value.split(",")
    for c in configs:
        if c not in known:
            p.error(f"unknown configuration {c!r}")
    return configs


def has_history(build: pathlib.Path) -> bool:
    """Whether the `bellows` of ``build`` has the history command (and its
    bellowsd therefore --db)."""
    r = subprocess.run([str(build / "tools" / "bellows"), "help"],
                       capture_output=True, text=True)
    return any(line.split()[:1] == ["history"]
               for line in (r.stdout + r.stderr).splitlines())


def link_bps(rate: str) -> int | None:
    """A token-bucket rate as tc writes it (100mbit, 1gbit, 500kbit,
    8000bit) in bits per second; None for anything else or below 8,000
    bit/s (scripts/demo.sh's link_bps, for the same rates)."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit)",
                     rate.lower())
    if m is None:
        return None
    bps = float(m[1]) * {"bit": 1, "kbit": 1e3, "mbit": 1e6,
                         "gbit": 1e9}[m[2]]
    return round(bps) if bps >= 8000 else None


@contextlib.contextmanager
def link(rate: str | None) -> Iterator[list[str]]:
    """A network namespace of its own whose loopback sends at most
    ``rate`` (a tc rate, see link_bps), with scripts/demo.sh's token
    bucket: `tc qdisc add dev lo root tbf rate RATE burst B latency
    100ms`, B 256kb, or 2mb from 500 Mbit/s (the bucket must hold a
    timer tick's worth at the rate), loopback up with MTU 9000. Yields
    the command prefix that runs a program in it (`ip netns exec NAME`):
    the trainer's ranks, gloo between them and bellowsd all talk over
    that loopback; nothing else on the machine is slowed. The namespace
    is deleted on leaving. ``rate`` None yields [] (the machine's own
    loopback). Needs root and iproute2: RuntimeError, with nothing left
    behind, when the namespace cannot be made; ValueError for a rate
    link_bps does not read."""
    if rate is None:
        yield []
        return
    bps = link_bps(rate)
    if bps is None:
        raise ValueError(f"{rate!r} is not a tc rate (e.g. 100mbit)")
    if os.geteuid() != 0:
        raise RuntimeError(f"a {rate} link needs root (a network "
                           "namespace with a token-bucket qdisc)")
    name = f"bellows-bench-{os.getpid()}-{rate.lower()}"
    burst = "2mb" if bps >= 500_000_000 else "256kb"
    steps = [["ip", "netns", "add", name],
             ["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up",
              "mtu", "9000"],
             ["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo",
              "root", "tbf", "rate", rate.lower(), "burst", burst,
              "latency", "100ms"]]
    try:
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)}: "
                                   f"{(r.stderr or r.stdout).strip()}")
        yield ["ip", "netns", "exec", name]
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


class Daemon:
    """bellowsd of ``build`` with ``policy`` on ipc endpoints in a private
    temporary directory (its working directory, removed at stop), its
    output appended to ``log`` (or written over with append=False). With
    ``db`` it records its history there; a relative path is taken in the
    private directory and goes with it. ``extra`` are further arguments;
    ``wrap`` a command prefix bellowsd and `bellows status` run under
    (link()'s). Use as a context manager or call start() and stop()."""

    def __init__(self, build: pathlib.Path, policy: pathlib.Path,
                 log: pathlib.Path, db: pathlib.Path | str | None = None,
                 extra: Sequence[str] = (), append: bool = True,
                 wrap: Sequence[str] = ()):
        build = pathlib.Path(build).resolve()  # bellowsd runs in tmp
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="bellows-bench."))
        self.control = f"ipc://{self.tmp}/control"
        self.publish = f"ipc://{self.tmp}/publish"
        self.bellowsd = build / "controller" / "bellowsd"
        self.bellows = build / "tools" / "bellows"
        self.policy = policy
        self.log = log
        self.db = self.tmp / db if db is not None else None
        self.extra = list(extra)
        self.append = append
        self.wrap = list(wrap)
        self.proc = None

    def start(self) -> None:
        """Starts bellowsd and waits (10 s at the most) until it answers
        STATUS; RuntimeError, with everything cleaned up, if it exits or
        does not answer."""
        args = [*self.wrap, str(self.bellowsd), "--policy", str(self.policy),
                "--control", self.control, "--publish", self.publish]
        if self.db is not None:
            args += ["--db", str(self.db)]
        args += self.extra
        with open(self.log, "ab" if self.append else "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log,
                                         stderr=subprocess.STDOUT,
                                         cwd=self.tmp)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"bellowsd exited; see {self.log}")
            r = subprocess.run([*self.wrap, str(self.bellows), "status",
                                "--control",
                                self.control, "--timeout-ms", "200"],
                               capture_output=True)
            if r.returncode == 0:
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"bellowsd did not answer; see {self.log}")

    def stop(self) -> None:
        """Stops bellowsd (SIGTERM, SIGKILL after 10 s) and removes the
        private directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "Daemon":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def job_name(prefix: str, config: str, seed: int | str) -> str:
    """The job (and JSON file) name of one run: PREFIXCONFIG-sSEED; seed
    "*" makes it a glob over the seeds."""
    return f"{prefix}{config}-s{seed}"


def lib_env(build: pathlib.Path) -> dict[str, str]:
    """The environment with BELLOWS_LIB set to the libbellows of
    ``build``, so that the trainers load the library of the bellowsd
    they talk to."""
    return dict(os.environ, BELLOWS_LIB=str(build / "agent" /
                                            "libbellows.so"))


def run_jobs(build: str | pathlib.Path, policy: pathlib.Path,
             out: pathlib.Path,
             jobs: Sequence[tuple[str, Sequence[str]]],
             train_limit: int = 0, db: pathlib.Path | str | None = None,
             summary: Callable[[dict], str] | None = None,
             wrap: Sequence[str] = ()) -> None:
    """Runs examples/pytorch/fashion_mnist.py, 2 ranks, once per (job,
    trainer options) of ``jobs`` in order, under one Daemon(build,
    policy, out/bellowsd.log, db, wrap=wrap), each
    writing out/JOB.json; the trainers run under ``wrap`` too (link()'s
    prefix). Prints a progress line per job: its time and, with
    ``summary``, what summary(the job's JSON) says. A failed trainer
    raises CalledProcessError; bellowsd is stopped in every case."""
    build = pathlib.Path(build).resolve()
    env = lib_env(build)
    with Daemon(build, policy, out / "bellowsd.log", db=db,
                wrap=wrap) as daemon:
        for n, (job, opts) in enumerate(jobs, 1):
            cmd = [*wrap, PYTHON, str(TRAINER), "--nproc", "2", "--job", job,
                   *opts, "--control", daemon.control,
                   "--publish", daemon.publish,
                   "--json", str(out / f"{job}.json"), "--quiet"]
            if train_limit:
                cmd += ["--train-limit", str(train_limit)]
            print(f"[{n}/{len(jobs)}] {job} ...", end=" ", flush=True)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, env=env)
            line = f"{time.perf_counter() - t0:.0f} s"
            if summary is not None:
                res = json.loads((out / f"{job}.json").read_text())
                line += ", " + summary(res)
            print(line, flush=True)


def acc_floats(res: dict, digits: int = 1) -> str:
    """A trainer summary's final test accuracy and floats sent, for
    run_jobs's progress line."""
    return (f"test acc {100 * res['final_acc']:.2f}%, "
            f"{res['floats_sent'] / 1e6:.{digits}f}M floats")


def write_command(out: pathlib.Path, words: Sequence[str],
                  stamp: bool = False) -> str:
    """Writes out/command.txt: the command line ``words`` (and with
    ``stamp`` a second line, the UTC time as a comment). Returns the
    command line."""
    command = " ".join(words)
    text = command + "\n"
    if stamp:
        text += datetime.datetime.now(datetime.timezone.utc).strftime(
            "# %Y-%m-%d %H:%M UTC\n")
    (out / "command.txt").write_text(text)
    return command


def read_command(out: pathlib.Path, default: str = "?") -> str:
    """The first line of out/command.txt, ``default`` without one."""
    f = out / "command.txt"
    if not f.exists():
        return default
    lines = f.read_text().splitlines()
    return lines[0].strip() if lines else default


def load_runs(out: pathlib.Path, prefix: str, configs: Sequence[str],
              seed: int | str = "*") -> dict[str, list[dict]]:
    """The trainer summaries out/job_name(prefix, config, seed).json per
    configuration (all seeds by default), in file name order; a
    configuration without any has an empty list."""
    return {c: [json.loads(f.read_text()) for f in
                sorted(out.glob(f"{job_name(prefix, c, seed)}.json"))]
            for c in configs}


@contextlib.contextmanager
def history_run(db: pathlib.Path, job: str
                ) -> Iterator[tuple[sqlite3.Connection | None, int | None]]:
    """The history database ``db`` opened read-only and the id of the
    latest run of ``job`` in it: (connection, run id), (connection,
    None) if the job has no run, (None, None) if there is no database.
    The connection is closed on leaving; sqlite3.Error passes through."""
    if not db.exists():
        yield None, None
        return
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        run = con.execute("SELECT id FROM runs WHERE job = ? ORDER BY id "
                          "DESC LIMIT 1", (job,)).fetchone()
        yield con, (run[0] if run is not None else None)
    finally:
        con.close()


def policy_metrics(con: sqlite3.Connection, run: int,
                   policy: str) -> list[tuple]:
    """The policy metrics (window, name, layer, value) of ``run`` whose
    policy name starts with ``policy``, by window, name and layer."""
    return con.execute(
        "SELECT window, name, layer, value FROM policy_metrics WHERE "
        "run_id = ? AND policy LIKE ? ORDER BY window, name, layer",
        (run, policy + "%")).fetchall()


def mean_std(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    m = statistics.fmean(xs)
    return m, (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def median(xs: Sequence[float], empty: float = float("nan")) -> float:
    """The median of ``xs``, ``empty`` if there is none."""
    return statistics.median(xs) if xs else empty


def table(header: Sequence[str], rows: Sequence[Sequence[object]] = ()
          ) -> list[str]:
    """A markdown table's lines: the header, its rule, one line a row."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    return lines + [row(r) for r in rows]


def row(cells: Sequence[object]) -> str:
    """One line of a markdown table."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def machine_line() -> str:
    """"Machine: host, N CPUs, platform; Python and torch" for a
    report: the trainers' interpreter and its torch (PYTHON)."""
    try:
        r = subprocess.run([PYTHON, "-c", "import torch; "
                            "print(torch.__version__)"],
                           capture_output=True, text=True, timeout=120)
        torch_version = r.stdout.strip() or "none"
    except (OSError, subprocess.SubprocessError):
        torch_version = "unknown"
    return (f"Machine: {platform.node()}, {os.cpu_count()} CPUs, "
            f"{platform.platform()}; trainers: {PYTHON}, torch "
            f"{torch_version}")
