"""The simulator's quota model against real Kueue (minimalkueue v0.19.2): every scenario of
``simulator.conformance.scenarios`` is played by both with the same objects, and after each event
the quota holders and the preemptions (victims, Kueue's reasons) must be the same.

The agreement report (per event and per scenario, with every disagreement, and the advisor's
victim predictor scored against Kueue's victims) is printed at the end of the module and written
to ``$TRAINJOB_ADVISOR_CONFORMANCE_JSON`` when that is set (``tests/fixtures/kueue_conformance.json``
is such a recording, which the unit tier compares the model with).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import controlplane as cp
import pytest
from kueue_play import KueuePlayer

from simulator.conformance.play import (
    Observation,
    agreement_report,
    play_in_model,
    predicted_victims,
    predictor_score,
)
from simulator.conformance.scenarios import SCENARIOS, Scenario

pytestmark = pytest.mark.kueue

_PLAYS: dict[str, tuple[tuple[Observation, ...], tuple[Observation, ...]]] = {}


@pytest.fixture(scope="module")
def report(
    request: pytest.FixtureRequest,
) -> Iterator[dict[str, tuple[tuple[Observation, ...], tuple[Observation, ...]]]]:
    yield _PLAYS
    if not _PLAYS:
        return
    played = [s for s in SCENARIOS if s.name in _PLAYS]
    result = agreement_report(_PLAYS, played)
    predictions = {s.name: predicted_victims(s) for s in played}
    result["victim_predictor_vs_kueue"] = predictor_score(
        predictions, {n: k for n, (_m, k) in _PLAYS.items()}
    )
    vs = result["victim_predictor_vs_kueue"]
    line = (
        f"quota model vs Kueue: {result['events_agreeing']}/{result['events']} events agree "
        f"({result['event_agreement']:.0%}), {result['scenarios_agreeing']}/{result['scenarios']} scenarios; "
        f"victim predictor vs Kueue: precision {vs['precision']:.2f}, recall {vs['recall']:.2f}"
    )
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n" + line, file=sys.stderr)
    path = os.environ.get("TRAINJOB_ADVISOR_CONFORMANCE_JSON")
    if path:
        with open(path, "w") as fh:
            json.dump(result, fh, indent=2)
            fh.write("\n")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_quota_model_plays_the_scenario_as_kueue_does(
    scenario: Scenario,
    control_plane: cp.ControlPlane,
    admin_api: Any,
    e2e_namespace: str,
    report: dict[str, Any],
) -> None:
    player = KueuePlayer(control_plane, admin_api, e2e_namespace, f"cf-{uuid.uuid4().hex[:6]}")
    player.setup(scenario)
    try:
        kueue = player.play(scenario)
    finally:
        player.teardown(scenario)
    model = play_in_model(scenario)
    report[scenario.name] = (model, kueue)
    diffs = [
        f"event {i} {scenario.events[i]!r}: model {m}, Kueue {k}"
        for i, (m, k) in enumerate(zip(model, kueue, strict=True))
        if m != k
    ]
    assert not diffs, "\n".join(diffs)
