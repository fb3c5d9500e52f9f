"""Defensive coercion of the loosely typed values progress sources carry.

Progress arrives from code the advisor does not control: upstream Kubeflow Trainer sends every
metric as a string ("0.2347", "1.8e-05", sometimes "nan" or "12%"), RHOAI sends JSON numbers or
null, and a buggy reporter can send anything. A parser that raises on such input takes the
controller down with it, so every helper here returns ``None`` for what it cannot use and appends
a human-readable reason to a caller-owned warnings list instead. The functions are pure: they
never read the wall clock; times are converted, never sampled.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from advisor.model import EPOCH_MS_FLOOR

__all__ = [
    "EPOCH_MS_FLOOR",
    "MAX_ANNOTATION_BYTES",
    "MAX_TEXT_CHARS",
    "decode_json_object",
    "parse_duration",
    "parse_float",
    "parse_int",
    "parse_timestamp",
    "short_repr",
]

#: longest string we try to interpret as a number or a timestamp (upstream caps values at 64 chars)
MAX_TEXT_CHARS = 256
#: annotation values longer than this are not parsed (Kubernetes allows 256 KiB for all annotations of
#: an object; a progress report is a few hundred bytes, so anything this large is a bug or an attack)
MAX_ANNOTATION_BYTES = 64 * 1024


_DURATION_RE = re.compile(
    r"^(?:(?P<days>\d+)\s+days?,\s*)?(?P<h>\d+):(?P<m>\d{1,2}):(?P<s>\d{1,2}(?:\.\d+)?)$"
)


def short_repr(value: object, limit: int = 40) -> str:
    """A bounded ``repr`` for warnings, so that a 1 MB garbage value never lands in a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_float(
    value: object, what: str, warnings: list[str], *, allow_nonfinite: bool = False
) -> float | None:
    """Coerce ``value`` (number or numeric string) to a float, or return ``None`` with a warning.

    Accepts ints, floats and strings such as ``"0.25"``, ``" 1e3 "``, ``"12%"`` (the percent sign
    is stripped) and ``"nan"``/``"inf"``. Booleans are rejected: ``True`` is not a loss. Non-finite
    results are kept only with ``allow_nonfinite`` (a NaN loss is evidence of divergence and must
    reach the forecaster); otherwise they are dropped like garbage.
    """
    if value is None:
        return None
    result: float
    # the common cases first (upstream sends every value as text, RHOAI as JSON numbers), without
    # the checks below; anything they do not accept takes the full path, which says why
    if isinstance(value, str):
        if len(value) <= MAX_TEXT_CHARS and not value.endswith("%"):
            try:
                result = float(value)
            except ValueError:
                pass
            else:
                if allow_nonfinite or math.isfinite(result):
                    return result
    elif isinstance(value, float) and (allow_nonfinite or math.isfinite(value)):
        return float(value)  # a numpy float64 too, as a plain float
    if isinstance(value, bool):
        warnings.append(f"{what}: boolean {value!r} is not a number; dropped")
        return None
    if isinstance(value, int | float):
        try:
            result = float(value)
        except OverflowError:
            warnings.append(f"{what}: integer too large; dropped")
            return None
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_TEXT_CHARS:
            warnings.append(f"{what}: value of {len(text)} characters is not a number; dropped")
            return None
        if text.endswith("%"):
            text = text[:-1].strip()
        try:
            result = float(text)
        except ValueError:
            warnings.append(f"{what}: {short_repr(value)} is not a number; dropped")
            return None
    else:
        warnings.append(f"{what}: {type(value).__name__} is not a number; dropped")
        return None
    if not math.isfinite(result) and not allow_nonfinite:
        warnings.append(f"{what}: non-finite value {short_repr(value)}; dropped")
        return None
    return result


def parse_int(value: object, what: str, warnings: list[str], *, minimum: int = 0) -> int | None:
    """Coerce ``value`` to an integer >= ``minimum`` (steps, step counts), else ``None`` + warning.

    ``"1e3"`` and ``450.0`` are accepted; a fractional value is rounded down with a warning (some
    reporters send the step as a float); negatives below ``minimum`` are dropped.
    """
    number = parse_float(value, what, warnings)
    if number is None:
        return None
    if abs(number) >= 2**63:
        warnings.append(f"{what}: {short_repr(value)} is out of range; dropped")
        return None
    integer = math.floor(number)
    if integer != number:
        warnings.append(f"{what}: fractional value {short_repr(value)} rounded down to {integer}")
    if integer < minimum:
        warnings.append(f"{what}: {short_repr(value)} is below {minimum}; dropped")
        return None
    return integer


def parse_timestamp(value: object, what: str, warnings: list[str]) -> float | None:
    """RFC 3339 / ISO 8601 text, or epoch seconds, to epoch seconds; ``None`` + warning if unusable.

    ``"2026-08-21T10:30:45Z"``, fractional seconds and ``+02:00`` offsets are understood. A
    timestamp without an offset is read as UTC (Kubernetes always writes UTC) with a warning.
    Numbers are taken as epoch seconds, or milliseconds beyond ``EPOCH_MS_FLOOR`` (with a warning).
    """
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = parse_float(value, what, warnings)
        return None if number is None else _epoch_seconds(number, value, what, warnings)
    if not isinstance(value, str):
        warnings.append(f"{what}: {type(value).__name__} is not a timestamp; dropped")
        return None
    text = value.strip()
    if not text or len(text) > 64:
        warnings.append(f"{what}: {short_repr(value)} is not a timestamp; dropped")
        return None
    if text[-1] in "zZ":  # RFC 3339 in UTC, as Kubernetes writes it (no number ends so)
        text = text[:-1] + "+00:00"
    else:
        try:
            seconds = float(text)  # epoch seconds given as a string
        except ValueError:
            pass
        else:
            if math.isfinite(seconds):
                return _epoch_seconds(seconds, value, what, warnings)
            warnings.append(f"{what}: {short_repr(value)} is not a timestamp; dropped")
            return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        warnings.append(f"{what}: {short_repr(value)} is not an RFC 3339 timestamp; dropped")
        return None
    if moment.tzinfo is None:
        warnings.append(f"{what}: {short_repr(value)} has no UTC offset; read as UTC")
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _epoch_seconds(number: float, value: object, what: str, warnings: list[str]) -> float:
    """An epoch time in seconds: ``number`` as it is, or divided by 1,000 beyond ``EPOCH_MS_FLOOR``."""
    if number <= EPOCH_MS_FLOOR:
        return number
    warnings.append(f"{what}: {short_repr(value)} read as epoch milliseconds")
    return number / 1000.0


def parse_duration(value: object, what: str, warnings: list[str]) -> float | None:
    """Seconds from a number or an ``[D days, ]H:MM:SS[.f]`` string (``str(timedelta)``, which
    several training loggers write as elapsed time); ``None`` + warning if unusable."""
    if isinstance(value, str):
        match = _DURATION_RE.match(value.strip())
        if match:
            days = int(match.group("days") or 0)
            return (
                days * 86400.0
                + int(match.group("h")) * 3600.0
                + int(match.group("m")) * 60.0
                + float(match.group("s"))
            )
    return parse_float(value, what, warnings)


def decode_json_object(raw: object, what: str, warnings: list[str]) -> Mapping[str, object] | None:
    """A JSON object from an annotation value: size cap, decoding, type check; never raises."""
    if not isinstance(raw, str):
        warnings.append(f"{what} is a {type(raw).__name__}, not a JSON string; ignored")
        return None
    if len(raw) > MAX_ANNOTATION_BYTES:
        warnings.append(f"{what} of {len(raw)} characters exceeds the cap of {MAX_ANNOTATION_BYTES}; ignored")
        return None
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        reason = str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__
        warnings.append(f"{what} is not valid JSON ({reason}); ignored")
        return None
    if not isinstance(decoded, dict):
        warnings.append(f"{what} is a JSON {type(decoded).__name__}, not an object; ignored")
        return None
    return decoded
