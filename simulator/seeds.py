"""One scenario over a range of seeds: every seed's rows, pooled, with their spread.

Why seeds are a range and not one number: a single seed's verdict ("0 wrong stops") is one draw of
the jobs' curves, faults and arrivals; what an admin needs is how much it moves from one draw to
the next. The sample policies' settings are chosen on seeds 0–14 and their figures reported on
seeds 100–129, so a figure read off the tuning seeds can be told from one that holds out of sample.

Seeds run on a process pool (every core by default); each worker replays whole seeds and sends back
only the rows' metrics, so nothing heavy crosses processes.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from advisor.sweep import default_workers

__all__ = ["SeedError", "parse_seeds", "pool_rows", "run_seeds", "spread_table"]

#: integer counts and GPU-hours that add up over seeds
_SUMMED = (
    "gpu_hours",
    "gpu_hours_nonlearning",
    "gpu_hours_saved",
    "gpu_hours_freed",
    "overhead_nonlearning_gpu_hours",
    "wrong_stops",
    "wrong_stop_gpu_hours",
    "near_end_releases",
    "near_end_gpu_hours",
    "near_end_nonlearning_gpu_hours",
    "lost_work_gpu_hours",
    "lost_work_preemption_gpu_hours",
    "checkpoint_overhead_gpu_hours",
    "restart_overhead_gpu_hours",
    "jobs",
    "completed",
    "released_or_stopped",
    "unfinished",
    "preemptions",
    "failures",
    "checkpoints",
    "advisor_ticks",
    "simulated_hours",
    "wall_seconds",
)
#: per-seed figures averaged over the seeds that have one
_AVERAGED = (
    "jct_mean_s",
    "jct_p95_s",
    "jct_released_mean_s",
    "jct_released_p95_s",
    "queue_wait_mean_s",
    "utilization",
    "victim_precision",
    "victim_recall",
)


class SeedError(ValueError):
    """A seed range that does not parse."""


def parse_seeds(text: str) -> list[int]:
    """``"A-B"`` (inclusive), ``"A"``, or a comma-separated list of both: ``"0-14"``, ``"3,7,100-102"``."""
    seeds: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise SeedError(f"--seeds: not a seed or range {part.strip()!r} (e.g. 0-14 or 100-129)")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise SeedError(
                f"--seeds: empty range {part.strip()!r} (the first seed must not exceed the last)"
            )
        seeds.extend(range(lo, hi + 1))
    if len(set(seeds)) != len(seeds):
        raise SeedError(f"--seeds: a seed appears twice in {text!r}")
    return seeds


def _spread(values: Sequence[float]) -> list[float]:
    return [min(values), statistics.median(values), max(values)]


def pool_rows(rows_by_seed: Sequence[Sequence[dict[str, Any]]], seeds: Sequence[int]) -> list[dict[str, Any]]:
    """One row per strategy: sums of counts and GPU-hours over the seeds, means of the per-seed
    times and rates, and ``per_seed`` / ``spread`` (min, median, max over the seeds) of the figures
    a verdict rests on. The first row of each seed must be the no-advisor baseline."""
    if not rows_by_seed:
        return []
    names = [r["policy"] for r in rows_by_seed[0]]
    base_nl = [seed_rows[0]["gpu_hours_nonlearning"] for seed_rows in rows_by_seed]
    out: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        rows = [seed_rows[i] for seed_rows in rows_by_seed]
        if any(r["policy"] != name for r in rows):
            raise ValueError("every seed must run the same rows in the same order")
        pooled: dict[str, Any] = {"policy": name, "seeds": list(seeds)}
        for key in _SUMMED:
            vals = [r.get(key) for r in rows]
            pooled[key] = sum(v for v in vals if v is not None) if any(v is not None for v in vals) else None
        for key in _AVERAGED:
            means = [float(r[key]) for r in rows if r.get(key) is not None]
            pooled[key] = statistics.fmean(means) if means else None
        thresholds: dict[str, int] = {}
        for r in rows:
            for k, n in r.get("wrong_stops_by_threshold", {}).items():
                thresholds[k] = thresholds.get(k, 0) + n
        pooled["wrong_stops_by_threshold"] = thresholds
        pooled["wrong_stop_fraction"] = pooled["wrong_stops"] / pooled["jobs"] if pooled["jobs"] else 0.0
        total_base = sum(base_nl)
        pooled["nonlearning_saved_fraction"] = (
            (total_base - pooled["gpu_hours_nonlearning"]) / total_base if total_base > 0 else None
        )
        actions: dict[str, int] = {}
        by_path: dict[str, float] = {}
        for r in rows:
            for k, n in r.get("actions", {}).items():
                actions[k] = actions.get(k, 0) + n
            for k, v in r.get("gpu_hours_nonlearning_by_pathology", {}).items():
                by_path[k] = by_path.get(k, 0.0) + v
        pooled["actions"] = dict(sorted(actions.items()))
        pooled["gpu_hours_nonlearning_by_pathology"] = {k: round(v, 3) for k, v in sorted(by_path.items())}
        per_seed = []
        for seed, r, b in zip(seeds, rows, base_nl, strict=True):
            per_seed.append(
                {
                    "seed": seed,
                    "gpu_hours_saved": r.get("gpu_hours_saved"),
                    "nonlearning_saved_fraction": (b - r["gpu_hours_nonlearning"]) / b if b > 0 else None,
                    "wrong_stops_by_threshold": r.get("wrong_stops_by_threshold", {}),
                    "near_end_releases": r.get("near_end_releases", 0),
                }
            )
        pooled["per_seed"] = per_seed
        # every run each seed released or stopped, with its seed (``metrics.stop_record``)
        pooled["stops"] = [
            {"seed": seed, **stop} for seed, r in zip(seeds, rows, strict=True) for stop in r.get("stops", ())
        ]
        saved = [
            p["nonlearning_saved_fraction"] for p in per_seed if p["nonlearning_saved_fraction"] is not None
        ]
        pooled["spread"] = {
            "nonlearning_saved_fraction": _spread(saved) if saved else None,
            "gpu_hours_saved": _spread([p["gpu_hours_saved"] or 0.0 for p in per_seed]),
            "wrong_stops": _spread([float(r["wrong_stops"]) for r in rows]),
        }
        out.append(pooled)
    return out


def spread_table(pooled: Sequence[dict[str, Any]]) -> str:
    """The verdict per row over the seeds: non-learning GPU-hours saved (pooled, and the min /
    median / max of the seeds), wrong stops at each threshold (summed) and at 1% per seed (min /
    median / max: a sum hides a seed that stopped many), near-end releases."""
    header = (
        "policy",
        "seeds",
        "non-learning saved",
        "min / median / max",
        "wrong .5/1/2%",
        "wrong 1% per seed (min / median / max)",
        "near-end",
    )
    body = []
    for r in pooled:
        frac = r.get("nonlearning_saved_fraction")
        sp = r["spread"]["nonlearning_saved_fraction"]
        w = r["wrong_stops_by_threshold"]
        body.append(
            (
                r["policy"],
                str(len(r["seeds"])),
                "-" if frac is None else f"{frac:.1%}",
                "-" if sp is None else " / ".join(f"{v:.0%}" for v in sp),
                f"{w.get('0.005', 0)}/{w.get('0.01', 0)}/{w.get('0.02', 0)} of {r['jobs']}",
                " / ".join(f"{v:g}" for v in r["spread"]["wrong_stops"]),
                str(r["near_end_releases"]),
            )
        )
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for b in body:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(b, widths, strict=True))
            )
        )
    return "\n".join(lines)


def run_seeds(
    job: Callable[[int], list[dict[str, Any]]],
    seeds: Sequence[int],
    *,
    workers: int | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[list[dict[str, Any]]]:
    """``job(seed)`` (a picklable module-level callable: the rows' metrics of one seed) for every
    seed, on ``workers`` processes (default: every core; 1: in this process), in seed order."""
    n = default_workers() if workers is None else workers
    if n <= 1 or len(seeds) <= 1:
        out = []
        for seed in seeds:
            out.append(job(seed))
            if on_done is not None:
                on_done(seed)
        return out
    results: dict[int, list[dict[str, Any]]] = {}
    with ProcessPoolExecutor(max_workers=min(n, len(seeds))) as ex:
        futures = {ex.submit(job, seed): seed for seed in seeds}
        from concurrent.futures import as_completed

        for fut in as_completed(futures):
            seed = futures[fut]
            results[seed] = fut.result()
            if on_done is not None:
                on_done(seed)
    return [results[s] for s in seeds]
