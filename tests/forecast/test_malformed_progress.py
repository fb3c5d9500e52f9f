"""A progress stream whose step keeps going backwards, and the stall note across a restart.

A reporter whose step goes back at every report is malformed, not restarting at every report: the
forecast says so and reads the run as it stood before. And the interval the stall note measures
is one between consecutive reports of one restart segment: a resume joined to the attempt it
resumed from spans the restart, not a time the run stood still."""

from __future__ import annotations

from advisor.core.history import History
from advisor.forecast import forecast
from advisor.forecast.core import forecast_curve
from advisor.forecast.eta import last_stall_note
from advisor.model import ProgressSample

MALFORMED = "the reported step keeps going backwards"


def _loss(step: float) -> float:
    return 3.0 * (1.0 + step) ** -0.1


def _history(reports: int = 60, every: float = 3.0) -> tuple[History, float]:
    h = History()
    t = 0.0
    for k in range(1, reports + 1):
        t = k * every
        h.append(ProgressSample(step=20 * k, time=t, loss=_loss(20 * k)))
    return h, t


def test_a_step_going_back_at_every_report_is_malformed_progress_and_no_stall() -> None:
    """60 reports 3 s apart, then 17 whose step goes back 20 at each, 3 s apart too: one warning
    that the step keeps going backwards, no "restart detected (18 segments)", and no "the latest
    report came 2 min after the one before" (the reports came 3 s apart)."""
    h, t = _history()
    step = 1200
    for _ in range(17):
        t, step = t + 3.0, step - 20
        h.append(ProgressSample(step=step, time=t, loss=_loss(step)))
    fc = forecast_curve(h.curve(), total_steps=2000, training_loss=True)
    assert sum(w.startswith(MALFORMED) for w in fc.warnings) == 1, fc.warnings
    assert not any("restart detected" in w or "stood still" in w for w in fc.warnings), fc.warnings
    # the run as it stood before its step began going back
    assert fc.last_step == 1200.0 and fc.n_points == 60
    assert fc.eta_seconds is not None and fc.steps_per_second is not None


def test_a_resume_from_a_checkpoint_stays_a_restart() -> None:
    h, t = _history()
    h.append(ProgressSample(step=1000, time=t + 3.0, loss=_loss(1000)))
    h.append(ProgressSample(step=1020, time=t + 6.0, loss=_loss(1020)))
    fc = forecast_curve(h.curve(), total_steps=2000, training_loss=True)
    assert h.restarts == 1
    assert any("restart detected (2 segments)" in w for w in fc.warnings), fc.warnings
    assert not any(w.startswith(MALFORMED) for w in fc.warnings)


def test_a_log_whose_last_reports_go_backwards_is_read_the_same() -> None:
    steps = [float(s) for s in range(10, 1010, 10)] + [990.0, 980.0, 970.0]
    fc = forecast(steps, [_loss(s) for s in steps], times=[3.0 * i for i in range(len(steps))])
    assert any(w.startswith(MALFORMED) for w in fc.warnings), fc.warnings
    assert fc.last_step == 1000.0 and fc.n_points == 100


def test_the_stall_note_reads_no_interval_across_a_restart() -> None:
    """A resume two minutes after the run's last report, from a checkpoint just behind it, is
    joined to the attempt it resumed from; its first report is no stall. A stall inside the
    resumed segment still is."""
    h, t = _history()
    t += 120.0
    assert h.append(ProgressSample(step=1000, time=t, loss=_loss(1000))) == "restart"
    fc = forecast_curve(h.curve(), total_steps=2000, training_loss=True)
    assert any("joined" in w for w in fc.warnings), fc.warnings  # the resume was joined
    assert not any("stood still" in w for w in fc.warnings), fc.warnings
    for k in range(1, 6):
        h.append(ProgressSample(step=1000 + 20 * k, time=t + 3.0 * k, loss=_loss(1000 + 20 * k)))
    t += 15.0 + 120.0
    h.append(ProgressSample(step=1120, time=t, loss=_loss(1120)))
    fc = forecast_curve(h.curve(), total_steps=2000, training_loss=True)
    assert any("stood still" in w and "2 min" in w for w in fc.warnings), fc.warnings


def test_last_stall_note_measures_consecutive_reports_of_one_segment() -> None:
    import numpy as np

    steps = np.arange(20.0, 420.0, 20.0)
    times = np.arange(3.0, 63.0, 3.0)
    times[-1] += 120.0  # the latest report two minutes late
    assert last_stall_note(steps, times) is not None
    one = np.zeros(steps.size, dtype=np.intp)
    assert last_stall_note(steps, times, one) is not None
    resumed = one.copy()
    resumed[-1] = 1  # the latest report is the first of a resumed segment
    assert last_stall_note(steps, times, resumed) is None
