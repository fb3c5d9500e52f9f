"""Frozen value types shared by every layer: sources, forecasting, policies, the core loop,
the controller and the simulator.

Why one package, imported as one (``from advisor.model import JobView``): the controller and the
simulator are two adapters around one core loop, and the moment either grows a private copy of
``JobView`` or ``Decision`` the two drift apart (the Pollux simulator's ``JobInfo`` is the
cautionary tale). Everything here is plain data: no I/O, no clock, no numpy (so that it is cheap
to import everywhere and trivially serialisable).

Three modules, along the lines between measuring, seeing and deciding: ``advisor.model.progress``,
what is observed of a run and forecast from it; ``advisor.model.views``, what policies see of a job
and the cluster (it reads a forecast); ``advisor.model.actions``, what policies return and the log
of what was done (a ``JobView`` carries that log). Nothing in ``progress`` reads the other two, and
nothing in ``actions`` reads a view.

Times are seconds (wall-clock epoch seconds in the controller, virtual seconds in the simulator);
nothing here cares which.
"""

from __future__ import annotations

from advisor.model.actions import (
    DEFAULT_BOOST,
    DISRUPTIVE_KINDS,
    HELD_DETAIL,
    Action,
    ActionKind,
    ActionRecord,
    CheckpointState,
    Decision,
    Mode,
    boost_of,
    boost_value,
)
from advisor.model.progress import (
    EPOCH_MS_FLOOR,
    LEARNING_LABELS,
    MALFORMED_BACKS,
    Curve,
    EvalJudgement,
    Forecast,
    Interval,
    LearningState,
    ProgressSample,
    backwards_run,
)
from advisor.model.views import (
    ClusterQueueView,
    ClusterView,
    JobView,
    LifecycleSignals,
    Phase,
    ReportSight,
    WorkloadView,
    holds_quota,
    job_key,
    latest_report,
    save_window_seconds,
    seconds_per_step,
)

__all__ = [
    "DEFAULT_BOOST",
    "DISRUPTIVE_KINDS",
    "EPOCH_MS_FLOOR",
    "HELD_DETAIL",
    "LEARNING_LABELS",
    "MALFORMED_BACKS",
    "Action",
    "ActionKind",
    "ActionRecord",
    "CheckpointState",
    "ClusterQueueView",
    "ClusterView",
    "Curve",
    "Decision",
    "EvalJudgement",
    "Forecast",
    "Interval",
    "JobView",
    "LearningState",
    "LifecycleSignals",
    "Mode",
    "Phase",
    "ProgressSample",
    "ReportSight",
    "WorkloadView",
    "backwards_run",
    "boost_of",
    "boost_value",
    "holds_quota",
    "job_key",
    "latest_report",
    "save_window_seconds",
    "seconds_per_step",
]
