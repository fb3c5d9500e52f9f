"""The controller's adapter around the core loop: watch events in, statuses and actions out.

Single-threaded by design. kopf's handlers (on the event loop) only ``enqueue`` the objects they
see; one worker calls ``step(now)`` repeatedly, which applies the queued events, then gives the
full evaluation (forecast, policies, actions through the ``Actuator``) to the jobs that need one
(a forecast due, the decision's ``recheck_at`` reached, ``evaluate_interval_s`` passed, a policy
or Workload changed, an action in flight), oldest first and within ``evaluate_budget_s``, and
renders every other job that got new progress from its latest sample and last decision (the
cheap path), so every update shows at once while forecasts stay rate-limited. The rendered
``TrainJobForecast`` statuses go to the coalescing ``StatusWriter``, which writes them through
``ForecastStore`` (small JSON patches). Keeping every piece of state on one thread means no locks
around the core, and a handler never waits on a forecast.

What each watch event does (a job seen, deleted or listed at start-up, a Workload, the routing of
every other kind) is ``advisor.controller.jobintake``; what the engine keeps of each job, and the
rule of when a job is due its full evaluation, are ``advisor.controller.trackedjob``; the
AdvisorPolicy events go to ``PolicyEvents`` (``advisor.controller.policyevents``), and when the
policies' figures are written is ``FigureSchedule``'s (``advisor.controller.figureschedule``):
the engine routes and sequences.

The clock is an argument (``now``), so the engine is unit-tested with a fake API and a fake time.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import queue
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from advisor.controller.actuator import Actuator
from advisor.controller.cluster_index import ClusterIndex
from advisor.controller.config import EngineConfig
from advisor.controller.evidence import EvidenceStore
from advisor.controller.figureschedule import FigureSchedule
from advisor.controller.jobintake import JobIntake
from advisor.controller.metrics import Metrics
from advisor.controller.policybook import PolicyBook
from advisor.controller.policyevents import PolicyEvents
from advisor.controller.policystatus import JobFigures
from advisor.controller.savecheck import SaveWindowCheck, ready_message
from advisor.controller.saved import SavedStatuses
from advisor.controller.statusboard import StatusBoard, owner_reference, same_but_time
from advisor.controller.store import ForecastStore
from advisor.controller.summary import HEARTBEAT_S, NOT_LEARNING, summarize
from advisor.controller.trackedjob import TrackedJob, evaluation_due
from advisor.controller.writer import StatusWriter
from advisor.core import AdvisorCore
from advisor.model import ClusterView, JobView
from policies.rules.release import abandoned
from policies.selection import selecting

__all__ = ["Engine", "EngineConfig"]

log = logging.getLogger(__name__)

#: how long a write that must precede a mutation waits for the object's write in flight (which
#: itself times out after ``api.REQUEST_TIMEOUT``); past it the action is not taken
URGENT_WRITE_WAIT_S = 90.0


class Engine(JobIntake):
    def __init__(
        self,
        api: Any,
        *,
        config: EngineConfig | None = None,
        metrics: Metrics | None = None,
        core: AdvisorCore | None = None,
    ) -> None:
        self.api = api
        self.config = cfg = config or EngineConfig()
        self.metrics = metrics or Metrics(per_job=cfg.job_metrics)
        self.core = core or AdvisorCore(
            forecast_interval_s=cfg.forecast_interval_s, max_history_points=cfg.history_points
        )
        self.events: queue.SimpleQueue[tuple[str, str, Any, float]] = queue.SimpleQueue()
        self.jobs: dict[str, TrackedJob] = {}
        #: (key, kind) of jobs not advised because a job of another kind holds their name
        self._shadowed: set[tuple[str, str]] = set()
        self.index = ClusterIndex()
        self.workloads = self.index.workloads  # what the index holds, read by the commands' tests
        self.cluster_queues = self.index.cluster_queues
        self.local_queues = self.index.local_queues
        self.book = PolicyBook(
            api,
            self.metrics,
            recommend_only=cfg.recommend_only,
            recommend_only_why=cfg.recommend_only_why,
            shard=cfg.status_shard,
        )
        self.book.namespaces = self.index.known_namespaces  # for the JobsSelected condition
        self.policies = (
            self.book.policies
        )  # name -> policies.Policy (valid ones, and what stands in for an invalid one)
        self.policy_errors = self.book.errors  # name -> why it is invalid
        self.writer = StatusWriter(
            self._write,
            min_interval_s=cfg.write_interval_s,
            max_per_second=cfg.max_writes_per_second,
            workers=cfg.writer_workers,
            on_written=self._written,
            on_stage=self._stage,
        )
        self.metrics.api_unreachable.set_function(self._unreachable_seconds)
        # read at each scrape: set with the queue series (every ``queue_metrics_interval_s``), a new
        # leader's first step, before kopf's watches had delivered a job, left it 0 for 15 s
        self.metrics.jobs.set_function(lambda: len(self.jobs))
        self.store = ForecastStore(api)
        self.actuator = Actuator(
            api, self.core, self._persist_now, metrics=self.metrics, record_cap=self._record_cap
        )
        self.restart = SavedStatuses(self.store, self.core, self.actuator)
        self.board = StatusBoard(
            self.core,
            self.actuator,
            self.restart,
            hung_after_s=cfg.hung_after_s,
            invalid_policies=self.book.holding,
        )
        self.saved = self.restart.pending  # the statuses not adopted yet, read by the tests
        self._last_queue_metrics = -1e18
        self._queue_metrics_jobs = 0  # the jobs followed when the queue series were last set
        self._now = -math.inf  # the time of the step being run
        self._received = 0.0  # wall clock at which the event being applied was received
        #: when the policies' figures are written (a policy or a job came or went, the start-up wait)
        self.figures = FigureSchedule()
        self.policy_events = PolicyEvents(
            self.book, self.core, self.metrics, self.board, self.jobs, self.figures
        )
        self.ready = False
        self._gate: Callable[[], bool] = _always
        self._forged_counted = 0
        #: where the deleted jobs' SIGTERM evidence per runtime is kept (None: memory only)
        self.evidence: EvidenceStore | None = None
        self._evidence_version = -1
        #: the save-window AdmissionCheck's answers (None: the controller does not run the check)
        self.save_check: SaveWindowCheck | None = None
        self._judged_kinds: frozenset[str] = frozenset()

    @property
    def policies_unknown(self) -> bool:
        """The AdvisorPolicies could not be listed yet: no job is acted on (``PolicyEvents.unknown``)."""
        return self.policy_events.unknown

    @policies_unknown.setter
    def policies_unknown(self, unknown: bool) -> None:
        self.policy_events.unknown = unknown

    def use_evidence_store(self, store: EvidenceStore) -> int:
        """Keep the runtimes' SIGTERM evidence of deleted jobs in ``store`` (``evidence``): what it
        holds is adopted now (call before the first events), changes are written by ``step``.
        Returns the runtimes adopted."""
        self.evidence = store
        counts, windows = store.load()
        adopted = self.core.adopt_retired_evidence(counts)
        self.core.adopt_retired_windows(windows)
        self._evidence_version = self.core.retired_version  # what is stored is what it holds
        return adopted

    def use_save_check(self, check: SaveWindowCheck, judged_kinds: Sequence[str]) -> None:
        """Answer the save-window AdmissionChecks (``advisor.controller.savecheck``): a workload of
        a job of ``judged_kinds`` is let through once its job was evaluated, any other at once."""
        self.save_check = check
        self._judged_kinds = frozenset(judged_kinds)

    def _unreachable_seconds(self) -> float:
        since = self.writer.unreachable_since
        return max(0.0, time.time() - since) if since is not None else 0.0

    def set_gate(self, may_act: Callable[[], bool]) -> None:
        """Only while ``may_act()`` (the leader Lease held) does the engine evaluate, act or write."""
        self._gate = may_act
        self.actuator.may_act = may_act
        self.metrics.leader.set_function(lambda: 1.0 if may_act() else 0.0)

    # ---------------------------------------------------------------------------- intake (any thread)
    def enqueue(self, kind: str, event_type: str, body: Any) -> None:
        """``kind``: job | workload | clusterqueue | localqueue | namespace | namespacelisting (the
        start-up listing of the namespaces is in: every one exists that ``namespace`` events named) |
        policy | admissioncheck |
        unwatched-workload (a Workload of a namespace not watched, for the save-window check only) |
        joblisting (the jobs that exist at start-up, ``_on_job_listing``) | policylisting (whether
        the AdvisorPolicies could be listed, ``policies_unknown``) | policyresync (a listing of
        them, ``PolicyEvents.on_resync``);
        ``event_type``: the watch event type (ADDED, MODIFIED, DELETED, or None for a listing)."""
        self.events.put((kind, str(event_type or "ADDED"), body, time.time()))

    # ------------------------------------------------------------------------------------- startup
    def load_saved(self, forecasts: Sequence[Mapping[str, Any]]) -> int:
        """Adopt the persisted TrainJobForecasts (listed once at startup); restored on first sight."""
        return self.restart.load(forecasts)

    # ------------------------------------------------------------------------------------ the loop
    def step(self, now: float | None = None) -> int:
        """Apply queued events, evaluate what is due, start due writes. Returns jobs evaluated."""
        now = time.time() if now is None else now
        if not self._gate():
            return 0  # not the leader (any more): another replica may be acting
        self._now = now
        while True:
            try:
                kind, event_type, body, received = self.events.get_nowait()
            except queue.Empty:
                break
            self._stage("queue", time.time() - received)
            self._received = received
            self.writer.server_answered(received)  # a watch event: the API server answered then
            try:
                self._apply_event(kind, event_type, body, now)
            except Exception:  # one malformed object must never stop the loop
                log.exception("ignoring a %s %s event that could not be handled", kind, event_type)
        if self.evidence is not None and self.core.retired_version != self._evidence_version:
            version = self.core.retired_version
            if self.evidence.save(self.core.retired_runtime_evidence, self.core.retired_save_windows):
                self._evidence_version = version  # else tried again on the next step
        if self.core.forged_acks > self._forged_counted:
            self.metrics.forged_acks.inc(self.core.forged_acks - self._forged_counted)
            self._forged_counted = self.core.forged_acks
        evaluated = 0
        cluster: ClusterView | None = None
        interval_s = self.config.evaluate_interval_s
        due = [
            (job.last_eval or -math.inf, key)
            for key, job in self.jobs.items()
            if evaluation_due(key, job, now, interval_s=interval_s, core=self.core, actuator=self.actuator)
        ]
        due.sort()
        started = time.perf_counter()
        for _, key in due:
            if time.perf_counter() - started >= self.config.evaluate_budget_s and evaluated:
                break  # the rest are evaluated in the next steps (oldest first); rendered below
            job = self.jobs[key]
            if cluster is None:
                cluster = self._cluster_view(now)
            try:
                self._evaluate(key, job, cluster, now)
            except Exception:
                log.exception("evaluating %s failed; will retry", key)
            job.dirty = job.needs_eval = False
            job.last_eval = now
            evaluated += 1
        for key, job in self.jobs.items():
            if job.dirty:  # new progress, but no evaluation due (or no time left): show it now
                try:
                    self._refresh(key, job, now)
                except Exception:
                    log.exception("rendering %s failed", key)
                job.dirty = False
        self.writer.flush(now)
        at_once = self.figures.due and not any(j.needs_eval for j in self.jobs.values())
        if self.figures.take(now, interval_s=self.config.policy_status_interval_s, at_once=at_once):
            self._write_policy_figures()
            if self.restart.carried:
                self._mark_carried()
        if (
            now - self._last_queue_metrics >= self.config.queue_metrics_interval_s
            or len(self.jobs) != self._queue_metrics_jobs
        ):
            # at once when jobs came or went (a new leader's jobs arriving from its watches), else
            # every interval: the states change slowly, and the summary reads every job
            self._last_queue_metrics, self._queue_metrics_jobs = now, len(self.jobs)
            self.metrics.set_queues(summarize((k.split("/", 1)[0], s) for k, s in self.board.items()))
        return evaluated

    def _cluster_view(self, now: float) -> ClusterView:
        view = self.index.cluster_view(now, priority_boost_enabled=self.config.priority_boost_enabled)
        # what the status writes say of the API server: a silence the controller cannot see is
        # not a job's (``ClusterView.api_unreachable_since``)
        return dataclasses.replace(
            view, api_unreachable_since=self.writer.unreachable_since, api_sight_since=self.writer.sight_since
        )

    def _refresh(self, key: str, job: TrackedJob, now: float) -> None:
        """The cheap path: progress, step, throughput from the latest sample, with the last
        forecast and decision, so that every update shows without waiting for a forecast."""
        view = self.core.view(self.index.base_view(job.body), judged_at=now)
        status = self.board.render(key, view, job.last_decision, now)
        self.metrics.observe_job(view, state=status["state"])
        self._submit(key, job, status, now)

    def _submit(self, key: str, job: TrackedJob, status: dict[str, Any], now: float) -> None:
        self.writer.submit(
            key,
            {"owner": owner_reference(job.body), "status": status},
            observed_at=job.unwritten_since if job.unwritten_since is not None else now,
        )
        job.unwritten_since = None
        job.written = now
        job.written_status = status
        if job.applied_wall is not None:
            self._stage("engine", time.time() - job.applied_wall)
            job.applied_wall = None

    def _evaluate(self, key: str, job: TrackedJob, cluster: ClusterView, now: float) -> None:
        body = job.body
        workload = self.index.workload_for(body)
        base = self.index.base_view(body)
        # a restart may have left recorded-but-unfinished actions: finish them first, exactly once
        # (each recorded in its policy's hourly cap first, if the process died before it was), on
        # the job as it stands now: one that no longer runs gets none of them
        recorded = self.actuator.recorded(key)
        if recorded and not self.policies_unknown:  # their policies' caps must be known first
            now_view = self.core.view(base, now=now)
            for rid in recorded:
                self.actuator.finish(now_view, rid, body=body, workload=workload, resumed=True)
        started = time.perf_counter()
        decision = self.core.evaluate(base, cluster, now=now)
        self.metrics.forecast_latency.observe(time.perf_counter() - started)
        # before the actions: a status persisted with one (``_persist_now``) shows the decision
        # that took it, and is then the evaluation's own status, not written a second time
        job.last_decision = decision
        job.selected = selecting(self.policies.values(), base)
        self._sync_checkpoints(key, base, body)
        if not self.policies_unknown:  # else no action, and no sequence abandoned, for now
            acting = self.core.view(base)
            gone = abandoned(acting, decision)
            if gone is not None:  # a policy edit or deletion ended a release sequence: said, once
                self.actuator.sequence_cancelled(acting, self.book.said_deleted(gone, decision), body=body)
                acting = self.core.view(base)  # the request's detail marked
            if decision.actions or decision.cleanup:
                self.actuator.execute(acting, decision, body=body, workload=workload, now=now)
        view = self.core.view(base, judged_at=now)
        if self.save_check is not None:
            self.save_check.settle(workload, ready_message(decision, view))
        _, status = self.board.evaluated(key, view, decision, body, now)
        if job.last_eval is not None and status["state"] in NOT_LEARNING and view.active:
            hours = view.gpus * max(0.0, now - job.last_eval) / 3600.0
            self.metrics.non_learning_gpu_hours.labels(view.namespace).inc(hours)
            if decision.policy:
                self.book.add_hours(decision.policy, hours)
        self.metrics.observe_job(view, state=status["state"])
        if (
            job.unwritten_since is None
            and same_but_time(job.written_status, status)
            and now - job.written < HEARTBEAT_S
        ):
            # a periodic re-evaluation that changed nothing, or the status an action of this
            # evaluation persisted already: no write, but one every heartbeat, so that a reader can
            # tell a status no controller keeps any more (``summary.shown_state``)
            return
        self._submit(key, job, status, now)

    def _sync_checkpoints(self, key: str, base: JobView, body: Mapping[str, Any]) -> None:
        """Close checkpoint requests the core saw acknowledged, timed out or dropped (their pods are
        gone: ``advisor.core.record.drop_pending_request``). Dropping a boost the
        checkpoint was shielding is the guard's decision (``policies.rules.guard.boost_to_drop``),
        made in the same evaluation from the acknowledged checkpoint and carried out with it."""
        rec = self.core.record(key)
        if rec is None:
            return
        outcomes = {a.request_id: a for a in rec.actions}
        for rid, _, _ in self.actuator.awaiting_ack(key):
            action = outcomes.get(rid)
            if action is None or action.outcome not in ("acknowledged", "timed-out", "dropped"):
                continue
            detail = (
                f"at step {rec.checkpoint.last_step}" if action.outcome == "acknowledged" else action.detail
            )
            self.actuator.checkpoint_done(self.core.view(base), rid, action.outcome, body=body, detail=detail)

    # ------------------------------------------------------------------------------- writing
    def _persist_now(self, key: str) -> None:
        """The actuator's ``persist``: the job's status written at once (an action's record before
        its mutation, its outcome after). Rendered at the time of the step being run, as the
        evaluation's own status is, and counted as the job's write: that status, the same but for
        what changed since, is then not written again (a trial saw every acknowledged checkpoint's
        status written twice, the second with ``observedAt`` a second back)."""
        job = self.jobs.get(key)
        if job is None:
            raise KeyError(f"unknown job {key}")
        now = self._now if math.isfinite(self._now) else time.time()
        view = self.core.view(self.index.base_view(job.body), judged_at=now)
        status = self.board.render(key, view, job.last_decision, now)
        self.writer.write_now(
            key, {"owner": owner_reference(job.body), "status": status}, timeout_s=URGENT_WRITE_WAIT_S
        )
        job.unwritten_since = None
        job.written = now
        job.written_status = status

    def _record_cap(self, policy: str, rid: str, at: float, resumed: bool) -> None:
        """The actuator's ``record_cap``, at the time of the step being run (``PolicyEvents.record_cap``)."""
        self.policy_events.record_cap(policy, rid, at, resumed, now=self._now)

    def _write(self, key: str, payload: Mapping[str, Any]) -> None:
        if not self._gate():
            raise NotLeader(f"not writing {key}: the leader Lease is not held")
        try:
            how = self.store.write(key, payload["owner"], payload["status"])
        except Exception:
            # retried by the writer; counted so that an alert on failed writes sees it
            self.metrics.write_errors.labels("trainjobforecast-status").inc()
            raise
        if how != "unchanged":
            self.metrics.api_writes.labels("trainjobforecast-status").inc()
            self.metrics.status_writes.labels(how).inc()

    def _stage(self, stage: str, seconds: float) -> None:
        self.metrics.pipeline.labels(stage).observe(max(0.0, seconds))

    def _written(self, key: str, since: float) -> None:
        self.metrics.update_latency.observe(max(0.0, time.time() - since))

    # ------------------------------------------------------------------------------- policies
    def _write_policy_figures(self) -> None:
        self.book.write_figures(
            (
                JobFigures(
                    key,
                    job.last_decision.policy if job.last_decision is not None else None,
                    rec.actions if (rec := self.core.record(key)) is not None else (),
                    job.last_decision.tied_with if job.last_decision is not None else (),
                    self._selecting(key, job),
                )
                for key, job in self.jobs.items()
            ),
            now=self._now if math.isfinite(self._now) else None,
        )

    def _selecting(self, key: str, job: TrackedJob) -> tuple[str, ...]:
        """The policies that select the job now: as its last evaluation found them, or, for a job
        not evaluated yet or due again (a policy changed, its evaluation left to a later step),
        from its object now, so that a policy's ``jobsSelected`` does not read 0 meanwhile."""
        if job.selected is None or job.needs_eval:
            try:
                job.selected = selecting(self.policies.values(), self.index.base_view(job.body))
            except Exception:
                log.exception("%s: which policies select it could not be told", key)
                return job.selected or ()
        return job.selected

    def close(self) -> None:
        self.writer.close()


class NotLeader(RuntimeError):
    """A write or mutation attempted without holding the leader Lease."""


def _always() -> bool:
    return True
