"""``policy explain FILE --job NS/NAME``: a live job judged as the controller judges it, from its
TrainJobForecast's history and rule memory, its latest progress and the cluster's queues (a job
state pasted by hand lacked the queues' hazard evidence, and a trial's preemption checkpoint came
minutes apart between ``policy explain`` and the live controller)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import yaml

from advisor.controller.live_state import live_job
from advisor.controller.render import iso
from policies import decide
from policies.loader import policies_from_text
from tests.controller.fakes import FakeApi, make_engine, trainjob, workload

T0 = 1_800_000_000.0
KEY = "team-a/llm"
POLICY = {
    "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
    "kind": "AdvisorPolicy",
    "metadata": {"name": "stall-release", "generation": 1},
    "spec": {
        "mode": "Recommend",
        "safety": {"minRuntime": "0s", "cooldown": "0s"},
        "rules": {"stall": {"for": "3m", "action": "Release"}, "quotaRelease": {"checkpointFirst": False}},
    },
}


class _Listings:
    def __init__(self, api: FakeApi) -> None:
        self.api = api

    def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]:
        items = list(self.api.workloads.values()) if plural == "workloads" else []
        return {"items": copy.deepcopy(items)}


class _Namespaces:
    def list_namespace(self) -> Any:
        class _Listed:
            def to_dict(self) -> dict[str, Any]:
                return {"items": [{"metadata": {"name": "team-a", "labels": {"team": "a"}}}]}

        return _Listed()


class _LiveApi:
    """What ``live_job`` reads, over the engine's fake API server."""

    def __init__(self, api: FakeApi, body: dict[str, Any]) -> None:
        self.api, self.body = api, body
        self.custom, self.core = _Listings(api), _Namespaces()
        self.kueue = type("K", (), {"version": "v1beta2"})()
        self.policies: dict[str, dict[str, Any]] = {}

    def discover_kueue(self) -> str:
        return "fake Kueue"

    def get_forecast(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.api.forecasts.get(f"{namespace}/{name}"))

    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.body)

    def get_policy(self, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.policies.get(name))


def test_a_live_job_is_judged_as_the_controller_judged_it() -> None:
    api = FakeApi()
    api.workloads["team-a/trainjob-llm-abcde"] = workload()
    e = make_engine(api)
    e.enqueue("policy", "ADDED", POLICY)
    e.enqueue("workload", "ADDED", api.workloads["team-a/trainjob-llm-abcde"])
    now, body = T0, trainjob()
    for i, step in enumerate(range(10, 501, 10)):  # reports to step 500, then nothing: it hangs
        now = T0 + i * 5.0
        body = trainjob(step=step, total=2000, loss=f"{1.5 + 1 / step:.5f}", updated=iso(now))
        e.enqueue("job", "MODIFIED", body)
        e.step(now)
    for later in (60.0, 120.0, 200.0, 260.0):
        e.step(now + later)
    status = api.forecasts[KEY]["status"]
    controller = status["recommendation"]
    assert controller["actions"] and controller["actions"][0]["rule"] == "stall"  # it recommends
    (policy,) = policies_from_text(yaml.safe_dump(POLICY))
    at = now + 260.0
    job, cluster, notes = live_job(_LiveApi(api, body), "team-a", "llm", now=at)
    assert notes == []
    assert job.step == 500 and job.admitted and job.namespace_labels == {"team": "a"}
    assert job.rule_state.get("stall.since") == e.core.record(KEY).rule_state.get("stall.since")  # type: ignore[union-attr]
    decision = decide(job, cluster, policy, now=at)
    assert decision.advice == controller["advice"]
    assert [(a.kind.value, a.rule) for a in decision.actions] == [
        (a["kind"], a["rule"]) for a in controller["actions"]
    ]


def test_policy_explain_reads_a_live_job(tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    from advisor import cli
    from advisor.controller import cliutil

    api = FakeApi()
    api.workloads["team-a/trainjob-llm-abcde"] = workload()
    e = make_engine(api)
    e.enqueue("policy", "ADDED", POLICY)
    body = trainjob()
    for i, step in enumerate(range(10, 301, 10)):
        body = trainjob(step=step, total=2000, loss="1.5", updated=iso(T0 + i * 5.0))
        e.enqueue("job", "MODIFIED", body)
        e.step(T0 + i * 5.0)
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: _LiveApi(api, body))
    draft = tmp_path / "draft.yaml"
    draft.write_text(yaml.safe_dump({**POLICY, "metadata": {"name": "draft"}}))
    at = T0 + 145.0 + 400.0
    assert cli.main(["policy", "explain", str(draft), "--job", "team-a/llm", "--now", str(at)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    # a clock reading is shown as a date, as other commands show times (it read "t=1800000545")
    shown = datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert f"job {KEY} at {shown}: policy draft (Recommend)" in out
    assert "would release quota: stalled: no step advance and no progress report for 6m40s (step 300)" in out
    # a draft not on the cluster is said to be no policy that runs
    assert "note: no AdvisorPolicy draft on the cluster" in captured.err
    assert cli.main(["policy", "explain", str(draft), "--job", "team-a/missing"]) == 2
    assert "no TrainJobForecast team-a/missing" in capsys.readouterr().err


def test_policy_explain_of_a_live_job_says_when_the_file_is_not_the_live_policy(
    tmp_path: Any, monkeypatch: Any, capsys: Any
) -> None:
    """``--job`` reads the job live and the policy from FILE: a file that is not what runs (edited
    since, or the live one switched to Apply) is explained with a note saying how they differ."""
    from advisor import cli
    from advisor.controller import cliutil

    api = FakeApi()
    api.workloads["team-a/trainjob-llm-abcde"] = workload()
    e = make_engine(api)
    e.enqueue("policy", "ADDED", POLICY)
    body = trainjob(step=300, total=2000, loss="1.5", updated=iso(T0))
    e.enqueue("job", "MODIFIED", body)
    e.step(T0)
    live = _LiveApi(api, body)
    name = POLICY["metadata"]["name"]
    running = copy.deepcopy(POLICY)
    running["spec"] = {**running["spec"], "mode": "Apply", "priority": 20}
    live.policies = {name: running}
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: live)
    stale = tmp_path / "policy.yaml"
    stale.write_text(yaml.safe_dump(POLICY))
    assert cli.main(["policy", "explain", str(stale), "--job", "team-a/llm", "--now", str(T0 + 10)]) == 0
    err = capsys.readouterr().err
    assert f"note: the live AdvisorPolicy {name} differs from {stale}" in err
    assert "mode Apply live, Recommend in the file" in err and "priority 20 live" in err
    live.policies = {name: copy.deepcopy(POLICY)}  # the same: no note
    assert cli.main(["policy", "explain", str(stale), "--job", "team-a/llm", "--now", str(T0 + 10)]) == 0
    assert "note:" not in capsys.readouterr().err
