"""The advisor's core loop: observe → forecast → decide, written once.

The kopf controller and the trace-driven simulator are two thin adapters around this class.
Each owns a clock (wall time vs a virtual clock), a source of observations (TrainJob watch
events vs simulated progress reports) and an actuator (API writes vs state changes in the
simulated cluster); everything between those — keeping each run's history, deciding when to
re-forecast, recognising checkpoint acknowledgements, remembering what was done and when, and
asking the policies — lives here, so the simulator's verdict on a policy is a verdict on the
code that runs in the cluster.

The loop never acts: ``evaluate`` returns a :class:`~advisor.model.Decision`, and the adapter
carries it out and reports back with :meth:`AdvisorCore.record_action`. What one progress report
changes in a job's record is :mod:`advisor.core.observe`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from advisor.core.history import DEFAULT_MAX_POINTS, History
from advisor.core.observe import note_window, observe_sample
from advisor.core.policy_caps import PolicyActionLog
from advisor.core.readings import rate as measured_rate
from advisor.core.record import (
    MAX_ACTIONS_KEPT,
    JobRecord,
    drop_orphaned_request,
    expire_checkpoint,
    loss_at_checkpoint,
    note_phase,
    record_from_dict,
    record_learning_state,
    record_to_dict,
    report_interval,
    set_outcome,
    trim_actions,
)
from advisor.core.report_sight import RecordSight
from advisor.core.runtime_pool import RuntimeSigtermPool
from advisor.core.saves import note_admission, resolve
from advisor.core.wiring import (
    Decider,
    Forecaster,
    Judged,
    PolicyLike,
    Selector,
    default_advice,
    default_decider,
    default_judged,
    default_selector,
    default_ties,
    orphan_cleanup,
    training_loss_forecast,
    with_ties,
)
from advisor.model import (
    DISRUPTIVE_KINDS,
    ActionKind,
    ActionRecord,
    ClusterView,
    Decision,
    JobView,
    LearningState,
    Phase,
    ProgressSample,
)

__all__ = ["MAX_ACTIONS_KEPT", "AdvisorCore", "JobRecord", "PolicyLike", "training_loss_forecast"]

#: a forecast made on fewer points is replaced by the next new data, whatever the re-forecast
#: bound: a fit of a handful of points is mostly its prior (the first one, on one point, is the
#: step-0 loss), and keeping it for the whole bound showed it as the run's forecast for that long.
#: The forecaster's local plateau test needs as many (``advisor.forecast.plateau.MIN_POINTS``).
EARLY_FORECAST_POINTS = 8


class AdvisorCore:
    """Per-job history, forecasts and decisions for any number of jobs.

    Parameters
    ----------
    policies:
        The admin policies in force (``policies.Policy`` objects).
    forecast_interval_s:
        A job is re-forecast at most this often (and only when new data arrived): the cost
        bound that lets one controller follow thousands of jobs reporting every few seconds.
    max_history_points:
        Bound of each job's stored history (see :class:`~advisor.core.history.History`).
    lazy_forecast:
        Forecast a job only when the policy that selects it judges its learning (past its
        ``minRuntime`` / ``minSteps`` / ``minProgress``), the only time rules read a forecast;
        the first one is then made on all the data so far. What is lost is the forecast *shown*
        for young jobs, so the controller (whose status shows it) keeps the default, and a
        replay of a huge trace turns it on (most jobs there are short and never judged).
    forecast_run_fraction:
        When positive, a quiet job is re-forecast at most every ``forecast_run_fraction`` of its
        expected run length (total steps over the measured throughput), when that is longer than
        ``forecast_interval_s``. A forecast reads the curve over *steps*: what it can learn between
        two looks grows with the share of the run that passed, not with wall time, so a 700-hour run
        seen every 10 minutes would be re-fitted on a curve that grew by a hundredth of a percent.
        The rules' ``for:`` windows do not suffer: a caller looks more closely at a job whose
        decision is near (the per-call bound of :meth:`evaluate`), so the coarse bound only sets
        how soon a quiet run's change of course is noticed, in proportion to its length. 0 (the
        default) keeps the wall-clock bound alone.
    forecaster, selector, decider, judged:
        Injection points for tests; the defaults are ``advisor.forecast.forecast_curve``,
        ``policies.select_policy``, ``policies.decide`` and the policies' judgement gate.
    """

    def __init__(
        self,
        policies: Sequence[Any] = (),
        *,
        forecast_interval_s: float = 30.0,
        max_history_points: int = DEFAULT_MAX_POINTS,
        forecast_run_fraction: float = 0.0,
        forecaster: Forecaster | None = None,
        selector: Selector | None = None,
        decider: Decider | None = None,
        lazy_forecast: bool = False,
        judged: Judged | None = None,
    ) -> None:
        if forecast_interval_s < 0:
            raise ValueError(f"forecast_interval_s must be >= 0, got {forecast_interval_s}")
        if not 0.0 <= forecast_run_fraction <= 1.0:
            raise ValueError(f"forecast_run_fraction must be in [0, 1], got {forecast_run_fraction}")
        self._policies: tuple[Any, ...] = tuple(policies)
        self.forecast_interval_s = forecast_interval_s
        self.max_history_points = max_history_points
        self.forecast_run_fraction = forecast_run_fraction
        self._forecaster = forecaster or training_loss_forecast
        self._selector = selector or default_selector
        self._decider = decider or default_decider
        self.lazy_forecast = lazy_forecast
        self._judged = judged or default_judged
        self._records: dict[str, JobRecord] = {}
        #: every policy's recent capped actions, on any job (its hourly cap)
        self._caps = PolicyActionLog()
        #: every running job's latest report, for the policies (``ClusterView.report_sight``), and
        #: the last snapshot given it: (snapshot, the snapshot with it)
        self._sight = RecordSight(self._records)
        self._sighted: tuple[ClusterView, ClusterView] | None = None
        #: saves on SIGTERM per runtime, over live and forgotten jobs (the prior of new ones)
        self._runtime = RuntimeSigtermPool()
        self.forecasts_made = 0
        #: acknowledgements naming a request this job never had (forged, or another job's): ignored
        self.forged_acks = 0

    # -------------------------------------------------------------------------------- policies
    @property
    def policies(self) -> tuple[Any, ...]:
        return self._policies

    def set_policies(self, policies: Sequence[Any]) -> None:
        self._policies = tuple(policies)

    # --------------------------------------------------------------------------------- observe
    def _record_for(self, key: str, now: float) -> JobRecord:
        rec = self._records.get(key)
        if rec is None:
            rec = JobRecord(history=History(self.max_history_points), first_seen=now)
            self._records[key] = rec
        return rec

    def observe(self, key: str, sample: ProgressSample, *, now: float, nodes: int = 1) -> bool:
        """Feed one progress sample; returns False when it carried nothing new.

        Checkpoint acknowledgements are read from every sample, even one whose loss is a
        duplicate: the training process may report the ack on its own.
        """
        rec = self._record_for(key, now)
        news, forged = observe_sample(rec, sample, now=now, nodes=nodes, runtime=self._runtime)
        self.forged_acks += forged
        return news

    # -------------------------------------------------------------------------------- forecast
    def steps_per_second(self, key: str) -> float | None:
        """The job's measured throughput at its current size (None before two samples)."""
        rec = self._records.get(key)
        return None if rec is None else measured_rate(rec)

    def expected_run_s(self, key: str) -> float | None:
        """The job's whole run at its measured throughput (None until steps and rate are known)."""
        rec = self._records.get(key)
        if rec is None or not rec.total_steps:
            return None
        rate = measured_rate(rec)
        return rec.total_steps / rate if rate else None

    def forecast_bound(self, key: str) -> float:
        """How long a quiet job goes between forecasts: ``forecast_interval_s``, or the
        ``forecast_run_fraction`` of its expected run when that is longer."""
        rec = self._records.get(key)
        return self.forecast_interval_s if rec is None else self._quiet_bound(rec)

    def _quiet_bound(self, rec: JobRecord) -> float:
        bound = self.forecast_interval_s
        if self.forecast_run_fraction > 0 and rec.total_steps:
            rate = measured_rate(rec)
            if rate:
                bound = max(bound, self.forecast_run_fraction * rec.total_steps / rate)
        return bound

    def _refresh_forecast(self, rec: JobRecord, now: float, interval: float | None = None) -> None:
        if not rec.fresh_data:
            return
        if len(rec.history) == 0:
            if rec.history.evals.names:
                # a job that reports eval metrics and no training loss: no training-loss forecast,
                # and a run state from its eval series alone (made again at each new evaluation)
                rec.learning = record_learning_state(rec, None)
                rec.judged_learning = None  # a newer state than the last look's
                rec.fresh_data = False
            return
        bound = self._quiet_bound(rec) if interval is None else interval
        early = rec.forecast is not None and rec.forecast.n_points < EARLY_FORECAST_POINTS
        if rec.forecast_at is not None and now - rec.forecast_at < bound and not early:
            return
        rec.forecast = self._forecaster(rec.history.curve(), rec.total_steps)
        rec.learning = record_learning_state(rec, None)
        rec.judged_learning = None  # a newer state than the last look's
        rec.forecast_at = now
        rec.fresh_data = False
        self.forecasts_made += 1

    # ---------------------------------------------------------------------------------- decide
    def view(
        self,
        job: JobView,
        *,
        now: float | None = None,
        forecast_interval_s: float | None = None,
        judged_at: float | None = None,
    ) -> JobView:
        """The adapter's base view with every history-derived field filled in (re-forecast first
        when ``now`` is given and a forecast is due). ``judged_at``: the time the learning state's
        ``hung`` is judged at when ``now`` is not given (a view rendered for display, which must not
        re-forecast or stamp a phase change, still shows a run whose step stopped as hung)."""
        rec = self._records.get(job.key)
        if rec is None:
            return job
        if now is not None:
            self._refresh_forecast(rec, now, forecast_interval_s)
        total = rec.total_steps if rec.total_steps is not None else job.total_steps
        note_phase(rec, job, total, now)
        last_finite = rec.history.last_finite()
        return dataclasses.replace(
            job,
            phase=rec.phase,
            phase_reason=rec.phase_reason,
            phase_since=rec.phase_since,
            step=rec.step,
            total_steps=rec.total_steps if rec.total_steps is not None else job.total_steps,
            last_step_change=rec.last_step_change,
            last_sample_time=rec.last_sample_time,
            progress_seen_at=rec.progress_seen_at,
            unreadable_report_at=rec.unreadable_report_at,
            backwards_reports=rec.history.backwards_run(),
            report_interval_s=report_interval(rec),
            started_at=job.started_at if job.started_at is not None else rec.first_seen,
            forecast=rec.forecast,
            checkpoint=rec.checkpoint,
            throughput=tuple(sorted(rec.throughput.items())),
            actions=tuple(rec.actions),
            rule_state=dict(rec.rule_state),
            last_loss=rec.history.last.loss if rec.history.last is not None else None,
            non_finite_reports=rec.history.non_finite_run(),
            last_finite_step=last_finite[0] if last_finite is not None else None,
            last_finite_loss=last_finite[1] if last_finite is not None else None,
            lowest_loss=rec.history.lowest_loss(),
            checkpoint_loss=loss_at_checkpoint(rec),
            runtime_sigterm=self._runtime.prior(self._records.values(), rec, job.runtime),
            runtime_save_windows=self._runtime.windows(self._records.values(), job.runtime),
            # a run that is not running (released, suspended, queued, done) reports nothing and
            # is not hung for it: its state stays as it was last judged while running
            learning_state=self.learning_state(
                job.key, now=(now if now is not None else judged_at) if rec.phase is Phase.RUNNING else None
            ),
            progress_warnings=_with_note(rec.last_warnings, rec.history.interleaving_note()),
        )

    def learning_state(self, key: str, *, now: float | None = None) -> LearningState | None:
        """The job's learning state as of its latest forecast, with ``hung`` judged at ``now``
        (a hung run sends nothing that would trigger a new forecast)."""
        rec = self._records.get(key)
        if rec is None or rec.learning is None:
            return None
        if now is None or rec.last_step_change is None:
            # a run judged at a look while it ran keeps that verdict once it no longer runs
            return rec.judged_learning if now is None and rec.judged_learning is not None else rec.learning
        rec.judged_learning = record_learning_state(rec, now)
        return rec.judged_learning

    def evaluate(
        self, job: JobView, cluster: ClusterView, *, now: float, forecast_interval_s: float | None = None
    ) -> Decision:
        """Re-forecast if due, select the job's policy and ask it what to do (pure).

        ``forecast_interval_s`` overrides the loop's re-forecast bound (and its run fraction) for
        this call: an adapter may look more closely at a job whose decision is near (the simulator
        does)."""
        rec = self._record_for(job.key, now)
        admission = rec.resume.admission
        if note_admission(rec.resume, rec.history, job.admitted_at):
            # admitted again (evicted and re-admitted between two looks, never seen pending): its
            # rules' windows start over, as a resume's do (``note_phase``)
            rec.rule_state.clear()
        before = rec.checkpoint
        rec.checkpoint = resolve(rec.resume, rec.history, before)
        if rec.checkpoint is not before or rec.runtime != job.runtime:
            rec.runtime = job.runtime
            self._runtime.invalidate()
        rec.gpus, rec.nodes = job.gpus, job.nodes
        note_window(rec, self._runtime)  # a new size is a new window
        note_phase(rec, job, rec.total_steps if rec.total_steps is not None else job.total_steps, now)
        drop_orphaned_request(rec, admission, job.admitted_at)
        # after the drop: a request whose job was found stopped (done, suspended, evicted) is
        # dropped, nothing could answer it, also when its timeout passed before the look (the job
        # stopped while no controller ran); timed out first, it read as a save that never came
        expire_checkpoint(rec, now)
        if self.lazy_forecast:
            view = self.view(job)
            policy = self._selector(self._policies, view) if self._policies else None
            if policy is not None and rec.fresh_data and self._judged(policy, view, now):
                self._refresh_forecast(rec, now, forecast_interval_s)
                if rec.forecast is not view.forecast:
                    view = dataclasses.replace(view, forecast=rec.forecast)
        else:
            view = self.view(job, now=now, forecast_interval_s=forecast_interval_s)
            policy = self._selector(self._policies, view) if self._policies else None
        if self._turn_series(rec, policy, now, forecast_interval_s):
            view = self.view(job, now=now, forecast_interval_s=forecast_interval_s)
        owner = getattr(policy, "name", None)
        if owner is not None and rec.rule_state_policy not in (None, owner):
            # another policy took the job over (the governing one deleted, or a more specific one
            # created): its rules' windows open now. Windows opened under the old one would let a
            # new Apply policy act in its first second on what its author never saw recommended. A
            # mode switch of one policy (Recommend, then Apply) keeps them.
            rec.rule_state.clear()
            view = dataclasses.replace(view, rule_state={})
        if policy is None:
            decision = Decision(
                job=job.key,
                reasons=("no AdvisorPolicy selects this job",),
                advice=default_advice(view),
                cleanup=orphan_cleanup(view, cluster, now),
            )
        else:
            decision = self._decider(
                view, self._caps.with_actions(self._with_sight(cluster), now), policy, now=now
            )
            if self._selector is default_selector:  # a tie is the default selection's notion
                decision = with_ties(decision, policy, default_ties(self._policies, view, policy))
        rec.rule_state = {k: float(v) for k, v in decision.state.items()}
        rec.rule_state_policy = owner
        rec.last_decision = decision
        return decision

    def _with_sight(self, cluster: ClusterView) -> ClusterView:
        """The snapshot with this loop's sight of every running job's reports; the same object
        for every job of a snapshot, as ``PolicyActionLog.with_actions`` and ``policies.index``
        key on identity. A snapshot that carries a sight of its own keeps it."""
        if cluster.report_sight is not None:
            return cluster
        sighted = self._sighted
        if sighted is not None and sighted[0] is cluster:
            return sighted[1]
        view = dataclasses.replace(cluster, report_sight=self._sight)
        self._sighted = (cluster, view)
        return view

    def _turn_series(
        self, rec: JobRecord, policy: Any, now: float, forecast_interval_s: float | None
    ) -> bool:
        """Apply the governing policy's ``metricDirections`` to the job's eval series; when a
        tracked series changes direction, its forecasts and the run state are made again now
        (whatever the re-forecast bound), so the decision reads them the right way up."""
        overrides = getattr(policy, "metric_directions", None) or {}
        if not rec.history.evals.set_overrides(overrides):
            return False
        rec.fresh_data, rec.forecast_at = True, None
        self._refresh_forecast(rec, now, forecast_interval_s)
        return True

    # ------------------------------------------------------------------------------------- act
    def record_action(self, key: str, action: ActionRecord) -> bool:
        """Remember an action the adapter took or requested (call it before the mutation).

        Returns False when an action with that request id is already recorded (a retried write
        after a restart), so the adapter can skip it. A checkpoint request becomes the job's
        pending request until it is acknowledged in the progress stream or times out
        (``action.timeout_s``, default the protocol's).
        """
        rec = self._record_for(key, action.time)
        if any(a.request_id == action.request_id for a in rec.actions):
            return False
        rec.actions.append(action)
        trim_actions(rec.actions)
        if action.kind in DISRUPTIVE_KINDS and action.policy and action.outcome != "recommended":
            self.note_policy_actions(action.policy, [(action.request_id, action.time)])
        if action.kind is ActionKind.CHECKPOINT and action.outcome == "requested":
            rec.checkpoint = dataclasses.replace(
                rec.checkpoint, pending_request=action.request_id, pending_since=action.time
            )
        return True

    def note_policy_actions(self, policy: str, actions: Iterable[tuple[str, float]]) -> int:
        """Adopt ``(request id, time)`` of ``policy``'s capped actions kept elsewhere (its
        AdvisorPolicy status, or the action logs of saved jobs not yet seen again after a restart),
        so that a restart does not reset the hourly cap; returns how many were new."""
        return self._caps.note(policy, actions)

    def policy_actions(self, policy: str, now: float) -> tuple[tuple[str, float], ...]:
        """``(request id, time)`` of ``policy``'s capped actions within the hour before ``now``."""
        return self._caps.recent(policy, now)

    def update_action(
        self, key: str, request_id: str, outcome: str, *, detail: str | None = None, at: float | None = None
    ) -> bool:
        """Set an action's outcome (``at``: when a restart carried it out, see ``set_outcome``); a
        checkpoint request that failed (or cannot work) is no longer pending: it will not be
        acknowledged, and it is not a timeout either."""
        rec = self._records.get(key)
        if rec is None or not set_outcome(rec, request_id, outcome, detail=detail, at=at):
            return False
        if outcome in ("failed", "impossible") and rec.checkpoint.pending_request == request_id:
            rec.checkpoint = dataclasses.replace(rec.checkpoint, pending_request=None, pending_since=None)
        return True

    # ------------------------------------------------------------------------------ bookkeeping
    def record(self, key: str) -> JobRecord | None:
        return self._records.get(key)

    def keys(self) -> tuple[str, ...]:
        return tuple(self._records)

    @property
    def retired_runtime_evidence(self) -> dict[str, tuple[int, int]]:
        """``runtime -> (saves, misses)`` on SIGTERM of the jobs forgotten so far (deleted jobs,
        whose own records are gone): what an adapter persists so that a restart keeps it."""
        return self._runtime.retired

    def adopt_retired_evidence(self, evidence: Mapping[str, Any]) -> int:
        """Take persisted forgotten-job evidence (a restart); see ``RuntimeSigtermPool.adopt``."""
        return self._runtime.adopt(evidence)

    @property
    def retired_version(self) -> int:
        """Grows whenever the forgotten jobs' evidence (counts, save windows) changes."""
        return self._runtime.retired_version

    @property
    def retired_save_windows(self) -> dict[str, list[list[float]]]:
        """``runtime -> [[gpus, step s, save s], ...]`` the forgotten jobs measured (persisted by
        an adapter beside the counts)."""
        return self._runtime.retired_windows

    def adopt_retired_windows(self, windows: Mapping[str, Any]) -> int:
        """Take persisted forgotten-job save windows; see ``RuntimeSigtermPool.adopt_windows``."""
        return self._runtime.adopt_windows(windows)

    def forget(self, key: str) -> None:
        rec = self._records.pop(key, None)
        if rec is not None:
            self._runtime.retire(rec)
        self._runtime.invalidate()

    def dump(self, key: str) -> dict[str, Any]:
        """JSON-safe state of one job, for ``TrainJobForecast.status`` or a report."""
        rec = self._records.get(key)
        return {} if rec is None else record_to_dict(rec)

    def restore(self, key: str, data: Mapping[str, Any]) -> JobRecord:
        """Adopt persisted state (after a controller restart). Damaged parts are dropped, not fatal."""
        rec = record_from_dict(data, max_points=self.max_history_points)
        self._runtime.invalidate()
        self._records[key] = rec
        return rec


def _with_note(warnings: tuple[str, ...], note: str | None) -> tuple[str, ...]:
    """The latest report's warnings, and what the history says of the reports it left out."""
    return warnings if note is None else (*warnings, note)
