"""Hear checkpoint requests from the platform and answer them.

The controller annotates the job's pods ``advisor.trainjob-advisor.io/checkpoint-request: <id>``.
A pod sees its own annotations through a downward-API volume file, which the kubelet refreshes
by writing a new timestamped directory and atomically swapping the ``..data`` symlink to it. So
:meth:`CheckpointRequests.pending` is one ``stat`` of the file per call (the inode changes with
each swap) and a re-read only when the stat changed: cheap enough to call every training step.

Answering means reporting the metrics ``last_checkpoint_step`` and ``last_checkpoint_request``
through the progress channel the cluster already reads (see :mod:`advisor.training.channels`).
Only rank 0 reports; the adapters make every rank save first. A report that does not go out
(throttled, server briefly down) is retried on later calls, never in a tight loop.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from advisor.protocol import (
    CHECKPOINT_REQUEST_ANNOTATION,
    DOWNWARD_API_ANNOTATIONS_PATH,
    SAVE_SECONDS_METRIC,
)
from advisor.training.annotations import AnnotationFormatError, parse_annotations
from advisor.training.channels import AckChannel, channels_from_environment
from advisor.training.distributed import env_rank
from advisor.training.report import Report, ack_metrics

__all__ = ["ENV_ANNOTATIONS_PATH", "CheckpointRequests"]

log = logging.getLogger("advisor.training")

#: overrides the downward-API annotations path (default ``advisor.protocol.DOWNWARD_API_ANNOTATIONS_PATH``)
ENV_ANNOTATIONS_PATH = "ADVISOR_ANNOTATIONS_PATH"

_StatKey = tuple[int, int, int, int]


class CheckpointRequests:
    """The checkpoint-request listener of one training process.

    >>> requests = CheckpointRequests()            # doctest: +SKIP
    >>> if (rid := requests.pending()) is not None:  # doctest: +SKIP
    ...     save(step)
    ...     requests.acknowledge(rid, step)

    Parameters
    ----------
    path:
        The downward-API annotations file. A file that is missing when the listener starts means
        "not on Kubernetes": the listener is disabled (one log line) and ``pending()`` is ``None``.
    channels:
        Where acknowledgements go; default :func:`channels_from_environment` on rank 0, none elsewhere.
    reporter:
        Whether this process reports (rank 0). Default: the ``RANK`` environment variable is 0.
    retry_interval_s:
        The least time between two attempts to deliver a report that did not go out.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        channels: Sequence[AckChannel] | None = None,
        reporter: bool | None = None,
        retry_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        annotation: str = CHECKPOINT_REQUEST_ANNOTATION,
    ) -> None:
        self.path = Path(path or os.environ.get(ENV_ANNOTATIONS_PATH) or DOWNWARD_API_ANNOTATIONS_PATH)
        self.annotation = annotation
        self.reporter = env_rank() == 0 if reporter is None else reporter
        self.retry_interval_s = retry_interval_s
        self._clock = clock
        self._wall_clock = wall_clock
        if channels is None:
            # only rank 0 reports: other ranks must not start channels (e.g. bind the metrics port)
            channels = channels_from_environment() if self.reporter else []
        self._channels: list[AckChannel] = list(channels)
        self._stat: _StatKey | None = None
        self._requested: str | None = None
        self._acknowledged: str | None = None
        self._last_checkpoint_step: int | None = None
        self._undelivered: list[AckChannel] = []
        self._next_retry = 0.0
        self._step: int | None = None
        self._total_steps: int | None = None
        self._epoch: float | None = None
        self._metrics: dict[str, float] = {}
        self._judged_by: str | None = None
        self._warned_missing = False
        self._sigterm_at: float | None = None
        self.enabled = self.path.exists()
        if not self.enabled:
            log.info("checkpoint requests disabled: %s does not exist (not running in a pod?)", self.path)
        elif self.reporter and not self._channels:
            log.warning(
                "checkpoint requests: no progress channel configured; acknowledgements will only be logged"
            )

    # ------------------------------------------------------------------ requests

    def pending(self) -> str | None:
        """The id of a request not yet acknowledged, or ``None``. Also retries an undelivered report."""
        if self._undelivered and self._clock() >= self._next_retry:
            self._deliver(self._undelivered)
        if not self.enabled:
            return None
        self._poll()
        if self._requested and self._requested != self._acknowledged:
            return self._requested
        return None

    def _poll(self) -> None:
        try:
            st = os.stat(self.path)  # follows the ..data symlink: a swap changes the inode
        except OSError as exc:
            if not self._warned_missing:
                log.warning("cannot stat %s (%s); keeping the last request seen", self.path, exc)
                self._warned_missing = True
            return
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self._stat:
            return
        try:
            text = self.path.read_text(encoding="utf-8")
            annotations = parse_annotations(text)
        except (OSError, UnicodeDecodeError, AnnotationFormatError) as exc:
            # a half-written file cannot happen with the kubelet's swap, but a hand-edited one can:
            # keep the previous state and look again on the next change
            log.warning("cannot read checkpoint requests from %s: %s", self.path, exc)
            self._stat = key
            return
        self._stat = key
        value = annotations.get(self.annotation, "").strip()
        if value != (self._requested or ""):
            if value:
                log.info("checkpoint request %s received", value)
            self._requested = value or None

    # ------------------------------------------------------------------ SIGTERM

    def watch_sigterm(self) -> bool:
        """Turn SIGTERM into "save at the next safe point": the handler only notes the time (a
        handler must not save: it runs between two bytecodes, mid-step), and
        :func:`advisor.training.checkpoint_if_requested` saves, reports and exits at the end of
        the step under way. The grace period must cover the rest of that step plus the save
        (the advisor recommends one from the reported ``last_checkpoint_seconds``).

        Only the main thread may install signal handlers; elsewhere this returns ``False`` (and
        the process keeps the default SIGTERM behaviour)."""
        if threading.current_thread() is not threading.main_thread():
            log.warning("SIGTERM saves not installed: signal handlers need the main thread")
            return False

        def _note(signum: int, frame: object) -> None:
            if self._sigterm_at is None:
                self._sigterm_at = self._clock()
                log.warning("SIGTERM: saving a checkpoint at the end of this step, then exiting")

        signal.signal(signal.SIGTERM, _note)
        return True

    @property
    def terminating(self) -> bool:
        """Whether SIGTERM arrived (see :meth:`watch_sigterm`)."""
        return self._sigterm_at is not None

    # ------------------------------------------------------------------ answers

    def acknowledge(self, request_id: str | None, step: int, *, save_seconds: float | None = None) -> bool:
        """Record that a checkpoint of ``step`` is complete on every rank, answering
        ``request_id`` (``None`` for a checkpoint nobody requested, e.g. a periodic one: it still
        updates ``last_checkpoint_step``). Rank 0 reports it; returns whether every channel took it
        now (otherwise it is retried by later calls to :meth:`pending` or :meth:`flush`)."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be a non-negative int, got {step!r}")
        self._last_checkpoint_step = step
        if request_id is not None:
            self._acknowledged = request_id
        if save_seconds is not None and save_seconds >= 0:
            # how long the save took: the advisor sizes the grace period a save on SIGTERM needs
            self._metrics[SAVE_SECONDS_METRIC] = round(float(save_seconds), 3)
        if not self.reporter:
            return True
        log.info(
            "checkpoint at step %d complete%s",
            step,
            f"; acknowledging request {request_id}" if request_id is not None else "",
        )
        return self._deliver(self._channels)

    def update_progress(
        self,
        step: int,
        *,
        total_steps: int | None = None,
        epoch: float | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> None:
        """Remember the latest progress, so that an acknowledgement report also carries it
        (every channel replaces the previous report as a whole)."""
        self._step = int(step)
        if total_steps is not None:
            self._total_steps = int(total_steps)
        if epoch is not None:
            self._epoch = float(epoch)
        if metrics:
            self._metrics.update({k: v for k, v in metrics.items() if isinstance(v, int | float)})

    def judge_by(self, metric: str | None) -> None:
        """Say in every report which eval metric the run keeps its best model by (HF's
        ``metric_for_best_model``), so that the advisor judges the run by it."""
        self._judged_by = str(metric) if metric else None

    def ack_metrics(self, *, numeric: bool = False) -> dict[str, object]:
        """The ack metrics to merge into reports the script sends itself (e.g. its own
        ``update_trainjob_status`` calls), so that they do not erase the acknowledgement."""
        return ack_metrics(self._last_checkpoint_step, self._acknowledged, numeric=numeric)

    def report(self) -> Report:
        return Report(
            time=self._wall_clock(),
            step=self._step,
            total_steps=self._total_steps,
            epoch=self._epoch,
            metrics=dict(self._metrics),
            last_checkpoint_step=self._last_checkpoint_step,
            last_checkpoint_request=self._acknowledged,
            judged_by=self._judged_by,
        )

    def publish(self) -> bool:
        """Send the current report (progress and ack metrics) through every channel now: for a
        loop that has no other progress reporter. Throttled channels decline (``False``) and the
        report is retried later. No-op on ranks other than 0."""
        if not self.reporter:
            return True
        return self._deliver(self._channels)

    def flush(self) -> bool:
        """Try now to deliver a report that did not go out; ``True`` when nothing is left."""
        if self._undelivered:
            self._deliver(self._undelivered)
        return not self._undelivered

    def _deliver(self, channels: Sequence[AckChannel]) -> bool:
        report = self.report()
        failed = []
        for channel in list(channels):
            try:
                ok = channel.publish(report)
            except Exception as exc:  # a channel must never break the training loop
                log.warning("progress channel %s failed: %s", getattr(channel, "name", channel), exc)
                ok = False
            if not ok:
                failed.append(channel)
        self._undelivered = failed
        if failed:
            self._next_retry = self._clock() + self.retry_interval_s
        return not failed

    # ------------------------------------------------------------------ state

    @property
    def last_acknowledged(self) -> str | None:
        return self._acknowledged

    @property
    def last_checkpoint_step(self) -> int | None:
        return self._last_checkpoint_step

    @property
    def delivered(self) -> bool:
        return not self._undelivered

    def close(self) -> None:
        for channel in self._channels:
            try:
                channel.close()
            except Exception as exc:
                log.debug("closing progress channel failed: %s", exc)

    def __enter__(self) -> CheckpointRequests:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
