"""Fine-tune benchmark: train and eval series of real HF runs, the run state, against baselines.

Data: every ``trainer_state.json`` under ``curves/hf-finetune`` and ``curves/hf-finetune-more``,
split BY REPOSITORY (crc32 of ``owner/name`` from ``index.csv``, even: tune, odd: holdout), so
that checkpoints of one project never sit on both sides.

Per series (``train``: the training loss; ``eval``: ``eval_loss``) and cut c in CUTS of the last
logged step, each method forecasts from the points up to the cut, with ``total_steps`` the step of
the series' last logged point: the truth below lives there. (A quarter of the files are checkpoints
saved long before the run's ``max_steps``, up to 17x before it; asking for the value at ``max_steps``
and scoring it against the value at the checkpoint scores a question nobody asked. ``--horizon
max_steps`` reproduces that older protocol.) Truth, defined independently of the advisor's
thresholds:

* final value: median of the last ceil(5%) points of the series (the last eval for sparse evals);
* smoothed value at the cut: median of the last 5 visible points (train) or 3 visible evals (eval);
* plateau (the Forecast contract): remaining improvement to the end, smoothed value at the cut
  minus the final value, below 1% of the smoothed value (a rise counts as plateau);
* "eval stopped improving" (for the run state): no later eval at least 1% better than the smoothed
  eval at the cut. The truth run label: ``learning`` when not stopped; else ``overfitting`` when
  the training loss still improved by >= 1% after the cut, ``plateaued`` when it did not.

Methods: ``advisor`` (``forecast`` / ``forecast_series`` and ``learning_state``; the training loss
with ``training_loss=True`` as the core loop forecasts it, the eval series
with the run's learning rate at its steps, from the visible training history, as the core loop
does), ``last`` (last smoothed value, P(plateau) = 1), ``pow3`` (curve_fit, Laplace interval),
``patience`` (HF EarlyStopping: plateau when the last 3 points brought no new best, threshold 0;
final value = the best so far), ``trainspotter`` when installed (plateau when its plateau or
overfitting detector fires on the series over the visible prefix; final value = last value).
"""

from __future__ import annotations

import csv
import json
import math
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _baselines import last_value, single_fit  # type: ignore[import-not-found]

from advisor.forecast import forecast
from advisor.forecast.eval_forecast import lr_at
from advisor.forecast.state import learning_state
from advisor.model import LEARNING_LABELS
from advisor.series import Direction

CUTS = (0.1, 0.2, 0.3, 0.5, 0.7)
DIRS = ("hf-finetune", "hf-finetune-more")
PATIENCE = 3
MIN_EVALS_SEEN = 3
MIN_TRAIN_SEEN = 5


@dataclass
class Run:
    name: str
    repo: str
    total: float
    train: tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]  # steps, values, lrs, epochs
    evals: tuple[np.ndarray, np.ndarray]

    @property
    def split(self) -> str:
        return "tune" if zlib.crc32(self.repo.encode()) % 2 == 0 else "holdout"


@dataclass
class EvalSeries:
    steps: list[float]
    values: list[float]
    direction: Direction = Direction.LOWER


def _last_segment(steps: np.ndarray) -> int:
    back = np.nonzero(np.diff(steps) < 0)[0]
    return int(back[-1] + 1) if back.size else 0


def load_runs(root: Path) -> list[Run]:
    out: list[Run] = []
    for d in DIRS:
        base = root / "curves" / d
        if not (base / "index.csv").is_file():
            continue
        with open(base / "index.csv") as fh:
            repos = {r["file"]: r["repo"] for r in csv.DictReader(fh)}
        for f in sorted(base.glob("*.json")):
            try:
                state = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            hist = [e for e in state.get("log_history") or [] if isinstance(e, dict) and "step" in e]
            tr = [
                (e["step"], e["loss"], e.get("learning_rate", np.nan), e.get("epoch", np.nan))
                for e in hist
                if "loss" in e
            ]
            ev = [(e["step"], e["eval_loss"]) for e in hist if "eval_loss" in e]
            if len(tr) < 10:
                continue
            a = np.array(tr, dtype=float)
            a = a[_last_segment(a[:, 0]) :]
            e = np.array(ev, dtype=float).reshape(-1, 2)
            if e.size:
                e = e[_last_segment(e[:, 0]) :]
                e = e[np.isfinite(e[:, 1])]
            lrs = a[:, 2] if np.isfinite(a[:, 2]).sum() >= 2 else None
            eps = a[:, 3] if np.isfinite(a[:, 3]).sum() >= 2 else None
            total = float(state.get("max_steps") or 0) or float(a[-1, 0])
            total = max(total, float(a[-1, 0]), float(e[-1, 0]) if e.size else 0.0)
            out.append(
                Run(
                    f"{d}/{f.name}",
                    repos.get(f.name, f.name.split("__")[0]),
                    total,
                    (a[:, 0], a[:, 1], lrs, eps),
                    (e[:, 0], e[:, 1]),
                )
            )
    return out


def _final(y: np.ndarray) -> float:
    return float(np.median(y[-max(1, math.ceil(0.05 * y.size)) :]))


def _patience(y: np.ndarray) -> tuple[float, float]:
    """(P(plateau) as 0/1, final-value guess = best so far) of an EarlyStopping rule."""
    if y.size <= PATIENCE:
        return 0.0, float(y.min())
    best_before = float(y[:-PATIENCE].min())
    stopped = not bool(np.any(y[-PATIENCE:] < best_before))
    return float(stopped), float(y.min())


def _trainspotter(steps: np.ndarray, values: np.ndarray, metric: str) -> float | None:
    try:
        import trainspotter
        from trainspotter.detectors.overfitting import OverfittingDetector  # noqa: F401
    except ImportError:
        return None
    run = trainspotter.Run()
    for s, v in zip(steps, values, strict=True):
        run.add_point(metric, int(s), float(v))
    run.finalize()
    try:
        found = trainspotter.run_all(run)
    except Exception:
        return 0.0
    lo = float(steps[0]) + 0.8 * float(steps[-1] - steps[0])
    return float(
        any(
            f.metric == metric and f.detector in ("plateau", "overfitting") and f.step_end >= lo
            for f in found
        )
    )


def evaluate(runs: list[Run], *, with_trainspotter: bool = True, horizon: str = "logged") -> dict[str, Any]:
    """Every method on every run, series and cut. ``horizon``: ``logged`` (each series is forecast
    to its last logged step, where its truth is measured), ``max_steps`` (to the run's declared
    ``max_steps``, the older protocol) or ``unknown`` (the advisor is told no total, as for a job
    that reports none; the truth is still at the last logged step)."""
    rng = np.random.default_rng(0)
    records: list[dict[str, Any]] = []
    states: list[dict[str, Any]] = []
    # CPU time (process_time), as the targets are stated: what a call costs whatever else runs
    t_series: list[float] = []
    t_state: list[float] = []
    stability: list[float] = []
    train_moves: list[float] = []
    for run in runs:
        ts, ty, tlr, tep = run.train
        es, ey = run.evals
        last = max(float(ts[-1]), float(es[-1]) if es.size else 0.0)
        for cut in CUTS:
            at = cut * last
            mt, me = ts <= at, es <= at
            if mt.sum() < MIN_TRAIN_SEEN:
                continue
            fcs: dict[str, Any] = {}
            visible_lrs = (ts[mt], tlr[mt]) if tlr is not None else None
            for series, steps, vals, m, k, extra in (
                (
                    "train",
                    ts,
                    ty,
                    mt,
                    5,
                    {
                        "learning_rates": tlr[mt] if tlr is not None else None,
                        "epochs": tep[mt] if tep is not None else None,
                        "training_loss": True,
                    },
                ),
                # the eval series with the run's learning rate at its steps, as the core loop
                # forecasts it (only the visible part of the schedule is read)
                ("eval", es, ey, me, 3, {"learning_rates": lr_at(es[me], visible_lrs)}),
            ):
                n_seen = int(m.sum())
                if n_seen < (MIN_TRAIN_SEEN if series == "train" else MIN_EVALS_SEEN) or n_seen == vals.size:
                    continue
                x, y = steps[m], vals[m]
                total = run.total if horizon == "max_steps" else float(steps[-1])
                # ``unknown``: the advisor is not told the run's end (a job that reports no total
                # steps); the baselines still are, so they stand as they do in ``logged``
                told = None if horizon == "unknown" else total
                level = float(np.median(y[-k:]))
                final = _final(vals)
                plateau_truth = (level - final) < 0.01 * abs(level)
                base = {
                    "run": run.name,
                    "split": run.split,
                    "series": series,
                    "cut": cut,
                    "final": final,
                    "truth": plateau_truth,
                    # the points seen at the cut: coverage by history length reads it
                    "n": n_seen,
                }
                t0 = time.process_time()
                fc = forecast(x, y, total_steps=told, **extra)
                t_series.append(time.process_time() - t0)
                fcs[series] = fc
                records.append(
                    {
                        **base,
                        "method": "advisor",
                        "mean": fc.final_loss.mean,
                        "p10": fc.final_loss.p10,
                        "p90": fc.final_loss.p90,
                        "p": fc.plateau_probability,
                    }
                )
                v = last_value(x, y, total)
                records.append({**base, "method": "last", "mean": v[0], "p10": v[1], "p90": v[2], "p": v[3]})
                v = single_fit("pow3", x, y, total, rng)
                records.append({**base, "method": "pow3", "mean": v[0], "p10": v[1], "p90": v[2], "p": v[3]})
                p, best = _patience(y)
                records.append(
                    {**base, "method": "patience", "mean": best, "p10": math.nan, "p90": math.nan, "p": p}
                )
                if with_trainspotter:
                    p_ts = _trainspotter(x, y, "eval/loss" if series == "eval" else "train/loss")
                    if p_ts is not None:
                        records.append(
                            {
                                **base,
                                "method": "trainspotter",
                                "mean": float(y[-1]),
                                "p10": math.nan,
                                "p90": math.nan,
                                "p": p_ts,
                            }
                        )
                if series == "train" and n_seen + 1 < vals.size:
                    # the same question for the training loss: one more report, as the core loop
                    # would receive it (its learning rate and epoch with it)
                    k1 = n_seen + 1
                    nxt = forecast(
                        steps[:k1],
                        vals[:k1],
                        total_steps=told,
                        learning_rates=tlr[:k1] if tlr is not None else None,
                        epochs=tep[:k1] if tep is not None else None,
                        training_loss=True,
                    )
                    train_moves.append(abs(nxt.plateau_probability - fc.plateau_probability))
                if series == "eval" and n_seen + 1 < vals.size:
                    upto = float(steps[n_seen])
                    seen = (ts[ts <= upto], tlr[ts <= upto]) if tlr is not None else None
                    nxt = forecast(
                        steps[: n_seen + 1],
                        vals[: n_seen + 1],
                        total_steps=told,
                        learning_rates=lr_at(steps[: n_seen + 1], seen),
                    )
                    # what the new eval says: its distance from the smoothed level at the cut, and
                    # the contract's truth as it stands with it (a move toward that truth is news,
                    # not noise)
                    new_level = float(np.median(vals[: n_seen + 1][-k:]))
                    stability.append(
                        {
                            "run": run.name,
                            "cut": cut,
                            "split": run.split,
                            "p": fc.plateau_probability,
                            "move": nxt.plateau_probability - fc.plateau_probability,
                            "truth_after": (new_level - final) < 0.01 * abs(new_level),
                            "new_eval_change": abs(float(vals[n_seen]) - level) / max(abs(level), 1e-12),
                        }
                    )
            if "eval" not in fcs:
                continue
            x, y = es[me], ey[me]
            t0 = time.process_time()
            st = learning_state(
                fcs.get("train"),
                {"eval_loss": EvalSeries(list(x), list(y))},
                total_steps=(
                    None if horizon == "unknown" else int(es[-1] if horizon == "logged" else run.total)
                ),
                schedule=visible_lrs,
            )
            t_state.append(time.process_time() - t0)
            level = float(np.median(y[-3:]))
            stopped = not bool(np.any(ey[~me] <= level * (1 - 0.01)))
            tl = float(np.median(ty[mt][-5:]))
            train_improves = bool(np.any(ty[~mt] <= tl * (1 - 0.01)))
            truth_label = "learning" if not stopped else ("overfitting" if train_improves else "plateaued")
            states.append(
                {
                    "run": run.name,
                    "cut": cut,
                    "split": run.split,
                    "truth": truth_label,
                    "stopped": stopped,
                    "label": st.label,
                    "probabilities": dict(st.probabilities),
                    "best_step": st.best_step,
                    "patience": _patience(y)[0] > 0.5,
                }
            )
    return {
        "records": records,
        "states": states,
        "t_series": t_series,
        "t_state": t_state,
        "stability": stability,
        "train_moves": train_moves,
    }


def _prf(pred: list[bool], truth: list[bool]) -> tuple[float, float, float]:
    tp = sum(p and t for p, t in zip(pred, truth, strict=True))
    fp = sum(p and not t for p, t in zip(pred, truth, strict=True))
    fn = sum(t and not p for p, t in zip(pred, truth, strict=True))
    prec = tp / (tp + fp) if tp + fp else math.nan
    rec = tp / (tp + fn) if tp + fn else math.nan
    f1 = 2 * prec * rec / (prec + rec) if prec == prec and rec == rec and prec + rec > 0 else math.nan
    return prec, rec, f1


def summarise(result: dict[str, Any], split: str) -> dict[str, Any]:
    out: dict[str, Any] = {"series": {}, "state": {}}
    recs = [r for r in result["records"] if split == "all" or r["split"] == split]
    for series in ("train", "eval"):
        for method in ("advisor", "last", "pow3", "patience", "trainspotter"):
            rs = [r for r in recs if r["series"] == series and r["method"] == method]
            if not rs:
                continue
            err = [
                abs(r["mean"] - r["final"]) / max(abs(r["final"]), 1e-12)
                for r in rs
                if math.isfinite(r["mean"])
            ]
            cov = [
                r["p10"] <= r["final"] <= r["p90"]
                for r in rs
                if math.isfinite(r["p10"]) and math.isfinite(r["p90"]) and r["p10"] < r["p90"]
            ]
            brier = float(np.mean([(r["p"] - float(r["truth"])) ** 2 for r in rs]))
            prec, rec, f1 = _prf([r["p"] >= 0.5 for r in rs], [bool(r["truth"]) for r in rs])
            out["series"][f"{series}/{method}"] = {
                "n": len(rs),
                "median_rel_err": float(np.median(err)) if err else math.nan,
                "coverage80": float(np.mean(cov)) if cov else math.nan,
                "brier": brier,
                "precision": prec,
                "recall": rec,
                "f1": f1,
            }
    sts = [s for s in result["states"] if split == "all" or s["split"] == split]
    if sts:
        truth = [s["stopped"] for s in sts]
        for name, pred in (
            ("advisor", [s["label"] in ("plateaued", "overfitting") for s in sts]),
            ("patience", [s["patience"] for s in sts]),
        ):
            p, r, f = _prf(pred, truth)
            out["state"][name] = {"n": len(sts), "precision": p, "recall": r, "f1": f}
        out["state"]["confusion"] = {
            t: dict(Counter(s["label"] for s in sts if s["truth"] == t))
            for t in ("learning", "plateaued", "overfitting")
        }
        out["state"]["labels"] = list(LEARNING_LABELS)
    return out


def print_summary(summary: dict[str, Any], title: str) -> None:
    print(f"\n== fine-tunes, {title} ==")
    print(
        f"{'series/method':24s} {'n':>5s} {'relerr':>7s} {'cov80':>6s} {'brier':>6s}"
        f" {'prec':>5s} {'rec':>5s} {'f1':>5s}"
    )
    for key, m in summary["series"].items():
        print(
            f"{key:24s} {m['n']:5d} {m['median_rel_err']:7.3f} {m['coverage80']:6.2f} {m['brier']:6.3f}"
            f" {m['precision']:5.2f} {m['recall']:5.2f} {m['f1']:5.2f}"
        )
    st = summary["state"]
    if st:
        for name in ("advisor", "patience"):
            m = st[name]
            print(
                f"eval stopped improving, {name:9s} n={m['n']} precision {m['precision']:.2f}"
                f" recall {m['recall']:.2f} F1 {m['f1']:.2f}"
            )
        print("run-state confusion (truth -> predicted counts):")
        for t, row in st["confusion"].items():
            print(f"  {t:12s} " + "  ".join(f"{k}={v}" for k, v in sorted(row.items())))


def main_finetune(root: Path, split: str, as_json: bool, horizon: str = "logged") -> int:
    runs = load_runs(root)
    if not runs:
        print("no fine-tune curves found; skipped")
        return 0
    result = evaluate(runs, horizon=horizon)
    summaries = {s: summarise(result, s) for s in (("tune", "holdout") if split == "all" else (split,))}
    stab = np.array([abs(r["move"]) for r in result["stability"]])
    timing = {
        "series_forecast_ms_median": 1e3 * float(np.median(result["t_series"])),
        "state_ms_median": 1e3 * float(np.median(result["t_state"])) if result["t_state"] else math.nan,
        "eval_plateau_moves_ge_0.2": float(np.mean(stab >= 0.2)) if stab.size else math.nan,
        "eval_plateau_moves": _moves(result["stability"]),
        "train_plateau_moves_ge_0.2": float(np.mean(np.array(result["train_moves"]) >= 0.2))
        if result["train_moves"]
        else math.nan,
        "runs": {s: sum(r.split == s for r in runs) for s in ("tune", "holdout")},
    }
    if as_json:
        print(json.dumps({"summaries": summaries, "timing": timing}, indent=2, default=str))
        return 0
    for s, summ in summaries.items():
        print_summary(summ, s)
    print(
        f"\nruns {timing['runs']}; CPU median per-series forecast"
        f" {timing['series_forecast_ms_median']:.2f} ms,"
        f" per run state {timing['state_ms_median']:.2f} ms; eval P(plateau) moved >= 0.2 by one new eval in"
        f" {100 * timing['eval_plateau_moves_ge_0.2']:.0f}% of cuts, training-loss P(plateau) by one new"
        f" report in {100 * timing['train_plateau_moves_ge_0.2']:.1f}% ({len(result['train_moves'])} cuts)"
    )
    m = timing["eval_plateau_moves"]
    print(
        f"  of those {m['moved']} moves: {m['toward_truth']} toward the truth as it stands with the new eval,"
        f" {m['away']} away from it; on a new eval within {QUIET_EVAL:.0%} of the smoothed level"
        f" ({m['quiet_cuts']} of {m['cuts']} cuts): {m['quiet_moved']} moved, {m['quiet_away']} of them away"
    )
    return 0


#: a new eval this close to the smoothed level at the cut brings no news (a measurement definition
#: for the stability figure, not a setting of the advisor)
QUIET_EVAL = 0.05


def _moves(stability: list[dict[str, Any]]) -> dict[str, int]:
    """The P(plateau) moves of >= 0.2 on one new eval, split by whether they went toward the truth
    as it stands with that eval, and by whether the eval itself was news (>= ``QUIET_EVAL`` off the
    smoothed level): the target asks for stability "unless the data really changed"."""
    moved = [r for r in stability if abs(r["move"]) >= 0.2]
    toward = [r for r in moved if (r["move"] > 0) == r["truth_after"]]
    quiet = [r for r in stability if r["new_eval_change"] < QUIET_EVAL]
    quiet_moved = [r for r in quiet if abs(r["move"]) >= 0.2]
    return {
        "cuts": len(stability),
        "moved": len(moved),
        "toward_truth": len(toward),
        "away": len(moved) - len(toward),
        "quiet_cuts": len(quiet),
        "quiet_moved": len(quiet_moved),
        "quiet_away": sum(1 for r in quiet_moved if (r["move"] > 0) != r["truth_after"]),
    }
