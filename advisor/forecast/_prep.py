"""Turn whatever a caller hands us into clean, sorted float arrays, without ever raising.

Progress data arrives from log scrapers, annotations and files written by other people's code:
strings, NaN, infinities, duplicated steps, unsorted rows, restarts from a checkpoint. The numerics
downstream assume finite, strictly increasing steps inside one contiguous segment, so this module is
where every such defect is repaired or dropped, and counted in a warning instead of raised.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from advisor.forecast.robust import average_repeats, fast_median, report_noise
from advisor.model import EPOCH_MS_FLOOR, MALFORMED_BACKS, backwards_run

FloatArray = NDArray[np.float64]

#: the warning of a history whose step keeps going back (``advisor.model.backwards_run``)
MALFORMED_WARNING = "the reported step keeps going backwards"


@dataclass
class Prepared:
    """One cleaned history: the segment that is fitted, plus what was learned while cleaning."""

    steps: FloatArray
    values: FloatArray
    times: FloatArray | None
    lrs: FloatArray | None
    epochs: FloatArray | None
    n_input: int
    n_dropped: int
    #: non-finite losses among the last tenth of the points (at least 3) ...
    n_nonfinite_tail: int
    #: ... and how many of them come after the last finite one (the run has not recovered)
    n_nonfinite_trailing: int
    tail_size: int
    n_segments: int
    context_values: FloatArray
    warnings: list[str] = field(default_factory=list)
    #: the restart segment of each kept point (None: one segment): a resumed segment joined to
    #: the attempt it resumed from has a gap of wall time at the join that is no training pace
    segment_ids: NDArray[np.intp] | None = None
    #: steps and times of the reports after the last finite loss that still moved the run on
    #: (a run logging NaN keeps stepping): its pace and position, which the ETA reads, not its loss
    trailing_steps: FloatArray = field(default_factory=lambda: np.zeros(0))
    trailing_times: FloatArray = field(default_factory=lambda: np.zeros(0))
    #: added to every step the caller gave (``shifted_axis``): 0 unless all of them were negative
    step_offset: float = 0.0


def reports_of(prep: Prepared, part: slice) -> Prepared:
    """``prep`` with its per-report arrays cut to ``part`` (steps, values, times, learning rates,
    epochs, restart segments), the rest as it was: the history after a jump (``jump.after_jump``)
    and before a blow-up (``divergence.recovered_end``) are read as runs of their own."""

    def cut(a: Any) -> Any:
        return None if a is None else a[part]

    return dataclasses.replace(
        prep,
        steps=prep.steps[part],
        values=prep.values[part],
        times=cut(prep.times),
        lrs=cut(prep.lrs),
        epochs=cut(prep.epochs),
        segment_ids=cut(prep.segment_ids),
        warnings=list(prep.warnings),
    )


def progress_reports(prep: Prepared) -> tuple[FloatArray, FloatArray | None, NDArray[np.intp] | None]:
    """Steps, times and restart segments of every report that placed the run: the kept history
    and the reports after its last finite loss that went on from it (``Prepared.trailing_steps``),
    the pace and position an ETA reads."""
    n = prep.trailing_steps.size
    if not n or prep.times is None:
        return prep.steps, prep.times, prep.segment_ids
    seg = prep.segment_ids
    if seg is not None:
        seg = np.r_[seg, np.full(n, seg[-1] if seg.size else 0, dtype=seg.dtype)]
    return np.r_[prep.steps, prep.trailing_steps], np.r_[prep.times, prep.trailing_times], seg


def _to_float(x: Any) -> float:
    """Coerce one element; anything unusable becomes NaN (counted by the caller). A complex number
    is read by ``_say_complex``'s rule (its real part when its imaginary part is 0), never by
    ``float``, which numpy lets through with a ComplexWarning on stderr and the imaginary part
    silently discarded."""
    if isinstance(x, bool):
        return float("nan")
    if isinstance(x, complex | np.complexfloating):
        return float(x.real) if x.imag == 0 else float("nan")
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


_FLOAT_ONLY = frozenset({float})


def to_array(seq: Any, name: str = "", warnings: list[str] | None = None) -> FloatArray | None:
    """An array-like (list, tuple, numpy array, generator of strings...) as a float array.
    Complex numbers among it are said in ``warnings`` under ``name`` (see ``_say_complex``)."""
    if seq is None:
        return None
    if isinstance(seq, np.ndarray) and seq.dtype.kind in "fiu":
        return np.asarray(seq, dtype=np.float64).ravel()
    if isinstance(seq, np.ndarray) and seq.dtype.kind == "c":
        return _real_parts(seq.ravel().astype(np.complex128), name, warnings)
    if isinstance(seq, str | bytes) or not isinstance(seq, Iterable):
        seq = [seq]
    if isinstance(seq, list | tuple) and set(map(type, seq)) <= _FLOAT_ONLY:
        # the adapters' histories are plain floats: skip the per-element coercion
        return np.array(seq, dtype=np.float64)
    try:
        items = list(seq)
        out = np.asarray([_to_float(v) for v in items], dtype=np.float64)
    except Exception:  # pragma: no cover - defensive: an iterable that raises while iterating
        return np.zeros(0)
    held = [v for v in items if isinstance(v, complex | np.complexfloating)]
    if held:
        _say_complex(name, len(held), sum(1 for v in held if v.imag != 0), warnings)
    return out


def _real_parts(z: NDArray[np.complex128], name: str, warnings: list[str] | None) -> FloatArray:
    """Complex numbers as reals (``_say_complex``'s rule), said in ``warnings`` under ``name``."""
    imaginary = z.imag != 0
    _say_complex(name, z.size, int(imaginary.sum()), warnings)
    return np.where(imaginary, np.nan, z.real).astype(np.float64)


def _say_complex(name: str, k: int, imaginary: int, warnings: list[str] | None) -> None:
    """Say that a series held ``k`` complex numbers, ``imaginary`` of them with an imaginary part.

    A loss, a step or a time is a real number. A complex one whose imaginary part is 0 is that
    real number in a complex container (a value computed through complex arithmetic): it is read
    as its real part. One with an imaginary part is no such number: NaN, dropped and counted with
    the other unusable values. Either is said in the forecast's own warnings, where numpy's cast
    printed a ComplexWarning on stderr and dropped the imaginary parts unsaid."""
    if warnings is None or not k:
        return
    what = name or "a series"
    if imaginary:
        warnings.append(
            f"{what} holds {k} complex number(s), {imaginary} with a non-zero imaginary part: those are "
            "no real number and are dropped; the rest are read as their real part"
        )
    else:
        warnings.append(f"{what} holds {k} complex number(s) with no imaginary part: read as real numbers")


def _optional(arr: FloatArray | None, n: int, name: str, warnings: list[str]) -> FloatArray | None:
    if arr is None:
        return None
    if arr.size != n:
        warnings.append(f"{name} has {arr.size} entries for {n} points; ignored")
        return None
    return arr


def _epoch_seconds(times: FloatArray | None, warnings: list[str]) -> FloatArray | None:
    """``times`` in seconds: epoch milliseconds read as such. Every finite time beyond
    ``EPOCH_MS_FLOOR`` (the year 5138 in seconds, which no epoch-seconds date or elapsed time
    reaches) is an epoch-ms clock, the sources' rule for a time column: read as seconds they made
    every step take 1,000 times as long (an ETA of a week for a run ten minutes from its end), and
    nothing said so. A history only some of whose times are that large is left as it is."""
    if times is None:
        return None
    finite = times[np.isfinite(times)]
    if not finite.size or float(finite.min()) <= EPOCH_MS_FLOOR:
        return times
    warnings.append(f"times are epoch milliseconds ({float(finite[0]):.4g}): read as ms")
    return times / 1000.0


def looks_unsorted(n_segments: int, n_points: int) -> bool:
    """Whether a history whose step goes back ``n_segments - 1`` times over ``n_points`` is an
    unsorted one rather than one with restarts: restarts are rare events."""
    return n_segments > max(3, n_points // 10)


def segment_starts(steps: FloatArray) -> list[int]:
    """Indices where a new restart segment begins: the step goes backwards (a resume from an
    earlier checkpoint). Duplicated steps are not a restart."""
    if steps.size < 2:
        return [0]
    back = np.nonzero(np.diff(steps) < 0)[0] + 1
    return [0, *back.tolist()]


def _malformed_tail(starts: list[int], size: int, warnings: list[str]) -> int:
    """How many of the latest of ``size`` points (``starts``: where each segment begins) are
    malformed progress reports, their step going back report after report
    (``advisor.model.backwards_run``); 0 when fewer than ``MALFORMED_BACKS`` did. Such reports are
    no run of restarts, and no trend either: the caller leaves them out, and the warning says so."""
    backs = backwards_run(starts, size) if starts and starts[0] == 0 else 0
    if backs < MALFORMED_BACKS:
        return 0
    warnings.append(
        f"{MALFORMED_WARNING}, report after report: malformed progress, not restarts; the "
        "forecast reads the run as it stood before those reports"
    )
    return backs


#: a resumed segment continues the one before when its first reports sit within this many noise
#: units (plus RESUME_BAND of the level) of the earlier segment's last reports before the resume step
RESUME_Z = 3.0
RESUME_BAND = 0.02
_RESUME_POINTS = 5


def _splice_resumed(
    s: FloatArray, v: FloatArray, idx: NDArray[np.intp], starts: list[int], keep: NDArray[np.intp]
) -> tuple[NDArray[np.intp], int]:
    """Join the last segment to the earlier ones it resumed from, back to the first jump.

    A step going backwards is a resume from a checkpoint. The points the earlier attempt logged
    *before* that checkpoint's step are the same run's history (the weights the resume loaded came
    from there); only those after it were lost work. Fitting the resumed segment alone throws the
    start of the curve away: a run resumed late in its budget then shows only its slow tail, which
    fast-saturating families read as a plateau. But a resume can also change the curve (a new
    learning rate, a reset optimiser, another dataset): then the loss jumps at the resume, and the
    segments are fitted apart, as before. So a segment is joined only where the level carries on:
    its first reports within noise of what the earlier attempt logged at the same steps. Returns
    the kept indices (ascending in step) and the number of joins."""
    ends = [*starts[1:], int(idx[-1]) + 1]
    joined = 0
    for j in range(len(starts) - 2, -1, -1):
        first_step = float(s[keep[0]])
        prev = idx[(idx >= starts[j]) & (idx < ends[j])]
        before = prev[s[prev] < first_step]
        if before.size < 2:
            continue  # an attempt that never got past this resume step adds nothing before it
        # the earlier attempt at the resumed segment's first steps: it logged them too (the lost
        # work) unless it stopped right at the checkpoint, where its last reports stand in
        head = keep[:_RESUME_POINTS]
        order = np.argsort(s[prev], kind="stable")
        was = np.interp(s[head], s[prev][order], v[prev][order])
        jump = float(np.median(v[head] - was))
        recent = v[keep[: 4 * _RESUME_POINTS]]
        noise = report_noise(recent) if recent.size > 2 else 0.0
        if abs(jump) > RESUME_Z * noise + RESUME_BAND * abs(float(np.median(was))):
            break
        keep = np.concatenate((before, keep))
        joined += 1
    return keep, joined


def prepare(
    steps: Any,
    values: Any,
    times: Any = None,
    learning_rates: Any = None,
    epochs: Any = None,
    segments: Iterable[int] | None = None,
) -> Prepared:
    """Clean a history and keep its last restart segment (earlier segments become context)."""
    warnings: list[str] = []
    s = to_array(steps, "steps", warnings)
    v = to_array(values, "values", warnings)
    s = np.zeros(0) if s is None else s
    v = np.zeros(0) if v is None else v
    n_in = max(s.size, v.size)
    if s.size != v.size:
        warnings.append(f"steps ({s.size}) and values ({v.size}) differ in length; truncated")
        m = min(s.size, v.size)
        s, v = s[:m], v[:m]
    n = s.size
    t = _epoch_seconds(_optional(to_array(times, "times", warnings), n, "times", warnings), warnings)
    lr = _optional(to_array(learning_rates, "learning_rates", warnings), n, "learning_rates", warnings)
    ep = _optional(to_array(epochs, "epochs", warnings), n, "epochs", warnings)

    # A value orders of magnitude beyond the rest is an overflow written as a number (fp16's 65504,
    # 1e308): kept, one such point took every curve family off the history for good. It counts as
    # a non-finite value (divergence evidence by its share, see ``divergence.divergence_probability``).
    finite = np.isfinite(v)
    if finite.sum() >= 3:
        scale = fast_median(np.abs(v[finite]))
        huge = finite & (np.abs(v) > OVERFLOW_FACTOR * max(scale, 1e-12))
        if huge.any():
            warnings.append(
                f"{int(huge.sum())} value(s) over {OVERFLOW_FACTOR:g} times the series' typical size "
                "taken for overflows and dropped"
            )
            v = np.where(huge, np.inf, v)
    # Non-finite losses near the end are a divergence signal: count them before dropping.
    nonfinite = ~np.isfinite(v)
    tail = max(3, n // 10)
    n_nonfinite_tail = int(nonfinite[-tail:].sum()) if n else 0
    finite_at = np.flatnonzero(~nonfinite)
    n_nonfinite_trailing = n - 1 - int(finite_at[-1]) if finite_at.size else n

    s, offset = shifted_axis(s, warnings)
    ok = np.isfinite(s) & np.isfinite(v) & (s >= 0)
    n_bad = int(n - ok.sum())
    if n_bad:
        warnings.append(DROPPED_WARNING.format(n=n_bad))

    # Restart segments: given by the caller, or detected on the raw order of finite steps.
    idx = np.nonzero(ok)[0]
    if segments is not None:
        starts = sorted({int(i) for i in segments if 0 <= int(i) < n})
        backs = _malformed_tail(starts, n, warnings)
        if backs:
            idx, starts = idx[idx < starts[-backs]], starts[:-backs]
        last_raw = idx[-1] if idx.size else 0
        starts = [i for i in starts if i <= last_raw] or [0]
        n_segments = max(1, len(starts))
    else:
        local = segment_starts(s[idx])
        n_segments = len(local)
        if looks_unsorted(n_segments, idx.size):
            # restarts are rare events; steps going back this often are an unsorted history
            warnings.append(
                f"steps go backwards {n_segments - 1} times: treated as unsorted, not as restarts; "
                "sorted them"
            )
            local, n_segments = [0], 1
        backs = _malformed_tail(local, idx.size, warnings)
        if backs:
            idx, local = idx[: local[-backs]], local[:-backs]
            n_segments = len(local)
        starts = [int(idx[i]) for i in local] if idx.size else [0]
    keep = idx[idx >= starts[-1]]
    spliced = 0
    if n_segments > 1 and keep.size:
        keep, spliced = _splice_resumed(s, v, idx, starts, keep)
    # one segment (the usual case) has no context
    context = np.zeros(0) if keep.size == idx.size else v[idx[~np.isin(idx, keep)]]
    if n_segments > 1:
        if spliced:
            warnings.append(
                f"restart detected ({n_segments} segments); {spliced} resumed from a checkpoint of an "
                "earlier attempt and was joined to that attempt's history up to the checkpoint's step "
                "(its reports after it, lost work, are left out)"
            )
        else:
            warnings.append(f"restart detected ({n_segments} segments); fitted the last one only")

    # Repeated reports of a step in a row (gradient accumulation logs each micro-batch under its
    # optimizer step) are one step's loss measured several times: their mean stands for it (the
    # last alone was 8.7% off a 4-micro-batch run's loss, and twice as noisy). Each report stands
    # in for the last of the run (its time, learning rate and epoch).
    keep, v_keep, n_averaged = _average_repeats(s, v, keep)
    if n_averaged:
        warnings.append(f"merged {n_averaged} duplicated step(s): averaged each step's consecutive reports")
    s2, v2 = s[keep], v_keep
    seg2 = np.searchsorted(np.asarray(starts), keep, side="right") if spliced else None
    t2 = t[keep] if t is not None else None
    lr2 = lr[keep] if lr is not None else None
    ep2 = ep[keep] if ep is not None else None
    if s2.size > 1 and not bool((s2[1:] > s2[:-1]).all()):  # the usual history needs neither step
        order = np.argsort(s2, kind="stable")
        if np.any(np.diff(order) < 0) and not any("treated as unsorted" in w for w in warnings):
            warnings.append("steps were not sorted; sorted them")
        s2, v2 = s2[order], v2[order]
        t2 = t2[order] if t2 is not None else None
        lr2 = lr2[order] if lr2 is not None else None
        ep2 = ep2[order] if ep2 is not None else None
        seg2 = seg2[order] if seg2 is not None else None

        # Duplicated steps apart in the history (an unsorted one): keep the last report of each
        # step (the freshest value).
        last_of = np.r_[s2[1:] != s2[:-1], True]
        n_dup = int((~last_of).sum())
        if n_dup:
            warnings.append(f"merged {n_dup} duplicated step(s)")
            s2, v2 = s2[last_of], v2[last_of]
            t2 = t2[last_of] if t2 is not None else None
            lr2 = lr2[last_of] if lr2 is not None else None
            ep2 = ep2[last_of] if ep2 is not None else None
            seg2 = seg2[last_of] if seg2 is not None else None

    n_dropped = n_in - s2.size - context.size
    trail_s, trail_t = _trailing_progress(s, t, finite_at, s2)
    return Prepared(
        steps=s2,
        values=v2,
        times=t2,
        lrs=lr2,
        epochs=ep2,
        n_input=n_in,
        n_dropped=int(max(0, n_dropped)),
        n_nonfinite_tail=n_nonfinite_tail,
        n_nonfinite_trailing=n_nonfinite_trailing,
        tail_size=tail,
        n_segments=n_segments,
        context_values=context,
        warnings=warnings,
        segment_ids=seg2,
        trailing_steps=trail_s,
        trailing_times=trail_t,
        step_offset=offset,
    )


def shifted_axis(steps: FloatArray, warnings: list[str]) -> tuple[FloatArray, float]:
    """``steps`` with every one moved up by the offset that puts the first at 0 when all of them
    are negative, and that offset (0 otherwise).

    A step counts the run's updates and is never negative, so a negative step among positive ones
    is a garbled report and is dropped. But a history whose every step is negative is no set of
    garbled reports: it counts from another origin (steps relative to a reference point, a counter
    that starts below zero), and dropping all of it left no forecast at all. Read relative to its
    first step it is a curve like any other; the caller's steps (``total_steps``, ``last_step``)
    stay on the caller's axis, moved by the same offset, and the warning says so."""
    finite = steps[np.isfinite(steps)]
    if not finite.size or float(finite.max()) >= 0.0:
        return steps, 0.0
    first = float(finite.min())
    warnings.append(
        f"every step is negative ({first:,.0f} to {float(finite.max()):,.0f}): read as steps counted from "
        f"another origin, relative to the first (as steps 0 to {float(finite.max()) - first:,.0f}); "
        "total_steps is read on the same axis as the steps"
    )
    return steps - first, -first


def _trailing_progress(
    s: FloatArray, t: FloatArray | None, finite_at: NDArray[np.intp], kept: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """The reports after the last finite loss whose step and time go on from the kept history's
    last point, each past the one before (a step back among them is a restart, whose pace is
    not the run's): with them a run that went on in NaN is paced and placed where it stands, not
    where its loss was last finite (its ETA stayed the last forecast's, "2m", for 22 minutes)."""
    empty = np.zeros(0)
    if t is None or not kept.size:
        return empty, empty
    after = int(finite_at[-1]) + 1 if finite_at.size else 0
    ts, tt = s[after:], t[after:]
    if not ts.size:
        return empty, empty
    last = float(kept[-1])
    ok = np.isfinite(ts) & np.isfinite(tt)
    ts, tt = ts[ok], tt[ok]
    moved = ts > np.r_[last, ts[:-1]]  # (reports after the first that does not move are cut anyway)
    if not moved.all():
        # the first report that does not move past the one before ends the run of reports read
        stop = int(np.argmin(moved))
        ts, tt = ts[:stop], tt[:stop]
    return ts, tt


def _average_repeats(
    s: FloatArray, v: FloatArray, keep: NDArray[np.intp]
) -> tuple[NDArray[np.intp], FloatArray, int]:
    """``average_repeats`` over the kept points in their order: the indices left (each run's
    last), their values, and how many reports were merged into another."""
    if keep.size < 2 or bool((s[keep][1:] != s[keep][:-1]).all()):
        return keep, v[keep], 0
    last, means = average_repeats(s[keep], v[keep])
    return keep[last], means, int(keep.size - last.sum())


#: the forecast's count of the points it could not read (a reader that counted them already may
#: leave it out: ``advisor.commands.forecast_output``)
DROPPED_WARNING = "dropped {n} point(s) with a non-finite or negative step, or a non-finite loss"
#: a value this many times the series' median magnitude is an overflow, not a loss
OVERFLOW_FACTOR = 1e4
