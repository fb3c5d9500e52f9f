"""Divergence: a non-finite loss, or a loss rising away, gets released or stopped, without a save.

A NaN/inf loss is a fact, not a forecast: ``NON_FINITE_REPORTS`` of them in a row act at once
(after the policy's minimum runtime, since mixed-precision runs report inf losses while their loss
scale settles). One alone is not enough: a mixed-precision run reports a non-finite loss
for a step whose gradients overflowed, skips it, halves its loss scale and carries on, so one such
report mid-run is no divergence (a back-test released a run still learning 3.1% on the one NaN it
logged at step 1,500, its next report finite); a run that diverged reports nothing else ever after.
A high ``divergence_probability`` must hold for the ``for`` window like any forecast-based
condition.

Unlike the other releases, no checkpoint is taken first: the weights of a run whose loss is NaN
are NaN, and those of a run whose loss is running away are worse than any saved before it. A save
now would become the newest checkpoint, the one a resume starts from, and with a bounded number of
kept checkpoints it could push out the last good one. The reason names what to resume from
instead: the last checkpoint the advisor knows of, and the last step with a finite loss, or the step
of the lowest loss when the loss had already risen well above it (a gradual blow-up). Both are of
the reports the advisor got, said so: a run reports at intervals, and the steps it logged between
two reports (finite losses among them) are never seen.
"""

from __future__ import annotations

import math

from advisor.forecast.divergence import NON_FINITE_RUN
from advisor.model import ActionKind
from policies.rules.base import Context, Outcome, dur, held_since, pct
from policies.rules.release import release
from policies.spec import RECOMMEND, STOP, DivergenceRule

NAME = "divergence"
KEY = "divergence.since"
#: the reason names the lowest loss's step, not the last finite one's, once the loss stood this
#: share above its lowest there (a wording choice: no action depends on it)
RISEN = 0.10
#: non-finite reports in a row that make a divergence: the loss scaler's skipped step recovers
#: within a report or two, a diverged run never does (waiting costs two report intervals); the
#: forecaster's count, so that P(diverge) and the run state agree with the rule
NON_FINITE_REPORTS = NON_FINITE_RUN


def _non_finite(ctx: Context) -> float | None:
    job = ctx.job
    if job.last_loss is not None and not math.isfinite(job.last_loss):
        return job.last_loss
    fc = job.forecast
    if fc is not None and fc.current_loss is not None and not math.isfinite(fc.current_loss):
        return fc.current_loss
    return None


def evaluate(ctx: Context, rule: DivergenceRule) -> Outcome:
    out = Outcome()
    if not ctx.judge:
        return out
    bad = _non_finite(ctx) if rule.non_finite else None
    run = ctx.job.non_finite_reports
    if bad is not None and run is not None and run < NON_FINITE_REPORTS:
        # too few in a row yet to tell a divergence from a skipped step: said, and looked at again
        # with the next report (a rising loss before them is the forecast's business below)
        out.reasons.append(
            f"{NAME}: latest loss is {bad}, {run} report(s) in a row; acting at {NON_FINITE_REPORTS} "
            "(a mixed-precision run skips a step whose gradients overflowed and carries on)"
        )
        out.advice, out.severity = "diverging?", 3
        bad = None
    fc = ctx.forecast
    p = fc.divergence_probability if fc is not None else 0.0
    probable = fc is not None and p >= rule.probability
    since = held_since(ctx.job.rule_state, KEY, ctx.now, bad is not None or probable)
    if since is None:
        if fc is None and rule.non_finite:
            out.reasons.append(f"{NAME}: only the non-finite check runs ({ctx.forecast_reason})")
        return out
    out.state[KEY] = since
    held = ctx.now - since
    if bad is not None:
        numbers = f"latest loss is {bad}"
    else:
        numbers = f"P(diverge)={pct(p)} >= {pct(rule.probability)} for {dur(held)}"
        if held < rule.hold:
            out.reasons.append(f"{NAME}: {numbers} (acting after {dur(rule.hold)})")
            out.recheck(since + rule.hold)
            out.advice, out.severity = "diverging?", 3
            return out
    out.advice, out.severity = "diverging", 8
    if rule.action == RECOMMEND:
        out.act(ActionKind.RECOMMEND, NAME, f"diverged: {numbers}; consider stopping it", would="none")
        return out
    final = ActionKind.STOP if rule.action == STOP else ActionKind.RELEASE_QUOTA
    saved = f"no checkpoint taken (its weights would be {_weights(bad)})"
    why = f"diverged: {numbers}; {saved}{_resume_from(ctx)}"
    release(ctx, out, rule=NAME, final=final, why=why, since=since, checkpoint_first=False)
    return out


def _weights(bad: float | None) -> str:
    return "non-finite" if bad is not None else "worse than any saved before"


def _resume_from(ctx: Context) -> str:
    """Where a resume should start: the last checkpoint known, and one at or before the step of
    the lowest loss when the loss rose after it (a gradual blow-up: a checkpoint saved on the way up
    holds its weights), else at or before the last finite loss's step.

    The losses named are reports' (raw values, never a smoothed level), and are said to be: the
    run may have logged finite losses after the last finite report, between two reports (a
    back-test's run logged 20.13 at step 1,080 where its last finite report was 10.34 at 1,040),
    so "the last finite one" of the run would be a claim the advisor cannot make."""
    parts = []
    cp = ctx.job.checkpoint
    if cp.last_step is not None:
        parts.append(f"the checkpoint of step {cp.last_step:,}")
    # the history's, not the latest forecast's last point: finite reports may have come after it
    last = ctx.job.last_finite_step
    if last is None and ctx.job.forecast is not None and ctx.job.forecast.last_step is not None:
        last = int(ctx.job.forecast.last_step)
    lowest = ctx.job.lowest_loss
    risen = ctx.job.last_finite_loss
    # a loss that rose without going non-finite: its last finite report is simply its latest
    latest = ctx.job.last_loss is not None and math.isfinite(ctx.job.last_loss)
    which = "the latest report" if latest else "the last finite report"
    if (
        lowest is not None
        and last is not None
        and risen is not None
        and lowest[0] < last
        and risen > lowest[1] + RISEN * abs(lowest[1])
    ):
        parts.append(
            f"one at or before step {lowest[0]:,} (the lowest loss reported, {lowest[1]:.4g}; the loss "
            f"rose after it, to {risen:.4g} at step {last:,}, {which})"
        )
    elif last is not None:
        parts.append(
            f"one at or before step {last:,} ({'the latest' if latest else 'the last finite'} loss reported)"
        )
    return f"; resume from {' or '.join(parts)}" if parts else ""
