"""Which jobs the advisor row looks at closely: a job is watched (re-forecast every watch interval)
only for a condition the policy that selects it acts on, and in a row with ``looks_per_run`` a
quiet job gets the close look (``close_interval_s``) when its loss flattens under a policy with a
plateau rule, or rises under one with a divergence rule; never less often than its quiet bound.
With ``reference_gpus`` those quiet spacings grow with the square root of how few GPUs the job
holds (a late look at a small job burns less)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from simworld import QUIET, one_queue, scenario

from advisor.model import Decision, Forecast, Interval, ProgressSample
from simulator.advisor_strategy import LOOKS_PER_RUN, AdvisorStrategy
from simulator.runner import policy_strategies, run_strategy
from simulator.traces import TraceJob

ROOT = Path(__file__).resolve().parents[2]
PLATEAU_RELEASE = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
FINE_TUNE, PRETRAINING = "plateau-release", "plateau-release-pretraining"


def _row(**kw: object) -> AdvisorStrategy:
    row = policy_strategies([PLATEAU_RELEASE], **kw)[0]  # type: ignore[arg-type]
    assert isinstance(row, AdvisorStrategy)
    return row


def _with_forecast(row: AdvisorStrategy, key: str, plateau: float, diverge: float) -> None:
    row.core.observe(key, ProgressSample(step=10, loss=1.0, time=0.0, total_steps=1000), now=0.0)
    rec = row.core.record(key)
    assert rec is not None
    rec.forecast = Forecast(Interval(1.0, 0.9, 1.1), plateau, diverge, current_loss=1.0, n_points=50)


def _with_losses(row: AdvisorStrategy, key: str, losses: list[float], policy: str | None) -> None:
    for i, loss in enumerate(losses, start=1):
        sample = ProgressSample(step=100 * i, loss=loss, time=60.0 * i, total_steps=100 * 4 * len(losses))
        row.core.observe(key, sample, now=60.0 * i)
    rec = row.core.record(key)
    assert rec is not None
    rec.last_decision = None if policy is None else Decision(job=key, policy=policy)


def test_the_sample_file_holds_a_plateau_policy_and_a_divergence_only_one() -> None:
    row = _row()
    assert row.looks._watches == {FINE_TUNE: (True, True), PRETRAINING: (False, True)}


@pytest.mark.parametrize(
    ("policy", "plateau", "diverge", "advice", "watched"),
    [
        (FINE_TUNE, 0.8, 0.0, "continue", True),
        (PRETRAINING, 0.8, 0.0, "continue", False),  # flat pre-training run: no plateau rule to act
        (PRETRAINING, 0.0, 0.0, "plateau?", False),
        (PRETRAINING, 0.0, 0.8, "continue", True),  # but its divergence rule acts
        (FINE_TUNE, 0.2, 0.1, "continue", False),
        (FINE_TUNE, 0.0, 0.0, "diverging?", True),
        (None, 0.9, 0.9, "", False),  # no policy selects the job
    ],
)
def test_a_job_is_watched_only_for_what_its_own_policy_acts_on(
    policy: str | None, plateau: float, diverge: float, advice: str, watched: bool
) -> None:
    row = _row()
    _with_forecast(row, "ns/j", plateau, diverge)
    spacing = row.looks.forecast_spacing("ns/j", Decision(job="ns/j", policy=policy, advice=advice))
    assert spacing == (row.looks.watch_interval_s if watched else row.forecast_interval_s)


def test_rising_and_flattening_read_the_recent_trend() -> None:
    row = _row(looks_per_run=LOOKS_PER_RUN)
    _with_losses(row, "ns/up", [1.0 + 0.01 * i for i in range(20)], None)
    _with_losses(row, "ns/down", [2.0 - 0.05 * i for i in range(20)], None)
    _with_losses(row, "ns/flat", [1.0 - 0.0001 * i for i in range(20)], None)
    _with_losses(row, "ns/nan", [1.0] * 10 + [math.nan] * 10, None)
    _with_losses(row, "ns/few", [1.0, 0.9, 0.8], None)
    assert row.looks.rising("ns/up") and row.looks.flattening("ns/up")  # no improvement left either
    assert not row.looks.rising("ns/down") and not row.looks.flattening("ns/down")
    assert not row.looks.rising("ns/flat") and row.looks.flattening("ns/flat")
    assert row.looks.rising("ns/nan") and row.looks.flattening("ns/nan")
    assert not row.looks.rising("ns/few") and not row.looks.flattening("ns/few")  # fewer than 8 points


@pytest.mark.parametrize(
    ("trend", "policy", "close"),
    [
        ("flat", FINE_TUNE, True),
        ("flat", PRETRAINING, False),  # a flat pre-training run: nothing its policy would act on
        ("up", PRETRAINING, True),  # a rising one: its divergence rule would
        ("up", FINE_TUNE, True),
        ("down", FINE_TUNE, False),
        ("flat", None, True),  # before any decision the policy is not known: both count
    ],
)
def test_the_close_look_follows_the_trend_and_the_jobs_policy(
    trend: str, policy: str | None, close: bool
) -> None:
    row = _row(looks_per_run=LOOKS_PER_RUN)
    losses = {
        "flat": [1.0 - 0.0001 * i for i in range(20)],
        "up": [1.0 + 0.01 * i for i in range(20)],
        "down": [2.0 - 0.05 * i for i in range(20)],
    }[trend]
    _with_losses(row, "ns/j", losses, policy)
    assert row.looks._close_look("ns/j") is close


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="close_interval_s"):
        _row(close_interval_s=0.0)
    with pytest.raises(ValueError, match="flatten_margin"):
        _row(flatten_margin=1.5)


def test_a_flattening_long_run_is_looked_at_every_close_interval() -> None:
    """Quiet looks once per share of the run (at least the forecast interval); once the loss
    flattens, every ``close_interval_s``, a shorter spacing than the quiet one."""
    row = _row(looks_per_run=LOOKS_PER_RUN, forecast_interval_s=3600.0, close_interval_s=1200.0)
    sc = scenario([TraceJob("long", 0.0, 8, 100 * 3600.0, total_steps=200_000)], one_queue(8), QUIET)
    sc.curve_mix = {"late_plateau": 1.0}
    ticks: list[tuple[float, bool, int]] = []
    original = row.tick

    def spy(job, samples, now):
        before, near = row.core.forecasts_made, job.key in row.looks._spacing
        acts = original(job, samples, now)
        close = job.key in row.looks._flat and not near  # a close look, not the watch of a near decision
        ticks.append((now, close, row.core.forecasts_made - before))
        return acts

    row.tick = spy  # type: ignore[method-assign]
    res = run_strategy(sc, row)
    forecast_times = [(t, close) for t, close, made in ticks if made]
    # a close look never comes sooner than the close interval after the previous forecast, and runs
    # of them come exactly that far apart (the first of a run comes at a quiet look's tick)
    gaps = [(b - a, c1, c2) for (a, c1), (b, c2) in itertools.pairwise(forecast_times)]
    assert all(gap >= row.looks.close_interval_s * (1 - 1e-6) for gap, _c1, c2 in gaps if c2)
    in_a_row = [gap for gap, c1, c2 in gaps if c1 and c2]
    assert in_a_row, "the plateaued run never flattened"
    assert sum(gap <= row.looks.close_interval_s + 1.0 for gap in in_a_row) > len(in_a_row) / 2
    assert sum(row.forecasts_by_job.values()) == row.core.forecasts_made == len(forecast_times)
    assert res.metrics["released_or_stopped"] == 1  # the plateau was acted on


def test_a_small_jobs_quiet_looks_are_spaced_by_the_square_root_of_its_stake() -> None:
    """With ``reference_gpus``, a quiet look at a job holding fewer GPUs comes sqrt(reference /
    gpus) times later (a late look at it burns less), at a larger one sooner, never sooner than
    the watch interval; the close look scales alike. Without it every job is looked at alike."""
    row = _row(looks_per_run=LOOKS_PER_RUN, forecast_interval_s=3600.0, reference_gpus=8.0)
    plain = _row(looks_per_run=LOOKS_PER_RUN, forecast_interval_s=3600.0)
    # the two fields the spacing reads of a simulated job
    sim_jobs = {name: SimpleNamespace(key=f"ns/{name}", gpus=g) for name, g in (("small", 2), ("big", 32))}
    assert row.looks.stake_factor(sim_jobs["small"]) == pytest.approx(2.0)
    assert row.looks.stake_factor(sim_jobs["big"]) == pytest.approx(0.5)
    assert plain.looks.stake_factor(sim_jobs["small"]) == 1.0
    # a row without looks per run spaces its looks by wall-clock time alone
    assert _row(reference_gpus=8.0).looks.stake_factor(sim_jobs["small"]) == 1.0
    # before any progress the core's bound is the forecast interval
    assert row.looks._quiet_bound(sim_jobs["small"]) == pytest.approx(7200.0)
    assert row.looks._quiet_bound(sim_jobs["big"]) == pytest.approx(1800.0)
    assert plain.looks._quiet_bound(sim_jobs["small"]) == plain.looks._quiet_bound(sim_jobs["big"]) == 3600.0
    assert row.looks._close_bound(sim_jobs["small"]) == pytest.approx(2 * row.looks.close_interval_s)
    tiny = _row(looks_per_run=LOOKS_PER_RUN, forecast_interval_s=600.0, reference_gpus=1.0)
    assert tiny.looks._quiet_bound(sim_jobs["big"]) == tiny.looks.watch_interval_s  # 600 s / sqrt(32) < 300 s
    assert tiny.looks._close_bound(sim_jobs["big"]) == tiny.looks.watch_interval_s
    with pytest.raises(ValueError, match="reference_gpus"):
        _row(reference_gpus=0.0)


def test_a_quiet_judged_run_is_next_looked_at_after_its_share_of_the_run_times_its_stake() -> None:
    """A 100-hour run half done, looked at 24 times per run: its next tick comes after 100 h / 24
    on 8 GPUs (the reference), twice that on 2 GPUs, once the core has measured its throughput."""
    delays = {}
    for gpus in (8, 2):
        row = _row(looks_per_run=LOOKS_PER_RUN, forecast_interval_s=3600.0, reference_gpus=8.0)
        key = f"ns/run-{gpus}"
        for i in range(1, 51):  # one step per second, a report an hour
            sample = ProgressSample(step=3600 * i, loss=2.0 / i, time=3600.0 * i, total_steps=360_000)
            row.core.observe(key, sample, now=3600.0 * i)
        job = SimpleNamespace(key=key, gpus=gpus, first_start=0.0)
        delays[gpus] = row.next_tick(job, 50 * 3600.0)  # type: ignore[arg-type]
    assert delays[8] == pytest.approx(360_000 / LOOKS_PER_RUN, rel=1e-6)
    assert delays[2] == pytest.approx(2 * delays[8], rel=1e-6)
