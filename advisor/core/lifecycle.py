"""A job's lifecycle phase, derived from what the cluster says about it. Pure.

Why here and not in a rule: a rule that forgets to ask whether the job still runs releases the
quota of a job that has already finished (the stall rule did exactly that: a finished run reports
no more steps, which is what a hung one looks like). So the phase is derived once, by the core
loop, from every completion signal there is, and the policies' engine refuses to judge anything
but a ``RUNNING`` job; no rule can act on a job that is not running.

The signals, in the order they win:

* failure: TrainJob / PyTorchJob ``Failed=True``, or the Workload ``Finished=True`` with a failure
  reason (``Failed``, ``FailedToStart``);
* completion: TrainJob ``Complete=True``, Workload ``Finished=True``, the RHOAI summary
  ``estimatedRemainingTimeSummary: "complete"``, a reported progress of 100%, or a step at or past
  the total *within one report*: Hugging Face reports every ``logging_steps``, so the last step seen
  of a finished run is below ``total_steps`` by up to that gap, and the final upstream update may
  carry no ``current_step`` at all (hence the percentage);
* deletion: the job's ``metadata.deletionTimestamp`` is set (a finalizer keeps it visible) is
  finished: it is going, and nothing may act on it;
* with a Kueue Workload (the authority on quota): deactivated (``spec.active=false``, which is how
  the advisor releases quota) is suspended; not admitted (queued, or evicted and waiting to be
  admitted again) is pending, whatever the job's own ``suspend`` says (Kueue keeps a queued job
  suspended); admitted but the job suspended is suspended;
* without one: TrainJob ``Suspended=True`` / ``spec.suspend`` is suspended;
* otherwise running.

Without a Workload (a cluster without Kueue) the job's own ``active`` / ``admitted`` (from its
``suspend``) stand in for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.model import LifecycleSignals, Phase, holds_quota

__all__ = ["FAILED_FINISH_REASONS", "Lifecycle", "derive_phase", "holds_quota"]

#: Workload ``Finished`` reasons that mean the run failed (Kueue v1beta2 constants)
FAILED_FINISH_REASONS: frozenset[str] = frozenset({"Failed", "FailedToStart"})


@dataclass(frozen=True, slots=True)
class Lifecycle:
    phase: Phase
    reason: str


def derive_phase(
    signals: LifecycleSignals | None,
    *,
    active: bool,
    admitted: bool,
    step: int,
    total_steps: int | None,
    report_gap: int,
) -> Lifecycle:
    """The job's phase and the signal that set it.

    ``step`` is the latest step seen, ``report_gap`` the step distance between the job's recent
    reports (0 when unknown): a step within one gap of ``total_steps`` is the end of the run. The
    phase is a function of the signals alone (no clock), so the same signals give the same phase in
    the controller and in the simulator; the core loop stamps when it changed.
    """
    s = signals or LifecycleSignals()
    if s.failed:
        return Lifecycle(Phase.FAILED, "the job's Failed condition is True")
    if s.workload_finished and s.workload_finished_reason in FAILED_FINISH_REASONS:
        return Lifecycle(Phase.FAILED, f"its Workload finished ({s.workload_finished_reason})")
    if s.complete:
        return Lifecycle(Phase.FINISHED, "the job's Complete condition is True")
    if s.workload_finished:
        why = f" ({s.workload_finished_reason})" if s.workload_finished_reason else ""
        return Lifecycle(Phase.FINISHED, f"its Workload finished{why}")
    if s.deleting:
        # a finalizer (or a foreground deletion) keeps it visible while it goes: it is ending, and
        # nothing may act on it, as on a finished run
        return Lifecycle(Phase.FINISHED, "the job is being deleted (metadata.deletionTimestamp is set)")
    if s.remaining_summary is not None and s.remaining_summary.strip().lower() == "complete":
        return Lifecycle(Phase.FINISHED, 'the trainer reports estimatedRemainingTimeSummary "complete"')
    if s.progress_percentage is not None and s.progress_percentage >= 100.0:
        # taken as the end even when its step says otherwise (the safe reading: nothing acts on a
        # finished job), but said: PROGRESS 18% beside STATE finished read as a contradiction
        short = (
            f" (its step {step} of {total_steps} says otherwise)"
            if total_steps and 0 < step < total_steps - max(report_gap, 0)
            else ""
        )
        return Lifecycle(Phase.FINISHED, f"the trainer reports {s.progress_percentage:g}% progress{short}")
    if total_steps and step > 0 and step >= total_steps - max(report_gap, 0):
        within = f", within one report ({report_gap} steps)" if step < total_steps else ""
        return Lifecycle(Phase.FINISHED, f"step {step} of {total_steps}{within}")
    if s.has_workload:  # Kueue is the authority on whether a job holds quota
        if s.workload_active is False:
            return Lifecycle(Phase.SUSPENDED, "its Workload is deactivated (spec.active=false)")
        if not s.workload_admitted:
            if s.evicted:
                return Lifecycle(Phase.PENDING, "its Workload was evicted and waits to be admitted again")
            why = "quota reserved, not yet admitted" if s.quota_reserved else "its Workload waits for quota"
            return Lifecycle(Phase.PENDING, why)
        if s.evicted:
            # Kueue has set Evicted while Admitted still stands: its pods are being stopped (a
            # preemption), and the job waits to be admitted again; nothing may act on it now
            return Lifecycle(
                Phase.PENDING, "Kueue is evicting its Workload; it will wait to be admitted again"
            )
        if s.suspended:
            return Lifecycle(Phase.SUSPENDED, "the job is suspended")
        return Lifecycle(Phase.RUNNING, "its Workload is admitted")
    if s.suspended:
        return Lifecycle(Phase.SUSPENDED, "the job is suspended")
    if not active:
        return Lifecycle(Phase.SUSPENDED, "the job is inactive")
    if not admitted:
        return Lifecycle(Phase.PENDING, "the job is not admitted")
    return Lifecycle(Phase.RUNNING, "running")
