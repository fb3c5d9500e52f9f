"""Synthetic loss curves with a hidden ground truth.

Every simulated job gets a :class:`CurveSpec`: a clean, schedule-aware loss law plus optional
pathologies (early or late plateau, divergence, hang, slow convergence, recovering spikes), and for
a share of the fine-tunes a paired eval series (sparse, noisy, overfitting in a U shape for some:
``evals`` in the parameters, measured on real HF fine-tunes by ``calibrate_evals``). The job
reports noisy samples of it; the clean curve stays hidden from every strategy and is used only to
judge outcomes afterwards ("did stopping this run lose more than 1% of improvement?", read on the
eval curve of a run that reports one, the series the policies judge).

Why a parametric library rather than replaying real curves: a trace job has a duration and a GPU
count but no curve, and the simulator needs arbitrarily many runs of any length. The family shapes,
exponents and noise levels are calibrated on real pre-training curves
(``simulator/calibration/calibrate_curves.py``); only the fitted numbers ship, in
``simulator/data/curve_params.yaml``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from advisor.judging import LEARNING_THRESHOLD

__all__ = [
    "PATHOLOGIES",
    "WORKLOAD_TYPES",
    "WORKLOAD_TYPE_LABEL",
    "CurveLibrary",
    "CurveSpec",
    "load_curve_params",
]

PATHOLOGIES = ("none", "early_plateau", "late_plateau", "diverge", "hang", "slow", "spikes")

# LEARNING_THRESHOLD: relative improvement still to come below which a run "no longer learns"
# (the same 1% as the forecaster's plateau definition and every wrong-stop judgement)
_GRID = 512
#: the progress grid of every run's hidden truth (read-only, shared)
_X = np.linspace(0.0, 1.0, _GRID)
_X.flags.writeable = False

#: the label real clusters put on training jobs to tell pre-training from fine-tuning (the sample
#: plateau-release policy selects on it). Whether a simulated job carries it, and whether it is
#: right, is the scenario's (``WorldConfig.label_rate`` / ``label_error``, or a trace column), never
#: the curve's: a label derived from the hidden curve would tell the policy what only the future can
WORKLOAD_TYPE_LABEL = "workload-type"
#: the kind of a run is drawn first (``pretraining_share`` of the curve parameters), as its user
#: knows it, and its learning-rate schedule from that kind's own mix (``schedules``): pre-training
#: runs often hold their learning rate for most of the budget and anneal at the end
#: (warmup-stable-decay), so their loss is flat for hours and then drops, but many run a cosine;
#: fine-tunes mostly run a constant or cosine schedule, a few a warmup-stable-decay. The label
#: therefore says something of the schedule, as on a real cluster, but never what it is: a
#: fine-tuning label can sit on a run with an anneal still to come, and a pre-training one on a
#: cosine run (the mixes are scenario assumptions, stated in ``curve_params.yaml``)
WORKLOAD_TYPES = ("pretraining", "fine-tuning")


@lru_cache(maxsize=1)
def load_curve_params() -> dict[str, Any]:
    """The shipped calibration (families, exponents, noise, schedules, pathology mix)."""
    text = resources.files("simulator").joinpath("data/curve_params.yaml").read_text()
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("simulator/data/curve_params.yaml: expected a mapping")
    return data


@dataclass(frozen=True, slots=True)
class CurveSpec:
    """One run's hidden loss law over the normalised progress x = step / total_steps in [0, 1].

    clean(x) = l_inf + a * (1 + x / x0) ** -alpha, reduced by the learning-rate anneal
    (``anneal_gain`` of the reducible part is gained as the LR decays to zero), then bent by the
    pathology.
    """

    total_steps: int
    l_inf: float
    a: float
    alpha: float
    x0: float
    schedule: str = "cosine"  # constant | cosine | wsd
    warmup: float = 0.02
    anneal_gain: float = 0.35
    noise: float = 0.01
    pathology: str = "none"
    at: float = 1.0  # where the pathology starts (fraction of total_steps)
    spikes: tuple[tuple[float, float], ...] = ()  # (x, height relative to loss)
    seed: int = 0
    workload_type: str = "fine-tuning"  # pretraining | fine-tuning: the kind of run its user knows it is
    #: a paired eval series (0: none): an evaluation every ``eval_every`` steps of the eval law
    #: ``clean(x) * (1 + eval_gap) * (1 + overfit_rate * max(0, x - overfit_at))``, a U shape when it
    #: overfits, each with a relative scatter ``eval_noise``; a run that reports it is judged by it
    eval_every: int = 0
    eval_gap: float = 0.0
    overfit_at: float = 1.0
    overfit_rate: float = 0.0
    eval_noise: float = 0.0
    _noise_table: np.ndarray | None = field(init=False, repr=False, compare=False)
    _truth: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.total_steps <= 0:
            raise ValueError("total_steps must be positive")
        if self.pathology not in PATHOLOGIES:
            raise ValueError(f"unknown pathology {self.pathology!r}")
        if self.workload_type not in WORKLOAD_TYPES:
            kinds = ", ".join(WORKLOAD_TYPES)
            raise ValueError(f"workload_type must be one of {kinds}, got {self.workload_type!r}")
        # the noise table is drawn on the first report (most jobs of a big trace never tick in a
        # row without an advisor); the truth grid is read at once (``learning_end_step``)
        if self.eval_every < 0:
            raise ValueError("eval_every must not be negative")
        object.__setattr__(self, "_noise_table", None)
        object.__setattr__(self, "_truth", (_X, self._judged(_X)))

    def _noise(self) -> np.ndarray:
        table = self._noise_table
        if table is None:
            table = np.random.default_rng(self.seed).standard_normal(1024)
            object.__setattr__(self, "_noise_table", table)
        return table

    # ---- the hidden law ---------------------------------------------------------------------
    def lr(self, x: np.ndarray | float) -> np.ndarray:
        """Learning rate relative to its peak at progress x."""
        xs = np.asarray(x, dtype=float)
        warm = np.clip(xs / self.warmup, 0.0, 1.0) if self.warmup > 0 else np.ones_like(xs)
        if self.schedule == "constant":
            body = np.ones_like(xs)
        elif self.schedule == "cosine":
            u = np.clip((xs - self.warmup) / max(1e-9, 1.0 - self.warmup), 0.0, 1.0)
            body = 0.5 * (1.0 + np.cos(np.pi * u))
        elif self.schedule == "wsd":
            body = np.clip((1.0 - xs) / 0.2, 0.0, 1.0)
        else:
            raise ValueError(f"unknown schedule {self.schedule!r}")
        return np.asarray(np.maximum(warm * body, 0.0))

    def clean(self, x: np.ndarray | float) -> np.ndarray:
        """The noiseless loss at progress x (NaN after a divergence has blown up)."""
        xs = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        return self._clean(xs, self.lr(xs))

    def _clean(self, xs: np.ndarray, lr: np.ndarray) -> np.ndarray:
        """``clean`` at progress ``xs`` (already within [0, 1]) whose learning rates are ``lr``."""
        xe = xs
        if self.pathology in ("early_plateau", "late_plateau"):
            # the run stops making progress at `at`: only a trickle of learning remains after it
            xe = np.where(xs < self.at, xs, self.at + 0.002 * (xs - self.at))
        reducible = self.a * (1.0 + xe / self.x0) ** (-self.alpha)
        anneal = 1.0 - self.anneal_gain * (1.0 - lr) * (xs > self.warmup)
        loss = self.l_inf + reducible * anneal
        if self.pathology == "diverge":
            over = np.maximum(xs - self.at, 0.0)
            loss = loss * np.exp(over * 60.0)
            loss = np.where(loss > 20.0 * (self.l_inf + self.a), np.nan, loss)
        for x_s, height in self.spikes:
            width = 0.02
            bump = height * np.exp(-np.maximum(xs - x_s, 0.0) / width) * (xs >= x_s)
            loss = loss * (1.0 + bump)
        return np.asarray(loss)

    @property
    def has_evals(self) -> bool:
        return self.eval_every > 0

    @property
    def eval_metric(self) -> str:
        """The name its evaluations are reported under (a real run's may be another)."""
        return "eval_loss"

    def eval_clean(self, x: np.ndarray | float) -> np.ndarray:
        """The noiseless eval loss at progress x: the training law above it by ``eval_gap``, and
        rising past ``overfit_at`` when the run overfits."""
        xs = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        rise = 1.0 + self.overfit_rate * np.maximum(xs - self.overfit_at, 0.0)
        return np.asarray(self.clean(xs) * (1.0 + self.eval_gap) * rise)

    def _judged(self, x: np.ndarray | float) -> np.ndarray:
        """The series whose improvement says whether the run still learns: the eval loss when
        the run reports one (what the policies judge by default), else the training loss."""
        return self.eval_clean(x) if self.has_evals else self.clean(x)

    def eval_observed(self, step: int) -> float | None:
        """The latest evaluation at or before ``step`` (None before the first), as every report
        carries it until the next; deterministic per (seed, evaluation step)."""
        if not self.has_evals:
            return None
        at = min(int(step), self.total_steps) // self.eval_every * self.eval_every
        if at <= 0:
            return None
        value = float(self.eval_clean(at / self.total_steps))
        if not math.isfinite(value):
            return float("nan")
        z = self._noise()[(at * 40503 + 7) % 1024]
        return value * (1.0 + self.eval_noise * float(z))

    @property
    def hang_step(self) -> int | None:
        """The step at which a hung run stops advancing (None when it never hangs)."""
        if self.pathology != "hang":
            return None
        return max(1, int(self.at * self.total_steps))

    def observed(self, step: int) -> float:
        """One noisy report at ``step``; deterministic per (seed, step), so every strategy
        replaying the same run sees the same numbers."""
        x = step / self.total_steps
        value = float(self.clean(x))
        if not math.isfinite(value):
            return float("nan")
        z = self._noise()[(step * 2654435761) % 1024]
        return value * (1.0 + self.noise * float(z))

    def observed_many(self, steps: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`observed` (NaN where the clean loss is not finite)."""
        return self.reports(steps)[0]

    def reports(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What a run logs at ``steps``: the noisy losses (:meth:`observed_many`) and the learning
        rates relative to their peak (:meth:`lr`), from one evaluation of the schedule."""
        st = np.asarray(steps, dtype=np.int64)
        # the schedule is flat past the budget, so its value at the clipped progress is the one
        xs = np.clip(st / self.total_steps, 0.0, 1.0)
        lr = self.lr(xs)
        z = self._noise()[(st * 2654435761) % 1024]
        return np.asarray(self._clean(xs, lr) * (1.0 + self.noise * z)), lr

    @property
    def logs_learning_rate(self) -> bool:
        """A synthetic run always knows its schedule (whether its reporter sends it is the job's)."""
        return True

    def learning_rate(self, step: int, peak: float = 3e-4) -> float:
        return float(self.lr(step / self.total_steps)) * peak

    # ---- ground truth ------------------------------------------------------------------------
    def remaining_improvement(self, step: float) -> float:
        """Relative improvement of the clean judged loss (the eval loss of a run that reports one,
        else the training loss) still to come if the run continued from ``step`` to its end (0
        for a hung run past its hang point or a diverged one)."""
        x, y = self._truth
        end = 1.0
        if self.hang_step is not None:
            end = min(end, self.hang_step / self.total_steps)
        here = float(self._judged(min(step / self.total_steps, 1.0)))
        if not math.isfinite(here):
            return 0.0
        mask = (x >= step / self.total_steps) & (x <= end)
        future = y[mask]
        future = future[np.isfinite(future)]
        if future.size == 0:
            return 0.0
        return max(0.0, (here - float(future.min())) / here)

    def non_finite_from(self) -> int | None:
        """The first step whose loss may not be finite (a divergence blown up to NaN), None when
        the whole run stays finite. Read from the truth grid one point early: a report between
        two grid points may already be past the blow-up."""
        x, y = self._truth
        bad = np.flatnonzero(~np.isfinite(y))
        if bad.size == 0:
            return None
        return int(x[max(0, int(bad[0]) - 1)] * self.total_steps)

    def learning_end_step(self) -> int:
        """First step from which the run never again has more than 1% of improvement ahead
        (the hidden "stopped learning" point; ``total_steps`` for a run learning to the end)."""
        x, y = self._truth
        end = 1.0 if self.hang_step is None else self.hang_step / self.total_steps
        yy = np.where(np.isfinite(y) & (x <= end), y, np.inf)
        suffix_min = np.minimum.accumulate(yy[::-1])[::-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            remaining = np.where(np.isfinite(y), (y - suffix_min) / y, 0.0)
        remaining = np.where(np.isfinite(remaining), remaining, 0.0)
        ok = remaining <= LEARNING_THRESHOLD
        # first index from which `ok` holds until the end
        bad = np.nonzero(~ok)[0]
        first = 0 if bad.size == 0 else int(bad[-1]) + 1
        if first >= _GRID:
            return self.total_steps
        return round(float(x[first]) * self.total_steps)


class _Choice:
    """``str(rng.choice(names, p=weights))``, the very same draw (one uniform number looked up in
    the normalised cumulative weights, as numpy's ``Generator.choice`` does), without its per-call
    validation: tens of thousands of jobs draw two each."""

    def __init__(self, names: list[str], weights: list[float]) -> None:
        p = np.asarray(weights, dtype=np.float64)
        if p.ndim != 1 or p.size != len(names) or p.size == 0 or (p < 0).any() or not p.sum() > 0:
            raise ValueError("choice weights must be non-negative, not all zero, one per name")
        cdf = p.cumsum()
        cdf /= cdf[-1]
        self.names, self.cdf = names, cdf

    def draw(self, rng: np.random.Generator) -> str:
        return self.names[int(self.cdf.searchsorted(rng.random(), side="right"))]


def _kind_mixes(params: dict[str, Any]) -> list[tuple[str, dict[str, float]]]:
    """Each kind of run's schedule mix: ``schedules`` maps each kind to its mix, or is one mix
    (schedule -> weight) that every kind shares."""
    raw = params["schedules"]
    if all(isinstance(v, int | float) for v in raw.values()):
        return [(kind, dict(raw)) for kind in WORKLOAD_TYPES]
    missing = [kind for kind in WORKLOAD_TYPES if kind not in raw]
    if missing:
        raise ValueError(f"schedules: no mix for {', '.join(missing)}")
    return [(kind, dict(raw[kind])) for kind in WORKLOAD_TYPES]


class CurveLibrary:
    """Draws :class:`CurveSpec` s from the calibrated distributions and the pathology mix."""

    def __init__(self, params: dict[str, Any] | None = None, mix: dict[str, float] | None = None) -> None:
        self.params = params if params is not None else load_curve_params()
        raw_mix = dict(self.params["pathology_mix"]) if mix is None else dict(mix)
        unknown = sorted(set(raw_mix) - set(PATHOLOGIES))
        if unknown:
            raise ValueError(f"unknown pathologies in mix: {', '.join(unknown)}")
        total = sum(raw_mix.values())
        if total <= 0 or any(v < 0 for v in raw_mix.values()):
            raise ValueError("pathology mix weights must be non-negative and not all zero")
        self.mix = {k: v / total for k, v in raw_mix.items()}
        self._pathologies = _Choice(list(self.mix), [self.mix[n] for n in self.mix])
        self._schedules = {
            kind: _Choice(list(mix), list(mix.values())) for kind, mix in _kind_mixes(self.params)
        }
        self.pretraining_share = float(self.params.get("pretraining_share", 0.0))
        if not 0.0 <= self.pretraining_share <= 1.0:
            raise ValueError(f"pretraining_share must lie in [0, 1], got {self.pretraining_share}")

    @property
    def description(self) -> str:
        """Where the curves come from and what is assumed, for the output and the report: the
        law is measured, the mixes that drive every saving are not."""
        struck = 1.0 - self.mix.get("none", 0.0)
        return (
            "the synthetic curve library (simulator/data/curve_params.yaml): a power law fitted to "
            "real pre-training validation curves; assumed, not measured: "
            f"{struck:.0%} of runs struck by a pathology (plateau, divergence, hang, slow, spikes), "
            f"{self.pretraining_share:.0%} pre-training runs and each kind's learning-rate schedule mix"
        )

    def draw(
        self, rng: np.random.Generator, total_steps: int, seed: int, workload_type: str | None = None
    ) -> CurveSpec:
        """One run's curve. ``workload_type`` (a trace's ``workload_type`` column) is the kind of run
        the job is, its schedule then drawn from that kind's mix; without it the kind is drawn
        (``pretraining_share``)."""
        p = self.params
        pathology = self._pathologies.draw(rng)
        fam = p["families"]["power"]
        alpha = float(np.exp(rng.normal(fam["log_alpha_mean"], fam["log_alpha_sd"])))
        x0 = float(np.exp(rng.normal(fam["log_x0_mean"], fam["log_x0_sd"])))
        l_inf = float(np.exp(rng.normal(p["l_inf"]["log_mean"], p["l_inf"]["log_sd"])))
        a = l_inf * float(np.exp(rng.normal(fam["log_reducible_ratio_mean"], fam["log_reducible_ratio_sd"])))
        noise = float(np.exp(rng.normal(p["noise"]["log_mean"], p["noise"]["log_sd"])))
        # the kind from a stream of its own (the run's other draws stay as they were), then the
        # schedule from that kind's mix
        kind_rng = np.random.default_rng((int(seed), 0x4B1D))
        drawn = "pretraining" if kind_rng.random() < self.pretraining_share else "fine-tuning"
        workload_type = workload_type or drawn
        schedule = self._schedules[workload_type].draw(rng)
        anneal = float(rng.uniform(*p["anneal_gain_range"]))
        at = 1.0
        spikes: tuple[tuple[float, float], ...] = ()
        ranges = p["pathology_at"]
        if pathology in ranges:
            at = float(rng.uniform(*ranges[pathology]))
        # a pathology strikes any kind of run on any schedule: a plateaued cosine or WSD run still
        # gains what its learning-rate anneal brings (its hidden truth says so, and so do the
        # wrong-stop counts), which is what makes a plateau hard to call before the anneal
        if pathology == "slow":
            x0 = float(rng.uniform(1.0, 3.0))  # still early on its curve when the budget ends
        elif pathology == "spikes":
            n = int(rng.integers(2, 5))
            xs = np.sort(rng.uniform(0.15, 0.85, size=n))
            spikes = tuple((float(x), float(rng.uniform(0.1, 0.6))) for x in xs)
        evals = self._draw_evals(seed, total_steps) if workload_type == "fine-tuning" else {}
        return CurveSpec(
            total_steps=int(total_steps),
            l_inf=l_inf,
            a=a,
            alpha=alpha,
            x0=x0,
            schedule=schedule,
            warmup=float(p["warmup_fraction"]),
            anneal_gain=anneal,
            noise=noise,
            pathology=pathology,
            at=at,
            spikes=spikes,
            seed=seed,
            workload_type=workload_type,
            **evals,
        )

    def _draw_evals(self, seed: int, total_steps: int) -> dict[str, Any]:
        """A fine-tune's eval series (``evals`` of the calibration), from a generator of its own so
        that every other draw of the run, and of the runs after it, stays as it was."""
        e = self.params.get("evals")
        if not e:
            return {}
        rng = np.random.default_rng((int(seed), 0xE7A1))
        if rng.random() >= float(e["share"]):
            return {}
        count = float(np.exp(rng.normal(e["log_count_mean"], e["log_count_sd"])))
        out: dict[str, Any] = {
            "eval_every": max(1, int(total_steps / min(max(count, 3.0), 200.0))),
            "eval_gap": float(e["gap"]),
            "eval_noise": float(
                np.clip(np.exp(rng.normal(e["log_scatter_mean"], e["log_scatter_sd"])), 0.002, 0.1)
            ),
        }
        if rng.random() < float(e["overfit_share"]):
            out["overfit_at"] = float(rng.uniform(*e["overfit_at"]))
            out["overfit_rate"] = float(np.exp(rng.normal(e["log_rate_mean"], e["log_rate_sd"])))
        return out
