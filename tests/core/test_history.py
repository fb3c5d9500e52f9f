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

    def test_the_readers_bound_wins_over_the_stored_one_and_thins_what_exceeds_it(self) -> None:
        h = History(max_points=300)
        for i in range(1, 250):
            h.append(s(i, 5.0 / i))
        h.append(s(10, 1.0, time=900.0))  # a restart: its boundary must survive the thinning
        back = History.from_dict(h.to_dict(), max_points=64)
        curve = back.curve()
        assert back.max_points == 64
        assert len(curve.steps) <= 64
        assert curve.steps[0] == 1.0 and curve.steps[-1] == 10.0
        assert len(curve.segments) == 2 and curve.steps[curve.segments[1]] == 10.0

    def test_a_damaged_stored_bound_neither_crashes_nor_lifts_the_memory_bound(self) -> None:
        assert History.from_dict({"maxPoints": 3, "steps": [1], "losses": [1.0]}).max_points == 16
        assert History.from_dict({"maxPoints": "many", "steps": []}).max_points == 300
        assert History.from_dict({"maxPoints": 10**12, "steps": []}).max_points == 5000


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


def _reference_curve(h: History) -> tuple[object, ...]:
    """The snapshot as a walk over the stored points gives it (what ``curve`` must equal)."""
    pts = h.points
    times = tuple(p.time for p in pts)
    lrs = tuple(p.learning_rate for p in pts)
    epochs = tuple(p.epoch for p in pts)
    return (
        tuple(float(p.step) for p in pts),
        tuple(p.loss for p in pts),
        times if pts and all(t is not None for t in times) else None,
        lrs if pts and all(v is not None for v in lrs) else None,
        epochs if pts and all(v is not None for v in epochs) else None,
        h.segments,
    )


def _as_tuple(h: History) -> tuple[object, ...]:
    c = h.curve()
    return (c.steps, c.values, c.times, c.learning_rates, c.epochs, c.segments)


class TestSnapshotColumns:
    """``curve`` reads columns kept up to date on append and rebuilt after a thinning."""

    def test_the_snapshot_equals_the_points_through_thinning_and_restarts(self) -> None:
        h = History(max_points=20)
        t, step = 0.0, 0
        for i in range(1, 400):
            t += 1.0
            step = step + 1 if i % 97 else max(1, step - 30)  # a restart now and then, resumed from
            h.append(s(step, loss=1.0 / i, time=t, learning_rate=1e-3, epoch=step / 100))
            assert _as_tuple(h) == _reference_curve(h)
        assert h.dropped > 0 and h.restarts > 0

    def test_a_point_without_time_hides_the_times_until_it_is_thinned_away(self) -> None:
        h = History(max_points=16)
        h.append(ProgressSample(step=1, loss=1.0))  # no time
        for i in range(2, 60):
            h.append(s(i))
            assert _as_tuple(h) == _reference_curve(h)
        assert h.curve().times is None  # the first point of a segment is never thinned
        h.append(s(1, time=100.0))  # a restart: the old segment's first point stays, so still None
        assert h.curve().times is None and _as_tuple(h) == _reference_curve(h)

    def test_a_restored_history_gives_the_same_snapshot(self) -> None:
        h = History(max_points=32)
        for i in range(1, 100):
            h.append(s(i, loss=2.0 - i / 100, learning_rate=1e-4))
        restored = History.from_dict(json.loads(json.dumps(h.to_dict())))
        assert _as_tuple(restored) == _as_tuple(h)
        restored.append(s(100, loss=1.0, learning_rate=1e-4))
        assert _as_tuple(restored) == _reference_curve(restored)

    def test_last_segment_holds_the_points_since_the_latest_restart(self) -> None:
        h = History()
        for i in range(1, 6):
            h.append(s(i, loss=float(i)))
        assert h.last_segment() == ((1.0, 2.0, 3.0, 4.0, 5.0), (1.0, 2.0, 3.0, 4.0, 5.0))
        h.append(s(3, loss=9.0, time=10.0))
        h.append(s(4, loss=8.0, time=11.0))
        assert h.last_segment() == ((3.0, 4.0), (9.0, 8.0))
        assert History().last_segment() == ((), ())


def test_a_lone_step_back_followed_by_the_run_going_on_is_no_restart() -> None:
    """600, then a stray 100, then 630: no resume from a checkpoint covers 100 -> 630 in one report,
    so the 100 was a garbled report and the history goes on in one segment; a real restart (100,
    then 110) stays a restart."""
    from advisor.core.history import History
    from advisor.model import ProgressSample

    h = History()
    for i, step in enumerate(range(10, 610, 10)):
        h.append(ProgressSample(step=step, loss=1.0 / step, time=float(i)))
    assert h.append(ProgressSample(step=100, loss=0.5, time=100.0)) == "restart"
    assert h.append(ProgressSample(step=630, loss=0.0016, time=101.0)) == "appended"
    assert h.segments == (0,) and h.restarts == 0 and [p.step for p in h.points[-2:]] == [600, 630]
    assert h.curve().steps[-1] == 630 and len(h.curve().steps) == 61
    assert h.append(ProgressSample(step=100, loss=0.5, time=102.0)) == "restart"
    assert h.append(ProgressSample(step=110, loss=0.45, time=103.0)) == "appended"
    assert h.restarts == 1 and len(h.segments) == 2


def test_a_resume_from_a_checkpoint_just_behind_the_last_report_stays_a_restart() -> None:
    from advisor.core.history import History
    from advisor.model import ProgressSample

    h = History()
    for i, step in enumerate(range(20, 620, 20)):
        h.append(ProgressSample(step=step, loss=1.0 / step, time=float(i)))
    assert h.append(ProgressSample(step=598, loss=0.0017, time=100.0)) == "restart"
    assert h.append(ProgressSample(step=618, loss=0.0016, time=101.0)) == "appended"
    assert h.restarts == 1 and len(h.segments) == 2


def _forward(h: History, reports: int, *, every: float = 3.0) -> float:
    """``reports`` reports 20 steps apart, ``every`` seconds apart; returns the last time."""
    t = 0.0
    for i in range(1, reports + 1):
        t = i * every
        assert h.append(s(20 * i, loss=3.0 / i, time=t)) == "appended"
    return t


def test_a_step_going_back_at_report_after_report_is_malformed_progress_not_restarts() -> None:
    """A stream whose step goes back 20 at every report (3 s apart) is no run of 17 restarts: from
    the ``MALFORMED_BACKS``-th step back in a row it is malformed progress, the earlier steps back
    of the run are no longer restarts, and the history keeps a bounded trace of it (the newest
    point stands for the latest report)."""
    from advisor.model import MALFORMED_BACKS

    h = History()
    t = _forward(h, 30)
    step, outcomes = 600, []
    for _ in range(17):
        t, step = t + 3.0, step - 20
        outcomes.append(h.append(s(step, loss=0.1, time=t)))
    assert outcomes[: MALFORMED_BACKS - 1] == ["restart"] * (MALFORMED_BACKS - 1)
    assert outcomes[MALFORMED_BACKS - 1] == "malformed"
    assert set(outcomes[MALFORMED_BACKS:]) == {"backwards"}
    assert h.restarts == 0 and h.backwards_run() == MALFORMED_BACKS
    assert len(h) == 30 + MALFORMED_BACKS and len(h.segments) == 1 + MALFORMED_BACKS
    assert h.last is not None and (h.last.step, h.last.time) == (step, t)
    assert _as_tuple(h) == _reference_curve(h)

    # persisted and restored, it reads the same and goes on the same
    restored = History.from_dict(json.loads(json.dumps(h.to_dict())))
    assert restored.segments == h.segments and restored.restarts == 0
    assert restored.append(s(step - 20, loss=0.1, time=t + 3.0)) == "backwards"
    # the step moving forward again ends it: a later step back is a restart again
    assert restored.append(s(step, loss=0.1, time=t + 6.0)) == "appended"
    assert restored.backwards_run() == 0 and restored.restarts == 0
    assert restored.append(s(step - 40, loss=0.1, time=t + 9.0)) == "restart"
    assert restored.restarts == 1


def test_fewer_steps_back_in_a_row_than_malformed_are_restarts() -> None:
    """A resume from a checkpoint whose first report is followed by a resume from an older one
    (its save was broken) is two restarts; the run going on from there keeps them."""
    from advisor.model import MALFORMED_BACKS

    h = History()
    t = _forward(h, 30)
    step = 600
    for k in range(1, MALFORMED_BACKS):
        step -= 100
        assert h.append(s(step, loss=0.1, time=t + k)) == "restart"
    assert h.append(s(step + 20, loss=0.1, time=t + 10.0)) == "appended"
    assert h.restarts == MALFORMED_BACKS - 1 and h.backwards_run() == 0


def _zigzag(k: int) -> int:
    """Two writers on one TrainJob's progress: 1000, 10, 1010, 20, 1020, ... (the trial's repro)."""
    return 10 * (k // 2) + (1000 if k % 2 == 0 else 10)


def test_two_writers_interleaving_their_steps_are_no_restarts() -> None:
    """A step back at every other report, each time past the last one in the next report, is the
    lower of two writers, not a run restarting 20 times: after two such alternations its reports
    are left out and counted, the earlier ones are taken back, and the history is the upper
    writer's steps in one segment. It was 20 restarts, a one-point segment at every other report
    and a throughput of 200 steps/s."""
    h = History()
    outcomes = [h.append(s(_zigzag(k), loss=2.0, time=float(k))) for k in range(40)]
    assert outcomes[:5] == ["appended", "restart", "appended", "restart", "appended"]
    assert set(outcomes[5::2]) == {"interleaved"} and set(outcomes[4::2]) == {"appended"}
    assert h.restarts == 0 and h.segments == (0,)
    assert [p.step for p in h.points] == [1000 + 10 * i for i in range(20)]
    assert h.interleaved == 20
    note = h.interleaving_note()
    assert note is not None and note.startswith("20 progress reports below the run's step left out")

    # restored (the mode is not persisted), two alternations tell them apart again
    restored = History.from_dict(json.loads(json.dumps(h.to_dict())))
    assert restored.interleaving_note() is None
    later = [restored.append(s(_zigzag(k), loss=2.0, time=float(k))) for k in range(40, 60)]
    assert later[:5] == ["appended", "restart", "appended", "restart", "appended"]
    assert set(later[5::2]) == {"interleaved"}
    assert restored.restarts == 0 and restored.segments == (0,)


def test_when_the_upper_writer_stops_the_lower_one_is_the_run() -> None:
    h = History()
    for k in range(11):  # ends on the upper writer's report
        h.append(s(_zigzag(k), loss=2.0, time=float(k)))
    assert h.interleaving_note() is not None
    # two reports below the run's step in a row: the first was left out, the second is the run
    # going back (a restart), and the reports after it are kept
    assert h.append(s(60, loss=2.0, time=11.0)) == "interleaved"
    assert h.append(s(70, loss=2.0, time=12.0)) == "restart"
    assert h.append(s(80, loss=2.0, time=13.0)) == "appended"
    assert h.restarts == 1 and h.interleaving_note() is None


def test_resumes_just_behind_the_last_report_twice_in_a_row_stay_restarts() -> None:
    # back 10 and past the old step by 10 in the next report, twice: a shallow resume gains in a
    # report what it went back, which two interleaving writers far apart never do
    h = History()
    t = _forward(h, 30)  # steps 20 .. 600
    assert h.append(s(590, loss=0.1, time=t + 3)) == "restart"
    assert h.append(s(610, loss=0.1, time=t + 6)) == "appended"
    assert h.append(s(600, loss=0.1, time=t + 9)) == "restart"
    assert h.append(s(620, loss=0.1, time=t + 12)) == "appended"
    assert h.restarts == 2 and h.interleaved == 0 and h.interleaving_note() is None


def test_garbled_reports_far_apart_leave_a_later_restart_a_restart() -> None:
    h = History()
    t = _forward(h, 30)  # steps 20 .. 600
    for top in (600, 820):  # a stray low report, then the run going on; twice, 10 reports apart
        assert h.append(s(100, loss=0.1, time=t + 3)) == "restart"
        t += 3
        for step in range(top + 20, top + 221, 20):
            t += 3
            assert h.append(s(step, loss=0.1, time=t)) == "appended"
    assert h.restarts == 0 and h.segments == (0,) and h.interleaved == 0
    # a real restart later is one, its first report kept
    assert h.append(s(900, loss=0.1, time=t + 3)) == "restart"
    assert h.append(s(920, loss=0.1, time=t + 6)) == "appended"
    assert h.restarts == 1 and h.interleaving_note() is None


def test_one_writer_a_report_behind_the_other_is_told_apart_at_the_third_alternation() -> None:
    """110, 100, 120, 110, 130, ...: each step back as shallow as a resume just behind the last
    report, but three in a row each overtaking where the run stood is no run resuming at every
    other report (a platform trial counted 9 restarts in 3 minutes, and an ETA four times short)."""
    h = History()
    seq = [step for i in range(15) for step in (110 + 10 * i, 100 + 10 * i)]
    outcomes = [h.append(s(step, loss=2.0, time=float(n))) for n, step in enumerate(seq)]
    assert outcomes[:7] == ["appended", "restart"] * 3 + ["appended"]
    assert set(outcomes[7::2]) == {"interleaved"} and set(outcomes[8::2]) == {"appended"}
    assert h.restarts == 0 and h.segments == (0,)
    assert [p.step for p in h.points] == [110 + 10 * i for i in range(15)]
    assert h.interleaving_note() is not None
