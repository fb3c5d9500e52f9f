"""Training-side helpers: run inside the job's own process and answer the platform's checkpoint
requests.

The controller asks by annotating the pods (``advisor.trainjob-advisor.io/checkpoint-request``);
:class:`CheckpointRequests` hears it through the downward-API file, and the adapters save and
acknowledge through the progress channel the cluster already reads:

- :mod:`advisor.training.hf` -- ``AdvisorCallback`` for the HuggingFace ``Trainer``;
- :mod:`advisor.training.lightning` -- ``AdvisorCallback`` for PyTorch Lightning;
- :func:`checkpoint_if_requested` -- any hand-written loop.

Nothing here imports torch, transformers or lightning at import time: a training image pays for
what it uses, and the controller can import the shared names without them.
"""

from __future__ import annotations

from advisor.training.channels import (
    JsonlFileChannel,
    KubeflowStatusChannel,
    MetricsEndpointChannel,
    PyTorchJobAnnotationChannel,
    channels_from_environment,
)
from advisor.training.loop import checkpoint_if_requested
from advisor.training.report import Report
from advisor.training.requests import CheckpointRequests

__all__ = [
    "CheckpointRequests",
    "JsonlFileChannel",
    "KubeflowStatusChannel",
    "MetricsEndpointChannel",
    "PyTorchJobAnnotationChannel",
    "Report",
    "channels_from_environment",
    "checkpoint_if_requested",
]
