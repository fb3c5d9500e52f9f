"""Incremental TrainJobForecast writes: appended history, guarded by revision, full when thinned."""

from __future__ import annotations

import json
from typing import Any

from advisor.controller.store import CHUNK_POINTS, ForecastStore, decode_history
from advisor.core import History
from advisor.model import ProgressSample
from tests.controller.fakes import ApiError, FakeApi

KEY = "team-a/llm"
OWNER = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "uid": "uid-1"}


def status(history: History, step: int, **extra: Any) -> dict[str, Any]:
    return {
        "observedAt": f"t{step}",
        "progress": {"step": step},
        "coreState": json.dumps({"step": step}),
        "history": history.to_dict(),
        **extra,
    }


def grow(history: History, steps: range, t0: float = 1000.0) -> None:
    for s in steps:
        history.append(ProgressSample(step=s, loss=1.0 / (1 + s), time=t0 + s))


def stored(api: FakeApi) -> dict[str, Any]:
    return api.forecasts[KEY]["status"]


def history_of(api: FakeApi) -> dict[str, Any]:
    return decode_history(stored(api)["history"])


def test_first_write_is_full_then_only_new_points_are_appended() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    grow(h, range(1, 11))
    assert store.write(KEY, OWNER, status(h, 10)) == "full"
    assert stored(api)["history"]["revision"] == 1
    assert len(stored(api)["history"]["chunks"]) == 1  # a few strings, not thousands of numbers
    grow(h, range(11, 13))
    assert store.write(KEY, OWNER, status(h, 12)) == "delta"
    patch = api.log[-1]
    assert patch[0] == "json_patch_forecast"
    # test, the last chunk, count/segments/restarts/interleaved/revision, the three changed fields
    assert patch[3] == 1 + 1 + 5 + 3
    assert history_of(api) == h.to_dict()
    assert stored(api)["history"]["revision"] == 2 and stored(api)["progress"] == {"step": 12}
    assert store.stats.full == 1 and store.stats.delta == 1


def test_unchanged_status_is_not_written_and_unchanged_fields_are_not_sent() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    grow(h, range(1, 5))
    st = status(h, 4)
    store.write(KEY, OWNER, st)
    writes = len(api.log)
    assert store.write(KEY, OWNER, dict(st)) == "unchanged" and len(api.log) == writes
    assert store.write(KEY, OWNER, {**st, "observedAt": "later"}) == "delta"
    assert api.log[-1][3] == 1  # one field, no history ops (no new points: no test needed)


def test_thinning_or_a_restart_of_the_store_rewrites_in_full() -> None:
    api, h = FakeApi(), History(max_points=16)
    store = ForecastStore(api)
    grow(h, range(1, 16))
    store.write(KEY, OWNER, status(h, 15))
    grow(h, range(16, 18))  # the 17th point thins the older part
    assert h.dropped > 0
    assert store.write(KEY, OWNER, status(h, 17)) == "full"
    assert history_of(api) == h.to_dict()
    fresh = ForecastStore(api)  # a new process knows nothing of what is stored: full first
    grow(h, range(18, 19))
    assert fresh.write(KEY, OWNER, status(h, 18)) == "full"


def test_a_stale_revision_is_refused_by_the_test_op_and_written_in_full() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    grow(h, range(1, 6))
    store.write(KEY, OWNER, status(h, 5))
    stored(api)["history"]["revision"] = 41  # someone else wrote meanwhile
    stored(api)["history"]["chunks"].append("[[999,1.0,0.1]]")
    grow(h, range(6, 8))
    assert store.write(KEY, OWNER, status(h, 7)) == "full"
    assert store.stats.fallbacks == 1
    assert history_of(api)["steps"] == [p.step for p in h.points]
    assert stored(api)["history"]["revision"] == 2


def test_restarts_append_segments_and_a_deleted_object_is_recreated() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    grow(h, range(10, 50, 10))
    store.write(KEY, OWNER, status(h, 40))
    grow(h, range(20, 40, 10), t0=2000.0)  # backwards: a new segment
    assert store.write(KEY, OWNER, status(h, 30)) == "delta"
    hist = history_of(api)
    assert hist["segments"] == [0, 4] and hist["restarts"] == 1 and hist["steps"] == [10, 20, 30, 40, 20, 30]
    del api.forecasts[KEY]
    grow(h, range(40, 50, 10), t0=2000.0)
    assert store.write(KEY, OWNER, status(h, 40)) == "full"
    assert history_of(api)["steps"][-1] == 40


def test_an_unexpected_error_forgets_the_digest_so_the_next_write_is_full() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    grow(h, range(1, 4))
    store.write(KEY, OWNER, status(h, 3))
    grow(h, range(4, 5))
    api.fail_writes = 1
    try:
        store.write(KEY, OWNER, status(h, 4))
    except ApiError as exc:
        assert exc.status == 503
    else:
        raise AssertionError("the 503 must surface (the writer retries it)")
    assert store.write(KEY, OWNER, status(h, 4)) == "full"
    assert history_of(api)["steps"] == [1, 2, 3, 4]


def test_appends_fill_the_last_chunk_then_open_new_ones_and_restore_exactly() -> None:
    api, h = FakeApi(), History(max_points=300)
    store = ForecastStore(api)
    grow(h, range(1, CHUNK_POINTS))  # one short of a full chunk
    store.write(KEY, OWNER, status(h, CHUNK_POINTS - 1))
    for step in range(CHUNK_POINTS, 3 * CHUNK_POINTS + 5):
        grow(h, range(step, step + 1))
        assert store.write(KEY, OWNER, status(h, step)) == "delta"
    chunks = stored(api)["history"]["chunks"]
    assert len(h) == 3 * CHUNK_POINTS + 4
    assert len(chunks) == 4 and [len(json.loads(c)) for c in chunks] == [CHUNK_POINTS] * 3 + [4]
    assert stored(api)["history"]["count"] == len(h)
    restored = History.from_dict(decode_history(stored(api)["history"]))
    assert restored.points == h.points  # a restart gets exactly the same history back
    assert decode_history({"chunks": ["[[1,2.0,0.5]]", "not json", 7]})["steps"] == [1]  # damage is skipped


def test_eval_series_are_stored_and_a_new_evaluation_is_a_delta() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    for s in range(1, 6):
        h.append(ProgressSample(step=s, loss=1.0 / s, time=1000.0 + s, metrics={"eval_loss": 0.9}))
    assert store.write(KEY, OWNER, status(h, 5)) == "full"
    assert isinstance(stored(api)["history"]["evals"], str)  # one string node, not a tree of numbers
    h.append(ProgressSample(step=5, loss=None, time=1006.0, metrics={"eval_loss": 0.8}))  # an eval only
    assert store.write(KEY, OWNER, status(h, 5)) == "delta"
    assert history_of(api) == h.to_dict()
    assert History.from_dict(history_of(api)).evals.series("eval_loss").values == [0.9, 0.8]  # type: ignore[union-attr]


# ------------------------------------------------------------------------ observedGeneration
def conditioned(history: History, step: int) -> dict[str, Any]:
    return status(history, step, conditions=[{"type": "Forecasting", "status": "True", "reason": "Forecast"}])


def test_a_new_object_is_stamped_with_its_generation_in_its_first_write() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    grow(h, range(1, 4))
    assert store.write(KEY, OWNER, conditioned(h, 3)) == "full"
    assert [c[0] for c in api.log] == ["create_forecast", "write_forecast"]  # no extra request
    assert stored(api)["observedGeneration"] == 1
    assert stored(api)["conditions"][0]["observedGeneration"] == 1


def test_an_edited_spec_is_observed_by_the_next_write_and_said_at_once() -> None:
    api, h = FakeApi(), History(max_points=64)
    store = ForecastStore(api)
    grow(h, range(1, 4))
    store.write(KEY, OWNER, conditioned(h, 3))
    api.edit_forecast_spec("team-a", "llm")  # generation 2: the status still says 1
    assert stored(api)["observedGeneration"] == 1
    grow(h, range(4, 5))
    assert store.write(KEY, OWNER, conditioned(h, 4)) == "delta"
    # the delta's response showed generation 2: a second, small patch says so, history untouched
    assert [c[0] for c in api.log[-2:]] == ["json_patch_forecast", "json_patch_forecast"]
    assert api.log[-1][3] == 2  # observedGeneration and the conditions
    assert stored(api)["observedGeneration"] == 2
    assert stored(api)["conditions"][0]["observedGeneration"] == 2
    assert history_of(api) == h.to_dict()
    writes = len(api.log)
    assert store.write(KEY, OWNER, conditioned(h, 4)) == "unchanged" and len(api.log) == writes


def test_a_restarted_store_takes_the_generation_listed_at_startup() -> None:
    api, h = FakeApi(), History(max_points=64)
    grow(h, range(1, 4))
    ForecastStore(api).write(KEY, OWNER, conditioned(h, 3))
    api.edit_forecast_spec("team-a", "llm")
    api.edit_forecast_spec("team-a", "llm")
    fresh = ForecastStore(api)
    fresh.known(KEY, api.forecasts[KEY]["metadata"]["generation"])
    before = len(api.log)
    assert fresh.write(KEY, OWNER, conditioned(h, 3)) == "full"
    assert len(api.log) == before + 1  # known to exist, generation known: one patch
    assert stored(api)["observedGeneration"] == 3


def test_an_object_found_existing_at_creation_learns_its_generation_from_the_response() -> None:
    api, h = FakeApi(), History(max_points=64)
    grow(h, range(1, 4))
    ForecastStore(api).write(KEY, OWNER, conditioned(h, 3))
    api.edit_forecast_spec("team-a", "llm")
    fresh = ForecastStore(api)  # not told it exists: create (409, kept), patch, then say generation 2
    assert fresh.write(KEY, OWNER, conditioned(h, 3)) == "full"
    assert stored(api)["observedGeneration"] == 2
    assert stored(api)["conditions"][0]["observedGeneration"] == 2


def test_the_count_of_a_second_writers_reports_left_out_is_stored_and_read_back() -> None:
    """Kept only in the core's dump, the count was lost to the store's history encoding (and to
    the CRD's pruning): after a controller restart it started again from 2."""
    from advisor.controller.store import decode_history, encode_history

    h = History(100)
    for k in range(12):
        step = 10 * (k // 2) + (1000 if k % 2 == 0 else 10)
        h.append(ProgressSample(step=step, loss=1.0, time=float(k)))
    assert h.interleaved > 0
    data = h.to_dict()
    assert decode_history(encode_history(data, 1))["interleaved"] == h.interleaved
    assert History.from_dict(decode_history(encode_history(data, 1))).interleaved == h.interleaved
