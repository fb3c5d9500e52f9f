"""One real run replayed under one row of policies, through the path a controller takes.

Each logged point becomes one progress report (an evaluation logged at a step no loss was logged
at, one of its own at that step: ``_with_eval_reports``): rendered by the training helper's own Kubeflow
channel (the ``status.trainerStatus`` a TrainJob carries) and read back by
``advisor.sources.sample_from_object`` (``advisor.reported.read_back``, the one path the simulator's
reports take too), fed to ``AdvisorCore.observe`` and judged by
``AdvisorCore.evaluate`` with the policies, as the controller does on every watch event. Between two
reports a decision's ``recheck_at`` (a ``for:`` window ending, a checkpoint timeout) and, when the log
has a gap, its watchdog (``idle_recheck_at``) bring an evaluation of their own, as the controller's
timers do. Reports come no closer than the channel's throttle (``report_interval_s``, the SDK's 5 s).

What the replay cannot know is stated, never guessed: the run's planned steps are reported only when
its file has them; a checkpoint request is acknowledged by the next report (the helper saves between
two logs); there is no cluster around the run (no queue, no preemption, no cluster-wide action cap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ActionRecord, ClusterView, Decision, JobView, Phase
from advisor.reported import read_back
from advisor.training.report import Report

__all__ = ["EPOCH", "Outcome", "replay"]

#: the replay's clock starts here (epoch seconds), so that ``lastUpdatedTime`` reads as a real date
EPOCH = 1_700_000_000.0
_NAMESPACE = "backtest"
_STOPS = frozenset({ActionKind.RELEASE_QUOTA, ActionKind.STOP})
#: a decision's advice while a plateau or divergence window is open
_NEAR = frozenset({"plateau?", "diverging?"})


@dataclass(frozen=True)
class Outcome:
    """What a row did to one run: whether and when it ended it, and what it asked for on the way."""

    row: str
    run: str
    stopped: bool = False
    kind: str = ""  # release-quota | stop (empty: the run went on to its end)
    rule: str = ""
    #: the policy that governed the run: whose rule ended it, or, for a run left to its end, the
    #: one that selected it at its last look where one did (empty: none selected it, or a baseline)
    policy: str = ""
    reason: str = ""
    step: float | None = None
    time_s: float | None = None  # seconds after the run's first report
    checkpoints: int = 0  # checkpoint requests
    actions: int = 0  # every mutating action asked for
    #: a policy judged the run at some look (False: the run was over before its policy's
    #: ``minRuntime`` / ``minSteps`` / ``minProgress`` let it judge); baselines judge every run
    judged: bool = True
    #: a policy selected the run at some look (False: none of the row's policies selected it, so
    #: none judged it, whatever its minRuntime)
    selected: bool = True


def _report_indices(times: np.ndarray, min_gap_s: float) -> list[int]:
    """The points the channel would have sent: none closer than ``min_gap_s`` after the last one
    sent, and always the last point."""
    out: list[int] = []
    last = -np.inf
    for i, t in enumerate(times.tolist()):
        if t - last >= min_gap_s:
            out.append(i)
            last = t
    if out[-1] != len(times) - 1:
        out.append(len(times) - 1)
    return out


@dataclass(frozen=True)
class _Sent:
    """One progress report the replay sends: at ``step``, ``time`` seconds after the run's first
    report, of training point ``i`` (None: an evaluation logged at a step no loss was logged at)."""

    time: float
    step: float
    i: int | None


def _with_eval_reports(run: Any, idx: list[int], ev_steps: np.ndarray) -> list[_Sent]:
    """The reports sent (training points ``idx``), plus one at each evaluation: a trainer logs its
    eval metrics at the step it evaluated (HF's ``evaluate``, Lightning's validation loop), and the
    progress carries the eval with that step, not the step of whichever report follows it (the
    best-checkpoint step named would be one the log never evaluated at, 4,699 for Lightning's
    validation at 4,679), and two evals between reports are both seen. An eval at a step a loss was
    logged at rides with that training point's report; one between two (Lightning validates
    between its every-50-steps loss logs) is a report of its own, of the eval metrics alone, at its
    step and at the time the run reached it: the ``trainerStatus`` format has no field for an eval's
    own step (``current_step`` is the only step it carries), and a loss repeated there would be a
    point the log does not hold."""
    steps = run.steps
    sent = [_Sent(float(run.times[i]), float(steps[i]), i) for i in idx]
    if ev_steps.size == 0 or steps.size == 0 or np.any(np.diff(steps) < 0):
        return sent
    at = np.searchsorted(steps, ev_steps, side="left")  # the first training point at or after each
    inside = at < steps.size
    exact = np.zeros(ev_steps.size, dtype=bool)
    exact[inside] = steps[at[inside]] == ev_steps[inside]
    known = {int(i) for i in idx}
    sent += [_Sent(float(run.times[i]), float(steps[i]), int(i)) for i in set(at[exact].tolist()) - known]
    sent += [_Sent(run.time_at(float(s)), float(s), None) for s in np.unique(ev_steps[~exact])]
    return sorted(sent, key=lambda r: r.step)


class _Replay:
    def __init__(self, row: str, core: AdvisorCore, run: Any, planned_steps: int | None) -> None:
        self.row, self.core, self.run = row, core, run
        self.key = f"{_NAMESPACE}/{run.name}"
        self.planned = planned_steps
        self.view = JobView(
            namespace=_NAMESPACE,
            name=run.name,
            kind="TrainJob",
            labels=dict(run.labels),
            gpus=run.gpus,
            admitted=True,
            active=True,
            started_at=EPOCH,
            admitted_at=EPOCH,
        )
        self.cluster = ClusterView()
        self.requests = 0
        self.ack: tuple[int, str] | None = None  # the checkpoint the next report acknowledges
        self.acked: tuple[int, str] | None = None  # the latest acknowledged (sticky in reports)
        self.checkpoints = 0
        self.actions = 0
        self.step = 0.0
        self.near = False
        #: a look at which the governing policy judged the run (``Outcome.judged``)
        self.judged = False
        #: a look at which a policy selected the run (``Outcome.selected``)
        self.selected = False
        #: the policy that selected the run at the latest look where one did (``Outcome.policy``)
        self.governed_by = ""

    def report(self, sent: _Sent, evals: dict[str, float]) -> Report:
        run, i = self.run, sent.i
        # a log of eval metrics alone reports them alone (below), as its trainer did: no training
        # loss; so does an evaluation between two loss logs (``_with_eval_reports``)
        metrics = {"loss": float(run.values[i])} if run.metric == "loss" and i is not None else {}
        if i is not None and run.learning_rates is not None and np.isfinite(run.learning_rates[i]):
            metrics["learning_rate"] = float(run.learning_rates[i])
        metrics.update(evals)
        if self.ack is not None:
            self.acked, self.ack = self.ack, None
        epoch = None
        if i is not None and run.epochs is not None and np.isfinite(run.epochs[i]):
            epoch = float(run.epochs[i])
        return Report(
            time=EPOCH + sent.time,
            step=int(sent.step),
            total_steps=self.planned,
            epoch=epoch,
            metrics=metrics,
            last_checkpoint_step=None if self.acked is None else self.acked[0],
            last_checkpoint_request=None if self.acked is None else self.acked[1],
            # the metric its trainer keeps its best model by, as the training helper reports it
            judged_by=run.declared_metric,
        )

    def act(self, decision: Decision, now: float) -> Outcome | None:
        for action in decision.actions:
            if action.kind is ActionKind.RECOMMEND:
                continue
            self.requests += 1
            self.actions += 1
            request = str(self.requests)
            self.core.record_action(
                self.key,
                ActionRecord.requested(action, policy=decision.policy or "", request_id=request, now=now),
            )
            if action.kind is ActionKind.CHECKPOINT:
                self.checkpoints += 1
                self.ack = (int(self.step), request)
                continue
            self.core.update_action(self.key, request, "done")
            if action.kind in _STOPS:
                return self._stopped(decision, action, now)
        return None

    def _stopped(self, decision: Decision, action: Action, now: float) -> Outcome:
        return Outcome(
            row=self.row,
            run=self.run.name,
            stopped=True,
            kind=action.kind.value,
            rule=action.rule,
            policy=decision.policy or "",
            reason=action.reason,
            step=self.step,
            time_s=now - EPOCH,
            checkpoints=self.checkpoints,
            actions=self.actions,
        )

    def evaluate(self, now: float) -> tuple[Decision, Outcome | None]:
        # near a decision (a for: window open) the job is re-forecast at the plain interval even
        # when its quiet spacing is a share of its run, as the simulator's watch does
        near = (self.near and self.core.forecast_interval_s) or None
        decision = self.core.evaluate(self.view, self.cluster, now=now, forecast_interval_s=near)
        self.near = decision.advice in _NEAR
        self.judged = self.judged or decision.judged
        self.selected = self.selected or decision.policy is not None
        self.governed_by = decision.policy or self.governed_by
        return decision, self.act(decision, now)


def replay(
    row: str,
    core: AdvisorCore,
    run: Any,
    *,
    report_interval_s: float = 5.0,
    planned_steps: int | None = None,
) -> Outcome:
    """Replay ``run`` (``advisor.backtest.runs.Run``) under ``core``'s policies; the core forgets the
    run afterwards. ``planned_steps``: what the run reports as its total steps (None: not reported)."""
    r = _Replay(row, core, run, planned_steps)
    evals = _eval_series(run)
    every_eval = np.concatenate([steps for _, steps, _ in evals]) if evals else np.empty(0)
    sends = _with_eval_reports(run, _report_indices(run.times, report_interval_s), np.sort(every_eval))
    ev_next = [0] * len(evals)
    judged: Decision | None = None
    try:
        for n, sent in enumerate(sends):
            now = EPOCH + sent.time
            step = sent.step
            reported: dict[str, float] = {}
            last = n + 1 == len(sends)  # the run's last report carries the evaluations after it too
            for k, (name, ev_steps, ev_values) in enumerate(evals):
                while ev_next[k] < ev_steps.size and (last or ev_steps[ev_next[k]] <= step):
                    reported[name] = float(ev_values[ev_next[k]])
                    ev_next[k] += 1
            sample = read_back(r.report(sent, reported), name=run.name, namespace=_NAMESPACE, now=now)
            if sample is None:
                continue
            r.step = step
            core.observe(r.key, sample, now=now, nodes=1)
            if r.acked is not None:
                core.update_action(r.key, r.acked[1], "acknowledged")
            decision, out = r.evaluate(now)
            if out is not None:
                return out
            rec = core.record(r.key)
            if judged is None or (rec is not None and rec.phase is Phase.RUNNING):
                judged = decision  # not the finished run's looks: nothing is judged there
            # the controller's timers between this report and the next
            until = EPOCH + sends[n + 1].time if n + 1 < len(sends) else now
            for _ in range(8):
                due = [t for t in (decision.recheck_at, decision.idle_recheck_at) if t is not None]
                due = [t for t in due if now < t < until]
                if not due:
                    break
                now = min(due)
                decision, out = r.evaluate(now)
                if out is not None:
                    return out
        return Outcome(
            row=row,
            run=run.name,
            policy=r.governed_by,
            reason=_why_not(judged),
            checkpoints=r.checkpoints,
            actions=r.actions,
            judged=r.judged,
            selected=r.selected,
        )
    finally:
        core.forget(r.key)


def _eval_series(run: Any) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every eval series the run logged, (name, steps, values), the judged one first: each is
    reported as the trainer reported it, by its own name."""
    if run.eval_steps is None or run.eval_values is None:
        return []
    return [(run.eval_metric, run.eval_steps, run.eval_values), *run.other_evals]


def _why_not(decision: Decision | None) -> str:
    """Why a run went on to its end: the judgement at its last look (the rules' own words)."""
    if decision is None:
        return "no usable report"
    said = "; ".join(decision.reasons[:3]) or f"advice {decision.advice or 'none'}"
    return f"ran to its end; at the last look: {said}"


def new_core(policies: Sequence[Any], forecast_interval_s: float, run_fraction: float = 0.0) -> AdvisorCore:
    """A core loop for one row: a forecast only when a policy would read it (lazy), at most every
    ``forecast_interval_s`` and, for a quiet run whose planned steps are known, every
    ``run_fraction`` of its expected run (the core's ``forecast_run_fraction``)."""
    return AdvisorCore(
        [p.applied() for p in policies],
        forecast_interval_s=forecast_interval_s,
        forecast_run_fraction=run_fraction,
        lazy_forecast=True,
    )
