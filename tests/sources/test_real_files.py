"""Every real HF trainer_state.json of the development set loads (skipped without the data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.sources import SourceError, load_curve

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "curves" / "hf-finetune"
FILES = sorted(DATA.glob("*.json")) if DATA.is_dir() else []

pytestmark = [
    pytest.mark.data,
    pytest.mark.skipif(not FILES, reason=f"development data absent ({DATA})"),
]


def test_every_real_trainer_state_loads_with_learning_rates_and_epochs() -> None:
    for path in FILES:
        curve = load_curve(path)
        assert len(curve) >= 30 or _has_eval(path), path.name
        assert curve.learning_rates is not None and curve.epochs is not None, path.name
        assert curve.total_steps is not None and curve.total_steps >= max(curve.steps), path.name


def _has_eval(path: Path) -> bool:
    try:
        return len(load_curve(path, metric="eval_loss")) >= 30
    except SourceError:
        return False
