"""Small worlds for the simulator's tests."""

from __future__ import annotations

from simulator.curves import CurveLibrary
from simulator.jobs import WorldConfig
from simulator.quota import ClusterQueueSpec
from simulator.scenario import Scenario
from simulator.traces import Trace, TraceJob

HEALTHY = CurveLibrary(mix={"none": 1.0})
QUIET = WorldConfig(node_mtbf_h=0.0, job_checkpoint_interval_s=None, jit_fraction=0.0)


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
