"""What a policy file's row is called in a comparison table: one definition for ``simulate`` and
``backtest``.

Both commands put each ``--policy`` file side by side with the baselines, and a user who runs one
and then the other reads the same policy under the same name in both tables (and in their JSON
and reports). The name is the one the user gave the policy (its ``metadata.name``), not the name
of the file it happens to sit in.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path


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
