"""What a ``TrainJobForecast`` says: rendering the core's view of a job into the object's status.

Pure functions (no API calls) so that the status layout, the printer-column strings and the
run-state classification are unit-tested once and shared by the controller, ``status``,
``explain`` and the per-queue summary. The status keeps the persisted core state in
``status.coreState`` (``AdvisorCore.dump`` but its history, as one JSON string: a patch then
replaces it whole instead of merging stale keys; the model weights are a list for the same
reason), the bounded history in ``status.history`` (``History.to_dict`` columns, structured so
that ``ForecastStore`` can append new points instead of rewriting it) and the actuator's
unfinished actions in ``status.pendingActions`` (JSON too), separate from the human-facing
fields, so that a restart restores exactly what was written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from advisor.core.lifecycle import holds_quota
from advisor.core.wiring import NO_POLICY_HINT
from advisor.forecast.core import holds_trend
from advisor.model import (
    ActionKind,
    ActionRecord,
    Decision,
    EvalJudgement,
    Forecast,
    Interval,
    JobView,
    LearningState,
    Mode,
    Phase,
)

__all__ = [
    "DIVERGING_P",
    "PLATEAU_P",
    "STATES",
    "classify",
    "format_duration",
    "iso",
    "judged_forecast",
    "learning_state_dict",
    "render_status",
    "shows_eta",
]

#: lifecycle phases shown in STATE instead of a learning state when the job is not running
PHASES: tuple[str, ...] = tuple(p.value for p in Phase if p is not Phase.RUNNING)
#: run states shown by ``status --by queue`` and exported per queue
STATES: tuple[str, ...] = (
    "learning",
    "plateaued",
    "overfitting",
    "hung",
    "diverging",
    "near-completion",
    "unknown",
    *PHASES,
)
PLATEAU_P = 0.5
DIVERGING_P = 0.5
#: a run whose step has not advanced for this long (and at least 10 sample intervals) counts as hung
HUNG_AFTER_S = 900.0
NEAR_COMPLETION_PERCENT = 90.0
#: how many action records the human-facing status lists (the core keeps its own bounded log)
MAX_LISTED_ACTIONS = 20


#: the longest warning a status carries (a status is read in a terminal; a long one is clipped)
WARNING_CHARS = 200


def _clipped(text: str) -> str:
    """``text`` within ``WARNING_CHARS``, cut at a word and marked with an ellipsis: a warning cut
    mid-word read as the whole of it ("reads the run as it stood before ")."""
    if len(text) <= WARNING_CHARS:
        return text
    cut = text[: WARNING_CHARS - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > WARNING_CHARS // 2 else cut).rstrip(" ,;:") + "…"


def iso(ts: float | None) -> str | None:
    if ts is None or not math.isfinite(ts):
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(seconds: float | None) -> str:
    """Compact kubectl-style duration: 45s, 13m, 2h5m, 3d4h; '-' when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h}h{m}m" if m else f"{h}h"
    d, h = divmod(s // 3600, 24)
    return f"{d}d{h}h" if h else f"{d}d"


def _num(value: float | None, digits: int = 6) -> float | None:
    if value is None:
        return None
    value = float(value)
    return round(value, digits) if math.isfinite(value) else None


def _interval(iv: Interval | None) -> dict[str, float | None] | None:
    if iv is None:
        return None
    return {"mean": _num(iv.mean), "p10": _num(iv.p10), "p90": _num(iv.p90)}


def percent(view: JobView) -> float | None:
    if view.total_steps and view.total_steps > 0:
        return max(0.0, min(100.0, 100.0 * view.step / view.total_steps))
    return None


#: the governing policy's verdicts that name a run state: STATE never contradicts ADVICE (a
#: policy's stall rule may act on a shorter silence than the learning state calls hung)
_ADVICE_STATES = ("hung", "diverging")


def classify(
    view: JobView, *, now: float, hung_after_s: float = HUNG_AFTER_S, decision: Decision | None = None
) -> str:
    """One word for where a run stands (the GPU-as-a-service view): the lifecycle phase of a job
    that is not running (finished, failed, suspended, pending), else how its learning goes, or
    the governing policy's verdict when it names a state (``decision``)."""
    if view.phase is not Phase.RUNNING:
        return view.phase.value
    # ("hung:failed": the policy's release was refused; the run is still hung)
    named = decision.advice.split(":", 1)[0] if decision is not None else None
    if named in _ADVICE_STATES:
        return str(named)
    fc = view.forecast
    pct = percent(view)
    # silence is counted from the later of the last step and this admission: a run resumed after a
    # release (or re-admitted after a preemption) has not advanced since its eviction, and read
    # "hung" from the second it was admitted again (its Workload counted among the GPUs not learning)
    silent_since = view.last_step_change
    if silent_since is not None and view.admitted_at is not None:
        silent_since = max(silent_since, view.admitted_at)
    if silent_since is not None and view.active and now - silent_since > hung_after_s:
        return "hung"
    if view.learning_state is not None:
        # the run-level judgement from all its series (advisor.forecast.state), the same one the
        # policies and the simulator read (of its eval series alone for a job that reports no
        # training loss)
        return view.learning_state.label
    if fc is None:
        return "near-completion" if pct is not None and pct >= NEAR_COMPLETION_PERCENT else "unknown"
    if fc.divergence_probability >= DIVERGING_P:
        return "diverging"
    if (pct is not None and pct >= NEAR_COMPLETION_PERCENT) or (
        fc.eta_seconds is not None and fc.eta_seconds.p90 <= 3600.0
    ):
        return "near-completion"
    if fc.plateau_probability >= PLATEAU_P:
        return "plateaued"
    return "learning"


def judged_forecast(view: JobView) -> tuple[str, Forecast | None]:
    """The series the run is judged by and its forecast: the eval metric the learning state
    judged (a fine-tune's ``eval_loss``), else the training loss. The LOSS and PLATEAU columns,
    ``compare`` and the predicted-final metric show this one, so that a run whose eval loss rises
    under a falling training loss is not shown as still improving."""
    judged = view.learning_state.judged() if view.learning_state is not None else None
    return judged if judged is not None else ("loss", view.forecast)


def shows_eta(state: str) -> bool:
    """Whether a run in ``state`` has an ETA worth showing: it runs and its step advances."""
    return state != "hung" and state not in PHASES


def _loss_text(name: str, fc: Forecast | None) -> str:
    """``0.412±0.03`` for the training loss; ``eval_loss 0.92±0.05`` for an eval metric."""
    if fc is None or not math.isfinite(fc.final_loss.mean):
        return "-"
    half = (fc.final_loss.p90 - fc.final_loss.p10) / 2.0
    text = f"{fc.final_loss.mean:.4g}±{half:.2g}" if math.isfinite(half) else f"{fc.final_loss.mean:.4g}"
    return text if name == "loss" else f"{name} {text}"


def _plateau_text(fc: Forecast | None) -> str:
    """P(plateau) as a percentage; ``-`` without a usable forecast (no finite point, or fewer
    points than hold a trend: its 50% is the forecaster's "don't know", not a finding, as
    ``forecast FILE`` prints ``n/a``)."""
    if fc is None or not math.isfinite(fc.final_loss.mean) or not holds_trend(fc):
        return "-"
    return f"{fc.plateau_probability * 100:.0f}%"


def _action_dict(rec: ActionRecord) -> dict[str, Any]:
    return {
        "kind": rec.kind.value,
        "time": iso(rec.time),
        "requestId": rec.request_id,
        "policy": rec.policy,
        "rule": rec.rule,
        "outcome": rec.outcome,
        "reason": rec.reason,
        # why it failed, was impossible or was dropped ("not carried out after the restart: ...")
        **({"detail": rec.detail[:300]} if rec.detail else {}),
    }


def learning_state_dict(state: LearningState | None) -> dict[str, Any] | None:
    """The run's learning state for the status (and ``explain``): label, probabilities, the eval
    series judged and its best step, and a compact forecast of every eval series."""
    if state is None:
        return None
    return {
        "label": state.label,
        "probabilities": {k: _num(v, 4) for k, v in state.probabilities.items()},
        "metric": state.metric,
        **({"taskMetric": state.task_metric} if state.task_metric else {}),
        "bestStep": state.best_step,
        **({"bestMadeAfter": state.best_made_after} if state.best_made_after is not None else {}),
        "bestValue": _num(state.best_value),
        "evalsSinceBest": state.evals_since_best,
        "bestNoise": _num(state.best_noise),
        "bestTrend": _num(state.best_trend),
        "bestTrendSd": _num(state.best_trend_sd),
        "series": {
            name: {
                "final": _interval(fc.final_loss),
                "current": _num(fc.current_loss),
                "plateauProbability": _num(fc.plateau_probability, 4),
                "points": fc.n_points,
                "lastStep": fc.last_step,
                "direction": state.directions.get(name),
                **_judgement_dict(state.judgements.get(name)),
            }
            for name, fc in list(state.series.items())[:16]
        },
        "warnings": [_clipped(str(w)) for w in state.warnings[:10]],
    }


def _judgement_dict(j: EvalJudgement | None) -> dict[str, Any]:
    """An eval series judged on its own: its best so far and P(overfitting) by it, what a rule
    naming that metric reads (and ``policy explain`` reads back from a pasted status)."""
    if j is None:
        return {}
    return {
        "bestStep": j.best_step,
        **({"bestMadeAfter": j.best_made_after} if j.best_made_after is not None else {}),
        "bestValue": _num(j.best_value),
        "evalsSinceBest": j.evals_since_best,
        "overfittingProbability": _num(j.overfitting, 4),
    }


def forecast_dict(fc: Forecast | None, *, at: float | None = None) -> dict[str, Any] | None:
    if fc is None:
        return None
    return {
        "finalLoss": _interval(fc.final_loss),
        "plateauProbability": _num(fc.plateau_probability, 4),
        "divergenceProbability": _num(fc.divergence_probability, 4),
        "etaSeconds": _interval(fc.eta_seconds),
        "stepsPerSecond": _num(fc.steps_per_second),
        "currentLoss": _num(fc.current_loss),
        "model": [
            {"name": str(k), "weight": _num(v, 4)} for k, v in sorted(fc.model.items(), key=lambda kv: -kv[1])
        ],
        "warnings": [_clipped(str(w)) for w in fc.warnings[:20]],
        "points": fc.n_points,
        "dropped": fc.n_dropped,
        "updatedAt": iso(at),
    }


#: the no-policy hint for a run state the forecast's own hint does not name
_STATE_HINTS = {
    "hung": "hung?",
    "overfitting": "overfitting?",
    "plateaued": "plateau?",
    "diverging": "diverging?",
}


def _advice_text(advice: str, decision: Decision | None, state: str) -> str:
    """ADVICE: the decision's advice, said as a recommendation when its policy recommends only
    (``overfitting:release (recommended)``): a Recommend policy's ``overfitting:release`` invited
    "why was it not released?"; ``status.recommendation.advice`` keeps the bare word."""
    text = advice or state
    if decision is not None and decision.policy is None and advice == "learning" and state in _STATE_HINTS:
        # no policy, and the forecast's hint says learning while STATE says otherwise (a hung job
        # read ADVICE "learning" beside STATE "hung"): the state's hint, as no policy's
        text = _STATE_HINTS[state] + NO_POLICY_HINT
    if (
        decision is not None
        and decision.mode is Mode.RECOMMEND
        and ":" in advice
        and not advice.endswith(":held")
        and not advice.startswith("scaled:")  # a resize done before the policy recommended only
    ):
        text = f"{advice} (recommended)"
    elif decision is not None and decision.mode is Mode.RECOMMEND and advice in _ADVICE_STATES:
        # the stall and divergence rules' advice is the state alone ("hung", "diverging"), the
        # same word in Apply right before the release: said as the plateau rule's is, with what
        # Apply would do (a hung run's "hung" read alike whether a release was recommended or not)
        verb = _would_verb(decision)
        if verb is not None:
            text = f"{advice}:{verb} (recommended)"
    return text[:80]


def _would_verb(decision: Decision) -> str | None:
    """``release`` or ``stop``: what Apply would end with, as a Recommend decision's stall or
    divergence recommendation says (``would``: the release, or the checkpoint before it)."""
    for action in decision.actions:
        if action.kind is not ActionKind.RECOMMEND or action.rule not in ("stall", "divergence"):
            continue
        would = action.params.get("would")
        if would == ActionKind.STOP.value:
            return "stop"
        if would in (ActionKind.RELEASE_QUOTA.value, ActionKind.CHECKPOINT.value):
            return "release"
    return None


def render_status(
    view: JobView,
    decision: Decision | None,
    *,
    now: float,
    core_state: str | None = None,
    history: Mapping[str, Any] | None = None,
    pending_actions: Mapping[str, Any] | None = None,
    forecast_at: float | None = None,
    hung_after_s: float = HUNG_AFTER_S,
) -> dict[str, Any]:
    """The full ``TrainJobForecast.status`` for one job."""
    fc = view.forecast
    judged, judged_fc = judged_forecast(view)
    pct = percent(view)
    state = classify(view, now=now, hung_after_s=hung_after_s, decision=decision)
    advice = (decision.advice if decision else "") or ""
    throughput = [{"nodes": int(n), "stepsPerSecond": _num(v)} for n, v in view.throughput]
    ck = view.checkpoint
    return {
        "observedAt": iso(now),
        "lastSampleTime": iso(view.last_sample_time),
        "lastStepChange": iso(view.last_step_change),
        "state": state,
        "job": {
            "kind": view.kind,
            "name": view.name,
            "queueName": view.queue_name,
            "clusterQueue": view.cluster_queue,
            "gpus": view.gpus,
            "nodes": view.nodes,
            "active": view.active,
            "admitted": view.admitted,
            "phase": view.phase.value,
            "phaseReason": view.phase_reason,
            "phaseSince": iso(view.phase_since),
            "holdsQuota": holds_quota(view.phase, view.signals, active=view.active, admitted=view.admitted),
        },
        "progress": {
            "step": view.step,
            "totalSteps": view.total_steps,
            "percent": None if pct is None else round(pct, 2),
            # what the latest report held that could not be read (a loss written as a tensor's
            # repr): the run may advance while its forecast cannot
            "warnings": [_clipped(str(w)) for w in view.progress_warnings[:5]],
        },
        "throughput": {"stepsPerSecond": _num(fc.steps_per_second) if fc else None, "byNodes": throughput},
        "forecast": forecast_dict(fc, at=forecast_at),
        "learningState": learning_state_dict(view.learning_state),
        "recommendation": {
            "policy": decision.policy if decision else None,
            "mode": decision.mode.value if decision else None,
            "advice": advice,
            "reasons": list(decision.reasons) if decision else [],
            "tiedWith": list(decision.tied_with) if decision else [],
            "actions": [
                {"kind": a.kind.value, "rule": a.rule, "reason": a.reason}
                for a in ((*decision.actions, *decision.cleanup) if decision else ())
            ],
        },
        "checkpoint": {
            "lastStep": ck.last_step,
            "lastTime": iso(ck.last_time),
            "costSeconds": _num(ck.cost_seconds),
            "pendingRequest": ck.pending_request,
            "pendingSince": iso(ck.pending_since),
        },
        "actions": [_action_dict(r) for r in view.actions[-MAX_LISTED_ACTIONS:]],
        "summary": {
            "progress": "-" if pct is None else f"{pct:.0f}%",
            # a hung run's ETA is the one forecast before its step stopped, a stale one's the
            # one before its progress stopped arriving, and a job that does not run has none:
            # none is shown as if it held
            "eta": format_duration(fc.eta_seconds.mean)
            if fc and fc.eta_seconds and shows_eta(state) and advice != "stale"
            else "-",
            "loss": _loss_text(judged, judged_fc),
            "plateau": _plateau_text(judged_fc),
            "advice": _advice_text(advice, decision, state),
        },
        "pendingActions": json.dumps(dict(pending_actions or {}), sort_keys=True, separators=(",", ":")),
        "coreState": core_state,
        "history": dict(history) if history is not None else None,
    }
