"""The back-test's Markdown report: the rows, the definitions, and a timeline of each stopped run.

Stopped runs come worst call first (the most improvement the run still made after a row stopped
it), so that what an admin must look at before turning on Apply is at the top. Each timeline shows
the run's judged series (raw and smoothed), where it stopped learning, and where each row stopped
it. Plots use matplotlib's Agg backend, imported here only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from advisor.backtest.report_meta import meta_lines, plural
from advisor.backtest.runs import Run
from advisor.backtest.verdict import judged

__all__ = ["MAX_TIMELINES", "WRONG_STOP_HOURS", "format_table", "write_report"]

#: timelines drawn (the worst calls); the table lists every stopped run
MAX_TIMELINES = 40
#: the longest reason a row of the report's table gives in full; a longer one is cut at a word
REASON_CHARS = 400
#: what "saved" and the "cut learning" column hold (``gpu_hours_saved``, ``gpu_hours_cut_learning``),
#: in the table's footer and the report alike
WRONG_STOP_HOURS = (
    "saved: GPU-hours a row's stops spared after their runs stopped learning; cut learning: those they "
    "spared before it, GPU-hours of runs still learning (a cost, not in saved)"
)


def hours_text(value: float, *, signed: bool = False) -> str:
    """GPU-hours in the table: one decimal, but two significant digits below 0.1 (``<0.001``
    below that), so that a saving that is not zero never reads ``+0.0`` beside a non-zero
    ``non-learn saved`` share (0.013 GPU-h of a small run did); every hours column alike."""
    sign = "+" if signed and value >= 0 else ""
    if value == 0 or abs(value) >= 0.095:
        return f"{value:+.1f}" if signed else f"{value:.1f}"
    if abs(value) < 0.001:
        return f"{'-' if value < 0 else sign}<0.001"
    return f"{sign}{value:.2g}"


_COLUMNS = (
    ("policy", lambda r: r["policy"]),
    ("runs", lambda r: str(r["runs"])),
    ("stopped", lambda r: str(r["stopped"])),
    ("GPU-h", lambda r: hours_text(r["gpu_hours"])),
    ("non-learn", lambda r: hours_text(r["gpu_hours_nonlearning"])),
    ("saved", lambda r: hours_text(r["gpu_hours_saved"], signed=True)),
    ("cut learning", lambda r: hours_text(r["gpu_hours_cut_learning"])),
    (
        "non-learn saved",
        lambda r: (
            "-"
            if r["nonlearning_saved_fraction"] is None
            # + 0.0 turns a negative zero into "0.0%"
            else f"{round(r['nonlearning_saved_fraction'], 3) + 0.0:.1%}"
        ),
    ),
    (
        "wrong .5/1/2%",
        lambda r: "/".join(str(r["wrong_stops_by_threshold"][k]) for k in ("0.005", "0.01", "0.02")),
    ),
    (
        "near-end",
        lambda r: (
            f"{r['near_end_releases']} ({hours_text(r['near_end_gpu_hours'])}h)"
            if r["near_end_releases"]
            else "0"
        ),
    ),
)


def unjudged_line(rows: Sequence[dict[str, Any]]) -> str:
    """The rows whose policy never judged some runs (each over before that policy's minRuntime,
    minSteps or minProgress as replayed): their 0 stops are no verdict on those runs, and a row
    saving nothing on them read as a policy that looked and let them be. Empty when none."""

    def why(r: dict[str, Any]) -> str:
        unselected = r.get("never_selected") or 0
        if not unselected:
            return ""
        if unselected == r["never_judged"]:
            return " (selected by none of its policies)"
        return f" ({unselected} of them selected by none of its policies)"

    said = [
        f"{r['policy']} never judged {r['never_judged']} of {plural(r['runs'], 'run')}{why(r)}"
        for r in rows
        if r.get("never_judged")
    ]
    if not said:
        return ""
    judged = [r for r in rows if r.get("never_judged")]
    timing = any(r["never_judged"] > (r.get("never_selected") or 0) for r in judged)
    others = "the others " if any(r.get("never_selected") for r in judged) else ""
    return (
        "not judged: "
        + "; ".join(said)
        + (
            f" ({others}over before the policy's minRuntime, minSteps or minProgress as replayed: no "
            "verdict on them; --steps-per-second sets the pace of runs without times)"
            if timing
            else ": no verdict on them"
        )
    )


def format_table(rows: list[dict[str, Any]]) -> str:
    header = [c[0] for c in _COLUMNS]
    body = [[f(r) for _h, f in _COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(b) for b in body)])


def _cell(text: str, limit: int) -> str:
    """``text`` as one Markdown table cell: on one line, no ``|``, and when longer than ``limit``
    cut at the last word boundary before it, with an ellipsis."""
    text = " ".join(text.replace("|", "/").split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if text[limit - 1] != " " and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]


def _png_names(names: Sequence[str]) -> dict[str, str]:
    """A timeline file name per run name: the name made safe (``lr1e-3/trainer_state.json`` ->
    ``timeline-lr1e-3_trainer_state.json.png``), numbered when two come out the same."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = f"timeline-{_safe(name)}"
        png, k = f"{base}.png", 2
        while png in taken:
            png, k = f"{base}-{k}.png", k + 1
        taken.add(png)
        out[name] = png
    return out


def symlog_threshold(values: Any) -> float | None:
    """The linear range of a symlog axis for a series with a blow-up (a loss of 1e8 beside 2,
    which a linear axis flattens to a line at zero): its median magnitude; None when the values
    stay within a factor 100 of it and a linear axis shows them."""
    size = np.abs(np.asarray(values, dtype=float))
    size = size[np.isfinite(size) & (size > 0)]
    if not size.size or float(size.max()) <= 100.0 * float(np.median(size)):
        return None
    return float(np.median(size))


#: line styles of the rows' stop markers, in turn
_STOP_DASHES = ("-", "--", ":", "-.")


def _timeline(run: Run, stops: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = timeline_figure(run, stops)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def timeline_figure(run: Run, stops: Sequence[dict[str, Any]]) -> Any:
    """One run's timeline: its judged series, where it stopped learning, each row's stop (``stops``:
    decisions with ``row``, ``step`` and ``improvement_left``), and, for a run judged by an eval
    series, its training loss on an axis of its own with any non-finite reports marked (what a
    divergence stop acted on: the eval series alone did not show it)."""
    import matplotlib.pyplot as plt

    j = judged(run)
    raw_steps = run.eval_steps if j.series == "eval" and run.eval_steps is not None else run.steps
    raw = run.eval_values if j.series == "eval" and run.eval_values is not None else run.values
    fig, ax = plt.subplots(figsize=(7.0, 3.4))
    ax.plot(raw_steps, raw, color="#bbbbbb", lw=0.8, label=f"{j.metric} (logged)")
    ax.plot(
        j.steps,
        np.where(np.isfinite(j.smooth), j.sign * j.smooth, np.nan),
        color="#264653",
        lw=1.4,
        label="judged (smoothed)",
    )
    ax.axvline(j.learning_end_step, color="#2a9d8f", ls="--", lw=1.0, label="stopped learning")
    for k, d in enumerate(stops):
        # rows that stopped at the same step: told apart by their dashes, not hidden one under another
        ax.axvline(
            d["step"],
            color=f"C{k + 1}",
            lw=1.2,
            ls=_STOP_DASHES[k % len(_STOP_DASHES)],
            label=f"{d['row']} ({(d['improvement_left'] or 0):.1%} left)",
        )
    linthresh = symlog_threshold(raw)
    if linthresh is not None:
        ax.set_yscale("symlog", linthresh=linthresh)
    handles, labels = ax.get_legend_handles_labels()
    bad = run.steps[~np.isfinite(run.values)]
    if bad.size:
        # a divergence rule acts on these; the judged eval series does not show them
        found = ax.plot(
            bad, np.full(bad.size, 0.02), "x", ms=5, color="#d62828", transform=ax.get_xaxis_transform()
        )
        handles.append(found[0])
        labels.append(f"non-finite training loss ({bad.size})")
    if j.series == "eval":
        # what the training-loss rules (divergence, a plateau of the loss) read, on an axis of its own
        twin = ax.twinx()
        ok = np.isfinite(run.values)
        line = twin.plot(run.steps[ok], run.values[ok], color="#e9c46a", lw=0.7, alpha=0.8)
        twin.set_ylabel("training loss", fontsize=7)
        handles.append(line[0])
        labels.append("training loss (right axis)")
    ax.set_xlabel("step")
    ax.set_ylabel(j.metric)
    ax.set_title(run.name if len(run.name) <= 90 else "..." + run.name[-87:], fontsize=8)
    ax.legend(handles, labels, fontsize=6)
    fig.tight_layout()
    return fig


def write_report(
    rows: Sequence[dict[str, Any]], runs: Sequence[Run], meta: dict[str, Any], out_dir: Path
) -> Path:
    import matplotlib

    matplotlib.use("Agg")

    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("timeline-*.png"):
        # a folder used again: a timeline of an earlier report is no run of this one
        old.unlink()
    by_name = {r.name: r for r in runs}
    unjudged = unjudged_line(rows)
    stops: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        for d in row["decisions"]:
            if d["action"]:
                stops.setdefault(d["run"], []).append({**d, "row": row["policy"]})
    worst = sorted(stops, key=lambda n: -max(d["improvement_left"] or 0.0 for d in stops[n]))
    n_stops = sum(len(v) for v in stops.values())  # a run stopped by several rows: a table row each
    lines = [
        "# trainjob-advisor back-test",
        "",
        *meta_lines(meta),
        "",
        "## Every policy and baseline",
        "",
        "```",
        format_table(list(rows)),
        "```",
        "",
        *([unjudged, ""] if unjudged else []),
        "Definitions (the same for every row): the *judged series* is a run's primary eval metric when it "
        "logs one (the one its trainer kept its best model by, read back from its trainer_state.json; else "
        "eval_loss, else the first eval metric whose name gives its direction; at least 5 points; "
        "a higher-is-better metric is judged negated), else its loss, smoothed by a centred running median "
        "over 5% of its points. A policy's rules judge what a controller would see (no progress report "
        "names the trainer's choice): an eval loss by default, read with the task's score beside it, or "
        "the metric a rule names; each reason says which. At a stop at step s the run *stood at* a(s): "
        "on an eval series the best smoothed value up to s (the checkpoint a stop keeps), on the training "
        "loss its smoothed value at s. "
        "The stop *left* (a(s) - best later value - d) / a(s), d being the depth the best of the later "
        "smoothed values reaches by the log's noise alone (the expected lowest of the independent windows "
        "within two standard errors of it; 0 on a clean or a falling log); it is a *wrong stop* at 0.5%, "
        "1% or 2% when that exceeds the threshold. A run judged by eval_loss for want of a metric its log "
        "names is judged with the task's score it reports beside it too (eval_accuracy, eval_cer, ...), "
        "as the rules read it: a stop left the larger of the two's improvements. "
        "A run *stopped learning* at the first point from which no later point "
        "improves on what it stood at by more than 1%, read the same way (both series, when a task's "
        "score is read too); "
        "GPU-hours after it, to the run's recorded end, are "
        "*non-learning*. A stop in the last 15% of a run's budget, in its steps and in its recorded time, of "
        "a run that did not get worse after it is a *near-end release*, and what it spared (its GPU-hours "
        "in brackets) is not counted as saved: a run that stood still at the end of its steps (hung) was "
        "not about to finish. "
        f"*Saved* and *cut learning*: {WRONG_STOP_HOURS}.",
        "",
        f"## Stopped runs, worst call first ({plural(len(worst), 'run')}, {plural(n_stops, 'stop')})",
        "",
        "| run | row | action | rule | at (share of budget) | left after | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in worst:
        for d in sorted(stops[name], key=lambda d: -(d["improvement_left"] or 0.0)):
            frac = "-" if d["budget_fraction"] is None else f"{d['budget_fraction']:.0%}"
            reason = _cell(d["reason"] or "", REASON_CHARS)
            lines.append(
                f"| {name.replace('|', '/')} | {d['row']} | {d['action']} | {d['rule']} | {frac} | "
                f"{(d['improvement_left'] or 0.0):.2%} | {reason} |"
            )
    lines += ["", "## Timelines", ""]
    pngs = _png_names(worst[:MAX_TIMELINES])
    for name in worst[:MAX_TIMELINES]:
        png = pngs[name]
        _timeline(by_name[name], stops[name], out_dir / png)
        lines += [f"### {name}", "", f"![{name}]({png})", ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
