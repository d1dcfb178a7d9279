#!/usr/bin/env python3
"""slow_clients.py - how long a /metrics scrape takes while slow clients
hold connections to bellowsd.

    python3 bench/metrics/slow_clients.py [--build build] [--scrapes 40]
        [--clients 0,1,24,50,120]

Starts a real bellowsd (--no-db, --metrics-listen on a free loopback
port). For each count N of --clients it opens N connections, half of
them silent and half sending one byte of a request line every 2 s, waits
0.5 s, then runs `curl` --scrapes times in a row (each a new process and
connection, as Prometheus' scrape is a new request), records curl's
time_total, and closes the N. Connections are re-opened for every count,
so none reaches its 5 s deadline during its round when the scrapes are
fast. Prints one line per N: median, p99 and max scrape time, failures,
and the load (uptime) when the round began.
"""
import argparse
import os
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


def trickle(socks, stop):
    """Sends one byte of a request line to each socket every 2 s."""
    line = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
    pos = 0
    while not stop.wait(2.0):
        for s in socks:
            try:
                s.send(line[pos % len(line):pos % len(line) + 1])
            except OSError:
                pass
        pos += 1


def scrape(port):
    r = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "--max-time", "120",
         "-w", "%{http_code} %{time_total}",
         "http://127.0.0.1:%d/metrics" % port],
        capture_output=True, text=True)
    code, took = (r.stdout.split() + ["0", "0"])[:2]
    return code == "200", float(took)


def round_(port, n, scrapes):
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    stop = threading.Event()
    t = threading.Thread(target=trickle, args=(socks[: n // 2], stop))
    t.start()
    time.sleep(0.5)
    load = os.getloadavg()[0]
    times, failed = [], 0
    for _ in range(scrapes):
        ok, took = scrape(port)
        if ok:
            times.append(took)
        else:
            failed += 1
    stop.set()
    t.join()
    for s in socks:
        s.close()
    return times, failed, load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--scrapes", type=int, default=40)
    ap.add_argument("--clients", default="0,1,24,50,120")
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
        print("clients  median_ms  p99_ms  max_ms  failed  load1")
        for n in [int(x) for x in a.clients.split(",")]:
            times, failed, load = round_(port, n, a.scrapes)
            times.sort()
            p99 = times[min(len(times) - 1, int(0.99 * len(times)))] if times else 0
            print("%7d  %9.2f  %6.2f  %6.2f  %6d  %5.2f" % (
                n, 1000 * statistics.median(times) if times else 0,
                1000 * p99, 1000 * (times[-1] if times else 0), failed, load))
            sys.stdout.flush()
    finally:
        d.terminate()
        d.wait()


if __name__ == "__main__":
    main()
