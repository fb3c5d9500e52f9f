"""Task scores of real fine-tunes: how the advisor forecasts an ``eval_accuracy`` or an ``eval_f1``.

Run: ``.venv/bin/python bench/score_bench.py [--split tune|holdout|all]``.

The fine-tune bench (``forecast_bench.py --finetune``) scores the eval loss. A run judged by a
task's score is forecast the other way up (``forecast_series`` with ``Direction.HIGHER``: the
score negated, forecast as a loss, turned back and held to its scale), and a trial on curves of
pure exponential saturation found those forecasts optimistic (39 of 42 above the outcome). This
bench asks the same of real runs: every score series with a direction (accuracy, F1, WER, CER,
ROUGE-L, BLEU-4, ...; summaries, not each label's own) of at least 6 evaluations in the
``trainer_state.json`` files under ``curves/hf-finetune*``, split by repository as the fine-tune
bench splits them; each cut at 10/20/30/50/70% of its last evaluation's step and forecast to that
step, where its truth is.

Truth, independent of the advisor: the final value is the last evaluation (the median of the last
5% of them from 20 on). Printed per split and method: the median relative error of the final
value, the share of forecasts on the optimistic side (above the outcome for a score, below it for
an error rate), the median signed error in that sense, and, for the advisor, the share of
outcomes inside its 80% interval. Baselines: the last value (median of the last 3 evaluations)
and the best so far (HF's ``load_best_model_at_end``). No constant is chosen here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _curves import data_root  # type: ignore[import-not-found]
from _finetune import DIRS, load_runs  # type: ignore[import-not-found]

from advisor.forecast.eval_forecast import forecast_series, lr_at
from advisor.series import Direction, _per_class, direction_of, eval_series_name, is_eval_name, is_loss_name
from advisor.sources.normalize import canonical_name

CUTS = (0.1, 0.2, 0.3, 0.5, 0.7)
MIN_EVALS = 6
#: per-run bookkeeping a trainer logs beside its scores: no quality
_NOT_SCORES = ("runtime", "per_second", "len", "num_tokens", "bp")


@dataclass(frozen=True)
class Cut:
    """One forecast of one score series at one cut, with its outcome."""

    split: str
    final: float
    sign: float  # +1 where higher is better
    advisor: tuple[float, float, float]  # mean, p10, p90
    last: float
    best: float


def _scores(history: list[dict]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for entry in history:
        step = entry.get("step")
        for key, value in entry.items():
            name = eval_series_name(canonical_name(key))
            if (
                not is_eval_name(name)
                or is_loss_name(name)
                or _per_class(name)  # one label's of a token classifier's dozens: its summary stands for them
                or any(w in name for w in _NOT_SCORES)
                or not isinstance(value, int | float)
                or isinstance(value, bool)
                or not isinstance(step, int | float)
                or not math.isfinite(value)
                or direction_of(name) is None
            ):
                continue
            out.setdefault(name, []).append((float(step), float(value)))
    return {k: v for k, v in out.items() if len(v) >= MIN_EVALS}


def cuts(root: Path) -> list[Cut]:
    """Every score series' cuts of the development fine-tunes."""
    split_of = {r.name: r.split for r in load_runs(root)}
    out: list[Cut] = []
    for d in DIRS:
        for path in sorted((root / "curves" / d).glob("*.json")):
            name = f"{d}/{path.name}"
            if name not in split_of:
                continue
            logged = json.loads(path.read_text()).get("log_history") or []
            history = [e for e in logged if isinstance(e, dict)]
            lrs = [
                (float(e["step"]), float(e["learning_rate"]))
                for e in history
                if "loss" in e and isinstance(e.get("learning_rate"), int | float)
            ]
            for metric, points in _scores(history).items():
                steps = np.array([p[0] for p in points])
                values = np.array([p[1] for p in points])
                direction = direction_of(metric)
                assert direction is not None
                sign = 1.0 if direction is Direction.HIGHER else -1.0
                tail = values[-values.size // 20 :] if values.size >= 20 else values[-1:]
                final = float(np.median(tail))
                for cut in CUTS:
                    seen = steps <= cut * steps[-1]
                    if seen.sum() < 3 or seen.all():
                        continue
                    x, y = steps[seen].tolist(), values[seen].tolist()
                    schedule = [p for p in lrs if p[0] <= cut * steps[-1]]
                    rates = (
                        lr_at(x, ([p[0] for p in schedule], [p[1] for p in schedule])) if schedule else None
                    )
                    fc = forecast_series(x, y, direction, total_steps=float(steps[-1]), learning_rates=rates)
                    f = fc.final_loss
                    out.append(
                        Cut(
                            split=split_of[name],
                            final=final,
                            sign=sign,
                            advisor=(f.mean, f.p10, f.p90),
                            last=float(np.median(y[-3:])),
                            best=float(max(y) if sign > 0 else min(y)),
                        )
                    )
    return out


def summary(rows: list[Cut]) -> dict[str, dict[str, float]]:
    """Per method: median relative error, optimistic share, median signed error (optimistic +)."""

    def stats(values: list[float]) -> dict[str, float]:
        rel = [abs(v - r.final) / max(abs(r.final), 1e-9) for v, r in zip(values, rows, strict=True)]
        signed = [r.sign * (v - r.final) / max(abs(r.final), 1e-9) for v, r in zip(values, rows, strict=True)]
        return {
            "median_rel_error": float(np.median(rel)),
            "optimistic_share": float(np.mean([s > 0 for s in signed])),
            "median_signed": float(np.median(signed)),
        }

    out = {
        "advisor": stats([r.advisor[0] for r in rows]),
        "last": stats([r.last for r in rows]),
        "best": stats([r.best for r in rows]),
    }
    out["advisor"]["coverage"] = float(np.mean([r.advisor[1] <= r.final <= r.advisor[2] for r in rows]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("tune", "holdout", "all"), default="all")
    args = ap.parse_args(argv)
    root = data_root()
    if root is None:
        print("score_bench: development curves not found (../shared/data/curves); skipped")
        return 0
    rows = cuts(root)
    for split in ("tune", "holdout") if args.split == "all" else (args.split,):
        part = [r for r in rows if r.split == split]
        if not part:
            continue
        print(f"{split}: {len(part)} cut points")
        for method, s in summary(part).items():
            cover = f", 80% coverage {s['coverage']:.2f}" if "coverage" in s else ""
            print(
                f"  {method:8s} median error {s['median_rel_error']:.4f}, optimistic "
                f"{s['optimistic_share']:.2f} of cuts, median signed {s['median_signed']:+.4f}{cover}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
