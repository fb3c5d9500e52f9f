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
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


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
    if report is not None:
        if report.exists() and not report.is_dir():
            raise CommandError(f"--report {report}: exists and is not a directory")
        _writable_dir(report if report.exists() else report.parent, f"--report {report}")


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
) -> None:
    """The sweep table, what it covered (``summary``), and the best setting within the budget."""
    from advisor.sweep import sweep_table

    print(sweep_table(points, frontier, best), file=out)
    print(f"\n{summary}", file=out)
    if best is None:
        print(f"no setting stays within {budget:.2%} wrong stops", file=out)
    else:
        p = points[best]
        print(
            f"best within {budget:.2%} wrong stops: {p['label']} "
            f"({p['saved']:.1%} saved, {p['wrong_rate']:.2%} wrong)",
            file=out,
        )
