"""Re-derive the forecaster's interval calibration (``advisor/forecast/calibration.py``) from the
development curves, and check it on the held-out half.

The 80% interval's half-width is ``Q(remaining) * scale`` (see ``calibration``'s docstring). This
script forecasts every tuning-split curve at the benchmark's cuts, takes the 80% quantile of
``|error| / scale`` at each cut (each cut is one remaining fraction of the run, one ``REM_KNOTS``
entry), prints the ``Q_KNOTS`` it finds and the p10..p90 coverage those knots give on both splits,
next to the coverage of the knots in use. The curves are split by run group (``bench/_curves``), so
seed repeats of one run never straddle the split. Histories shorter than ``SMALL_N`` points use the
coarse ``SMALL_REL_KNOTS`` rule and are left out here.

    python bench/calibrate_forecast.py            # prints the knots; edits nothing

Skips cleanly when the development curves are absent.
"""

from __future__ import annotations

import math
import os
import sys
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

#: the benchmark's cuts, one per remaining fraction in ``cal.REM_KNOTS`` (rem = 1 - cut)
CUTS = tuple(round(1.0 - r, 3) for r in cal.REM_KNOTS)


def truth(c: BenchCurve) -> float:
    """The benchmark's final loss: median of the last 5% of points."""
    k = max(1, math.ceil(0.05 * c.values.size))
    return float(np.median(c.values[-k:]))


def scale_of(parts: Mapping[str, Any]) -> float:
    """The interval's scale, exactly as ``core._interval_sd`` builds it before ``Q``."""
    ho = parts["holdout_err"] if math.isfinite(parts["holdout_err"]) else 0.0
    return math.sqrt(
        (cal.K_SPREAD * parts["spread"]) ** 2
        + (cal.K_DROP * parts["drop"]) ** 2
        + (cal.K_HOLDOUT * ho * parts["reach"]) ** 2
        + (cal.REL_FLOOR * abs(parts["level"])) ** 2
    )


def ratios(curves: list[BenchCurve]) -> dict[float, np.ndarray]:
    """|error| / scale of every forecast with at least SMALL_N points, per cut."""
    out: dict[float, list[float]] = {c: [] for c in CUTS}
    for c in curves:
        final, last = truth(c), float(c.steps[-1])
        for cut in CUTS:
            m = c.steps <= cut * last
            if m.sum() < cal.SMALL_N:
                continue
            fc, parts = forecast_with_parts(
                c.steps[m],
                c.values[m],
                total_steps=last,
                times=None if c.times is None else c.times[m],
                learning_rates=None if c.lrs is None else c.lrs[m],
                epochs=None if c.epochs is None else c.epochs[m],
            )
            sc = scale_of(parts)
            if sc > 0 and math.isfinite(fc.final_loss.mean):
                out[cut].append(abs(fc.final_loss.mean - final) / sc)
    return {k: np.array(v) for k, v in out.items()}


def main() -> int:
    curves = load_all()
    if not curves:
        print("calibrate_forecast: development curves not found (../shared/data/curves); skipped")
        return 0
    tune = ratios([c for c in curves if c.split == "tune"])
    hold = ratios([c for c in curves if c.split == "holdout"])
    found = [float(np.quantile(tune[cut], 0.8)) for cut in CUTS]
    back = [float(np.quantile(hold[cut], 0.8)) for cut in CUTS]
    pooled = [float(np.quantile(np.concatenate((tune[cut], hold[cut])), 0.8)) for cut in CUTS]
    print(f"REM_KNOTS = {cal.REM_KNOTS}")
    print(f"Q_KNOTS in use        = {tuple(round(q, 2) for q in cal.Q_KNOTS)}")
    print(f"80% quantile, tuning  = {tuple(round(q, 2) for q in found)}")
    print(f"80% quantile, holdout = {tuple(round(q, 2) for q in back)}")
    print(f"80% quantile, pooled  = {tuple(round(q, 2) for q in pooled)}")
    print(" cut  n_tune  n_hold  in use: tune / hold  tuning knots on hold  holdout knots on tune")
    for i, cut in enumerate(CUTS):
        t, h = tune[cut], hold[cut]
        use = f"{np.mean(t <= cal.Q_KNOTS[i]):.2f} / {np.mean(h <= cal.Q_KNOTS[i]):.2f}"
        print(
            f" {cut:.1f}  {t.size:6d}  {h.size:6d}  {use:>19s}  {np.mean(h <= found[i]):20.2f}"
            f"  {np.mean(t <= back[i]):21.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
