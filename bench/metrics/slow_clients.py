#!/usr/bin/env python3
"""slow_clients.py - how long a /metrics scrape takes while slow clients
hold connections to bellowsd.

    python3 bench/metrics/slow_clients.py [--build build] [--scrapes 10]
        [--clients 0,120,500,1000] [--interval 0.5] [--settle 1]

Starts a real bellowsd (--no-db, --metrics-listen on a free loopback
port). For each count N of --clients an attacker thread keeps N
connections open: half of them silent and half sending one byte of a
request line every 2 s, each re-opened as soon as the server closes it
(connects are non-blocking, so a connection still in the listen backlog
or in SYN retries counts as held). After --settle seconds it runs `curl`
--scrapes times (each a new process and connection, as Prometheus'
scrape is a new request; --interval seconds apart), records curl's
time_total, and closes the N. Prints one line per N: median, p99 and max
scrape time, failures, how many connections the server closed during
the round, bellowsd's CPU time during the round as a share of one core,
and the load (uptime) when the round began.
"""
import argparse
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Attacker:
    """Keeps n connections to port open, re-opening each one the server
    closes; every 2 s sends one byte of a request line on half of them."""

    LINE = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"

    def __init__(self, port, n):
        self.port, self.n = port, n
        self.socks = [self.connect() for _ in range(n)]
        self.closed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def connect(self):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        return s

    def run(self):
        pos, next_byte = 0, time.monotonic() + 2.0
        while not self.stop.is_set():
            poll = select.poll()
            by_fd = {s.fileno(): i for i, s in enumerate(self.socks)}
            for fd in by_fd:
                poll.register(fd, select.POLLIN)
            for fd, _ in poll.poll(100):
                i = by_fd[fd]
                try:
                    data = self.socks[i].recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.socks[i].close()
                    self.socks[i] = self.connect()
                    self.closed += 1
            if time.monotonic() >= next_byte:
                for s in self.socks[: self.n // 2]:
                    try:
                        s.send(self.LINE[pos % len(self.LINE):][:1])
                    except OSError:
                        pass
                pos += 1
                next_byte += 2.0

    def close(self):
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()


def scrape(port):
    r = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "--max-time", "120",
         "-w", "%{http_code} %{time_total}",
         "http://127.0.0.1:%d/metrics" % port],
        capture_output=True, text=True)
    code, took = (r.stdout.split() + ["0", "0"])[:2]
    return code == "200", float(took)


def cpu_s(pid):
    """CPU time (user + system) the process has used, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_(pid, port, n, scrapes, interval, settle):
    cpu0, t0 = cpu_s(pid), time.monotonic()
    attacker = Attacker(port, n)
    time.sleep(settle)
    load = os.getloadavg()[0]
    times, failed = [], 0
    for i in range(scrapes):
        if i > 0:
            time.sleep(interval)
        ok, took = scrape(port)
        if ok:
            times.append(took)
        else:
            failed += 1
    attacker.close()
    cpu = (cpu_s(pid) - cpu0) / (time.monotonic() - t0)
    return times, failed, attacker.closed, cpu, load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--scrapes", type=int, default=10)
    ap.add_argument("--clients", default="0,120,500,1000")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--settle", type=float, default=1.0)
    a = ap.parse_args()
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="bellows-bench-metrics.")
    policy = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "..", "..", "examples", "policies", "fixed.yaml")
    d = subprocess.Popen(
        [os.path.join(a.build, "controller", "bellowsd"), "--policy", policy,
         "--no-db", "--control", "ipc://%s/c" % tmp,
         "--publish", "ipc://%s/p" % tmp,
         "--metrics-listen", "127.0.0.1:%d" % port],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if scrape(port)[0]:
                break
            time.sleep(0.05)
        print("clients  median_ms  p99_ms  max_ms  failed    cut  cpu  load1")
        for n in [int(x) for x in a.clients.split(",")]:
            times, failed, cut, cpu, load = round_(d.pid, port, n, a.scrapes,
                                                   a.interval, a.settle)
            times.sort()
            p99 = times[min(len(times) - 1, int(0.99 * len(times)))] if times else 0
            print("%7d  %9.2f  %6.2f  %6.2f  %6d  %5d  %3.0f%%  %5.2f" % (
                n, 1000 * statistics.median(times) if times else 0,
                1000 * p99, 1000 * (times[-1] if times else 0), failed,
                cut, 100 * cpu, load))
            sys.stdout.flush()
    finally:
        d.terminate()
        d.wait()


if __name__ == "__main__":
    main()
