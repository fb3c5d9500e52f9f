"""The checkpoint to keep, as ``trainjob-advisor forecast`` says it: the best evaluation of the
judged eval series, the best saved checkpoint when the save interval is known, and the checkpoint
the trainer itself kept, with why the run is judged by another series when it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.commands.number_text import num as _num
from advisor.series import direction_of
from advisor.sources.jsonl import LOG_COUNT_WARNING

if TYPE_CHECKING:
    from advisor.commands.forecast_outcome import Outcome

__all__ = ["best_lines"]


def best_lines(outcome: Outcome) -> list[str]:
    """The best checkpoint of the judged eval series, as the user can keep it: with a known save
    interval, the best of the steps a checkpoint was saved at, beside the best evaluation when
    that fell between saves (its weights were never written); and the checkpoint the trainer
    itself kept, when its state names one."""
    st, trainer = outcome.state, outcome.trainer
    lines: list[str] = []
    if st is not None and st.metric is not None and st.best_step is not None:
        ago = f"{st.evals_since_best} evaluation{'' if st.evals_since_best == 1 else 's'} ago"
        # a console log's steps count its training logs: "step 150" named a checkpoint that does
        # not exist (checkpoint-1500 at logging_steps 10)
        counted = any(w.startswith(LOG_COUNT_WARNING) for w in outcome.full.warnings)
        unit = "training log" if counted else "step"
        saved, best = outcome.saved_best, f"{unit} {st.best_step:,} ({st.metric} {_num(st.best_value)}"
        if counted:
            ago += f"; counted in training logs, not steps: its step is {st.best_step:,} x logging_steps"
        if trainer is not None and trainer.save_steps is not None and saved == (st.best_step, st.best_value):
            lines.append(f"  best checkpoint {best}, {ago})")
        elif trainer is None or trainer.save_steps is None:
            # the log does not say when checkpoints were saved: the best evaluation is named as
            # such ("best checkpoint step 1,400" of a log saved every 500 named one never written)
            lines.append(
                f"  best evaluation {best}, {ago}; the log does not say when checkpoints were saved: "
                "keep the one saved there, or the nearest)"
            )
        elif saved is None:
            lines.append(
                f"  best checkpoint none saved at an evaluation (save_steps {trainer.save_steps:,}); "
                f"best evaluation at {best}, {ago})"
            )
        else:
            lines.append(
                f"  best saved checkpoint step {saved[0]:,} ({st.metric} {_num(saved[1])}); "
                f"best evaluation at {best}, {ago}; not saved: save_steps {trainer.save_steps:,})"
            )
    if trainer is not None and trainer.checkpoint is not None:
        if trainer.metric is not None:
            by = f"by {trainer.metric} {_num(trainer.best_metric)}"
        else:
            by = f"best_metric {_num(trainer.best_metric)}, a metric the log does not name"
        if trainer.evaluated_step is not None and trainer.checkpoint is not None:
            # a best evaluation that fell between saves leaves the checkpoint named an earlier
            # save: the value is the evaluation's, not the checkpoint's ("checkpoint-300 (by
            # eval_loss 0.8)" beside "best saved checkpoint step 300 (eval_loss 0.812)")
            by += f", evaluated at step {trainer.evaluated_step:,}, between saves: not this checkpoint's"
        if (
            trainer.metric is not None
            and st is not None
            and st.metric is not None
            and st.metric != trainer.metric
            and direction_of(trainer.metric) is None
        ):
            # the run is judged by another series: say why, beside the checkpoint the trainer kept
            # (a DPO run kept by eval_rewards/margins read "best checkpoint step 500 (eval_loss)"
            # right above "checkpoint-1200 (by eval_rewards_margins)", unexplained)
            by += (
                f"; judged by {st.metric} instead: the name {trainer.metric} says no direction, so it is "
                "not among the series forecast"
            )
        lines.append(f"  trainer kept    {trainer.checkpoint} ({by})")
    return lines
