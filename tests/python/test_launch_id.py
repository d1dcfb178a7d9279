"""test_launch_id - bellows.torch.launch_id names a launch, and torchrun's
"none" is no name.

torchrun sets TORCHELASTIC_RUN_ID=none when it is given no --rdzv-id:
the same word in every launch, so a second plain torchrun of a job would
rejoin the ended run (bellowsd then drops its reports as stale). One
gloo rank (a world of one) checks that launch_id takes BELLOWS_RUN_ID
first, then a real TORCHELASTIC_RUN_ID, and draws a fresh identity for
"none" or nothing, different at every launch.
"""

from __future__ import annotations

import os
import unittest

import torch.distributed as dist

import support


class LaunchIdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.saved = {v: os.environ.pop(v, None)
                     for v in ("BELLOWS_RUN_ID", "TORCHELASTIC_RUN_ID")}
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{support.free_port()}",
            rank=0, world_size=1)

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()
        for var, value in cls.saved.items():
            if value is not None:
                os.environ[var] = value

    def tearDown(self):
        os.environ.pop("BELLOWS_RUN_ID", None)
        os.environ.pop("TORCHELASTIC_RUN_ID", None)

    def test_torchrun_none_is_no_identity_and_each_launch_draws_its_own(self):
        from bellows.torch import launch_id

        os.environ["TORCHELASTIC_RUN_ID"] = "none"
        first, second = launch_id(), launch_id()
        self.assertNotEqual(first, "none")
        self.assertNotEqual(first, second)
        self.assertRegex(first, "^[0-9a-f]{16}$")

    def test_a_rendezvous_id_and_bellows_run_id_name_the_launch(self):
        from bellows.torch import launch_id

        os.environ["TORCHELASTIC_RUN_ID"] = "rdzv-42"
        self.assertEqual(launch_id(), "rdzv-42")
        os.environ["BELLOWS_RUN_ID"] = "mine"
        self.assertEqual(launch_id(), "mine")
        os.environ["BELLOWS_RUN_ID"] = ""
        self.assertEqual(launch_id(), "rdzv-42")


if __name__ == "__main__":
    unittest.main()
