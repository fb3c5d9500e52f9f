"""The decision rules, one module each, all behind ``evaluate(ctx, rule_spec) -> Outcome``."""

from __future__ import annotations

from policies.rules import checkpoint, deadline, divergence, elastic, guard, overfitting, plateau, stall
from policies.rules.base import Context, Outcome

__all__ = ["RULES", "Context", "Outcome"]

#: (name, module, attribute of ``Rules``), in evaluation order: the most serious conditions first
RULES = (
    (divergence.NAME, divergence, "divergence"),
    (stall.NAME, stall, "stall"),
    (overfitting.NAME, overfitting, "overfitting"),
    (plateau.NAME, plateau, "plateau"),
    (deadline.NAME, deadline, "deadline"),
    (guard.NAME, guard, "preemption_guard"),
    (checkpoint.NAME, checkpoint, "checkpoint"),
    (elastic.NAME, elastic, "elastic"),
)
