"""What a policy file's row is called in a comparison table, and what its rules cannot judge
there: one definition for ``simulate`` and ``backtest``, plain and ``--sweep``.

Both commands put each ``--policy`` file side by side with the baselines, and a user who runs one
and then the other reads the same policy under the same name in both tables (and in their JSON
and reports). The name is the one the user gave the policy (its ``metadata.name``), not the name
of the file it happens to sit in.

A row (or a sweep's setting) whose rule judges a metric no run reports (``metric: eval_acuracy``,
misspelt) judges nothing with that rule, and its "0 stops" reads as a verdict unless said: every
command that scores rows says it in the same words (``unreported_notes``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from advisor.sources.normalize import canonical_name
from policies.rules.base import series_rules

__all__ = ["policy_row_name", "unreported_by_row", "unreported_notes"]


def policy_row_name(policy: str, path: Path, taken: Collection[str]) -> str:
    """``advisor-<metadata.name>`` of the file's first policy (a sample file's first policy is the
    one it is named for: ``advisor-plateau-release``): what the user called it, not their file's
    name. A name already in the table (``taken``) gets its file's name, then a number, so that
    every row stays its own."""
    name = f"advisor-{policy}"
    if name in taken:
        name = f"{name} ({path.name})"
    base, k = name, 2
    while name in taken:
        name, k = f"{base} #{k}", k + 1
    return name


def unreported_by_row(
    reported: Collection[str], policy_rows: Iterable[tuple[str, Sequence[Any]]]
) -> dict[str, list[str]]:
    """Per row (name, its policies), the metrics its enabled rules name (``metric:``) that are not
    among ``reported`` (the series the runs report, by canonical name). Rows with none are left
    out."""
    out: dict[str, list[str]] = {}
    for name, policies in policy_rows:
        named = {rule.metric for p in policies for _, rule in series_rules(p) if rule.enabled and rule.metric}
        missing = sorted(m for m in named if canonical_name(m) not in reported)
        if missing:
            out[name] = missing
    return out


def unreported_notes(unreported: Mapping[str, Sequence[str]]) -> list[str]:
    """The line said under a table for each row of ``unreported_by_row``."""
    return [
        f"{name}: its rules judge {', '.join(metrics)}, which no run reports: they judge nothing here"
        for name, metrics in unreported.items()
    ]
