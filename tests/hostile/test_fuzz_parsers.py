"""Hostile progress and policies: every parser and the policy loader, fed arbitrary JSON-like
values, never raises anything but its documented error, returns bounded values, and stays cheap.

The default tier runs ``FUZZ_EXAMPLES`` (300) cases per target; ``bench/fuzz_inputs.py`` runs the
same tests with 10,000 each (``TRAINJOB_ADVISOR_FUZZ_EXAMPLES``)."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.model import ProgressSample
from advisor.sources.normalize import MAX_WARNINGS
from advisor.sources.progress_annotation import parse_progress_annotation
from advisor.sources.trainerstatus import parse_rhoai_annotation, parse_trainer_status, sample_from_object
from policies import PolicyError, load_policy

FUZZ_EXAMPLES = int(os.environ.get("TRAINJOB_ADVISOR_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW = 1_800_000_000.0

SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["nan", "inf", "-1", "1e400", "0x10", "", " 12 ", "2026-08-21T10:30:45Z", "5m"]),
)
KEYS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        ["current_step", "total_steps", "loss", "learning_rate", "epoch", "eval_loss", "currentStep",
         "totalSteps", "trainMetrics", "evalMetrics", "metrics", "name", "value", "lastUpdatedTime",
         "progressPercentage", "estimatedRemainingSeconds", "last_checkpoint_step"]
    ),
)  # fmt: skip
JSONISH = st.recursive(
    SCALAR, lambda kids: st.lists(kids, max_size=6) | st.dictionaries(KEYS, kids, max_size=6), max_leaves=40
)
METRIC = st.fixed_dictionaries({"name": KEYS, "value": SCALAR})
TRAINER_STATUS = st.one_of(
    JSONISH,
    st.fixed_dictionaries(
        {"metrics": st.lists(METRIC, max_size=30)},
        optional={
            "lastUpdatedTime": SCALAR,
            "progressPercentage": SCALAR,
            "estimatedRemainingSeconds": SCALAR,
        },
    ),
)


def _sane(sample: ProgressSample) -> None:
    """What every parsed sample must satisfy, whatever came in."""
    assert isinstance(sample, ProgressSample)
    assert isinstance(sample.step, int) and sample.step >= -1  # -1: no step reported (warned)
    assert sample.step >= 0 or any("no step" in w for w in sample.warnings)
    for value in (sample.learning_rate, sample.epoch, sample.time):
        assert value is None or (isinstance(value, float) and math.isfinite(value))
    for value in (sample.loss, sample.eval_loss):  # a NaN/inf loss is kept: evidence of divergence
        assert value is None or isinstance(value, float)
    assert sample.total_steps is None or sample.total_steps >= 0
    assert len(sample.warnings) <= MAX_WARNINGS + 1
    assert all(isinstance(v, float) for v in sample.metrics.values())


@FUZZ
@given(status=TRAINER_STATUS)
def test_trainer_status_parser(status: Any) -> None:
    _sane(parse_trainer_status(status, now=NOW))


@FUZZ
@given(raw=st.one_of(JSONISH, JSONISH.map(lambda v: json.dumps(v, allow_nan=True)), st.text(max_size=200)))
def test_rhoai_annotation_parser(raw: Any) -> None:
    _sane(parse_rhoai_annotation(raw, now=NOW))


@FUZZ
@given(raw=st.one_of(JSONISH, JSONISH.map(lambda v: json.dumps(v, allow_nan=True)), st.text(max_size=200)))
def test_progress_annotation_parser(raw: Any) -> None:
    _sane(parse_progress_annotation(raw, now=NOW))


@FUZZ
@given(
    status=TRAINER_STATUS,
    annotations=st.dictionaries(
        st.sampled_from(
            ["trainer.opendatahub.io/trainerStatus", "advisor.trainjob-advisor.io/progress", "x"]
        ),
        st.one_of(st.text(max_size=100), JSONISH.map(lambda v: json.dumps(v, allow_nan=True))),
        max_size=3,
    ),
    kind=st.sampled_from(["TrainJob", "PyTorchJob", "Other", ""]),
)
def test_whole_job_objects(status: Any, annotations: dict[str, str], kind: str) -> None:
    body = {
        "kind": kind,
        "metadata": {"name": "j", "namespace": "n", "annotations": annotations},
        "status": {"trainerStatus": status},
    }
    sample = sample_from_object(body, now=NOW)
    if sample is not None:
        _sane(sample)


@FUZZ
@given(doc=st.one_of(JSONISH, st.fixed_dictionaries({"spec": JSONISH}, optional={"metadata": JSONISH})))
def test_policy_loader_raises_only_policy_errors(doc: Any) -> None:
    if isinstance(doc, dict):
        doc = {"apiVersion": "advisor.trainjob-advisor.io/v1alpha1", "kind": "AdvisorPolicy", **doc}
    try:
        load_policy(doc)
    except PolicyError as exc:
        assert str(exc).strip()  # a message that says what is wrong


@FUZZ
@given(text=st.text(max_size=300))
def test_policy_loader_on_arbitrary_text(text: str) -> None:
    with pytest.raises(PolicyError):
        load_policy(text if text.strip() else "[]")


# ------------------------------------------------------------------------------- oversized inputs
def test_a_256_kib_annotation_is_refused_cheaply_with_a_warning() -> None:
    """Larger than the parser's 64 KiB bound: not decoded at all (no 256 KiB JSON parse per
    update), and the warning says why."""
    big = json.dumps({"currentStep": 10, "trainMetrics": {"loss": 1.0}, "junk": "x" * (256 * 1024)})
    started = time.perf_counter()
    sample = parse_rhoai_annotation(big, now=NOW)
    assert time.perf_counter() - started < 1.0
    _sane(sample)
    assert sample.loss is None and any("65536" in w for w in sample.warnings), sample.warnings


def test_ten_thousand_metrics_are_bounded_and_counted() -> None:
    status = {
        "metrics": [{"name": "current_step", "value": "5"}, {"name": "loss", "value": "2.5"}]
        + [{"name": f"m{i}", "value": str(i)} for i in range(10_000)],
        "lastUpdatedTime": "2026-08-21T10:30:45Z",
    }
    started = time.perf_counter()
    sample = parse_trainer_status(status, now=NOW)
    assert time.perf_counter() - started < 1.0
    _sane(sample)
    assert sample.step == 5 and sample.loss == 2.5
    assert len(sample.metrics) <= 256
    assert any("metric" in w for w in sample.warnings), sample.warnings
