"""How often the advisor row looks at a job: a row whose rules all judge learning skips the looks no
decision can depend on (before the policy may judge the job, and a decision's watchdog, the stall
rule's timer, while the job keeps reporting new steps) and looks at a long quiet job about
``looks_per_run`` times over its run; the other rows keep the plain cadence."""

from __future__ import annotations

import itertools
from pathlib import Path

from simworld import QUIET, one_queue, scenario

from simulator.advisor_strategy import LOOKS_PER_RUN, AdvisorStrategy, learning_only
from simulator.engine import Simulation
from simulator.jobs import Phase
from simulator.look_schedule import LookSchedule
from simulator.quota import QuotaModel
from simulator.runner import policy_strategies, run_strategy
from simulator.traces import TraceJob

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "manifests" / "samples").glob("policy-*.yaml"))
HOURS = 200.0


def _rows() -> dict[str, AdvisorStrategy]:
    rows = {}
    for s in policy_strategies(SAMPLES, looks_per_run=LOOKS_PER_RUN):
        assert isinstance(s, AdvisorStrategy)
        rows[s.name] = s
    return rows


def _long_run(
    strategy: AdvisorStrategy, pathology: str, flat: list[bool] | None = None
) -> tuple[list[float], object]:
    """One ``HOURS``-long job; returns the times of its ticks and the run's result (and whether
    each tick found the run flattening, into ``flat``)."""
    sc = scenario(
        [TraceJob("long", 0.0, 8, HOURS * 3600.0, total_steps=400_000)], one_queue(8), QUIET, seed=2
    )
    sc.curve_mix = {pathology: 1.0}
    ticks: list[float] = []
    original = strategy.tick

    def spy(job, samples, now):
        ticks.append(now)
        acts = original(job, samples, now)
        if flat is not None:
            flat.append(job.key in strategy.looks._flat)
        return acts

    strategy.tick = spy  # type: ignore[method-assign]
    return ticks, run_strategy(sc, strategy)


def test_only_the_learning_rows_skip_looks() -> None:
    rows = _rows()
    assert rows["advisor-plateau-release"].looks.learning_only
    for name in ("advisor-preemption-guard", "advisor-deadline", "advisor-elastic-growth"):
        assert not rows[name].looks.learning_only, name  # periodic checkpoints, guard, deadline, growth
    assert not learning_only(())


def test_a_long_learning_run_is_looked_at_about_looks_per_run_times_until_it_flattens() -> None:
    strategy = _rows()["advisor-plateau-release"]
    flat: list[bool] = []
    ticks, res = _long_run(strategy, "none", flat)
    job = res.jobs[0]  # type: ignore[attr-defined]
    start = job.first_start + job.restart_cost
    judged = start + 0.1 * job.total_steps * job.step_time  # minProgress 10%
    early = [t for t in ticks if t < judged - 1.0]
    assert len(early) <= 4, early  # until a throughput is measured, then straight to the projected 10%
    assert strategy.looks.looks_per_run is not None
    quiet_spacing = HOURS * 3600.0 / strategy.looks.looks_per_run
    pairs = zip(itertools.pairwise(ticks), flat, strict=False)
    steep = [(a, b) for (a, b), f in pairs if a > judged and not f]
    assert steep and len(steep) <= 1.5 * strategy.looks.looks_per_run, len(steep)
    gaps = sorted(b - a for a, b in steep)
    assert gaps[len(gaps) // 2] >= 0.9 * quiet_spacing  # nor did the stall timer bring ticks
    if any(flat):  # a flattening run is looked at on the plain interval again
        fine = [b - a for (a, b), f in zip(itertools.pairwise(ticks), flat, strict=False) if f]
        assert min(fine) <= strategy.forecast_interval_s + 1.0


def test_without_looks_per_run_the_same_run_costs_more() -> None:
    row = policy_strategies([ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"])[0]
    assert isinstance(row, AdvisorStrategy)
    plain = AdvisorStrategy(row.name, row.policies, forecast_interval_s=1200.0, looks_per_run=None)
    ticks, _res = _long_run(plain, "none")
    scaled, _res = _long_run(_rows()["advisor-plateau-release"], "none")
    assert len(ticks) > 1.5 * len(scaled), (len(ticks), len(scaled))


def test_a_hung_long_run_is_released_when_the_stall_window_ends() -> None:
    """The stall timer brings no tick while steps advance, and fires on the dot once they stop."""
    strategy = _rows()["advisor-plateau-release"]
    released: list[float] = []
    original = strategy.record

    def spy(job, action, request_id, now):
        original(job, action, request_id, now)
        rec = strategy.core.record(job.key)
        if action.kind.value == "release-quota" and rec is not None and rec.last_step_change is not None:
            released.append(now - rec.last_step_change)

    strategy.record = spy  # type: ignore[method-assign]
    ticks, res = _long_run(strategy, "hang")
    job = res.jobs[0]  # type: ignore[attr-defined]
    assert job.phase is Phase.RELEASED
    assert released and 1800.0 <= released[0] <= 1801.0, released
    assert len(ticks) < 60


def test_advances_until_follows_the_job_to_its_hang() -> None:
    sc = scenario([TraceJob("h", 0.0, 8, 10 * 3600.0, total_steps=10_000)], one_queue(8), QUIET, seed=1)
    sc.curve_mix = {"hang": 1.0}
    res = run_strategy(sc, _rows()["advisor-plateau-release"])
    job = res.jobs[0]
    sim = Simulation([job], QuotaModel(sc.queues), sc.world, _rows()["advisor-plateau-release"])
    job.phase, job.phase_start, job.phase_step = Phase.RUNNING, 0.0, 0.0
    assert job.hang_step is not None
    hang_at = job.hang_step * job.step_time / job.rate_factor
    assert sim.advances_until(job, 0.5 * hang_at)
    assert not sim.advances_until(job, hang_at + 1.0)
    job.phase = Phase.CHECKPOINTING
    assert not sim.advances_until(job, 1.0)  # not running: a timer is honoured


def _short_run(
    strategy: AdvisorStrategy, pathology: str, seed: int
) -> tuple[list[tuple[float, bool]], object]:
    """One hour-long 1-GPU job; returns (time, whether a forecast was made) per tick and the result."""
    sc = scenario([TraceJob("s", 0.0, 1, 3600.0, total_steps=3600)], one_queue(8), QUIET, seed=seed)
    sc.curve_mix = {pathology: 1.0}
    ticks: list[tuple[float, bool]] = []
    original = strategy.tick

    def spy(job, samples, now):
        made = strategy.core.forecasts_made
        acts = original(job, samples, now)
        ticks.append((now, strategy.core.forecasts_made != made))
        return acts

    strategy.tick = spy  # type: ignore[method-assign]
    return ticks, run_strategy(sc, strategy)


def _scaled_row() -> AdvisorStrategy:
    row = policy_strategies(
        [ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"],
        looks_per_run=24.0,
        reference_gpus=8.0,
    )[0]
    assert isinstance(row, AdvisorStrategy)
    return row


def test_a_short_run_is_not_looked_at_once_no_forecast_is_left_before_its_end() -> None:
    ticks, res = _short_run(_scaled_row(), "none", seed=0)
    job = res.jobs[0]  # type: ignore[attr-defined]
    assert job.phase is Phase.DONE
    first = next(i for i, (_t, made) in enumerate(ticks) if made)
    assert ticks[first + 1 :] == []  # its next forecast would come hours after its end


def test_skipping_the_looks_left_changes_no_outcome(monkeypatch) -> None:
    """Diverging runs (a NaN loss is acted on at once, without a forecast: those looks stay), hung
    runs (the stall rule's watchdog brings its own tick) and plateaus end exactly as when every
    look is made, with fewer looks."""
    fewer = 0
    for pathology, seed in [
        ("diverge", 2),
        ("diverge", 6),
        ("hang", 1),
        ("hang", 7),
        ("early_plateau", 3),
        ("none", 1),
    ]:
        skipped, res = _short_run(_scaled_row(), pathology, seed)
        with monkeypatch.context() as m:
            m.setattr(LookSchedule, "looks_left_s", lambda self, job, now: None)
            every, ref = _short_run(_scaled_row(), pathology, seed)
        a, b = res.jobs[0], ref.jobs[0]  # type: ignore[attr-defined]
        assert (a.phase, a.end_time) == (b.phase, b.end_time), (pathology, seed)
        assert len(skipped) <= len(every)
        fewer += len(every) - len(skipped)
    assert fewer >= 5
