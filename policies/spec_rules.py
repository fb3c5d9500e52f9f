"""The rule sections of an AdvisorPolicy (``spec.rules``): one frozen dataclass per rule.

Split from ``policies.spec`` only for size; the same conventions hold: every field is described
once with ``spec_field`` (loader and CRD schema both read it), cross-field constraints live in
``check()`` and, where CEL can say it, in ``CEL``.
"""

# ruff: noqa: RUF009  (spec_field is a dataclasses.field wrapper: it builds a Field, not a shared default)

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from advisor.protocol import DEADLINE_ANNOTATION, DEFAULT_CHECKPOINT_TIMEOUT_S
from policies.fields import spec_field

__all__ = [
    "RECOMMEND",
    "RELEASE",
    "STOP",
    "CheckpointRule",
    "DeadlineRule",
    "DivergenceRule",
    "ElasticRule",
    "OverfittingRule",
    "PlateauRule",
    "PreemptionGuardRule",
    "QuotaReleaseRule",
    "Rules",
    "StallRule",
]

Errors = list[tuple[str, str]]

#: what a rule may do about a condition it detected
RECOMMEND, RELEASE, STOP = "Recommend", "Release", "Stop"


# --------------------------------------------------------------------------------------------
# Fields several rules share (one description, so the CRD and the loader say the same everywhere)
# --------------------------------------------------------------------------------------------
def _enabled() -> Any:
    return spec_field("enabled", "Turn the rule off without deleting it.", "bool", default=True)


def _probability(doc: str, *, default: float) -> Any:
    return spec_field(
        "probability", doc, "float", default=default, minimum=0.0, exclusive_minimum=True, maximum=1.0
    )


#: what ``for`` means on a rule that may judge an eval series
_EVAL_HOLD = (
    "How long the condition must hold. On an eval series the rule also acts only on an evaluation "
    "after the one the window opened on: between two evaluations the series brings no new evidence."
)


def _hold(*, default: float, doc: str = "How long the condition must hold.") -> Any:
    return spec_field("for", doc, "duration", default=default)


def _release_or_stop(*, default: str) -> Any:
    return spec_field(
        "action",
        "Recommend only; or, in Apply mode, Release (checkpoint, then deactivate the Kueue "
        "Workload: its quota is freed and the job can be resumed) or Stop (the same deactivation, "
        "recorded as a stop, Event Stopped: the run is not meant to resume; nothing deletes it).",
        "enum",
        default=default,
        enum=(RECOMMEND, RELEASE, STOP),
    )


# --------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlateauRule:
    """A run that stopped learning: P(plateau) held at or above ``probability`` for ``for``."""

    enabled: bool = _enabled()
    probability: float = _probability("Plateau probability threshold.", default=0.9)
    hold: float = _hold(default=1800.0, doc=_EVAL_HOLD)
    action: str = _release_or_stop(default=RELEASE)
    metric: str = spec_field(
        "metric",
        "The series judged: 'loss' (the training loss) or an eval metric (eval_loss, eval_accuracy, ...). "
        "Empty: the job's primary eval metric when it reports one (eval_loss first), else the training loss.",
        "str",
        default="",
        max_length=64,
    )
    hold_at_peak_lr: bool = spec_field(
        "holdAtPeakLR",
        "Do not release or stop a run whose reported learning rate has stayed at its peak since warmup "
        "with at least a tenth of its total steps left, or with no total reported (the forecast warns of "
        "it): a warmup-stable-decay run is flat in its stable phase and drops only in its final decay. "
        "Acts once the decay begins or the run ends; a run without learning rates is judged as before.",
        "bool",
        default=False,
    )


@dataclass(frozen=True, slots=True)
class OverfittingRule:
    """A fine-tune whose eval metric no longer improves on its best while the training loss still
    falls: P(overfitting) of the run's learning state held at or above ``probability`` for ``for``.
    The reason names the step of the best eval value, the checkpoint worth keeping. A release or
    stop takes no checkpoint first (the weights are past the best, and a new save may rotate out
    the best one)."""

    enabled: bool = _enabled()
    probability: float = _probability("P(overfitting) threshold.", default=0.8)
    hold: float = _hold(default=1800.0, doc=_EVAL_HOLD)
    action: str = _release_or_stop(default=RECOMMEND)
    metric: str = spec_field(
        "metric",
        "The eval series judged (eval_loss, eval_accuracy, ...). Empty: the job's primary eval metric.",
        "str",
        default="",
        max_length=64,
    )


@dataclass(frozen=True, slots=True)
class DivergenceRule:
    """A run whose loss went non-finite, or is rising away."""

    enabled: bool = _enabled()
    probability: float = _probability("Divergence probability threshold.", default=0.95)
    hold: float = _hold(default=600.0)
    non_finite: bool = spec_field(
        "nonFinite",
        "NaN/inf losses in 3 reports in a row count as divergence at once (one alone is a "
        "mixed-precision step the run skipped).",
        "bool",
        default=True,
    )
    action: str = spec_field(
        "action",
        "Recommend only, or release quota, or stop; without a checkpoint first (a diverged run's "
        "weights are no checkpoint to resume from).",
        "enum",
        default=RELEASE,
        enum=(RECOMMEND, RELEASE, STOP),
    )


@dataclass(frozen=True, slots=True)
class StallRule:
    """No step advance for ``for`` (a hung collective looks exactly like this)."""

    enabled: bool = _enabled()
    hold: float = spec_field(
        "for",
        "How long without a step advance (more than zero).",
        "duration",
        default=1800.0,
        minimum=0.0,
        exclusive_minimum=True,
    )
    action: str = spec_field(
        "action", "Recommend only, or release quota.", "enum", default=RELEASE, enum=(RECOMMEND, RELEASE)
    )
    checkpoint_first: bool = spec_field(
        "checkpointFirst",
        "Ask for a checkpoint before releasing (a hung process rarely answers).",
        "bool",
        default=False,
    )


@dataclass(frozen=True, slots=True)
class DeadlineRule:
    """Predicted completion (now + ETA p90) later than the job's deadline."""

    enabled: bool = _enabled()
    max_runtime: float | None = spec_field(
        "maxRuntime",
        "Deadline relative to the job's start, for jobs without a deadline annotation.",
        "duration",
        default=None,
        nullable=True,
    )
    annotation: str = spec_field(
        "annotation",
        "Job annotation holding an RFC 3339 or epoch-seconds deadline.",
        "str",
        default=DEADLINE_ANNOTATION,
        min_length=1,
    )
    margin: float = spec_field(
        "margin", "Warn this long before the deadline would be missed.", "duration", default=0.0
    )
    scale_up: bool = spec_field(
        "scaleUp",
        "Request a scale-up when it would meet the deadline, within the elastic rule's bounds "
        "(that rule may be disabled: then only deadlines trigger growth).",
        "bool",
        default=False,
    )


@dataclass(frozen=True, slots=True)
class CheckpointRule:
    """Periodic checkpoints every Young/Daly interval for the job's cost and its queue's hazard."""

    enabled: bool = _enabled()
    default_cost: float = spec_field(
        "defaultCost", "Checkpoint cost assumed until the job reports one.", "duration", default=60.0
    )
    default_hazard_per_hour: float = spec_field(
        "defaultHazardPerHour",
        "Evictions per workload-hour assumed where the queue has no observed rate.",
        "float",
        default=0.01,
        minimum=0.0,
    )
    min_interval: float = spec_field(
        "minInterval", "Never checkpoint more often than this.", "duration", default=600.0
    )
    max_interval: float = spec_field(
        "maxInterval", "Never go longer than this without one.", "duration", default=6 * 3600.0
    )
    set_grace_period: bool = spec_field(
        "setGracePeriod",
        "In Apply mode, give a TrainJob that was evicted the grace period a save on SIGTERM needs "
        "(its step plus a save, measured) for its next start, through its runtimePatches while it "
        "is suspended (Trainer v2.3+; needs the trainjob-grace-period RBAC component). Otherwise "
        "the grace period is only recommended.",
        "bool",
        default=False,
    )
    # minInterval <= maxInterval is checked by the loader only: CEL cannot compare int-or-string
    # durations with day units, so the API server accepts it and the policy goes Invalid.

    def check(self) -> Errors:
        if self.min_interval > self.max_interval:
            return [
                (
                    "minInterval",
                    f"must not exceed maxInterval ({self.min_interval:g}s > {self.max_interval:g}s)",
                )
            ]
        return []


@dataclass(frozen=True, slots=True)
class PreemptionGuardRule:
    """Checkpoint (and boost priority) a likely next preemption victim whose checkpoint is stale."""

    enabled: bool = _enabled()
    stale_after: float = spec_field(
        "staleAfter", "A checkpoint older than this is stale.", "duration", default=900.0
    )
    boost: int = spec_field(
        "boost",
        "Priority boost while the checkpoint is taken (needs Kueue's PriorityBoost gate).",
        "int",
        default=1000,
        minimum=1,
    )
    drop_after: float = spec_field(
        "dropAfter",
        "Drop the boost after this long even without an acknowledgement.",
        "duration",
        default=DEFAULT_CHECKPOINT_TIMEOUT_S,
    )
    likely_victims: bool = spec_field(
        "likelyVictims",
        "Also keep fresh the checkpoint of the workload first in Kueue's victim order on a queue "
        "evicting at least likelyHazardPerHour (checkpoint only, no boost: nothing is pending yet).",
        "bool",
        default=True,
    )
    likely_hazard_per_hour: float = spec_field(
        "likelyHazardPerHour",
        "Evictions per workload-hour on the queue from which first-in-line counts as likely: its "
        "observed rate, shrunk toward the checkpoint rule's defaultHazardPerHour as the checkpoint "
        "rule estimates it (a queue never seen evicting never counts).",
        "float",
        default=0.05,
        minimum=0.0,
    )
    standing_boost: int = spec_field(
        "standingBoost",
        "Where the PriorityBoost gate is on and the queue is preemptible (eviction rate at least "
        "likelyHazardPerHour), keep this boost on every running workload whose checkpoint is older "
        "than staleAfter and drop it once a checkpoint is acknowledged, so that Kueue's victim order "
        "picks a freshly checkpointed workload among equals. Capped below the gap to the next higher "
        "priority seen in the cohort so that it only reorders; 0 turns it off.",
        "int",
        default=0,
        minimum=0,
    )


@dataclass(frozen=True, slots=True)
class ElasticRule:
    """Grow into idle quota while the run converges and scales well; shrink on plateau or starvation."""

    enabled: bool = _enabled()
    min_nodes: int | None = spec_field(
        "minNodes",
        "Lower bound (the job's own bound applies too).",
        "int",
        default=None,
        minimum=1,
        nullable=True,
    )
    max_nodes: int | None = spec_field(
        "maxNodes",
        "Upper bound (the job's own bound applies too).",
        "int",
        default=None,
        minimum=1,
        nullable=True,
    )
    min_marginal_efficiency: float = spec_field(
        "minMarginalEfficiency",
        "Grow only while each added GPU yields at least this fraction of the current per-GPU throughput.",
        "float",
        default=0.6,
        minimum=0.0,
        exclusive_minimum=True,
        maximum=1.0,
    )
    max_plateau_for_growth: float = spec_field(
        "maxPlateauProbability",
        "Grow only while P(plateau) is below this.",
        "float",
        default=0.3,
        minimum=0.0,
        maximum=1.0,
    )
    shrink_plateau_probability: float = spec_field(
        "shrinkPlateauProbability",
        "Shrink to the minimum when P(plateau) reaches this.",
        "float",
        default=0.8,
        minimum=0.0,
        exclusive_minimum=True,
        maximum=1.0,
    )
    max_shrink_slowdown: float = spec_field(
        "maxShrinkSlowdown",
        "A plateau shrink stops at the fewest nodes that slow the run by at most this factor "
        "(predicted by the throughput model): the run still goes to its end, and a shrink to the "
        "minimum can multiply its remaining time. 1 turns the plateau shrink off.",
        "float",
        default=1.5,
        minimum=1.0,
    )
    shrink_when_starving: bool = spec_field(
        "shrinkWhenStarving",
        "Give nodes back when a workload of equal or higher priority cannot be admitted.",
        "bool",
        default=True,
    )
    max_step: int = spec_field("maxStep", "Most nodes added in one scale-up.", "int", default=2, minimum=1)
    prior_serial_fraction: float = spec_field(
        "priorSerialFraction",
        "Serial fraction assumed (Amdahl) until two node counts were observed.",
        "float",
        default=0.1,
        minimum=0.0,
        maximum=1.0,
        exclusive_maximum=True,
    )
    CEL: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes",
            "minNodes must not exceed maxNodes",
        ),
    )

    def check(self) -> Errors:
        if self.min_nodes is not None and self.max_nodes is not None and self.min_nodes > self.max_nodes:
            return [("minNodes", f"must not exceed maxNodes ({self.min_nodes} > {self.max_nodes})")]
        return []


@dataclass(frozen=True, slots=True)
class QuotaReleaseRule:
    """How quota is given back: checkpoint first, then deactivate the Kueue Workload, once."""

    checkpoint_first: bool = spec_field(
        "checkpointFirst", "Request a checkpoint before releasing.", "bool", default=True
    )
    checkpoint_timeout: float = spec_field(
        "checkpointTimeout",
        "How long to wait for the checkpoint acknowledgement.",
        "duration",
        default=DEFAULT_CHECKPOINT_TIMEOUT_S,
    )
    release_on_timeout: bool = spec_field(
        "releaseOnTimeout",
        "Release anyway when the checkpoint is not acknowledged in time.",
        "bool",
        default=True,
    )
    max_checkpoint_age: float = spec_field(
        "maxCheckpointAge",
        "A checkpoint this recent counts: no new one is requested.",
        "duration",
        default=300.0,
    )


@dataclass(frozen=True, slots=True)
class Rules:
    """The rules of a policy; an absent rule is off."""

    plateau: PlateauRule | None = spec_field(
        "plateau", PlateauRule.__doc__ or "", "object", default=None, cls=PlateauRule
    )
    overfitting: OverfittingRule | None = spec_field(
        "overfitting", OverfittingRule.__doc__ or "", "object", default=None, cls=OverfittingRule
    )
    divergence: DivergenceRule | None = spec_field(
        "divergence", DivergenceRule.__doc__ or "", "object", default=None, cls=DivergenceRule
    )
    stall: StallRule | None = spec_field(
        "stall", StallRule.__doc__ or "", "object", default=None, cls=StallRule
    )
    deadline: DeadlineRule | None = spec_field(
        "deadline", DeadlineRule.__doc__ or "", "object", default=None, cls=DeadlineRule
    )
    checkpoint: CheckpointRule | None = spec_field(
        "checkpoint", CheckpointRule.__doc__ or "", "object", default=None, cls=CheckpointRule
    )
    preemption_guard: PreemptionGuardRule | None = spec_field(
        "preemptionGuard", PreemptionGuardRule.__doc__ or "", "object", default=None, cls=PreemptionGuardRule
    )
    elastic: ElasticRule | None = spec_field(
        "elastic", ElasticRule.__doc__ or "", "object", default=None, cls=ElasticRule
    )
    quota_release: QuotaReleaseRule | None = spec_field(
        "quotaRelease", QuotaReleaseRule.__doc__ or "", "object", default=None, cls=QuotaReleaseRule
    )
