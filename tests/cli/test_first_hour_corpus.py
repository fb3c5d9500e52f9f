"""Every input of the first-hour corpus (``../shared/fixtures/first-hour``) gives a result or one
error line with exit 2, never a traceback: loss logs through ``forecast``, policy files through
``policy validate`` / ``policy explain`` / ``simulate --policy``, traces and cluster files through
``simulate``.

The whole corpus runs in-process through ``advisor.cli.main`` (called with ``argv``, it lets any
exception out, so a traceback fails the test); the inputs that used to end in a traceback also
run through the real console script. Skipped when the folder is absent (it is not copied into the
repository; in CI ``shared/`` sits beside the clone)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = (ROOT.parent / "shared" / "fixtures" / "first-hour", Path("/work/shared/fixtures/first-hour"))
CORPUS = next((p for p in CANDIDATES if p.is_dir()), None)
SCRIPT = Path(sys.executable).parent / "trainjob-advisor"

pytestmark = pytest.mark.skipif(CORPUS is None, reason="first-hour corpus not found beside the repository")


def _files(sub: str, *suffixes: str) -> list[Path]:
    if CORPUS is None:
        return []
    return sorted(
        p for p in (CORPUS / sub).iterdir() if p.is_file() and (not suffixes or p.suffix in suffixes)
    )


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _result_or_one_error(code: int, out: str, err: str, command: str, *, check_failed: bool = False) -> None:
    assert "Traceback" not in out + err
    if code == 0:
        assert out.strip(), "a result is printed"
        return
    if check_failed and code == 1:  # policy validate: the file is invalid, every error on stdout
        assert out.strip() and not err.strip()
        return
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"trainjob-advisor {command}: error: "), err


@pytest.mark.parametrize("path", _files("bad") + _files("repro"), ids=_ids(_files("bad") + _files("repro")))
def test_forecast_gives_a_result_or_one_error_line(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _call(capsys, "forecast", str(path))
    _result_or_one_error(code, out, err, "forecast")
    if code == 0:
        # the training loss, or the eval metric a log without one is forecast by
        assert re.search(r"^  final \w+ ", out, re.M) and "n/a  (80%" not in out, "a result is a forecast"


@pytest.mark.parametrize("path", _files("repro", ".csv"), ids=_ids(_files("repro", ".csv")))
def test_replayed_forecasts_of_the_reproductions_work(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = [float(line.split(",")[0]) for line in path.read_text().splitlines()[1:] if line.strip()]
    code, out, err = _call(capsys, "forecast", str(path), "--upto-step", str(int(steps[len(steps) // 2])))
    assert code == 0, err
    assert "failed" not in out and "observed end" in out


@pytest.mark.parametrize(
    "path", _files("policy", ".yaml", ".json"), ids=_ids(_files("policy", ".yaml", ".json"))
)
def test_policy_validate_reports_or_accepts(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _call(capsys, "policy", "validate", str(path))
    _result_or_one_error(code, out, err, "policy validate", check_failed=True)


def test_policy_explain_on_every_job_state(capsys: pytest.CaptureFixture[str]) -> None:
    assert CORPUS is not None
    policy = CORPUS / "policy" / "ok.yaml"
    for state in sorted((CORPUS / "policy").glob("state*.json")):
        code, out, err = _call(capsys, "policy", "explain", str(policy), "--job-state", str(state))
        _result_or_one_error(code, out, err, "policy explain")
    # a wrong type inside the forecast is an error naming the key, not "usable"
    code, _, err = _call(
        capsys, "policy", "explain", str(policy), "--job-state", str(CORPUS / "policy" / "state_badtype.json")
    )
    assert code == 2 and "job.forecast.plateauProbability: must be a number" in err


def test_simulate_rejects_every_policy_that_validate_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    assert CORPUS is not None
    for path in _files("policy", ".yaml"):
        valid, _, _ = _call(capsys, "policy", "validate", str(path))
        if valid == 0:
            continue
        code, out, err = _call(
            capsys, "simulate", "--jobs", "2", "--quiet", "--baselines", "no-advisor", "--policy", str(path)
        )
        assert code == 2, (path.name, out, err)
        _result_or_one_error(code, out, err, "simulate")


@pytest.mark.parametrize("path", _files("simulate", ".csv"), ids=_ids(_files("simulate", ".csv")))
def test_simulate_trace_gives_a_result_or_one_error_line(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _call(
        capsys, "simulate", "--trace", str(path), "--quiet", "--baselines-only", "--baselines", "no-advisor"
    )
    _result_or_one_error(code, out, err, "simulate")


@pytest.mark.parametrize("path", _files("simulate", ".yaml"), ids=_ids(_files("simulate", ".yaml")))
def test_simulate_cluster_gives_a_result_or_one_error_line(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _call(
        capsys,
        "simulate",
        "--jobs",
        "3",
        "--quiet",
        "--baselines-only",
        "--baselines",
        "no-advisor",
        "--cluster",
        str(path),
    )
    _result_or_one_error(code, out, err, "simulate")


@pytest.mark.parametrize(
    "argv",
    [
        ("forecast", "bad/json_list.json"),
        ("forecast", "bad/binary.bin"),
        ("forecast", "bad/all_nan.csv"),
        ("forecast", "repro/synthetic_epoch_float.csv", "--upto-step", "69999"),
        ("forecast", "--demo", "--seed", "-1"),
        ("policy", "validate", "policy/binary.yaml"),
        ("simulate", "--policy", "policy/binary.yaml"),
        ("simulate", "--policy", "policy/empty.yaml"),
        ("simulate", "--seed", "-1"),
        ("simulate", "--fixed-interval", "0"),
        ("simulate", "--tick-max", "0"),
        ("simulate", "--report", "/etc/passwd"),
        ("simulate", "--trace", "simulate/binary.csv"),
        ("simulate", "--trace", "."),
    ],
    ids=lambda a: " ".join(a),
)
def test_the_console_script_never_prints_a_traceback(argv: tuple[str, ...]) -> None:
    assert CORPUS is not None
    args = [str(CORPUS / a) if "/" in a and not a.startswith("/") else a for a in argv]
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300, cwd=CORPUS)
    assert "Traceback" not in done.stdout + done.stderr
    if argv[0] == "forecast" and "--upto-step" in argv:
        assert done.returncode == 0, done.stderr
        assert "P = " in done.stdout and "failed" not in done.stdout
        return
    assert done.returncode in (1, 2), done
    if done.returncode == 2:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    else:  # policy validate: the invalid file on stdout
        assert "not UTF-8" in done.stdout
