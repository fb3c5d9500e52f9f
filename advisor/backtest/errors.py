"""Why runs cannot be back-tested: apart from ``runs`` so that ``index`` (which reads the index
CSV that ``runs`` consults) can raise them without importing the module that imports it."""

from __future__ import annotations

__all__ = ["BadRunError", "RunError"]


class RunError(Exception):
    """Runs that cannot be back-tested; ``str()`` is one line: ``file: field: reason``."""


class BadRunError(RunError):
    """One run that cannot be back-tested, which ``skip_bad`` skips. Apart from ``RunError``
    because only this kind is worth a hint to skip it: an empty folder, a bad index or flag
    fails with or without skipping."""
