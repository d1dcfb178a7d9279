"""reference - straightforward PowerSGD and top-k over all workers at once.

What bellows.compress computes with collectives, written as the papers
state it over the list of every worker's gradient, with no communication,
no batching of layers and QR instead of Gram-Schmidt (column signs may
differ, P Q^T does not). The tests compare the two on fixed tensors.
"""

from __future__ import annotations

import math

import torch


def matrix_shape(shape) -> tuple[int, int]:
    return shape[0], math.prod(shape[1:])


class RefPowerSGD:
    """PowerSGD with error feedback and warm start for ``world`` workers.

    Q of a layer is drawn afresh when its rank changes, from
    torch.Generator().manual_seed(((seed * 1000003 + layer) * 1009 + n)
    % 2**63) where n counts the layer's earlier draws: the rule
    bellows.compress documents, so that both sides start from one Q.
    """

    def __init__(self, world: int, seed: int = 0):
        self.world = world
        self.seed = seed
        self.errors = [dict() for _ in range(world)]
        self.q = {}
        self.draws = {}

    @staticmethod
    def rank(shape, level) -> int:
        if len(shape) < 2 or level <= 0:
            return 0
        m, n = matrix_shape(shape)
        return min(int(level), m, n)

    def floats(self, shape, level) -> int:
        r = self.rank(shape, level)
        if r == 0:
            return math.prod(shape)
        m, n = matrix_shape(shape)
        return r * (m + n)

    def step(self, grads, levels):
        """grads[w][layer] -> the averaged result per layer (dict)."""
        out = {}
        for layer, level in levels.items():
            shape = tuple(grads[0][layer].shape)
            r = self.rank(shape, level)
            if r == 0:
                ms = [grads[w][layer] + self.errors[w].pop(
                    layer, torch.zeros(shape)).reshape(shape)
                    for w in range(self.world)]
                out[layer] = sum(ms) / self.world
                self.q.pop(layer, None)
                continue
            m, n = matrix_shape(shape)
            ms = [grads[w][layer].reshape(m, n)
                  + self.errors[w].get(layer, torch.zeros(m, n))
                  for w in range(self.world)]
            q = self.q.get(layer)
            if q is None or q.shape != (n, r):
                k = self.draws.get(layer, 0)
                self.draws[layer] = k + 1
                g = torch.Generator().manual_seed(
                    ((self.seed * 1000003 + layer) * 1009 + k) % 2**63)
                q = torch.randn(n, r, generator=g)
            p = sum(mw @ q for mw in ms)
            p, _ = torch.linalg.qr(p)
            q = sum(mw.t() @ p for mw in ms) / self.world
            approx = p @ q.t()
            for w in range(self.world):
                self.errors[w][layer] = ms[w] - approx
            self.q[layer] = q
            out[layer] = approx.reshape(shape)
        return out


class RefTopK:
    """top-k with error feedback for ``world`` workers: each keeps the k
    largest |grad + error| entries, k = max(1, min(numel, round(level *
    numel))), and the result is the mean of the sparse tensors."""

    def __init__(self, world: int):
        self.world = world
        self.errors = [dict() for _ in range(world)]

    @staticmethod
    def k(numel, level) -> int:
        if level <= 0:
            return 0
        return max(1, min(numel, round(level * numel)))

    def floats(self, shape, level) -> int:
        k = self.k(math.prod(shape), level)
        return 2 * k if k else math.prod(shape)

    def step(self, grads, levels):
        out = {}
        for layer, level in levels.items():
            shape = tuple(grads[0][layer].shape)
            numel = math.prod(shape)
            k = self.k(numel, level)
            total = torch.zeros(numel)
            for w in range(self.world):
                mw = grads[w][layer].reshape(-1) + self.errors[w].pop(
                    layer, torch.zeros(numel))
                if k == 0:
                    total += mw
                    continue
                idx = mw.abs().topk(k).indices
                sent = torch.zeros(numel)
                sent[idx] = mw[idx]
                self.errors[w][layer] = mw - sent
                total += sent
            out[layer] = (total / self.world).reshape(shape)
        return out
