"""``simulate --seeds A-B --report DIR``: the Markdown report of one scenario over a seed range.

A single seed's report draws that seed's replay (a waterfall, the JCT CDF, utilisation over
time), which needs every job of every row; over a range of seeds the workers send back only the
rows' metrics (see ``simulator.seeds``), so this report is the pooled table and the spread of
each row's verdict across the seeds: the figures an admin should quote, with how much they move
from one draw of the jobs to the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.report import format_table, legend, write_json
from simulator.seeds import spread_table

__all__ = ["write_seeds_report"]


def write_seeds_report(
    pooled: Sequence[dict[str, Any]],
    out_dir: Path,
    *,
    meta: Mapping[str, Any],
    footer: str,
    real_curves: bool = False,
) -> Path:
    """``report.md`` and ``results.json`` (the pooled rows, as ``--json``) in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(pooled, out_dir / "results.json", dict(meta))
    seeds = meta.get("seeds") or []
    lines = [
        "# trainjob-advisor simulation over seeds",
        "",
        *(f"- **{k.replace('_', ' ')}**: {v}" for k, v in meta.items() if k != "seeds"),
        f"- **seeds**: {', '.join(str(s) for s in seeds)}",
        "",
        footer,
        "",
        "## Every policy, pooled over the seeds",
        "",
        "```",
        format_table(list(pooled)),
        "```",
        "",
        legend(real_curves=real_curves) + " The full definitions are in `simulator/metrics.py`.",
        "",
        "## Spread across the seeds",
        "",
        "Non-learning GPU-hours saved pooled over the seeds, and the min / median / max of the seeds' "
        "own figures; wrong stops and near-end releases summed over the seeds, and the min / median / "
        "max of the seeds' own wrong stops at 1%.",
        "",
        "```",
        spread_table(pooled),
        "```",
        "",
        "One seed's replay (waterfall, JCT CDF, utilisation over time): `simulate --seed N --report DIR`.",
        "",
        "Raw rows: `results.json` (the same objects as `--json`).",
        "",
    ]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
