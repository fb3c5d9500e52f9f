"""``kubectl advisor status|explain|compare|resume``: the CLI's cluster commands as a kubectl plugin.

kubectl runs any executable named ``kubectl-<name>`` on PATH for ``kubectl <name>`` and passes it
the remaining arguments; the package installs ``kubectl-advisor`` (and ``kubectl_complete-advisor``
for kubectl's completion of plugin arguments). Following kubectl's conventions, a job may be
named ``NAME -n NS`` as well as ``NS/NAME``; without ``-n`` a bare name is in the kubeconfig
context's namespace, else ``default``. ``--kubeconfig`` and ``--context`` work as in kubectl.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

__all__ = ["PLUGIN_COMMANDS", "complete", "main", "translate"]

PLUGIN_COMMANDS = ("status", "explain", "compare", "resume")
USAGE = (
    "usage: kubectl advisor {status,explain,compare,resume} ...\n\n"
    "  status   [-n NS | -A] [--by queue|namespace]   progress, ETA and advice of every advised run\n"
    "  explain  NAME [-n NS] | NS/NAME                 why the advisor says what it says\n"
    "  compare  NAME NAME ... [-n NS]                  which of several runs ends best\n"
    "  resume   NAME [-n NS] [--kind PyTorchJob]       reactivate a job whose quota was released\n\n"
    "`kubectl advisor COMMAND --help` for the options of each.\n"
)
_TAKES_REFS = {"explain": 1, "compare": None, "resume": 1}  # how many positional refs (None: any)
_VALUE_OPTIONS = {"-o", "--output", "--plot", "--draws", "--kind", "--kubeconfig", "--context", "--by"}


def translate(argv: Sequence[str], default_namespace: Callable[[], str]) -> list[str]:
    """kubectl-style arguments -> ``trainjob-advisor`` arguments (``NAME -n NS`` -> ``NS/NAME``)."""
    command, *rest = argv
    if command == "status":
        return [command, *rest]
    namespace: str | None = None
    kept: list[str] = []
    positional: list[int] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in ("-n", "--namespace") and i + 1 < len(rest):
            namespace, i = rest[i + 1], i + 2
            continue
        if arg.startswith("--namespace="):
            namespace, i = arg.split("=", 1)[1], i + 1
            continue
        kept.append(arg)
        if arg in _VALUE_OPTIONS and i + 1 < len(rest):
            kept.append(rest[i + 1])
            i += 2
            continue
        if not arg.startswith("-"):
            positional.append(len(kept) - 1)
        i += 1
    for index in positional:
        if "/" not in kept[index]:
            kept[index] = f"{namespace or default_namespace()}/{kept[index]}"
    return [command, *kept]


def _kubeconfig_namespace(argv: Sequence[str]) -> Callable[[], str]:
    def lookup() -> str:
        try:
            from kubernetes import config

            kubeconfig = _value_of(argv, "--kubeconfig")
            contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
            wanted = _value_of(argv, "--context")
            chosen = next((c for c in contexts if c["name"] == wanted), current) if wanted else current
            return str((chosen or {}).get("context", {}).get("namespace") or "default")
        except Exception:  # no kubeconfig (e.g. in a pod): kubectl's default
            return "default"

    return lookup


def _value_of(argv: Sequence[str], option: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] not in PLUGIN_COMMANDS:
        print(f"kubectl advisor: unknown command {args[0]!r}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
    from advisor.cli import main as cli_main

    return cli_main(translate(args, _kubeconfig_namespace(args)))


def complete(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-advisor``: what kubectl runs to complete ``kubectl advisor ...``."""
    from advisor.cli import build_parser
    from advisor.completion import plugin_candidates

    words = list(sys.argv[1:] if argv is None else argv)
    print(plugin_candidates(build_parser(), words, PLUGIN_COMMANDS), end="")
    return 0
