"""From records of any format to a loss history: the one place a file's rows become a curve.

``advisor.sources.files`` reads a file and detects its format (CSV/TSV, JSONL, a JSON list, HF
``trainer_state.json``), and ``advisor.sources.formats`` (``jsonl`` for JSONL) turns each row or
``log_history`` entry into a record: its location, its line number and its fields. What follows
is the same for every format and lives here: naming the columns by role, choosing the metric
(``metric_choice``), reading each value with the reason a bad one is refused (``SourceError``:
file, line, reason) or merely skipped (a warning), and aligning the sparse series (an eval loss
every 500 steps, a learning rate on training rows only). The result is a ``LoadedCurve``
(``loaded_curve``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from advisor.sources.cells import MISSING_MARKERS, RowKinds
from advisor.sources.coerce import parse_duration, parse_float, parse_timestamp, short_repr
from advisor.sources.columns import BATCH_COUNTERS, Column, epoch_millis, resolve_columns
from advisor.sources.loaded_curve import (
    LoadedCurve,
    SourceError,
    backwards_warning,
    listing,
    nonfinite_warning,
    shown_name,
)
from advisor.sources.metric_choice import choose_metric
from advisor.sources.normalize import canonical_name

__all__ = ["Record", "assemble", "assemble_each", "total_from"]

Record = tuple[str, int | None, Mapping[str, object]]  # (location, line number, fields)


def assemble(
    path: str | Path,
    kind: str,
    records: Sequence[Record],
    metric: str | None,
    curve_id: str | None,
    roles: dict[str, tuple[str, ...]],
    *,
    warnings: Sequence[str] = (),
    names: Sequence[str] | None = None,
) -> LoadedCurve:
    """The series of ``metric`` in ``records`` (``warnings``: the format's own, said first);
    raises ``SourceError`` (file, line, reason) on the first value it cannot read."""
    (curve,) = assemble_each(path, kind, records, [metric], curve_id, roles, warnings=warnings, names=names)
    if isinstance(curve, SourceError):
        raise curve
    return curve


def assemble_each(
    path: str | Path,
    kind: str,
    records: Sequence[Record],
    metrics: Sequence[str | None],
    curve_id: str | None,
    roles: dict[str, tuple[str, ...]],
    *,
    warnings: Sequence[str] = (),
    names: Sequence[str] | None = None,
) -> list[LoadedCurve | SourceError]:
    """Each of ``metrics`` read from ``records`` in one pass: per metric, the curve ``assemble``
    returns for it, or the ``SourceError`` it raises. Why one pass: the step, time, learning-rate
    and epoch fields every series is aligned on are the same for all of a file's metrics, and
    reading them is most of the work, once per file rather than once per metric (a run logs its
    loss and up to dozens of eval metrics)."""
    if not records:
        return [SourceError(path, f"{kind} file has no data rows")] * len(metrics)
    if names is None:
        seen: dict[str, None] = {}
        for _, _, fields in records:
            seen.update(dict.fromkeys(k for k in fields if isinstance(k, str)))
        names = list(seen)
    columns = resolve_columns(names, roles)
    out: list[LoadedCurve | SourceError | None] = [None] * len(metrics)
    chosen: dict[int, tuple[str, Column]] = {}
    for i, metric in enumerate(metrics):
        try:
            chosen[i] = choose_metric(path, columns, metric, names)
        except SourceError as exc:
            out[i] = exc
    _drop_batch_size(columns, records)
    epoch_axis = "step" not in columns and "epoch" in columns
    if epoch_axis:
        # a per-epoch log (Keras's CSVLogger: epoch, loss, val_loss, ...): its epochs are the
        # step axis, and no epoch series is read beside it (every point would be a boundary)
        columns["step"] = columns.pop("epoch")
    try:
        if chosen and "step" not in columns:
            raise SourceError(path, f"no step field (found: {listing(names)})")
        if chosen:
            records = _select_curve(path, records, columns.get("curve_id"), curve_id)
    except SourceError as exc:
        for i in chosen:
            out[i] = exc
        chosen = {}

    optional = [role for role in ("time", "learning_rate", "epoch") if role in columns]
    kinds = RowKinds.of(columns, names)
    # per metric still being read: its steps, values and the rows they came from
    alive = {i: target for i, (_role, target) in chosen.items()}
    steps: dict[int, list[float]] = {i: [] for i in alive}
    values: dict[int, list[float]] = {i: [] for i in alive}
    kept: dict[int, list[int]] = {i: [] for i in alive}
    extra: dict[str, list[float]] = {role: [] for role in optional}
    totals: list[float] = []
    for index, (location, line, fields) in enumerate(records):
        if not alive:
            break
        try:  # what every metric reads on every row, before its own value
            for role in optional:
                column = columns[role]
                got = _strict(path, location, line, column, fields.get(column.name), time=role == "time")
                extra[role].append(math.nan if got is None else got)
            if "total_steps" in columns:
                column = columns["total_steps"]
                total = _strict(path, location, line, column, fields.get(column.name))
                if total is not None:
                    totals.append(total)
        except SourceError as exc:
            for i in alive:
                out[i] = exc
            alive = {}
            break
        step: float | SourceError | None = None  # read once, on the first metric this row carries
        for i, target in list(alive.items()):
            try:
                value = _strict(path, location, line, target, fields.get(target.name))
            except SourceError as exc:
                out[i] = exc
                del alive[i]
                continue
            if value is None or (math.isnan(value) and kinds.placeholder(chosen[i][0], fields)):
                continue  # sparse logging: this row does not carry the chosen metric
            if step is None:
                step = _step(path, location, line, columns["step"], fields)
            if isinstance(step, SourceError):
                out[i] = step
                del alive[i]
                continue
            steps[i].append(step)
            values[i].append(value)
            kept[i].append(index)
    shared = list(warnings)
    if alive and "time" in extra:
        _read_epoch_millis(columns, extra, shared)
    for i in alive:
        metric_role, target = chosen[i]
        try:
            read = _Read(steps[i], values[i], kept[i], extra, totals)
            out[i] = _curve(path, kind, names, columns, metric_role, target, read, epoch_axis, list(shared))
        except SourceError as exc:
            out[i] = exc
    return cast(list[LoadedCurve | SourceError], out)  # every metric got its curve or error above


def _read_epoch_millis(
    columns: dict[str, Column], extra: dict[str, list[float]], warnings: list[str]
) -> None:
    """A time column of epoch milliseconds (``epoch_millis``) rescaled to seconds in place, and
    said: read as seconds, a run of minutes would forecast an ETA of weeks."""
    rescaled = epoch_millis(columns["time"], extra["time"])
    if rescaled is not None:
        columns["time"], note = rescaled
        extra["time"] = [t * columns["time"].scale for t in extra["time"]]
        warnings.append(note)


def _strict(
    path: str | Path, location: str, line: int | None, column: Column, raw: object, *, time: bool = False
) -> float | None:
    """A field's number in the column's unit (None: the row does not carry it); raises
    ``SourceError`` for a value that is no number."""
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in MISSING_MARKERS):
        return None
    problems: list[str] = []
    if time:
        value = parse_duration(raw, column.name, problems)
        if value is None:
            value = parse_timestamp(raw, column.name, [])
    else:
        value = parse_float(raw, column.name, problems, allow_nonfinite=True)
    if value is None:
        where = None if line is not None else location
        raise SourceError(
            path, f"column {column.describe()}: {short_repr(raw)} is not a number", line=line, where=where
        )
    return value * column.scale


def _drop_batch_size(columns: dict[str, Column], records: Sequence[Record]) -> None:
    """A step column named ``batch`` is a batch counter within each epoch (``epoch, batch, loss``;
    read as the run's step by ``_global_steps``) only beside an epoch column and when it moves; a
    constant one is a batch size, and without an epoch it may be either: then there is no step."""
    column = columns.get("step")
    if column is None or canonical_name(column.name) not in BATCH_COUNTERS:
        return
    if "epoch" in columns:
        seen = {fields.get(column.name) for _, _, fields in records[:1000]}
        if len(seen - {None, ""}) > 1:
            return
    del columns["step"]


def _step(
    path: str | Path, location: str, line: int | None, column: Column, fields: Mapping[str, object]
) -> float | SourceError:
    """A row's step, or why it has none a series can stand on."""
    try:
        step = _strict(path, location, line, column, fields.get(column.name))
    except SourceError as exc:
        return exc
    if step is None or not math.isfinite(step) or step < 0:
        reason = "missing step" if step is None else f"step {step} is not a non-negative number"
        return SourceError(path, reason, line=line, where=None if line is not None else location)
    return step


@dataclass(frozen=True, slots=True)
class _Read:
    """What the pass over the records read for one metric: its steps and values, the rows they
    came from (``kept``), and what every metric shares (the optional series on every row, the
    total steps each row states)."""

    steps: list[float]
    values: list[float]
    kept: list[int]
    extra: dict[str, list[float]]
    totals: list[float]


def _curve(
    path: str | Path,
    kind: str,
    names: Sequence[str],
    columns: dict[str, Column],
    metric_role: str,
    target: Column,
    read: _Read,
    epoch_axis: bool,
    warnings: list[str],
) -> LoadedCurve:
    """One metric's curve from the rows that carry it and the series shared by all."""
    steps, values, kept, extra, totals = read.steps, read.values, read.kept, read.extra, read.totals
    if not steps:
        raise SourceError(path, f"no row has a value for {target.describe()}")
    if epoch_axis:
        steps = _epochs_completed(steps, columns["step"], warnings)
    optional = list(extra)
    series = {role: _aligned(extra[role], kept, role, warnings) for role in optional}
    if not epoch_axis:
        steps = _global_steps(steps, series.get("epoch"), columns["step"], warnings)
    backwards = sum(1 for a, b in itertools.pairwise(steps) if b < a)
    if backwards:
        warnings.append(backwards_warning(backwards))
    nonfinite = sum(1 for v in values if not math.isfinite(v))
    if nonfinite:
        warnings.append(nonfinite_warning(nonfinite, target.name))
    total_name = columns["total_steps"].name if "total_steps" in columns else "total_steps"
    total_steps = total_from(totals[-1] if totals else None, total_name, warnings)
    if totals and len(set(totals)) > 1:
        warnings.append(f"total steps vary within the file; using the last value {total_steps}")
    details = [
        f"{len(steps)} point{'' if len(steps) == 1 else 's'} of {target.describe()}",
        f"step {columns['step'].describe()}",
    ]
    details += [f"{role} {columns[role].describe()}" for role in optional if series[role] is not None]
    return LoadedCurve(
        steps=tuple(steps),
        values=tuple(values),
        times=series.get("time"),
        learning_rates=series.get("learning_rate"),
        epochs=series.get("epoch"),
        total_steps=total_steps,
        metric=metric_role,
        source=f"{kind} {shown_name(path)}: " + ", ".join(details),
        warnings=tuple(warnings),
        columns=tuple(names),
    )


def _global_steps(
    steps: list[float], epochs: Sequence[float] | None, column: Column, warnings: list[str]
) -> list[float]:
    """The run's step of a log whose step column counts within each epoch (a training loop's
    ``epoch, iteration, loss``: the iteration starts again at each new epoch): the epochs before a
    row's, each as long as the largest count the file shows, plus the row's count. Read as a
    global step, every new epoch looked like a resume from a checkpoint, and all but the last
    epoch were left out. Only a step that goes back exactly where the epoch moves on to a later
    whole epoch is read so; a step that goes back within an epoch, or with the epoch, is a restart.
    """
    if epochs is None or len(epochs) != len(steps):
        return steps
    resets = [i for i in range(1, len(steps)) if steps[i] < steps[i - 1]]
    if not resets or not all(math.isfinite(e) and float(e).is_integer() for e in epochs):
        return steps
    if any(epochs[i] <= epochs[i - 1] for i in resets) or any(b < a for a, b in itertools.pairwise(epochs)):
        return steps
    per_epoch = max(steps)
    said = "its largest count"
    if min(steps) == 0:
        # counted from 0 and logged every k, an epoch of N reads 0 .. N - k: one logging gap more
        # (read as the largest count, the first report of an epoch fell on the last of the one before)
        gaps = sorted(b - a for a, b in itertools.pairwise(steps) if b > a)
        if gaps:
            per_epoch += gaps[len(gaps) // 2]
            said = "its largest count and one logging interval, counted from 0"
    first = epochs[0]
    warnings.append(
        f"the step column {column.describe()} starts again at each epoch: read as a count within "
        f"the epoch, the step is the epochs before it times {per_epoch:,.0f} ({said}) plus that count"
    )
    return [(e - first) * per_epoch + s for e, s in zip(epochs, steps, strict=True)]


def _epochs_completed(epochs: list[float], column: Column, warnings: list[str]) -> list[float]:
    """The step axis of a per-epoch log, counted in epochs completed. Keras numbers the row it
    writes after the first epoch 0; counted so, a run's last row would stand one short of its
    total, and its first at the step a run starts from."""
    zero_based = epochs[0] == 0 and all(float(e).is_integer() for e in epochs)
    shown = f"{column.describe()} + 1" if zero_based else column.describe()
    warnings.append(f"no step field: the step axis is the epoch column, {shown} (epochs completed)")
    return [e + 1.0 for e in epochs] if zero_based else epochs


def _select_curve(
    path: str | Path, records: Sequence[Record], column: Column | None, wanted: str | None
) -> Sequence[Record]:
    if column is None:
        if wanted is not None:
            raise SourceError(path, "a curve was chosen but the file holds one (no curve_id/run_id column)")
        return records
    ids = [str(fields.get(column.name, "")).strip() for _, _, fields in records]
    distinct = list(dict.fromkeys(ids))
    if wanted is None:
        if len(distinct) > 1:
            raise SourceError(
                path,
                f"the file holds {len(distinct)} curves (column '{column.name}': "
                f"{listing(distinct)}); choose one (forecast --curve ID)",
            )
        return records
    matches = [r for r, i in zip(records, ids, strict=True) if i == wanted.strip()]
    if not matches:
        found = listing(distinct)
        raise SourceError(path, f"no curve {wanted!r} in column '{column.name}' (found: {found})")
    return matches


def _aligned(
    values: list[float], kept: list[int], role: str, warnings: list[str]
) -> tuple[float, ...] | None:
    """Values of an optional series at the kept rows; gaps are filled from the nearest earlier
    row (a learning rate logged on training rows, read at an eval row), else the first later one."""
    known = [v for v in values if not math.isnan(v)]
    if not known:
        return None
    filled: list[float] = []
    last = known[0]
    for value in values:
        last = value if not math.isnan(value) else last
        filled.append(last)
    result = tuple(filled[i] for i in kept)
    gaps = sum(1 for i in kept if math.isnan(values[i]))
    if gaps and gaps < len(kept):
        # (missing on every point read: logged on other rows, as HF logs the learning rate on its
        # training rows and none on its eval rows; aligned as the docstring says, nothing amiss)
        warnings.append(f"{role} missing on {gaps} of {len(kept)} points; taken from neighbouring rows")
    return result


def total_from(raw: object, name: str, warnings: list[str]) -> int | None:
    if raw is None:
        return None
    value = parse_float(raw, name, warnings)
    if value is None:
        return None  # no number at all: ``parse_float`` said so (said twice, it read as two problems)
    if value < 1 or not value.is_integer():
        warnings.append(f"{name} {short_repr(raw)} is not a positive whole number; ignored")
        return None
    return int(value)
