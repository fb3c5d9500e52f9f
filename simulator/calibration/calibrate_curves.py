"""Fit the curve library's loss law to real pre-training curves and print the parameters.

Run: ``python -m simulator.calibration.calibrate_curves [--data ../shared/data/curves/modded-nanogpt]``.

It reads the modded-nanogpt logs (MIT-licensed) of the tuning half only (run groups, the record
folders of ``index.csv``, whose crc32 is even, as the benchmarks split them: the other half is
what the back-test and the forecast benchmark report), fits ``l_inf + a * (1 + x/x0) ** -alpha`` to the
validation loss over the first 60% of each run (before most of the learning-rate anneal), measures
how much the anneal then gains over that extrapolation, and measures the relative noise of the
per-step training loss around a rolling median. It prints a YAML fragment; the shipped
``simulator/data/curve_params.yaml`` holds the result (the data itself is never copied).
"""

from __future__ import annotations

import argparse
import csv
import sys
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.ndimage import median_filter
from scipy.optimize import curve_fit

DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "curves" / "modded-nanogpt"


def _law(x: np.ndarray, l_inf: float, a: float, x0: float, alpha: float) -> np.ndarray:
    return np.asarray(l_inf + a * (1.0 + x / x0) ** (-alpha))


def tuning_ids(index: Path) -> set[int] | None:
    """The curves of the tuning half: those whose run group (the folder of their ``path`` in
    ``index.csv``) has an even crc32, as ``bench/_curves`` splits them. None: no index, no split."""
    if not index.exists():
        return None
    with index.open(newline="") as fh:
        return {
            int(r["curve_id"])
            for r in csv.DictReader(fh)
            if zlib.crc32(str(Path(r["path"]).parent).encode()) % 2 == 0
        }


def _read(
    path: Path, value: str, keep: set[int] | None = None
) -> dict[int, tuple[np.ndarray, np.ndarray, int]]:
    rows: dict[int, list[tuple[float, float]]] = defaultdict(list)
    totals: dict[int, int] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            cid = int(row["curve_id"])
            if keep is not None and cid not in keep:
                continue
            rows[cid].append((float(row["step"]), float(row[value])))
            totals[cid] = int(row["total_steps"])
    out = {}
    for cid, pts in rows.items():
        arr = np.array(sorted(pts))
        out[cid] = (arr[:, 0], arr[:, 1], totals[cid])
    return out


def fit_val(curves: dict[int, tuple[np.ndarray, np.ndarray, int]]) -> dict[str, list[float]]:
    stats: dict[str, list[float]] = defaultdict(list)
    for steps, vals, total in curves.values():
        ok = np.isfinite(vals) & (steps > 0)
        x, y = steps[ok] / total, vals[ok]
        head = x <= 0.6
        if head.sum() < 8 or x.max() < 0.95:
            continue
        try:
            p, _ = curve_fit(
                _law,
                x[head],
                y[head],
                p0=(y.min() * 0.9, y[0], 0.05, 0.5),
                bounds=([0.5 * y.min(), 0.0, 1e-3, 0.05], [y.min(), 50.0, 10.0, 5.0]),
                maxfev=4000,
            )
        except (RuntimeError, ValueError):
            continue
        l_inf, a, x0, alpha = (float(v) for v in p)
        if l_inf <= 0:
            continue
        predicted_end = float(_law(np.array([1.0]), *p)[0])
        reducible_end = predicted_end - l_inf
        gain = (predicted_end - float(y[-1])) / reducible_end if reducible_end > 0 else np.nan
        stats["l_inf"].append(l_inf)
        stats["ratio"].append(a / l_inf)
        stats["x0"].append(x0)
        stats["alpha"].append(alpha)
        if np.isfinite(gain):
            stats["anneal_gain"].append(float(gain))
    return stats


def train_noise(curves: dict[int, tuple[np.ndarray, np.ndarray, int]], window: int = 51) -> list[float]:
    out = []
    for _steps, vals, _total in curves.values():
        if vals.size < 5 * window:
            continue
        med = median_filter(vals, size=window, mode="nearest")
        rel = (vals - med) / med
        rel = rel[np.isfinite(rel)]
        # a logged loss averages ~10 steps (HF logging_steps default 500 is coarser; 10 is conservative)
        out.append(float(np.std(rel[len(rel) // 10 :]) / np.sqrt(10.0)))
    return out


def _log_summary(name: str, values: list[float]) -> str:
    v = np.log(np.asarray(values))
    return f"  log_{name}_mean: {v.mean():.3f}\n  log_{name}_sd: {v.std():.3f}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    val_path, train_path = args.data / "val_curves.csv", args.data / "train_curves.csv"
    if not val_path.exists():
        print(f"calibrate_curves: {val_path} not found", file=sys.stderr)
        return 2
    keep = tuning_ids(args.data / "index.csv")
    if keep is None:
        print(
            f"calibrate_curves: {args.data / 'index.csv'} not found: no split to fit the tuning half",
            file=sys.stderr,
        )
        return 2
    stats = fit_val(_read(val_path, "val_loss", keep))
    noise = train_noise(_read(train_path, "train_loss", keep)) if train_path.exists() else []
    print(
        f"# fitted {len(stats['alpha'])} validation curves of the tuning half; noise from {len(noise)}"
        " train curves"
    )
    print("families:\n power:")
    print(_log_summary("alpha", stats["alpha"]).replace("  ", "   "), end="")
    print(_log_summary("x0", stats["x0"]).replace("  ", "   "), end="")
    print(_log_summary("reducible_ratio", stats["ratio"]).replace("  ", "   "), end="")
    print("l_inf:\n" + _log_summary("", stats["l_inf"]).replace("log__", "log_"), end="")
    gains = np.asarray(stats["anneal_gain"])
    print(f"anneal_gain_quartiles: [{np.quantile(gains, 0.25):.3f}, {np.quantile(gains, 0.75):.3f}]")
    if noise:
        print("noise:\n" + _log_summary("", noise).replace("log__", "log_"), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
