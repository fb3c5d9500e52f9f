"""Paired train/eval curves: a third of the fine-tunes report an eval loss, some of them overfit (a
U shape), the run is judged by it, and the core reads it as the controller would."""

from __future__ import annotations

import copy

import numpy as np

from simulator.curves import CurveLibrary, CurveSpec, load_curve_params
from simulator.jobs import build_jobs
from simulator.runner import curve_library
from simulator.scenario import default_scenario
from tests.simulator.test_curves import spec as curves_spec


def spec(**kw: object) -> CurveSpec:
    """``test_curves``' run on a cosine schedule (its training loss falls to the end)."""
    return curves_spec(**{"schedule": "cosine", **kw})


def test_an_overfitting_eval_turns_up_and_the_run_stops_learning_near_its_minimum() -> None:
    plain = spec()
    u = spec(eval_every=500, eval_gap=0.1, overfit_at=0.4, overfit_rate=0.8, eval_noise=0.005)
    x = np.linspace(0.0, 1.0, 201)
    ev = u.eval_clean(x)
    best = float(x[int(np.argmin(ev))])
    assert 0.4 <= best < 0.6 and ev[-1] > ev.min() * 1.05  # a U shape: past its minimum it rises
    # the training loss still falls to the end; the run is judged by its eval loss
    assert plain.learning_end_step() > 0.8 * 10_000
    assert 0.3 * 10_000 < u.learning_end_step() <= best * 10_000 + 50
    assert u.remaining_improvement(0.7 * 10_000) == 0.0 < plain.remaining_improvement(0.7 * 10_000)
    # without an overfit the eval loss only sits above the training loss: the same truth
    flat = spec(eval_every=500, eval_gap=0.1, eval_noise=0.005)
    assert flat.learning_end_step() == plain.learning_end_step()


def test_each_report_carries_the_latest_evaluation_until_the_next() -> None:
    u = spec(eval_every=500, eval_gap=0.1, eval_noise=0.02)
    assert u.eval_observed(499) is None
    first = u.eval_observed(500)
    assert first is not None and u.eval_observed(999) == first and u.eval_observed(1000) != first
    assert u.eval_observed(1000) == spec(eval_every=500, eval_gap=0.1, eval_noise=0.02).eval_observed(1000)
    assert spec().eval_observed(5000) is None


def test_the_library_gives_fine_tunes_eval_series_without_changing_any_other_draw() -> None:
    params = load_curve_params()
    with_evals, without = (
        CurveLibrary(params),
        CurveLibrary({k: v for k, v in params.items() if k != "evals"}),
    )
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    drawn = [(with_evals.draw(rng_a, 5000, i), without.draw(rng_b, 5000, i)) for i in range(600)]
    for a, b in drawn:
        assert (a.l_inf, a.alpha, a.schedule, a.pathology, a.at) == (
            b.l_inf,
            b.alpha,
            b.schedule,
            b.pathology,
            b.at,
        )
        assert b.eval_every == 0
        assert a.eval_every == 0 or a.workload_type == "fine-tuning"
    fine = [a for a, _ in drawn if a.workload_type == "fine-tuning"]
    share = sum(a.eval_every > 0 for a in fine) / len(fine)
    assert abs(share - params["evals"]["share"]) < 0.07
    overfit = [a for a in fine if a.eval_every > 0 and a.overfit_at < 1.0]
    assert 0.15 < len(overfit) / sum(a.eval_every > 0 for a in fine) < 0.5
    assert all(0.002 <= a.eval_noise <= 0.1 for a in fine if a.eval_every > 0)
    # a library calibrated without evals (an older parameter file) draws none
    assert (
        CurveLibrary(copy.deepcopy({k: v for k, v in params.items() if k != "evals"}))
        .draw(np.random.default_rng(1), 100, 1)
        .eval_every
        == 0
    )


def test_the_default_scenario_has_eval_reporting_runs_and_the_core_reads_their_evals() -> None:
    from pathlib import Path

    from simulator.runner import policy_strategies, run_strategy

    scenario = default_scenario(seed=3, n_jobs=40)
    jobs = build_jobs(scenario.trace.jobs, scenario.queue_map, scenario.world, curve_library(scenario), 3)
    with_evals = [j for j in jobs if j.curve.eval_every]
    assert with_evals
    report = with_evals[0].progress_report(with_evals[0].curve.eval_every + 1, 100.0, 1.0, 1e-4)
    assert "eval_loss" in report.metrics
    policy = Path(__file__).resolve().parents[2] / "manifests" / "samples" / "policy-plateau-release.yaml"
    (strategy,) = policy_strategies([policy])
    seen: set[str] = set()
    original = strategy.tick

    def tick(job, samples, now):  # type: ignore[no-untyped-def]
        actions = original(job, samples, now)
        rec = strategy.core.record(job.key)
        if rec is not None and rec.history.evals.series("eval_loss") is not None:
            seen.add(job.key)
        return actions

    strategy.tick = tick  # type: ignore[method-assign]
    run_strategy(scenario, strategy)
    assert seen and seen <= {j.key for j in with_evals}
