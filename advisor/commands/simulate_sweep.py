"""``simulate --sweep``: one policy's settings over a scenario's seeds, against no advisor.

One task of the grid is a setting (or the no-advisor row) replayed over one seed, in a worker
process (``sweep_task`` is what the pool, or Ray, runs); the checks, the pool, the frontier and the
report are ``sweep_run``'s, shared with ``backtest --sweep``. Apart from ``simulate`` so that a
worker imports only what one task needs.
"""

from __future__ import annotations

import argparse
from typing import Any

from advisor.cli import CommandError
from advisor.commands.json_output import JsonTarget
from advisor.commands.simulate_world import scenario_from_args

__all__ = ["run_sweep", "saved_against", "sweep_points", "sweep_task"]


def sweep_task(task: tuple[argparse.Namespace, int, Any]) -> dict[str, Any]:
    """One seed of one setting (``None``: the no-advisor row, which also says the series the seed's
    jobs report), in a worker process."""
    from advisor.sweep import policies_with
    from simulator.baselines import NoAdvisor
    from simulator.metrics import reported_metrics
    from simulator.runner import advisor_row, run_strategy

    args, seed, setting = task
    scenario = scenario_from_args(argparse.Namespace(**{**vars(args), "seed": seed}), warn=False)
    if setting is None:
        strategy: Any = NoAdvisor()
    else:
        strategy = advisor_row(
            f"advisor {setting.label}",
            policies_with(args.policy[0], setting),
            forecast_interval_s=args.forecast_interval,
            tick_max_s=args.tick_max,
            looks_per_run=args.looks_per_run,
            close_interval_s=args.close_interval,
            reference_gpus=args.reference_gpus,
        )
    result = run_strategy(scenario, strategy)
    m = result.metrics
    keys = (
        "gpu_hours",
        "gpu_hours_nonlearning",
        "wrong_stops_by_threshold",
        "near_end_releases",
        "near_end_gpu_hours",
        "jobs",
        "lost_work_gpu_hours",
        "checkpoint_overhead_gpu_hours",
        "restart_overhead_gpu_hours",
        "overhead_nonlearning_gpu_hours",
    )
    row = {k: m[k] for k in keys}
    if setting is None:
        row["reported_metrics"] = sorted(reported_metrics(result.jobs))
    return row


def saved_against(row: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """What a setting's run of one seed saved against that seed's no-advisor run, as the table
    counts it (``simulator.metrics.savings``)."""
    from simulator.metrics import savings

    freed = base["gpu_hours"] - row["gpu_hours"] - row["near_end_gpu_hours"]
    return savings({**row, "policy": "setting", "gpu_hours_freed": freed}, {**base, "policy": "no-advisor"})


def sweep_points(
    settings: list[Any], seeds: list[int], base: list[dict[str, Any]], rows: list[list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Per setting: non-learning GPU-hours saved (pooled over the seeds, and their spread), wrong
    stops by threshold, the 1% wrong-stop rate, near-end releases."""
    import statistics

    base_nl = [b["gpu_hours_nonlearning"] for b in base]
    points = []
    for setting, per_seed in zip(settings, rows, strict=True):
        wrong: dict[str, int] = {}
        for r in per_seed:
            for k, n in r["wrong_stops_by_threshold"].items():
                wrong[k] = wrong.get(k, 0) + n
        total = sum(base_nl)
        nl = sum(r["gpu_hours_nonlearning"] for r in per_seed)
        fracs = [
            (b - r["gpu_hours_nonlearning"]) / b for b, r in zip(base_nl, per_seed, strict=True) if b > 0
        ]
        jobs = sum(r["jobs"] for r in per_seed)
        # over the jobs the policy judged (see ``backtest``'s sweep): jobs its selector leaves out
        # or that end before its minRuntime cannot be stopped wrongly, and diluted the rate
        judged = sum(r["jobs_judged"] if r.get("jobs_judged") is not None else r["jobs"] for r in per_seed)
        points.append(
            {
                "label": setting.label,
                "setting": dict(setting.values),
                "seeds": seeds,
                "saved": (total - nl) / total if total > 0 else 0.0,
                "spread": [min(fracs), statistics.median(fracs), max(fracs)] if len(fracs) > 1 else None,
                "wrong_by_threshold": wrong,
                "wrong": wrong.get("0.01", 0),
                "wrong_rate": wrong.get("0.01", 0) / judged if judged else 0.0,
                "runs": judged,
                "runs_total": jobs,
                "near_end": sum(r["near_end_releases"] for r in per_seed),
                # the keys of a row's JSON too, so that one script reads rows and sweep points alike
                "wrong_stops_by_threshold": wrong,
                "near_end_releases": sum(r["near_end_releases"] for r in per_seed),
                "gpu_hours_saved": sum(
                    saved_against(r, b)["gpu_hours_saved"] for b, r in zip(base, per_seed, strict=True)
                ),
            }
        )
    return points


def run_sweep(args: argparse.Namespace, json_out: JsonTarget) -> int:
    from advisor.commands.sample_policies import one_sweep_policy
    from advisor.commands.sweep_run import checked_grid, report_sweep, run_grid
    from simulator.seeds import SeedError, parse_seeds

    policy = one_sweep_policy(args.policy)
    try:
        seeds = parse_seeds(args.seeds) if args.seeds is not None else [args.seed]
    except SeedError as exc:
        raise CommandError(str(exc)) from None
    settings, budget = checked_grid(args.sweep, args.max_wrong, policy, args.workers)
    scenario = scenario_from_args(argparse.Namespace(**{**vars(args), "seed": seeds[0]}))
    # seed by seed: a worker replaying a seed's settings one after another finds most of the
    # reports and curves of the previous ones already parsed and fitted (simulator.replay_memo)
    tasks: list[tuple[argparse.Namespace, int, Any]] = [
        (args, seed, setting) for seed in seeds for setting in (None, *settings)
    ]
    results = run_grid(
        sweep_task, tasks, workers=args.workers, ray_address=args.ray, unit="run", quiet=args.quiet
    )
    n, per_seed = len(seeds), len(settings) + 1
    base = results[::per_seed]
    rows = [results[1 + i :: per_seed] for i in range(len(settings))]
    label = f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return report_sweep(
        sweep_points(settings, seeds, base, rows),
        budget,
        summary=f"{len(settings)} settings of {args.policy[0]} x {n} seed(s) ({label}) of {scenario.name}: "
        "saved = non-learning GPU-hours saved against no-advisor"
        + (" (pooled; min / median / max over seeds)" if n > 1 else "")
        + "; * on the Pareto frontier (saved against wrong stops at 1%)",
        json_out=json_out,
        report=args.report,
        plot_title=f"{args.policy[0].name}, seeds {label}",
        unit="job" if n == 1 else "job over all seeds",
        max_wrong=args.max_wrong,
        reported={name for b in base for name in b["reported_metrics"]},
        policy=args.policy[0],
        settings=settings,
    )
