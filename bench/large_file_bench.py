"""Reading a long ``step,loss`` CSV: the one-pass numeric reader against the general one.

Writes a synthetic ``--rows`` CSV to a temporary file, then loads it with ``load_curve`` (the fast
path) and with the general record-per-row reader (the fast path switched off), in this process,
and prints the time (untraced) and the peak Python memory (tracemalloc, a second load) of each
and their ratios.

    .venv/bin/python bench/large_file_bench.py --rows 2000000
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

import advisor.sources.files as files


def _measure(path: Path) -> tuple[float, float, int]:
    """Wall time of one load (untraced), then its peak Python memory (a second, traced load:
    tracemalloc slows allocation-heavy code by an order of magnitude)."""
    t0 = time.perf_counter()
    curve = files.load_curve(path)
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    files.load_curve(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak / 2**20, len(curve)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.csv"
        with path.open("w") as fh:
            fh.write("step,loss\n")
            for i in range(1, args.rows + 1):
                fh.write(f"{i},{2 + 3 * (i / 1000) ** -0.4 + rng.gauss(0, 0.02):.5f}\n")
        size = path.stat().st_size / 2**20
        fast = _measure(path)
        saved = files.LARGE_ROWS
        files.LARGE_ROWS = 10**12  # the general reader
        try:
            general = _measure(path)
        finally:
            files.LARGE_ROWS = saved
    print(f"{args.rows:,} rows, {size:.0f} MiB")
    for name, (s, mib, n) in (("one-pass", fast), ("general", general)):
        print(f"  {name:<9} {s:6.2f} s  peak {mib:7.0f} MiB  {n:,} points kept")
    print(f"  ratio     {general[0] / fast[0]:.1f}x faster, {general[1] / fast[1]:.1f}x less memory")


if __name__ == "__main__":
    main()
