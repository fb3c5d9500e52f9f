"""docs/metrics.md lists every metric the controller serves, with its labels: a reference that can
drift from the code is worse than none (a platform trial found the names and labels documented only
in a README paragraph on hostile input)."""

from __future__ import annotations

from pathlib import Path

from advisor.controller.metrics import Metrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in DOC.read_text().splitlines():
        if line.startswith("| `trainjob_advisor_"):
            name = line.split("`")[1]
            rows[name] = line
    return rows


def test_every_metric_served_is_in_the_reference_with_its_type_and_labels() -> None:
    rows = _rows()
    served: set[str] = set()
    for collector in Metrics().registry._collector_to_names:
        name = getattr(collector, "_name", None)
        if name is None:
            continue
        kind = collector._type
        shown = f"{name}_total" if kind == "counter" else name
        served.add(shown)
        assert shown in rows, f"{shown} is served but not in docs/metrics.md"
        row = rows[shown]
        assert f"| {kind} |" in row, row
        for label in collector._labelnames:
            assert f"`{label}`" in row, f"{shown}: label {label} missing from {row}"
    assert set(rows) == served, f"documented but not served: {sorted(set(rows) - served)}"


def test_no_created_series_is_served() -> None:
    """prometheus_client adds a ``*_created`` timestamp per counter and histogram label set: series
    no query reads, doubling the counters' (a platform trial counted 24)."""
    from prometheus_client import generate_latest

    m = Metrics()
    m.actions.labels("p", "checkpoint", "Apply", "done").inc()
    m.pipeline.labels("watch").observe(0.1)
    served = generate_latest(m.registry).decode()
    assert "trainjob_advisor_actions_total{" in served
    assert "_created" not in served


def test_the_write_counters_are_served_at_zero_before_their_first_increment() -> None:
    """A series that appears at its first failure gives ``rate()`` nothing to compare it with, and
    an alert on it misses that failure (a platform trial found the error counters absent)."""
    from prometheus_client import generate_latest

    served = generate_latest(Metrics().registry).decode()
    for kind in ("event", "trainjobforecast-status", "advisorpolicy-status", "release-quota", "scale"):
        assert f'trainjob_advisor_api_write_errors_total{{kind="{kind}"}} 0.0' in served, kind
        assert f'trainjob_advisor_api_writes_total{{kind="{kind}"}} 0.0' in served, kind
    assert 'trainjob_advisor_status_writes_total{form="delta"} 0.0' in served
