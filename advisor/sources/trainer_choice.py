"""The model a HuggingFace Trainer kept, as its ``trainer_state.json`` says.

With ``load_best_model_at_end`` (or any ``metric_for_best_model``), the Trainer records the value
of that metric at its best checkpoint (``best_metric``) and the checkpoint's folder
(``best_model_checkpoint``, ending in ``checkpoint-<step>``); since 4.46 also its step
(``best_global_step``). It saves every ``save_steps`` steps. What it does not store is the
metric's *name*; it is read back here as the eval metric whose value logged at that step equals
``best_metric``. That metric is the user's declared choice of what the run is judged by (an
``eval_f1`` or an ``eval_cer``, not necessarily the ``eval_loss``), so the run state judges it
by default, and a best checkpoint named to the user is one that was saved (a step the Trainer
wrote to disk), not any step that was evaluated.

Pure: a parsed document and its ``log_history`` in, a ``TrainerChoice`` out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from advisor.series import Direction, direction_of, eval_series_name, is_eval_name, is_saved_step
from advisor.sources.normalize import canonical_name

__all__ = ["TrainerChoice", "trainer_choice"]

#: ``best_metric`` and the logged value are the same float written twice (once rounded through
#: JSON): equal to this relative tolerance
_REL_TOL = 1e-6
#: eval fields that are timings or counters, never a model's quality (a match is a coincidence)
_NOT_QUALITY = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_epoch")
_CHECKPOINT = re.compile(r"checkpoint-(\d+)/*$")


@dataclass(frozen=True, slots=True)
class TrainerChoice:
    """What a ``trainer_state.json`` says of its checkpoints and its best model.

    ``metric``: the eval series (``eval_``-named) whose value at the step it was evaluated at
    (``best_global_step``, else ``step``) is ``best_metric``, when exactly one is;
    ``direction``: which way it improves, from its name, else from whether ``best_metric`` is
    the highest or lowest value of it at a saved step (None: neither says). ``checkpoint``: the
    folder name of ``best_model_checkpoint`` (``checkpoint-500``), ``step`` its step;
    ``save_steps``: the save interval (None: not stated, not positive, or not what the run saved
    by, see ``_saves_by_steps``); ``global_step``: the step the state was written at;
    ``steps_per_second``: the run's pace as its closing summary states it (``_stated_pace``; None:
    no summary, as in a checkpoint's state written mid-run); ``evaluated_step``: below."""

    save_steps: int | None = None
    global_step: int | None = None
    checkpoint: str | None = None
    step: int | None = None
    best_metric: float | None = None
    metric: str | None = None
    direction: Direction | None = None
    steps_per_second: float | None = None
    #: the step ``best_metric`` was evaluated at (``best_global_step``), when it is not the kept
    #: checkpoint's: the evaluation fell between saves, and the checkpoint kept has another value
    evaluated_step: int | None = None


def trainer_choice(
    state: Mapping[str, object], history: Sequence[Mapping[str, object]]
) -> TrainerChoice | None:
    """The checkpoints and best model a trainer_state.json (``state``, its ``log_history`` as
    ``history``) states; None when it states neither a save interval nor a best model."""
    save_steps = _positive_int(state.get("save_steps"))
    raw_path = state.get("best_model_checkpoint")
    checkpoint = step = None
    if isinstance(raw_path, str) and (found := _CHECKPOINT.search(raw_path.replace("\\", "/"))):
        checkpoint, step = f"checkpoint-{found.group(1)}", int(found.group(1))
    # the step best_metric was evaluated at (4.46+); the checkpoint kept may be an earlier save
    # when that evaluation fell between saves (then no checkpoint of it was written)
    evaluated = _positive_int(state.get("best_global_step")) or step
    best = state.get("best_metric")
    best_metric = float(best) if isinstance(best, int | float) and not isinstance(best, bool) else None
    if best_metric is not None and not math.isfinite(best_metric):
        best_metric = None
    pace = _stated_pace(history)
    if save_steps is None and checkpoint is None and best_metric is None and pace is None:
        return None
    global_step = _positive_int(state.get("global_step"))
    eval_steps = _positive_int(state.get("eval_steps"))
    if save_steps is not None and not _saves_by_steps(history, save_steps, step, global_step, eval_steps):
        save_steps = None
    metric = direction = None
    if best_metric is not None:
        for at in dict.fromkeys(s for s in (evaluated, step) if s is not None):
            metric = metric or _matching_metric(history, at, best_metric)
    if metric is not None:
        direction = direction_of(metric) or _direction_by_value(history, metric, best_metric, save_steps)
    between = evaluated if evaluated is not None and evaluated != step else None
    return TrainerChoice(
        save_steps, global_step, checkpoint, step, best_metric, metric, direction, pace, between
    )


def _stated_pace(history: Sequence[Mapping[str, object]]) -> float | None:
    """Steps per second of wall time, as the Trainer's closing summary of a finished run states
    them (the ``log_history`` entry with ``train_runtime``): its ``train_steps_per_second``, else
    its step over its runtime. A log without per-report times is replayed at this pace rather
    than at an assumed one: a back-test's verdicts turned on the assumed pace (0.2 / 1 / 5 steps
    per second stopped 14 / 7 / 0 of 25 runs), while the log said its own. Evaluations and saves
    are in the runtime, as they are in the GPU-hours; a run resumed from a checkpoint counts the
    steps before its resumption over the last session's runtime (its pace over-stated)."""
    for entry in reversed(history):
        runtime = _positive(entry.get("train_runtime"))
        if runtime is None:
            continue
        stated = _positive(entry.get("train_steps_per_second"))
        if stated is not None:
            return stated
        step = _positive(entry.get("step"))
        return step / runtime if step is not None else None
    return None


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and v > 0 else None


def _saves_by_steps(
    history: Sequence[Mapping[str, object]],
    save_steps: int,
    best_step: int | None,
    global_step: int | None,
    eval_steps: int | None = None,
) -> bool:
    """Whether the run saved every ``save_steps`` steps. The state records ``save_steps`` whatever
    the save strategy (500, the default, under ``save_strategy="epoch"``), and a run that keeps its
    best model saves where it evaluates (the Trainer requires both strategies to match). So a
    best checkpoint off the interval, or evaluations that never fall on it (before the last),
    say the saves followed the epochs instead; then every evaluation is a saved step. So do
    evaluations off the ``eval_steps`` the state records beside it (also kept whatever the
    strategy): a run evaluated per epoch, every 2,800 steps, with the default 500 recorded for
    both, was told its best evaluation at 5,600 had not been saved, because 14,000 happened to be
    a multiple of 500."""
    steps = sorted(
        {float(s) for e in history if _eval_fields(e) and isinstance(s := e.get("step"), int | float)}
    )
    last = max([*steps, float(global_step or 0)])
    if best_step is not None and not is_saved_step(best_step, save_steps, last):
        return False
    before = [s for s in steps if s < last]
    if eval_steps is not None and len(before) >= 2 and not all(s % eval_steps == 0 for s in before):
        return False
    return len(before) < 2 or any(is_saved_step(s, save_steps, last) for s in before)


def _positive_int(raw: object) -> int | None:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        return None
    return int(raw) if raw >= 1 and float(raw).is_integer() else None


def _eval_fields(entry: Mapping[str, object]) -> dict[str, float]:
    """An entry's eval quality fields by series name (``eval_f1``), finite numbers only."""
    out: dict[str, float] = {}
    for key, value in entry.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        name = eval_series_name(canonical_name(key))
        if is_eval_name(name) and name not in _NOT_QUALITY and math.isfinite(value):
            out[name] = float(value)
    return out


def _matching_metric(history: Sequence[Mapping[str, object]], step: int, best: float) -> str | None:
    """The one eval series whose value logged at ``step`` is ``best`` (None: none or several)."""
    matches: set[str] = set()
    for entry in history:
        if entry.get("step") != step:
            continue
        for name, value in _eval_fields(entry).items():
            if math.isclose(value, best, rel_tol=_REL_TOL, abs_tol=1e-12):
                matches.add(name)
    return matches.pop() if len(matches) == 1 else None


def _direction_by_value(
    history: Sequence[Mapping[str, object]], metric: str, best: float | None, save_steps: int | None
) -> Direction | None:
    """Which way ``metric`` improves, for a name that does not say: up when ``best`` is its highest
    value at a saved step, down when its lowest (the Trainer kept the best of what it saved)."""
    points = [(e.get("step"), _eval_fields(e).get(metric)) for e in history]
    steps_values = [(float(s), v) for s, v in points if isinstance(s, int | float) and v is not None]
    if best is None or not steps_values:
        return None
    last = max(s for s, _ in steps_values)
    if save_steps is not None:
        saved = [v for s, v in steps_values if is_saved_step(s, save_steps, last)]
        steps_values = [(0.0, v) for v in saved] or steps_values
    values = [v for _, v in steps_values]
    tol = _REL_TOL * max(abs(best), 1e-12)
    top, bottom = best >= max(values) - tol, best <= min(values) + tol
    if top and not bottom:
        return Direction.HIGHER
    if bottom and not top:
        return Direction.LOWER
    return None
