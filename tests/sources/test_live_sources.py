"""Each live progress channel, on realistic objects, becomes the same ProgressSample."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.protocol import (
    ACK_REQUEST_METRIC,
    ACK_STEP_METRIC,
    DEADLINE_ANNOTATION,
    PYTORCHJOB_PROGRESS_ANNOTATION,
)
from advisor.sources import (
    UNKNOWN_STEP,
    deadline_from_object,
    encode_progress,
    parse_progress_annotation,
    parse_rhoai_annotation,
    sample_from_object,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: 2026-08-21T10:30:45Z, the lastUpdatedTime of both reference examples
UPDATED = 1787308245.0


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / name).read_text())


def test_upstream_trainer_status_from_the_hf_callback() -> None:
    sample = sample_from_object(_load("trainjob_upstream.yaml"), now=UPDATED + 10)
    assert sample is not None
    assert sample.source == "trainerStatus"
    assert (sample.step, sample.total_steps) == (450, 1000)
    assert sample.loss == pytest.approx(0.2347)
    assert sample.eval_loss == pytest.approx(0.2451)
    assert sample.learning_rate == pytest.approx(1.8e-05)
    assert sample.epoch == pytest.approx(1.35)
    assert sample.progress_percentage == 45.0
    assert sample.estimated_remaining_seconds == 795.0
    assert sample.time == UPDATED
    assert sample.metrics["grad_norm"] == pytest.approx(1.0312)
    assert sample.warnings == ()


def test_rhoai_annotation_gives_the_same_sample() -> None:
    sample = sample_from_object(_load("trainjob_rhoai.yaml"), now=UPDATED + 10)
    assert sample is not None
    assert sample.source == "rhoai-annotation"
    assert (sample.step, sample.total_steps, sample.epoch) == (450, 1000, 1.35)
    assert (sample.loss, sample.eval_loss, sample.learning_rate) == (0.2347, 0.2451, 1.8e-05)
    assert (sample.progress_percentage, sample.estimated_remaining_seconds, sample.time) == (
        45.0,
        795.0,
        UPDATED,
    )
    assert sample.metrics == {
        "grad_norm": 1.03,
        "learning_rate": 1.8e-05,
        "loss": 0.2347,
        "eval_loss": 0.2451,
    }
    assert sample.warnings == ()


def test_rhoai_null_progress_is_absent_and_a_null_metric_is_a_non_finite_one() -> None:
    """The Trainer controller's poll turns a NaN or an infinity into null before it writes the
    annotation (``progression.go``'s sanitiser): a metric named with a null value went
    non-finite, and is read as the NaN that ``trainerStatus`` would have carried. Read as "not
    reported", a run whose loss went NaN read ``learning`` on its last finite loss."""
    raw = json.dumps(
        {
            "progressPercentage": None,
            "currentStep": 10,
            "totalSteps": 100,
            "trainMetrics": {"loss": None, "train_loss": 2.5},
            "evalMetrics": {"eval_loss": None},
            "lastUpdatedTime": "2026-08-21T10:30:45Z",
        }
    )
    sample = parse_rhoai_annotation(raw)
    assert sample.progress_percentage is None
    assert sample.loss is not None and math.isnan(sample.loss)
    assert sample.eval_loss is not None and math.isnan(sample.eval_loss)
    assert any("loss is non-finite" in w for w in sample.warnings)
    assert sample.step == 10
    upstream = sample_from_object(
        {
            "status": {
                "trainerStatus": {
                    "metrics": [{"name": "current_step", "value": "10"}, {"name": "loss", "value": "nan"}]
                }
            }
        }
    )
    assert upstream is not None and upstream.loss is not None and math.isnan(upstream.loss)


def test_pytorchjob_annotation_round_trips_through_the_encoder() -> None:
    raw = encode_progress(
        450,
        time=UPDATED + 0.25,
        total_steps=1000,
        loss=0.2347,
        eval_loss=0.2451,
        learning_rate=1.8e-05,
        epoch=1.35,
        estimated_remaining_seconds=795.4,
        last_checkpoint_step=400,
        last_checkpoint_request="ckpt-7f3a",
        metrics={"grad_norm": 1.03},
    )
    body = {"kind": "PyTorchJob", "metadata": {"annotations": {PYTORCHJOB_PROGRESS_ANNOTATION: raw}}}
    sample = sample_from_object(body, now=UPDATED + 10)
    assert sample is not None
    assert sample.source == "pytorchjob-annotation"
    assert (sample.step, sample.total_steps, sample.time) == (450, 1000, UPDATED + 0.25)
    assert (sample.loss, sample.eval_loss, sample.learning_rate, sample.epoch) == (
        0.2347,
        0.2451,
        1.8e-05,
        1.35,
    )
    assert (sample.progress_percentage, sample.estimated_remaining_seconds) == (45.0, 795.0)
    assert (sample.last_checkpoint_step, sample.last_checkpoint_request) == (400, "ckpt-7f3a")
    assert sample.metrics == {"grad_norm": 1.03}
    assert sample.warnings == ()


def test_encoder_keeps_a_nan_loss_visible_and_the_output_valid_json() -> None:
    raw = encode_progress(7, time=UPDATED, loss=float("nan"), metrics={"grad_norm": float("inf"), "ok": 1.0})
    decoded = json.loads(raw)  # strict JSON: no NaN literal
    assert decoded["loss"] == "nan"
    assert decoded["metrics"] == {"ok": 1.0}
    sample = parse_progress_annotation(raw)
    assert sample.loss is not None and sample.loss != sample.loss  # NaN survives for the divergence rule
    assert any("non-finite" in w for w in sample.warnings)


def test_encoder_bounds_the_number_of_metrics() -> None:
    raw = encode_progress(1, time=UPDATED, metrics={f"m{i}": float(i) for i in range(1000)})
    assert len(json.loads(raw)["metrics"]) == 64
    assert len(raw) < 4096


@pytest.mark.parametrize("step", [-1, 1.5, True, "3"])
def test_encoder_rejects_an_invalid_step(step: Any) -> None:
    with pytest.raises(ValueError, match="step"):
        encode_progress(step, time=UPDATED)


def test_checkpoint_acknowledgement_metrics_use_the_protocol_names() -> None:
    status = {
        "lastUpdatedTime": "2026-08-21T10:30:45Z",
        "metrics": [
            {"name": "current_step", "value": "1200"},
            {"name": ACK_STEP_METRIC, "value": "1150"},
            {"name": ACK_REQUEST_METRIC, "value": "req-42"},
        ],
    }
    sample = sample_from_object({"status": {"trainerStatus": status}})
    assert sample is not None
    assert (sample.last_checkpoint_step, sample.last_checkpoint_request) == (1150, "req-42")


@pytest.mark.parametrize(
    ("name", "field", "expected"),
    [
        ("global_step", "step", 12),
        ("step", "step", 12),
        ("max_steps", "total_steps", 12),
        ("train_loss", "loss", 12.0),
        ("lr", "learning_rate", 12.0),
        ("epoch", "epoch", 12.0),
        ("currentStep", "step", 12),
        ("train/loss", "loss", 12.0),
        # as W&B names them (the names ``forecast`` reads in a W&B export)
        ("train/global_step", "step", 12),
        ("trainer/global_step", "step", 12),
        ("train/learning_rate", "learning_rate", 12.0),
        ("train/epoch", "epoch", 12.0),
    ],
)
def test_free_form_metric_names_map_to_fields(name: str, field: str, expected: float) -> None:
    status = {"lastUpdatedTime": "2026-08-21T10:30:45Z", "metrics": [{"name": name, "value": "12"}]}
    sample = sample_from_object({"status": {"trainerStatus": status}})
    assert sample is not None
    assert getattr(sample, field) == expected


def test_preferred_names_win_over_aliases_regardless_of_order() -> None:
    metrics = [
        {"name": "global_step", "value": "99"},
        {"name": "train_loss", "value": "5.0"},
        {"name": "current_step", "value": "100"},
        {"name": "loss", "value": "1.5"},
    ]
    sample = sample_from_object({"status": {"trainerStatus": {"metrics": metrics}}}, now=1.0)
    assert sample is not None
    assert (sample.step, sample.loss) == (100, 1.5)


def test_status_trainer_status_is_preferred_over_annotations() -> None:
    body = _load("trainjob_rhoai.yaml")
    body["status"]["trainerStatus"] = {
        "lastUpdatedTime": "2026-08-21T11:00:00Z",
        "metrics": [{"name": "current_step", "value": "600"}],
    }
    sample = sample_from_object(body)
    assert sample is not None
    assert (sample.source, sample.step) == ("trainerStatus", 600)


def test_rhoai_annotation_is_preferred_over_our_pytorchjob_annotation() -> None:
    body = _load("trainjob_rhoai.yaml")
    body["metadata"]["annotations"][PYTORCHJOB_PROGRESS_ANNOTATION] = encode_progress(3, time=UPDATED)
    sample = sample_from_object(body)
    assert sample is not None
    assert (sample.source, sample.step) == ("rhoai-annotation", 450)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"metadata": {"name": "x"}, "status": {"conditions": []}},
        {"metadata": {"annotations": {"unrelated": "1"}}, "status": {"trainerStatus": {}}},
        {"metadata": None, "status": None},
    ],
)
def test_an_object_without_progress_gives_none(body: dict[str, Any]) -> None:
    assert sample_from_object(body, now=1.0) is None


def test_final_update_without_step_is_flagged_not_invented() -> None:
    # the HF callback's on_train_end replaces trainerStatus with cached logs only: no current_step
    status = {
        "progressPercentage": 100,
        "estimatedRemainingSeconds": 0,
        "lastUpdatedTime": "2026-08-21T12:00:00Z",
        "metrics": [{"name": "loss", "value": "0.21"}, {"name": "train_loss", "value": "0.4"}],
    }
    sample = sample_from_object({"status": {"trainerStatus": status}})
    assert sample is not None
    assert sample.step == UNKNOWN_STEP
    assert (sample.progress_percentage, sample.loss) == (100.0, 0.21)
    assert "no step reported" in sample.warnings


def test_step_is_estimated_from_progress_when_only_that_is_known() -> None:
    status = {
        "progressPercentage": 45,
        "lastUpdatedTime": "2026-08-21T10:30:45Z",
        "metrics": [{"name": "total_steps", "value": "1000"}],
    }
    sample = sample_from_object({"status": {"trainerStatus": status}})
    assert sample is not None
    assert sample.step == 450
    assert any("estimated 450" in w for w in sample.warnings)


@pytest.mark.parametrize(
    ("value", "expected", "warned"),
    [
        ("2026-08-21T10:30:45Z", UPDATED, False),
        ("1787308245", UPDATED, False),
        ("next tuesday", None, True),
    ],
)
def test_deadline_annotation(value: str, expected: float | None, warned: bool) -> None:
    deadline, warnings = deadline_from_object({"metadata": {"annotations": {DEADLINE_ANNOTATION: value}}})
    assert deadline == expected
    assert bool(warnings) == warned


def test_no_deadline_annotation() -> None:
    assert deadline_from_object({"metadata": {}}) == (None, ())
