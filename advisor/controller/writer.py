"""Coalesced, rate-limited writes of ``TrainJobForecast`` statuses.

A thousand jobs reporting every 5 s must not become a thousand writes every 5 s plus retries.
Two limits apply. Per object, on average at most one write per ``min_interval_s``, newer renders
replacing the pending one so that only the latest state is written; it is a per-object token
bucket of ``object_burst`` writes, because a strict "interval since the last write" locks onto
any delay: one late write would delay every later update of a job that reports exactly as often.
Globally, a token bucket of ``max_per_second`` with a small burst. Objects whose pending data is
oldest go first, so no object starves. Urgent writes (an action recorded before its mutation)
bypass the per-object limit, and are still counted in the global bucket.

Writes run on a small thread pool (the kubernetes client is blocking); one object never has two
writes in flight, and no more writes are started than there are threads, so that when the API
server is slow, waiting data keeps being coalesced instead of queueing up stale writes. An urgent
``write_now`` waits for a periodic write of the same object already in flight and only then takes
the newest pending data away: an older write can never land after the urgent one (whose full
write would otherwise be overwritten, erasing the ``pendingActions`` recorded before a mutation).
The clock is injected, so the policy is unit-tested without sleeping.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from advisor.controller.retry import Backoff, is_retryable

#: a status write unanswered this long (seconds) says the API server does not answer, before the
#: write times out: a hung server (connections accepted, nothing answered) was noticed only when
#: the first write failed, 30 s on, and meanwhile the jobs' silence counted as theirs: a stall rule
#: with ``for: 1m`` decided to release a healthy job (a platform trial). Writes take milliseconds
SLOW_WRITE_S = 5.0

__all__ = ["StatusWriter", "WriteStats"]

log = logging.getLogger(__name__)

WriteFn = Callable[[str, Mapping[str, Any]], None]


@dataclass
class WriteStats:
    writes: int = 0
    errors: int = 0
    coalesced: int = 0


@dataclass
class _Pending:
    payload: Mapping[str, Any]
    since: float  # when the oldest data in this payload was observed
    urgent: bool = False
    queued: float = 0.0  # wall clock when it was first handed over (for the pipeline metrics)


class StatusWriter:
    def __init__(
        self,
        write: WriteFn,
        *,
        min_interval_s: float = 5.0,
        max_per_second: float = 100.0,
        burst: int | None = None,
        workers: int = 4,
        object_burst: float = 2.0,
        error_backoff_s: float = 5.0,
        max_error_backoff_s: float = 120.0,
        rng: Callable[[], float] = random.random,
        on_written: Callable[[str, float], None] | None = None,
        on_stage: Callable[[str, float], None] | None = None,
    ) -> None:
        if min_interval_s < 0 or max_per_second <= 0:
            raise ValueError("min_interval_s must be >= 0 and max_per_second > 0")
        self._write = write
        self.min_interval_s = float(min_interval_s)
        self.max_per_second = float(max_per_second)
        self.burst = int(burst if burst is not None else max(1, round(max_per_second)))
        self.error_backoff_s = error_backoff_s
        # failed writes of an object back off exponentially with full jitter (the shared policy),
        # retried on a later flush with the newest data rather than in a loop
        self._backoff = Backoff(
            attempts=1, base_s=error_backoff_s, cap_s=max(error_backoff_s, max_error_backoff_s)
        )
        self._rng = rng
        self._failures: dict[str, int] = {}  # consecutive failed writes per object
        self._on_written = on_written
        self._on_stage = on_stage
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when an object's write ends
        self._pending: dict[str, _Pending] = {}
        self.object_burst = max(1.0, float(object_burst))
        self._credit: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)
        self._blocked_until: dict[str, float] = {}  # error backoff
        #: objects whose last write failed transiently (timeout, refused, 429/5xx): waiting out
        #: the API server, not a fault of their own, so the server's return ends their backoff
        self._transient: set[str] = set()
        self._transient_failed_at = float("-inf")  # wall clock of the latest transient failure
        #: wall clock since which writes fail transiently with no answer from the server between
        #: (None: it answers), and of the latest answer after such a break (None: none seen)
        self._unreachable_since: float | None = None
        self._sight_since: float | None = None
        self._in_flight: set[str] = set()
        #: when each write in flight started (``SLOW_WRITE_S``)
        self._started: dict[str, float] = {}
        self._tokens = float(self.burst)
        self._refilled_at: float | None = None
        self._workers = workers
        self._pool = (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tjf-writer") if workers else None
        )
        self.stats = WriteStats()

    # ------------------------------------------------------------------------------- intake
    def submit(
        self, key: str, payload: Mapping[str, Any], *, observed_at: float, urgent: bool = False
    ) -> None:
        """Queue ``payload`` as the next state of ``key``, replacing any pending one."""
        queued = time.time()
        with self._lock:
            old = self._pending.get(key)
            if old is not None:
                self.stats.coalesced += 1
                observed_at = min(observed_at, old.since)
                urgent = urgent or old.urgent
                queued = old.queued
            self._pending[key] = _Pending(payload, observed_at, urgent, queued)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def forget(self, key: str) -> None:
        with self._lock:
            self._pending.pop(key, None)
            self._credit.pop(key, None)
            self._blocked_until.pop(key, None)
            self._failures.pop(key, None)
            self._transient.discard(key)

    def server_answered(self, at: float | None = None) -> None:
        """The API server answers again (a write succeeded, or a watch event arrived): end the
        backoff of every object that was only waiting for it. Without this, after an outage of
        minutes the objects' grown backoffs (up to ``max_error_backoff_s``) kept their forecasts
        stale that long after the server was back. An object whose write was refused for a
        reason of its own (403, 422, ...) keeps its backoff: retrying it sooner cannot help.
        ``at``: when the answer came (a watch event's arrival); one that came before the latest
        transient failure proves nothing about the server now, and is ignored."""
        if not self._transient and self._unreachable_since is None:  # the common case, lock-free
            return
        with self._lock:
            if at is not None and at < self._transient_failed_at:
                return
            for key in self._transient:
                self._blocked_until.pop(key, None)
            self._transient.clear()
            if self._unreachable_since is not None:
                self._sight_since = at if at is not None else time.time()
                self._unreachable_since = None

    @property
    def unreachable_since(self) -> float | None:
        """Since when writes have failed transiently with no answer from the server between, or
        since a write still in flight began, once it has waited ``SLOW_WRITE_S`` for an answer."""
        since = self._unreachable_since
        if self._started:  # nothing in flight: no lock to take
            with self._lock:
                oldest = min(self._started.values(), default=None)
            if oldest is not None and time.time() - oldest >= SLOW_WRITE_S:
                since = oldest if since is None else min(since, oldest)
        return since

    @property
    def sight_since(self) -> float | None:
        """When the server last answered again after such a break (None: none seen)."""
        return self._sight_since

    # ------------------------------------------------------------------------------- output
    def _refill(self, now: float) -> None:
        if self._refilled_at is not None:
            self._tokens = min(
                float(self.burst), self._tokens + (now - self._refilled_at) * self.max_per_second
            )
        self._refilled_at = now

    def _object_tokens(self, key: str, now: float) -> float:
        if self.min_interval_s <= 0:
            return self.object_burst
        tokens, at = self._credit.get(key, (self.object_burst, now))
        return min(self.object_burst, tokens + (now - at) / self.min_interval_s)

    def _due(self, now: float) -> list[str]:
        ready = [
            (p.since, key)
            for key, p in self._pending.items()
            if key not in self._in_flight
            and now >= self._blocked_until.get(key, -1e18)
            and (p.urgent or self._object_tokens(key, now) >= 1.0)
        ]
        ready.sort()
        return [key for _, key in ready]

    def flush(self, now: float, *, wait: bool = False) -> int:
        """Start the writes that are due and allowed now; returns how many were started."""
        batch: list[tuple[str, _Pending]] = []
        with self._lock:
            self._refill(now)
            # never queue more writes than there are workers: what waits stays in ``_pending``,
            # where newer data replaces it, so each write carries the newest state when it starts
            free = self._workers - len(self._in_flight) if self._pool is not None else len(self._pending)
            for key in self._due(now):
                if self._tokens < 1.0 or free <= 0:
                    break
                free -= 1
                self._tokens -= 1.0
                batch.append((key, self._pending.pop(key)))
                self._in_flight.add(key)
                self._credit[key] = (max(0.0, self._object_tokens(key, now) - 1.0), now)
        futures: list[Future[None]] = []
        for key, item in batch:
            if self._pool is None:
                self._run(key, item, now)
            else:
                futures.append(self._pool.submit(self._run, key, item, now))
        if wait:
            for f in futures:
                f.result()
        return len(batch)

    def _run(self, key: str, item: _Pending, started: float) -> None:
        began = time.time()
        if self._on_stage is not None:
            self._on_stage("writer_wait", began - item.queued)
        with self._lock:
            self._started[key] = began
        try:
            self._write(key, item.payload)
        except Exception as exc:
            with self._lock:
                self._started.pop(key, None)
                self.stats.errors += 1
                failures = self._failures.get(key, 0)
                self._failures[key] = failures + 1
                wait = self._backoff.delay(failures, self._rng)
                if is_retryable(exc):
                    self._transient.add(key)
                    failed_at = time.time()
                    self._transient_failed_at = max(self._transient_failed_at, failed_at)
                    if self._unreachable_since is None:
                        # from when the unanswered write began (a hung server's time-out comes
                        # late; ``unreachable_since`` said so from SLOW_WRITE_S on)
                        self._unreachable_since = began
                else:
                    self._transient.discard(key)
                # keep the newest data if something newer arrived meanwhile; retry after a backoff
                if key not in self._pending:
                    self._pending[key] = item
                self._blocked_until[key] = started + wait
                self._in_flight.discard(key)
                self._idle.notify_all()
            log.warning(
                "status write for %s failed (%d in a row; retrying in %.1fs): %s",
                key,
                failures + 1,
                wait,
                exc,
            )
            return
        if self._on_stage is not None:
            self._on_stage("write", time.time() - began)
        with self._lock:
            self._started.pop(key, None)
            answered = time.time()
            if answered - began >= SLOW_WRITE_S and self._unreachable_since is None:
                # the server answers after a break that only this write's wait measured: the
                # jobs' silence counts from now, as after a failed write (``sight_since``)
                self._sight_since = answered
            self.stats.writes += 1
            self._failures.pop(key, None)
            self._blocked_until.pop(key, None)
            self._transient.discard(key)
            self._in_flight.discard(key)
            self._idle.notify_all()
        self.server_answered()
        if self._on_written is not None:
            self._on_written(key, item.since)

    def write_now(self, key: str, payload: Mapping[str, Any], *, timeout_s: float | None = None) -> None:
        """Write synchronously, bypassing the per-object interval (for records that must be durable
        before a mutation). Waits for a write of ``key`` already in flight (``timeout_s``: then
        ``TimeoutError``, nothing written), then supersedes any pending payload and holds the
        object's slot so that no periodic write overlaps it. Raises on failure."""
        with self._idle:
            if not self._idle.wait_for(lambda: key not in self._in_flight, timeout=timeout_s):
                raise TimeoutError(f"a status write of {key} is still in flight")
            self._pending.pop(key, None)  # after the wait: a failed older write re-queues its data
            self._in_flight.add(key)
            self._tokens -= 1.0  # may go negative: the bucket pays it back before the next batch
        try:
            self._write(key, payload)
        finally:
            with self._idle:
                self._in_flight.discard(key)
                self._idle.notify_all()
        with self._lock:
            self.stats.writes += 1

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
