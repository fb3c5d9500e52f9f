"""The JSON-output convention that simulate and backtest share, and their sweep summary.

``--json`` prints JSON on stdout (the human-readable table then goes to stderr, so stdout parses),
``--json-file FILE`` writes a file, and the older ``--json FILE`` still writes one with a
deprecation note, but never over an existing file: ``--json`` placed before the run files takes
the first of them as its FILE, and writing there would destroy the user's run. No output may be
one of the command's inputs either. One module so that the two commands cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from advisor.cli import CommandError

JsonTarget = Path | str | None
"""``"-"`` for stdout, a Path for a file, None for no JSON."""


def add_json_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--json [FILE]`` and ``--json-file FILE``; ``what`` says what the JSON holds."""
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="FILE",
        help=f"print {what} as JSON on stdout (the table then goes to stderr), as `forecast --json` "
        "does; `--json FILE` (deprecated: use --json-file) writes them to FILE",
    )
    p.add_argument("--json-file", type=Path, metavar="FILE", help=f"write {what} as JSON to FILE")


def json_target(args: argparse.Namespace, command: str) -> JsonTarget:
    """Where the JSON goes: ``"-"`` (stdout), a file, or nowhere."""
    if args.json is not None and args.json_file is not None:
        raise CommandError("give --json or --json-file, not both")
    if args.json_file is not None:
        return Path(args.json_file)
    if args.json is None or args.json == "-":
        return args.json
    if Path(args.json).exists():
        raise CommandError(
            f"--json {args.json}: exists, and the deprecated `--json FILE` form never writes over anything; "
            f"for JSON on stdout put --json after the {'runs' if command == 'backtest' else 'arguments'}, "
            f"or write --json-file {args.json} to overwrite it"
        )
    print(
        f"{command}: --json FILE is deprecated; use --json-file {args.json} (or --json > {args.json})",
        file=sys.stderr,
    )
    return Path(args.json)


def human_stream(target: JsonTarget) -> TextIO:
    """With JSON on stdout the human-readable part goes to stderr, so that stdout parses."""
    return sys.stderr if target == "-" else sys.stdout


def emit_json(doc: Any, target: JsonTarget) -> None:
    """Print ``doc`` on stdout or write it to the target file (creating its directory)."""
    if target is None:
        return
    text = json.dumps(doc, indent=2) + "\n"
    if target == "-":
        sys.stdout.write(text)
    else:
        path = Path(target)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as exc:
            # checked before the run (``check_outputs``), but a disk can fill or a mount go away
            # during it: the run's result is kept in a file of its own, not lost with a traceback
            kept = _keep_elsewhere(text)
            where = f"; the JSON is in {kept}" if kept else ""
            raise CommandError(
                f"--json-file {target}: cannot write it ({exc.strerror or exc}){where}"
            ) from exc


def _keep_elsewhere(text: str) -> str | None:
    import tempfile

    try:
        fd, name = tempfile.mkstemp(prefix="trainjob-advisor-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(text)
    except OSError:
        return None
    return name


def check_outputs(target: JsonTarget, report: Path | None, inputs: Sequence[Path | None] = ()) -> None:
    """Fail before the run, not after it: an output that cannot be written, or that is one of the
    command's ``inputs`` (it would be overwritten), is a usage error."""
    if isinstance(target, Path):
        given = {p.resolve() for p in inputs if p is not None and p.is_file()}
        if target.resolve() in given:
            raise CommandError(f"--json-file {target}: is one of the inputs; it would be overwritten")
        if target.is_dir():
            raise CommandError(f"--json-file {target}: is a directory")
        _writable_dir(target.parent, f"--json-file {target}")
        if target.exists() and not os.access(target, os.W_OK):
            raise CommandError(f"--json-file {target}: not writable")
        _try_creating(target)
    if report is not None:
        if report.exists() and not report.is_dir():
            raise CommandError(f"--report {report}: exists and is not a directory")
        _writable_dir(report if report.exists() else report.parent, f"--report {report}")
        _try_making(report)


def _try_creating(target: Path) -> None:
    """Create the file the run will write and remove it again: a directory's permission bits
    say yes where the file system says no (``/proc``, a read-only mount written as root), and the
    run is long. An existing file is opened for appending, which leaves it as it was."""
    if not target.parent.is_dir():
        return  # created with its directory after the run; the nearest ancestor was checked
    existed = target.exists()
    try:
        with open(target, "a"):
            pass
    except OSError as exc:
        raise CommandError(f"--json-file {target}: cannot write it ({exc.strerror or exc})") from exc
    if not existed:
        target.unlink(missing_ok=True)


def _try_making(report: Path) -> None:
    """Make the report's directory and the ones above it that are missing, then remove what was
    made: as ``_try_creating`` for a file, the permission bits do not say what the file system
    allows."""
    made: list[Path] = []
    at = report
    while not at.exists() and at != at.parent:
        made.append(at)
        at = at.parent
    try:
        for d in reversed(made):
            d.mkdir()
    except OSError as exc:
        raise CommandError(f"--report {report}: cannot make it ({exc.strerror or exc})") from exc
    finally:
        for d in made:
            if d.is_dir():
                d.rmdir()


def _writable_dir(directory: Path, what: str) -> None:
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # the nearest ancestor that exists is where it gets created
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise CommandError(f"{what}: cannot write into {existing}")


def print_sweep_result(
    points: list[dict[str, Any]],
    frontier: list[int],
    best: int | None,
    budget: float,
    summary: str,
    out: TextIO,
    *,
    unit: str = "run",
    reading: str | None = None,
    excluded: Sequence[int] = (),
) -> None:
    """The sweep table, what it covered (``summary``), and the best setting within the budget:
    chosen on the wrong-stop rate's 95% upper bound (``best``), not its point rate. When no
    setting's bound is within the budget, that is said plainly and the best by point rate is named
    as information only; the pick is in-sample, and a pick at an end of the grid is flagged.
    ``excluded`` settings (``advisor.sweep.unnamed``) are never named, and one line says why when
    one of them would otherwise have been."""
    from advisor.sweep import CONFIDENCE, best_within, edge_fields, passed_over, spec_path, sweep_table

    def units(n: int) -> str:  # "job over all seeds" -> "400 jobs over all seeds"
        word, _, rest = unit.partition(" ")
        return f"{n} {word}{'' if n == 1 else 's'}" + (f" {rest}" if rest else "")

    def counts(p: dict[str, Any]) -> str:
        n = int(p.get("runs") or 0)
        total = int(p.get("runs_total") or n)
        upper = p.get("wrong_upper")
        bound = "" if upper is None else f": up to {upper:.2%} at {CONFIDENCE:.0%}"
        # the rate is over the runs the policy judged: say how many it never judged
        unjudged = f" ({total - n} of {total} never judged)" if total > n else ""
        return f"{p.get('wrong', 0)} of {n} judged wrong{unjudged}{bound}"

    print(sweep_table(points, frontier, best), file=out)
    print(f"\n{summary}", file=out)
    if reading:
        print(reading, file=out)
    shown = best
    if points and len(excluded) == len(points):
        print("no setting is named: every setting's rules judge a metric no run reports", file=out)
        return
    if best is not None:
        p = points[best]
        print(
            f"best within {budget:.2%} wrong stops (the rate's {CONFIDENCE:.0%} upper bound within it): "
            f"{p['label']} ({p['saved']:.1%} saved, {p['wrong_rate']:.2%} wrong; {counts(p)})",
            file=out,
        )
        setting = p.get("setting") or {}
        if setting:
            # what to write in the policy file (every policy in it that has the rule or section)
            print(
                "in the policy: " + ", ".join(f"{spec_path(k)}: {v}" for k, v in setting.items()),
                file=out,
            )
        _say_passed_over(points, passed_over(points, budget, "wrong_upper", excluded), out)
    else:
        # a setting left out may be within the budget by its bound or its point rate: said first,
        # so that what follows reads as of the other settings
        over = passed_over(points, budget, "wrong_upper", excluded)
        over = over if over is not None else passed_over(points, budget, "wrong_rate", excluded)
        _say_passed_over(points, over, out)
        other = "" if over is None else " other"
        by_point = best_within(points, budget, rate="wrong_rate", exclude=excluded)
        eligible = [i for i in range(len(points)) if i not in excluded]
        lowest = min(eligible, key=lambda i: points[i].get("wrong_upper") or 1.0, default=None)
        ref = by_point if by_point is not None else lowest
        runs = max((int(p.get("runs") or 0) for p in points), default=0)
        total = max((int(p.get("runs_total") or p.get("runs") or 0) for p in points), default=0)
        scope = units(runs) if total <= runs else f"{units(runs)} judged of {total}"
        detail = f" ({counts(points[ref])})" if ref is not None else ""
        print(
            f"no{other} setting's wrong-stop rate is shown to be within {budget:.2%} on {scope}{detail}",
            file=out,
        )
        if by_point is None:
            print(f"no{other} setting stays within {budget:.2%} wrong stops even by its point rate", file=out)
        else:
            p = points[by_point]
            print(
                f"best by point rate, information only (not shown to be within {budget:.2%}): "
                f"{p['label']} ({p['saved']:.1%} saved, {p['wrong_rate']:.2%} wrong)",
                file=out,
            )
        shown = by_point
    if shown is not None:
        n = int(points[shown].get("runs") or 0)
        print(
            f"in-sample: chosen and scored on the same {units(n)}; re-check it on other runs or seeds",
            file=out,
        )
        edges = edge_fields(points, shown) if len(points) > 1 else []
        if edges:
            print(
                f"on the edge of the grid: {', '.join(edges)} "
                f"{'is an end' if len(edges) == 1 else 'are ends'} of the values tried; a setting "
                "beyond may do better or worse: widen the sweep to see",
                file=out,
            )


def _say_passed_over(points: Sequence[dict[str, Any]], index: int | None, out: TextIO) -> None:
    """The one line that says why the setting that saves most within the budget was not named:
    its rules judge a metric no run reports, so its savings are not its rules' doing."""
    if index is None:
        return
    p = points[index]
    print(
        f"not named, though it saves most ({p['saved']:.1%}): {p['label']}, whose rules judge "
        f"{', '.join(p['unreported_metrics'])}, which no run reports",
        file=out,
    )
