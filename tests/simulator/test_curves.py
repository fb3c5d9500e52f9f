"""The curve library: hidden ground truth, pathologies, deterministic noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.curves import CurveLibrary, CurveSpec, load_curve_params


def spec(**kw: object) -> CurveSpec:
    base: dict[str, object] = dict(
        total_steps=10_000, l_inf=2.0, a=6.0, alpha=0.5, x0=0.002, schedule="constant", noise=0.01, seed=1
    )
    base.update(kw)
    return CurveSpec(**base)  # type: ignore[arg-type]


def test_plateau_stops_learning_where_it_starts() -> None:
    c = spec(pathology="early_plateau", at=0.3)
    end = c.learning_end_step()
    assert 0.15 * 10_000 < end <= 0.3 * 10_000 + 10
    assert c.remaining_improvement(4000) < 0.01
    assert c.remaining_improvement(500) > 0.01


def test_divergence_blows_up_to_nan_and_counts_as_not_learning() -> None:
    c = spec(pathology="diverge", at=0.4)
    assert math.isnan(c.observed(9_000))
    assert c.learning_end_step() <= 4_100
    assert c.remaining_improvement(5_000) == 0.0


def test_hang_stops_steps_and_learning_at_the_hang() -> None:
    c = spec(pathology="hang", at=0.5, schedule="cosine")
    assert c.hang_step == 5_000
    assert c.learning_end_step() <= 5_000
    assert c.remaining_improvement(5_000) == 0.0


def test_healthy_cosine_run_learns_almost_to_the_end() -> None:
    c = spec(schedule="cosine", anneal_gain=0.5)
    assert c.learning_end_step() > 8_000
    assert c.remaining_improvement(5_000) > 0.05


def test_noise_is_deterministic_per_step_and_about_the_calibrated_size() -> None:
    c = spec(noise=0.02)
    steps = np.arange(1000, 2000)
    a = c.observed_many(steps)
    assert np.array_equal(a, c.observed_many(steps))
    assert c.observed(1500) == pytest.approx(a[500])
    rel = a / c.clean(steps / c.total_steps) - 1.0
    assert 0.015 < float(np.std(rel)) < 0.025


@pytest.mark.parametrize("schedule", ["constant", "cosine", "wsd"])
def test_a_runs_reports_carry_its_losses_and_learning_rates(schedule: str) -> None:
    c = spec(schedule=schedule, pathology="spikes", spikes=((0.5, 0.3),))
    steps = np.arange(1, 10_001, 37)
    losses, lrs = c.reports(steps)
    assert np.allclose(losses, [c.observed(int(s)) for s in steps], rtol=1e-12)  # one report at a time
    assert np.array_equal(lrs, c.lr(steps / c.total_steps))


def test_library_mix_and_shipped_parameters() -> None:
    params = load_curve_params()
    assert set(params["pathology_mix"]) <= {
        "none",
        "early_plateau",
        "late_plateau",
        "diverge",
        "hang",
        "slow",
        "spikes",
    }
    lib = CurveLibrary(mix={"hang": 1.0})
    rng = np.random.default_rng(0)
    assert all(lib.draw(rng, 1000, i).pathology == "hang" for i in range(5))
    with pytest.raises(ValueError, match="unknown pathologies"):
        CurveLibrary(mix={"wobble": 1.0})
    with pytest.raises(ValueError, match="not all zero"):
        CurveLibrary(mix={"none": 0.0})


def test_every_kind_of_run_meets_every_pathology() -> None:
    """The kind of run is drawn first and its schedule from that kind's mix: the kind is no
    function of the schedule (a label would otherwise tell the policy what only the future shows),
    and a plateau can strike a pre-training run as well as a fine-tune."""
    lib = CurveLibrary()
    rng = np.random.default_rng(7)
    drawn = [lib.draw(rng, 5000, i) for i in range(600)]
    kinds: dict[str, set[str]] = {c.schedule: set() for c in drawn}
    for c in drawn:
        kinds[c.schedule].add(c.workload_type)
    assert kinds["wsd"] == kinds["cosine"] == {"pretraining", "fine-tuning"}
    assert kinds["constant"] == {"fine-tuning"}  # the pre-training mix holds no constant schedule
    share = np.mean([c.workload_type == "pretraining" for c in drawn])
    assert abs(share - lib.pretraining_share) < 0.06
    wsd = np.mean([c.schedule == "wsd" for c in drawn])
    assert abs(wsd - 0.2) < 0.05  # the mix of schedules over every run, as before
    for pathology in ("early_plateau", "late_plateau", "slow"):
        assert {c.workload_type for c in drawn if c.pathology == pathology} == {"pretraining", "fine-tuning"}
    with pytest.raises(ValueError, match="workload_type"):
        spec(workload_type="rlhf")


def test_the_library_draws_pathology_and_schedule_as_numpy_choice_would() -> None:
    """The cached cumulative weights give the very draws ``rng.choice(names, p=...)`` gives, and
    leave the generator in the same state (every later draw of the job is unchanged)."""
    lib = CurveLibrary(mix={"none": 0.5, "early_plateau": 0.2, "hang": 0.0, "spikes": 0.3})
    for kind, schedules in lib.params["schedules"].items():
        for seed in range(300):
            ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
            assert lib._pathologies.draw(ours) == str(theirs.choice(list(lib.mix), p=list(lib.mix.values())))
            assert lib._schedules[kind].draw(ours) == str(
                theirs.choice(list(schedules), p=list(schedules.values()))
            )
            assert ours.random() == theirs.random()


def test_the_noise_table_is_drawn_on_the_first_report_from_the_runs_seed() -> None:
    c = spec(seed=7, noise=0.05)
    assert c._noise_table is None  # a run nobody reads costs no table
    z = np.random.default_rng(7).standard_normal(1024)
    steps = np.array([1, 10, 999, 5000])
    expected = c.clean(steps / c.total_steps) * (1.0 + 0.05 * z[(steps * 2654435761) % 1024])
    assert np.array_equal(c.observed_many(steps), expected)
    assert c.observed(999) == float(expected[2])


def test_non_finite_from_is_at_or_before_the_first_nan_report_of_a_divergence() -> None:
    spec = CurveSpec(total_steps=10_000, l_inf=1.0, a=2.0, alpha=0.5, x0=0.05, pathology="diverge", at=0.5)
    first = spec.non_finite_from()
    assert first is not None and 5_000 < first < 10_000
    steps = np.arange(1, 10_001)
    losses = spec.observed_many(steps)
    first_nan = int(steps[~np.isfinite(losses)][0])
    assert first <= first_nan
    assert np.isfinite(losses[: first - 1]).all()  # finite up to it (it is at most a grid step early)
    assert first_nan - first <= 2 * 10_000 / 511 + 1  # within two points of the truth grid
    healthy = CurveSpec(total_steps=10_000, l_inf=1.0, a=2.0, alpha=0.5, x0=0.05)
    assert healthy.non_finite_from() is None


def test_labels_come_from_the_scenario_never_from_the_curve() -> None:
    """No label by default; a stated labelling rate labels that share of jobs with the kind of run,
    wrong at the stated error rate; a trace's workload_type column wins over both."""
    from simulator.jobs import WorldConfig, build_jobs
    from simulator.traces import TraceJob

    rows = [TraceJob(f"j{i}", 0.0, 1, 3600.0) for i in range(400)]
    qmap = {"default": "cq"}
    lib = CurveLibrary()
    assert all(j.labels == {} for j in build_jobs(rows, qmap, WorldConfig(), lib, 3))
    labelled = build_jobs(rows, qmap, WorldConfig(label_rate=0.5, label_error=0.2), lib, 3)
    carry = [j for j in labelled if j.labels]
    assert 0.4 < len(carry) / len(rows) < 0.6
    wrong = sum(j.labels["workload-type"] != j.curve.workload_type for j in carry)
    assert 0.1 < wrong / len(carry) < 0.3
    # the labelling draws from a stream of its own: the curves are the unlabelled run's
    plain = build_jobs(rows, qmap, WorldConfig(), lib, 3)
    assert [j.curve for j in labelled] == [j.curve for j in plain]
    given = [TraceJob("p", 0.0, 1, 3600.0, workload_type="pretraining")]
    assert build_jobs(given, qmap, WorldConfig(), lib, 3)[0].labels == {"workload-type": "pretraining"}
    # and the output says how many carry one: the sample policies' figures are quoted both ways,
    # and a default run (none labelled) read as the labelled figure's contradiction
    from simulator.report import reporting_text

    assert "no job carries a workload-type label (--label-rate R" in reporting_text(plain)
    assert f"{len(carry)} of 400 jobs carry a workload-type label" in reporting_text(labelled)


def test_the_library_says_what_it_measured_and_what_it_assumes() -> None:
    """Every synthetic saving follows the pathology mix, an assumption: the output says so, with
    the shares the library draws from (a changed mix changes the sentence)."""
    text = CurveLibrary().description
    assert "fitted to real pre-training validation curves" in text
    assert "assumed, not measured: 55% of runs struck by a pathology" in text
    assert "30% pre-training runs" in text
    other = CurveLibrary(mix={"none": 0.8, "hang": 0.2}).description
    assert "20% of runs struck by a pathology" in other


def test_a_traces_workload_type_is_the_kind_of_run_the_job_is() -> None:
    """A trace's workload_type column says what each job is: its curve is drawn as that kind (a
    pre-training run's schedule mix, no fine-tune's eval series), so the label a selector reads is
    true of the run. Drawn independently, about a third of the trace's labels were wrong."""
    from simulator.jobs import WorldConfig, build_jobs
    from simulator.real_curves import RealCurveLibrary, _Run
    from simulator.traces import TraceJob

    kinds = ["pretraining", "fine-tuning"] * 100
    rows = [TraceJob(f"j{i}", 0.0, 1, 3600.0, workload_type=k) for i, k in enumerate(kinds)]
    qmap = {"default": "cq"}
    jobs = build_jobs(rows, qmap, WorldConfig(), CurveLibrary(), 3)
    assert [j.curve.workload_type for j in jobs] == kinds
    assert [j.labels["workload-type"] for j in jobs] == kinds
    assert all(not j.curve.eval_every for j in jobs if j.curve.workload_type == "pretraining")
    # rows without the column keep their drawn kinds and curves
    plain = [TraceJob(f"j{i}", 0.0, 1, 3600.0) for i in range(200)]
    drawn = build_jobs(plain, qmap, WorldConfig(), CurveLibrary(), 3)
    assert {j.curve.workload_type for j in drawn} == {"pretraining", "fine-tuning"}
    # real curves: a run of the trace's kind when the library has one
    xs = np.arange(1.0, 50.0)
    runs = [
        _Run("pt.csv", xs, 1.0 / xs, None, None, None, workload_type="pretraining"),
        _Run("ft.csv", xs, 2.0 / xs, None, None, None),
    ]
    library = RealCurveLibrary.__new__(RealCurveLibrary)
    library.curves = runs
    real = build_jobs(rows, qmap, WorldConfig(), library, 3)
    assert [j.curve.source for j in real] == ["pt.csv" if k == "pretraining" else "ft.csv" for k in kinds]
