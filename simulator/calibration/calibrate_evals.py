"""Measure the eval series of real fine-tunes and print the curve library's ``evals`` parameters.

Run: ``python -m simulator.calibration.calibrate_evals [--data ../shared/data/curves]``.

It reads the HF ``trainer_state.json`` files under ``hf-finetune`` and ``hf-finetune-more`` (the
tuning half only: repositories whose crc32 is even, as the benchmarks split them) and measures,
over the runs with at least 5 evaluations: how many runs report an eval series at all, how many
evaluations a run makes, how many end more than 1% above their best eval (overfit), where (as a
fraction of the run) their best eval lies, how fast the eval loss rises after it (relative rise
per unit of the run), the eval loss over the training loss at the same steps, and the relative
scatter of one eval about a smooth trend (a quadratic in log-step). It prints a YAML fragment;
the shipped ``simulator/data/curve_params.yaml`` holds the result (the data is never copied).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import zlib
from pathlib import Path

import numpy as np

DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "curves"
MIN_EVALS = 5


def _series(state: dict, key: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [
        (float(e["step"]), float(e[key]))
        for e in state.get("log_history") or []
        if isinstance(e, dict) and key in e and "step" in e and math.isfinite(float(e[key]))
    ]
    a = np.array(rows, dtype=float).reshape(-1, 2)
    if a.size:
        back = np.nonzero(np.diff(a[:, 0]) < 0)[0]
        a = a[int(back[-1]) + 1 :] if back.size else a  # the last restart segment
    return a[:, 0], a[:, 1]


def measure(root: Path) -> dict[str, list[float]]:
    keys = ("has_evals", "n", "overfit", "at", "rate", "gap", "scatter")
    out: dict[str, list[float]] = {k: [] for k in keys}
    for folder in ("hf-finetune", "hf-finetune-more"):
        base = root / folder
        index = base / "index.csv"
        if not index.is_file():
            continue
        with open(index, newline="") as fh:
            repos = {r["file"]: r["repo"] for r in csv.DictReader(fh)}
        for f in sorted(base.glob("*.json")):
            repo = repos.get(f.name, f.name.split("__")[0])
            if zlib.crc32(repo.encode()) % 2:
                continue  # the held-out half
            try:
                state = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            ts, ty = _series(state, "loss")
            es, ey = _series(state, "eval_loss")
            if ts.size < 10:
                continue
            out["has_evals"].append(float(es.size >= MIN_EVALS))
            if es.size < MIN_EVALS or np.median(ey) <= 0:
                continue
            last = float(max(ts[-1], es[-1]))
            best = int(np.argmin(ey))
            rise = float(ey[-1] / ey[best] - 1.0)
            out["n"].append(float(es.size))
            out["overfit"].append(float(rise > 0.01))
            if rise > 0.01:
                at = float(es[best] / last)
                out["at"].append(at)
                out["rate"].append(rise / max(1.0 - at, 1e-3))
            out["gap"].append(float(np.median(ey / np.maximum(np.interp(es, ts, ty), 1e-9)) - 1.0))
            x = np.log(es)
            coef = np.polyfit(x, ey, 2)
            res = ey - np.polyval(coef, x)
            rms = np.sqrt(np.mean(res**2) * es.size / max(es.size - 3, 1))
            out["scatter"].append(float(rms / np.median(ey)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT, help="the curves folder (hf-finetune*/ under it)")
    args = ap.parse_args(argv)
    m = measure(args.data)
    if not m["n"]:
        print(f"no fine-tune eval series under {args.data}", file=sys.stderr)
        return 1
    ln = np.log(m["n"])
    rate = np.log(np.maximum(m["rate"], 1e-3))
    scatter = np.log(np.maximum(m["scatter"], 1e-5))
    at = np.percentile(m["at"], [10, 90])
    print("evals:")
    print(f"  share: {np.mean(m['has_evals']):.3f}")
    print(f"  log_count_mean: {ln.mean():.3f}")
    print(f"  log_count_sd: {ln.std():.3f}")
    print(f"  overfit_share: {np.mean(m['overfit']):.3f}")
    print(f"  overfit_at: [{at[0]:.3f}, {at[1]:.3f}]")
    print(f"  log_rate_mean: {rate.mean():.3f}")
    print(f"  log_rate_sd: {rate.std():.3f}")
    print(f"  gap: {float(np.median(m['gap'])):.3f}")
    print(f"  log_scatter_mean: {scatter.mean():.3f}")
    print(f"  log_scatter_sd: {scatter.std():.3f}")
    print(f"  # {len(m['n'])} runs with >= {MIN_EVALS} evaluations of {len(m['has_evals'])} (tuning half)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
