"""Why runs cannot be back-tested. ``RunError`` is the run index's (``advisor.sources.runindex``,
which ``simulate --curves`` reads too), so that a bad index and a bad run are one kind of error."""

from __future__ import annotations

from advisor.sources.runindex import RunError

__all__ = ["BadRunError", "RunError"]


class BadRunError(RunError):
    """One run that cannot be back-tested, which ``skip_bad`` skips. Apart from ``RunError``
    because only this kind is worth a hint to skip it: an empty folder, a bad index or flag
    fails with or without skipping."""
