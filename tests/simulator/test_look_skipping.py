"""Looks the simulator skips by reading its own model of the job (``Simulation.advances_until``: a
decision's watchdog is honoured only when the job stops progressing before the next look) change
no decision: a scenario run both ways ends every job the same way at the same time."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.engine import Simulation
from simulator.quota import QuotaModel
from simulator.runner import policy_strategies, run_strategy
from simulator.scenario import default_scenario

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"


def _outcomes(seed: int) -> list[tuple[str, float | None, int]]:
    sc = default_scenario(seed=seed, n_jobs=30)
    sc.curve_mix = {"hang": 0.5, "early_plateau": 0.25, "none": 0.25}  # the watchdog's case: hung runs
    res = run_strategy(sc, policy_strategies([SAMPLE])[0])
    return [(str(j.phase), j.end_time, j.checkpoints) for j in res.jobs]


@pytest.mark.parametrize("seed", [0, 1])
def test_honouring_every_watchdog_changes_no_outcome(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    skipping = _outcomes(seed)
    with monkeypatch.context() as m:
        m.setattr(Simulation, "advances_until", lambda self, job, t: False)  # never skip a watchdog
        every = _outcomes(seed)
    assert skipping == every
    assert any(phase == "released" for phase, _t, _c in skipping)  # the stall rule did act


def test_the_controllers_defaults_are_the_scenarios_and_the_others_are_settings() -> None:
    """No elastic bounds (a TrainJob declares none), minRuntime counted from creation, PriorityBoost
    off; each of the three can be switched for a scenario."""
    from dataclasses import replace

    from simulator.jobs import WorldConfig
    from simulator.scenario import with_world

    world = WorldConfig()
    assert (world.elastic, world.runtime_from, world.priority_boost_enabled) == (False, "creation", False)
    sc = default_scenario(seed=0, n_jobs=6)
    for elastic, runtime_from in ((False, "creation"), (True, "admission")):
        scen = with_world(sc, elastic=elastic, runtime_from=runtime_from)
        res = run_strategy(scen, policy_strategies([SAMPLE])[0])
        sim = Simulation(res.jobs, QuotaModel(scen.queues), scen.world, policy_strategies([SAMPLE])[0])
        for job in res.jobs:
            view = sim.job_view(job)
            assert (view.min_nodes is None) is (not elastic)
            expected = job.trace.submit if runtime_from == "creation" else job.first_start
            assert view.started_at == expected
    with pytest.raises(ValueError, match="runtime_from"):
        replace(world, runtime_from="boot")
