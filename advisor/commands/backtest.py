"""``trainjob-advisor backtest RUN...``: what each policy would have done to real runs.

Replays finished runs (HF ``trainer_state.json``, CSV/TSV, JSONL, one run per ``curve_id`` of a
multi-run dump; files or folders) as they happened through the controller's path
(``advisor.backtest.replay``), under every AdvisorPolicy file given (default: the samples) and
beside the baselines a platform has without the advisor (``advisor.backtest.baselines``), and
judges every stop on what the run did afterwards (``advisor.backtest.verdict``). Prints one row per
policy and baseline; ``--json`` writes them with every decision, ``--report`` a Markdown report with
a timeline of each stopped run, worst calls first.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from advisor.cli import CommandError, duration, label_durations, require_extra
from advisor.commands.json_output import (
    JsonTarget,
    add_json_arguments,
    check_outputs,
    emit_json,
    human_stream,
    json_target,
)
from advisor.commands.sample_policies import one_sweep_policy, samples_dir

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "backtest",
        help="replay real runs under every policy and baseline; what each would have stopped, saved, cost",
        description="Back-test AdvisorPolicies on real training runs: each run's logged progress is "
        "replayed as it happened through the controller's path (trainerStatus objects, the same "
        "parsers, core loop, forecaster and policies), beside baselines (no advisor, HF-style "
        "patience on the eval metric, median stopping within a group, a fixed budget). Every stop is "
        "judged on what the run did afterwards.",
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run files or folders of runs")
    p.add_argument(
        "--policy",
        type=Path,
        action="append",
        default=None,
        help="AdvisorPolicy YAML file (repeatable; default: manifests/samples/policy-*.yaml)",
    )
    p.add_argument(
        "--baselines",
        default="no-advisor,patience,median-stopping,fixed-budget",
        help="comma-separated baselines (no-advisor always runs: it is what savings are measured from)",
    )
    p.add_argument("--gpus", type=int, default=None, help="GPUs per run when no index CSV gives them (1)")
    p.add_argument(
        "--index",
        type=Path,
        default=None,
        help="index CSV: a run column (curve_id, run, name or file), gpus, group, labels (k=v;k2=v2, as "
        "a policy's selector reads a job's labels). An index.csv or runs.csv in a run's folder or a "
        "folder above it (up to the folder given) is read automatically too: this one wins for the "
        "runs it lists, and the one found gives the rest theirs; each index used is named on stderr. "
        "A run is matched by "
        "its curve_id, its path relative to the index's folder (e.g. lr1e-3/trainer_state.json; "
        "../runs/lr1e-3 from an index elsewhere), its folder, relative to the index's too, when it is "
        "alone in it (lr1e-3, also given itself; sweep/lr1e-3 for an index a folder above), its name, "
        "or its file name when no other run has it; "
        "an index row that matches no run, and a run without a row, are warned of on stderr",
    )
    p.add_argument(
        "--group-pattern",
        default=None,
        help="regex whose first match on a run's name is its group (a sweep) for median stopping",
    )
    p.add_argument(
        "--steps-per-second",
        type=float,
        default=1.0,
        help="throughput of runs whose logs carry no times and state no pace (default 1 step/s; stated "
        "in the output); a finished HF trainer_state.json states its own (train_steps_per_second)",
    )
    p.add_argument(
        "--report-interval",
        type=duration,
        default=60.0,
        help="least time between two progress reports the controller sees (default 1m; the Kubeflow "
        "SDK throttles to 5s)",
    )
    p.add_argument(
        "--forecast-interval",
        type=duration,
        default=60.0,
        help="re-forecast a run at most this often (default 1m; the controller's default is 30s)",
    )
    p.add_argument(
        "--run-fraction",
        type=float,
        default=0.02,
        help="a quiet run with known planned steps is re-forecast every this share of its expected "
        "run when that is longer than the forecast interval (default 0.02; 0: off)",
    )
    p.add_argument(
        "--patience", type=int, default=3, help="patience baseline: evaluations without improvement"
    )
    p.add_argument(
        "--fixed-budget", type=float, default=0.75, help="fixed-budget baseline: share of steps kept"
    )
    p.add_argument(
        "--sweep",
        action="append",
        default=None,
        metavar="FIELD=V1,V2,...",
        help="tune one --policy file over these runs: every combination of these settings "
        "(repeatable; e.g. 'plateau.probability=0.7,0.8,0.9'), the Pareto frontier of savings "
        "against wrong stops, and the best within --max-wrong",
    )
    p.add_argument("--max-wrong", default=None, help="with --sweep: the wrong-stop budget (default 1%%)")
    p.add_argument("--workers", type=int, default=None, help="with --sweep: processes (default: every core)")
    p.add_argument("--ray", default=None, metavar="ADDRESS", help="with --sweep: run on this Ray cluster")
    p.add_argument("--skip-bad-runs", action="store_true", help="skip unreadable runs and count them")
    add_json_arguments(p, "one object per policy and baseline, with every decision,")
    p.add_argument(
        "--report",
        type=Path,
        help="write a Markdown report with a timeline per stopped run (with --sweep: the frontier "
        "table and its plot)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    label_durations(p)
    p.set_defaults(func=run)


def _rows(args: argparse.Namespace) -> tuple[list[str], list[tuple[str, list[Any]]]]:
    from advisor.backtest.baselines import BASELINES

    wanted = [b.strip() for b in args.baselines.split(",") if b.strip()]
    unknown = sorted(set(wanted) - set(BASELINES))
    if unknown:
        raise CommandError(
            f"--baselines: unknown baseline(s) {', '.join(unknown)} (known: {', '.join(BASELINES)})"
        )
    baselines = ["no-advisor", *[b for b in BASELINES if b in wanted and b != "no-advisor"]]
    from advisor.policy_rows import policy_row_name
    from policies import PolicyError, load_policies

    paths = args.policy if args.policy is not None else sorted(samples_dir().glob("policy-*.yaml"))
    rows: list[tuple[str, list[Any]]] = []
    for path in paths:
        if path.is_dir():
            raise CommandError(f"{path}: is a directory, not a policy file")
        if not path.is_file():
            raise CommandError(f"{path}: no such policy file")
        try:
            policies = load_policies(path)
        except PolicyError as exc:
            raise CommandError(f"{path}: " + str(exc).replace("\n", "; ")) from None
        if not policies:
            raise CommandError(f"{path}: no AdvisorPolicy found (as `policy validate` says)")
        rows.append((policy_row_name(policies[0].name, path, {name for name, _p in rows}), policies))
    return baselines, rows


def _check(args: argparse.Namespace) -> None:
    for path in args.runs:
        if path.suffix.lower() in (".yaml", ".yml") and path.is_file():
            # a shell glob after --policy hands only its first file to --policy, the rest here
            raise CommandError(
                f"{path}: a YAML file among the runs (a policy?); give each policy file with its own "
                "--policy (a shell glob after --policy passes only its first file to it)"
            )
    if args.gpus is not None and args.gpus < 1:
        raise CommandError(f"--gpus must be at least 1, got {args.gpus}")
    if not (math.isfinite(args.steps_per_second) and args.steps_per_second > 0):
        raise CommandError(f"--steps-per-second must be positive, got {args.steps_per_second:g}")
    if args.patience < 1:
        raise CommandError(f"--patience must be at least 1, got {args.patience}")
    if not 0 < args.fixed_budget < 1:
        raise CommandError(f"--fixed-budget must be between 0 and 1, got {args.fixed_budget:g}")
    if not 0 <= args.run_fraction < 1:
        raise CommandError(f"--run-fraction must be in [0, 1), got {args.run_fraction:g}")
    if args.forecast_interval <= 0:
        raise CommandError("--forecast-interval must be a positive duration")
    if args.group_pattern is not None:
        import re

        try:
            re.compile(args.group_pattern)
        except re.error as exc:
            raise CommandError(f"--group-pattern: not a regular expression: {exc}") from None


def _load(args: argparse.Namespace) -> Any:
    """The runs the arguments name (``advisor.backtest.runs.LoadedRuns``), the bad ones skipped (a
    bad run is one error line) and the index's misses, each said on stderr."""
    from advisor.backtest.runs import BadRunError, RunError, read_runs
    from advisor.sources.runindex import index_notes, mismatch_warnings

    try:
        loaded = read_runs(
            args.runs,
            gpus=args.gpus,
            steps_per_second=args.steps_per_second,
            group_pattern=args.group_pattern,
            index=args.index,
            skip_bad=args.skip_bad_runs,
        )
    except RunError as exc:
        # only a bad run can be skipped: an empty folder or a bad index fails either way
        skippable = isinstance(exc, BadRunError) and not args.skip_bad_runs
        hint = " (use --skip-bad-runs to skip such runs)" if skippable else ""
        raise CommandError(f"{exc}{hint}") from None
    # which runs were skipped and why, where the count is read (not only in --json / --report)
    for line in loaded.skipped:
        print(f"skipped {line}", file=sys.stderr)
    for line in loaded.not_logs:  # as compare says it of a folder's notes or results
        print(f"skipped {line}", file=sys.stderr)
    # an index found beside the runs is applied unasked: which one, said where the misses are
    for line in index_notes(loaded.indexes):
        print(line, file=sys.stderr)
    # an index row that names no run, or a run without one, silently changes GPUs, group and
    # labels: said, not fatal (an index may list more runs than are back-tested)
    for line in mismatch_warnings(loaded.unmatched_rows, loaded.without_row):
        print(f"warning: {line}", file=sys.stderr)
    return loaded


def backtest(
    args: argparse.Namespace, *, progress: bool
) -> tuple[list[dict[str, Any]], dict[str, Any], list[Any]]:
    """The rows (``row_summary`` objects, baselines first), the run's meta data and the runs."""
    from advisor.sources.runindex import index_notes

    _check(args)
    _rows(args)  # a bad policy or baseline fails before any run is read
    loaded = _load(args)
    rows, meta = evaluate_rows(loaded.runs, args, progress=progress)
    meta["skipped_runs"] = len(loaded.skipped)
    meta["skipped"] = loaded.skipped[:20]
    meta["index_files"] = index_notes(loaded.indexes)
    meta["index_rows_unmatched"] = len(loaded.unmatched_rows)
    meta["index_rows_unmatched_keys"] = [f"{u.index}: {u.key}" for u in loaded.unmatched_rows[:20]]
    meta["runs_without_index_row"] = len(loaded.without_row)
    meta["runs_without_index_row_names"] = [w.run for w in loaded.without_row[:20]]
    return rows, meta, loaded.runs


def evaluate_rows(
    runs: list[Any], args: argparse.Namespace, *, progress: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every baseline and policy row over ``runs`` (``advisor.backtest.runs.Run``), and the meta data."""
    from tqdm import tqdm

    from advisor.backtest.baselines import BaselineSettings, baseline_outcomes
    from advisor.backtest.coverage import runs_too_short, unreported_metrics
    from advisor.backtest.replay import new_core, replay
    from advisor.backtest.runs import NO_GROUP_SUFFIX
    from advisor.backtest.verdict import judged, row_summary, verdict

    baselines, policy_rows = _rows(args)
    groups: dict[str, list[Any]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)
    truth = [judged(r) for r in runs]
    settings = BaselineSettings(patience=args.patience, fixed_fraction=args.fixed_budget)
    rows: list[dict[str, Any]] = []
    bar = tqdm(
        total=len(runs) * (len(baselines) + len(policy_rows)),
        unit="replay",  # a run under one row: runs x rows in all
        file=sys.stderr,
        disable=not progress,
    )
    try:
        for name in baselines:
            bar.set_description(f"{name:<26}")
            decisions = []
            for r, t in zip(runs, truth, strict=True):
                decisions.append(verdict(r, t, baseline_outcomes(name, r, groups[r.group], settings)))
                bar.update(1)
            rows.append(row_summary(name, decisions))
        for name, policies in policy_rows:
            bar.set_description(f"{name:<26}")
            core = new_core(policies, args.forecast_interval, args.run_fraction)
            decisions = []
            for r, t in zip(runs, truth, strict=True):
                out = replay(
                    name, core, r, report_interval_s=args.report_interval, planned_steps=r.planned_steps
                )
                decisions.append(verdict(r, t, out))
                bar.update(1)
            row = row_summary(name, decisions)
            row["forecasts"] = core.forecasts_made
            rows.append(row)
    finally:
        bar.close()
    meta: dict[str, Any] = {
        "runs": len(runs),
        "groups": sum(1 for g in groups if not g.endswith(NO_GROUP_SUFFIX)),
        # runs whose index row leaves the group empty: in no group, no median stopping's peers
        "ungrouped": sum(1 for r in runs if r.group.endswith(NO_GROUP_SUFFIX)),
        "runs_with_eval_series": sum(1 for r in runs if r.eval_steps is not None),
        # replayed at the assumed pace: neither times nor a pace their summary states (those are
        # counted next, apart)
        "runs_without_times": sum(1 for r in runs if not r.timed),
        # logs without per-report times whose trainer's closing summary states the run's pace
        "runs_paced_by_their_summary": sum(1 for r in runs if r.stated_pace),
        # a log that ends before the steps it planned (a checkpoint's copy of trainer_state.json, a
        # run stopped early): what it would have done after its last point is unknown, and it is
        # judged on what it logged
        "runs_ending_before_planned": sum(
            1 for r in runs if r.planned_steps is not None and r.steps[-1] < 0.99 * r.planned_steps
        ),
        # runs over before the shortest minRuntime of the policies given: no policy judges them
        # (a per-epoch log replayed untimed at 1 step/s lasts seconds)
        "runs_shorter_than_min_runtime": runs_too_short(runs, policy_rows),
        # per row, the metrics its rules name that no run reports: those rules judge nothing here
        "unreported_metrics": unreported_metrics(runs, policy_rows),
        "steps_per_second_without_times": args.steps_per_second,
        "report_interval_s": args.report_interval,
        "forecast_interval_s": args.forecast_interval,
        "run_fraction": args.run_fraction,
        "gpus_default": args.gpus or 1,
    }
    return rows, meta


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 6)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def sweep_task(task: tuple[argparse.Namespace, list[Any], Any]) -> dict[str, Any]:
    """One setting over every run (in a worker process): its row without the decisions."""
    from advisor.backtest.replay import new_core, replay
    from advisor.backtest.verdict import judged, row_summary, verdict
    from advisor.sweep import policies_with

    args, runs, setting = task
    core = new_core(policies_with(args.policy[0], setting), args.forecast_interval, args.run_fraction)
    decisions = [
        verdict(
            r,
            judged(r),
            replay("sweep", core, r, report_interval_s=args.report_interval, planned_steps=r.planned_steps),
        )
        for r in runs
    ]
    row = row_summary(setting.label, decisions)
    row.pop("decisions")
    return row


def _run_sweep(args: argparse.Namespace, json_out: JsonTarget) -> int:
    from advisor.backtest.coverage import reported_metrics
    from advisor.backtest.report_meta import plural
    from advisor.commands.sweep_run import checked_grid, report_sweep, run_grid

    _check(args)
    policy = one_sweep_policy(args.policy)
    settings, budget = checked_grid(args.sweep, args.max_wrong, policy, args.workers)
    runs = _load(args).runs
    rows = run_grid(
        sweep_task,
        [(args, runs, s) for s in settings],
        workers=args.workers,
        ray_address=args.ray,
        unit="setting",
        quiet=args.quiet,
    )
    points = [
        {
            "label": s.label,
            "setting": dict(s.values),
            "saved": r["nonlearning_saved_fraction"] or 0.0,
            "spread": None,
            "wrong_by_threshold": r["wrong_stops_by_threshold"],
            "wrong": r["wrong_stops_by_threshold"]["0.01"],
            # over the runs the policy judged: runs over before it could judge (smoke tests, early
            # crashes) can be no wrong stop, and counted in they diluted the rate to any budget
            "wrong_rate": r["wrong_stops_by_threshold"]["0.01"] / max(1, r["runs"] - r["never_judged"]),
            "runs": r["runs"] - r["never_judged"],
            "runs_total": r["runs"],
            "near_end": r["near_end_releases"],
            # the keys of a row's JSON too, so that one script reads rows and sweep points alike
            "wrong_stops_by_threshold": r["wrong_stops_by_threshold"],
            "near_end_releases": r["near_end_releases"],
            "gpu_hours_saved": r["gpu_hours_saved"],
        }
        for s, r in zip(settings, rows, strict=True)
    ]
    return report_sweep(
        points,
        budget,
        summary=f"{plural(len(settings), 'setting')} of {args.policy[0]} over {plural(len(runs), 'run')}: "
        "saved = non-learning GPU-hours saved against no-advisor, pooled over the runs (each replayed "
        "once: no seeds, so no min / median / max); * on the Pareto frontier (saved against "
        "wrong stops at 1%)",
        json_out=json_out,
        report=args.report,
        plot_title=f"{args.policy[0].name}, {plural(len(runs), 'run')}",
        clean=_clean,
        max_wrong=args.max_wrong,
        reported=reported_metrics(runs),
        policy=args.policy[0],
        settings=settings,
    )


def run(args: argparse.Namespace) -> int:
    require_extra("tqdm", "sim", "backtest")
    if args.report is not None:
        require_extra("matplotlib", "sim", "--report")
    json_out = json_target(args, "backtest")
    check_outputs(json_out, args.report, [*args.runs, *(args.policy or []), args.index])
    from advisor.commands.sweep_run import settle_max_wrong

    settle_max_wrong(args)  # checked, and an error without --sweep
    if args.sweep:
        return _run_sweep(args, json_out)
    progress = not args.quiet and sys.stderr.isatty()
    rows, meta, runs = backtest(args, progress=progress)
    from advisor.backtest.report import WRONG_STOP_HOURS, format_table, unjudged_line
    from advisor.backtest.report_meta import footer_line
    from advisor.policy_rows import unreported_notes

    human = human_stream(json_out)
    print(format_table(rows), file=human)
    unjudged = unjudged_line(rows)
    if unjudged:
        print(unjudged, file=human)
    for note in unreported_notes(meta["unreported_metrics"]):
        print(note, file=human)
    print(
        f"\n{footer_line(meta)}. Wrong stop: the judged series "
        "(eval if logged, else loss; running median; an eval loss judged by default, or the task's score "
        "beside it) improved later by more than 0.5/1/2%; near-end: a stop "
        "in the last 15% of the budget, in steps and in recorded time, of a run that did not get worse after "
        "it, not counted as saved (its GPU-hours in brackets); "
        f"{WRONG_STOP_HOURS}. Every policy is replayed as if in mode Apply (what it "
        "would have done), its checkpoint requests answered at the next report and free (the simulator "
        "charges a save its time); there is no cluster around a run here, so the rules that answer one "
        "(elastic sizes, the preemption guard) do nothing.",
        file=human,
    )
    emit_json([_clean({**r, "backtest": meta}) for r in rows], json_out)
    if args.report is not None:
        from advisor.backtest.report import write_report

        path = write_report(rows, runs, meta, args.report)
        print(f"report: {path}", file=human)
    return 0
