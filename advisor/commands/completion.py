"""``trainjob-advisor completion bash|zsh``: print a completion script (``eval "$(...)"``)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "completion",
        help="print a shell completion script",
        description='Print a completion script: eval "$(trainjob-advisor completion bash)" in ~/.bashrc.',
    )
    p.add_argument("shell", choices=("bash", "zsh"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from advisor.cli import build_parser
    from advisor.completion import bash_script, zsh_script

    parser = build_parser()
    print(bash_script(parser) if args.shell == "bash" else zsh_script(parser), end="")
    return 0
