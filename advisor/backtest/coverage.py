"""What the policies given could judge of the runs: the runs over before every policy's
``minRuntime`` as replayed, and the metrics a row's rules judge that no run reports. A row's "0
stops" on such runs is no verdict, and the back-test says so under its table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from advisor.backtest.runs import Run
from advisor.policy_rows import unreported_by_row

__all__ = ["reported_metrics", "runs_too_short", "unreported_metrics"]


def runs_too_short(runs: Sequence[Run], policy_rows: list[tuple[str, Any]]) -> dict[str, Any] | None:
    """How many runs, as replayed, end before every policy's ``minRuntime`` (and how many of those
    have no times, so that ``--steps-per-second`` would change it); None without policies."""
    floors = [p.safety.min_runtime for _, policies in policy_rows for p in policies]
    if not floors:
        return None
    floor = min(floors)
    short = [r for r in runs if r.duration_s < floor]
    return {"runs": len(short), "untimed": sum(1 for r in short if not r.timed), "min_runtime_s": floor}


def reported_metrics(runs: Sequence[Run]) -> set[str]:
    """The series the runs report: the training loss and every eval metric any run logs."""
    reported: set[str] = {"loss"}
    for r in runs:
        if r.eval_steps is not None:
            reported.add(r.eval_metric)
        reported.update(name for name, _, _ in r.other_evals)
    return reported


def unreported_metrics(runs: Sequence[Run], policy_rows: list[tuple[str, list[Any]]]) -> dict[str, list[str]]:
    """Per policy row, the metrics its rules name (``metric:``) that no run reports: a rule that
    judges ``eval_bleu`` over runs that log none judges nothing, and its row's "0 stops" is no
    verdict. Empty rows are left out."""
    return unreported_by_row(reported_metrics(runs), policy_rows)
