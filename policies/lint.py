"""What ``policy validate`` warns of in a valid policy: settings that are legal but, in Apply mode,
act on weak evidence or on every job. A warning, not an error: an admin may mean them (a test
cluster, a policy tried on one namespace), and the CRD accepts them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from advisor.model import Mode
from advisor.series import eval_series_name, is_eval_name, is_loss_name
from policies.fields import field_specs
from policies.rules.base import series_rules
from policies.spec import LabelSelector, Policy
from policies.spec_rules import RECOMMEND

__all__ = ["metric_notes", "never_acts", "risk_warnings", "unit_slips"]

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
            out.append((field, f"{n} seconds, under a minute: if minutes were meant, write {n}m"))
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
    for name, rule in series_rules(policy):
        if not rule.enabled or rule.action == RECOMMEND:
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


#: a label value no selector names: "some other value" when satisfiability is tried by cases
_OTHER = object()


def unsatisfiable_key(selector: LabelSelector) -> str | None:
    """The first label key no job's labels can satisfy every requirement on (``matchLabels``
    ``workload-type: fine-tuning`` with ``NotIn [fine-tuning]``), or None. Tried by cases: the
    key absent, each value the selector names, or some other value."""
    keys = [*selector.match_labels, *(r.key for r in selector.match_expressions)]
    for key in dict.fromkeys(keys):
        named = [selector.match_labels[key]] if key in selector.match_labels else []
        named += [v for r in selector.match_expressions if r.key == key for v in r.values]
        cases: list[Any] = [None, *dict.fromkeys(named), _OTHER]
        if not any(_holds(selector, key, v) for v in cases):
            return key
    return None


def _holds(selector: LabelSelector, key: str, value: Any) -> bool:
    """Whether ``selector``'s requirements on ``key`` hold for a job whose ``key`` label is
    ``value`` (None: absent; ``_OTHER``: a value the selector does not name)."""
    labels = {} if value is None else {key: "\x00other" if value is _OTHER else value}
    wanted = all(labels.get(key) == v for k, v in selector.match_labels.items() if k == key)
    return wanted and all(r.matches(labels) for r in selector.match_expressions if r.key == key)


def never_acts(policy: Policy) -> list[tuple[str, str]]:
    """(field, why) of each setting that keeps ``policy`` from ever judging a job, in any mode: a
    selector no job's or namespace's labels can satisfy, a ``minProgress`` of the whole budget
    (checked only where a job reports its planned steps).
    Valid, and the policy still governs nothing or judges nothing; a back-test of it read "0 stops"."""
    out: list[tuple[str, str]] = []
    sel = policy.selector
    for name, label_selector in (
        ("jobSelector", sel.job_selector),
        ("namespaceSelector", sel.namespace_selector),
    ):
        if label_selector is None:
            continue
        key = unsatisfiable_key(label_selector)
        if key is not None:
            out.append(
                (
                    f"spec.selector.{name}",
                    f"no labels satisfy its requirements on {key!r}: the policy selects no job",
                )
            )
    release = policy.rules.quota_release
    if (
        release is not None
        and release.checkpoint_first
        and release.checkpoint_timeout <= 0
        and not release.release_on_timeout
    ):
        # the checkpoint asked first is given up at the next look, and the release waits on it
        out.append(
            (
                "spec.rules.quotaRelease.checkpointTimeout",
                "0 with releaseOnTimeout false: the checkpoint asked before a release is given up at the "
                "next look, and the release follows only a save made before it (or one younger than "
                "maxCheckpointAge)",
            )
        )
    if policy.safety.min_progress >= 1.0:
        out.append(
            (
                "spec.safety.minProgress",
                f"{policy.safety.min_progress:g}: a job that reports its planned steps is judged only "
                "once it has run them all (never); only jobs that report none are judged",
            )
        )
    return out


def metric_notes(policy: Policy) -> list[tuple[str, str]]:
    """(field, why) of each rule's ``metric:`` that does not judge what it may seem to: an eval
    loss named is judged alone, without the task's score a rule judging by default reads beside it
    (``advisor.series.task_metric``), so writing out what looks like the default turns a rule that
    holds while a run's accuracy still rises into one that acts on it (an admin's overfitting rule
    with ``metric: eval_loss`` stopped a fine-tune whose accuracy gained 2.4% after it)."""
    out: list[tuple[str, str]] = []
    for name, rule in series_rules(policy):
        metric = rule.metric
        if not metric or not is_eval_name(metric) or not is_loss_name(metric):
            continue
        shown = eval_series_name(metric)
        out.append(
            (
                f"spec.rules.{name}.metric",
                f"{shown} named is judged alone: left out, the rule judges a run's {shown} read with the "
                "task's score it reports beside it (eval_accuracy, eval_f1, eval_cer, ...) and holds while "
                "the score still improves; named, it acts on a run whose loss turned up while its score rose",
            )
        )
    return out
