"""A W&B chart panel's export of several runs: each run's columns are that run's log, chosen by
its name as a curve id, and found as a run log of its own."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from advisor.sources import SourceError, load_curve
from advisor.sources.files import parse_log
from advisor.sources.runlogs import find_run_logs


def _panel(path: Path) -> None:
    runs = ("good-run-1", "bad-run-2")
    header = ["Step"] + [f"{r} - train/loss{s}" for r in runs for s in ("", "__MIN", "__MAX")]
    lines = [",".join(f'"{h}"' for h in header)]
    for s in range(0, 3001, 20):
        a = 2 + 1.5 * (1 + s / 200) ** -0.7
        b = 3.0 + 0.5 * math.exp(-s / 300)
        lines.append(",".join([str(s)] + [f"{a:.4f}"] * 3 + ([f"{b:.4f}"] * 3 if s <= 2000 else [""] * 3)))
    path.write_text("\n".join(lines) + "\n")


def test_a_curve_id_reads_one_run_of_a_panel_export(tmp_path: Path) -> None:
    _panel(tmp_path / "panel.csv")
    bad = load_curve(tmp_path / "panel.csv", curve_id="bad-run-2")
    assert (
        bad.steps[-1] == 2000 and bad.values[0] == 3.5 and bad.values[-1] == pytest.approx(3.0006, abs=1e-3)
    )
    good = load_curve(tmp_path / "panel.csv", curve_id="good-run-1")
    assert good.steps[-1] == 3000
    with pytest.raises(SourceError, match="no run 'other' in the W&B panel export"):
        load_curve(tmp_path / "panel.csv", curve_id="other")
    with pytest.raises(SourceError, match="--curve RUN"):
        load_curve(tmp_path / "panel.csv")


def test_each_run_of_a_panel_export_is_a_run_log(tmp_path: Path) -> None:
    _panel(tmp_path / "panel.csv")
    for given in (tmp_path / "panel.csv", tmp_path):
        logs = find_run_logs([given])
        assert [log.name for log in logs] == ["panel.csv#good-run-1", "panel.csv#bad-run-2"]
    bad = load_curve(logs[1].path)
    assert bad.steps[-1] == 2000 and any(
        "'bad-run-2' of a W&B panel export of 2 runs" in w for w in bad.warnings
    )
    ((_, parsed),) = parse_log(logs[0].path).curves()
    assert parsed.steps[-1] == 3000
