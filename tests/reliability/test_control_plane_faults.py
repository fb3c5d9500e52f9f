"""The API server and etcd restarted, the API server paused, the network between the controller
and the API server degraded: the controller reconnects, loses and duplicates no stored history,
and keeps every forecast current once the fault is over."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import controlplane
import pytest
from harness import (
    ControllerProcess,
    FaultProxy,
    Faults,
    Jobs,
    Reporter,
    apply_policy,
    own_lease,
    proxied_kubeconfig,
    wait_for,
)

#: jobs reporting at once: 20 by default (the tier stays within its CI budget on 2 shared cores);
#: TRAINJOB_ADVISOR_RELIABILITY_JOBS=200 is the issue's figure (README "Reliability" has its run)
JOBS = int(os.environ.get("TRAINJOB_ADVISOR_RELIABILITY_JOBS", "20"))
#: one reporter thread reports every job in turn: with many jobs a round takes longer than 1 s
SLACK = max(1.0, JOBS / 20)
#: how long the API server is SIGSTOPped: 40 s by default, past the controller's 30 s read timeout
#: (a stopped server still accepts connections, so only the read timeout ends a request; a shorter
#: pause is waited out, not retried); TRAINJOB_ADVISOR_RELIABILITY_PAUSE_S=120 is the issue's two
#: minutes (README "Reliability")
PAUSE_S = float(os.environ.get("TRAINJOB_ADVISOR_RELIABILITY_PAUSE_S", "40"))


def _check_history(jobs: Jobs, names: list[str], before: dict[str, list[int]]) -> dict[str, int]:
    """What must hold for every job's stored history after the faults (and the figures)."""
    points = 0
    for name in names:
        steps = jobs.history_steps(name)
        assert steps == sorted(set(steps)), f"{name}: duplicated or reordered points {steps}"
        assert set(steps) <= set(jobs.attempted[name]), f"{name}: a point nobody reported"
        assert set(before[name]) <= set(steps), f"{name}: points stored before the fault were lost"
        assert steps[-1] == jobs.acked[name][-1], f"{name}: the last acknowledged report is missing"
        points += len(steps)
    return {"jobs": len(names), "points": points}


def _caught_up(jobs: Jobs, names: list[str]) -> bool | str:
    behind = [f"{n}: {jobs.history_steps(n)[-1:]} != {jobs.acked[n][-1:]}" for n in names]
    behind = [
        b for b, n in zip(behind, names, strict=True) if jobs.history_steps(n)[-1:] != jobs.acked[n][-1:]
    ]
    return not behind or False


@pytest.mark.parametrize("target", ["kube-apiserver", "etcd"])
def test_a_restart_loses_and_duplicates_no_history(
    plane: controlplane.ControlPlane, admin: Any, namespace: str, tmp_path: Path, target: str
) -> None:
    """Must hold: after ``target`` is killed (SIGKILL) and started again while every one of JOBS
    jobs keeps reporting, each stored history is strictly increasing (no duplicate), contains every point
    it held before the restart, contains no step that was never reported, ends at the last
    report the API server acknowledged, and the controller process never exits."""
    jobs = Jobs(admin, namespace)
    names = [f"job-{i:02d}" for i in range(JOBS)]
    for name in names:
        jobs.create(name)
    # a lease longer than the outage: with the default 15 s / 10 s an etcd restart that takes
    # longer than the renew deadline makes the leader step down and exit, as designed (its pod
    # restarts); this test is about the history, the election has its own tests
    ctl = ControllerProcess(
        plane.controller_kubeconfig,
        namespace,
        tmp_path,
        lease=own_lease(plane),
        lease_args=("--lease-duration=60", "--renew-deadline=45", "--retry-period=2"),
    )
    try:
        wait_for(ctl.leading, "the controller to lead and start", timeout=90)
        reporter = Reporter(jobs, names, period_s=1.0)
        wait_for(lambda: all(len(jobs.history_steps(n)) >= 3 for n in names), "histories", timeout=90 * SLACK)
        before = {n: jobs.history_steps(n) for n in names}
        plane.restart(target, down_s=3.0, kill=True)
        time.sleep(5 * SLACK)  # reports go on after the restart
        reporter.stop()
        wait_for(lambda: _caught_up(jobs, names), "the controller to catch up", timeout=120 * SLACK)
        assert ctl.proc.poll() is None, ctl.log()[-3000:]
        figures = _check_history(jobs, names, before)
        assert figures["points"] > sum(map(len, before.values()))
        print(f"\n[reliability] {target} SIGKILLed and restarted: {figures}, failed reports {jobs.errors}")
    finally:
        ctl.stop()


def test_a_paused_api_server_is_backed_off_from_and_recovered_from(
    plane: controlplane.ControlPlane, admin: Any, namespace: str, tmp_path: Path
) -> None:
    """Must hold: while the API server is SIGSTOPped for PAUSE_S (40 s by default, the issue's 2
    minutes on request; longer than the 30 s read timeout either way), the controller's writes fail and
    are retried after jittered waits (its log says so: at least one retry, and the waits differ
    when there are several; their growth is unit-tested in tests/controller/test_retry.py), it
    does not exit, and within 60 s of the API server's return every forecast shows the last
    acknowledged report again.

    A Recommend-only stall rule (``for: 4s``) makes sure there is something to write while the
    server is stopped: the reports stop with it, the advice turns (every job silent at once reads
    ``progress-outage``) and the controller must write that; without it the pause may fall where
    nothing is pending, and nothing fails."""
    jobs = Jobs(admin, namespace)
    names = [f"job-{i:02d}" for i in range(5)]
    for name in names:
        jobs.create(name)
    stall = {"stall": {"for": "4s", "action": "Recommend"}}
    with apply_policy(plane, f"pause-{namespace[-5:]}", namespace, rules=stall):
        ctl = ControllerProcess(
            plane.controller_kubeconfig,
            namespace,
            tmp_path,
            lease=own_lease(plane),
            # a lease longer than the pause: this test is about the API server pause, not the
            # election (with the default 10 s renew deadline the leader steps down and its pod restarts)
            lease_args=(
                f"--lease-duration={PAUSE_S + 40:.0f}",
                f"--renew-deadline={PAUSE_S + 25:.0f}",
                "--retry-period=2",
            ),
        )
        try:
            wait_for(ctl.leading, "the controller to lead and start", timeout=90)
            reporter = Reporter(jobs, names, period_s=0.5)
            wait_for(lambda: all(len(jobs.history_steps(n)) >= 3 for n in names), "histories", timeout=60)
            before = {n: jobs.history_steps(n) for n in names}
            plane.pause("kube-apiserver")
            try:
                time.sleep(PAUSE_S)
            finally:
                plane.resume("kube-apiserver")
            resumed = time.monotonic()
            time.sleep(3)
            reporter.stop()
            wait_for(lambda: _caught_up(jobs, names), "the controller to catch up", timeout=60)
            caught_up = time.monotonic() - resumed
            assert ctl.proc.poll() is None, ctl.log()[-3000:]
            _check_history(jobs, names, before)
            waits = [float(w) for w in re.findall(r"retrying in ([0-9.]+)s", ctl.log())]
            assert waits, f"nothing was retried: {ctl.log()[-3000:]}"
            assert len(waits) < 3 or len(set(waits)) > 1, f"the waits are not jittered: {waits}"
            print(
                f"\n[reliability] API server paused {PAUSE_S:.0f}s: {len(waits)} retries logged, waits "
                f"{min(waits):.2f}-{max(waits):.2f}s; caught up {caught_up:.1f}s after SIGCONT"
            )
        finally:
            ctl.stop()


def test_latency_resets_and_refusals_between_controller_and_api_server(
    plane: controlplane.ControlPlane, admin: Any, namespace: str, tmp_path: Path
) -> None:
    """Must hold: through a proxy that adds 150 ms to every chunk and resets 3% of them (both
    directions), then refuses every new connection for 10 s, the controller keeps running and
    ends with every history intact and current, as without the proxy."""
    host, port = plane.server.removeprefix("https://").split(":")
    proxy = FaultProxy((host, int(port)), Faults(latency_s=0.15, reset_probability=0.03, seed=7))
    kubeconfig = proxied_kubeconfig(plane.controller_kubeconfig, proxy.port, tmp_path / "proxied.kubeconfig")
    jobs = Jobs(admin, namespace)
    names = [f"job-{i:02d}" for i in range(5)]
    for name in names:
        jobs.create(name)
    ctl = ControllerProcess(
        kubeconfig,
        namespace,
        tmp_path,
        lease=own_lease(plane),
        lease_args=("--lease-duration=60", "--renew-deadline=45", "--retry-period=2"),
    )
    try:
        wait_for(ctl.leading, "the controller to start through the proxy", timeout=120)
        reporter = Reporter(jobs, names, period_s=0.5)
        wait_for(lambda: all(len(jobs.history_steps(n)) >= 3 for n in names), "histories", timeout=90)
        before = {n: jobs.history_steps(n) for n in names}
        time.sleep(10)
        proxy.faults.refuse = True
        time.sleep(10)
        proxy.faults.refuse = False
        time.sleep(5)
        reporter.stop()
        proxy.faults.reset_probability = 0.0
        wait_for(lambda: _caught_up(jobs, names), "the controller to catch up", timeout=90)
        assert ctl.proc.poll() is None, ctl.log()[-3000:]
        _check_history(jobs, names, before)
        assert proxy.counts["resets"] > 0 and proxy.counts["refused"] > 0, proxy.counts
        print(f"\n[reliability] through the fault proxy: {proxy.counts}")
    finally:
        ctl.stop()
        proxy.close()
