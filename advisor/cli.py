"""The ``trainjob-advisor`` command.

Each subcommand lives in its own module under ``advisor/commands/`` exposing
``register(subparsers)``; it sets ``func`` on its parser. Modules are imported here so that
``--help`` lists them all, but every module keeps heavy imports (kopf, matplotlib, the
kubernetes client) inside its ``run`` function, so ``trainjob-advisor forecast`` starts fast and
works without the controller extras installed.

Exit codes: 0 success, 1 a check failed (e.g. an invalid policy), 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

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
)


class CommandError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except CommandError as exc:
        print(f"trainjob-advisor {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
