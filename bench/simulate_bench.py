"""Simulator benchmark: the embedded default (every row) and a Philly slice with the advisor.

Run: ``.venv/bin/python bench/simulate_bench.py [--philly-jobs N] [--philly-every K]
[--skip-default] [--forecast-interval S] [--close-interval S] [--watch-interval S] [--flatten-margin
F] [--tick-max S] [--looks-per-run N] [--reference-gpus G]`` (``--philly-jobs 0``: the full 82k-job
extract; ``--philly-every K``: every K-th job of it, a sample spread over the whole trace, on a
cluster sized for it, whose cost per job-hour predicts the full run's).

The Philly advisor row's defaults: 24 looks per run, a quiet job re-forecast at most hourly, a
flattening (or rising) one every 40 minutes, one near a decision every 5 minutes. The hourly floor
for quiet jobs cost no savings against the 20-minute one on every 20th job (see
``simulator.advisor_strategy``), while a 5% flattening margin or a 10-minute watch did. The close
look every 40 minutes rather than 20: 28% fewer forecasts on three disjoint every-20th slices (jobs
0, 1 and 2 mod 20), with 7,005 / 5,432 / 6,100 non-learning GPU-h left against 7,116 / 5,360 / 6,141
(an hour: 9,507 forecasts but 7,524 GPU-h on the first slice). A quiet job's spacings grow with
``sqrt(8 / its GPUs)`` (``--reference-gpus``, see ``simulator.advisor_strategy``): on the first
slice 7,522 forecasts instead of 11,340 for 7,192 GPU-h left instead of 7,005.

Prints, per row, wall and CPU seconds and simulated job-hours per wall-second (and per CPU-second,
the one-core figure when other processes share the machine), ticks and forecasts, and the advisor
row's cost as a ratio to the no-advisor row measured in the same run, with its non-learning GPU-hours
and wrong stops (what a coarser cadence may cost), and where its forecasts went (jobs, job-hours and
forecasts per job by job length). The Philly part reads
``../shared/data/traces/pollux-osdi21/simulator/traces/philly.csv`` and is skipped when absent.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time
from pathlib import Path

# "On one core", as the targets are stated: no BLAS thread pool (the CLI sets the same)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from simulator.baselines import NoAdvisor, baseline_strategies  # noqa: E402
from simulator.runner import policy_strategies, run_strategy  # noqa: E402
from simulator.scenario import Scenario, auto_cluster, default_scenario  # noqa: E402
from simulator.traces import Trace, TraceJob, load_trace  # noqa: E402

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


#: job-length classes (hours) of the forecasts-per-job breakdown
LENGTH_BINS_H = (0.0, 1.0, 4.0, 12.0, 48.0, math.inf)


def _forecasts_by_length(jobs: list[TraceJob], by_job: dict[int, int]) -> None:
    """Where the advisor row's forecasts went: jobs, job-hours and forecasts per job-length class."""
    for lo, hi in itertools.pairwise(LENGTH_BINS_H):
        idx = [i for i, j in enumerate(jobs) if lo * 3600.0 <= j.duration < hi * 3600.0]
        if not idx:
            continue
        n = sum(by_job.get(i, 0) for i in idx)
        job_h = sum(jobs[i].duration for i in idx) / 3600.0
        label = f"{lo:g}-{hi:g}h" if math.isfinite(hi) else f">{lo:g}h"
        print(
            f"  {'':<26} jobs {label:<8} {len(idx):6d}  job-h {job_h:8.0f}  forecasts {n:7d}"
            f"  per job {n / len(idx):6.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--philly-jobs", type=int, default=3000, help="Philly rows to replay (0: all 82k)")
    parser.add_argument("--skip-default", action="store_true")
    parser.add_argument(
        "--forecast-interval",
        type=float,
        default=3600.0,
        help="Philly advisor row: seconds between forecasts of a quiet job (default 3600)",
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
    parser.add_argument(
        "--close-interval",
        type=float,
        default=2400.0,
        help="Philly advisor row: forecast spacing of a flattening (or rising) run (default 2400)",
    )
    parser.add_argument(
        "--watch-interval",
        type=float,
        default=300.0,
        help="Philly advisor row: forecast spacing of a job near a decision (default 300)",
    )
    parser.add_argument(
        "--flatten-margin",
        type=float,
        default=0.1,
        help="Philly advisor row: improvement left, at the recent pace, below which a run gets the "
        "close look (default 0.1)",
    )
    parser.add_argument(
        "--reference-gpus",
        type=float,
        default=8.0,
        help="Philly advisor row: a quiet job's look spacing scales with sqrt(this / its GPUs); "
        "0: every job alike (default 8)",
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
        close_interval_s=args.close_interval,
        watch_interval_s=args.watch_interval,
        flatten_margin=args.flatten_margin,
        reference_gpus=args.reference_gpus or None,
    )[0]
    _m, adv_wall, _cpu = _row(sc, advisor)
    _forecasts_by_length(trace.jobs, getattr(advisor, "forecasts_by_job", {}))
    print(f"  advisor / no-advisor wall ratio: {adv_wall / base_wall:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
