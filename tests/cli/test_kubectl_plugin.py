"""``kubectl advisor``: kubectl's argument conventions, and completion read from the real parser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from advisor.cli import build_parser
from advisor.completion import bash_script, candidates, plugin_candidates
from advisor.kubectl_plugin import PLUGIN_COMMANDS, main, translate


def ns() -> str:
    return "from-context"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["explain", "llm", "-n", "team-a"], ["explain", "team-a/llm"]),
        (["explain", "team-a/llm"], ["explain", "team-a/llm"]),
        (["explain", "llm"], ["explain", "from-context/llm"]),
        (["explain", "--namespace=b", "llm", "-o", "json"], ["explain", "b/llm", "-o", "json"]),
        (["compare", "a", "x/b", "-n", "t", "--draws", "500"], ["compare", "t/a", "x/b", "--draws", "500"]),
        (["resume", "--kind", "PyTorchJob", "job", "-n", "t"], ["resume", "--kind", "PyTorchJob", "t/job"]),
        (["status", "-n", "team-a", "--by", "queue"], ["status", "-n", "team-a", "--by", "queue"]),
        (["explain", "llm", "--kubeconfig", "cfg", "-n", "a"], ["explain", "a/llm", "--kubeconfig", "cfg"]),
    ],
)
def test_kubectl_style_names_become_namespace_slash_name(argv: list[str], expected: list[str]) -> None:
    assert translate(argv, ns) == expected


def test_every_plugin_command_is_a_cli_command_and_unknown_ones_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = set(candidates(build_parser(), [""]))
    assert set(PLUGIN_COMMANDS) <= commands
    assert main(["forecast"]) == 2
    assert "unknown command 'forecast'" in capsys.readouterr().err
    assert main([]) == 2 and main(["--help"]) == 0


def test_completion_offers_commands_options_and_choices_from_the_parser() -> None:
    parser = build_parser()
    assert candidates(parser, ["st"]) == ["status"]
    assert "--all-namespaces" in candidates(parser, ["status", "--a"])
    assert candidates(parser, ["status", "-o", ""]) == ["table", "json"]
    assert candidates(parser, ["resume", "--kind", "P"]) == ["PyTorchJob"]
    assert plugin_candidates(parser, [""], PLUGIN_COMMANDS).splitlines() == [*sorted(PLUGIN_COMMANDS), ":4"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_bash_script_completes_in_a_real_bash(tmp_path: Path) -> None:
    script = tmp_path / "completion.bash"
    script.write_text(bash_script(build_parser()))
    probe = (
        f"source {script}; COMP_WORDS=(trainjob-advisor explain -o ''); COMP_CWORD=3; "
        '_trainjob_advisor; echo "${COMPREPLY[@]}"; '
        'COMP_WORDS=(trainjob-advisor comp); COMP_CWORD=1; _trainjob_advisor; echo "${COMPREPLY[@]}"'
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["text json", "compare completion"]
