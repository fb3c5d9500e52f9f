"""History: what is appended, what is ignored, restarts, bounded shape-preserving thinning."""

from __future__ import annotations

import itertools
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.core.history import History
from advisor.model import ProgressSample


def s(step: int, loss: float | None = 1.0, time: float | None = None, **kw: float) -> ProgressSample:
    return ProgressSample(step=step, loss=loss, time=float(step) if time is None else time, **kw)  # type: ignore[arg-type]


class TestAppend:
    def test_new_steps_are_appended_in_order(self) -> None:
        h = History()
        assert [h.append(s(i)) for i in (1, 2, 3)] == ["appended"] * 3
        assert h.curve().steps == (1.0, 2.0, 3.0)

    def test_repeated_step_is_a_duplicate_and_changes_nothing(self) -> None:
        h = History()
        h.append(s(5, 2.0))
        assert h.append(s(5, 1.0, time=9.0)) == "duplicate"
        assert h.curve().values == (2.0,)

    def test_sample_older_than_the_newest_is_stale(self) -> None:
        h = History()
        h.append(s(10, time=100.0))
        assert h.append(s(11, time=50.0)) == "stale"
        assert len(h) == 1

    def test_sample_without_loss_or_with_negative_step_is_invalid(self) -> None:
        h = History()
        assert h.append(s(1, None)) == "invalid"
        assert h.append(ProgressSample(step=-3, loss=1.0)) == "invalid"
        assert len(h) == 0

    def test_non_finite_loss_is_kept_as_nan_evidence(self) -> None:
        h = History()
        h.append(s(1, float("inf")))
        assert math.isnan(h.curve().values[0])


class TestRestarts:
    def test_step_going_backwards_starts_a_new_segment(self) -> None:
        h = History()
        for i in range(1, 6):
            h.append(s(i, time=float(i)))
        assert h.append(s(3, time=10.0)) == "restart"
        h.append(s(4, time=11.0))
        assert h.curve().segments == (0, 5)
        assert h.restarts == 1


class TestBounds:
    def test_history_never_exceeds_its_bound_and_keeps_ends(self) -> None:
        h = History(max_points=50)
        for i in range(1, 5001):
            h.append(s(i, 10.0 / i))
        assert len(h) <= 50
        steps = h.curve().steps
        assert steps[0] == 1.0 and steps[-1] == 5000.0
        assert list(steps) == sorted(steps)

    def test_recent_part_stays_denser_than_the_old_part(self) -> None:
        h = History(max_points=60)
        for i in range(1, 3001):
            h.append(s(i))
        steps = h.curve().steps
        old_gap = steps[5] - steps[4]
        new_gap = steps[-1] - steps[-2]
        assert new_gap < old_gap

    def test_segment_starts_survive_thinning(self) -> None:
        h = History(max_points=40)
        t = 0.0
        for i in range(1, 200):
            t += 1
            h.append(s(i, time=t))
        for i in range(100, 400):
            t += 1
            h.append(s(i, time=t))
        curve = h.curve()
        seg = curve.segments[1]
        assert curve.steps[seg] == 100.0 and curve.steps[seg - 1] == 199.0


class TestPersistence:
    def test_round_trip_through_json(self) -> None:
        h = History(max_points=40)
        for i in range(1, 120):
            h.append(s(i, 5.0 / i, learning_rate=0.1, epoch=i / 50))
        h.append(s(3, float("nan"), time=500.0))
        data = json.loads(json.dumps(h.to_dict(), allow_nan=False))
        back = History.from_dict(data)
        assert back.curve().steps == h.curve().steps
        assert back.curve().segments == h.curve().segments
        assert back.restarts == 1

    def test_damaged_persisted_history_is_repaired_not_fatal(self) -> None:
        back = History.from_dict({"steps": [1, "x", 3], "losses": [1.0, 2.0], "segments": ["bad", 99]})
        assert back.curve().steps == (1.0, 3.0)
        assert back.curve().segments == (0,)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-5, 400),
            st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
            st.one_of(st.none(), st.floats(-1e3, 1e6)),
        ),
        max_size=300,
    )
)
def test_arbitrary_streams_keep_the_invariants(items: list[tuple[int, float | None, float | None]]) -> None:
    h = History(max_points=32)
    for step, loss, time in items:
        h.append(ProgressSample(step=step, loss=loss, time=time))
    curve = h.curve()
    assert len(curve) <= 32
    assert curve.segments[0] == 0 and list(curve.segments) == sorted(set(curve.segments))
    bounds = [*curve.segments, len(curve)]
    for a, b in itertools.pairwise(bounds):
        seg = curve.steps[a:b]
        assert list(seg) == sorted(seg) and len(set(seg)) == len(seg)
    json.dumps(h.to_dict(), allow_nan=False)


def test_many_restarts_cannot_overflow_the_bound() -> None:
    h = History(max_points=20)
    t = 0.0
    for _ in range(200):
        for step in (10, 11):
            t += 1
            h.append(ProgressSample(step=step, loss=1.0, time=t))
    assert len(h) <= 20
    assert h.curve().segments[0] == 0
