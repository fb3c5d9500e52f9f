"""The field checks of a job-state document: each reads one value and names its key when wrong.

Shared by :mod:`policies.jobstate` (job and cluster views) and :mod:`policies.jobstate_forecast`
(the forecast and learning-state entries): a hand-written state is not trusted as what the
controller stored is, so every value is checked for its type, and an error names its path
(``job.forecast.finalLoss.p10``) rather than falling back to a default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from advisor.sources.coerce import parse_timestamp

__all__ = [
    "Conv",
    "JobStateError",
    "boolean",
    "check_interval",
    "check_probability",
    "count",
    "epoch_seconds",
    "fields",
    "integer",
    "items",
    "number",
    "number_map",
    "obj",
    "text",
    "text_map",
]


class JobStateError(ValueError):
    """A malformed job-state document (the message names the key)."""


def text(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise JobStateError(f"{path}: must be a string, got {v!r}")
    return v


def integer(v: Any, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or not float(v).is_integer():
        raise JobStateError(f"{path}: must be an integer, got {v!r}")
    return int(v)


def count(v: Any, path: str) -> int:
    n = integer(v, path)
    if n < 0:
        raise JobStateError(f"{path}: must not be negative, got {v!r}")
    return n


def number(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise JobStateError(f"{path}: must be a number, got {v!r}")
    try:
        return float(v)  # strings allow "NaN" / "Infinity" for a diverged loss
    except ValueError:
        raise JobStateError(f"{path}: must be a number, got {v!r}") from None


def boolean(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise JobStateError(f"{path}: must be true or false, got {v!r}")
    return v


def text_map(v: Any, path: str) -> dict[str, str]:
    if not isinstance(v, Mapping) or not all(isinstance(x, str) for x in v.values()):
        raise JobStateError(f"{path}: must be a map of strings")
    return {str(k): x for k, x in v.items()}


def number_map(v: Any, path: str) -> dict[str, float]:
    if not isinstance(v, Mapping):
        raise JobStateError(f"{path}: must be a map of numbers")
    return {str(k): number(x, f"{path}.{k}") for k, x in v.items()}


def obj(v: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise JobStateError(f"{path}: must be an object")
    return v


def items(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise JobStateError(f"{path}: must be a list")
    return v


def epoch_seconds(v: Any, path: str) -> float:
    """A time as epoch seconds, or as the RFC 3339 text a TrainJobForecast's status shows
    (``2026-12-05T10:41:13Z``), so that its ``actions`` and ``checkpoint`` paste as they are; read
    as the progress parsers read a timestamp (``advisor.sources.coerce.parse_timestamp``), but an
    unreadable one is an error, not a warning."""
    when = parse_timestamp(v, path, [])
    if when is None or not math.isfinite(when):
        raise JobStateError(f"{path}: must be epoch seconds or an RFC 3339 time, got {v!r}")
    return when


def check_interval(v: Any, path: str) -> None:
    data = obj(v, path)
    for key, x in data.items():
        if key not in ("mean", "p10", "p90"):
            raise JobStateError(f"{path}.{key}: unknown key (known: mean, p10, p90)")
        number(x, f"{path}.{key}")
    for key in ("mean", "p10", "p90"):
        if key not in data:
            raise JobStateError(f"{path}.{key}: is required")


def check_probability(v: Any, path: str) -> None:
    p = number(v, path)
    if not 0.0 <= p <= 1.0:
        raise JobStateError(f"{path}: must be a probability in [0, 1], got {v!r}")


Conv = Callable[[Any, str], Any]


def fields(
    data: Any, table: dict[str, tuple[str, Conv]], path: str, required: tuple[str, ...]
) -> dict[str, Any]:
    data = obj(data, path)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in table:
            raise JobStateError(f"{path}.{key}: unknown key (known: {', '.join(sorted(table))})")
        if value is None:
            continue
        attr, conv = table[key]
        out[attr] = conv(value, f"{path}.{key}")
    for key in required:
        if table[key][0] not in out:
            raise JobStateError(f"{path}.{key}: is required")
    return out
