"""Run one scenario under every strategy (same trace, same seed) and collect the rows."""

from __future__ import annotations

import functools
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.curves import CurveLibrary
from simulator.engine import SimRecord, Simulation
from simulator.jobs import SimJob, build_jobs
from simulator.metrics import row_metrics, savings
from simulator.quota import QuotaModel
from simulator.real_curves import RealCurveLibrary
from simulator.scenario import Scenario
from simulator.strategy import Cadence, Strategy

__all__ = [
    "RowResult",
    "advisor_row",
    "curve_library",
    "nonlearning_saved",
    "policy_strategies",
    "run_rows",
    "run_strategy",
]


@dataclass(slots=True)
class RowResult:
    metrics: dict[str, Any]
    jobs: list[SimJob] = field(repr=False)
    record: SimRecord = field(repr=False)


@functools.lru_cache(maxsize=4)
def _real_library(folder: Path) -> RealCurveLibrary:
    return RealCurveLibrary(folder)


def curve_library(scenario: Scenario) -> CurveLibrary | RealCurveLibrary:
    """The scenario's curves: real runs from its ``curves_dir``, else the synthetic library."""
    if scenario.curves_dir is not None:
        return _real_library(scenario.curves_dir)
    return CurveLibrary(mix=scenario.curve_mix)


def nonlearning_saved(baseline: float, row: float) -> float | None:
    """The share of the no-advisor row's non-learning GPU-hours a row did not burn (None when the
    baseline burnt none)."""
    return (baseline - row) / baseline if baseline > 0 else None


def run_strategy(
    scenario: Scenario,
    strategy: Strategy,
    *,
    library: CurveLibrary | RealCurveLibrary | None = None,
    baseline_gpu_hours: float | None = None,
    on_progress: Callable[[float], None] | None = None,
) -> RowResult:
    lib = library or curve_library(scenario)
    jobs = build_jobs(scenario.trace.jobs, scenario.queue_map, scenario.world, lib, scenario.seed)
    quota = QuotaModel(scenario.queues, priority_boost_enabled=scenario.world.priority_boost_enabled)
    start = time.perf_counter()
    record = Simulation(jobs, quota, scenario.world, strategy, on_progress=on_progress).run()
    wall = time.perf_counter() - start
    metrics = row_metrics(
        strategy.name,
        jobs,
        record,
        scenario.capacity,
        baseline_gpu_hours,
        wall,
        victims=strategy.predicts_victims,
        judged=strategy.judges_by_policy,
    )
    return RowResult(metrics, jobs, record)


def policy_strategies(
    paths: Sequence[Path],
    *,
    forecast_interval_s: float = 1200.0,
    tick_max_s: float = 1800.0,
    looks_per_run: float | None = None,
    close_interval_s: float | None = None,
    watch_interval_s: float = 300.0,
    flatten_margin: float = 0.1,
    reference_gpus: float | None = None,
) -> list[Strategy]:
    """One advisor row per policy file, named as ``backtest`` names it: ``advisor-<metadata.name>``
    of the file's first policy (:func:`advisor.policy_rows.policy_row_name`).

    ``looks_per_run``: how often a quiet job of a learning-only row is looked at over its run (None,
    the default: no spacing by run length; a huge trace replays several times faster with
    ``simulator.advisor_strategy.LOOKS_PER_RUN``, at some cost in how early plateaus are seen).
    ``close_interval_s``, ``watch_interval_s``, ``flatten_margin``, ``reference_gpus``: see
    :class:`~simulator.advisor_strategy.AdvisorStrategy` (the defaults keep the embedded scenario's
    cadence)."""
    from advisor.policy_rows import policy_row_name
    from policies import load_policies

    rows: list[Strategy] = []
    for path in paths:
        policies = load_policies(path)
        named = policies[0].name if policies else path.stem
        rows.append(
            advisor_row(
                policy_row_name(named, path, {row.name for row in rows}),
                policies,
                forecast_interval_s=forecast_interval_s,
                tick_max_s=tick_max_s,
                looks_per_run=looks_per_run,
                close_interval_s=close_interval_s,
                watch_interval_s=watch_interval_s,
                flatten_margin=flatten_margin,
                reference_gpus=reference_gpus,
            )
        )
    return rows


def advisor_row(
    name: str,
    policies: Sequence[Any],
    *,
    forecast_interval_s: float = 1200.0,
    tick_max_s: float = 1800.0,
    looks_per_run: float | None = None,
    close_interval_s: float | None = None,
    watch_interval_s: float = 300.0,
    flatten_margin: float = 0.1,
    reference_gpus: float | None = None,
) -> Strategy:
    """One advisor row of loaded policies (in Apply mode: what they would have done)."""
    from simulator.advisor_strategy import AdvisorStrategy

    cadence = Cadence(first_s=600.0, min_s=min(300.0, tick_max_s), max_s=tick_max_s, fraction=0.25)
    return AdvisorStrategy(
        name,
        [p.applied() for p in policies],
        forecast_interval_s=forecast_interval_s,
        cadence=cadence,
        looks_per_run=looks_per_run,
        close_interval_s=close_interval_s,
        watch_interval_s=watch_interval_s,
        flatten_margin=flatten_margin,
        reference_gpus=reference_gpus,
    )


def run_rows(scenario: Scenario, strategies: Sequence[Strategy], *, progress: bool = True) -> list[RowResult]:
    """Every strategy on the same scenario; the first must be ``no-advisor`` (the savings baseline)."""
    from tqdm import tqdm

    lib = curve_library(scenario)
    span = max(j.submit + j.duration for j in scenario.trace.jobs)
    # counted in whole simulated seconds, shown in hours: float hours added up row by row ran an
    # ulp past their float total, and tqdm warned ("clamping frac to range [0, 1]") and showed a
    # negative time left; whole numbers end exactly at the total
    row_s = math.ceil(span)
    bar = tqdm(
        total=row_s * len(strategies),
        unit="sim-h",
        unit_scale=1.0 / 3600.0,
        file=sys.stderr,
        disable=not progress,
        bar_format="{desc} {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} sim-h [{elapsed}<{remaining}]",
    )
    results: list[RowResult] = []
    baseline: float | None = None
    base_nonlearning = 0.0
    base_row: dict[str, Any] = {}
    try:
        for i, strategy in enumerate(strategies):
            bar.set_description(f"{strategy.name:<24}")
            done = [0.0]

            def tick(t: float, _done: list[float] = done, _i: int = i) -> None:
                target = min(math.floor(t), row_s) + _i * row_s
                bar.update(max(0, target - bar.n))
                _done[0] = t

            result = run_strategy(
                scenario, strategy, library=lib, baseline_gpu_hours=baseline, on_progress=tick
            )
            if baseline is None:
                baseline = result.metrics["gpu_hours"]
                base_nonlearning = result.metrics["gpu_hours_nonlearning"]
                base_row = result.metrics
                result.metrics["gpu_hours_freed"] = result.metrics["gpu_hours_saved"] = 0.0
            else:
                result.metrics.update(savings(result.metrics, base_row))
            result.metrics["nonlearning_saved_fraction"] = nonlearning_saved(
                base_nonlearning, result.metrics["gpu_hours_nonlearning"]
            )
            bar.update(max(0, (i + 1) * row_s - bar.n))
            results.append(result)
    finally:
        bar.close()
    return results
