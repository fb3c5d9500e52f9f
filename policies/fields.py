"""Field descriptions shared by the loader and the CRD schema generator.

Every field of the policy dataclasses carries a ``FieldSpec`` in its metadata: its YAML key, its
kind, its bounds and its documentation. The loader (``policies.loader``) validates and converts
input by walking these specs, and ``policies.crd`` turns the very same specs into the OpenAPI
schema of the ``AdvisorPolicy`` CRD. One description, two consumers: the API server and the
Python model cannot disagree about what a valid policy is.

Durations follow the Kubernetes habit: an integer number of seconds or a string such as
``90s``, ``30m``, ``1h30m`` or ``2d``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DURATION_PATTERN",
    "ZERO_DURATION_PATTERN",
    "FieldSpec",
    "format_duration",
    "parse_duration",
    "spec_field",
]

#: what a duration string looks like (also the CRD ``pattern``)
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(s|m|h|d))+$"
_DURATION_RE = re.compile(DURATION_PATTERN)
_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(s|m|h|d)")
#: a duration string that amounts to zero (``0s``, ``0m0.0s``): what "more than zero" excludes
ZERO_DURATION_PATTERN = r"^(0+([.]0+)?(s|m|h|d))+$"  # [.] not \.: CEL string literals reject the \. escape
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

#: bounds on every list, map and string (the API server needs them to cost CEL rules, and a
#: policy with 10,000 namespaces in its selector is a mistake, not a policy)
MAX_ITEMS = 64
MAX_STRING = 317  # the longest Kubernetes label key: a 253-character prefix, '/', a 63-character name
MAX_DURATION = 32

KINDS = ("int", "float", "bool", "str", "enum", "duration", "strlist", "strmap", "object", "objlist")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one dataclass field appears in an AdvisorPolicy (YAML key, kind, bounds, docs)."""

    key: str
    doc: str
    kind: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    enum: tuple[str, ...] = ()
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    cls: type | None = None
    nullable: bool = False
    required: bool = False
    #: the CRD carries the field's default, so that the API server stores it in every object that
    #: leaves it out: for a field a printer column shows (``kubectl get`` reads the stored object,
    #: and an unset field would be a blank where the loader reads its default)
    server_default: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown field kind {self.kind!r}")
        if self.kind in ("object", "objlist") and self.cls is None:
            raise ValueError(f"field {self.key!r} of kind {self.kind} needs cls")

    def bounds_text(self) -> str:
        """``(0, 1]``-style description of the numeric range, for error messages."""
        lo = "-inf" if self.minimum is None else _num(self.minimum)
        hi = "inf" if self.maximum is None else _num(self.maximum)
        left = "(" if self.exclusive_minimum or self.minimum is None else "["
        right = ")" if self.exclusive_maximum or self.maximum is None else "]"
        return f"{left}{lo}, {hi}{right}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def spec_field(
    key: str,
    doc: str,
    kind: str,
    *,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
    **constraints: Any,
) -> Any:
    """A dataclass field carrying its ``FieldSpec`` (use in place of ``dataclasses.field``)."""
    meta = {"spec": FieldSpec(key=key, doc=doc, kind=kind, **constraints)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def field_specs(cls: type) -> list[tuple[str, FieldSpec, dataclasses.Field[Any]]]:
    """``(attribute name, spec, field)`` for each described field of a policy dataclass."""
    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("spec")
        if isinstance(spec, FieldSpec):
            out.append((f.name, spec, f))
    return out


def parse_duration(value: Any) -> float:
    """Seconds from an integer or a duration string; ``ValueError`` with a readable reason."""
    if isinstance(value, bool):
        raise ValueError(f"must be a duration (seconds or e.g. '30m'), got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must be a non-negative duration, got {value}")
        return float(value)
    if isinstance(value, str) and len(value) <= MAX_DURATION and _DURATION_RE.match(value):
        return sum(float(n) * _UNIT_S[u] for n, u in _PART_RE.findall(value))
    if isinstance(value, str) and value.strip().isdigit():  # "90": YAML quotes made it a string
        raise ValueError(
            f"must be a duration: got the string {value!r} without a unit; write {value.strip()}s, "
            f"or {value.strip()} without quotes (seconds)"
        )
    raise ValueError(f"must be a duration (integer seconds or e.g. '90s', '30m', '1h30m'), got {value!r}")


def format_duration(seconds: float) -> str:
    """Compact human form of a number of seconds (``5400`` → ``1h30m``) for reasons and the CLI.

    At most the two largest units are shown (``1d4h``, ``2h46m``, ``15m19s``).
    """
    if not math.isfinite(seconds):
        return str(seconds)
    s = round(seconds)
    if s < 0:
        return "-" + format_duration(-seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        m, sec = divmod(s, 60)
        return f"{m}m{sec}s" if sec else f"{m}m"
    if s < 86400:
        h, rest = divmod(s, 3600)
        m = rest // 60
        return f"{h}h{m}m" if m else f"{h}h"
    d, rest = divmod(s, 86400)
    if d >= 10_000:  # beyond any run (a duration typed with extra digits): its digits say nothing
        return f"{seconds / 86400:.3g}d"
    h = rest // 3600
    return f"{d}d{h}h" if h else f"{d}d"
