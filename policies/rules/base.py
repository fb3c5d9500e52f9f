"""The one interface every rule implements, and the helpers they share.

A rule is a function ``evaluate(ctx, rule_spec) -> Outcome``: it reads the frozen ``Context``
(job, cluster, policy, ``now``, the gates the engine already computed) and returns the actions it
proposes in their *Apply* form, the reasons with their numbers, the state keys it wants to keep
(e.g. when its condition first held) and an advice label. The engine (``policies.engine``) merges
the outcomes, applies Recommend mode, cooldowns and caps, and builds the ``Decision``: rules never
see each other and never see the mode except through ``ctx.apply``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisor.model import (
    DISRUPTIVE_KINDS,
    Action,
    ActionKind,
    ActionRecord,
    ClusterView,
    Forecast,
    JobView,
    LearningState,
)
from advisor.series import TRAIN_SERIES, direction_of, eval_series_name, is_eval_name
from policies.fields import format_duration
from policies.index import cluster_index
from policies.spec import Policy
from policies.spec_rules import OverfittingRule, PlateauRule

__all__ = [
    "DISRUPTIVE",
    "NO_DIRECTION",
    "Context",
    "Outcome",
    "admitted_at",
    "ends_within",
    "held_since",
    "last_record",
    "let_finish",
    "overfitting_odds",
    "pct",
    "propose_scale",
    "runtime_gate",
    "series_rules",
    "task_still_improving",
    "undirected",
    "undirected_metrics",
    "unsaved_since",
]

#: kinds that cooldowns and caps govern (one definition, shared with the core loop's cap count)
DISRUPTIVE = DISRUPTIVE_KINDS


@dataclass(frozen=True, slots=True)
class Context:
    job: JobView
    cluster: ClusterView
    policy: Policy
    now: float
    apply: bool
    judge: bool
    """Minimum runtime/progress reached: rules that judge learning may speak."""
    judge_reason: str
    forecast: Forecast | None
    """The job's forecast when strong enough to act on, else None."""
    forecast_reason: str
    blocked: str | None
    """Why disruptive actions may not start now (cooldown or cap), or None."""


class Outcome:
    """What one rule proposes (a plain slotted class: one is built per rule per decision)."""

    __slots__ = (
        "actions",
        "advice",
        "idle_recheck_at",
        "reasons",
        "recheck_at",
        "severity",
        "state",
        "terminal",
    )

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self.reasons: list[str] = []
        self.state: dict[str, float] = {}
        self.advice = ""
        #: which advice wins in the printer column (higher wins)
        self.severity = 0
        #: the rule started or continues releasing/stopping the job: other rules' growth is moot
        self.terminal = False
        #: when this rule's verdict may change with no new data (see ``Decision.recheck_at``)
        self.recheck_at: float | None = None
        #: when to look again if the job makes no progress before (see ``Decision.idle_recheck_at``)
        self.idle_recheck_at: float | None = None

    def recheck(self, when: float) -> None:
        """Ask to be evaluated again by ``when`` (the earliest of several requests wins)."""
        if math.isfinite(when) and (self.recheck_at is None or when < self.recheck_at):
            self.recheck_at = when

    def watchdog(self, when: float) -> None:
        """Ask to be evaluated again by ``when`` unless the job progresses first (see
        ``Decision.idle_recheck_at``)."""
        if math.isfinite(when) and (self.idle_recheck_at is None or when < self.idle_recheck_at):
            self.idle_recheck_at = when

    def act(self, kind: ActionKind, rule: str, reason: str, **params: Any) -> None:
        self.actions.append(Action(kind=kind, rule=rule, reason=reason, params=params))


def propose_scale(out: Outcome, ctx: Context, rule: str, *, nodes: int, reason: str) -> None:
    """Propose resizing the job to ``nodes``: the real action in Apply mode when nothing holds it
    back, otherwise a recommendation saying what Apply would do (and what held it back)."""
    if ctx.blocked:
        out.act(
            ActionKind.RECOMMEND,
            rule,
            f"would {reason}; held back: {ctx.blocked}",
            would=ActionKind.SCALE.value,
            nodes=nodes,
            held=ctx.blocked,
        )
    elif not ctx.apply:
        out.act(ActionKind.RECOMMEND, rule, "would " + reason, would=ActionKind.SCALE.value, nodes=nodes)
    else:
        out.act(ActionKind.SCALE, rule, reason, nodes=nodes, from_nodes=ctx.job.nodes)


def ends_within(ctx: Context, seconds: float) -> float | None:
    """The run's expected time to its end (its forecast's ETA), when that is at most ``seconds``.

    Why: a run that will end within a rule's own ``for`` window frees its GPUs by itself before the
    rule could have confirmed its verdict again; releasing it instead gives back minutes, costs a
    checkpoint and a requeue, and leaves the run short of its end (its final save, evaluation and
    upload), so the rule lets it finish. Every run nearing its last step has "less than 1% left"."""
    fc = ctx.job.forecast
    eta = fc.eta_seconds if fc is not None else None
    if eta is None or not math.isfinite(eta.mean) or eta.mean < 0:
        return None
    return eta.mean if eta.mean <= seconds else None


def let_finish(ctx: Context, out: Outcome, rule: str, hold: float, numbers: str) -> bool:
    """When the run ends within the rule's window (``ends_within``): say so in ``out`` and return
    True, the rule then neither acts nor recommends."""
    left = ends_within(ctx, hold)
    if left is None:
        return False
    out.reasons.append(
        f"{rule}: {numbers}; the run ends in about {dur(left)}, within the rule's {dur(hold)} window: "
        "it is let finish"
    )
    out.advice, out.severity = "near-completion", 1
    return True


def new_evaluation(ctx: Context, out: Outcome, key: str, opened: bool, fc: Forecast | None) -> bool:
    """Whether ``fc``, the forecast of the eval series a rule's window judges, is of an evaluation
    after the one the window opened on; the step of that one is kept in ``out.state[key]``.

    Between two evaluations an eval series brings no new evidence, however often it is looked at,
    so a wall-time window alone could pass on a single evaluation: a rule judging an eval series
    acts only on an evaluation after the one its window opened on. A window found open without the
    key (state written before it existed) counts as opened on the current evaluation: it waits one
    evaluation more rather than acting on less evidence than it would now. Without the series'
    forecast, or one that does not say its last step (a status pasted from an older controller),
    evaluations cannot be told apart: True, nothing kept, the window alone decides."""
    if fc is None or fc.last_step is None or not math.isfinite(fc.last_step):
        return True
    current = float(fc.last_step)
    opened_on = ctx.job.rule_state.get(key, current) if opened else current
    out.state[key] = opened_on if math.isfinite(opened_on) else current
    return current > out.state[key]


def waiting_text(hold: float, series: str, waits_on: float | None) -> str:
    """What a rule's open window waits for: its ``for`` and, when the eval series it judges has
    brought no evaluation since the one the window opened on (``waits_on``, that step; None: a new
    one has come, or the series is the training loss), a later evaluation too, so that the reason
    does not promise an action at the window's end that the next evaluation still has to bring."""
    text = f"acting after {dur(hold)}"
    if waits_on is None or not math.isfinite(waits_on):
        return text
    return f"{text}, at an evaluation of {series} after step {waits_on:.0f}"


def held_since(state: Mapping[str, float], key: str, now: float, condition: bool) -> float | None:
    """When ``condition`` started holding without interruption (``None`` if it does not hold now)."""
    if not condition:
        return None
    since = state.get(key)
    if since is None or not math.isfinite(since) or since > now:
        return now
    return since


def admitted_at(ctx: Context) -> float | None:
    """When Kueue admitted the job's Workload this time: the adapter's ``JobView.admitted_at``, or,
    from an adapter that did not say, the job's Workload in the snapshot."""
    if ctx.job.admitted_at is not None:
        return ctx.job.admitted_at
    workload = cluster_index(ctx.cluster).by_job.get(ctx.job.key)
    return workload.admitted_at if workload is not None else None


def unsaved_since(ctx: Context) -> float | None:
    """Since when the job has work a checkpoint would save: the later of its last checkpoint and its
    current admission, else its start.

    Why the admission: a workload evicted and admitted again resumed from its last checkpoint, so
    it has nothing new to lose until it runs again. Counting from the checkpoint alone would ask
    it to save, the moment it restarts, the very state it has just loaded."""
    job = ctx.job
    refs = [t for t in (job.checkpoint.last_time, admitted_at(ctx)) if t is not None and t <= ctx.now]
    return max(refs) if refs else job.started_at


def last_record(
    job: JobView, kinds: frozenset[ActionKind] | set[ActionKind], *, rule: str | None = None
) -> ActionRecord | None:
    """The most recent action of those kinds (optionally by one rule) in the job's log."""
    best: ActionRecord | None = None
    for rec in job.actions:
        if (
            rec.kind in kinds
            and (rule is None or rec.rule == rule)
            and (best is None or rec.time >= best.time)
        ):
            best = rec
    return best


def pct(x: float) -> str:
    return f"{x:.2f}"


def dur(seconds: float) -> str:
    return format_duration(seconds)


#: why a rule's ``metric:`` whose name says no direction is never judged, and the remedy
NO_DIRECTION = (
    "its name says no direction (no part of it between '_' is a loss/error or an accuracy/score "
    "word: eval_my_score would read as higher-is-better); add it to spec.metricDirections as lower "
    "or higher"
)


def task_still_improving(state: LearningState | None, metric: str, series: str) -> tuple[str, float] | None:
    """(the task's score, its P(plateau)) when a rule judging by default (``metric`` empty) judges
    ``series``, an eval loss the run state reads beside its task's score, and the score is less
    surely stopped than ``series`` (``LearningState.task_metric``): the run has stopped learning
    only as far as its score has. A rule that names its metric judges that one alone."""
    if metric or state is None or state.task_metric is None or series != state.metric:
        return None
    task, own = state.series.get(state.task_metric), state.series.get(series)
    if task is None or own is None or task.plateau_probability >= own.plateau_probability:
        return None
    return state.task_metric, task.plateau_probability


def overfitting_odds(state: LearningState, metric: str, series: str, overfitting: float) -> float:
    """P(overfitting) of ``series`` as a rule judging by ``metric`` reads it: the series' own, in
    the share its task's score has stopped too when the run state reads the two together
    (``task_still_improving``): an eval loss turned up while the error rate still falls is the
    model growing over-confident, not worse."""
    task = task_still_improving(state, metric, series)
    own = state.series.get(series)
    if task is None or own is None or own.plateau_probability <= 0:
        return overfitting
    return overfitting * task[1] / own.plateau_probability


def undirected(metric: str, overrides: Mapping[str, str]) -> bool:
    """Whether a rule's ``metric:`` is an eval metric no one says the direction of (the job's
    history keeps only eval series with a direction, so such a rule never judges)."""
    from advisor.sources.normalize import canonical_name

    if not metric or metric == TRAIN_SERIES:
        return False
    canon = {eval_series_name(canonical_name(k)): v for k, v in overrides.items()}
    name = eval_series_name(canonical_name(metric))
    return direction_of(name, canon) is None


def series_rules(policy: Policy) -> list[tuple[str, PlateauRule | OverfittingRule]]:
    """(name, rule) of each rule of ``policy`` that judges a series it may name (``metric:``): the
    plateau and overfitting rules, those the policy has. The one list of them, for whatever reads
    what they judge (validation's warnings, the back-test's unreported metrics)."""
    rules = policy.rules
    named: tuple[tuple[str, PlateauRule | OverfittingRule | None], ...] = (
        ("plateau", rules.plateau),
        ("overfitting", rules.overfitting),
    )
    return [(name, rule) for name, rule in named if rule is not None]


def undirected_metrics(policy: Policy) -> list[tuple[str, str]]:
    """(field, metric) of each rule of ``policy`` whose ``metric:`` is never judged for want of a
    direction: ``policy validate`` warns of them (the policy is valid, the rule idle)."""
    return [
        (f"spec.rules.{name}.metric", rule.metric)
        for name, rule in series_rules(policy)
        if undirected(rule.metric, policy.metric_directions)
    ]


def direction_warnings(policy: Policy) -> list[tuple[str, str]]:
    """(field, why) of each ``spec.metricDirections`` entry that does not do what it may seem to:
    ``policy validate`` warns of them. A name that is no eval metric (``loss``) is never read:
    only the eval series a job reports are turned, and the training loss always improves
    downwards. One that turns an eval metric against the direction its name says (``eval_loss:
    higher``) is applied, as the field's description allows, and is most likely a slip: judged
    so, a run's best checkpoint is where its eval loss was highest."""
    from advisor.sources.normalize import canonical_name

    out: list[tuple[str, str]] = []
    for key, value in policy.metric_directions.items():
        field = f"spec.metricDirections.{key}"
        name = eval_series_name(canonical_name(key))
        implied = direction_of(name)
        if name == TRAIN_SERIES:
            why = "the training loss is no eval metric: ignored, it stays lower-is-better as its name says"
            out.append((field, why))
        elif not is_eval_name(name):
            out.append((field, f"{key} is no eval metric (eval_..., val_...): ignored"))
        elif implied is not None and implied.value != value:
            why = (
                f"{value} contradicts the direction its name says ({implied}): the override is applied, "
                f"{name} is judged {value}-is-better (remove it if that is not meant)"
            )
            out.append((field, why))
    return out


def runtime_gate(job: JobView, policy: Policy, now: float) -> str | None:
    """Why ``policy`` may not speak of ``job`` yet for want of runtime (``minRuntime``), or None.

    The one gate of the stall rule: a run that hangs before ``minSteps`` or ``minProgress`` (a
    collective stuck at start-up) never reaches them, and would hold its GPUs for good."""
    s = policy.safety
    if s.min_runtime > 0:
        if job.started_at is None:
            return "start time unknown"
        ran = now - job.started_at
        if ran < s.min_runtime:
            # counted from the job's start as the adapter has it (the controller: its creation,
            # queued and preempted time included), so not "ran"
            return f"started {dur(max(ran, 0.0))} ago < minRuntime {dur(s.min_runtime)}"
    return None
