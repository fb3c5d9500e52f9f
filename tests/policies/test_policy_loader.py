"""Loading AdvisorPolicy objects: defaults, conversions, and errors that name the field path."""

from __future__ import annotations

import json

import pytest

from advisor.model import Mode
from advisor.protocol import DEFAULT_EXEMPT_LABEL
from policies import PolicyError, load_policies, load_policy

HEAD = "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: p}\n"


def _obj(spec: dict | None = None, **top: object) -> dict:
    obj: dict = {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": "p"},
    }
    if spec is not None:
        obj["spec"] = spec
    obj.update(top)
    return obj


def _errors(obj: object) -> list[tuple[str, str]]:
    with pytest.raises(PolicyError) as info:
        load_policy(obj)  # type: ignore[arg-type]
    return list(info.value.errors)


def test_an_empty_spec_is_a_recommend_only_policy_with_no_rules() -> None:
    p = load_policy(_obj())
    assert p.name == "p"
    assert p.mode is Mode.RECOMMEND
    assert p.priority == 0
    assert p.safety.exempt_label == DEFAULT_EXEMPT_LABEL
    assert p.rules.plateau is None and p.rules.elastic is None


def test_a_present_rule_gets_its_defaults_and_durations_are_seconds() -> None:
    p = load_policy(
        HEAD + "spec:\n  mode: Apply\n  rules:\n    plateau: {for: 1h30m}\n    stall: {for: 600}\n"
    )
    assert p.mode is Mode.APPLY
    assert p.rules.plateau is not None and p.rules.plateau.hold == 5400.0
    assert p.rules.plateau.probability == 0.9
    assert p.rules.stall is not None and p.rules.stall.hold == 600.0


def test_the_issue_example_error_message_is_exact() -> None:
    errs = _errors(_obj({"rules": {"plateau": {"probability": 1.5}}}))
    assert errs == [("spec.rules.plateau.probability", "must be in (0, 1], got 1.5")]
    assert str(PolicyError("", errors=errs)) == "spec.rules.plateau.probability: must be in (0, 1], got 1.5"


def test_every_error_is_reported_at_once_with_its_path() -> None:
    errs = dict(
        _errors(
            _obj(
                {
                    "mode": "Enforce",
                    "rules": {
                        "plateau": {"probabilty": 0.9},
                        "stall": {"for": "soon"},
                        "elastic": {"minNodes": 0},
                    },
                    "selector": {"jobSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
                }
            )
        )
    )
    assert errs["spec.mode"] == "must be one of Recommend, Apply, got 'Enforce'"
    assert errs["spec.rules.plateau.probabilty"].startswith("unknown field")
    assert "duration" in errs["spec.rules.stall.for"]
    assert errs["spec.rules.elastic.minNodes"] == "must be in [1, inf), got 0"
    assert errs["spec.selector.jobSelector.matchExpressions[0].values"] == "must be non-empty for operator In"


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"priority": True}, "spec.priority"),
        ({"priority": 1.5}, "spec.priority"),
        ({"rules": {"plateau": {"probability": "high"}}}, "spec.rules.plateau.probability"),
        ({"rules": {"plateau": {"probability": 0}}}, "spec.rules.plateau.probability"),
        ({"rules": {"checkpoint": {"minInterval": -5}}}, "spec.rules.checkpoint.minInterval"),
        (
            {"rules": {"checkpoint": {"minInterval": "2h", "maxInterval": "1h"}}},
            "spec.rules.checkpoint.minInterval",
        ),
        ({"rules": {"elastic": {"minNodes": 4, "maxNodes": 2}}}, "spec.rules.elastic.minNodes"),
        ({"rules": {"divergence": {"nonFinite": "yes"}}}, "spec.rules.divergence.nonFinite"),
        ({"rules": []}, "spec.rules"),
        ({"selector": {"namespaces": "team-a"}}, "spec.selector.namespaces"),
        ({"selector": {"namespaces": [""]}}, "spec.selector.namespaces[0]"),
        ({"selector": {"jobSelector": {"matchLabels": {"a": 1}}}}, "spec.selector.jobSelector.matchLabels.a"),
        (
            {"selector": {"jobSelector": {"matchExpressions": [{"operator": "Exists"}]}}},
            "spec.selector.jobSelector.matchExpressions[0].key",
        ),
        ({"safety": {"exemptLabel": ""}}, "spec.safety.exemptLabel"),
        ({"safety": {"maxActionsPerHour": 0}}, "spec.safety.maxActionsPerHour"),
    ],
)
def test_bad_values_are_rejected_at_their_path(spec: dict, path: str) -> None:
    assert path in dict(_errors(_obj(spec)))


def test_object_level_errors() -> None:
    assert dict(_errors(_obj(apiVersion="v1")))["apiVersion"].startswith(
        "must be advisor.trainjob-advisor.io"
    )
    assert "kind" in dict(_errors(_obj(kind="Policy")))
    assert "metadata.name" in dict(_errors({**_obj(), "metadata": {}}))
    assert "metadata.name" in dict(_errors({**_obj(), "metadata": {"name": "Bad_Name"}}))
    with pytest.raises(PolicyError):
        load_policy("[1, 2")
    with pytest.raises(PolicyError):
        load_policy("- a\n- b\n")


def test_json_text_and_yaml_text_load_the_same_policy() -> None:
    obj = _obj({"mode": "Apply", "rules": {"plateau": {"probability": 0.8, "for": "30m"}}})
    assert load_policy(json.dumps(obj)) == load_policy(obj)


def test_nulls_mean_absent_like_the_api_server() -> None:
    p = load_policy(_obj({"rules": {"plateau": None, "stall": {"for": None}}}))
    assert p.rules.plateau is None
    assert p.rules.stall is not None and p.rules.stall.hold == 1800.0


def test_multi_document_files_prefix_errors_with_the_document_index(tmp_path) -> None:
    text = HEAD + "spec: {}\n---\n" + HEAD.replace("name: p", "name: q") + "spec: {mode: Maybe}\n"
    with pytest.raises(PolicyError) as info:
        load_policies(text)
    assert info.value.errors == (("[1].spec.mode", "must be one of Recommend, Apply, got 'Maybe'"),)
    f = tmp_path / "two.yaml"
    f.write_text(HEAD + "spec: {}\n---\n" + HEAD.replace("name: p", "name: q") + "spec: {}\n")
    assert [p.name for p in load_policies(str(f))] == ["p", "q"]
    with pytest.raises(PolicyError, match="duplicate"):
        load_policies(HEAD + "---\n" + HEAD)


def test_policies_pickle_and_hash_for_simulator_workers() -> None:
    import pickle

    p = load_policy(
        _obj({"selector": {"jobSelector": {"matchLabels": {"tier": "ft"}}}, "rules": {"plateau": {}}})
    )
    assert pickle.loads(pickle.dumps(p)) == p
    assert {p: 1}[p] == 1


def test_bounds_on_lists_and_strings() -> None:
    errs = dict(_errors(_obj({"selector": {"namespaces": [f"n{i}" for i in range(65)]}})))
    assert errs["spec.selector.namespaces"] == "must have at most 64 items, got 65"
    assert "spec.rules.stall.for" in dict(_errors(_obj({"rules": {"stall": {"for": "1s" * 17}}})))
    assert "spec.rules.stall.for" in dict(_errors(_obj({"rules": {"stall": {"for": "0m"}}})))


def test_a_quoted_number_as_a_duration_says_how_to_write_it() -> None:
    (err,) = _errors(_obj({"safety": {"minRuntime": "90"}}))
    assert err == (
        "spec.safety.minRuntime",
        "must be a duration: got the string '90' without a unit; write 90s, or 90 without quotes (seconds)",
    )


def test_selector_label_keys_and_values_must_be_kubernetes_labels() -> None:
    """A key the API server would never hold matched nothing, silently."""
    bad_key = {"selector": {"jobSelector": {"matchExpressions": [{"key": "bad key!", "operator": "Exists"}]}}}
    errors = dict(_errors(_obj(bad_key)))
    assert "is not a label key" in errors["spec.selector.jobSelector.matchExpressions[0].key"]
    bad_value = {"selector": {"namespaceSelector": {"matchLabels": {"team": "a b"}}}}
    assert (
        "is not a label value"
        in dict(_errors(_obj(bad_value)))["spec.selector.namespaceSelector.matchLabels.team"]
    )
    bad_prefix = {"selector": {"jobSelector": {"matchLabels": {"Example.COM/team": "a"}}}}
    assert (
        "prefix" in dict(_errors(_obj(bad_prefix)))["spec.selector.jobSelector.matchLabels.Example.COM/team"]
    )
    good = {
        "selector": {
            "jobSelector": {
                "matchLabels": {"app.kubernetes.io/name": "llm", "tier": ""},
                "matchExpressions": [
                    {"key": "kueue.x-k8s.io/queue-name", "operator": "In", "values": ["a-1"]}
                ],
            }
        }
    }
    load_policy(_obj(good))


@pytest.mark.parametrize(
    "label", ["bad key", "advisor.trainjob-advisor.io/exempt=true", "Example.COM/exempt", "exempt/"]
)
def test_an_exempt_label_no_job_can_carry_is_an_error(label: str) -> None:
    """The exemption is a job owner's opt-out: a key no label can have exempted nothing, silently."""
    errors = dict(_errors(_obj({"safety": {"exemptLabel": label}})))
    assert "is not a label key" in errors["spec.safety.exemptLabel"]
    for good in ("advisor.trainjob-advisor.io/exempt", "no-advisor", "team.example.com/keep_1"):
        assert load_policy(_obj({"safety": {"exemptLabel": good}})).safety.exempt_label == good


@pytest.mark.parametrize("metric", ["loss", "train_loss", "train/loss"])
def test_an_overfitting_rule_that_names_the_training_loss_is_refused(metric: str) -> None:
    """It compares an eval metric with the training loss: named the training loss, it judged
    nothing and said so only as "no judgement" at every look."""
    text = (
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: p}\n"
        f"spec:\n  rules:\n    overfitting: {{metric: '{metric}'}}\n"
    )
    with pytest.raises(PolicyError, match=r"spec\.rules\.overfitting\.metric: .* is the training loss"):
        load_policy(text)
    load_policy(text.replace(metric, "eval_loss"))  # an eval metric is fine


def test_every_duplicate_key_is_reported_in_file_order() -> None:
    text = (
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata:\n  name: dup\n"
        "spec:\n  mode: Apply\n  rules:\n    plateau:\n      probability: 0.8\n"
        "    plateau:\n      probability: 0.5\n  mode: Recommend\n"
    )
    with pytest.raises(PolicyError) as caught:
        load_policies(text)
    found = [reason for _, reason in caught.value.errors]
    assert found == ["line 10: duplicate key 'plateau'", "line 12: duplicate key 'mode'"]


def test_durations_read_back_compactly_even_when_absurd() -> None:
    """Reasons say durations in their two largest units; one typed with extra digits read
    "acting after 99999999999999987584860d3h"."""
    from policies.fields import format_duration

    assert [format_duration(s) for s in (45, 5400, 3 * 86400 + 4 * 3600)] == ["45s", "1h30m", "3d4h"]
    assert format_duration(1e23) == "1.16e+18d"
