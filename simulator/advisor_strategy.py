"""The advisor row: the production core loop (``advisor.core.AdvisorCore``) driven by the simulator.

At each tick the job's new progress reports go to ``core.observe``, the simulator builds the base
``JobView`` and the ``ClusterView`` from its own state, ``core.evaluate`` forecasts (at most every
``forecast_interval_s`` per job) and asks the policies, and the engine's actuator carries out the
decision's actions after they are recorded with ``core.record_action`` (request id first), exactly
the sequence the controller follows. Nothing here decides anything itself.

Ticks are adaptive so that big traces stay cheap: a few minutes after a job starts, then a fixed
fraction of its age (capped), plus a tick right after each checkpoint acknowledgement and whenever
a higher-priority workload is waiting in the job's cohort (the controller's watch events), and no
later than a decision's ``recheck_at`` (a ``for:`` window or a checkpoint timeout falling due).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ActionRecord, Mode, ProgressSample
from simulator.strategy import Cadence

if TYPE_CHECKING:
    from simulator.engine import Simulation
    from simulator.jobs import SimJob

__all__ = ["AdvisorStrategy", "as_applied"]

_MUTATING = frozenset(k for k in ActionKind if k is not ActionKind.RECOMMEND)


def as_applied(policy: Any) -> Any:
    """The same policy in Apply mode: the simulator answers "what would it have done"."""
    if policy.mode is Mode.APPLY:
        return policy
    return dataclasses.replace(policy, spec=dataclasses.replace(policy.spec, mode=Mode.APPLY))


class AdvisorStrategy:
    predicts_victims = True
    watches_cluster = True

    def __init__(
        self,
        name: str,
        policies: Sequence[Any],
        *,
        forecast_interval_s: float = 900.0,
        cadence: Cadence | None = None,
    ) -> None:
        self.name = name
        self.policies = tuple(policies)
        self.forecast_interval_s = forecast_interval_s
        self.cadence = cadence or Cadence(first_s=600.0, min_s=300.0, max_s=1800.0, fraction=0.25)
        self.core = AdvisorCore(self.policies, forecast_interval_s=forecast_interval_s)
        self._sim: Simulation | None = None
        self._current_policy = ""
        self._recheck_at: dict[str, float] = {}

    def reset(self, sim: Simulation) -> None:
        self._sim = sim
        self.core = AdvisorCore(self.policies, forecast_interval_s=self.forecast_interval_s)
        self._recheck_at = {}

    def first_tick(self, job: SimJob) -> float | None:
        return self.cadence.first_s

    def next_tick(self, job: SimJob, now: float) -> float | None:
        start = job.first_start if job.first_start is not None else now
        delay = self.cadence.next(now - start)
        due = self._recheck_at.get(job.key)
        if due is not None and due > now:
            delay = min(delay, due - now)
        return delay

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        sim = self._sim
        assert sim is not None, "reset() first"
        key = job.key
        for sample in samples:
            self.core.observe(key, sample, now=now, nodes=job.nodes)
        # the per-policy hourly cap is counted by the core loop from its own action log
        decision = self.core.evaluate(sim.job_view(job), sim.cluster_view(), now=now)
        if decision.recheck_at is not None:
            self._recheck_at[key] = decision.recheck_at
        else:
            self._recheck_at.pop(key, None)
        acts = [a for a in decision.actions if a.kind in _MUTATING]
        if acts and decision.policy is not None:
            self._current_policy = decision.policy
        return acts

    def record(self, job: SimJob, action: Action, request_id: str, now: float) -> None:
        timeout = action.params.get("timeout_s")
        self.core.record_action(
            job.key,
            ActionRecord(
                kind=action.kind,
                time=now,
                request_id=request_id,
                policy=self._current_policy,
                rule=action.rule,
                outcome="requested",
                reason=action.reason,
                timeout_s=float(timeout) if isinstance(timeout, int | float) else None,
            ),
        )

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        self.core.update_action(job.key, request_id, outcome)

    def finished(self, job: SimJob, now: float) -> None:
        self.core.forget(job.key)
        self._recheck_at.pop(job.key, None)
