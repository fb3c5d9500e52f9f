"""What the training process tells the cluster: its progress plus the acknowledgement metrics.

Why a snapshot rather than "send the ack": every progress channel the cluster has replaces the
whole previous report (upstream ``trainerStatus`` is replaced on each POST; the RHOAI poller
copies the latest ``/metrics`` document). An acknowledgement sent alone would erase the progress,
and progress sent alone would erase the acknowledgement. So each report carries both, and the ack
metrics stay in every later report ("sticky") until the next checkpoint replaces them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from advisor.protocol import ACK_REQUEST_METRIC, ACK_STEP_METRIC

__all__ = ["Report", "ack_metrics", "numeric_request_id"]

_EMPTY: Mapping[str, float] = MappingProxyType({})


def numeric_request_id(request_id: str) -> int | str:
    """The id as an ``int`` when it is a decimal integer, else unchanged.

    Channels whose metric values must be JSON numbers (the RHOAI ``/metrics`` document, the HF
    log dict that ``KubeflowCallback`` caches only when numeric) carry numeric ids intact; the
    controller's parser normalises either form back to the same text.
    """
    text = request_id.strip()
    if text.isdecimal() and (text == "0" or not text.startswith("0")):
        return int(text)
    return request_id


def ack_metrics(
    last_step: int | None, last_request: str | None, *, numeric: bool = False
) -> dict[str, object]:
    """The two acknowledgement metrics, under their shared names (empty before any checkpoint)."""
    out: dict[str, object] = {}
    if last_step is not None:
        out[ACK_STEP_METRIC] = int(last_step)
    if last_request is not None:
        out[ACK_REQUEST_METRIC] = numeric_request_id(last_request) if numeric else last_request
    return out


@dataclass(frozen=True, slots=True)
class Report:
    """One full progress report. ``time`` is wall-clock epoch seconds (the reporter's clock, as
    upstream ``lastUpdatedTime`` is)."""

    time: float
    step: int | None = None
    total_steps: int | None = None
    epoch: float | None = None
    metrics: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    last_checkpoint_step: int | None = None
    last_checkpoint_request: str | None = None
    judged_by: str | None = None
    """The eval metric the trainer keeps its best model by (HF's ``metric_for_best_model``): the
    advisor judges the run by it rather than by a default of its own."""

    def finite_metrics(self) -> dict[str, float]:
        """Training metrics with NaN/inf dropped (no channel accepts them)."""
        return {
            k: float(v) for k, v in self.metrics.items() if isinstance(v, int | float) and math.isfinite(v)
        }

    def numeric_metrics(self) -> dict[str, float]:
        """Every numeric training metric, NaN and inf included: a channel whose values are text
        (upstream ``trainerStatus``) carries them as ``nan`` / ``inf``, as Hugging Face's own
        Kubeflow callback does, and the controller keeps a non-finite loss as evidence of
        divergence."""
        return {k: float(v) for k, v in self.metrics.items() if isinstance(v, int | float)}

    def progress_percentage(self) -> int | None:
        if self.step is None or not self.total_steps or self.total_steps <= 0:
            return None
        return max(0, min(100, int(100 * self.step / self.total_steps)))

    def ack(self, *, numeric: bool = False) -> dict[str, object]:
        return ack_metrics(self.last_checkpoint_step, self.last_checkpoint_request, numeric=numeric)
