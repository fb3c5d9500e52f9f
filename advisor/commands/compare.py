"""``trainjob-advisor compare NS/A NS/B ...``: which run of a sweep will end best?

For runs of one experiment (a hyperparameter sweep, seeds), prints each run's predicted final
loss with its 80% interval and the probability that it ends with the lowest loss. Each forecast
interval is read as a split normal (p10 / mean / p90) and the probabilities come from a seeded
Monte-Carlo draw, so the same forecasts always give the same answer.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.cli import CommandError

__all__ = ["prob_best", "register", "run"]

_Z90 = 1.2815515655446004


def register(subparsers: Any) -> None:
    from advisor.controller.cliutil import add_cluster_args, add_namespace_arg

    p = subparsers.add_parser(
        "compare",
        help="compare the predicted final loss of several runs",
        description="Predicted final loss of each run, with its interval, and the "
        "probability that each ends best (lowest loss).",
    )
    add_cluster_args(p)
    add_namespace_arg(p)
    p.add_argument("refs", nargs="+", metavar="NAME", help="two or more runs: NAME or NS/NAME")
    p.add_argument("--draws", type=int, default=20000, help="Monte-Carlo draws (default 20000)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.set_defaults(func=run)


def prob_best(
    intervals: Sequence[tuple[float, float, float]], *, draws: int = 20000, seed: int = 0
) -> list[float]:
    """P(run i has the lowest final loss) for intervals (mean, p10, p90), split-normal read."""
    import numpy as np

    if not intervals:
        return []
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, len(intervals)))
    means = np.array([m for m, _, _ in intervals])
    lo = np.array([(m - p10) / _Z90 for m, p10, _ in intervals]).clip(min=0.0)
    hi = np.array([(p90 - m) / _Z90 for m, _, p90 in intervals]).clip(min=0.0)
    samples = means + np.where(z < 0, z * lo, z * hi)
    winners = np.argmin(samples, axis=1)
    counts = np.bincount(winners, minlength=len(intervals))
    return [float(c) / draws for c in counts]


def _interval(status: Mapping[str, Any]) -> tuple[float, float, float] | None:
    final = (status.get("forecast") or {}).get("finalLoss") or {}
    try:
        values = (float(final["mean"]), float(final["p10"]), float(final["p90"]))
    except (KeyError, TypeError, ValueError):
        return None
    return values


def run(args: argparse.Namespace) -> int:
    from advisor.controller.cliutil import api_error, cluster_api, parse_ref, print_table, status_of

    if len(args.refs) < 2:
        raise CommandError("compare needs at least two runs")
    if args.draws < 100:
        raise CommandError("--draws must be at least 100")
    refs = [parse_ref(r, args) for r in args.refs]
    api = cluster_api(args)
    found: list[tuple[str, Mapping[str, Any], tuple[float, float, float] | None]] = []
    for ns, name in refs:
        try:
            obj = api.get_forecast(ns, name)
        except Exception as exc:
            raise api_error(exc, f"TrainJobForecast {ns}/{name}") from exc
        if obj is None:
            raise CommandError(f"no TrainJobForecast {ns}/{name}")
        status = status_of(obj)
        found.append((f"{ns}/{name}", status, _interval(status)))
    usable = [(ref, iv) for ref, _, iv in found if iv is not None]
    probs = dict(
        zip([r for r, _ in usable], prob_best([iv for _, iv in usable], draws=args.draws), strict=True)
    )
    result: list[dict[str, Any]] = [
        {
            "run": ref,
            "finalLoss": None if iv is None else {"mean": iv[0], "p10": iv[1], "p90": iv[2]},
            "probabilityBest": probs.get(ref),
            "progress": (st.get("summary") or {}).get("progress"),
            "state": st.get("state"),
        }
        for ref, st, iv in found
    ]
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    rows = [
        [
            r["run"],
            "-" if r["finalLoss"] is None else f"{r['finalLoss']['mean']:.4g}",
            "-" if r["finalLoss"] is None else f"[{r['finalLoss']['p10']:.4g}, {r['finalLoss']['p90']:.4g}]",
            "-" if r["probabilityBest"] is None else f"{r['probabilityBest']:.0%}",
            r["progress"],
            r["state"],
        ]
        for r in sorted(result, key=lambda r: -(r["probabilityBest"] or -1))
    ]
    print_table(("RUN", "FINAL LOSS", "80% INTERVAL", "P(BEST)", "PROGRESS", "STATE"), rows)
    missing = [r["run"] for r in result if r["finalLoss"] is None]
    if missing:
        print(f"no forecast yet for: {', '.join(missing)}")
    return 0
