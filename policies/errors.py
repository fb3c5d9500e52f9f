"""The one error type of the policy model.

An admin who wrote a bad AdvisorPolicy needs to know *where* and *why*, in the same shape the
API server uses (``spec.rules.plateau.probability: must be in (0, 1], got 1.5``), and needs every
problem at once rather than one per edit-apply cycle. So a ``PolicyError`` carries a list of
``(path, reason)`` pairs; ``path`` and ``reason`` are the first for callers that want one.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PolicyError"]


class PolicyError(ValueError):
    """An invalid AdvisorPolicy; ``errors`` lists every ``(field path, reason)`` found."""

    def __init__(self, path: str, reason: str = "", *, errors: Iterable[tuple[str, str]] = ()) -> None:
        found = tuple(errors) or ((path, reason),)
        self.errors: tuple[tuple[str, str], ...] = found
        self.path, self.reason = found[0]
        super().__init__("\n".join(f"{p}: {r}" if p else r for p, r in found))
