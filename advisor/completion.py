"""Shell completion for ``trainjob-advisor`` and the ``kubectl advisor`` plugin, from the parser.

Why: the candidates (subcommands, their options, the choices of an option) are read from the
argparse parser the CLI runs, so completion never lists a flag the CLI does not take. Bash gets
a small completion function with those lists baked in; zsh loads the same through bashcompinit.
``kubectl`` (1.26+) completes a plugin's arguments by running ``kubectl_complete-<plugin>`` with
the words typed so far and reading one candidate per line, then a ``:<directive>`` line (cobra's
protocol); ``plugin_candidates`` answers it.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

__all__ = ["bash_script", "candidates", "plugin_candidates", "zsh_script"]

#: cobra's ShellCompDirectiveNoFileComp: do not fall back to file names
NO_FILE_COMPLETION = 4


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse offers no public accessor for its subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Every option string of ``parser`` -> its choices (empty when free-form or a flag)."""
    found: dict[str, list[str]] = {}
    for action in parser._actions:
        for option in action.option_strings:
            found[option] = [str(c) for c in action.choices or ()]
    return found


def candidates(parser: argparse.ArgumentParser, words: Sequence[str], only: Sequence[str] = ()) -> list[str]:
    """What may come after ``words`` (the last one is the word being typed, possibly "")."""
    commands = _subparsers(parser)
    if only:
        commands = {k: v for k, v in commands.items() if k in only}
    *done, current = list(words) or [""]
    if not done:
        return sorted(c for c in commands if c.startswith(current))
    sub = commands.get(done[0])
    if sub is None:
        return []
    options = _options(sub)
    if done[-1] in options and options[done[-1]]:
        return [c for c in options[done[-1]] if c.startswith(current)]
    if current.startswith("-"):
        return sorted(o for o in options if o.startswith(current))
    return []


def bash_script(parser: argparse.ArgumentParser, prog: str = "trainjob-advisor") -> str:
    commands = _subparsers(parser)
    cases = []
    for name, sub in sorted(commands.items()):
        options = _options(sub)
        choice_cases = ""
        for opt, choices in sorted(options.items()):
            if choices:
                words = shlex.quote(" ".join(choices))
                reply = f'COMPREPLY=($(compgen -W {words} -- "$cur")); return;;'
                choice_cases += f"      {shlex.quote(opt)}) {reply}\n"
        cases.append(
            f"    {name})\n"
            f'      case "$prev" in\n{choice_cases}      esac\n'
            f'      COMPREPLY=($(compgen -W {shlex.quote(" ".join(sorted(options)))} -- "$cur"));;\n'
        )
    func = "_" + prog.replace("-", "_")
    return (
        f'# bash completion for {prog}: eval "$({prog} completion bash)"\n'
        f"{func}() {{\n"
        '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"\n'
        '  if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'    COMPREPLY=($(compgen -W {shlex.quote(" ".join(sorted(commands)))} -- "$cur")); return\n'
        "  fi\n"
        '  case "${COMP_WORDS[1]}" in\n' + "".join(cases) + "  esac\n}\n"
        f"complete -o default -F {func} {prog}\n"
    )


def zsh_script(parser: argparse.ArgumentParser, prog: str = "trainjob-advisor") -> str:
    return (
        f'# zsh completion for {prog}: eval "$({prog} completion zsh)"\n'
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser, prog).split("\n", 1)[1]
    )


def plugin_candidates(parser: argparse.ArgumentParser, words: Sequence[str], only: Sequence[str]) -> str:
    """The answer to ``kubectl_complete-advisor WORDS...``: candidates, then the directive line."""
    lines = candidates(parser, words, only)
    return "".join(f"{line}\n" for line in lines) + f":{NO_FILE_COMPLETION}\n"
