"""Fuzz every progress parser and the policy loader with 10,000 hypothesis cases each.

The unit tier runs the same properties (tests/hostile/test_fuzz_parsers.py) with 300 cases per
target; this runs them at the issue's scale and prints the cases and the time per target.
Usage: python bench/fuzz_inputs.py [--examples N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="cases per target (default 10,000)")
    args = parser.parse_args()
    os.environ["TRAINJOB_ADVISOR_FUZZ_EXAMPLES"] = str(args.examples)
    os.chdir(ROOT)
    started = time.perf_counter()
    rc = pytest.main(
        [
            str(ROOT / "tests" / "hostile" / "test_fuzz_parsers.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "--durations=0",
        ]
    )
    print(
        f"fuzz: {args.examples} cases per target, "
        f"{time.perf_counter() - started:.0f} s in all, exit {int(rc)}"
    )
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
