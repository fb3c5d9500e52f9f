"""Coalesced, rate-limited status writes: per-object interval, global bucket, retries."""

from __future__ import annotations

import time
from typing import Any

from advisor.controller.writer import StatusWriter


class Sink:
    def __init__(self, fail: int = 0) -> None:
        self.writes: list[tuple[str, Any]] = []
        self.fail = fail

    def __call__(self, key: str, payload: Any) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("503")
        self.writes.append((key, payload))


def test_updates_within_the_interval_are_coalesced_to_the_latest() -> None:
    sink = Sink()
    w = StatusWriter(sink, min_interval_s=5, max_per_second=100, workers=0, object_burst=1)
    w.submit("a", 1, observed_at=0)
    assert w.flush(0.0) == 1
    for i in range(2, 6):  # four more renders inside the 5 s window
        w.submit("a", i, observed_at=i * 0.5)
        w.flush(i * 0.5)
    assert sink.writes == [("a", 1)]
    assert w.flush(5.0) == 1
    assert sink.writes == [("a", 1), ("a", 5)]
    assert w.stats.coalesced == 3


def test_a_late_write_does_not_delay_every_later_update() -> None:
    """Updates exactly as often as the interval: one late flush must not shift all later writes."""
    sink = Sink()
    w = StatusWriter(sink, min_interval_s=5, max_per_second=100, workers=0)
    w.submit("a", 0, observed_at=0.0)
    w.flush(2.0)  # written 2 s late (a busy moment)
    latencies = []
    for k in range(1, 20):
        t = 5.0 * k
        w.submit("a", k, observed_at=t)
        w.flush(t)
        latencies.append(0.0 if sink.writes[-1][1] == k else None)
    assert latencies == [0.0] * 19
    # and the long-run rate stays bounded: 100 renders in 10 s give at most burst + 10 s / 5 s writes
    sink.writes.clear()
    for i in range(100):
        w.submit("a", i, observed_at=200 + i / 10)
        w.flush(200 + i / 10)
    assert len(sink.writes) <= 2 + 2


def test_global_rate_is_bounded_and_oldest_data_goes_first() -> None:
    sink = Sink()
    w = StatusWriter(sink, min_interval_s=0, max_per_second=10, burst=10, workers=0)
    for i in range(100):
        w.submit(f"job-{i:03d}", i, observed_at=float(i))
    started = sum(w.flush(t / 10) for t in range(0, 21))  # 2 s of ticks
    assert started <= 10 + 2 * 10 + 1
    assert started >= 25
    assert [k for k, _ in sink.writes[:3]] == ["job-000", "job-001", "job-002"]
    assert w.pending() == 100 - started


def test_a_failed_write_is_retried_after_the_backoff_with_the_newest_data() -> None:
    sink = Sink(fail=1)
    w = StatusWriter(
        sink, min_interval_s=1, max_per_second=100, workers=0, error_backoff_s=3, rng=lambda: 1.0
    )
    w.submit("a", "old", observed_at=0)
    w.flush(0)
    assert sink.writes == [] and w.stats.errors == 1
    w.submit("a", "new", observed_at=0.5)
    assert w.flush(2.0) == 0  # still backing off
    assert w.flush(3.0) == 1
    assert sink.writes == [("a", "new")]


class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class Outage:
    """Every write fails with ``error`` while ``down``; afterwards they succeed."""

    def __init__(self, error: Exception) -> None:
        self.down, self.error, self.writes = True, error, []  # type: ignore[var-annotated]

    def __call__(self, key: str, payload: Any) -> None:
        if self.down:
            raise self.error
        self.writes.append((key, payload))


def _backed_off_through_an_outage(error: Exception) -> tuple[StatusWriter, Outage]:
    """Two objects fail six times in a row (backoffs grow to minutes), then the server returns."""
    sink = Outage(error)
    w = StatusWriter(
        sink, min_interval_s=0, max_per_second=100, workers=0, error_backoff_s=5, rng=lambda: 1.0
    )
    t = 0.0
    for _ in range(6):
        for key in ("a", "b"):
            w.submit(key, t, observed_at=t)
        w.flush(t)
        t += 200.0  # past any backoff: each flush is one more failure
    assert w.stats.errors == 12
    sink.down = False
    return w, sink


def test_the_servers_return_ends_the_backoff_of_objects_that_waited_for_it() -> None:
    """After a long outage the grown backoffs must not keep forecasts stale for minutes more:
    one write that succeeds (or a watch event, ``server_answered``) lets every object that only
    waited out the server be written on the next flush."""
    for error in (ApiError(503), ConnectionError("refused"), TimeoutError("read timed out")):
        w, sink = _backed_off_through_an_outage(error)
        now = 1000.0  # within the backoff of both (their 6th failure was at t=1000)
        w.submit("c", "fresh", observed_at=now)  # a new object: not backing off
        assert w.flush(now) == 1 and sink.writes == [("c", "fresh")]
        assert w.flush(now + 0.1) == 2, f"{error!r}: the others still wait out their backoff"
        w, sink = _backed_off_through_an_outage(error)
        w.server_answered(at=time.time() - 3600)  # an event received before the outage: no proof
        assert w.flush(1000.0) == 0
        w.server_answered(at=time.time() + 1)  # the engine saw a watch event arrive since
        assert w.flush(1000.0) == 2


def test_the_writer_says_since_when_the_server_is_unreachable_and_when_it_answered_again() -> None:
    """What the stall rule reads of the controller's own sight (``ClusterView``): writes failing
    for want of the server make it unreachable from the first failure; its answer ends that and
    marks when sight came back. A write refused for its own reason (422) says nothing of the
    server."""
    before = time.time()
    w, _ = _backed_off_through_an_outage(ConnectionError("refused"))
    assert w.unreachable_since is not None and before <= w.unreachable_since <= time.time()
    assert w.sight_since is None
    answered = time.time() + 1
    w.server_answered(at=answered)
    assert w.unreachable_since is None and w.sight_since == answered
    refused, _ = _backed_off_through_an_outage(ApiError(422))
    assert refused.unreachable_since is None and refused.sight_since is None
    # the objects that failed were forgotten (their jobs deleted) during the outage: the server's
    # answer still ends it (kept, the stall rule judged no silence for the process's life)
    gone, _ = _backed_off_through_an_outage(ConnectionError("refused"))
    gone.forget("a")
    gone.forget("b")
    gone.server_answered(at=time.time() + 1)
    assert gone.unreachable_since is None and gone.sight_since is not None


def test_an_object_refused_for_its_own_reason_keeps_its_backoff() -> None:
    w, sink = _backed_off_through_an_outage(ApiError(422))
    w.submit("c", "fresh", observed_at=1000.0)
    w.flush(1000.0)
    w.server_answered()
    assert w.flush(1000.1) == 0 and sink.writes == [("c", "fresh")]  # no failing write loop


def test_urgent_writes_skip_the_interval_and_report_latency() -> None:
    seen: list[tuple[str, float]] = []
    sink = Sink()
    w = StatusWriter(
        sink, min_interval_s=60, max_per_second=100, workers=2, on_written=lambda k, s: seen.append((k, s))
    )
    w.submit("a", 1, observed_at=10.0)
    w.flush(10.0, wait=True)
    w.write_now("a", 2)
    w.submit("a", 3, observed_at=11.0, urgent=True)
    w.flush(11.0, wait=True)
    w.close()
    assert [p for _, p in sink.writes] == [1, 2, 3]
    assert seen == [("a", 10.0), ("a", 11.0)]


def test_forget_drops_pending_data() -> None:
    sink = Sink()
    w = StatusWriter(sink, min_interval_s=0, max_per_second=100, workers=0)
    w.submit("a", 1, observed_at=0)
    w.forget("a")
    assert w.flush(1) == 0 and sink.writes == []


def test_a_slow_api_server_gets_the_newest_data_not_a_queue_of_stale_writes() -> None:
    import threading
    import time

    gate = threading.Event()
    started: list[tuple[str, Any]] = []

    def slow(key: str, payload: Any) -> None:
        started.append((key, payload))
        gate.wait(5)

    w = StatusWriter(slow, min_interval_s=0, max_per_second=1000, workers=2)
    for i in range(10):  # ten renders of each of five jobs while the API server is stuck
        for j in range(5):
            w.submit(f"job-{j}", i, observed_at=float(i))
        w.flush(float(i))
    assert len(started) == 2  # two in flight; the rest still pending, where newer renders replace them
    assert w.pending() == 5
    gate.set()
    for t in range(10, 200):
        w.flush(float(t), wait=True)
        if w.pending() == 0 and len(started) >= 7:
            break
        time.sleep(0.01)
    w.close()
    assert [p for _, p in started[2:]] == [9] * 5  # each later write carried the newest render
    assert len(started) == 7  # for 50 renders


def test_a_write_the_server_does_not_answer_makes_it_unreachable_before_it_times_out(
    monkeypatch: Any,
) -> None:
    """A platform trial: with the API server hung (connections accepted, nothing answered), the
    first status write failed only at its 30 s read timeout, and until then the jobs' silence was
    theirs: a stall rule with ``for: 1m`` decided to release a healthy job. A write unanswered for
    ``SLOW_WRITE_S`` makes the server unreachable from when it began; its late answer marks when
    sight came back, as after a failed write; a quick write says nothing."""
    import threading

    import advisor.controller.writer as writer_module

    monkeypatch.setattr(writer_module, "SLOW_WRITE_S", 0.2)
    release = threading.Event()

    def hung(key: str, payload: Any) -> None:
        release.wait(5)

    w = StatusWriter(hung, min_interval_s=0, max_per_second=100, workers=1)
    try:
        before = time.time()
        w.submit("a", {"x": 1}, observed_at=before)
        w.flush(before)
        assert w.unreachable_since is None  # in flight, not yet unanswered long
        time.sleep(0.3)
        since = w.unreachable_since
        assert since is not None and before <= since <= before + 0.2
        release.set()
        deadline = time.time() + 5
        while w.sight_since is None and time.time() < deadline:
            time.sleep(0.01)
        assert w.unreachable_since is None and w.sight_since is not None and w.sight_since >= since + 0.2
    finally:
        w.close()
    quick = StatusWriter(Sink(), min_interval_s=0, max_per_second=100, workers=0)
    quick.submit("a", {"x": 1}, observed_at=time.time())
    quick.flush(time.time())
    assert quick.unreachable_since is None and quick.sight_since is None


def test_an_unanswered_write_that_times_out_counts_the_outage_from_its_start() -> None:
    began = time.time()

    def timing_out(key: str, payload: Any) -> None:
        time.sleep(0.05)
        raise TimeoutError("read timed out")

    w = StatusWriter(timing_out, min_interval_s=0, max_per_second=100, workers=0)
    w.submit("a", {"x": 1}, observed_at=began)
    w.flush(began)
    since = w.unreachable_since
    assert since is not None and began <= since <= began + 0.04
