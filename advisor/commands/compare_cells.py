"""What the ``compare`` table and its footer say of each run: its STATE and BEST cells, the notes
on what moves its FINAL (learning rates unknown, no total steps), and a score logged on two scales.
Kept apart from the command's ranking and printing, which read them per row."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.commands.compare_files import ENDED, IMPROVING, TOTAL
from advisor.forecast.core import ends_at_decay
from advisor.forecast.state import STALE_NOTE, ended_reading, stale_in
from advisor.series import eval_step_span

__all__ = [
    "IMPROVING_AT_END",
    "best_cell",
    "final_at",
    "lr_unknown",
    "mixed_scales",
    "run_notes",
    "state_cell",
]


def mixed_scales(result: Sequence[Mapping[str, Any]]) -> str | None:
    """A note when the runs log a score on different scales, some as a fraction (0-1), some as a
    percentage (0-100) (``score_top``): ranked as logged, 75.3% beat 0.915 with P(BEST) 100%."""
    from advisor.forecast.eval_forecast import score_top

    tops: dict[str, float] = {}
    for r in result:
        values = [r["bestValue"], (r["final"] or {}).get("mean")]
        top = score_top([float(v) for v in values if isinstance(v, int | float)])
        if math.isfinite(top):
            tops[r["run"]] = top
    fractions = [run for run, top in tops.items() if top == 1.0]
    percents = [run for run, top in tops.items() if top == 100.0]
    if not fractions or not percents:
        return None
    return (
        f"scales differ: {result[0]['metric']} is a percentage (0-100) in {', '.join(percents)} and a "
        f"fraction (0-1) in {', '.join(fractions)}: ranked as logged, not comparable (log one scale)"
    )


def final_at(status: Mapping[str, Any]) -> str:
    """Where a log without a total was forecast to: its learning rate's decay's end, else its asymptote."""
    warnings = (status.get("forecast") or {}).get("warnings") or []
    return "where the learning rate's decay ends" if ends_at_decay(warnings) else "the asymptote"


def state_cell(row: Mapping[str, Any]) -> str:
    """STATE of a row: the run state, except of a log that reaches its run's end, where
    ``plateaued`` (every P(plateau) is 1 at the end) or ``learning`` says nothing of how the run
    ended: ``finished`` then, ``finished, improving`` for one still at its best at its last
    evaluation (a sweep's under-trained run read ``plateaued``, as if it had converged).
    ``overfitting`` and ``diverging`` stay: that is how the run ended."""
    return ended_reading(str(row["state"]), bool(row.get("ended")), bool(row.get("improvingAtEnd")))


#: what a log that ended still improving its judged eval metric did (its note and the footer)
IMPROVING_AT_END = "at its best at its last evaluation (a longer run may gain more)"


def run_notes(status: Mapping[str, Any], from_file: bool) -> list[str]:
    """What the table's footer says of this run, for a reader of the JSON: the same two facts that
    move its FINAL (learning rates unknown, no total steps in its log), and a log that ended still
    improving."""
    notes = []
    if status.get(IMPROVING):
        notes.append(f"at its end, still improving: {IMPROVING_AT_END}")
    if lr_unknown(status):
        notes.append(
            "learning rates unknown: final and its interval assume the LR anneals by the total steps"
        )
    for w in (status.get("learningState") or {}).get("warnings") or []:
        if isinstance(w, str) and STALE_NOTE in w:
            notes.append(f"{w.split(': judged by')[0]}: ranked by its best checkpoint alone")
    if from_file and TOTAL in status and status[TOTAL] is None:
        notes.append(f"no total steps in the log: final is {final_at(status)} (pass --total-steps N)")
    return notes


def stale_metric(status: Mapping[str, Any], metric: str) -> bool:
    """Whether the run stopped evaluating ``metric`` long before its last step (its state's
    warning, ``advisor.forecast.state.stale_note``): its FINAL is a forecast from evaluations it
    left behind, and only its best checkpoint is a model it is known to give."""
    return stale_in((status.get("learningState") or {}).get("warnings") or [], metric)


def lr_unknown(status: Mapping[str, Any]) -> bool:
    """Whether a run's forecast warns that its learning rates are unknown (its FINAL assumes an
    annealed LR, which a constant one would end far from); not of a run at its end, whose FINAL is
    where it stands (the footer said so of three finished jobs)."""
    if status.get(ENDED) or status.get("state") == "finished":
        return False
    warnings = (status.get("forecast") or {}).get("warnings") or []
    return any(isinstance(w, str) and "learning rates unknown" in w for w in warnings)


def best_cell(row: Mapping[str, Any]) -> str:
    """``step 1000: 0.8096``: where the run's best checkpoint of the ranked metric is, and its
    value (``-``: none known, e.g. a TrainJobForecast judged by another eval metric)."""
    if row["bestStep"] is None or row["bestValue"] is None:
        return "-"
    return f"{eval_step_span(row['bestStep'], row.get('bestMadeAfter'), prose=False)}: {row['bestValue']:.4g}"
