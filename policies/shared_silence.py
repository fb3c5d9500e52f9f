"""A silence most running jobs share is the progress path's, not each job's.

A hung collective silences one job. When most of the running jobs stop reporting within the same
short window, the likelier cause is what carries their reports: Kubeflow Trainer's status server
or the RHOAI poller crash-looping, a network cut between the pods and the API server, a webhook
refusing the status writes. Releasing every job then (the stall rule, one by one, up to its
policy's hourly cap) would cost each its unsaved work for a fault in none of them. So the stall
rule holds, says why, and judges each job again once reports return or the silence is no longer
shared.

What counts as shared, with reasons rather than tuned numbers: at least ``SHARED_JOBS`` jobs (two
hangs at once happen; three unrelated ones within one window are not the way to bet), and at least
``SHARED_SHARE`` of the running jobs that report (most of them: a path that silences a few jobs of
many is a few nodes, which the stall rule is there for). Jobs silent together are those whose
latest reports lie within ``window`` of this job's and that have been silent for ``window``
themselves: the stall rule passes half its ``for`` window, when it starts to say ``stalled?``.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.model import ClusterView

__all__ = ["SHARED_JOBS", "SHARED_SHARE", "SharedSilence", "shared_silence"]

#: the fewest jobs whose silence is read as the progress path's (this one included)
SHARED_JOBS = 3
#: the least share of the running jobs that report that must be silent together
SHARED_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class SharedSilence:
    """How many running jobs went silent together with the judged one (it included), of how many
    running jobs that report."""

    silent: int
    reporting: int


def shared_silence(
    cluster: ClusterView, key: str, latest: float, now: float, window: float
) -> SharedSilence | None:
    """The silence job ``key`` (its latest report at ``latest``) shares with the other running
    jobs, when it is shared enough to be the progress path's; None when it is not, or when the
    cluster view does not know the other jobs (``ClusterView.report_sight``)."""
    sight = cluster.report_sight
    if sight is None:
        return None
    silent = reporting = 1  # the judged job, silent (whether or not the sight lists it)
    for other, t in sight.latest_reports():
        if other == key:
            continue
        reporting += 1
        if now - t >= window and abs(t - latest) <= window:
            silent += 1
    if silent >= SHARED_JOBS and silent >= SHARED_SHARE * reporting:
        return SharedSilence(silent=silent, reporting=reporting)
    return None
