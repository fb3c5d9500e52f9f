"""Scenarios: a trace, a cluster (ClusterQueues, cohorts, LocalQueues) and the world's physics.

The embedded default needs no external data: three teams' ClusterQueues sharing one cohort with
borrowing and preemption, a synthetic trace of a few hundred jobs with a share of high-priority
work, and the calibrated curve library. Each job carries the ``workload-type`` label a real
cluster would give it (``pretraining`` for warmup-stable-decay runs, ``fine-tuning`` otherwise; see
``simulator.curves``), so policy selectors on it mean what they mean on a cluster. A cluster can
also be given as YAML (``--cluster``) or sized automatically from an external trace (one
ClusterQueue per trace queue, in one cohort).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from simulator.jobs import WorldConfig
from simulator.quota import ClusterQueueSpec, QuotaError
from simulator.traces import Trace, synthetic_trace

__all__ = [
    "Scenario",
    "auto_cluster",
    "default_scenario",
    "dominated_queues",
    "load_cluster",
    "most_admitted",
    "unadmittable_jobs",
]


@dataclass(slots=True)
class Scenario:
    name: str
    trace: Trace
    queues: list[ClusterQueueSpec]
    queue_map: dict[str, str]  # LocalQueue -> ClusterQueue
    world: WorldConfig = field(default_factory=WorldConfig)
    curve_mix: dict[str, float] | None = None
    seed: int = 0
    #: a folder of real runs to draw the jobs' curves from (None: the synthetic library)
    curves_dir: Path | None = None

    @property
    def capacity(self) -> int:
        return sum(q.nominal_gpus for q in self.queues)


def _team_queue(name: str, nominal: int) -> ClusterQueueSpec:
    return ClusterQueueSpec(
        name=name,
        nominal_gpus=nominal,
        cohort="research",
        within_cluster_queue="LowerPriority",
        reclaim_within_cohort="Any",
        borrow_within_cohort="LowerPriority",
    )


def default_scenario(
    seed: int = 0, n_jobs: int = 120, hours: float | None = None, gpus_per_team: int = 24
) -> Scenario:
    """The embedded default: 3 teams x 24 GPUs in one cohort and ``n_jobs`` synthetic jobs arriving
    over ``hours`` (default: 0.15 h per job, which loads the cluster to about its capacity, so that
    queueing, borrowing and preemption all happen).

    Its size was set when a forecast cost ~15 ms, so that four policy rows plus four baselines run in
    under a minute on one core; forecasts now cost 1-2 ms and all eight rows take about 15-20 s,
    but the scenario stays as it is: its numbers are the ones every earlier measurement used."""
    trace = synthetic_trace(n_jobs, seed=seed, hours=hours if hours is not None else 0.15 * n_jobs)
    queues = [_team_queue(f"cq-{t}", gpus_per_team) for t in ("team-a", "team-b", "team-c")]
    return Scenario(
        "default", trace, queues, {t: f"cq-{t}" for t in ("team-a", "team-b", "team-c")}, seed=seed
    )


def auto_cluster(
    trace: Trace, *, target_utilization: float = 0.85
) -> tuple[list[ClusterQueueSpec], dict[str, str]]:
    """One ClusterQueue per trace queue in a shared cohort, each sized to its mean demand."""
    if not 0 < target_utilization <= 1:
        raise ValueError("target_utilization must be in (0, 1]")
    span = max(3600.0, max(j.submit + j.duration for j in trace.jobs) - min(j.submit for j in trace.jobs))
    demand: dict[str, float] = defaultdict(float)
    biggest: dict[str, int] = defaultdict(int)
    for j in trace.jobs:
        demand[j.queue] += j.gpus * j.duration
        biggest[j.queue] = max(biggest[j.queue], j.gpus)
    queues = []
    for q in sorted(demand):
        nominal = max(biggest[q], math.ceil(demand[q] / span / target_utilization))
        queues.append(_team_queue(f"cq-{q}", nominal))
    return queues, {q: f"cq-{q}" for q in demand}


#: a queue sized to its largest job at more than this many times its mean demand is mostly idle
DOMINATED_FACTOR = 4.0


def dominated_queues(trace: Trace, queues: list[ClusterQueueSpec]) -> list[tuple[str, int, float]]:
    """The queues ``auto_cluster`` sized to one job far larger than the rest of their demand:
    (queue, its GPUs, the GPUs its mean demand needs). A single 100,000-GPU row makes a cluster
    whose utilisation, waits and savings say nothing of the other jobs; the user should know."""
    span = max(3600.0, max(j.submit + j.duration for j in trace.jobs) - min(j.submit for j in trace.jobs))
    demand: dict[str, float] = defaultdict(float)
    for j in trace.jobs:
        demand[f"cq-{j.queue}"] += j.gpus * j.duration / span
    return [
        (q.name, q.nominal_gpus, demand[q.name])
        for q in queues
        if q.name in demand and q.nominal_gpus > DOMINATED_FACTOR * max(demand[q.name], 1.0)
    ]


def most_admitted(queues: list[ClusterQueueSpec]) -> dict[str, int]:
    """The most GPUs each ClusterQueue can ever hold, borrowing included: with every other queue
    empty, its nominal quota without a cohort; in one, what it keeps from lending plus all its
    cohort lends, within its own borrowing limit (the bound the quota model's fit test sets)."""
    lent: dict[str, int] = defaultdict(int)
    for q in queues:
        if q.cohort is not None:
            lent[q.cohort] += q.nominal_gpus - q.guaranteed
    most: dict[str, int] = {}
    for q in queues:
        if q.cohort is None:
            most[q.name] = q.nominal_gpus
            continue
        m = q.guaranteed + lent[q.cohort]
        if q.borrowing_limit is not None:
            m = min(m, q.nominal_gpus + q.borrowing_limit)
        most[q.name] = m
    return most


def unadmittable_jobs(
    trace: Trace, queues: list[ClusterQueueSpec], queue_map: dict[str, str]
) -> list[tuple[str, int, str, int]]:
    """The jobs that ask more GPUs than their ClusterQueue can ever hold: (job, its GPUs, the
    queue, the most it holds). They wait for ever, so they end in no row's figures (JSON
    ``unfinished``); a cluster file sized below its trace's largest jobs should not go unsaid."""
    most = most_admitted(queues)
    out = []
    for j in trace.jobs:
        cq = queue_map.get(j.queue)
        if cq in most and j.gpus > most[cq]:
            out.append((j.name, j.gpus, cq, most[cq]))
    return out


def _opt_int(spec: dict[str, Any], key: str, where: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise QuotaError(f"{where}: {key} must be a non-negative integer, got {value!r}")
    return value


#: the keys of a cluster file, per mapping: another is a typo (``borowingLimit`` read as no limit)
_CLUSTER_KEYS = ("clusterQueues", "localQueues")
_QUEUE_KEYS = (
    "name",
    "nominalGPUs",
    "nominalGpus",
    "cohort",
    "borrowingLimit",
    "lendingLimit",
    "queueingStrategy",
    "preemption",
)
_PREEMPTION_KEYS = ("withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort")
_BORROW_KEYS = ("policy", "maxPriorityThreshold")
#: where each checked value of a ClusterQueue is in the file
_YAML_PATHS = {
    "within_cluster_queue": "preemption.withinClusterQueue",
    "reclaim_within_cohort": "preemption.reclaimWithinCohort",
    "borrow_within_cohort": "preemption.borrowWithinCohort.policy",
    "queueing_strategy": "queueingStrategy",
}


def _known(mapping: dict[Any, Any], known: tuple[str, ...], where: str) -> None:
    unknown = [str(k) for k in mapping if k not in known]
    if unknown:
        raise QuotaError(f"{where}{unknown[0]}: unknown key (known: {', '.join(known)})")


def load_cluster(path: str | Path) -> tuple[list[ClusterQueueSpec], dict[str, str]]:
    """Read a cluster YAML::

    clusterQueues:
      - name: cq-a
        nominalGPUs: 32
        cohort: research            # optional
        borrowingLimit: 16          # optional (null: unlimited)
        lendingLimit: 8             # optional
        queueingStrategy: BestEffortFIFO
        preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any,
                     borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}}
    localQueues: {team-a: cq-a}     # trace queue -> ClusterQueue

    Documented in ``docs/cluster.md``; ``examples/cluster.yaml`` is a complete example.
    """
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise QuotaError(f"{p}: cannot read cluster: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        from policies.loader import yaml_problem

        raise QuotaError(f"{p}: cannot read cluster: not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("clusterQueues"), list):
        raise QuotaError(f"{p}: expected a mapping with a clusterQueues list")
    _known(data, _CLUSTER_KEYS, f"{p}: ")
    queues = []
    for i, spec in enumerate(data["clusterQueues"]):
        where = f"{p}: clusterQueues[{i}]"
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise QuotaError(f"{where}: needs a name")
        _known(spec, _QUEUE_KEYS, f"{where}.")
        if "nominalGPUs" not in spec and "nominalGpus" in spec:  # the job-state spelling, still read
            spec = {**spec, "nominalGPUs": spec["nominalGpus"]}
        nominal = _opt_int(spec, "nominalGPUs", where)
        if nominal is None:
            raise QuotaError(f"{where}: nominalGPUs is required")
        pre = spec.get("preemption") or {}
        if not isinstance(pre, dict):
            raise QuotaError(f"{where}: preemption must be a mapping")
        _known(pre, _PREEMPTION_KEYS, f"{where}.preemption.")
        bwc = pre.get("borrowWithinCohort") or {}
        if not isinstance(bwc, dict):
            raise QuotaError(f"{where}: preemption.borrowWithinCohort must be a mapping")
        _known(bwc, _BORROW_KEYS, f"{where}.preemption.borrowWithinCohort.")
        try:
            queue = ClusterQueueSpec(
                name=spec["name"],
                nominal_gpus=nominal,
                cohort=spec.get("cohort"),
                borrowing_limit=_opt_int(spec, "borrowingLimit", where),
                lending_limit=_opt_int(spec, "lendingLimit", where),
                within_cluster_queue=pre.get("withinClusterQueue", "Never"),
                reclaim_within_cohort=pre.get("reclaimWithinCohort", "Never"),
                borrow_within_cohort=bwc.get("policy", "Never"),
                borrow_max_priority_threshold=bwc.get("maxPriorityThreshold"),
                queueing_strategy=spec.get("queueingStrategy", "BestEffortFIFO"),
            )
        except QuotaError as exc:
            # the checks speak of the spec's Python fields: said at the file's own path
            text = str(exc).removeprefix(f"ClusterQueue {spec['name']}: ")
            field, _, rest = text.partition(" ")
            raise QuotaError(f"{where}.{_YAML_PATHS.get(field, field)}: {rest}") from None
        queues.append(queue)
    local = data.get("localQueues") or {q.name: q.name for q in queues}
    if not isinstance(local, dict):
        raise QuotaError(f"{p}: localQueues must map queue names to ClusterQueues")
    names = {q.name for q in queues}
    for lq, cq in local.items():
        if cq not in names:
            raise QuotaError(f"{p}: localQueues.{lq}: unknown ClusterQueue {cq!r}")
    return queues, {str(k): str(v) for k, v in local.items()}


def with_world(scenario: Scenario, **changes: Any) -> Scenario:
    """A copy of the scenario with some physics changed (e.g. ``node_mtbf_h=0``)."""
    return replace(scenario, world=replace(scenario.world, **changes))
