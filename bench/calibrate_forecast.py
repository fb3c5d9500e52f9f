"""Re-derive the forecaster's interval calibration (``advisor/forecast/calibration.py``) from the
development curves, and check it on the held-out half.

The 80% interval's half-width is ``Q(remaining) * scale`` (see ``calibration``'s docstring). This
script forecasts every curve at the benchmark's cuts (each cut is one remaining fraction of the
run, one ``REM_KNOTS`` entry) and takes, per split, the 80% quantile of ``|error| / scale`` for each
model path (``Q_KNOTS`` without learning rates, ``Q_KNOTS_SCHEDULE`` with them) and of
``|error| / |level|`` for the histories shorter than ``SMALL_N`` (``SMALL_REL_KNOTS``), on the
tuning half only, each run group weighted alike (the documented rule: a user's run is a new run
group, and one group's many seed repeats must not set the quantile alone). It prints those knots,
the plain quantile of each half for comparison, and the p10..p90 coverage of the knots in use and
of the rule's knots on each half; the held-out half is read, never used to set a knot. The curves
are split by run group (``bench/_curves``), so seed repeats of one run never straddle the split.

    python bench/calibrate_forecast.py            # prints the knots; edits nothing

Skips cleanly when the development curves are absent.
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _curves import BenchCurve, load_all  # noqa: E402

from advisor.forecast import calibration as cal  # noqa: E402
from advisor.forecast import forecast_with_parts  # noqa: E402
from advisor.forecast.interval import interval_scale  # noqa: E402

#: the benchmark's cuts, one per remaining fraction in ``cal.REM_KNOTS`` (rem = 1 - cut)
CUTS = tuple(round(1.0 - r, 3) for r in cal.REM_KNOTS)


def truth(c: BenchCurve) -> float:
    """The benchmark's final loss: median of the last 5% of points."""
    k = max(1, math.ceil(0.05 * c.values.size))
    return float(np.median(c.values[-k:]))


def scale_of(parts: Mapping[str, Any]) -> float:
    """The interval's scale, as the forecaster builds it before ``Q`` (``interval.interval_scale``)."""
    return interval_scale(
        parts["spread"], parts["drop"], parts["holdout_err"], parts["reach"], parts["level"]
    )


def ratios(
    curves: list[BenchCurve], *, small: bool = False, schedule: bool | None = None
) -> tuple[dict[float, np.ndarray], dict[float, np.ndarray]]:
    """|error| / scale of every forecast with at least SMALL_N points, per cut; with ``small``,
    |error| / |level| of those with fewer (at least 2: what the coarse rule covers). ``schedule``:
    only the forecasts whose ensemble had (True) or lacked (False) the schedule-aware law. Each
    ratio's weight (``weights``) is one over its run group's count at that cut, so that every run
    group counts alike."""
    out: dict[float, list[float]] = {c: [] for c in CUTS}
    groups: dict[float, list[str]] = {c: [] for c in CUTS}
    for c in curves:
        final, last = truth(c), float(c.steps[-1])
        for cut in CUTS:
            m = c.steps <= cut * last
            n = int(m.sum())
            if (n < cal.SMALL_N) != small or n < 2:
                continue
            fc, parts = forecast_with_parts(
                c.steps[m],
                c.values[m],
                total_steps=last,
                times=None if c.times is None else c.times[m],
                learning_rates=None if c.lrs is None else c.lrs[m],
                epochs=None if c.epochs is None else c.epochs[m],
            )
            if schedule is not None and (parts["lr_shape"] is not None) != schedule:
                continue
            sc = abs(parts["level"]) if small else scale_of(parts)
            if sc > 0 and math.isfinite(fc.final_loss.mean):
                out[cut].append(abs(fc.final_loss.mean - final) / sc)
                groups[cut].append(c.group)
    return {k: np.array(v) for k, v in out.items()}, {k: _group_weights(v) for k, v in groups.items()}


def _group_weights(groups: list[str]) -> np.ndarray:
    counts = Counter(groups)
    return np.array([1.0 / counts[g] for g in groups])


def main() -> int:
    curves = load_all()
    if not curves:
        print("calibrate_forecast: development curves not found (../shared/data/curves); skipped")
        return 0
    tuning = [c for c in curves if c.split == "tune"]
    holdout = [c for c in curves if c.split == "holdout"]
    for name, knots, schedule in (
        ("Q_KNOTS", cal.Q_KNOTS, False),
        ("Q_KNOTS_SCHEDULE", cal.Q_KNOTS_SCHEDULE, True),
    ):
        print(f"-- {name}: forecasts {'with' if schedule else 'without'} the schedule-aware law")
        _report(name, knots, ratios(tuning, schedule=schedule), ratios(holdout, schedule=schedule))
        print()
    print("-- SMALL_REL_KNOTS: histories shorter than SMALL_N (both paths)")
    _report("SMALL_REL_KNOTS", cal.SMALL_REL_KNOTS, ratios(tuning, small=True), ratios(holdout, small=True))
    return 0


def _quantile(a: np.ndarray, w: np.ndarray | None = None) -> float:
    """The 80% quantile of ``a``, each value weighted by ``w`` (None: alike)."""
    if not a.size:
        return math.nan
    if w is None:
        return float(np.quantile(a, 0.8))
    order = np.argsort(a)
    share = np.cumsum(w[order]) / float(w.sum())
    return float(a[order][min(int(np.searchsorted(share, 0.8)), a.size - 1)])


Ratios = tuple[dict[float, np.ndarray], dict[float, np.ndarray]]


def _report(name: str, in_use: tuple[float, ...], tune: Ratios, hold: Ratios) -> None:
    """The knots the documented rule gives (the tuning half's 80% quantile, each run group
    weighted alike), the plain quantile of each half for comparison, and the coverage of the
    knots in use and of the rule's knots on each half (the held-out half is read, never used)."""
    (t_r, t_w), (h_r, _) = tune, hold
    rule = [_quantile(t_r[cut], t_w[cut]) for cut in CUTS]
    found = [_quantile(t_r[cut]) for cut in CUTS]
    back = [_quantile(h_r[cut]) for cut in CUTS]

    def fmt(values: list[float] | tuple[float, ...]) -> str:
        return "(" + ", ".join(f"{v:.3g}" for v in values) + ")"

    print(f"REM_KNOTS = {cal.REM_KNOTS}")
    print(f"{name} in use             = {fmt(in_use)}")
    print(f"the rule: tuning, by group   = {fmt(rule)}")
    print(f"80% quantile, tuning (plain) = {fmt(found)}")
    print(f"80% quantile, held out       = {fmt(back)}  (read only)")
    print(" cut  n_tune  n_hold  in use: tune / hold  the rule's: tune / hold")
    for i, cut in enumerate(CUTS):
        t, h = t_r[cut], h_r[cut]
        if not (t.size and h.size):
            print(f" {cut:.1f}  {t.size:6d}  {h.size:6d}  (too few forecasts on a split)")
            continue
        use = f"{np.mean(t <= in_use[i]):.2f} / {np.mean(h <= in_use[i]):.2f}"
        ours = f"{np.mean(t <= rule[i]):.2f} / {np.mean(h <= rule[i]):.2f}"
        print(f" {cut:.1f}  {t.size:6d}  {h.size:6d}  {use:>19s}  {ours:>22s}")


if __name__ == "__main__":
    raise SystemExit(main())
