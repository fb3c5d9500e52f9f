"""The report's "saved": split into what it is made of (and the parts add up), defined in the
legend, and the table's cosmetics (no "-0", "-" for a recall of a row that predicts nothing)."""

from __future__ import annotations

from simulator.report import LEGEND, _cell, format_table, saved_split


def _row(name: str, **kw: float | None) -> dict[str, object]:
    row: dict[str, object] = {
        "policy": name,
        "gpu_hours": 1000.0,
        "gpu_hours_nonlearning": 300.0,
        "gpu_hours_saved": 0.0,
        "lost_work_gpu_hours": 10.0,
        "checkpoint_overhead_gpu_hours": 5.0,
        "restart_overhead_gpu_hours": 1.0,
        "wrong_stops_by_threshold": {"0.005": 0, "0.01": 0, "0.02": 0},
        "victim_precision": None,
        "victim_recall": None,
    }
    row.update(kw)
    return row


def test_saved_is_what_was_waste_and_cut_learning_is_apart() -> None:
    """A platform trial compared rows by "saved" and found patience ahead of the advisor, a third
    of its figure GPU-hours of runs still learning that it cut: saved counted them, although the
    legend called them no saving. Saved is now non-learning GPU-hours and overheads; what a row
    cut from runs still learning is a column of its own, and the three add up to what it freed."""
    base = _row("no-advisor")
    # freed 230: 80 fewer non-learning GPU-h, 6 fewer overhead GPU-h, the rest was still learning
    row = _row(
        "patience",
        gpu_hours=770.0,
        gpu_hours_freed=230.0,
        gpu_hours_nonlearning=220.0,
        lost_work_gpu_hours=5.0,
        checkpoint_overhead_gpu_hours=4.0,
    )
    split = saved_split(row, base)
    assert split is not None
    assert split["nonlearning"] == 80.0 and split["overheads"] == 6.0 and split["learning"] == 144.0
    assert sum(split.values()) == row["gpu_hours_freed"]
    assert saved_split(base, base) is None
    table = format_table([base, row])
    assert "= non-learn" in table and "cut learning" in table and "+ cut learning" not in table
    line = next(x for x in table.splitlines() if x.startswith("patience"))
    assert "+86" in line and "+80" in line and " 144 " in f"{line} " and "+230" not in line
    assert "saved = non-learn" in LEGEND and "not in saved" in LEGEND


def test_no_minus_zero_and_no_recall_without_predictions() -> None:
    assert _cell(-0.3, "{:+.0f}") == "+0"
    assert _cell(-0.004, "{:.1f}") == "0.0"
    assert _cell(-2.0, "{:+.0f}") == "-2"
    assert _cell(7200.0, "{:.2f}h") == "2.00h"
    table = format_table([_row("no-advisor", gpu_hours_freed=-0.2)])
    line = table.splitlines()[2]
    assert " -0 " not in line and "+0" in line
    assert line.split()[-1] == "-" and line.split()[-2] == "-"


def test_a_row_that_stops_no_run_cuts_no_learning() -> None:
    """Periodic checkpoints taken after runs stopped learning are non-learning GPU-hours and
    checkpoint overhead at once: the split counts them once, so a row that releases nothing has no
    "cut learning" (it showed +14 GPU-h of it on the default scenario)."""
    from simulator.baselines import FixedInterval, NoAdvisor
    from simulator.runner import run_strategy
    from simulator.scenario import default_scenario

    sc = default_scenario(seed=1, n_jobs=60)
    base = run_strategy(sc, NoAdvisor()).metrics
    fixed = run_strategy(sc, FixedInterval(900.0)).metrics
    assert fixed["released_or_stopped"] == 0 and fixed["overhead_nonlearning_gpu_hours"] > 0
    split = saved_split(
        {**fixed, "policy": "fixed-interval", "gpu_hours_freed": base["gpu_hours"] - fixed["gpu_hours"]},
        {**base, "policy": "no-advisor"},
    )
    assert split is not None and abs(split["learning"]) < 0.01 * fixed["gpu_hours"]
    assert split["nonlearning"] < 0  # more checkpoints held after runs stopped learning
