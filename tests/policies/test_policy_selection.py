"""Which policy governs a job: every criterion must hold; most specific, then priority, then name."""

from __future__ import annotations

import itertools

from policy_builders import job, policy

from advisor.model import Mode
from policies import select_policy, specificity


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
