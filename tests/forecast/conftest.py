"""Synthetic curves shared by the forecaster's tests (the project generates its own; no dev data)."""

from __future__ import annotations

import numpy as np
import pytest


def power_curve(n: int = 200, total: float = 10_000.0, cut: float = 0.5, noise: float = 0.0, seed: int = 0):
    """L(s) = 2 + 3 * (1 + s/100)**-0.5, observed up to ``cut * total``."""
    rng = np.random.default_rng(seed)
    s = np.linspace(total * cut / n, total * cut, n)
    y = 2.0 + 3.0 * (1.0 + s / 100.0) ** -0.5 + rng.normal(0.0, noise, n)
    final = 2.0 + 3.0 * (1.0 + total / 100.0) ** -0.5
    return s, y, final


@pytest.fixture
def curve():
    return power_curve(noise=0.005)
