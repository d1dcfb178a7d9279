"""test_resireduce - bellows.resireduce against hand-computed values.

The weighted average of ResiReduce-w (including a group whose residuals
are all zero), the order in which a group's members are compensated and
its shared residual finalised (the previous step's for every member, the
new one only after the last member), the 2-D reduction's kept rows and
columns, the plan changes' state migration, and top-k and PowerSGD
keeping their residuals through a plan.
"""

from __future__ import annotations

import math
import unittest

import torch

from bellows import compress
from bellows.resireduce import Plan, Residuals, kept_block, weight, \
    weighted_average


def close(test, got, want, tol=1e-6):
    want = torch.as_tensor(want, dtype=torch.float32)
    test.assertTrue(torch.allclose(got.reshape(want.shape), want, atol=tol),
                    f"{got.reshape(-1).tolist()} != {want.reshape(-1)}")


class LoneComm(compress.Communicator):
    """A world of one: collectives leave tensors as they are."""

    world = 1

    def all_reduce(self, tensor):
        pass

    def all_gather(self, tensor):
        return [tensor.clone()]


R1 = [1.0, -1.0, 1.0, -1.0]  # |r|_1/n = 1, |r|_2/sqrt(n) = 1
R2 = [2.0, 0.0, 0.0, 0.0]    # |r|_1/n = 0.5, |r|_2/sqrt(n) = 1


class WeightedAverage(unittest.TestCase):
    def test_weights_are_the_papers_formula(self):
        self.assertAlmostEqual(weight(torch.tensor(R1), 0.5), 1.0)
        self.assertAlmostEqual(weight(torch.tensor(R2), 0.5), 0.75)
        self.assertAlmostEqual(weight(torch.tensor(R2), 1.0), 0.5)
        self.assertAlmostEqual(weight(torch.tensor(R2), 0.0), 1.0)

    def test_weighted_average_matches_hand_computed_values(self):
        # phi 0.5: w = 1 and 0.75, war = (r1 + 0.75 r2) / 1.75.
        war = weighted_average([torch.tensor(R1), torch.tensor(R2)], 0.5)
        close(self, war, [2.5 / 1.75, -1 / 1.75, 1 / 1.75, -1 / 1.75])
        # phi 1: w = 1 and 0.5.
        war = weighted_average([torch.tensor(R1), torch.tensor(R2)], 1.0)
        close(self, war, [2 / 1.5, -1 / 1.5, 1 / 1.5, -1 / 1.5])

    def test_an_all_zero_group_gets_a_zero_residual(self):
        war = weighted_average([torch.zeros(4), torch.zeros(4)], 0.5)
        close(self, war, [0.0] * 4)
        self.assertTrue(torch.isfinite(war).all())
        # The same through a group's accumulation: sum w = 0, no NaN.
        res = Residuals()
        res.set_shapes([(4,), (4,)])
        res.set_plan(Plan((0, 0), (0.5, 0.5), (1, 1), (1, 1)))
        for layer in (1, 0):
            buf = res.begin(layer, (4,), torch.device("cpu"))
            res.end(layer, buf)  # zero gradient, zero residual
        close(self, res.war[0], [0.0] * 4)


class Compensation(unittest.TestCase):
    def setUp(self):
        self.res = Residuals()
        self.res.set_shapes([(4,), (4,)])
        self.res.set_plan(Plan((0, 0), (0.5, 0.5), (1, 1), (1, 1)))
        self.cpu = torch.device("cpu")

    def step(self, residuals):
        """One backward pass in backward order (layer 1, then 0): each
        member's buffer is read (its compensation), then replaced by its
        fresh residual. Returns the compensations."""
        seen = {}
        for layer in (1, 0):
            buf = self.res.begin(layer, (4,), self.cpu)
            seen[layer] = buf.clone()
            buf.copy_(torch.tensor(residuals[layer]))
            self.res.end(layer, buf)
        return seen

    def test_every_member_gets_the_previous_steps_shared_residual(self):
        first = self.step({0: R1, 1: R2})
        close(self, first[1], [0.0] * 4)
        close(self, first[0], [0.0] * 4)  # not layer 1's new residual
        war1 = weighted_average([torch.tensor(R1), torch.tensor(R2)], 0.5)
        close(self, self.res.war[0], war1)
        second = self.step({0: R2, 1: R2})
        # Both members of step 2 were compensated with step 1's war, the
        # last one too, although the first had folded its residual.
        close(self, second[1], war1)
        close(self, second[0], war1)
        close(self, self.res.war[0], R2)

    def test_the_group_keeps_a_double_buffer_only_during_its_backward(self):
        self.step({0: R1, 1: R2})
        self.assertEqual(self.res.held(), 4)  # war_g alone
        buf = self.res.begin(1, (4,), self.cpu)
        self.res.end(1, buf)
        self.assertEqual(self.res.held(), 8)  # old war_g + accumulator
        buf = self.res.begin(0, (4,), self.cpu)
        self.res.end(0, buf)
        self.assertEqual(self.res.held(), 4)
        self.assertEqual(self.res.peak_floats, 8)
        self.assertEqual(self.res.memory(), (4, 8))

    def test_a_raw_member_flushes_the_shared_residual_and_adds_zero(self):
        self.step({0: R1, 1: R1})
        comp = self.res.raw(1)
        close(self, comp, R1)
        buf = self.res.begin(0, (4,), self.cpu)
        close(self, buf, R1)
        buf.copy_(torch.tensor(R2))
        self.res.end(0, buf)
        close(self, self.res.war[0], R2)  # layer 1's weight is 0


class TwoD(unittest.TestCase):
    # Row L1 norms 1, 10, 2, 20; column L1 norms 11, 6, 7, 9, 0, 0.
    M = torch.tensor([[1.0, 0, 0, 0, 0, 0],
                      [5.0, 0, 0, 5, 0, 0],
                      [0.0, 0, 2, 0, 0, 0],
                      [5.0, 6, 5, 4, 0, 0]])

    def test_kept_rows_and_columns_are_those_of_largest_l1_norm(self):
        ri, ci, vals = kept_block(self.M, 4, 6, 0.5, 0.5)
        self.assertEqual(ri.tolist(), [1, 3])
        self.assertEqual(ci.tolist(), [0, 2, 3])
        close(self, vals, [[5.0, 0, 5], [5.0, 5, 4]])
        # Fractions round up, at least one of each.
        ri, ci, _ = kept_block(self.M, 4, 6, 0.01, 0.2)
        self.assertEqual((ri.tolist(), ci.tolist()), ([3], [0, 3]))

    def test_a_reduced_layer_is_compensated_with_its_block_only(self):
        res = Residuals()
        res.set_shapes([(4, 6)])
        res.set_plan(Plan((0,), (0.5,), (0.5,), (0.5,)))
        buf = res.begin(0, (24,), torch.device("cpu"))
        buf.copy_(self.M.reshape(-1))
        res.end(0, buf)
        self.assertEqual(res.floats(0), 2 * 3 + 2 + 3)
        comp = res.begin(0, (24,), torch.device("cpu")).reshape(4, 6)
        want = torch.zeros(4, 6)
        want[1, 0], want[1, 3] = 5, 5
        want[3, 0], want[3, 2], want[3, 3] = 5, 5, 4
        close(self, comp, want)


class Migration(unittest.TestCase):
    def test_groups_form_from_and_split_into_own_residuals(self):
        res = Residuals()
        res.set_shapes([(4,), (4,), (2, 3)])
        cpu = torch.device("cpu")
        for layer, r in ((0, R1), (1, R2)):
            res.begin(layer, (4,), cpu).copy_(torch.tensor(r))
        moved = res.set_plan(Plan((0, 0, 2), (0.5,) * 3, (1,) * 3, (1,) * 3))
        self.assertEqual(moved, [0, 1])
        war = weighted_average([torch.tensor(R1), torch.tensor(R2)], 0.5)
        close(self, res.war[0], war)
        self.assertNotIn(0, res.own)
        self.assertNotIn(1, res.own)
        moved = res.set_plan(Plan.default(3))
        self.assertEqual(moved, [0, 1])
        close(self, res.begin(0, (4,), cpu), war)
        close(self, res.begin(1, (4,), cpu), war)
        self.assertEqual(res.war, {})

    def test_a_group_of_layers_of_different_sizes_is_not_shared(self):
        res = Residuals()
        res.set_shapes([(4,), (5,)])
        res.set_plan(Plan((0, 0), (0.5, 0.5), (1, 1), (1, 1)))
        self.assertEqual(res.plan.group, (0, 1))

    def test_a_reduction_keeps_the_block_and_gives_it_back(self):
        res = Residuals()
        res.set_shapes([(4, 6)])
        cpu = torch.device("cpu")
        res.begin(0, (24,), cpu).copy_(TwoD.M.reshape(-1))
        res.set_plan(Plan((0,), (0.5,), (0.5,), (0.5,)))
        self.assertNotIn(0, res.own)
        res.set_plan(Plan.default(1))
        back = res.begin(0, (24,), cpu).reshape(4, 6)
        self.assertEqual(back.count_nonzero().item(), 5)
        self.assertEqual(back[3, 3].item(), 4.0)


class Compressors(unittest.TestCase):
    def test_topk_and_powersgd_keep_shared_residuals(self):
        g = torch.Generator().manual_seed(3)
        grads = [torch.randn(8, 8, generator=g) for _ in range(3)]
        for c in (compress.TopK(native=False), compress.PowerSGD(seed=1)):
            c.residuals.set_shapes([(8, 8)] * 3)
            c.residuals.set_plan(Plan((0, 0, 0), (0.5,) * 3, (1,) * 3,
                                      (1,) * 3))
            level = 0.25 if isinstance(c, compress.TopK) else 1
            for _ in range(2):
                items = [compress.Item(i, grads[i].clone(), level)
                         for i in (2, 1, 0)]
                c.reduce(items, LoneComm())
            self.assertEqual(c.errors, {}, c.name)
            self.assertEqual(set(c.residuals.war), {0}, c.name)
            self.assertEqual(c.residuals.memory(), (64, 192), c.name)
            stats = c.residuals.take_stats()
            self.assertEqual(set(stats), {0, 1, 2})
            l1, l2, q50, q90, q99 = stats[0]
            self.assertTrue(l1 > 0 and l2 > 0 and 0 < q50 <= q90 <= q99)

    def test_the_quantisers_keep_per_layer_residuals_whatever_the_plan(
            self):
        q = compress.TwoBit(native=False)
        q.residuals.set_shapes([(8,), (8,)])
        self.assertEqual(q.residuals.set_plan(
            Plan((0, 0), (0.5, 0.5), (1, 1), (1, 1))), [])
        self.assertIsNone(q.residuals.plan)

    def test_quantiles_are_of_the_residual_over_its_rms(self):
        res = Residuals(sample=1 << 20)
        res.set_shapes([(1000,)])
        buf = res.begin(0, (1000,), torch.device("cpu"))
        buf.copy_(torch.linspace(0, 1, 1000))
        res.end(0, buf)
        l1, l2, q50, q90, q99 = res.take_stats()[0]
        rms = math.sqrt(sum((i / 999) ** 2 for i in range(1000)) / 1000)
        self.assertAlmostEqual(l1, 500.0, places=3)
        self.assertAlmostEqual(q50, 0.5 / rms, places=3)
        self.assertAlmostEqual(q90, 0.9 / rms, places=3)


if __name__ == "__main__":
    unittest.main()
