"""Small, cheap writes of ``TrainJobForecast`` statuses: the history is appended, not rewritten.

Each status carries the job's bounded history (a few hundred points), so that a controller
restart loses nothing. Two costs come with it, and both were measured on a real API server:

* **Request size.** Rewriting the history on every progress update made every write ~15 KB for
  1-2 new points. Here the first write of an object (and any write after the history was
  thinned, or after a doubt) is a full JSON merge patch; every later write is a JSON patch
  (RFC 6902) that carries only the new points and the top-level fields whose JSON changed.
* **The stored object's shape.** The API server decodes, validates and tracks field ownership of
  the whole stored object on every write, node by node: a 300-point history as five arrays of
  numbers (1,500 nodes) made each small patch cost it ~20-30 ms of CPU against ~8 ms without a
  history. So the history is stored as *chunks*: each a compact JSON string of up to
  ``CHUNK_POINTS`` rows ``[step, time, loss, learningRate, epoch]`` (trailing nulls dropped):
  ~10 strings instead of 1,500 numbers, ~10 ms per patch. New points rewrite only the last,
  partly filled chunk and add new ones.

A delta patch starts with a ``test`` of ``status.history.revision`` against the revision this
process last wrote, so a stale belief (another writer, a lost response, a hand edit) makes the
API server refuse it (422) and the store falls back to a full write at once. Appending is only
used while it is exactly what ``History.append`` did since the last write: nothing thinned (the
``dropped`` count is unchanged), the old segments unchanged, the last written point still in
place; otherwise the history is written in full.

Only a digest of what was written is remembered per object (the revision, the point count and
last point, the compact JSON of the small fields), not the history itself. Writes of one object
never overlap (the ``StatusWriter`` guarantees it), so no lock is needed per object.
``encode_history`` / ``decode_history`` convert between ``History.to_dict`` and the stored form.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from advisor.controller.api import status_code

__all__ = [
    "CHUNK_POINTS",
    "HISTORY_COLUMNS",
    "ForecastStore",
    "StoreStats",
    "decode_history",
    "encode_history",
]

log = logging.getLogger(__name__)

#: the per-point columns of ``History.to_dict``, in the order of a stored row
HISTORY_COLUMNS = ("steps", "times", "losses", "learningRates", "epochs")
#: the per-history scalars and lists of ``History.to_dict`` kept as they are
HISTORY_META = ("maxPoints", "segments", "restarts", "dropped", "interleaved")
#: the eval series of ``History.to_dict``, stored as one compact JSON string (they are few points)
HISTORY_EVALS = "evals"
#: points per stored chunk (a chunk string is then ~1.5 KB)
CHUNK_POINTS = 32


def _row(history: Mapping[str, Any], i: int) -> list[Any]:
    row = [_column(history, c)[i] if i < len(_column(history, c)) else None for c in HISTORY_COLUMNS]
    while len(row) > 3 and row[-1] is None:
        row.pop()
    return row


def _chunk(history: Mapping[str, Any], index: int, count: int) -> str:
    lo = index * CHUNK_POINTS
    return _dumps([_row(history, i) for i in range(lo, min(lo + CHUNK_POINTS, count))])


def encode_history(history: Mapping[str, Any], revision: int) -> dict[str, Any]:
    """``History.to_dict`` output in the stored form (``revision``, ``count``, ``chunks``)."""
    count = len(_column(history, "steps"))
    out = {
        **{k: history.get(k) for k in HISTORY_META},
        "revision": revision,
        "count": count,
        "chunks": [_chunk(history, c, count) for c in range(-(-count // CHUNK_POINTS))],
    }
    if history.get(HISTORY_EVALS) is not None:
        out[HISTORY_EVALS] = _dumps(history[HISTORY_EVALS])
    return out


def decode_history(stored: Any) -> dict[str, Any]:
    """The stored form back in ``History.to_dict`` form (``History.from_dict`` reads it). The
    older column form passes through; an unreadable chunk is skipped, never fatal."""
    if not isinstance(stored, Mapping):
        return {}
    if "chunks" not in stored:
        return dict(stored)
    out: dict[str, Any] = {k: stored.get(k) for k in HISTORY_META if k in stored}
    columns: dict[str, list[Any]] = {c: [] for c in HISTORY_COLUMNS}
    for chunk in stored.get("chunks") or []:
        try:
            rows = json.loads(chunk) if isinstance(chunk, str) else None
        except ValueError:
            rows = None
        for row in rows if isinstance(rows, list) else []:
            if not isinstance(row, list) or not row:
                continue
            for i, c in enumerate(HISTORY_COLUMNS):
                columns[c].append(row[i] if i < len(row) else None)
    out.update(columns)
    evals = stored.get(HISTORY_EVALS)
    if isinstance(evals, str):
        try:
            out[HISTORY_EVALS] = json.loads(evals)
        except ValueError:
            log.warning("stored eval series unreadable; starting them afresh")
    return out


class ForecastApi(Protocol):
    """The three writes of a TrainJobForecast; each returns the object's ``metadata.generation``
    from the API server's response (None when unknown: ``create_forecast`` of an existing one)."""

    def create_forecast(self, namespace: str, name: str, owner: Mapping[str, Any]) -> int | None: ...

    def patch_forecast_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> int | None: ...

    def json_patch_forecast_status(
        self, namespace: str, name: str, ops: list[dict[str, Any]]
    ) -> int | None: ...


@dataclass
class StoreStats:
    full: int = 0
    delta: int = 0
    unchanged: int = 0
    fallbacks: int = 0  # delta patches the API server refused (stale belief), then written in full
    bytes: int = 0  # JSON bytes of the patches sent (about: values plus a fixed cost per op)


@dataclass(frozen=True)
class _Written:
    """What this process last wrote for one object (a digest, not the history)."""

    revision: int
    max_points: Any
    count: int
    dropped: Any
    restarts: Any
    segments: tuple[Any, ...]
    last_point: tuple[Any, ...] | None
    fields: dict[str, str]  # top-level status field -> compact JSON
    evals: str | None = None  # compact JSON of the eval series written
    interleaved: Any = None  # a second writer's reports left out, as written


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)


def _point(history: Mapping[str, Any], i: int) -> tuple[Any, ...]:
    return tuple(_row(history, i))


def _column(history: Mapping[str, Any], name: str) -> list[Any]:
    col = history.get(name)
    return col if isinstance(col, list) else []


class ForecastStore:
    """``write(key, owner, status)``: persist ``status`` (with ``status["history"]`` in
    ``History.to_dict`` form) for the job ``key`` ("namespace/name") as cheaply as is safe."""

    def __init__(self, api: ForecastApi) -> None:
        self.api = api
        self._written: dict[str, _Written] = {}
        self._exists: set[str] = set()  # objects known to exist (listed at startup, or written)
        #: each object's ``metadata.generation`` as the API server last returned it
        self._generation: dict[str, int] = {}
        self.stats = StoreStats()

    def known(self, key: str, generation: int | None = None) -> None:
        """``key``'s object exists (found at startup): a first write patches it directly."""
        self._exists.add(key)
        if generation is not None:
            self._generation[key] = generation

    def forget(self, key: str) -> None:
        self._written.pop(key, None)
        self._exists.discard(key)
        self._generation.pop(key, None)

    def write(self, key: str, owner: Mapping[str, Any], status: Mapping[str, Any]) -> str:
        """Returns how it was written: ``full``, ``delta`` or ``unchanged`` (nothing to send).

        The status is stamped with ``observedGeneration`` (top level and each condition): the
        generation of the object's spec as the API server last returned it. A write whose
        response shows a newer generation (the spec was edited since) is followed at once by a
        small patch carrying it, so the status never claims a generation it did not see."""
        status = _with_job_uid(status, owner)
        how, sent = self._write(key, owner, status)
        if how != "unchanged" and self._generation.get(key) != sent:
            self._write(key, owner, status)
        return how

    def _learn(self, key: str, generation: int | None) -> None:
        if generation is not None:
            self._generation[key] = generation

    def _write(
        self, key: str, owner: Mapping[str, Any], unstamped: Mapping[str, Any]
    ) -> tuple[str, int | None]:
        """One write; returns how, and the generation the status it sent was stamped with."""
        ns, name = key.split("/", 1)
        if key not in self._exists:  # create first: a fresh object's generation is in its status
            self._learn(key, self.api.create_forecast(ns, name, owner))  # an existing one is kept
            self._exists.add(key)
            self._written.pop(key, None)
        sent = self._generation.get(key)
        status = _stamped(unstamped, sent)
        history = status.get("history")
        history = history if isinstance(history, Mapping) else None
        last = self._written.get(key)
        if last is not None:
            plan = self._delta(last, status, history)
            if plan is not None:
                ops, revision, fields = plan
                if not ops:
                    self.stats.unchanged += 1
                    return "unchanged", sent
                try:
                    generation = self.api.json_patch_forecast_status(ns, name, ops)
                except Exception as exc:
                    if status_code(exc) not in (404, 409, 422):
                        self._written.pop(key, None)  # unknown outcome: the next write is a full one
                        raise
                    self.stats.fallbacks += 1
                    log.debug("delta write of %s refused (%s): writing it in full", key, status_code(exc))
                else:
                    self._learn(key, generation)
                    self.stats.delta += 1
                    self.stats.bytes += sum(len(_dumps(op.get("value"))) + 40 for op in ops)  # about
                    self._remember(key, history, revision, fields)
                    return "delta", sent
        revision = (last.revision if last is not None else 0) + 1
        self._written.pop(key, None)
        full = _encoded(status, revision)
        try:
            self._learn(key, self.api.patch_forecast_status(ns, name, full))
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            # gone (deleted by hand, or never there): create it, and write with its generation
            self._generation.pop(key, None)
            self._learn(key, self.api.create_forecast(ns, name, owner))
            sent = self._generation.get(key)
            status = _stamped(unstamped, sent)
            full = _encoded(status, revision)
            self._learn(key, self.api.patch_forecast_status(ns, name, full))
        self.stats.full += 1
        fields = {k: _dumps(v) for k, v in status.items() if k != "history"}
        self.stats.bytes += sum(map(len, fields.values())) + len(_dumps(full.get("history")))
        self._remember(key, history, revision, fields)
        return "full", sent

    # ------------------------------------------------------------------------------ internals
    def _remember(
        self, key: str, history: Mapping[str, Any] | None, revision: int, fields: dict[str, str]
    ) -> None:
        count = len(_column(history, "steps")) if history is not None else 0
        self._written[key] = _Written(
            revision=revision,
            max_points=history.get("maxPoints") if history is not None else None,
            count=count,
            dropped=history.get("dropped") if history is not None else None,
            restarts=history.get("restarts") if history is not None else None,
            segments=tuple(_column(history, "segments")) if history is not None else (),
            last_point=_point(history, count - 1) if history is not None and count else None,
            fields=fields,
            evals=_evals_text(history),
            interleaved=history.get("interleaved") if history is not None else None,
        )

    def _delta(
        self, last: _Written, status: Mapping[str, Any], history: Mapping[str, Any] | None
    ) -> tuple[list[dict[str, Any]], int, dict[str, str]] | None:
        """The JSON patch from what was last written to ``status``, or None when only a full
        write is safe (the history was thinned or otherwise rewritten)."""
        if not set(last.fields) <= set(status):
            return None  # a field to remove: only a full write removes it
        ops: list[dict[str, Any]] = []
        revision = last.revision
        if history is not None:
            steps = _column(history, "steps")
            segments = _column(history, "segments")
            n = len(steps)
            if (
                history.get("maxPoints") != last.max_points
                or history.get("dropped") != last.dropped
                or n < last.count
                or tuple(segments[: len(last.segments)]) != last.segments
                or any(len(_column(history, c)) != n for c in HISTORY_COLUMNS)
                or (last.count and _point(history, last.count - 1) != last.last_point)
            ):
                return None
            evals = _evals_text(history)
            if (
                n > last.count
                or tuple(segments) != last.segments
                or history.get("restarts") != last.restarts
                or history.get("interleaved") != last.interleaved
                or evals != last.evals
            ):
                base = "/status/history"
                ops.append({"op": "test", "path": f"{base}/revision", "value": last.revision})
                if evals != last.evals and evals is not None:
                    ops.append({"op": "add", "path": f"{base}/{HISTORY_EVALS}", "value": evals})
                stored_chunks = -(-last.count // CHUNK_POINTS)
                for c in range(last.count // CHUNK_POINTS, -(-n // CHUNK_POINTS)):
                    path = f"{base}/chunks/{c}" if c < stored_chunks else f"{base}/chunks/-"
                    op = "replace" if c < stored_chunks else "add"
                    ops.append({"op": op, "path": path, "value": _chunk(history, c, n)})
                revision = last.revision + 1
                ops += [
                    {"op": "replace", "path": f"{base}/count", "value": n},
                    {"op": "replace", "path": f"{base}/segments", "value": list(segments)},
                    {"op": "replace", "path": f"{base}/restarts", "value": history.get("restarts")},
                    # "add" sets it on a history an older version wrote without it, too
                    {"op": "add", "path": f"{base}/interleaved", "value": history.get("interleaved") or 0},
                    {"op": "replace", "path": f"{base}/revision", "value": revision},
                ]
        elif last.count:
            return None
        fields = {}
        for field, value in status.items():
            if field == "history":
                continue
            fields[field] = text = _dumps(value)
            if last.fields.get(field) != text:
                ops.append({"op": "add", "path": f"/status/{_escape(field)}", "value": value})
        return ops, revision, fields


def _encoded(status: Mapping[str, Any], revision: int) -> dict[str, Any]:
    """``status`` as a full write sends it: the history in its stored (chunked) form."""
    out = dict(status)
    history = status.get("history")
    if isinstance(history, Mapping):
        out["history"] = encode_history(history, revision)
    return out


def _stamped(status: Mapping[str, Any], generation: int | None) -> dict[str, Any]:
    """``status`` with ``observedGeneration`` on it and on each of its conditions (Kubernetes'
    convention: what a reader compares with ``metadata.generation``); unchanged when unknown."""
    out = dict(status)
    if generation is None:
        return out
    out["observedGeneration"] = generation
    conditions = out.get("conditions")
    if isinstance(conditions, list):
        out["conditions"] = [
            {**c, "observedGeneration": generation} if isinstance(c, Mapping) else c for c in conditions
        ]
    return out


def _evals_text(history: Mapping[str, Any] | None) -> str | None:
    evals = history.get(HISTORY_EVALS) if history is not None else None
    return None if evals is None else _dumps(evals)


def _escape(token: str) -> str:
    """A JSON pointer token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def _with_job_uid(status: Mapping[str, Any], owner: Mapping[str, Any]) -> Mapping[str, Any]:
    """``status`` naming, in ``job.uid``, the job it is written for. The object's ownerReference
    cannot say it: a job deleted and made again under its name while the controller runs finds the
    old run's TrainJobForecast (where no garbage collector removed it yet) and keeps its owner, and
    a restart read the new run's status as the deleted run's and dropped its history and actions."""
    uid, job = owner.get("uid"), status.get("job")
    if not uid or not isinstance(job, Mapping) or job.get("uid") == uid:
        return status
    return {**status, "job": {**job, "uid": str(uid)}}
