"""``trainjob-advisor resume NS/NAME``: give a released run its quota back.

The advisor releases quota only by setting the run's Kueue ``Workload.spec.active=false``; this
sets it back to ``true`` (Kueue requeues the workload in its original place) and posts an Event
on the job, so the run's history shows who resumed it.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Mapping
from typing import Any

from advisor.cli import CommandError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    from advisor.controller.cliutil import add_cluster_args, add_namespace_arg

    p = subparsers.add_parser(
        "resume",
        help="reactivate a run whose quota the advisor released",
        description="Set the run's Kueue Workload spec.active back to true.",
    )
    add_cluster_args(p)
    add_namespace_arg(p)
    p.add_argument("ref", metavar="NAME", help="the TrainJob (or PyTorchJob with --kind): NAME or NS/NAME")
    p.add_argument("--kind", choices=("TrainJob", "PyTorchJob"), default="TrainJob")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from advisor.controller.cliutil import api_error, cluster_api, parse_ref
    from advisor.controller.jobs import JOB_KINDS

    ns, name = parse_ref(args.ref, args)
    api = cluster_api(args)
    try:
        job = api.get_job(args.kind, ns, name)
    except Exception as exc:
        raise api_error(exc, f"{args.kind} {ns}/{name}") from exc
    uid = (job.get("metadata") or {}).get("uid")
    from advisor.sources.lifecycle import ended_as

    how = ended_as(job)
    if how is not None:
        # its Workload reactivated, Kueue admitted a finished job again and held its GPUs for
        # nothing (a platform trial): a finished run has no quota to be given back
        raise CommandError(f"{args.kind} {ns}/{name} has {how}: there is no run to resume")
    api.discover_kueue()
    try:
        workload = api.kueue.workload_for_job(ns, uid)
    except Exception as exc:
        raise api_error(exc, f"Kueue Workloads in {ns}") from exc
    if workload is None:
        raise CommandError(
            f"{args.kind} {ns}/{name} has no Kueue Workload: there is no released quota to resume"
        )
    if workload.finished:
        raise CommandError(
            f"Workload {ns}/{workload.name} of {args.kind} {ns}/{name} has finished "
            f"({workload.finished_reason or 'Finished'}): there is no run to resume"
        )
    if workload.active:
        print(f"Workload {ns}/{workload.name} of {args.kind} {ns}/{name} is already active")
        return 0
    try:
        api.kueue.set_active(ns, workload.name, True)
    except Exception as exc:
        raise api_error(exc, f"Workload {ns}/{workload.name}") from exc
    jk = JOB_KINDS[args.kind]
    recorded = _record_resume(api, args.kind, ns, name)
    with contextlib.suppress(Exception):  # the Event is a courtesy; the reactivation is what matters
        api.create_event(
            {
                "apiVersion": f"{jk.group}/{jk.version}",
                "kind": jk.kind,
                "name": name,
                "namespace": ns,
                "uid": uid,
            },
            reason="Resumed",
            message=f"Workload {workload.name} reactivated by trainjob-advisor resume",
        )
    print(f"Workload {ns}/{workload.name} of {args.kind} {ns}/{name} reactivated; Kueue will requeue it")
    labels = (job.get("metadata") or {}).get("labels") or {}
    status = _forecast_status(api, ns, name)
    for note in (
        _restarts_from(status),
        _judged_again(api, args.kind, ns, name, labels, status, recorded=recorded),
    ):
        if note:
            print(note)
    return 0


def _forecast_status(api: Any, ns: str, name: str) -> Mapping[str, Any]:
    """The job's TrainJobForecast status, or nothing (the notes it feeds are a courtesy: the
    reactivation is done)."""
    try:
        obj = api.get_forecast(ns, name)
    except Exception:
        return {}
    status = (obj or {}).get("status")
    return status if isinstance(status, Mapping) else {}


def _restarts_from(status: Mapping[str, Any]) -> str | None:
    """Where the run starts again, as far as the advisor knows its checkpoints: a run released
    with no save (an overfitting release takes none) restarts from scratch, and after a resume
    its forecast read the previous run's figures for a while, with no word of it (a platform
    trial)."""
    if not status:
        return None
    step = (status.get("progress") or {}).get("step")
    saved = (status.get("checkpoint") or {}).get("lastStep")
    at = f" (it had reported step {step:,})" if isinstance(step, int) else ""
    if saved is None:
        return (
            f"note: no checkpoint of this run is known to the advisor{at}: it starts again from its "
            "trainer's last save if it made one, else from step 0; its forecast follows once it reports"
        )
    return (
        f"note: its last checkpoint known to the advisor is at step {saved:,}{at}: the run starts "
        "again from there if its trainer resumes from its last save"
    )


def _record_resume(api: Any, kind: str, ns: str, name: str) -> bool:
    """Annotate the job with the time of its resume (``RESUMED_ANNOTATION``): the policies'
    cooldown runs from it. False (said) when the job may not be patched."""
    import time

    from advisor.protocol import RESUMED_ANNOTATION

    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        api.patch_job(kind, ns, name, {"metadata": {"annotations": {RESUMED_ANNOTATION: stamp}}})
    except Exception as exc:
        why = getattr(exc, "reason", None) or exc
        print(f"note: the resume is not recorded on the {kind} ({why}): no fresh cooldown protects it")
        return False
    return True


def _judged_again(
    api: Any,
    kind: str,
    ns: str,
    name: str,
    labels: Mapping[str, str],
    status: Mapping[str, Any],
    *,
    recorded: bool = True,
) -> str | None:
    """What happens next when a policy released the run (``status``: its TrainJobForecast's): it
    is judged again once it runs, and a run that still does not learn is released again after the
    policy's cooldown; unless the job already carries the releasing policy's exempt label, which
    is then said instead of suggested."""
    released = [
        a
        for a in status.get("actions") or []
        if isinstance(a, dict) and a.get("kind") in ("release-quota", "stop") and a.get("policy")
    ]
    if not released:
        return None
    policy = released[-1]["policy"]
    said = f"note: policy {policy} released it ({released[-1].get('rule') or 'a rule'}); "
    label, known = _exempt_label(api, policy)
    exempt = str(labels.get(label, "")).strip().lower()
    if exempt and exempt != "false" and not known:
        return said + (
            f"it carries {label}={labels[label]}, the default exempt label; policy {policy} could not be "
            "read to see whether it sets another, so it may judge it again once it runs"
        )
    if exempt and exempt != "false":
        value = labels[label]
        return (
            said + f"it carries {label}={value}, the exempt label of {policy}, which does not judge it again"
        )
    unsure = (
        ""
        if known
        else f" (the default exempt label: policy {policy} could not be read to see whether it sets another)"
    )
    when = (
        "once the policy's cooldown from now has passed (the resume is recorded on the job)"
        if recorded
        else "as soon as its rule's window has passed again"
    )
    return (
        said
        + f"it is judged again once it runs, and if it still does not learn it is released again {when}. "
        f"To keep it running: kubectl label {kind.lower()} -n {ns} {name} {label}=true{unsure}"
    )


def _exempt_label(api: Any, policy: str) -> tuple[str, bool]:
    """The label that exempts a job from ``policy`` (its ``safety.exemptLabel``), and whether it
    was read from the policy (else the default: a user who may not read AdvisorPolicies)."""
    from policies import load_policy
    from policies.spec import DEFAULT_EXEMPT_LABEL

    try:
        obj = api.get_policy(policy)
        if obj is None:
            return DEFAULT_EXEMPT_LABEL, False
        return load_policy(obj).safety.exempt_label, True
    except Exception:  # unreadable (RBAC) or invalid: the default, said so
        return DEFAULT_EXEMPT_LABEL, False
