"""Run logs as ``compare`` reads them: which arguments are logs (files, or folders of them, found
as ``backtest`` finds them), and each log forecast as ``forecast FILE`` forecasts it, in the shape
of the part of a TrainJobForecast's status ``compare`` reads, with two keys of its own (``TOTAL``,
``BESTS``). Kept apart from the command, which ranks whatever statuses it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from advisor.cli import CommandError
from advisor.forecast.best_trend import trend_at
from advisor.series import Direction, evaluation_noise

__all__ = ["BESTS", "ENDED", "IMPROVING", "TOTAL", "file_bests", "file_status", "log_files"]


def log_files(refs: Sequence[str]) -> list[tuple[Path, str, bool]] | None:
    """The run logs named, each with its name among them and whether it was found in a folder (a
    folder stands for the run logs under it, found as ``backtest`` finds them), or None when the
    runs are TrainJobForecast names. Mixing the two is an error: a name that happens to be a file
    would otherwise be read from the wrong place."""
    from advisor.sources.files import SourceError
    from advisor.sources.runlogs import find_run_logs

    paths = [Path(r) for r in refs]
    exist = [p.exists() or p.is_symlink() for p in paths]  # a broken link: a bad run log, said so
    if not any(exist):
        return None
    if not all(exist):
        missing = [r for r, e in zip(refs, exist, strict=True) if not e]
        raise CommandError(f"{missing[0]}: no such file; give run logs only, or TrainJobForecast names only")
    try:
        return [(log.path, log.name, log.in_folder) for log in find_run_logs(paths)]
    except SourceError as exc:
        raise CommandError(str(exc)) from None


def file_status(path: Path, total_steps: int | None) -> dict[str, Any]:
    """A run log forecast as ``forecast FILE`` does, in the shape of a TrainJobForecast's status
    (the part ``compare`` reads)."""
    from advisor.commands import forecast as fc_cmd
    from advisor.controller.render import learning_state_dict
    from advisor.core.codec import forecast_to_dict
    from advisor.forecast.state import at_last_step, improving_at_end

    try:
        # a log of eval metrics alone is forecast by its primary one, as ``forecast FILE`` does
        # --total-steps fills in for a log that does not say its total; one that does keeps its own
        request = fc_cmd.ForecastRequest(file=str(path), total_steps_fallback=total_steps, eval_default=True)
        outcome = fc_cmd.compute(request)
    except CommandError as exc:
        raise CommandError(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None
    # the run's last report, as ``forecast FILE`` says its progress (the forecast's own last step is
    # that of its last finite point: a loss gone NaN read "2,030/3,000" beside forecast's 3,000)
    curve = outcome.curve
    last = curve.steps[-1] if curve.steps else outcome.forecast.last_step
    total = outcome.total_steps
    progress = None if last is None else (f"{last:,.0f}/{total:,}" if total else f"{last:,.0f}")
    state = outcome.state
    return {
        "forecast": forecast_to_dict(outcome.forecast),
        "learningState": learning_state_dict(state),
        "summary": {"progress": progress},
        "state": state.label if state is not None else None,
        # compare's own: whether FINAL is the value at the run's end or its asymptote
        TOTAL: total,
        # compare's own: the log reaches its run's last step (a state of the run as it ended), and
        # whether its judged eval metric was still at its best there
        ENDED: at_last_step(outcome.forecast),
        IMPROVING: state is not None and improving_at_end(state, outcome.forecast),
        # compare's own (no status has it): the best checkpoint of every eval series of the log,
        # since the runs may be ranked by one other than the metric their state is judged by
        BESTS: file_bests(outcome),
    }


#: the key of a log's total steps (None: not known, FINAL is the asymptote) in that status
TOTAL = "totalSteps"
#: the key of a log's best checkpoints by eval metric in the status ``file_status`` makes
BESTS = "bestByMetric"
#: the keys of whether a log reaches its run's end, and was still improving there
ENDED = "ended"
IMPROVING = "improvingAtEnd"


class _Evals(NamedTuple):
    """An eval series as ``best_checkpoint`` reads it."""

    steps: tuple[float, ...]
    values: tuple[float, ...]
    direction: Direction


def file_bests(outcome: Any) -> dict[str, dict[str, float]]:
    """``{metric: {"step", "value", "noise"[, "trend", "trendSd"]}}``: where each eval series of a
    forecast log was best (the series it was forecast by, for a log of eval metrics alone); of a
    log that states its save interval, best among the steps a checkpoint was saved at, as only
    those can be kept. ``noise``: one evaluation's scatter; ``trend`` / ``trendSd``: what the
    series' trend says at that step and its sd (``advisor.series.trend_at``), as a
    TrainJobForecast's learning state has them."""
    from advisor.commands.forecast_outcome import last_saved_step, series_direction
    from advisor.forecast.state import best_checkpoint, best_saved_checkpoint

    curves = dict(outcome.evals or {})
    if outcome.full.metric != "loss":
        curves[outcome.full.metric] = outcome.curve
    trainer = outcome.full.trainer
    saves = trainer.save_steps if trainer is not None else None
    last = last_saved_step(outcome.full)
    out: dict[str, dict[str, float]] = {}
    for name, curve in curves.items():
        series = _Evals(tuple(curve.steps), tuple(curve.values), series_direction(name))
        best = best_checkpoint(series)
        if best is not None and saves is not None:
            best = best_saved_checkpoint(series, saves, last)
        if best is not None:
            out[name] = {"step": best[0], "value": best[1], "noise": evaluation_noise(series.values)}
            trend = trend_at(series.steps, series.values, best[0])
            if trend is not None:
                out[name].update(trend=trend[0], trendSd=trend[1])
    return out
