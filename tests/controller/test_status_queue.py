"""``status --by queue`` counts the GPUs jobs hold (admitted, running), and the namespace is the
kubeconfig context's, like kubectl."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor import cli
from advisor.controller import cliutil
from advisor.controller.cliutil import kubeconfig_namespace
from advisor.controller.summary import summarize
from tests.controller.test_commands import CliApi, tjf


def _with_job(obj: dict[str, Any], **job: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"]["job"].update(job)
    if "holdsQuota" not in job:  # as the controller renders it for these (see lifecycle.holds_quota)
        j = out["status"]["job"]
        out["status"]["job"]["holdsQuota"] = j["phase"] == "running" and j["active"] and j["admitted"]
    return out


def test_only_admitted_running_jobs_count_their_gpus() -> None:
    base = tjf("a", "run", mean=0.3, p10=0.28, p90=0.33)
    items = [
        base,
        _with_job(tjf("a", "pending", mean=0.3, p10=0.28, p90=0.33), admitted=False, phase="pending"),
        _with_job(tjf("a", "done", mean=0.3, p10=0.28, p90=0.33), phase="finished"),
        _with_job(tjf("a", "released", mean=0.3, p10=0.28, p90=0.33), active=False, phase="suspended"),
    ]
    (queue,) = summarize((o["metadata"]["namespace"], o["status"]) for o in items)
    assert queue.jobs == 4 and queue.gpus == 8  # the one running job's 8 GPUs, not 32
    # a run its trainer reports done, whose Workload Kueue still admits (a final save): it holds them
    saving = _with_job(tjf("a", "saving", mean=0.3, p10=0.28, p90=0.33), phase="finished", holdsQuota=True)
    (queue,) = summarize((o["metadata"]["namespace"], o["status"]) for o in [*items, saving])
    assert queue.jobs == 5 and queue.gpus == 16
    old_status = _with_job(tjf("a", "old", mean=0.3, p10=0.28, p90=0.33), phase="finished")
    del old_status["status"]["job"]["holdsQuota"]  # rendered before the field: the phase decides
    (queue,) = summarize([("a", old_status["status"])])
    assert queue.gpus == 0


def test_holds_quota_follows_kueue_not_the_trainers_own_report() -> None:
    from advisor.core.lifecycle import holds_quota
    from advisor.model import LifecycleSignals, Phase

    reported_done = LifecycleSignals(has_workload=True, progress_percentage=100.0)
    assert holds_quota(Phase.FINISHED, reported_done, active=True, admitted=True)
    completed = LifecycleSignals(has_workload=True, complete=True)
    assert not holds_quota(Phase.FINISHED, completed, active=True, admitted=True)
    assert not holds_quota(Phase.RUNNING, None, active=False, admitted=True)
    assert holds_quota(Phase.RUNNING, None, active=True, admitted=True)


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "u", "user": {}}],
                "contexts": [
                    {"name": "team-b", "context": {"cluster": "c", "user": "u", "namespace": "b"}},
                    {"name": "plain", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "team-b",
            }
        )
    )
    return path


def test_the_namespace_is_the_contexts_like_kubectl(tmp_path: Path) -> None:
    cfg = str(_kubeconfig(tmp_path))
    assert kubeconfig_namespace(cfg, None) == "b"
    assert kubeconfig_namespace(cfg, "plain") == "default"
    assert kubeconfig_namespace(str(tmp_path / "missing"), None) == "default"


def test_status_by_queue_counts_every_namespace_unless_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ClusterQueue spans namespaces: its summary read the kubeconfig's namespace alone, so a
    platform engineer's first look said "No TrainJobForecasts found in namespace default"."""
    fake = CliApi(
        [tjf("a", "x", mean=0.3, p10=0.2, p90=0.4), tjf("b", "y", mean=1.0, p10=0.9, p90=1.1, cq="q-b")]
    )
    monkeypatch.setattr(cliutil, "cluster_api", lambda args: fake)
    cfg = str(_kubeconfig(tmp_path))
    assert cli.main(["status", "--kubeconfig", cfg, "--by", "queue"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["QUEUE", "gpu-cq", "q-b"]
    assert cli.main(["status", "--kubeconfig", cfg, "--by", "queue", "-n", "b"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["QUEUE", "q-b"]
    # without --by the table is kubectl's: the kubeconfig context's namespace
    assert cli.main(["status", "--kubeconfig", cfg, "--context", "plain"]) == 0
    assert capsys.readouterr().out.strip() == "No TrainJobForecasts found in namespace default."


def test_a_status_no_controller_keeps_any_more_reads_stale_and_counts_nothing_it_cannot_know() -> None:
    """A platform trial narrowed watchNamespaces: the dropped namespaces' forecasts read
    ``learning`` with an ETA for ever, and the queue summary counted their GPUs (25 on a queue
    the controller's own metric put at 11)."""
    from advisor.commands.status import rows
    from advisor.controller.render import iso
    from advisor.controller.summary import STALE_AFTER_S, shown_state

    now = 1_800_000_000.0
    fresh = _with_job(tjf("a", "fresh", mean=0.3, p10=0.28, p90=0.33), phase="running")
    fresh["status"]["observedAt"] = iso(now - 60)
    old = copy.deepcopy(fresh)
    old["metadata"]["name"] = "old"
    old["status"]["observedAt"] = iso(now - STALE_AFTER_S - 60)
    done = _with_job(copy.deepcopy(old), phase="finished")
    done["status"]["state"] = "finished"
    assert [shown_state(o["status"], now) for o in (fresh, old, done)] == [
        fresh["status"]["state"],
        "stale",
        "finished",
    ]
    assert shown_state(old["status"], None) == fresh["status"]["state"]  # as written, without a now
    (queue,) = summarize([("a", fresh["status"]), ("a", old["status"])], now=now)
    assert queue.jobs == 2 and queue.gpus == 8 and queue.states["unknown"] == 1
    table = rows([fresh, old], with_namespace=False, now=now)
    assert [r[6] for r in table] == [fresh["status"]["state"], "stale"]
