"""The world flags of ``trainjob-advisor simulate`` and the scenario they describe.

Why apart from the command: these flags say what the simulated cluster is like (its trace, faults,
Kueue's gates, what jobs declare and report, how users label them), not how the rows are run or
shown, and every path of the command (one seed, a seed range, a sweep's workers) builds its
scenario here, so a setting means the same in each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from advisor.cli import CommandError, duration

__all__ = ["add_world_arguments", "curves_text", "scenario_from_args"]


def add_world_arguments(p: argparse.ArgumentParser) -> None:
    """The scenario's physics and reporting flags (each defaults to ``WorldConfig``'s value)."""
    p.add_argument(
        "--mtbf", type=duration, default=None, help="per-node mean time between failures (0: none)"
    )
    p.add_argument(
        "--job-checkpoint-interval",
        type=duration,
        default=None,
        help="the jobs' own periodic checkpoint interval (0: none; default 2h)",
    )
    p.add_argument(
        "--priority-boost",
        action="store_true",
        help="Kueue runs with the PriorityBoost gate (alpha; off by default, as in the controller)",
    )
    p.add_argument("--no-priority-boost", action="store_true", help="the gate off (the default)")
    p.add_argument(
        "--curves",
        type=Path,
        default=None,
        metavar="DIR",
        help="draw each job's curve from the real runs in DIR (HF trainer_state.json, CSV/TSV, JSONL; "
        "time-scaled to the job) instead of the synthetic library; an index.csv or runs.csv beside them "
        "gives a run its kind (labels workload-type=pretraining), which --label-rate labels its jobs with "
        "(else fine-tuning)",
    )
    p.add_argument(
        "--elastic",
        action="store_true",
        help="jobs declare elastic bounds (1 to twice their nodes) that scaling rules may use; off by "
        "default, as for a TrainJob, which the controller never resizes",
    )
    p.add_argument(
        "--runtime-from",
        choices=("creation", "admission"),
        default=None,
        help="when a policy's minRuntime starts: the job's creation (default, as the controller reads "
        "creationTimestamp) or its first admission",
    )
    p.add_argument(
        "--label-rate",
        type=float,
        default=None,
        help="share of jobs whose users label them workload-type (pretraining | fine-tuning), of those "
        "whose trace row gives no workload_type (default 0: no job is labelled)",
    )
    p.add_argument(
        "--label-error", type=float, default=None, help="share of those labels that are wrong (default 0)"
    )
    p.add_argument(
        "--reports-total-steps",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of jobs whose progress reports carry their planned steps, as Hugging Face's "
        "Kubeflow callback does (the rest send step and loss without a total; default 0.8)",
    )
    p.add_argument(
        "--reports-learning-rate",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of jobs whose progress reports carry the learning rate (default 0.8)",
    )


def scenario_from_args(args: argparse.Namespace, *, warn: bool = True) -> Any:
    """The scenario the flags describe (bad input: a ``CommandError`` naming the flag or file);
    ``warn=False`` in the workers of ``--seeds`` and ``--sweep``, which read it again per task
    after the parent has said its warnings once."""
    from simulator.quota import QuotaError
    from simulator.scenario import (
        Scenario,
        auto_cluster,
        default_scenario,
        dominated_queues,
        load_cluster,
        unadmittable_jobs,
        with_world,
    )
    from simulator.traces import TraceError, load_trace

    if args.trace is None:
        kwargs = {k: v for k, v in (("n_jobs", args.jobs), ("hours", args.hours)) if v is not None}
        if kwargs.get("n_jobs", 1) <= 0 or kwargs.get("hours", 1.0) <= 0:
            raise CommandError("--jobs and --hours must be positive")
        scenario = default_scenario(seed=args.seed, **kwargs)
    else:
        try:
            trace = load_trace(
                args.trace, args.trace_format, skip_bad_rows=args.skip_bad_rows, limit=args.limit
            )
        except TraceError as exc:
            row_error = exc.line is not None and exc.line > 1  # a header or file error is not skippable
            hint = " (use --skip-bad-rows to skip such rows)" if row_error and not args.skip_bad_rows else ""
            raise CommandError(f"{exc}{hint}") from None
        queues, qmap = auto_cluster(trace)
        scenario = Scenario(f"trace {trace.source}", trace, queues, qmap, seed=args.seed)
        if args.cluster is None and warn:
            for name, gpus, need in dominated_queues(trace, queues):
                print(
                    f"simulate: warning: {name} is sized to its largest job ({gpus} GPUs) while its jobs' "
                    f"mean demand needs {need:.0f}: utilisation, waits and savings will read low; give "
                    "--cluster FILE to size the queues",
                    file=sys.stderr,
                )
    if args.cluster is not None:
        try:
            queues, qmap = load_cluster(args.cluster)
        except QuotaError as exc:
            raise CommandError(str(exc)) from None
        missing = sorted(set(scenario.trace.queues) - set(qmap))
        if missing:
            raise CommandError(
                f"{args.cluster}: localQueues has no entry for trace queue(s) {', '.join(missing)}"
            )
        scenario.queues, scenario.queue_map = queues, qmap
    never = unadmittable_jobs(scenario.trace, scenario.queues, scenario.queue_map)
    if never and warn:
        shown = "; ".join(
            f"{name} asks {gpus}, {cq} holds at most {most}" for name, gpus, cq, most in never[:3]
        )
        more = f"; and {len(never) - 3} more" if len(never) > 3 else ""
        print(
            f"simulate: warning: {len(never)} of {len(scenario.trace.jobs)} jobs ask more GPUs than their "
            f"ClusterQueue can ever hold, borrowing included ({shown}{more}): they are never admitted "
            "and count in no row's GPU-hours, JCT or stops (JSON unfinished)",
            file=sys.stderr,
        )
    changes: dict[str, Any] = {}
    if args.mtbf is not None:
        changes["node_mtbf_h"] = args.mtbf / 3600.0
    if args.job_checkpoint_interval is not None:
        changes["job_checkpoint_interval_s"] = args.job_checkpoint_interval or None
    if args.priority_boost and args.no_priority_boost:
        raise CommandError("--priority-boost and --no-priority-boost exclude each other")
    shares = (
        ("--label-rate", args.label_rate),
        ("--label-error", args.label_error),
        ("--reports-total-steps", args.reports_total_steps),
        ("--reports-learning-rate", args.reports_learning_rate),
    )
    for flag, value in shares:
        if value is not None and not 0.0 <= value <= 1.0:
            raise CommandError(f"{flag} must be between 0 and 1, got {value:g}")
    if args.elastic:
        changes["elastic"] = True
    if args.runtime_from is not None:
        changes["runtime_from"] = args.runtime_from
    if args.label_rate is not None:
        changes["label_rate"] = args.label_rate
    if args.label_error is not None:
        changes["label_error"] = args.label_error
    if args.reports_total_steps is not None:
        changes["reports_total_steps"] = args.reports_total_steps
    if args.reports_learning_rate is not None:
        changes["reports_learning_rate"] = args.reports_learning_rate
    if args.priority_boost or args.no_priority_boost:
        changes["priority_boost_enabled"] = bool(args.priority_boost)
    if args.curves is not None:
        from simulator.runner import curve_library

        scenario.curves_dir = args.curves
        try:
            curve_library(scenario)  # read once (cached); a folder without runs fails here
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    return with_world(scenario, **changes) if changes else scenario


def curves_text(scenario: Any) -> str:
    """Which curves the jobs follow, for the output and the report."""
    from simulator.runner import curve_library

    lib = curve_library(scenario)
    text = getattr(lib, "description", None)
    return text or "the synthetic curve library (simulator/data/curve_params.yaml)"
