"""The ``trainjob-advisor`` command.

Each subcommand lives in its own module under ``advisor/commands/`` exposing
``register(subparsers)``; it sets ``func`` on its parser. Modules are imported here so that
``--help`` lists them all, but every module keeps heavy imports (kopf, matplotlib, the
kubernetes client) inside its ``run`` function, so ``trainjob-advisor forecast`` starts fast and
works without the controller extras installed.

Exit codes: 0 success, 1 a check failed (e.g. an invalid policy) or an internal error (one line;
``TRAINJOB_ADVISOR_DEBUG=1`` shows its traceback), 2 bad input or usage, 141 when the reader of
stdout went away (``| head``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

# The advisor runs thousands of tiny least-squares fits; a BLAS thread pool only adds
# synchronisation cost to each (measured: a 400-point forecast takes about half the time with one
# thread). Set before numpy is first imported; an explicit setting by the user wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from advisor import __version__  # noqa: E402  (after the thread settings above)

#: subcommand modules, in the order ``--help`` shows them
COMMAND_MODULES: tuple[str, ...] = (
    "forecast",
    "simulate",
    "backtest",
    "policy",
    "run",
    "status",
    "explain",
    "compare",
    "resume",
    "completion",
)


class CommandError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def _whole_number(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {low} or more, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: a whole number >= 0 (seeds, counts), rejected at parse time in one line."""
    return _whole_number(text, 0)


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    return _whole_number(text, 1)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(text: str) -> float:
    """argparse type: a duration in seconds from ``90``, ``90s``, ``30m``, ``2h``, ``1d`` (a bare
    number is seconds, so every flag reads the same way whatever its default's unit)."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 30m, 2h)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def positive_duration(text: str) -> float:
    """argparse type: a duration above zero (an interval of 0 would loop forever or divide by it)."""
    value = duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive duration (e.g. 30m), got {text!r}")
    return value


def label_durations(parser: argparse.ArgumentParser) -> None:
    """Name every duration option's value ``DURATION`` in ``--help`` and say once, under the
    options, how one is written: ``--forecast-interval 5`` is 5 seconds, as in a policy, which
    ``--help`` did not say."""
    for action in parser._actions:
        if action.type in (duration, positive_duration):
            action.metavar = "DURATION"
    note = "DURATION: 90s, 30m, 2h or 1d; a bare number is seconds, as in a policy."
    parser.epilog = f"{parser.epilog}\n\n{note}" if parser.epilog else note


def _one_line(text: str) -> str:
    """An error message on one line: a parser's multi-line report (PyYAML's context lines and the
    caret under the column) joined with "; ", the caret lines dropped."""
    parts = [line.strip() for line in text.splitlines()]
    return "; ".join(p for p in parts if p and set(p) != {"^"})


def _debug() -> bool:
    return os.environ.get("TRAINJOB_ADVISOR_DEBUG", "") not in ("", "0")


def require_extra(module: str, extra: str, purpose: str) -> None:
    """Fail with one line naming the pip extra when an optional dependency is not installed.

    Why: the controller's image installs only ``[controller]``; plotting and the simulator's
    progress bar live in ``[sim]``, and a missing one must say how to get it, not print a traceback.
    """
    try:
        importlib.import_module(module)
    except ImportError:
        raise CommandError(
            f"{purpose} needs {module}, which is not installed: pip install 'trainjob-advisor[{extra}]'"
        ) from None


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors in one line, like every other error of the command (the usage
    is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trainjob-advisor",
        description="Forecast, simulate and advise GPU training jobs on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"advisor.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"advisor.commands.{name}":
                continue  # not built yet in this checkout
            raise
        module.register(subparsers)
    return parser


def _command_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command's own parser that ``argv`` names, deepest first (``policy validate``), so
    that a usage error points at that command's ``--help``, not the top-level one."""
    found = parser
    for token in argv:
        subs = [a for a in found._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and token in subs[0].choices:
            found = subs[0].choices[token]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    command = _command_parser(parser, list(sys.argv[1:] if argv is None else argv))
    if extra:
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except CommandError as exc:
        print(f"{command.prog}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # said, on a line of its own (a progress bar may hold the cursor): a silent exit 130 left
        # an admin unsure whether the run had finished and what it had written
        print(f"\n{command.prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``| head``): as any Unix filter, stop quietly. Point stdout at
        # /dev/null so that the interpreter's own flush at exit does not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a filter cut off by its reader
    except Exception as exc:
        if argv is not None or _debug():
            raise  # called from Python (tests, embedding): the caller gets the exception itself
        # a defect, not bad input: one line all the same, with the way to see more
        print(
            f"{command.prog}: internal error: {type(exc).__name__}: {exc} "
            "(set TRAINJOB_ADVISOR_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    # run as ``python -m advisor.cli`` this file is ``__main__``, a second copy of the module: the
    # commands raise ``advisor.cli.CommandError``, which only that module's ``main`` catches (this
    # copy's printed bad input as an internal error, exit 1)
    from advisor.cli import main as _main

    raise SystemExit(_main())
