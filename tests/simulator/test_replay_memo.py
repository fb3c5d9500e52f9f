"""The simulator's memo of pure work (``simulator.replay_memo``) changes what a replay costs, never
what it decides: a row replayed with the memo warm from other rows decides as one replayed cold."""

from __future__ import annotations

from pathlib import Path

from advisor.reported import read_back
from advisor.training.report import Report
from simulator import replay_memo
from simulator.runner import policy_strategies, run_strategy
from simulator.scenario import default_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_a_report_is_parsed_as_the_controller_parses_it_and_kept_only_when_the_clock_does_not_matter() -> (
    None
):
    replay_memo.clear()
    report = Report(time=1_800_000_000.0, step=120, total_steps=1000, metrics={"loss": 1.25})
    first = replay_memo.sample(report, name="j", namespace="ns", now=1_800_000_060.0)
    assert first == read_back(report, name="j", namespace="ns", now=1_800_000_060.0)
    # the same report seen later, by another row: the very same sample
    assert replay_memo.sample(report, name="j", namespace="ns", now=1_800_000_900.0) is first
    # another job's report with the same numbers is another report
    assert replay_memo.sample(report, name="k", namespace="ns", now=1_800_000_060.0) is not first
    # a report from the observer's future is parsed with its clock-skew warning, never kept
    ahead = Report(time=1_800_010_000.0, step=130, total_steps=1000, metrics={"loss": 1.2})
    parsed = replay_memo.sample(ahead, name="j", namespace="ns", now=1_800_000_000.0)
    assert parsed is not None and any("clock skew" in w for w in parsed.warnings)
    assert len(replay_memo._SAMPLES) == 2


def test_a_row_decides_the_same_with_the_memo_warm_from_other_rows_as_cold() -> None:
    policies = [ROOT / "manifests/samples/policy-plateau-release.yaml"]
    scenario = default_scenario(seed=2, n_jobs=40)
    replay_memo.clear()
    cold = run_strategy(scenario, policy_strategies(policies)[0]).metrics
    assert replay_memo.forecast.cache_info().currsize > 0 and replay_memo._SAMPLES
    # warm: the same reports and curves are now found, not made again
    hits = replay_memo.forecast.cache_info().hits
    warm = run_strategy(scenario, policy_strategies(policies)[0]).metrics
    assert replay_memo.forecast.cache_info().hits > hits
    drop = {"wall_seconds"}
    assert {k: v for k, v in warm.items() if k not in drop} == {
        k: v for k, v in cold.items() if k not in drop
    }
