"""The chart's values.schema.json: helm refuses a misspelt or mistyped value with its path, instead
of installing with the value silently ignored (``recomendOnly: false`` would leave Apply off, and
``recommendOnly: "false"`` would be a string helm reads as true)."""

from __future__ import annotations

import pytest

from tests.charts.render import helm_template, helm_template_error, of_kind


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("recomendOnly=false", "additional properties 'recomendOnly' not allowed"),
        ("kueue.priorityBost=true", "additional properties 'priorityBost' not allowed"),
        ("recommendOnly=nope", "/recommendOnly"),
        ("logLevel=verbose", "/logLevel"),
        ("replicas=0", "/replicas"),
        ("watchNamespaces[0]=Team_A", "/watchNamespaces/0"),
        ("metrics.port=70000", "/metrics/port"),
        ("leaderElection.id=Bad_Name", "/leaderElection/id"),
    ],
)
def test_a_misspelt_or_mistyped_value_is_refused_by_its_path(value: str, said: str) -> None:
    assert said in helm_template_error(value)


def test_lease_timings_out_of_order_are_refused_as_the_controller_would() -> None:
    said = helm_template_error("leaderElection.renewDeadlineSeconds=20")
    assert "retryPeriodSeconds (2) < renewDeadlineSeconds (20) < leaseDurationSeconds (15)" in said
    assert of_kind(
        helm_template("leaderElection.enabled=false", "leaderElection.renewDeadlineSeconds=20"), "Deployment"
    )


def test_values_a_user_sets_in_the_documented_forms_pass() -> None:
    objects = helm_template(
        "recommendOnly=false",
        "watchNamespaces={team-a,team-b}",
        "leaderElection.id=advisor.lease",
        "podLabels.team=ml",
        "nodeSelector.pool=system",
        "metrics.serviceMonitor.interval=1m30s",
        "global.imageRegistry=example.com",
    )
    assert of_kind(objects, "Deployment")
