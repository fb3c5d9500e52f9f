"""The shared retry policy: only transient errors are retried, with bounded, jittered, growing
waits; the actuator re-reads what it acts on and guards the write with its resourceVersion."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import urllib3

from advisor.controller.actuator import Actuator
from advisor.controller.retry import Backoff, call_with_retries, is_retryable
from advisor.controller.writer import StatusWriter
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, Decision, JobView, Mode, ProgressSample
from tests.controller.fakes import ApiError, FakeApi, trainjob, workload


class Flaky:
    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_transient_statuses_are_retried(status: int) -> None:
    assert is_retryable(ApiError(status))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_permanent_statuses_are_not(status: int) -> None:
    assert not is_retryable(ApiError(status))


def test_a_conflict_is_retried_only_for_a_function_that_reads_afresh() -> None:
    assert is_retryable(ApiError(409), retry_conflicts=True)
    assert not is_retryable(ApiError(409))


def test_transport_errors_are_transient_but_bugs_are_not() -> None:
    assert is_retryable(ConnectionResetError())
    assert is_retryable(urllib3.exceptions.ProtocolError("connection aborted"))
    assert is_retryable(urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"))
    assert not is_retryable(TypeError("bug"))
    assert not is_retryable(KeyError("spec"))


def test_waits_grow_exponentially_with_full_jitter_and_are_capped() -> None:
    b = Backoff(attempts=10, base_s=0.5, cap_s=4.0)
    assert [b.ceiling(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert b.delay(2, rng=lambda: 0.0) == 0.0 and b.delay(2, rng=lambda: 1.0) == 2.0
    assert b.ceiling(10_000) == 4.0  # no overflow


def test_call_with_retries_sleeps_between_attempts_and_gives_up_after_the_bound() -> None:
    slept: list[float] = []
    fn = Flaky(ApiError(503), ApiError(503))
    assert call_with_retries(fn, what="t", sleep=slept.append, rng=lambda: 1.0) == "ok"
    assert fn.calls == 3 and slept == [0.25, 0.5]
    always = Flaky(*[ApiError(503)] * 10)
    with pytest.raises(ApiError):
        call_with_retries(always, what="t", backoff=Backoff(attempts=3), sleep=slept.append)
    assert always.calls == 3


def test_a_permanent_error_is_raised_at_once_without_waiting() -> None:
    slept: list[float] = []
    fn = Flaky(ApiError(403))
    with pytest.raises(ApiError):
        call_with_retries(fn, what="t", sleep=slept.append)
    assert fn.calls == 1 and slept == []


# ------------------------------------------------------------------------------- the actuator
NOW = 1_800_000_000.0
KEY = "team-a/llm"
WL = "team-a/trainjob-llm-abcde"
RELEASE = Action(ActionKind.RELEASE_QUOTA, "plateau", "no 1% gain in 2h")


def _actuator(api: FakeApi, slept: list[float]) -> tuple[Actuator, AdvisorCore]:
    core = AdvisorCore()
    core.observe(KEY, ProgressSample(step=10, loss=1.0, time=NOW - 60), now=NOW - 60)
    return Actuator(api, core, lambda key: None, sleep=slept.append), core


def _release(act: Actuator, core: AdvisorCore, api: FakeApi) -> str:
    from advisor.controller.kueue import parse_workload

    decision = Decision(job=KEY, policy="p", mode=Mode.APPLY, actions=(RELEASE,))
    job = core.view(JobView(namespace="team-a", name="llm", gpus=16))
    act.execute(job, decision, body=trainjob(), workload=parse_workload(api.workloads[WL]), now=NOW)
    rec = core.record(KEY)
    assert rec is not None
    return rec.actions[-1].outcome


def test_a_competing_write_between_read_and_patch_is_a_conflict_then_a_fresh_read() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    api.workloads[WL]["metadata"]["resourceVersion"] = "7"
    real_get = api.kueue.get_workload
    raced = []

    def get_then_someone_writes(ns: str, name: str) -> Any:
        wl = real_get(ns, name)
        if not raced:  # another writer changes the Workload right after our first read
            raced.append(True)
            api.workloads[WL]["metadata"]["resourceVersion"] = "8"
        return wl

    api.kueue.get_workload = get_then_someone_writes  # type: ignore[method-assign]
    slept: list[float] = []
    act, core = _actuator(api, slept)
    assert _release(act, core, api) == "done"
    assert len(slept) == 1  # one conflict, one backoff, then success on a fresh read
    assert api.mutations() == [("set_active", "team-a", "trainjob-llm-abcde", False)]


def test_an_already_inactive_workload_is_not_written_again() -> None:
    api = FakeApi()
    api.workloads[WL] = workload(active=False)
    act, core = _actuator(api, [])
    assert _release(act, core, api) == "done"
    assert api.mutations() == []


def test_a_forbidden_release_fails_at_once() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    slept: list[float] = []

    def forbidden(*_: Any, **__: Any) -> Any:
        raise ApiError(403, "Forbidden")

    api.kueue.set_active = forbidden  # type: ignore[method-assign]
    act, core = _actuator(api, slept)
    # no permission cannot be retried away within the call: a failure at once, tried again after
    # the failures' backoff (a minute, then two, ...: ``policies.retries``), not held an hour as
    # impossible on the job: the permission is the installation's, and comes back with the act
    # role (a platform trial's preemption victim lost 8,456 steps waiting out that hour)
    assert _release(act, core, api) == "failed"
    assert slept == []


def test_a_refused_action_is_a_failed_write_to_the_metrics_and_a_warning_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A platform trial: a release refused with a 403 (the act role unbound) showed only as a
    Warning Event on the job; ``api_write_errors_total`` had no sample (nothing counted it) and the
    log said it at INFO. Alerting reads the counter and the log level."""
    from prometheus_client import CollectorRegistry

    from advisor.controller.metrics import Metrics

    api = FakeApi()
    api.workloads[WL] = workload()

    def forbidden(*_: Any, **__: Any) -> Any:
        raise ApiError(403, "Forbidden")

    api.kueue.set_active = forbidden  # type: ignore[method-assign]
    registry = CollectorRegistry()
    act, core = _actuator(api, [])
    act.metrics = Metrics(registry)
    with caplog.at_level("WARNING", logger="advisor"):
        assert _release(act, core, api) == "failed"
    assert (
        registry.get_sample_value("trainjob_advisor_api_write_errors_total", {"kind": "release-quota"}) == 1
    )
    assert any(r.levelname == "WARNING" and "release-quota request" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------- the writer
def test_an_urgent_write_waits_for_the_older_write_in_flight() -> None:
    """The reproduced defect: a periodic write in flight when ``write_now`` is called must land
    first, so that the urgent record (pendingActions before a mutation) is the last word."""
    landed: list[str] = []
    release = threading.Event()
    started = threading.Event()

    def write(key: str, payload: Any) -> None:
        if payload == "periodic":
            started.set()
            assert release.wait(5)
        landed.append(payload)

    w = StatusWriter(write, min_interval_s=0, max_per_second=100, workers=2)
    w.submit("a", "periodic", observed_at=0)
    w.flush(0)
    assert started.wait(5)
    urgent = threading.Thread(target=w.write_now, args=("a", "urgent"))
    urgent.start()
    urgent.join(0.2)
    assert urgent.is_alive() and landed == []  # it waits for the write in flight
    release.set()
    urgent.join(5)
    assert landed == ["periodic", "urgent"]
    w.close()


def test_an_older_failed_write_does_not_resurface_after_the_urgent_one() -> None:
    landed: list[str] = []
    release = threading.Event()
    started = threading.Event()

    def write(key: str, payload: Any) -> None:
        if payload == "periodic":
            started.set()
            release.wait(5)
            raise ApiError(503)
        landed.append(payload)

    w = StatusWriter(write, min_interval_s=0, max_per_second=100, workers=2, error_backoff_s=0.0)
    w.submit("a", "periodic", observed_at=0)
    w.flush(0)
    assert started.wait(5)
    urgent = threading.Thread(target=w.write_now, args=("a", "urgent"))
    urgent.start()
    release.set()
    urgent.join(5)
    w.flush(100.0, wait=True)
    assert landed == ["urgent"]  # the failed older data was superseded, never written after it
    assert w.pending() == 0
    w.close()


def test_an_urgent_write_times_out_rather_than_waiting_forever() -> None:
    release = threading.Event()
    started = threading.Event()

    def write(key: str, payload: Any) -> None:
        started.set()
        release.wait(5)

    w = StatusWriter(write, min_interval_s=0, max_per_second=100, workers=1)
    w.submit("a", "periodic", observed_at=0)
    w.flush(0)
    assert started.wait(5)
    with pytest.raises(TimeoutError):
        w.write_now("a", "urgent", timeout_s=0.1)
    release.set()
    w.close()


def test_repeated_write_failures_back_off_exponentially() -> None:
    def fail(key: str, payload: Any) -> None:
        raise ApiError(503)

    w = StatusWriter(
        fail, min_interval_s=0, max_per_second=1000, workers=0, error_backoff_s=1.0, rng=lambda: 1.0
    )
    w.submit("a", 1, observed_at=0)
    t, starts = 0.0, []
    while t < 40:
        if w.flush(t):
            starts.append(t)
        t = round(t + 0.5, 1)
    assert starts == [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]


def test_every_request_has_a_timeout_so_a_silent_server_cannot_hang_a_write() -> None:
    """A server that accepts the connection and never answers (a SIGSTOPped kube-apiserver)."""
    import socket
    import time

    from kubernetes import client

    from advisor.controller.api import with_request_timeout

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{server.getsockname()[1]}"
        cfg.retries = False
        api = with_request_timeout(client.ApiClient(cfg), (1.0, 0.3))
        assert with_request_timeout(api, (9.0, 9.0)) is api  # idempotent: the first timeout stays
        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.HTTPError) as err:
            client.CoreV1Api(api).list_namespace()
        # the read timeout ended it, not a bound of this test: without one the call never returns
        # (a generous bound only, since a loaded machine delays the 0.3 s timer by many seconds)
        assert isinstance(err.value, urllib3.exceptions.ReadTimeoutError) or isinstance(
            getattr(err.value, "reason", None), urllib3.exceptions.ReadTimeoutError
        ), repr(err.value)
        assert time.monotonic() - started < 120.0
        assert is_retryable(err.value)
    finally:
        server.close()
