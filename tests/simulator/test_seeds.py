"""``--seeds``: a range of seeds, pooled rows, the spread across seeds, the same rows on a pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main
from simulator.seeds import SeedError, parse_seeds, pool_rows

ROOT = Path(__file__).resolve().parents[2]
PLATEAU = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"


def test_seed_ranges_parse_and_bad_ones_say_why() -> None:
    assert parse_seeds("100-103") == [100, 101, 102, 103]
    assert parse_seeds("3, 7,10-11") == [3, 7, 10, 11]
    assert parse_seeds("5") == [5]
    for bad, why in (("9-3", "empty range"), ("a-b", "not a seed"), ("1-3,2", "twice"), ("", "not a seed")):
        with pytest.raises(SeedError, match=why):
            parse_seeds(bad)


def _row(name: str, nonlearning: float, wrong: dict[str, int], saved: float) -> dict[str, object]:
    return {
        "policy": name,
        "gpu_hours": 100.0 - saved,
        "gpu_hours_nonlearning": nonlearning,
        "gpu_hours_saved": saved,
        "wrong_stops": wrong["0.01"],
        "wrong_stops_by_threshold": wrong,
        "near_end_releases": 1,
        "jobs": 10,
        "jct_mean_s": 3600.0,
    }


def test_pooled_rows_sum_counts_and_give_the_spread_of_the_seeds() -> None:
    zero = {"0.005": 0, "0.01": 0, "0.02": 0}
    by_seed = [
        [_row("no-advisor", 40.0, zero, 0.0), _row("a", 10.0, {"0.005": 2, "0.01": 1, "0.02": 0}, 30.0)],
        [_row("no-advisor", 60.0, zero, 0.0), _row("a", 30.0, {"0.005": 1, "0.01": 0, "0.02": 0}, 20.0)],
    ]
    base, row = pool_rows(by_seed, [100, 101])
    assert row["seeds"] == [100, 101] and row["jobs"] == 20
    assert row["wrong_stops_by_threshold"] == {"0.005": 3, "0.01": 1, "0.02": 0}
    assert row["wrong_stop_fraction"] == pytest.approx(1 / 20)
    assert row["nonlearning_saved_fraction"] == pytest.approx(1 - 40.0 / 100.0)  # pooled, not averaged
    assert row["spread"]["nonlearning_saved_fraction"] == pytest.approx([0.5, 0.625, 0.75])
    assert [p["seed"] for p in row["per_seed"]] == [100, 101]
    assert row["stops"] == []  # these rows list none; a seed's stops carry their seed
    by_seed[1][1]["stops"] = [{"job": "q/j", "improvement_left": 0.0}]
    stops = pool_rows(by_seed, [100, 101])[1]["stops"]
    assert stops == [{"seed": 101, "job": "q/j", "improvement_left": 0.0}]
    assert row["near_end_releases"] == 2 and row["jct_mean_s"] == 3600.0
    assert base["nonlearning_saved_fraction"] == 0.0


def test_seeds_on_a_process_pool_give_the_rows_of_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--jobs", "8", "--seeds", "0-1", "--quiet", "--baselines", "no-advisor"]
    args += ["--policy", str(PLATEAU)]
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}.json"
        assert main([*args, "--workers", workers, "--json", str(out)]) == 0
        printed = capsys.readouterr().out
        footer = printed.strip().splitlines()[-1]
        assert "8 jobs per seed (synthetic(n=8))" in footer and "seeds 0-1 (2)" in footer  # not seed=0's
        # the columns' definitions under the pooled table too, as under one seed's
        assert "near-end: healthy runs released in their last 15%" in " ".join(printed.split())
        rows = json.loads(out.read_text())
        for r in rows:
            r.pop("wall_seconds")
        outs.append(rows)
    assert outs[0] == outs[1]
    assert [r["policy"] for r in outs[0]] == ["no-advisor", "advisor-plateau-release"]
    assert set(outs[0][1]["wrong_stops_by_threshold"]) == {"0.005", "0.01", "0.02"}
    assert len(outs[0][1]["per_seed"]) == 2


def test_a_report_over_seeds_is_the_pooled_table_and_the_spread_across_them(tmp_path: Path) -> None:
    """``--seeds --report`` was refused (a single seed's report draws its replay, which workers do
    not send back); it writes the pooled rows and their spread across the seeds instead."""
    pytest.importorskip("matplotlib")
    args = ["simulate", "--jobs", "8", "--seeds", "0-1", "--quiet", "--baselines", "no-advisor"]
    rep = tmp_path / "rep"
    assert main([*args, "--policy", str(PLATEAU), "--workers", "1", "--report", str(rep)]) == 0
    text = (rep / "report.md").read_text()
    assert "## Every policy, pooled over the seeds" in text and "## Spread across the seeds" in text
    assert "min / median / max" in text and "advisor-plateau-release" in text
    # the wrong stops per seed too: a sum over the seeds hides a seed that stopped many
    assert "wrong 1% per seed (min / median / max)" in text
    # the text under the heading says what that column is, not only that the stops are summed
    assert "the min / median / max of the seeds' own wrong stops at 1%" in text
    assert "- **seeds**: 0, 1" in text
    rows = json.loads((rep / "results.json").read_text())
    assert [r["policy"] for r in rows] == ["no-advisor", "advisor-plateau-release"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seeds", "5-2"], "empty range"),
        (["--seeds", "0-1", "--workers", "0"], "--workers"),
    ],
)
def test_bad_seed_options_are_one_clear_error(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--jobs", "4", "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_label_error_without_label_rate_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--jobs", "4", "--quiet", "--label-error", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "--label-error" in err and "--label-rate" in err and len(err.strip().splitlines()) == 1
