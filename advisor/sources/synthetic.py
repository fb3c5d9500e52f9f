"""A realistic synthetic loss curve, so that ``trainjob-advisor forecast --demo`` (and tests) need
no input file and no downloaded data.

The shape follows the learning-rate-aware scaling law of Tissue et al. (2024):
``L(s) = L0 + A * (S1(s) + s_w)^(-alpha) - C * S2(s)``, where ``S1`` is the cumulative learning
rate ("forward area") and ``S2`` the momentum-smoothed annealing area. Under a constant LR this is
a plain power-law decay; under a cosine schedule the loss keeps dropping as the LR anneals, which
is exactly the behaviour that fools saturating curve fits. On top: multiplicative log-normal noise,
rare loss spikes, and a wall clock with per-step jitter and periodic evaluation pauses. Everything
is drawn from one seeded generator, so a seed always gives the same curve.
"""

from __future__ import annotations

import numpy as np

from advisor.sources.files import LoadedCurve

__all__ = ["ANNEAL_EQUIVALENT_STEPS", "SCHEDULES", "synthetic_curve"]

SCHEDULES = ("cosine", "constant", "wsd")

#: how many times the steps a constant LR would need to reach where an annealed run ends (drawn
#: uniformly per curve). Measured on the development curves' validation losses (modded-nanogpt,
#: tuning half): a power law fitted to 10-50% of each run, before its LR cooldown, reaches the
#: run's final loss at 1.44x-3.14x its steps (quartiles; median 1.95x; the held-out half 1.33x-3.18x)
#: and no run ended below that law's asymptote. An annealing drop drawn as a fixed amount of loss
#: instead (0.15-0.3 on a final 2.2) put most runs below it: three to six times the improvement
#: the constant-LR law had left after 40% of the run, a run unlike the ones the forecaster is
#: calibrated on.
ANNEAL_EQUIVALENT_STEPS = (1.44, 3.14)


def _learning_rates(total_steps: int, peak: float, schedule: str, warmup: int) -> np.ndarray:
    steps = np.arange(total_steps + 1, dtype=float)
    ramp = np.minimum(1.0, (steps + 1.0) / max(warmup, 1))
    if schedule == "constant":
        shape = np.ones_like(steps)
    elif schedule == "cosine":
        progress = np.clip((steps - warmup) / max(total_steps - warmup, 1), 0.0, 1.0)
        shape = 0.1 + 0.9 * 0.5 * (1.0 + np.cos(np.pi * progress))
    elif schedule == "wsd":  # warmup-stable-decay: flat, then a linear decay over the last 20%
        decay_start = 0.8 * total_steps
        shape = np.clip(1.0 - (steps - decay_start) / (total_steps - decay_start), 0.0, 1.0) * 0.95 + 0.05
        shape[steps < decay_start] = 1.0
    else:
        raise ValueError(f"unknown schedule {schedule!r} (choose one of {', '.join(SCHEDULES)})")
    return peak * ramp * shape


def synthetic_curve(
    *,
    seed: int = 0,
    total_steps: int = 3000,
    log_every: int = 10,
    schedule: str = "cosine",
    noise: float = 0.015,
    final_loss: float = 2.2,
    step_seconds: float = 0.45,
) -> LoadedCurve:
    """A full training run, logged every ``log_every`` steps up to ``total_steps`` (inclusive).

    ``final_loss`` is approximately the noiseless loss at the last step; ``noise`` the relative
    standard deviation of the logged values. Returns the same ``LoadedCurve`` a file would.
    """
    if total_steps < 2 or log_every < 1 or noise < 0 or step_seconds <= 0:
        raise ValueError("total_steps >= 2, log_every >= 1, noise >= 0 and step_seconds > 0 are required")
    rng = np.random.default_rng(seed)
    peak_lr = 3e-4
    warmup = max(1, total_steps // 50)
    lrs = _learning_rates(total_steps, peak_lr, schedule, warmup)
    normalised = lrs / peak_lr
    s1 = np.cumsum(normalised)
    decrease = np.concatenate([[0.0], np.maximum(normalised[:-1] - normalised[1:], 0.0)])
    momentum = np.zeros_like(s1)
    decay = 0.999
    for i in range(1, len(momentum)):  # S2: momentum-smoothed sum of LR decreases
        momentum[i] = decay * momentum[i - 1] + decrease[i]
    s2 = np.cumsum(momentum)
    alpha = rng.uniform(0.35, 0.6)
    amplitude = rng.uniform(6.0, 9.0)
    # the annealing drop: an annealed run ends where the constant-LR power law would be after
    # ``equivalent`` times the steps (ANNEAL_EQUIVALENT_STEPS), never below that law's asymptote
    anneal = 0.0
    if s2[-1] > 0:  # (drawn only then, as the fixed drop was: a seed's noise stays as it was)
        equivalent = rng.uniform(*ANNEAL_EQUIVALENT_STEPS)
        at_end = amplitude * (s1[-1] + 20.0) ** -alpha
        drop = at_end - amplitude * (equivalent * total_steps + 20.0) ** -alpha
        anneal = max(drop, 0.0) / s2[-1]
    law = amplitude * (s1 + 20.0) ** -alpha - anneal * s2
    loss = law - law[-1] + final_loss  # the noiseless curve ends at final_loss

    logged = np.arange(0, total_steps + 1, log_every)
    if logged[-1] != total_steps:
        logged = np.append(logged, total_steps)
    values = loss[logged] * np.exp(rng.normal(0.0, noise, size=logged.size))
    spikes = rng.random(logged.size) < 0.01
    values[spikes] *= rng.uniform(1.05, 1.25, size=int(spikes.sum()))

    per_step = step_seconds * np.exp(rng.normal(0.0, 0.05, size=total_steps + 1))
    eval_every = max(log_every, total_steps // 10)
    per_step[eval_every::eval_every] += 20.0 * step_seconds  # evaluation pauses
    clock = np.cumsum(per_step) - per_step[0]
    return LoadedCurve(
        steps=tuple(float(s) for s in logged),
        values=tuple(float(v) for v in values),
        times=tuple(float(t) for t in clock[logged]),
        learning_rates=tuple(float(lr) for lr in lrs[logged]),
        epochs=None,
        total_steps=total_steps,
        metric="loss",
        source=f"synthetic {schedule} run (seed {seed}, {total_steps} steps)",
    )
