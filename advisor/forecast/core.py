"""``forecast``: from a loss history to final loss, ETA, plateau and divergence probabilities.

The pipeline: clean the input and keep the last restart segment, joined to the history it resumed
from when the loss carries on (``_prep``); fit and weight the curve families and read them at the
horizon with a calibrated interval (``ensemble``); then, here, derive the probabilities from that
same predictive distribution, so that the numbers a policy acts on are consistent with each other:
P(plateau) (with the local test of ``plateau`` and, for a series that may turn, the rising branch
of ``turn``), P(divergence), and the ETA (``eta``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from advisor.forecast import calibration as cal
from advisor.forecast._prep import Prepared, prepare, progress_reports
from advisor.forecast.divergence import divergence_probability, recovered_end
from advisor.forecast.ensemble import Parts, estimate
from advisor.forecast.epoch_terms import epoch_boundaries_ahead, epoch_step_expected
from advisor.forecast.eta import eta_interval, last_stall_note
from advisor.forecast.final_value import floored, mixture_p90, plateau_at
from advisor.forecast.jump import JUMP_WARNING, after_jump, jump_start
from advisor.forecast.plateau import local_trend
from advisor.forecast.robust import report_noise, smoothed_level, trend_level, trend_scatter
from advisor.forecast.schedule import held_at_peak, implied_end
from advisor.forecast.turn import rising_branch
from advisor.model import Forecast, Interval

FloatArray = NDArray[np.float64]

log = logging.getLogger(__name__)

#: the warning of a series that has turned upward; it reads a loss (lower is better), and
#: ``state.forecast_series`` words it for a higher-is-better metric forecast negated
RISING_WARNING = "the series is rising"
#: the warning of a run whose learning rate has stayed at its peak since warmup with a share of its
#: budget left (see ``_peak_lr_warning``); policies read it by this prefix
PEAK_LR_WARNING = "the learning rate has not begun to decay"
#: a run without a total whose learning rate decays: where the decay ends, read as its end
IMPLIED_END_WARNING = "total_steps unknown: the learning rate's decay ends the run"
#: the least share of ``total_steps`` still ahead for ``PEAK_LR_WARNING`` (a warmup-stable-decay
#: schedule anneals over its last 10-20%)
PEAK_LR_REMAINING = 0.1
#: the ensemble's warnings about the shape of a falling fit (``advisor.forecast.ensemble``)
FALLING_FIT_WARNINGS = ("the loss falls faster than its earlier history", "learning rates unknown: assumed")


#: fewer points than this hold no trend (the ensemble forecasts the current level with a wide
#: interval): P(plateau) is then the uninformed NO_TREND_PLATEAU, as with no points at all
NO_TREND_POINTS = 3
NO_TREND_PLATEAU = 0.5


def ends_at_decay(warnings: Sequence[str]) -> bool:
    """Whether a forecast made without a total read its final value where the learning rate's
    decay ends (``IMPLIED_END_WARNING``), not at the curve's asymptote: what every output says of
    where FINAL is (the text said one, the table and the plot the other)."""
    return any(w.startswith(IMPLIED_END_WARNING) for w in warnings)


def holds_trend(fc: Forecast) -> bool:
    """Whether ``fc``'s P(plateau) is a finding: False on fewer points than hold a trend (short of
    the run's end), where it is the uninformed ``NO_TREND_PLATEAU`` that outputs show as unknown."""
    return fc.n_points >= NO_TREND_POINTS or fc.at_end


#: the most reports a finished training loss's end level is read from (the last twentieth of
#: its reports, at least five)
END_POINTS_MAX = 200


def no_report_left(steps: FloatArray, horizon: float) -> bool:
    """The run is at its end: at or past its planned last step, or nearer to it than its reports
    are spaced (the next report would fall past the end: 8 steps short of 150,018 on a run that
    reports every 10 is finished, and forecasting those 8 steps read the level's noise as a drop
    still to come). The spacing is the mean over the series, first to last point, so that a
    history starting late (a run resumed from step 100,000) is not taken for a sparse one."""
    last = float(steps[-1])
    if horizon <= last:
        return True
    if steps.size < 3:
        return False
    spacing = (last - float(steps[0])) / (steps.size - 1)
    return horizon - last < spacing


def _no_drop_scheduled(fit: Prepared, horizon: float | None, parts: Parts) -> bool:
    """Whether neither an LR decay nor a new epoch is coming before the run's end: what the local
    plateau test needs (an anneal's or an epoch's drop is not in the recent trend).

    A run that does not report its total steps has no schedule to infer; its learning rate held
    at its peak says no decay has begun, and no epoch boundary may lie within a doubling of its
    steps (the median of the reach ``plateau`` expects of it). Without reported learning rates
    nothing says the rate is constant, with or without a horizon."""
    if horizon is not None:
        return parts.lr_shape == "constant" and (
            # boundaries ahead that promise no step down of 1% schedule no drop: a flat run in
            # its second of three epochs is judged by its trend
            epoch_boundaries_ahead(fit, horizon) == 0 or not epoch_step_expected(parts)
        )
    return (
        fit.lrs is not None
        and held_at_peak(fit.lrs)
        and epoch_boundaries_ahead(fit, 2.0 * float(fit.steps[-1]) + 1.0) == 0
    )


def _peak_lr_warning(prep: Prepared, parts: Parts, horizon: float | None, at_end: bool) -> str | None:
    """The forecast of a run whose learning rates are known and have stayed at their peak since
    warmup reads them as constant to the end: the loss cannot tell a constant schedule from a
    warmup-stable-decay one before its decay, whose drop (several percent, over the last 10-20% of
    the budget) nothing in the history foretells. Say so while a share of the budget is left, or
    when the budget is unknown."""
    if at_end:
        return None
    if horizon is None:
        # no total to tell how much of the budget is left: a rate held at its peak is said as
        # such, since the local plateau test judges such a run by its recent trend
        if prep.lrs is None or not held_at_peak(prep.lrs):
            return None
        return (
            f"{PEAK_LR_WARNING} (total_steps unknown): the forecast holds it at its peak; a decay to come "
            "(a warmup-stable-decay schedule) would take the loss below this forecast"
        )
    if parts.lr_shape != "constant" or horizon <= 0:
        return None
    left = (horizon - float(prep.steps[-1])) / horizon
    if left < PEAK_LR_REMAINING:
        return None
    return (
        f"{PEAK_LR_WARNING} ({left:.0%} of total_steps left): the forecast holds it at its peak to the "
        "end; a decay before then (a warmup-stable-decay schedule) would take the loss below this forecast"
    )


def _safe_total(total_steps: Any, warnings: list[str], offset: float = 0.0) -> float | None:
    """``total_steps`` as a float on the caller's axis, None (said) when it is no number or does
    not lie past the axis' origin (0, or the first step of a history all of whose steps were
    negative: ``offset`` moves them to 0, see ``_prep.shifted_axis``)."""
    if total_steps is None:
        return None
    try:
        t = float(total_steps)
    except (TypeError, ValueError):
        warnings.append(f"total_steps {total_steps!r} is not a number; treated as unknown")
        return None
    if not math.isfinite(t) or t + offset <= 0:
        what = "a positive number" if not offset else "past the first step"
        warnings.append(f"total_steps {total_steps!r} is not {what}; treated as unknown")
        return None
    return t


def _whole_steps(total: float | None) -> int | None:
    """The run's total as the whole number of steps ``Forecast.total_steps`` reports: the nearest
    one, halves up (a total of 5000.7 steps, read off a rescaled counter or an epoch product, ends at
    step 5001, and truncating it told the run it was a step short of its end). The forecast itself
    is read at the total as given."""
    return None if total is None else math.floor(total + 0.5)


def _run(
    steps: Any,
    values: Any,
    total_steps: Any,
    times: Any,
    learning_rates: Any,
    epochs: Any,
    segments: Iterable[int] | None,
    path_points: int = 0,
    training_loss: bool = False,
) -> tuple[Forecast, Parts]:
    warnings: list[str] = []
    prep = prepare(steps, values, times, learning_rates, epochs, segments)
    warnings.extend(prep.warnings)
    # steps read relative to the first when all were negative (``shifted_axis``): the total the
    # caller gave is on the caller's axis, and moves with them; what is reported moves back
    shift = prep.step_offset
    horizon = _safe_total(total_steps, warnings, shift)
    n = prep.values.size
    if n == 0:
        warnings.append("no usable points")
        nan = float("nan")
        fc = Forecast(
            final_loss=Interval(nan, nan, nan),
            plateau_probability=NO_TREND_PLATEAU,
            divergence_probability=1.0 if prep.n_nonfinite_tail else 0.0,
            warnings=tuple(warnings),
            total_steps=_whole_steps(horizon),
            n_points=0,
            n_dropped=prep.n_dropped,
        )
        return fc, Parts()
    if horizon is not None and horizon + shift < prep.steps[-1]:
        last = float(prep.steps[-1]) - shift
        warnings.append(f"total_steps {horizon:g} is before the last step {last:g}; using the last step")
        horizon = last
    if horizon is not None:
        horizon += shift
    # the run's own end when it reports one, for its ETA and its ``total_steps``; without one, a
    # learning rate decaying toward zero says where it ends (``implied_end``), and the anneal still
    # to come is forecast to there rather than read off curves fitted to their asymptote
    given = horizon
    if horizon is None and prep.lrs is not None:
        implied = implied_end(prep.steps, prep.lrs)
        if implied is not None:
            horizon = implied[0]
            warnings.append(
                f"{IMPLIED_END_WARNING} at about step {implied[0] - shift:,.0f} ({implied[1]} to zero): the "
                "forecast and P(plateau) read the run to there"
            )
    path_steps = None
    if path_points > 0:
        last = float(prep.steps[-1])
        # to the horizon, or (unknown) over as many steps again as the history spans
        end = horizon if horizon is not None else 2.0 * last + 1.0
        path_steps = np.linspace(last, max(end, last), path_points + 1)[1:]
    # a training loss that jumped up and stayed there is fitted from its jump on (``jump``): fits
    # across the jump put its end anywhere; P(diverge) below still reads the whole history
    fit, fit_horizon, fit_path = prep, horizon, path_steps
    jumped = jump_start(prep.values) if training_loss else None
    if jumped is not None:
        fit, offset = after_jump(prep, jumped[0])
        fit_horizon = None if horizon is None else horizon - offset
        fit_path = None if path_steps is None else path_steps - offset
        warnings.append(
            f"{JUMP_WARNING} at step {prep.steps[jumped[0]] - shift:,.0f} to {jumped[1]:.1f} times its best "
            f"and has stayed up: forecast from the {fit.values.size} reports since"
        )
    # the loss the optimiser minimises does not turn: its rise is an instability (a spike, a bad
    # epoch, a blow-up), the divergence probability's business, and the schedule brings it back
    # down (see ``turn``)
    turn = (
        None
        if training_loss
        else rising_branch(prep.steps, prep.values, horizon, smoothed_level(prep.values))
    )
    parts = estimate(
        fit,
        fit_horizon,
        warnings,
        fit_path,
        training_loss=training_loss,
        rise_shown=turn is not None and turn.weight >= 0.5,
    )
    parts.path_steps = None if path_steps is None else path_steps - shift
    mean, sd = parts.mean, parts.sd
    if not (math.isfinite(mean) and math.isfinite(sd)):
        mean, sd = parts.level, max(abs(parts.level), 1.0)
        warnings.append("numerical trouble in the fit; forecast is the current level")
    elif training_loss and mean > parts.level:
        # the loss the optimiser minimises does not end above where it stands short of a
        # divergence (reported apart): fits that say so followed a jump in the history (a
        # blow-up the run is recovering from read "final 97.9" beside a current 2.77, with
        # P(plateau) 1.00). Held at the current level, their spread kept as the interval; said
        # when it is more than the contract's 1% band (a flat stretch's fits end a hair above it)
        if mean > parts.level + 0.01 * abs(parts.level):
            warnings.append(
                f"the curve families put the end above the current level ({mean:.4g} against "
                f"{parts.level:.4g}), which a training loss does not do short of a divergence (a jump in its "
                "history, or fits that bend up on a flat stretch): held at the current level"
            )
        mean = parts.level
    half = cal.Z80 * sd
    lo, hi = mean - half, mean + half
    # a series never below 0 (a loss, an error rate) does not end below 0: the falling families'
    # own end and interval are read so here (P(plateau) and the rising branch's mixture read them),
    # and the final interval once more after everything mixed into it (``final_value.floored``)
    never_negative = float(np.min(prep.values)) >= 0.0
    if never_negative:
        lo = max(lo, 0.0)
        mean = max(mean, 0.0)
    level = parts.level
    plateau = plateau_at(mean, sd, level, training_loss, never_negative)
    if n < NO_TREND_POINTS:
        # a symmetric interval round the current level put it at Phi(0.01 level / sd), 0.52 on two
        # evaluations of an accuracy clearly rising: a number that read as computed, and was none
        plateau = NO_TREND_PLATEAU
    flattened = parts.tail_bias_z <= cal.FLATTENED_Z  # False when NaN
    if (plateau >= 0.5 or flattened) and _no_drop_scheduled(fit, fit_horizon, parts):
        # no LR decay or new epoch is coming, and either the fits already put the end within the
        # 1% band, or the curve has not fallen faster than they expected: fitted without the
        # recent tail, they put it no higher than it stayed (a run that starts slowly, concave in
        # log-step, fails this: its tail fell faster). The recent trend, continued, then says how
        # sure the plateau is (see ``plateau``); it only ever raises the fits' own probability
        trend = local_trend(fit.steps, fit.values, fit_horizon, level)
        if trend is not None and trend[0] > plateau:
            plateau = trend[0]
            # that continuation over-states what a saturating run has left, so no more drop than
            # it gives is credible either: the final-loss forecast follows it, same half-width
            if mean < level - trend[1]:
                mean = level - max(trend[1], 0.0)
                lo, hi = mean - half, mean + half
                if never_negative:
                    lo, mean = max(lo, 0.0), max(mean, 0.0)
    if turn is not None:
        # the series has turned upward (an eval loss past its minimum): mix in its rising branch,
        # by how sure the rise is; the final value moves to or above the current level, the
        # interval covers both branches, and P(plateau) counts the rise as no improvement left
        w = turn.weight
        half_t = cal.Z80 * turn.sd
        mean_f = mean
        mean = (1.0 - w) * mean + w * turn.mean
        # the rise may stop at any report: its low end reaches down to where the trend stands
        # now, less one report's scatter (reaching to the median of the last reports, which
        # lags a rise by two evaluations, an eval loss rising 0.045 an evaluation read
        # "1.306 .. 1.732" beside a last evaluation of 1.401)
        lo = min((1.0 - w) * lo + w * min(turn.mean - half_t, turn.now - cal.Z80 * turn.scatter), mean)
        # the upper end is the mixture's own 90% quantile: a blend of the two branches' ends drew
        # it in to where the rise stops (0.968 beside a last eval of 0.942 on an eval loss rising
        # to 1.09), while the rising branch, as sure as its weight, reaches on up
        hi = max(mixture_p90(mean_f, (hi - mean_f) / cal.Z80, turn.mean, turn.sd, w), mean)
        plateau = (1.0 - w) * plateau + w * turn.plateau
        if w >= 0.5:
            # what the falling families said of their own fit (an LR decay read off a steeper
            # fall, a constant-LR end below the level) is no reading of a series that rises
            warnings[:] = [m for m in warnings if not m.startswith(FALLING_FIT_WARNINGS)]
            warnings.append(f"{RISING_WARNING} ({turn.slope_t:.1f} standard errors over its recent points)")
    # the gap rule reads a training loss, reported at a steady pace to the end; an eval series
    # a few evaluations long is far from its run's end one spacing out (the run still trains, and
    # its model may still improve unobserved: ``state`` ends it with its run's training loss)
    at_end = horizon is not None and (
        no_report_left(prep.steps, horizon) if training_loss else horizon <= float(prep.steps[-1])
    )
    if at_end:
        # the run is at its end: no improvement is left to come, whatever the noise of the last
        # reports says about the level (a finished fine-tune is not "still learning")
        plateau = 1.0
        # and its end is where it stands, as sure as the points that say so are, a series that
        # turned upward too (the families' value at the last point, with an interval made for a
        # forecast ahead, read "final 0.287 (0.24 .. 0.33)" beside a current 0.301, and the
        # rising branch's mixture an eval loss at 1.073 beside its last evaluation, 1.083, at the
        # run's last step). An eval series' last
        # points are evaluations hundreds of steps apart: their median lags a trend by two of
        # them ("final 0.975" beside a last eval of 0.957 on a loss still falling), so they
        # are carried along their trend. A training loss is read the same way over the last
        # twentieth of its reports: a median of five per-batch losses scattering by a sixth
        # put a run that ended at 0.072 at 0.097, "still learning" to 0.071
        k = min(5, n) if not training_loss else min(max(n // 20, 5), END_POINTS_MAX, n)
        half = cal.Z80 * 1.25 * report_noise(prep.values[-max(k, 10) :]) / math.sqrt(k)
        scatter = math.nan if training_loss else trend_scatter(prep.steps, prep.values, k)
        if math.isfinite(scatter):
            # an eval series' last evaluations are hundreds of steps apart and still move: their
            # first differences are mostly the trend (a finished run's eval loss, evaluating within
            # 0.004, read "final 1.241 (1.194 .. 1.288)"). Its end is what an evaluation there
            # reads: the trend's level, give or take one evaluation's scatter about the line the
            # points are carried along, and that level's own uncertainty
            half = cal.Z80 * scatter * math.sqrt(1.0 + 1.0 / k)
        level = trend_level(prep.steps, prep.values, k)
        mean, lo, hi = level, level - half, level + half
    if not at_end and prep.n_nonfinite_trailing:
        # a run that blew up into NaN: had it recovered, it ends no better than its history
        # before the blow-up says (``recovered_end``), neither its mean nor its lower end (the
        # fits across the climb reached down to 0)
        recovered = recovered_end(prep, lambda before: _fitted_end(before, horizon, training_loss))
        if recovered is not None:
            if recovered[0] is not None:
                mean = max(mean, recovered[0])
                hi = max(hi, mean)
            lo = min(max(lo, recovered[1]), mean)
    peak = _peak_lr_warning(prep, parts, horizon, at_end)
    if peak is not None:
        warnings.append(peak)
    placed_steps, placed_times, placed_segments = progress_reports(prep)
    eta, sps = eta_interval(placed_steps, placed_times, given, placed_segments)
    stalled = last_stall_note(prep.steps, prep.times, prep.segment_ids)
    if stalled is not None:
        warnings.append(stalled)
    fc = Forecast(
        final_loss=floored(Interval(mean=mean, p10=min(lo, mean), p90=max(hi, mean)), never_negative),
        plateau_probability=min(max(float(plateau), 0.0), 1.0),
        divergence_probability=divergence_probability(prep, training_loss, horizon),
        eta_seconds=eta,
        steps_per_second=sps,
        model=dict(sorted(parts.weights.items(), key=lambda kv: -kv[1])),
        warnings=tuple(warnings),
        current_loss=level,
        last_step=float(prep.steps[-1]) - shift,
        total_steps=_whole_steps(None if given is None else given - shift),
        n_points=n,
        n_dropped=prep.n_dropped,
        at_end=at_end,
    )
    return fc, parts


def _fitted_end(prep: Prepared, horizon: float | None, training_loss: bool) -> tuple[float, float] | None:
    """(mean, lower end of the 80% interval) the curve families give for ``prep`` at ``horizon``,
    read as ``_run`` reads them (a training loss's end held at its level, never below 0 for a loss
    never negative); None when the fit has no finite answer."""
    parts = estimate(prep, horizon, [], training_loss=training_loss)
    mean = min(parts.mean, parts.level) if training_loss else parts.mean
    if not (math.isfinite(mean) and math.isfinite(parts.sd)):
        return None
    lo = mean - cal.Z80 * parts.sd
    if float(np.min(prep.values)) >= 0.0:
        return max(mean, 0.0), max(lo, 0.0)
    return mean, lo


def forecast(
    steps: Any,
    values: Any,
    *,
    total_steps: Any = None,
    times: Any = None,
    learning_rates: Any = None,
    epochs: Any = None,
    training_loss: bool = False,
) -> Forecast:
    """Forecast where a run ends: see DESIGN.md's Forecast contract. Never raises on bad data.

    ``training_loss``: the series is the loss the optimiser minimises. Any other series (an eval
    loss, a metric) may turn upward past its minimum, and the forecast follows the rise (see
    ``turn``); the training loss does not turn: a rise there is an instability that the schedule
    brings back down or a divergence, which ``divergence_probability`` reports."""
    try:
        # 1e300 losses overflow a square on the way: the fit copes (non-finite candidates are
        # dropped) and says so in the warnings; numpy's own warnings would only add noise on stderr
        with np.errstate(all="ignore"):
            return _run(
                steps, values, total_steps, times, learning_rates, epochs, None, training_loss=training_loss
            )[0]
    except Exception as exc:  # last line of defence: a forecast must never crash its caller
        return failed_forecast(exc)


def forecast_with_parts(
    steps: Any,
    values: Any,
    *,
    total_steps: Any = None,
    times: Any = None,
    learning_rates: Any = None,
    epochs: Any = None,
    training_loss: bool = False,
) -> tuple[Forecast, Mapping[str, Any]]:
    """Like ``forecast`` but also returns the ensemble's internals (for calibration and explain)."""
    with np.errstate(all="ignore"):
        fc, parts = _run(
            steps, values, total_steps, times, learning_rates, epochs, None, training_loss=training_loss
        )
    return fc, parts.__dict__


def forecast_curve(curve: Any, *, total_steps: Any = None, training_loss: bool = False) -> Forecast:
    """Forecast from an ``advisor.model.Curve``: fits its last restart segment.
    ``training_loss`` as in ``forecast``."""
    try:
        with np.errstate(all="ignore"):
            return _run(
                curve.steps,
                curve.values,
                total_steps,
                curve.times,
                curve.learning_rates,
                curve.epochs,
                getattr(curve, "segments", None),
                training_loss=training_loss,
            )[0]
    except Exception as exc:
        return failed_forecast(exc)


def failed_forecast(exc: Exception) -> Forecast:
    """The forecast of a history the forecaster failed on: no value, and the failure said in its
    warnings (the policies refuse a forecast without a final value) and logged with its traceback.
    A forecast must never crash its caller (the controller judges every other job on, the
    simulator every other run), but a failure that only reached a job's status left a bug in a
    new curve family unseen while every job went unjudged."""
    log.error("forecast failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
    nan = float("nan")
    return Forecast(
        final_loss=Interval(nan, nan, nan),
        plateau_probability=0.5,
        divergence_probability=0.0,
        warnings=(f"forecast failed: {type(exc).__name__}: {exc}",),
    )
