"""The controller engine's settings: how often it evaluates, forecasts and writes, and its bounds.

Apart from the engine so that the command line, the operator and the tests build one without the
loop's machinery; ``advisor.controller.engine`` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.controller.policystatus import DEFAULT_SHARD
from advisor.core.history import DEFAULT_MAX_POINTS

__all__ = ["EngineConfig"]


@dataclass(frozen=True)
class EngineConfig:
    evaluate_interval_s: float = 30.0
    forecast_interval_s: float = 30.0
    write_interval_s: float = 2.0
    max_writes_per_second: float = 200.0
    writer_workers: int = 32
    queue_metrics_interval_s: float = 15.0
    priority_boost_enabled: bool = False
    hung_after_s: float = 900.0
    #: seconds of full evaluations (forecast + policies) one step may spend; jobs beyond it are
    #: rendered from their latest sample and the last decision now, and evaluated in a later step
    evaluate_budget_s: float = 0.25
    #: AdvisorPolicy statuses (jobs matched, actions, GPU-hours flagged) are refreshed this often
    policy_status_interval_s: float = 30.0
    #: evaluate every AdvisorPolicy as if its mode were Recommend, whatever it says: a cluster-wide
    #: safety rail for a first install (manifests/overlays/recommend-only, the chart's default)
    recommend_only: bool = False
    #: why every policy is evaluated as Recommend, and what lifts it, as the policies' RecommendOnly
    #: condition says it (None: the flag's; installed CRDs older than the controller hold Apply too:
    #: ``crd_check``)
    recommend_only_why: tuple[str, str] | None = None
    #: export per-job series (labels namespace and name); off: only per-queue and controller series
    job_metrics: bool = True
    #: progress points kept per job before the older half is thinned: bounds each job's memory and
    #: its stored history (~3 KB at 300), whatever the run's length
    history_points: int = DEFAULT_MAX_POINTS
    #: this release's key in each AdvisorPolicy's ``status.shards`` (its Lease, ``namespace/name``):
    #: namespace shards (releases with their own ``watchNamespaces`` and Lease) each write their
    #: own entry of a cluster-scoped policy's figures, and the totals are summed over the entries
    status_shard: str = DEFAULT_SHARD
