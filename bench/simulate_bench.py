"""Simulator benchmark: the embedded default (every row) and a Philly slice with the advisor.

Run: ``.venv/bin/python bench/simulate_bench.py [--philly-jobs N] [--philly-every K] [--skip-default]
[--forecast-interval S] [--tick-max S] [--looks-per-run N]`` (``--philly-jobs 0``: the full 82k-job
extract; ``--philly-every K``: every K-th job of it, a sample spread over the whole trace, on a
cluster sized for it, whose cost per job-hour predicts the full run's).

Prints, per row, wall and CPU seconds and simulated job-hours per wall-second (and per CPU-second,
the one-core figure when other processes share the machine), ticks and forecasts, and the advisor
row's cost as a ratio to the no-advisor row measured in the same run, with its non-learning GPU-hours
and wrong stops (what a coarser cadence may cost). The Philly part reads
``../shared/data/traces/pollux-osdi21/simulator/traces/philly.csv`` and is skipped when absent.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from simulator.baselines import NoAdvisor, baseline_strategies
from simulator.runner import policy_strategies, run_strategy
from simulator.scenario import Scenario, auto_cluster, default_scenario
from simulator.traces import Trace, load_trace

ROOT = Path(__file__).resolve().parents[1]
PHILLY = ROOT.parent / "shared" / "data" / "traces" / "pollux-osdi21" / "simulator" / "traces" / "philly.csv"
SAMPLES = sorted((ROOT / "manifests" / "samples").glob("policy-*.yaml"))


def _row(scenario: Scenario, strategy: object) -> tuple[dict[str, object], float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    res = run_strategy(scenario, strategy)  # type: ignore[arg-type]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    job_h = sum(j.duration for j in scenario.trace.jobs) / 3600.0
    print(
        f"  {res.metrics['policy']:<26} wall {wall:7.2f}s  cpu {cpu:7.2f}s  "
        f"{job_h / wall:9.1f} sim job-h/wall-s  {job_h / max(cpu, 1e-9):9.1f} per cpu-s  "
        f"ticks {res.metrics['advisor_ticks']}"
        + (f"  forecasts {strategy.core.forecasts_made}" if hasattr(strategy, "core") else "")
    )
    m = res.metrics
    print(
        f"  {'':<26} GPU-h {m['gpu_hours']:.0f}  non-learning {m['gpu_hours_nonlearning']:.0f}"
        f"  wrong stops {m['wrong_stops']}"
    )
    return res.metrics, wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--philly-jobs", type=int, default=3000, help="Philly rows to replay (0: all 82k)")
    parser.add_argument("--skip-default", action="store_true")
    parser.add_argument(
        "--forecast-interval",
        type=float,
        default=1200.0,
        help="Philly advisor row: seconds between forecasts",
    )
    parser.add_argument(
        "--tick-max", type=float, default=1800.0, help="Philly advisor row: longest tick spacing"
    )
    parser.add_argument("--philly-every", type=int, default=1, help="replay every K-th Philly job")
    parser.add_argument(
        "--looks-per-run",
        type=float,
        default=24.0,
        help="Philly advisor row: looks at a quiet long job per run (default 24; 0: off)",
    )
    args = parser.parse_args()
    if not args.skip_default:
        sc = default_scenario()
        print(f"default scenario: {len(sc.trace.jobs)} jobs, {sc.capacity} GPUs")
        cpu_total = 0.0
        base_cpu = None
        for strategy in [*baseline_strategies(), *policy_strategies(SAMPLES)]:
            _m, _wall, cpu = _row(sc, strategy)
            cpu_total += cpu
            base_cpu = cpu if base_cpu is None else base_cpu
        print(
            f"  all rows: cpu {cpu_total:.1f}s (target < 60 s on one core); "
            f"advisor rows cost x{(cpu_total / max(base_cpu or 1e-9, 1e-9)):.0f} the no-advisor row in total"
        )
    if not PHILLY.exists():
        print("philly: data not present, skipped")
        return 0
    trace = load_trace(PHILLY, limit=args.philly_jobs or None)
    if args.philly_every > 1:
        trace = Trace(trace.jobs[:: args.philly_every], f"{trace.source} (every {args.philly_every})")
    queues, qmap = auto_cluster(trace)
    sc = Scenario("philly", trace, queues, qmap)
    print(f"philly: {len(trace.jobs)} jobs, {sc.capacity} GPUs in {len(queues)} ClusterQueues")
    _m, base_wall, _cpu = _row(sc, NoAdvisor())
    plateau = [p for p in SAMPLES if p.stem == "policy-plateau-release"]
    advisor = policy_strategies(
        plateau,
        forecast_interval_s=args.forecast_interval,
        tick_max_s=args.tick_max,
        looks_per_run=args.looks_per_run or None,
    )[0]
    _m, adv_wall, _cpu = _row(sc, advisor)
    print(f"  advisor / no-advisor wall ratio: {adv_wall / base_wall:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
