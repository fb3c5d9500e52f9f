"""What ``policy validate`` warns of in a valid policy: settings that are legal but, in Apply mode,
act on weak evidence or on every job. A warning, not an error: an admin may mean them (a test
cluster, a policy tried on one namespace), and the CRD accepts them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from advisor.model import Mode
from policies.fields import field_specs
from policies.spec import Policy
from policies.spec_rules import RECOMMEND

__all__ = ["risk_warnings", "unit_slips"]

#: below even odds, a rule that releases acts on runs more likely still learning than not
EVEN_ODDS = 0.5
#: a window, minimum runtime or cooldown this short is most likely minutes written as a bare
#: number, which reads as seconds (``stall.for: 30`` released every run after 30 s without a step)
SECONDS_SLIP = 60.0
#: the duration fields a unit slip turns into a release on no evidence
_WINDOW_KEYS = frozenset(("for", "minRuntime", "cooldown"))


def _windows(obj: Any, path: str) -> Iterator[tuple[str, float]]:
    """(field path, seconds) of each window-like duration in a policy dataclass, recursively."""
    if not dataclasses.is_dataclass(obj):
        return
    for name, spec, _ in field_specs(type(obj)):
        value = getattr(obj, name)
        here = f"{path}.{spec.key}"
        if spec.kind == "duration" and spec.key in _WINDOW_KEYS and isinstance(value, float):
            yield here, value
        elif spec.kind == "object":
            yield from _windows(value, here)


def unit_slips(policy: Policy) -> list[tuple[str, str]]:
    """(field, why) of each window, minRuntime or cooldown shorter than a minute (but not 0, which
    says what it means): in any mode, since a Recommend policy is tried before it is applied."""
    out = []
    for field, seconds in _windows(policy.spec, "spec"):
        if 0 < seconds < SECONDS_SLIP:
            n = f"{seconds:g}"
            out.append((field, f"{n}s is {n} seconds (a bare number is seconds): for minutes write {n}m"))
    return out


def risk_warnings(policy: Policy) -> list[tuple[str, str]]:
    """(field, why) of each setting of ``policy`` that makes it act on weak evidence or on every
    job: no rules at all; and in Apply mode a release or stop on a probability below even odds or
    on a window of no length (one forecast, one noisy evaluation), a cooldown of zero (a run asked
    back may be released again at once), and no selector (every job the controller watches)."""
    rules = policy.rules
    if all(getattr(rules, f.name) is None for f in fields(rules)):
        # legal (a way to exempt some jobs), yet more often a slip: such a policy governs the
        # jobs it selects, so no other policy advises them either
        why = "no rules: it never acts, and the jobs it governs are advised by no other policy"
        return [("spec.rules", why)]
    if policy.mode is not Mode.APPLY:
        return []
    out: list[tuple[str, str]] = []
    for name, rule in (("plateau", rules.plateau), ("overfitting", rules.overfitting)):
        if rule is None or not rule.enabled or rule.action == RECOMMEND:
            continue
        field = f"spec.rules.{name}"
        if rule.probability < EVEN_ODDS:
            out.append(
                (
                    f"{field}.probability",
                    f"{rule.probability:g} is below even odds: {rule.action} acts on runs more likely "
                    "still learning than not",
                )
            )
        if rule.hold <= 0:
            out.append((f"{field}.for", f"0: {rule.action} acts on a single forecast (one noisy point)"))
    if policy.safety.cooldown <= 0:
        out.append(
            (
                "spec.safety.cooldown",
                "0: a run asked back (trainjob-advisor resume) may be released again at once",
            )
        )
    selector = policy.selector
    if not any(getattr(selector, f.name) for f in fields(selector)):
        out.append(("spec.selector", "none: this Apply policy governs every job the controller watches"))
    return out
