"""The few constants that turn the ensemble's point forecast into a calibrated 80% interval.

Why constants, and where they come from: a residual band only says how well a curve fits the
past; the error that matters is extrapolation error, which no in-sample statistic measures. So the
interval is built from a scale with three scale-free ingredients, each with a reason to exist,

    scale**2 = (K_SPREAD * ensemble_spread)**2           # families disagree: ill-determined
             + (K_DROP * predicted_remaining_drop)**2     # a large drop is a lever for a wrong curvature
             + (K_HOLDOUT * tail_error * reach)**2        # this curve's own extrapolation skill
             + (REL_FLOOR * |level|)**2                   # a "final loss" is itself a noisy number

where ``tail_error`` is the ensemble's RMS error when it predicted the held-out tail of this very
history and ``reach`` is how much further the forecast reaches than that tail did. The 80% half-width
is then ``Q(remaining) * scale``: ``Q`` is the 80% quantile of |error| / scale on the tuning half
of the development curves, split by run group so seed repeats never straddle the split, each run
group weighted alike (a user's run is a new run group: one group's many seed repeats must not set
the quantile alone), tabulated against the remaining fraction of the run (the extrapolation
distance) and interpolated linearly. The held-out half only checks it. Histories of fewer than
``SMALL_N`` points have no tail to hold out; their half-width is a tabulated fraction of the
current level instead, found the same way (no history that short is left at 30% or 50% of the run
left, so those knots repeat the one at 70%). ``bench/calibrate_forecast.py`` re-measures the knots
and the coverage they give on each half. The halves differ (their run groups saturate
differently): on the held-out half these knots cover 0.68 of the pre-training outcomes with 30% of
the run left and 0.72-0.89 earlier (measured Dec 6; knots set before then took the larger of the
two halves' quantiles, the held-out half's among them, and are not used).

There are two sets of ``Q`` knots, one per model path, because the two paths err differently: with
learning rates the ensemble holds the schedule-aware law and reads the fits at the true horizon;
without them it reads saturating fits at a stretched horizon (the anneal prior below). On the
development curves the one pooled set of earlier stops covered 0.92-0.95 of the pre-training
outcomes at 70-80% of the run left and 0.66-0.78 of the fine-tuning ones (which report their
learning rates); re-measured on the current fit engine, still pooled, the fine-tuning coverage fell
to 0.31-0.47. So each path now has its own: ``Q_KNOTS`` without learning rates (measured on 295
pre-training curves), ``Q_KNOTS_SCHEDULE`` with them (32 fine-tuning series, so 5-22 forecasts per
knot and split: wide and conservative, to be re-measured as curves with learning rates are added).
The short-history knots stay pooled (the fine-tuning series give too few short histories to
measure them apart).
``Q_SMALL`` widens the short-history rule where the families disagree or predict a large drop. A
sparse eval series (a fine-tune evaluating a handful of times) spends its first cuts below
``SMALL_N`` points, and there the fixed 2-3% of the level held the outcome only now and then (on
the tuning half's fine-tunes all eval cut points together were covered 0.17 of the time, 0.47 once
their learning rates were passed, 0.78 with this rule and 0.74 with the drop weighting of
``interval.drop_shrink`` as well): with three to seven points the families' predictions spread over
tens of percent, and the error follows them. The scale is the one above without its
holdout term (no tail to hold out), and the multiplier is its split-conformal 80% quantile on the
tuning half's short histories (3-7 points), the finite-sample rule that keeps the 80% promise for a
new history exchangeable with those: the ceil(0.8 * (m + 1))-th smallest |error| / scale of m. Per
model path again, because the paths err differently here too: with learning rates
(``Q_SMALL_SCHEDULE``, 56 fine-tuning train and eval histories) 1.06 (the plain 80% quantile is
0.79), without them (``Q_SMALL``, 127 pre-training validation histories) 0.38, as on the held-out
half (0.38; there the fine-tunes' is 1.49). The half-width is the larger of the two rules, so the
histories the relative rule was measured on keep at least their interval.
These are conformal-style calibration constants: they make no
claim about the shape of the error distribution, only about its 80% quantile at each distance.

``ANNEAL_STRETCH``/``ANNEAL_POWER`` are the schedule prior used when ``total_steps`` is known but the
learning rates are not: fixed-budget runs nearly always decay the LR to (near) zero by the end, and an
annealed run reaches the loss a constant-LR run would reach only after more steps (Tissue et al. 2024's
annealing-area term; Hägele et al. 2024 on cooldowns). The fits are therefore read at a stretched
horizon ``(1 + ANNEAL_STRETCH * (T/now - 1)) ** ANNEAL_POWER`` (in units of the current step) instead of
at ``T``; the two constants were chosen on the tuning split (re-swept when the holdout fit moved
into the full fit's products: ANNEAL_POWER 1.5 -> 1.375 lowered the tuning half's worst-cut median
error from 2.9% to 2.5%, and the held-out half's from 3.0% to 2.6%).

``ACCEL_Z``/``ACCEL_SHARE`` keep the same prior from counting a decay twice. The stretch stands for an
LR decay not yet seen; once a decay is under way (a cooldown begun, the second half of a cosine) the
recent points fall faster than the fits on the earlier history expected, and the fits' slope already
carries part of the decay. So when the held-out tail's bias exceeds ``ACCEL_Z`` standard errors, only
``ACCEL_SHARE`` of the stretch's extra drop is kept. Late in a run this was the prior's main error:
with 30% of the run left it over-predicted the remaining drop of the development curves' validation
losses (median bias -1.1%), while at half the run it under-predicted (+0.9%), so a gentler prior
everywhere would not have helped. Chosen as a step on the tuning split (thresholds 2..5, shares
0.5..0.9, the mean ratio to the pow3 baseline over cuts 0.2..0.7), then checked on the held-out
half: median error at 30% left 1.31% -> 0.87% (tuning) and 1.37% -> 1.05% (held out), at half the
run 0.82% -> 0.88% and 1.45% -> 1.52%.

``SKIP_WARMUP`` belongs to the same prior. Fixed-budget runs set their warmup as a fraction of the
budget (a few percent is the common choice), and the loss falls in a fast transient during and just
after it, a regime no saturating family in the step number describes; fitted together with the
slow phase it bends every family's extrapolation (early cuts over-predicted the drop by ~8% on noisy
per-step curves, which sample that transient densely). With learning rates the schedule-aware law
models warmup through the cumulative LR, so the skip applies only when they are unknown. It was
swept on the tuning split (0.02..0.08) and checked on the held-out half; ``SKIP_MAX`` keeps very
early forecasts from discarding most of a short history.
"""

from __future__ import annotations

Z80 = 1.2815515655446004  # standard normal quantile of 0.9

K_SPREAD = 1.0
K_DROP = 0.3
K_HOLDOUT = 0.5
#: relative floor of the scale (measurement noise of a "final loss" itself)
REL_FLOOR = 0.002

#: remaining fraction of the run (1 - now/T) at which the quantile multipliers were measured
REM_KNOTS = (0.3, 0.5, 0.7, 0.8, 0.9)
#: 80% quantile of |error| / scale at those distances (histories of >= SMALL_N points), without
#: learning rates (the anneal prior's path)
Q_KNOTS = (0.78, 0.75, 0.66, 0.70, 0.53)
#: the same with learning rates (the schedule-aware law's path)
Q_KNOTS_SCHEDULE = (2.36, 1.00, 1.80, 1.50, 0.90)
#: below this many points there is no tail to hold out
SMALL_N = 8
#: 80% quantile of |error| / |level| at those distances, for histories shorter than SMALL_N
SMALL_REL_KNOTS = (0.038, 0.038, 0.038, 0.040, 0.202)
#: histories shorter than SMALL_N: the half-width is also at least Q_SMALL (without learning rates)
#: or Q_SMALL_SCHEDULE (with them) times the scale without its holdout term (see the module docstring)
Q_SMALL = 0.38
Q_SMALL_SCHEDULE = 1.06

#: the predicted drop of a short schedule-path history is weighted by how well the families agree
#: on it (``interval.drop_shrink``) only once less than this fraction of the run is left: before, the
#: loss is in its fast first fall and the families already under-predict it (chosen on the tuning
#: half: all four tuning-half histories the weighting changed at a tenth of the run got worse, the
#: later cuts better; the value lies between the benchmark's cuts at a tenth and a fifth of the run)
SHRINK_BELOW_REMAINING = 0.85

ANNEAL_STRETCH = 1.5
ANNEAL_POWER = 1.375
#: the tail bias (in standard errors) above which a history counts as accelerating (an LR decay
#: already under way, unseen), and the share of the anneal stretch's extra drop then kept
ACCEL_Z = 3.0
ACCEL_SHARE = 0.7

#: recency weighting of points in the fit: weight = exp(RECENCY * u), u in (0, 1]
RECENCY = 2.0
#: the first fraction of the observed steps is a fast transient that no family models well
SKIP_START = 0.05
#: without learning rates, the first fraction of a fixed-budget run (warmup and the fast transient
#: after it) is left out of the fits too, but never more than SKIP_MAX of the observed steps
SKIP_WARMUP = 0.05
SKIP_MAX = 0.25
#: the last fraction of the observed steps scores each family's extrapolation
HOLDOUT = 0.4
#: the farthest horizon, in units of the current step, the interval's extrapolation term grows to
#: (``interval.reach_of``): its growth with the reach is measured out to a tenth of the run (the
#: last of ``REM_KNOTS``) and the benchmarks' forecasts reach 14 times the current step at most;
#: a decade past that, nothing measures it, and carried on it put a loss near 2 at 3.5e24 told a
#: total of 1e30 steps. Farther horizons are read with this one's reach
MAX_REACH_U = 100.0
#: how sharply holdout skill separates families: weight = prior * exp(-S * z**2), z = excess error
SKILL_SHARPNESS = 1.0
#: the ensemble's mean error on the held-out tail, in standard errors, at or below which the local
#: plateau test is consulted even when the fits find a plateau unlikely: the tail did not fall faster
#: than the fits expected, so the recent trend's continuation over-states what is left (see ``plateau``).
#: Half a standard error, not 0: on a loss flat within 3.5% report noise the tail's error sits at
#: 0 give or take one, so at 0 the test was consulted on every other report, and STATE read
#: plateaued and learning by turns (a platform trial: 5 LearningState Events in 5 minutes; on ten
#: such curves 51 label flips in 250 re-forecasts, 45 at 0.5, the same at 1 and 2). Chosen on the
#: tuning seeds 0-14 (31.4% saved at 69 / 45 / 32 wrong stops against 31.3% at 69 / 46 / 32); the
#: development curves' errors, coverage and Brier are unchanged to the digit
FLATTENED_Z = 0.5
#: Huber reweighting passes of the final fit (the holdout fit uses one)
IRLS_PASSES = 1
#: size of each further epoch-boundary drop relative to the previous one
EPOCH_DECAY = 0.5
