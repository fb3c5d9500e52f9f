"""A long numeric table is read in one pass and kept as bin medians; anything unusual in it goes
through the general reader, which names the broken line."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.sources.files import SourceError, load_curve
from advisor.sources.large_table import LARGE_ROWS, MAX_KEPT

N = LARGE_ROWS + 50_001


def _write(path: Path, broken: int | None = None) -> Path:
    lines = ["step,loss,learning_rate"]
    lines += [f"{i},{2 + 3 * (i / 1000) ** -0.4:.5f},0.0003" for i in range(1, N + 1)]
    if broken is not None:
        lines[broken] = f"{broken},oops,0.0003"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_long_table_is_kept_as_medians_with_its_last_step(tmp_path: Path) -> None:
    curve = load_curve(_write(tmp_path / "long.csv"))
    assert len(curve) <= MAX_KEPT + 100
    assert curve.steps[-1] == N and curve.steps[0] >= 1
    assert list(curve.steps) == sorted(curve.steps)
    assert curve.learning_rates is not None and set(curve.learning_rates) == {0.0003}
    assert any("medians" in w for w in curve.warnings)
    assert f"{N} points of 'loss'" in curve.source
    # the medians follow the curve (monotone here)
    assert curve.values[0] > curve.values[len(curve) // 2] > curve.values[-1] > 2.0


def test_a_broken_cell_in_a_long_table_is_reported_by_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"long\.csv:1001: column 'loss': 'oops' is not a number"):
        load_curve(_write(tmp_path / "long.csv", broken=1000))


def test_an_epoch_milliseconds_time_column_of_a_long_table_is_read_as_ms(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    start = 1_733_300_000_000  # epoch ms, 0.5 s a step
    lines = ["step,loss,timestamp"] + [f"{i},{2 + 1 / i:.5f},{start + 500 * i}" for i in range(1, N + 1)]
    path.write_text("\n".join(lines) + "\n")
    curve = load_curve(path)
    assert curve.times is not None
    assert curve.times[-1] - curve.times[0] == pytest.approx(0.5 * (curve.steps[-1] - curve.steps[0]))
    assert any("epoch milliseconds" in w for w in curve.warnings)


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _rows() -> list[dict[str, float]]:
    return [
        {"step": i, "loss": round(2 + 3 * (i / 1000) ** -0.4, 5), "learning_rate": 3e-4}
        for i in range(1, N + 1)
    ]


def test_a_long_jsonl_log_is_kept_as_medians_as_the_same_table_is(tmp_path: Path) -> None:
    import json

    rows = _rows()
    log = load_curve(_jsonl(tmp_path / "long.jsonl", [json.dumps(r) for r in rows]))
    table = load_curve(_write(tmp_path / "long.csv"))
    assert log.steps == table.steps and log.values == table.values
    assert log.learning_rates == table.learning_rates and log.warnings == table.warnings
    assert log.source == table.source.replace("CSV long.csv", "JSONL long.jsonl")
    # a last line cut short by its writer is let go, said so, as in a short log
    cut = load_curve(
        _jsonl(tmp_path / "cut.jsonl", [json.dumps(r) for r in rows] + ['{"step": 9999999, "lo'])
    )
    assert cut.steps == table.steps
    assert (
        cut.warnings[0].startswith(f"line {N + 1}: invalid JSON") and "still being written" in cut.warnings[0]
    )


def test_a_long_jsonl_log_with_sparse_fields_or_a_broken_line_is_read_the_general_way(tmp_path: Path) -> None:
    import json

    lines = [json.dumps(r) for r in _rows()]
    lines[999] = json.dumps({"step": 1000, "eval_loss": 2.5})  # a field some lines lack: aligned
    curve = load_curve(_jsonl(tmp_path / "sparse.jsonl", lines))
    assert len(curve) == N - 1 and not any("medians" in w for w in curve.warnings)
    lines[999] = '{"step": 1000, "loss": oops}'
    with pytest.raises(SourceError, match=r"broken\.jsonl:1000: invalid JSON"):
        load_curve(_jsonl(tmp_path / "broken.jsonl", lines))


def test_a_long_table_whose_last_line_is_not_ended_is_read_without_it(tmp_path: Path) -> None:
    """As in a short table: the writer may be mid-number (``1.72`` of ``1.72e-04``)."""
    whole = load_curve(_write(tmp_path / "long.csv"))
    path = tmp_path / "live.csv"
    path.write_text((tmp_path / "long.csv").read_text() + f"{N + 1},2.1,0.0")
    live = load_curve(path)
    assert live.steps == whole.steps and live.values == whole.values
    assert live.warnings[0].startswith(f"line {N + 2}: ") and "still being written" in live.warnings[0]
