"""Simulated jobs: what a trace row becomes once it has a curve, a speed and a fault process.

Every random property of a job (its curve, checkpoint and restart costs, failure times measured on
its own compute clock) is drawn once from a per-job seed, so every strategy replays the very same
jobs with the very same luck (common random numbers): differences between rows are the strategies'.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from advisor.model import job_key
from advisor.protocol import SAVE_SECONDS_METRIC
from advisor.training.report import Report
from simulator.curves import WORKLOAD_TYPE_LABEL, CurveLibrary, CurveSpec
from simulator.quota import Workload
from simulator.real_curves import RealCurve, RealCurveLibrary
from simulator.traces import TraceJob

__all__ = ["PEAK_LR", "Phase", "SimJob", "WorldConfig", "build_jobs"]


class Phase(enum.StrEnum):
    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    DONE = "done"
    RELEASED = "released"
    STOPPED = "stopped"

    @property
    def terminal(self) -> bool:
        return self in (Phase.DONE, Phase.RELEASED, Phase.STOPPED)

    @property
    def holds_quota(self) -> bool:
        return self in (Phase.STARTING, Phase.RUNNING, Phase.CHECKPOINTING)


#: ``grace_fits_save``: the grace period given is this many times the step plus the save
GRACE_HEADROOM = 1.5
#: the peak learning rate reported by simulated jobs (the curve library's schedules are relative)
PEAK_LR = 3e-4


@dataclass(frozen=True, slots=True)
class WorldConfig:
    """The physics of the simulated cluster (not the policies)."""

    gpus_per_node: int = 8
    step_time_range: tuple[float, float] = (0.5, 2.0)  # seconds per step at the requested size
    scaling_exponent: float = 0.85  # throughput ~ nodes ** exponent
    report_points: int = 240  # progress reports over a run (the trainer's logging cadence)
    min_report_interval_s: float = 60.0
    #: trainers log every N steps, so even a month-long run reports every few minutes; without a
    #: cap a 700-hour trace job would report every 3 hours and look hung between reports
    max_report_interval_s: float = 600.0
    checkpoint_cost_s: float = 45.0  # median for one node; grows with log2(gpus)
    restart_cost_s: float = 120.0
    #: the pods' terminationGracePeriodSeconds (Kubernetes' default); see ``grace_fits_save``
    grace_period_s: float = 30.0
    #: the platform gives each job the grace period the advisor recommends (the step under way
    #: plus a save, ``policies.savewindow``) instead of ``grace_period_s``
    grace_fits_save: bool = False
    jit_fraction: float = 0.25  # share of jobs whose training helper saves on SIGTERM
    #: share of those whose save on SIGTERM works at all when it fits the grace period (a helper
    #: that checks its flag only at epoch ends, a slow filesystem: 0.7 makes 30% of them fail)
    sigterm_success: float = 1.0
    node_mtbf_h: float = 400.0  # per-node mean time between failures (0: no failures)
    job_checkpoint_interval_s: float | None = 7200.0  # the users' own periodic checkpoints
    #: share of jobs whose users label them ``workload-type`` (pretraining | fine-tuning) when the
    #: trace does not say; 0: no job carries it, as on a cluster that does not ask for it
    label_rate: float = 0.0
    #: share of those labels that are wrong (a pre-training run labelled a fine-tune or back)
    label_error: float = 0.0
    #: whether jobs declare elastic bounds (1 to twice their nodes, as a PyTorchJob's elasticPolicy);
    #: off, the controller's case for a TrainJob, which declares none and is never resized
    elastic: bool = False
    #: when a job's ``minRuntime`` starts counting: "creation" (the controller reads the object's
    #: creationTimestamp, so time queued counts) or "admission" (its first start)
    runtime_from: str = "creation"
    #: check ``policies.victims.predict_victims`` on the snapshot before each scheduling pass
    #: against the victims the quota model then picks (costs a prediction per pass)
    score_victims: bool = False
    #: Kueue's PriorityBoost feature gate (alpha, off by default): the controller's default too
    priority_boost_enabled: bool = False
    #: the ClusterQueues carry the advisor's AdmissionCheck (``trainjob-advisor.io/save-window``):
    #: Kueue admits a workload only once the advisor marked its check Ready, so the advisor decides
    #: on every job (its grace period) before its first start. Off: it races Kueue's admission, and
    #: a job that fits at once starts before the advisor could write anything.
    save_window_check: bool = False
    #: share of jobs whose progress reports carry the run's planned steps (``total_steps``, and so
    #: ``progressPercentage``), and share whose reports carry the learning rate, each drawn per job.
    #: Hugging Face's Kubeflow callback sends both; a custom loop calling the SDK's
    #: ``update_trainjob_status`` sends what its author passes, often step and loss alone. What a
    #: job omits the advisor never sees (its forecast has no horizon, or no schedule, to go on).
    #: Set once as an assumption about a cluster's mix of reporters, not tuned on any seed.
    reports_total_steps: float = 0.8
    reports_learning_rate: float = 0.8
    horizon_s: float | None = None  # stop simulating here (None: until every job is accounted for)

    def __post_init__(self) -> None:
        if self.runtime_from not in ("creation", "admission"):
            raise ValueError(f"runtime_from must be creation or admission, got {self.runtime_from!r}")
        for name in ("reports_total_steps", "reports_learning_rate", "label_rate", "label_error"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} must be a share between 0 and 1, got {share!r}")


@dataclass(slots=True)
class SimJob:
    idx: int
    trace: TraceJob
    namespace: str
    cluster_queue: str
    curve: CurveSpec | RealCurve
    total_steps: int
    step_time: float
    ckpt_cost: float
    restart_cost: float
    jit: bool
    failures: list[float]  # compute-clock times of the node failures this job will meet
    report_interval: float
    learning_end: int
    workload: Workload
    #: the labels the job carries (the scenario's labelling, never its hidden curve)
    labels: dict[str, str]
    gpus: int
    nodes: int
    #: the pods' grace period, and whether the job's save on SIGTERM works when it fits
    grace_s: float = 30.0
    sigterm_ok: bool = True
    #: what the job's training helper reports of its saves (its own save time), when it has one
    save_report: Mapping[str, float] = field(default_factory=dict)
    #: whether the job's progress reports carry its planned steps and its learning rate
    reports_total: bool = True
    reports_lr: bool = True
    # ---- dynamic state
    phase: Phase = Phase.PENDING
    gen: int = 0
    step: float = 0.0
    phase_start: float = 0.0
    phase_step: float = 0.0  # step at phase_start
    compute: float = 0.0  # seconds spent RUNNING so far (the failure clock)
    ckpt_step: int = 0
    ckpt_time: float | None = None
    ckpt_request: str | None = None
    pending_request: str | None = None
    ckpt_started_step: int = 0
    ckpt_compute: float = 0.0  # compute clock at the last checkpoint
    ckpt_started_compute: float = 0.0
    next_failure: int = 0
    last_account: float = 0.0
    trajectory: list[tuple[float, float]] = field(default_factory=list)
    #: reports the job makes off its logging cadence (a checkpoint's acknowledgement): (step, time,
    #: last checkpoint step, its request); the sample is built when a tick collects it
    forced_samples: list[tuple[int, float, int | None, str | None]] = field(default_factory=list)
    #: the checkpoint (step, request) the job's reports carried as of the previous look, and its
    #: changes since, by time: a report carries the checkpoint as it stood when it was made
    ckpt_seen: tuple[int | None, str | None] = (None, None)
    ckpt_changes: list[tuple[float, tuple[int | None, str | None]]] = field(default_factory=list)
    last_report: float = 0.0
    last_reported_step: float = -1.0
    rate_factor: float = 1.0
    # ---- accounting (GPU-seconds and seconds)
    gpu_s: float = 0.0
    nonlearning_gpu_s: float = 0.0
    ckpt_gpu_s: float = 0.0
    restart_gpu_s: float = 0.0
    lost_gpu_s: float = 0.0
    lost_preempt_gpu_s: float = 0.0
    #: of the overheads above, those after the job stopped learning: counted in
    #: ``nonlearning_gpu_s`` too (the saved split must not count them twice)
    overhead_nonlearning_gpu_s: float = 0.0
    queue_wait_s: float = 0.0
    queued_since: float = 0.0
    first_start: float | None = None
    end_time: float | None = None
    end_step: float = 0.0
    preemptions: int = 0
    failures_met: int = 0
    #: seconds its workload held an admission before the current one (Kueue's
    #: ``accumulatedPastExecutionTimeSeconds``)
    past_admitted_s: float = 0.0
    checkpoints: int = 0
    started: bool = False
    #: a policy judged the job at some look (the advisor's rows; False: it selected the job not,
    #: or the job was over before its minRuntime, minSteps or minProgress let it judge)
    judged: bool = False
    #: the rule, and the policy (empty for a baseline, which has none), whose release or stop
    #: ended the job: a row's wrong stops are told apart by it (a plateau call from a stall's)
    ended_by_rule: str = ""
    ended_by_policy: str = ""

    @property
    def key(self) -> str:
        return job_key(self.namespace, self.trace.name)

    @property
    def hang_step(self) -> int | None:
        return self.curve.hang_step

    @property
    def cap_step(self) -> float:
        return float(self.total_steps if self.hang_step is None else min(self.hang_step, self.total_steps))

    def rate(self) -> float:
        """Steps per second while running, at the current node count."""
        return self.rate_factor / self.step_time

    def step_at(self, now: float) -> float:
        if self.phase is not Phase.RUNNING:
            return self.step
        return min(self.phase_step + (now - self.phase_start) * self.rate(), self.cap_step)

    def progress_report(
        self,
        step: int,
        time: float,
        loss: float | None = None,
        lr: float | None = None,
        checkpoint: tuple[int | None, str | None] | None = None,
    ) -> Report:
        """The report the job's trainer makes at ``step``, with what its reporter knows and sends
        (planned steps and learning rate only if it reports them); ``checkpoint`` (last checkpoint
        step, its request) as it stood when the report was made, else the job's current one."""
        if checkpoint is None:
            checkpoint = self.current_checkpoint()
        metrics = {"loss": self.curve.observed(step) if loss is None else loss}
        if self.reports_lr:
            metrics["learning_rate"] = self.curve.learning_rate(step, PEAK_LR) if lr is None else lr
        if self.save_report:
            metrics.update(self.save_report)
        evaluation = self.curve.eval_observed(step)
        if evaluation is not None:
            # the latest evaluation, repeated until the next, by the name its run logged it under
            metrics[self.curve.eval_metric] = evaluation
        return Report(
            time=time,
            step=step,
            total_steps=self.total_steps if self.reports_total else None,
            metrics=metrics,
            last_checkpoint_step=checkpoint[0],
            last_checkpoint_request=checkpoint[1],
        )

    def current_checkpoint(self) -> tuple[int | None, str | None]:
        """The last checkpoint (step, request) as the job's reporter sends it now."""
        return (self.ckpt_step if self.ckpt_time is not None else None, self.ckpt_request)

    def note_checkpoint(self, now: float) -> None:
        """Record that the job's last checkpoint changed at ``now`` (a save finished, or one on
        SIGTERM landed), so that a report made before it does not carry it."""
        self.ckpt_changes.append((now, self.current_checkpoint()))

    def checkpoint_as_of(self, t: float) -> tuple[int | None, str | None]:
        """The checkpoint a report made at ``t`` (since the previous look) carries."""
        state = self.ckpt_seen
        for when, changed in self.ckpt_changes:
            if when > t:
                break
            state = changed
        return state

    def checkpoint_report(self, now: float) -> None:
        """Log the acknowledgement of the checkpoint just finished (built into a sample when the
        next tick collects it: a row without an advisor never pays for it)."""
        self.note_checkpoint(now)
        ckpt, request = self.current_checkpoint()
        self.forced_samples.append((int(self.step), now, ckpt, request))


def _labels(
    tj: TraceJob, curve: CurveSpec | RealCurve, world: WorldConfig, seed: int, idx: int
) -> dict[str, str]:
    """The job's ``workload-type`` label: the trace's when it has one; else, with probability
    ``label_rate``, the kind of run its user knows it is, wrong with probability ``label_error``.
    Drawn from a stream of its own, so the labelling leaves every other draw as it was."""
    if tj.workload_type is not None:
        return {WORKLOAD_TYPE_LABEL: tj.workload_type}
    if world.label_rate <= 0:
        return {}
    rng = np.random.default_rng([seed, idx, 1])
    labelled, wrong = rng.random() < world.label_rate, rng.random() < world.label_error
    if not labelled:
        return {}
    kind = curve.workload_type
    if wrong:
        kind = "fine-tuning" if kind == "pretraining" else "pretraining"
    return {WORKLOAD_TYPE_LABEL: kind}


def _reporter(world: WorldConfig, seed: int, idx: int) -> tuple[bool, bool]:
    """Whether the job's reports carry its planned steps and its learning rate (``WorldConfig``'s
    shares), from a stream of its own, so the draw leaves every other one as it was."""
    rng = np.random.default_rng([seed, idx, 2])
    total, lr = rng.random(), rng.random()
    return bool(total < world.reports_total_steps), bool(lr < world.reports_learning_rate)


def build_jobs(
    trace_jobs: list[TraceJob],
    queue_map: dict[str, str],
    world: WorldConfig,
    library: CurveLibrary | RealCurveLibrary,
    seed: int,
) -> list[SimJob]:
    """Turn trace rows into simulated jobs (deterministic for a given seed)."""
    jobs: list[SimJob] = []
    lo, hi = world.step_time_range
    for i, tj in enumerate(trace_jobs):
        rng = np.random.default_rng([seed, i])
        if tj.queue not in queue_map:
            raise ValueError(f"job {tj.name}: queue {tj.queue!r} has no ClusterQueue")
        if tj.total_steps:
            total = int(tj.total_steps)
            step_time = tj.duration / total
        else:
            step_time = float(rng.uniform(lo, hi))
            total = max(10, int(tj.duration / step_time))
            step_time = tj.duration / total
        # a trace's workload_type column is the kind of run the job is (its label says so too)
        curve = library.draw(rng, total, seed=int(rng.integers(1 << 31)), workload_type=tj.workload_type)
        nodes = max(1, math.ceil(tj.gpus / world.gpus_per_node))
        ckpt = world.checkpoint_cost_s * (1.0 + 0.5 * math.log2(tj.gpus)) * float(rng.lognormal(0.0, 0.3))
        restart = world.restart_cost_s * float(rng.lognormal(0.0, 0.3))
        failures: list[float] = []
        if world.node_mtbf_h > 0:
            rate = nodes / (world.node_mtbf_h * 3600.0)
            t = 0.0
            budget = tj.duration * 3.0
            while True:
                t += float(rng.exponential(1.0 / rate))
                if t > budget:
                    break
                failures.append(t)
        report = min(
            world.max_report_interval_s, max(world.min_report_interval_s, tj.duration / world.report_points)
        )
        wl = Workload(
            uid=i,
            job=job_key(tj.queue, tj.name),
            cluster_queue=queue_map[tj.queue],
            gpus=tj.gpus,
            priority=tj.priority,
            created_at=tj.submit,
        )
        jit = bool(rng.random() < world.jit_fraction)
        sigterm_ok = bool(rng.random() < world.sigterm_success)
        # with the headroom a platform engineer gives a measured need (the step and the save vary)
        grace = (
            float(math.ceil(GRACE_HEADROOM * (step_time + ckpt)))
            if world.grace_fits_save
            else world.grace_period_s
        )
        reports_total, reports_lr = _reporter(world, seed, i)
        reports_lr = reports_lr and curve.logs_learning_rate
        jobs.append(
            SimJob(
                idx=i,
                trace=tj,
                namespace=tj.queue,
                cluster_queue=queue_map[tj.queue],
                curve=curve,
                total_steps=total,
                step_time=step_time,
                ckpt_cost=ckpt,
                restart_cost=restart,
                jit=jit,
                grace_s=grace,
                sigterm_ok=sigterm_ok,
                save_report={SAVE_SECONDS_METRIC: round(ckpt, 1)} if jit else {},
                reports_total=reports_total,
                reports_lr=reports_lr,
                failures=failures,
                report_interval=report,
                learning_end=curve.learning_end_step(),
                workload=wl,
                labels=_labels(tj, curve, world, seed, i),
                gpus=tj.gpus,
                nodes=nodes,
            )
        )
    return jobs
