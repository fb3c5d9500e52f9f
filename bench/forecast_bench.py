"""Forecasting benchmark: the project's forecaster against baselines, on real curves, per cut.

Protocol (issue #2): for each real curve and each cut c in {0.1, 0.2, 0.3, 0.5, 0.7} of the last
logged step, forecast from the points up to the cut (with total_steps, times and learning rates
where known) and compare with the truth: final loss = median of the last 5% of points; plateau =
(median of the last 5 visible points - final) / that median < 0.01; ETA = time of the last point
- time at the cut. Baselines run in the same process on the same inputs (see ``_baselines``).

Run:  .venv/bin/python bench/forecast_bench.py [--quick] [--json] [--split tune|holdout|all]
      .venv/bin/python bench/forecast_bench.py --finetune [--split ...]   (train + eval series, run state)
Skips (exit 0, a message) when the development data is absent.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Every method is timed "on one core", as the targets are stated: no BLAS thread pool.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  (after the thread settings above)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _baselines import ensemble5, last_value, single_fit  # noqa: E402
from _curves import BenchCurve, load_all  # noqa: E402

from advisor.forecast import forecast_with_parts  # noqa: E402

CUTS = (0.1, 0.2, 0.3, 0.5, 0.7)
#: ``--training-loss``: forecast each curve as the controller forecasts a training loss (it does
#: not turn), rather than as any series
TRAINING_LOSS = False
METHODS = ("advisor", "last", "optimus", "pow3", "ens5")


def truth(c: BenchCurve) -> float:
    n = c.values.size
    k = max(1, math.ceil(0.05 * n))
    return float(np.median(c.values[-k:]))


def naive_eta(x: np.ndarray, t: np.ndarray | None, horizon: float) -> float | None:
    """What a dashboard does: average rate since the start of the segment."""
    if t is None or x.size < 2 or not np.isfinite(t[-1] - t[0]) or t[-1] <= t[0] or x[-1] <= x[0]:
        return None
    rate = (x[-1] - x[0]) / (t[-1] - t[0])
    return float((horizon - x[-1]) / rate)


def run(
    curves: list[BenchCurve], methods: tuple[str, ...], n_boot: int, records: list[dict[str, Any]]
) -> None:
    rng = np.random.default_rng(0)
    for c in curves:
        final = truth(c)
        last_step = float(c.steps[-1])
        t_last = float(c.times[-1]) if c.times is not None else float("nan")
        for cut in CUTS:
            m = c.steps <= cut * last_step
            if m.sum() < 1:
                continue
            x, y = c.steps[m], c.values[m]
            t = c.times[m] if c.times is not None else None
            lr = c.lrs[m] if c.lrs is not None else None
            ep = c.epochs[m] if c.epochs is not None else None
            level = float(np.median(y[-5:]))
            plateau_truth = (level - final) / abs(level) < 0.01 if level != 0 else True
            eta_truth = t_last - float(t[-1]) if t is not None and np.isfinite(t[-1]) else None
            base = {
                "curve": c.name,
                "source": c.source,
                "split": c.split,
                "cut": cut,
                "n": int(x.size),
                "truth": final,
                "plateau_truth": bool(plateau_truth),
                "eta_truth": eta_truth,
                "level": level,
            }
            for meth in methods:
                c0 = time.process_time()
                t0 = time.perf_counter()
                eta: float | None
                parts: Mapping[str, Any] = {}
                if meth == "advisor":
                    fc, parts = forecast_with_parts(
                        x,
                        y,
                        total_steps=last_step,
                        times=t,
                        learning_rates=lr,
                        epochs=ep,
                        training_loss=TRAINING_LOSS,
                    )
                    mean, p10, p90 = fc.final_loss.mean, fc.final_loss.p10, fc.final_loss.p90
                    pp = fc.plateau_probability
                    eta = fc.eta_seconds.mean if fc.eta_seconds is not None else None
                elif meth == "last":
                    mean, p10, p90, pp = last_value(x, y, last_step)
                    eta = None
                elif meth in ("optimus", "pow3"):
                    mean, p10, p90, pp = single_fit(meth, x, y, last_step, rng)
                    eta = None
                else:
                    mean, p10, p90, pp = ensemble5(x, y, last_step, rng, n_boot=n_boot)
                    eta = None
                dt = time.perf_counter() - t0
                dc = time.process_time() - c0
                if meth != "advisor":
                    eta = naive_eta(x, t, last_step)
                rec = dict(
                    base,
                    method=meth,
                    mean=mean,
                    p10=p10,
                    p90=p90,
                    plateau_p=pp,
                    eta=eta,
                    seconds=dt,
                    cpu_seconds=dc,
                )
                if meth == "advisor":
                    rec["parts"] = {
                        k: v for k, v in parts.items() if isinstance(v, int | float | str | type(None))
                    }
                records.append(rec)


def summarise(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    groups: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["method"], r["cut"])].append(r)
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for (meth, cut), rs in sorted(groups.items()):
        truth_v = np.array([r["truth"] for r in rs])
        mean = np.array([r["mean"] for r in rs], dtype=float)
        p10 = np.array([r["p10"] for r in rs], dtype=float)
        p90 = np.array([r["p90"] for r in rs], dtype=float)
        denom = np.maximum(np.abs(truth_v), 1e-12)
        err = np.abs(mean - truth_v) / denom
        err = np.where(np.isfinite(err), err, 10.0)
        cover = (p10 <= truth_v) & (truth_v <= p90)
        width = (p90 - p10) / denom
        pp = np.array([r["plateau_p"] for r in rs], dtype=float)
        pt = np.array([r["plateau_truth"] for r in rs], dtype=float)
        etas = [
            abs(r["eta"] - r["eta_truth"]) / r["eta_truth"]
            for r in rs
            if r["eta"] is not None and r["eta_truth"] is not None and r["eta_truth"] > 0
        ]
        secs = np.array([r["seconds"] for r in rs])
        cpu = np.array([r.get("cpu_seconds", float("nan")) for r in rs], dtype=float)
        out[meth][f"{cut:g}"] = {
            "n": len(rs),
            "med_err": float(np.median(err)),
            "p90_err": float(np.quantile(err, 0.9)),
            "coverage": float(np.mean(cover)),
            "med_width": float(np.median(np.where(np.isfinite(width), width, 10.0))),
            "brier": float(np.mean((np.nan_to_num(pp, nan=0.5) - pt) ** 2)),
            "eta_med_err": float(np.median(etas)) if etas else float("nan"),
            "ms_med": float(np.median(secs) * 1e3),
            "ms_p95": float(np.quantile(secs, 0.95) * 1e3),
            "cpu_ms_med": float(np.median(cpu) * 1e3),
            "cpu_ms_p95": float(np.quantile(cpu, 0.95) * 1e3),
        }
    return out


def print_table(summary: dict[str, dict[str, dict[str, float]]], title: str) -> None:
    print(f"\n== {title}")
    hdr = f"{'cut':>4} {'method':<8} {'n':>4} {'medErr%':>8} {'p90Err%':>8} {'cover':>6} {'width%':>7} "
    hdr += f"{'brier':>6} {'etaErr%':>8} {'ms_med':>8} {'ms_p95':>8} {'cpu_med':>8} {'cpu_p95':>8}"
    print(hdr)
    cuts = sorted({c for m in summary.values() for c in m}, key=float)
    for cut in cuts:
        for meth in METHODS:
            s = summary.get(meth, {}).get(cut)
            if s is None:
                continue
            print(
                f"{cut:>4} {meth:<8} {s['n']:>4} {100 * s['med_err']:>8.2f} {100 * s['p90_err']:>8.2f} "
                f"{s['coverage']:>6.2f} {100 * s['med_width']:>7.2f} {s['brier']:>6.3f} "
                f"{100 * s['eta_med_err']:>8.2f} {s['ms_med']:>8.2f} {s['ms_p95']:>8.2f} "
                f"{s['cpu_ms_med']:>8.2f} {s['cpu_ms_p95']:>8.2f}"
            )
        adv = summary.get("advisor", {}).get(cut)
        others = [summary[m][cut] for m in METHODS[1:] if m in summary and cut in summary[m]]
        if adv and others:
            best = min(o["med_err"] for o in others)
            fastest = (
                min(o["ms_med"] for o in others if o["ms_med"] > 0.05)
                if any(o["ms_med"] > 0.05 for o in others)
                else float("nan")
            )
            ens_ms = summary.get("ens5", {}).get(cut, {}).get("ms_med", float("nan"))
            print(
                f"{'':>4} ratio    advisor/best-baseline medErr = {adv['med_err'] / max(best, 1e-12):.2f}; "
                f"advisor brier - best = {adv['brier'] - min(o['brier'] for o in others):+.3f}; "
                f"ens5/advisor time = {ens_ms / adv['ms_med']:.0f}x; "
                f"advisor/fastest-fit time = {adv['ms_med'] / fastest:.2f}"
            )


def timing_400(repeats: int = 200) -> dict[str, float]:
    """Time per call on a synthetic 400-point curve with total_steps, times and an LR schedule:
    CPU time (process_time, what the call itself costs on a shared machine) and wall time."""
    from advisor.forecast import forecast

    s = np.arange(1, 401) * 25.0
    rng = np.random.default_rng(1)
    y = 3.2 + 4.0 * (s / 200 + 1) ** -0.6 + rng.normal(0, 0.01, s.size)
    lr = np.minimum(1.0, s / 500) * np.clip((30000 - s) / 25000, 0, 1)
    out: dict[str, float] = {}
    for label, kw in (("plain", {}), ("with_lr", {"learning_rates": lr})):
        cpu, wall = [], []
        for _ in range(repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            forecast(s, y, total_steps=30000, times=s * 0.3, **kw)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - t0)
        out[f"{label}_ms_med"] = float(np.median(cpu) * 1e3)
        out[f"{label}_ms_p95"] = float(np.quantile(cpu, 0.95) * 1e3)
        out[f"{label}_wall_ms_med"] = float(np.median(wall) * 1e3)
        out[f"{label}_wall_ms_p95"] = float(np.quantile(wall, 0.95) * 1e3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small stratified sample (runs in under a minute)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--split", choices=("tune", "holdout", "all"), default="all")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--boot", type=int, default=20, help="bootstrap refits of the 5-family baseline")
    ap.add_argument("--records", type=Path, help="write every forecast as JSON lines (for calibration)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many curves per source")
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="all fine-tuning curves plus this many pre-training curves (seeded, proportional to source)",
    )
    ap.add_argument("--save", type=Path, help="also write the JSON summary to this file")
    ap.add_argument(
        "--training-loss",
        action="store_true",
        help="forecast each curve as the controller forecasts a training loss (training_loss=True)",
    )
    ap.add_argument(
        "--finetune",
        action="store_true",
        help="the fine-tune benchmark instead: train and eval series, the run state (see _finetune)",
    )
    ap.add_argument(
        "--horizon",
        choices=("logged", "max_steps", "unknown"),
        default="logged",
        help="--finetune: forecast each series to its last logged step (where its truth is; default),"
        " to the run's max_steps (the older protocol), or with no total told (a job that reports none)",
    )
    args = ap.parse_args(argv)
    global TRAINING_LOSS
    TRAINING_LOSS = args.training_loss
    if args.finetune:
        from _curves import data_root
        from _finetune import main_finetune

        root = data_root()
        if root is None:
            print("forecast_bench: development curves not found (../shared/data/curves); skipped")
            return 0
        return main_finetune(root, args.split, args.json, args.horizon)
    curves = load_all()
    if not curves:
        print("forecast_bench: development curves not found (../shared/data/curves); skipped")
        return 0
    if args.split != "all":
        curves = [c for c in curves if c.split == args.split]
    limit = args.limit or (4 if args.quick else 0)
    if limit:
        by: dict[str, list[BenchCurve]] = defaultdict(list)
        for c in curves:
            by[c.source].append(c)
        rng = np.random.default_rng(42)
        curves = [c for cs in by.values() for c in (rng.permutation(np.array(cs, dtype=object))[:limit])]
    if args.sample:
        rng_s = np.random.default_rng(7)
        pre = [c for c in curves if c.source.startswith("nanogpt")]
        idx = rng_s.choice(len(pre), size=min(args.sample, len(pre)), replace=False)
        curves = [c for c in curves if not c.source.startswith("nanogpt")] + [pre[i] for i in sorted(idx)]
    methods = tuple(m for m in args.methods.split(",") if m in METHODS)
    records: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    run(curves, methods, args.boot if not args.quick else min(args.boot, 5), records)
    elapsed = time.perf_counter() - t0
    if args.records:
        with open(args.records, "w") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")
    summary = {"all": summarise(records)}
    for src in sorted({r["source"].split("-")[0] for r in records}):
        summary[src] = summarise([r for r in records if r["source"].startswith(src)])
    timing = timing_400(50 if args.quick else 200) if "advisor" in methods else {}
    if args.save:
        args.save.write_text(
            json.dumps(
                {
                    "curves": len(curves),
                    "split": args.split,
                    "seconds": elapsed,
                    "summary": summary,
                    "timing_400": timing,
                },
                indent=1,
            )
        )
    if args.json:
        print(
            json.dumps(
                {
                    "curves": len(curves),
                    "split": args.split,
                    "seconds": elapsed,
                    "summary": summary,
                    "timing_400": timing,
                },
                indent=1,
            )
        )
        return 0
    print(f"forecast_bench: {len(curves)} curves, split={args.split}, {elapsed:.1f}s")
    for key, summ in summary.items():
        print_table(summ, f"{key} curves")
    if timing:
        print(
            "\nadvisor, synthetic 400-point curve, ms per call (CPU: *_ms_*, wall: *_wall_ms_*):",
            {k: round(v, 2) for k, v in timing.items()},
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
