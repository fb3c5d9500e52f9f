"""``forecast --plot``: the picture of what ``forecast`` prints.

The training loss as observed, the forecast mean and its 80% band along the steps to the end,
what came after the cut (``--upto-step``) and the observed end; then each eval series with its
forecast final value, and the step where the judged eval metric was best (the checkpoint worth
keeping), so that a U-shaped eval curve under a falling training loss is seen as overfitting on
the plot as in the text. Scores that rise within [0, 1] (accuracy, F1, precision...) are drawn on
a linear panel of their own under the loss's. A log axis when the loss spans decades or nears
zero; each series its own colour; each legend entry once, beside the axes, not over the data; a
failed forecast is said on the plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.cli import CommandError
from advisor.forecast.core import ends_at_decay
from advisor.forecast.jump import JUMP_WARNING

if TYPE_CHECKING:
    from advisor.commands.forecast_outcome import Outcome

__all__ = ["SERIES_COLOURS", "build_figure", "is_score", "write_plot"]

#: colours of the series a plot may carry (the training loss first; eval series after it), none
#: of them the forecast's red and orange
SERIES_COLOURS = (
    "#1f77b4",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#6baed6",
)
#: a y-axis label longer than this names the series in the legend instead
LABEL_CHARS = 48
#: a forecast path over less than this share of the steps drawn is not drawn (its final value is)
PATH_SHARE_MIN = 0.03


def build_figure(outcome: Outcome) -> Any:
    """The figure ``write_plot`` saves (a matplotlib ``Figure``; the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # the forecast series is drawn as such: not again as one of the eval series
    evals = {n: e for n, e in (outcome.evals or {}).items() if n != outcome.curve.metric}
    colours = {n: SERIES_COLOURS[(1 + i) % len(SERIES_COLOURS)] for i, n in enumerate(evals)}
    scores = {n: e for n, e in evals.items() if is_score(n, e.values)}
    others = {n: e for n, e in evals.items() if n not in scores}
    if scores:
        fig, (ax, score_ax) = plt.subplots(
            2, 1, sharex=True, figsize=(10, 7.2), dpi=110, gridspec_kw={"height_ratios": [3, 2]}
        )
    else:
        fig, ax = plt.subplots(figsize=(10, 4.8), dpi=110)
        score_ax = None
    drawn = _draw_series(ax, outcome, SERIES_COLOURS[0])
    drawn += _draw_evals(ax, outcome, others, colours)
    if _wants_log(tuple(drawn)):
        ax.set_yscale("log")  # a band reaching 0 is cut at the axis' bottom, as it must be
        finite = [v for v in drawn if math.isfinite(v) and v > 0]
        ax.set_ylim(bottom=0.5 * min(finite))
    log = " (log scale)" if ax.get_yscale() == "log" else ""
    ax.set_ylabel(_axis_label([outcome.curve.metric, *others], "the loss and its kin") + log)
    axes = [ax]
    if score_ax is not None:
        _draw_evals(score_ax, outcome, scores, colours)
        score_ax.set_ylabel(_axis_label(list(scores), "scores (higher is better)"))
        axes.append(score_ax)
    _draw_best(axes, outcome, score_ax if score_ax is not None and _judged(outcome) in scores else ax)
    _draw_stuck(ax, outcome)
    axes[-1].set_xlabel("step")
    source = outcome.curve.source
    title = source if len(source) <= 90 else source[:87] + "..."
    if outcome.state is not None:  # a log of its training loss alone has a state too (diverging)
        from advisor.commands.forecast_output import state_reading

        reading = state_reading(outcome)
        label = outcome.state.label
        title += f"  |  run state: {label if reading == label else f'{label} ({reading})'}"
    ax.set_title(title, fontsize=8)
    for a in axes:
        a.grid(alpha=0.3, which="both" if a.get_yscale() == "log" else "major")
        _legend(a)
    if outcome.failure is not None:
        ax.text(
            0.5,
            0.5,
            f"no forecast: {outcome.failure[:90]}",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=10,
            color="#b00020",
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#b00020"},
        )
    fig.tight_layout()
    return fig


def is_score(name: str, values: Any) -> bool:
    """Whether an eval series is a score in [0, 1] that rises as it improves (an accuracy, an F1,
    a precision): drawn on a linear panel of its own, not on the loss's (log) axis."""
    from advisor.series import Direction, direction_of

    finite = [float(v) for v in values if math.isfinite(v)]
    if direction_of(name) is not Direction.HIGHER or not finite:
        return False
    return 0.0 <= min(finite) <= max(finite) <= 1.0


def _axis_label(names: list[str], many: str) -> str:
    """The series an axis carries, by name; ``many`` (the legend names them) when too long."""
    joined = ", ".join(names)
    return joined if len(joined) <= LABEL_CHARS else many


def _legend(ax: Any) -> None:
    """The axes' legend beside them, each label once (a label drawn twice is one entry)."""
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for handle, label in zip(handles, labels, strict=True):
        seen.setdefault(label, handle)
    if seen:
        ax.legend(
            list(seen.values()),
            list(seen),
            fontsize=8,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
        )


def write_plot(outcome: Outcome, path: str) -> str:
    """Save ``build_figure(outcome)`` to ``path``; returns the path written."""
    import matplotlib.pyplot as plt

    fig = build_figure(outcome)
    try:
        fig.savefig(path)
        return str(Path(path).resolve())
    except (OSError, ValueError) as exc:  # unwritable path, unknown image format
        raise CommandError(f"cannot write plot {path}: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        plt.close(fig)


def _draw_evals(
    ax: Any, outcome: Outcome, evals: Mapping[str, Any], colours: Mapping[str, str]
) -> list[float]:
    """Each eval series of ``evals``: its points joined by a line and its forecast final value at
    the total steps. Returns every value drawn."""
    drawn: list[float] = []
    state = outcome.state
    for name, series in evals.items():
        colour = colours[name]
        ax.plot(series.steps, series.values, "o-", ms=3, lw=1.0, color=colour, label=f"observed {name}")
        drawn += list(series.values)
        whole = (outcome.evals_whole or {}).get(name)
        if whole is not None and series.steps and len(whole) > len(series):
            after = [(s, v) for s, v in zip(whole.steps, whole.values, strict=True) if s > series.steps[-1]]
            if after:
                ax.plot(
                    [s for s, _ in after],
                    [v for _, v in after],
                    "o",
                    ms=3,
                    mfc="none",
                    color=colour,
                    alpha=0.6,
                    label=f"{name} after the cut (not seen)",
                )
                drawn += [v for _, v in after]
        fc = state.series.get(name) if state is not None else None
        final = fc.final_loss if fc is not None else None
        if final is not None and outcome.total_steps is not None and math.isfinite(final.mean):
            ax.errorbar(
                [outcome.total_steps],
                [final.mean],
                yerr=[[max(0.0, final.mean - final.p10)], [max(0.0, final.p90 - final.mean)]],
                fmt="s",
                ms=4,
                color=colour,
                capsize=4,
                label=f"final {name} at step {outcome.total_steps:,} (p10..p90)",
            )
            drawn += [final.p10, final.p90]
    return drawn


def _judged(outcome: Outcome) -> str | None:
    """The eval metric whose best step is marked, if any."""
    state = outcome.state
    if state is None or state.best_step is None or state.best_value is None or not state.metric:
        return None
    return state.metric


def _draw_best(axes: list[Any], outcome: Outcome, ax: Any) -> None:
    """The checkpoint to keep: a line across every panel at its step, a star on ``ax`` (the judged
    metric's panel). That is the best evaluation, unless the trainer's save interval is known and
    saved no checkpoint there: then the best saved one, as the text says, and the best evaluation
    a hollow star of its own ("not saved"; a star at a step with no checkpoint read as the one to
    keep)."""
    from advisor.commands.number_text import num as _num

    state = outcome.state
    if state is None or _judged(outcome) is None or state.best_step is None or state.best_value is None:
        return
    saved = outcome.saved_best
    keep = saved if saved is not None else (state.best_step, state.best_value)
    for a in axes:
        a.axvline(keep[0], color="#2ca02c", lw=0.9, ls="--")
    star = {"ms": 12, "color": "#2ca02c", "mec": "black", "mew": 0.6}
    if saved is not None and saved[0] != state.best_step:
        ax.plot(
            [state.best_step],
            [state.best_value],
            "*",
            **{**star, "color": "none", "mec": "#2ca02c", "mew": 1.2},
            label=f"best {state.metric} {_num(state.best_value)} at step {state.best_step:,} (not saved)",
        )
    ax.plot(
        [keep[0]],
        [keep[1]],
        "*",
        **star,
        label=f"{'best saved' if saved is not None else 'best'} {state.metric} {_num(keep[1])} at step "
        f"{keep[0]:,} (the checkpoint to keep)",
    )


def _wants_log(values: tuple[float, ...]) -> bool:
    """A log axis for a loss that spans decades or heads for zero (none negative, the smallest
    positive value under 1/30 of the max): on a linear one its whole later history is a flat line
    on the floor. An interval reaching 0 (a band cut at a loss's floor) does not rule it out: the
    band is cut at the axis' bottom; a blow-up to 100 times the loss is the case it is for."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite or min(finite) < 0:
        return False
    positive = [v for v in finite if v > 0]
    return bool(positive) and max(positive) / min(positive) > 30


def _draw_stuck(ax: Any, outcome: Outcome) -> None:
    """A hung run's stuck step, marked and said with how long its reports stood there: the axis is
    steps, so hours of reports at one step drew as one point (a hung run's plot showed a normal
    forecast, while its text said ``hung``)."""
    from advisor.commands.forecast_outcome import stuck_for
    from advisor.commands.forecast_output import _duration

    if outcome.state is None or outcome.state.label != "hung" or not outcome.curve.steps:
        return
    idle, _ = stuck_for(outcome.curve)
    if idle is None:
        return
    step, value = outcome.curve.steps[-1], outcome.curve.values[-1]
    if not math.isfinite(value):
        return
    ax.plot(
        [step],
        [value],
        "s",
        ms=9,
        mfc="none",
        mec="#9b2226",
        mew=1.6,
        label=f"stuck at step {step:,.0f}: no advance for {_duration(idle)} of reports",
    )


def _draw_series(ax: Any, outcome: Outcome, colour: str) -> list[float]:
    """The forecast series: its points, its rolling median, the forecast path and band, the
    points after the cut and the observed end. Returns every value drawn (for the choice of axis)."""
    from advisor.commands.number_text import num as _num

    fc, curve, full, fpath = outcome.forecast, outcome.curve, outcome.full, outcome.path
    metric = curve.metric
    drawn = list(curve.values)
    ax.plot(curve.steps, curve.values, ".", ms=3, color=colour, alpha=0.5, label=f"observed {metric}")
    smooth = _rolling_median(curve.steps, curve.values)
    if smooth is not None:
        ax.plot(*smooth, "-", color=colour, lw=1.3, label="observed, rolling median")
    bad = [s for s, v in zip(full.steps, full.values, strict=True) if not math.isfinite(v)]
    if bad:
        # a NaN or inf report has no place on the value axis: a tick on the step axis says where
        # it came (the plot of a run that went NaN showed a normal forecast and nothing else)
        ax.plot(
            bad,
            [0.02] * len(bad),
            "|",
            ms=8,
            color="#9b2226",
            transform=ax.get_xaxis_transform(),
            label=f"non-finite {metric} ({len(bad)} report{'s' if len(bad) != 1 else ''})",
        )
    if outcome.observed_nonfinite_from is not None:
        ax.axvline(
            outcome.observed_nonfinite_from,
            color="#9b2226",
            lw=1.0,
            ls="--",
            label=f"non-finite from step {outcome.observed_nonfinite_from:,.0f} to the end",
        )
    if len(full) > len(curve):
        later = slice(len(curve), len(full))
        ax.plot(
            full.steps[later],
            full.values[later],
            ".",
            ms=2,
            color="0.6",
            alpha=0.6,
            label="after the cut (not seen by the forecast)",
        )
        ax.axvline(curve.steps[-1], color="0.4", lw=0.8, ls=":", label=f"cut at step {curve.steps[-1]:,.0f}")
        drawn += list(full.values[later])
    if fpath is not None and fc.last_step is not None and fc.current_loss is not None and _visible(outcome):
        steps = [fc.last_step, *fpath.steps]
        mean = [fc.current_loss, *fpath.mean]
        p10 = [fc.current_loss, *fpath.p10]
        p90 = [fc.current_loss, *fpath.p90]
        # a diverging run's forecast is where it would end if it recovered, or, fitted from a
        # jump it stayed up after, where the loss since the jump heads (as the text says)
        stays = any(w.startswith(JUMP_WARNING) for w in fc.warnings)
        recovered = (
            (" since the jump" if stays else " if it recovered") if fc.divergence_probability >= 0.5 else ""
        )
        ax.fill_between(
            steps, p10, p90, color="#ff7f0e", alpha=0.22, lw=0, label=f"forecast{recovered}, 80% interval"
        )
        ax.plot(steps, mean, "-", color="#d62728", lw=1.6, label=f"forecast mean{recovered}")
        # the band's low edge is no value the axis must reach: a training loss's interval cut at
        # 0 put a log axis down to 1e-3, the data in its top third
        drawn += [*mean, *p90]
    final = fc.final_loss
    if outcome.total_steps is not None and math.isfinite(final.mean):
        ax.errorbar(
            [outcome.total_steps],
            [final.mean],
            yerr=[[final.mean - final.p10], [final.p90 - final.mean]],
            fmt="o",
            ms=4,
            color="#d62728",
            capsize=4,
            label=f"final {metric} at step {outcome.total_steps:,} (p10..p90)",
        )
    elif math.isfinite(final.mean):  # no total: the asymptote (or the LR decay's end), beyond the path
        # said as the text says it: where the learning rate's decay ends when that was read
        where = "where the LR decay ends" if ends_at_decay(fc.warnings) else "asymptote"
        ax.axhspan(final.p10, final.p90, color="#ff7f0e", alpha=0.08, label=f"{where}, 80% interval")
        ax.axhline(final.mean, color="#d62728", ls="--", lw=1.0, label=f"{where} (total steps unknown)")
        drawn += [final.mean, final.p90]
    if outcome.observed_final is not None:
        end = outcome.total_steps if outcome.total_steps is not None else max(full.steps)
        ax.plot(
            [end],
            [outcome.observed_final],
            "D",
            ms=6,
            mfc="none",
            mec="black",
            mew=1.3,
            label=f"observed end ({_num(outcome.observed_final)})",
        )
    return drawn


def _visible(outcome: Outcome) -> bool:
    """Whether the forecast path spans enough of the steps drawn to be seen: one over the last
    3% of a run is hidden under the final value's marker (the marker says it all)."""
    fc, path, full = outcome.forecast, outcome.path, outcome.full
    if path is None or fc.last_step is None or not path.steps or not full.steps:
        return False
    first = min(full.steps[0], fc.last_step)
    right = max(path.steps[-1], full.steps[-1], outcome.total_steps or 0)
    return right > first and (path.steps[-1] - fc.last_step) / (right - first) >= PATH_SHARE_MIN


def _rolling_median(
    steps: tuple[float, ...], values: tuple[float, ...]
) -> tuple[list[float], list[float]] | None:
    """A spike-robust trace of the observed curve (window ~4% of the points), for the plot only."""
    from scipy.ndimage import median_filter

    points = [(s, v) for s, v in zip(steps, values, strict=True) if math.isfinite(v)]
    if len(points) < 10:
        return None
    window = max(3, len(points) // 25) | 1
    smoothed = median_filter([v for _, v in points], size=window, mode="nearest")
    return [s for s, _ in points], [float(v) for v in smoothed]
