"""The save-window AdmissionCheck: Kueue starts a workload only after the advisor has looked at it.

A TrainJob's grace period can change only while it is suspended (Trainer's ``runtimePatches``), and
a job that fits the quota at once is admitted within a scheduling cycle of its creation: the
advisor, which learns of the job from a watch event, races Kueue and usually loses, so the job's
first eviction gets Kubernetes' 30 s however long its save takes. Kueue's two-phase admission
closes that race: a ClusterQueue that lists an AdmissionCheck (``spec.admissionChecksStrategy``)
reserves quota for a workload and admits it only once every check's state is ``Ready``.

The advisor is the controller of the AdmissionChecks whose ``spec.controllerName`` is its own
(``run --save-window-controller-name``, default ``CONTROLLER_NAME``; each namespace shard needs its
own, which the chart derives from the release). It marks them ``Active`` (Kueue holds a
ClusterQueue whose check is not active), and after it has evaluated a job whose Workload has such a
check ``Pending`` with quota reserved (and carried out what the policies decided, a grace period
for the first start included), it sets the check ``Ready``. It never holds a workload back or
rejects one: the check decides nothing (the policies do); it only orders the advisor's look before
the start. If the advisor is down, the workloads of those queues wait, which is what the platform
engineer chose by listing the check (the README says how to remove it).

Like any AdmissionCheck controller, it answers every Workload whose ClusterQueue lists one of its
checks, wherever that Workload is: a queue may serve namespaces the controller does not watch
(``run --namespace``), and a workload there would otherwise wait forever with its quota held. The
advisor looks at nothing there, so there is nothing to save: ``unlooked`` says so, and the check is
set ``Ready`` at once with that message, logged and posted as an Event on the Workload. The same
goes for a workload of a kind the advisor does not judge. A controller that watches only some
namespaces learns of the others' Workloads from ``UnwatchedWorkloads``, a cluster-wide list and
watch of its own, which passes on only those that wait on a check.

Two controllers that share a controllerName would each let the other's workloads through without a
look. The ``Active`` condition's message names the namespaces of the advisor that set it: one that
finds another advisor's there rewrites it once (its own namespaces changed since, say), and if it
is rewritten again, warns that another advisor answers the same checks.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from advisor.controller.kueue import KUEUE_GROUP, Workload, parse_workload
from advisor.model import ActionKind, Decision, JobView
from policies.rules.base import last_record

log = logging.getLogger(__name__)

__all__ = [
    "CONTROLLER_NAME",
    "KIND_NOT_JUDGED",
    "NAMESPACE_NOT_WATCHED",
    "NamespaceScope",
    "SaveWindowCheck",
    "UnwatchedWorkloads",
    "ready_message",
    "unlooked",
]

#: ``spec.controllerName`` of the AdmissionChecks the advisor answers
CONTROLLER_NAME = "trainjob-advisor.io/save-window"
_JSON_PATCH = "application/json-patch+json"

#: how the ``Active`` condition's message of this version begins (earlier ones named no namespaces)
_ACTIVE_PREFIX = "trainjob-advisor (watching "

#: the Event reasons of a check set ``Ready`` without the advisor's look
NAMESPACE_NOT_WATCHED = "NamespaceNotWatched"
KIND_NOT_JUDGED = "KindNotJudged"


def _matches(namespace: str, pattern: str) -> bool:
    """kopf's reading of one ``--namespace`` value: comma-separated globs, the first inclusive one
    matching first (``*`` implied when the first excludes), ``!glob`` excluding, a later inclusive
    glob taking back what an exclusion took from the first match."""
    globs = [g.strip() for g in pattern.split(",")]
    if not globs or globs[0].startswith("!"):
        globs.insert(0, "*")
    matches = first = fnmatch.fnmatchcase(namespace, globs[0])
    for glob in globs[1:]:
        if glob.startswith("!"):
            matches = matches and not fnmatch.fnmatchcase(namespace, glob.lstrip("!"))
        else:
            matches = matches or (first and fnmatch.fnmatchcase(namespace, glob))
    return matches


class NamespaceScope:
    """The namespaces the controller watches, as ``run --namespace`` names them (kopf's patterns:
    a name, or globs); none named: every namespace."""

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        self.patterns = tuple(patterns)

    def covers(self, namespace: str) -> bool:
        return not self.patterns or any(_matches(namespace, p) for p in self.patterns)

    def __str__(self) -> str:
        return ", ".join(self.patterns) if self.patterns else "every namespace"


def unlooked(
    namespace: str, owner_kind: str | None, scope: NamespaceScope, judged_kinds: Collection[str]
) -> tuple[str, str] | None:
    """Why the check lets a workload start without the advisor's look, as ``(Event reason,
    message)``; None when the advisor looks first (a job of a kind it judges, in a namespace it
    watches), and the check waits for that look.

    A namespace the controller does not watch comes first: the advisor sees nothing of a job there,
    whatever its kind, so it has nothing to save, and holding the workload would hold its quota
    for good (no look ever comes)."""
    if not scope.covers(namespace):
        return (
            NAMESPACE_NOT_WATCHED,
            f"trainjob-advisor: namespace {namespace} not watched by this advisor (it watches {scope}): "
            "nothing to save",
        )
    if owner_kind not in judged_kinds:
        return KIND_NOT_JUDGED, f"trainjob-advisor does not judge {owner_kind or 'ownerless'} workloads"
    return None


def ready_message(decision: Decision, job: JobView) -> str:
    """What the check says when it lets a workload start: that the advisor looked, and the grace
    period it set for this start, if it set one.

    The grace period may have been written by an earlier evaluation than the one that settles the
    check (the first settle refused on a Workload changed meanwhile, say): the message names the
    one the job's action log records as written while the job waited for this start, not only
    this decision's, so what the check says does not depend on which evaluation got through."""
    graces = [a.reason for a in decision.actions if a.kind is ActionKind.SET_GRACE_PERIOD]
    if not graces:
        done = last_record(job, {ActionKind.SET_GRACE_PERIOD})
        if done is not None and done.outcome == "done" and done.time >= (job.phase_since or 0.0):
            graces = [done.reason]
    return "trainjob-advisor looked at the job before its start" + (f": {graces[0]}" if graces else "")


def _now_iso() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SaveWindowCheck:
    """The advisor's side of its Kueue AdmissionChecks (see the module docstring).

    ``custom`` is a ``kubernetes.client.CustomObjectsApi`` (or anything with its methods);
    ``version`` the Kueue API version the server serves; ``controller_name`` the
    ``spec.controllerName`` of the checks it answers; ``scope`` the namespaces the controller
    watches; ``events`` what posts an Event (``ClusterApi.create_event``), None: none posted."""

    def __init__(
        self,
        custom: Any,
        version: str,
        *,
        controller_name: str = CONTROLLER_NAME,
        scope: NamespaceScope | None = None,
        events: Any = None,
    ) -> None:
        self.custom = custom
        self.version = version
        self.controller_name = controller_name
        self.scope = scope if scope is not None else NamespaceScope()
        self.events = events
        #: names of the AdmissionChecks with ``controller_name``
        self.ours: set[str] = set()
        self.marked_ready = 0
        #: checks set Ready without a look (see ``let_through``)
        self.unlooked = 0
        self._warned_namespaces: set[str] = set()
        #: the Active condition's message: which advisor answers the check
        self.active_message = f"{_ACTIVE_PREFIX}{self.scope}) looks at each workload before it starts" + (
            "; a workload of another namespace goes at once" if self.scope.patterns else ""
        )
        #: checks whose Active message another advisor had set, rewritten once by this one
        self._rewritten: set[str] = set()
        self._shared_warned: set[str] = set()

    # --------------------------------------------------------------------- AdmissionChecks
    def on_admission_check(self, event_type: str, body: Mapping[str, Any]) -> None:
        """Track an AdmissionCheck; mark one of ours ``Active`` when it is not (yet)."""
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            return
        controller = (body.get("spec") or {}).get("controllerName")
        if event_type == "DELETED" or controller != self.controller_name:
            self.ours.discard(name)
            return
        self.ours.add(name)
        generation = meta.get("generation")
        active = next(
            (
                cond
                for cond in (body.get("status") or {}).get("conditions") or []
                if isinstance(cond, Mapping)
                and cond.get("type") == "Active"
                and cond.get("status") == "True"
                and cond.get("observedGeneration") == generation
            ),
            None,
        )
        if active is not None:
            said = str(active.get("message") or "")
            if said == self.active_message or not said.startswith(_ACTIVE_PREFIX):
                return  # ours, or set by an earlier version (which named no namespaces)
            if name in self._rewritten:
                # set over ours after we set it over another's: two advisors answer this check
                if name not in self._shared_warned:
                    self._shared_warned.add(name)
                    log.warning(
                        "AdmissionCheck %s (controllerName %s) is answered by another trainjob-advisor "
                        "too, whose Active condition says %r; each of them lets the other's workloads "
                        "through without a look: give each release (namespace shard) a check with a "
                        "controllerName of its own (--save-window-controller-name)",
                        name,
                        self.controller_name,
                        said,
                    )
                return
            self._rewritten.add(name)
        condition: dict[str, Any] = {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": self.active_message,
            "lastTransitionTime": _now_iso(),
        }
        if isinstance(generation, int):
            condition["observedGeneration"] = generation
        try:
            self.custom.patch_cluster_custom_object_status(
                KUEUE_GROUP, self.version, "admissionchecks", name, {"status": {"conditions": [condition]}}
            )
        except Exception as exc:  # no permission, gone: Kueue shows the queue inactive, we say why
            log.warning("could not mark AdmissionCheck %s Active: %s", name, exc)

    # --------------------------------------------------------------------------- Workloads
    def pending(self, workload: Workload | None) -> list[tuple[int, str]]:
        """``(index, name)`` of our checks that wait on this workload: ``Pending`` with quota
        reserved (Kueue evaluates checks only then, and resets them to ``Pending`` on eviction)."""
        if workload is None or not workload.quota_reserved or workload.finished or not self.ours:
            return []
        return [
            (i, name)
            for i, (name, state) in enumerate(workload.admission_checks)
            if name in self.ours and state == "Pending"
        ]

    def settle(self, workload: Workload | None, why: str) -> int:
        """Set our pending checks on ``workload`` ``Ready`` (after the advisor acted on its job).

        One JSON patch of the workload's status, each entry guarded by a ``test`` of its name and
        state, so a check Kueue reset or reordered meanwhile is left for the next event (409/422
        come back as a failed write; the next Workload event brings the job round again).
        Returns the checks set."""
        checks = self.pending(workload)
        if not checks or workload is None:
            return 0
        ops: list[dict[str, Any]] = []
        now = _now_iso()
        for i, name in checks:
            base = f"/status/admissionChecks/{i}"
            ops += [
                {"op": "test", "path": f"{base}/name", "value": name},
                {"op": "test", "path": f"{base}/state", "value": "Pending"},
                {"op": "replace", "path": f"{base}/state", "value": "Ready"},
                {"op": "replace", "path": f"{base}/message", "value": why[:1024]},
                {"op": "replace", "path": f"{base}/lastTransitionTime", "value": now},
            ]
        try:
            self.custom.patch_namespaced_custom_object_status(
                KUEUE_GROUP,
                self.version,
                workload.namespace,
                "workloads",
                workload.name,
                ops,
                _content_type=_JSON_PATCH,
            )
        except Exception as exc:
            log.warning(
                "could not set the save-window check Ready on Workload %s/%s: %s",
                workload.namespace,
                workload.name,
                exc,
            )
            return 0
        self.marked_ready += len(checks)
        return len(checks)

    def let_through(self, workload: Workload | None, judged_kinds: Collection[str]) -> int:
        """Set our pending checks on ``workload`` ``Ready`` without a look when ``unlooked`` says
        the advisor has nothing to look at (a namespace it does not watch, a kind it does not
        judge); else leave them for the evaluation of the workload's job. What was done without a
        look is logged and posted as an Event on the Workload. Returns the checks set."""
        if workload is None:
            return 0
        verdict = unlooked(workload.namespace, workload.owner_kind, self.scope, judged_kinds)
        checks = self.pending(workload)
        if verdict is None or not checks:
            return 0
        reason, message = verdict
        done = self.settle(workload, message)
        if done:
            self.unlooked += done
            self._tell(workload, [name for _, name in checks], reason, message)
        return done

    def _tell(self, workload: Workload, checks: list[str], reason: str, message: str) -> None:
        key = f"{workload.namespace}/{workload.name}"
        what = f"AdmissionCheck {', '.join(checks)} set Ready without a look: {message}"
        if reason == NAMESPACE_NOT_WATCHED and workload.namespace not in self._warned_namespaces:
            self._warned_namespaces.add(workload.namespace)
            log.warning(
                "Workload %s: %s (a ClusterQueue that lists the check serves a namespace this "
                "controller does not watch: list the check only on queues of watched namespaces, "
                "or watch the namespace)",
                key,
                what,
            )
        else:
            log.info("Workload %s: %s", key, what)
        if self.events is None:
            return
        involved = {
            "apiVersion": f"{KUEUE_GROUP}/{self.version}",
            "kind": "Workload",
            "name": workload.name,
            "namespace": workload.namespace,
            "uid": workload.uid,
        }
        try:
            self.events.create_event(
                involved,
                reason=reason,
                message=what,
                warning=reason == NAMESPACE_NOT_WATCHED,
                # once per state of the Workload, even from a controller restarted in between
                dedupe_key=f"save-window/{workload.resource_version}",
            )
        except Exception as exc:  # an Event is best effort: the check's message says it too
            log.warning("event %s on Workload %s not posted: %s", reason, key, exc)


class UnwatchedWorkloads:
    """The Workloads of the namespaces the controller does not watch, for the check only.

    kopf watches only the namespaces given to ``run --namespace``; a ClusterQueue that lists the
    check may serve others. This lists and watches Workloads in every namespace (the controller's
    reads are cluster-wide) and ``offer``s, as ``(event type, object)``, those of namespaces outside
    ``scope`` that wait on an AdmissionCheck (quota reserved, a check ``Pending``): the engine sets
    ours ``Ready`` (``SaveWindowCheck.let_through``). Nothing else of them reaches the engine.

    ``run`` loops until ``stop`` is set: a list, then a watch from its resourceVersion, resumed
    where it ended, listed again when the server says the version is gone (410) and after
    ``retry_s`` on any other failure. ``watch`` makes a ``kubernetes.watch.Watch`` (tests pass a
    fake)."""

    def __init__(
        self,
        custom: Any,
        version: str,
        scope: NamespaceScope,
        offer: Callable[[str, Mapping[str, Any]], None],
        *,
        timeout_s: int = 240,
        retry_s: float = 5.0,
        watch: Callable[[], Any] | None = None,
    ) -> None:
        self.custom = custom
        self.version = version
        self.scope = scope
        self.offer = offer
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self._watch = watch

    def wanted(self, body: Mapping[str, Any]) -> bool:
        meta = body.get("metadata") or {}
        if self.scope.covers(str(meta.get("namespace") or "")):
            return False  # kopf brings it to the engine
        wl = parse_workload(body)
        return wl.quota_reserved and not wl.finished and any(s == "Pending" for _, s in wl.admission_checks)

    def run(self, stop: threading.Event) -> None:
        version: str | None = None
        while not stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._follow(version, stop)
            except Exception as exc:
                if getattr(exc, "status", None) == 410:
                    version = None  # too old to resume: list again
                    continue
                log.warning("watching the Workloads of unwatched namespaces: %s; retrying", exc)
                stop.wait(self.retry_s)

    def _list(self) -> str:
        listing = self.custom.list_cluster_custom_object(KUEUE_GROUP, self.version, "workloads")
        for item in listing.get("items") or []:
            if isinstance(item, Mapping) and self.wanted(item):
                self.offer("ADDED", item)
        return str((listing.get("metadata") or {}).get("resourceVersion") or "")

    def _follow(self, version: str, stop: threading.Event) -> str:
        if self._watch is None:
            from kubernetes import watch

            w = watch.Watch()
        else:
            w = self._watch()
        kwargs: dict[str, Any] = {
            "timeout_seconds": self.timeout_s,
            "allow_watch_bookmarks": True,
            # the controller's requests time out after 30 s of silence; a watch is quiet longer
            "_request_timeout": (5.0, self.timeout_s + 30.0),
        }
        if version:
            kwargs["resource_version"] = version
        for event in w.stream(
            self.custom.list_cluster_custom_object, KUEUE_GROUP, self.version, "workloads", **kwargs
        ):
            body = event.get("raw_object") or event.get("object")
            if isinstance(body, Mapping):
                version = str((body.get("metadata") or {}).get("resourceVersion") or version)
                if event.get("type") in ("ADDED", "MODIFIED") and self.wanted(body):
                    self.offer(str(event["type"]), body)
            if stop.is_set():
                w.stop()
                break
        return version
