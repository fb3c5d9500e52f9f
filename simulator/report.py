"""Results out: the terminal table, the JSON rows, and the Markdown report with its plots.

Plots use matplotlib's Agg backend (imported here only, so the CLI starts fast): a GPU-hours
waterfall per row (from the no-advisor total to the row's total), the JCT CDF of every row, and
GPU utilisation over time. The report also splits each acting row's non-learning GPU-hours into
those burnt by runs it released (too late) and by runs it let run on (never caught), per
pathology: the first is the cost of slow detection, the second of none.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.curves import WORKLOAD_TYPE_LABEL
from simulator.jobs import Phase
from simulator.metrics import completion_times_s, savings
from simulator.runner import RowResult

__all__ = [
    "JSON_KEYS",
    "LEGEND",
    "format_table",
    "json_text",
    "legend",
    "nonlearning_split",
    "saved_split",
    "wrapped_legend",
    "write_json",
    "write_report",
]

JSON_KEYS = (
    "policy",
    "gpu_hours",
    "gpu_hours_nonlearning",
    "gpu_hours_saved",
    "wrong_stops",
    "wrong_stop_fraction",
    "wrong_stops_by_threshold",
    "near_end_releases",
    "near_end_gpu_hours",
    "lost_work_gpu_hours",
    "checkpoint_overhead_gpu_hours",
    "jct_mean_s",
    "jct_p95_s",
    "jct_released_mean_s",
    "jct_released_p95_s",
    "queue_wait_mean_s",
    "utilization",
    "victim_precision",
    "victim_recall",
)


def saved_split(row: dict[str, Any], base: dict[str, Any]) -> dict[str, float] | None:
    """What a row's ``gpu_hours_freed`` is made of, against the no-advisor row ``base``
    (``metrics.savings``): ``nonlearning`` and ``overheads``, which make up ``gpu_hours_saved``,
    and ``learning``, GPU-hours of runs still learning it did not spend (not a saving). None for
    the reference row or when a figure is missing."""
    if row.get("gpu_hours_freed") is None or row is base or row.get("policy") == base.get("policy"):
        return None
    s = savings(row, base)
    return {
        "nonlearning": s["gpu_hours_saved_nonlearning"],
        "overheads": s["gpu_hours_saved_overheads"],
        "learning": s["gpu_hours_saved_learning"],
    }


def _with_split(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with what each saved against the first (``metrics.savings``), made again from
    their figures: pooled over seeds, the parts are those of the pooled figures."""
    base = rows[0] if rows else {}
    return [{**r, **savings(r, base)} if i else r for i, r in enumerate(rows)]


#: what each column of the table counts (printed under it and in the report)
LEGEND = (
    "GPU-h: GPU-hours held under admitted quota. non-learn: of them, held after a run stopped "
    "learning (<=1% improvement ahead on its hidden clean curve). saved = non-learn (non-learning "
    "GPU-h not burnt: what a release is for; checkpoints, restarts and lost work after a run stopped "
    "learning count here) + overheads (lost work, checkpoints, restarts avoided while runs learned; "
    "negative: added). cut learning: GPU-h of runs still learning not spent (work cut short or not "
    "reached by the end): a cost, not in saved (negative: more learning done by the end than "
    "without the advisor, as quota freed or work not lost let runs start sooner or get further); "
    "saved + cut learning + the near-end releases' GPU-h "
    "is no-advisor's GPU-h minus this row's. wrong, wrong%: runs released or stopped that would "
    "still have improved by more than 1%, and their share of all jobs (a sweep's wrong rate: of the "
    "jobs the policy judged, JSON jobs_judged). wrong .5/1/2%: "
    "runs released or stopped that would still have improved by more than 0.5/1/2%. near-end: "
    "healthy runs released in their last 15%. "
    "lost: work recomputed after preemptions and failures; ckpt: checkpoint overhead (GPU-h). JCT "
    "of completed runs (cut: of released ones; each row's own completions, so a row that releases the "
    "long jobs shortens it), wait: queue wait, util: GPU-h / capacity x span. "
    "victim P/R: of the jobs the row flagged as likely preemption victims (a guard's checkpoint or "
    "boost), the share preempted within the hour after; of the preemptions, the share flagged in "
    "the hour before ('-': the row flags none). A flag an hour ahead, not the per-pass prediction: "
    "that one, against the quota model's choice with the boost off, is bench/preemption_bench.py's."
)

_CLEAN_CURVE = "on its hidden clean curve"
_REAL_RECORD = "on the real run's own later record, smoothed and judged as the back-test judges it"


def legend(*, real_curves: bool = False) -> str:
    """``LEGEND``; with ``--curves`` a run has no hidden clean curve, and the verdicts read its own
    later record (``simulator.real_curves``): the legend says that instead."""
    return LEGEND.replace(_CLEAN_CURVE, _REAL_RECORD) if real_curves else LEGEND


def wrapped_legend(*, real_curves: bool = False) -> str:
    """``legend`` as printed under a table: 100 columns, never broken inside a column's name
    ("near-" / "end:" read as two words)."""
    return textwrap.fill(legend(real_curves=real_curves), 100, break_on_hyphens=False)


_COLUMNS = (
    ("policy", "policy", "{}"),
    ("GPU-h", "gpu_hours", "{:.0f}"),
    ("non-learn", "gpu_hours_nonlearning", "{:.0f}"),
    ("saved", "gpu_hours_saved", "{:+.0f}"),
    ("= non-learn", "gpu_hours_saved_nonlearning", "{:+.0f}"),
    ("+ overheads", "gpu_hours_saved_overheads", "{:+.0f}"),
    ("cut learning", "gpu_hours_saved_learning", "{:.0f}"),
    ("wrong", "wrong_stops", "{}"),
    ("wrong%", "wrong_stop_fraction", "{:.1%}"),
    ("wrong .5/1/2%", "wrong_stops_by_threshold", "{0[0.005]}/{0[0.01]}/{0[0.02]}"),
    ("near-end", "near_end_releases", "{}"),
    ("lost", "lost_work_gpu_hours", "{:.1f}"),
    ("ckpt", "checkpoint_overhead_gpu_hours", "{:.1f}"),
    ("JCT mean", "jct_mean_s", "{:.2f}h"),
    ("JCT p95", "jct_p95_s", "{:.2f}h"),
    ("JCT cut", "jct_released_mean_s", "{:.2f}h"),
    ("wait", "queue_wait_mean_s", "{:.2f}h"),
    ("util", "utilization", "{:.0%}"),
    ("victim P", "victim_precision", "{:.2f}"),
    ("victim R", "victim_recall", "{:.2f}"),
)


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    suffix = ""
    if fmt.endswith("h"):  # seconds shown in hours
        fmt, suffix, value = fmt[:-1], "h", value / 3600.0
    text = fmt.format(value)
    if isinstance(value, float) and re.fullmatch(r"[+-]?0(\.0*)?%?", text):
        text = ("+" if fmt.startswith("{:+") else "") + text.lstrip("+-")  # a rounded zero, not "-0"
    return text + suffix


def _row_cells(r: dict[str, Any]) -> list[str]:
    return [_cell(r.get(key), fmt) for _h, key, fmt in _COLUMNS]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    rows = _with_split(rows)
    header = [c[0] for c in _COLUMNS]
    body = [_row_cells(r) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for b in body:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(b, widths, strict=True))
            )
        )
    return "\n".join(lines)


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 6)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def json_text(rows: Sequence[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    """The rows as JSON text: ``JSON_KEYS`` first, then every other metric, each with the scenario."""
    out = []
    for r in _with_split(rows):
        obj = {k: _clean(r.get(k)) for k in JSON_KEYS}
        obj.update({k: _clean(v) for k, v in r.items() if k not in obj})
        if meta:
            obj["scenario"] = meta
        out.append(obj)
    return json.dumps(out, indent=2) + "\n"


def write_json(rows: Sequence[dict[str, Any]], path: Path, meta: dict[str, Any] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_text(rows, meta))


# --------------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------------


def _waterfall(results: Sequence[RowResult], path: Path) -> None:
    """What each row freed (``saved_split``), all rows on one axis from zero: the non-learning
    GPU-hours it did not burn and the overheads it avoided (or added), which make up its "saved"
    (a dot), and the GPU-hours of runs still learning that it did not spend, hatched (cut work:
    a cost, not in "saved"). Same scale for every row, so that the rows compare as the table
    does."""
    import matplotlib.pyplot as plt

    base = results[0].metrics
    rows = [r.metrics for r in results[1:]]
    splits = [saved_split(m, base) or {"nonlearning": 0.0, "overheads": 0.0, "learning": 0.0} for m in rows]
    parts = (
        ("nonlearning", "non-learning GPU-h not burnt (saved)", "#2a9d8f", ""),
        ("overheads", "lost work + checkpoints + restarts avoided", "#8ab17d", ""),
        ("learning", "cut learning: GPU-h of runs still learning not spent (not in saved)", "#e76f51", "//"),
    )
    fig, ax = plt.subplots(figsize=(10, 0.55 * max(3, len(rows)) + 1.6))
    y = np.arange(len(rows))[::-1]
    pos = np.zeros(len(rows))  # positives stack rightwards from 0, negatives (GPU-h added) leftwards
    neg = np.zeros(len(rows))
    for key, label, colour, hatch in parts:
        values = np.array([sp[key] for sp in splits])
        left = np.where(values >= 0, pos, neg)
        ax.barh(y, values, left=left, color=colour, hatch=hatch, edgecolor="white", height=0.6, label=label)
        pos += np.maximum(values, 0.0)
        neg += np.minimum(values, 0.0)
    saved = [m.get("gpu_hours_saved") or 0.0 for m in rows]
    dot = '"saved" (the table\'s column: non-learning + overheads)'
    ax.plot(saved, y, "o", color="black", ms=5, label=dot)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_yticks(y, [m["policy"] for m in rows], fontsize=8)
    ax.set_xlabel(f"GPU-hours against no-advisor ({base['gpu_hours']:,.0f} GPU-h); right: fewer used")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.set_title("What each row saves, and what it cuts", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _jct_cdf(results: Sequence[RowResult], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for res in results:
        # completed jobs only, as the table counts JCT (a released job's time is no completion)
        jct = np.sort(np.array(completion_times_s(res.jobs)) / 3600.0)
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=res.metrics["policy"])
    ax.set_xscale("log")
    ax.set_xlabel("job completion time of completed jobs (hours, log scale)")
    ax.set_ylabel("fraction of completed jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _utilisation(results: Sequence[RowResult], capacity: int, path: Path) -> None:
    """GPU utilisation over time, one small panel per row on shared axes (0 to the highest use),
    each with the no-advisor row in grey beneath it: eight similar lines on one axis cannot be
    told apart, a row against the reference can."""
    import matplotlib.pyplot as plt

    def series(res: RowResult) -> tuple[Any, Any] | None:
        pts = res.record.usage
        if not pts:
            return None
        return np.array([p[0] for p in pts]) / 3600.0, np.array([p[1] for p in pts]) / capacity

    n = len(results)
    cols = min(2, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        nrows, cols, figsize=(6.0 * cols, 1.9 * nrows + 0.8), sharex=True, sharey=True, squeeze=False
    )
    reference = series(results[0])
    top = max([1.0, *(float(s[1].max()) for s in map(series, results) if s is not None)])
    for ax, res in zip(axes.flat, results, strict=False):
        if reference is not None and res is not results[0]:
            ax.step(*reference, where="post", color="0.7", lw=0.8, label="no-advisor")
        own = series(res)
        if own is not None:
            ax.step(*own, where="post", color="#1f77b4", lw=0.9, label=res.metrics["policy"])
        ax.set_title(f"{res.metrics['policy']} (mean {res.metrics['utilization']:.0%})", fontsize=8)
        ax.set_ylim(0.0, top * 1.05)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.supxlabel("simulated time (hours)", fontsize=9)
    fig.supylabel("GPUs in use / nominal capacity", fontsize=9)
    fig.suptitle("Utilisation over time (grey: no-advisor)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def nonlearning_split(result: RowResult) -> dict[str, dict[str, float]]:
    """Per pathology: the non-learning GPU-hours of runs the row released or stopped (burnt before
    it acted) and of runs that ran on (to their end, or still running at the horizon), the number
    of each, and the median hours a released run was held after it stopped learning."""
    out: dict[str, dict[str, float]] = {}
    lags: dict[str, list[float]] = {}
    for j in result.jobs:
        if j.nonlearning_gpu_s <= 0:
            continue
        d = out.setdefault(
            j.curve.pathology, {"released_h": 0.0, "released": 0, "ran_on_h": 0.0, "ran_on": 0, "lag_h": 0.0}
        )
        if j.phase in (Phase.RELEASED, Phase.STOPPED):
            d["released_h"] += j.nonlearning_gpu_s / 3600.0
            d["released"] += 1
            lags.setdefault(j.curve.pathology, []).append(j.nonlearning_gpu_s / 3600.0 / max(1, j.gpus))
        else:
            d["ran_on_h"] += j.nonlearning_gpu_s / 3600.0
            d["ran_on"] += 1
    for name, values in lags.items():
        out[name]["lag_h"] = float(np.median(values))
    return dict(sorted(out.items()))


def _by_pathology(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown: each row's non-learning GPU-hours by pathology, with the near-end charge (the
    non-learning hours a near-end release would have burnt, charged to the row though no run burnt
    them, so in no pathology) and their total, the table's non-learn column: the row adds up."""
    names = list(rows[0]["gpu_hours_nonlearning_by_pathology"])
    lines = [
        "## Non-learning GPU-hours by pathology",
        "",
        "The pathologies plus the *near-end charge* add up to *non-learn*: a near-end release (a healthy "
        "run cut in the last 15% of its budget) is charged the non-learning GPU-hours it would have "
        "burnt to its end, as if it had not been cut, and those hours belong to no pathology.",
        "",
        "| policy | " + " | ".join(names) + " | near-end charge | non-learn |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    for r in rows:
        shares = r["gpu_hours_nonlearning_by_pathology"]
        cells = [f"{shares.get(k, 0.0):.1f}" for k in names]
        charge = r.get("near_end_nonlearning_gpu_hours", 0.0)
        lines.append(
            f"| {r['policy']} | {' | '.join(cells)} | {charge:.1f} | {r['gpu_hours_nonlearning']:.1f} |"
        )
    return lines


def _where_nonlearning_goes(results: Sequence[RowResult]) -> list[str]:
    """Markdown: the split of :func:`nonlearning_split` for every row that released anything."""
    acting = [r for r in results if r.metrics["released_or_stopped"]]
    if not acting:
        return []
    lines = [
        "## Where the non-learning GPU-hours go",
        "",
        "Per pathology: GPU-hours burnt after the run stopped learning by runs the row released or "
        "stopped (before it acted; *lag*: median hours such a run held its GPUs after it stopped "
        "learning) and by runs that ran on to their end. Only runs that burnt some count: a run "
        "released or stopped while still learning (a wrong stop, or a cut counted in *cut learning*) "
        "is in neither column, so *released: runs* can be fewer than the row's releases.",
        "",
        "| policy | pathology | released: runs | released: GPU-h | lag (h) | ran on: runs | ran on: GPU-h |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in acting:
        for name, d in nonlearning_split(r).items():
            lines.append(
                f"| {r.metrics['policy']} | {name} | {d['released']:.0f} | {d['released_h']:.0f} | "
                f"{d['lag_h']:.2f} | {d['ran_on']:.0f} | {d['ran_on_h']:.0f} |"
            )
    return lines


def reporting_text(jobs: Sequence[Any]) -> str:
    """What the advisor rows could see of the jobs' progress (every row sees the same jobs)."""
    total = sum(1 for j in jobs if j.reports_total)
    lr = sum(1 for j in jobs if j.reports_lr)
    labelled = sum(1 for j in jobs if WORKLOAD_TYPE_LABEL in j.labels)
    # the sample policies' selectors read the label: their wrong-stop rates differ by it (quoted
    # with 90% labelled beside unlabelled), so the count is said where the figures are
    labels = (
        f"{labelled} of {len(jobs)} jobs carry a {WORKLOAD_TYPE_LABEL} label"
        if labelled
        else f"no job carries a {WORKLOAD_TYPE_LABEL} label (--label-rate R [--label-error E] labels them)"
    )
    return (
        f"each report read as the controller reads it (rendered as the TrainJob's "
        f"status.trainerStatus, parsed by advisor.sources); {total} of {len(jobs)} jobs report their "
        f"planned steps, {lr} their learning rate (a policy's minProgress holds only jobs that report "
        f"planned steps; the forecast of one that does not is read to where its learning rate's "
        f"decay ends, by its recent trend while the rate is held at its peak, else against its "
        f"curve's asymptote); {labels}, which policy selectors read"
    )


def write_report(
    results: Sequence[RowResult],
    out_dir: Path,
    *,
    title: str,
    meta: dict[str, Any],
    capacity: int,
    real_curves: bool = False,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    out_dir.mkdir(parents=True, exist_ok=True)
    _waterfall(results, out_dir / "gpu_hours_waterfall.png")
    _jct_cdf(results, out_dir / "jct_cdf.png")
    _utilisation(results, capacity, out_dir / "utilization.png")
    rows = [r.metrics for r in results]
    write_json(rows, out_dir / "results.json", meta)
    lines = [f"# {title}", ""]
    lines += [f"- **{k}**: {v}" for k, v in meta.items()]
    if results:
        lines.append(f"- **progress reports**: {reporting_text(results[0].jobs)}")
    lines += [
        "",
        "## Every policy side by side",
        "",
        "```",
        format_table(rows),
        "```",
        "",
        legend(real_curves=real_curves) + " The full definitions are in `simulator/metrics.py`.",
        "",
    ]
    lines += [
        "## Details",
        "",
        "| policy | completed | released/stopped | preemptions | failures | "
        "checkpoints | wrong-stop GPU-h | lost to preemption GPU-h | actions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        acts = ", ".join(f"{k} {v}" for k, v in r["actions"].items()) or "-"
        lines.append(
            f"| {r['policy']} | {r['completed']} | {r['released_or_stopped']} | {r['preemptions']} | "
            f"{r['failures']} | {r['checkpoints']} | {r['wrong_stop_gpu_hours']:.1f} | "
            f"{r['lost_work_preemption_gpu_hours']:.1f} | {acts} |"
        )
    lines += ["", *_by_pathology(rows)]
    lines += ["", *_where_nonlearning_goes(results)]
    lines += [
        "",
        "## Plots",
        "",
        "![GPU-hours waterfall](gpu_hours_waterfall.png)",
        "",
        "![JCT CDF](jct_cdf.png)",
        "",
        "![Utilisation over time](utilization.png)",
        "",
        "Raw rows: `results.json` (the same objects as `--json`).",
        "",
    ]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
