"""``trainjob-advisor policy``: check AdvisorPolicy files and see what they would decide.

* ``policy validate FILE...`` prints ``OK`` per file or every error with its field path; exit 1
  when any file is invalid (what an admin runs before ``kubectl apply``, and what CI runs).
* ``policy explain FILE --job-state STATE.json`` selects the policy that governs the job, as the
  controller would, and prints each rule's verdict with its numbers, then the merged decision.
* ``policy crd`` prints the CRD generated from the policy model (``manifests/crds/`` holds it).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.cli import CommandError

if TYPE_CHECKING:
    from policies.spec import Policy

__all__ = ["register", "run", "state_value"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("policy", help="validate AdvisorPolicy files, explain their decisions")
    sub = parser.add_subparsers(dest="policy_command", metavar="ACTION")
    v = sub.add_parser(
        "validate",
        help="check AdvisorPolicy YAML/JSON files (exit 1 on errors)",
        description="Check AdvisorPolicy files as the controller and the CRD would: every error with "
        "its field path, duplicate YAML keys, and policy names defined twice (in one file or across "
        "the files given). Prints OK per valid file; exit 1 when any file is invalid. A file of other "
        "kinds only (a TrainJob) is skipped beside policy files, and an error (exit 2) when no file "
        "given holds a policy.",
    )
    v.add_argument("files", nargs="+", metavar="FILE")
    e = sub.add_parser(
        "explain",
        help="what each rule of the selected policy would decide for a job",
        description="Select the policy that governs a job, as the controller would, and print each "
        "rule's verdict with its numbers, then the merged decision. The job state is a JSON snapshot "
        "of the job (and optionally the cluster): see docs/job-state.md and examples/job-state.json.",
    )
    e.add_argument("file", metavar="FILE", help="AdvisorPolicy YAML (one or several documents)")
    which = e.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--job-state",
        metavar="STATE.json",
        help="job (and cluster) snapshot ('-': standard input)",
    )
    which.add_argument(
        "--job",
        metavar="NS/NAME",
        help="a live job, read from the cluster as the controller sees it: its TrainJobForecast's "
        "history and rule memory, its latest progress, and the queues' preemption hazard",
    )
    e.add_argument(
        "--priority-boost",
        action="store_true",
        help="with --job: Kueue runs with the PriorityBoost feature gate (as the controller's flag)",
    )
    from advisor.controller.cliutil import add_cluster_args

    add_cluster_args(e)
    e.add_argument(
        "--now",
        type=float,
        default=None,
        help="evaluation time, epoch seconds (default: the state's 'now', else the current time)",
    )
    e.add_argument("--policy", default=None, help="use this policy instead of selecting one")
    e.add_argument("--json", action="store_true", help="print the decision as JSON")
    sub.add_parser("crd", help="print the AdvisorPolicy CRD generated from the policy model")
    parser.set_defaults(func=run, _policy_parser=parser)


def run(args: argparse.Namespace) -> int:
    command = getattr(args, "policy_command", None)
    if command == "validate":
        return _validate(args.files)
    if command == "explain":
        return _explain(args)
    if command == "crd":
        from policies.crd import crd_yaml

        sys.stdout.write(crd_yaml())
        return 0
    args._policy_parser.print_help()
    return 2


def _read(path: str) -> str:
    """A policy file's text; unreadable is a usage error, binary an invalid policy."""
    from policies import PolicyError
    from policies.loader import read_policy_file

    try:
        return read_policy_file(Path(path))
    except PolicyError as exc:
        raise CommandError(f"{path}: {exc.errors[0][1]}") from None
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_state(path: str) -> str:
    """The job state's text: ``-`` reads standard input (as ``forecast -`` does)."""
    if path != "-":
        return _read(path)
    try:
        return sys.stdin.buffer.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CommandError(f"standard input is not UTF-8 text: {exc.reason}") from None


def _validate(files: list[str]) -> int:
    from policies import PolicyError
    from policies.loader import policies_from_text, read_policy_file

    failed = False
    defined: dict[str, str] = {}  # policy name -> the file that defines it first
    seen: set[Path] = set()
    # files of other kinds only (a TrainJob in a folder of manifests): skipped with a note when
    # policies are validated beside them, an error when no file given holds one (as simulate says)
    held: list[tuple[str, list[str]]] = []
    for path in files:
        if Path(path).resolve() in seen:
            continue  # the same file named twice (a glob and its folder) is validated once
        seen.add(Path(path).resolve())
        try:
            text = read_policy_file(Path(path))
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        except PolicyError as exc:
            failed = True
            print(f"{path}: {exc.errors[0][1]}")
            continue
        loaded: list[Policy] = []
        try:
            others: list[str] = []
            policies = policies_from_text(text, skipped=others, loaded=loaded)
        except PolicyError as exc:
            failed = True
            for field, reason in exc.errors:
                print(f"{path}: {field}: {reason}" if field else f"{path}: {reason}")
            # the file's valid policies get their warnings too: fixed for its errors alone, it
            # read OK the next time with a misspelt metric that had been there all along
            for p in loaded:
                _warn(path, p)
            continue
        if not policies:
            # a TrainJob or a runtime beside the policies: not a policy file; an empty one is
            # an error beside policies, and like the rest when no file given holds one
            held.append((path, others))
            continue
        # AdvisorPolicy is cluster-scoped: a second file with the same name replaces the first
        clashes = [p.name for p in policies if p.name in defined]
        if clashes:
            failed = True
            for name in clashes:
                print(f"{path}: metadata.name: policy {name!r} is also defined in {defined[name]}")
            continue
        defined.update(dict.fromkeys((p.name for p in policies), path))
        failed |= _say_held(held)
        held = []
        names = ", ".join(f"{p.name} ({p.mode.value})" for p in policies)
        skipped = f" (skipped: {', '.join(others)})" if others else ""
        print(f"{path}: OK: {names}{skipped}")
        for p in policies:
            _warn(path, p)
    if held and not defined and not failed:
        path, kinds = held[0]
        rest = len(held) - 1
        more = "" if not rest else "; nor does the other file" if rest == 1 else f"; nor do the {rest} others"
        holds = f" (it holds {', '.join(kinds)})" if kinds else ""
        raise CommandError(f"{path}: no AdvisorPolicy in the file{holds}{more}")
    failed |= _say_held(held)
    return 1 if failed else 0


def _warn(path: str, p: Policy) -> None:
    """Each warning ``policy validate`` gives of a valid policy ``p`` of file ``path``."""
    from advisor.series import likely_directed_spelling
    from policies.lint import metric_notes, never_acts, risk_warnings, unit_slips
    from policies.rules.base import NO_DIRECTION, direction_warnings, undirected_metrics

    for field, why in [*never_acts(p), *unit_slips(p), *risk_warnings(p), *metric_notes(p)]:
        print(f"{path}: warning: policy {p.name}: {field}: {why}")
    for field, metric in undirected_metrics(p):
        near = difflib.get_close_matches(metric, list(p.metric_directions), n=1)
        hint = f"did you mean {near[0]} (spec.metricDirections names it)? else " if near else ""
        spelt = None if near else likely_directed_spelling(metric)
        if spelt is not None:
            # a typo of a metric the trainer reports: adding it to metricDirections, as the rest
            # of the line says, would make a rule judge a series no job reports
            hint = f"did you mean {spelt}? else "
        why = f"{metric} is never judged: {hint}{NO_DIRECTION}"
        print(f"{path}: warning: policy {p.name}: {field}: {why}")
    for field, why in direction_warnings(p):
        print(f"{path}: warning: policy {p.name}: {field}: {why}")


def _say_held(held: list[tuple[str, list[str]]]) -> bool:
    """Say of each file that held no policy what it held: objects of other kinds are skipped, an
    empty file is an error (True: one was)."""
    failed = False
    for other, kinds in held:
        if kinds:
            print(f"{other}: skipped: no AdvisorPolicy ({', '.join(kinds)})")
        else:
            failed = True
            print(f"{other}: no AdvisorPolicy found")
    return failed


def _moment(now: float) -> str:
    """The time a decision is explained at: a date (UTC) for a clock reading, as ``status`` and
    ``explain`` show times (a live job's read "t=1796624897"); a job-state file's own small clock
    (seconds from its start) as it is given."""
    if now >= 1e9:
        import datetime as dt

        return dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"t={now:.0f}"


def _explain(args: argparse.Namespace) -> int:
    from policies import PolicyError, select_policy, specificity, tie_reason, tied_with
    from policies.engine import decide, evaluate_rules, is_exempt
    from policies.jobstate import JobStateError, state_from_dict
    from policies.loader import policies_from_text

    try:
        policies = policies_from_text(_read(args.file))
    except PolicyError as exc:
        found = "; ".join(f"{where}: {what}" if where else what for where, what in exc.errors)
        more = f" ({len(exc.errors)} errors)" if len(exc.errors) > 1 else ""
        raise CommandError(f"{args.file} is not a valid AdvisorPolicy{more}: {found}") from None
    if not policies:
        # as ``validate`` says it: nothing to explain (not "no policy selects this job", exit 0)
        raise CommandError(f"{args.file}: no AdvisorPolicy found")
    if args.job is not None:
        job, cluster, now = _live(args)
    else:
        try:
            raw = json.loads(_read_state(args.job_state))
        except ValueError as exc:
            raise CommandError(f"{args.job_state} is not JSON: {exc}") from None
        try:
            job, cluster, state_now = state_from_dict(raw)
        except JobStateError as exc:
            raise CommandError(f"{args.job_state}: {exc}") from None
        now = args.now if args.now is not None else state_now if state_now is not None else time.time()
    if args.policy is not None:
        chosen = next((p for p in policies if p.name == args.policy), None)
        if chosen is None:
            raise CommandError(f"no policy named {args.policy!r} in {args.file}")
        why = "chosen with --policy"
    else:
        chosen = select_policy(policies, job)
        if chosen is None:
            print(f"{job.key}: no policy in {args.file} selects this job")
            return 0
        why = f"most specific match (specificity {specificity(chosen.selector)}, priority {chosen.priority})"
        tied = tied_with(policies, job, chosen)
        if tied:
            print(f"warning: {tie_reason(chosen, tied)}", file=sys.stderr)
    if args.job is not None:
        _compare_live(args, chosen)
    decision = decide(job, cluster, chosen, now=now)
    if args.json:
        print(json.dumps(_decision_json(decision), indent=2))
        return 0
    print(f"job {job.key} at {_moment(now)}: policy {chosen.name} ({chosen.mode.value}), {why}")
    if is_exempt(job, chosen):
        print(f"  exempt: {decision.reasons[0]}")
        return 0
    ctx, outcomes = evaluate_rules(job, cluster, chosen, now=now)
    print(f"  judgement:  {'yes' if ctx.judge else 'not yet: ' + ctx.judge_reason}")
    print(f"  forecast:   {'usable' if ctx.forecast is not None else 'not used: ' + ctx.forecast_reason}")
    print(f"  disruptive actions: {'allowed' if ctx.blocked is None else 'held back: ' + ctx.blocked}")
    for name, out in outcomes:
        verdict = "; ".join(f"{a.kind.value}: {a.reason}" for a in out.actions) or "nothing to do"
        print(f"  {name:<17} {verdict}")
        for reason in out.reasons:
            print(f"  {'':<17} · {reason}")
    print(f"decision: advice={decision.advice}")
    for a in decision.actions:
        params = ", ".join(
            f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in a.params.items()
            if v is not None
        )
        print(f"  {a.kind.value} [{a.rule}] {a.reason}" + (f" ({params})" if params else ""))
    if not decision.actions:
        print("  no action")
    for a in decision.cleanup:  # carried out in any mode: the advisor's own write, its mandate ended
        print(f"  cleanup: {a.kind.value} [{a.rule}] {a.reason}")
    if decision.state:
        print(
            "state: " + ", ".join(f"{k}={state_value(k, v, now)}" for k, v in sorted(decision.state.items()))
        )
    return 0


def _live(args: argparse.Namespace) -> tuple[Any, Any, float]:
    """The live job ``--job`` names, as the controller would judge it now (``live_state``)."""
    from advisor.controller.cliutil import cluster_api, parse_ref
    from advisor.controller.live_state import live_job

    ns, name = parse_ref(args.job, args)
    now = args.now if args.now is not None else time.time()
    job, cluster, notes = live_job(
        cluster_api(args), ns, name, now=now, priority_boost_enabled=args.priority_boost
    )
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return job, cluster, now


def _compare_live(args: argparse.Namespace, chosen: Any) -> None:
    """A note when the cluster's AdvisorPolicy of the chosen name is not the file's: ``--job``
    reads the job live but the policy from FILE, and a file an admin edited since (or never
    applied) explained as if it governed (Recommend at priority 10 shown, while Apply at 20 ran)."""
    import dataclasses

    from advisor.controller.cliutil import cluster_api
    from policies import PolicyError
    from policies.loader import load_policy

    try:
        live = cluster_api(args).get_policy(chosen.name)
    except Exception as exc:  # the note is a courtesy: the explanation stands without it
        print(f"note: the live AdvisorPolicy {chosen.name} could not be read ({exc})", file=sys.stderr)
        return
    if live is None:
        print(
            f"note: no AdvisorPolicy {chosen.name} on the cluster: {args.file}'s is explained, "
            "not one that runs",
            file=sys.stderr,
        )
        return
    try:
        running = load_policy(live)
    except PolicyError:
        print(
            f"note: the live AdvisorPolicy {chosen.name} is invalid (the controller keeps its last valid "
            f"version): {args.file}'s is explained",
            file=sys.stderr,
        )
        return
    if running.spec == chosen.spec:
        return
    ours, theirs = dataclasses.asdict(chosen.spec), dataclasses.asdict(running.spec)
    fields = [name for name in ours if ours[name] != theirs.get(name)]
    said = []
    for name in fields:
        if name in ("mode", "priority"):
            live_value, file_value = _said(getattr(running.spec, name)), _said(getattr(chosen.spec, name))
            said.append(f"{name} {live_value} live, {file_value} in the file")
        else:
            said.append(name)
    print(
        f"note: the live AdvisorPolicy {chosen.name} differs from {args.file} ({'; '.join(said)}): "
        "the file's version is explained",
        file=sys.stderr,
    )


def _said(value: Any) -> str:
    return str(getattr(value, "value", value))


def state_value(key: str, value: float, now: float) -> str:
    """A rule-state entry as a person reads it: a time (``plateau.since``) as a UTC time and how
    long ago, anything else as a number."""
    if key.rsplit(".", 1)[-1] in ("since", "at", "time", "until") and value > 1e8:
        from datetime import UTC, datetime

        from advisor.controller.render import format_duration

        when = datetime.fromtimestamp(value, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ago = now - value
        return f"{when} ({format_duration(ago)} ago)" if ago >= 0 else f"{when} (in {format_duration(-ago)})"
    return f"{value:g}"


def _decision_json(decision: Any) -> dict[str, Any]:
    return {
        "job": decision.job,
        "policy": decision.policy,
        "mode": decision.mode.value,
        "advice": decision.advice,
        "actions": [
            {"kind": a.kind.value, "rule": a.rule, "reason": a.reason, "params": dict(a.params)}
            for a in decision.actions
        ],
        "cleanup": [{"kind": a.kind.value, "rule": a.rule, "reason": a.reason} for a in decision.cleanup],
        "reasons": list(decision.reasons),
        "state": dict(decision.state),
    }
