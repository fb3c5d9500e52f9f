"""Through the core loop, which alone sees every job: when the path that carries progress reports
breaks (the trainer's status server down), every job goes silent at once and none is released;
one job that goes silent while the others report is released as a hang. A job that is no longer
running (finished, suspended) is silent for its own reason and does not count."""

from __future__ import annotations

import math

from advisor.core import AdvisorCore
from advisor.model import ActionKind, ClusterView, Decision, JobView, LifecycleSignals, ProgressSample
from policies import load_policy

HOLD = 20 * 60
JOBS = 6


def _policy() -> object:
    return load_policy(
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: p}\n"
        "spec:\n  mode: Apply\n  safety: {minRuntime: 1m}\n  rules: {stall: {for: 20m}}\n"
    )


def _job(i: int, **kw: object) -> JobView:
    return JobView(namespace="ns", name=f"j{i}", admitted=True, active=True, started_at=0.0, **kw)  # type: ignore[arg-type]


def _report(core: AdvisorCore, i: int, t: float) -> None:
    loss = 1.0 + math.exp(-t / 3000)
    core.observe(
        f"ns/j{i}", ProgressSample(step=int(t), total_steps=100_000, time=t, metrics={"loss": loss}), now=t
    )


def _run(core: AdvisorCore, reporting: set[int], *, until: float, silent_from: float) -> dict[int, Decision]:
    """Every job reports every 30 s until ``silent_from``, then only those in ``reporting`` do;
    each is judged after every report round. The last decision of each job."""
    last: dict[int, Decision] = {}
    cluster = ClusterView()
    t = 30.0
    while t <= until:
        for i in range(JOBS):
            if t < silent_from or i in reporting:
                _report(core, i, t)
        cluster = ClusterView()  # a new snapshot each tick, as the adapters make
        for i in range(JOBS):
            last[i] = core.evaluate(_job(i), cluster, now=t)
        t += 30.0
    return last


def _released(d: Decision) -> bool:
    return any(a.kind is ActionKind.RELEASE_QUOTA for a in d.actions)


def test_every_job_silent_at_once_is_not_released() -> None:
    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    last = _run(core, set(), until=3600 + 2 * HOLD, silent_from=3600)
    assert not any(_released(d) for d in last.values())
    assert {d.advice for d in last.values()} == {"progress-outage"}
    assert all(any(f"{JOBS} of the {JOBS} running jobs" in r for r in d.reasons) for d in last.values())


def test_one_job_silent_while_the_others_report_is_released() -> None:
    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    last = _run(core, set(range(1, JOBS)), until=3600 + HOLD + 60, silent_from=3600)
    assert _released(last[0]) and last[0].advice == "hung"
    assert not any(_released(last[i]) for i in range(1, JOBS))


def test_jobs_that_no_longer_run_do_not_make_a_silence_shared() -> None:
    """Four jobs finished (silent since, as they should be); two hang at once: of the running
    jobs, two of two are silent, below the three a shared silence needs, so both are released."""
    core = AdvisorCore(policies=[_policy()], forecast_interval_s=0)
    done = LifecycleSignals(complete=True)
    for t in range(30, 3601, 30):
        for i in range(JOBS):
            _report(core, i, float(t))
            core.evaluate(_job(i), ClusterView(), now=float(t))
    for i in range(2, JOBS):
        core.evaluate(_job(i, signals=done), ClusterView(), now=3630.0)
    now = 3600.0 + HOLD + 60
    decisions = [core.evaluate(_job(i), ClusterView(), now=now) for i in range(2)]
    assert all(_released(d) for d in decisions), [d.reasons for d in decisions]
