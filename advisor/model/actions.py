"""What policies return (``Action``, ``Decision``) and the record of what the advisor did to a job
(``ActionRecord``, ``CheckpointState``): the half of the policy contract the adapters carry out and
log, apart from what policies see (``advisor.model.views``), which holds the log in each
``JobView``.

Plain data, like all of ``advisor.model``: no I/O, no clock, no numpy.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "DEFAULT_BOOST",
    "DISRUPTIVE_KINDS",
    "HELD_DETAIL",
    "Action",
    "ActionKind",
    "ActionRecord",
    "CheckpointState",
    "Decision",
    "Mode",
    "boost_of",
    "boost_value",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Mode(enum.StrEnum):
    """Whether a policy only recommends or also mutates the cluster."""

    RECOMMEND = "Recommend"
    APPLY = "Apply"


class ActionKind(enum.StrEnum):
    """What the advisor can do to a job. ``RECOMMEND`` never mutates user objects."""

    RECOMMEND = "recommend"
    CHECKPOINT = "checkpoint"
    RELEASE_QUOTA = "release-quota"
    BOOST_PRIORITY = "boost-priority"
    DROP_BOOST = "drop-boost"
    SCALE = "scale"
    STOP = "stop"
    SET_GRACE_PERIOD = "set-grace-period"
    """The pods' ``terminationGracePeriodSeconds`` for the job's next start (a TrainJob's own
    ``runtimePatches`` entry, which Trainer accepts only while the job is suspended)."""


#: kinds that policy cooldowns and hourly caps govern: they interrupt a run. Checkpoints and
#: priority boosts protect work and have their own pacing, so they are not counted.
DISRUPTIVE_KINDS: frozenset[ActionKind] = frozenset(
    {ActionKind.RELEASE_QUOTA, ActionKind.STOP, ActionKind.SCALE}
)


@dataclass(frozen=True, slots=True)
class CheckpointState:
    """What is known of a job's checkpoints (from acknowledgements in its progress stream)."""

    last_step: int | None = None
    last_time: float | None = None
    cost_seconds: float | None = None
    pending_request: str | None = None
    pending_since: float | None = None
    save_seconds: float | None = None
    """How long one save takes by the training helper's own clock (``last_checkpoint_seconds``)."""
    sigterm_saves: int = 0
    """Evictions after which the run resumed from a checkpoint at least as new as its last report
    before the eviction (its save on SIGTERM made it), seen from the reports after the restart."""
    sigterm_misses: int = 0
    """Evictions after which the run resumed from an older checkpoint (work lost)."""

    @property
    def save_duration(self) -> float | None:
        """Seconds one save takes: the helper's own measure, else the request-to-acknowledgement
        latency of the advisor's requests (which includes the wait for a safe point, so errs long)."""
        for value in (self.save_seconds, self.cost_seconds):
            if value is not None and math.isfinite(value) and value >= 0:
                return value
        return None


#: the priority boost a boost action writes when its rule names none (the controller's ``--boost``)
DEFAULT_BOOST = 1000


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def boost_of(params: Mapping[str, Any], default: int = DEFAULT_BOOST) -> int:
    """The value a boost action with ``params`` writes: its ``boost``, else ``default``. The
    controller's mutation, the simulator's actuator and every record read it here (four readings
    had two defaults and an alias no rule writes)."""
    value = params.get("boost", default)
    return int(value) if _is_number(value) else default


def boost_value(action: Action, default: int = DEFAULT_BOOST) -> int | None:
    """``boost_of`` a boost action, None for any other."""
    return boost_of(action.params, default) if action.kind is ActionKind.BOOST_PRIORITY else None


#: the ``detail`` of a ``recommended`` record that is an Apply policy's action its cooldown or cap
#: held back: counted and shown as held, not as a Recommend-mode policy's advice
HELD_DETAIL = "held back"


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One action the advisor took (or requested) on a job; the log that enforces cooldowns,
    caps and "never twice", and that survives controller restarts."""

    kind: ActionKind
    time: float
    request_id: str
    policy: str = ""
    rule: str = ""
    outcome: str = "requested"
    """requested | done | acknowledged | timed-out | dropped | failed | impossible | recommended.
    ``dropped``: a checkpoint request whose pods went away unanswered (``detail`` says why).
    ``failed`` may work on a later try (backed off); ``impossible`` cannot work on this job as it
    stands (no Workload, no permission, not supported) and is not tried again until ``stamp`` changes."""
    reason: str = ""
    timeout_s: float | None = None
    """For a checkpoint request: how long to wait for the acknowledgement (None: the protocol default)."""
    stamp: str = ""
    """``JobView.version`` when the action was tried: the job it was found impossible on."""
    detail: str = ""
    """What the attempt found (the failure's reason), for the log, ``explain`` and the backoff."""
    boost: int | None = None
    """For a priority boost: the value written, which tells the advisor's annotation from another
    writer's when the boost is cleaned up (``policies.cleanup``; None in records of older versions)."""

    @classmethod
    def requested(
        cls,
        action: Action,
        *,
        policy: str,
        request_id: str,
        now: float,
        default_boost: int = DEFAULT_BOOST,
        stamp: str = "",
    ) -> ActionRecord:
        """The record of ``action`` asked for at ``now``: what every adapter (the controller, the
        simulator, the back-test) records before it acts, so that cooldowns, caps and the boost's
        cleanup read the same record whichever ran it (three copies disagreed on the boost's
        default and on which actions carry a timeout)."""
        timeout = action.params.get("timeout_s")
        carries = action.kind is ActionKind.CHECKPOINT and _is_number(timeout)
        return cls(
            kind=action.kind,
            time=now,
            request_id=request_id,
            policy=policy,
            rule=action.rule,
            outcome="requested",
            reason=action.reason,
            timeout_s=float(timeout) if carries else None,  # type: ignore[arg-type]
            stamp=stamp,
            boost=boost_value(action, default_boost),
        )


@dataclass(frozen=True, slots=True)
class Action:
    """One thing to do, with the numbers that justified it (for Events, the CLI and ``explain``)."""

    kind: ActionKind
    rule: str
    reason: str
    params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of evaluating one job against its policy.

    ``state`` is the rules' explicit memory (e.g. when a condition first held, for ``for: 30m``):
    rules are stateless, so the caller stores ``state`` and passes it back as
    ``JobView.rule_state`` next time. ``recheck_at`` exists because a decision can fall due with
    nothing new to observe: a hung job sends no progress, a ``for: 45m`` window ends between reports.
    """

    job: str
    policy: str | None = None
    mode: Mode = Mode.RECOMMEND
    actions: tuple[Action, ...] = ()
    reasons: tuple[str, ...] = ()
    state: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    advice: str = ""
    #: the earliest time a rule wants the job evaluated again even without new progress (the end of
    #: a ``for:`` window, a checkpoint timeout); adapters schedule their next evaluation no later
    recheck_at: float | None = None
    #: a watchdog: when a rule wants the job evaluated again *if it makes no progress before then*
    #: (the stall rule's hold). Every step advance re-arms it, so an adapter that sees the job
    #: progress (the controller on each report, the simulator from its model) need not look at the
    #: job for it until progress stops
    idle_recheck_at: float | None = None
    #: other policies that select the job as specifically and with the same priority as
    #: ``policy``, which governs by mode (Recommend before Apply) or name alone (``tied_with``)
    tied_with: tuple[str, ...] = ()
    #: whether the governing policy judged the job at this look (its ``minRuntime``, ``minSteps`` and
    #: ``minProgress`` passed, the job running): a back-test counts the runs a policy never judged,
    #: which read as runs it let be
    judged: bool = False
    #: the advisor undoing its own writes whose mandate ended (``policies.cleanup``): adapters carry
    #: them out whatever the mode, also under ``--recommend-only`` and on a job that stopped running
    cleanup: tuple[Action, ...] = ()
