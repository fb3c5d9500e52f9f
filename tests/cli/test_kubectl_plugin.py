"""``kubectl advisor``: kubectl's argument conventions, and completion read from the real parser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from advisor.cli import CommandError, build_parser
from advisor.completion import bash_script, candidates, plugin_candidates
from advisor.controller.cliutil import parse_ref
from advisor.kubectl_plugin import PLUGIN_COMMANDS, main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["explain", "llm", "-n", "team-a"], [("team-a", "llm")]),
        (["explain", "team-a/llm"], [("team-a", "llm")]),
        (["explain", "llm"], [("from-context", "llm")]),
        (["explain", "--namespace=b", "llm", "-o", "json"], [("b", "llm")]),
        (["compare", "a", "t/b", "-n", "t", "--draws", "500"], [("t", "a"), ("t", "b")]),
        (["compare", "x/a", "y/b", "--draws", "500"], [("x", "a"), ("y", "b")]),
        (["resume", "--kind", "PyTorchJob", "job", "-n", "t"], [("t", "job")]),
        (["explain", "llm", "--kubeconfig", "cfg", "-n", "a"], [("a", "llm")]),
    ],
)
def test_jobs_are_named_as_kubectl_names_them(
    argv: list[str], expected: list[tuple[str, str]], tmp_path: Path
) -> None:
    """``NAME -n NS`` or ``NS/NAME``; a bare name is in the kubeconfig context's namespace."""
    cfg = tmp_path / "config"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u, "
        "namespace: from-context}}]\ncurrent-context: x\n"
    )
    if "--kubeconfig" not in argv:
        argv = [*argv, "--kubeconfig", str(cfg)]
    args = build_parser().parse_args(argv)
    refs = args.refs if argv[0] == "compare" else [args.ref]
    assert [parse_ref(r, args) for r in refs] == expected


def test_a_malformed_name_is_one_clear_error() -> None:
    with pytest.raises(CommandError, match="NAME \\(with -n NAMESPACE\\) or NAMESPACE/NAME"):
        parse_ref("a/b/c", build_parser().parse_args(["explain", "x"]))
    with pytest.raises(CommandError, match="names namespace 'a' but -n says 'b'"):
        parse_ref("a/x", build_parser().parse_args(["explain", "a/x", "-n", "b"]))


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
