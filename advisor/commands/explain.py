"""``trainjob-advisor explain NS/NAME``: why the advisor says what it says about one run.

Reads the run's TrainJobForecast and prints the progress, throughput, the forecast (final loss
with its interval, ETA, plateau and divergence probabilities, which curve families carried the
weight, and every warning), the run state from all its series (the eval metric it is judged by,
its best step, each eval series' forecast), the policy decision with its reasons, checkpoints and
the action log. ``--plot FILE`` draws the stored history as ``forecast --plot`` draws a file.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from advisor.cli import CommandError, require_extra
from advisor.model import HELD_DETAIL
from advisor.series import eval_step_span

__all__ = ["explain_lines", "register", "run"]


def register(subparsers: Any) -> None:
    from advisor.controller.cliutil import add_cluster_args, add_namespace_arg

    p = subparsers.add_parser(
        "explain",
        help="explain the forecast and advice for one run",
        description="Print everything the advisor knows about one run and why it advises what it does.",
    )
    add_cluster_args(p)
    add_namespace_arg(p)
    p.add_argument("ref", metavar="NAME", help="the TrainJob (and its TrainJobForecast): NAME or NS/NAME")
    p.add_argument("--plot", metavar="FILE", help="write a plot of the history and forecast (PNG/SVG/PDF)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    # the other commands print JSON with --json: the same flag here, so that neither form fails
    p.add_argument("--json", dest="output", action="store_const", const="json", help="same as -o json")
    p.set_defaults(func=run)


def _iv(d: Mapping[str, Any] | None, fmt: str = "{:.4g}") -> str:
    if not d or d.get("mean") is None:
        return "unknown"
    return f"{fmt.format(d['mean'])} (80% interval {fmt.format(d['p10'])} .. {fmt.format(d['p90'])})"


def _span(entry: Mapping[str, Any]) -> str:
    """Where a status entry's best evaluation was made (``bestStep``, ``bestMadeAfter``)."""
    after = entry.get("bestMadeAfter")
    return eval_step_span(int(entry["bestStep"]), after if isinstance(after, int) else None)


def _not_evaluated_since(series: Mapping[str, Any], step: float | None) -> str:
    """A note for an eval series the run stopped reporting (``STALE_EVALS`` of its usual intervals
    behind the run's step, the interval read as its last step over its points): a metric reported
    only mid-run (eval_bleu, last at step 1,760 of 2,900) was shown with a forecast as if live."""
    from advisor.forecast.state import STALE_EVALS

    last, points = series.get("lastStep"), series.get("points")
    if (
        step is None
        or not isinstance(last, int | float)
        or not isinstance(points, int)
        or points < 2
        or last <= 0
    ):
        return ""
    usual = float(last) / points
    behind = float(step) - float(last)
    if behind <= STALE_EVALS * usual:
        return ""
    return f"; not evaluated since step {float(last):,.0f}, {behind:,.0f} steps ago"


def _keep_text(st: Mapping[str, Any]) -> str:
    """What the judged series' best is to the user: the checkpoint to keep, unless the task's score
    read beside it (``taskMetric``) was best later: then both are named, as the release reason and
    ``forecast`` name them (a classifier's eval loss was best at step 900, its accuracy 0.905 there
    and 0.943 at step 1,900, and this line called step 900 the one to keep)."""
    task = st.get("taskMetric")
    own = (st.get("series") or {}).get(task) if isinstance(task, str) else None
    later = own is not None and isinstance(own.get("bestStep"), int) and own["bestStep"] > st["bestStep"]
    if not later or own is None:
        return "the checkpoint to keep"
    value = f" {own['bestValue']:.4g}" if isinstance(own.get("bestValue"), int | float) else ""
    return f"the checkpoint to keep by it; or by {task}, best{value} {_span(own)}"


def _learning_lines(st: Mapping[str, Any], shown: str = "", step: float | None = None) -> list[str]:
    """The run state from all its series: its probabilities, the series it is judged by with its
    best step (the checkpoint worth keeping), and each eval series' forecast final value. When the
    STATE shown is the governing policy's verdict (``hung``, ``diverging``: a stall rule may act on
    a shorter silence than the run state calls hung), the line says so."""
    if not st.get("label"):
        return []
    probs = ", ".join(
        f"{k} {v:.0%}" for k, v in (st.get("probabilities") or {}).items() if isinstance(v, int | float)
    )
    verdict = (
        f"; STATE shows {shown}: the governing policy's verdict"
        if shown in ("hung", "diverging") and shown != st["label"]
        else ""
    )
    lines = [f"  run state     {st['label']} ({probs}){verdict}"]
    metric = st.get("metric")
    if metric:
        best = (
            f"; best {st.get('bestValue'):.4g} {_span(st)} ({_keep_text(st)}), "
            f"{st.get('evalsSinceBest', 0)} evaluation(s) since"
            if st.get("bestStep") is not None and isinstance(st.get("bestValue"), int | float)
            else ""
        )
        lines.append(f"  judged by     {metric}{best}")
    else:
        lines.append(
            "  judged by     the training loss (no eval metric with a direction and enough evaluations)"
        )
    for name, series in (st.get("series") or {}).items():
        direction = f", {series['direction']} is better" if series.get("direction") else ""
        # another series' own best: the checkpoint an overfitting rule naming it would keep
        own_best = (
            f"; best {series['bestValue']:.4g} {_span(series)}"
            if name != metric
            and series.get("bestStep") is not None
            and isinstance(series.get("bestValue"), int | float)
            else ""
        )
        # numbers as the rest of the page gives them ("smoothed level now 1.592415" stood beside
        # four-digit values)
        now, p = series.get("current"), series.get("plateauProbability")
        now_text = f"{now:.4g}" if isinstance(now, int | float) else "unknown"
        p_text = f"{p:.2f}" if isinstance(p, int | float) else "unknown"
        lines.append(
            f"  {name:<13} final {_iv(series.get('final'))}; smoothed level now {now_text}; "
            f"P(plateau) {p_text}{direction}{own_best}{_not_evaluated_since(series, step)}"
        )
    lines += [f"  warning       {w}" for w in st.get("warnings") or []]
    return lines


def _rule_memory(status: Mapping[str, Any], now: float) -> list[str]:
    """The rules' memory the controller keeps between evaluations (``status.coreState``'s
    ``ruleState``): when each window opened, and on which evaluation, what the reasons' "for 4m"
    and "acting at the next evaluation" count from."""
    from advisor.commands.policy import state_value

    raw = status.get("coreState")
    try:
        data = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return []
    state = data.get("ruleState") if isinstance(data, Mapping) else None
    if not isinstance(state, Mapping):
        return []
    shown = [
        f"{k}={state_value(str(k), float(v), now)}"
        for k, v in sorted(state.items())
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    return [f"  rule memory   {', '.join(shown)}"] if shown else []


def explain_lines(ns: str, name: str, status: Mapping[str, Any], *, now: float | None = None) -> list[str]:
    """``now``: what the rule memory's times are told against (default: the current time)."""
    import time

    from advisor.controller.render import format_duration, shows_eta

    prog = status.get("progress") or {}
    fc = status.get("forecast") or {}
    rec = status.get("recommendation") or {}
    ck = status.get("checkpoint") or {}
    job = status.get("job") or {}
    pct = prog.get("percent")
    unread = [str(w) for w in prog.get("warnings") or []]
    lines = [
        f"{job.get('kind', 'TrainJob')} {ns}/{name}: {status.get('state', 'unknown')}",
        f"  progress      step {prog.get('step')} of {prog.get('totalSteps') or '?'}"
        + (f" ({pct:.1f}%)" if isinstance(pct, int | float) else ""),
        f"  queue         {job.get('queueName') or '-'} -> ClusterQueue {job.get('clusterQueue') or '-'}; "
        f"{job.get('gpus', 0)} GPU(s) on {job.get('nodes', 1)} node(s); "
        f"{'active' if job.get('active', True) else 'deactivated'}",
        f"  last sample   {status.get('lastSampleTime') or '-'} "
        f"(step last advanced {status.get('lastStepChange') or '-'})",
    ]
    if unread:
        # what the latest report's reader could not use, and what the history left out (a second
        # writer's interleaved reports): not all of it is about the latest report being unreadable
        lines.append(f"  reports       {'; '.join(unread)}")
    tput = (status.get("throughput") or {}).get("byNodes") or []
    if tput:
        lines.append(
            "  throughput    "
            + ", ".join(
                f"{t['nodes']} node(s): {t['stepsPerSecond']:.3g} steps/s"
                for t in tput
                if t.get("stepsPerSecond") is not None
            )
        )
    if fc:
        eta = fc.get("etaSeconds")
        state = str(status.get("state") or "")
        if not shows_eta(state):
            eta_text = f"none while the job is {state} (the forecast's was made while it ran)"
        elif eta and eta.get("mean") is not None:
            eta_text = (
                f"{format_duration(eta['mean'])} (80%: {format_duration(eta['p10'])} .. "
                f"{format_duration(eta['p90'])})"
            )
        else:
            eta_text = "unknown (no total steps or no timestamps)"
        lines += [
            f"  final loss    {_iv(fc.get('finalLoss'))}; current {fc.get('currentLoss')}",
            f"  ETA           {eta_text}",
            f"  P(plateau)    {fc.get('plateauProbability')}    P(diverge) {fc.get('divergenceProbability')}",
            "  model         "
            + (
                ", ".join(
                    f"{k} {v:.2f}"
                    for k, v in ((m.get("name"), m.get("weight")) for m in fc.get("model") or [])
                    if v is not None
                )
                or "-"
            ),
            f"  fitted on     {fc.get('points')} point(s), {fc.get('dropped')} dropped; "
            f"at {fc.get('updatedAt')}",
        ]
        lines += [f"  warning       {w}" for w in fc.get("warnings") or []]
    else:
        # the Forecasting condition says why (no report yet, unreadable ones, no loss in them)
        why = next(
            (
                str(c.get("message"))
                for c in status.get("conditions") or []
                if isinstance(c, Mapping) and c.get("type") == "Forecasting" and c.get("message")
            ),
            "too few progress samples",
        )
        lines.append(f"  forecast      none yet: {why}")
    step = (status.get("progress") or {}).get("step")
    lines += _learning_lines(
        status.get("learningState") or {},
        str(status.get("state") or ""),
        float(step) if isinstance(step, int | float) else None,
    )
    if rec.get("policy"):
        lines.append(f"  policy        {rec['policy']} (mode {rec.get('mode') or '-'})")
    else:
        # no policy judges it: its ADVICE is the forecast's own hint ("plateau? (no policy)"), not a decision
        lines.append(
            "  policy        none selects this run: nothing is recommended or done; ADVICE is the "
            "forecast's own hint"
        )
    job = status.get("job") or {}
    if job.get("phase"):
        why = f": {job['phaseReason']}" if job.get("phaseReason") else ""
        lines.append(f"  lifecycle     {job['phase']}{why} (since {job.get('phaseSince') or '-'})")
    lines.append(f"  advice        {rec.get('advice') or '-'}")
    lines += [f"  because       {r}" for r in rec.get("reasons") or []]
    lines += _rule_memory(status, time.time() if now is None else now)
    lines += [
        f"  wants         {a['kind']} (rule {a['rule']}): {a['reason']}" for a in rec.get("actions") or []
    ]
    if ck.get("lastStep") is not None or ck.get("pendingRequest"):
        last = (
            "none acknowledged yet"
            if ck.get("lastStep") is None
            else f"last at step {ck.get('lastStep')} ({ck.get('lastTime') or '-'})"
        )
        lines.append(f"  checkpoint    {last}; pending request {ck.get('pendingRequest') or 'none'}")
    for a in status.get("actions") or []:
        # an Apply policy's action its cooldown or cap held back is logged as a recommendation
        # marked held; its reason already says why, so the mark is the outcome, not a suffix
        held = a.get("outcome") == "recommended" and a.get("detail") == HELD_DETAIL
        lines.append(
            f"  action        {a['time']} {a['kind']} -> {'held' if held else a['outcome']} "
            f"[{a['requestId']}] {a.get('policy') or ''}/{a.get('rule') or ''}: {a.get('reason') or ''}"
            + (f" ({a['detail']})" if a.get("detail") and not held else "")
        )
    return lines


def plot(status: Mapping[str, Any], path: str, title: str) -> None:
    """The picture ``forecast --plot`` draws, of the run's stored history: the training loss with
    its forecast path and band, each eval series with its forecast final value, and the best eval
    step (the checkpoint to keep). The forecast is made again from the stored points by the same
    function the controller calls (it is the controller's unless points arrived since)."""
    from advisor.commands.forecast_outcome import outcome_of
    from advisor.commands.forecast_plot import write_plot
    from advisor.controller.store import decode_history
    from advisor.core import History
    from advisor.sources.files import LoadedCurve

    raw = status.get("coreState")
    try:
        data = json.loads(raw) if isinstance(raw, str) else {}
        stored = status.get("history") or data.get("history") or {}  # older objects: inside coreState
        history = History.from_dict(decode_history(stored))
    except (ValueError, TypeError, KeyError) as exc:
        raise CommandError(f"the stored history cannot be read: {exc}") from exc
    curve = history.curve()
    if len(curve) == 0:
        raise CommandError("no history stored yet: nothing to plot")
    total = (status.get("progress") or {}).get("totalSteps")
    loaded = LoadedCurve(
        steps=curve.steps,
        values=curve.values,
        times=curve.times,
        learning_rates=curve.learning_rates,
        epochs=curve.epochs,
        total_steps=total,
        source=f"{title}: {len(curve)} stored point(s), forecast again from them",
    )
    evals = {
        name: (series, LoadedCurve(steps=tuple(float(x) for x in series.steps), values=tuple(series.values)))
        for name in history.evals.names
        if (series := history.evals.series(name)) is not None and len(series)
    }
    outcome = outcome_of(
        loaded,
        loaded,
        total if isinstance(total, int) and total > 0 else None,
        [],
        evals={name: lc for name, (_, lc) in evals.items()},
        directions={name: s.direction for name, (s, _) in evals.items()},
        plot=True,
    )
    write_plot(outcome, path)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from advisor.controller.cliutil import cluster_api, forecast_status, parse_ref

    if Path(args.ref).is_file():
        # a run log given where a TrainJob's name goes: said at once (it read "cannot connect to
        # the cluster", which said nothing of the file), with the command that reads a file
        raise CommandError(
            f"{args.ref} is a file: explain reads a TrainJob from the cluster (NAME or NAMESPACE/NAME); "
            f"for a run log, run: trainjob-advisor forecast {args.ref}"
        )
    ns, name = parse_ref(args.ref, args)
    if args.plot:
        require_extra("matplotlib", "sim", "--plot")
    api = cluster_api(args)
    status = forecast_status(api, ns, name, " (no such TrainJob, or no progress reported yet)")
    if args.output == "json":
        print(json.dumps({k: v for k, v in status.items() if k not in ("coreState", "history")}, indent=2))
    else:
        print("\n".join(explain_lines(ns, name, status)))
    if args.plot:
        plot(status, args.plot, f"{ns}/{name}")
        print(f"plot written to {args.plot}")
    return 0
