"""How much of the non-learning GPU-time any policy could give back, by the simulator's definitions.

Run: ``.venv/bin/python bench/savings_ceiling.py [--seeds 0-14] [--seeds 100-129]``.

The simulator's "non-learning GPU-h saved" (``simulator.metrics``) counts a release of a healthy
run in the last 15% of its budget as a near-end release, not a saving: the row is still charged
the non-learning hours such a run would have burnt. So even a clairvoyant policy, one that releases
every run at the exact step after which it gains no more than 1% (its hidden ``learning_end``) and
never wrongly at the 1% threshold, leaves the non-learning tails of healthy runs whose learning
ends inside their last 15%. This prints that bound per seed range, from the no-advisor row alone
(which the tail would be charged to), and where the non-learning hours lie by the share of the
budget at which learning ended, so that a savings target can be set against what is reachable,
and a row's shortfall read as detection (the policy's), not as the definition's.

The bound reads the hidden schedule (it is a measurement of the scenario, not a strategy) and
ignores the second-order effect of freed quota on the queue; the embedded default scenario, as
``simulate`` runs it.
"""

from __future__ import annotations

import argparse
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from simulator.baselines import NoAdvisor  # noqa: E402
from simulator.metrics import HEALTHY_PATHOLOGIES, NEAR_END_FRACTION  # noqa: E402
from simulator.runner import run_strategy  # noqa: E402
from simulator.scenario import default_scenario  # noqa: E402
from simulator.seeds import parse_seeds  # noqa: E402


def ceiling(seeds: list[int]) -> tuple[float, float, dict[tuple[bool, int], float]]:
    """(non-learning GPU-h, of them unreachable, GPU-h by (healthy, tenth of the budget at which
    learning ended))."""
    total = unreachable = 0.0
    by_onset: dict[tuple[bool, int], float] = {}
    for seed in seeds:
        for job in run_strategy(default_scenario(seed=seed), NoAdvisor()).jobs:
            hours = job.nonlearning_gpu_s / 3600.0
            healthy = job.curve.pathology in HEALTHY_PATHOLOGIES
            onset = min(1.0, job.learning_end / job.total_steps)
            total += hours
            if healthy and onset >= 1.0 - NEAR_END_FRACTION:
                unreachable += hours
            key = (healthy, min(9, int(onset * 10)))
            by_onset[key] = by_onset.get(key, 0.0) + hours
    return total, unreachable, by_onset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", action="append", help="a range A-B (repeatable; default 0-14 and 100-129)")
    args = parser.parse_args()
    for text in args.seeds or ["0-14", "100-129"]:
        total, unreachable, by_onset = ceiling(parse_seeds(text))
        share = unreachable / total if total > 0 else 0.0
        print(
            f"seeds {text}: {total:,.0f} non-learning GPU-h; in healthy runs whose learning ends in their"
            f" last {NEAR_END_FRACTION:.0%}: {unreachable:,.0f} ({share:.1%}); a clairvoyant release"
            f" saves at most {1.0 - share:.1%}"
        )
        for healthy in (False, True):
            row = [by_onset.get((healthy, tenth), 0.0) for tenth in range(10)]
            cells = " ".join(f"{h:6,.0f}" for h in row)
            print(f"  {'healthy' if healthy else 'pathology':9s} by onset 0.0..0.9 of budget: {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
