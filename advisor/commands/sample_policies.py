"""Where the sample AdvisorPolicies live: ``simulate`` and ``backtest`` read them when no
``--policy`` is given, and a ``--sweep`` that lacks its one policy file names the sample to start
from."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from advisor.cli import CommandError

__all__ = ["one_sweep_policy", "samples_dir"]


def samples_dir() -> Path:
    """``manifests/samples`` of this checkout."""
    return Path(__file__).resolve().parents[2] / "manifests" / "samples"


def one_sweep_policy(policies: Sequence[Path] | None) -> Path:
    """The one policy file a ``--sweep`` tunes; else one error line that names the sample to tune
    (the grid's fields are a policy's, so there is no default to fall back on)."""
    if policies and len(policies) == 1:
        return policies[0]
    sample = samples_dir() / "policy-plateau-release.yaml"
    hint = f" (the sample: --policy {sample})" if sample.is_file() else ""
    raise CommandError(f"--sweep tunes one policy file: give exactly one --policy FILE{hint}")
