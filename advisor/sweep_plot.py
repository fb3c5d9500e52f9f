"""The plot of a sweep: saved against wrong-stop rate, one point per setting, the Pareto frontier
joined and the wrong-stop budget drawn (``--sweep ... --report DIR``). Apart from ``advisor.sweep``,
which picks and tabulates the settings, because only the plot needs matplotlib and label layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from advisor.sweep import CONFIDENCE

__all__ = ["plot_frontier"]


def plot_frontier(
    points: Sequence[Mapping[str, Any]],
    frontier: Sequence[int],
    path: Path,
    *,
    title: str,
    budget: float | None = None,
) -> None:
    """Saved against wrong-stop rate, one point per setting (its seeds' spread as a bar, and a
    whisker to the rate's 95% upper bound, which the pick reads), the frontier joined, and the
    wrong-stop budget (``--max-wrong``) as a line, from a zero rate. Each label is placed where it
    overlaps no other (``_place_labels``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    spread_label = "min - max over the seeds"
    upper_label = f"to the rate's {CONFIDENCE:.0%} upper bound"
    for i, p in enumerate(points):
        spread = p.get("spread")
        y = 100 * p["saved"]
        if spread:
            ax.errorbar(
                100 * p["wrong_rate"],
                y,
                yerr=[[y - 100 * spread[0]], [100 * spread[2] - y]],
                fmt="none",
                ecolor="#bbbbbb",
                lw=0.8,
                label=spread_label,
            )
            spread_label = "_"
        upper = p.get("wrong_upper")
        if upper is not None and upper > p["wrong_rate"]:
            ax.errorbar(
                100 * p["wrong_rate"],
                y,
                xerr=[[0.0], [100 * (upper - p["wrong_rate"])]],
                fmt="none",
                ecolor="#9ab",
                lw=0.6,
                capsize=2,
                label=upper_label,
            )
            upper_label = "_"
        ax.scatter(100 * p["wrong_rate"], y, color="#e76f51" if i in frontier else "#264653", s=18, zorder=3)
    front = [points[i] for i in frontier]
    ax.plot(
        [100 * p["wrong_rate"] for p in front], [100 * p["saved"] for p in front], color="#e76f51", lw=1.0
    )
    if budget is not None:
        ax.axvline(100 * budget, color="#e9c46a", lw=1.0, ls="--", label=f"--max-wrong {budget:.2%}")
    ax.set_xlim(left=0.0)
    ax.margins(x=0.15)  # room for the rightmost label
    ax.set_xlabel("wrong stops at 1% (% of the runs judged)")
    ax.set_ylabel("non-learning GPU-hours saved (%)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    _place_labels(fig, ax, points)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: where a point's label may go, in points from it, tried in turn: right above, right below, left
#: above, left below, then further out
_LABEL_OFFSETS = ((3, 3), (3, -8), (-3, 3), (-3, -8), (3, 10), (3, -15), (-3, 10), (-3, -15))


def _place_labels(fig: Any, ax: Any, points: Sequence[Mapping[str, Any]]) -> None:
    """Each point's setting beside it, at the first of ``_LABEL_OFFSETS`` where it overlaps no label
    placed before it and lies inside the axes (else where it overlaps least): labels placed by the
    point's order on the grid printed two settings over each other at a third's place (an admin
    read 0.9/20m where 0.7/20m and 0.9/10m overlapped)."""
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed: list[Any] = []

    def overlap(box: Any) -> float:
        """The area of ``box`` over labels placed, plus what lies outside the axes (clipped)."""
        total = 0.0
        for other in placed:
            w = min(box.x1, other.x1) - max(box.x0, other.x0)
            h = min(box.y1, other.y1) - max(box.y0, other.y0)
            total += max(0.0, w) * max(0.0, h)
        inside_w = max(0.0, min(box.x1, frame.x1) - max(box.x0, frame.x0))
        inside_h = max(0.0, min(box.y1, frame.y1) - max(box.y0, frame.y0))
        return total + box.width * box.height - inside_w * inside_h

    for p in sorted(points, key=lambda q: (-q["saved"], q["wrong_rate"])):
        xy = (100 * p["wrong_rate"], 100 * p["saved"])
        best: tuple[float, Any] | None = None
        for dx, dy in _LABEL_OFFSETS:
            ann = ax.annotate(
                p["label"],
                xy,
                fontsize=6,
                xytext=(dx, dy),
                textcoords="offset points",
                ha="left" if dx > 0 else "right",
                clip_on=True,
            )
            box = ann.get_window_extent(renderer)
            cost = overlap(box)
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, ann)
            else:
                ann.remove()
            if cost == 0.0:
                break
        assert best is not None
        placed.append(best[1].get_window_extent(renderer))
