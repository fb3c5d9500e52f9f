"""A smoke check on real pre-training curves from the development data (skipped when absent).

The benchmark (bench/forecast_bench.py) is the real measure; this only guards against a change
that silently wrecks forecasts on real curves.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from advisor.forecast import forecast

VAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "curves" / "modded-nanogpt" / "val_curves.csv"

pytestmark = [
    pytest.mark.data,
    pytest.mark.skipif(not VAL.is_file(), reason="development curves not present"),
]


def _curves(limit: int = 20) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rows: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    with open(VAL) as fh:
        for r in csv.DictReader(fh):
            rows[r["curve_id"]].append(
                (float(r["step"]), float(r["val_loss"]), float(r["train_time_ms"] or "nan"))
            )
    out = []
    for pts in rows.values():
        a = np.array(pts)
        if len(a) >= 30 and np.all(np.diff(a[:, 0]) > 0):
            out.append((a[:, 0], a[:, 1], a[:, 2] / 1000.0))
        if len(out) == limit:
            break
    return out


def test_half_way_forecasts_of_real_pretraining_curves() -> None:
    errs, covered, eta_errs = [], [], []
    for s, y, t in _curves():
        final = float(np.median(y[-max(1, int(np.ceil(0.05 * y.size))) :]))
        m = s <= 0.5 * s[-1]
        fc = forecast(s[m], y[m], total_steps=s[-1], times=t[m])
        errs.append(abs(fc.final_loss.mean - final) / final)
        covered.append(fc.final_loss.p10 <= final <= fc.final_loss.p90)
        if fc.eta_seconds is not None and np.isfinite(t[-1]):
            eta_errs.append(abs(fc.eta_seconds.mean - (t[-1] - t[m][-1])) / (t[-1] - t[m][-1]))
    assert len(errs) >= 10
    assert np.median(errs) < 0.04
    assert np.mean(covered) >= 0.5
    assert np.median(eta_errs) < 0.1
