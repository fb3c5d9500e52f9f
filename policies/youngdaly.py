"""The optimal periodic checkpoint interval (Young 1974, Daly 2006).

With checkpoint cost C and mean time between interruptions M = 1/hazard, Daly's higher-order
estimate is ``T = sqrt(2CM)·[1 + ⅓·sqrt(C/2M) + (1/9)·(C/2M)] − C`` for C < 2M, else ``T = M``.
A calm queue (hazard → 0) gets an infinite interval, which the checkpoint rule clamps to its
``maxInterval``; a preemptible one gets a short interval. See
``../shared/reference/forecasting-and-checkpointing.md`` §8 for the worked examples the tests check.
"""

from __future__ import annotations

import math

__all__ = ["checkpoint_interval", "young_interval"]


def _validate(cost_s: float, hazard_per_s: float) -> None:
    if not (isinstance(cost_s, int | float) and math.isfinite(cost_s) and cost_s >= 0):
        raise ValueError(f"cost_s must be a finite number >= 0, got {cost_s!r}")
    if not (isinstance(hazard_per_s, int | float) and math.isfinite(hazard_per_s) and hazard_per_s >= 0):
        raise ValueError(f"hazard_per_s must be a finite number >= 0, got {hazard_per_s!r}")


def young_interval(cost_s: float, hazard_per_s: float) -> float:
    """Young's first-order optimum ``sqrt(2·C·M)`` in seconds (``inf`` when hazard is 0)."""
    _validate(cost_s, hazard_per_s)
    if hazard_per_s == 0:
        return math.inf
    return math.sqrt(2.0 * cost_s / hazard_per_s)


def checkpoint_interval(cost_s: float, hazard_per_s: float) -> float:
    """Daly's optimum time between checkpoints, in seconds of compute.

    ``cost_s``: seconds one checkpoint takes; ``hazard_per_s``: interruptions (preemptions and
    failures) per second of running. Returns ``inf`` for a zero hazard, ``0`` for a free checkpoint.
    """
    _validate(cost_s, hazard_per_s)
    if hazard_per_s == 0:
        return math.inf
    m = 1.0 / hazard_per_s
    c = float(cost_s)
    if c >= 2.0 * m:
        return m
    r = c / (2.0 * m)
    return max(0.0, math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(r) / 3.0 + r / 9.0) - c)
