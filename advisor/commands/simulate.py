"""``trainjob-advisor simulate``: what each policy would have saved and risked, in GPU-hours.

Runs one trace (the embedded synthetic default, or Philly / ITP / Gavel / Tiresias / CSV) on one
cluster with one seed under every baseline and every AdvisorPolicy file given (by default the
project's samples, ``manifests/samples/policy-*.yaml``), with the same core loop the controller
runs, and prints the rows side by side; ``--json`` and ``--report`` write them out. Heavy imports
(numpy, the simulator, matplotlib) happen inside ``run``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from advisor.cli import (
    CommandError,
    duration,
    label_durations,
    non_negative_int,
    positive_duration,
    positive_int,
    require_extra,
)
from advisor.commands.json_output import (
    JsonTarget,
    add_json_arguments,
    check_outputs,
    human_stream,
    json_target,
)
from advisor.commands.sample_policies import samples_dir
from advisor.commands.simulate_world import add_world_arguments, curves_text, scenario_from_args

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a cluster trace under every policy and baseline; GPU-hours saved and risked",
        description="Trace-driven cluster simulation: every baseline (no-advisor, fixed-interval, patience, "
        "median-stopping) and every AdvisorPolicy file side by side on one trace and seed. "
        "With no arguments: the embedded synthetic scenario and the sample policies.",
    )
    p.add_argument("--trace", type=Path, help="trace file (default: the embedded synthetic trace)")
    p.add_argument(
        "--trace-format", default="auto", choices=["auto", "philly", "itp", "gavel", "tiresias", "csv"]
    )
    p.add_argument("--skip-bad-rows", action="store_true", help="skip malformed trace rows and count them")
    p.add_argument("--limit", type=positive_int, help="read at most this many trace rows")
    p.add_argument("--jobs", type=positive_int, default=None, help="synthetic trace: number of jobs")
    p.add_argument("--hours", type=float, default=None, help="synthetic trace: arrival window in hours")
    p.add_argument(
        "--seed", type=non_negative_int, default=None, help="seed of the scenario (0 or more; default 0)"
    )
    p.add_argument(
        "--seeds",
        default=None,
        help="run a range of seeds (e.g. 100-129, or 0-14,20) and show the spread across them; "
        "the sample policies' settings were chosen on seeds 0-14, so report held-out seeds (100-129)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="with --seeds: processes to run seeds on (default: every core)",
    )
    p.add_argument("--cluster", type=Path, help="cluster YAML (clusterQueues, localQueues)")
    p.add_argument(
        "--policy",
        type=Path,
        action="append",
        default=None,
        help="AdvisorPolicy YAML file (repeatable; default: manifests/samples/policy-*.yaml)",
    )
    p.add_argument("--baselines-only", action="store_true", help="run only the baselines")
    p.add_argument(
        "--baselines",
        default="no-advisor,fixed-interval,patience,median-stopping",
        help="comma-separated baselines to run (no-advisor always runs first: it is what savings are vs)",
    )
    p.add_argument(
        "--fixed-interval", type=positive_duration, default=1800.0, help="fixed-interval baseline (30m)"
    )
    p.add_argument(
        "--forecast-interval",
        type=positive_duration,
        default=1200.0,
        help="re-forecast a quiet job at most this often (default 20m); a job near a plateau or "
        "divergence decision is re-forecast every 5m (or this often, if shorter). The controller "
        "re-forecasts at every progress report: 1m comes close to it, at about 3x the run time",
    )
    p.add_argument(
        "--looks-per-run",
        type=float,
        default=None,
        help="look at a quiet, long job of a plateau/divergence/stall-only policy about this many "
        "times over its run instead of every forecast interval, and not at all once its next "
        "forecast would come after its expected end (e.g. 24; off by default: several times "
        "faster on huge traces, at some cost in how early plateaus are seen)",
    )
    p.add_argument(
        "--close-interval",
        type=duration,
        default=None,
        help="with --looks-per-run: re-forecast a run whose loss is flattening (or rising) this often "
        "(default: the forecast interval; the Philly replay uses 40m with a 1h forecast interval)",
    )
    p.add_argument(
        "--reference-gpus",
        type=float,
        default=None,
        help="with --looks-per-run: space a quiet job's looks by sqrt(this / its GPUs) times the "
        "usual (a late look at a 1-GPU job burns an eighth of what it burns on an 8-GPU one; the "
        "Philly replay uses 8; default: every job alike)",
    )
    p.add_argument(
        "--tick-max",
        type=positive_duration,
        default=1800.0,
        help="longest spacing of a job's advisor ticks (default 30m; raise it for huge traces)",
    )
    add_world_arguments(p)
    p.add_argument(
        "--sweep",
        action="append",
        default=None,
        metavar="FIELD=V1,V2,...",
        help="tune one --policy file: try every combination of these settings (repeatable; e.g. "
        "'plateau.probability=0.6,0.7,0.8,0.9' 'plateau.for=5m,10m,20m') over --seeds, print the "
        "Pareto frontier of savings against wrong stops, and name the best within --max-wrong",
    )
    p.add_argument("--max-wrong", default=None, help="with --sweep: the wrong-stop budget (default 1%%)")
    p.add_argument(
        "--ray", default=None, metavar="ADDRESS", help="with --sweep: run on this Ray cluster (extra: ray)"
    )
    add_json_arguments(p, "the rows")
    p.add_argument(
        "--report",
        type=Path,
        help="write a Markdown report with plots to this directory (with --seeds: the pooled table "
        "and the spread across the seeds, without plots; with --sweep: the frontier table and its plot)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    label_durations(p)
    p.set_defaults(func=run)


def _strategies(args: argparse.Namespace) -> list[Any]:
    from simulator.baselines import baseline_strategies
    from simulator.runner import policy_strategies

    wanted = {b.strip() for b in args.baselines.split(",") if b.strip()} | {"no-advisor"}
    known = baseline_strategies(args.fixed_interval)
    unknown = sorted(wanted - {b.name for b in known})
    if unknown:
        raise CommandError(f"--baselines: unknown baseline(s) {', '.join(unknown)}")
    strategies: list[Any] = [b for b in known if b.name in wanted]
    if not args.baselines_only:
        paths = args.policy if args.policy is not None else sorted(samples_dir().glob("policy-*.yaml"))
        if args.policy is None and not paths:
            print("simulate: no sample policies found; running the baselines only", file=sys.stderr)
        for path in paths:
            if path.is_dir():
                raise CommandError(f"{path}: is a directory, not a policy file")
            if not path.is_file():
                raise CommandError(f"{path}: no such policy file")
            if not _fails(path) and not _policies_in(path):
                raise CommandError(f"{path}: no AdvisorPolicy found (as `policy validate` says)")
        if args.looks_per_run is not None and not args.looks_per_run >= 1:
            raise CommandError(f"--looks-per-run must be at least 1, got {args.looks_per_run:g}")
        if args.close_interval is not None and not args.close_interval > 0:
            raise CommandError("--close-interval must be a positive duration (e.g. 40m)")
        if args.reference_gpus is not None and not args.reference_gpus > 0:
            raise CommandError(f"--reference-gpus must be positive, got {args.reference_gpus:g}")
        if args.reference_gpus is not None and args.looks_per_run is None:
            raise CommandError("--reference-gpus spaces the looks of --looks-per-run: give both")
        from policies import PolicyError

        try:
            strategies += policy_strategies(
                paths,
                forecast_interval_s=args.forecast_interval,
                tick_max_s=args.tick_max,
                looks_per_run=args.looks_per_run,
                close_interval_s=args.close_interval,
                reference_gpus=args.reference_gpus,
            )
        except PolicyError as exc:
            bad = next((p for p in paths if _fails(p)), None)
            where = f"{bad}: " if bad is not None else ""
            raise CommandError(where + str(exc).replace("\n", "; ")) from None
    return strategies


def seed_rows(args: argparse.Namespace, seed: int) -> list[dict[str, Any]]:
    """The rows' metrics of one seed (run in a worker process by ``--seeds``); the no-advisor row
    also says the series the seed's jobs report (``reported_metrics``), which pooling drops."""
    from simulator.metrics import reported_metrics
    from simulator.runner import run_rows

    one = argparse.Namespace(**{**vars(args), "seed": seed})
    scenario = scenario_from_args(one, warn=False)  # the parent said its warnings once
    results = run_rows(scenario, _strategies(one), progress=False)
    rows = [r.metrics for r in results]
    if results:
        rows[0]["reported_metrics"] = sorted(reported_metrics(results[0].jobs))
    return rows


def unreported_rows(strategies: Sequence[Any], reported: Collection[str]) -> dict[str, list[str]]:
    """Per advisor row, the metrics its rules judge that no job reports (``advisor.policy_rows``,
    as ``backtest`` says them): such a rule judged nothing, and its row's "0 wrong stops" is no
    verdict. The baselines have no rules."""
    from advisor.policy_rows import unreported_by_row

    return unreported_by_row(reported, [(s.name, getattr(s, "policies", ())) for s in strategies])


def _run_seeds(args: argparse.Namespace, json_out: JsonTarget) -> int:
    import functools

    from tqdm import tqdm

    from simulator.report import format_table, json_text, wrapped_legend, write_json
    from simulator.seeds import SeedError, parse_seeds, pool_rows, run_seeds, spread_table

    try:
        seeds = parse_seeds(args.seeds)
    except SeedError as exc:
        raise CommandError(str(exc)) from None
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    first = argparse.Namespace(**{**vars(args), "seed": seeds[0]})
    scenario = scenario_from_args(first)  # bad input fails here, before any worker starts
    _strategies(first)
    bar = tqdm(total=len(seeds), unit="seed", file=sys.stderr, disable=args.quiet or not sys.stderr.isatty())
    try:
        by_seed = run_seeds(
            functools.partial(seed_rows, args), seeds, workers=args.workers, on_done=lambda _s: bar.update(1)
        )
    finally:
        bar.close()
    from advisor.policy_rows import unreported_notes

    pooled = pool_rows(by_seed, seeds)
    reported = {m for rows in by_seed for m in rows[0].get("reported_metrics", ())}
    unreported = unreported_rows(_strategies(first), reported)
    human = human_stream(json_out)
    print(format_table(pooled), file=human)
    print(file=human)
    print(spread_table(pooled), file=human)
    label = f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else args.seeds
    source = _per_seed(scenario.trace.source)
    footer = (
        f"{len(scenario.trace.jobs)} jobs per seed ({source}), {scenario.capacity} GPUs, "
        f"seeds {label} ({len(seeds)}): counts and GPU-hours summed over the seeds, times averaged; "
        f"curves: {curves_text(scenario)}"
    )
    # the columns' definitions, as under one seed's table: a pasted table carries what it counts
    print(f"\n{wrapped_legend(real_curves=scenario.curves_dir is not None)}", file=human)
    print(f"\n{footer}", file=human)
    for note in unreported_notes(unreported):
        print(note, file=human)
    meta = {
        "scenario": scenario.name,
        "curves": curves_text(scenario),
        "seeds": seeds,
        "capacity_gpus": scenario.capacity,
        "unreported_metrics": unreported,
    }
    if json_out == "-":
        print(json_text(pooled, meta), end="")
    elif isinstance(json_out, Path):
        write_json(pooled, json_out, meta)
    if args.report is not None:
        from simulator.seeds_report import write_seeds_report

        path = write_seeds_report(
            pooled, args.report, meta=meta, footer=footer, real_curves=scenario.curves_dir is not None
        )
        # no plots over seeds: said where the user looks (a report "with plots" came without them)
        print(
            f"report: {path} (the pooled table and the spread across the seeds; the plots of one seed's "
            "replay: simulate --seed N --report DIR)",
            file=human,
        )
    return 0


def run(args: argparse.Namespace) -> int:
    require_extra("tqdm", "sim", "the simulator")
    if args.report is not None:
        require_extra("matplotlib", "sim", "--report")
    json_out = json_target(args, "simulate")
    check_outputs(json_out, args.report, [args.trace, args.cluster, *(args.policy or [])])
    from advisor.commands.sweep_run import settle_max_wrong

    settle_max_wrong(args)  # checked, and an error without --sweep
    if args.seed is not None and args.seeds is not None:
        raise CommandError("give --seed or --seeds, not both (--seeds 7 runs seed 7 alone)")
    args.seed = 0 if args.seed is None else args.seed
    if args.baselines_only and args.policy:
        raise CommandError("--baselines-only runs no policy: drop --policy, or --baselines-only")
    if args.label_error is not None and not args.label_rate:
        raise CommandError(
            "--label-error is the share of --label-rate's labels that are wrong, and no job is "
            "labelled without --label-rate: give --label-rate too"
        )
    if args.sweep:
        from advisor.commands.simulate_sweep import run_sweep

        return run_sweep(args, json_out)
    if args.seeds is not None:
        return _run_seeds(args, json_out)
    from advisor.policy_rows import unreported_notes
    from simulator.metrics import reported_metrics
    from simulator.report import (
        format_table,
        json_text,
        reporting_text,
        wrapped_legend,
        write_json,
        write_report,
    )
    from simulator.runner import run_rows

    scenario = scenario_from_args(args)
    strategies = _strategies(args)
    trace = scenario.trace
    progress = not args.quiet and sys.stderr.isatty()
    results = run_rows(scenario, strategies, progress=progress)
    rows = [r.metrics for r in results]
    sim_h = sum(r["simulated_hours"] for r in rows)
    wall = sum(r["wall_seconds"] for r in rows)
    job_h = sum(j.duration for j in trace.jobs) / 3600.0 * len(rows)
    meta = {
        "scenario": scenario.name,
        "curves": curves_text(scenario),
        "trace": trace.source,
        "jobs": len(trace.jobs),
        "skipped_rows": trace.skipped,
        "seed": scenario.seed,
        "capacity_gpus": scenario.capacity,
        "cluster_queues": len(scenario.queues),
        "rows": len(rows),
        "wall_seconds": round(wall, 2),
        "simulated_job_hours_per_wall_second": round(job_h / wall, 1) if wall > 0 else None,
        "unreported_metrics": unreported_rows(
            strategies, {m for r in results for m in reported_metrics(r.jobs)}
        ),
    }
    # with JSON on stdout the human-readable part goes to stderr, so that stdout parses
    human = human_stream(json_out)
    print(format_table(rows), file=human)
    real_curves = scenario.curves_dir is not None
    print(f"\n{wrapped_legend(real_curves=real_curves)}", file=human)
    print(
        f"\n{len(trace.jobs)} jobs ({trace.source}; {trace.skipped} bad rows skipped), "
        f"{scenario.capacity} GPUs, "
        f"seed {scenario.seed}: {len(rows)} rows of up to {max(r['simulated_hours'] for r in rows):.0f} "
        f"simulated hours each ({sim_h:.0f} in all) in {wall:.1f}s "
        f"({meta['simulated_job_hours_per_wall_second']} simulated job-hours per wall-second); "
        f"curves: {meta['curves']}",
        file=human,
    )
    if results:
        print(f"progress reports: {reporting_text(results[0].jobs)}", file=human)
    for note in idle_scaling_notes(strategies, elastic=scenario.world.elastic):
        print(note, file=human)
    for note in unreported_notes(meta["unreported_metrics"]):
        print(note, file=human)
    if json_out == "-":
        print(json_text(rows, meta), end="")
    elif isinstance(json_out, Path):
        write_json(rows, json_out, meta)
    if args.report is not None:
        path = write_report(
            results,
            args.report,
            title="trainjob-advisor simulation",
            meta=meta,
            capacity=scenario.capacity,
            real_curves=real_curves,
        )
        print(f"report: {path}", file=human)
    return 0


def idle_scaling_notes(strategies: Sequence[Any], *, elastic: bool) -> list[str]:
    """Why a row whose policies scale jobs did none of it: no job of the scenario declares elastic
    bounds (a TrainJob declares none, and the controller never resizes it), so its scaling rules
    had nothing to act on and it may read exactly as another row."""
    if elastic:
        return []
    notes = []
    for strategy in strategies:
        scaling = [
            p.name
            for p in getattr(strategy, "policies", ())
            if (p.rules.elastic is not None and p.rules.elastic.enabled)
            or (p.rules.deadline is not None and p.rules.deadline.enabled and p.rules.deadline.scale_up)
        ]
        if scaling:
            notes.append(
                f"{strategy.name}: no job declares elastic bounds, so the scaling rules of "
                f"{', '.join(scaling)} had nothing to act on (--elastic gives jobs bounds)"
            )
    return notes


def _policies_in(path: Path) -> int:
    from policies import load_policies

    return len(load_policies(path))


def _fails(path: Path) -> bool:
    from policies import PolicyError, load_policies

    try:
        load_policies(path)
    except PolicyError:
        return True
    return False


def _per_seed(source: str) -> str:
    """The trace's source named for every seed: the first seed's own (``seed=100``) is not theirs."""
    return re.sub(r"(,\s*)?seed=\d+", "", source).replace("()", "").strip()
