"""What a table's cell holds when it holds no number: the markers writers put in a cell a row
does not fill, and the ``NaN`` some write there (told apart from a NaN a run really logged)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from advisor.series import eval_series_name, is_eval_name
from advisor.sources.coerce import parse_float
from advisor.sources.columns import Column
from advisor.sources.normalize import canonical_name

__all__ = ["MISSING_MARKERS", "RowKinds"]

#: what a table writes in a cell its row does not fill: nothing, R's ``NA``, pandas' ``<NA>`` and
#: ``N/A``, a serialised ``null`` / ``None``. Each is "no value here", never a number; ``NaN`` is
#: not among them (a diverged run writes it: ``RowKinds`` tells a filler NaN from a value)
MISSING_MARKERS = frozenset({"", "na", "n/a", "<na>", "null", "none", "nil"})


@dataclass(frozen=True, slots=True)
class RowKinds:
    """Which kind of row a record is, training or evaluation, read from the fields it carries.

    Why: a table that logs training and evaluation on rows of their own leaves the other kind's
    cells empty, but some writers fill them with ``NaN`` (W&B's and polars' CSV exports,
    ``to_csv(na_rep="NaN")``). Read as values, each such cell is a non-finite loss: a healthy run
    reads "diverging". A NaN counts as a value only on a row of its own kind: an eval metric's on a
    row that carries any finite eval field, or no finite training field; the training loss's on a
    row that carries a finite training field beside it (its learning rate), or no finite eval
    field. A run that blew up writes NaN on its own rows, and those still count."""

    #: the training row's fields: its loss, then what is logged beside it (the learning rate)
    train: tuple[str, ...]
    #: beside the loss only
    companions: tuple[str, ...]
    evals: tuple[str, ...]

    @classmethod
    def of(cls, columns: Mapping[str, Column], names: Sequence[str]) -> RowKinds:
        train = tuple(columns[role].name for role in ("loss", "learning_rate") if role in columns)
        companions = tuple(columns[r].name for r in ("learning_rate",) if r in columns and "loss" in columns)
        evals = tuple(n for n in names if is_eval_name(eval_series_name(canonical_name(n))))
        return cls(train, companions, evals)

    def placeholder(self, role: str, fields: Mapping[str, object]) -> bool:
        """Whether a NaN of the series ``role`` on this row stands for a cell the row does not fill."""
        if role == "loss":
            return _any_finite(fields, self.evals) and not _any_finite(fields, self.companions)
        return _any_finite(fields, self.train) and not _any_finite(fields, self.evals)

    def placeholder_rows(self, role: str, table: np.ndarray, header: Sequence[str]) -> np.ndarray:
        """``placeholder`` for every row of a numeric ``table`` with columns ``header`` at once."""

        def any_finite(names: Sequence[str]) -> np.ndarray:
            cols = [header.index(n) for n in names if n in header]
            if not cols:
                return np.zeros(table.shape[0], dtype=bool)
            return np.isfinite(table[:, cols]).any(axis=1)

        if role == "loss":
            return any_finite(self.evals) & ~any_finite(self.companions)
        return any_finite(self.train) & ~any_finite(self.evals)


def _any_finite(fields: Mapping[str, object], names: Sequence[str]) -> bool:
    for name in names:
        value = parse_float(fields.get(name), name, [])
        if value is not None:  # finite: parse_float drops the rest
            return True
    return False
