"""Saves on SIGTERM pooled per runtime: the prior a job's own evictions update.

Jobs of one runtime share the training helper, the image and the storage, so whether their saves
on SIGTERM worked says something about the next job's (``policies.savewindow.miss_probability``),
and how long their steps and saves took says what grace period the next one needs before it has
measured its own (``policies.savewindow.peer_grace``). The pool sums the counts of the jobs the
loop holds and of those it forgot (deleted jobs, whose records and forecasts are gone:
``retired``, which an adapter persists so that a restart keeps it), and keeps the save windows of
both (the forgotten ones' in memory, the latest ``MAX_WINDOWS`` per runtime). Summed lazily and
cached until a count, a measure or the set of jobs changes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from advisor.core.record import JobRecord
from advisor.model import seconds_per_step

__all__ = ["MAX_WINDOWS", "RuntimeSigtermPool", "save_window"]

#: save windows kept per runtime (live jobs first, then the latest forgotten ones)
MAX_WINDOWS = 256

Window = tuple[int, float, float]


def save_window(rec: JobRecord) -> Window | None:
    """``(gpus, seconds per step, seconds per save)`` the job measured at its current size."""
    save = rec.checkpoint.save_duration
    if save is None:
        return None
    step = seconds_per_step(rec.throughput, rec.nodes, rec.forecast)
    if step is None:
        return None
    return (rec.gpus, step, save)


class RuntimeSigtermPool:
    """``runtime -> (saves, misses)`` on SIGTERM over the loop's jobs, live and forgotten."""

    __slots__ = ("_pool", "_retired", "_retired_windows", "_windows", "retired_version")

    def __init__(self) -> None:
        self._retired: dict[str, tuple[int, int]] = {}
        self._pool: dict[str, tuple[int, int]] | None = None
        self._retired_windows: dict[str, deque[Window]] = {}
        self._windows: dict[str, tuple[Window, ...]] | None = None
        #: grows whenever what ``retired`` or ``retired_windows`` hold changes (an adapter that
        #: persists them writes only then)
        self.retired_version = 0

    def invalidate(self) -> None:
        """A count, a measure or the set of jobs changed: pool again on the next look."""
        self._pool = None
        self._windows = None

    def windows(self, records: Iterable[JobRecord], runtime: str | None) -> tuple[Window, ...]:
        """The save windows measured on the runtime's jobs, live and forgotten (at most
        ``MAX_WINDOWS``)."""
        if runtime is None:
            return ()
        if self._windows is None:
            pooled: dict[str, list[Window]] = {}
            for r in records:
                rt = r.runtime
                w = save_window(r) if rt is not None else None
                if rt is not None and w is not None:
                    pooled.setdefault(rt, []).append(w)
            for rt, kept in self._retired_windows.items():
                pooled.setdefault(rt, []).extend(reversed(kept))
            self._windows = {rt: tuple(ws[:MAX_WINDOWS]) for rt, ws in pooled.items()}
        return self._windows.get(runtime, ())

    def prior(self, records: Iterable[JobRecord], rec: JobRecord, runtime: str | None) -> tuple[int, int]:
        """``(saves, misses)`` of the runtime's jobs other than ``rec``."""
        if runtime is None:
            return (0, 0)
        if self._pool is None:
            pool = dict(self._retired)
            for r in records:
                if r.runtime is not None:
                    s, m = pool.get(r.runtime, (0, 0))
                    pool[r.runtime] = (s + r.checkpoint.sigterm_saves, m + r.checkpoint.sigterm_misses)
            self._pool = pool
        saves, misses = self._pool.get(runtime, (0, 0))
        if rec.runtime == runtime:
            saves, misses = saves - rec.checkpoint.sigterm_saves, misses - rec.checkpoint.sigterm_misses
        return (max(0, saves), max(0, misses))

    def retire(self, rec: JobRecord) -> None:
        """Keep a forgotten job's counts and save window with its runtime."""
        if rec.runtime is not None:
            s, m = self._retired.get(rec.runtime, (0, 0))
            self._retired[rec.runtime] = (s + rec.checkpoint.sigterm_saves, m + rec.checkpoint.sigterm_misses)
            w = save_window(rec)
            if w is not None:
                self._retired_windows.setdefault(rec.runtime, deque(maxlen=MAX_WINDOWS)).append(w)
            self.retired_version += 1
        self.invalidate()

    @property
    def retired_windows(self) -> dict[str, list[list[float]]]:
        """The forgotten jobs' save windows per runtime, oldest first (JSON-safe lists)."""
        return {rt: [list(w) for w in kept] for rt, kept in self._retired_windows.items() if kept}

    def adopt_windows(self, data: Mapping[str, Any]) -> int:
        """Take persisted forgotten-job save windows (a restart): a runtime that has none of its
        own yet takes the stored ones (so adopting twice adds nothing); malformed entries are
        skipped. Returns the runtimes adopted."""
        adopted = 0
        for runtime, items in data.items():
            if (
                not isinstance(runtime, str)
                or not isinstance(items, list)
                or self._retired_windows.get(runtime)
            ):
                continue
            kept: deque[Window] = deque(maxlen=MAX_WINDOWS)
            for item in items:
                if (
                    isinstance(item, list | tuple)
                    and len(item) == 3
                    and all(isinstance(v, int | float) and not isinstance(v, bool) for v in item)
                    and item[0] >= 0
                    and math.isfinite(item[1])
                    and item[1] > 0
                    and math.isfinite(item[2])
                    and item[2] >= 0
                ):
                    kept.append((int(item[0]), float(item[1]), float(item[2])))
            if kept:
                self._retired_windows[runtime] = kept
                adopted += 1
        self.retired_version += 1
        self.invalidate()
        return adopted

    @property
    def retired(self) -> dict[str, tuple[int, int]]:
        """The forgotten jobs' counts per runtime (a copy)."""
        return dict(self._retired)

    def adopt(self, evidence: Mapping[str, Any]) -> int:
        """Take persisted forgotten-job counts (a restart). The counts only grow, so each runtime
        keeps the larger of what it has and what is given (adopting the same evidence twice counts
        it once); malformed entries are skipped. Returns the runtimes adopted."""
        adopted = 0
        for runtime, pair in evidence.items():
            if not isinstance(runtime, str) or not isinstance(pair, list | tuple) or len(pair) != 2:
                continue
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in pair):
                continue
            s, m = self._retired.get(runtime, (0, 0))
            self._retired[runtime] = (max(s, int(pair[0])), max(m, int(pair[1])))
            adopted += 1
        self.retired_version += 1
        self._pool = None
        return adopted
