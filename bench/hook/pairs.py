"""bench/hook/pairs - two configs' step ratio over runs of two trees.

An A/B comparison of two trees (say main and a branch) on this shared
machine alternates whole bench/hook runs, one tree after the other; a
single run's ratio swings with the load by more than a change of a few
per cent. This reads the runs' times.json and prints, per run, the
median over rounds of NUM's round median over DEN's (the ratio the
report gives), the CPU per step of DEN minus plain's, and, per group of
runs, every round of every run pooled: the median of those per-round
ratios and their quartiles. A run belongs to the group its directory
name ends in after the last '-' (t2-1gbit-3-main -> main).

    python3 bench/hook/pairs.py [--num torch-psgd] [--den psgd] DIR...
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys


def round_ratios(times: dict, num: str, den: str) -> list[float]:
    """Per round, num's median step over den's."""
    return [statistics.median(a) / statistics.median(b)
            for a, b in zip(times[num], times[den])]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num", default="torch-psgd")
    p.add_argument("--den", default="psgd")
    p.add_argument("dirs", nargs="+", type=pathlib.Path)
    args = p.parse_args(argv)
    pooled: dict[str, list[float]] = {}
    print("| run | rounds | median ratio | CPU per step, "
          f"{args.den} - plain |")
    print("|---|---|---|---|")
    for d in args.dirs:
        try:
            res = json.loads((d / "times.json").read_text())
        except (OSError, ValueError) as e:
            print(f"pairs: {d}: {e}", file=sys.stderr)
            return 1
        times = res["times"]
        if args.num not in times or args.den not in times:
            print(f"pairs: {d}: no {args.num} or {args.den} config",
                  file=sys.stderr)
            return 1
        rs = round_ratios(times, args.num, args.den)
        cpu = res.get("cpu", {})
        extra = ""
        if args.den in cpu and "plain" in cpu:
            diff = (statistics.median(cpu[args.den])
                    - statistics.median(cpu["plain"]))
            extra = f"{diff:+.2f} ms"
        print(f"| {d.name} | {len(rs)} | {statistics.median(rs):.3f} | "
              f"{extra} |")
        pooled.setdefault(d.name.rsplit("-", 1)[-1], []).extend(rs)
    print()
    for group, rs in pooled.items():
        q = statistics.quantiles(rs, n=4) if len(rs) > 1 else rs * 3
        print(f"{group}: {len(rs)} rounds pooled, median "
              f"{statistics.median(rs):.3f}, quartiles {q[0]:.3f}-"
              f"{q[2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
