"""How the ``forecast`` command's text writes a number: four significant digits, ``n/a`` for
none, and zero for a value at zero by rounding. One place, for its text, its checkpoint lines and
its plot's labels."""

from __future__ import annotations

import math

__all__ = ["num"]


def num(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    text = f"{value:.4g}"
    # a value at zero by rounding (a metric stuck at 0 read "-0", "-1e-12") is zero
    return "0" if abs(value) < 1e-9 or text == "-0" else text
