"""Back-test benchmark: the sample policies against the baselines on the development runs.

Run: ``.venv/bin/python bench/backtest_bench.py [--nanogpt-every K] [--speed-runs N] [--split
{all,tune,holdout}]``. Reads ``../shared/data/curves`` (hf-finetune, hf-finetune-more with their
``index.csv`` for the group of each run; modded-nanogpt's ``val_curves.csv``, 8 GPUs a run, grouped
by record folder) and skips cleanly when it is absent. Every run is replayed through
``trainjob-advisor backtest``'s path (``advisor.commands.backtest.backtest``).

Prints every row, then the targets: the best sample policy's GPU-hours saved against the baselines
at their default settings, and at matched risk: each baseline at every setting of its knob
(``PATIENCE_GRID``, ``FIXED_BUDGET_GRID``; read on the runs reported, in the baselines' favour), the
best of those that stop no more runs wrongly than the policy at 1% and at 0.5% (what "1.3x the
best baseline with no more wrong stops" is read against); its wrong-stop rates at 1% and 0.5%, and the time a
back-test of ``--speed-runs`` runs with every sample policy and baseline takes in this process, with
the baselines' share of it. HF logs carry no times: a finished run's is replayed at the pace its
closing summary states (``train_steps_per_second``), the others at 1 step/s (stated).

Split: runs are split by group (crc32 of the group's name, as ``bench/_curves.py`` does), so that
seed repeats of one configuration never straddle the split; ``--split holdout`` reports the
held-out half only.
"""

from __future__ import annotations

import argparse
import os
import time
import zlib
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from advisor.backtest.report import format_table  # noqa: E402
from advisor.backtest.runs import Run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def data_root() -> Path | None:
    env = os.environ.get("TRAINJOB_ADVISOR_DATA")
    for c in [Path(env)] if env else [ROOT.parent / "shared" / "data", Path("/work/shared/data")]:
        if (c / "curves").is_dir():
            return c
    return None


def _args(paths: list[Path], *, gpus: int | None, index: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(
        runs=paths,
        policy=None,
        baselines="no-advisor,patience,median-stopping,fixed-budget",
        gpus=gpus,
        index=index,
        group_pattern=None,
        steps_per_second=1.0,
        report_interval=60.0,
        forecast_interval=60.0,
        run_fraction=0.02,
        patience=3,
        fixed_budget=0.75,
        skip_bad_runs=True,
    )


def _split(run: Run) -> str:
    return "tune" if zlib.crc32(run.group.encode()) % 2 == 0 else "holdout"


#: the baselines' knobs read for the matched-risk comparison (every setting, on the same runs)
PATIENCE_GRID = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30)
FIXED_BUDGET_GRID = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def _saved_on_wrong(row: dict, *, right_ones: bool = False) -> float:
    """Of a row's GPU-hours saved (after its runs stopped learning), those of its wrong stops at
    1%; with ``right_ones``, those saved on runs stopped with at most 1% left."""
    return sum(
        d["gpu_hours_saved"]
        for d in row["decisions"]
        if d["improvement_left"] is not None and (d["improvement_left"] > 0.01) != right_ones
    )


def _baseline_frontier(runs: list[Run], command) -> list[tuple[str, dict]]:
    """Each baseline at every setting of its knob (patience in evaluations, the fixed budget's
    share; median stopping at its default), one row each. Read on the runs reported, so each
    baseline gets the setting that suits these runs best: the comparison favours the baselines,
    whose knobs no one would know in advance, over the sample policy, whose settings were chosen
    on the tuning seeds."""
    out: list[tuple[str, dict]] = []
    settings: list[tuple[str, dict]] = [("median-stopping", {})]
    settings += [(f"patience {p}", {"baselines": "patience", "patience": p}) for p in PATIENCE_GRID]
    settings += [
        (f"fixed-budget {f:.0%}", {"baselines": "fixed-budget", "fixed_budget": f}) for f in FIXED_BUDGET_GRID
    ]
    for name, overrides in settings:
        a = _args([], gpus=None)
        a.policy = []
        a.baselines = overrides.pop("baselines", "median-stopping")
        for k, v in overrides.items():
            setattr(a, k, v)
        rows, _ = command.evaluate_rows(runs, a, progress=False)
        out.append((name, next(r for r in rows if r["policy"] == a.baselines)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--nanogpt-every", type=int, default=5, help="every K-th modded-nanogpt val curve (1: all)"
    )
    ap.add_argument("--speed-runs", type=int, default=300, help="runs in the timed back-test (0: skip)")
    ap.add_argument("--split", choices=("all", "tune", "holdout"), default="all")
    args = ap.parse_args()
    root = data_root()
    if root is None:
        print("backtest bench: ../shared/data/curves not found; skipped")
        return 0
    from advisor.backtest.runs import load_runs
    from advisor.commands import backtest as command

    curves = root / "curves"
    hf = [p for p in (curves / "hf-finetune", curves / "hf-finetune-more") if p.is_dir()]
    nano = curves / "modded-nanogpt" / "val_curves.csv"
    runs: list[Run] = []
    for folder in hf:
        got, _ = load_runs([folder], skip_bad=True)
        runs += got
    if nano.is_file():
        got, _ = load_runs([nano], gpus=8, skip_bad=True)
        runs += got[:: max(1, args.nanogpt_every)]
    if args.split != "all":
        runs = [r for r in runs if _split(r) == args.split]
    print(
        f"{len(runs)} runs ({sum(1 for r in runs if r.name.startswith('val_curves'))} modded-nanogpt), "
        f"split {args.split}"
    )

    t0 = time.process_time()
    rows, _meta = command.evaluate_rows(runs, _args([], gpus=None), progress=False)
    cpu = time.process_time() - t0
    print(format_table(rows))
    print(f"\nall rows: {cpu:.1f} CPU-s for {len(runs)} runs")
    baselines = [r for r in rows if not r["policy"].startswith("advisor-")]
    policies = [r for r in rows if r["policy"].startswith("advisor-")]
    best = max(policies, key=lambda r: r["gpu_hours_saved"])
    n = best["runs"]
    w1, w05 = best["wrong_stops_by_threshold"]["0.01"], best["wrong_stops_by_threshold"]["0.005"]
    top = max(baselines[1:], key=lambda r: r["gpu_hours_saved"])
    # the baselines the policy stops no more runs wrongly than (the comparison the target asks for)
    fair = [b for b in baselines[1:] if b["wrong_stops_by_threshold"]["0.01"] >= w1 and b is not top]
    print(
        f"\nbest sample policy: {best['policy']}: {best['gpu_hours_saved']:.1f} GPU-h saved, wrong stops "
        f"{w1} ({w1 / n:.2%}) at 1%, {w05} ({w05 / n:.2%}) at 0.5%"
    )
    for b in [top, *fair]:
        ratio = best["gpu_hours_saved"] / b["gpu_hours_saved"] if b["gpu_hours_saved"] > 0 else float("inf")
        print(
            f"  vs {b['policy']}: {b['gpu_hours_saved']:.1f} GPU-h saved, "
            f"wrong {b['wrong_stops_by_threshold']['0.01']} at 1%: ratio {ratio:.2f}x"
        )
    # saved counts only GPU-hours after a run stopped learning; what a row's stops cut from runs
    # still learning is apart (cut learning): say both, and how much of saved its wrong stops hold
    for row in [best, top, *fair]:
        wrong = _saved_on_wrong(row)
        right = _saved_on_wrong(row, right_ones=True)
        print(
            f"  {row['policy']}: {right:.1f} GPU-h saved on runs with <= 1% left, "
            f"{wrong:.1f} on its wrong stops; {row['gpu_hours_cut_learning']:.1f} GPU-h of learning cut"
        )
    # the best baseline that stops at least as many runs wrongly as the policy, at its default setting
    comparable = [b for b in [top, *fair] if b["wrong_stops_by_threshold"]["0.01"] >= w1]
    ref = max(comparable, key=lambda r: r["gpu_hours_saved"], default=None)
    # nothing to compare (no baseline stops as many runs wrongly) is said as such, never "met"
    default_verdict = (
        "nothing to compare: no baseline stops as many runs wrongly"
        if ref is None
        else "met"
        if best["gpu_hours_saved"] > 0 and best["gpu_hours_saved"] >= 1.3 * ref["gpu_hours_saved"]
        else "NOT met"
    )
    against = f" (vs {ref['policy']})" if ref is not None else ""
    print(
        f"at the baselines' default settings: >= 1.3x the best baseline that stops at least as many "
        f"runs wrongly{against}: {default_verdict}"
    )
    frontier = _baseline_frontier(runs, command)
    print("\nthe baselines at every setting (each knob read on these very runs, in the baselines' favour):")
    head = f"{'saved':>7}  {'of it on wrong stops':>20}  {'cut learning':>12}"
    print(f"  {'baseline':<24}{head}  wrong .5/1/2%")
    for name, row in frontier:
        wr = row["wrong_stops_by_threshold"]
        print(
            f"  {name:<24}{row['gpu_hours_saved']:>7.1f}  {_saved_on_wrong(row):>20.1f}  "
            f"{row['gpu_hours_cut_learning']:>12.1f}  {wr['0.005']}/{wr['0.01']}/{wr['0.02']}"
        )
    # matched risk: of every baseline setting that stops no more runs wrongly than the policy at 1%
    # and at 0.5%, the one that saves most
    within = [
        (name, row)
        for name, row in frontier
        if row["wrong_stops_by_threshold"]["0.01"] <= w1 and row["wrong_stops_by_threshold"]["0.005"] <= w05
    ]
    matched = max(within, key=lambda nr: nr[1]["gpu_hours_saved"], default=None)
    if matched is None or matched[1]["gpu_hours_saved"] <= 0:
        matched_ratio = float("inf")
        matched_txt = "no baseline setting saves anything at that risk"
    else:
        matched_ratio = best["gpu_hours_saved"] / matched[1]["gpu_hours_saved"]
        matched_txt = f"{matched[0]}, {matched[1]['gpu_hours_saved']:.1f} GPU-h saved"
    # a policy that saves nothing meets no ratio, even against baselines that save nothing either
    matched_met = matched_ratio >= 1.3 and best["gpu_hours_saved"] > 0
    print(
        f"\ntarget: >= 1.3x the best baseline at no more wrong stops (matched risk: {matched_txt}): "
        f"{matched_ratio:.2f}x, {'met' if matched_met else 'NOT met'}; "
        f"<= 1% wrong at 1%: {'met' if w1 <= 0.01 * n else 'NOT met'}; "
        f"<= 2% at 0.5%: {'met' if w05 <= 0.02 * n else 'NOT met'}"
    )
    if args.speed_runs:
        sub = runs[: args.speed_runs]
        t0 = time.process_time()
        command.evaluate_rows(sub, _args([], gpus=None), progress=False)
        cpu_all = time.process_time() - t0
        only = _args([], gpus=None)
        only.policy = []
        t0 = time.process_time()
        command.evaluate_rows(sub, only, progress=False)
        cpu_base = time.process_time() - t0
        print(
            f"\nspeed: {len(sub)} runs, every sample policy and baseline: {cpu_all:.1f} CPU-s on one core "
            f"(target <= 60 s; the baselines alone {cpu_base:.1f} CPU-s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
