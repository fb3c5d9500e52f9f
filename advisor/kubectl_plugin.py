"""``kubectl advisor status|explain|compare|resume``: the CLI's cluster commands as a kubectl plugin.

kubectl runs any executable named ``kubectl-<name>`` on PATH for ``kubectl <name>`` and passes it
the remaining arguments; the package installs ``kubectl-advisor`` (and ``kubectl_complete-advisor``
for kubectl's completion of plugin arguments). The CLI's cluster commands follow kubectl's
conventions themselves (a job is ``NAME -n NS`` or ``NS/NAME``; without ``-n`` a bare name is in
the kubeconfig context's namespace, else ``default``; ``--kubeconfig`` and ``--context`` work as
in kubectl), so the plugin hands its arguments over unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["PLUGIN_COMMANDS", "complete", "main"]

PLUGIN_COMMANDS = ("status", "explain", "compare", "resume")
USAGE = (
    "usage: kubectl advisor {status,explain,compare,resume} ...\n\n"
    "  status   [-n NS | -A] [--by queue|namespace]   progress, ETA and advice of every advised run\n"
    "  explain  NAME [-n NS] | NS/NAME                 why the advisor says what it says\n"
    "  compare  NAME NAME ... [-n NS]                  which of several runs ends best\n"
    "  resume   NAME [-n NS] [--kind PyTorchJob]       reactivate a job whose quota was released\n\n"
    "`kubectl advisor COMMAND --help` for the options of each.\n"
)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] not in PLUGIN_COMMANDS:
        print(f"kubectl advisor: unknown command {args[0]!r}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
    from advisor.cli import main as cli_main

    return cli_main(args)


def complete(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-advisor``: what kubectl runs to complete ``kubectl advisor ...``."""
    from advisor.cli import build_parser
    from advisor.completion import plugin_candidates

    words = list(sys.argv[1:] if argv is None else argv)
    print(plugin_candidates(build_parser(), words, PLUGIN_COMMANDS), end="")
    return 0
