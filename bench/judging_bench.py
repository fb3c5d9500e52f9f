"""How well a verdict read off a noisy log tells a wrong stop: against the clean curve behind it.

Run: ``.venv/bin/python bench/judging_bench.py [--seeds 100-129] [--curves-per-seed 40]``.

A real run's verdicts (``backtest``, ``simulate --curves``) read its own later record through
``advisor.judging``: how much a stop at step s left is what the run stood at there against the
best later value of its smoothed log. On a noisy log the best of many noisy values lies below the
curve they scatter about, so a stop on a plateau reads as leaving something. This bench draws
synthetic training-loss logs whose clean curve is known (an exponential fall to a floor that
flattens anywhere in the run, or a power law still falling at its end), with report noise of 0.5%
to 8% and 100 to 1,000 reports, stops each at random points, and compares the improvement left as
the verdict reads it from the log, with and without the noise's depth (``noise_depth``), against
the clean curve's: ``(c(s) - min_{s' > s} c(s')) / c(s)``.

Printed per wrong-stop threshold (0.5%, 1%, 2%): how many stops the clean curve calls wrong, how
many the verdict calls wrong that the clean curve does not (false wrong), how many it misses, and
the median signed error of the improvement left (verdict minus clean), by noise level. No constant
of ``advisor.judging`` is chosen here: ``NEAR_BEST_SE`` (two standard errors, the usual reach of a
normal error) and ``MIN_NOISE_POINTS`` were set before this bench was run; tuning seeds 0-14 are
printed beside the held-out 100-129 only to show they agree.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from advisor.judging import WRONG_STOP_THRESHOLDS, left_after, smoothed, smoothing_of

NOISE_LEVELS = (0.005, 0.02, 0.05, 0.08)


@dataclass(frozen=True)
class Log:
    """One synthetic run: the clean curve behind it (the truth no verdict sees) and its log."""

    steps: np.ndarray
    clean: np.ndarray
    logged: np.ndarray
    noise: float


def _logs(seed: int, n: int) -> Iterator[Log]:
    """``n`` runs of one seed: curves a verdict must tell apart (flat from anywhere, or still
    falling at the end), each with one of ``NOISE_LEVELS`` of multiplicative report noise."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        points = int(rng.integers(100, 1001))
        steps = np.arange(1, points + 1) * 10.0
        x = steps / steps[-1]
        if rng.random() < 0.6:
            # falls to a floor, flat from anywhere in the run (its 1% knee at 10-90%)
            knee = rng.uniform(0.1, 0.9)
            tau = knee / np.log(100.0 * rng.uniform(1.0, 3.0))
            clean = 1.5 + rng.uniform(0.5, 2.0) * np.exp(-x / tau)
        else:
            # a power law still falling at its end
            clean = 1.2 + rng.uniform(1.0, 3.0) * (x + 0.02) ** -rng.uniform(0.1, 0.6) / 10.0
        noise = float(rng.choice(NOISE_LEVELS))
        logged = clean * (1.0 + rng.normal(0.0, noise, points))
        yield Log(steps, clean, logged, noise)


def _clean_left(log: Log, i: int) -> float:
    """What a stop at point ``i`` really left: the clean curve's later best against its value there."""
    here, later = log.clean[i], log.clean[i + 1 :]
    return max(0.0, float(here - later.min()) / here) if later.size else 0.0


def run(seeds: list[int], per_seed: int) -> dict[str, dict[float, dict[str, list[float]]]]:
    """Per reading and noise level, the improvement left as read from the log and on the clean curve,
    at five stops of each run (20-95% of it, drawn from a stream of their own)."""
    out: dict[str, dict[float, dict[str, list[float]]]] = {}
    for seed in seeds:
        rng = np.random.default_rng(10_000 + seed)
        for log in _logs(seed, per_seed):
            smooth = smoothed(log.logged)
            noise = smoothing_of(log.logged)
            for frac in rng.uniform(0.2, 0.95, 5):
                i = int(frac * (log.steps.size - 1))
                truth = _clean_left(log, i)
                for name, with_noise in (("as logged", None), ("past the noise", noise)):
                    left = left_after(
                        log.steps, smooth, float(log.steps[i]), keep_best=False, noise=with_noise
                    )[0]
                    cell = out.setdefault(name, {}).setdefault(log.noise, {"read": [], "truth": []})
                    cell["read"].append(left)
                    cell["truth"].append(truth)
    return out


def _print(title: str, result: dict[str, dict[float, dict[str, list[float]]]]) -> None:
    print(title)
    print(
        f"  {'reading':<15} {'noise':>5}  {'stops':>5}  "
        + "  ".join(f"{'t=' + format(t, '.1%'):>27}" for t in WRONG_STOP_THRESHOLDS)
        + "  median error"
    )
    print(
        f"  {'':<15} {'':>5}  {'':>5}  "
        + "  ".join(f"{'wrong / false / missed':>27}" for _ in WRONG_STOP_THRESHOLDS)
    )
    for name, by_noise in result.items():
        rows = sorted(by_noise.items())
        pooled = {
            "read": [v for _, c in rows for v in c["read"]],
            "truth": [v for _, c in rows for v in c["truth"]],
        }
        for level, cell in [*rows, (None, pooled)]:
            read, truth = np.array(cell["read"]), np.array(cell["truth"])
            cols = []
            for t in WRONG_STOP_THRESHOLDS:
                wrong = truth > t
                said = read > t
                false, missed = int((said & ~wrong).sum()), int((~said & wrong).sum())
                cols.append(f"{int(wrong.sum()):>9} / {false:>5} / {missed:>6}")
            lvl = "all" if level is None else f"{level:.1%}"
            print(
                f"  {name:<15} {lvl:>5}  {read.size:>5}  "
                + "  ".join(f"{c:>27}" for c in cols)
                + f"  {float(np.median(read - truth)):+.4f}"
            )


def _seeds(text: str) -> list[int]:
    a, _, b = text.partition("-")
    return list(range(int(a), int(b or a) + 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default=None, help="a range A-B (default: 0-14, then 100-129)")
    ap.add_argument("--curves-per-seed", type=int, default=40)
    args = ap.parse_args()
    splits = [("tuning seeds 0-14", _seeds("0-14")), ("held-out seeds 100-129", _seeds("100-129"))]
    if args.seeds:
        splits = [(f"seeds {args.seeds}", _seeds(args.seeds))]
    for title, seeds in splits:
        _print(
            f"{title}: {len(seeds) * args.curves_per_seed} logs, 5 stops each",
            run(seeds, args.curves_per_seed),
        )


if __name__ == "__main__":
    main()
