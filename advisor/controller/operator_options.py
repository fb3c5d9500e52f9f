"""What ``run_operator`` is asked to do (``OperatorOptions``), and the line that says it at start-up.

Apart from ``advisor.controller.operator`` because the start-up listing it runs
(``advisor.controller.initial_listing``) reads the options too: both import them from here, and
the listing need not import the operator that imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from advisor.controller.config import EngineConfig
from advisor.controller.leader import LeaseConfig
from advisor.controller.savecheck import CONTROLLER_NAME

__all__ = ["OperatorOptions", "startup_line"]


@dataclass
class OperatorOptions:
    kubeconfig: str | None = None
    context: str | None = None
    namespaces: Sequence[str] = ()
    metrics_port: int | None = 8080
    metrics_host: str = "0.0.0.0"
    liveness_endpoint: str | None = None
    watch_pytorchjobs: bool = True
    watch_kueue: bool = True
    #: the Kueue API version to watch; None: the one the server serves (``run_operator`` asks)
    kueue_version: str | None = None
    tick_s: float = 0.2
    engine: EngineConfig = field(default_factory=EngineConfig)
    #: None: no leader election (a single replica, tests, ``run`` on a laptop)
    leader_election: LeaseConfig | None = None
    identity: str | None = None
    #: the namespace of the ConfigMap that keeps deleted jobs' SIGTERM evidence per runtime
    #: (``advisor.controller.evidence``); None: kept in memory only
    evidence_namespace: str | None = None
    #: answer the save-window AdmissionChecks (``advisor.controller.savecheck``; needs Kueue)
    save_window_check: bool = False
    #: the ``spec.controllerName`` of the AdmissionChecks it answers (one per namespace shard)
    save_window_controller: str = CONTROLLER_NAME


def startup_line(options: OperatorOptions) -> str:
    """What this controller is about to do, in one line at start-up (an operator reading the log of
    a pod asks first: which version, which namespaces, may it act, may it boost)."""
    from advisor import __version__

    cfg = options.engine
    namespaces = ", ".join(options.namespaces) if options.namespaces else "every namespace"
    mode = (
        "every policy held to Recommend (--recommend-only)"
        if cfg.recommend_only
        else "policies act in their own mode"
    )
    lease = options.leader_election
    election = f"on (Lease {lease.name})" if lease is not None else "off"
    return (
        f"trainjob-advisor {__version__}: watching {namespaces}; {mode}; "
        f"Kueue {'watched' if options.watch_kueue else 'not watched'}, PriorityBoost "
        f"{'on' if cfg.priority_boost_enabled else 'off'}, save-window check "
        f"{f'on (controllerName {options.save_window_controller})' if options.save_window_check else 'off'}; "
        f"leader election {election}"
    )
