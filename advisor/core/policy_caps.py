"""Every policy's recent disruptive actions, on any job: what its hourly cap counts.

A policy's ``maxActionsPerHour`` spans all the jobs it governs, which a one-job view cannot see;
the core loop sees them all, so it keeps the log and hands each decision a cluster view that
carries it (``ClusterView.policy_action_times``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from advisor.model import ClusterView

__all__ = ["CAP_WINDOW_S", "PolicyActionLog"]

#: how far back the per-policy action log reaches (the cap is per hour)
CAP_WINDOW_S = 3600.0


class PolicyActionLog:
    """policy -> request id -> time of its capped actions (pruned to the cap's window)."""

    def __init__(self) -> None:
        self._actions: dict[str, dict[str, float]] = {}
        #: (snapshot, its recent policy actions, the snapshot with them): see ``with_actions``
        self._capped: tuple[ClusterView, dict[str, tuple[float, ...]], ClusterView] | None = None

    def note(self, policy: str, actions: Iterable[tuple[str, float]]) -> int:
        """Adopt ``(request id, time)`` of ``policy``'s capped actions; one already known (by its
        request id) is not counted twice. Returns how many were new."""
        known = self._actions.setdefault(policy, {})
        added = 0
        for rid, t in actions:
            if rid in known or isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
                continue
            known[rid] = float(t)
            added += 1
        return added

    def recent(self, policy: str, now: float) -> tuple[tuple[str, float], ...]:
        """``(request id, time)`` of ``policy``'s capped actions within the cap's window before
        ``now``, oldest first."""
        window = [
            (t, rid) for rid, t in self._actions.get(policy, {}).items() if now - CAP_WINDOW_S < t <= now
        ]
        return tuple((rid, t) for t, rid in sorted(window))

    def with_actions(self, cluster: ClusterView, now: float) -> ClusterView:
        """The cluster view plus the recent capped actions of every policy."""
        if cluster.policy_action_times or not self._actions:
            return cluster
        horizon = now - CAP_WINDOW_S
        recent: dict[str, tuple[float, ...]] = {}
        for name, actions in self._actions.items():
            for rid in [rid for rid, t in actions.items() if t <= horizon]:
                del actions[rid]
            if actions:
                recent[name] = tuple(sorted(actions.values()))
        # every job of a tick is decided against the same snapshot: the view with the actions is
        # made once per snapshot and set of actions, so that it keeps the per-snapshot index of
        # ``policies.index`` (keyed by identity) too
        capped = self._capped
        if capped is not None and capped[0] is cluster and capped[1] == recent:
            return capped[2]
        view = dataclasses.replace(cluster, policy_action_times=recent)
        self._capped = (cluster, recent, view)
        return view
