"""The CLI's conventions, through the real console script where the process matters (pipes, exit
codes, stdin): one error line and exit 2 for bad input, quiet in a closed pipe, ``-`` for stdin,
``--json`` on stdout, outputs checked before a long run, the cluster commands without a cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main

SCRIPT = Path(sys.executable).parent / "trainjob-advisor"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def script(
    *argv: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *argv], input=stdin, capture_output=True, text=True, timeout=300, env=env
    )


def _one_error(done: subprocess.CompletedProcess[str], command: str) -> str:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"trainjob-advisor {command}: error: ")
    return lines[0]


@pytest.mark.parametrize("module", ["advisor", "advisor.cli"])
def test_bad_input_is_one_error_line_run_as_a_module_too(module: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "forecast", str(tmp_path / "missing.csv")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "internal error" not in _one_error(done, "forecast")


def test_a_closed_pipe_is_not_a_traceback() -> None:
    # the reader has gone before the first write: EPIPE, as with `forecast ... | head` on a long output
    proc = subprocess.Popen(
        [str(SCRIPT), "forecast", str(FIXTURES / "run.csv"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141
    assert err == ""


def test_stdin_is_read_with_a_dash() -> None:
    done = script("forecast", "-", "--json", stdin=(FIXTURES / "run.csv").read_text())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["input"]["source"].startswith("CSV <stdin>")


def test_a_failed_forecast_prints_no_probability_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "nan.csv"
    path.write_text("step,loss\n" + "".join(f"{i},nan\n" for i in range(1, 30)))
    line = _one_error(script("forecast", str(path)), "forecast")
    assert "no forecast" in line and "no usable points" in line
    assert "P = " not in line


def test_a_complete_file_without_total_says_how_to_pass_it(tmp_path: Path) -> None:
    path = tmp_path / "done.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{2 + 10 / s:.4f}\n" for s in range(10, 5101, 10)))
    done = script("forecast", str(path))
    assert done.returncode == 0, done.stderr
    assert "total steps unknown" in done.stdout and "--total-steps 5100" in done.stdout
    _one_error(script("forecast", str(path), "--total-steps", "100"), "forecast")


def test_relative_error_is_absolute_near_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "zero.csv"
    path.write_text(
        "step,loss\n" + "".join(f"{s},{3.0 * 0.5 ** (s / 100):.6g}\n" for s in range(10, 3001, 10))
    )
    assert main(["forecast", str(path), "--upto-step", "1500"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "observed end" in x)
    assert "(absolute: the loss ends near zero)" in line and "%)" not in line.split("mean off by")[1]


def test_observed_end_is_the_end_of_the_run_that_was_cut(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # two independent runs in one file, one after the other (the step goes back to the start)
    first = "".join(f"{s},{2 + 10 / s:.4f}\n" for s in range(10, 2001, 10))
    second = "".join(f"{s},{5 + 10 / s:.4f}\n" for s in range(10, 2001, 10))
    path = tmp_path / "two.csv"
    path.write_text("step,loss\n" + first + second)
    assert main(["forecast", str(path), "--upto-step", "1000", "--json"]) == 0
    observed = json.loads(capsys.readouterr().out)["observed_final_loss"]
    assert abs(observed - 2.005) < 0.01  # the first run's end, not the second's (5.005)


def test_simulate_json_on_stdout_and_outputs_checked_first(tmp_path: Path) -> None:
    done = script("simulate", "--jobs", "3", "--quiet", "--baselines-only", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert rows[0]["policy"] == "no-advisor" and "gpu_hours_saved" in rows[0]
    assert "GPU-h" in done.stderr  # the table went to stderr
    old = script("simulate", "--jobs", "3", "--quiet", "--baselines-only", "--json", str(tmp_path / "r.json"))
    assert old.returncode == 0 and "deprecated" in old.stderr
    assert json.loads((tmp_path / "r.json").read_text())[0]["policy"] == "no-advisor"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    # the report directory cannot be made: said at once, before the run
    line = _one_error(script("simulate", "--report", str(blocker / "sub")), "simulate")
    assert "--report" in line


def test_cluster_commands_without_a_kubeconfig_say_it_in_one_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "missing")}
    for argv in (("run",), ("status",)):
        line = _one_error(script(*argv, env=env), argv[0])
        assert "no kubeconfig found" in line


def test_run_against_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    line = _one_error(script("run", "--kubeconfig", str(kubeconfig)), "run")
    assert "cannot reach the API server at https://127.0.0.1:1" in line


def test_usage_errors_are_one_line() -> None:
    for argv in (
        ("forecast", "--demo", "--seed", "-1"),
        ("simulate", "--tick-max", "0"),
        ("simulate", "--seed", "x"),
    ):
        _one_error(script(*argv), argv[0])


def test_an_unknown_flag_points_at_the_help_of_the_command_it_was_given_to() -> None:
    line = _one_error(script("forecast", "--bogus", "x"), "forecast")
    assert line.endswith("unrecognized arguments: --bogus (see trainjob-advisor forecast --help)")
    line = _one_error(script("policy", "validate", "--zz", "p.yaml"), "policy validate")
    assert line.endswith("(see trainjob-advisor policy validate --help)")


def test_policy_validate_rejects_duplicate_keys_and_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = (
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata:\n  name: {name}\n"
        "spec:\n  mode: Recommend\n{extra}"
    )
    a, b, dup = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "dup.yaml"
    a.write_text(policy.format(name="p", extra=""))
    b.write_text(policy.format(name="p", extra=""))
    dup.write_text(policy.format(name="q", extra="  mode: Apply\n"))
    assert main(["policy", "validate", str(a), str(b), str(dup)]) == 1
    out = capsys.readouterr().out
    assert f"{a}: OK" in out
    assert f"{b}: metadata.name: policy 'p' is also defined in {a}" in out
    assert f"{dup}: line 7: duplicate key 'mode'" in out


def test_explain_shows_rule_state_times_as_times(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2]
    sample = root / "manifests" / "samples" / "policy-plateau-release.yaml"
    assert (
        main(["policy", "explain", str(sample), "--job-state", str(root / "examples" / "job-state.json")])
        == 0
    )
    state = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("state: "))
    assert state == "state: plateau.since=2025-12-01T11:40:00Z (20m ago)"


def test_durations_read_the_same_in_run_and_simulate() -> None:
    from advisor.cli import build_parser

    parser = build_parser()
    run = parser.parse_args(["run", "--forecast-interval", "2m", "--evaluate-interval", "45"])
    assert run.forecast_interval == 120.0 and run.evaluate_interval == 45.0  # a bare number: seconds
    sim = parser.parse_args(["simulate", "--forecast-interval", "20m"])
    assert sim.forecast_interval == 1200.0


def test_unsorted_steps_get_one_story(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import random

    steps = list(range(10, 2001, 10))
    random.Random(0).shuffle(steps)
    path = tmp_path / "shuffled.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{2 + 10 / s:.4f}\n" for s in steps))
    assert main(["forecast", str(path)]) == 0
    out = capsys.readouterr().out
    assert "restarts)" not in out and "kept as separate segments" not in out
    assert out.count("sorted") == 1 and "sorted by step" in out
    # what is shown beside the forecast reads the run's order too, not the file's: the progress
    # is the last step (it read the last row's, "step 69" of a run logged to step 300) ...
    assert "progress        step 2,000;" in out
    # ... and so do the JSON's first and last step
    assert main(["forecast", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["input"]
    assert (got["first_step"], got["last_step"]) == (10, 2000)


def test_the_shipped_cluster_example_loads_in_both_spellings(tmp_path: Path) -> None:
    from simulator.scenario import load_cluster

    root = Path(__file__).resolve().parents[2]
    queues, local = load_cluster(root / "examples" / "cluster.yaml")
    assert [q.name for q in queues] == ["team-a", "team-b", "spot"] and local["spot"] == "spot"
    old = tmp_path / "old.yaml"
    old.write_text("clusterQueues:\n  - {name: cq, nominalGpus: 16}\n")
    (q,), _ = load_cluster(old)
    assert q.nominal_gpus == 16


@pytest.mark.parametrize(
    ("key", "command"),
    [("wrong_stop_gpu_hours", "simulate --json"), ("gpu_hours_saved_on_wrong_stops", "backtest --json")],
)
def test_the_readme_documents_the_gpu_hours_of_wrong_stops_in_the_json(key: str, command: str) -> None:
    """Each is GPU-hours (what the wrongly stopped runs had used; what a row saved on its wrong
    stops), which neither its name nor the table's "of it on wrong stops" says."""
    from advisor.backtest.verdict import row_summary

    assert "gpu_hours_saved_on_wrong_stops" in row_summary("row", [])
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    lines = [line for line in readme.splitlines() if f"`{key}` (`{command}`" in line]
    assert len(lines) == 1 and "GPU-hours" in lines[0], lines
