"""test_ddp_gcomp - two DDP ranks under bellowsd's gcomp policy.

A real bellowsd runs gcomp (rebuild_bits 0: a new table whenever the
summed exponent histogram gives another code) and `fixed` level 1 for the
weight matrices, and two gloo ranks train a small MLP for 80 steps in
windows of 10 through bellows.torch.attach with the GComp compressor, the
weight matrices flagged for the exponent histogram (exp_hist=True).
Checked:

- every window's exponent histogram of a flagged layer counts each of
  its gradient values once (its bins sum to the window's count), the
  biases carry none;
- tables arrive, and at every step both ranks hold the same table, of
  the same version, in force: every switch happens at the same step on
  both;
- after a switch, Agent.codec_table(old_version) still gives the table
  before it, and the versions go up by one;
- the GComp codec encodes with the table in force: its table version is
  the decision's at every step that has one;
- the history (when recorded) keeps the summed histograms as BLOBs whose
  bins add up to both ranks' counts.
"""

from __future__ import annotations

import json
import os
import pathlib
import sqlite3
import struct
import tempfile
import unittest

import torch
import torch.distributed as dist

import support

WORLD = 2
STEPS = 80
WINDOW = 10
JOB = "py-ddp-gcomp"
POLICY = """\
daemon:
  apply_lag: 1
  window_timeout_ms: 20000
  rank_timeout_ms: 20000
  heartbeat_ms: 200
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 1}
      - type: gcomp
        params: {rebuild_bits: 0, every_steps: 1000}
"""


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))


def data(rank):
    g = torch.Generator().manual_seed(42)
    teacher = torch.randn(32, 10, generator=g)
    g.manual_seed(1000 + rank)
    x = torch.randn(STEPS * 16, 32, generator=g)
    return x, (x @ teacher).argmax(1)


def version_of(table):
    if table is None:
        return 0
    return struct.unpack_from("<I", table, 8)[0]


def rank_main(rank, port, control, publish, out_dir):
    import bellows.torch

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    agent = bellows.torch.attach(ddp, JOB, compressor="gcomp", seed=1,
                                 control=control, publish=publish,
                                 window_steps=WINDOW, exp_hist=True,
                                 decision_timeout_ms=10000)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x, y = data(rank)
    steps, windows, prev_checks = [], [], []
    last = None
    n_layers = len(agent.layers)
    for s in range(STEPS):
        step = agent.step_begin()
        table = agent.agent.codec_table()
        if last is not None and table != last:
            # Switched: the table before stays reachable by version.
            prev_checks.append({
                "step": step, "old": version_of(last),
                "new": version_of(table),
                "old_kept": agent.agent.codec_table(version_of(last)) ==
                last})
        last = table
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            ddp(x[s * 16:(s + 1) * 16]), y[s * 16:(s + 1) * 16])
        loss.backward()
        opt.step()
        agent.step_end(lr=0.1, batch_size=16)
        steps.append({"step": step, "seq": agent.seq,
                      "version": version_of(table),
                      "codec_version": agent.hook.compressor.table_version,
                      "table": table.hex() if table else None,
                      "loss": loss.item()})
        if (s + 1) % WINDOW == 0:
            windows.append([
                {"hist": agent.agent.window_array(i),
                 "count": agent.agent.window_stats(i).count}
                for i in range(n_layers)])
    names = [layer.name for layer in agent.layers]
    agent.close()
    pathlib.Path(out_dir, f"rank{rank}.json").write_text(json.dumps({
        "steps": steps, "windows": windows, "names": names,
        "switches": prev_checks}))
    del ddp, opt, agent
    support.end_group()


class GCompDDPTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.history = support.bellows_has("history")
        out = tempfile.mkdtemp(prefix="bellows-gcomp.")
        with support.Daemon(POLICY, db=cls.history) as daemon:
            try:
                support.spawn(rank_main, (support.free_port(),
                                          daemon.control, daemon.publish,
                                          out), WORLD, timeout=100)
            except BaseException:
                print("---- bellowsd log ----\n" + daemon.tail())
                raise
            cls.daemon_rc = daemon.stop()
            cls.blobs = None
            if cls.history:
                con = sqlite3.connect(f"file:{daemon.db}?mode=ro", uri=True)
                try:
                    cls.blobs = con.execute(
                        "SELECT w.window, w.layer, w.exp_hist, w.count "
                        "FROM windows w JOIN runs r ON r.id = w.run_id "
                        "WHERE r.job = ? ORDER BY w.window, w.layer",
                        (JOB,)).fetchall()
                finally:
                    con.close()
        cls.ranks = [json.loads(pathlib.Path(out, f"rank{r}.json")
                                .read_text()) for r in range(WORLD)]
        for r in range(WORLD):
            os.unlink(pathlib.Path(out, f"rank{r}.json"))
        os.rmdir(out)

    def test_flagged_layers_report_every_value_in_their_histogram(self):
        for r in self.ranks:
            self.assertEqual(len(r["windows"]), STEPS // WINDOW)
            for win in r["windows"]:
                for name, layer in zip(r["names"], win):
                    if name.endswith("weight"):
                        self.assertIsNotNone(layer["hist"], name)
                        self.assertEqual(len(layer["hist"]), 256)
                        self.assertEqual(sum(layer["hist"]),
                                         layer["count"], name)
                        self.assertGreater(layer["count"], 0)
                    else:
                        self.assertIsNone(layer["hist"], name)

    def test_both_ranks_switch_tables_at_the_same_step(self):
        a, b = (r["steps"] for r in self.ranks)
        self.assertEqual(len(a), STEPS)
        self.assertEqual([(s["step"], s["seq"], s["table"]) for s in a],
                         [(s["step"], s["seq"], s["table"]) for s in b])
        versions = [s["version"] for s in a]
        switches = [(s["step"], s["version"]) for i, s in enumerate(a)
                    if i == 0 or s["version"] != a[i - 1]["version"]]
        print(f"\n  (first step, table version): {switches}")
        # v1 arrives after the first window closes, at most two windows
        # later (apply lag and the decision's round trip).
        self.assertGreaterEqual(max(versions), 2,
                                "no table switch to check")
        self.assertEqual(versions, sorted(versions))
        self.assertEqual(self.daemon_rc, 0)

    def test_the_codec_encodes_with_the_table_in_force(self):
        for r in self.ranks:
            with_table = [s for s in r["steps"] if s["version"] > 0]
            self.assertTrue(with_table)
            for s in with_table:
                self.assertEqual(s["codec_version"], s["version"], s)
            losses = [s["loss"] for s in r["steps"]]
            self.assertLess(sum(losses[-10:]), sum(losses[:10]))

    def test_the_previous_table_stays_reachable_after_a_switch(self):
        for r in self.ranks:
            self.assertGreaterEqual(len(r["switches"]), 1)
            for sw in r["switches"]:
                if sw["old"] == 0:
                    continue  # the first table: nothing before it
                self.assertEqual(sw["new"], sw["old"] + 1, sw)
                self.assertTrue(sw["old_kept"], sw)

    def test_the_history_keeps_the_summed_histograms(self):
        if not self.history:
            self.skipTest("this build has no `bellows history`")
        self.assertTrue(self.blobs)
        seen = 0
        for window, layer, blob, count in self.blobs:
            name = self.ranks[0]["names"][layer]
            if not name.endswith("weight"):
                self.assertIsNone(blob)
                continue
            self.assertEqual(len(blob), 256 * 8)
            bins = struct.unpack("<256Q", blob)
            self.assertEqual(sum(bins), count)
            # The sum of both ranks' histograms, bin by bin.
            if window < len(self.ranks[0]["windows"]):
                want = [x + y for x, y in zip(
                    self.ranks[0]["windows"][window][layer]["hist"],
                    self.ranks[1]["windows"][window][layer]["hist"])]
                self.assertEqual(list(bins), want)
                seen += 1
        self.assertGreater(seen, 0)


if __name__ == "__main__":
    unittest.main()
