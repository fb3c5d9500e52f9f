"""Garbage progress is coerced or dropped and counted in warnings; parsing never raises."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.model import ProgressSample
from advisor.protocol import PYTORCHJOB_PROGRESS_ANNOTATION, RHOAI_TRAINER_STATUS_ANNOTATION
from advisor.sources import (
    UNKNOWN_STEP,
    parse_progress_annotation,
    parse_rhoai_annotation,
    sample_from_object,
)
from advisor.sources.coerce import MAX_ANNOTATION_BYTES
from advisor.sources.normalize import MAX_METRICS, MAX_WARNINGS

NOW = 1_800_000_000.0


def upstream(*metrics: tuple[Any, Any], **fields: Any) -> ProgressSample:
    status = {"lastUpdatedTime": "2026-08-21T10:30:45Z", **fields}
    status["metrics"] = [{"name": n, "value": v} for n, v in metrics]
    sample = sample_from_object({"status": {"trainerStatus": status}}, now=NOW)
    assert sample is not None
    return sample


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1e3", 1000), ("1000.0", 1000), (" 42 ", 42), ("12%", 12), (450, 450), (450.0, 450)],
)
def test_numeric_strings_are_coerced(value: Any, expected: int) -> None:
    assert upstream(("current_step", value)).step == expected


@pytest.mark.parametrize(
    "value", ["nan", "inf", "-5", "abc", "", "0x1F", True, None, [1], {"a": 1}, "9" * 400]
)
def test_an_unusable_step_is_dropped_with_a_warning(value: Any) -> None:
    sample = upstream(("current_step", value), ("loss", "1.0"))
    assert sample.step == UNKNOWN_STEP
    assert sample.loss == 1.0
    assert "no step reported" in sample.warnings


def test_a_fractional_step_is_rounded_down_and_noted() -> None:
    sample = upstream(("current_step", "12.7"))
    assert sample.step == 12
    assert any("rounded down" in w for w in sample.warnings)


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf"])
def test_a_non_finite_loss_is_kept_for_divergence_detection(value: str) -> None:
    sample = upstream(("current_step", "5"), ("loss", value))
    assert sample.loss is not None and not math.isfinite(sample.loss)
    assert any("non-finite" in w for w in sample.warnings)
    assert "loss" not in sample.metrics  # the numeric metrics map holds finite values only


@pytest.mark.parametrize(
    ("name", "value"), [("learning_rate", "nan"), ("learning_rate", "-1e-4"), ("epoch", "-2")]
)
def test_nonsensical_learning_rate_or_epoch_is_dropped(name: str, value: str) -> None:
    sample = upstream(("current_step", "5"), (name, value))
    assert getattr(sample, name) is None
    assert sample.warnings


def test_progress_percentage_outside_0_100_is_dropped() -> None:
    """A garbled percentage is no reading: clamped to 100 it read a running job as finished."""
    for raw in (250, "-3%"):
        sample = upstream(progressPercentage=raw)
        assert sample.progress_percentage is None
        assert any("outside 0..100; dropped" in w for w in sample.warnings)


def test_a_percentage_of_done_beside_a_step_short_of_the_total_is_dropped() -> None:
    """A job at step 720 of 20,000 reporting 100% is not finished: the step is the reading."""
    sample = upstream(("current_step", 720), ("total_steps", 20000), progressPercentage=100)
    assert sample.step == 720 and sample.total_steps == 20000
    assert sample.progress_percentage is None
    assert any("(done) dropped: step 720 of total_steps 20000" in w for w in sample.warnings)
    done = upstream(("current_step", 20000), ("total_steps", 20000), progressPercentage=100)
    assert done.progress_percentage == 100.0


def test_an_update_time_from_an_unset_clock_is_replaced_by_the_observation_time() -> None:
    """A report dated 1970 stood in the history at time 1 and gave an ETA of 28 years."""
    sample = upstream(lastUpdatedTime="1970-01-01T00:00:01Z")
    assert sample.time > 1.7e9
    assert any("days before the observation time (an unset clock?)" in w for w in sample.warnings)


def test_negative_remaining_seconds_are_dropped() -> None:
    sample = upstream(estimatedRemainingSeconds=-30)
    assert sample.estimated_remaining_seconds is None
    assert any("negative" in w for w in sample.warnings)


def test_step_beyond_total_drops_the_total() -> None:
    sample = upstream(("current_step", "1200"), ("total_steps", "1000"))
    assert (sample.step, sample.total_steps) == (1200, None)
    assert any("exceeds total_steps" in w for w in sample.warnings)


def test_a_step_orders_of_magnitude_past_the_total_is_the_wrong_number_not_the_total() -> None:
    """10**18 against a total of 9,000: the step is dropped and the total kept (kept, the step read
    the run as finished and its throughput as 1e15 steps/s); with a percentage the step is
    estimated from it."""
    sample = upstream(("current_step", str(10**18)), ("total_steps", "9000"))
    assert sample.total_steps == 9000 and sample.step != 10**18
    assert any("more than 2x total_steps 9000; step dropped" in w for w in sample.warnings)
    estimated = upstream(("current_step", str(10**18)), ("total_steps", "9000"), progressPercentage=50)
    assert (estimated.step, estimated.total_steps) == (4500, 9000)


def test_a_completion_claimed_beside_an_unreadable_step_is_not_taken() -> None:
    """A report whose step is garbage and whose percentage says 100: the same broken reporter,
    and taken, it reads a running job as finished, judged by no rule. A report with no step at all
    and 100% is the trainer's final update, and stands."""
    for step in ("1e30", "-310", "twelve"):
        sample = upstream(("current_step", step), ("total_steps", "4000"), progressPercentage=100)
        assert sample.progress_percentage is None and sample.step == UNKNOWN_STEP, step
        said = "progressPercentage 100 (done) dropped with the unreadable step"
        assert any(said in w for w in sample.warnings)
    final = upstream(("total_steps", "4000"), progressPercentage=100)
    assert final.progress_percentage == 100.0 and final.step == 4000


def test_checkpoint_ahead_of_step_is_flagged() -> None:
    sample = upstream(("current_step", "100"), ("last_checkpoint_step", "150"))
    assert sample.last_checkpoint_step == 150
    assert any("ahead of step" in w for w in sample.warnings)


def test_ten_thousand_metrics_are_capped_and_counted() -> None:
    metrics = [("current_step", "7")] + [(f"metric_{i}", str(i)) for i in range(10_000)]
    sample = upstream(*metrics)
    assert sample.step == 7
    assert len(sample.metrics) == MAX_METRICS
    assert f"{10_001 - MAX_METRICS} metrics beyond the cap of {MAX_METRICS} ignored" in sample.warnings


def test_ten_thousand_garbage_metrics_keep_warnings_bounded() -> None:
    metrics = [(f"m{i}", "garbage") for i in range(10_000)] + [(None, "1")] * 100
    sample = upstream(*metrics)
    assert len(sample.warnings) <= MAX_WARNINGS


def test_rhoai_dict_with_thousands_of_metrics_is_capped() -> None:
    raw = json.dumps(
        {"currentStep": 3, "trainMetrics": {f"m{i}": i for i in range(3_000)}}
    )  # under the size cap
    sample = parse_rhoai_annotation(raw, now=NOW)
    assert sample.step == 3
    assert len(sample.metrics) == MAX_METRICS
    assert any("beyond the cap" in w for w in sample.warnings)


def test_bad_metric_names_and_entries_are_counted() -> None:
    status = {
        "lastUpdatedTime": "2026-08-21T10:30:45Z",
        "metrics": [
            {"name": "x" * 65, "value": "1"},
            {"name": 5, "value": "1"},
            "loss=1",
            None,
            {"name": "ok", "value": "2"},
        ],
    }
    sample = sample_from_object({"status": {"trainerStatus": status}}, now=NOW)
    assert sample is not None
    assert sample.metrics == {"ok": 2.0}
    assert any("2 metrics entries are not" in w for w in sample.warnings)
    assert any("2 metrics without a usable name" in w for w in sample.warnings)


def test_duplicate_metrics_use_the_last_value_and_say_so() -> None:
    sample = upstream(("current_step", "1"), ("loss", "3.0"), ("loss", "2.0"))
    assert sample.loss == 2.0
    assert any("more than once" in w for w in sample.warnings)


@pytest.mark.parametrize(
    "stamp", ["yesterday", "2026-13-45T99:00:00Z", "", 12j, "2026-08-21T10:30:45Z" + "0" * 100, True]
)
def test_a_bad_timestamp_falls_back_to_now(stamp: Any) -> None:
    sample = upstream(("current_step", "1"), lastUpdatedTime=stamp)
    assert sample.time == NOW
    assert sample.warnings


def test_a_missing_timestamp_uses_now_and_says_so() -> None:
    sample = sample_from_object(
        {"status": {"trainerStatus": {"metrics": [{"name": "step", "value": "1"}]}}}, now=NOW
    )
    assert sample is not None
    assert sample.time == NOW
    assert any("observation time" in w for w in sample.warnings)


def test_a_missing_timestamp_without_now_leaves_time_unknown() -> None:
    sample = sample_from_object({"status": {"trainerStatus": {"metrics": [{"name": "step", "value": "1"}]}}})
    assert sample is not None and sample.time is None


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ("2026-08-21T10:30:45Z", 1787308245.0),
        ("2026-08-21T10:30:45.500Z", 1787308245.5),
        ("2026-08-21T12:30:45+02:00", 1787308245.0),
        ("2026-08-21t10:30:45z", 1787308245.0),
        ("1787308245", 1787308245.0),
        (1787308245, 1787308245.0),
    ],
)
def test_timestamps_are_converted_to_epoch_seconds(stamp: Any, expected: float) -> None:
    assert upstream(lastUpdatedTime=stamp).time == pytest.approx(expected)


@pytest.mark.parametrize("stamp", [1787308245000, "1787308245000", 1787308245000.0])
def test_an_epoch_milliseconds_timestamp_is_read_as_ms_with_a_warning(stamp: Any) -> None:
    sample = upstream(lastUpdatedTime=stamp)
    assert sample.time == pytest.approx(1787308245.0)
    assert any("epoch milliseconds" in w for w in sample.warnings)


def test_a_timestamp_without_offset_is_read_as_utc_with_a_warning() -> None:
    sample = upstream(lastUpdatedTime="2026-08-21T10:30:45")
    assert sample.time == 1787308245.0
    assert any("no UTC offset" in w for w in sample.warnings)


ANNOTATION_GARBAGE = [
    "not json",
    "[1, 2, 3]",
    '"a string"',
    "null",
    "{" * 100_000,  # would blow the recursion limit of a naive decoder, and exceeds the size cap
    "[" * 5_000 + "]" * 5_000,  # deep nesting under the size cap
    '{"currentStep": ' + "9" * 70_000 + "}",
    12345,
    None,
]


@pytest.mark.parametrize("raw", ANNOTATION_GARBAGE, ids=range(len(ANNOTATION_GARBAGE)))
@pytest.mark.parametrize("key", [RHOAI_TRAINER_STATUS_ANNOTATION, PYTORCHJOB_PROGRESS_ANNOTATION])
def test_a_garbage_annotation_yields_a_flagged_sample(raw: Any, key: str) -> None:
    sample = sample_from_object({"metadata": {"annotations": {key: raw}}}, now=NOW)
    assert sample is not None
    assert sample.step == UNKNOWN_STEP
    assert sample.time == NOW
    assert sample.warnings


def test_a_huge_annotation_is_not_parsed() -> None:
    raw = json.dumps({"currentStep": 5, "padding": "x" * MAX_ANNOTATION_BYTES})
    sample = parse_rhoai_annotation(raw, now=NOW)
    assert sample.step == UNKNOWN_STEP
    assert any("exceeds the cap" in w for w in sample.warnings)


def test_unknown_annotation_version_is_read_with_a_warning() -> None:
    sample = parse_progress_annotation(json.dumps({"version": 2, "step": 9}), now=NOW)
    assert sample.step == 9
    assert any("version 2" in w for w in sample.warnings)


@pytest.mark.parametrize("status", ["a string", 42, ["list"]])
def test_a_garbage_trainer_status_is_surfaced(status: Any) -> None:
    sample = sample_from_object({"status": {"trainerStatus": status}}, now=NOW)
    assert sample is not None
    assert sample.step == UNKNOWN_STEP and sample.warnings


def test_a_garbage_trainer_status_does_not_hide_an_annotation() -> None:
    body = {
        "status": {"trainerStatus": "oops"},
        "metadata": {"annotations": {RHOAI_TRAINER_STATUS_ANNOTATION: json.dumps({"currentStep": 8})}},
    }
    sample = sample_from_object(body, now=NOW)
    assert sample is not None
    assert sample.step == 8
    assert any("not an object" in w for w in sample.warnings)


# --------------------------------------------------------------------------------------------
# Property: no input, however hostile, makes a parser raise, and the output keeps its invariants
# --------------------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["nan", "1e3", "12%", "-1", "inf", "1e999", "0.5", "2026-08-21T10:30:45Z", "1:02:03"]),
)
NAMES = st.one_of(
    st.sampled_from(
        [
            "current_step",
            "step",
            "total_steps",
            "loss",
            "eval_loss",
            "lr",
            "epoch",
            "last_checkpoint_step",
            "last_checkpoint_request",
            "currentStep",
            "max_steps",
            "train_loss",
        ]
    ),
    st.text(max_size=70),
    st.none(),
    st.integers(),
)
ENTRIES = st.one_of(st.fixed_dictionaries({"name": NAMES, "value": SCALARS}), SCALARS)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _check(sample: ProgressSample | None) -> None:
    assert sample is not None
    assert sample.step == UNKNOWN_STEP or sample.step >= 0
    assert sample.total_steps is None or sample.total_steps >= 1
    assert sample.progress_percentage is None or 0.0 <= sample.progress_percentage <= 100.0
    assert sample.estimated_remaining_seconds is None or sample.estimated_remaining_seconds >= 0
    assert sample.learning_rate is None or sample.learning_rate >= 0
    assert all(isinstance(k, str) and math.isfinite(v) for k, v in sample.metrics.items())
    assert len(sample.metrics) <= MAX_METRICS
    assert len(sample.warnings) <= MAX_WARNINGS
    assert sample.time == NOW or sample.time is None or isinstance(sample.time, float)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metrics=st.lists(ENTRIES, max_size=40), progress=SCALARS, remaining=SCALARS, updated=SCALARS)
def test_upstream_never_raises(metrics: list[Any], progress: Any, remaining: Any, updated: Any) -> None:
    status = {
        "metrics": metrics,
        "progressPercentage": progress,
        "estimatedRemainingSeconds": remaining,
        "lastUpdatedTime": updated,
    }
    _check(sample_from_object({"status": {"trainerStatus": status}}, now=NOW))


@settings(max_examples=80, deadline=None)
@given(
    document=st.dictionaries(
        st.sampled_from(
            [
                "currentStep",
                "totalSteps",
                "currentEpoch",
                "progressPercentage",
                "estimatedRemainingSeconds",
                "lastUpdatedTime",
                "trainMetrics",
                "evalMetrics",
                "step",
                "time",
                "loss",
                "metrics",
                "version",
            ]
        ),
        JSONISH,
        max_size=10,
    )
)
def test_annotations_never_raise(document: dict[str, Any]) -> None:
    raw = json.dumps(document)
    for key in (RHOAI_TRAINER_STATUS_ANNOTATION, PYTORCHJOB_PROGRESS_ANNOTATION):
        _check(sample_from_object({"metadata": {"annotations": {key: raw}}}, now=NOW))


@settings(max_examples=100, deadline=None)
@given(body=JSONISH)
def test_arbitrary_bodies_never_raise(body: Any) -> None:
    result = sample_from_object(
        {"status": body, "metadata": {"annotations": body}} if isinstance(body, dict) else {}
    )
    assert result is None or len(result.warnings) <= MAX_WARNINGS


def test_an_update_time_from_the_future_is_flagged_as_clock_skew() -> None:
    status = {"lastUpdatedTime": "2027-01-01T00:00:00Z", "metrics": [{"name": "step", "value": "1"}]}
    sample = sample_from_object({"status": {"trainerStatus": status}}, now=NOW - 10**8)
    assert sample is not None
    assert any("clock skew" in w for w in sample.warnings)


def test_an_unreadable_alias_falls_back_to_the_next_one_that_reads() -> None:
    """``current_step: "n/a"`` beside a valid ``step``: the report keeps its step (and a warning
    says which name was used), instead of losing the step and with it the whole report."""
    sample = upstream(("current_step", "n/a"), ("step", "1200"), ("loss", "abc"), ("train_loss", 0.7))
    assert sample.step == 1200 and sample.loss == 0.7
    assert any("current_step" in w and "used step instead" in w for w in sample.warnings)
    assert any("used train_loss instead" in w for w in sample.warnings)
    # the preferred name wins when it reads, whatever comes later
    assert upstream(("current_step", 5), ("step", 9)).step == 5
    # nothing readable: no step, as before
    assert upstream(("current_step", "n/a"), ("step", "x")).step < 0
