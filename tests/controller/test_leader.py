"""Leader election on a Lease: one holder at a time, takeover after the lease duration measured on
the candidate's own clock, a deposed leader stops acting before anyone else can start."""

from __future__ import annotations

import copy

import pytest

from advisor.controller.leader import LeaderElector, LeaseConfig
from tests.controller.fakes import LEASE_CONFIG as CFG
from tests.controller.fakes import Clock, FakeLeases


def elector(api: FakeLeases, name: str, clock: Clock, wall: float = 1.8e9) -> LeaderElector:
    return LeaderElector(api, CFG, identity=name, monotonic=clock, wall=lambda: wall)


def test_the_first_candidate_creates_the_lease_and_the_second_stands_by() -> None:
    api, ca, cb = FakeLeases(), Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader()
    assert api.lease is not None and api.lease.spec.holder_identity == "a"


def test_a_standby_takes_over_only_after_the_lease_duration_on_its_own_clock() -> None:
    api, ca, cb = FakeLeases(), Clock(), Clock(50_000.0)  # unrelated monotonic clocks
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    # the leader dies; the standby keeps trying every retry period
    for _ in range(7):
        cb.t += CFG.retry_period_s
        assert not b.try_acquire_or_renew()  # 14 s < 15 s
    cb.t += CFG.retry_period_s
    assert b.try_acquire_or_renew() and b.is_leader()  # 16 s: within lease + retry period
    assert api.lease is not None and api.lease.spec.holder_identity == "b"
    assert api.lease.spec.lease_transitions == 1


def test_a_renewing_leader_is_never_taken_over() -> None:
    api, ca, cb = FakeLeases(), Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.try_acquire_or_renew()
    for _ in range(100):
        ca.t += 2
        cb.t += 2
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()


def test_clock_skew_between_nodes_does_not_shorten_the_lease() -> None:
    """The holder's renewTime comes from another machine's wall clock: a standby whose wall clock
    runs an hour ahead still waits the full duration from when it saw the last renewal."""
    api, ca, cb = FakeLeases(), Clock(), Clock()
    a = elector(api, "a", ca, wall=1.8e9)
    b = elector(api, "b", cb, wall=1.8e9 + 3600)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    cb.t += 10
    assert not b.try_acquire_or_renew()


def test_a_leader_cut_off_from_the_api_stops_acting_before_anyone_can_take_over() -> None:
    api, ca, cb = FakeLeases(), Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    api.down = True  # the leader's renewals fail (a partition: the standby still sees the API)
    ca.t += CFG.renew_deadline_s
    assert not a.try_acquire_or_renew() and not a.is_leader()
    api.down = False
    cb.t += CFG.renew_deadline_s
    assert not b.try_acquire_or_renew()  # the leader stopped at 10 s; b may start only at 15 s
    cb.t += CFG.lease_duration_s - CFG.renew_deadline_s
    assert b.try_acquire_or_renew()


def test_of_two_racing_candidates_exactly_one_wins() -> None:
    api, c = FakeLeases(), Clock()
    old = elector(api, "old", c)
    assert old.try_acquire_or_renew()
    a, b = elector(api, "a", c), elector(api, "b", c)
    assert not a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    c.t += 20
    # both read the expired lease, then both write: the API server's resourceVersion check lets one win
    real_read = api.read_namespaced_lease
    seen = real_read("lease", "sys")
    api.read_namespaced_lease = lambda name, ns: copy.deepcopy(seen)  # type: ignore[method-assign]
    results = [a.try_acquire_or_renew(), b.try_acquire_or_renew()]
    assert sorted(results) == [False, True]


def test_a_released_lease_is_taken_at_once() -> None:
    api, ca, cb = FakeLeases(), Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert not a.is_leader()
    assert b.try_acquire_or_renew()


def test_a_standby_is_in_touch_while_the_api_server_answers_its_reads_of_the_lease() -> None:
    """What a standby's readiness rests on: it can take over only while it can read the Lease."""
    api, ca, cb = FakeLeases(), Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert not b.in_touch()  # never asked yet
    assert a.try_acquire_or_renew() and a.in_touch()  # a 404, then the Lease created: answered
    assert not b.try_acquire_or_renew() and b.in_touch() and not b.is_leader()
    api.down = True
    cb.t += CFG.lease_duration_s - 1
    assert not b.try_acquire_or_renew() and b.in_touch()  # one failed read is within the duration
    cb.t += 1
    assert not b.try_acquire_or_renew() and not b.in_touch()
    api.down = False
    assert a.try_acquire_or_renew()  # the leader renews as soon as it can
    assert not b.try_acquire_or_renew() and b.in_touch()


def test_config_must_order_its_periods() -> None:
    with pytest.raises(ValueError):
        LeaseConfig(lease_duration_s=10, renew_deadline_s=10, retry_period_s=2)
    assert LeaseConfig().takeover_s == 17.0


def test_the_engine_neither_evaluates_nor_writes_nor_acts_without_the_lease() -> None:
    from advisor.controller.engine import Engine, EngineConfig, NotLeader
    from tests.controller.fakes import FakeApi, trainjob

    api = FakeApi()
    leader = [False]
    e = Engine(api, config=EngineConfig(write_interval_s=0, writer_workers=0))
    e.set_gate(lambda: leader[0])
    e.enqueue("job", "ADDED", trainjob(step=10, loss="1.0"))
    assert e.step(1.8e9) == 0 and api.log == []
    with pytest.raises(NotLeader):
        e._write("team-a/llm", {"owner": {}, "status": {}})
    leader[0] = True
    assert e.step(1.8e9) == 1 and api.forecasts
    assert e.actuator.may_act() is True
