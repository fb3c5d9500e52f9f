"""Fuzz every progress parser and the policy loader with 10,000 hypothesis cases each, and, where
atheris installs, with coverage-guided fuzzing of the same properties.

The unit tier runs the same properties (tests/hostile/test_fuzz_parsers.py) with 300 cases per
target; this runs them at the issue's scale and prints the cases and the time per target.

``--atheris N`` adds a libFuzzer run of N inputs per target (atheris, ``pip install atheris``):
the parsers are imported instrumented, and atheris's bytes drive the very hypothesis strategies
of the unit tier (``fuzz_one_input``), so every input is one the properties accept and every
property is checked on it. Each target runs in a process of its own (libFuzzer ends its process);
a crash prints the failing input and makes the exit code non-zero.

Usage: python bench/fuzz_inputs.py [--examples N] [--atheris N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the properties of tests/hostile/test_fuzz_parsers.py that take generated input
TARGETS = (
    "test_trainer_status_parser",
    "test_rhoai_annotation_parser",
    "test_progress_annotation_parser",
    "test_whole_job_objects",
    "test_policy_loader_raises_only_policy_errors",
    "test_policy_loader_on_arbitrary_text",
)


def _atheris_child(target: str, runs: int) -> None:
    """Run in a process of its own: libFuzzer calls exit() when it is done."""
    import atheris

    with atheris.instrument_imports(include=["advisor", "policies"]):
        import advisor.sources.progress_annotation
        import advisor.sources.trainerstatus  # noqa: F401
        import policies.loader  # noqa: F401
    sys.path.insert(0, str(ROOT / "tests" / "hostile"))
    import test_fuzz_parsers as properties

    prop = getattr(properties, target)
    atheris.Setup(
        [sys.argv[0], f"-runs={runs}", "-rss_limit_mb=2048", "-print_final_stats=1"],
        prop.hypothesis.fuzz_one_input,
    )
    atheris.Fuzz()


def _run_atheris(runs: int) -> int:
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("atheris: not installed (pip install atheris); only the hypothesis cases ran")
        return 0
    worst = 0
    for target in TARGETS:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--atheris-child", target, "--atheris", str(runs)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        stats = [line for line in done.stderr.splitlines() if "number_of_executed_units" in line]
        execs = stats[0].split(":")[-1].strip() if stats else "?"
        cov = next((line for line in reversed(done.stderr.splitlines()) if " cov: " in line), "")
        cov = cov.split(" cov: ")[1].split()[0] if cov else "?"
        print(
            f"atheris {target}: {execs} inputs, {cov} coverage edges, "
            f"{time.perf_counter() - started:.0f} s, exit {done.returncode}"
        )
        if done.returncode != 0:
            print(done.stderr[-4000:])
            worst = done.returncode
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="cases per target (default 10,000)")
    parser.add_argument(
        "--atheris", type=int, default=0, metavar="N", help="also N coverage-guided inputs per target"
    )
    parser.add_argument("--atheris-child", choices=TARGETS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.atheris_child:
        _atheris_child(args.atheris_child, args.atheris)
        return 0
    os.environ["TRAINJOB_ADVISOR_FUZZ_EXAMPLES"] = str(args.examples)
    os.chdir(ROOT)
    started = time.perf_counter()
    rc = int(
        pytest.main(
            [
                str(ROOT / "tests" / "hostile" / "test_fuzz_parsers.py"),
                "-q",
                "-p",
                "no:cacheprovider",
                "--durations=0",
            ]
        )
    )
    print(f"fuzz: {args.examples} cases per target, {time.perf_counter() - started:.0f} s in all, exit {rc}")
    if args.atheris > 0:
        rc = rc or _run_atheris(args.atheris)
    return rc


if __name__ == "__main__":
    sys.exit(main())
