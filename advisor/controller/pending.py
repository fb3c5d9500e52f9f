"""An action in flight: what the actuator needs to finish it, persisted with the job's status.

Step 2 of the action protocol (``advisor.controller.actuator``) records the request here and
writes it to the TrainJobForecast before the mutation; a controller restarted in between reads it
back (``from_status``) and finishes what it still shows ``recorded``. Typed, with one codec at the
persistence boundary: the entry was a dict read back by string keys, where a misspelt key reads
as None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from advisor.model import ActionKind, ActionRecord
from advisor.protocol import DEFAULT_CHECKPOINT_TIMEOUT_S

__all__ = ["AWAITING_ACK", "RECORDED", "PendingAction"]

#: recorded and durable, not carried out yet (a restart carries it out)
RECORDED = "recorded"
#: a checkpoint requested on the pods, waiting for its acknowledgement or its timeout
AWAITING_ACK = "awaiting-ack"


@dataclass(frozen=True)
class PendingAction:
    """One request in flight; ``params`` are the action's JSON-safe parameters."""

    kind: ActionKind
    stage: str = RECORDED
    time: float | None = None
    timeout_s: float = DEFAULT_CHECKPOINT_TIMEOUT_S
    policy: str = ""
    rule: str = ""
    reason: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, rec: ActionRecord, params: Mapping[str, Any], timeout_s: float) -> PendingAction:
        """The entry of a request just recorded as ``rec``."""
        return cls(rec.kind, RECORDED, rec.time, timeout_s, rec.policy, rec.rule, rec.reason, dict(params))

    def awaiting(self) -> PendingAction:
        return replace(self, stage=AWAITING_ACK)

    def to_status(self) -> dict[str, Any]:
        """The entry as the status keeps it (the keys every version has written)."""
        return {
            "kind": self.kind.value,
            "params": dict(self.params),
            "stage": self.stage,
            "time": self.time,
            "timeoutSeconds": self.timeout_s,
            "policy": self.policy,
            "rule": self.rule,
            "reason": self.reason,
        }

    @classmethod
    def from_status(cls, data: Mapping[str, Any]) -> PendingAction | None:
        """An entry read back from a status (None: not one this version can finish, an unknown
        kind say, which is left alone rather than guessed at). Fields an older version did not
        write take their defaults."""
        try:
            kind = ActionKind(str(data.get("kind")))
        except ValueError:
            return None
        at, timeout = _number(data.get("time")), _number(data.get("timeoutSeconds"))
        params = data.get("params")
        return cls(
            kind=kind,
            stage=str(data.get("stage") or RECORDED),
            time=at,
            timeout_s=timeout if timeout is not None else DEFAULT_CHECKPOINT_TIMEOUT_S,
            policy=str(data.get("policy") or ""),
            rule=str(data.get("rule") or ""),
            reason=str(data.get("reason") or ""),
            params=dict(params) if isinstance(params, Mapping) else {},
        )


def _number(value: object) -> float | None:
    """``value`` as a finite float, None when it is none."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
