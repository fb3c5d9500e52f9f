"""A scenario played in the quota model, and the comparison of two plays (model and Kueue).

After each event the model schedules until nothing more happens, the way Kueue's scheduling
cycles run until the queues are quiet: a preempted workload is released, put back in its queue
(``submit``, keeping its creation time) and the next pass may admit it again or the preemptor.
What is compared after each event is an ``Observation``: who holds quota, and who was preempted
while the event settled, with Kueue's reason. The admission order is the sequence of these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.model import ClusterView, WorkloadView
from policies.victims import predict_victims
from simulator.advisor_views import cluster_queue_view
from simulator.conformance.scenarios import Finish, Scenario, Submit
from simulator.quota import QuotaModel, Workload

__all__ = [
    "MAX_PASSES",
    "Observation",
    "agreement_report",
    "kueue_plays",
    "play_in_model",
    "predicted_victims",
    "predictor_score",
]

#: scheduling passes per event at most: a preemption cycle (documented in ``simulator.admission``)
#: would otherwise never settle; no scenario comes near it
MAX_PASSES = 20


@dataclass(frozen=True, slots=True)
class Observation:
    """The state once an event has settled."""

    #: workloads holding quota, by name, sorted
    admitted: tuple[str, ...]
    #: ``(victim, reason)`` for each preemption while the event settled, sorted; the reason is
    #: Kueue's (InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing)
    preempted: tuple[tuple[str, str], ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"admitted": list(self.admitted), "preempted": [list(p) for p in self.preempted]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Observation:
        return cls(tuple(obj["admitted"]), tuple((str(v), str(r)) for v, r in obj["preempted"]))


def play_in_model(
    scenario: Scenario, *, priority_boost_enabled: bool | None = None
) -> tuple[Observation, ...]:
    """``scenario`` in the quota model; event ``i`` happens at time ``i`` (creation and admission
    times order as Kueue's do). ``priority_boost_enabled`` overrides the scenario's gate."""
    return _play(scenario, priority_boost_enabled)[0]


def predicted_victims(scenario: Scenario) -> tuple[tuple[str, ...], ...]:
    """Per event, the workloads the advisor's victim predictor (``policies.victims``) names on
    the snapshot a controller would read once the event happened, before Kueue's next cycle."""
    return _play(scenario, None)[1]


def _play(
    scenario: Scenario, priority_boost_enabled: bool | None
) -> tuple[tuple[Observation, ...], tuple[tuple[str, ...], ...]]:
    gate = scenario.priority_boost_enabled if priority_boost_enabled is None else priority_boost_enabled
    model = QuotaModel(scenario.queues, priority_boost_enabled=gate)
    workloads: dict[str, Workload] = {}
    out: list[Observation] = []
    predictions: list[tuple[str, ...]] = []
    for i, event in enumerate(scenario.events):
        now = float(i)
        if isinstance(event, Submit):
            wl = Workload(
                uid=i,
                job=event.name,
                cluster_queue=event.queue,
                gpus=event.gpus,
                priority=event.priority,
                created_at=now,
                boost=event.boost,
            )
            workloads[event.name] = wl
            model.submit(wl)
        else:
            assert isinstance(event, Finish)
            wl = workloads[event.name]
            wl.finished = True
            model.release(wl)
        view = _cluster_view(model, workloads.values(), gate)
        predictions.append(tuple(sorted(v.name for v in predict_victims(view))))
        preempted: list[tuple[str, str]] = []
        for _ in range(MAX_PASSES):
            _admitted, preemptions = model.schedule(now)
            for p in preemptions:
                preempted.append((p.victim.job, p.reason))
                model.submit(p.victim)  # stopped and requeued, as the job framework does
            if not preemptions:
                break
        held = sorted(w.job for w in workloads.values() if w.admitted)
        out.append(Observation(tuple(held), tuple(sorted(preempted))))
    return tuple(out), tuple(predictions)


def _cluster_view(model: QuotaModel, workloads: Iterable[Workload], gate: bool) -> ClusterView:
    """What a controller reads: every queue, every unfinished workload, boost annotations as set."""
    return ClusterView(
        cluster_queues={name: cluster_queue_view(model, name) for name in model.queues},
        workloads=tuple(
            WorkloadView(
                namespace="",
                name=w.job,
                cluster_queue=w.cluster_queue,
                gpus=w.gpus,
                priority=w.priority,
                admitted=w.admitted,
                admitted_at=w.admitted_at,
                created_at=w.created_at,
                priority_boost=w.boost,
            )
            for w in workloads
            if not w.finished
        ),
        priority_boost_enabled=gate,
    )


def predictor_score(
    predictions: Mapping[str, Sequence[Sequence[str]]], victims: Mapping[str, Sequence[Observation]]
) -> dict[str, Any]:
    """The victim predictor against the victims of a play (per event, pooled): precision is the
    share of predicted workloads preempted in that event, recall the share of preempted ones
    predicted."""
    predicted = chosen = hit = 0
    for name, per_event in predictions.items():
        for guess, obs in zip(per_event, victims[name], strict=True):
            actual = {v for v, _reason in obs.preempted}
            predicted += len(guess)
            chosen += len(actual)
            hit += len(set(guess) & actual)
    return {
        "predicted": predicted,
        "preempted": chosen,
        "hit": hit,
        "precision": hit / predicted if predicted else None,
        "recall": hit / chosen if chosen else None,
    }


def agreement_report(
    plays: Mapping[str, tuple[Sequence[Observation], Sequence[Observation]]],
    scenarios: Sequence[Scenario],
) -> dict[str, Any]:
    """How far two plays agree, per event and per scenario: ``plays`` maps a scenario's name to
    (the model's observations, Kueue's). An event agrees when both the quota holders and the
    preemptions (victims and reasons) are the same; a scenario when all its events do."""
    by_name = {s.name: s for s in scenarios}
    rows = []
    events = agreed = 0
    for name, (model, kueue) in plays.items():
        scenario = by_name[name]
        diffs = []
        for i, (m, k) in enumerate(zip(model, kueue, strict=True)):
            events += 1
            if m == k:
                agreed += 1
            else:
                diffs.append(
                    {"event": i, "what": repr(scenario.events[i]), "model": m.as_json(), "kueue": k.as_json()}
                )
        rows.append(
            {
                "scenario": name,
                "exercises": scenario.exercises,
                "events": [repr(e) for e in scenario.events],
                "disagreements": diffs,
                "model": [m.as_json() for m in model],
                "kueue": [k.as_json() for k in kueue],
            }
        )
    whole = sum(1 for r in rows if not r["disagreements"])
    return {
        "events": events,
        "events_agreeing": agreed,
        "event_agreement": agreed / events if events else None,
        "scenarios": len(rows),
        "scenarios_agreeing": whole,
        "scenario_agreement": whole / len(rows) if rows else None,
        "per_scenario": rows,
    }


def kueue_plays(
    report: Mapping[str, Any], scenarios: Sequence[Scenario]
) -> dict[str, tuple[Observation, ...]]:
    """Kueue's observations from an ``agreement_report``, per scenario, for the scenarios whose
    events are still those it was recorded with (a changed scenario must be played again)."""
    current = {s.name: [repr(e) for e in s.events] for s in scenarios}
    return {
        row["scenario"]: tuple(Observation.from_json(o) for o in row["kueue"])
        for row in report["per_scenario"]
        if current.get(row["scenario"]) == row["events"]
    }
