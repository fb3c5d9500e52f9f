"""Progress sources: every format a training run reports progress in, parsed into shared types.

Live objects (upstream ``status.trainerStatus``, the RHOAI annotation, our PyTorchJob annotation)
become ``ProgressSample``s via ``sample_from_object``; files (CSV/TSV, JSONL, HF
``trainer_state.json``) become a ``LoadedCurve`` via ``load_curve``. Everything here is pure: no
Kubernetes client, no event loop, no wall clock, and bad input is coerced or dropped with a
warning rather than raised (files excepted: a file that cannot be read raises ``SourceError``).
"""

from advisor.sources.files import LoadedCurve, SourceError, load_curve
from advisor.sources.normalize import UNKNOWN_STEP
from advisor.sources.progress_annotation import encode_progress, parse_progress_annotation
from advisor.sources.trainerstatus import (
    deadline_from_object,
    parse_rhoai_annotation,
    parse_trainer_status,
    sample_from_object,
)

__all__ = [
    "UNKNOWN_STEP",
    "LoadedCurve",
    "SourceError",
    "deadline_from_object",
    "encode_progress",
    "load_curve",
    "parse_progress_annotation",
    "parse_rhoai_annotation",
    "parse_trainer_status",
    "sample_from_object",
]
