"""``trainjob-advisor compare NAME NAME ...``: which run of a sweep gives the best model?

For runs of one experiment (a hyperparameter sweep, seeds), prints each run's predicted final
value of the series the runs are judged by, with its 80% interval, and the probability that each
ends best. The series: ``--metric`` when given (an error when no run reports it), else the eval
metric the runs are judged by when every run reports it (a fine-tune's ``eval_loss``: a run that
overfits ends with a low training loss and a poor model), else the training loss, with a note
that says why. "Best" follows the metric's direction (lowest loss, highest accuracy). Each
forecast interval is read as a split normal (p10 / mean / p90) and the probabilities come
from a seeded Monte-Carlo draw, so the same forecasts always give the same answer.

Judged by an eval metric, a run gives the better of its best checkpoint so far and its final
value (a run at its end: its best checkpoint, its last having been among those it was chosen
from), a best checkpoint by what its series' trend says at its step, not the value it measured,
the luckiest of its evaluations (``compare_status.kept_draw``): the best checkpoint can be kept
(HF's ``load_best_model_at_end``; the state names its step), so a run that overfit after
reaching the sweep's best eval loss still holds the best model. Each run's best checkpoint of
the metric ranked by (step and value) is shown beside it (of a ``trainer_state.json`` that
states its ``save_steps``, the best of the steps it saved a checkpoint at: an evaluation between
two saves left no weights to keep), that of ``--metric eval_accuracy`` when ranked by it, not
that of the eval metric its state is judged by. The training loss has no such checkpoint to keep
(a run's last weights are what its final training loss describes): ranked by it, no best
checkpoint is shown, and a run judged overfitting is left unranked as a diverging run with no
checkpoint is: its training loss keeps falling while its model gets worse, so the lowest FINAL
LOSS of a sweep named the poor model best at P(BEST) 100%.

The runs are TrainJobForecasts on the cluster, or, when every argument is a file or a folder, run
logs (the formats ``forecast FILE`` reads: a sweep's ``trainer_state.json`` files, CSV, JSONL; a
folder stands for every run log under it, found as ``backtest`` finds them),
each forecast as ``forecast FILE`` forecasts it (to its planned total when the log says it, else to
``--total-steps``, else its asymptote).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from advisor.cli import CommandError
from advisor.commands.compare_cells import (
    IMPROVING_AT_END,
    best_cell,
    final_at,
    lr_unknown,
    mixed_scales,
    run_notes,
    stale_metric,
    state_cell,
)
from advisor.commands.compare_files import ENDED, IMPROVING, TOTAL, file_status, log_files
from advisor.commands.compare_status import (
    best_made_after,
    best_of,
    chosen_metric,
    higher_is_better,
    interval_of,
    kept_draw,
    kept_trend,
    kept_value,
    points_of,
)

__all__ = ["prob_best", "register", "run"]

_Z90 = 1.2815515655446004


def register(subparsers: Any) -> None:
    from advisor.controller.cliutil import add_cluster_args, add_namespace_arg

    p = subparsers.add_parser(
        "compare",
        help="compare the predicted final loss (or eval metric) of several runs",
        description="Predicted final value of each run's judged series (its eval metric, else the "
        "training loss), with its interval, and the probability that each ends best.",
    )
    add_cluster_args(p)
    add_namespace_arg(p)
    p.add_argument(
        "refs",
        nargs="+",
        metavar="NAME",
        help="two or more runs: NAME or NS/NAME of TrainJobForecasts, or run log files / folders",
    )
    p.add_argument(
        "--total-steps",
        type=int,
        default=None,
        help="with log files: the planned total of runs whose log does not say it (a log that "
        "states its total, such as a trainer_state.json's max_steps, keeps its own)",
    )
    p.add_argument(
        "--metric",
        metavar="NAME",
        help="series to rank by: loss (training loss) or an eval metric such as eval_loss "
        "(default: the eval metric the runs are judged by when every run reports it, else loss, "
        "said in a note; a metric no run reports is an error). BEST CHECKPOINT is that "
        "metric's best evaluation (step: value), which a run gives when it beats its final value; "
        "ranked by loss there is none (a run's last weights are what its training loss describes)",
    )
    p.add_argument("--draws", type=int, default=20000, help="Monte-Carlo draws (default 20000)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    # the other commands print JSON with --json: the same flag here, so that neither form fails
    p.add_argument("--json", dest="output", action="store_const", const="json", help="same as -o json")
    p.set_defaults(func=run)


def prob_best(
    intervals: Sequence[tuple[float, float, float]],
    *,
    draws: int = 20000,
    seed: int = 0,
    higher: bool = False,
    kept: Sequence[float | None] | None = None,
    kept_noise: Sequence[float] | None = None,
) -> list[float]:
    """P(run i ends best) for intervals (mean, p10, p90), split-normal read: the lowest final
    value, or the highest with ``higher`` (an accuracy). ``kept``: per run, the value of a
    checkpoint it already holds (its best one), which bounds its outcome whatever its final
    value; ``kept_noise``: that value's sd, drawn with it, so that two bests closer than their
    evaluations scatter share the odds (a 0.4% gap between two single noisy evaluations read
    P(BEST) 100% / 0%).

    ``compare`` passes as ``kept`` what the best checkpoint is expected to score on fresh data,
    the trend of its series at its step, not the value it measured (``compare_status.kept_draw``),
    and as ``kept_noise`` one evaluation's scatter and the trend's sd together. Why: the best
    checkpoint was kept because its evaluation was the best, the luckiest of its series, and the
    noisier the series the luckier; drawn about its measured value, of two runs on one eval curve,
    one scattering by 0.005 and one by 0.03, the noisier won P(BEST) in every replica (88% on
    average), though its checkpoint is no better, and often worse (chosen off the curve's
    bottom). The table's BEST CHECKPOINT still shows the measured value, as the run's logs do.

    A kept value is drawn with the same normal deviate as its run's final value: both are read
    off one series, and drawn apart, the better of two draws gave a run a second chance that grew
    with its scatter."""
    import numpy as np

    if not intervals:
        return []
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, len(intervals)))
    means = np.array([m for m, _, _ in intervals])
    lo = np.array([(m - p10) / _Z90 for m, p10, _ in intervals]).clip(min=0.0)
    hi = np.array([(p90 - m) / _Z90 for m, _, p90 in intervals]).clip(min=0.0)
    samples = means + np.where(z < 0, z * lo, z * hi)
    if kept is not None:
        floor = np.array([np.nan if k is None else float(k) for k in kept])
        has = np.isfinite(floor)
        if has.any():
            floors = np.broadcast_to(floor, samples.shape)
            sd = np.zeros(len(intervals)) if kept_noise is None else np.array(kept_noise, dtype=float)
            if (sd[has] > 0).any():
                floors = floor + sd.clip(min=0.0) * z
            bound = np.maximum if higher else np.minimum
            samples[:, has] = bound(samples[:, has], floors[:, has])
    # runs that tie in a draw share it: a value already kept binds every draw where the run's
    # final value would be worse, so two runs whose best checkpoints are equal (an accuracy on a
    # fixed eval set) tie in most draws, and the first-named won them all (93% / 7%, and 89% /
    # 11% with the arguments swapped; two copies of one log 100% / 0%)
    best = samples.max(axis=1, keepdims=True) if higher else samples.min(axis=1, keepdims=True)
    winners = samples == best
    shares = winners / winners.sum(axis=1, keepdims=True)
    return [float(c) / draws for c in shares.sum(axis=0)]


def _ended(status: Mapping[str, Any]) -> bool:
    """Whether a run is at its end: a log that reaches its last step, a finished job."""
    return bool(status.get(ENDED)) or status.get("state") == "finished"


def _ending(status: Mapping[str, Any]) -> str | None:
    """How a run stands for ranking: its STATE, or, for a live job whose STATE is a lifecycle phase
    (finished, suspended, ...), the learning state it was last judged in: a TrainJobForecast of a
    run that ended overfitting or diverging reads ``finished`` (one released for it
    ``suspended``), where a log of the same run reads ``overfitting`` / ``diverging``."""
    state = status.get("state")
    if state in ("overfitting", "diverging"):
        return str(state)
    label = (status.get("learningState") or {}).get("label")
    if state not in (None, "learning", "plateaued", "hung") and label in ("overfitting", "diverging"):
        return str(label)
    return state if isinstance(state, str) else None


def _kept(drawn: tuple[float, float] | None) -> float | None:
    """The value a run's best checkpoint is ranked by (``kept_draw``'s centre), None: none."""
    return None if drawn is None else drawn[0]


def _close_call(result: Sequence[Mapping[str, Any]], broken: set[str]) -> str | None:
    """A note when the two runs ranked first give values within 1% of each other (the band a
    plateau is judged by) and one of them gives a best checkpoint: what it gives is read off its
    run's trend (``compare_status.kept_draw``), which a few evaluations hold loosely, so 98% / 2%
    on a gap of 0.005 said more than the evaluations can (a trial's sweep, whose evaluations
    scattered by 0.003)."""
    ranked = [r for r in result if r["run"] not in broken and r["gives"] is not None]
    if len(ranked) < 2:
        return None
    first = float(ranked[0]["gives"])
    # every run within 1% of the first, not the second alone (three tied runs named two)
    top = [
        r for r in ranked if abs(float(r["gives"]) - first) < 0.01 * max(abs(first), abs(float(r["gives"])))
    ]
    if len(top) < 2 or all(r["bestValue"] is None for r in top):
        return None
    # best value first, in the metric's direction ("give 0.7936, 0.7885 and 0.7936" read unsorted)
    top.sort(key=lambda r: -float(r["gives"]) if r["higherIsBetter"] else float(r["gives"]))
    names = ", ".join(r["run"] for r in top[:-1]) + f" and {top[-1]['run']}"
    values = ", ".join(f"{float(r['gives']):.4g}" for r in top[:-1]) + f" and {float(top[-1]['gives']):.4g}"
    return (
        f"close: {names} give {values}, within 1%: a best "
        "checkpoint's value is read off its run's trend and drawn with the scatter of its run's "
        "evaluations; evaluate them on a larger set before choosing"
    )


def _rank_key(row: Mapping[str, Any], broken: set[str]) -> tuple[int, float, float, str]:
    """Most likely best first, as the table shows the probability (to the percent: runs shown at
    0% each are as likely), then by the value it gives in the metric's direction; runs with no
    forecast, then unranked ones (diverging, or overfitting under the training loss), last."""
    final = row["final"]
    if row["run"] in broken:
        return (2, 0.0, 0.0, row["run"])
    if final is None:
        return (1, 0.0, 0.0, row["run"])
    value = float(row["gives"])
    shown = round(float(row["probabilityBest"] or 0.0), 2)
    return (0, -shown, -value if row["higherIsBetter"] else value, row["run"])


def run(args: argparse.Namespace) -> int:
    from advisor.controller.cliutil import cluster_api, forecast_status, parse_ref, print_table

    # one folder, or one file that holds several runs (a W&B panel export), may hold two runs
    if len(args.refs) < 2 and not (len(args.refs) == 1 and Path(args.refs[0]).exists()):
        raise CommandError("compare needs at least two runs")
    if args.draws < 100:
        raise CommandError("--draws must be at least 100")
    found: list[tuple[str, Mapping[str, Any], tuple[float, float, float] | None]] = []
    files = log_files(args.refs)
    _same_run_twice(args.refs, args if files is None else None)
    skipped: list[str] = []
    if files is not None:
        for path, name, in_folder in files:
            try:
                logged = file_status(path, args.total_steps)
            except CommandError as exc:
                if not in_folder:
                    raise
                # a folder's notes or summary table is no run: named, not fatal
                skipped.append(f"{name} ({str(exc).removeprefix(f'{path}: ')})")
                continue
            found.append((str(path), logged, interval_of(logged)))
    else:
        refs = [parse_ref(r, args) for r in args.refs]
        try:
            api = cluster_api(args)
        except CommandError as exc:
            # names that are no file here are read as TrainJobs: a mistyped file name read
            # "cannot connect to the cluster", which said nothing of the files
            raise CommandError(f"{', '.join(args.refs)}: no such file; as TrainJobs: {exc}") from None
        for ns, name in refs:
            status = forecast_status(api, ns, name)
            found.append((f"{ns}/{name}", status, interval_of(status)))
    if len(found) < 2:
        extra = f" (skipped: {'; '.join(skipped)})" if skipped else ""
        raise CommandError(f"compare needs at least two runs{extra}")
    for note in skipped:
        print(f"skipped {note}", file=sys.stderr)
    statuses = [st for _, st, _ in found]
    metric, fallback = chosen_metric(statuses, args.metric)
    higher = higher_is_better(statuses, metric)
    ranked = [(ref, st, interval_of(st, metric)) for ref, st, _ in found]
    # a run judged diverging (its loss blew up or went NaN) will not end best, whatever its
    # forecast from the points before says: it is listed last, outside the draw, unless it keeps a
    # checkpoint of the metric ranked by from before it diverged: that checkpoint is a model the
    # user can keep, and it is ranked by that value alone (a diverged run's best checkpoint beat a
    # finished run's final value and went unranked)
    broken: set[str] = set()
    # ranked by the training loss, an overfitting run is read as a diverging one with no checkpoint
    # is: the series ranked by no longer says how good its model is (its training loss ends lowest,
    # its model is the worst: it came first at P(BEST) 100%), and the training loss keeps no
    # checkpoint from before it overfit. Not ranked by the eval metric over the runs that report
    # it instead: a run that reports none (a custom log) would drop out of the draw unseen, and
    # P(BEST) would no longer be of the runs named
    overfit_out: set[str] = set()
    by_checkpoint: set[str] = set()
    at_end: set[str] = set()
    stale: set[str] = set()  # of at_end: runs that stopped evaluating the metric, not ended
    usable: list[tuple[str, tuple[float, float, float], float | None]] = []
    # each best checkpoint as it is expected to score on fresh data (the trend at its step), not
    # as measured: its evaluation is the luckiest of its run's (``kept_draw``)
    draws = {ref: kept_draw(st, metric, higher) for ref, st, _ in ranked}
    for ref, st, iv in ranked:
        drawn = draws[ref]
        kept = None if drawn is None else drawn[0]
        if metric == "loss" and _ending(st) == "overfitting":
            overfit_out.add(ref)
            continue
        if _ending(st) == "diverging":
            if kept is None:
                broken.add(ref)
                continue
            by_checkpoint.add(ref)
        elif kept is not None and (_ended(st) or stale_metric(st, metric)):
            # a run at its end gives its best checkpoint: its last one, which FINAL describes, was
            # one of the evaluations that best was chosen from (the better of the two, each drawn
            # with its scatter, gave the noisier of two runs on one curve a second chance). So does
            # a run that stopped evaluating the metric long ago: its FINAL is a forecast from the
            # evaluations it left behind (a platform trial's run came first on one from step 4,100
            # of 24,000, the same curve as a run forecast to end far worse)
            at_end.add(ref)
            if not _ended(st):
                stale.add(ref)
        if drawn is not None and (ref in by_checkpoint or ref in at_end):
            # its outcome is that checkpoint alone, drawn as it is expected to score
            usable.append((ref, (drawn[0], drawn[0] - _Z90 * drawn[1], drawn[0] + _Z90 * drawn[1]), None))
        elif iv is not None:
            usable.append((ref, iv, kept))
    probs = dict(
        zip(
            [r for r, _, _ in usable],
            prob_best(
                [iv for _, iv, _ in usable],
                draws=args.draws,
                higher=higher,
                kept=[k for _, _, k in usable],
                kept_noise=[(draws[r] or (0.0, 0.0))[1] for r, _, _ in usable],
            ),
            strict=True,
        )
    )
    result: list[dict[str, Any]] = [
        {
            "run": ref,
            "metric": metric,
            "higherIsBetter": higher,
            "final": None if iv is None else {"mean": iv[0], "p10": iv[1], "p90": iv[2]},
            "finalLoss": None if train is None else {"mean": train[0], "p10": train[1], "p90": train[2]},
            "probabilityBest": probs.get(ref),
            "bestStep": best_of(st, metric)[0],
            "bestMadeAfter": best_made_after(st, metric),
            "bestValue": kept_value(st, metric),
            # what the best checkpoint is expected to score on fresh data: GIVES and P(BEST) read
            # it (None: no trend known, the measured value is read)
            "bestTrend": None if kept_trend(st, metric) is None else _kept(draws[ref]),
            "progress": (st.get("summary") or {}).get("progress"),
            "state": st.get("state"),
            "ended": st.get(ENDED),
            "improvingAtEnd": bool(st.get(IMPROVING)),
            "notes": run_notes(st, files is not None),
            # why the run is outside the draw (its probabilityBest None): diverging with no
            # checkpoint kept, or overfitting under the training loss; None: ranked
            "notRanked": "diverging" if ref in broken else "overfitting" if ref in overfit_out else None,
            # what the run is ranked by: the better of its final value and its best checkpoint;
            # a diverging run's best checkpoint alone (its final value is where it would end if
            # it recovered: GIVES read 1.019 beside a best checkpoint of 1.072, ranked last); a best
            # checkpoint by its trend, as P(BEST) draws it
            "gives": _kept(draws[ref])
            if ref in by_checkpoint or ref in at_end
            else _gives(iv, _kept(draws[ref]), higher),
        }
        for (ref, st, iv), (_, _, train) in zip(ranked, found, strict=True)
    ]
    unranked = broken | overfit_out
    result.sort(key=lambda r: _rank_key(r, unranked))
    if args.output == "json":
        print(json.dumps(result, indent=2))
        return 0
    # ranked by the training loss, no run has a best checkpoint: no column of dashes
    checkpoints = metric != "loss"
    rows = [
        [
            r["run"],
            "-" if r["final"] is None else f"{r['final']['mean']:.4g}",
            "-" if r["final"] is None else f"[{r['final']['p10']:.4g}, {r['final']['p90']:.4g}]",
            "-" if r["probabilityBest"] is None else f"{r['probabilityBest']:.0%}",
            *([best_cell(r), "-" if r["gives"] is None else f"{r['gives']:.4g}"] if checkpoints else []),
            r["progress"],
            state_cell(r),
        ]
        for r in result
    ]
    final = "FINAL LOSS" if metric == "loss" else f"FINAL {metric.upper()}"
    # GIVES: the value a run is ranked by, so that a P(BEST) of 100% beside the worst FINAL reads
    best = ("BEST CHECKPOINT", "GIVES") if checkpoints else ()
    print_table(("RUN", final, "80% INTERVAL", "P(BEST)", *best, "PROGRESS", "STATE"), rows)
    ranked_by = f"ranked by {metric} ({'higher' if higher else 'lower'} is better)"
    if fallback is not None:
        ranked_by += f": {fallback}"
    print(ranked_by)
    if not checkpoints and any(
        (st.get("learningState") or {}).get("bestStep") is not None for st in statuses
    ):
        print("no best checkpoint: the training loss keeps none (a run's last weights are what it describes)")
    if any(r["bestValue"] is not None for r in result):
        print(
            "a run gives its best checkpoint where it beats the run's final value (keep that checkpoint): "
            "GIVES is the value P(BEST) draws the run around (a best checkpoint's: its run's trend at its "
            "step; the value it measured is its luckiest evaluation), and the rows run from the likeliest "
            "best down (a run with a wider interval can be likelier best than one that gives better)"
        )
    close = _close_call(result, unranked)
    if close is not None:
        print(close)
    mixed = mixed_scales(result) if higher else None
    if mixed is not None:
        print(mixed)
    if overfit_out:
        # ranked by the training loss, an overfitting run ends with the lowest of it and a poor
        # model: why its P(BEST) is blank, and how to rank it
        print(
            f"not ranked, overfitting: {', '.join(r['run'] for r in result if r['run'] in overfit_out)}: "
            "ranked by the training loss, an overfitting run ends low with a poor model "
            "(rank by its eval metric: --metric eval_loss or the one it is judged by)"
        )
    if by_checkpoint:
        print(
            "diverging, ranked by the best checkpoint kept before it diverged (its final value is no "
            f"model to keep): {', '.join(r['run'] for r in result if r['run'] in by_checkpoint)}"
        )
    if broken:
        print(f"not ranked, diverging: {', '.join(r['run'] for r in result if r['run'] in broken)}")
    if stale:
        print(
            f"stopped evaluating {metric} long before its last step, ranked by its best checkpoint "
            f"alone (its FINAL is forecast from the evaluations it left behind): "
            f"{', '.join(r['run'] for r in result if r['run'] in stale)}"
        )
    if any(r["improvingAtEnd"] for r in result):
        print(f"finished, improving: a run {IMPROVING_AT_END}")
    missing = [r["run"] for r in result if r["final"] is None]
    if missing:
        print(f"no forecast of {metric} for: {', '.join(missing)} (not reported yet, or never)")
    from advisor.forecast.core import NO_TREND_POINTS

    few = [
        f"{ref} ({n} point{'s' if n != 1 else ''})"
        for ref, st, _ in found
        if (n := points_of(st, metric)) is not None
        and n < NO_TREND_POINTS
        and interval_of(st, metric) is not None
    ]
    if few:  # a forecast on one or two points is the current level with a wide interval
        print(
            f"too few points to hold a trend for: {', '.join(few)}: its FINAL is where it stands now, "
            "and its P(BEST) says little yet"
        )
    lr_unknown_runs = [ref for ref, st, _ in found if lr_unknown(st)]
    if lr_unknown_runs:  # forecast's warning, once for all the runs it applies to
        whose = "every run" if len(lr_unknown_runs) == len(found) else ", ".join(lr_unknown_runs)
        print(
            f"learning rates unknown for {whose}: FINAL and its interval assume the LR anneals by the "
            "total steps; with a constant LR the end is elsewhere (forecast FILE says where; pass the "
            "learning rates to decide)"
        )
    if files is not None:
        open_ended = [(ref, final_at(st)) for ref, st, _ in found if TOTAL in st and st[TOTAL] is None]
        for where in ("where the learning rate's decay ends", "the asymptote"):
            # as forecast says it, once for all the runs it applies to (the table said "asymptote"
            # where forecast read the same runs to their learning rate's decay)
            named = [ref for ref, at in open_ended if at == where]
            if named:
                whose = "for each run" if len(named) == len(found) else f"for {', '.join(named)}"
                hint = "pass --total-steps N, the planned total"
                print(f"FINAL is {where} {whose}: no total steps in the log ({hint})")
    return 0


def _same_run_twice(refs: Sequence[str], cluster: argparse.Namespace | None) -> None:
    """A run named twice is a mistake, not a comparison: said, rather than 'needs two runs'."""
    from advisor.controller.cliutil import parse_ref

    seen: set[object] = set()
    for ref in refs:
        key: object = Path(ref).resolve() if cluster is None else parse_ref(ref, cluster)
        if cluster is None and Path(ref).is_dir():
            continue  # a folder and a file in it: the folder's copy is dropped (find_run_logs)
        if key in seen:
            raise CommandError(f"the same run given twice: {ref}")
        seen.add(key)


def _gives(final: tuple[float, float, float] | None, kept: float | None, higher: bool) -> float | None:
    """The value a run gives, that it is ranked by: the better of its forecast final value and
    its best checkpoint (None: neither known)."""
    values = [v for v in ((final[0] if final is not None else None), kept) if v is not None]
    if not values:
        return None
    return max(values) if higher else min(values)
