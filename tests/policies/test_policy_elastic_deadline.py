"""Throughput model, elastic growth/shrink, and deadlines (with deadline-driven scale-up)."""

from __future__ import annotations

import dataclasses

import pytest
from policy_builders import HOUR, T0, cluster, forecast, job, policy, record

from advisor.model import ActionKind, ClusterQueueView, LifecycleSignals, WorkloadView
from policies import decide, fit_throughput
from policies.rules.deadline import parse_deadline

ELASTIC = {"elastic": {"minNodes": 1, "maxNodes": 8, "maxStep": 2, "minMarginalEfficiency": 0.6}}


def amdahl(n: int, single: float = 1.0, serial: float = 0.1) -> float:
    return n * single / (1 + serial * (n - 1))


def test_throughput_fit_recovers_amdahl_and_falls_back_to_the_prior() -> None:
    m = fit_throughput([(n, amdahl(n, 2.0, 0.2)) for n in (1, 2, 4)], prior_serial=0.5)
    assert m is not None and m.single == pytest.approx(2.0) and m.serial == pytest.approx(0.2)
    one = fit_throughput([(2, 3.0), (2, 3.2)], prior_serial=0.1)
    assert one is not None and one.serial == 0.1 and one.steps_per_second(2) == pytest.approx(3.1)
    assert fit_throughput([(0, 1.0), (2, float("nan")), (3, -1.0)], prior_serial=0.1) is None
    linear = fit_throughput([(1, 1.0), (2, 2.2)], prior_serial=0.1)  # super-linear noise: no negative serial
    assert linear is not None and linear.serial == 0.0
    assert m.marginal_efficiency(2) > m.marginal_efficiency(6)


def _elastic_job(**kw: object):
    return job(
        **{
            "nodes": 2,
            "gpus": 16,
            "min_nodes": 1,
            "max_nodes": 8,
            "throughput": ((1, amdahl(1)), (2, amdahl(2))),
            **kw,
        }
    )


def test_grows_into_idle_quota_while_it_pays() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)
    d = decide(_elastic_job(), cluster([q]), policy(ELASTIC), now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.SCALE]
    assert d.actions[0].params["nodes"] == 4 and d.advice == "scale-up:4"  # maxStep 2
    assert "marginal efficiency" in d.actions[0].reason


def test_a_pytorchjob_kueue_admits_is_not_resized() -> None:
    """Kueue stops and requeues a running job whose pod counts no longer match its admitted
    Workload and has no elastic Workloads for PyTorchJob: the rule says so instead of growing
    it. A TrainJob with one is resized through a requeue of its own (deactivate, patch,
    reactivate); a job whose view says nothing of a Workload (a pasted job state) is read as
    Kueue's."""
    q = ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)
    queued = dataclasses.replace(
        _elastic_job(), kind="PyTorchJob", signals=LifecycleSignals(has_workload=True)
    )
    d = decide(queued, cluster([q]), policy(ELASTIC), now=T0)
    assert d.actions == () and any("not resizing a PyTorchJob Kueue admits" in r for r in d.reasons)
    unknown = dataclasses.replace(_elastic_job(), kind="PyTorchJob")
    assert [a.kind for a in decide(unknown, cluster([q]), policy(ELASTIC), now=T0).actions] == [
        ActionKind.SCALE
    ]
    trainjob = dataclasses.replace(_elastic_job(), signals=LifecycleSignals(has_workload=True))
    assert [a.kind for a in decide(trainjob, cluster([q]), policy(ELASTIC), now=T0).actions] == [
        ActionKind.SCALE
    ]


def test_a_job_whose_gpus_no_queue_charges_is_not_grown_into_or_shrunk_for_that_queue() -> None:
    """A platform trial: a PyTorchJob with a queue-name label but no Workload (Kueue's
    ``kubeflow.org/pytorchjob`` integration is off by default) was grown from 3 to 5 nodes into
    its ClusterQueue's 48 "free" GPUs, which Kueue then gave to another team's Workload: 104 GPUs
    of running work on a 64-GPU queue. Its GPUs are not charged to the queue, so the queue's
    unused quota is not its to grow into, and a shrink frees nothing a pending Workload there
    could be admitted with. A job in no queue at all says so, not "0 GPUs free"."""
    q = ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)
    beside = dataclasses.replace(
        _elastic_job(), kind="PyTorchJob", signals=LifecycleSignals(has_workload=False)
    )
    d = decide(beside, cluster([q]), policy(ELASTIC), now=T0)
    assert d.actions == ()
    assert any("no Kueue Workload: its GPUs are not charged to cq's quota" in r for r in d.reasons)
    nowhere = dataclasses.replace(beside, cluster_queue=None, queue_name=None)
    d = decide(nowhere, cluster([q]), policy(ELASTIC), now=T0)
    assert d.actions == () and any("in no Kueue ClusterQueue" in r for r in d.reasons)
    assert not any("GPUs free" in r for r in d.reasons)
    # the queue full and a higher-priority Workload pending: no shrink of a job it does not count
    full = ClusterQueueView(name="cq", nominal_gpus=32, usage_gpus=32)
    starving = WorkloadView(
        namespace="x", name="big", cluster_queue="cq", gpus=12, priority=5, admitted=False
    )
    big = job(nodes=4, gpus=32, min_nodes=1, max_nodes=8, throughput=((4, 3.0),))
    counted = decide(big, cluster([full], [starving]), policy(ELASTIC), now=T0)
    assert [a.kind for a in counted.actions] == [ActionKind.SCALE]
    uncounted = dataclasses.replace(big, signals=LifecycleSignals(has_workload=False))
    d = decide(uncounted, cluster([full], [starving]), policy(ELASTIC), now=T0)
    assert d.actions == ()
    assert any("not shrinking for x/big (12 GPUs pending): no Kueue Workload" in r for r in d.reasons)


def test_no_growth_that_spares_less_time_than_its_save() -> None:
    """A resize restarts the workers from a save: growth a minute from the end spares seconds and
    costs the save; with hours left, it grows."""
    q = ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)
    ending = dataclasses.replace(_elastic_job(), forecast=forecast(eta=60.0))
    d = decide(ending, cluster([q]), policy(ELASTIC), now=T0)
    assert d.actions == () and any("no more than the save a resize starts with" in r for r in d.reasons)
    longer = dataclasses.replace(_elastic_job(), forecast=forecast(eta=4 * HOUR))
    assert [a.kind for a in decide(longer, cluster([q]), policy(ELASTIC), now=T0).actions] == [
        ActionKind.SCALE
    ]


def test_does_not_grow_without_quota_with_poor_scaling_or_when_others_wait() -> None:
    tight = cluster([ClusterQueueView(name="cq", nominal_gpus=20, usage_gpus=16)])
    d = decide(_elastic_job(), tight, policy(ELASTIC), now=T0)
    assert d.actions == () and any("no idle quota" in r for r in d.reasons)
    poor = job(nodes=2, gpus=16, max_nodes=8, throughput=((1, 1.0), (2, 1.1)))
    d = decide(
        poor, cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)]), policy(ELASTIC), now=T0
    )
    assert d.actions == () and any("would add only" in r for r in d.reasons)
    waiting = WorkloadView(namespace="x", name="w", cluster_queue="cq", gpus=8, priority=0, admitted=False)
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)], [waiting])
    assert decide(_elastic_job(), c, policy(ELASTIC), now=T0).actions == ()


def test_does_not_grow_a_plateaued_run_and_shrinks_it_to_the_minimum() -> None:
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)])
    assert decide(_elastic_job(forecast=forecast(plateau=0.5)), c, policy(ELASTIC), now=T0).actions == ()
    # a run that scales poorly (2 nodes only 1.3x one): the minimum costs little time
    poor = _elastic_job(forecast=forecast(plateau=0.9), throughput=((1, 1.0), (2, 1.3)))
    d = decide(poor, c, policy(ELASTIC), now=T0)
    assert [(a.kind, a.params["nodes"]) for a in d.actions] == [
        (ActionKind.SCALE, 1)
    ] and d.advice == "scale-down:1"


def _big_plateaued(nodes: int = 8, **kw: object):
    # observed at one size only: the model uses the policy's prior serial fraction (0.1)
    return job(
        nodes=nodes,
        gpus=8 * nodes,
        min_nodes=1,
        max_nodes=16,
        forecast=forecast(plateau=0.95, eta=10 * HOUR),
        **{"throughput": ((nodes, amdahl(nodes)),), **kw},
    )


def test_a_plateau_shrink_stops_where_the_run_would_slow_more_than_allowed() -> None:
    # 8 -> 1 node would make the run's remaining time 4.7x longer (10h -> 47h) for 41% fewer
    # GPU-hours: the shrink stops at 5 nodes, 1.32x slower (4 would be 1.53x), the cost in the reason
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=64)])
    d = decide(_big_plateaued(), c, policy(ELASTIC), now=T0)
    assert [(a.kind, a.params["nodes"]) for a in d.actions] == [(ActionKind.SCALE, 5)]
    reason = d.actions[0].reason
    assert "1.32x slower" in reason and "remaining 10.0h -> 13.2h" in reason and "limit 1.5x" in reason
    assert "18% fewer GPU-hours" in reason  # a share, said as one (it read "0.18 fewer GPU-hours")
    # a looser limit lets it go further, 1 keeps it where it is (and says why)
    loose = policy({"elastic": {**ELASTIC["elastic"], "maxShrinkSlowdown": 5}})
    assert [a.params["nodes"] for a in decide(_big_plateaued(), c, loose, now=T0).actions] == [1]
    off = policy({"elastic": {**ELASTIC["elastic"], "maxShrinkSlowdown": 1}})
    d = decide(_big_plateaued(), c, off, now=T0)
    assert d.actions == () and any("not shrinking" in r and "1.08x slower" in r for r in d.reasons)


def test_no_shrink_whose_saving_over_the_time_left_is_no_more_than_its_save() -> None:
    """A resize restarts the workers from a save: a run a minute from its end was shrunk for
    "remaining 0.0h -> 0.0h" (a platform trial). 8 -> 5 nodes spares 18% of what is left: 11 s of a
    minute, less than the 30 s save; of ten hours, it shrinks."""
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=64)])
    ending = dataclasses.replace(_big_plateaued(), forecast=forecast(plateau=0.95, eta=60.0))
    d = decide(ending, c, policy(ELASTIC), now=T0)
    assert d.actions == ()
    assert any("no more than the save a resize starts with (30s)" in r for r in d.reasons), d.reasons
    assert [a.params["nodes"] for a in decide(_big_plateaued(), c, policy(ELASTIC), now=T0).actions] == [5]


def test_plateau_shrinks_do_not_compound_look_after_look() -> None:
    # the run already shrank 8 -> 5 (its throughput at both sizes observed): measured from its
    # fastest size, one node fewer would be 1.53x slower, so it stays
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=40)])
    shrunk = _big_plateaued(nodes=5, throughput=((8, amdahl(8)), (5, amdahl(5))))
    d = decide(shrunk, c, policy(ELASTIC), now=T0)
    assert d.actions == () and any("1.53x slower than its fastest size" in r for r in d.reasons)


def test_no_shrink_for_a_workload_the_shrink_cannot_admit() -> None:
    # a 64-GPU workload waits on a 64-GPU queue where this 8-node job runs: shrinking it to its
    # 1-node minimum frees 56 GPUs, not enough, and the job would only run slower while it waits
    q = ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=64)
    big = WorkloadView(namespace="x", name="big", cluster_queue="cq", gpus=64, priority=5, admitted=False)
    j = job(nodes=8, gpus=64, min_nodes=1, max_nodes=16, throughput=((8, 3.0),))
    d = decide(j, cluster([q], [big]), policy(ELASTIC), now=T0)
    assert d.actions == ()
    assert any("not shrinking for x/big: it needs 64 GPUs, 0 are free" in r for r in d.reasons)
    # one that fits once it gives what it can is let in, by just enough nodes
    mid = WorkloadView(namespace="x", name="mid", cluster_queue="cq", gpus=40, priority=5, admitted=False)
    d = decide(j, cluster([q], [big, mid]), policy(ELASTIC), now=T0)
    assert [(a.kind, a.params["nodes"]) for a in d.actions] == [(ActionKind.SCALE, 3)]
    assert "x/mid" in d.actions[0].reason


def test_shrinks_just_enough_when_a_higher_priority_workload_starves() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=32, usage_gpus=32)
    starving = WorkloadView(
        namespace="x", name="big", cluster_queue="cq", gpus=12, priority=5, admitted=False
    )
    j = job(nodes=4, gpus=32, min_nodes=1, max_nodes=8, throughput=((4, 3.0),))
    d = decide(j, cluster([q], [starving]), policy(ELASTIC), now=T0)
    assert [(a.kind, a.params["nodes"]) for a in d.actions] == [
        (ActionKind.SCALE, 2)
    ]  # 12 GPUs = 2 nodes of 8
    assert "x/big" in d.actions[0].reason


def test_bounds_are_the_tighter_of_the_job_and_the_policy() -> None:
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=256, usage_gpus=16)])
    p = policy({"elastic": {"maxNodes": 3, "maxStep": 8}})
    d = decide(_elastic_job(), c, p, now=T0)
    assert [a.params["nodes"] for a in d.actions] == [3]
    fixed = job(nodes=2, gpus=16, throughput=((2, 2.0),))  # no max on the job: not elastic
    assert decide(fixed, c, p, now=T0).actions == ()


def test_scaling_respects_cooldown_and_recommend_mode() -> None:
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)])
    recent = _elastic_job(actions=(record(ActionKind.SCALE, T0 - 600, rule="elastic", outcome="done"),))
    d = decide(recent, c, policy(ELASTIC, safety={"cooldown": "30m"}), now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND] and "cooldown" in d.actions[0].reason
    d = decide(_elastic_job(), c, policy(ELASTIC, mode="Recommend"), now=T0)
    assert [(a.kind, a.params["would"], a.params["nodes"]) for a in d.actions] == [
        (ActionKind.RECOMMEND, "scale", 4)
    ]


def test_advice_says_a_resize_was_done_for_the_cooldown_after_it() -> None:
    """A platform trial: right after a shrink the table read ``continue``, and the resize was only
    in the job's actions and Events. ADVICE reads ``scaled:N`` for the policy's cooldown after a
    done resize (not a failed one), then ``continue`` again; any other rule's advice wins."""
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=40)])
    shrunk = _big_plateaued(
        nodes=5,
        throughput=((8, amdahl(8)), (5, amdahl(5))),
        actions=(record(ActionKind.SCALE, T0 - 600, rule="elastic", outcome="done"),),
    )
    p = policy(ELASTIC, safety={"cooldown": "30m"})
    d = decide(shrunk, c, p, now=T0)
    assert d.actions == () and d.advice == "scaled:5"
    assert decide(shrunk, c, p, now=T0 + 1200 + 1).advice == "continue"
    failed = dataclasses.replace(
        shrunk, actions=(record(ActionKind.SCALE, T0 - 600, rule="elastic", outcome="failed"),)
    )
    assert decide(failed, c, p, now=T0).advice == "continue"
    # a rule with something to say wins: the plateau rule's window, open on the plateaued run
    both = policy(
        {**ELASTIC, "plateau": {"probability": 0.8, "for": "1h", "action": "Release"}},
        safety={"cooldown": "30m"},
    )
    assert decide(shrunk, c, both, now=T0).advice == "plateau?"


def test_advice_says_a_pytorchjob_kueue_admits_keeps_its_size() -> None:
    q = ClusterQueueView(name="cq", nominal_gpus=64, usage_gpus=16)
    queued = dataclasses.replace(
        _elastic_job(), kind="PyTorchJob", signals=LifecycleSignals(has_workload=True)
    )
    assert decide(queued, cluster([q]), policy(ELASTIC), now=T0).advice == "fixed-size (Kueue)"
    fixed = dataclasses.replace(_elastic_job(), max_nodes=None)
    assert decide(fixed, cluster([q]), policy(ELASTIC), now=T0).advice == "continue"


# --- deadlines -----------------------------------------------------------------------------------


def test_deadline_parsing() -> None:
    assert (
        parse_deadline("2026-12-01T00:00:00Z") == parse_deadline("2026-12-01T00:00:00+00:00") == 1796083200.0
    )
    assert parse_deadline("1796083200") == 1796083200.0
    assert parse_deadline("2026-12-01T00:00:00") == 1796083200.0  # naive means UTC
    assert parse_deadline("next tuesday") is None


def test_a_late_eta_p90_warns_with_the_numbers() -> None:
    p = policy({"deadline": {"margin": "30m"}})
    # ETA p90 = 1.25 h; deadline in 1 h
    j = job(annotations={"advisor.trainjob-advisor.io/deadline": str(T0 + HOUR)}, forecast=forecast(eta=HOUR))
    d = decide(j, cluster(), p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND] and d.advice == "deadline-miss"
    assert "ETA p90 1h15m ends 15m after the deadline" in d.actions[0].reason
    on_time = job(
        annotations={"advisor.trainjob-advisor.io/deadline": str(T0 + 3 * HOUR)}, forecast=forecast(eta=HOUR)
    )
    assert decide(on_time, cluster(), p, now=T0).actions == ()
    no_eta = job(
        annotations={"advisor.trainjob-advisor.io/deadline": str(T0 + 60)}, forecast=forecast(eta=None)
    )
    assert decide(no_eta, cluster(), p, now=T0).actions == ()
    garbage = job(annotations={"advisor.trainjob-advisor.io/deadline": "soon"})
    assert any("not a time" in r for r in decide(garbage, cluster(), p, now=T0).reasons)


def test_max_runtime_is_the_deadline_for_jobs_without_an_annotation() -> None:
    p = policy({"deadline": {"maxRuntime": "2h30m"}})
    assert (
        decide(job(forecast=forecast(eta=HOUR)), cluster(), p, now=T0).advice == "deadline-miss"
    )  # started 2h ago
    assert decide(job(forecast=forecast(eta=0.3 * HOUR)), cluster(), p, now=T0).actions == ()


def test_deadline_scale_up_picks_the_smallest_count_that_makes_it() -> None:
    p = policy({"deadline": {"scaleUp": True}, "elastic": {"enabled": False, "maxNodes": 8}})
    c = cluster([ClusterQueueView(name="cq", nominal_gpus=128, usage_gpus=16)])
    # needs (1.25 h)/(1 h) = 1.25x over 2 nodes; Amdahl(0.1): 3 nodes → 1.31x
    j = _elastic_job(
        annotations={"advisor.trainjob-advisor.io/deadline": str(T0 + HOUR)}, forecast=forecast(eta=HOUR)
    )
    d = decide(j, c, p, now=T0)
    assert [(a.kind, a.params["nodes"]) for a in d.actions] == [
        (ActionKind.SCALE, 3)
    ] and d.advice == "scale-up:3"
    hopeless = _elastic_job(
        annotations={"advisor.trainjob-advisor.io/deadline": str(T0 + 600)}, forecast=forecast(eta=HOUR)
    )
    d = decide(hopeless, c, p, now=T0)
    assert [a.kind for a in d.actions] == [ActionKind.RECOMMEND] and "scaling cannot fix it" in d.actions[
        0
    ].reason
