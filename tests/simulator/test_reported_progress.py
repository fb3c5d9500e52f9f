"""What the simulated advisor sees of a job is what the controller would read: the job's report
rendered as the TrainJob's ``status.trainerStatus`` and parsed by ``advisor.sources``, with only the
fields the job's reporter sends."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from simworld import QUIET, one_queue, scenario

from advisor.cli import main
from advisor.model import ProgressSample
from simulator.advisor_strategy import AdvisorStrategy
from simulator.baselines import NoAdvisor
from simulator.curves import CurveLibrary
from simulator.jobs import WorldConfig, build_jobs
from simulator.runner import policy_strategies, run_strategy
from simulator.scenario import default_scenario
from simulator.traces import TraceJob

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"


class Watching(AdvisorStrategy):
    """The sample's advisor row, keeping every sample it was fed and what its core made of them."""

    def __init__(self) -> None:
        row = policy_strategies([SAMPLE])[0]
        assert isinstance(row, AdvisorStrategy)
        super().__init__(row.name, row.policies)
        self.samples: dict[str, list[ProgressSample]] = {}
        self.totals: dict[str, set[int | None]] = {}

    def tick(self, job: Any, samples: Any, now: float) -> Any:
        self.samples.setdefault(job.key, []).extend(samples)
        out = super().tick(job, samples, now)
        rec = self.core.record(job.key)
        self.totals.setdefault(job.key, set()).add(rec.total_steps if rec is not None else None)
        return out


def _jobs(n: int, world: WorldConfig) -> Any:
    trace = [TraceJob(f"j{i}", 60.0 * i, 8, 7200.0, total_steps=3600) for i in range(n)]
    return scenario(trace, one_queue(8 * n), world=world)


def test_every_sample_is_read_from_the_trainjobs_trainer_status() -> None:
    row = Watching()
    res = run_strategy(_jobs(3, replace(QUIET, reports_total_steps=1.0, reports_learning_rate=1.0)), row)
    by_key = {j.key: j for j in res.jobs}
    assert sum(len(v) for v in row.samples.values()) > 100
    for key, samples in row.samples.items():
        job = by_key[key]
        for s in samples:
            assert s.source == "trainerStatus" and s.warnings == ()
            assert s.time is not None and s.time == math.floor(s.time)  # metav1.Time: whole seconds
            assert s.total_steps == job.total_steps
            assert s.progress_percentage == int(100 * s.step / job.total_steps)
            assert s.learning_rate == pytest.approx(job.curve.learning_rate(s.step), rel=1e-6)
            assert s.loss == pytest.approx(job.curve.observed(s.step), rel=1e-5)  # 7 digits as text


def test_the_simulator_and_the_back_test_share_the_one_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sample a row is fed was parsed by ``advisor.sources.sample_from_object`` from a
    TrainJob object, through ``advisor.reported`` (the back-test's path), not built by hand."""
    import advisor.reported as reported
    from simulator import replay_memo

    bodies: list[dict[str, Any]] = []
    real = reported.sample_from_object

    def spy(body: Any, *, now: float | None = None) -> Any:
        bodies.append(body)
        return real(body, now=now)

    monkeypatch.setattr(reported, "sample_from_object", spy)
    replay_memo.clear()  # no report parsed by an earlier replay in this process
    row = Listening()
    run_strategy(_jobs(2, QUIET), row)
    assert row.samples and len(bodies) == len(row.samples)
    assert all(b["kind"] == "TrainJob" and "trainerStatus" in b["status"] for b in bodies)


def test_a_job_whose_reporter_omits_its_total_and_learning_rate_is_judged_without_them() -> None:
    row = Watching()
    res = run_strategy(_jobs(3, replace(QUIET, reports_total_steps=0.0, reports_learning_rate=0.0)), row)
    assert all(not j.reports_total and not j.reports_lr for j in res.jobs)
    samples = [s for ss in row.samples.values() for s in ss]
    assert samples
    assert all(s.total_steps is None and s.progress_percentage is None for s in samples)
    assert all(s.learning_rate is None and s.loss is not None for s in samples)
    # the core never learns the run's length: only the reports could have told it
    assert all(totals == {None} for totals in row.totals.values())


def test_by_default_some_jobs_omit_their_total_or_learning_rate_and_no_other_draw_changes() -> None:
    sc = default_scenario(seed=3)
    lib = CurveLibrary()
    jobs = build_jobs(sc.trace.jobs, sc.queue_map, sc.world, lib, sc.seed)
    total = sum(j.reports_total for j in jobs) / len(jobs)
    lr = sum(j.reports_lr for j in jobs) / len(jobs)
    assert 0.65 < total < 0.95 and 0.65 < lr < 0.95  # WorldConfig's 0.8 each, 120 jobs
    assert any(j.reports_total and not j.reports_lr for j in jobs)
    assert any(j.reports_lr and not j.reports_total for j in jobs)
    every = replace(sc.world, reports_total_steps=1.0, reports_learning_rate=1.0)
    same = build_jobs(sc.trace.jobs, sc.queue_map, every, lib, sc.seed)
    assert all(a.reports_total and a.reports_lr for a in same)
    # common random numbers: the reporter's draw is a stream of its own
    assert [(j.curve, j.step_time, j.failures, j.jit) for j in jobs] == [
        (j.curve, j.step_time, j.failures, j.jit) for j in same
    ]


class Listening(NoAdvisor):
    """Looks at every job every 10 minutes, keeps what it was fed and never acts."""

    name = "listening"

    def __init__(self) -> None:
        self.samples: list[ProgressSample] = []

    def first_tick(self, job: Any) -> float | None:
        return 600.0

    def next_tick(self, job: Any, now: float) -> float | None:
        return 600.0

    def tick(self, job: Any, samples: Any, now: float) -> Any:
        self.samples.extend(samples)
        return ()


def test_a_blown_up_loss_reaches_the_core_as_nan() -> None:
    """The helper's channel sends a NaN loss as text, as Hugging Face's callback does: the one
    report that proves a divergence is not dropped on the way."""
    lib = CurveLibrary(mix={"diverge": 1.0})
    for seed in range(20):
        sc = scenario([TraceJob("d", 0.0, 8, 7200.0, total_steps=3600)], one_queue(8), QUIET, seed=seed)
        row = Listening()
        res = run_strategy(sc, row, library=lib)
        bad = res.jobs[0].curve.non_finite_from()
        if bad is not None and bad < 3000:
            break
    else:
        pytest.fail("no divergence blew up to NaN in 20 draws")
    late = [s for s in row.samples if s.step > bad + 100]
    assert late and all(s.loss is not None and math.isnan(s.loss) for s in late)
    assert all(any("non-finite" in w for w in s.warnings) for s in late)


def test_a_share_outside_zero_to_one_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--reports-total-steps", "--reports-learning-rate"):
        assert main(["simulate", "--jobs", "3", "--quiet", "--baselines-only", flag, "1.5"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0]
    with pytest.raises(ValueError, match="reports_total_steps"):
        WorldConfig(reports_total_steps=-0.1)


def test_no_advisor_rows_run_unchanged_by_what_jobs_report() -> None:
    """What a job reports changes only what a row can see, never the job itself."""
    a = run_strategy(_jobs(2, replace(QUIET, reports_total_steps=0.0)), NoAdvisor())
    b = run_strategy(_jobs(2, replace(QUIET, reports_total_steps=1.0)), NoAdvisor())
    assert [(j.end_time, j.gpu_s) for j in a.jobs] == [(j.end_time, j.gpu_s) for j in b.jobs]
