"""The grace period of a TrainJob's pods, through its ``spec.runtimePatches`` (Trainer v2.3+).

A TrainJob's pod template comes from its runtime; ``runtimePatches`` is the list (keyed by
``manager``) through which other controllers change it per job: Kueue writes its admission there,
and the advisor writes ``terminationGracePeriodSeconds`` for the trainer's replicated job (the
time between SIGTERM and SIGKILL, which a save on SIGTERM must fit). Trainer's rules, which this
module keeps:

* a patch may change only while the TrainJob is suspended (before or after the update) and its
  JobSet has no active pods: the write carries a JSON-patch ``test`` of ``/spec/suspend``, so a job
  that resumed in the meantime is refused by the API server (422) rather than patched;
* the value inside a patch is immutable (CEL ``self == oldSelf``): a larger value replaces the
  advisor's own entry in two writes, removal first;
* the JobSet is rebuilt from the patches while suspended, so the value takes effect at the next
  start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MANAGER", "REPLICATED_JOB", "grace_entry", "patched_grace", "set_grace_ops"]

#: the advisor's key in ``runtimePatches``
MANAGER = "advisor.trainjob-advisor.io/grace-period"
#: the trainer's replicated job in Trainer's runtimes (``constants.Node``)
REPLICATED_JOB = "node"


def grace_entry(seconds: int) -> dict[str, Any]:
    """The advisor's ``runtimePatches`` entry setting the trainer pods' grace period."""
    pod_spec = {"terminationGracePeriodSeconds": int(seconds)}
    job = {"name": REPLICATED_JOB, "template": {"spec": {"template": {"spec": pod_spec}}}}
    return {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def _entry_grace(entry: Mapping[str, Any]) -> int | None:
    jobs = _dig(entry, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
    for job in jobs if isinstance(jobs, list) else ():
        if not isinstance(job, Mapping) or job.get("name") != REPLICATED_JOB:
            continue
        value = _dig(job, "template", "spec", "template", "spec", "terminationGracePeriodSeconds")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def patched_grace(spec: Mapping[str, Any]) -> int | None:
    """The trainer pods' grace period the TrainJob's runtime patches set (the last patch that sets
    one wins, as Trainer merges them in order); None when none does."""
    found = None
    patches = spec.get("runtimePatches")
    for entry in patches if isinstance(patches, list) else ():
        if isinstance(entry, Mapping):
            value = _entry_grace(entry)
            if value is not None:
                found = value
    return found


def set_grace_ops(spec: Mapping[str, Any], seconds: int) -> list[dict[str, Any]] | None:
    """The next JSON patch (guarded by ``test /spec/suspend == true``) towards the advisor's entry
    setting ``seconds``, for a TrainJob spec read fresh: None when the entry already sets it, an
    add when there is no entry of the advisor's, a removal when there is one with another value
    (its value is immutable; the add follows on the next fresh read)."""
    guard = {"op": "test", "path": "/spec/suspend", "value": True}
    raw = spec.get("runtimePatches")
    patches: Sequence[Any] = raw if isinstance(raw, list) else []
    ours = next(
        (i for i, e in enumerate(patches) if isinstance(e, Mapping) and e.get("manager") == MANAGER), None
    )
    if ours is None:
        if isinstance(raw, list):
            return [guard, {"op": "add", "path": "/spec/runtimePatches/-", "value": grace_entry(seconds)}]
        return [guard, {"op": "add", "path": "/spec/runtimePatches", "value": [grace_entry(seconds)]}]
    if _entry_grace(patches[ours]) == int(seconds):
        return None
    return [
        guard,
        {"op": "test", "path": f"/spec/runtimePatches/{ours}/manager", "value": MANAGER},
        {"op": "remove", "path": f"/spec/runtimePatches/{ours}"},
    ]
