"""What ``simulate --sweep`` and ``backtest --sweep`` do alike: check the grid, run it, report it.

The two commands differ only in what one task of the grid is (a setting over a scenario's seeds,
or a setting over a set of real runs) and in how a task's row becomes a frontier point; the
checks before anything runs, the progress bar over the pool, the Pareto frontier, the best
setting within the wrong-stop budget, the table, the JSON and the plot are the same, and live here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from advisor.cli import CommandError
from advisor.commands.json_output import JsonTarget, emit_json, human_stream, print_sweep_result

__all__ = ["checked_grid", "checked_max_wrong", "report_sweep", "run_grid", "settle_max_wrong"]


def checked_max_wrong(max_wrong: str) -> float:
    """``--max-wrong`` read and checked (0-100%), with or without ``--sweep``: a budget out of
    range is an error even where no sweep uses it, not silently ignored."""
    from advisor.sweep import SweepError, parse_max_wrong

    try:
        return parse_max_wrong(max_wrong)
    except SweepError as exc:
        raise CommandError(str(exc)) from None


def settle_max_wrong(args: Any) -> None:
    """``--max-wrong`` checked (``checked_max_wrong``) and defaulted to 1%; given without
    ``--sweep``, which alone reads it, it is an error rather than silently ignored."""
    given = args.max_wrong is not None
    if given:
        checked_max_wrong(args.max_wrong)
    args.max_wrong = args.max_wrong if given else "1%"
    if given and not args.sweep:
        raise CommandError("--max-wrong is the wrong-stop budget of a --sweep: give --sweep too, or drop it")
    if getattr(args, "ray", None) is not None and not args.sweep:
        # the one command that spreads work is a sweep: without it --ray was silently ignored
        raise CommandError("--ray runs a --sweep's grid on a Ray cluster: give --sweep too, or drop it")


def checked_grid(
    sweeps: Sequence[str], max_wrong: str, policy: Path, workers: int | None
) -> tuple[list[Any], float]:
    """The grid's settings and the wrong-stop budget, every setting loaded into ``policy`` by the
    policy loader first, so that a typo is one error line before anything runs."""
    from advisor.sweep import SweepError, grid, parse_max_wrong, parse_sweeps, policies_with

    if workers is not None and workers < 1:
        raise CommandError(f"--workers must be at least 1, got {workers}")
    if not policy.is_file():
        raise CommandError(f"{policy}: no such policy file")
    try:
        settings = grid(parse_sweeps(list(sweeps)))
        budget = parse_max_wrong(max_wrong)
        for setting in settings:
            policies_with(policy, setting)
    except SweepError as exc:
        raise CommandError(str(exc)) from None
    return settings, budget


def run_grid(
    task: Callable[[Any], dict[str, Any]],
    tasks: list[Any],
    *,
    workers: int | None,
    ray_address: str | None,
    unit: str,
    quiet: bool,
) -> list[dict[str, Any]]:
    """Every task on the process pool (or Ray), with a progress bar on a terminal."""
    from tqdm import tqdm

    from advisor.sweep import SweepError, run_tasks

    bar = tqdm(total=len(tasks), unit=unit, file=sys.stderr, disable=quiet or not sys.stderr.isatty())
    try:
        return run_tasks(task, tasks, workers=workers, ray_address=ray_address, on_done=lambda: bar.update(1))
    except SweepError as exc:
        raise CommandError(str(exc)) from None
    finally:
        bar.close()


def report_sweep(
    points: list[dict[str, Any]],
    budget: float,
    *,
    summary: str,
    json_out: JsonTarget,
    report: Path | None,
    plot_title: str,
    clean: Callable[[Any], Any] = lambda doc: doc,
    unit: str = "run",
    max_wrong: str | None = None,
    reported: Collection[str] | None = None,
    policy: Path | None = None,
    settings: Sequence[Any] = (),
) -> int:
    """The frontier and the best point within ``budget``: table, JSON, and the plot with --report.
    Each point gets ``wrong_upper``, the 95% upper bound on its wrong-stop rate from its
    ``wrong`` of ``runs``; the best is chosen on that bound, not on the point rate.

    With ``reported`` (the series the runs report), ``policy`` and the grid's ``settings`` (one
    per point), each point gets ``unreported_metrics``: those its setting's rules judge that no run
    reports (a misspelt ``plateau.metric``), said under the table as a plain back-test says it of a row,
    since such a setting is scored on rules that judged nothing. Such a setting is never the best
    (``advisor.sweep.unnamed``): it stays in the table and on the frontier, and the JSON lists it
    in ``unnamed``, with ``passed_over`` the one that would have been the best but for that."""
    from advisor.sweep import best_within, max_wrong_reading, pareto, passed_over, unnamed, wrong_upper
    from advisor.sweep_plot import plot_frontier

    notes = _unreported(points, reported, policy, settings)
    for p in points:
        p["wrong_upper"] = wrong_upper(int(p.get("wrong", 0)), int(p.get("runs") or 0))
    frontier = pareto(points)
    excluded = unnamed(points)
    best = best_within(points, budget, rate="wrong_upper", exclude=excluded)
    reading = max_wrong_reading(max_wrong) if max_wrong is not None else None
    human = human_stream(json_out)
    print_sweep_result(
        points, frontier, best, budget, summary, human, unit=unit, reading=reading, excluded=excluded
    )
    for note in notes:
        print(note, file=human)
    doc = {"points": points, "frontier": frontier, "best": best, "max_wrong": budget, "unnamed": excluded}
    doc["passed_over"] = passed_over(points, budget, "wrong_upper", excluded)
    emit_json(clean(doc), json_out)
    if report is not None:
        plot_frontier(points, frontier, report / "sweep_frontier.png", title=plot_title, budget=budget)
        path = _write_report(
            report, points, frontier, best, budget, summary, plot_title, unit, reading, notes, excluded
        )
        print(f"plot: {report / 'sweep_frontier.png'}", file=human)
        print(f"report: {path}", file=human)
    return 0


def _unreported(
    points: list[dict[str, Any]],
    reported: Collection[str] | None,
    policy: Path | None,
    settings: Sequence[Any],
) -> list[str]:
    """Each point's ``unreported_metrics`` (``advisor.policy_rows.unreported_by_row`` of its
    setting's policies) and the notes said of them; nothing without the series reported."""
    if reported is None or policy is None:
        return []
    from advisor.policy_rows import unreported_by_row, unreported_notes
    from advisor.sweep import policies_with

    missing = unreported_by_row(reported, [(s.label, policies_with(policy, s)) for s in settings])
    for point, setting in zip(points, settings, strict=True):
        point["unreported_metrics"] = missing.get(setting.label, [])
    return unreported_notes(missing)


def _write_report(
    report: Path,
    points: list[dict[str, Any]],
    frontier: list[int],
    best: int | None,
    budget: float,
    summary: str,
    title: str,
    unit: str = "run",
    reading: str | None = None,
    notes: Sequence[str] = (),
    excluded: Sequence[int] = (),
) -> Path:
    """``report.md`` beside the plot: the table, summary and best setting as printed, and the plot
    (``--report`` promises a Markdown report; a sweep's had only its PNG)."""
    import io

    text = io.StringIO()
    print_sweep_result(
        points, frontier, best, budget, summary, text, unit=unit, reading=reading, excluded=excluded
    )
    for note in notes:
        print(note, file=text)
    lines = [
        f"# trainjob-advisor sweep: {title}",
        "",
        f"`>` marks the best setting whose wrong-stop rate's 95% upper bound is within {budget:.2%}; "
        "every point's setting and "
        "numbers are in the JSON (`--json-file`).",
        "",
        "```",
        text.getvalue().rstrip("\n"),
        "```",
        "",
        "![saved against wrong stops, one point per setting](sweep_frontier.png)",
        "",
    ]
    path = report / "report.md"
    path.write_text("\n".join(lines))
    return path
