"""status / explain / compare / resume / run, against a fake cluster (the e2e tier uses a real one)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from advisor import cli
from advisor.commands.compare import prob_best
from advisor.commands.explain import explain_lines
from advisor.controller import cliutil
from advisor.controller.api import dumps_compact
from advisor.controller.render import render_status
from advisor.controller.store import encode_history
from advisor.core import History
from advisor.model import Forecast, Interval, JobView, LearningState, ProgressSample
from tests.controller.fakes import ApiError, FakeApi, workload

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
    state: LearningState | None = None,
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
        learning_state=state,
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

    policies: dict[str, dict[str, Any]] = {}  # noqa: RUF012  (none unless a test adds one)

    def get_policy(self, name: str) -> dict[str, Any] | None:
        if name == "unreadable":
            raise ApiError(403, "forbidden")
        return self.policies.get(name)


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
    done = tjf("b", "done", mean=1.0, p10=0.9, p90=1.1, cq="cpu-cq")
    done["status"]["state"] = "finished"
    api.items.append(done)
    assert cli.main(["status", "-A", "--by", "queue"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["QUEUE", "JOBS", "GPUS", "LEARNING"]
    cpu, gpu = lines[1].split(), lines[2].split()
    assert gpu[:13] == ["gpu-cq", "2", "16", "1", "1", "0", "0", "0", "0", "0", "0", "0", "8"]
    # the 8 GPUs of the plateaued run are held, busy, by a run that no longer learns: not "idle"
    assert lines[0].split()[12] == "GPUS-NOT-LEARNING" and "IDLE-GPUS" not in lines[0].split()
    assert cpu[0] == "cpu-cq"
    # every job is in one column: JOBS adds up across the row (pending and stopped runs included)
    head = lines[0].split()
    for row in (cpu, gpu):
        counts = dict(zip(head, row, strict=True))
        states = ("LEARNING", "PLATEAUED", "OVERFITTING", "HUNG", "DIVERGING", "NEAR-DONE", "UNKNOWN")
        assert sum(int(counts[k]) for k in (*states, "PENDING", "STOPPED")) == int(counts["JOBS"])
    assert cli.main(["status", "-A", "--by", "queue", "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[1]["queue"] == "gpu-cq" and rows[1]["gpus_not_learning"] == 8
    assert 0 < rows[1]["free_6h"] <= 16
    # a ClusterQueue spans namespaces: without -A its summary still counts every one (it counted
    # the kubeconfig's namespace alone); -n names one
    assert cli.main(["status", "--by", "queue", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows
    assert cli.main(["status", "--by", "queue", "-n", "b", "-o", "json"]) == 0
    assert [r["queue"] for r in json.loads(capsys.readouterr().out)] != [r["queue"] for r in rows]


def test_explain_and_plot(api: CliApi, capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    out = tmp_path / "p.png"
    assert cli.main(["explain", "a/lr-3e-4", "--plot", str(out)]) == 0
    text = capsys.readouterr().out
    assert "TrainJob a/lr-3e-4: plateaued" in text
    assert "final loss    0.25 (80% interval 0.23 .. 0.27)" in text
    assert "none selects this run: nothing is recommended or done" in text and "(mode" not in text
    assert out.stat().st_size > 1000
    assert cli.main(["explain", "a/missing"]) == 2
    assert cli.main(["explain", "no-slash"]) == 2


def test_explain_given_a_run_log_points_to_forecast(
    capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``explain FILE`` read "cannot connect to the cluster": a file is said to be one, with the
    command that reads it, before any cluster is asked for."""
    log = tmp_path / "trainer_state.json"
    log.write_text('{"log_history": []}')
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert cli.main(["explain", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file" in err[0] and f"trainjob-advisor forecast {log}" in err[0]


def test_explain_a_fine_tune_judged_by_its_eval_loss(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    """Training loss falling, eval loss past its minimum at step 400: explain names the run state,
    the series it is judged by with its best step, and plots the eval series too."""
    from advisor.forecast import forecast
    from advisor.forecast.state import learning_state

    hist = History(256)
    for s in range(10, 1200, 10):
        ev = 0.5 + ((s - 400) / 800) ** 2 if s % 100 == 0 else None
        hist.append(ProgressSample(step=s, loss=1.0 / s**0.3, time=NOW - 2000 + s, eval_loss=ev))
    curve = hist.curve()
    fc = forecast(curve.steps, curve.values, total_steps=2000, times=curve.times)
    evals = {n: hist.evals.series(n) for n in hist.evals.names}
    state = learning_state(fc, evals, total_steps=2000, forecast_all=True)  # type: ignore[arg-type]
    assert state.label == "overfitting" and state.best_step == 400
    view = JobView(namespace="a", name="ft", step=1190, total_steps=2000, forecast=fc, learning_state=state)
    status = render_status(
        view, None, now=NOW, core_state=dumps_compact({}), history=encode_history(hist.to_dict(), 1)
    )
    fake = CliApi([{"metadata": {"namespace": "a", "name": "ft"}, "status": status}])
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: fake)
    out = tmp_path / "ft.png"
    assert cli.main(["explain", "ft", "-n", "a", "--plot", str(out)]) == 0
    text = capsys.readouterr().out
    assert "run state     overfitting (" in text
    # the evaluation came with the report at step 400, the one before it at step 390: the job says
    # no more of when it was made
    best = (
        "judged by     eval_loss; best 0.5 between steps 391 and 400 (the checkpoint to keep), "
        "7 evaluation(s) since"
    )
    assert best in text
    assert "eval_loss     final " in text and "lower is better" in text and "smoothed level now" in text
    # its numbers as the page gives the others (a trial read "smoothed level now 1.592415")
    level = next(x for x in text.splitlines() if "smoothed level now" in x)
    assert re.search(r"smoothed level now \d\.\d{1,4}; P\(plateau\) \d\.\d\d", level), level
    # the STATE a stall rule gave (its window shorter than the run state's): explain says whose it is,
    # and shows no ETA for a hung run
    hung = {**status, "state": "hung"}
    lines = "\n".join(explain_lines("a", "ft", hung))
    assert "STATE shows hung: the governing policy's verdict" in lines
    assert "ETA           none while the job is hung" in lines
    assert out.stat().st_size > 1000
    assert status["summary"]["loss"].startswith("eval_loss ")


def test_compare_probabilities(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", "a/lr-1e-4", "a/lr-3e-4", "-o", "json"]) == 0
    data = {d["run"]: d for d in json.loads(capsys.readouterr().out)}
    assert data["a/lr-3e-4"]["probabilityBest"] > 0.9
    assert data["a/lr-1e-4"]["probabilityBest"] + data["a/lr-3e-4"]["probabilityBest"] == pytest.approx(1.0)
    assert cli.main(["compare", "a/lr-1e-4", "a/lr-3e-4", "--json"]) == 0  # as forecast and simulate take it
    assert {d["run"]: d for d in json.loads(capsys.readouterr().out)} == data
    assert cli.main(["compare", "a/lr-1e-4"]) == 2


def test_compare_notes_a_run_forecast_on_too_few_points(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run just started (one or two reports) is ranked on its current level with a wide interval:
    the table says so rather than rank it beside runs with a trend as if alike."""
    young = tjf("a", "new", mean=0.4, p10=0.2, p90=0.6, step=25)  # reports at steps 10 and 20
    fake = CliApi([tjf("a", "old", mean=0.30, p10=0.28, p90=0.33), young])
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: fake)
    assert cli.main(["compare", "a/old", "a/new"]) == 0
    out = capsys.readouterr().out
    assert "too few points to hold a trend for: a/new (2 points)" in out and "a/old (" not in out


def _eval_judged(mean: float, p10: float, p90: float, label: str, best: int) -> LearningState:
    final = Forecast(final_loss=Interval(mean, p10, p90), plateau_probability=0.9, divergence_probability=0.0)
    return LearningState(
        label=label,
        probabilities={label: 1.0},
        metric="eval_loss",
        best_step=best,
        best_value=p10,
        series={"eval_loss": final},
        directions={"eval_loss": "lower"},
    )


def test_compare_ranks_fine_tunes_by_the_eval_metric_they_are_judged_by(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run with the lowest training loss overfits (its eval loss ends at 0.92): the one whose
    eval loss ends lowest is ranked best, with the step of its best checkpoint."""
    fake = CliApi(
        [
            tjf(
                "a",
                "overfit",
                mean=0.02,
                p10=0.01,
                p90=0.03,
                state=_eval_judged(0.92, 0.85, 0.99, "overfitting", 300),
            ),
            tjf(
                "a",
                "steady",
                mean=0.40,
                p10=0.38,
                p90=0.42,
                state=_eval_judged(0.50, 0.47, 0.53, "learning", 500),
            ),
        ]
    )
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: fake)
    assert cli.main(["compare", "overfit", "steady", "-n", "a", "-o", "json"]) == 0
    data = {d["run"]: d for d in json.loads(capsys.readouterr().out)}
    assert data["a/steady"]["metric"] == "eval_loss" and data["a/steady"]["probabilityBest"] == 1.0
    assert data["a/overfit"]["bestStep"] == 300 and data["a/overfit"]["finalLoss"]["mean"] == 0.02
    assert cli.main(["compare", "overfit", "steady", "-n", "a"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["RUN", "FINAL", "EVAL_LOSS"] and lines[1].split()[0] == "a/steady"
    assert "ranked by eval_loss (lower is better)" in lines
    # asked for the training loss: the overfitting run ends lowest in it with the worse model, and
    # is left unranked (as a diverging run is), not named best
    assert cli.main(["compare", "overfit", "steady", "-n", "a", "--metric", "loss", "-o", "json"]) == 0
    data = {d["run"]: d for d in json.loads(capsys.readouterr().out)}
    assert data["a/overfit"]["probabilityBest"] is None and data["a/overfit"]["notRanked"] == "overfitting"
    assert data["a/steady"]["probabilityBest"] == 1.0


def test_prob_best_is_symmetric_and_seeded() -> None:
    p = prob_best([(1.0, 0.9, 1.1), (1.0, 0.9, 1.1)], draws=20000)
    assert p[0] == pytest.approx(0.5, abs=0.02)
    assert prob_best([(1.0, 0.9, 1.1), (2.0, 1.9, 2.1)]) == [1.0, 0.0]
    assert prob_best([(1.0, 0.5, 1.2), (1.05, 1.0, 1.1)]) == prob_best([(1.0, 0.5, 1.2), (1.05, 1.0, 1.1)])
    assert prob_best([(0.7, 0.69, 0.71), (0.8, 0.79, 0.81)], higher=True) == [0.0, 1.0]  # an accuracy


def test_prob_best_splits_the_draws_runs_tie_in() -> None:
    """Two runs whose best checkpoints hold the same accuracy tie wherever neither would end
    above it: the first named won every such draw (93% / 7%, reversed with the order)."""
    runs = [(0.931, 0.928, 0.934), (0.930, 0.927, 0.933)]
    p = prob_best(runs, higher=True, kept=[0.9337, 0.9337])
    q = prob_best(runs[::-1], higher=True, kept=[0.9337, 0.9337])
    assert p == pytest.approx(q[::-1], abs=0.02)
    assert p[0] == pytest.approx(0.5, abs=0.1)
    assert prob_best([(1.0, 0.9, 1.1)] * 2, kept=[0.8, 0.8]) == pytest.approx(
        [0.5, 0.5], abs=0.01
    )  # two copies


class _Kueue:
    """Kueue as ``resume`` reads it: the job's Workload (``wl``), reactivated in place."""

    def __init__(self, wl: dict[str, Any], uid: str | None = None) -> None:
        self.wl, self.uid = wl, uid

    def workload_for_job(self, ns: str, uid: str) -> Any:
        from advisor.controller.kueue import parse_workload

        return parse_workload(self.wl) if self.uid in (None, uid) else None

    def set_active(self, ns: str, name: str, active: bool) -> None:
        self.wl["spec"]["active"] = active


def test_resume_reactivates_the_workload(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.jobs["team-a/llm"] = {"metadata": {"uid": "uid-1"}}
    wl = workload(active=False)

    api.kueue = _Kueue(wl, uid="uid-1")  # type: ignore[assignment]
    api.policies = {
        "plateau-release": {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "plateau-release"},
            "spec": {},
        }
    }
    released = {"kind": "release-quota", "policy": "plateau-release", "rule": "plateau", "outcome": "done"}
    api.items.append({"metadata": {"namespace": "team-a", "name": "llm"}, "status": {"actions": [released]}})
    api.immutable_num_nodes = False  # the fake refuses TrainJob patches by default
    assert cli.main(["resume", "team-a/llm"]) == 0
    assert wl["spec"]["active"] is True and api.events[-1]["reason"] == "Resumed"
    out = capsys.readouterr().out
    assert "note: policy plateau-release released it (plateau)" in out and "released again" in out
    # where it starts again, as far as the advisor knows (a platform trial's run released with no
    # save restarted from scratch, its forecast reading the previous run's figures, unsaid)
    assert "note: no checkpoint of this run is known to the advisor: it starts again from" in out
    # the resume is recorded on the job: the policies' cooldown runs from it (a run resumed 24
    # minutes after its release was released again 61 s later, though the note promised a cooldown)
    (patch,) = [c for c in api.log if c[0] == "patch_job"]
    assert "advisor.trainjob-advisor.io/resumed-at" in patch[4]["metadata"]["annotations"]
    assert "once the policy's cooldown from now has passed (the resume is recorded on the job)" in out
    assert "kubectl label trainjob -n team-a llm advisor.trainjob-advisor.io/exempt=true" in out
    assert cli.main(["resume", "team-a/llm"]) == 0
    assert "already active" in capsys.readouterr().out
    # already exempt: said, not suggested again
    api.jobs["team-a/llm"]["metadata"]["labels"] = {"advisor.trainjob-advisor.io/exempt": "true"}
    wl["spec"]["active"] = False
    api.items[-1]["status"] |= {"progress": {"step": 5200}, "checkpoint": {"lastStep": 4000}}
    assert cli.main(["resume", "team-a/llm"]) == 0
    out = capsys.readouterr().out
    assert "kubectl label" not in out and "the exempt label of plateau-release" in out, out
    assert "its last checkpoint known to the advisor is at step 4,000 (it had reported step 5,200)" in out


def test_resume_refuses_a_finished_job_or_workload(api: CliApi, capsys: pytest.CaptureFixture[str]) -> None:
    """A completed TrainJob's Workload, reactivated, was admitted again and held its GPU (a
    platform trial): a job that completed or failed, or whose Workload finished, has no run to
    resume; the Workload is left as it is."""
    wl = workload(active=False)

    api.kueue = _Kueue(wl)  # type: ignore[assignment]
    for kind in ("Complete", "Failed"):
        api.jobs["team-a/llm"] = {
            "metadata": {"uid": "uid-1"},
            "status": {"conditions": [{"type": kind, "status": "True"}]},
        }
        assert cli.main(["resume", "team-a/llm"]) == 2
        how = "completed" if kind == "Complete" else "failed"
        assert f"TrainJob team-a/llm has {how}: there is no run to resume" in capsys.readouterr().err
    api.jobs["team-a/llm"] = {"metadata": {"uid": "uid-1"}}
    wl["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    assert cli.main(["resume", "team-a/llm"]) == 2
    assert "has finished (Succeeded): there is no run to resume" in capsys.readouterr().err
    assert wl["spec"]["active"] is False


def test_resume_names_the_exempt_label_of_the_policy_that_released_the_job(
    api: CliApi, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy with an exempt label of its own: the default one would not keep the job running."""
    api.jobs["team-a/llm"] = {
        "metadata": {"uid": "uid-1", "labels": {"advisor.trainjob-advisor.io/exempt": "true"}}
    }
    wl = workload(active=False)

    api.kueue = _Kueue(wl)  # type: ignore[assignment]
    api.policies = {
        "own": {
            "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
            "kind": "AdvisorPolicy",
            "metadata": {"name": "own", "uid": "p-1", "generation": 3},
            "spec": {"safety": {"exemptLabel": "example.com/no-advisor"}},
            "status": {"observedGeneration": 3},
        }
    }
    released = {"kind": "release-quota", "policy": "own", "rule": "overfitting", "outcome": "done"}
    api.items.append({"metadata": {"namespace": "team-a", "name": "llm"}, "status": {"actions": [released]}})
    assert cli.main(["resume", "team-a/llm"]) == 0
    out = capsys.readouterr().out
    assert "kubectl label trainjob -n team-a llm example.com/no-advisor=true" in out, out
    assert "exempt label of own" not in out  # the default label it carries is not the policy's
    released["policy"] = "unreadable"
    wl["spec"]["active"] = False
    assert cli.main(["resume", "team-a/llm"]) == 0
    out = capsys.readouterr().out
    assert "could not be read" in out and "advisor.trainjob-advisor.io/exempt" in out


def test_run_rejects_bad_flags() -> None:
    assert cli.main(["run", "--max-writes-per-second", "0"]) == 2
    assert cli.main(["run", "--metrics-port", "70000"]) == 2
    assert cli.main(["run", "--save-window-check", "--save-window-controller-name", " "]) == 2
    assert cli.main(["run", "--save-window-check", "--save-window-controller-name", "x" * 254]) == 2


def test_run_answers_the_save_window_checks_of_the_controller_name_it_is_given(monkeypatch: Any) -> None:
    """Each namespace shard answers the checks of its own controllerName; the default is the one
    the kustomize component's AdmissionCheck names."""
    from advisor.commands import run as run_command
    from advisor.controller import cliutil, operator
    from advisor.controller.savecheck import CONTROLLER_NAME

    seen: list[Any] = []

    async def fake_run(options: Any) -> None:
        seen.append(options)

    monkeypatch.setattr(cliutil, "probe_cluster", lambda args: None)
    monkeypatch.setattr(cliutil, "configure_logging", lambda *a: None)
    monkeypatch.setattr(operator, "run_operator", fake_run)
    shard = "trainjob-advisor.io/tjb-trainjob-advisor-save-window"
    argv = ["run", "-n", "team-b", "--save-window-check", "--save-window-controller-name", shard]
    assert cli.main(argv) == 0
    assert cli.main(["run", "-n", "team-a", "--save-window-check"]) == 0
    assert [(o.save_window_check, o.save_window_controller) for o in seen] == [
        (True, shard),
        (True, CONTROLLER_NAME),
    ]
    assert run_command.CHECK_CONTROLLER_NAME == CONTROLLER_NAME


def test_a_watch_refused_for_good_ends_run_with_the_missing_right_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """kopf's watch of a resource the ServiceAccount may not list gives up after its retries: the
    process ended with "internal error: APIForbiddenError"."""
    from advisor.controller import cliutil, operator

    class APIForbiddenError(Exception):
        """kopf's (``kopf._cogs.clients.errors``, private): a ``status`` and the server's ``message``."""

        status = 403

        def __init__(self, message: str) -> None:
            super().__init__(message)
            self.message = message

    message = (
        'advisorpolicies.advisor.trainjob-advisor.io is forbidden: User "system:serviceaccount:'
        'trainjob-advisor-system:ta" cannot list resource "advisorpolicies"'
    )

    async def refused(options: Any) -> None:
        raise APIForbiddenError(message)

    monkeypatch.setattr(cliutil, "probe_cluster", lambda args: None)
    monkeypatch.setattr(cliutil, "configure_logging", lambda *a: None)
    monkeypatch.setattr(operator, "run_operator", refused)
    assert cli.main(["run", "-n", "team-a"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "403 Forbidden" in err and 'cannot list resource "advisorpolicies"' in err
    assert "kubectl auth can-i --list" in err

    async def broken(options: Any) -> None:
        raise RuntimeError("a defect")

    monkeypatch.setattr(operator, "run_operator", broken)
    with pytest.raises(RuntimeError):  # anything else is not dressed up as bad RBAC
        cli.main(["run", "-n", "team-a"])


def test_a_missing_object_and_a_missing_kind_are_told_apart() -> None:
    """A TrainJob deleted meanwhile is "not found"; a kind the API server does not serve (its CRD
    not installed) says so, from the API server's own 404 body."""
    from kubernetes.client.exceptions import ApiException

    gone = ApiException(status=404, reason="Not Found")
    gone.body = '{"reason":"NotFound","message":"trainjobs.trainer.kubeflow.org \\"ft\\" not found"}'
    assert str(cliutil.api_error(gone, "TrainJob a/ft")) == "TrainJob a/ft not found"
    kind = ApiException(status=404, reason="Not Found")
    kind.body = '{"reason":"NotFound","message":"the server could not find the requested resource"}'
    assert "does not serve this kind (is its CRD installed?)" in str(cliutil.api_error(kind, "TrainJob a/ft"))
    forbidden = ApiException(status=403, reason="Forbidden")
    assert "forbidden" in str(cliutil.api_error(forbidden, "TrainJob a/ft"))


def test_run_names_its_policy_status_entry_after_its_lease(monkeypatch: Any) -> None:
    """Each namespace shard writes its own entry of the AdvisorPolicies' status.shards, keyed by its
    Lease; a cluster-wide controller without leader election uses the default Lease's key, as a
    single release with it does (one entry whether leader election is on or off). Without leader
    election no Lease tells two namespace-scoped controllers apart: their namespaces do."""
    from advisor.controller import cliutil, operator
    from advisor.controller.policystatus import DEFAULT_SHARD

    seen: list[Any] = []

    async def fake_run(options: Any) -> None:
        seen.append(options)

    monkeypatch.setattr(cliutil, "probe_cluster", lambda args: None)
    monkeypatch.setattr(cliutil, "configure_logging", lambda *a: None)
    monkeypatch.setattr(operator, "run_operator", fake_run)
    monkeypatch.setenv("POD_NAMESPACE", "trainjob-advisor-system")  # the pod's, as the manifests install it
    assert cli.main(["run", "-A"]) == 0
    assert cli.main(["run", "-n", "team-a", "--leader-elect"]) == 0
    assert cli.main(["run", "-n", "team-b", "-n", "team-a"]) == 0
    assert cli.main(["run", "-n", "team-c"]) == 0
    monkeypatch.setenv("POD_NAMESPACE", "advisor")
    assert cli.main(["run", "-n", "team-c", "--leader-elect", "--leader-election-id", "tjb"]) == 0
    assert [o.engine.status_shard for o in seen] == [
        DEFAULT_SHARD,
        DEFAULT_SHARD,
        f"{DEFAULT_SHARD}[team-a,team-b]",
        f"{DEFAULT_SHARD}[team-c]",
        "advisor/tjb",
    ]


def test_a_refused_watch_is_logged_without_its_traceback() -> None:
    """kopf logs each watch the API server refused (403) with a traceback before ``run`` ends with
    the one line naming the right: the line stays, the traceback goes (other errors keep theirs)."""
    import io
    import logging

    from advisor.controller import cliutil

    class APIForbiddenError(Exception):  # kopf's, as far as the filter reads it
        status = 403

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        cliutil.configure_logging("text", "info")
        stream = io.StringIO()
        root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
        log = logging.getLogger("kopf._cogs.aiokits.aiotasks")
        for exc in (
            APIForbiddenError("advisorpolicies is forbidden"),
            RuntimeError("a bug"),
        ):
            try:
                raise exc
            except Exception as caught:
                log.exception(f"Watcher has failed: {caught}")
        text = stream.getvalue()
        assert "Watcher has failed: advisorpolicies is forbidden" in text
        assert text.count("Traceback") == 1 and "RuntimeError: a bug" in text
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_compare_names_a_best_checkpoint_reported_late_by_the_steps_it_was_made_between(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A platform trial: BEST CHECKPOINT read "step 3071" where the trainer had evaluated and saved
    at step 3,000 and reported the evaluation at step 3,071. The job reports no eval step: the
    table names the steps the evaluation was made between, and the JSON carries the lower one."""
    import dataclasses

    late = dataclasses.replace(_eval_judged(0.50, 0.47, 0.53, "learning", 3071), best_made_after=3001)
    fake = CliApi(
        [
            tjf("a", "late", mean=0.40, p10=0.38, p90=0.42, state=late),
            tjf(
                "a",
                "own",
                mean=0.41,
                p10=0.39,
                p90=0.43,
                state=_eval_judged(0.52, 0.5, 0.54, "learning", 3000),
            ),
        ]
    )
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: fake)
    assert cli.main(["compare", "late", "own", "-n", "a", "-o", "json"]) == 0
    rows = {d["run"]: d for d in json.loads(capsys.readouterr().out)}
    assert rows["a/late"]["bestStep"] == 3071 and rows["a/late"]["bestMadeAfter"] == 3001
    assert rows["a/own"]["bestStep"] == 3000 and rows["a/own"]["bestMadeAfter"] is None
    assert cli.main(["compare", "late", "own", "-n", "a"]) == 0
    out = capsys.readouterr().out
    assert "steps 3002-3071: 0.47" in out and "step 3000: 0.5" in out


@pytest.mark.parametrize("phase", ["finished", "suspended"])
def test_compare_reads_how_a_finished_or_released_run_ended_not_its_phase(
    phase: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once a job ends (or is released) its STATE is the phase, and its learning state keeps the
    judgement: a run that diverged to NaN read P(BEST) 10%, and one released for overfitting was
    named best at 100% by its training loss, where the same runs' logs read "not ranked"."""
    diverged = tjf(
        "a", "blew-up", mean=0.2, p10=0.1, p90=0.3, state=_eval_judged(7.0, 1.8, 22.0, "diverging", 300)
    )
    overfit = tjf(
        "a",
        "overfit",
        mean=0.01,
        p10=0.005,
        p90=0.02,
        state=_eval_judged(0.92, 0.85, 0.99, "overfitting", 300),
    )
    healthy = tjf("a", "healthy", mean=0.40, p10=0.38, p90=0.42)
    for item in (diverged, overfit):
        item["status"]["state"] = phase
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: CliApi([diverged, overfit, healthy]))
    assert cli.main(["compare", "a/blew-up", "a/overfit", "a/healthy", "--metric", "loss", "-o", "json"]) == 0
    data = {d["run"]: d for d in json.loads(capsys.readouterr().out)}
    assert data["a/healthy"]["probabilityBest"] == pytest.approx(1.0)
    assert data["a/blew-up"]["probabilityBest"] is None and data["a/overfit"]["probabilityBest"] is None
    assert cli.main(["compare", "a/blew-up", "a/overfit", "a/healthy", "--metric", "loss"]) == 0
    out = capsys.readouterr().out
    assert "not ranked, diverging: a/blew-up" in out and "not ranked, overfitting: a/overfit" in out


def test_explain_names_the_task_scores_later_best_beside_the_judged_series_best() -> None:
    """A classifier judged by its eval loss (best at step 900) whose accuracy kept improving to
    step 1,900: explain called step 900 "the checkpoint to keep" alone, where the release reason
    and ``forecast`` name both checkpoints."""
    from advisor.commands.explain import _learning_lines

    st: dict[str, Any] = {
        "label": "overfitting",
        "probabilities": {"overfitting": 0.9},
        "metric": "eval_loss",
        "taskMetric": "eval_accuracy",
        "bestStep": 900,
        "bestValue": 0.2865,
        "evalsSinceBest": 11,
        "series": {
            "eval_loss": {
                "final": {"mean": 0.37, "p10": 0.36, "p90": 0.38},
                "bestStep": 900,
                "bestValue": 0.2865,
            },
            "eval_accuracy": {
                "final": {"mean": 0.94, "p10": 0.93, "p90": 0.95},
                "bestStep": 1900,
                "bestValue": 0.943,
            },
        },
    }
    judged = next(line for line in _learning_lines(st) if line.startswith("  judged by"))
    assert (
        "at step 900 (the checkpoint to keep by it; or by eval_accuracy, best 0.943 at step 1900)" in judged
    )
    earlier = {
        **st,
        "series": {**st["series"], "eval_accuracy": {**st["series"]["eval_accuracy"], "bestStep": 800}},
    }
    judged = next(line for line in _learning_lines(earlier) if line.startswith("  judged by"))
    assert "at step 900 (the checkpoint to keep), 11 evaluation(s) since" in judged


def test_explain_notes_an_eval_series_the_run_stopped_reporting() -> None:
    """A metric reported only mid-run (eval_bleu, evaluated every 220 steps to step 1,760 of a run at
    step 2,900) was shown with a forecast as if live; one still reported is not noted."""
    from advisor.commands.explain import _learning_lines

    final = {"mean": 8.1, "p10": 7.6, "p90": 8.7}
    st: dict[str, Any] = {
        "label": "learning",
        "probabilities": {"learning": 0.9},
        "metric": "eval_loss",
        "series": {
            "eval_loss": {"final": final, "lastStep": 2900, "points": 29},
            "eval_bleu": {"final": final, "lastStep": 1760, "points": 8},
        },
    }
    lines = _learning_lines(st, "learning", 2900.0)
    bleu = next(line for line in lines if line.startswith("  eval_bleu"))
    loss = next(line for line in lines if line.startswith("  eval_loss"))
    assert bleu.endswith("; not evaluated since step 1,760, 1,140 steps ago") and "not evaluated" not in loss
    assert "not evaluated" not in "".join(_learning_lines(st, "learning", None))
