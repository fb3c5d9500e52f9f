"""A run whose learning rate has stayed at its peak since warmup, with a share of its budget left.

The loss cannot tell a constant schedule from a warmup-stable-decay one before its decay: a WSD run
whose stable phase has flattened looks plateaued, though its decay (the last 10-20% of the budget)
still takes several percent off the loss. The forecast reads the LR as constant to the end and must
say so; a run whose LR decays (cosine), or one at its end, gets no such warning.
"""

from __future__ import annotations

import numpy as np
import pytest

from advisor.forecast import forecast
from advisor.forecast.core import PEAK_LR_WARNING

T = 6000
STABLE_END = 4800


def wsd_flat(upto: int, seed: int = 11) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A WSD run whose loss has saturated in its stable phase (the user trial's H1), cut at ``upto``."""
    rng = np.random.default_rng(seed)
    s = np.arange(20, T + 1, 20, dtype=float)
    lr = np.where(
        s < 300,
        1e-3 * s / 300,
        np.where(s < STABLE_END, 1e-3, 1e-3 * (1 - (s - STABLE_END) / (T - STABLE_END))),
    )
    base = 2.5 + 1.5 * (1 + s / 50.0) ** -1.0
    drop = np.where(s < STABLE_END, 0.0, 0.15 * (1 - (1 - (s - STABLE_END) / (T - STABLE_END)) ** 2))
    y = (base - drop) * np.exp(rng.normal(0, 0.012, s.size))
    m = s <= upto
    return s[m], y[m], lr[m]


def _warned(fc) -> bool:
    return any(w.startswith(PEAK_LR_WARNING) for w in fc.warnings)


@pytest.mark.parametrize("upto", [3600, 4780])
def test_a_flat_wsd_stable_phase_is_warned_of_a_coming_decay(upto: int) -> None:
    s, y, lr = wsd_flat(upto)
    fc = forecast(s, y, total_steps=T, learning_rates=lr, training_loss=True)
    assert _warned(fc)
    # the warning says how much of the budget is left
    left = f"{(T - upto) / T:.0%} of total_steps left"
    assert any(left in w for w in fc.warnings)


def test_no_warning_once_the_decay_has_begun_or_without_learning_rates() -> None:
    s, y, lr = wsd_flat(5200)
    assert not _warned(forecast(s, y, total_steps=T, learning_rates=lr, training_loss=True))
    s, y, _ = wsd_flat(3600)
    # without learning rates the forecast already names its assumption (an anneal by the end)
    assert not _warned(forecast(s, y, total_steps=T, training_loss=True))


def test_without_total_steps_a_rate_held_at_its_peak_is_warned_of_as_unknown_budget() -> None:
    # no "share of the budget left" to speak of, but the stable phase is judged by its recent
    # trend (the local plateau test continues it over the reach a scale-free prior expects), so a
    # decay that may yet come is said
    s, y, lr = wsd_flat(3600)
    fc = forecast(s, y, learning_rates=lr, training_loss=True)
    assert _warned(fc)
    assert any("total_steps unknown" in w for w in fc.warnings)
    # once the decay has begun, or with no learning rates, nothing to say
    s, y, lr = wsd_flat(5200)
    assert not _warned(forecast(s, y, learning_rates=lr, training_loss=True))
    assert not _warned(forecast(s, y, training_loss=True))


def test_a_constant_lr_run_at_its_end_is_not_warned() -> None:
    s, y, lr = wsd_flat(4700)  # the stable phase only: a constant-LR run ...
    # ... whose budget ends here, or is within the last tenth of it
    assert not _warned(forecast(s, y, total_steps=4700, learning_rates=lr, training_loss=True))
    assert not _warned(forecast(s, y, total_steps=5000, learning_rates=lr, training_loss=True))


def test_a_cosine_run_is_not_warned() -> None:
    rng = np.random.default_rng(3)
    s = np.arange(20, 0.5 * T + 1, 20, dtype=float)
    warm = 300.0
    lr = 1e-3 * np.where(s < warm, s / warm, 0.5 * (1 + np.cos(np.pi * (s - warm) / (T - warm))))
    y = (2.5 + 1.5 * (1 + s / 50.0) ** -0.5) * np.exp(rng.normal(0, 0.01, s.size))
    assert not _warned(forecast(s, y, total_steps=T, learning_rates=lr, training_loss=True))
