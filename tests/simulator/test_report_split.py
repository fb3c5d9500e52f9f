"""The report's split of non-learning GPU-hours: runs released too late vs runs never caught."""

from __future__ import annotations

from pathlib import Path

import pytest
from simworld import QUIET, one_queue, scenario

from simulator.jobs import Phase
from simulator.report import nonlearning_split, write_report
from simulator.runner import policy_strategies, run_strategy
from simulator.traces import TraceJob

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"


def test_split_adds_up_to_the_rows_non_learning_hours_and_names_the_lag(tmp_path: Path) -> None:
    jobs = [TraceJob(f"j{i}", 60.0 * i, 2, 6 * 3600.0, total_steps=8000) for i in range(4)]
    sc = scenario(jobs, one_queue(16), QUIET, seed=3)
    sc.curve_mix = {"early_plateau": 0.5, "none": 0.5}
    res = run_strategy(sc, policy_strategies([SAMPLE])[0])
    split = nonlearning_split(res)
    by_pathology = res.metrics["gpu_hours_nonlearning_by_pathology"]
    for name, d in split.items():
        assert d["released_h"] + d["ran_on_h"] == pytest.approx(by_pathology[name], abs=1e-3)
    released = [j for j in res.jobs if j.phase is Phase.RELEASED and j.nonlearning_gpu_s > 0]
    assert released, "the scenario must release something for the split to be tested"
    assert sum(d["released"] for d in split.values()) == len(released)
    for name, d in split.items():
        held = sorted(j.nonlearning_gpu_s / 3600 / j.gpus for j in released if j.curve.pathology == name)
        if held:
            assert min(held) <= d["lag_h"] <= max(held)
        else:
            assert d["lag_h"] == 0.0
    report = write_report([res], tmp_path, title="t", meta={}, capacity=16).read_text()
    assert "## Where the non-learning GPU-hours go" in report
    # the count leaves out runs released while still learning, and says so: a row's 31 releases
    # read beside 3 'released: runs' with nothing to tell why
    assert "a run released or stopped while still learning" in report
    assert "*released: runs* can be fewer than the row's releases" in report
    assert f"| {res.metrics['policy']} | early_plateau |" in report
