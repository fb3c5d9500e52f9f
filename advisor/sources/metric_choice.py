"""Which series of a log ``metric=`` names, and which series a log holds.

``metric=`` is ``loss`` (the training loss), ``eval_loss``, any eval metric whose name says which
way it improves (``eval_accuracy``, ``eval_wer``), or a training loss by another name (``lm_loss``);
``None`` is the training loss, else the eval loss. A name the file does not hold is refused with
the series it does hold (``file_series``), so that the user is told what to ask for instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from advisor.series import Direction, direction_of, eval_series_name, is_eval_name
from advisor.sources.columns import Column, loss_named
from advisor.sources.loaded_curve import SourceError, listing
from advisor.sources.normalize import canonical_name

__all__ = [
    "METRICS",
    "choose_metric",
    "eval_metrics",
    "file_series",
    "is_series_metric",
    "undirected_eval_metrics",
]

#: the series ``metric=`` names by role: the training loss or the evaluation loss (and any eval
#: metric with a direction, ``is_series_metric``)
METRICS = ("loss", "eval_loss")


def is_series_metric(metric: str) -> bool:
    """What ``metric=`` accepts: the training or evaluation loss, or any eval metric whose name
    says which way it improves (``eval_accuracy``, ``eval_wer``, ...)."""
    name = eval_series_name(canonical_name(metric))
    return metric in METRICS or (is_eval_name(name) and direction_of(name) is not None)


def eval_metrics(names: Sequence[str]) -> list[str]:
    """The eval metrics among a file's field names that a forecast can judge (those whose name
    says a direction), each once, ``eval_loss`` first, in the file's order otherwise."""
    out: dict[str, str] = {}
    for n in names:
        series = eval_series_name(canonical_name(n))
        if series not in out and is_eval_name(series) and direction_of(series) is not None:
            out[series] = n
    return sorted(out, key=lambda k: k != "eval_loss")


#: words of an eval field that times or counts the evaluation rather than grading the model
#: (HF's ``eval_runtime``, ``eval_samples_per_second``): never judged, and no slip worth a word
_BOOKKEEPING_WORDS = frozenset(("runtime", "second", "seconds", "epoch", "step", "steps", "time"))


def undirected_eval_metrics(names: Sequence[str]) -> list[str]:
    """The eval fields among a file's field names that no forecast judges because their name
    says no direction (``eval_acuracy``, a misspelt ``eval_accuracy``), by the file's own names,
    each series once, in the file's order; the evaluation's own timings and counts
    (``eval_runtime``) are left out. Why: such a column was dropped without a word, and the user
    took the forecast to have read it."""
    out: dict[str, str] = {}
    for n in names:
        series = eval_series_name(canonical_name(n))
        words = set(series.split("_"))
        if (
            series not in out
            and is_eval_name(series)
            and direction_of(series) is None
            and not words & _BOOKKEEPING_WORDS
        ):
            out[series] = n
    return list(out.values())


def file_series(columns: Mapping[str, Column], names: Sequence[str]) -> list[str]:
    """The series a file with these resolved ``columns`` and field ``names`` holds, as ``metric=``
    names them: ``loss``, ``eval_loss``, then every other eval metric whose name says its
    direction, in the file's order."""
    out = [role for role in METRICS if role in columns]
    return out + [name for name in eval_metrics(names) if name not in out]


def choose_metric(
    path: str | Path, columns: dict[str, Column], metric: str | None, names: Sequence[str]
) -> tuple[str, Column]:
    series = file_series(columns, names)
    has = f"; the file's series: {listing(series)}" if series else ""
    if metric is None:
        role = "loss" if "loss" in columns else "eval_loss"
        if role not in columns:
            several = loss_named(names)
            if len(several) > 1:
                has = f"; it logs {listing(several)}: name the run's loss with --metric NAME"
            raise SourceError(path, f"no loss field (found: {listing(names)}){has}", series=series)
        return role, columns[role]
    named = _other_training_loss(metric, names)
    if named is not None:
        return "loss", Column(named)
    if not is_series_metric(metric):
        wanted = canonical_name(metric)
        if not any(canonical_name(n) == wanted for n in names):
            why = "the file has no such series"
        elif direction_of(wanted) is not None:
            # a training-side score (TRL's rewards/accuracies, mean_token_accuracy): read as "its
            # name says no direction", which it does say
            counterpart = eval_series_name(canonical_name(f"eval_{metric}"))
            also = f" (its evaluation's is {counterpart})" if counterpart in series else ""
            why = (
                "a training-side metric: of the training side only the loss is forecast, the "
                f"model is judged by its eval metrics{also}"
            )
        else:
            why = "its name says no direction (neither a loss nor a score), so it is not forecast"
        raise SourceError(
            path, f"unknown metric {metric!r}: {why}{has or '; the file has no series'}", series=series
        )
    if metric not in METRICS:  # another eval metric: its own column, by its one spelling
        wanted_series = eval_series_name(canonical_name(metric))
        found = next((n for n in names if eval_series_name(canonical_name(n)) == wanted_series), None)
        if found is None:
            raise SourceError(path, f"no {metric} field (found: {listing(names)}){has}", series=series)
        return wanted_series, Column(found)
    if metric not in columns:
        other = "eval_loss" if metric == "loss" else "loss"
        hint = f"; the file has {columns[other].describe()}, use metric {other}" if other in columns else ""
        wanted = "training-loss" if metric == "loss" else "evaluation-loss"
        raise SourceError(path, f"no {wanted} field (found: {listing(names)}){hint or has}", series=series)
    return metric, columns[metric]


def _other_training_loss(metric: str, names: Sequence[str]) -> str | None:
    """The column ``metric`` names when it is a training loss of another name (``--metric
    lm_loss``: a name with a lower-is-better word, not an evaluation's), read as the training loss."""
    wanted = canonical_name(metric)
    if (
        metric in METRICS
        or is_eval_name(eval_series_name(wanted))
        or direction_of(wanted) is not Direction.LOWER
    ):
        return None
    return next((n for n in names if canonical_name(n) == wanted), None)
