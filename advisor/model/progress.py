"""A run's progress: what is observed of it (``ProgressSample``, ``Curve``) and what is forecast
from it (``Forecast``, ``LearningState``), the stable contract between the sources, the
forecaster and everything that reads a forecast.

Plain data, like all of ``advisor.model``: no I/O, no clock, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "EPOCH_MS_FLOOR",
    "LEARNING_LABELS",
    "MALFORMED_BACKS",
    "Curve",
    "EvalJudgement",
    "Forecast",
    "Interval",
    "LearningState",
    "ProgressSample",
    "backwards_run",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


# --------------------------------------------------------------------------------------------
# Observations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProgressSample:
    """One observation of a run's progress, normalised from any source.

    Sources differ wildly (strings in upstream ``trainerStatus``, JSON numbers in the RHOAI
    annotation, rows of a CSV); parsers turn each into this shape and record in ``warnings``
    whatever they had to drop or coerce, so that bad input is counted rather than fatal.
    """

    step: int
    time: float | None = None
    loss: float | None = None
    total_steps: int | None = None
    epoch: float | None = None
    learning_rate: float | None = None
    eval_loss: float | None = None
    progress_percentage: float | None = None
    estimated_remaining_seconds: float | None = None
    last_checkpoint_step: int | None = None
    last_checkpoint_request: str | None = None
    judged_by: str | None = None
    """The eval series the run declares it is judged by (a HF Trainer's ``metric_for_best_model``,
    as the training helper reports it), named as the history names eval series."""
    metrics: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    warnings: tuple[str, ...] = ()
    source: str = ""


#: a wall-clock time beyond this many epoch seconds (the year 5138) counts milliseconds: MLflow and
#: many loggers write epoch ms (~1.7e12), which read as seconds make every step take 1,000 times as
#: long. One rule for every reader of times (the sources' parsers, the forecaster's ``times``)
EPOCH_MS_FLOOR = 1e11

#: a step going back at this many reports in a row, with no progress in between, is malformed
#: progress (a reporter whose step counts down, or is garbled at every report), not as many restarts:
#: a resume from a checkpoint goes back once and then moves forward
MALFORMED_BACKS = 3


def backwards_run(segments: Sequence[int], n_points: int) -> int:
    """How many of the latest reports each went back with no progress in between: the newest
    segments of a history of ``n_points`` (``segments``: the start index of each) that hold one
    point each. A segment starts where the step went back, so the first segment is none. A
    resume from a checkpoint makes a run of 1 until the next report moves it forward (0); a run
    of ``MALFORMED_BACKS`` or more is malformed progress."""
    run = 0
    while run < len(segments) - 1 and segments[-1 - run] == n_points - 1 - run:
        run += 1
    return run


@dataclass(frozen=True, slots=True)
class Curve:
    """A loss history as parallel tuples (what the forecaster consumes).

    ``segments`` holds the start index of each contiguous segment: a step going backwards (a
    restart from checkpoint) starts a new one, so no fit ever spans a restart. A history ending in
    ``MALFORMED_BACKS`` or more one-point segments in a row (``backwards_run``) ends in malformed
    progress reports, not restarts: the forecast leaves them out and says so.
    """

    steps: tuple[float, ...]
    values: tuple[float, ...]
    times: tuple[float, ...] | None = None
    learning_rates: tuple[float, ...] | None = None
    epochs: tuple[float, ...] | None = None
    segments: tuple[int, ...] = (0,)

    def __len__(self) -> int:
        return len(self.steps)


# --------------------------------------------------------------------------------------------
# Forecast (the stable contract of ``advisor.forecast.forecast``)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its 80% interval (p10..p90). Invariant: p10 <= mean <= p90."""

    mean: float
    p10: float
    p90: float


@dataclass(frozen=True, slots=True)
class Forecast:
    """Where a run is heading, with its uncertainty.

    Field semantics are the contract in DESIGN.md; ``warnings`` explains anything that made the
    forecast less trustworthy (dropped points, too little data, a restart), so that policies can
    refuse to act on a weak forecast rather than act rashly.
    """

    final_loss: Interval
    plateau_probability: float
    divergence_probability: float
    eta_seconds: Interval | None = None
    steps_per_second: float | None = None
    model: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    warnings: tuple[str, ...] = ()
    current_loss: float | None = None
    last_step: float | None = None
    total_steps: int | None = None
    n_points: int = 0
    n_dropped: int = 0
    at_end: bool = False
    """The run is at its end (its last step, or no report left before it): P(plateau) is 1 and
    the final value is where it ended, whatever its curve would still do."""


#: the labels of a run's learning state, in the order they are shown
LEARNING_LABELS = ("learning", "plateaued", "overfitting", "diverging", "hung")


@dataclass(frozen=True, slots=True)
class EvalJudgement:
    """One eval series read as if the run were judged by it: where it was best so far (the
    checkpoint to keep by it) and P(overfitting) by it. What a rule naming a metric other than the
    one the state judges reads (``spec.rules.overfitting.metric: eval_accuracy`` on a job that logs
    ``eval_loss`` too)."""

    best_step: int | None
    best_value: float | None
    evals_since_best: int
    overfitting: float
    best_made_after: int | None = None
    """The step of the report before the one that carried the best evaluation, when it was
    behind ``best_step`` (``advisor.core.evals.EvalSeries.made_after``): the evaluation was made
    after it and by ``best_step``. None: ``best_step`` is the evaluation's own step, or unknown."""


@dataclass(frozen=True, slots=True)
class LearningState:
    """Whether a run is still learning, judged from all its series (see ``advisor.forecast.state``).

    ``probabilities`` maps every label of ``LEARNING_LABELS`` to its probability (they sum to 1);
    ``label`` is the most probable. ``metric`` is the eval series judged (None: the training loss
    alone); ``best_step`` / ``best_value`` are where that series was best so far, the checkpoint
    worth keeping; ``evals_since_best`` counts the evaluations after it."""

    label: str
    probabilities: Mapping[str, float]
    metric: str | None = None
    best_step: int | None = None
    best_value: float | None = None
    evals_since_best: int = 0
    series: Mapping[str, Forecast] = field(default_factory=lambda: _EMPTY)
    """The forecast of each eval series judged, by name, in the metric's own units."""
    best_noise: float = 0.0
    """How far one evaluation of the judged series scatters about its trend
    (``advisor.series.evaluation_noise``; 0: unknown): ``best_value`` is one evaluation, and
    ``compare`` draws it with that scatter."""
    best_trend: float | None = None
    """What the judged series' trend says at ``best_step`` (``advisor.series.trend_at``: the line
    through its nearest other evaluations; None: too few to read): what the best checkpoint is
    expected to score on fresh data, as its own ``best_value`` is the luckiest evaluation of the
    series (``compare`` ranks by it)."""
    best_trend_sd: float = 0.0
    """The sd of ``best_trend`` as an estimate of the trend there (0: unknown)."""
    best_made_after: int | None = None
    """``EvalJudgement.best_made_after`` of the judged series: its best evaluation was made after
    this step and by ``best_step`` (None: at ``best_step``, or unknown)."""
    warnings: tuple[str, ...] = ()
    directions: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    """Which way each forecast series improves (``"lower"`` / ``"higher"``), by name: what
    ranks runs by an eval metric (``compare``) without guessing from its name."""
    judgements: Mapping[str, EvalJudgement] = field(default_factory=lambda: _EMPTY)
    """Each forecast eval series with enough evaluations, judged on its own (the judged one too:
    its entry agrees with ``best_step`` and ``probabilities["overfitting"]``, but for
    ``task_metric``)."""
    task_metric: str | None = None
    """The task's score judged beside ``metric`` when that is an eval loss chosen by default
    (``advisor.series.task_metric``): the run is called stopped only as far as both have stopped
    (its forecast is in ``series``)."""

    def judgement(self, name: str | None = None) -> EvalJudgement | None:
        """Eval series ``name`` (default: the one judged) judged on its own; None when it has too
        few evaluations or is not reported. The judged one is read off the state's own fields
        when ``judgements`` lacks it (a state pasted without them, ``policy explain``)."""
        name = name or self.metric
        found = self.judgements.get(name) if name is not None else None
        if found is None and name is not None and name == self.metric:
            found = EvalJudgement(
                best_step=self.best_step,
                best_value=self.best_value,
                evals_since_best=self.evals_since_best,
                overfitting=self.probabilities.get("overfitting", 0.0),
                best_made_after=self.best_made_after,
            )
        return found

    def judged(self) -> tuple[str, Forecast] | None:
        """The eval metric the run is judged by and its forecast (None: judged by its training
        loss alone, or too few evaluations yet)."""
        if self.metric is None or self.metric not in self.series:
            return None
        return self.metric, self.series[self.metric]
