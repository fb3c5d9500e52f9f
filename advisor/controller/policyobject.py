"""What an AdvisorPolicy object says, read on its own: the last valid generation its status
keeps, the warnings ``policy validate`` gives for it, whether it asks for Recommend mode, and a
JSON merge patch applied to it (what the API server will store). Helpers of
``advisor.controller.policybook``, kept apart from its bookkeeping.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from advisor.model import Mode
from policies.rules.base import NO_DIRECTION, direction_warnings, undirected_metrics

__all__ = ["asks_recommend", "kept_valid", "merged", "validation_warnings"]

log = logging.getLogger("advisor.controller.policybook")


def merged(target: Any, patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386) is."""
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            out[key] = merged(out.get(key), value)
        else:
            out[key] = value
    return out


def kept_valid(name: str, body: Mapping[str, Any]) -> tuple[Any, int | None] | None:
    """The policy as ``status.lastValid`` keeps its last valid generation (None: none kept, or
    what is kept no longer loads, e.g. after an upgrade that changed the policy schema)."""
    from policies import PolicyError, load_policy

    kept = (body.get("status") or {}).get("lastValid")
    if not isinstance(kept, Mapping) or not isinstance(kept.get("spec"), str):
        return None
    generation = kept.get("generation")
    try:
        spec = json.loads(kept["spec"])
        policy = load_policy({k: v for k, v in body.items() if k not in ("status", "spec")} | {"spec": spec})
    except (ValueError, PolicyError) as exc:
        log.warning("AdvisorPolicy %s: status.lastValid does not load (%s); not used", name, exc)
        return None
    return policy, generation if isinstance(generation, int) and not isinstance(generation, bool) else None


def validation_warnings(policy: Any) -> str:
    """What ``policy validate`` warns of, for whoever applied the policy with kubectl: a rule's
    metric whose name says no direction is never judged; a ``metricDirections`` entry that is
    ignored or turns a metric against its name."""
    if policy is None:
        return ""
    found = [f"{field}: {metric} is never judged" for field, metric in undirected_metrics(policy)]
    text = f"; warning: {'; '.join(found)} ({NO_DIRECTION})" if found else ""
    return text + "".join(f"; warning: {field}: {why}" for field, why in direction_warnings(policy))


def asks_recommend(body: Mapping[str, Any]) -> bool:
    """Whether an AdvisorPolicy object's own ``spec.mode`` is Recommend (read alone, whatever else
    in the spec is invalid)."""
    spec = body.get("spec")
    return isinstance(spec, Mapping) and spec.get("mode") == Mode.RECOMMEND.value
