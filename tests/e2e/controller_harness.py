"""The controller under test, shared by the e2e modules that run it in-process.

Its kopf operator runs on a thread with the ServiceAccount identity that ``manifests/rbac``
binds, against the real API server of the e2e harness; ``close()`` stops it and re-raises
anything it died of.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import controlplane as cp

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.operator import OperatorOptions, run_operator

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

    def __init__(self, plane: cp.ControlPlane, namespace: str, config: EngineConfig = FAST) -> None:
        self.stop = threading.Event()
        self.engine: Engine | None = None
        self.error: BaseException | None = None
        options = OperatorOptions(
            kubeconfig=str(plane.controller_kubeconfig),
            namespaces=(namespace,),
            metrics_port=None,
            watch_pytorchjobs=False,
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
