"""What the run of the back-test covered, in words: the report's header and the line under the
terminal's table.

Apart from ``report`` (the table and the timelines) because the meta data is the JSON's, keyed by
identifiers (``runs_shorter_than_min_runtime``) with nested objects: printed as they are they read
as a Python dict, not as a report. Each known key has its label; one added later still prints, its
name spelled out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.fields import format_duration

__all__ = ["footer_line", "meta_lines", "plural"]

_LABELS = {
    "runs": "runs",
    "groups": "groups",
    "runs_with_eval_series": "runs with an eval series",
    "runs_without_times": "runs without times or a stated pace, replayed at --steps-per-second",
    "runs_paced_by_their_summary": "runs without times, replayed at the pace their trainer's summary states",
    "runs_ending_before_planned": "runs whose log ends before its planned steps",
    "runs_shorter_than_min_runtime": "runs over before every policy's minRuntime",
    "steps_per_second_without_times": "steps per second of runs without times",
    "report_interval_s": "progress report interval",
    "forecast_interval_s": "forecast interval",
    "run_fraction": "re-forecast a quiet run every this share of its run (--run-fraction)",
    "gpus_default": "GPUs of a run without an index row (--gpus)",
    "skipped_runs": "runs skipped as bad",
    "index_rows_unmatched": "index rows matching no run",
    "runs_without_index_row": "runs without an index row",
    "ungrouped": "runs in no group (an empty group cell in the index)",
    "unreported_metrics": "metrics a row's rules judge that no run reports",
}
#: lists of names, shown each under its heading after the header (the JSON keeps the first 20)
_LISTS = {
    "skipped": "Runs skipped as bad",
    "index_files": "Index CSVs used",
    "index_rows_unmatched_keys": "Index rows matching no run",
    "runs_without_index_row_names": "Runs without an index row (--gpus or 1 GPU, no labels)",
}


def _value(key: str, value: Any) -> str:
    if key.endswith("_s") and isinstance(value, int | float):
        return format_duration(float(value))
    if key == "runs_shorter_than_min_runtime":
        if not value:
            return "- (no policy given)"
        untimed = f", {value['untimed']} of them without times" if value.get("untimed") else ""
        return f"{value['runs']}{untimed} (shortest minRuntime {format_duration(value['min_runtime_s'])})"
    if isinstance(value, Mapping):
        return ", ".join(f"{str(k).replace('_', ' ')} {v}" for k, v in value.items())
    return str(value)


def meta_lines(meta: Mapping[str, Any]) -> list[str]:
    """Markdown: one bullet per count or setting, then each non-empty list of names."""
    lines = [
        f"- **{_LABELS.get(k, k.replace('_', ' '))}**: {_value(k, v)}"
        for k, v in meta.items()
        # an empty map says nothing (its bullet read "metrics ... that no run reports: ")
        if k not in _LISTS and not (isinstance(v, Mapping) and not v)
    ]
    for key, heading in _LISTS.items():
        names = meta.get(key) or []
        if names:
            lines += ["", f"### {heading}", "", *(f"- {n}" for n in names)]
    return lines


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``: a count with its noun."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def footer_line(meta: dict[str, Any]) -> str:
    """The line under the table: the runs and groups read, then only the counts that are not zero
    (bad runs skipped, index rows matching no run, runs without an index row, runs with an eval
    series, without times and the throughput they were replayed at, runs over before any policy
    may judge them, logs that end before their planned steps)."""
    from policies.rules.base import dur

    notes = []
    if meta.get("skipped_runs"):
        notes.append(f"{meta['skipped_runs']} skipped as bad")
    if meta.get("index_rows_unmatched"):
        notes.append(f"{plural(meta['index_rows_unmatched'], 'index row')} matching no run")
    if meta.get("runs_without_index_row"):
        notes.append(f"{plural(meta['runs_without_index_row'], 'run')} without an index row")
    if meta.get("runs_with_eval_series"):
        notes.append(f"{meta['runs_with_eval_series']} with an eval series")
    if meta.get("runs_without_times"):
        rate = meta["steps_per_second_without_times"]
        unit = "step/s" if rate == 1 else "steps/s"
        notes.append(f"{meta['runs_without_times']} without times, replayed at {rate:g} {unit}")
    if meta.get("runs_paced_by_their_summary"):
        paced = meta["runs_paced_by_their_summary"]
        notes.append(f"{paced} replayed at the pace their trainer's summary states")
    short = meta.get("runs_shorter_than_min_runtime") or {}
    if short.get("runs"):
        hint = (
            f"; {short['untimed']} of them without times: --steps-per-second sets their pace"
            if short.get("untimed")
            else ""
        )
        notes.append(
            f"{plural(short['runs'], 'run')} over before every policy's minRuntime "
            f"({dur(short['min_runtime_s'])}) as replayed, so judged by none{hint}"
        )
    unfinished = meta.get("runs_ending_before_planned") or 0
    if unfinished:
        whose = "whose log ends before its" if unfinished == 1 else "whose logs end before their"
        notes.append(
            f"{unfinished} {whose} planned steps (a checkpoint's copy, or a run stopped early): judged on "
            "what it logged, its later course unknown"
        )
    head = f"{plural(meta['runs'], 'run')} in {plural(meta['groups'], 'group')}"
    if meta.get("ungrouped"):
        # "17 runs in 1 group and 12 in none" read as 29 runs
        grouped = meta["runs"] - meta["ungrouped"]
        head = (
            f"{plural(meta['runs'], 'run')}: {grouped} in {plural(meta['groups'], 'group')}, "
            f"{meta['ungrouped']} in none (an empty group cell in the index)"
        )
    return head + (f" ({'; '.join(notes)})" if notes else "")
