#!/usr/bin/env python3
"""demo_summary.py - what a run bought, in plain words, from its history.

    scripts/demo_summary.py --db FILE [--run ID] [--link RATE]
                            [--raw-db FILE [--raw-run ID]] [--bellows PATH]
                            [--compare-db FILE]

Reads bellowsd's SQLite history (read-only; the schema is docs/history.md)
and prints, for one run (default: the latest):

- what the policies decided and when: every decision that changed a knob,
  with its window, step, time into the run and reason;
- what they saved, in the words of docs/history.md#sent-raw-and-saved:
  gradient bytes and floats sent against raw (float32, 4 bytes a float);
  for COMET, the activation bytes held for backward against uncompressed;
  the median step time of the windows that compressed against that of
  the run's own windows sent raw (the trainer's --raw-windows, the gate
  off, every tensor under the threshold), or, when --raw-db names one,
  the run's median step against that raw run's; the final test accuracy
  and loss;
- where a policy chose not to compress, why, in its own measurements:
  SlimGC's per-tensor raw send time against compressed send plus
  encode+decode, perfmodel's predicted step times raw and compressed;
- the `bellows history` commands that show more, ready to paste, with
  `bellows history compare` against --compare-db's latest run when given;
- GComp's bits per value against float32's 32 and ResiReduce's residual
  floats kept against one residual per tensor, from their policies'
  metrics.

Every number comes from the history; nothing is assumed about the policy
but the table names. Exit status 0, 1 when the history cannot be read or
holds no run, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import pathlib
import shlex
import sqlite3
import sys

ALL_RAW = 9.2e18  # a size threshold past every tensor: nothing compressed


def size(n: float) -> str:
    """Bytes as people read them, decimal as every bellows tool writes
    them (common/units.h): 1.2 GB, 7.56 MB, 512 B."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 999.5 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1000.0
    return f"{n:.3g} TB"


def count(n: float) -> str:
    """A count of floats: 301M, 8.49M, 512 (as common/units.h writes it
    for every bellows tool)."""
    for unit in ("", "k", "M", "G", "T"):
        if abs(n) < 999.5 or unit == "T":
            return f"{n:.0f}" if unit == "" else f"{n:.3g}{unit}"
        n /= 1000.0
    return f"{n:.3g}T"


def ms(v: float) -> str:
    """A duration: 12.3 ms, 1.52 s."""
    return f"{v:.3g} ms" if abs(v) < 1000 else f"{v / 1000:.3g} s"


def less(raw: float, sent: float) -> str:
    """raw / sent as "4.0x less", or "no less" when nothing was saved."""
    if sent <= 0 or raw <= sent:
        return "no less"
    return f"{raw / sent:.1f}x less"


def value(knob: str, v) -> str:
    if v is None:
        return "-"
    if knob == "size_threshold":
        return "all raw" if v >= ALL_RAW else size(v)
    if knob == "compression":
        return "on" if v else "off"
    return f"{v:g}"


def one(db: sqlite3.Connection, sql: str, *args):
    row = db.execute(sql, args).fetchone()
    return row


def has_table(db: sqlite3.Connection, name: str) -> bool:
    return one(db, "SELECT 1 FROM sqlite_master WHERE type IN "
               "('table', 'view') AND name = ?", name) is not None


def open_db(path: str) -> sqlite3.Connection:
    uri = pathlib.Path(path).resolve().as_uri() + "?mode=ro"
    return sqlite3.connect(uri, uri=True)


def latest_run(db: sqlite3.Connection) -> int | None:
    row = one(db, "SELECT max(id) FROM runs")
    return row[0] if row else None


def totals(db: sqlite3.Connection, run: int) -> dict:
    """Floats and bytes sent and raw, all ranks, and the step time."""
    f = one(db, "SELECT coalesce(sum(floats_sent), 0),"
            " coalesce(sum(floats_raw), 0), count(*) FROM window_info"
            " WHERE run_id = ?", run)
    b = one(db, "SELECT coalesce(sum(bytes_sent), 0) FROM timings"
            " WHERE run_id = ?", run)
    steps = [r[0] for r in db.execute(
        "SELECT step_ms_median FROM window_info WHERE run_id = ?"
        " AND step_ms_median > 0 ORDER BY step_ms_median", (run,))]
    return {"floats_sent": f[0], "floats_raw": f[1], "windows": f[2],
            "bytes_sent": b[0], "bytes_raw": 4 * f[1],
            "step_ms": steps[len(steps) // 2] if steps else None}


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def step_split(db: sqlite3.Connection, run: int) -> dict:
    """The median step time of the windows sent raw (every float sent as
    raw: level 0, under the size threshold, the gate off, the raw
    baseline) and of those that compressed, with their counts."""
    raw, comp = [], []
    for sent, full, ms_ in db.execute(
            "SELECT floats_sent, floats_raw, step_ms_median FROM window_info"
            " WHERE run_id = ? AND step_ms_median > 0", (run,)):
        if full and sent is not None and sent < full:
            comp.append(ms_)
        else:
            raw.append(ms_)
    return {"raw_ms": _median(raw), "raw_n": len(raw),
            "comp_ms": _median(comp), "comp_n": len(comp)}


def final_eval(db: sqlite3.Connection, run: int):
    """(accuracy 0..1, loss) of the run's last evaluated window, or None."""
    try:
        row = one(db, "SELECT eval_accuracy, eval_loss FROM window_info"
                  " WHERE run_id = ? AND eval_accuracy > 0"
                  " ORDER BY window DESC LIMIT 1", run)
    except sqlite3.Error:  # a history from before evaluations
        return None
    return row


def windows_word(n: int) -> str:
    return f"{n} window" + ("" if n == 1 else "s")


def decisions(db: sqlite3.Connection, run: int, started: int):
    """Decisions that changed something: (seq, window, step, s, policy,
    reason, [changes])."""
    out = []
    for seq, window, step, wall, policy, reason in db.execute(
            "SELECT seq, window, apply_step, wall_ms, policy, reason"
            " FROM decisions WHERE run_id = ? ORDER BY seq", (run,)):
        ch = []
        for layer, knob, old, new in db.execute(
                "SELECT coalesce(l.name, '#' || c.layer), c.knob, c.old,"
                " c.new FROM decision_changes c LEFT JOIN layers l"
                " ON l.run_id = c.run_id AND l.idx = c.layer"
                " WHERE c.run_id = ? AND c.seq = ? ORDER BY c.rowid",
                (run, seq)):
            what = knob if layer is None else f"{layer} {knob}"
            if old is None:
                ch.append(f"{what} {value(knob, new)}")
            else:
                ch.append(f"{what} {value(knob, old)} -> "
                          f"{value(knob, new)}")
        if ch:
            out.append((seq, window, step, (wall - started) / 1000.0,
                        policy, reason or "", ch))
    return out


def metrics(db: sqlite3.Connection, run: int, window: int) -> dict:
    if not has_table(db, "policy_metrics"):
        return {}
    return {(p, n): v for p, n, v in db.execute(
        "SELECT policy, name, value FROM policy_metrics WHERE run_id = ?"
        " AND window = ? AND layer IS NULL", (run, window))}


def last_metric_window(db: sqlite3.Connection, run: int, name: str):
    if not has_table(db, "policy_metrics"):
        return None
    row = one(db, "SELECT max(window) FROM policy_metrics WHERE run_id = ?"
              " AND name = ?", run, name)
    return row[0] if row else None


def say_comet(db, run, p) -> None:
    row = one(db, "SELECT w.window, sum(w.act_bytes), sum(w.act_raw_bytes),"
              " count(*) FROM windows w WHERE w.run_id = ? AND"
              " w.act_steps > 0 AND w.window = (SELECT max(window) FROM"
              " windows WHERE run_id = ? AND act_steps > 0)", run, run)
    if row is None or row[0] is None:
        return False
    window, held, raw, n = row
    if not raw or held >= raw:
        return False  # nothing held compressed
    p(f"  activations: held {size(held)} per step for backward against "
      f"{size(raw)} uncompressed ({less(raw, held)}), {n} layers' saved "
      f"inputs, window {window}")
    return True


def policy_types(db: sqlite3.Connection, run: int) -> dict:
    """{instance name: policy type} from the policy file the run was
    decided under (policy_files by the run's config_hash); {} when the
    file is not recorded or not readable."""
    row = one(db, "SELECT f.text FROM runs r JOIN policy_files f ON"
              " f.hash = r.config_hash WHERE r.id = ?", run)
    if row is None:
        return {}
    try:
        import yaml
        doc = yaml.safe_load(row[0]) or {}
    except Exception:  # no PyYAML, or a file it cannot read: no names
        return {}
    out = {}
    for job in doc.get("jobs") or []:
        for pol in (job or {}).get("policies") or []:
            if isinstance(pol, dict) and pol.get("type"):
                out[str(pol.get("name") or pol["type"])] = str(pol["type"])
    return out


def named(policy: str, types: dict) -> str:
    """An instance name with its type when they differ: "cttab (slimgc)"."""
    t = types.get(policy)
    return f"{policy} ({t})" if t and t != policy else policy


def calibration(db, run):
    """Per tensor, the sends SlimGC's last calibration measured: windows
    before the one the decision that set the size threshold is in force
    for (a decision's window is the one after the window it read) that had both
    raw and compressed sends of the tensor, their medians weighted by
    their sends. Returns (window, rows of (name, numel, raw ms, sends,
    compressed ms, sends, codec ms)), largest tensor first, or None."""
    d = one(db, "SELECT max(d.window) FROM decision_changes c JOIN"
            " decisions d ON d.run_id = c.run_id AND d.seq = c.seq WHERE"
            " c.run_id = ? AND c.knob = 'size_threshold'", run)
    if d is None or d[0] is None:
        return None
    window = d[0]
    rows = list(db.execute(
        "SELECT l.name, l.numel,"
        " sum(w.comm_raw_ms * w.comm_raw_n) / sum(w.comm_raw_n),"
        " sum(w.comm_raw_n),"
        " sum(w.comm_comp_ms * w.comm_comp_n) / sum(w.comm_comp_n),"
        " sum(w.comm_comp_n),"
        " sum(coalesce(w.codec_ms, 0) * w.comm_comp_n) / sum(w.comm_comp_n)"
        " FROM windows w JOIN layers l ON l.run_id = w.run_id AND"
        " l.idx = w.layer WHERE w.run_id = ? AND w.window < ? AND"
        " w.comm_raw_n > 0 AND w.comm_comp_n > 0 AND w.comm_raw_ms IS NOT"
        " NULL AND w.comm_comp_ms IS NOT NULL GROUP BY w.layer"
        " ORDER BY l.numel DESC, l.idx", (run, window)))
    return (window - 1, rows) if rows else None


def say_slimgc(db, run, p) -> None:
    th = one(db, "SELECT state_size_threshold, window FROM window_info"
             " WHERE run_id = ? ORDER BY window DESC LIMIT 1", run)
    if th is None:
        return
    threshold, window = th
    ever = one(db, "SELECT max(state_size_threshold) FROM window_info"
               " WHERE run_id = ?", run)[0]
    knobs = one(db, "SELECT count(*) FROM decision_changes WHERE"
                " run_id = ? AND knob IN ('size_threshold',"
                " 'calibrate_steps')", run)[0]
    if not ever and not knobs:
        return  # no size threshold in this run
    if threshold >= ALL_RAW:
        line = "  size threshold: all raw (every tensor sent uncompressed)"
    elif threshold > 0:
        line = (f"  size threshold: {size(threshold)} (tensors smaller "
                f"than this are sent raw, larger ones compressed)")
    else:
        line = "  size threshold: none (every tensor compressed)"
    # Why it is what it is: the reason of the decision that set it (a
    # calibration's verdict, or a verification in progress or over).
    why = one(db, "SELECT d.window, d.reason FROM decision_changes c JOIN"
              " decisions d ON d.run_id = c.run_id AND d.seq = c.seq WHERE"
              " c.run_id = ? AND c.knob = 'size_threshold' ORDER BY c.seq"
              " DESC LIMIT 1", run)
    if why is not None and why[1]:
        reason = why[1] if len(why[1]) <= 200 else why[1][:197] + "..."
        line += f", from window {why[0]}: {reason}"
    p(line)
    vw = last_metric_window(db, run, "verify_kept")
    if vw is not None:
        m = {n: v for (_, n), v in metrics(db, run, vw).items()}
        comp, raw = m.get("verify_comp_ms"), m.get("verify_raw_ms")
        if comp is not None and raw is not None:
            p(f"    verified by step time (window {vw}): {ms(comp)} per "
              f"step under the calibrated threshold against {ms(raw)} "
              f"with every tensor raw: "
              + ("kept" if m.get("verify_kept") else
                 "every tensor stays raw"))
    cal = calibration(db, run)
    if cal is None:
        return
    decided, rows = cal
    p(f"    as the calibration measured it (the sends up to window "
      f"{decided}, after which the threshold was set; medians weighted "
      f"by sends):")
    for name, numel, raw, n_raw, comp, n_comp, codec in rows[:6]:
        codec = codec or 0.0
        verdict = ("compressing is slower" if comp + codec >= raw
                   else "compressing is faster")
        p(f"    {name} ({size(4 * numel)}): raw send {raw:.3f} ms "
          f"({n_raw} sends), compressed send {comp:.3f} ms ({n_comp}) + "
          f"encode+decode {codec:.3f} ms = {comp + codec:.3f} ms: "
          f"{verdict}")


def say_gcomp(db, run, p) -> None:
    """GComp: the bits per value the table in force codes the compressed
    layers' values in (numel-weighted), against float32's 32, and the
    bits the ranks' sends took."""
    w = last_metric_window(db, run, "bits_per_value")
    if w is None:
        return
    row = one(db, "SELECT sum(m.value * l.numel), sum(l.numel), count(*)"
              " FROM policy_metrics m JOIN layers l ON l.run_id = m.run_id"
              " AND l.idx = m.layer WHERE m.run_id = ? AND m.window = ? AND"
              " m.name = 'bits_per_value'", run, w)
    if row is None or not row[1]:
        return
    bits = row[0] / row[1]
    p(f"  GComp: {bits:.2f} bits per value against float32's 32 "
      f"({32 / bits:.2f}x less) in the {row[2]} tensors it codes, "
      f"by the table in force at window {w}")


def say_resireduce(db, run, p) -> None:
    """ResiReduce: the error-feedback residual floats kept under the plan
    in force, against one full residual per compressed tensor."""
    w = last_metric_window(db, run, "resid_floats_kept")
    if w is None:
        return
    m = {n: v for (_, n), v in metrics(db, run, w).items()}
    kept, full = m.get("resid_floats_kept"), m.get("resid_floats_full")
    if kept is None or not full:
        return
    p(f"  residuals: error feedback keeps {size(4 * kept)} per rank "
      f"against {size(4 * full)} with one residual per tensor "
      f"({less(full, kept)}), by the plan in force at window {w}")


def say_perfmodel(db, run, p) -> None:
    w = last_metric_window(db, run, "t_sync_ms")
    if w is None:
        return
    m = {n: v for (_, n), v in metrics(db, run, w).items()}
    off = m.get("gate_off")
    raw, comp = m.get("t_sync_ms"), m.get("t_comp_ms")
    line = f"  compression gate: {'off' if off else 'on'} (window {w})"
    if raw is not None and comp is not None:
        line += (f": predicted step {ms(raw)} raw against {ms(comp)} "
                 f"compressed")
        if off:
            line += ", so compressing costs more than it saves here"
    p(line)
    if m.get("breakeven_gbps") is not None:
        p(f"    break-even link: {m['breakeven_gbps']:.3g} Gbit/s "
          f"(compressing pays on slower links)")
    if m.get("bw_gbps") is not None:
        p(f"    measured link: {m['bw_gbps']:.3g} Gbit/s, latency "
          f"{m.get('alpha_ms', 0):.3g} ms per collective")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="demo_summary.py",
        description="What a run bought, in plain words, from its history.")
    ap.add_argument("--db", required=True, help="bellowsd's history file")
    ap.add_argument("--run", type=int, help="run id (default: the latest)")
    ap.add_argument("--link", help="the link the run had (e.g. 100mbit)")
    ap.add_argument("--raw-db", help="a raw run's history, to compare "
                    "step times with")
    ap.add_argument("--raw-run", type=int, help="its run (the latest)")
    ap.add_argument("--compare-db", help="an earlier history (the "
                    "previous demo's): the commands printed include "
                    "`bellows history compare` of its latest run and "
                    "this one")
    ap.add_argument("--bellows", default="build/tools/bellows",
                    help="the bellows tool the commands printed name")
    args = ap.parse_args(argv)
    if not pathlib.Path(args.db).is_file():
        print(f"demo_summary: no history file {args.db}", file=sys.stderr)
        return 1
    try:
        db = open_db(args.db)
        run = args.run if args.run is not None else latest_run(db)
        r = one(db, "SELECT job, world, started_wall_ms, ended_wall_ms"
                " FROM runs WHERE id = ?", run) if run else None
        if r is None:
            print(f"demo_summary: no run in {args.db}", file=sys.stderr)
            return 1
        job, world, started, ended = r
        out: list[str] = []
        p = out.append
        t = totals(db, run)
        types = policy_types(db, run)
        policies = sorted({named(name, types) for row in db.execute(
            "SELECT DISTINCT policy FROM decisions WHERE run_id = ?",
            (run,)) if row[0] for name in row[0].split(",") if name})
        link = f"a {args.link} link" if args.link else "plain loopback"
        p(f"summary of run {run} (job {job}, {world} ranks, "
          f"{t['windows']} windows, on {link}), from {args.db}:")
        ds = decisions(db, run, started)
        n_all = one(db, "SELECT count(*) FROM decisions WHERE run_id = ?",
                    run)[0]
        p(f"  decided: {n_all} decisions by {', '.join(policies) or '-'}, "
          f"{len(ds)} of them changed something:")
        shown = ds if len(ds) <= 8 else ds[:4] + [None] + ds[-3:]
        for d in shown:
            if d is None:
                p(f"    ... {len(ds) - 7} more")
                continue
            _, window, step, secs, policy, reason, ch = d
            text = "; ".join(ch)
            if len(ch) > 4:
                text = "; ".join(ch[:4]) + f"; {len(ch) - 4} more"
            why = reason if len(reason) <= 160 else reason[:157] + "..."
            p(f"    window {window} (step {step}, {secs:.1f} s in), "
              f"{policy or 'carried over'}: {text}")
            if why:
                p(f"      why: {why}")
        sent_b = t["bytes_sent"] or 4 * t["floats_sent"]
        if t["floats_raw"] > 0 and t["floats_sent"] >= t["floats_raw"]:
            p(f"  saved: nothing on gradients: sent {size(sent_b)} raw "
              f"({count(t['floats_raw'])} floats), all ranks")
        elif t["floats_raw"] > 0:
            p(f"  saved: sent {size(sent_b)} of {size(t['bytes_raw'])} raw "
              f"({less(t['bytes_raw'], sent_b)}), "
              f"{count(t['floats_sent'])} of {count(t['floats_raw'])} "
              f"floats, all ranks; {size(max(t['bytes_raw'] - sent_b, 0))} "
              f"saved")
        else:
            p("  saved: no gradient traffic recorded")
        held = say_comet(db, run, p)
        say_slimgc(db, run, p)
        say_perfmodel(db, run, p)
        say_gcomp(db, run, p)
        say_resireduce(db, run, p)
        split = step_split(db, run)
        if args.raw_db and t["step_ms"] is not None:
            # Against another run, as asked.
            line = f"  step time: {ms(t['step_ms'])} (median over windows)"
            rdb = open_db(args.raw_db)
            rrun = args.raw_run or latest_run(rdb)
            rt = totals(rdb, rrun) if rrun else None
            if rt and rt["step_ms"]:
                r = rt["step_ms"] / t["step_ms"]
                line += (f" against {ms(rt['step_ms'])} raw "
                         + (f"({r:.2f}x faster)" if r >= 1
                            else f"({1 / r:.2f}x slower)"))
            p(line)
        if args.raw_db:
            pass  # said above
        elif split["comp_ms"] is not None and split["raw_ms"] is not None:
            # The run's own raw windows: the same machine, link and job.
            r = split["raw_ms"] / split["comp_ms"]
            p(f"  step time: {ms(split['comp_ms'])} compressing (median "
              f"of {windows_word(split['comp_n'])}) against "
              f"{ms(split['raw_ms'])} raw (median of "
              f"{windows_word(split['raw_n'])} of this run sent raw): "
              + (f"{r:.2f}x faster" if r >= 1 else f"{1 / r:.2f}x slower"))
        elif split["raw_ms"] is not None and split["comp_n"] == 0 \
                and t["floats_raw"] > 0:
            p(f"  step time: {ms(split['raw_ms'])} (median of "
              f"{windows_word(split['raw_n'])}); every window was sent "
              f"raw: bellows chose not to compress")
        elif t["step_ms"] is not None:
            p(f"  step time: {ms(t['step_ms'])} (median over windows); no "
              f"window was sent raw to compare with (the trainer's "
              f"--raw-windows 1 measures one)")
        ev = final_eval(db, run)
        if ev is not None:
            acc, loss = ev
            p(f"  final test accuracy {100 * acc:.2f}%"
              + (f", loss {loss:.3f}" if loss else "")
              + " (the last window evaluated)")
        if not args.link and not held:
            p("  on loopback, sending is nearly free, so compression "
              "mostly costs time; `scripts/demo.sh --link 100mbit` runs "
              "the same job on a 100 Mbit/s link")
        b = shlex.quote(args.bellows)
        dbq = shlex.quote(args.db)
        p("  more:")
        for what in ("runs", "layers", "decisions --changed", "windows"):
            p(f"    {b} history {what} --db {dbq} --run {run}")
        if args.compare_db and pathlib.Path(args.compare_db).is_file():
            prev = latest_run(open_db(args.compare_db))
            if prev is not None:
                a = shlex.quote(f"{args.compare_db}:{prev}")
                this = shlex.quote(f"{args.db}:{run}")
                p(f"    {b} history compare --run {a} --run {this}")
    except sqlite3.Error as e:
        print(f"demo_summary: {args.db}: {e}", file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
