"""From a bag of (name, value) metric pairs to one ``ProgressSample``.

Every progress source ends up as name/value pairs: upstream Trainer's ``metrics`` list, the RHOAI
annotation's top-level fields plus ``trainMetrics``/``evalMetrics``, our own PyTorchJob annotation.
The names are free-form (``current_step``, ``global_step``, ``currentStep``, ``lr``...), so this
module owns the one alias table that maps them to ``ProgressSample`` fields, and the bounds that
keep hostile input cheap: at most ``MAX_METRICS`` pairs are read, at most ``MAX_WARNINGS`` warnings
are kept, and everything that was dropped or coerced is counted in the sample's warnings.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from advisor.model import ProgressSample
from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC, JUDGED_BY_METRIC
from advisor.series import TRAIN_SERIES, eval_series_name, is_eval_name
from advisor.sources.coerce import parse_float, parse_int, parse_timestamp, short_repr

__all__ = [
    "MAX_METRICS",
    "MAX_METRIC_NAME_CHARS",
    "MAX_WARNINGS",
    "UNKNOWN_STEP",
    "MetricPairs",
    "bounded_warnings",
    "build_sample",
    "canonical_name",
    "series_name",
]

#: ``ProgressSample.step`` when the source reported no usable step (e.g. the final upstream update,
#: which replaces the whole status and drops ``current_step``). Such a sample still carries the
#: progress percentage, the ETA and checkpoint acknowledgements, but must not enter a loss history.
UNKNOWN_STEP = -1
#: metric pairs read per sample (upstream's CRD allows 256 metrics); the rest are counted, not read
MAX_METRICS = 256
#: upstream validates metric names to 1..64 characters
MAX_METRIC_NAME_CHARS = 64
#: warnings kept per sample; the rest are summarised in one last line
MAX_WARNINGS = 20
#: a step more than this many times the reported total is taken for the wrong number (a run
#: extended past its plan reports a step a little beyond the old total, not orders of magnitude)
STEP_BEYOND_TOTAL = 2.0
#: an update time further than this ahead of the observation time is flagged (the reporter's clock)
CLOCK_SKEW_S = 300.0
#: an update time further than this behind the observation time is an unset clock (the epoch),
#: not a report from a year ago
CLOCK_UNSET_S = 365.0 * 86400.0

#: canonical (snake_case) metric name -> (ProgressSample field, priority: lower wins)
_ALIASES: dict[str, tuple[str, int]] = {
    "current_step": ("step", 0),
    "step": ("step", 1),
    "global_step": ("step", 2),
    "current_steps": ("step", 3),
    # a reporter that names its metrics as W&B logs them (``train/global_step``, ``train/epoch``,
    # ``train/learning_rate``; ``train/loss`` is ``train_loss`` already), as ``columns`` reads files
    "train_global_step": ("step", 4),
    "trainer_global_step": ("step", 5),
    "total_steps": ("total_steps", 0),
    "max_steps": ("total_steps", 1),
    "loss": ("loss", 0),
    "train_loss": ("loss", 1),
    "training_loss": ("loss", 2),
    "learning_rate": ("learning_rate", 0),
    "lr": ("learning_rate", 1),
    "train_learning_rate": ("learning_rate", 2),
    "train_lr": ("learning_rate", 3),
    "eval_loss": ("eval_loss", 0),
    "val_loss": ("eval_loss", 1),
    "validation_loss": ("eval_loss", 2),
    "current_epoch": ("epoch", 0),
    "epoch": ("epoch", 1),
    "train_epoch": ("epoch", 2),
    ACK_STEP_METRIC: ("last_checkpoint_step", 0),
    ACK_REQUEST_METRIC: ("last_checkpoint_request", 0),
    # the eval metric the trainer keeps its best model by (HF's ``metric_for_best_model``, which
    # the training helper reports by name): what the run is judged by, its own choice
    JUDGED_BY_METRIC: ("judged_by", 0),
    "judged_by": ("judged_by", 1),
}

#: how typed source fields are named in warnings (the spelling users see in their objects)
_FIELD_LABELS = {
    "progress_percentage": "progressPercentage",
    "estimated_remaining_seconds": "estimatedRemainingSeconds",
    "time": "lastUpdatedTime",
}

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])([A-Z])")
_SEPARATORS_RE = re.compile(r"[\s/.\-]+")


@functools.lru_cache(maxsize=4096)
def canonical_name(name: str) -> str:
    """``currentStep`` -> ``current_step``, ``train/loss`` -> ``train_loss``, ``LR`` -> ``lr``."""
    return _SEPARATORS_RE.sub("_", _CAMEL_RE.sub(r"_\1", name.strip())).lower()


def series_name(metric: str) -> str:
    """The series a metric's name denotes, spelt as a run's history spells it: ``train_loss``
    is the training loss (``loss``), ``eval_rougeL`` is ``eval_rouge_l``, ``val/loss`` is
    ``eval_loss``. A policy's ``metric:`` names a series in its author's spelling, most often the
    trainer's own key; the history keeps every series under this one, so a rule must too."""
    canonical = canonical_name(metric)
    alias = _ALIASES.get(canonical)
    if alias is not None and alias[0] == "loss":
        return TRAIN_SERIES
    return eval_series_name(canonical)


@functools.lru_cache(maxsize=4096)
def _name_of(raw_name: str) -> tuple[str, str, tuple[str, int] | None] | None:
    """A metric's name as read (stripped), its canonical form and the sample field it feeds; None
    for a name upstream would not accept (empty, or longer than ``MAX_METRIC_NAME_CHARS``).
    Cached: a job reports the same few names in every report."""
    name = raw_name.strip()
    if not name or len(raw_name) > MAX_METRIC_NAME_CHARS:
        return None
    canonical = canonical_name(name)
    return name, canonical, _ALIASES.get(canonical)


@dataclass(slots=True)
class MetricPairs:
    """Raw (name, value) pairs collected from one source, plus the warnings met so far."""

    pairs: list[tuple[object, object]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: int = 0

    def extend(self, items: Iterable[tuple[object, object]]) -> None:
        """Append pairs, reading at most ``MAX_METRICS`` in total and counting the rest."""
        for item in items:
            if len(self.pairs) >= MAX_METRICS:
                self.skipped += 1
            else:
                self.pairs.append(item)


def bounded_warnings(warnings: list[str]) -> tuple[str, ...]:
    if len(warnings) <= MAX_WARNINGS:
        return tuple(warnings)
    extra = len(warnings) - (MAX_WARNINGS - 1)
    return (*warnings[: MAX_WARNINGS - 1], f"... and {extra} more warnings")


def build_sample(
    collected: MetricPairs,
    *,
    source: str,
    now: float | None,
    fields: Mapping[str, object] | None = None,
) -> ProgressSample:
    """Resolve aliases, coerce values and check consistency; never raises.

    ``fields`` holds values the source reports in typed slots of its own (RHOAI's ``currentStep``,
    upstream's ``progressPercentage``, ``lastUpdatedTime``), keyed by ``ProgressSample`` field
    name; they win over free-form metrics. ``now`` is the observation time, used when the source
    gives no usable update time.
    """
    warnings = collected.warnings
    if collected.skipped:
        warnings.append(f"{collected.skipped} metrics beyond the cap of {MAX_METRICS} ignored")
    # field -> every candidate as (priority, order, name, raw value, the value read as a number
    # when it is one, else None); the best usable one wins (``current_step: "n/a"`` beside a valid
    # ``step`` loses to it, with a warning, rather than costing the report its step)
    chosen: dict[str, list[tuple[int, int, str, object, float | None]]] = {}
    metrics: dict[str, float] = {}
    seen: dict[str, int] = {}
    bad_names = 0
    for index, (raw_name, raw_value) in enumerate(collected.pairs):
        named = _name_of(raw_name) if isinstance(raw_name, str) else None
        if named is None:
            bad_names += 1
            continue
        name, canonical, alias = named
        seen[canonical] = seen.get(canonical, 0) + 1
        value = parse_float(raw_value, name, [], allow_nonfinite=True)
        if value is not None and math.isfinite(value):
            metrics[name] = value
        if alias is not None and raw_value is not None:  # null means "not reported" (RHOAI)
            target, priority = alias
            # of equal priority (a name given twice) the last one comes first
            chosen.setdefault(target, []).append((priority, -index, name, raw_value, value))
    if bad_names:
        limit = MAX_METRIC_NAME_CHARS
        warnings.append(f"{bad_names} metrics without a usable name (1..{limit} chars) ignored")
    duplicated = sorted(name for name, count in seen.items() if count > 1)
    if duplicated:
        warnings.append(f"metrics given more than once (last value used): {', '.join(duplicated[:5])}")
    for key, typed in (fields or {}).items():
        if typed is not None:  # typed slots come first
            chosen.setdefault(key, []).append((-1, 0, _FIELD_LABELS.get(key, key), typed, None))
    for candidates in chosen.values():
        candidates.sort(key=lambda c: (c[0], c[1]))

    def raw(target: str) -> tuple[str, object]:
        entries = chosen.get(target)
        return (entries[0][2], entries[0][3]) if entries else (target, None)

    # a value already read as a number in the loop above is not read again; whatever it does not
    # settle (not finite where finiteness is required, fractional, out of range) is re-read with
    # the warnings that say why, and the next candidate for the field is tried
    def first(
        target: str, read_ok: Callable[[float], bool], parse: Callable[[str, object, list[str]], Any]
    ) -> Any:
        rejected: list[str] = []
        for _p, _o, name, raw_value, read in chosen.get(target) or ():
            if read is not None and read_ok(read):
                value: Any = read
            else:
                value = parse(name, raw_value, rejected)
            if value is not None:
                warnings.extend(f"{w}; used {name} instead" for w in rejected)
                return value
        warnings.extend(rejected)
        return None

    def number(target: str, *, nonfinite: bool = False) -> float | None:
        value = first(
            target,
            lambda read: nonfinite or math.isfinite(read),
            lambda name, raw_value, w: parse_float(raw_value, name, w, allow_nonfinite=nonfinite),
        )
        return None if value is None else float(value)

    def integer(target: str, *, minimum: int = 0) -> int | None:
        value = first(
            target,
            lambda read: read.is_integer() and minimum <= read < 2**63,
            lambda name, raw_value, w: parse_int(raw_value, name, w, minimum=minimum),
        )
        return None if value is None else int(value)

    step = integer("step")
    step_given = raw("step")[1] is not None
    total = integer("total_steps", minimum=1)
    ckpt = integer("last_checkpoint_step")
    loss = number("loss", nonfinite=True)
    eval_loss = number("eval_loss", nonfinite=True)
    for label, checked in (("loss", loss), ("eval_loss", eval_loss)):
        if checked is not None and not math.isfinite(checked):
            warnings.append(f"{label} is non-finite ({checked}); kept as evidence of divergence")
    learning_rate = _non_negative(number("learning_rate"), "learning_rate", warnings)
    epoch = _non_negative(number("epoch"), "epoch", warnings)
    percent = number("progress_percentage")
    if percent is not None and not 0.0 <= percent <= 100.0:
        # a garbled percentage is no reading: clamped to 100 it made a run at step 720 of 20,000
        # "finished", judged by no rule, flipping with each report
        warnings.append(f"progressPercentage {percent} outside 0..100; dropped")
        percent = None
    remaining = _non_negative(number("estimated_remaining_seconds"), "estimatedRemainingSeconds", warnings)
    request = _request_id(*raw("last_checkpoint_request"), warnings)
    judged_by = _metric_name(*raw("judged_by"), warnings)

    time_name, time_raw = raw("time")
    time = parse_timestamp(time_raw, time_name, warnings)
    if time is None:
        if time_raw is None:
            warnings.append("no update time reported; using the observation time")
        time = now
    elif now is not None and time < now - CLOCK_UNSET_S:
        # an unset clock (the epoch): kept, the first such report stood in the history at 1970 and
        # gave an ETA of 28 years
        warnings.append(
            f"update time is {(now - time) / 86400.0:,.0f} days before the observation time (an unset "
            "clock?); using the observation time"
        )
        time = now
    elif now is not None and time > now + CLOCK_SKEW_S:
        # a time in the future would stand as the newest report and make every later one (at the
        # right time) look stale: the progress would freeze while the job trains on
        warnings.append(
            f"update time is {time - now:.0f}s ahead of the observation time (clock skew?); "
            "using the observation time"
        )
        time = now

    if step is not None and total is not None and step > STEP_BEYOND_TOTAL * total:
        # far past the plan, the step is the wrong number (a counter overflow, a garbled write), not
        # the total: kept, it read the run as finished and its throughput as 1e15 steps/s
        warnings.append(f"step {step} is more than {STEP_BEYOND_TOTAL:g}x total_steps {total}; step dropped")
        step = None
    elif step is not None and total is not None and step > total:
        warnings.append(f"step {step} exceeds total_steps {total}; total_steps dropped")
        total = None
    if step is not None and total is not None and percent is not None and percent >= 100.0 and step < total:
        # "done" beside a step short of the total: the step is the reading (a job at 100% has
        # reached its last step), and a running job read as finished is judged by no rule
        warnings.append(f"progressPercentage {percent:g} (done) dropped: step {step} of total_steps {total}")
        percent = None
    if step is None and step_given and percent is not None and percent >= 100.0:
        # the report had a step and it cannot be read: a completion it claims comes from the same
        # broken reporter, and read as such it makes a running job "finished", judged no more (a
        # lower percentage still places the run, below)
        warnings.append(f"progressPercentage {percent:g} (done) dropped with the unreadable step")
        percent = None
    if step is None:
        if percent is not None and total is not None:
            step = math.floor(percent / 100.0 * total)
            warnings.append(f"no step reported; estimated {step} from progressPercentage and total_steps")
        else:
            warnings.append("no step reported")
            step = UNKNOWN_STEP
    if ckpt is not None and step != UNKNOWN_STEP and ckpt > step:
        warnings.append(f"{ACK_STEP_METRIC} {ckpt} is ahead of step {step}")

    return ProgressSample(
        step=step,
        time=time,
        loss=loss,
        total_steps=total,
        epoch=epoch,
        learning_rate=learning_rate,
        eval_loss=eval_loss,
        progress_percentage=percent,
        estimated_remaining_seconds=remaining,
        last_checkpoint_step=ckpt,
        last_checkpoint_request=request,
        judged_by=judged_by,
        metrics=MappingProxyType(metrics),
        warnings=bounded_warnings(warnings),
        source=source,
    )


def _non_negative(value: float | None, label: str, warnings: list[str]) -> float | None:
    if value is not None and value < 0:
        warnings.append(f"{label} {value} is negative; dropped")
        return None
    return value


def _metric_name(name: str, value: object, warnings: list[str]) -> str | None:
    """The eval series a run declares it is judged by, as the history names it: HF's
    ``metric_for_best_model`` may be given without its ``eval_`` prefix (``accuracy``, ``loss``),
    which the Trainer adds itself; None when not given or not a metric name."""
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not 0 < len(value.strip()) <= MAX_METRIC_NAME_CHARS
        or not any(c.isalpha() for c in value)
    ):
        warnings.append(f"{name}: {short_repr(value)} is not a metric name; dropped")
        return None
    canonical = canonical_name(value)
    if not is_eval_name(canonical):
        canonical = f"eval_{canonical}"
    return eval_series_name(canonical)


def _request_id(name: str, value: object, warnings: list[str]) -> str | None:
    """Checkpoint request ids are opaque strings; numbers are accepted (some reporters stringify
    everything, others send a numeric id) and normalised to their text."""
    if value is None:
        return None
    if isinstance(value, bool):
        warnings.append(f"{name}: boolean is not a request id; dropped")
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, str) and 0 < len(value.strip()) <= MAX_METRIC_NAME_CHARS:
        return value.strip()
    warnings.append(f"{name}: {short_repr(value)} is not a request id; dropped")
    return None
