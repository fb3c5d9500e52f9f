"""Plateau: stop burning quota on a run that no longer learns.

Fires when the forecast's ``plateau_probability`` has stayed at or above the threshold for the
whole ``for`` window (the window restarts whenever the probability dips or the forecast is too weak
to trust), then recommends, or checkpoints and releases the quota, or stops, per policy.
"""

from __future__ import annotations

from advisor.model import ActionKind
from policies.rules.base import Context, Outcome, dur, held_since, pct
from policies.rules.release import release
from policies.spec import RECOMMEND, STOP, PlateauRule

NAME = "plateau"
KEY = "plateau.since"


def evaluate(ctx: Context, rule: PlateauRule) -> Outcome:
    out = Outcome()
    job, fc = ctx.job, ctx.forecast
    if not ctx.judge:
        return out
    if fc is None:
        out.reasons.append(f"{NAME}: no judgement ({ctx.forecast_reason})")
        return out
    if job.total_steps is not None and job.step >= job.total_steps:
        return out  # finished: nothing left to save
    p = fc.plateau_probability
    since = held_since(job.rule_state, KEY, ctx.now, p >= rule.probability)
    if since is None:
        return out
    out.state[KEY] = since
    held = ctx.now - since
    numbers = f"P(plateau)={pct(p)} >= {pct(rule.probability)} for {dur(held)}"
    if fc.current_loss is not None:
        numbers += f", loss {fc.current_loss:.4g} → {fc.final_loss.mean:.4g} predicted at the end"
    if held < rule.hold:
        out.reasons.append(f"{NAME}: {numbers} (acting after {dur(rule.hold)})")
        out.recheck(since + rule.hold)
        out.advice, out.severity = "plateau?", 2
        return out
    if rule.action == RECOMMEND:
        out.act(
            ActionKind.RECOMMEND,
            NAME,
            f"plateaued: {numbers}; consider stopping or releasing quota",
            would="none",
        )
        out.advice, out.severity = "plateau", 5
        return out
    final = ActionKind.STOP if rule.action == STOP else ActionKind.RELEASE_QUOTA
    release(ctx, out, rule=NAME, final=final, why=numbers, since=since)
    out.advice = "plateau:stop" if final is ActionKind.STOP else "plateau:release"
    out.severity = 5
    return out
