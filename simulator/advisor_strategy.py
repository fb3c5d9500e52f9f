"""The advisor row: the production core loop (``advisor.core.AdvisorCore``) driven by the simulator.

At each tick the job's new progress reports go to ``core.observe``, the simulator builds the base
``JobView`` and the ``ClusterView`` from its own state, ``core.evaluate`` re-forecasts when the job's
forecast is due and asks the policies, and the engine's actuator carries out the decision's actions
after they are recorded with ``core.record_action`` (request id first), exactly the sequence the
controller follows. Nothing here decides anything itself.

Why the cadence is evidence-driven: the controller re-forecasts a job whenever new progress arrives
(every few tens of seconds), which a simulator of thousands of jobs cannot afford. A fixed coarse
interval, though, makes the simulated advisor slower than the real one exactly where it matters: a
``for: 20m`` window would span one forecast or two. So the simulator spends its forecasts where they
can change a decision:

* a quiet job ticks on the adaptive ``Cadence`` (often early, then a fraction of its age, capped)
  and is re-forecast at most every ``forecast_interval_s``; in a row whose policies act on the
  plateau or divergence probability it ticks at least that often too, so that each forecast the
  interval allows is made;
* a job near a decision, one whose plateau or divergence rule holds its ``for:`` window (advice
  ``plateau?`` / ``diverging?``) or whose plateau/divergence probability is above
  ``watch_probability``, ticks and is re-forecast every ``watch_interval_s``, when a policy of the
  row would act on that condition (not for a rule that only recommends);
* a tick comes no later than a decision's ``recheck_at`` (a ``for:`` window or a checkpoint timeout
  ending), right after each checkpoint acknowledgement, and whenever a higher-priority workload
  waits in the job's cohort (the controller's watch events).

Measured on the default scenario (plateau-release row, seed 0): a forecast interval proportional to
the job's expected length (24 looks per run) on top of this cost 70% more forecasts and gave back
nothing more (444 vs 440 non-learning GPU-h left): short runs are limited by the policy's
``minRuntime`` and ``for:``, not by how often they are looked at, so it is not used.
The engine's tick count and ``core.forecasts_made`` say what a run cost.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ActionRecord, Decision, Mode, ProgressSample
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


def _acts_on(policies: Sequence[Any], rule: str) -> bool:
    """Whether any of the policies has ``rule`` enabled with an action other than Recommend."""
    for policy in policies:
        spec = getattr(policy.rules, rule, None)
        if spec is not None and spec.enabled and getattr(spec, "action", "") != "Recommend":
            return True
    return False


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
        watch_interval_s: float = 300.0,
        watch_probability: float = 0.5,
    ) -> None:
        if watch_interval_s <= 0:
            raise ValueError("watch_interval_s must be positive")
        if not 0 < watch_probability <= 1:
            raise ValueError("watch_probability must be in (0, 1]")
        self.name = name
        self.policies = tuple(policies)
        self.forecast_interval_s = forecast_interval_s
        # never rarer than a quiet job (a zero forecast interval: a forecast at every tick already)
        self.watch_interval_s = min(watch_interval_s, forecast_interval_s or watch_interval_s)
        self.watch_probability = watch_probability
        self.watch_plateau = _acts_on(self.policies, "plateau")
        self.watch_divergence = _acts_on(self.policies, "divergence")
        # a row that acts on the forecast's probabilities looks at a quiet job once per forecast
        # interval; the others keep the plain cadence (their rules do not hinge on a forecast's timing)
        watching = self.watch_plateau or self.watch_divergence
        self._quiet_spacing = forecast_interval_s if watching and forecast_interval_s > 0 else math.inf
        self.cadence = cadence or Cadence(first_s=600.0, min_s=300.0, max_s=1800.0, fraction=0.25)
        self.core = AdvisorCore(self.policies, forecast_interval_s=forecast_interval_s, lazy_forecast=True)
        self._sim: Simulation | None = None
        self._current_policy = ""
        self._recheck_at: dict[str, float] = {}
        self._spacing: dict[str, float] = {}

    def reset(self, sim: Simulation) -> None:
        self._sim = sim
        self.core = AdvisorCore(
            self.policies, forecast_interval_s=self.forecast_interval_s, lazy_forecast=True
        )
        self._recheck_at = {}
        self._spacing = {}

    def first_tick(self, job: SimJob) -> float | None:
        return self.cadence.first_s

    def next_tick(self, job: SimJob, now: float) -> float | None:
        start = job.first_start if job.first_start is not None else now
        delay = min(self.cadence.next(now - start), self._spacing.get(job.key, self._quiet_spacing))
        due = self._recheck_at.get(job.key)
        if due is not None and due > now:
            delay = min(delay, due - now)
        return delay

    def forecast_spacing(self, key: str, decision: Decision) -> float:
        """How long until the job's next forecast: short near a decision, else the row's bound."""
        rec = self.core.record(key)
        fc = rec.forecast if rec is not None else None
        p_plateau = fc.plateau_probability if fc is not None else 0.0
        p_diverge = fc.divergence_probability if fc is not None else 0.0
        near = (
            self.watch_plateau and (decision.advice == "plateau?" or p_plateau > self.watch_probability)
        ) or (
            self.watch_divergence and (decision.advice == "diverging?" or p_diverge > self.watch_probability)
        )
        return self.watch_interval_s if near else self.forecast_interval_s

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        sim = self._sim
        assert sim is not None, "reset() first"
        key = job.key
        for sample in samples:
            self.core.observe(key, sample, now=now, nodes=job.nodes)
        # the per-policy hourly cap is counted by the core loop from its own action log
        decision = self.core.evaluate(
            sim.job_view(job),
            sim.cluster_view(),
            now=now,
            forecast_interval_s=self._spacing.get(key, self.forecast_interval_s),
        )
        spacing = self.forecast_spacing(key, decision)
        if spacing < self.forecast_interval_s:
            self._spacing[key] = spacing
        else:
            self._spacing.pop(key, None)
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
        self._spacing.pop(job.key, None)
