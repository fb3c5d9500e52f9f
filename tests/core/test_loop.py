"""The core loop: observation bookkeeping, forecast rate limit, policy selection, action log,
checkpoint acknowledgement and timeout, and persistence across a restart."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from advisor.core import AdvisorCore
from advisor.model import (
    ActionKind,
    ActionRecord,
    ClusterView,
    Curve,
    Decision,
    Forecast,
    Interval,
    JobView,
    Phase,
    ProgressSample,
)

JOB = JobView(namespace="ml", name="run-1", gpus=8)
CLUSTER = ClusterView()


@dataclass
class FakePolicy:
    name: str


class Recorder:
    """A forecaster + decider pair that records what the loop hands them."""

    def __init__(self) -> None:
        self.curves: list[Curve] = []
        self.views: list[JobView] = []

    def forecaster(self, curve: Curve, total: int | None) -> Forecast:
        self.curves.append(curve)
        last = curve.values[-1]
        return Forecast(
            final_loss=Interval(last, last * 0.9, last * 1.1),
            plateau_probability=0.2,
            divergence_probability=0.0,
            total_steps=total,
            n_points=len(curve),
        )

    def selector(self, policies: Sequence[Any], job: JobView) -> Any:
        return policies[0] if policies else None

    def decider(self, job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        self.views.append(job)
        held = job.rule_state.get("plateau", now)
        return Decision(job=job.key, policy=policy.name, state={"plateau": held}, advice="continue")


def make_core(rec: Recorder, **kw: Any) -> AdvisorCore:
    return AdvisorCore(
        [FakePolicy("p")], forecaster=rec.forecaster, selector=rec.selector, decider=rec.decider, **kw
    )


def feed(core: AdvisorCore, steps: range, *, t0: float = 0.0, dt: float = 10.0, nodes: int = 1) -> None:
    for i in steps:
        core.observe(
            JOB.key,
            ProgressSample(step=i, loss=10.0 / (i + 1), time=t0 + i * dt, total_steps=1000),
            now=t0 + i * dt,
            nodes=nodes,
        )


class TestObserve:
    def test_new_samples_fill_the_view(self) -> None:
        rec = Recorder()
        core = make_core(rec)
        feed(core, range(1, 11))
        view = core.view(JOB)
        assert view.step == 10 and view.total_steps == 1000
        assert view.last_step_change == 100.0 and view.gpus == 8

    @pytest.mark.parametrize("skew", [600.0, -600.0])
    def test_a_skewed_pod_clock_moves_no_clock_of_the_advisor(self, skew: float) -> None:
        """Reports dated ten minutes ahead or behind: arrival (``safety.maxEvidenceAge``) is the
        adapter's clock, the step-change time stays between two arrivals (the stall rule), and the
        throughput, from the reporter's own differences, is unchanged."""
        core = make_core(Recorder())
        for i, at in enumerate((100.0, 110.0, 120.0, 130.0), start=1):
            core.observe(JOB.key, ProgressSample(step=10 * i, loss=1.0 / i, time=at + skew), now=at)
        view = core.view(JOB)
        assert view.progress_seen_at == 130.0 and view.report_interval_s == 10.0
        # ahead: dated at arrival; behind: no earlier than the previous report's arrival
        assert view.last_step_change == (130.0 if skew > 0 else 120.0)
        first = make_core(Recorder())
        first.observe(JOB.key, ProgressSample(step=1, loss=1.0, time=100.0 + skew), now=100.0)
        assert first.view(JOB).last_step_change == min(100.0, 100.0 + skew)  # taken at its word
        assert view.last_sample_time == view.last_step_change
        assert dict(view.throughput)[1] == pytest.approx(1.0)
        # a duplicate carries no news: the arrival time stays
        core.observe(JOB.key, ProgressSample(step=40, loss=0.25, time=130.0 + skew), now=500.0)
        assert core.view(JOB).progress_seen_at == 130.0
        # and a restart keeps it: the restored controller has no fresher evidence than before
        fresh = make_core(Recorder())
        fresh.restore(JOB.key, json.loads(json.dumps(core.dump(JOB.key))))
        assert fresh.view(JOB).progress_seen_at == 130.0

    def test_duplicate_sample_reports_nothing_new(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 3))
        assert core.observe(JOB.key, ProgressSample(step=2, loss=1.0, time=50.0), now=50.0) is False

    def test_throughput_is_tracked_per_node_count(self) -> None:
        core = make_core(Recorder())
        feed(core, range(0, 20), dt=2.0, nodes=2)
        view = core.view(JOB)
        assert view.throughput == ((2, pytest.approx(0.5)),)

    def test_progress_without_loss_still_counts_as_step_advance(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 3))
        assert core.observe(JOB.key, ProgressSample(step=9, time=500.0), now=500.0)
        assert core.view(JOB).last_step_change == 500.0

    def test_a_step_reported_with_an_unreadable_loss_moves_the_progress_and_says_why(self) -> None:
        """A loss written as a tensor's repr cannot be read; the step it came with still counts,
        and the view says what could not be read."""
        core = make_core(Recorder())
        feed(core, range(1, 3))
        unread = ("loss: 'tensor(1.20)' is not a number; dropped",)
        odd = ProgressSample(step=700, time=600.0, warnings=unread)
        assert core.observe(JOB.key, odd, now=600.0)
        view = core.view(JOB)
        assert view.step == 700 and view.last_step_change == 600.0
        assert view.progress_warnings == odd.warnings
        assert core.observe(JOB.key, ProgressSample(step=800, time=700.0, loss=1.1), now=700.0)
        assert core.view(JOB).step == 800 and core.view(JOB).progress_warnings == ()

    def test_reports_with_no_readable_step_are_remembered_and_not_read_as_a_hang(self) -> None:
        """A reporter writing garbage ("-310" as its step): each report is dropped, but it came;
        the view says when, and the run's state is not ``hung`` for the steps it could not read.
        A readable report clears it."""
        core = make_core(Recorder())
        feed(core, range(1, 40))
        later = 390.0 + 6 * 3600
        garbage = ProgressSample(step=-1, time=later, warnings=("current_step: '-310' is below 0; dropped",))
        core.observe(JOB.key, garbage, now=later)
        view = core.view(JOB, now=later + 2)
        assert view.unreadable_report_at == later
        assert view.learning_state is not None and view.learning_state.label != "hung"
        core.observe(JOB.key, ProgressSample(step=41, loss=0.2, time=later + 5), now=later + 5)
        assert core.view(JOB).unreadable_report_at is None

    def test_a_released_job_is_not_judged_hung_for_the_reports_it_no_longer_sends(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 40))
        running = core.view(JOB, now=200.0)
        assert running.learning_state is not None
        later = 200.0 + 6 * 3600
        released = dataclasses.replace(JOB, active=False)
        view = core.view(released, now=later)  # the look that sees it released stamps its phase
        assert view.phase is not Phase.RUNNING and view.learning_state.label != "hung"  # type: ignore[union-attr]

    def test_a_run_judged_hung_while_it_ran_keeps_that_verdict_once_released(self) -> None:
        """A platform trial: a run released as hung read ``learning`` (hung 0) in its status
        afterwards, the verdict of its last forecast, not of the look that released it."""
        core = make_core(Recorder())
        feed(core, range(1, 40))
        assert core.view(JOB, now=200.0).learning_state is not None
        later = 200.0 + 6 * 3600
        assert core.view(JOB, judged_at=later).learning_state.label == "hung"  # type: ignore[union-attr]
        released = dataclasses.replace(JOB, active=False)
        view = core.view(released, now=later + 60)
        assert view.phase is not Phase.RUNNING and view.learning_state.label == "hung"  # type: ignore[union-attr]


class TestForecastRateLimit:
    def test_reforecast_only_with_new_data_and_after_the_interval(self) -> None:
        rec = Recorder()
        core = make_core(rec, forecast_interval_s=60.0)
        feed(core, range(1, 11))
        core.evaluate(JOB, CLUSTER, now=100.0)
        core.evaluate(JOB, CLUSTER, now=110.0)  # no new data
        feed(core, range(11, 13))
        core.evaluate(JOB, CLUSTER, now=120.0)  # new data, but within the interval
        assert len(rec.curves) == 1
        core.evaluate(JOB, CLUSTER, now=161.0)
        assert len(rec.curves) == 2 and rec.curves[-1].steps[-1] == 12.0

    def test_a_forecast_on_a_handful_of_points_is_replaced_by_the_next_data(self) -> None:
        rec = Recorder()
        core = make_core(rec, forecast_interval_s=600.0)
        feed(core, range(1, 2))
        core.evaluate(JOB, CLUSTER, now=100.0)  # one point: the step-1 loss is all it can say
        feed(core, range(2, 4))
        core.evaluate(JOB, CLUSTER, now=110.0)
        assert len(rec.curves) == 2 and rec.curves[-1].steps[-1] == 3.0
        core.evaluate(JOB, CLUSTER, now=120.0)  # no new data: nothing to replace it with
        assert len(rec.curves) == 2

    def test_a_restart_drops_the_forecast_of_the_abandoned_attempt(self) -> None:
        rec = Recorder()
        core = make_core(rec, forecast_interval_s=600.0)
        feed(core, range(1, 11))
        core.evaluate(JOB, CLUSTER, now=100.0)
        assert core.view(JOB).forecast is not None
        # resumed from the step-5 checkpoint: what was forecast from steps 6-10 no longer holds
        feed(core, range(5, 6), t0=200.0)
        assert core.view(JOB).forecast is None
        core.evaluate(JOB, CLUSTER, now=260.0)  # well within the interval: re-forecast at once
        assert len(rec.curves) == 2 and core.view(JOB).forecast is not None

    def test_a_step_going_back_report_after_report_is_said_and_counts_no_restart(self) -> None:
        """The reports' step goes back 20 at every report: the forecast that read the first steps
        back as restarts goes when the run turns out malformed, and the next one says the step
        keeps going backwards; the job's history counts no restart."""
        from advisor.model import MALFORMED_BACKS

        rec = Recorder()
        core = AdvisorCore([FakePolicy("p")], selector=rec.selector, decider=rec.decider)
        for i in range(1, 41):
            core.observe(
                JOB.key, ProgressSample(step=20 * i, loss=3.0 / i, time=3.0 * i), now=3.0 * i, nodes=1
            )
        t, step = 120.0, 800
        for k in range(1, 18):
            t, step = t + 3.0, step - 20
            core.observe(JOB.key, ProgressSample(step=step, loss=0.1, time=t), now=t, nodes=1)
            if k == MALFORMED_BACKS:
                assert core.view(JOB).forecast is None  # read as restarts until this report
            core.evaluate(JOB, CLUSTER, now=t)
        fc = core.view(JOB).forecast
        assert fc is not None and any("keeps going backwards" in w for w in fc.warnings), fc
        assert not any("stood still" in w for w in fc.warnings)
        record = core.record(JOB.key)
        assert record is not None and record.history.restarts == 0
        assert core.view(JOB).step == step  # the latest report's step, as reported
        assert core.view(JOB).backwards_reports >= MALFORMED_BACKS  # what the stall rule reads
        # one report moving forward again: no longer a run of steps back
        core.observe(JOB.key, ProgressSample(step=step + 20, loss=0.1, time=t + 3.0), now=t + 3.0, nodes=1)
        assert core.view(JOB).backwards_reports == 0


class TestDecide:
    def test_rule_state_round_trips_through_the_decision(self) -> None:
        rec = Recorder()
        core = make_core(rec)
        feed(core, range(1, 5))
        core.evaluate(JOB, CLUSTER, now=100.0)
        core.evaluate(JOB, CLUSTER, now=200.0)
        assert rec.views[-1].rule_state == {"plateau": 100.0}

    def test_windows_opened_under_one_policy_open_again_when_another_takes_the_job_over(self) -> None:
        """A platform trial deleted a Recommend policy and created an Apply one: in its first second
        the new policy released four jobs, citing "for 5m44s" of windows the old one had opened.
        A new governing policy opens its own windows; the same policy (a mode switch) keeps them,
        also through a restart of the controller."""
        rec = Recorder()
        core = make_core(rec)
        feed(core, range(1, 5))
        core.evaluate(JOB, CLUSTER, now=100.0)
        core.evaluate(JOB, CLUSTER, now=200.0)
        assert rec.views[-1].rule_state == {"plateau": 100.0}
        core.set_policies([FakePolicy("p")])  # the same policy, say Apply now
        core.evaluate(JOB, CLUSTER, now=300.0)
        assert rec.views[-1].rule_state == {"plateau": 100.0}
        core.set_policies([FakePolicy("q")])  # another policy governs the job
        core.evaluate(JOB, CLUSTER, now=400.0)
        assert rec.views[-1].rule_state == {}
        restored = make_core(rec)
        restored.restore(JOB.key, json.loads(json.dumps(core.dump(JOB.key))))
        restored.set_policies([FakePolicy("q")])
        restored.evaluate(JOB, CLUSTER, now=500.0)
        assert rec.views[-1].rule_state == {"plateau": 400.0}
        restored.set_policies([FakePolicy("p")])
        restored.evaluate(JOB, CLUSTER, now=600.0)
        assert rec.views[-1].rule_state == {}

    def test_without_policies_the_decision_says_so(self) -> None:
        rec = Recorder()
        core = AdvisorCore([], forecaster=rec.forecaster)
        feed(core, range(1, 5))
        d = core.evaluate(JOB, CLUSTER, now=100.0)
        assert d.actions == () and "no AdvisorPolicy" in d.reasons[0] and d.advice == "learning"

    def test_without_policies_the_forecasts_hint_is_said_as_no_policys(self) -> None:
        """``plateau?`` is a policy's open window: an admin who had just deleted the policy read a
        release still coming on a job nothing governed any more (a platform trial)."""
        import dataclasses

        rec = Recorder()

        def flat(curve: Curve, total: int | None) -> Forecast:
            return dataclasses.replace(rec.forecaster(curve, total), plateau_probability=0.9)

        core = AdvisorCore([], forecaster=flat)
        feed(core, range(1, 5))
        assert core.evaluate(JOB, CLUSTER, now=100.0).advice == "plateau? (no policy)"

    def test_without_policies_a_hung_job_reads_hung_not_learning(self) -> None:
        """A job no policy governs, silent for an hour, read ADVICE ``learning`` beside STATE
        ``hung``, in ``explain`` and the status's recommendation too (a platform trial)."""
        core = AdvisorCore([])
        feed(core, range(1, 20))
        assert core.evaluate(JOB, CLUSTER, now=200.0).advice == "learning"
        d = core.evaluate(JOB, CLUSTER, now=200.0 + 3600.0)
        assert core.view(JOB, now=200.0 + 3600.0).learning_state.label == "hung"
        assert d.advice == "hung? (no policy)" and d.actions == ()

    def test_without_policies_a_first_forecast_of_two_points_is_no_plateau_hint(self) -> None:
        """Two points give the uninformed P(plateau) of 0.5: a brand-new or just-restored job read
        ``plateau?`` at its first look, and ``learning`` 30 s later."""
        core = AdvisorCore([])
        feed(core, range(1, 3))
        d = core.evaluate(JOB, CLUSTER, now=100.0)
        assert core.view(JOB).forecast.plateau_probability == 0.5
        assert d.advice == "learning"


class TestActions:
    def test_a_request_id_is_recorded_once(self) -> None:
        core = make_core(Recorder())
        a = ActionRecord(kind=ActionKind.RELEASE_QUOTA, time=5.0, request_id="r1")
        assert core.record_action(JOB.key, a) is True
        assert core.record_action(JOB.key, a) is False
        assert len(core.view(JOB).actions) == 1

    def test_checkpoint_request_is_acknowledged_through_the_progress_stream(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 5))
        core.record_action(JOB.key, ActionRecord(kind=ActionKind.CHECKPOINT, time=50.0, request_id="ck-1"))
        assert core.view(JOB).checkpoint.pending_request == "ck-1"
        core.observe(
            JOB.key,
            ProgressSample(
                step=5, loss=1.0, time=80.0, last_checkpoint_step=5, last_checkpoint_request="ck-1"
            ),
            now=80.0,
        )
        view = core.view(JOB)
        assert view.checkpoint.pending_request is None and view.checkpoint.last_step == 5
        assert view.checkpoint.cost_seconds == 30.0
        assert view.actions[-1].outcome == "acknowledged"

    def test_a_save_acknowledged_while_no_report_was_seen_is_dated_when_the_job_made_it(self) -> None:
        """A controller down between its request and the ack (or reports missed): the first report
        it sees after carries the ack of a save made long before, at step 5 of a job now at step
        50. Dated at that report, the checkpoint read as fresh (a release trusted it and gave up
        the 45 steps since) and the outage was counted as the save's cost."""
        core = make_core(Recorder())
        for step in range(1, 5):  # a report every step, 10 s apart
            core.observe(JOB.key, ProgressSample(step=step, loss=1.0, time=10.0 * step), now=10.0 * step)
        core.record_action(JOB.key, ActionRecord(kind=ActionKind.CHECKPOINT, time=45.0, request_id="ck-1"))
        after = ProgressSample(
            step=50, loss=1.0, time=500.0, last_checkpoint_step=5, last_checkpoint_request="ck-1"
        )
        core.observe(JOB.key, after, now=500.0)
        ck = core.view(JOB).checkpoint
        assert ck.last_step == 5 and ck.pending_request is None
        assert ck.last_time == pytest.approx(60.0)  # when step 6 came, the report after the save
        assert ck.cost_seconds == pytest.approx(15.0)

    def test_unanswered_checkpoint_request_times_out_once(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 3))
        core.record_action(
            JOB.key, ActionRecord(kind=ActionKind.CHECKPOINT, time=50.0, request_id="ck-2", timeout_s=100.0)
        )
        core.evaluate(JOB, CLUSTER, now=120.0)
        assert core.view(JOB).checkpoint.pending_request == "ck-2"
        core.evaluate(JOB, CLUSTER, now=151.0)
        view = core.view(JOB)
        assert view.checkpoint.pending_request is None and view.actions[-1].outcome == "timed-out"

    def test_a_request_a_newer_one_replaced_as_pending_times_out_at_its_own_timeout(self) -> None:
        """An unanswered request is never left ``requested`` for good (the actuator's pending
        entry waits for its outcome) because a second request took its place as the pending one."""
        core = make_core(Recorder())
        feed(core, range(1, 3))
        for rid, t in (("ck-a", 50.0), ("ck-b", 90.0)):
            core.record_action(
                JOB.key, ActionRecord(kind=ActionKind.CHECKPOINT, time=t, request_id=rid, timeout_s=60.0)
            )
        core.evaluate(JOB, CLUSTER, now=109.0)
        assert [a.outcome for a in core.view(JOB).actions] == ["requested", "requested"]
        core.evaluate(JOB, CLUSTER, now=111.0)
        view = core.view(JOB)
        assert [a.outcome for a in view.actions] == ["timed-out", "requested"]
        assert view.checkpoint.pending_request == "ck-b"
        core.evaluate(JOB, CLUSTER, now=151.0)
        assert [a.outcome for a in core.view(JOB).actions] == ["timed-out", "timed-out"]

    def test_a_failed_checkpoint_request_stays_failed_and_is_no_longer_pending(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 3))
        core.record_action(
            JOB.key, ActionRecord(kind=ActionKind.CHECKPOINT, time=50.0, request_id="ck-3", timeout_s=100.0)
        )
        assert core.update_action(JOB.key, "ck-3", "failed", detail="no running pods")
        assert core.view(JOB).checkpoint.pending_request is None
        core.evaluate(JOB, CLUSTER, now=151.0)  # past its timeout: not relabelled a timeout
        assert core.view(JOB).actions[-1].outcome == "failed"


class TestPersistence:
    def test_dump_and_restore_resume_where_it_left_off(self) -> None:
        rec = Recorder()
        core = make_core(rec)
        feed(core, range(1, 40), nodes=4)
        core.record_action(JOB.key, ActionRecord(kind=ActionKind.CHECKPOINT, time=300.0, request_id="ck"))
        core.evaluate(JOB, CLUSTER, now=400.0)
        data = json.loads(json.dumps(core.dump(JOB.key), allow_nan=False))

        fresh = make_core(Recorder())
        fresh.restore(JOB.key, data)
        before, after = core.view(JOB), fresh.view(JOB)
        assert after.step == before.step and after.forecast == before.forecast
        assert after.checkpoint == before.checkpoint and after.actions == before.actions
        assert after.throughput == before.throughput and after.rule_state == before.rule_state
        # the restored record keeps accepting samples without treating them as a restart
        fresh.observe(JOB.key, ProgressSample(step=40, loss=0.2, time=400.0), now=400.0)
        assert fresh.view(JOB).step == 40 and fresh.record(JOB.key).history.restarts == 0  # type: ignore[union-attr]

    def test_restore_tolerates_garbage(self) -> None:
        core = make_core(Recorder())
        rec = core.restore(
            JOB.key,
            {
                "history": "nope",
                "actions": [1, {"kind": "x"}],
                "forecast": [],
                "throughput": [{"nodes": "a"}],
                "ruleState": {"a": "b"},
            },
        )
        assert len(rec.history) == 0 and rec.actions == [] and rec.forecast is None


def _core_seeing_clusters() -> tuple[AdvisorCore, list[ClusterView]]:
    """A core with one policy whose decider keeps every cluster view it is handed."""
    seen: list[ClusterView] = []

    def decider(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        seen.append(cluster)
        return Decision(job=job.key, policy=policy.name)

    rec = Recorder()
    core = AdvisorCore([FakePolicy("p")], forecaster=rec.forecaster, selector=rec.selector, decider=decider)
    return core, seen


class TestClusterWideBookkeeping:
    def test_policy_caps_see_capped_actions_on_every_job_within_the_hour(self) -> None:
        core, seen = _core_seeing_clusters()
        for i, kind in enumerate([ActionKind.RELEASE_QUOTA, ActionKind.CHECKPOINT, ActionKind.SCALE]):
            core.record_action(
                f"ml/j{i}", ActionRecord(kind=kind, time=100.0 * i, request_id=f"r{i}", policy="p")
            )
        core.evaluate(JOB, CLUSTER, now=300.0)
        assert seen[-1].policy_action_times == {"p": (0.0, 200.0)}
        core.evaluate(JOB, CLUSTER, now=3700.0)
        assert seen[-1].policy_action_times == {"p": (200.0,)}

    def test_jobs_decided_against_one_snapshot_share_one_capped_view(self) -> None:
        """The per-snapshot index of ``policies.index`` is keyed by identity: a fresh copy of the
        snapshot for every job would rebuild it at every decision."""
        core, seen = _core_seeing_clusters()
        core.record_action(
            "ml/a", ActionRecord(kind=ActionKind.RELEASE_QUOTA, time=0.0, request_id="r0", policy="p")
        )
        other = dataclasses.replace(JOB, name="other")
        core.evaluate(JOB, CLUSTER, now=10.0)
        core.evaluate(other, CLUSTER, now=20.0)
        assert seen[0] is seen[1] and seen[0].policy_action_times == {"p": (0.0,)}
        # a new action, or a new snapshot, gives a new view with what changed
        core.record_action(
            "ml/b", ActionRecord(kind=ActionKind.SCALE, time=30.0, request_id="r1", policy="p")
        )
        core.evaluate(JOB, CLUSTER, now=40.0)
        assert seen[2] is not seen[1] and seen[2].policy_action_times == {"p": (0.0, 30.0)}
        fresh = dataclasses.replace(CLUSTER, priority_boost_enabled=True)
        core.evaluate(JOB, fresh, now=50.0)
        assert seen[3] is not seen[2] and seen[3].priority_boost_enabled
        assert seen[3].policy_action_times == {"p": (0.0, 30.0)}

    def test_view_carries_the_loss_at_a_checkpoint_behind_the_latest_report(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 21))  # loss 10 / (step + 1)
        assert core.view(JOB).checkpoint_loss is None  # no checkpoint known
        core.observe(
            JOB.key,
            ProgressSample(step=21, loss=10.0 / 22, time=210.0, last_checkpoint_step=8),
            now=210.0,
        )
        # the median of the last three reports at or before step 8 (steps 6, 7, 8)
        assert core.view(JOB).checkpoint_loss == pytest.approx(10.0 / 8)
        core.observe(
            JOB.key,
            ProgressSample(step=22, loss=10.0 / 23, time=220.0, last_checkpoint_step=22),
            now=220.0,
        )
        assert core.view(JOB).checkpoint_loss is None  # the checkpoint is the latest report

    def test_view_carries_the_raw_last_loss_even_when_not_finite(self) -> None:
        core = make_core(Recorder())
        feed(core, range(1, 3))
        core.observe(JOB.key, ProgressSample(step=3, loss=float("nan"), time=40.0), now=40.0)
        last = core.view(JOB).last_loss
        assert last is not None and last != last
