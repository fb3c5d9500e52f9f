"""Every running job's latest progress report, as the core loop's records hold it.

One job's view says only that the job went silent. Whether most running jobs went silent with it
(the trainer's status server down, a poller crash-looping, a network cut between the jobs and the
API server) is a fact about all of them, and only the core loop sees all of them: it hands the
policies this live sight of its records in every cluster view (``ClusterView.report_sight``), and
the stall rule decides what a shared silence means (``policies.shared_silence``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from advisor.core.record import JobRecord
from advisor.model import Phase, latest_report

__all__ = ["RecordSight"]


class RecordSight:
    """``ReportSight`` over the core loop's records, read when asked (never a copy: a job observed
    between two decisions of one tick counts as it stands)."""

    __slots__ = ("_records",)

    def __init__(self, records: Mapping[str, JobRecord]) -> None:
        self._records = records

    def latest_reports(self) -> Iterator[tuple[str, float]]:
        for key, rec in self._records.items():
            if rec.phase is not Phase.RUNNING:
                continue  # a run waiting, suspended or done is silent for its own reason
            latest = latest_report(rec.last_sample_time, rec.unreadable_report_at)
            if latest is not None:
                yield key, latest
