"""Listing the AdvisorPolicies beside kopf's watch of them: the end of a failed start-up listing's
wait, and an informer's resync.

kopf's watch delivers the policies one event each and says neither when it has delivered them all
nor that there are none, so only a whole listing ends the wait of a start-up whose listing failed
(``Engine.policies_unknown``). And a watch can die unseen: with the AdvisorPolicy CRD installed
after the controller started, kopf sometimes never watched the new resource (its scan ran before
the API server served it; 1 of 3 trials on a real API server), and an edit of the policy to
Recommend went unseen while the policy released a job in Apply. So the policies are listed every
``RESYNC_S`` (``resync_policies``, a thread) and the engine applies what a listing shows that no
event delivered (``PolicySync.missed``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from advisor.protocol import GROUP, VERSION

__all__ = ["RELIST_PAUSES_S", "RESYNC_S", "PolicySync", "custom_policies", "resync_policies"]

log = logging.getLogger(__name__)

#: seconds between the tries of a policy listing that failed at start-up (the last one repeats)
RELIST_PAUSES_S: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0)
#: seconds between two listings of the AdvisorPolicies once one succeeded
RESYNC_S = 60.0


class _Queue(Protocol):
    def enqueue(self, kind: str, event_type: str, body: Any) -> None: ...


def custom_policies(api: Any) -> Any:
    """The AdvisorPolicies, as the API server lists them (``api``: a ``ClusterApi``)."""
    return api.custom.list_cluster_custom_object(GROUP, VERSION, "advisorpolicies")


def resync_policies(
    engine: _Queue,
    fetch: Callable[[], Any],
    stop: threading.Event,
    *,
    listed: bool,
    pauses: Sequence[float] = RELIST_PAUSES_S,
    period_s: float = RESYNC_S,
) -> None:
    """List the AdvisorPolicies every ``period_s`` and queue each listing (a ``policyresync`` event,
    with the time it was begun) until ``stop``; while none has succeeded yet (``listed`` False: the
    start-up listing failed), after ``pauses`` instead, saying so at the first tries and then at
    every 20th (a missing CRD stays missing)."""
    tries = 0
    while not stop.wait(period_s if listed else pauses[min(tries, len(pauses) - 1)]):
        started = time.time()
        try:
            items = fetch().get("items") or []
        except Exception as exc:
            tries += 1
            if listed:
                log.debug("listing AdvisorPolicies failed: %s", exc)
            elif tries <= len(pauses) or tries % 20 == 0:
                log.warning(
                    "listing AdvisorPolicies failed again (try %d): %s; no job is acted on until it succeeds",
                    tries,
                    getattr(exc, "reason", None) or exc,
                )
            continue
        tries, listed = 0, True
        engine.enqueue("policyresync", "ADDED", {"items": items, "listedAt": started})


class PolicySync:
    """What the policy events applied, for a listing to be compared with."""

    def __init__(self) -> None:
        #: each policy's (uid, generation) as last applied
        self.seen: dict[str, tuple[Any, Any]] = {}
        #: when the last policy event applied was received (wall clock)
        self.event_at = -math.inf
        #: the policies the last listing lacked
        self.missing: set[str] = set()

    def applied(self, event_type: str, body: Mapping[str, Any], *, received: float) -> None:
        meta = body.get("metadata") or {}
        name = str(meta.get("name"))
        self.event_at = received
        if event_type == "DELETED":
            self.seen.pop(name, None)
        else:
            self.seen[name] = (meta.get("uid"), meta.get("generation"))

    def missed(
        self, items: Sequence[Mapping[str, Any]], listed_at: float
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """The events a listing begun at ``listed_at`` shows no watch delivered: a policy new or
        changed (another uid, or a higher ``generation``: a spec edit; status writes do not bump
        it) as ADDED / MODIFIED, one absent from this listing and the one before as DELETED (one
        listing may predate its creation). None for a listing begun before the last event applied
        was received: it may be older than that event, and the next listing will do."""
        if listed_at < self.event_at:
            return []
        out: list[tuple[str, Mapping[str, Any]]] = []
        names: set[str] = set()
        for item in items:
            meta = item.get("metadata") or {}
            name = str(meta.get("name"))
            names.add(name)
            seen = self.seen.get(name)
            generation = meta.get("generation")
            if (
                seen is None
                or seen[0] != meta.get("uid")
                or (isinstance(generation, int) and (not isinstance(seen[1], int) or generation > seen[1]))
            ):
                out.append(("ADDED" if seen is None else "MODIFIED", item))
        missing = set(self.seen) - names
        out += [("DELETED", {"metadata": {"name": name}}) for name in sorted(missing & self.missing)]
        self.missing = missing - self.missing
        return out
