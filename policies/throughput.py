"""A throughput-vs-nodes model fitted to what a job actually achieved.

Amdahl's form ``t(n) = n·s / (1 + σ·(n − 1))`` (``s``: steps/s on one node, ``σ``: serial
fraction) is the simplest curve with diminishing returns, and it is linear in disguise:
``1/t(n) = a/n + b`` with ``a = (1 − σ)/s`` and ``b = σ/s``. So a weighted least-squares line
through the observed ``(1/n, 1/t)`` pairs fits it in closed form, fast enough to refit at every
decision. With a single observed node count the serial fraction cannot be identified, and the
policy's prior ``σ`` is used (conservative, so growth is never justified by wishful scaling).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ThroughputModel", "fit_throughput"]


@dataclass(frozen=True, slots=True)
class ThroughputModel:
    """``steps_per_second(n) = n·single / (1 + serial·(n − 1))``."""

    single: float
    serial: float
    observed: int

    def steps_per_second(self, nodes: int) -> float:
        if nodes <= 0:
            return 0.0
        return nodes * self.single / (1.0 + self.serial * (nodes - 1))

    def marginal_efficiency(self, nodes: int) -> float:
        """Gain from node ``nodes`` relative to the per-node rate at ``nodes − 1`` (1 = linear)."""
        if nodes <= 1:
            return 1.0
        prev = self.steps_per_second(nodes - 1)
        per_node = prev / (nodes - 1)
        return (self.steps_per_second(nodes) - prev) / per_node if per_node > 0 else 0.0


def fit_throughput(points: Sequence[tuple[int, float]], *, prior_serial: float) -> ThroughputModel | None:
    """Fit from ``(nodes, steps/s)`` pairs; ``None`` without one usable point."""
    clean = [(int(n), float(t)) for n, t in points if n >= 1 and math.isfinite(t) and t > 0]
    if not clean:
        return None
    distinct = sorted({n for n, _ in clean})
    if len(distinct) == 1:
        n = distinct[0]
        t = sum(tt for nn, tt in clean if nn == n) / sum(1 for nn, _ in clean if nn == n)
        single = t * (1.0 + prior_serial * (n - 1)) / n
        return ThroughputModel(single=single, serial=prior_serial, observed=len(clean))
    xs = [1.0 / n for n, _ in clean]
    ys = [1.0 / t for _, t in clean]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    b = my - a * mx
    a, b = max(a, 1e-12), max(b, 0.0)  # super-linear or negative overheads are noise, not physics
    single = 1.0 / (a + b)
    serial = min(b / (a + b), 0.999)
    return ThroughputModel(single=single, serial=serial, observed=len(clean))
