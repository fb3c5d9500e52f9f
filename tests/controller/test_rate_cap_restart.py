"""The per-policy hourly cap survives a controller restart: the capped actions' times are written
to the AdvisorPolicy status before each mutation and read back (with the saved jobs' action
logs) before the restarted controller decides anything."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from advisor.controller.engine import Engine
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import Action, ActionKind, ClusterView, Decision, JobView, Mode
from tests.controller.fakes import FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
CAP = 2
JOBS = [f"job-{i}" for i in range(5)]
SAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "samples" / "policy-plateau-release.yaml"


def _policy(status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A valid AdvisorPolicy named ``p`` (its rules are replaced by ``_decide`` here)."""
    body = copy.deepcopy(next(d for d in yaml.safe_load_all(SAMPLE.read_text()) if d))
    body["metadata"] = {"name": "p"}
    if status is not None:
        body["status"] = status
    return body


def _decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
    """Release every job past step 100, unless the policy's cap is reached (as policies/ does)."""
    recent = [t for t in cluster.policy_action_times.get("p", ()) if now - 3600 < t <= now]
    done = any(a.kind is ActionKind.RELEASE_QUOTA for a in job.actions)
    if job.step >= 100 and not done and len(recent) < CAP:
        return Decision(
            job=job.key, policy="p", mode=Mode.APPLY, actions=(Action(ActionKind.RELEASE_QUOTA, "r", "flat"),)
        )
    return Decision(job=job.key, policy="p", mode=Mode.APPLY)


def _engine(api: FakeApi) -> Engine:
    core = AdvisorCore(
        policies=[object()], forecast_interval_s=0, selector=lambda ps, j: ps[0], decider=_decide
    )
    return make_engine(api, core=core)


def _run(e: Engine, api: FakeApi, t0: float, names: list[str], policy_body: dict[str, Any]) -> None:
    e.enqueue("policy", "ADDED", policy_body)
    for name in names:
        e.enqueue("workload", "ADDED", api.workloads[f"team-a/trainjob-{name}-abcde"])
    for k, step in enumerate(range(90, 130, 10)):
        now = t0 + 5 * k
        for name in names:
            e.enqueue(
                "job",
                "MODIFIED",
                trainjob(name=name, uid=f"u-{name}", step=step, loss="1.0", updated=iso(now)),
            )
        e.step(now)


def _releases(api: FakeApi) -> int:
    return sum(1 for c in api.mutations() if c[0] == "set_active")


def _policy_body(api: FakeApi) -> dict[str, Any]:
    """The AdvisorPolicy as the restarted controller lists it: its status is what was patched."""
    status: dict[str, Any] = {}
    for call in api.log:
        if call[0] == "policy_status" and call[1] == "p":
            status.update(call[2])
    return _policy(status)


def test_the_cap_holds_across_a_restart() -> None:
    api = FakeApi()
    for name in JOBS:
        api.workloads[f"team-a/trainjob-{name}-abcde"] = workload(job_name=name, uid=f"u-{name}")
    first = _engine(api)
    _run(first, api, T0, JOBS[:3], _policy())
    assert _releases(api) == CAP
    recent = _policy_body(api)["status"]["recentActions"]
    assert len(recent) == CAP
    # each says its time as kubectl describe shows every other one, beside the number read back
    assert all(a["at"] == iso(a["time"]) and a["at"].startswith("2027-01-15T") for a in recent)
    first.close()

    # the restarted controller sees the policy status, but the released jobs' forecasts are gone
    # (their jobs deleted): the cap must still hold for the two jobs it has never seen
    api.forecasts.clear()
    second = _engine(api)
    second.load_saved(api.list_forecasts())
    _run(second, api, T0 + 60, JOBS[3:], _policy_body(api))
    assert _releases(api) == CAP


def test_saved_action_logs_count_even_before_their_jobs_are_seen_again() -> None:
    api = FakeApi()
    for name in JOBS:
        api.workloads[f"team-a/trainjob-{name}-abcde"] = workload(job_name=name, uid=f"u-{name}")
    first = _engine(api)
    _run(first, api, T0, JOBS[:3], _policy())
    assert _releases(api) == CAP
    # a policy status lost (written by hand, restored from a backup): the saved logs still count
    second = _engine(api)
    second.load_saved(api.list_forecasts())
    _run(second, api, T0 + 60, JOBS[3:], _policy())
    assert _releases(api) == CAP


def test_no_action_when_the_cap_cannot_be_persisted() -> None:
    api = FakeApi()
    api.workloads["team-a/trainjob-job-0-abcde"] = workload(job_name="job-0", uid="u-job-0")

    def refuse(name: str, status: Any) -> None:
        raise RuntimeError("API server unavailable")

    api.patch_policy_status = refuse  # type: ignore[method-assign]
    e = _engine(api)
    _run(e, api, T0, ["job-0"], _policy())
    assert _releases(api) == 0


def test_core_adopts_persisted_actions_once() -> None:
    core = AdvisorCore()
    found = [("a", T0), ("b", T0), ("c", float("nan")), ("d", True)]
    assert core.note_policy_actions("p", found) == 2  # type: ignore[arg-type]
    assert core.note_policy_actions("p", [("a", T0), ("e", T0 + 2)]) == 1
    assert core.policy_actions("p", T0 + 10) == (("a", T0), ("b", T0), ("e", T0 + 2))
    assert core.policy_actions("p", T0 + 3601.5) == (("e", T0 + 2),)
