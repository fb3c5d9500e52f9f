"""How fast the decision engine is: job decisions per second on one core.

The target (issue #4) is 10,000 decisions/s, so that a controller watching thousands of jobs, and
a simulator replaying weeks of a cluster at one-minute ticks, spend their time elsewhere. The
workload is a mix of job states that exercise every rule (healthy, plateaued, diverged, hung,
late, elastic, likely preemption victims) on a cluster with 40 ClusterQueues in cohorts and 400
workloads. Each policy's rate is printed with two ratios measured in the same run:

* ``x target``: against the 10,000/s goal;
* ``x rule-less``: against ``decide`` with a policy that has no rules (the engine's fixed cost:
  exemption, gates, cooldown/cap bookkeeping, the Decision itself).

Usage: ``python bench/policy_bench.py [--jobs N] [--repeat R]``. Pins itself to one CPU where the
OS allows it and measures CPU time (``time.process_time``), so a busy shared machine slows the
run but does not distort the rate. Numbers vary with the machine; the ratios are what to compare.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import random
import time
from pathlib import Path

from advisor.model import (
    ActionKind,
    ActionRecord,
    CheckpointState,
    ClusterQueueView,
    ClusterView,
    Forecast,
    Interval,
    JobView,
    WorkloadView,
)
from policies import Policy, decide, load_policies, load_policy

ROOT = Path(__file__).resolve().parents[1]
TARGET = 10_000.0
T0 = 1_000_000.0


def make_cluster(rng: random.Random) -> ClusterView:
    queues = {}
    for i in range(40):
        name = f"cq{i}"
        queues[name] = ClusterQueueView(
            name=name,
            cohort=f"co{i % 8}",
            nominal_gpus=64,
            usage_gpus=rng.randint(32, 96),
            within_cluster_queue=rng.choice(["Never", "LowerPriority"]),
            reclaim_within_cohort="Any",
        )
    workloads = []
    for i in range(400):
        workloads.append(
            WorkloadView(
                namespace="ns",
                name=f"w{i}",
                cluster_queue=f"cq{i % 40}",
                gpus=8 * rng.randint(1, 4),
                priority=rng.randint(0, 10),
                admitted=rng.random() < 0.8,
                job=f"ns/job{i}",
                admitted_at=T0 - rng.uniform(0, 86400),
                created_at=T0 - rng.uniform(0, 86400),
            )
        )
    rates = {name: rng.choice([0.0, 1e-5, 1e-4, 1e-3]) for name in queues}
    return ClusterView(
        cluster_queues=queues, workloads=tuple(workloads), preemption_rate=rates, priority_boost_enabled=True
    )


def make_job(rng: random.Random, i: int) -> JobView:
    kind = i % 8
    plateau = [0.1, 0.97, 0.2, 0.3, 0.1, 0.05, 0.4, 0.95][kind]
    fc = Forecast(
        final_loss=Interval(1.0, 0.9, 1.1),
        plateau_probability=plateau,
        divergence_probability=0.99 if kind == 2 else 0.01,
        eta_seconds=Interval(5000, 4000, 9000 if kind == 4 else 6000),
        n_points=rng.randint(5, 200),
        current_loss=1.0,
    )
    nodes = rng.randint(1, 4)
    actions: tuple[ActionRecord, ...] = ()
    if kind == 7:
        actions = (ActionRecord(ActionKind.CHECKPOINT, T0 - 300, "ck", policy="p", rule="plateau"),)
    return JobView(
        namespace="ns",
        name=f"job{i % 400}",
        cluster_queue=f"cq{i % 40}",
        priority=rng.randint(0, 10),
        gpus=8 * nodes,
        nodes=nodes,
        min_nodes=1,
        max_nodes=8 if kind in (4, 5) else None,
        started_at=T0 - rng.uniform(600, 86400),
        step=rng.randint(100, 20_000),
        total_steps=20_000,
        last_step_change=T0 - (7200 if kind == 3 else 30),
        last_sample_time=T0 - 30,
        last_loss=math.nan if kind == 6 and i % 3 == 0 else 1.0,
        forecast=fc,
        checkpoint=CheckpointState(last_time=T0 - rng.uniform(0, 20000), cost_seconds=rng.uniform(10, 120)),
        throughput=((nodes, 1.5 * nodes),) if kind == 5 else (),
        actions=actions,
        annotations={"advisor.trainjob-advisor.io/deadline": str(T0 + 3600)} if kind == 4 else {},
        rule_state={"plateau.since": T0 - 7200} if kind in (1, 7) else {},
        labels={"advisor.trainjob-advisor.io/exempt": "true"} if i % 50 == 0 else {},
    )


def everything() -> Policy:
    return load_policy(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "everything"},
            "spec": {
                "mode": "Apply",
                "rules": {
                    "plateau": {},
                    "divergence": {},
                    "stall": {},
                    "deadline": {"scaleUp": True},
                    "checkpoint": {},
                    "preemptionGuard": {},
                    "elastic": {"maxNodes": 8},
                    "quotaRelease": {},
                },
            },
        }
    )


def rate(jobs: list[JobView], cluster: ClusterView, policy: Policy, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        # a fresh (equal) cluster object each round, so the victim-prediction cache only helps
        # within a round, as it does in the controller (one snapshot per tick)
        snapshot = dataclasses.replace(cluster)
        start = time.process_time()
        for j in jobs:
            decide(j, snapshot, policy, now=T0)
        best = min(best, time.process_time() - start)
    return len(jobs) / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rng = random.Random(4)
    cluster = make_cluster(rng)
    jobs = [make_job(rng, i) for i in range(args.jobs)]
    bare = load_policy(
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "bare"},
            "spec": {"mode": "Apply"},
        }
    )
    samples = [
        p
        for f in sorted((ROOT / "manifests" / "samples").glob("policy-*.yaml"))
        for p in load_policies(str(f))
    ]
    base = rate(jobs, cluster, bare, args.repeat)
    print(f"{args.jobs} job decisions per policy, best of {args.repeat}, CPU time on one core")
    print(f"{'policy':<22}{'decisions/s':>14}{'x target':>10}{'x rule-less':>13}")
    print(f"{'(rule-less baseline)':<22}{base:>14,.0f}{base / TARGET:>10.2f}{1.0:>13.2f}")
    worst = math.inf
    for p in [*samples, everything()]:
        r = rate(jobs, cluster, p, args.repeat)
        worst = min(worst, r)
        print(f"{p.name:<22}{r:>14,.0f}{r / TARGET:>10.2f}{r / base:>13.2f}")
    print(f"slowest policy: {worst:,.0f} decisions/s = {worst / TARGET:.2f}x the 10,000/s target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
