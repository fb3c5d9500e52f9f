"""The AdvisorPolicy model: frozen dataclasses, their defaults and their documentation.

Each field is described once (``spec_field``): ``policies.loader`` validates input against
these descriptions and ``policies.crd`` generates the CRD schema from them. A rule that is absent
from ``spec.rules`` is off; a rule that is present gets the defaults below for whatever it omits.

Cross-field constraints (``minNodes <= maxNodes``) live in ``check()`` for the loader and in
``CEL`` for the API server (``x-kubernetes-validations``); a test keeps the two in step.
"""

# ruff: noqa: RUF009  (spec_field is a dataclasses.field wrapper: it builds a Field, not a shared default)

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from advisor.model import Mode
from advisor.protocol import DEFAULT_EXEMPT_LABEL
from policies.fields import spec_field
from policies.spec_rules import (
    RECOMMEND,
    RELEASE,
    STOP,
    CheckpointRule,
    DeadlineRule,
    DivergenceRule,
    ElasticRule,
    OverfittingRule,
    PlateauRule,
    PreemptionGuardRule,
    QuotaReleaseRule,
    Rules,
    StallRule,
)

__all__ = [
    "RECOMMEND",
    "RELEASE",
    "STOP",
    "CheckpointRule",
    "DeadlineRule",
    "DivergenceRule",
    "ElasticRule",
    "LabelRequirement",
    "LabelSelector",
    "OverfittingRule",
    "PlateauRule",
    "Policy",
    "PolicySpec",
    "PreemptionGuardRule",
    "QuotaReleaseRule",
    "Rules",
    "Safety",
    "Selector",
    "StallRule",
]

Errors = list[tuple[str, str]]


# --------------------------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------------------------


_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


#: a namespace's name: a DNS-1123 label
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def label_key_error(key: str) -> str | None:
    """Why ``key`` is no Kubernetes label key (an optional DNS-subdomain prefix and ``/``, then a
    name of at most 63 characters), or None. The API server would refuse such a selector; a
    policy that selects by it would match nothing, silently."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{key!r} is not a label key: its prefix must be a DNS subdomain (lower case, dots)"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            f"{key!r} is not a label key: a name of at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def label_value_error(value: str) -> str | None:
    """Why ``value`` is no Kubernetes label value (empty, or a name of at most 63 characters)."""
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        return f"{value!r} is not a label value: at most 63 letters, digits, '-', '_' or '.'"
    return None


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One ``matchExpressions`` entry of a Kubernetes label selector."""

    CEL: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
            "values must be non-empty for In/NotIn and empty for Exists/DoesNotExist",
        ),
    )
    key: str = spec_field("key", "Label key.", "str", default="", min_length=1, required=True)
    operator: str = spec_field(
        "operator",
        "How the label is compared.",
        "enum",
        default="In",
        enum=("In", "NotIn", "Exists", "DoesNotExist"),
        required=True,
    )
    values: tuple[str, ...] = spec_field("values", "Values for In/NotIn.", "strlist", default=())

    def check(self) -> Errors:
        bad_key = label_key_error(self.key)
        if bad_key:
            return [("key", bad_key)]
        bad_value = next((e for v in self.values if (e := label_value_error(v))), None)
        if bad_value:
            return [("values", bad_value)]
        if self.operator in ("In", "NotIn") and not self.values:
            return [("values", f"must be non-empty for operator {self.operator}")]
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            return [("values", f"must be empty for operator {self.operator}")]
        return []

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector (all requirements must hold)."""

    match_labels: Mapping[str, str] = spec_field(
        "matchLabels",
        "Labels that must be present with exactly these values.",
        "strmap",
        default_factory=dict,
    )
    match_expressions: tuple[LabelRequirement, ...] = spec_field(
        "matchExpressions", "Set-based requirements.", "objlist", default=(), cls=LabelRequirement
    )

    def check(self) -> Errors:
        errors: Errors = []
        for key, value in self.match_labels.items():
            reason = label_key_error(key) or label_value_error(value)
            if reason:
                errors.append((f"matchLabels.{key}", reason))
        return errors

    @property
    def size(self) -> int:
        return len(self.match_labels) + len(self.match_expressions)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


@dataclass(frozen=True, slots=True)
class Selector:
    """Which jobs a policy governs. Every given criterion must hold; an empty selector matches all."""

    namespaces: tuple[str, ...] = spec_field(
        "namespaces", "Namespaces by name.", "strlist", default=(), pattern=NAMESPACE_PATTERN, max_length=63
    )
    namespace_selector: LabelSelector | None = spec_field(
        "namespaceSelector", "Namespaces by label.", "object", default=None, cls=LabelSelector
    )
    job_selector: LabelSelector | None = spec_field(
        "jobSelector", "Jobs by label.", "object", default=None, cls=LabelSelector
    )
    local_queues: tuple[str, ...] = spec_field(
        "localQueues", "Kueue LocalQueue names (the job's queue-name label).", "strlist", default=()
    )
    cluster_queues: tuple[str, ...] = spec_field(
        "clusterQueues", "Kueue ClusterQueue names.", "strlist", default=()
    )
    kinds: tuple[str, ...] = spec_field(
        "kinds", "Job kinds, e.g. TrainJob, PyTorchJob.", "strlist", default=()
    )

    def check(self) -> Errors:
        # a name no namespace can have matches nothing, silently (the API server allows it in a
        # list of strings; the CRD's pattern refuses it too)
        return [
            (
                f"namespaces[{i}]",
                f"{name!r} is not a namespace name: at most 63 lower-case letters, digits or '-', "
                "starting and ending with a letter or digit",
            )
            for i, name in enumerate(self.namespaces)
            if len(name) > 63 or not re.match(NAMESPACE_PATTERN, name)
        ]


# --------------------------------------------------------------------------------------------
# Safety
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Safety:
    """Guard rails that apply to every rule of the policy."""

    exempt_label: str = spec_field(
        "exemptLabel",
        "A job carrying this label (any value but 'false') is never touched.",
        "str",
        default=DEFAULT_EXEMPT_LABEL,
        min_length=1,
    )
    min_runtime: float = spec_field(
        "minRuntime",
        "Runtime before any judgement of learning, stall or deadline.",
        "duration",
        default=900.0,
    )
    min_progress: float = spec_field(
        "minProgress",
        "Fraction of total steps done before any judgement, for a job that reports its total steps; "
        "one that does not is judged once minRuntime and minSteps are met.",
        "float",
        default=0.0,
        minimum=0.0,
        maximum=1.0,
    )
    min_steps: int = spec_field("minSteps", "Steps done before any judgement.", "int", default=0, minimum=0)
    min_forecast_points: int = spec_field(
        "minForecastPoints",
        "A forecast built on fewer points is too weak to act on.",
        "int",
        default=10,
        minimum=0,
    )
    cooldown: float = spec_field(
        "cooldown",
        "Quiet time after a disruptive action (release, stop, scale) on a job before the next one starts; "
        "checkpoints and priority boosts have their own pacing.",
        "duration",
        default=1800.0,
    )
    max_evidence_age: float = spec_field(
        "maxEvidenceAge",
        "A rule that rests on the forecast (plateau, overfitting, divergence, deadline, elastic) "
        "neither acts nor recommends while the job's newest progress reached the advisor longer ago "
        "than this, or than 3 of the job's usual intervals between reports when that is longer: "
        "after an API server outage or a watch that fell silent, the forecast describes the past. "
        "The rule's timers keep running; it acts again on the first fresh report. The stall rule "
        "is not held: no progress is its evidence.",
        "duration",
        default=600.0,
        minimum=0.0,
        exclusive_minimum=True,
    )
    max_actions_per_hour: int = spec_field(
        "maxActionsPerHour",
        "Cap on disruptive actions (release, stop, scale) per hour by this policy, over all its jobs.",
        "int",
        default=20,
        minimum=1,
    )

    def check(self) -> Errors:
        # the exemption is the one opt-out a job owner has: a key no label can have ("exempt=true",
        # a space, a capital in the prefix) exempted nothing, silently
        bad_key = label_key_error(self.exempt_label)
        return [("exemptLabel", bad_key)] if bad_key else []


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """``spec`` of an AdvisorPolicy."""

    mode: Mode = spec_field(
        "mode",
        "Recommend (default) never mutates anything; Apply acts.",
        "enum",
        default=Mode.RECOMMEND,
        enum=tuple(m.value for m in Mode),
        cls=Mode,
        server_default=True,
    )
    priority: int = spec_field(
        "priority",
        "Breaks ties between equally specific policies (higher wins).",
        "int",
        default=0,
        minimum=-(2**31),
        maximum=2**31 - 1,
        server_default=True,
    )
    selector: Selector = spec_field(
        "selector", Selector.__doc__ or "", "object", default_factory=Selector, cls=Selector
    )
    safety: Safety = spec_field("safety", Safety.__doc__ or "", "object", default_factory=Safety, cls=Safety)
    rules: Rules = spec_field("rules", Rules.__doc__ or "", "object", default_factory=Rules, cls=Rules)
    metric_directions: dict[str, str] = spec_field(
        "metricDirections",
        "Which way an eval metric improves, for the jobs this policy governs, where its name does not "
        "say or says it wrongly: metric name (eval_myscore) -> lower or higher. Names with loss, error, "
        "wer, perplexity, ... are lower-is-better and accuracy, f1, bleu, rouge, ... higher without it.",
        "strmap",
        default_factory=dict,
        enum=("lower", "higher"),
    )


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated AdvisorPolicy: its name and spec (what ``decide`` and ``select_policy`` take)."""

    name: str
    spec: PolicySpec = PolicySpec()

    def __hash__(self) -> int:  # usable as a dict key although label maps inside are not hashable
        return hash(self.name)

    @property
    def mode(self) -> Mode:
        return self.spec.mode

    def applied(self) -> Policy:
        """The same policy in Apply mode: the simulator and the back-test answer "what would it
        have done" for a policy an admin runs in Recommend."""
        if self.mode is Mode.APPLY:
            return self
        return replace(self, spec=replace(self.spec, mode=Mode.APPLY))

    @property
    def priority(self) -> int:
        return self.spec.priority

    @property
    def selector(self) -> Selector:
        return self.spec.selector

    @property
    def metric_directions(self) -> dict[str, str]:
        return self.spec.metric_directions

    @property
    def safety(self) -> Safety:
        return self.spec.safety

    @property
    def rules(self) -> Rules:
        return self.spec.rules
