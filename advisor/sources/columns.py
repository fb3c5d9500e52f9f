"""Which column of a loss log means what.

Loss logs name their columns in a dozen ways (``step``/``global_step``/``iter``, ``loss``/
``train_loss``, ``val_loss``/``eval_loss``, ``train_time_ms``/``elapsed_time``/``_runtime``, ``lr``
/``learning_rate``). This table maps a column name to its role, by priority, once for every file
format; ``canonical_name`` first folds case, camelCase and ``/``, ``.``, ``-`` separators so that
``train/loss`` and ``trainLoss`` are both ``train_loss``.

A learning rate logged by Lightning's ``LearningRateMonitor`` is named after its optimizer
(``lr-AdamW``, ``lr-Adam/pg1``, ...: ``lightning_learning_rate``); such a column is the learning
rate of a file with none named so.

A time column is in seconds unless its name ends in ``_ms``, or its values are epoch milliseconds
(``epoch_millis``: a ``timestamp`` as MLflow writes it, ~1.7e12, beyond any epoch-seconds date),
which the loader says in a warning.

A W&B export carries two step columns: ``_step``, W&B's own counter of ``log`` calls (one per
logged row, whatever the training step), and the trainer's step it logs beside it (HF's
``WandbCallback``: ``train/global_step``; Lightning's ``WandbLogger``: ``trainer/global_step``).
The trainer's step comes first; ``_step`` is the step only of a file that has no other.

Two exports name their value column after something else (``export_header``): TensorBoard's
scalar CSV (``Wall time,Step,Value``: the tag is in the file's name, ``run-a-tag-eval_loss.csv``),
and a W&B chart panel's (``Step,"<run> - train/loss","<run> - train/loss__MIN",...``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from advisor.series import eval_series_name, is_eval_name
from advisor.sources.coerce import EPOCH_MS_FLOOR
from advisor.sources.normalize import canonical_name

__all__ = [
    "HF_ROLES",
    "ROLES",
    "Column",
    "ExportError",
    "epoch_millis",
    "export_header",
    "lightning_learning_rate",
    "loss_named",
    "resolve_columns",
    "training_loss_column",
    "wandb_panel_runs",
]

#: role -> accepted canonical column names, best first
ROLES: dict[str, tuple[str, ...]] = {
    "step": (
        "step",
        "steps",
        "global_step",
        "current_step",
        "current_steps",
        "train_global_step",
        "trainer_global_step",
        "iteration",
        "iter",
        "it",
        # W&B's row counter: the step only when nothing else is
        "_step",
        # a training loop's batch counter within its epoch (``epoch, batch, loss``): read beside
        # an epoch column only, and only when it moves (``BATCH_COUNTERS``)
        "batch",
        "batch_idx",
        "batch_index",
    ),
    # (``loss_train`` / ``loss_val``: PyTorch's ``SummaryWriter`` tags ``Loss/train``, ``Loss/val``)
    "loss": ("loss", "train_loss", "training_loss", "train_loss_step", "loss_train"),
    "eval_loss": (
        "eval_loss",
        "val_loss",
        "validation_loss",
        "valid_loss",
        "dev_loss",
        "test_loss",
        "loss_val",
        "loss_valid",
        "loss_validation",
        "loss_eval",
    ),
    "time": (
        "time",
        "wall_time",
        "walltime",
        "elapsed",
        "elapsed_time",
        "elapsed_s",
        "elapsed_seconds",
        "time_s",
        "seconds",
        "train_time",
        "train_time_s",
        "runtime",
        "_runtime",
        "relative_time",
        "timestamp",
        "_timestamp",
        "train_time_ms",
        "time_ms",
        "elapsed_ms",
        "wall_time_ms",
        "elapsed_time_ms",
    ),
    "learning_rate": ("learning_rate", "lr", "train_learning_rate", "train_lr"),
    "epoch": ("epoch", "epochs", "current_epoch", "train_epoch"),
    "total_steps": ("total_steps", "max_steps", "num_steps", "num_training_steps"),
    "curve_id": ("curve_id", "run_id", "run", "run_name"),
}

#: step names that may be a batch counter within an epoch, or a batch size: a step only beside an
#: epoch column, and only when the column moves (a constant one is a size, and the epoch is the axis)
BATCH_COUNTERS = frozenset({"batch", "batch_idx", "batch_index"})

#: HF ``log_history``: only the per-interval ``loss`` is a training loss (``train_loss`` is the mean
#: over the whole run, written once in the final summary entry), and ``step`` is the optimizer step
HF_ROLES: dict[str, tuple[str, ...]] = {
    "step": ("step",),
    "loss": ("loss",),
    "eval_loss": ("eval_loss",),
    "learning_rate": ("learning_rate",),
    "epoch": ("epoch",),
}


class Column:
    """One resolved column: the name in the file and how its numbers convert to our units."""

    __slots__ = ("name", "scale")

    def __init__(self, name: str, scale: float = 1.0) -> None:
        self.name = name
        self.scale = scale

    def describe(self) -> str:
        return f"'{self.name}' (ms)" if self.scale != 1.0 else f"'{self.name}'"


def resolve_columns(names: Iterable[str], roles: dict[str, tuple[str, ...]] = ROLES) -> dict[str, Column]:
    """Map roles to the best matching column among ``names`` (first occurrence wins ties)."""
    names = list(names)
    canonical: dict[str, str] = {}
    for name in names:
        canonical.setdefault(canonical_name(name), name)
    resolved: dict[str, Column] = {}
    for role, accepted in roles.items():
        for candidate in accepted:
            if candidate in canonical:
                scale = 1e-3 if role == "time" and candidate.endswith("_ms") else 1.0
                resolved[role] = Column(canonical[candidate], scale)
                break
    if "learning_rate" in roles and "learning_rate" not in resolved:
        monitored = lightning_learning_rate(names)
        if monitored is not None:
            resolved["learning_rate"] = Column(monitored)
    if roles is ROLES and "loss" not in resolved:
        other = training_loss_column(names, resolved)
        if other is not None:
            resolved["loss"] = Column(other)
    return resolved


#: the loss a file names otherwise, chosen first among several (a model's losses and their sum)
_TOTAL_LOSS = ("total_loss", "train_total_loss", "loss_total")


def loss_named(names: Iterable[str]) -> list[str]:
    """The columns whose name has the word ``loss`` (``lm_loss``, ``aux_loss``): a file of losses
    of other names, one of which ``--metric`` can name."""
    return [n for n in names if _a_loss(canonical_name(n))]


def _a_loss(canonical: str) -> bool:
    """Whether a name says a loss: it has the word ``loss`` and is not mixed precision's loss
    scale (``loss_scale``, ``loss_scaler``: the factor the loss is multiplied by, a power of two
    that halves on an overflow, logged beside the loss by Megatron and DeepSpeed)."""
    return "loss" in canonical.split("_") and not canonical.startswith("loss_scale")


def training_loss_column(names: Iterable[str], resolved: dict[str, Column] | None = None) -> str | None:
    """A file's training loss named otherwise than ``ROLES`` knows (``lm_loss``, ``nll_loss``,
    ``loss_epoch``): its one column whose name has the word ``loss`` and is no evaluation's, or
    among several, the total (``total_loss``); None when there is none or no way to choose. Why
    only then: of ``lm_loss`` and ``aux_loss`` neither is the run's loss more than the other, and a
    file that names several is asked for one (``--metric``) rather than judged by a guess."""
    taken = {c.name for c in (resolved or {}).values()}
    found = []
    for name in names:
        canonical = canonical_name(name)
        if name in taken or is_eval_name(eval_series_name(canonical)) or canonical in ROLES["eval_loss"]:
            continue
        if _a_loss(canonical) and not canonical.startswith(("test_", "loss_test")):
            found.append((canonical, name))
    if len(found) == 1:
        return found[0][1]
    total = [name for canonical, name in found if canonical in _TOTAL_LOSS]
    return total[0] if len(total) == 1 else None


#: Lightning's ``LearningRateMonitor`` names: ``lr-<Optimizer>``, ``-<n>`` for a second optimizer of
#: the same class, ``/pg<n>`` (or ``/<group name>``) per param group when there are several; a
#: logger may put its own prefix before it (``trainer/lr-AdamW``)
_LIGHTNING_LR = re.compile(r"^(?:[\w.]+/)?lr-[A-Za-z_]\w*(?:-(?P<copy>\d+))?(?:/(?P<group>[^/]+))?$")
#: what the monitor logs beside a learning rate under the same name (``log_momentum``,
#: ``log_weight_decay``)
_LIGHTNING_NOT_LR = ("-momentum", "-weight_decay")


def lightning_learning_rate(names: Iterable[str]) -> str | None:
    """The learning-rate column Lightning's ``LearningRateMonitor`` wrote among ``names``, None if
    none: the first optimizer's first param group (``lr-Adam/pg1`` before ``lr-Adam/pg2`` and
    ``lr-Adam-1``), else the first such column. Why the first group: it is the model's main one
    (the others, a head or no-decay parameters, usually follow its schedule at another scale)."""
    found: list[tuple[int, int, int, str]] = []
    for position, name in enumerate(names):
        match = _LIGHTNING_LR.match(name.strip())
        if match is None or name.strip().endswith(_LIGHTNING_NOT_LR):
            continue
        group = match.group("group") or ""
        numbered = re.fullmatch(r"pg(\d+)", group)
        found.append(
            (int(match.group("copy") or 0), int(numbered.group(1)) if numbered else 0, position, name)
        )
    return min(found)[3] if found else None


def epoch_millis(column: Column, times: Sequence[float]) -> tuple[Column, str] | None:
    """``column`` read in milliseconds, and the note that says so, when the times it gave read as
    seconds are epoch milliseconds: every finite one beyond ``EPOCH_MS_FLOOR``, which no
    epoch-seconds date or elapsed time reaches. None otherwise (a column already in ms too)."""
    finite = [t for t in times if math.isfinite(t)]
    if column.scale != 1.0 or not finite or min(finite) <= EPOCH_MS_FLOOR:
        return None
    note = f"time '{column.name}' holds epoch milliseconds ({finite[0]:.4g}): read as ms"
    return Column(column.name, 1e-3), note


class ExportError(ValueError):
    """An export that holds no one run's series (a W&B panel of several runs)."""


_TB_HEADER = ("wall_time", "step", "value")
_TB_TAG = re.compile(r"tag[-_](.+)$", re.IGNORECASE)
_WANDB_PANEL = re.compile(r"^(?P<run>.+?) - (?P<metric>.+)$")


def export_header(header: list[str], file_name: str) -> list[str]:
    """``header`` with an export's value columns named by what they hold (see the module
    docstring): TensorBoard's ``Value`` by the tag in ``file_name`` (``loss`` without one), a W&B
    panel's ``<run> - <metric>`` by its metric (its ``__MIN``/``__MAX`` band columns are left as
    they are, which no role reads). Any other header is returned as it is. Raises
    ``ExportError`` for a panel of several runs."""
    if tuple(canonical_name(h) for h in header) == _TB_HEADER:
        stem = file_name.lower().removesuffix(".gz").rsplit(".", 1)[0]
        tag = _TB_TAG.search(stem)
        named = canonical_name(tag.group(1)) if tag else "loss"
        return [h if canonical_name(h) != "value" else named for h in header]
    runs = wandb_panel_runs(header)
    if not runs:
        return header
    if len(runs) > 1:
        shown = ", ".join(sorted(runs)[:3]) + (", ..." if len(runs) > 3 else "")
        raise ExportError(
            f"a W&B panel export of {len(runs)} runs ({shown}): choose one (forecast --curve RUN), "
            "or export one run's panel, or its run history"
        )
    panel = [_WANDB_PANEL.match(h) for h in header]
    return [
        m.group("metric") if m is not None and not m.group("metric").endswith(("__MIN", "__MAX")) else h
        for h, m in zip(header, panel, strict=True)
    ]


def wandb_panel_runs(header: Sequence[str]) -> list[str]:
    """The runs of a W&B chart panel's export whose header ``header`` is (``<run> - <metric>``
    columns beside a step column), in the order their columns come; empty for any other header."""
    if not any(canonical_name(h) in ROLES["step"] for h in header):
        return []
    found = (_WANDB_PANEL.match(h) for h in header)
    return list(dict.fromkeys(m.group("run") for m in found if m is not None))
