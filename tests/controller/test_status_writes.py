"""No TrainJobForecast status is written twice in a row with nothing new in it.

A trial on a real control plane saw the same status written twice: an action's record persisted
before its mutation (``Engine._persist_now``) and then the status of the evaluation that took it,
the same content with only ``observedAt`` moved (back, to the time the step began). The engine
counts a persisted status as written, rendered at the time of the step, so the evaluation's own
status is a second write only when it says something new."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from advisor.controller import engine as engine_module
from advisor.controller.render import iso
from advisor.model import ClusterView, Decision, JobView
from tests.controller.fakes import FakeApi, make_engine, release_sequence, trainjob, workload

KEY = "team-a/llm"
T0 = 1_700_000_000.0


def _written(api: FakeApi) -> list[dict[str, Any]]:
    """Every status the API server holds after each write of it, in order."""
    seen: list[dict[str, Any]] = []
    full, delta = api.patch_forecast_status, api.json_patch_forecast_status

    def after(write: Any) -> Any:
        def wrapped(namespace: str, name: str, body: Any) -> int | None:
            generation = write(namespace, name, body)
            seen.append(copy.deepcopy(api.forecasts[f"{namespace}/{name}"]["status"]))
            return generation  # type: ignore[no-any-return]

        return wrapped

    api.patch_forecast_status = after(full)  # type: ignore[method-assign]
    api.json_patch_forecast_status = after(delta)  # type: ignore[method-assign]
    return seen


def _but_time(status: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if k != "observedAt"}


def test_an_action_persisted_before_its_mutation_is_not_written_again_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi()
    api.workloads["team-a/trainjob-llm-abcde"] = workload()
    api.pods["team-a/jobset.sigs.k8s.io/jobset-name=llm"] = ["llm-0"]

    def decide(job: JobView, cluster: ClusterView, policy: Any, *, now: float) -> Decision:
        return release_sequence(job, T0)

    e = make_engine(api, decide)
    seen = _written(api)
    clock = {"now": T0}
    # the wall clock runs a second ahead of the step's time, as it does once a step takes a while
    monkeypatch.setattr(engine_module.time, "time", lambda: clock["now"] + 1.0)
    e.enqueue("workload", "ADDED", api.workloads["team-a/trainjob-llm-abcde"])
    for i, step in enumerate(range(10, 60, 10)):
        clock["now"] = now = T0 + 5.0 * i
        e.enqueue("job", "MODIFIED", trainjob(step=step, loss=f"{2.0 - step / 100:.3f}", updated=iso(now)))
        e.step(now)
    rid = api.pod_annotations["team-a/llm-0"]["advisor.trainjob-advisor.io/checkpoint-request"]
    clock["now"] = now = T0 + 60.0
    ack = [{"name": "last_checkpoint_step", "value": "50"}, {"name": "last_checkpoint_request", "value": rid}]
    e.enqueue("job", "MODIFIED", trainjob(step=60, loss="1.4", updated=iso(now), extra_metrics=ack))
    e.step(now)  # the acknowledgement: its outcome persisted, then the evaluation's status
    assert api.forecasts[KEY]["status"]["checkpoint"]["lastStep"] == 50
    assert len(seen) >= 3
    twice = [i for i in range(1, len(seen)) if _but_time(seen[i]) == _but_time(seen[i - 1])]
    assert twice == [], f"writes {twice} repeat the status before them"
    times = [s["observedAt"] for s in seen]
    assert times == sorted(times)  # observedAt never moves back
