"""Small Kueue scenarios as data: one definition that both the quota model and real Kueue play.

Each scenario is a set of ClusterQueues (the model's ``ClusterQueueSpec``, turned into Kueue
objects by ``objects``) and a list of events, each settled before the next: a Workload is
submitted (one pod set of one pod asking for ``gpus``; ``spec.priority``; the ``priority-boost``
annotation when ``boost``), or finishes (its quota is released). A preempted workload is put
back in its queue at once (the job framework's stop and requeue), on both sides.

Events are spaced so that every two workloads differ in creation time and in admission time (Kueue
keeps both to the second), which leaves the UID, random in Kueue, out of every ordering that
matters; the scenarios avoid ties that only the UID would break.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.quota import ClusterQueueSpec

__all__ = ["SCENARIOS", "Finish", "Scenario", "Submit"]


@dataclass(frozen=True, slots=True)
class Submit:
    """A Workload created in ClusterQueue ``queue`` (through a LocalQueue of that name)."""

    name: str
    queue: str
    gpus: int
    priority: int = 0
    boost: int = 0


@dataclass(frozen=True, slots=True)
class Finish:
    """A Workload that ends (``Finished``): Kueue gives its quota back."""

    name: str


Event = Submit | Finish


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    #: the Kueue behaviour it exercises, for the report
    exercises: str
    queues: tuple[ClusterQueueSpec, ...]
    events: tuple[Event, ...]
    #: Kueue's ``PriorityBoost`` feature gate (alpha, off by default; minimalkueue cannot set it)
    priority_boost_enabled: bool = False


def _cq(name: str, nominal: int, **kw: object) -> ClusterQueueSpec:
    return ClusterQueueSpec(name, nominal, **kw)  # type: ignore[arg-type]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "nominal-fifo",
        "nominal quota; BestEffortFIFO admits a smaller later workload past one that does not fit",
        (_cq("a", 8),),
        (
            Submit("w1", "a", 4),
            Submit("w2", "a", 2),
            Submit("big", "a", 4),
            Submit("small", "a", 2),
            Finish("w1"),
            Finish("w2"),
        ),
    ),
    Scenario(
        "priority-order",
        "a higher-priority pending workload is admitted first when quota frees up; Never preempts nobody",
        (_cq("a", 4),),
        (
            Submit("run", "a", 4),
            Submit("low", "a", 4, priority=0),
            Submit("high", "a", 4, priority=10),
            Finish("run"),
            Finish("high"),
        ),
    ),
    Scenario(
        "within-cq-lower-priority",
        "withinClusterQueue LowerPriority: the most recently admitted of the lowest priority goes first, "
        "then just enough",
        (_cq("a", 8, within_cluster_queue="LowerPriority"),),
        (
            Submit("lo1", "a", 4, priority=0),
            Submit("lo2", "a", 4, priority=0),
            Submit("mid", "a", 4, priority=5),
            Submit("top", "a", 8, priority=10),
            Submit("peer", "a", 4, priority=10),
        ),
    ),
    Scenario(
        "within-cq-newer-equal",
        "withinClusterQueue LowerOrNewerEqualPriority: a requeued older workload preempts a newer one "
        "of equal priority",
        (_cq("a", 8, within_cluster_queue="LowerOrNewerEqualPriority"),),
        (
            Submit("old", "a", 8, priority=0),
            Submit("urgent", "a", 4, priority=5),
            Submit("newer", "a", 4, priority=0),
            Finish("urgent"),
        ),
    ),
    Scenario(
        "cohort-borrowing-limit",
        "cohort borrowing up to borrowingLimit; a queue within its nominal quota goes before a borrowing one",
        (_cq("a", 8, cohort="c", borrowing_limit=4), _cq("b", 8, cohort="c")),
        (
            Submit("a1", "a", 8),
            Submit("a2", "a", 4),
            Submit("a3", "a", 2),
            Submit("b1", "b", 4),
            Submit("a4", "a", 4),
            Submit("b2", "b", 4),
            Finish("a2"),
        ),
    ),
    Scenario(
        "cohort-lending-limit",
        "lendingLimit keeps part of a queue's nominal quota from the cohort",
        (_cq("a", 8, cohort="c"), _cq("b", 8, cohort="c", lending_limit=2)),
        (
            Submit("a-big", "a", 11),
            Submit("a1", "a", 10),
            Submit("a2", "a", 1),
            Submit("b1", "b", 6),
            Submit("b2", "b", 2),
            Finish("a1"),
        ),
    ),
    Scenario(
        "reclaim-lower-priority",
        "reclaimWithinCohort LowerPriority: a queue takes its nominal quota back from a lower-priority "
        "borrower, not from an equal one",
        (_cq("a", 8, cohort="c", reclaim_within_cohort="LowerPriority"), _cq("b", 8, cohort="c")),
        (
            Submit("b1", "b", 8, priority=0),
            Submit("b2", "b", 4, priority=5),
            Submit("b3", "b", 4, priority=0),
            Submit("a1", "a", 4, priority=5),
            Submit("a2", "a", 4, priority=5),
            Submit("a3", "a", 4, priority=5),
        ),
    ),
    Scenario(
        "reclaim-any",
        "reclaimWithinCohort Any: a queue takes its nominal quota back from a borrower of any priority",
        (_cq("a", 8, cohort="c", reclaim_within_cohort="Any"), _cq("b", 8, cohort="c")),
        (
            Submit("b1", "b", 8, priority=10),
            Submit("b2", "b", 8, priority=10),
            Submit("a1", "a", 4, priority=0),
        ),
    ),
    Scenario(
        "borrow-within-cohort",
        "borrowWithinCohort LowerPriority with maxPriorityThreshold: a borrowing preemptor takes only "
        "borrowed workloads at or below the threshold; reclaimWithinCohort Any takes it back",
        (
            _cq(
                "a",
                4,
                cohort="c",
                reclaim_within_cohort="LowerPriority",
                borrow_within_cohort="LowerPriority",
                borrow_max_priority_threshold=5,
            ),
            _cq("b", 4, cohort="c"),
            _cq("c", 4, cohort="c", reclaim_within_cohort="Any"),
        ),
        (
            Submit("a1", "a", 4, priority=10),
            Submit("b1", "b", 4, priority=0),
            Submit("b2", "b", 4, priority=7),
            Submit("a2", "a", 4, priority=10),
            Submit("c1", "c", 4, priority=0),
        ),
    ),
    Scenario(
        "reclaim-while-under-nominal",
        "a preemptor under its nominal quota that would borrow, borrowWithinCohort Never: Kueue tries "
        "without borrowing, reclaiming from the cohort and preempting in its own queue",
        (
            _cq(
                "a",
                4,
                cohort="c",
                within_cluster_queue="LowerPriority",
                reclaim_within_cohort="LowerPriority",
            ),
            _cq("b", 4, cohort="c"),
        ),
        (
            Submit("a1", "a", 2, priority=0),
            Submit("b1", "b", 4, priority=0),
            Submit("b2", "b", 2, priority=0),
            Submit("a2", "a", 4, priority=10),
        ),
    ),
    Scenario(
        "boost-with-gate-off",
        "a priority-boost annotation on the newest low-priority workload; with the PriorityBoost gate "
        "off (Kueue's default, and minimalkueue's) it does not shield it",
        (_cq("a", 8, within_cluster_queue="LowerPriority"),),
        (
            Submit("plain", "a", 4, priority=0),
            Submit("boosted", "a", 4, priority=0, boost=100),
            Submit("mid", "a", 4, priority=5),
        ),
    ),
)
