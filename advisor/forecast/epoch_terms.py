"""The epoch boundaries in a forecast: how many the fits count, what the ones ahead are worth.

A multi-epoch run's training loss steps down at each boundary (``epochs`` reads where they are);
the fits carry a term per boundary crossed (``fit_engine``). Whether the boundaries *ahead* promise
a step the plateau question can see is judged here, by the fits and by the last boundary crossed,
so that ``core`` (the plateau rule) and the ensemble's warning say the same of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from advisor.forecast import calibration as cal
from advisor.forecast import epochs as epoch_track
from advisor.forecast._prep import Prepared

if TYPE_CHECKING:
    from advisor.forecast.ensemble import Parts

__all__ = [
    "EPOCH_NOTE_SHARE",
    "epoch_boundaries",
    "epoch_boundaries_ahead",
    "epoch_drop",
    "epoch_step_expected",
    "epoch_warning",
]

FloatArray = NDArray[np.float64]


def epoch_boundaries(
    prep: Prepared, x: FloatArray, horizon: float | None, path_steps: FloatArray
) -> tuple[FloatArray | None, float, FloatArray]:
    """Completed epoch boundaries at the fitted points, the expected count at the horizon and at
    each of ``path_steps``, when the history has crossed at least one (see ``epochs`` for the two
    conventions)."""
    column = epoch_track.boundary_column(prep.steps, prep.epochs, x, horizon)
    track = epoch_track.track(prep.steps, prep.epochs)
    if column is None or track is None:
        return None, 0.0, np.zeros(0)
    count, future = column

    def expected(ahead: int) -> float:
        # later epochs teach less: each future boundary gives EPOCH_DECAY of the one before. The
        # geometric sum in closed form: a horizon billions of steps away holds billions of
        # boundaries, and summing them one by one held the forecast for minutes
        return float(count[-1]) + _geometric(cal.EPOCH_DECAY, ahead)

    ahead = [min(future, epoch_track.boundaries_ahead(track, float(s))) for s in path_steps]
    at_path = np.array([expected(k) for k in ahead])
    return count, expected(future), at_path


def _geometric(ratio: float, terms: int) -> float:
    """``ratio + ratio**2 + ... + ratio**terms`` (0 for no terms), in constant time."""
    if terms <= 0:
        return 0.0
    if ratio == 1.0:
        return float(terms)
    return ratio * (1.0 - ratio**terms) / (1.0 - ratio)


#: the boundaries ahead are worth a warning when the fits put at least this share of the level on
#: them (the 1% of the plateau definition: less changes no verdict the forecast gives)
EPOCH_NOTE_SHARE = 0.01


def epoch_drop(fits: Mapping[str, Any], names: list[str], wv: FloatArray) -> float:
    """The drop the fits put on the epoch boundaries ahead: their value at the horizon with the
    boundaries ahead against without them (the last prediction point)."""
    # 0.0 - x, not -x: no drop at all is 0, not the -0 a message printed ("-0 of the forecast")
    return 0.0 - float(wv @ np.array([float(fits[k].pred[0]) - float(fits[k].pred[-1]) for k in names]))


def epoch_step_expected(parts: Parts) -> bool:
    """Whether the epoch boundaries ahead bring a step down the plateau question can see:
    ``EPOCH_NOTE_SHARE`` of the level (its 1%) or more. Not when the fits put less than that on
    them (the boundaries crossed showed none worth the name), nor when the last boundary crossed
    took less: each boundary teaches less than the one before (``EPOCH_DECAY``), so one that
    brought no step promises none ahead (the fits read one step per boundary off all of those
    crossed, and the first, in the fall, lent them one a flat run had stopped taking). Unknown (no
    boundary crossed yet to read a step from) counts as expected."""
    band = EPOCH_NOTE_SHARE * abs(parts.level)
    if not math.isfinite(parts.epoch_drop):
        return True
    return parts.epoch_drop >= band and not parts.last_boundary_drop < band  # NaN: not measured


def epoch_warning(ahead: int, parts: Parts) -> str:
    """The boundaries ahead, as the fits read the ones crossed: a step down at each was measured,
    or none was (a smooth loss whose epochs change nothing: 'expects 8 more epoch boundary drops'
    on such a run promised what its own history had shown not to happen)."""
    if ahead <= 0:
        return ""
    if epoch_step_expected(parts):
        return (
            f"expects {ahead} more epoch boundary drop(s) before total_steps "
            f"(together {parts.epoch_drop:.3g} of the forecast, each smaller than the one before)"
        )
    if parts.epoch_drop >= EPOCH_NOTE_SHARE * abs(parts.level):
        return (
            f"{ahead} more epoch boundaries before total_steps: the last one crossed took no step down "
            f"of 1% of the loss (the loss {'rose' if parts.last_boundary_drop < 0 else 'fell'} "
            f"{abs(parts.last_boundary_drop):.2g} there), so none is expected of them; the fits, reading "
            f"every boundary crossed, put {parts.epoch_drop:.2g} of the forecast on them"
        )
    return (
        f"{ahead} more epoch boundaries before total_steps: the ones crossed showed no step down of "
        f"1% of the loss, and {max(parts.epoch_drop, 0.0):.2g} of the forecast is on them"
    )


def epoch_boundaries_ahead(prep: Prepared, horizon: float | None) -> int:
    """How many epoch boundaries lie between the last point and ``horizon`` at the observed
    epochs-per-step rate (0 when epochs or the horizon are unknown)."""
    t = epoch_track.track(prep.steps, prep.epochs)
    return 0 if t is None else epoch_track.boundaries_ahead(t, horizon)
