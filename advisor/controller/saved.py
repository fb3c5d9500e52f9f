"""What a controller restart finds: the persisted TrainJobForecast statuses, adopted job by job.

At start-up the controller lists every TrainJobForecast once (``SavedStatuses.load``). Each
status holds its job's core state (history, checkpoints, action log) and the actions still in
flight; they are restored when the job is first seen again (``restore``), so a restart neither
forgets a run's history nor repeats an action half done. Two things cannot wait for the job: the
policies' hourly caps (a restart must not reset ``maxActionsPerHour``, so the capped actions are
counted at once) and the conditions' transition times (kept until the first status is rendered).

A job deleted while no controller ran is never seen again: once the initial listing of the jobs is
in, ``gone`` hands back the statuses whose job it lacks (or lists with another ``uid``), restored,
so that the engine takes them through the deletion path (their actions carried into their
policies' ``fromDeletedJobs``, an ``outcome=dropped`` audit line for what was pending), once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.controller.actuator import Actuator
from advisor.controller.store import ForecastStore, decode_history
from advisor.core import AdvisorCore
from advisor.model import DISRUPTIVE_KINDS, job_key

__all__ = ["JOB_DELETED", "SavedStatuses", "core_state"]

#: the condition a TrainJobForecast gets when its job was found deleted at a restart and its actions
#: were carried into the policies' ``fromDeletedJobs``: a later restart does not count them again
#: (the garbage collector deletes the TrainJobForecast soon after, where one runs)
JOB_DELETED = "JobDeleted"


def _json(raw: object) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None


def core_state(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What ``AdvisorCore.restore`` takes back from a TrainJobForecast's status: its ``coreState``
    with the history stored beside it (None: no state saved, or none readable)."""
    data = _json(status.get("coreState"))
    if not isinstance(data, Mapping):
        return None
    history = status.get("history")
    if "history" not in data and isinstance(history, Mapping):  # stored beside coreState
        data = {**data, "history": decode_history(history)}
    return data


class SavedStatuses:
    """The persisted statuses of the jobs not seen again yet."""

    def __init__(self, store: ForecastStore, core: AdvisorCore, actuator: Actuator) -> None:
        self._store, self._core, self._actuator = store, core, actuator
        #: job key -> its persisted status, until the job is seen again
        self.pending: dict[str, Mapping[str, Any]] = {}
        #: job key -> the uid of the job its TrainJobForecast was written for (its owner)
        self._owners: dict[str, str] = {}
        #: job key -> the kind of that owner (TrainJob, PyTorchJob)
        self._owner_kinds: dict[str, str] = {}
        self._conditions: dict[str, Mapping[str, Any]] = {}
        #: job key -> the status patch that marks a deleted job's TrainJobForecast as carried over
        #: (``gone``; written by the engine once, so that no later restart counts its actions again)
        self.carried: dict[str, dict[str, Any]] = {}

    def load(self, forecasts: Sequence[Mapping[str, Any]]) -> int:
        """Adopt the listed TrainJobForecasts; returns how many carry a status."""
        for obj in forecasts:
            meta = obj.get("metadata") or {}
            status = obj.get("status") or {}
            if not (meta.get("namespace") and meta.get("name")):
                continue
            key = job_key(meta["namespace"], meta["name"])
            generation = meta.get("generation")
            self._store.known(key, generation if isinstance(generation, int) else None)
            ref = next((r for r in meta.get("ownerReferences") or [] if r.get("uid")), None)
            if ref is not None:
                self._owners[key] = str(ref["uid"])
                self._owner_kinds[key] = str(ref.get("kind") or "")
            job = status.get("job")
            if isinstance(job, Mapping) and job.get("uid"):
                # the job the status was written for: the ownerReference stays the first run's
                # when a job of the same name was made again while the controller ran
                self._owners[key] = str(job["uid"])
                if job.get("kind"):
                    self._owner_kinds[key] = str(job["kind"])
            if any(
                isinstance(c, Mapping) and c.get("type") == JOB_DELETED and c.get("status") == "True"
                for c in status.get("conditions") or ()
            ):
                continue  # its actions went to the policies' figures already (``gone``)
            if status:
                self.pending[key] = status
                self._conditions[key] = status
                self._note_capped_actions(status)
        return len(self.pending)

    def _note_capped_actions(self, status: Mapping[str, Any]) -> None:
        """Count the saved job's capped actions toward its policies' hourly caps now, before the
        job is seen again: a restart must not reset ``maxActionsPerHour``."""
        from advisor.core.codec import action_from_dict

        data = _json(status.get("coreState"))
        if not isinstance(data, Mapping):
            return
        actions: dict[str, list[tuple[str, float]]] = {}
        for item in data.get("actions") or []:
            rec = action_from_dict(item)
            if (
                rec is not None
                and rec.kind in DISRUPTIVE_KINDS
                and rec.policy
                and rec.outcome != "recommended"
            ):
                actions.setdefault(rec.policy, []).append((rec.request_id, rec.time))
        for policy, found in actions.items():
            self._core.note_policy_actions(policy, found)

    def restore(self, key: str, uid: str | None = None) -> bool:
        """The job is seen again: hand its core state and in-flight actions back (once). A job of
        the same name but another ``uid`` than the one the status was written for (deleted and
        made again while the controller was down) is a new run: nothing of the old one is its
        own, least of all an action decided for the old one. Returns whether a status was
        restored."""
        status = self.pending.pop(key, None)
        owner = self._owners.pop(key, None)
        self._owner_kinds.pop(key, None)
        if not status:
            return False
        if uid and owner and uid != owner:
            self._conditions.pop(key, None)
            return False
        data = core_state(status)
        if data is not None:
            self._core.restore(key, data)
        pending = _json(status.get("pendingActions"))
        if isinstance(pending, Mapping):
            self._actuator.restore_pending(key, pending)
        return True

    def gone(self, listed: Mapping[str, str | None], kinds: Sequence[str]) -> list[str]:
        """The saved statuses of jobs deleted while no controller ran, restored (core state and
        in-flight actions) for the deletion path, and no longer pending. ``listed``: job key ->
        uid of every job of ``kinds`` that exists (the initial listing); a status whose owner is of
        another kind (one not listed: not watched, or its listing failed) is left pending. A job
        listed with another uid than the status's owner was deleted and made again: the status is
        the deleted run's."""
        out = []
        for key in sorted(self.pending):
            kind, owner = self._owner_kinds.get(key) or "TrainJob", self._owners.get(key)
            if kind not in kinds:
                continue
            if key in listed and (owner is None or not listed[key] or listed[key] == owner):
                continue
            saved = self._conditions.pop(key, None) or {}
            self.restore(key)
            out.append(key)
            self.carried[key] = {
                "pendingActions": "{}",
                "conditions": [
                    *(
                        c
                        for c in saved.get("conditions") or ()
                        if isinstance(c, Mapping) and c.get("type") != JOB_DELETED
                    ),
                    {
                        "type": JOB_DELETED,
                        "status": "True",
                        "reason": "DeletedWhileNoControllerRan",
                        "message": "the job was deleted while no controller ran; its actions are counted "
                        "in its policies' fromDeletedJobs",
                        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    },
                ],
            }
        return out

    def saved_state(self, key: str) -> str | None:
        """The STATE the saved status showed (None: no saved status), without using it up: a
        restarted controller must not announce again a learning state it had announced."""
        status = self._conditions.get(key)
        state = status.get("state") if status is not None else None
        return str(state) if state is not None else None

    def conditions(self, key: str) -> Mapping[str, Any] | None:
        """The saved status whose conditions the job's first rendered status continues (once)."""
        return self._conditions.pop(key, None)
