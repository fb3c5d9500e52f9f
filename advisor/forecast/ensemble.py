"""The fit ensemble behind ``forecast``: every curve family fitted, weighted by extrapolation skill.

Fit every curve family by variable projection with robust reweighting (``families``), plus the
schedule-aware law when learning rates are known (``schedule``); weight the families by how well
each one, fitted on the history without its tail, predicted that tail (extrapolation skill rather
than in-sample fit); average, read at the horizon (stretched for an assumed anneal when the
learning rates are unknown), and give the sd of the calibrated interval (``interval``).
``core`` turns these ``Parts`` into the Forecast contract's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from advisor.forecast import calibration as cal
from advisor.forecast import epochs as epoch_track
from advisor.forecast._prep import Prepared
from advisor.forecast.epoch_terms import (
    EPOCH_NOTE_SHARE,
    epoch_boundaries,
    epoch_boundaries_ahead,
    epoch_drop,
    epoch_warning,
)
from advisor.forecast.families import FAMILIES, Family
from advisor.forecast.fit_engine import fit_all_robust
from advisor.forecast.interval import drop_shrink, interval_sd, reach_of
from advisor.forecast.robust import downsample, fast_median, report_noise, smoothed_level
from advisor.forecast.schedule import infer_future, lr_law_family
from advisor.forecast.turn import UNKNOWN_REACH

__all__ = ["Parts", "estimate"]

FloatArray = NDArray[np.float64]

#: horizon used for "the asymptote" when total_steps is unknown (in units of the observed span)
_ASYMPTOTE_U = 1e4
#: a family prediction further than this many times the current level from it is discarded
_ABSURD_FACTOR = 1e3


@dataclass
class Parts:
    """Intermediate results, exposed for the benchmark's calibration and for ``explain``."""

    mean: float = float("nan")
    spread: float = 0.0
    drop: float = 0.0
    level: float = float("nan")
    remaining: float = 0.0
    sd: float = float("nan")
    weights: dict[str, float] = field(default_factory=dict)
    preds: dict[str, float] = field(default_factory=dict)
    lr_shape: str | None = None
    holdout_err: float = float("nan")
    reach: float = 0.0
    #: the weighted ensemble's mean error on the held-out tail, in standard errors of that mean
    #: (negative: the tail stayed above what the fits expected, the curve has flattened)
    tail_bias_z: float = float("nan")
    #: the share of the ensemble's predicted drop kept in the mean (see ``interval.drop_shrink``)
    drop_shrink: float = 1.0
    #: without learning rates: the share of the assumed anneal's extra drop kept (see ``_anneal_share``)
    anneal_share: float = 1.0
    #: without learning rates: the ensemble's mean at the horizon itself and at the stretched one
    mean_plain: float = float("nan")
    mean_stretched: float = float("nan")
    #: with epoch boundaries ahead of the last point (and a horizon): the drop the fits put on
    #: them, the horizon's value with them against without them (NaN: none ahead, or no horizon)
    epoch_drop: float = float("nan")
    #: the step down the loss took at the last epoch boundary crossed (NaN: none measured)
    last_boundary_drop: float = float("nan")
    #: with ``path_steps``: the forecast mean and sd at each of those steps (see ``forecast_path``)
    path_steps: FloatArray | None = None
    path_mean: FloatArray | None = None
    path_sd: FloatArray | None = None


def _families_for(
    prep: Prepared, horizon: float | None, warnings: list[str], parts: Parts
) -> tuple[list[Family], FloatArray | None, FloatArray | None]:
    """The saturating families, plus the LR grid for the schedule-aware law when the learning
    rates and the horizon are known."""
    fams = list(FAMILIES)
    if prep.lrs is None or horizon is None:
        return fams, None, None
    ok = np.isfinite(prep.lrs) & (prep.lrs >= 0)
    if ok.sum() < 3 or float(np.max(prep.lrs[ok])) <= 0:
        warnings.append("learning rates unusable; schedule ignored")
        return fams, None, None
    grid, lr_grid, shape = infer_future(prep.steps[ok], prep.lrs[ok], max(horizon, float(prep.steps[-1])))
    parts.lr_shape = shape
    return fams, grid, lr_grid


def _holdout_mask(u: FloatArray) -> NDArray[np.bool_] | None:
    """The points the holdout fit sees (the history without its last ``HOLDOUT`` fraction), or
    None when either part would be too short to fit or to score."""
    train = u <= 1.0 - cal.HOLDOUT
    n_tr = int(train.sum())
    if n_tr < 4 or u.size - n_tr < 2:
        return None
    return train


def _weights(
    y: FloatArray,
    w: FloatArray,
    fams: list[Family],
    train: NDArray[np.bool_] | None,
    tail: dict[str, FloatArray],
) -> tuple[dict[str, float], float, float]:
    """Family weights from extrapolation skill: each family, fitted on the history without its
    tail, is scored on how well it predicted that tail (``tail``, from the same robust fit). In-sample
    fit would reward flexibility, not foresight. ``w`` are the robust point weights of the full fit
    (recency times Huber): a spike is down-weighted in the holdout fit and in the scoring alike.

    Also returns the weighted ensemble's own error on that tail (RMS), the one direct measure of
    how predictable this particular curve is, and its mean (signed) error in standard errors (both
    NaN when the history is too short to hold out)."""
    priors = {f.name: f.prior for f in fams}
    if train is None or not tail:
        return priors, float("nan"), float("nan")
    n = y.size
    test = ~train
    n_te = int(test.sum())
    wt = w[test] / float(w[test].sum())
    y_te = y[test]
    names = list(tail)
    pred_te = np.stack([tail[k] for k in names])
    rms = np.sqrt(((pred_te - y_te) ** 2) @ wt)
    errs = dict(zip(names, rms.tolist(), strict=True))
    recent = y[-max(5, n // 3) :]
    noise = report_noise(recent)
    floor = max(noise / math.sqrt(n_te), 1e-9 * (abs(fast_median(y)) + 1e-12))
    best = min(errs.values())
    out: dict[str, float] = {}
    for fam in fams:
        if fam.name in errs:
            z = (errs[fam.name] - best) / (best + floor)
            out[fam.name] = fam.prior * math.exp(-cal.SKILL_SHARPNESS * z * z)
    tot = sum(out.values())
    if tot <= 0:
        return out, float("nan"), float("nan")
    ens = np.array([out.get(k, 0.0) for k in names]) @ pred_te / tot
    resid = ens - y_te
    bias_z = float(resid @ wt) / max(noise / math.sqrt(n_te), 1e-12 * (abs(float(y_te[-1])) + 1e-12))
    return out, float(np.sqrt((resid**2) @ wt)), bias_z


def estimate(
    prep: Prepared,
    horizon: float | None,
    warnings: list[str],
    path_steps: FloatArray | None = None,
    *,
    training_loss: bool = False,
    rise_shown: bool = False,
) -> Parts:
    """The ensemble's forecast at the horizon; with ``path_steps`` (steps after the last one) also
    its mean and sd at each of them, from the same fits and weights.

    ``rise_shown``: the recent window rises significantly (``turn``). Without it, a series that
    may turn and is told no end has a family rising at the asymptote read one doubling ahead, as
    the turn reads its own rise: a rise the recent points do not show is not carried 10,000 spans.

    ``training_loss``: the series does not turn, so a family whose curve ends above the current
    level (it bends up on a flat stretch) says no more than "no further fall": it is read as
    ending at the level. Kept as it was, its rise widened the spread, and through it the interval
    on both sides: a loss flat at 0.600 +- 0.004 read "final 0.598 (0.49 .. 0.70)" and P(plateau)
    went 1.00 -> 0.11 on one new report (an SRE's trial, a plateau that flapped for an hour)."""
    parts = Parts()
    path_steps = np.zeros(0) if path_steps is None else np.asarray(path_steps, dtype=np.float64)
    x_all = prep.steps + 1.0
    y_all = prep.values
    level = smoothed_level(y_all)
    parts.level = level
    n = y_all.size
    if n < 3:
        parts.mean = level
        # no trend to read: the widest measured short-history interval, wherever the run is (a
        # fixed half of the level covered every one of the 84 such histories of the development
        # curves, far beyond the 80% an interval promises)
        parts.sd = max(abs(level) * max(cal.SMALL_REL_KNOTS), 1e-3) / cal.Z80
        warnings.append(f"only {n} point(s); forecast is the current level with a wide interval")
        parts.path_mean, parts.path_sd = np.full(path_steps.size, level), np.full(path_steps.size, parts.sd)
        return parts
    fams, grid, lr_grid = _families_for(prep, horizon, warnings, parts)
    # skip the initial transient, but always keep the latest points
    start = x_all[-1] * cal.SKIP_START
    if horizon is not None and grid is None:
        # without learning rates nothing models the warmup and the fast transient after it, which
        # last a fixed fraction of a fixed-budget run: leave them out (the schedule-aware law
        # models warmup through the cumulative LR, so with learning rates they stay in)
        start = max(start, min(cal.SKIP_WARMUP * horizon, cal.SKIP_MAX * x_all[-1]))
    keep = x_all >= start
    keep[-min(n, 5) :] = True
    x, y = downsample(x_all[keep], y_all[keep])
    x_ref = float(x[-1])
    u = x / x_ref
    w = np.exp(cal.RECENCY * u)
    u_t = (max(horizon, x_ref - 1.0) + 1.0) / x_ref if horizon is not None else _ASYMPTOTE_U
    # the asymptote (unknown horizon) is as far as it gets: remaining fraction 1
    parts.remaining = 1.0 if horizon is None else max(0.0, 1.0 - 1.0 / u_t)
    stretch_u = u_t
    if horizon is not None and grid is None:
        stretch_u = (1.0 + cal.ANNEAL_STRETCH * (u_t - 1.0)) ** cal.ANNEAL_POWER
    stretched = stretch_u != u_t
    # a series that may turn (an eval metric) told no end: a family rising at the asymptote is read
    # one doubling ahead instead, as the turn's own rise is (``turn.UNKNOWN_REACH``)
    # (a history long enough to check its fits against a held-out tail: a handful of points says
    # nothing of where a family that fits them goes, near or far)
    doubling = horizon is None and not training_loss and not rise_shown and n >= cal.SMALL_N
    if stretched:
        u_pred = np.array([stretch_u, 1.0, u_t])
    elif doubling:
        u_pred = np.array([stretch_u, 1.0, math.exp(UNKNOWN_REACH)])
    else:
        u_pred = np.array([stretch_u, 1.0])
    n_fixed = u_pred.size
    u_path = (path_steps + 1.0) / x_ref
    u_pred = np.concatenate((u_pred, u_path))
    ep_obs, ep_pred, ep_path = epoch_boundaries(prep, x, horizon, path_steps)
    if ep_obs is not None:
        # one more point: the horizon with no boundary beyond the last one crossed, which tells
        # how much of the forecast the boundaries ahead carry (``_epoch_warning``)
        u_pred = np.concatenate((u_pred, [stretch_u]))
    if grid is not None and lr_grid is not None:
        # the schedule-aware law's design is built for its exact points: the observed steps, then
        # the prediction points (it is read at the true horizon: its areas carry the schedule)
        steps_all = np.concatenate((x - 1.0, u_pred * x_ref - 1.0))
        fams.append(lr_law_family(steps_all, grid, lr_grid, x_ref - 1.0))
    train = _holdout_mask(u)
    ecol = None
    if ep_obs is not None:
        # the boundary count at each prediction point: the stretched horizon stands for an LR
        # anneal, not for more steps, so it has the horizon's boundaries
        fixed = np.array([ep_pred, ep_obs[-1], ep_pred][:n_fixed])
        at_pred = np.concatenate((fixed, ep_path, [ep_obs[-1]]))
        ecol = (ep_obs, at_pred)
    rf = fit_all_robust(fams, u, y, w, u_pred, irls=cal.IRLS_PASSES, epoch_col=ecol, train=train)
    fits = rf.fits
    weights, parts.holdout_err, parts.tail_bias_z = _weights(y, rf.weights, fams, train, rf.tail)
    share = _anneal_share(parts.tail_bias_z) if stretched else 1.0
    parts.anneal_share = share
    if share < 1.0:
        warnings.append(
            "the loss falls faster than its earlier history predicted: took the LR decay to be under way"
        )
    for name in rf.unscored:
        # no tail to judge it on: its prior stands (as if it had predicted the tail best)
        weights[name] = next(f.prior for f in fams if f.name == name)
    # how far the forecast reaches, in units of the held-out tail's reach
    parts.reach = reach_of(u_t) if horizon is not None else 10.0
    # a family whose extrapolation runs off by orders of magnitude is not a loss curve: drop it
    # (it would otherwise overflow the spread and swamp the interval)
    bound = _ABSURD_FACTOR * max(abs(level), 1e-6)

    # A falling family whose curve passes above the run's current level (the run has dipped below
    # it: an LR decay under way, or a recent fast drop) would put the end above where the run is
    # now. Its predicted drop is kept, measured from the current level instead: a run that is
    # learning cannot be forecast to end worse than it is, and P(plateau) must not read that as
    # "no improvement left". A curve passing below the level is left as it is (its extrapolation
    # already carries the fit's own view of the noise).
    def at_end(f: Any) -> float:
        end = float(f.pred[0])
        if stretched:
            # only a share of the stretch's extra drop when the anneal already shows in the fits
            plain = float(f.pred[2])
            end = plain + share * (end - plain)
        elif doubling and end > float(f.pred[1]):
            # a rise the recent points do not show, carried 10,000 spans ahead: a family with a
            # slow log-step term (vap) put an eval loss flat at 0.59 for 22 evaluations at 0.70
            # "by the end", where a run told any total up to twice its steps reads 0.596
            end = min(end, float(f.pred[2]))
        return end - max(0.0, float(f.pred[1]) - level)

    preds = {
        k: min(p, level) if training_loss else p
        for k, p in ((k, at_end(f)) for k, f in fits.items() if weights.get(k, 0.0) > 0.0)
        if math.isfinite(p) and abs(p - level) <= bound
    }
    if float(np.min(y_all)) >= 0.0:
        # a loss that has never been negative (a cross-entropy, an MSE) ends at or above zero: a
        # family extrapolating below it has run past the floor (a steep fine-tune, or the
        # schedule-aware law's anneal term applied in full to a run already near zero), and
        # averaging it in drags the mean to an impossible value, clipped to exactly 0. Unless every
        # family does so (the run is then headed for its floor: the clip at zero stands)
        above = {k: p for k, p in preds.items() if p >= 0.0}
        if above:
            preds = above
    fits = {k: fits[k] for k in preds}
    if not fits:
        warnings.append(
            "no curve family fitted the history (rising or erratic loss); forecast is the current level"
        )
        parts.mean = level
        parts.sd = max(abs(level) * 0.2, 1e-3)
        parts.path_mean, parts.path_sd = np.full(path_steps.size, level), np.full(path_steps.size, parts.sd)
        return parts
    names = list(fits)
    wv = np.array([weights.get(k, 0.0) for k in names])
    if wv.sum() <= 0:
        wv = np.ones(len(names))
    wv = wv / wv.sum()
    pv = np.array([preds[k] for k in names])
    mean = float(wv @ pv)
    parts.mean = mean
    if ep_obs is not None:
        ahead = epoch_boundaries_ahead(prep, horizon)
        if ahead > 0:
            parts.epoch_drop = epoch_drop(fits, names, wv)
            if parts.epoch_drop >= EPOCH_NOTE_SHARE * abs(level):
                # the last boundary's own step matters only where the fits promise one
                last = epoch_track.last_boundary_drop(prep.steps, prep.values, prep.epochs)
                if last is not None:
                    parts.last_boundary_drop = last
        note = epoch_warning(ahead, parts)
        if note:
            warnings.append(note)
    if stretched:
        for attr, col in (("mean_plain", 2), ("mean_stretched", 0)):
            setattr(parts, attr, float(wv @ np.array([float(fits[k].pred[col]) for k in names])))
        if u_t > 1.0:
            warnings.append(_anneal_warning(parts, fits, names, wv))
    parts.spread = float(np.sqrt(wv @ (pv - mean) ** 2))
    parts.drop = abs(level - mean)
    parts.weights = {k: float(v) for k, v in zip(names, wv, strict=True)}
    parts.preds = preds
    parts.sd = interval_sd(parts, n)
    # a short history on the schedule path has no tail to check the families' drop against: weight
    # the drop by how well they agree on it (see ``interval.drop_shrink``)
    short = n < cal.SMALL_N and parts.lr_shape is not None and parts.remaining < cal.SHRINK_BELOW_REMAINING
    shrink = drop_shrink(level - mean, parts.spread) if short else 1.0
    parts.mean = level - shrink * (level - mean)
    parts.drop_shrink = shrink
    if horizon is None and n < cal.SMALL_N and parts.mean < level:
        # the asymptote of a run known by a handful of points: nothing in them says how much of
        # its fall is left (3 points falling by 0.3 each read "final 0.2 (80%: 0 .. 0.8)" beside a
        # current 2.55), so the interval reaches up to where it stands
        parts.sd = max(parts.sd, (level - parts.mean) / cal.Z80)
    if path_steps.size:
        _path(parts, fits, names, wv, n, n_fixed, u_path, u_t, share if stretched else None, training_loss)
    if n < cal.SMALL_N:
        warnings.append(f"only {n} points: no tail to check the fit against; interval from a coarse rule")
    return parts


def _path(
    parts: Parts,
    fits: Mapping[str, Any],
    names: list[str],
    wv: FloatArray,
    n: int,
    n_fixed: int,
    u_path: FloatArray,
    u_t: float,
    share: float | None,
    training_loss: bool = False,
) -> None:
    """The forecast mean and sd at each path point: every kept family's curve there, measured from
    the current level as at the horizon, weighted as at the horizon; the sd by the same calibrated
    rule, at that point's remaining fraction and reach. Without learning rates the assumed anneal's
    extra drop at the horizon (``share`` of it) is added in proportion to the steps done towards
    the horizon: a drawing of the assumption, which only the end point is calibrated for."""
    level = parts.level
    rows = []
    for k in names:
        f = fits[k]
        on_path = f.pred[n_fixed : n_fixed + u_path.size]
        curve = np.asarray(on_path, dtype=np.float64) - max(0.0, float(f.pred[1]) - level)
        if share is not None and u_t > 1.0:
            extra = share * (float(f.pred[0]) - float(f.pred[2]))
            curve = curve + extra * np.clip((u_path - 1.0) / (u_t - 1.0), 0.0, 1.0)
        rows.append(np.minimum(curve, level) if training_loss else curve)
    pv = np.stack(rows)
    raw = wv @ pv
    # the horizon's share of the predicted drop, so the path ends where the forecast does
    mean = level - parts.drop_shrink * (level - raw)
    sd = np.empty_like(mean)
    for i, (u, m) in enumerate(zip(u_path, raw, strict=True)):
        at = Parts(
            level=level,
            remaining=max(0.0, 1.0 - 1.0 / u),
            reach=reach_of(float(u)),
            spread=float(np.sqrt(wv @ (pv[:, i] - m) ** 2)),
            drop=abs(level - float(m)),
            holdout_err=parts.holdout_err,
            lr_shape=parts.lr_shape,
        )
        sd[i] = interval_sd(at, n)
    parts.path_mean, parts.path_sd = mean, sd


def _anneal_warning(parts: Parts, fits: Mapping[str, Any], names: list[str], wv: FloatArray) -> str:
    """The anneal prior's warning, with what a constant LR would give instead.

    Before a decay shows, the loss cannot tell a run whose LR will anneal from one whose LR stays
    constant: a warmup-stable-decay run is a constant-LR run until its cooldown, and a cosine's
    early decay is lost in the noise. Measured on the synthetic runs (seeds 0-14, at 20-80% of the
    run), the held-out tail's bias and the fit of the schedule-aware law under either schedule
    spread alike for constant, cosine and warmup-stable-decay runs. 117 of the 126 development
    fine-tunes that log their LR (20 points or more) decay it, so the forecast keeps the anneal; the
    constant-LR end (the fits read at the horizon itself, from the current level as the forecast
    is) is named so that a run known to keep its LR can be read right.
    """
    level = parts.level
    plain = float(
        wv @ np.array([float(fits[k].pred[2]) - max(0.0, float(fits[k].pred[1]) - level) for k in names])
    )
    return (
        f"learning rates unknown: assumed the LR anneals by total_steps; with a constant LR the end "
        f"would be near {plain:.4g} (the loss so far cannot tell the two apart: pass the learning "
        f"rates to decide)"
    )


def _anneal_share(tail_bias_z: float) -> float:
    """How much of the assumed anneal's extra drop (the stretched horizon) to keep, when the
    learning rates are unknown. The stretch stands for an LR decay the history has not shown yet.
    Once a decay is under way, the recent points fall clearly faster than the fits on the earlier
    history expected (a tail bias of more than ``ACCEL_Z`` standard errors), and the fits' own
    slope already carries part of that decay: stretching it in full would count it twice."""
    if math.isfinite(tail_bias_z) and tail_bias_z > cal.ACCEL_Z:
        return cal.ACCEL_SHARE
    return 1.0
