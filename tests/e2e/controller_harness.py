"""The controller under test, shared by the e2e modules that run it in-process.

Its kopf operator runs on a thread with the ServiceAccount identity that ``manifests/rbac`` and
``manifests/components/act`` bind (the apply overlay's), against the real API server of the e2e
harness; ``close()`` stops it and re-raises anything it died of.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import controlplane as cp
import pytest

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.operator import run_operator
from advisor.controller.operator_options import OperatorOptions

TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
ADVISOR = ("advisor.trainjob-advisor.io", "v1alpha1")
MERGE = "application/merge-patch+json"
#: short intervals so that a scenario takes seconds, not minutes
FAST = EngineConfig(
    write_interval_s=0.5,
    forecast_interval_s=0.5,
    evaluate_interval_s=1.0,
    max_writes_per_second=50,
    policy_status_interval_s=1.0,
)


def wait_for(fn: Callable[[], Any], what: str, timeout: float = 60.0, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


class Controller:
    """The controller's kopf operator on a thread, as the ServiceAccount."""

    def __init__(
        self,
        plane: cp.ControlPlane,
        namespace: str,
        config: EngineConfig = FAST,
        *,
        watch_pytorchjobs: bool = False,
        save_window_check: bool = False,
    ) -> None:
        self.stop = threading.Event()
        self.engine: Engine | None = None
        self.error: BaseException | None = None
        options = OperatorOptions(
            kubeconfig=str(plane.controller_kubeconfig),
            namespaces=(namespace,),
            metrics_port=None,
            watch_pytorchjobs=watch_pytorchjobs,
            save_window_check=save_window_check,
            engine=config,
        )

        def main() -> None:
            try:
                asyncio.run(run_operator(options, stop_flag=self.stop, on_engine=self._set))
            except BaseException as exc:  # surfaced by close()
                self.error = exc

        self.thread = threading.Thread(target=main, name="controller-under-test", daemon=True)
        self.thread.start()
        wait_for(lambda: self.engine is not None and self.engine.ready, "the controller to start", timeout=60)

    def _set(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the controller did not stop"
        if self.error is not None:
            raise self.error


def queue_objects(cq: str, namespace: str, *, gpus: int = 16, **spec: Any) -> list[dict[str, Any]]:
    """A ResourceFlavor, a ClusterQueue of ``gpus`` GPUs (``spec``: more of its spec, such as
    ``preemption`` or ``admissionChecksStrategy``) and the LocalQueue ``queue`` in ``namespace``."""
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": cq}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                **spec,
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {"name": cq, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "queue", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    ]


def release_reservation(custom: Any, namespace: str, name: str, *, reason: str = "Deactivated") -> float:
    """Play Kueue's job integration after an eviction (minimalkueue runs none): the job is stopped
    and the reservation released as ``workload.UnsetQuotaReservationWithCondition`` does it:
    QuotaReserved and Admitted False, the admission cleared, ``Requeued`` saying why (``reason``:
    ``Deactivated`` for the advisor's own releases, not requeued; ``Preempted``, requeued), and the
    admitted time added to ``accumulatedPastExecutionTimeSeconds`` (whole seconds). Re-activation
    is then a new admission. Returns the seconds added."""
    from datetime import UTC, datetime

    from advisor.controller.kueue import parse_time

    wl = custom.get_namespaced_custom_object(*KUEUE, namespace, "workloads", name)
    conditions = (wl.get("status") or {}).get("conditions") or []
    now = time.time()
    admitted = next((c for c in conditions if c["type"] == "Admitted" and c["status"] == "True"), None)
    since = parse_time(admitted["lastTransitionTime"]) if admitted is not None else None
    spent = int(now - since) if since is not None else 0
    stamp = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    message = "deactivated" if reason == "Deactivated" else "evicted"
    kept = [c for c in conditions if c["type"] not in ("QuotaReserved", "Admitted", "Requeued")]
    changed = [
        ("QuotaReserved", "False", "Pending"),
        ("Admitted", "False", "NoReservation"),
        ("Requeued", "False" if reason == "Deactivated" else "True", reason),
    ]
    kept += [
        {"type": t, "status": s, "reason": r, "message": message, "lastTransitionTime": stamp}
        for t, s, r in changed
    ]
    past = int((wl.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0) + spent
    status = {"admission": None, "conditions": kept, "accumulatedPastExecutionTimeSeconds": past}
    custom.patch_namespaced_custom_object_status(
        *KUEUE, namespace, "workloads", name, {"status": status}, _content_type=MERGE
    )
    return float(spent)


def workload_admitted(custom: Any, namespace: str, name: str) -> bool:
    wl = custom.get_namespaced_custom_object(*KUEUE, namespace, "workloads", name)
    conds = (wl.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conds)


@contextlib.contextmanager
def admitting(control_plane: cp.ControlPlane, namespace: str, *, gpus: int = 64) -> Iterator[str]:
    """Real Kueue admits the Workloads of ``namespace`` (LocalQueue ``queue``): the advisor judges
    only admitted jobs, so a Workload nobody admits stays pending for good. Skips without Kueue."""
    if not control_plane.kueue:
        pytest.skip(f"needs real Kueue: {control_plane.kueue_reason}")
    cq = f"gpu-{namespace[-6:]}"
    control_plane.apply(queue_objects(cq, namespace, gpus=gpus))
    try:
        yield cq
    finally:
        control_plane.delete_namespace(namespace)
        control_plane.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", cq, wait_s=30)
        control_plane.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", cq, wait_s=30)
