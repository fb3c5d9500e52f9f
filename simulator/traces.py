"""Job traces: the simulator's input, from public cluster traces or the built-in generator.

A :class:`TraceJob` is what a trace knows of a job: when it was submitted, how many GPUs, how long it
computes (or how many steps), its queue and priority. Adapters read the Philly extract (Pollux
artifact), Microsoft ITP (raw and ElasticFlow-augmented), Gavel ``.trace`` files, the Tiresias job
CSV and the simulator's own CSV format; the synthetic generator is the embedded default so that
``trainjob-advisor simulate`` needs no external data.

Bad rows raise :class:`TraceError` naming the file, line, field and reason; with
``skip_bad_rows=True`` they are counted instead.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import numpy as np

__all__ = ["FORMATS", "Trace", "TraceError", "TraceJob", "load_trace", "synthetic_trace"]


class TraceError(ValueError):
    """A malformed trace: ``path:line: field: reason``."""

    def __init__(self, path: str | Path, line: int | None, field_name: str | None, reason: str) -> None:
        where = f"{path}" + (f":{line}" if line is not None else "")
        what = f" field {field_name!r}:" if field_name else ""
        super().__init__(f"{where}:{what} {reason}")
        self.path, self.line, self.field, self.reason = str(path), line, field_name, reason


@dataclass(frozen=True, slots=True)
class TraceJob:
    name: str
    submit: float  # seconds from the start of the trace
    gpus: int
    duration: float  # seconds of computation at the requested size, without overheads
    queue: str = "default"
    priority: int = 0
    total_steps: int | None = None
    #: the job's ``workload-type`` label when the trace records it (pretraining | fine-tuning)
    workload_type: str | None = None


@dataclass(slots=True)
class Trace:
    jobs: list[TraceJob]
    source: str
    skipped: int = 0
    skipped_reasons: list[str] = field(default_factory=list)

    @property
    def queues(self) -> list[str]:
        return sorted({j.queue for j in self.jobs})


# --------------------------------------------------------------------------------------------
# parsing helpers
# --------------------------------------------------------------------------------------------


def _num(
    path: Path, line: int, row: dict[str, str], name: str, *, positive: bool = False, integer: bool = False
) -> float:
    raw = row.get(name)
    if raw is None or str(raw).strip() == "":
        raise TraceError(path, line, name, "missing value")
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(path, line, name, f"not a number: {raw!r}") from None
    if not math.isfinite(value):
        raise TraceError(path, line, name, f"not finite: {raw!r}")
    if positive and value <= 0:
        raise TraceError(path, line, name, f"must be > 0, got {raw!r}")
    if not positive and value < 0:
        raise TraceError(path, line, name, f"must be >= 0, got {raw!r}")
    if integer and value != int(value):
        raise TraceError(path, line, name, f"must be an integer, got {raw!r}")
    return value


def _csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    # utf-8-sig: a spreadsheet's "CSV UTF-8" export starts with a byte-order mark, which read as
    # part of the first column's name ("\ufeffname") made the header unrecognised
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            have = ", ".join(header) or "nothing"
            raise TraceError(path, 1, missing[0], f"missing column (header has {have})")
        for row in reader:
            if None in row:
                raise TraceError(path, reader.line_num, None, "more fields than the header")
            yield reader.line_num, row


RowParser = Callable[[Path, int, dict[str, str]], TraceJob]


def _collect(
    path: Path,
    rows: Iterator[tuple[int, dict[str, str]]],
    parse: RowParser,
    skip_bad_rows: bool,
    source: str,
    *,
    unique_names: bool = False,
) -> Trace:
    """The trace's jobs; with ``unique_names`` (a trace whose rows name their jobs) a name given
    twice is a bad row: the runs a row stopped are named by it, and two could not be told apart."""
    jobs: list[TraceJob] = []
    trace = Trace(jobs, source)
    first_line: dict[str, int] = {}
    for line, row in rows:
        try:
            job = parse(path, line, row)
            if unique_names and job.name in first_line:
                raise TraceError(
                    path,
                    line,
                    "name",
                    f"{job.name!r} is also line {first_line[job.name]}'s: names are unique",
                )
            first_line.setdefault(job.name, line)
            jobs.append(job)
        except TraceError as exc:
            if not skip_bad_rows:
                raise
            trace.skipped += 1
            if len(trace.skipped_reasons) < 20:
                trace.skipped_reasons.append(str(exc))
    if not jobs:
        raise TraceError(path, None, None, "no usable jobs")
    jobs.sort(key=lambda j: (j.submit, j.name))
    t0 = jobs[0].submit
    # every field kept (a row's workload_type label was dropped here, so a trace's labels never
    # reached its jobs)
    trace.jobs = [replace(j, submit=j.submit - t0) for j in jobs]
    return trace


# --------------------------------------------------------------------------------------------
# adapters
# --------------------------------------------------------------------------------------------


def _philly(path: Path, line: int, row: dict[str, str]) -> TraceJob:
    try:
        submit = datetime.strptime(row.get("timestamp", ""), "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        raw = row.get("timestamp")
        raise TraceError(path, line, "timestamp", f"not 'YYYY-MM-DD HH:MM:SS': {raw!r}") from None
    gpus = int(_num(path, line, row, "num_gpus", positive=True, integer=True))
    duration = _num(path, line, row, "duration", positive=True)
    queue = (row.get("cluster") or "").strip()
    if not queue:
        raise TraceError(path, line, "cluster", "missing value")
    return TraceJob(f"philly-{line - 1}", submit, gpus, duration, f"vc-{queue}")


def _itp(path: Path, line: int, row: dict[str, str]) -> TraceJob:
    submit = _num(path, line, row, "submission_time")
    gpus = int(_num(path, line, row, "num_gpu", positive=True, integer=True))
    duration = _num(path, line, row, "duration", positive=True)
    steps = row.get("num_iteration")
    total = int(_num(path, line, row, "num_iteration", positive=True, integer=True)) if steps else None
    jid = (row.get("job_id") or f"{line}").strip()[:8]
    return TraceJob(f"itp-{jid}-{line - 1}", submit, gpus, duration, path.stem, total_steps=total)


def _tiresias(path: Path, line: int, row: dict[str, str]) -> TraceJob:
    submit = _num(path, line, row, "submit_time")
    gpus = int(_num(path, line, row, "num_gpu", positive=True, integer=True))
    duration = _num(path, line, row, "duration", positive=True)
    total = int(_num(path, line, row, "iterations", positive=True, integer=True))
    name = f"tiresias-{row.get('job_id', line)}"
    return TraceJob(name, submit, gpus, duration, "default", total_steps=total)


def _own(path: Path, line: int, row: dict[str, str]) -> TraceJob:
    name = (row.get("name") or "").strip()
    if not name:
        raise TraceError(path, line, "name", "missing value")
    submit = _num(path, line, row, "submit_s")
    gpus = int(_num(path, line, row, "gpus", positive=True, integer=True))
    duration = _num(path, line, row, "duration_s", positive=True)
    queue = (row.get("queue") or "default").strip() or "default"
    prio_raw = (row.get("priority") or "0").strip() or "0"
    try:
        priority = int(prio_raw)
    except ValueError:
        raise TraceError(path, line, "priority", f"not an integer: {prio_raw!r}") from None
    steps_raw = (row.get("total_steps") or "").strip()
    total = int(_num(path, line, row, "total_steps", positive=True, integer=True)) if steps_raw else None
    kind = (row.get("workload_type") or "").strip() or None
    if kind is not None and kind not in ("pretraining", "fine-tuning"):
        raise TraceError(path, line, "workload_type", f"expected pretraining or fine-tuning, got {kind!r}")
    return TraceJob(name, submit, gpus, duration, queue, priority, total, kind)


def _gavel_rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """Gavel ``.trace`` files are tab-separated without a header: 7 fields (the msr per-VC traces)
    or 10 (the physical-cluster traces)."""
    throughputs = _gavel_throughputs(path)
    with path.open(encoding="utf-8-sig") as fh:
        for line, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            parts = text.rstrip("\n").split("\t")
            if len(parts) == 7:
                job_type, _cmd, _arg, _data, steps, arrival, scale = parts
            elif len(parts) == 10:
                job_type, _cmd, _wd, _arg, _data, steps, scale, _w, _slo, arrival = parts
            else:
                raise TraceError(path, line, None, f"expected 7 or 10 tab-separated fields, got {len(parts)}")
            row = {"job_type": job_type, "total_steps": steps, "submit_s": arrival, "gpus": scale}
            key = f"('{job_type}', {scale.strip()})"
            rate = throughputs.get(key)
            row["throughput"] = "" if rate is None else str(rate)
            yield line, row


def _gavel_throughputs(path: Path) -> dict[str, float]:
    for parent in path.parents:
        candidate = parent / "simulation_throughputs.json"
        if candidate.exists():
            data = json.loads(candidate.read_text())
            return {k: float(v["null"]) for k, v in data.get("v100", {}).items() if "null" in v}
    raise TraceError(path, None, None, "Gavel traces need simulation_throughputs.json in a parent directory")


def _gavel(path: Path, line: int, row: dict[str, str]) -> TraceJob:
    steps = int(_num(path, line, row, "total_steps", positive=True, integer=True))
    gpus = int(_num(path, line, row, "gpus", positive=True, integer=True))
    submit = _num(path, line, row, "submit_s")
    if not row["throughput"]:
        raise TraceError(path, line, "job_type", f"no v100 throughput for {row['job_type']!r} x{gpus}")
    rate = _num(path, line, row, "throughput", positive=True)
    return TraceJob(f"gavel-{line}", submit, gpus, steps / rate, path.stem, total_steps=steps)


FORMATS: dict[str, tuple[tuple[str, ...], RowParser]] = {
    "philly": (("timestamp", "duration", "num_gpus", "cluster"), _philly),
    "itp": (("submission_time", "duration", "num_gpu"), _itp),
    "tiresias": (("num_gpu", "submit_time", "iterations", "duration"), _tiresias),
    "csv": (("name", "submit_s", "gpus", "duration_s"), _own),
}


def _detect(path: Path) -> str:
    if path.suffix == ".trace":
        return "gavel"
    with path.open(newline="", encoding="utf-8-sig") as fh:
        header = set(next(csv.reader(fh), []))
    for name, (required, _parse) in FORMATS.items():
        if set(required) <= header:
            return name
    wanted = "; ".join(f"{name}: {', '.join(required)}" for name, (required, _parse) in FORMATS.items())
    raise TraceError(
        path,
        1,
        None,
        f"unrecognised header (columns each format needs: {wanted}; the csv format also reads queue, "
        "priority, total_steps and workload_type); pass --trace-format (philly, itp, gavel, tiresias, csv)",
    )


def _check_readable(p: Path) -> None:
    """What is wrong with the file itself, said before any format is guessed at (a directory is
    not "no such file", an empty file has no "unrecognised header", a binary one is not CSV)."""
    if p.is_dir():
        raise TraceError(p, None, None, "is a directory, not a trace file")
    if not p.is_file():
        raise TraceError(p, None, None, "no such file")
    try:
        with p.open("rb") as fh:
            head = fh.read(64 * 1024)
    except OSError as exc:
        raise TraceError(p, None, None, f"cannot read: {exc.strerror or exc}") from None
    if not head.strip():
        raise TraceError(p, None, None, "empty file")
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not merely a character cut at the end of the sample
            raise TraceError(p, None, None, "not UTF-8 text (a binary file?)") from None
        text = ""
    if "\x00" in text:
        raise TraceError(p, None, None, "not a text file (it holds NUL bytes)")


def load_trace(
    path: str | Path, fmt: str = "auto", *, skip_bad_rows: bool = False, limit: int | None = None
) -> Trace:
    """Read a trace file (``fmt``: auto, philly, itp, gavel, tiresias, csv)."""
    p = Path(path)
    _check_readable(p)
    kind = _detect(p) if fmt == "auto" else fmt
    parse: RowParser
    if kind == "gavel":
        rows, parse = _gavel_rows(p), _gavel
    elif kind in FORMATS:
        required, parse = FORMATS[kind]
        rows = _csv_rows(p, required)
    else:
        raise TraceError(p, None, None, f"unknown trace format {fmt!r}")
    if limit is not None:
        rows = (r for i, r in enumerate(rows) if i < limit)
    try:
        return _collect(p, rows, parse, skip_bad_rows, f"{kind}:{p.name}", unique_names=kind == "csv")
    except UnicodeDecodeError:  # binary further in than the first block checked
        raise TraceError(p, None, None, "not UTF-8 text (a binary file?)") from None


def synthetic_trace(
    n_jobs: int = 240,
    *,
    seed: int = 0,
    hours: float = 36.0,
    queues: dict[str, float] | None = None,
    high_priority_fraction: float = 0.2,
    median_duration_h: float = 2.5,
) -> Trace:
    """The embedded default: Poisson arrivals, log-normal durations, a mix of GPU sizes, three
    teams' queues and a share of high-priority jobs (which may preempt in their queues)."""
    if n_jobs <= 0:
        raise ValueError("n_jobs must be positive")
    rng = np.random.default_rng(seed)
    teams = queues or {"team-a": 0.4, "team-b": 0.35, "team-c": 0.25}
    names, weights = list(teams), np.array(list(teams.values()), dtype=float)
    arrivals = np.sort(rng.uniform(0.0, hours * 3600.0, size=n_jobs))
    sizes = rng.choice([1, 2, 4, 8, 16], p=[0.3, 0.2, 0.25, 0.2, 0.05], size=n_jobs)
    durations = np.clip(
        rng.lognormal(math.log(median_duration_h * 3600.0), 0.9, size=n_jobs), 1200.0, 86400.0
    )
    queue_idx = rng.choice(len(names), p=weights / weights.sum(), size=n_jobs)
    high = rng.random(n_jobs) < high_priority_fraction
    jobs = [
        TraceJob(
            f"job-{i:04d}",
            float(arrivals[i]),
            int(sizes[i]),
            float(round(durations[i])),
            names[queue_idx[i]],
            1000 if high[i] else 0,
        )
        for i in range(n_jobs)
    ]
    return Trace(jobs, f"synthetic(n={n_jobs}, seed={seed})")
