"""Epoch boundaries: both conventions (fractional progress, epoch index), with and without learning
rates, at every cut, and at the end of a finished multi-epoch run."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from advisor.forecast import forecast
from advisor.forecast.epoch_terms import _geometric
from advisor.forecast.epochs import boundaries_ahead, boundaries_passed, track

STEPS_PER_EPOCH = 1000.0


def _run(epochs: int = 5, every: float = 10.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A fine-tune whose loss steps down at each boundary; its fractional epoch and its index."""
    s = np.arange(every, epochs * STEPS_PER_EPOCH + 1, every)
    fraction = s / STEPS_PER_EPOCH
    index = np.floor((s - 1) / STEPS_PER_EPOCH)  # the 0-based epoch each step belongs to
    rng = np.random.default_rng(3)
    y = 1.0 + 0.8 * (s / 100.0) ** -0.3 - 0.2 * (1 - 0.5**index) + rng.normal(0, 0.004, s.size)
    return s, y, fraction, index


@pytest.mark.parametrize("convention", ["fraction", "index"])
@pytest.mark.parametrize("with_lr", [True, False])
@pytest.mark.parametrize("cut", [0.3, 0.5, 0.61, 0.9, 1.0])
def test_epochs_without_learning_rates_forecast_at_every_cut(
    convention: str, with_lr: bool, cut: float
) -> None:
    # the bug: without learning rates, once a boundary was behind the cut, the epoch term's
    # prediction column did not match the stretched horizon's and every forecast failed (NaN)
    s, y, fraction, index = _run()
    m = s <= cut * s[-1]
    ep = (fraction if convention == "fraction" else index)[m]
    lr = np.full(m.sum(), 1e-4) if with_lr else None
    fc = forecast(s[m], y[m], total_steps=int(s[-1]), learning_rates=lr, epochs=ep)
    assert not any("failed" in w for w in fc.warnings), fc.warnings
    assert math.isfinite(fc.final_loss.mean)
    assert fc.final_loss.p10 <= fc.final_loss.mean <= fc.final_loss.p90
    # the loss it will end at is close to the real end (the drops to come are expected)
    assert abs(fc.final_loss.mean - y[-1]) < 0.1


@pytest.mark.parametrize("convention", ["fraction", "index"])
def test_a_finished_run_expects_no_further_boundary(convention: str) -> None:
    # epoch 5.0 of 5 is the end of training, not a boundary still to cross
    s, y, fraction, index = _run()
    ep = fraction if convention == "fraction" else index
    fc = forecast(s, y, total_steps=int(s[-1]), learning_rates=np.full(s.size, 1e-4), epochs=ep)
    assert not any("epoch boundary" in w for w in fc.warnings), fc.warnings
    # at the last step no improvement is left: it has plateaued by definition
    assert fc.plateau_probability == 1.0


def test_the_boundary_count_reads_each_convention() -> None:
    s, _, fraction, index = _run(epochs=3, every=250.0)
    tf, ti = track(s, fraction), track(s, index)
    assert tf is not None and ti is not None
    assert not tf.is_index and ti.is_index
    # the point logged at 1.0 is the last of the first epoch: no boundary behind it yet
    at_1000 = int(np.flatnonzero(s == 1000.0)[0])
    assert boundaries_passed(tf, fraction)[at_1000] == 0
    assert boundaries_passed(ti, index)[at_1000] == 0
    assert boundaries_passed(tf, fraction)[at_1000 + 1] == 1
    assert boundaries_passed(ti, index)[at_1000 + 1] == 1
    # from step 1,500 of 3,000: boundary 2 is ahead, boundary 3 ends the run
    m = s <= 1500
    for ep in (fraction, index):
        t = track(s[m], ep[m])
        assert t is not None and boundaries_ahead(t, 3000.0) == 1
        assert boundaries_ahead(t, 4000.0) == 2
        assert boundaries_ahead(t, None) == 0


def test_cli_forecasts_an_epoch_history_without_learning_rates(tmp_path: object) -> None:
    import subprocess
    import sys
    from pathlib import Path

    s, y, fraction, _ = _run()
    path = Path(str(tmp_path)) / "lightning.csv"
    path.write_text(
        "step,loss,epoch\n"
        + "".join(f"{a:g},{b:.5f},{c:.4f}\n" for a, b, c in zip(s, y, fraction, strict=True))
    )
    script = Path(sys.executable).parent / "trainjob-advisor"
    done = subprocess.run(
        [str(script), "forecast", str(path), "--upto-step", "2600"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "n/a" not in done.stdout.split("final loss")[1].splitlines()[0]
    assert "failed" not in done.stdout


def test_the_epoch_boundaries_ahead_are_summed_in_closed_form() -> None:
    """Each boundary ahead counts EPOCH_DECAY of the one before: the sum of as many terms as
    there are boundaries, which a horizon a trillion steps away made a loop of billions."""
    for terms in (0, 1, 2, 7, 60):
        assert _geometric(0.5, terms) == pytest.approx(sum(0.5**k for k in range(1, terms + 1)))
    assert _geometric(0.5, 10**12) == pytest.approx(1.0)
    assert _geometric(1.0, 3) == 3.0


def test_a_far_horizon_with_epochs_is_forecast_at_once() -> None:
    steps = np.arange(10, 2010, 10)
    values = 2 + 3 * (steps / 10) ** -0.5
    start = time.perf_counter()
    fc = forecast(steps, values, total_steps=10**12, epochs=np.floor(steps / 500))
    assert time.perf_counter() - start < 5.0
    assert not any(w.startswith("forecast failed") for w in fc.warnings)
    assert fc.final_loss.p10 <= fc.final_loss.mean <= fc.final_loss.p90
