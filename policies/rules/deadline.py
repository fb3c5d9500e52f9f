"""Deadline: warn when the pessimistic completion time (now + ETA p90) is past the deadline.

The deadline comes from the job's annotation (RFC 3339 or epoch seconds) or, failing that, from
the policy's ``maxRuntime`` after the job's start. With ``scaleUp`` and an elastic rule, it asks
for the smallest node count whose predicted speed-up meets the deadline, when quota allows.
"""

from __future__ import annotations

import datetime as dt

from advisor.model import ActionKind
from policies.rules import elastic
from policies.rules.base import Context, Outcome, dur, propose_scale
from policies.spec import DeadlineRule

NAME = "deadline"


def parse_deadline(text: str) -> float | None:
    """Epoch seconds from an RFC 3339 timestamp or a number; ``None`` when unparseable."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def evaluate(ctx: Context, rule: DeadlineRule) -> Outcome:
    out = Outcome()
    job, fc = ctx.job, ctx.forecast
    if not ctx.judge:
        return out
    raw = job.annotations.get(rule.annotation)
    deadline: float | None = None
    source = ""
    if raw is not None:
        deadline = parse_deadline(raw)
        if deadline is None:
            out.reasons.append(f"{NAME}: annotation {rule.annotation}={raw!r} is not a time; ignored")
        source = f"annotation {rule.annotation}"
    if deadline is None and rule.max_runtime is not None and job.started_at is not None:
        deadline, source = (
            job.started_at + rule.max_runtime,
            f"maxRuntime {dur(rule.max_runtime)} after start",
        )
    if deadline is None:
        return out
    if fc is None or fc.eta_seconds is None:
        why = ctx.forecast_reason if fc is None else "the forecast has no ETA"
        out.reasons.append(f"{NAME}: deadline known ({source}) but no judgement: {why}")
        return out
    eta = fc.eta_seconds.p90
    finish = ctx.now + eta
    left = deadline - rule.margin - ctx.now
    if finish <= deadline - rule.margin:
        return out
    late = finish - deadline
    numbers = (
        f"ETA p90 {dur(eta)} ends {dur(late)} {'after' if late >= 0 else 'before'} the deadline "
        f"({source}, margin {dur(rule.margin)})"
    )
    out.advice, out.severity = "deadline-miss", 3
    spec = ctx.policy.rules.elastic
    if rule.scale_up and spec is not None and left > 0:
        target, why = elastic.grow_target(ctx, spec, need_factor=eta / left)
        if target > job.nodes and "not enough" not in why:
            out.advice, out.severity = f"scale-up:{target}", 4
            reason = f"scale up {job.nodes} → {target} nodes to meet the deadline: {numbers}; {why}"
            propose_scale(out, ctx, NAME, nodes=target, reason=reason)
            return out
        numbers += f"; scaling cannot fix it: {why}"
    out.act(ActionKind.RECOMMEND, NAME, f"will likely miss its deadline: {numbers}", would="none")
    return out
