"""test_agent - bellows.Agent over the real libbellows and bellowsd.

The binding: the library is found where BELLOWS_LIB says, the C errors
arrive as BellowsError with the library's code and reason, a CPU tensor is
observed through its own data pointer, the statistics are those of the
gradients handed over, the timed sends, collectives and activation
statistics come back as the window's quartiles, medians and means, CURVE
keys are checked at open and a refused one is reported (against pyzmq's ZAP
handler), and a decision from a real bellowsd (a fixed policy) reaches
the Python side and decides how each layer is sent.
"""

from __future__ import annotations

import os
import pathlib
import re
import sqlite3
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

import bellows
import support
from bellows import _lib

LAYERS = [bellows.Layer("w", (4, 8)), bellows.Layer("b", (4,))]
FIXED = """\
daemon: {apply_lag: 1, heartbeat_ms: 200}
jobs:
  - match: "*"
    policies:
      - type: fixed
        params: {level: 3}
"""


def offline_agent(**kw):
    """An agent whose bellowsd is absent: it trains on defaults."""
    return bellows.Agent("py-offline", 0, 1, LAYERS,
                         control="ipc:///nonexistent/bellows-control",
                         publish="ipc:///nonexistent/bellows-publish",
                         decision_timeout_ms=50, **kw)


class LibraryTest(unittest.TestCase):
    def test_bellows_lib_names_the_library(self):
        code = ("import bellows, sys\n"
                "try:\n"
                "    bellows.version()\n"
                "except OSError as e:\n"
                "    print(e); sys.exit(3)\n")
        env = dict(os.environ, BELLOWS_LIB="/nonexistent/libbellows.so")
        r = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=60,
                           cwd=support.SRC / "agent" / "python")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("/nonexistent/libbellows.so", r.stdout)

    def test_version_is_the_library_s(self):
        self.assertRegex(bellows.version(), r"^\d+\.\d+\.\d+$")
        print(f"\n  libbellows {bellows.version()} from "
              f"{bellows.library_path()}")


class KeysTest(unittest.TestCase):
    """server_key/client_key: validated at open, used over CURVE."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = pathlib.Path(cls.tmp.name)
        for name in ("server", "client"):
            subprocess.run([str(support.BELLOWS), "keygen", "--out",
                            str(cls.dir), "--name", name], check=True,
                           capture_output=True, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.env = {k: os.environ.pop(k, None)
                    for k in ("BELLOWS_SERVER_KEY", "BELLOWS_CLIENT_KEY")}

    def tearDown(self):
        for k, v in self.env.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v

    def refused(self, **kw) -> str:
        with self.assertRaises(bellows.BellowsError) as cm:
            offline_agent(**kw)
        self.assertEqual(cm.exception.code, _lib.EINVAL)
        return str(cm.exception)

    def test_one_key_without_the_other_is_einval(self):
        msg = self.refused(server_key=self.dir / "server.pub")
        self.assertIn("server_key is set", msg)
        self.assertIn("client_key (BELLOWS_CLIENT_KEY) is not", msg)
        msg = self.refused(client_key=str(self.dir / "client.key"))
        self.assertIn("client_key is set", msg)
        print(f"\n  {msg}")

    def test_a_key_file_that_does_not_load_is_named(self):
        msg = self.refused(server_key="/nonexistent/server.pub",
                           client_key=self.dir / "client.key")
        self.assertIn("/nonexistent/server.pub", msg)
        msg = self.refused(server_key=self.dir / "server.pub",
                           client_key=self.dir / "client.pub")
        self.assertIn("is a public certificate", msg)

    def test_the_environment_gives_the_keys(self):
        os.environ["BELLOWS_SERVER_KEY"] = str(self.dir / "server.pub")
        msg = self.refused()
        self.assertIn("BELLOWS_SERVER_KEY is set", msg)
        os.environ["BELLOWS_CLIENT_KEY"] = str(self.dir / "client.key")
        with offline_agent() as a:
            self.assertEqual(a.stats().last_error, 0)

    def test_keys_open_an_agent_that_trains_while_bellowsd_is_away(self):
        with offline_agent(server_key=self.dir / "server.pub",
                           client_key=self.dir / "client.key") as a:
            a.step_begin()
            a.step_end()

    def test_a_refused_key_is_reported_and_training_goes_on(self):
        try:
            import zmq
            from zmq.auth.thread import ThreadAuthenticator
        except ImportError:
            self.skipTest("python3-zmq is not installed")
        pub, secret = zmq.auth.load_certificate(self.dir / "server.key")
        ctx = zmq.Context()
        auth = ThreadAuthenticator(ctx)
        auth.start()
        (self.dir / "trusted").mkdir(exist_ok=True)  # nobody in it
        auth.configure_curve(domain="*", location=str(self.dir / "trusted"))
        router = ctx.socket(zmq.ROUTER)
        router.curve_secretkey = secret
        router.curve_publickey = pub
        router.curve_server = True
        port = router.bind_to_random_port("tcp://127.0.0.1")
        try:
            with bellows.Agent("py-curve", 0, 1, LAYERS,
                               control=f"tcp://127.0.0.1:{port}",
                               publish=f"tcp://127.0.0.1:{port}",
                               decision_timeout_ms=1000,
                               server_key=self.dir / "server.pub",
                               client_key=self.dir / "client.key") as a:
                a.step_begin()
                a.step_end()
                st = a.stats()
                self.assertFalse(st.connected)
                self.assertEqual(st.last_error, _lib.ECONFIG)
                self.assertIn("bellowsd refused this client's key",
                              st.last_error_text)
                print(f"\n  {st.last_error_text}")
        finally:
            router.close(0)
            auth.stop()
            ctx.term()


SOURCE = pathlib.Path(os.environ.get(
    "BELLOWS_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[2]))


def c_error_table() -> dict[int, tuple[str, str]]:
    """BELLOWS_ERROR_MAP as the header spells it: code -> (name, text)."""
    text = (SOURCE / "common" / "bellows" / "error.h").read_text()
    start = text.index("#define BELLOWS_ERROR_MAP(X)")
    end = text.index("enum bellows_error", start)
    return {int(code): (name, msg) for name, code, msg in re.findall(
        r'\bX\((\w+), (-\d+), "([^"]*)"\)', text[start:end])}


class ErrorTest(unittest.TestCase):
    def test_every_c_error_code_raises_bellows_error_with_its_name(self):
        table = c_error_table()
        self.assertGreaterEqual(len(table), 19)
        # Read from the library, not a copy: the same codes and names.
        self.assertEqual(dict(bellows.ERRORS),
                         {code: name for code, (name, _) in table.items()})
        for code, (name, msg) in table.items():
            self.assertEqual(getattr(bellows, name), code, name)
            self.assertEqual(getattr(_lib, name), code, name)
            e = bellows.BellowsError("bellows_x", code)
            # The class users catch, with its built-in base, unchanged.
            self.assertIs(type(e), bellows.BellowsError)
            self.assertEqual(bellows.BellowsError.__bases__, (Exception,))
            self.assertEqual((e.code, e.name, e.function),
                             (code, name, "bellows_x"))
            self.assertEqual(str(e), f"bellows_x: {msg} ({name})")
        self.assertEqual(bellows.ETIMEDOUT, -8)
        self.assertEqual(bellows.BellowsError("f", -1000).name, "E?")
        for missing in ("ENOSUCHCODE", "EOK", "Einval"):
            self.assertFalse(hasattr(bellows, missing), missing)
            self.assertFalse(hasattr(_lib, missing), missing)

    def test_a_bad_configuration_raises_einval_with_the_reason(self):
        with self.assertRaises(bellows.BellowsError) as cm:
            bellows.Agent("py", 2, 2, LAYERS)
        e = cm.exception
        self.assertEqual(e.code, _lib.EINVAL)
        self.assertEqual(e.name, "EINVAL")
        self.assertEqual(e.function, "bellows_agent_open")
        self.assertIn("rank is not below world", str(e))
        self.assertIn("invalid argument", str(e))
        print(f"\n  {e}")

    def test_keep_reports_mb_is_taken_within_its_range(self):
        for bad in (0, 65537):
            with self.assertRaises(bellows.BellowsError) as cm:
                bellows.Agent("py", 0, 1, LAYERS, keep_reports_mb=bad,
                              control="ipc:///nonexistent/c",
                              publish="ipc:///nonexistent/p")
            self.assertEqual(cm.exception.code, _lib.EINVAL)
            self.assertIn("keep_reports_mb is not within 1..65536",
                          str(cm.exception))
        with bellows.Agent("py", 0, 1, LAYERS, keep_reports_mb=1,
                           control="ipc:///nonexistent/c",
                           publish="ipc:///nonexistent/p") as agent:
            self.assertFalse(agent.stats().connected)

    def test_duplicate_layer_names_are_refused(self):
        with self.assertRaises(bellows.BellowsError) as cm:
            bellows.Agent("py", 0, 1, [bellows.Layer("x", (2,)),
                                       bellows.Layer("x", (3,))])
        self.assertEqual(cm.exception.code, _lib.EINVAL)

    def test_calls_out_of_order_raise_estate(self):
        with offline_agent() as a:
            with self.assertRaises(bellows.BellowsError) as cm:
                a.observe(0, torch.zeros(32))
            self.assertEqual(cm.exception.code, _lib.ESTATE)
            with self.assertRaises(bellows.BellowsError) as cm:
                a.step_end()
            self.assertEqual(cm.exception.code, _lib.ESTATE)
            a.step_begin()
            with self.assertRaises(bellows.BellowsError) as cm:
                a.step_begin()
            self.assertEqual(cm.exception.code, _lib.ESTATE)
            with self.assertRaises(bellows.BellowsError) as cm:
                a.observe(0, torch.zeros(31))
            self.assertEqual(cm.exception.code, _lib.EINVAL)
            with self.assertRaises(bellows.BellowsError) as cm:
                a.observe(7, torch.zeros(4))
            self.assertEqual(cm.exception.code, _lib.EINVAL)
            a.step_end()

    def test_a_closed_agent_raises_and_closes_twice(self):
        a = offline_agent()
        a.close()
        a.close()
        self.assertTrue(a.closed)
        with self.assertRaises(bellows.BellowsError) as cm:
            a.step_begin()
        self.assertEqual(cm.exception.code, _lib.ESTATE)


class ObserveTest(unittest.TestCase):
    def test_a_cpu_tensor_is_read_through_its_own_pointer(self):
        f = _lib.library()
        seen = []
        real = f.observe

        def spy(h, layer, ptr, n):
            seen.append((layer, ptr, n))
            return real(h, layer, ptr, n)

        f.observe = spy
        try:
            with offline_agent() as a:
                g = torch.arange(32, dtype=torch.float32)
                a.step_begin()
                a.observe(0, g)
                a.step_end()
        finally:
            f.observe = real
        self.assertEqual(seen, [(0, g.data_ptr(), 32)])

    def test_window_statistics_are_those_of_the_gradients(self):
        with offline_agent(window_steps=2) as a:
            g1 = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
            g2 = np.linspace(-1, 1, 32, dtype=np.float64)  # converted
            b = torch.ones(4, dtype=torch.bfloat16)  # widened
            for g in (g1, g2):
                a.step_begin()
                a.observe(0, g)
                a.observe(1, b)
                a.step_end(lr=0.1)
            s = a.window_stats(0)
            total = g1.double().reshape(-1) + torch.from_numpy(g2)
            self.assertEqual(s.window, 0)
            self.assertEqual(s.count, 64)
            self.assertEqual(s.observed_steps, 2)
            self.assertAlmostEqual(s.acc_norm, total.norm().item(), places=4)
            want_sq = (g1.double() ** 2).sum().item() + (g2 ** 2).sum()
            self.assertAlmostEqual(s.sum_sq, want_sq, places=3)
            self.assertEqual(a.window_stats(1).sum_sq, 8.0)
            with self.assertRaises(bellows.BellowsError) as cm:
                a.window_stats(9)
            self.assertEqual(cm.exception.code, _lib.EINVAL)

    def test_stats_precision_picks_the_sums_and_refuses_other_values(self):
        # 1 + k 2^-12 values: their float32 sums of 16 squares round, so
        # the relaxed default differs from the exact path, within 1e-6.
        g = 1.0 + torch.arange(4096, dtype=torch.float32) % 97 * 2.0 ** -12
        want = (g.double() ** 2).sum().item()
        got = {}
        for precision in ("exact", "relaxed", None):
            layers = [bellows.Layer("g", (4096,))]
            with bellows.Agent("py-offline", 0, 1, layers,
                               control="ipc:///nonexistent/bellows-control",
                               publish="ipc:///nonexistent/bellows-publish",
                               decision_timeout_ms=50, window_steps=1,
                               stats_precision=precision) as a:
                a.step_begin()
                a.observe(0, g)
                a.step_end()
                got[precision] = a.window_stats(0).sum_sq
        self.assertLessEqual(abs(got["exact"] - want), 1e-12 * want)
        self.assertLessEqual(abs(got["relaxed"] - want), 1e-6 * want)
        self.assertEqual(got[None], got["relaxed"])
        with self.assertRaises(bellows.BellowsError) as cm:
            offline_agent(stats_precision="fast")
        self.assertEqual(cm.exception.code, _lib.EINVAL)
        self.assertIn('stats_precision is "fast"', str(cm.exception))

    def test_no_decision_means_the_defaults(self):
        with offline_agent() as a:
            a.step_begin()
            d = a.decision()
            self.assertEqual(d.seq, 0)
            self.assertEqual(d.levels, (0.0, 0.0))
            self.assertEqual(d.lr_scale, 1.0)
            # Nobody said a statistic is unread: every layer accumulates.
            self.assertEqual(a.accumulators(), 2)
            self.assertEqual(a.batch_size(64), 64)
            self.assertEqual(a.lr_scale(), 1.0)
            a.step_end()


class TimingTest(unittest.TestCase):
    """send_mode, calibrating, comm_layer, comm_bucket, observe_activation
    and the StepInfo fields of protocol minor 1."""

    def test_outside_a_step_the_new_calls_raise_estate(self):
        with offline_agent() as a:
            calls = [lambda: a.send_mode(0),
                     lambda: a.comm_layer(0, True, 1.0, 0.5),
                     lambda: a.comm_bucket(4096, False, 1.0),
                     lambda: a.observe_activation(0, 0.5, 0.5, 10, 40),
                     lambda: a.applied_levels([1.0, 0.0])]
            for call in calls:
                with self.assertRaises(bellows.BellowsError) as cm:
                    call()
                self.assertEqual(cm.exception.code, _lib.ESTATE)
            self.assertFalse(a.calibrating())

    def test_bad_arguments_raise_einval_with_the_library_s_message(self):
        nan, inf = float("nan"), float("inf")
        with offline_agent() as a:
            a.step_begin()
            calls = [
                ("bellows_agent_send_mode", lambda: a.send_mode(2)),
                ("bellows_agent_comm_layer",
                 lambda: a.comm_layer(5, False, 1.0)),
                ("bellows_agent_comm_layer",
                 lambda: a.comm_layer(0, False, nan)),
                ("bellows_agent_comm_layer",
                 lambda: a.comm_layer(0, True, 1.0, -0.5)),
                ("bellows_agent_comm_bucket",
                 lambda: a.comm_bucket(1024, True, inf)),
                ("bellows_agent_comm_bucket",
                 lambda: a.comm_bucket(-1, True, 1.0)),
                ("bellows_agent_observe_activation",
                 lambda: a.observe_activation(0, nan, 0.5, 1, 1)),
                ("bellows_agent_observe_activation",
                 lambda: a.observe_activation(0, -1.0, 0.5, 1, 1)),
                ("bellows_agent_observe_activation",
                 lambda: a.observe_activation(0, 1.0, 1.5, 1, 1)),
                ("bellows_agent_observe_activation",
                 lambda: a.observe_activation(0, 1.0, 0.5, -8, 1)),
                ("bellows_agent_observe_activation",
                 lambda: a.observe_activation(9, 1.0, 0.5, 1, 1)),
                ("bellows_agent_applied_levels",
                 lambda: a.applied_levels([1.0])),
                ("bellows_agent_applied_levels",
                 lambda: a.applied_levels([1.0, -2.0])),
                ("bellows_agent_applied_levels",
                 lambda: a.applied_levels([nan, 0.0])),
                ("bellows_agent_step_end",
                 lambda: a.step_end(backward_ms=nan)),
                ("bellows_agent_step_end",
                 lambda: a.step_end(codec_ms=-1.0)),
            ]
            for function, call in calls:
                with self.assertRaises(bellows.BellowsError) as cm:
                    call()
                self.assertEqual(cm.exception.code, _lib.EINVAL)
                self.assertEqual(cm.exception.function, function)
                self.assertIn("invalid argument", str(cm.exception))
            print(f"\n  {cm.exception}")
            # The refused step_end left the step open.
            self.assertTrue(a.in_step)
            a.step_end(backward_ms=1.0)

    def test_without_a_decision_every_layer_goes_raw(self):
        with offline_agent() as a:
            a.step_begin()
            self.assertEqual([a.send_mode(i) for i in range(2)],
                             [False, False])
            self.assertFalse(a.calibrating())
            self.assertEqual(a.decision().calibrate_steps, 0)
            a.step_end()

    def test_the_applied_levels_given_are_what_the_window_reports(self):
        with offline_agent(window_steps=2) as a:
            a.step_begin()
            self.assertTrue(a.applied_levels([2.5, 0.0]))
            a.step_end()
            a.step_begin()
            a.step_end()
            w, b = a.window_stats(0), a.window_stats(1)
            # No call in the next window: kept while the decision in
            # force (none here: the defaults) stays.
            for _ in range(2):
                a.step_begin()
                a.step_end()
            later = a.window_stats(0)
        self.assertEqual((w.level_applied, w.level_applied_n), (2.5, 1))
        self.assertEqual((b.level_applied, b.level_applied_n), (0.0, 1))
        self.assertEqual((later.level_applied, later.level_applied_n),
                         (2.5, 1))

    def test_the_window_reports_quartiles_and_means_of_what_was_timed(self):
        with offline_agent(window_steps=3) as a:
            for i in range(3):
                a.step_begin()
                a.comm_layer(0, False, 3.0 - i)            # 3, 2, 1
                a.comm_layer(0, True, 10.0 * (i + 1), 0.5 * i)
                if i < 2:
                    a.comm_layer(1, True, 4.0 + 2 * i, 1.0)  # 4, 6
                a.comm_bucket(1 << 20, False, 5.0)
                a.observe_activation(0, 0.5 * (i + 1), 0.25 * i,
                                     100 * (i + 1), 600)
                a.step_end(lr=0.1, backward_ms=2.0, codec_ms=0.5,
                           mem_device_used=1000 + i, mem_host_used=7)
            w, b = a.window_stats(0), a.window_stats(1)
        # Lower quartiles: index floor(0.25 (n - 1)) of the sorted times.
        self.assertEqual((w.comm_raw_ms, w.comm_raw_n), (1.0, 3))
        self.assertEqual((w.comm_comp_ms, w.comm_comp_n), (10.0, 3))
        self.assertEqual(w.codec_ms, 0.0)
        self.assertEqual((b.comm_comp_ms, b.comm_comp_n), (4.0, 2))
        self.assertEqual((b.comm_raw_ms, b.comm_raw_n), (0.0, 0))
        self.assertEqual(b.codec_ms, 1.0)
        self.assertEqual(w.act_steps, 3)
        self.assertEqual(w.act_lbar, 1.0)
        self.assertEqual(w.act_nonzero, 0.25)
        self.assertEqual(w.act_bytes, 200.0)
        self.assertEqual(w.act_raw_bytes, 600.0)
        self.assertEqual(b.act_steps, 0)


class DaemonTest(unittest.TestCase):
    def test_a_decision_of_bellowsd_reaches_python(self):
        with support.Daemon(FIXED) as daemon:
            with bellows.Agent("py-fixed", 0, 1, LAYERS,
                               control=daemon.control,
                               publish=daemon.publish,
                               window_steps=2) as a:
                levels = []
                for _ in range(8):
                    step = a.step_begin()
                    a.observe(0, torch.ones(32))
                    a.observe(1, torch.ones(4))
                    levels.append((step, a.level(0), a.level(1),
                                   a.decision().seq, a.accumulators()))
                    a.step_end(lr=0.1)
                st = a.stats()
                d = a.decision()
            rc = daemon.stop()
        print(f"\n  (step, level w, level b, seq, accumulators): {levels}")
        self.assertEqual(rc, 0)
        self.assertTrue(st.connected)
        self.assertGreaterEqual(st.decisions, 1)
        self.assertEqual(st.decision_misses, 0)
        # The fixed policy selects 2-D tensors: w at 3, the bias raw.
        self.assertEqual(levels[-1][1:3], (3.0, 0.0))
        self.assertEqual(d.levels, (3.0, 0.0))
        # No policy of the job reads acc_norm: from a window start on,
        # neither layer keeps a window accumulator.
        self.assertEqual(levels[-1][4], 0)
        self.assertGreater(d.seq, 0)
        # The decision says so: fixed reads no statistic, so every one
        # is skipped, acc_norm and the per-layer times included.
        self.assertTrue(d.skips("acc_norm", "comm_raw_ms", "codec_ms"))
        self.assertEqual(d.stats_skip >> bellows.stat_bit("acc_norm") & 1,
                         1)
        with self.assertRaises(KeyError):
            d.skips("no_such_statistic")

    def test_launches_are_runs_and_a_resume_continues_the_recorded_one(
            self):
        def launch(daemon, run_id, start_window=0, resume=False):
            with bellows.Agent("py-runs", 0, 1, LAYERS,
                               control=daemon.control,
                               publish=daemon.publish, window_steps=2,
                               start_step=2 * start_window,
                               start_window=start_window,
                               run_id=run_id, resume=resume) as a:
                for _ in range(2 * start_window, 12):
                    a.step_begin()
                    a.observe(0, torch.ones(32))
                    a.observe(1, torch.ones(4))
                    a.step_end(lr=0.1)
                st = a.stats()
            self.assertTrue(st.connected)
            # A resume that comes while bellowsd still writes the run's
            # last rows is refused (EBUSY) and retried by the agent.
            self.assertIn(st.last_error, (0, bellows.EBUSY),
                          st.last_error_text)
            self.assertEqual(st.decision_misses, 0)

        with self.assertRaises(bellows.BellowsError) as cm:
            offline_agent(resume=True)
        self.assertEqual(cm.exception.code, bellows.EINVAL)
        with support.Daemon(FIXED, db=True) as daemon:
            launch(daemon, "first")
            launch(daemon, "second")
            launch(daemon, "third", start_window=3, resume=True)
            log = daemon.tail(200)
            rc = daemon.stop()
            with sqlite3.connect(daemon.db) as db:
                runs = db.execute("SELECT id, run_key, resumes FROM runs "
                                  "ORDER BY id").fetchall()
                windows = db.execute("SELECT count(*) FROM window_info "
                                     "WHERE run_id = 2").fetchone()[0]
                gone = db.execute("SELECT min(window), max(window) FROM "
                                  "superseded_window_info").fetchone()
        print(f"\n  runs: {runs}, superseded windows {gone}")
        self.assertEqual(rc, 0)
        self.assertEqual(runs, [(1, "first", 0), (2, "third", 1)], log)
        self.assertEqual(windows, 6, log)
        self.assertEqual(gone, (3, 5), log)

    def test_reports_with_timings_reach_bellowsd_and_decide_send_modes(self):
        with support.Daemon(FIXED, db=True) as daemon:
            with bellows.Agent("py-timed", 0, 1, LAYERS,
                               control=daemon.control,
                               publish=daemon.publish,
                               window_steps=2) as a:
                modes = []
                for i in range(8):
                    a.step_begin()
                    a.observe(0, torch.ones(32))
                    a.observe(1, torch.ones(4))
                    mode = (a.send_mode(0), a.send_mode(1))
                    modes.append(mode)
                    a.comm_layer(0, mode[0], 1.0 + i, 0.25 if mode[0]
                                 else 0.0)
                    a.comm_layer(1, mode[1], 0.5)
                    a.comm_bucket(144, mode[0], 2.0)
                    a.observe_activation(0, 0.1, 0.5, 64, 128)
                    a.step_end(lr=0.1, backward_ms=1.5, codec_ms=0.25,
                               mem_host_used=1 << 20,
                               saved_bytes=5000 + i)
                st = a.stats()
            log = daemon.tail(200)
            rc = daemon.stop()
            saved = []
            if daemon.db is not None:
                with sqlite3.connect(daemon.db) as db:
                    saved = [r[0] for r in db.execute(
                        "SELECT act_saved_bytes FROM window_info ORDER BY "
                        "window")]
        print(f"\n  (w compressed, b compressed) per step: {modes}")
        self.assertEqual(rc, 0)
        self.assertTrue(st.connected, log)
        self.assertEqual(st.last_error, 0, st.last_error_text)
        self.assertEqual(st.reports_dropped, 0)
        self.assertGreaterEqual(st.reports_sent, 3)
        self.assertGreaterEqual(st.decisions, 1)
        # The fixed policy compresses w (level 3), never the bias.
        self.assertEqual(modes[-1], (True, False))
        self.assertTrue(all(not b for _, b in modes))
        self.assertNotIn("malformed", log)
        # The history has each window's largest saved_bytes (its column
        # act_saved_bytes, activation bytes saved for backward): its last
        # step's (windows of 2 steps: 5001, 5003, ...).
        self.assertGreaterEqual(len(saved), 3, log)
        self.assertEqual(saved, [5001 + 2 * w for w in range(len(saved))])

    def test_a_codec_table_from_a_plugin_reaches_both_ranks_and_the_history(
            self):
        """The exponent_table example plug-in owns codec_table: the table
        it builds every second window reaches both ranks (C API through the
        binding) at the same step, and the history keeps the same bytes
        with a decision_changes row of its length."""
        plugin = (support.BUILD / "examples" / "policies" /
                  "exponent_table_example" / "libexponent_table.so")
        if not plugin.exists():
            self.skipTest(f"{plugin} not built")
        policy = FIXED + f"""\
      - type: exponent_table
        plugin: {plugin}
        params: {{every: 2}}
"""
        with support.Daemon(policy, db=True) as daemon:
            agents = [bellows.Agent("py-table", r, 2, LAYERS,
                                    control=daemon.control,
                                    publish=daemon.publish,
                                    window_steps=2) for r in range(2)]
            try:
                tables = [[], []]
                for i in range(16):
                    v = 1.0 + i // 2  # window i // 2's gradients
                    for r, a in enumerate(agents):
                        step = a.step_begin()
                        a.observe(0, torch.full((32,), v))
                        a.observe(1, torch.full((4,), v))
                        tables[r].append((step, a.codec_table()))
                        a.step_end(lr=0.1)
                last = agents[0].decision()
            finally:
                for a in agents:
                    a.close()
            rc = daemon.stop()
            import sqlite3
            db = sqlite3.connect(str(daemon.db))
            stored = db.execute(
                "SELECT codec_table FROM decisions WHERE seq = ?",
                (last.seq,)).fetchone()
            changes = db.execute(
                "SELECT count(*), max(new) FROM decision_changes WHERE "
                "knob = 'codec_table'").fetchone()
            db.close()
        self.assertEqual(rc, 0)
        print(f"\n  (step, table bytes) on rank 0: "
              f"{[(s, len(t) if t else 0) for s, t in tables[0]]}")
        # Every rank has the same table at every step.
        self.assertEqual(tables[0], tables[1])
        table = tables[0][-1][1]
        self.assertIsNotNone(table)
        self.assertEqual(table, last.codec_table)
        # "BXT1", the window it was built from (even: every 2), 2 layers,
        # w's norm exponent (2 steps of v over 32 elements), the bias not
        # selected (1-D) so 0.
        self.assertEqual(len(table), 16)
        self.assertEqual(table[:4], b"BXT1")
        window = int.from_bytes(table[4:12], "little")
        self.assertEqual(window % 2, 0)
        self.assertEqual(int.from_bytes(table[12:14], "little"), 2)
        norm = 2 * (1.0 + window) * 32 ** 0.5
        import math
        self.assertEqual(table[14], math.frexp(norm)[1] + 128)
        self.assertEqual(table[15], 0)
        # The history keeps the bytes the ranks got, and the rebuilds.
        self.assertEqual(bytes(stored[0]), table)
        self.assertGreaterEqual(changes[0], 2)
        self.assertEqual(changes[1], 16.0)


if __name__ == "__main__":
    unittest.main()
