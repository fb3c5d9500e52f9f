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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.jobs import Phase
from simulator.runner import RowResult

__all__ = ["JSON_KEYS", "format_table", "json_text", "nonlearning_split", "write_json", "write_report"]

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

_COLUMNS = (
    ("policy", "policy", "{}"),
    ("GPU-h", "gpu_hours", "{:.0f}"),
    ("non-learn", "gpu_hours_nonlearning", "{:.0f}"),
    ("saved", "gpu_hours_saved", "{:+.0f}"),
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
    if fmt.endswith("h}") or fmt.endswith("h"):
        return fmt.format(value / 3600.0)
    return fmt.format(value)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    header = [c[0] for c in _COLUMNS]
    body = [[_cell(r.get(key), fmt) for _h, key, fmt in _COLUMNS] for r in rows]
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
    for r in rows:
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
    import matplotlib.pyplot as plt

    base = results[0].metrics
    others = results[1:]
    n = max(1, len(others))
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    parts = (
        ("non-learning", "gpu_hours_nonlearning"),
        ("lost work", "lost_work_gpu_hours"),
        ("checkpoints", "checkpoint_overhead_gpu_hours"),
        ("restarts", "restart_overhead_gpu_hours"),
    )
    for ax, res in zip(axes.flat, others, strict=False):
        m = res.metrics
        deltas = [(label, m[key] - base[key]) for label, key in parts]
        rest = m["gpu_hours"] - base["gpu_hours"] - sum(d for _l, d in deltas)
        deltas.append(("other", rest))
        level = base["gpu_hours"]
        ax.bar(0, level, color="#888888")
        for i, (_label, d) in enumerate(deltas, start=1):
            ax.bar(i, d, bottom=level, color="#2a9d8f" if d < 0 else "#e76f51")
            level += d
        ax.bar(len(deltas) + 1, level, color="#264653")
        ax.set_xticks(
            range(len(deltas) + 2),
            ["no-advisor", *(lbl for lbl, _d in deltas), "total"],
            rotation=45,
            ha="right",
            fontsize=7,
        )
        ax.set_title(m["policy"], fontsize=9)
        ax.set_ylabel("GPU-hours", fontsize=8)
        lo = min(base["gpu_hours"], m["gpu_hours"])
        hi = max(base["gpu_hours"], m["gpu_hours"], base["gpu_hours"] + sum(max(0.0, d) for _l, d in deltas))
        ax.set_ylim(max(0.0, lo - 0.35 * base["gpu_hours"]) * 0.9, hi * 1.04)
    for ax in list(axes.flat)[len(others) :]:
        ax.axis("off")
    fig.suptitle("GPU-hours vs no advisor (green: saved, red: added)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _jct_cdf(results: Sequence[RowResult], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for res in results:
        jct = np.sort([(j.end_time - j.trace.submit) / 3600.0 for j in res.jobs if j.end_time is not None])
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=res.metrics["policy"])
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _utilisation(results: Sequence[RowResult], capacity: int, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    for res in results:
        pts = res.record.usage
        if not pts:
            continue
        t = np.array([p[0] for p in pts]) / 3600.0
        u = np.array([p[1] for p in pts]) / capacity
        ax.step(t, u, where="post", label=res.metrics["policy"], linewidth=0.9)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("GPUs in use / nominal capacity")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
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
        "learning) and by runs that ran on to their end.",
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


def write_report(
    results: Sequence[RowResult], out_dir: Path, *, title: str, meta: dict[str, Any], capacity: int
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
    lines += [
        "",
        "## Every policy side by side",
        "",
        "```",
        format_table(rows),
        "```",
        "",
        "GPU-hours (h), times in hours. *non-learn*: GPU-hours held after a run stopped learning "
        "(≤1% improvement ahead on its hidden clean curve); *wrong*: runs released or stopped that "
        "would still have improved by more than 1%; *lost*: work recomputed after preemptions and "
        "node failures; *ckpt*: checkpoint overhead; *victim P/R*: precision/recall of the "
        "advisor's predicted preemption victims (preempted within an hour of the prediction).",
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
    lines += [
        "",
        "## Non-learning GPU-hours by pathology",
        "",
        "| policy | " + " | ".join(rows[0]["gpu_hours_nonlearning_by_pathology"]) + " |",
        "|---|" + "---|" * len(rows[0]["gpu_hours_nonlearning_by_pathology"]),
    ]
    for r in rows:
        lines.append(
            f"| {r['policy']} | "
            + " | ".join(
                f"{r['gpu_hours_nonlearning_by_pathology'].get(k, 0.0):.0f}"
                for k in rows[0]["gpu_hours_nonlearning_by_pathology"]
            )
            + " |"
        )
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
