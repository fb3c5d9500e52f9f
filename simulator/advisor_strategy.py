"""The advisor row: the production core loop (``advisor.core.AdvisorCore``) driven by the simulator.

At each tick the job's new progress reports go to ``core.observe``, the simulator builds the base
``JobView`` and the ``ClusterView`` from its own state, ``core.evaluate`` re-forecasts when the job's
forecast is due and asks the policies, and the engine's actuator carries out the decision's actions
after they are recorded with ``core.record_action`` (request id first), exactly the sequence the
controller follows. Nothing here decides anything itself.

When the row looks at a job and how far apart its forecasts may be is ``simulator.look_schedule``'s
business (the economics of spending forecasts where they can change a decision).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ActionRecord, ProgressSample
from simulator import replay_memo
from simulator.look_schedule import LOOKS_PER_RUN, LookSchedule, learning_only
from simulator.strategy import Cadence

if TYPE_CHECKING:
    from simulator.engine import Simulation
    from simulator.jobs import SimJob

__all__ = ["LOOKS_PER_RUN", "AdvisorStrategy", "learning_only"]

_MUTATING = frozenset(k for k in ActionKind if k is not ActionKind.RECOMMEND)


class AdvisorStrategy:
    predicts_victims = True
    judges_by_policy = True
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
        looks_per_run: float | None = None,
        close_interval_s: float | None = None,
        flatten_margin: float = 0.1,
        reference_gpus: float | None = None,
    ) -> None:
        self.name = name
        self.policies = tuple(policies)
        self.forecast_interval_s = forecast_interval_s
        # the schedule validates its settings and decides the core's run fraction
        self.looks = LookSchedule(
            self.policies,
            forecast_interval_s=forecast_interval_s,
            cadence=cadence,
            watch_interval_s=watch_interval_s,
            watch_probability=watch_probability,
            looks_per_run=looks_per_run,
            close_interval_s=close_interval_s,
            flatten_margin=flatten_margin,
            reference_gpus=reference_gpus,
        )
        self.core = self._new_core()
        self.looks.core = self.core
        self._sim: Simulation | None = None
        #: job key -> the policy of its latest decision, which its actions are recorded under (as the
        #: controller records them under their decision's: one field for every job stamped a
        #: policy-less cleanup with the previous job's policy)
        self._decided_by: dict[str, str] = {}
        #: forecasts made per job (``SimJob.idx``) in the current run: what a replay spent where
        self.forecasts_by_job: dict[int, int] = {}

    def _new_core(self) -> AdvisorCore:
        return AdvisorCore(
            self.policies,
            forecaster=replay_memo.forecast,
            forecast_interval_s=self.forecast_interval_s,
            forecast_run_fraction=self.looks.run_fraction,
            lazy_forecast=True,
        )

    def reset(self, sim: Simulation) -> None:
        self._sim = sim
        self.core = self._new_core()
        self.looks.reset(sim, self.core)
        self.forecasts_by_job = {}
        self._decided_by = {}

    def first_tick(self, job: SimJob) -> float | None:
        return self.looks.first_tick(job)

    def next_tick(self, job: SimJob, now: float) -> float | None:
        return self.looks.next_tick(job, now)

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        sim = self._sim
        assert sim is not None, "reset() first"
        key = job.key
        for sample in samples:
            self.core.observe(key, sample, now=now, nodes=job.nodes)
        bound = self.looks.forecast_bound(job)
        # the per-policy hourly cap is counted by the core loop from its own action log
        # a near job ticks exactly every watch interval: a clock advanced by sums may land a hair
        # short of it, which must not cost the forecast that tick is for
        near = None if bound is None else bound * (1.0 - 1e-9)
        made = self.core.forecasts_made
        decision = self.core.evaluate(
            sim.job_view(job), sim.cluster_view(), now=now, forecast_interval_s=near
        )
        if self.core.forecasts_made != made:
            self.forecasts_by_job[job.idx] = self.forecasts_by_job.get(job.idx, 0) + 1
        self.looks.decided(key, decision)
        job.judged = job.judged or decision.judged
        acts = [a for a in decision.actions if a.kind in _MUTATING]
        self._decided_by[key] = decision.policy or ""
        # the cleanup (the advisor's own boost, its mandate ended) is carried out in any mode, as
        # the controller does
        return [*acts, *(a for a in decision.cleanup if a.kind in _MUTATING)]

    def record(self, job: SimJob, action: Action, request_id: str, now: float) -> None:
        self.core.record_action(
            job.key,
            ActionRecord.requested(
                action, policy=self._decided_by.get(job.key, ""), request_id=request_id, now=now
            ),
        )

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        self.core.update_action(job.key, request_id, outcome)

    def policy_of(self, job: SimJob) -> str | None:
        return self._decided_by.get(job.key) or None

    def finished(self, job: SimJob, now: float) -> None:
        self.core.forget(job.key)
        self.looks.forget(job.key)
        self._decided_by.pop(job.key, None)
