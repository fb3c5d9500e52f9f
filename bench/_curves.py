"""Load the development loss curves for the forecasting benchmark (read-only, never copied).

Two sources under ``../shared/data/curves`` (or ``$TRAINJOB_ADVISOR_DATA/curves``):
modded-nanogpt (val curves with >= 30 points; per-step train curves reduced to <= 400 points by
even striding, which keeps their noise) and HF ``trainer_state.json`` files (train loss and eval
loss series). Each curve carries a ``group`` (the record directory, or the repository) so that the
tuning / held-out split never separates seed repeats of one configuration.

A log that restarted (step going backwards) is reduced to its last segment here: the benchmark
measures extrapolation of one run, and the forecaster's restart handling has its own tests.
"""

from __future__ import annotations

import csv
import json
import os
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass
class BenchCurve:
    name: str
    source: str  # "nanogpt-val" | "nanogpt-train" | "hf-train" | "hf-eval"
    group: str
    steps: FloatArray
    values: FloatArray
    times: FloatArray | None
    lrs: FloatArray | None
    epochs: FloatArray | None

    @property
    def split(self) -> str:
        """'tune' or 'holdout', stable per group (crc32 of the group name)."""
        return "tune" if zlib.crc32(self.group.encode()) % 2 == 0 else "holdout"


def data_root() -> Path | None:
    env = os.environ.get("TRAINJOB_ADVISOR_DATA")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[1]
    candidates += [here.parent / "shared" / "data", Path("/work/shared/data")]
    for c in candidates:
        if (c / "curves").is_dir():
            return c
    return None


def _last_segment(*arrs: FloatArray | None) -> list[FloatArray | None]:
    steps = arrs[0]
    assert steps is not None
    back = np.nonzero(np.diff(steps) < 0)[0]
    start = int(back[-1] + 1) if back.size else 0
    return [a[start:] if a is not None else None for a in arrs]


def load_nanogpt(root: Path, max_train_points: int = 400) -> list[BenchCurve]:
    base = root / "curves" / "modded-nanogpt"
    if not base.is_dir():
        return []
    with open(base / "index.csv") as fh:
        index = {r["curve_id"]: r for r in csv.DictReader(fh)}
    out: list[BenchCurve] = []
    for fname, col, source in (
        ("val_curves.csv", "val_loss", "nanogpt-val"),
        ("train_curves.csv", "train_loss", "nanogpt-train"),
    ):
        rows: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        with open(base / fname) as fh:
            for r in csv.DictReader(fh):
                t = r["train_time_ms"]
                rows[r["curve_id"]].append(
                    (float(r["step"]), float(r[col]), float(t) / 1000.0 if t else np.nan)
                )
        for cid, pts in rows.items():
            arr = np.array(pts)
            s, v, t = _last_segment(arr[:, 0], arr[:, 1], arr[:, 2])
            assert s is not None and v is not None
            if source == "nanogpt-val" and s.size < 30:
                continue
            if source == "nanogpt-train" and s.size > max_train_points:
                idx = np.unique(np.linspace(0, s.size - 1, max_train_points).round().astype(int))
                s, v, t = s[idx], v[idx], (t[idx] if t is not None else None)
            path = index[cid]["path"] if cid in index else cid
            group = str(Path(path).parent)
            out.append(BenchCurve(f"{source}:{cid}", source, group, s, v, t, None, None))
    return out


def load_hf(root: Path, min_points: int = 20, max_points: int = 400) -> list[BenchCurve]:
    base = root / "curves" / "hf-finetune"
    if not base.is_dir():
        return []
    out: list[BenchCurve] = []
    for f in sorted(base.glob("*.json")):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        hist = state.get("log_history") or []
        group = f.name.split("__")[0] + "/" + f.name.split("__")[1]
        train = [
            (e["step"], e["loss"], e.get("learning_rate", np.nan), e.get("epoch", np.nan))
            for e in hist
            if "loss" in e and "step" in e
        ]
        evals = [
            (e["step"], e["eval_loss"], np.nan, e.get("epoch", np.nan))
            for e in hist
            if "eval_loss" in e and "step" in e
        ]
        lr_pts = np.array([(s, lr) for s, _, lr, _ in train if lr == lr], dtype=float).reshape(-1, 2)
        for series, source in ((train, "hf-train"), (evals, "hf-eval")):
            if len(series) < min_points:
                continue
            a = np.array(series, dtype=float)
            s, v, lr, ep = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
            if source == "hf-eval" and lr_pts.shape[0] >= 2:
                lr = np.interp(s, lr_pts[:, 0], lr_pts[:, 1])
            lr_arr = lr if np.isfinite(lr).sum() >= 2 else None
            s2, v2, lr2, ep2 = _last_segment(s, v, lr_arr, ep)
            assert s2 is not None and v2 is not None
            if s2.size > max_points:
                idx = np.unique(np.linspace(0, s2.size - 1, max_points).round().astype(int))
                s2, v2 = s2[idx], v2[idx]
                lr2 = lr2[idx] if lr2 is not None else None
                ep2 = ep2[idx] if ep2 is not None else None
            out.append(BenchCurve(f"{source}:{f.name[:60]}", source, group, s2, v2, None, lr2, ep2))
    return out


def load_all() -> list[BenchCurve]:
    root = data_root()
    if root is None:
        return []
    return load_nanogpt(root) + load_hf(root)
