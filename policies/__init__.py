"""Admin policies (the ``AdvisorPolicy`` model) and the pure decision engine.

The controller and the simulator both call exactly these functions, so a policy behaves the
same on a live cluster and in a replay. Nothing here touches the API server, the event loop or
the wall clock: ``now`` is always an argument.

    from policies import load_policy, select_policy, decide
    policy = load_policy(yaml_text)                  # PolicyError(path, reason) when invalid
    chosen = select_policy(all_policies, job_view)   # most specific match, or None
    decision = decide(job_view, cluster_view, chosen, now=now)
"""

from __future__ import annotations

from policies.engine import decide, is_exempt
from policies.errors import PolicyError
from policies.loader import load_policies, load_policy, parse_spec
from policies.selection import matches, select_policy, specificity, tie_reason, tied_with
from policies.spec import Policy, PolicySpec
from policies.throughput import ThroughputModel, fit_throughput
from policies.victims import first_in_line, predict_victims
from policies.youngdaly import checkpoint_interval, young_interval

__all__ = [
    "Policy",
    "PolicyError",
    "PolicySpec",
    "ThroughputModel",
    "checkpoint_interval",
    "decide",
    "first_in_line",
    "fit_throughput",
    "is_exempt",
    "load_policies",
    "load_policy",
    "matches",
    "parse_spec",
    "predict_victims",
    "select_policy",
    "specificity",
    "tie_reason",
    "tied_with",
    "young_interval",
]
