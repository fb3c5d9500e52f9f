"""status / explain / compare / resume / run, against a fake cluster (the e2e tier uses a real one)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from advisor import cli
from advisor.commands.compare import prob_best
from advisor.controller import cliutil
from advisor.controller.api import dumps_compact
from advisor.controller.render import render_status
from advisor.controller.store import encode_history
from advisor.core import History
from advisor.model import Forecast, Interval, JobView, ProgressSample
from tests.controller.fakes import FakeApi, workload

NOW = 1_800_000_000.0


def tjf(
    ns: str,
    name: str,
    *,
    mean: float,
    p10: float,
    p90: float,
    plateau: float = 0.1,
    step: int = 500,
    cq: str = "gpu-cq",
) -> dict[str, Any]:
    hist = History(64)
    for s in range(10, step, 10):
        hist.append(ProgressSample(step=s, loss=1.0 / s**0.3, time=NOW - 1000 + s))
    fc = Forecast(
        final_loss=Interval(mean, p10, p90),
        plateau_probability=plateau,
        divergence_probability=0.0,
        eta_seconds=Interval(5000, 4000, 6500),
        n_points=len(hist),
    )
    view = JobView(
        namespace=ns,
        name=name,
        step=step,
        total_steps=1000,
        gpus=8,
        cluster_queue=cq,
        forecast=fc,
        last_step_change=NOW - 5,
    )
    status = render_status(  # as the controller stores it: the history in chunks, beside coreState
        view, None, now=NOW, core_state=dumps_compact({}), history=encode_history(hist.to_dict(), 1)
    )
    return {
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"jobRef": {"kind": "TrainJob", "name": name}},
        "status": status,
    }


class CliApi(FakeApi):
    def __init__(self, items: list[dict[str, Any]]) -> None:
        super().__init__()
        self.items = items
        self.jobs: dict[str, dict[str, Any]] = {}

    def list_forecasts(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [i for i in self.items if namespace is None or i["metadata"]["namespace"] == namespace]

    def get_forecast(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = [
            i for i in self.items if i["metadata"] == {**i["metadata"], "namespace": namespace, "name": name}
        ]
        return found[0] if found else None

    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.jobs[f"{namespace}/{name}"]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> CliApi:
    fake = CliApi(
        [
            tjf("a", "lr-1e-4", mean=0.30, p10=0.28, p90=0.33),
            tjf("a", "lr-3e-4", mean=0.25, p10=0.23, p90=0.27, plateau=0.9),
            tjf("b", "other", mean=1.0, p10=0.9, p90=1.1, cq="cpu-cq"),
        ]
    )
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: fake)
    return fake


def test_status_table_all_namespaces(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "-A"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "NAMESPACE",
        "NAME",
        "JOB",
        "PROGRESS",
        "ETA",
        "LOSS",
        "PLATEAU",
        "STATE",
        "ADVICE",
        "AGE",
    ]
    assert len(lines) == 4
    assert lines[2].split()[:8] == [
        "a",
        "lr-3e-4",
        "TrainJob/lr-3e-4",
        "50%",
        "1h23m",
        "0.25±0.02",
        "90%",
        "plateaued",
    ]


def test_status_one_namespace_and_json(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "-n", "b", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in data] == ["other"] and "coreState" not in data[0]["status"]
    assert cli.main(["status", "-A", "-n", "b"]) == 2  # -A and -n together are refused


def test_status_by_queue(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "-A", "--by", "queue"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["QUEUE", "JOBS", "GPUS", "LEARNING"]
    cpu, gpu = lines[1].split(), lines[2].split()
    assert gpu[:10] == ["gpu-cq", "2", "16", "1", "1", "0", "0", "0", "0", "8"]
    assert cpu[0] == "cpu-cq"
    assert cli.main(["status", "-A", "--by", "queue", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[1]["queue"] == "gpu-cq" and rows[1]["gpus_not_learning"] == 8
    assert 0 < rows[1]["free_6h"] <= 16


def test_explain_and_plot(api: CliApi, capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    out = tmp_path / "p.png"
    assert cli.main(["explain", "a/lr-3e-4", "--plot", str(out)]) == 0
    text = capsys.readouterr().out
    assert "TrainJob a/lr-3e-4: plateaued" in text
    assert "final loss    0.25 (80% interval 0.23 .. 0.27)" in text
    assert "none selects this run" in text
    assert out.stat().st_size > 1000
    assert cli.main(["explain", "a/missing"]) == 2
    assert cli.main(["explain", "no-slash"]) == 2


def test_compare_probabilities(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", "a/lr-1e-4", "a/lr-3e-4", "-o", "json"]) == 0
    data = {d["run"]: d for d in json.loads(capsys.readouterr().out)}
    assert data["a/lr-3e-4"]["probabilityBest"] > 0.9
    assert data["a/lr-1e-4"]["probabilityBest"] + data["a/lr-3e-4"]["probabilityBest"] == pytest.approx(1.0)
    assert cli.main(["compare", "a/lr-1e-4"]) == 2


def test_prob_best_is_symmetric_and_seeded() -> None:
    p = prob_best([(1.0, 0.9, 1.1), (1.0, 0.9, 1.1)], draws=20000)
    assert p[0] == pytest.approx(0.5, abs=0.02)
    assert prob_best([(1.0, 0.9, 1.1), (2.0, 1.9, 2.1)]) == [1.0, 0.0]
    assert prob_best([(1.0, 0.5, 1.2), (1.05, 1.0, 1.1)]) == prob_best([(1.0, 0.5, 1.2), (1.05, 1.0, 1.1)])


def test_resume_reactivates_the_workload(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.jobs["team-a/llm"] = {"metadata": {"uid": "uid-1"}}
    wl = workload(active=False)

    class Kueue:
        def workload_for_job(self, ns: str, uid: str) -> Any:
            from advisor.controller.kueue import parse_workload

            return parse_workload(wl) if uid == "uid-1" else None

        def set_active(self, ns: str, name: str, active: bool) -> None:
            wl["spec"]["active"] = active

    api.kueue = Kueue()  # type: ignore[assignment]
    assert cli.main(["resume", "team-a/llm"]) == 0
    assert wl["spec"]["active"] is True and api.events[-1]["reason"] == "Resumed"
    assert cli.main(["resume", "team-a/llm"]) == 0
    assert "already active" in capsys.readouterr().out


def test_run_rejects_bad_flags() -> None:
    assert cli.main(["run", "--max-writes-per-second", "0"]) == 2
    assert cli.main(["run", "--metrics-port", "70000"]) == 2
