"""Preemption benchmark: checkpoint-before-preemption against fixed-interval checkpointing at equal overhead.

Run: ``.venv/bin/python bench/preemption_bench.py [--seeds 100-114] [--jobs N] [--policy FILE ...]
[--world NAME ...] [--json FILE] [--oracle]``.

The target compares work lost to preemption "at equal or lower checkpoint overhead", but a policy
and a fixed interval rarely land on the same overhead. So the fixed-interval baseline is run at
several intervals on the same seeds of the embedded default scenario, which traces its frontier
(checkpoint overhead → GPU-hours lost to preemption, pooled over the seeds). Each policy row is
compared with the frontier's lost work at the row's own overhead (linear between the two
neighbouring intervals; outside their range, the nearest one, which flatters neither side: more
overhead than any interval is compared with the busiest interval's loss). It prints each row's
pooled lost work and overhead, the frontier's loss at that overhead, and the ratio, next to the
−80% the issue asks for; and how many preemptions each row met (checkpoints move work, so the
preemptions themselves differ a little between rows).

Each comparison is made in one world at a time, and every row of a world, the fixed intervals
included, gets the same platform mechanics: the same grace periods and the same saves on SIGTERM
(a save lands when the job's helper saves on SIGTERM, its save mechanism works, and the rest of the
step under way plus the save fit the grace period). The worlds (``--world``):

- ``today``: the embedded default as it was: Kubernetes' 30 s grace period, a quarter of the jobs
  with a helper that saves on SIGTERM (few of whose saves fit 30 s);
- ``platform``: every job runs a helper that saves on SIGTERM, and the platform gives each job the
  grace period the advisor recommends (the step under way plus a save);
- ``platform-30pct-fail``: the same, with the save on SIGTERM broken for 30% of the jobs (drawn per
  job; the advisor must notice from their restarts and keep checkpointing them);
- ``helpers-30s``: every job runs a helper that saves on SIGTERM (HF's ``enable_jit_checkpoint``,
  OpenShift AI's JIT checkpoints), and the pods keep Kubernetes' 30 s grace period unless a row
  changes it: the advisor's rows set the grace period of an evicted TrainJob for its next start
  (``checkpoint.setGracePeriod``, what the controller writes through ``runtimePatches``), the
  fixed intervals cannot. So the first eviction of a job whose step plus save exceeds 30 s loses
  its unsaved work in every row, and the later ones only where no one set the grace period;
- ``helpers-30s-30pct-fail``: the same with the save on SIGTERM broken for 30% of the jobs;
- ``helpers-30s-check``, ``helpers-30s-check-30pct-fail``: the same two, with the advisor's
  AdmissionCheck on the ClusterQueues (``save_window_check``; ``manifests/components/
  save-window-check``): Kueue starts a workload only once the advisor marked its check Ready, so
  the advisor's rows set a job's grace period before its first start too (from the save windows
  its runtime's other jobs measured, ``policies.savewindow.peer_grace``). Without the check they
  race Kueue's admission, and a job that fits at once starts with 30 s.
- ``helpers-30s-check-boost``, ``helpers-30s-check-boost-30pct-fail``: the two check worlds with
  Kueue's PriorityBoost gate on (alpha in Kueue; off in every other world, as in the controller's
  default), so that the guard's standing boost (``standingBoost``) can steer Kueue's victim order
  to workloads that would lose little.

``--oracle`` adds reference rows that no advisor could run: fixed-interval checkpoints for exactly
the jobs whose save on SIGTERM would not land, read from the simulator's hidden draws
(``OracleInterval``). Where the saves of some jobs fail, an advisor learns which ones only from
their evictions (the first one loses the work since the last checkpoint); the oracle knows from the
start and spends no checkpoint on the others, so its ratio bounds what any periodic schedule can
reach. It is printed beside the target, never written to ``--json``.

The seeds are a range (``--seeds 100-114``): the settings were chosen on seeds 0-14, the held-out
seeds are 100 and up. ``--json`` writes one object per (world, policy) row.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

# "On one core", as the simulator's targets are stated: no BLAS thread pool (the CLI sets the same)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from simulator.baselines import FixedInterval, NoAdvisor  # noqa: E402
from simulator.jobs import SimJob  # noqa: E402
from simulator.runner import policy_strategies, run_strategy  # noqa: E402
from simulator.scenario import default_scenario, with_world  # noqa: E402
from simulator.strategy import Strategy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "manifests" / "samples" / "policy-preemption-guard.yaml"
#: fixed-interval checkpointing at these intervals (minutes) traces the baseline's frontier
INTERVALS_MIN = (10, 15, 20, 30, 45, 60, 90, 120, 240)
TARGET_CUT = 0.8
#: the worlds compared (WorldConfig changes); every row of a world shares them
WORLDS: dict[str, dict[str, Any]] = {
    "today": {},
    "platform": {"jit_fraction": 1.0, "grace_fits_save": True},
    "platform-30pct-fail": {"jit_fraction": 1.0, "grace_fits_save": True, "sigterm_success": 0.7},
    "helpers-30s": {"jit_fraction": 1.0},
    "helpers-30s-30pct-fail": {"jit_fraction": 1.0, "sigterm_success": 0.7},
    "helpers-30s-check": {"jit_fraction": 1.0, "save_window_check": True},
    "helpers-30s-check-30pct-fail": {"jit_fraction": 1.0, "sigterm_success": 0.7, "save_window_check": True},
    "helpers-30s-check-boost": {
        "jit_fraction": 1.0,
        "save_window_check": True,
        "priority_boost_enabled": True,
    },
    "helpers-30s-check-boost-30pct-fail": {
        "jit_fraction": 1.0,
        "sigterm_success": 0.7,
        "save_window_check": True,
        "priority_boost_enabled": True,
    },
}


#: the oracle's intervals (``--oracle``)
ORACLE_INTERVALS_MIN = (10, 20, 45)


class OracleInterval(FixedInterval):
    """A reference, not a policy: fixed-interval checkpoints for exactly the jobs whose save on
    SIGTERM would not land (no helper, a broken save mechanism, or a grace period shorter than a
    step plus a save), read from the simulator's hidden per-job draws. No advisor can see these
    before a job's first eviction, so this bounds what any periodic schedule, however well it
    learns whom to trust, can reach against the fixed-interval frontier."""

    def tick(self, job: SimJob, samples: Any, now: float) -> Any:
        if job.jit and job.sigterm_ok and job.grace_s >= job.step_time + job.ckpt_cost:
            return ()
        return super().tick(job, samples, now)


def parse_seeds(text: str) -> range:
    """``"100-114"`` (inclusive) or ``"6"`` (seeds 0-5)."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            if lo < 0 or hi < lo:
                raise ValueError
            return range(lo, hi + 1)
        n = int(text)
        if n <= 0:
            raise ValueError
        return range(n)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a seed range like 100-114 or a count, got {text!r}"
        ) from None


def _strategies(policies: list[Path], *, oracle: bool = False) -> list[Strategy]:
    """Fresh row objects for one seed (rows keep per-run state): no-advisor, the fixed intervals,
    one row per policy file, then (``oracle``) the oracle's reference rows."""
    rows: list[Strategy] = [NoAdvisor()]
    for minutes in INTERVALS_MIN:
        fixed = FixedInterval(minutes * 60.0)
        fixed.name = f"fixed-interval {minutes}m"
        rows.append(fixed)
    refs: list[Strategy] = []
    for minutes in ORACLE_INTERVALS_MIN if oracle else ():
        ref = OracleInterval(minutes * 60.0)
        ref.name = f"oracle-interval {minutes}m"
        refs.append(ref)
    return [*rows, *policy_strategies(policies), *refs]


def _pooled(
    policies: list[Path], seeds: range, n_jobs: int, world: dict[str, Any], *, oracle: bool = False
) -> dict[str, dict[str, float]]:
    """Per row: GPU-hours lost to preemption, checkpoint overhead and preemptions, summed over the
    seeds."""
    out: dict[str, dict[str, float]] = {}
    for seed in seeds:
        scenario = default_scenario(seed=seed, n_jobs=n_jobs)
        if world:
            scenario = with_world(scenario, **world)
        for strategy in _strategies(policies, oracle=oracle):
            m = run_strategy(scenario, strategy).metrics
            row = out.setdefault(strategy.name, {"lost": 0.0, "overhead": 0.0, "preemptions": 0.0})
            row["lost"] += m["lost_work_preemption_gpu_hours"]
            row["overhead"] += m["checkpoint_overhead_gpu_hours"]
            row["preemptions"] += m["preemptions"]
    return out


def victim_model(seeds: range, n_jobs: int) -> dict[str, Any]:
    """The guard's victim predictor (``policies.victims.predict_victims``) on the snapshot before
    every scheduling pass of the no-advisor row, against the victims the simulator's quota model
    then picks, PriorityBoost off (nothing the advisor does changes Kueue's choice), pooled."""
    predicted = chosen = hit = 0
    for seed in seeds:
        scenario = with_world(default_scenario(seed=seed, n_jobs=n_jobs), score_victims=True)
        record = run_strategy(scenario, NoAdvisor()).record
        predicted += record.victims_predicted
        chosen += record.victims_chosen
        hit += record.victims_hit
    return {
        "policy": "victim-predictor",
        "predicted": predicted,
        "chosen_by_quota_model": chosen,
        "precision": round(hit / predicted, 4) if predicted else None,
        "recall": round(hit / chosen, 4) if chosen else None,
    }


def frontier_loss(overheads: np.ndarray, losses: np.ndarray, at: float) -> float:
    """The fixed-interval frontier's lost work at overhead ``at``: linear between the neighbouring
    points (sorted by overhead), the nearest point outside their range."""
    order = np.argsort(overheads)
    return float(np.interp(at, overheads[order], losses[order]))


def compare(rows: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    """Each non-baseline row against the fixed-interval frontier at its own overhead."""
    fixed = [name for name in rows if name.startswith("fixed-interval ")]
    overheads = np.array([rows[name]["overhead"] for name in fixed])
    losses = np.array([rows[name]["lost"] for name in fixed])
    out = []
    for name, row in rows.items():
        if name == "no-advisor" or name in fixed:
            continue
        base = frontier_loss(overheads, losses, row["overhead"])
        out.append(
            {
                "policy": name,
                "lost_work_gpu_hours": round(row["lost"], 3),
                "checkpoint_overhead_gpu_hours": round(row["overhead"], 3),
                "preemptions": int(row["preemptions"]),
                "frontier_lost_work_gpu_hours": round(base, 3),
                "lost_ratio_vs_fixed_frontier": round(row["lost"] / base, 4) if base > 0 else None,
            }
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        default=range(6),
        help="default-scenario seeds: a range like 100-114 (inclusive) or a count N for 0..N-1 (default 6)",
    )
    parser.add_argument(
        "--policy",
        type=Path,
        action="append",
        help="AdvisorPolicy file to compare (repeatable; default: the preemption-guard sample)",
    )
    parser.add_argument(
        "--jobs", type=int, default=120, help="jobs per seed (default 120, the embedded default's)"
    )
    parser.add_argument(
        "--world",
        action="append",
        choices=sorted(WORLDS),
        help="platform mechanics to compare in (repeatable; default: all)",
    )
    parser.add_argument("--json", type=Path, help="write one object per (world, policy) row here")
    parser.add_argument("--no-victims", action="store_true", help="skip the victim-predictor check")
    parser.add_argument(
        "--oracle",
        action="store_true",
        help="also run the oracle's reference rows (OracleInterval: reads which jobs' saves fail; "
        "printed, not in --json)",
    )
    args = parser.parse_args()
    if args.jobs <= 0:
        parser.error("--jobs must be positive")
    start = time.perf_counter()
    seeds: range = args.seeds
    results: list[dict[str, Any]] = []
    for world in args.world or list(WORLDS):
        rows = _pooled(args.policy or [GUARD], seeds, args.jobs, WORLDS[world], oracle=args.oracle)
        print(
            f"world {world}: default scenario ({args.jobs} jobs), seeds {seeds[0]}-{seeds[-1]}, "
            "pooled (GPU-hours):"
        )
        print(f"  {'row':<28} {'lost to preemption':>18} {'ckpt overhead':>14} {'preemptions':>12}")
        for name, row in rows.items():
            print(f"  {name:<28} {row['lost']:18.1f} {row['overhead']:14.1f} {row['preemptions']:12.0f}")
        print("  against fixed-interval checkpointing at the same overhead (its frontier, interpolated):")
        for item in compare(rows):
            ratio = item["lost_ratio_vs_fixed_frontier"]
            shown = "n/a" if ratio is None else f"{ratio:.2f}, {100 * (1 - ratio):.0f}% less"
            reference = item["policy"].startswith("oracle-")
            print(
                f"  {item['policy']:<28} lost {item['lost_work_gpu_hours']:.1f} against "
                f"{item['frontier_lost_work_gpu_hours']:.1f} at {item['checkpoint_overhead_gpu_hours']:.1f} "
                f"of overhead: ratio {shown}"
                + (
                    " (reference: reads the hidden draws)"
                    if reference
                    else f" (target: {100 * TARGET_CUT:.0f}% less)"
                )
            )
            if not reference:
                results.append({"world": world, "seeds": f"{seeds[0]}-{seeds[-1]}", **item})
    if not args.no_victims:
        vm = victim_model(seeds, args.jobs)
        print(
            f"victim predictor against the quota model's choice (boost off): precision {vm['precision']}, "
            f"recall {vm['recall']} ({vm['predicted']} predicted, {vm['chosen_by_quota_model']} chosen)"
        )
        results.append({"world": "today", "seeds": f"{seeds[0]}-{seeds[-1]}", **vm})
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"  ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
