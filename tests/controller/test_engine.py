"""The engine: watch events in, forecasts/decisions/statuses out, restarts, garbage, policies."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

from advisor.controller.engine import Engine
from advisor.controller.render import iso
from advisor.controller.store import decode_history
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ClusterView, Decision, JobView, Mode
from policies.rules.guard import boost_to_drop
from tests.controller.fakes import FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"


engine = make_engine


def _policy(name: str, spec: dict[str, Any], *, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": name, "generation": generation},
        "spec": spec,
    }


def curve_loss(step: int) -> float:
    return 0.3 + 2.0 * (step + 10) ** -0.5


def feed(e: Engine, steps: range, *, t0: float = T0, dt: float = 5.0, name: str = "llm") -> float:
    now = t0
    for i, step in enumerate(steps):
        now = t0 + i * dt
        stamp = iso(now)
        e.enqueue(
            "job", "MODIFIED", trainjob(name=name, step=step, loss=f"{curve_loss(step):.5f}", updated=stamp)
        )
        e.step(now)
    return now


def test_progress_updates_become_a_forecast_status() -> None:
    api = FakeApi()
    e = engine(api)
    now = feed(e, range(10, 400, 10))
    status = api.forecasts[KEY]["status"]
    assert status["progress"]["step"] == 390 and status["progress"]["totalSteps"] == 1000
    assert status["summary"]["progress"] == "39%"
    fc = status["forecast"]
    assert fc is not None and fc["finalLoss"]["p10"] <= fc["finalLoss"]["mean"] <= fc["finalLoss"]["p90"]
    assert abs(fc["finalLoss"]["mean"] - curve_loss(1000)) < 0.15
    assert api.forecasts[KEY]["owner"] == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "uid": "uid-1",
    }
    assert (
        e.metrics.registry.get_sample_value(
            "trainjob_advisor_job_step", {"namespace": "team-a", "kind": "TrainJob", "job": "llm"}
        )
        == 390
    )
    assert e.metrics.registry.get_sample_value("trainjob_advisor_update_to_status_seconds_count") > 0
    assert now > T0


def test_history_survives_a_restart_from_the_persisted_status() -> None:
    api = FakeApi()
    e1 = engine(api)
    feed(e1, range(10, 200, 10))
    before = decode_history(api.forecasts[KEY]["status"]["history"])
    e2 = engine(api)
    assert e2.load_saved(api.list_forecasts()) == 1
    feed(e2, range(200, 260, 10), t0=T0 + 1000)
    after = decode_history(api.forecasts[KEY]["status"]["history"])
    record = e2.core.record(KEY)
    assert record is not None and len(record.history) == 19 + 6
    for column in ("steps", "times", "losses"):  # same older points, then the new ones
        assert after[column][:19] == before[column] and len(after[column]) == 25
    assert "history" not in json.loads(api.forecasts[KEY]["status"]["coreState"])


def test_the_status_says_which_generation_it_was_written_for_also_after_a_restart() -> None:
    api = FakeApi()
    e1 = engine(api)
    feed(e1, range(10, 100, 10))
    status = api.forecasts[KEY]["status"]
    assert status["observedGeneration"] == 1
    assert {c["type"]: c["observedGeneration"] for c in status["conditions"]} == {
        "Forecasting": 1,
        "Actionable": 1,
    }
    api.edit_forecast_spec("team-a", "llm")  # someone edits the spec while the controller is down
    e2 = engine(api)
    e2.load_saved(api.list_forecasts())
    writes = len(api.log)
    feed(e2, range(100, 110, 10), t0=T0 + 1000)
    assert api.forecasts[KEY]["status"]["observedGeneration"] == 2
    assert all(c["observedGeneration"] == 2 for c in api.forecasts[KEY]["status"]["conditions"])
    assert api.log[writes:] == [("write_forecast", "team-a", "llm")]  # generation known: one write


def test_garbage_progress_never_crashes_nor_corrupts_history() -> None:
    api = FakeApi()
    e = engine(api)
    feed(e, range(10, 100, 10))
    garbage = [
        trainjob(step=100, loss="NaN", updated=iso(T0 + 100)),
        trainjob(
            metrics=[{"name": "current_step", "value": "banana"}, {"name": "loss", "value": "x"}],
            updated=iso(T0 + 101),
        ),
        trainjob(metrics=[{"name": f"m{i}", "value": str(i)} for i in range(10_000)], updated=iso(T0 + 102)),
        trainjob(step=50, loss="0.9", updated=iso(T0 + 103)),  # backwards: a restart
        {"metadata": {"name": "llm", "namespace": "team-a"}, "status": "not-an-object"},
        {"kind": "Weird"},
        trainjob(metrics="lots", updated=iso(T0 + 104)),  # type: ignore[arg-type]
    ]
    for i, body in enumerate(garbage):
        e.enqueue("job", "MODIFIED", body)
        e.step(T0 + 100 + i)
    status = api.forecasts[KEY]["status"]
    json.dumps(status, allow_nan=False)
    hist = decode_history(status["history"])
    record = e.core.record(KEY)
    assert record is not None
    steps = [p.step for p in record.history._points]
    assert steps[:9] == list(range(10, 100, 10)) and 50 in steps
    assert len(record.history.curve().segments) == 2
    assert hist["steps"] == steps  # persisted as kept
    warnings = status["forecast"]["warnings"] if status["forecast"] else []
    assert isinstance(warnings, list)


def test_apply_decision_releases_quota_once_with_kueue_workload() -> None:
    api = FakeApi()
    api.workloads["team-a/trainjob-llm-abcde"] = workload()
    released: list[float] = []

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        already = any(a.kind is ActionKind.RELEASE_QUOTA for a in job.actions)
        assert cluster.workloads and cluster.workloads[0].job == KEY
        if job.step >= 100 and not already:
            released.append(now)
            return Decision(
                job=job.key,
                policy="p",
                mode=Mode.APPLY,
                actions=(Action(ActionKind.RELEASE_QUOTA, "plateau", "flat"),),
                advice="release",
            )
        return Decision(job=job.key, policy="p", mode=Mode.APPLY, advice="learning")

    e = engine(api, decide)
    e.enqueue("workload", "ADDED", api.workloads["team-a/trainjob-llm-abcde"])
    feed(e, range(10, 200, 10))
    assert api.mutations() == [("set_active", "team-a", "trainjob-llm-abcde", False)]
    assert len(released) == 1
    status = api.forecasts[KEY]["status"]
    assert [(a["kind"], a["outcome"]) for a in status["actions"]] == [("release-quota", "done")]
    assert status["pendingActions"] == "{}"
    assert (
        e.metrics.registry.get_sample_value(
            "trainjob_advisor_actions_total",
            {"policy": "p", "kind": "release-quota", "mode": "Apply", "outcome": "done"},
        )
        == 1
    )
    # the write counter counts the Workload's patch and the Event, not only the status writes (a
    # standby's 0 must mean it wrote nothing)
    writes = e.metrics.registry.get_sample_value
    assert writes("trainjob_advisor_api_writes_total", {"kind": "release-quota"}) == 1
    assert (writes("trainjob_advisor_api_writes_total", {"kind": "event"}) or 0) >= 1
    from advisor import __version__

    assert writes("trainjob_advisor_build_info", {"version": __version__}) == 1
    assert writes("trainjob_advisor_leader") == 1
    e.set_gate(lambda: False)
    assert writes("trainjob_advisor_leader") == 0


def test_checkpoint_ack_closes_the_request_and_the_guard_drops_its_boost() -> None:
    api = FakeApi()
    api.workloads["team-a/trainjob-llm-abcde"] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-0"]
    plan = [
        Action(ActionKind.BOOST_PRIORITY, "guard", "likely victim"),
        Action(ActionKind.CHECKPOINT, "guard", "now"),
    ]

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        # the policy's side: the guard's own drop decision, fed what the controller observed
        w = next(x for x in cluster.workloads if x.job == job.key)
        drop = boost_to_drop(job, w, now, drop_after=3600.0) if w.priority_boost else None
        if drop is not None:
            acts: tuple[Action, ...] = (Action(ActionKind.DROP_BOOST, "guard", drop),)
        else:
            acts = (plan.pop(0),) if plan else ()
        return Decision(job=job.key, policy="p", mode=Mode.APPLY, actions=acts)

    e = engine(api, decide)
    e.enqueue("workload", "ADDED", api.workloads["team-a/trainjob-llm-abcde"])
    feed(e, range(10, 40, 10))
    e.enqueue("workload", "MODIFIED", api.workloads["team-a/trainjob-llm-abcde"])  # the boost's watch event
    e.step(T0 + 60)
    rid = api.pod_annotations["team-a/llm-0"]["advisor.trainjob-advisor.io/checkpoint-request"]
    e.enqueue(
        "job",
        "MODIFIED",
        trainjob(
            step=50,
            loss="0.7",
            updated=iso(T0 + 100),
            extra_metrics=[
                {"name": "last_checkpoint_step", "value": "50"},
                {"name": "last_checkpoint_request", "value": rid},
            ],
        ),
    )
    e.step(T0 + 100)
    reasons = [ev["reason"] for ev in api.events if ev["reason"] != "LearningState"]  # checked on their own
    assert reasons == [
        "PriorityBoosted",
        "CheckpointRequested",
        "CheckpointAcknowledged",
        "PriorityBoostDropped",
    ]
    assert "kueue.x-k8s.io/priority-boost" not in api.workloads["team-a/trainjob-llm-abcde"]["metadata"].get(
        "annotations", {}
    )
    status = api.forecasts[KEY]["status"]
    assert status["checkpoint"]["lastStep"] == 50 and status["pendingActions"] == "{}"


def test_invalid_policy_gets_an_invalid_condition_and_holds_its_jobs_without_rules() -> None:
    from policies.spec_rules import Rules

    api = FakeApi()
    e = engine(api)
    e.enqueue("policy", "ADDED", _policy("bad", {"mode": "Sometimes"}, generation=3))
    e.step(T0)
    # seen first invalid (a restart): it holds its jobs, in Recommend with no rule, so that no
    # broader policy takes them over
    held = e.policies["bad"]
    assert "bad" in e.policy_errors and held.mode.value == "Recommend" and held.spec.rules == Rules()
    # the write of its verdict (the figures' carries the JobsSelected condition with them)
    (call,) = [
        c for c in api.log if c[0] == "policy_status" and "conditions" in c[2] and "shards" not in c[2]
    ]
    cond = call[2]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Valid", "False", "Invalid")
    assert "spec.mode" in cond["message"] and call[2]["observedGeneration"] == 3
    assert "its jobs are held" in cond["message"]


def test_deleted_job_is_forgotten_and_queue_metrics_exported() -> None:
    api = FakeApi()
    e = engine(api, queue_metrics_interval_s=0)
    e.enqueue("clusterqueue", "ADDED", {"metadata": {"name": "gpu-cq"}, "spec": {}})
    e.enqueue(
        "localqueue",
        "ADDED",
        {"metadata": {"name": "team-a-lq", "namespace": "team-a"}, "spec": {"clusterQueue": "gpu-cq"}},
    )
    feed(e, range(10, 60, 10))
    e.step(T0 + 100)
    reg = e.metrics.registry
    total = sum(
        reg.get_sample_value("trainjob_advisor_queue_jobs", {"queue": "gpu-cq", "state": s}) or 0
        for s in ("learning", "plateaued", "overfitting", "hung", "diverging", "near-completion", "unknown")
    )
    assert total == 1
    assert reg.get_sample_value("trainjob_advisor_queue_gpus", {"queue": "gpu-cq"}) == 16
    e.enqueue("job", "DELETED", trainjob())
    e.step(T0 + 200)
    assert e.jobs == {} and e.core.record(KEY) is None
    assert reg.get_sample_value("trainjob_advisor_job_step", {"namespace": "team-a", "job": "llm"}) is None
    assert not math.isnan(reg.get_sample_value("trainjob_advisor_watched_jobs") or 0)


def test_a_change_of_learning_state_posts_one_event_naming_the_best_eval_step() -> None:
    from advisor.controller.actuator import Actuator
    from advisor.core import AdvisorCore
    from advisor.forecast.state import learning_state
    from advisor.model import JobView
    from advisor.series import Direction
    from tests.controller.fakes import FakeApi

    api = FakeApi()
    act = Actuator(api, AdvisorCore(), lambda key: None)
    train = None
    es = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0]
    ev = [0.9, 0.7, 0.6, 0.65, 0.72, 0.8]

    class Series:
        steps, values, direction = es, ev, Direction.LOWER

    st = learning_state(train, {"eval_loss": Series()}, total_steps=2000)
    job = JobView(namespace="ns", name="a", learning_state=st)
    act.learning_state_changed(job, {"metadata": {"uid": "u"}}, "learning")
    (event,) = api.events
    assert event["reason"] == "LearningState" and "step 300" in event["message"]
    assert event["warning"] == (st.label in ("overfitting", "diverging", "hung"))


def test_a_job_deleted_while_its_checkpoint_awaits_the_ack_ends_the_sequence_with_an_audit_line(
    caplog: Any,
) -> None:
    import logging

    api = FakeApi()
    api.workloads["team-a/trainjob-llm-abcde"] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-0"]
    plan = [Action(ActionKind.CHECKPOINT, "plateau", "before release", {"before": "release-quota"})]

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        acts = (plan.pop(0),) if plan else ()  # the release would follow the ack
        return Decision(job=job.key, policy="p", mode=Mode.APPLY, actions=acts)

    e = engine(api, decide)
    e.enqueue("workload", "ADDED", api.workloads["team-a/trainjob-llm-abcde"])
    feed(e, range(10, 30, 10))
    rid = api.pod_annotations["team-a/llm-0"]["advisor.trainjob-advisor.io/checkpoint-request"]
    assert list(e.actuator.pending_for(KEY)) == [rid]
    with caplog.at_level(logging.INFO, logger="trainjob_advisor.audit"):
        e.enqueue("job", "DELETED", trainjob())
        e.step(T0 + 100)
    dropped = [r.audit for r in caplog.records if getattr(r, "audit", {}).get("outcome") == "dropped"]
    assert [(d["job"], d["kind"], d["requestId"]) for d in dropped] == [(KEY, "checkpoint", rid)]
    assert "awaiting-ack" in dropped[0]["detail"]
    assert e.actuator.pending_for(KEY) == {} and e.jobs == {}


def test_reports_with_nothing_usable_in_them_say_why_in_the_status() -> None:
    """A loss that is not a number and a negative step: not "no progress report seen yet"."""
    api = FakeApi()
    e = engine(api)
    bad = [{"name": "loss", "value": "abc"}, {"name": "current_step", "value": "-5"}]
    e.enqueue("job", "ADDED", trainjob(metrics=bad, updated=iso(T0)))
    e.step(T0)
    conds = {c["type"]: c for c in api.forecasts[KEY]["status"]["conditions"]}
    forecasting = conds["Forecasting"]
    assert forecasting["status"] == "False" and forecasting["reason"] == "UnreadableProgress"
    assert "loss: 'abc' is not a number" in forecasting["message"] and "below 0" in forecasting["message"]
    # a usable report afterwards clears it
    e.enqueue("job", "MODIFIED", trainjob(step=10, loss="1.5", updated=iso(T0 + 5)))
    e.step(T0 + 5)
    conds = {c["type"]: c for c in api.forecasts[KEY]["status"]["conditions"]}
    assert conds["Forecasting"]["reason"] != "UnreadableProgress"


def _burst(e: Engine, upto: int, *, t0: float = T0) -> float:
    """Reports to ``upto`` of 2000 steps all arriving before one step of the engine (a watch that
    caught up late): the training loss falls, the eval loss is past its best at step 600."""
    now = t0
    for i, step in enumerate(range(20, upto + 1, 20)):
        now = t0 + i * 2.0
        ev = 0.5 + 0.25 * ((step - 600) / 600) ** 2 * (1.0 if step < 600 else 0.6)
        evals = [{"name": "eval_loss", "value": f"{ev:.6f}"}] if step % 100 == 0 else []
        body = trainjob(
            step=step, total=2000, loss=f"{0.3 + 2.0 * math.exp(-step / 400):.6f}", updated=iso(now)
        )
        body["status"]["trainerStatus"]["metrics"] += evals
        e.enqueue("job", "MODIFIED", body)
    e.step(now)
    return now


def test_a_run_first_judged_past_its_best_is_announced_once_and_not_again_after_a_restart() -> None:
    api = FakeApi()
    e1 = engine(api)
    now = _burst(e1, 1480)
    label = api.forecasts[KEY]["status"]["state"]
    assert label in ("overfitting", "plateaued")
    (event,) = [ev for ev in api.events if ev["reason"] == "LearningState"]
    assert event["message"].startswith(f"unknown -> {label}")
    # a restarted controller adopts the saved status: the state it showed was announced already
    e2 = engine(api)
    assert e2.load_saved(api.list_forecasts()) == 1
    body = trainjob(step=1500, total=2000, loss="0.33", updated=iso(now + 10))
    e2.enqueue("job", "MODIFIED", body)
    e2.step(now + 10)
    assert len([ev for ev in api.events if ev["reason"] == "LearningState"]) == 1


def test_the_log_says_when_a_job_is_seen_changes_advice_and_goes_but_not_at_every_evaluation(
    caplog: Any,
) -> None:
    """An operator tailing the controller sees one line per change of a job's state or advice, not
    one per progress report."""
    import logging

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        advice = "release quota: plateaued" if job.step >= 300 else ""
        return Decision(job=job.key, policy="p", mode=Mode.RECOMMEND, advice=advice)

    api = FakeApi()
    e = engine(api, decide)
    with caplog.at_level(logging.INFO, logger="advisor.controller"):
        feed(e, range(10, 400, 10))
        e.enqueue("job", "DELETED", trainjob(step=390))
        e.step(T0 + 1000)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(KEY)]
    assert lines[0] == f"{KEY}: TrainJob seen, advising it"
    advice = [m for m in lines if "release quota" in m]
    # said as the ADVICE column says it: a recommendation, which grep can tell from a release
    assert len(advice) == 1 and advice[0].endswith("plateaued (recommended) (policy p, Recommend)")
    assert lines[-1] == f"{KEY}: deleted, its history and actions forgotten"
    assert len(lines) <= 6  # seen, a state or two, the advice, deleted: not one per report (39)


def test_a_reporter_alternating_kinds_of_garbage_gets_one_log_line_per_interval(caplog: Any) -> None:
    """Each report's warnings differ from the last (two kinds of garbage in turn): the status
    says each at once, the log once per ``WARNING_LOG_INTERVAL_S`` with a count of those it did
    not write (one line per report, 296 in five minutes, flooded a platform trial's log)."""
    import logging

    from advisor.controller.trackedjob import WARNING_LOG_INTERVAL_S

    api = FakeApi()
    e = engine(api)
    now = feed(e, range(10, 100, 10))
    garbage = ({"name": "loss", "value": "tensor(1.2)"}, {"name": "loss", "value": "[0.5]"})
    with caplog.at_level(logging.WARNING, logger="advisor.controller"):
        for i in range(60):  # one report every 5 s: 300 s, within one interval
            now += 5.0
            e.enqueue(
                "job", "MODIFIED", trainjob(step=100 + i, extra_metrics=[garbage[i % 2]], updated=iso(now))
            )
            e.step(now)
        lines = [r.getMessage() for r in caplog.records if "progress report" in r.getMessage()]
        assert len(lines) == 1 and "tensor(1.2)" in lines[0]
        now += WARNING_LOG_INTERVAL_S
        e.enqueue("job", "MODIFIED", trainjob(step=200, extra_metrics=[garbage[0]], updated=iso(now)))
        e.step(now)
    lines = [r.getMessage() for r in caplog.records if "progress report" in r.getMessage()]
    assert len(lines) == 2 and "(59 more report(s) with new warnings since the last line)" in lines[1]


def test_a_report_dated_in_the_future_does_not_freeze_the_progress_of_the_reports_after_it() -> None:
    """One report's clock an hour ahead (a pod's clock stepped): it is taken at the observation
    time with a warning, and the reports after it, at the right time, still advance the step (the
    future time stood as the newest report and every later one was stale: the stall rule then
    released a job that trained on)."""
    api = FakeApi()
    e = engine(api)
    now = feed(e, range(10, 200, 10), dt=5.0)
    skewed = now + 5.0
    e.enqueue("job", "MODIFIED", trainjob(step=200, loss="0.5", updated=iso(skewed + 3600.0)))
    e.step(skewed)
    warned = api.forecasts[KEY]["status"]["progress"]["warnings"]
    assert any("ahead of the observation time (clock skew?); using the observation time" in w for w in warned)
    feed(e, range(210, 300, 10), t0=skewed + 5.0, dt=5.0)
    status = api.forecasts[KEY]["status"]
    assert status["progress"]["step"] == 290
    record = e.core.record(KEY)
    assert record is not None and record.history.last is not None and record.history.last.step == 290


def test_a_restored_history_with_a_point_dated_in_the_future_takes_new_reports() -> None:
    """An older version kept such a point in ``status.history``: after a restart the reports at the
    right time are still appended."""
    from advisor.model import ProgressSample

    core = AdvisorCore()
    for i, step in enumerate(range(10, 110, 10)):
        core.observe(KEY, ProgressSample(step=step, loss=1.0 / step, time=T0 + i), now=T0 + i)
    data = core.dump(KEY)
    data["history"]["times"][-1] = T0 + 10 * 86400.0  # the persisted columns of the history
    restored = AdvisorCore()
    restored.restore(KEY, data)
    assert restored.observe(KEY, ProgressSample(step=110, loss=0.009, time=T0 + 20), now=T0 + 20)
    record = restored.record(KEY)
    assert record is not None and record.history.last is not None and record.history.last.step == 110


def test_a_valid_policy_whose_rule_judges_an_undirected_metric_says_so_in_its_condition() -> None:
    """``policy validate`` warns of it; whoever applies the policy with kubectl reads it in the
    Valid condition's message."""
    api = FakeApi()
    e = engine(api)
    spec = {"mode": "Recommend", "rules": {"plateau": {"metric": "eval_reward"}}}
    e.enqueue(
        "policy",
        "ADDED",
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "rewarded", "generation": 1},
            "spec": spec,
        },
    )
    e.step(T0)
    assert "rewarded" in e.policies
    # the write of its verdict (the figures' carries the JobsSelected condition with them)
    (call,) = [
        c for c in api.log if c[0] == "policy_status" and "conditions" in c[2] and "shards" not in c[2]
    ]
    cond = call[2]["conditions"][0]
    assert (cond["type"], cond["status"]) == ("Valid", "True")
    assert cond["message"].startswith("the policy is valid; warning: ")
    assert "eval_reward is never judged" in cond["message"]


def test_a_valid_policy_whose_metric_directions_turn_a_loss_says_so_in_its_condition() -> None:
    """As ``policy validate`` warns: an entry for the training loss is ignored, and one that turns
    eval_loss against its name is applied; the Valid condition's message says both."""
    api = FakeApi()
    e = engine(api)
    spec = {"mode": "Recommend", "metricDirections": {"loss": "higher", "eval_loss": "higher"}}
    e.enqueue(
        "policy",
        "ADDED",
        {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "turned", "generation": 1},
            "spec": spec,
        },
    )
    e.step(T0)
    # the write of its verdict (the figures' carries the JobsSelected condition with them)
    (call,) = [
        c for c in api.log if c[0] == "policy_status" and "conditions" in c[2] and "shards" not in c[2]
    ]
    message = call[2]["conditions"][0]["message"]
    assert "; warning: spec.metricDirections.loss: the training loss is no eval metric: ignored" in message
    assert (
        "; warning: spec.metricDirections.eval_loss: higher contradicts the direction its name says"
        in message
    )


def _pytorchjob(step: int, now: float) -> dict[str, Any]:
    from advisor.protocol import PYTORCHJOB_PROGRESS_ANNOTATION

    progress = {"version": 1, "step": step, "totalSteps": 50000, "loss": 0.53, "time": iso(now)}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "llm",
            "namespace": "team-a",
            "uid": "uid-pt",
            "annotations": {PYTORCHJOB_PROGRESS_ANNOTATION: json.dumps(progress)},
        },
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}},
    }


def test_a_pytorchjob_named_as_a_trainjob_is_not_merged_into_its_history() -> None:
    """A platform trial: a TrainJob and a PyTorchJob named alike in one namespace (a migration from
    Training Operator v1) were one tracked job: one history interleaving both runs' reports, read as
    a dozen restarts, and the deletion of either forgot both."""
    api = FakeApi()
    e = engine(api)
    now = T0
    for i, step in enumerate(range(10, 200, 10)):
        now = T0 + i * 5.0
        e.enqueue("job", "MODIFIED", trainjob(step=step, loss=f"{curve_loss(step):.5f}", updated=iso(now)))
        e.enqueue("job", "MODIFIED", _pytorchjob(2000 + 100 * i, now))
        e.step(now)
    rec = e.core.record(KEY)
    assert rec is not None and max(rec.history.curve().steps) == 190  # the TrainJob's reports alone
    refused = [ev for ev in api.events if ev["reason"] == "NotAdvised"]
    assert len(refused) == 1 and refused[0]["involved"]["kind"] == "PyTorchJob"
    assert "a TrainJob named team-a/llm is advised already" in refused[0]["message"]
    e.enqueue("job", "DELETED", _pytorchjob(4000, now))
    e.step(now + 5)
    assert KEY in e.jobs and e.core.record(KEY) is not None  # deleting the other kind forgets nothing


def test_a_jobs_series_say_its_kind_and_go_with_it() -> None:
    """A TrainJob and a PyTorchJob may share a name in one namespace: the per-job series carry the
    job's ``kind`` beside ``namespace`` and ``job``, so that a series says which job it is, and the
    deletion of the job removes its own."""
    e = engine(FakeApi())
    now = T0
    for i in range(12):
        now = T0 + i * 5.0
        e.enqueue("job", "MODIFIED", _pytorchjob(2000 + 100 * i, now))
        e.step(now)
    get = e.metrics.registry.get_sample_value
    labels = {"namespace": "team-a", "kind": "PyTorchJob", "job": "llm"}
    assert get("trainjob_advisor_job_step", labels) == 3100
    assert get("trainjob_advisor_job_step", {**labels, "kind": "TrainJob"}) is None
    e.enqueue("job", "DELETED", _pytorchjob(3100, now))
    e.step(now + 5)
    assert get("trainjob_advisor_job_step", labels) is None


def test_an_unchanged_job_is_written_at_least_every_heartbeat() -> None:
    """So that a reader can tell a status no controller keeps any more (``status`` reads it stale):
    a silent job's status changed once (it read hung) and was never written again."""
    from advisor.controller.summary import HEARTBEAT_S

    api = FakeApi()
    e = engine(api)
    now = feed(e, range(10, 200, 10))
    written = ("write_forecast", "json_patch_forecast")
    count, times = 0, []
    for t in range(60, int(4 * HEARTBEAT_S), 60):
        e.step(now + t)
        n = sum(1 for c in api.log if c[0] in written)
        if n > count:
            times.append(t)
        count = n
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) >= 3 and max(gaps) <= HEARTBEAT_S + 60, times


def test_a_hung_job_is_not_rewritten_for_its_reasons_elapsed_time_alone() -> None:
    """A Recommend stall rule's reason carries the elapsed time ("no step advance ... for 33m"):
    every hung job's status was written once a minute for that alone (48 writes a second at 650
    idle jobs, a platform trial). A change in elapsed time alone waits for the heartbeat."""
    from advisor.controller.summary import HEARTBEAT_S

    api = FakeApi()
    e = engine(api)
    spec = {"mode": "Recommend", "safety": {"minRuntime": "0s"}, "rules": {"stall": {"for": "2m"}}}
    e.enqueue("policy", "ADDED", _policy("watch", spec))
    now = feed(e, range(10, 200, 10))
    written = ("write_forecast", "json_patch_forecast")
    e.step(now + 30 * 60)  # hung long since: recommended, written
    assert "stall" in json.dumps(e.board.shown(KEY)["recommendation"])
    before = sum(1 for c in api.log if c[0] in written)
    # looks every 30 s, as the controller's default evaluation interval: "33m30s", "34m", ...
    said = set()
    for t in range(30 * 60 + 30, 30 * 60 + int(HEARTBEAT_S) - 30, 30):
        e.step(now + t)
        said.add(" ".join(e.board.shown(KEY)["recommendation"]["reasons"]))
    # the statuses it would have written said each elapsed time, in minutes and in seconds
    assert len(said) >= 18 and any("m30s (step" in r for r in said), said
    assert sum(1 for c in api.log if c[0] in written) == before


def test_a_gauge_says_how_long_the_api_server_has_been_unreachable(monkeypatch: Any) -> None:
    """The write-error counter counts every retry (980 in a 63 s outage, a platform trial), which no
    alert can be set on; the gauge reads the seconds since the writes last reached the server, and
    0 once they do again."""
    api = FakeApi()
    e = engine(api)
    gauge = "trainjob_advisor_api_unreachable_seconds"
    feed(e, range(10, 60, 10))
    assert e.metrics.registry.get_sample_value(gauge) == 0.0
    api.fail_writes = 1000
    feed(e, range(60, 90, 10), t0=T0 + 100)
    assert e.writer.unreachable_since is not None
    since = e.writer.unreachable_since
    import advisor.controller.engine as engine_module

    monkeypatch.setattr(engine_module.time, "time", lambda: since + 42.0)  # 42 s into the outage
    assert e.metrics.registry.get_sample_value(gauge) == 42.0
    monkeypatch.undo()
    api.fail_writes = 0
    feed(e, range(90, 120, 10), t0=T0 + 200)
    assert e.writer.unreachable_since is None and e.metrics.registry.get_sample_value(gauge) == 0.0


def test_the_watched_jobs_and_queue_series_show_the_jobs_as_soon_as_they_arrive() -> None:
    """A new leader's first step runs before kopf's watches deliver its jobs: the jobs gauge and
    the queue series read them at the step that brings them, not a queue-metrics interval later
    (a trial read ``trainjob_advisor_watched_jobs`` 0 for 16 s after a handover)."""
    api = FakeApi()
    e = engine(api)  # queue_metrics_interval_s 15 s
    e.enqueue("clusterqueue", "ADDED", {"metadata": {"name": "gpu-cq"}, "spec": {}})
    e.enqueue(
        "localqueue",
        "ADDED",
        {"metadata": {"name": "team-a-lq", "namespace": "team-a"}, "spec": {"clusterQueue": "gpu-cq"}},
    )
    e.step(T0)  # the listing is in, no job event yet
    reg = e.metrics.registry
    assert reg.get_sample_value("trainjob_advisor_watched_jobs") == 0
    e.enqueue("job", "ADDED", trainjob(step=10, loss="2.0", updated=iso(T0 + 1)))
    e.step(T0 + 1)
    assert reg.get_sample_value("trainjob_advisor_watched_jobs") == 1
    assert reg.get_sample_value("trainjob_advisor_queue_gpus", {"queue": "gpu-cq"}) == 16
    e.enqueue("job", "DELETED", trainjob())
    e.step(T0 + 2)
    assert reg.get_sample_value("trainjob_advisor_watched_jobs") == 0
    assert reg.get_sample_value("trainjob_advisor_queue_gpus", {"queue": "gpu-cq"}) is None
