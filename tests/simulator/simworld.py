"""Small worlds for the simulator's tests."""

from __future__ import annotations

from simulator.curves import CurveLibrary
from simulator.jobs import WorldConfig
from simulator.quota import ClusterQueueSpec
from simulator.scenario import Scenario
from simulator.traces import Trace, TraceJob

HEALTHY = CurveLibrary(mix={"none": 1.0})
#: no faults, no periodic saves, and every job's reports carry its planned steps and learning rate
#: (as Hugging Face's callback sends them), so a test sees the rules act and not the reporter's gaps
QUIET = WorldConfig(
    node_mtbf_h=0.0,
    job_checkpoint_interval_s=None,
    jit_fraction=0.0,
    reports_total_steps=1.0,
    reports_learning_rate=1.0,
)


def one_queue(nominal: int, **kw: object) -> list[ClusterQueueSpec]:
    return [ClusterQueueSpec(name="cq", nominal_gpus=nominal, **kw)]  # type: ignore[arg-type]


def scenario(
    jobs: list[TraceJob],
    queues: list[ClusterQueueSpec],
    world: WorldConfig = QUIET,
    qmap: dict[str, str] | None = None,
    seed: int = 0,
) -> Scenario:
    return Scenario(
        "test",
        Trace(jobs, "test"),
        queues,
        qmap or {"default": "cq"},
        world=world,
        curve_mix={"none": 1.0},
        seed=seed,
    )
