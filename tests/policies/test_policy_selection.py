"""Which policy governs a job: every criterion must hold; most specific, then priority, then name."""

from __future__ import annotations

import itertools

from policy_builders import job, policy

from advisor.model import Mode
from policies import select_policy, specificity, tied_with


def test_each_selector_dimension_filters() -> None:
    j = job(
        namespace="team-a",
        kind="PyTorchJob",
        queue_name="lq",
        cluster_queue="cq",
        labels={"tier": "ft"},
        namespace_labels={"org": "ml"},
    )
    assert select_policy([policy(selector={"namespaces": ["team-b"]})], j) is None
    assert select_policy([policy(selector={"kinds": ["TrainJob"]})], j) is None
    assert select_policy([policy(selector={"localQueues": ["other"]})], j) is None
    assert select_policy([policy(selector={"clusterQueues": ["spot"]})], j) is None
    assert select_policy([policy(selector={"namespaceSelector": {"matchLabels": {"org": "web"}}})], j) is None
    assert (
        select_policy(
            [
                policy(
                    selector={
                        "jobSelector": {
                            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["ft"]}]
                        }
                    }
                )
            ],
            j,
        )
        is None
    )
    everything = policy(
        selector={
            "namespaces": ["team-a"],
            "kinds": ["PyTorchJob"],
            "localQueues": ["lq"],
            "clusterQueues": ["cq"],
            "namespaceSelector": {"matchLabels": {"org": "ml"}},
            "jobSelector": {
                "matchExpressions": [
                    {"key": "tier", "operator": "Exists"},
                    {"key": "gone", "operator": "DoesNotExist"},
                ]
            },
        }
    )
    assert select_policy([everything], j) is everything
    assert specificity(everything.selector) == 4 + 1 + 2


def test_queue_name_falls_back_to_the_kueue_label() -> None:
    j = job(queue_name=None, labels={"kueue.x-k8s.io/queue-name": "lq"})
    assert select_policy([policy(selector={"localQueues": ["lq"]})], j) is not None


def test_most_specific_then_priority_then_name_whatever_the_order() -> None:
    j = job(namespace="team-a", labels={"tier": "ft"})
    broad = policy(name="a-broad", priority=100)
    ns = policy(name="z-ns", selector={"namespaces": ["team-a"]})
    ns_hi = policy(name="y-ns-hi", selector={"namespaces": ["team-a"]}, priority=5)
    ns_same = policy(name="b-ns-hi", selector={"namespaces": ["team-a"]}, priority=5, mode="Recommend")
    for order in itertools.permutations([broad, ns, ns_hi, ns_same]):
        chosen = select_policy(list(order), j)
        assert chosen is not None and chosen.name == "b-ns-hi" and chosen.mode is Mode.RECOMMEND
    label = policy(
        name="label", selector={"jobSelector": {"matchLabels": {"tier": "ft"}}, "namespaces": ["team-a"]}
    )
    assert select_policy([broad, ns, ns_hi, label], j) is label
    assert select_policy([], j) is None


def test_a_tie_broken_by_name_is_named_and_reaches_the_decision() -> None:
    """A sample's one-label job selector ties one's own namespace list (specificity 1 each, same
    priority): the first by name governs, the others are named, and the core's decision says so."""
    from advisor.core import AdvisorCore
    from advisor.model import ClusterView
    from policies import tie_reason, tied_with

    j = job(namespace="team-a", labels={"tier": "ft"})
    sample = policy(
        name="a-sample",
        mode="Recommend",
        selector={
            "jobSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}
        },
    )
    mine = policy(name="b-mine", selector={"namespaces": ["team-a"]})
    other = policy(name="c-other", selector={"namespaces": ["team-b"]})  # does not select the job
    assert select_policy([mine, sample, other], j) is sample
    assert tied_with([mine, sample, other], j, sample) == ("b-mine",)
    assert "over b-mine" in tie_reason(sample, ("b-mine",))
    preferred = policy(name="b-mine", selector={"namespaces": ["team-a"]}, priority=5)
    assert (
        select_policy([preferred, sample], j) is preferred
        and tied_with([preferred, sample], j, preferred) == ()
    )
    decision = AdvisorCore(policies=[sample, mine]).evaluate(j, ClusterView(), now=1_800_000_000.0)
    assert decision.policy == "a-sample" and decision.tied_with == ("b-mine",)
    assert any("a-sample governs over b-mine" in r and "then by name" in r for r in decision.reasons)


def test_a_tie_between_an_apply_and_a_recommend_policy_goes_to_recommend_whatever_the_names() -> None:
    """A new Apply policy selecting a Recommend policy's jobs as specifically took them over by
    its name ("aa-...") and released one 23 s later; a tie never hands a job to Apply."""
    j = job(namespace="ovf", namespace_labels={"team": "ml"})
    rec = policy(name="ovf-rec", mode="Recommend", selector={"namespaces": ["ovf"]})
    apply = policy(
        name="aa-ns-apply", mode="Apply", selector={"namespaceSelector": {"matchLabels": {"team": "ml"}}}
    )
    for order in ([rec, apply], [apply, rec]):
        assert select_policy(order, j) is rec
    assert tied_with([rec, apply], j, rec) == ("aa-ns-apply",)
    higher = policy(
        name="aa-ns-apply",
        mode="Apply",
        priority=1,
        selector={"namespaceSelector": {"matchLabels": {"team": "ml"}}},
    )
    assert select_policy([rec, higher], j) is higher  # meant to govern: a priority says so
