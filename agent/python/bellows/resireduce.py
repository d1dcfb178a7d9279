"""resireduce - error-feedback residuals kept per a residual plan.

Error feedback keeps, per compressed tensor, the residual r = G~ - Q(G~)
of the last step and adds it to the next gradient (G~ = G + R). That is one
float per parameter. ResiReduce (Zheng et al., Euro-Par 2025) saves most
of it; bellowsd plans it per layer (the decision's residual plan, policy
``resireduce``) and ``Residuals`` below carries it out:

- **own** (the default): the layer keeps its whole residual, as before.
- **shared** (ResiReduce-w): the layers of a group (adjacent, same shape)
  share one buffer war_g. Every member is compensated with the *previous*
  step's war_g; after compression each member's fresh residual r_i is
  folded into an accumulator with the weight::

      w_i = phi ||r_i||_1 / n_i + (1 - phi) ||r_i||_2 / sqrt(n_i)

  and once every member has been folded (the group's last member in
  backward order, whatever that order is), war_g = sum w_i r_i / sum w_i
  replaces the old one. While a group's backward runs two full-size
  buffers exist (old war_g and the accumulator): the double buffer of the
  reference code; between steps only war_g. A group whose residuals are
  all zero (sum w = 0) gets war_g = 0. The weights use the residual r_i,
  as the paper's formula says (its code uses G~).
- **reduced** (ResiReduce-2d): the layer, viewed as a matrix [shape[0],
  numel / shape[0]], keeps only the rows and the columns of largest L1
  norm of its residual (kept fractions ``rows`` and ``cols``, at least one
  each) and the values where they cross; the rest of its residual is
  dropped (zero). The paper selects by top-k, as here (its code samples).

A plan change takes effect between steps (``set_plan``, called at the
step the decision is in force on every rank) and migrates state
explicitly: a new group's war_g is the weighted average of its members'
residuals as they were; a member leaving a group starts from war_g; a
layer starting a 2-D reduction keeps the block of its residual; one
ending it gets the block back in a zero matrix. Residuals are local to a
rank and never communicated, so ranks need not agree on them; they need
only apply plans at the same step, which the agent guarantees.

Each step's fresh residuals are summarised per layer for bellowsd
(``take_stats``): L1, L2 and the quantiles q50, q90, q99 of |r| / rms(r),
rms = L2 / sqrt(n), from an evenly strided sample of at most ``sample``
elements (the quantiles of a strided sample of a few thousand values
are within a few per cent of the exact ones and cost one small sort).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import torch

__all__ = ["Plan", "Residuals", "weight", "weighted_average", "kept_block"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """A residual plan: per layer its group's leader, the group's phi
    (read at the leader), the kept row and column fractions."""

    group: tuple[int, ...]
    phi: tuple[float, ...]
    rows: tuple[float, ...]
    cols: tuple[float, ...]

    @classmethod
    def default(cls, n: int) -> Plan:
        return cls(tuple(range(n)), (0.5,) * n, (1.0,) * n, (1.0,) * n)

    @functools.cached_property
    def _members(self) -> dict[int, tuple[int, ...]]:
        """Leader -> its members, built once (a step asks per layer)."""
        out: dict[int, list[int]] = {}
        for i, g in enumerate(self.group):
            out.setdefault(g, []).append(i)
        return {g: tuple(m) for g, m in out.items()}

    def members(self, g: int) -> list[int]:
        return list(self._members.get(g, ()))

    def shared(self, i: int) -> bool:
        return len(self._members.get(self.group[i], ())) > 1

    def reduced(self, i: int) -> bool:
        return self.rows[i] < 1.0 or self.cols[i] < 1.0

    def groups(self) -> dict[int, list[int]]:
        """Leaders of groups of two or more, with their members."""
        return {g: list(m) for g, m in self._members.items() if len(m) > 1}


def weight(r: torch.Tensor, phi: float) -> float:
    """w = phi ||r||_1 / n + (1 - phi) ||r||_2 / sqrt(n) of residual r."""
    n = r.numel()
    if n == 0:
        return 0.0
    f = r.reshape(-1).float()
    return (phi * f.abs().sum().item() / n
            + (1.0 - phi) * f.norm().item() / math.sqrt(n))


def weighted_average(rs: Sequence[torch.Tensor], phi: float) -> torch.Tensor:
    """sum w_i r_i / sum w_i (float32, flat); zeros when sum w = 0."""
    acc = torch.zeros(rs[0].numel(), dtype=torch.float32,
                      device=rs[0].device)
    total = 0.0
    for r in rs:
        w = weight(r, phi)
        if w > 0.0:
            acc.add_(r.reshape(-1).float(), alpha=w)
            total += w
    return acc.div_(total) if total > 0.0 else acc


def _kept(n: int, frac: float) -> int:
    return max(1, min(n, math.ceil(frac * n)))


def kept_block(r: torch.Tensor, m: int, n: int, rows: float, cols: float
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The 2-D reduction of residual r viewed as [m, n]: the indices of
    the ceil(rows * m) rows and ceil(cols * n) columns of largest L1 norm
    (ascending) and the values where they cross."""
    mat = r.reshape(m, n)
    a = mat.abs()
    ri = torch.topk(a.sum(dim=1), _kept(m, rows), sorted=False).indices
    ci = torch.topk(a.sum(dim=0), _kept(n, cols), sorted=False).indices
    ri, _ = torch.sort(ri)
    ci, _ = torch.sort(ci)
    return ri, ci, mat[ri[:, None], ci].clone()


def _matrix(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) == 0:
        return 1, 1
    m = int(shape[0])
    n = 1
    for d in shape[1:]:
        n *= int(d)
    return m, n


class Residuals:
    """The error-feedback residuals of one rank's compressor, per plan.

    ``own`` is the per-layer residual dict (the compressor's ``errors``).
    ``shapes`` (layer -> tensor shape) is needed for the 2-D reduction
    and for plan changes of layers that hold state; ``set_shapes`` fills
    it. Not thread-safe: the DDP hook and the training thread alternate.
    """

    def __init__(self, own: dict | None = None, sample: int = 4096):
        self.own: dict[int, torch.Tensor] = own if own is not None else {}
        self.plan: Plan | None = None
        self.shapes: dict[int, tuple[int, ...]] = {}
        self.war: dict[int, torch.Tensor] = {}  # leader -> flat war_g
        self.acc: dict[int, torch.Tensor] = {}  # leader -> sum w_i r_i
        self.wsum: dict[int, float] = {}
        self.seen: dict[int, set[int]] = {}
        self.blocks: dict[int, tuple[torch.Tensor, torch.Tensor,
                                     torch.Tensor]] = {}
        self.ef: set[int] = set()  # layers that ever had a residual
        self.sample = sample
        # False: end() leaves the residual statistics out (no policy in
        # force reads them: the decision's stats_skip); they cost two
        # passes over every compressed tensor and a sort of a sample.
        self.observing = True
        self.stats: dict[int, tuple[float, float, float, float, float]] = {}
        self.peak_floats = 0  # most floats held at once (with accumulators)
        # False: plans are ignored (every layer its own residual), for
        # compressors that cannot share (the quantisers).
        self.planned = True
        # The default plan (every layer its own residual), built once per
        # number of layers: the hook asks for the plan per layer and step.
        self._default: Plan | None = None
        # With no plan in force only own residuals exist and nothing is
        # shared, so the peak is the total after the step's last end():
        # counted once then (peak_floats), not after every end().
        self._peak_due = False

    # -- plan ------------------------------------------------------------

    def set_shapes(self, shapes: Sequence[Sequence[int]]) -> None:
        self.shapes = {i: tuple(int(d) for d in s)
                       for i, s in enumerate(shapes)}

    def _plan(self, n: int | None = None) -> Plan:
        if self.plan is not None:
            return self.plan
        n = n if n is not None else len(self.shapes)
        d = self._default
        if d is None or len(d.group) != n:
            d = self._default = Plan.default(n)
        return d

    def _numel(self, i: int) -> int:
        m, n = _matrix(self.shapes.get(i, ()))
        return m * n

    def _role(self, p: Plan, i: int) -> tuple:
        """What decides layer i's state under p: equal roles keep it."""
        if i >= len(p.group):
            return ("own",)
        g = p.group[i]
        members = p._members.get(g, ())
        if len(members) > 1:
            return ("shared", g, members, p.phi[g])
        if p.reduced(i):
            return ("reduced", p.rows[i], p.cols[i])
        return ("own",)

    def _sanitise(self, p: Plan) -> Plan:
        """A group whose members' sizes differ cannot share (a plan from
        another model): its members keep their own residuals."""
        group = list(p.group)
        for members in p.groups().values():
            sizes = {self._numel(i) for i in members}
            if len(sizes) > 1 or 0 in sizes:
                for i in members:
                    group[i] = i
        rows = list(p.rows)
        cols = list(p.cols)
        for i in range(len(group)):
            if p.reduced(i) and len(self.shapes.get(i, ())) < 2:
                rows[i] = cols[i] = 1.0
        return Plan(tuple(group), p.phi, tuple(rows), tuple(cols))

    def _materialise(self, i: int, p: Plan) -> torch.Tensor | None:
        """Layer i's residual under plan p as a flat tensor, or None."""
        role = self._role(p, i)
        if role[0] == "shared":
            w = self.war.get(role[1])
            return None if w is None else w.clone()
        if role[0] == "reduced":
            blk = self.blocks.get(i)
            if blk is None:
                return None
            ri, ci, vals = blk
            m, n = _matrix(self.shapes[i])
            out = torch.zeros(m, n, dtype=vals.dtype, device=vals.device)
            out[ri[:, None], ci] = vals
            return out.reshape(-1)
        r = self.own.get(i)
        return None if r is None else r.reshape(-1)

    def set_plan(self, plan: Plan) -> list[int]:
        """Puts ``plan`` in force between steps, migrating the state of
        every layer whose role changes; returns those layers."""
        self.new_step()
        if not self.planned:
            return []
        plan = self._sanitise(plan)
        old = self._plan(len(plan.group))
        changed = [i for i in range(len(plan.group))
                   if self._role(old, i) != self._role(plan, i)]
        before = {i: self._materialise(i, old) for i in changed}
        for i in changed:
            self.own.pop(i, None)
            self.blocks.pop(i, None)
            role = self._role(old, i)
            if role[0] == "shared":
                self.war.pop(role[1], None)
        self.plan = plan
        done: set[int] = set()
        for i in changed:
            role = self._role(plan, i)
            if role[0] == "shared":
                g, members = role[1], role[2]
                if g in done:
                    continue
                done.add(g)
                rs = [r for j in members
                      if (r := before.get(j)) is not None]
                if rs:
                    self.war[g] = weighted_average(rs, plan.phi[g])
            elif (r := before[i]) is None:
                continue
            elif role[0] == "reduced":
                m, n = _matrix(self.shapes[i])
                self.blocks[i] = kept_block(r, m, n, plan.rows[i],
                                            plan.cols[i])
            else:
                self.own[i] = r  # flat: begin reshapes it
        return changed

    # -- one step --------------------------------------------------------

    def new_step(self) -> None:
        """Between steps: finalises groups some member of which was not
        reduced in the last step, with the members that were."""
        for g in list(self.acc):
            self._finalise(g)
        self.count_peak()

    def any_held(self) -> bool:
        """True if some layer holds a residual (O(1)): when False no
        layer's raw send has anything to flush."""
        return bool(self.own or self.war or self.blocks or self.acc)

    def holds(self, layer: int) -> bool:
        """True if ``layer`` would be compensated by a non-zero residual
        (a raw send must then flush it)."""
        p = self._plan()
        role = self._role(p, layer)
        if role[0] == "shared":
            return role[1] in self.war
        if role[0] == "reduced":
            return layer in self.blocks
        return layer in self.own

    def begin(self, layer: int, shape: Sequence[int],
              device: torch.device) -> torch.Tensor:
        """The buffer M that layer's compressor adds the gradient to and
        leaves the fresh residual in (float32, ``shape``), holding the
        compensation: the layer's own residual (the buffer itself), the
        previous step's war_g, or the scattered block."""
        self.ef.add(layer)
        if layer not in self.shapes:
            self.shapes[layer] = tuple(int(d) for d in shape)
        role = self._role(self._plan(), layer)
        if role[0] == "shared":
            w = self.war.get(role[1])
            if w is None:
                return torch.zeros(tuple(shape), dtype=torch.float32,
                                   device=device)
            return w.clone().view(tuple(shape))
        if role[0] == "reduced":
            r = self._materialise(layer, self._plan())
            if r is None:
                return torch.zeros(tuple(shape), dtype=torch.float32,
                                   device=device)
            return r.view(tuple(shape))
        err = self.own.get(layer)
        if err is not None and tuple(err.shape) != tuple(shape):
            # A migrated residual is flat: the same storage, reshaped.
            err = (err.reshape(tuple(shape)) if err.numel() ==
                   math.prod(shape) else None)
        if err is None:
            err = torch.zeros(tuple(shape), dtype=torch.float32,
                              device=device)
        self.own[layer] = err
        return err

    def end(self, layer: int, buf: torch.Tensor) -> None:
        """Takes ``buf`` (from begin) holding layer's fresh residual."""
        r = buf.reshape(-1)
        self._observe(layer, r)
        p = self._plan()
        role = self._role(p, layer)
        if role[0] == "shared":
            self._fold(role[1], role[2], layer, r, p.phi[role[1]])
        elif role[0] == "reduced":
            m, n = _matrix(self.shapes[layer])
            self.blocks[layer] = kept_block(r, m, n, p.rows[layer],
                                            p.cols[layer])
        if self.plan is None:
            self._peak_due = True
        else:
            self._count_peak()

    def raw(self, layer: int) -> torch.Tensor | None:
        """The compensation of a layer sent raw this step (None: none);
        its residual after the send is zero."""
        p = self._plan()
        role = self._role(p, layer)
        if role[0] == "shared":
            w = self.war.get(role[1])
            comp = None if w is None else w.clone()
            self._fold(role[1], role[2], layer, None, p.phi[role[1]])
            return comp
        if role[0] == "reduced":
            comp = self._materialise(layer, p)
            self.blocks.pop(layer, None)
            return comp
        return self.own.pop(layer, None)

    def _fold(self, g: int, members: tuple, layer: int,
              r: torch.Tensor | None, phi: float) -> None:
        seen = self.seen.setdefault(g, set())
        seen.add(layer)
        if r is not None:
            w = weight(r, phi)
            if g not in self.acc:
                self.acc[g] = torch.zeros(r.numel(), dtype=torch.float32,
                                          device=r.device)
                self.wsum[g] = 0.0
            if w > 0.0:
                self.acc[g].add_(r.float(), alpha=w)
                self.wsum[g] += w
        if seen >= set(members):
            self._finalise(g)

    def _finalise(self, g: int) -> None:
        """war_g := accumulator / sum w (0 when sum w = 0): the group's
        last member of the step has been folded."""
        self.seen.pop(g, None)
        acc = self.acc.pop(g, None)
        total = self.wsum.pop(g, 0.0)
        if acc is None:
            self.war.pop(g, None)  # every member went raw: nothing left
            return
        self.war[g] = acc.div_(total) if total > 0.0 else acc.zero_()

    # -- statistics and memory -------------------------------------------

    def _observe(self, layer: int, r: torch.Tensor) -> None:
        if not self.observing:
            return
        f = r.detach().float()
        n = f.numel()
        l1 = float(f.abs().sum().item())
        l2 = float(f.norm().item())
        rms = l2 / math.sqrt(n) if n else 0.0
        q: tuple[float, ...] = (0.0, 0.0, 0.0)
        if rms > 0.0 and math.isfinite(rms):
            stride = max(1, n // self.sample)
            s = f[::stride].abs()
            qs = torch.quantile(s, torch.tensor([0.5, 0.9, 0.99],
                                                device=s.device))
            q = tuple(float(v) / rms for v in qs.tolist())
        if not all(math.isfinite(v) for v in (l1, l2) + q):
            return
        self.stats[layer] = (l1, l2, q[0], q[1], q[2])

    def take_stats(self) -> dict[int, tuple[float, float, float, float, float]]:
        """The step's (l1, l2, q50, q90, q99) per layer; clears them."""
        self.count_peak()
        out, self.stats = self.stats, {}
        return out

    def floats(self, layer: int) -> int:
        """Residual floats layer holds under the plan in force (a shared
        buffer counted at its leader; a block's values and indices)."""
        p = self._plan()
        role = self._role(p, layer)
        if role[0] == "shared":
            return self._numel(layer) if layer == role[1] else 0
        if role[0] == "reduced":
            m, n = _matrix(self.shapes[layer])
            kr, kc = _kept(m, p.rows[layer]), _kept(n, p.cols[layer])
            return kr * kc + kr + kc
        return self._numel(layer)

    def memory(self) -> tuple[int, int]:
        """(floats kept under the plan, floats of one whole residual per
        layer) over the layers with error feedback."""
        # Asked every step: it changes only with the plan or the layers.
        key = (self.plan, len(self.ef), len(self.shapes))
        if getattr(self, "_memory_key", None) != key:
            kept = sum(self.floats(i) for i in self.ef)
            full = sum(self._numel(i) for i in self.ef)
            self._memory_key, self._memory = key, (kept, full)
        return self._memory

    def held(self) -> int:
        """Floats the buffers hold right now (accumulators included)."""
        n = sum(t.numel() for t in self.own.values())
        n += sum(t.numel() for t in self.war.values())
        n += sum(t.numel() for t in self.acc.values())
        n += sum(a.numel() + b.numel() + v.numel()
                 for a, b, v in self.blocks.values())
        return n

    def count_peak(self) -> None:
        """Brings peak_floats up to date (O(layers held)): after the last
        end() of a step when no plan is in force."""
        if self._peak_due:
            self._peak_due = False
            self._count_peak()

    def _count_peak(self) -> None:
        self.peak_floats = max(self.peak_floats, self.held())
