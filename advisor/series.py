"""The series a run reports, and which way is better for each.

A run reports its training loss and, every so often, eval metrics (``eval_loss``,
``eval_accuracy``, ``eval_rouge1``, ...). Whether a metric should fall or rise is read from its
name, the way a person reading a dashboard would: loss, error rates and perplexity fall; accuracy,
F1, BLEU, ROUGE, exact match and the like rise. A name with neither kind of word has no direction:
it is counted (``eval_runtime`` is a timing, not a quality) and never judged, unless the policy
that governs the job names its direction (``metricDirections``: ``direction_of``'s overrides).

Pure and dependency-free: the history, the forecaster, the learning state and the policies all
read these rules, so they live once, here.
"""

from __future__ import annotations

import enum
import math
import re
import statistics
from collections.abc import Mapping, Sequence

__all__ = [
    "TRAIN_SERIES",
    "Direction",
    "direction_of",
    "eval_series_name",
    "eval_step_span",
    "evaluation_noise",
    "is_eval_name",
    "is_saved_step",
    "likely_directed_spelling",
    "primary_eval",
    "summaries_first",
    "task_metric",
]

#: the name of the training-loss series wherever series are named (policies' ``metric:``, the CLI)
TRAIN_SERIES = "loss"


class Direction(enum.StrEnum):
    """Which way a metric improves."""

    LOWER = "lower"
    HIGHER = "higher"


#: words (as ``_``-separated tokens or token prefixes) that make a metric lower-is-better
_LOWER = ("loss", "error", "err", "wer", "cer", "ter", "perplexity", "ppl", "mse", "mae", "rmse", "nll")
#: ... and higher-is-better
_HIGHER = (
    "accuracy",
    "acc",
    "f1",
    "bleu",
    "rouge",
    "exact",
    "em",
    "precision",
    "recall",
    "auc",
    "auroc",
    "map",
    "ndcg",
    "mcc",
    "matthews",
    "pearson",
    "spearman",
    "corr",
    "score",
    "meteor",
    "chrf",
    "bertscore",
    "iou",
    "dice",
    "top1",
    "top5",
    "r2",
)
#: higher-is-better stems that carry suffixes (``rougeLsum``, ``bleu4``, ``accuracy_top5``, TRL's
#: ``rewards/accuracies``)
_HIGHER_STEMS = ("rouge", "bleu", "accurac", "sacrebleu")
_TOKEN_RE = re.compile(r"[a-z]+[0-9]*|[0-9]+")
#: prefixes that mark an evaluation metric (HF ``eval_``, Lightning ``val_`` / ``validation_``)
_EVAL_PREFIXES = ("eval_", "val_", "validation_", "valid_", "dev_")


def _tokens(name: str) -> list[str]:
    return _TOKEN_RE.findall(name.lower())


def is_eval_name(name: str) -> bool:
    """Whether a (canonical, snake_case) metric name is an evaluation metric."""
    return name.lower().startswith(_EVAL_PREFIXES)


def eval_series_name(name: str) -> str:
    """The one spelling of an eval series: ``val_loss`` and ``validation_loss`` are ``eval_loss``
    (so a policy's ``metric: eval_loss`` finds it whatever the trainer called it)."""
    low = name.lower()
    for prefix in _EVAL_PREFIXES:
        if low.startswith(prefix):
            return "eval_" + low[len(prefix) :]
    return low


def direction_of(name: str, overrides: Mapping[str, str] | None = None) -> Direction | None:
    """Which way ``name`` improves, or None when its name does not say (and no override does).

    A lower-is-better word wins over a higher one (``eval_f1_loss`` is a loss); tokens are matched
    whole or as a prefix followed by digits (``rouge1``, ``bleu4``, ``top1``)."""
    if overrides:
        value = overrides.get(name)
        if value is not None:
            return Direction(value)
    tokens = set(_tokens(name))
    tokens |= {re.sub(r"[0-9]+$", "", t) for t in tokens}
    if tokens & set(_LOWER):
        return Direction.LOWER
    if tokens & set(_HIGHER) or any(t.startswith(_HIGHER_STEMS) for t in tokens):
        return Direction.HIGHER
    return None


def likely_directed_spelling(name: str) -> str | None:
    """A spelling of ``name`` whose direction its name says, one ``_``-separated part of it
    respelt as a close direction word (``eval_acuracy``: ``eval_accuracy``), when ``name`` itself
    says none: most such names in a policy are typos of a metric the trainer does report."""
    import difflib

    if direction_of(name) is not None:
        return None
    words = [*_LOWER, *_HIGHER]
    parts = name.split("_")
    for i, part in enumerate(parts):
        for near in difflib.get_close_matches(part.lower(), words, n=3, cutoff=0.8):
            candidate = "_".join([*parts[:i], near, *parts[i + 1 :]])
            if direction_of(candidate) is not None:
                return candidate
    return None


def evaluation_noise(values: Sequence[float]) -> float:
    """How far one evaluation of a series scatters about its trend: a robust sd from its second
    differences, which a linear trend leaves alone (first differences read a falling eval loss's
    steps as noise); 0 on fewer than four finite points. A best checkpoint's value is one such
    evaluation: two runs whose bests lie closer than this are not told apart by them (``compare``)."""
    y = [float(v) for v in values if math.isfinite(v)]
    if len(y) < 4:
        return 0.0
    second = [abs(y[i + 2] - 2.0 * y[i + 1] + y[i]) for i in range(len(y) - 2)]
    return 1.4826 * statistics.median(second) / math.sqrt(6.0)


def is_saved_step(step: float, save_steps: int, last_step: float) -> bool:
    """Whether a trainer saving every ``save_steps`` steps wrote a checkpoint at ``step``: at each
    multiple of it, and at the run's ``last_step`` (HF's Trainer saves there too). A best
    checkpoint named to the user is one of these: an evaluation between two saves has no weights
    on disk to keep."""
    return step == last_step or (step > 0 and float(step) % save_steps == 0)


def eval_step_span(step: int, made_after: int | None, *, prose: bool = True) -> str:
    """Where an evaluation was made, as the advice names it: ``at step 3000`` at its own step,
    and ``between steps 2951 and 3021`` when the job reports no eval step and it came with the
    report at step 3021, the one before being at step 2950
    (``advisor.core.evals.EvalSeries.made_after``); ``step 3000`` / ``steps 2951-3021`` when not
    ``prose``. A trainer evaluating and saving at step 3,000 was told to keep "the checkpoint of
    step 3071", a step it saved nothing at."""
    if made_after is None or made_after >= step:
        return f"at step {step}" if prose else f"step {step}"
    if prose:
        return f"between steps {made_after + 1} and {step}"
    return f"steps {made_after + 1}-{step}"


def primary_eval(
    names: list[str] | tuple[str, ...],
    overrides: Mapping[str, str] | None = None,
    *,
    declared: str | None = None,
) -> str | None:
    """The eval series a rule judges by default: the one the run ``declared`` it is judged by (a
    HF Trainer's ``metric_for_best_model``, read back from its trainer_state.json) when reported
    with a direction, else ``eval_loss`` when reported, else the first eval series with a
    direction (its name's, or one ``overrides`` gives), in order of first appearance. The
    declared one comes first because it is the user's own choice: a run kept for its ``eval_f1``
    is not judged by an ``eval_loss`` that turned up while its F1 still rose."""
    if declared is not None and declared in names and direction_of(declared, overrides) is not None:
        return declared
    if "eval_loss" in names:
        return "eval_loss"
    for name in names:
        if is_eval_name(name) and direction_of(name, overrides) is not None:
            return name
    return None


#: words that make an eval metric a summary over classes or labels rather than one of them
#: (seqeval's ``eval_overall_f1``, ``eval_macro_f1``, ``eval_mean_iou``), or name its unit
#: (``eval_word_error_rate``, ``eval_token_accuracy``)
_SUMMARY_WORDS = frozenset(
    ("overall", "macro", "micro", "weighted", "mean", "avg", "average", "total", "all", "global")
)
_UNIT_WORDS = frozenset(("word", "char", "character", "token", "sentence", "seq", "sequence", "sample"))


def _per_class(name: str) -> bool:
    """Whether an eval metric is one class's or label's: its name puts a word before its metric
    word that is neither a metric, summary nor unit word (``eval_t005_f1``, seqeval's
    ``eval_PER_f1``, ``eval_class_3_accuracy``)."""
    body = eval_series_name(name).removeprefix("eval_")
    first = (_tokens(body) or [""])[0]
    return not (direction_of(first) is not None or first in _SUMMARY_WORDS or first in _UNIT_WORDS)


def summaries_first(
    names: list[str] | tuple[str, ...], overrides: Mapping[str, str] | None = None
) -> list[str]:
    """Eval metric ``names`` in the order they are worth showing when not all can be: the primary
    one (``primary_eval``, what the run is judged by), then those named ``overall``, then the
    other summaries over all classes, then each class's or label's own; in the given order within
    each. Why: a token classifier logs precision, recall and F1 per label, dozens of them, and its
    ``eval_overall_f1`` last."""
    primary = primary_eval(names, overrides)

    def rank(name: str) -> int:
        if name == primary:
            return 0
        if "overall" in _tokens(name):
            return 1
        return 3 if _per_class(name) else 2

    return sorted(names, key=rank)


#: words that make an eval metric a loss (what a model is trained on) rather than a task's score
_LOSS_WORDS = frozenset(("loss", "nll", "perplexity", "ppl"))


def is_loss_name(name: str) -> bool:
    """Whether an eval metric is a loss (``eval_loss``, ``eval_nll``, ``eval_perplexity``)."""
    return any(t in _LOSS_WORDS for t in _tokens(eval_series_name(name)))


def task_metric(
    names: list[str] | tuple[str, ...], overrides: Mapping[str, str] | None = None, *, judged: str
) -> str | None:
    """The task's score judged beside an eval loss that a run is judged by for want of a choice
    of its own: the first summary eval metric with a direction that is no loss (``eval_cer``,
    ``eval_accuracy``, ``eval_overall_f1``; not one class's), None when there is none or
    ``judged`` is no loss.

    Why: an eval loss and a task's score part ways often (a seq2seq or speech model's eval loss
    turns up while its error rate still falls for thousands of steps; a classifier grows
    over-confident while its accuracy still rises), and a run that computes a score was most
    likely set up to be judged by it. A run is called stopped by its eval loss only when its
    score has stopped too; a run that declares its metric (``metric_for_best_model``) or a rule
    that names one is judged by that alone."""
    if not is_loss_name(judged):
        return None
    for name in summaries_first(names, overrides):
        if (
            name != judged
            and is_eval_name(name)
            and direction_of(name, overrides) is not None
            and not is_loss_name(name)
            and not _per_class(name)
        ):
            return name
    return None
