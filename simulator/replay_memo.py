"""Pure work a simulator process repeats, done once: forecasts of the same curve and parses of the
same report.

The rows of one scenario (the policies of ``simulate``, the settings of a ``--sweep``) replay the
same jobs: until a row's decision changes a job's course (a release, a checkpoint, the quota it
frees for others), each row's jobs report the same progress and their histories are the same
curves, so each row would render and parse the same reports and fit the same curves again. Both
are pure functions of their inputs, so a process keeps their latest results (bounded, least
recently used first out) and a row whose inputs are equal, compared in full, gets the same
objects (frozen dataclasses). Nothing here changes what any row decides: only what it costs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Mapping

from advisor.core.wiring import training_loss_forecast
from advisor.model import Curve, Forecast, ProgressSample
from advisor.reported import read_back
from advisor.training.report import Report

__all__ = ["MAX_FORECASTS", "MAX_REPORTS", "clear", "forecast", "sample"]

#: forecasts kept per process (a scenario's rows make a few thousand per seed)
MAX_FORECASTS = 20_000
#: parsed reports kept per process (a seed of the default scenario logs about 20,000)
MAX_REPORTS = 100_000


@functools.lru_cache(maxsize=MAX_FORECASTS)
def forecast(curve: Curve, total_steps: int | None) -> Forecast:
    """``advisor.core.wiring.training_loss_forecast``, once per distinct (curve, total steps)."""
    return training_loss_forecast(curve, total_steps)


#: every field of a report (a field added to ``Report`` is part of the key without a change here)
_REPORT_FIELDS = tuple(f.name for f in dataclasses.fields(Report))


def _hashable(value: object) -> object:
    return tuple(value.items()) if isinstance(value, Mapping) else value


_SAMPLES: OrderedDict[tuple[object, ...], ProgressSample | None] = OrderedDict()


def sample(report: Report, *, name: str, namespace: str, now: float) -> ProgressSample | None:
    """``advisor.reported.read_back``, once per distinct report of a job. The observer's clock
    enters a parse only for a report without a time or from the observer's future (both say so in
    a warning about the observation time), so a report at or before ``now`` whose sample has no
    such warning is kept by its content alone."""
    if not report.time <= now:
        return read_back(report, name=name, namespace=namespace, now=now)
    key = (name, namespace, *(_hashable(getattr(report, f)) for f in _REPORT_FIELDS))
    if key in _SAMPLES:
        _SAMPLES.move_to_end(key)
        return _SAMPLES[key]
    parsed = read_back(report, name=name, namespace=namespace, now=now)
    if parsed is None or not any("observation time" in w for w in parsed.warnings):
        _SAMPLES[key] = parsed
        if len(_SAMPLES) > MAX_REPORTS:
            _SAMPLES.popitem(last=False)
    return parsed


def clear() -> None:
    """Forget everything kept (a test that counts parses or fits starts from nothing)."""
    forecast.cache_clear()
    _SAMPLES.clear()
