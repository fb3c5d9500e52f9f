"""When the simulator looks at a job of the advisor row, and when it re-forecasts it: the economics of
spending forecasts where they can change a decision. ``AdvisorStrategy`` asks a ``LookSchedule``
when each job's next tick is due and how far apart its forecasts may be; nothing here decides
anything about a job.

Why the cadence is evidence-driven: the controller re-forecasts a job whenever new progress arrives
(every few tens of seconds), which a simulator of thousands of jobs cannot afford. A fixed coarse
interval, though, makes the simulated advisor slower than the real one exactly where it matters: a
``for: 20m`` window would span one forecast or two. So the simulator spends its forecasts where they
can change a decision:

* a quiet job ticks on the adaptive ``Cadence`` (often early, then a fraction of its age, capped)
  and is re-forecast at most every ``forecast_interval_s``; in a row whose policies act on the
  plateau or divergence probability it ticks at least that often too, so that each forecast the
  interval allows is made;
* a job near a decision, one whose plateau or divergence rule holds its ``for:`` window (advice
  ``plateau?`` / ``diverging?``) or whose plateau/divergence probability is above
  ``watch_probability``, ticks and is re-forecast every ``watch_interval_s``, when the policy that
  selects the job (``Decision.policy``) would act on that condition (not for a rule that only
  recommends, nor for a flat pre-training run whose policy has no plateau rule);
* a tick comes no later than a decision's ``recheck_at`` (a ``for:`` window or a checkpoint timeout
  ending), right after each checkpoint acknowledgement, and whenever a higher-priority workload
  waits in the job's cohort (the controller's watch events); a decision's watchdog
  (``idle_recheck_at``, the stall rule's hold) brings a tick only if the job stops progressing
  before its next one (``Simulation.advances_until``): in the cluster every progress report wakes
  the controller and re-arms it.

A row whose rules all judge learning (plateau, divergence, stall: every one of them waits for the
policy's judgement gate and then reads the forecast or the step clock) can look much less often, and
the replay of a big trace depends on it (a 700-hour job looked at every 20 minutes costs 2,000
forecasts, each fitted on a curve that grew by a 2,000th since the one before):

* no tick while the policy cannot judge the job yet, when that lasts long (``min_skip_s``): after
  its first tick the next comes when ``minRuntime`` has passed and the projected step (measured
  throughput) reaches ``minSteps`` / ``minProgress``; before that no rule of the row may speak, and
  the samples wait in the job's log;
* a quiet judged job is looked at (and re-forecast) every ``1 / looks_per_run`` of its expected run,
  when that is longer than ``forecast_interval_s`` (``AdvisorCore``'s ``forecast_run_fraction``):
  a forecast learns from the share of the run seen since the last one, so a fixed wall-clock
  spacing spends its forecasts on the longest jobs, where each tells least. A late look costs GPU
  time, though (a plateau noticed hours late on an 8-GPU job), so a run gets a close look, a
  forecast every ``close_interval_s`` (default ``forecast_interval_s``; never rarer than its quiet
  spacing), when its loss, at the pace of its recent steps, has less than ``flatten_margin`` left to
  gain (``flattening``: a cheap look at its history, no fit) and its policy acts on a plateau, or
  when its loss rises (``rising``) and its policy acts on a divergence. With the close look apart,
  ``forecast_interval_s`` is only the floor of a quiet job's spacing, and a short quiet run, whose
  release saves little, can be looked at less often than a flattening one.

Measured on every 20th job of the Philly extract (4,112 jobs spread over its 2,600 hours,
``bench/simulate_bench.py --philly-jobs 0 --philly-every 20``): the plain cadence 200 CPU-s, 37,005
forecasts, 6,914 non-learning GPU-h left; 24 looks per run alone 65 CPU-s but 10,737 GPU-h left
(plateaus of long runs noticed a look late); with the flattening check (margin 10%) 100 CPU-s,
19,791 forecasts, 7,229 GPU-h left (a 3% margin: 81 CPU-s, 7,760 GPU-h).

Measured again on every 20th job (both rows in one session, the forecaster of that day): watching a
job only for what its own policy acts on, and giving the close look by the job's policy (a flat
pre-training run has no plateau rule to act on; a rising one still gets it for its divergence rule),
cut the forecasts from 20,475 to 17,501 with the same 7,141 non-learning GPU-h left and the same 2
wrong stops (on the embedded scenario the decisions are the same, only ticks fewer); an hourly floor
for quiet jobs with the close look kept at 20 minutes (the bench's defaults) 16,200 forecasts and
7,131 GPU-h (a two-hour floor: 15,338 and 7,200). What did cost savings: a 5% flattening margin
(15,126 forecasts, 7,747 GPU-h), a 10-minute watch (+130 GPU-h), a 150-point history (+1,500 GPU-h
against the same settings with 300 points), no forecast at quiet looks at all (the trend check
misreads a recovering loss spike as learning fast: 3 times the spikes' non-learning GPU-h), ticks
only when a forecast is due (forecasts come more regularly, so more of them).

What a late look costs depends on the job: a plateau noticed an hour late burns one GPU-hour on a
1-GPU job and eight on an 8-GPU one, while the look costs one forecast either way. With
``reference_gpus`` a quiet judged job's spacings (its share of the run and its close look, not the
watch of a job near a decision) scale with ``sqrt(reference_gpus / gpus)``, the spacing that
minimises looks plus GPU-hours burnt (``stake_factor``). On Philly most jobs hold one GPU and most
GPU-hours sit in the few large ones. Three disjoint every-20th slices (jobs 0, 1 and 2 mod 20), 8
reference GPUs: 7,522 / 7,747 / 7,187 forecasts instead of 11,340 / 11,268 / 10,437 (-32%), 7,192 /
5,616 / 6,467 non-learning GPU-h left instead of 7,005 / 5,432 / 6,100 (+4%), one wrong stop each as
before; 16 reference GPUs on the first: 6,269 forecasts, 7,425 GPU-h. The whole extract with 8:
154,338 forecasts instead of 234,741 and 139,498 GPU-h left instead of 138,562 (+0.7%), 31 wrong
stops instead of 38. Scaling the watch of a near job too cut another 11% of the forecasts but
tripled the wrong stops (1 to 4): a ``for:`` window seen through fewer looks lets a noisy stretch
through.

Other rows (periodic checkpoints, the preemption guard, deadlines, elastic growth act on time and
cluster state, not on learning alone) keep the plain cadence. Measured on the default scenario
(plateau-release row, seed 0): a forecast interval proportional to the job's expected length as the
*only* bound (24 looks per run, so also more often on short runs) cost 70% more forecasts and gave
back nothing more (444 vs 440 non-learning GPU-h left): short runs are limited by the policy's
``minRuntime`` and ``for:``, not by how often they are looked at, hence a floor at
``forecast_interval_s``. The engine's tick count and ``core.forecasts_made`` say what a run cost.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.core import AdvisorCore
from advisor.model import Decision
from simulator.strategy import Cadence

if TYPE_CHECKING:
    from simulator.engine import Simulation
    from simulator.jobs import SimJob

__all__ = ["LEARNING_RULES", "LOOKS_PER_RUN", "LookSchedule", "learning_only"]

#: rules that wait for the policy's judgement gate and then read only the forecast or the step clock
#: (``policies.engine.judge``); a row using no other rule may skip looks no decision can depend on.
#: The overfitting rule reads the learning state, made with the forecast (between forecasts only
#: its P(hung) grows, which lowers P(overfitting): no decision of the rule falls due between looks)
LEARNING_RULES = frozenset({"plateau", "overfitting", "divergence", "stall"})
#: how many times a quiet, judged job of a learning-only row is looked at over its expected run
LOOKS_PER_RUN = 24.0


def _acts_on(policies: Sequence[Any], rule: str) -> bool:
    """Whether any of the policies has ``rule`` enabled with an action other than Recommend."""
    for policy in policies:
        spec = getattr(policy.rules, rule, None)
        if spec is not None and spec.enabled and getattr(spec, "action", "") != "Recommend":
            return True
    return False


def _rising(trend: tuple[float, float, float, float] | None) -> bool:
    """See :meth:`LookSchedule.rising`; ``trend`` is ``_recent_trend``'s answer."""
    if trend is None:
        return False
    a, b, ds, _left = trend
    return not (math.isfinite(a) and math.isfinite(b)) or b <= 0 or ds <= 0 or b > a


def learning_only(policies: Sequence[Any]) -> bool:
    """Whether every rule enabled in the policies is one of :data:`LEARNING_RULES`."""
    from policies.rules import RULES

    if not policies:
        return False
    for policy in policies:
        for _name, _module, attr in RULES:
            spec = getattr(policy.rules, attr, None)
            if spec is not None and spec.enabled and attr not in LEARNING_RULES:
                return False
    return True


class LookSchedule:
    """When the advisor row looks at each job next, and how far apart its forecasts may be.

    ``core`` is the row's core loop (read for each job's record, throughput and forecast bound),
    set by the row once it has built it (the core's ``forecast_run_fraction`` is this schedule's
    ``run_fraction``) and again when it starts a run."""

    def __init__(
        self,
        policies: Sequence[Any],
        *,
        forecast_interval_s: float = 900.0,
        cadence: Cadence | None = None,
        watch_interval_s: float = 300.0,
        watch_probability: float = 0.5,
        looks_per_run: float | None = None,
        close_interval_s: float | None = None,
        flatten_margin: float = 0.1,
        reference_gpus: float | None = None,
    ) -> None:
        if watch_interval_s <= 0:
            raise ValueError("watch_interval_s must be positive")
        if not 0 < watch_probability <= 1:
            raise ValueError("watch_probability must be in (0, 1]")
        if looks_per_run is not None and looks_per_run < 1:
            raise ValueError("looks_per_run must be at least 1 (None: no length-scaled spacing)")
        if close_interval_s is not None and close_interval_s <= 0:
            raise ValueError("close_interval_s must be positive (None: the forecast interval)")
        if not 0 <= flatten_margin <= 1:
            raise ValueError("flatten_margin must be in [0, 1]")
        if reference_gpus is not None and not reference_gpus > 0:
            raise ValueError("reference_gpus must be positive (None: every job looked at alike)")
        self.policies = tuple(policies)
        self.core: AdvisorCore
        self.forecast_interval_s = forecast_interval_s
        # never rarer than a quiet job (a zero forecast interval: a forecast at every tick already)
        self.watch_interval_s = min(watch_interval_s, forecast_interval_s or watch_interval_s)
        self.watch_probability = watch_probability
        self.watch_plateau = _acts_on(self.policies, "plateau")
        self.watch_divergence = _acts_on(self.policies, "divergence")
        # a row that acts on the forecast's probabilities looks at a quiet job once per forecast
        # interval; the others keep the plain cadence (their rules do not hinge on a forecast's timing)
        watching = self.watch_plateau or self.watch_divergence
        self._quiet_spacing = forecast_interval_s if watching and forecast_interval_s > 0 else math.inf
        self.cadence = cadence or Cadence(first_s=600.0, min_s=300.0, max_s=1800.0, fraction=0.25)
        #: the row skips looks no decision can depend on (see the module docstring)
        self.learning_only = learning_only(self.policies) and watching
        self.looks_per_run = looks_per_run
        #: the share of its run after which a quiet judged job is re-forecast (the core's
        #: ``forecast_run_fraction``; 0: by wall-clock time alone)
        self.run_fraction = 1.0 / looks_per_run if self.learning_only and looks_per_run else 0.0
        #: per policy of the row: whether it acts on (plateau, divergence); a job is watched only
        #: for what the policy that selects it would act on
        self._watches = {
            p.name: (_acts_on((p,), "plateau"), _acts_on((p,), "divergence")) for p in self.policies
        }
        self.sim: Simulation | None = None
        self._recheck_at: dict[str, float] = {}
        self._idle_recheck_at: dict[str, float] = {}
        self._spacing: dict[str, float] = {}
        self._flat: set[str] = set()
        #: a wait for the judgement gate shorter than this keeps the plain cadence (only long runs,
        #: whose 10% ``minProgress`` takes hours, gain from skipping it)
        self.min_skip_s = 4 * self.cadence.max_s
        #: share of the steps seen (the most recent) whose trend ``flattening`` reads
        self.flatten_window = 0.1
        #: relative improvement left, at the recent pace, below which a run counts as flattening
        self.flatten_margin = flatten_margin
        #: forecast spacing of a quiet judged job that gets a close look (``_close_look``) in a row
        #: with ``looks_per_run``
        self.close_interval_s = forecast_interval_s if close_interval_s is None else close_interval_s
        #: a quiet judged job's spacings (its share of the run, its close look) scale with
        #: sqrt(reference_gpus / gpus) in a row with ``looks_per_run`` (see ``stake_factor``)
        self.reference_gpus = reference_gpus

    def reset(self, sim: Simulation, core: AdvisorCore) -> None:
        self.sim = sim
        self.core = core
        self._recheck_at = {}
        self._idle_recheck_at = {}
        self._spacing = {}
        self._flat = set()

    def forget(self, key: str) -> None:
        self._recheck_at.pop(key, None)
        self._idle_recheck_at.pop(key, None)
        self._spacing.pop(key, None)
        self._flat.discard(key)

    def first_tick(self, job: SimJob) -> float | None:
        return self.cadence.first_s

    def judge_wait(self, job: SimJob, now: float) -> float | None:
        """Seconds until a policy of the row could judge the job (``policies.engine.judged_from``
        at the measured throughput); None when it may judge now or the wait cannot be projected."""
        from policies.engine import judged_from

        rec = self.core.record(job.key)
        # the policies count minRuntime from the view's start (creation or admission: the scenario's)
        start = self.sim.job_view(job).started_at if self.sim is not None else job.first_start
        if start is None:
            start = job.first_start if job.first_start is not None else now
        earliest = math.inf
        for policy in self.policies:
            at = judged_from(
                policy,
                started_at=start,
                step=rec.step if rec is not None else 0,
                total_steps=rec.total_steps if rec is not None else None,
                steps_per_second=self.core.steps_per_second(job.key),
                now=now,
            )
            if at is None:
                return None
            earliest = min(earliest, at)
        wait = earliest - now
        return wait if wait > 0 else None

    def next_tick(self, job: SimJob, now: float) -> float | None:
        key = job.key
        start = job.first_start if job.first_start is not None else now
        spacing = self._spacing.get(key)
        if self.learning_only:
            wait = self.judge_wait(job, now)
            if wait is not None and wait > self.min_skip_s:
                # no rule of the row may speak before, but the stall rule's watchdog if it stops
                return self._bounded(job, now, wait)
            if spacing is None:
                spacing = self._quiet_bound(job)
                if key in self._flat:
                    spacing = min(spacing, self._close_bound(job))
            if spacing > 0:  # the cadence grows up to the forecast spacing, however long
                delay = min(max(self.cadence.min_s, self.cadence.fraction * (now - start)), spacing)
            else:  # a forecast at every tick: the plain cadence sets the pace
                delay = self.cadence.next(now - start)
            if key not in self._spacing:  # not near a decision: is any look left before the end?
                left = self.looks_left_s(job, now)
                if left is not None:
                    delay = max(delay, left)
        else:
            delay = min(
                self.cadence.next(now - start), spacing if spacing is not None else self._quiet_spacing
            )
        return self._bounded(job, now, delay)

    def _bounded(self, job: SimJob, now: float, delay: float) -> float:
        """``delay`` cut to the job's pending ``recheck_at`` and, when it stops progressing before
        then, to its watchdog (``idle_recheck_at``)."""
        key = job.key
        due = self._recheck_at.get(key)
        if due is not None and due > now:
            delay = min(delay, due - now)
        idle = self._idle_recheck_at.get(key)
        sim = self.sim
        # a watchdog is honoured only if the job stops progressing before the next tick
        if (
            idle is not None
            and now < idle < now + delay
            and (sim is None or not sim.advances_until(job, now + delay))
        ):
            delay = idle - now
        return delay

    def looks_left_s(self, job: SimJob, now: float) -> float | None:
        """Seconds until the job's expected end (its steps left at its measured throughput) when its
        next forecast could come only after it: the last forecast plus the shorter of its quiet and
        close spacings. None when a forecast may still come (or the end cannot be projected).

        Why no tick is needed before: in a row whose rules all judge learning, a look without a
        forecast changes nothing the policies read but the clock, and the clock's deadlines bring
        their own ticks (a ``for:`` window's end through ``recheck_at``, a hang through the stall
        rule's watchdog, which fires when the job stops progressing before this tick), and a
        non-finite loss, which the divergence rule acts on without a forecast, keeps the looks
        (``Simulation.reports_finite_to_end``). On Philly three jobs in four run under an hour:
        on every 20th job, the jobs under 4 hours took 56% of the looks and 33% of the forecasts
        for 0.9% of the non-learning GPU-hours given back. Skipping these looks: 16% fewer looks
        on three disjoint every-20th slices (jobs 0, 1 and 2 mod 20), the same forecasts within 4."""
        if not self.learning_only or self.run_fraction <= 0:
            return None
        rec = self.core.record(job.key)
        if rec is None or rec.forecast_at is None or not rec.total_steps:
            return None
        rate = self.core.steps_per_second(job.key)
        if not rate:
            return None
        left = max(0.0, rec.total_steps - rec.step) / rate
        next_forecast = rec.forecast_at + min(self._quiet_bound(job), self._close_bound(job))
        if next_forecast <= now + left:
            return None
        sim = self.sim
        if sim is not None and not sim.reports_finite_to_end(job):
            return None  # a NaN loss to come: the controller would see that report at once
        return left

    def stake_factor(self, job: SimJob) -> float:
        """How much farther apart a quiet job's looks are than a ``reference_gpus`` job's.

        Why the square root: a look costs one forecast whatever the job, while a plateau noticed a
        spacing ``s`` late burns about ``gpus * s / 2`` GPU-hours on average; the spacing that
        minimises looks plus GPU-hours burnt over a run grows as ``sqrt(1 / gpus)`` (the same
        trade as Young's checkpoint interval). On a big trace most jobs hold one GPU and most
        GPU-hours sit in the few large ones, so the replay spends its forecasts where a late look
        costs most. 1 when no ``reference_gpus`` is set or the row has no ``looks_per_run`` (its
        looks are then spaced by wall-clock time alone)."""
        if self.reference_gpus is None or self.run_fraction <= 0:
            return 1.0
        return math.sqrt(self.reference_gpus / max(1, job.gpus))

    def _scaled(self, job: SimJob, spacing: float) -> float:
        """``spacing`` scaled by the job's stake, never below the watch interval."""
        factor = self.stake_factor(job)
        return spacing if factor == 1.0 else max(self.watch_interval_s, spacing * factor)

    def _quiet_bound(self, job: SimJob) -> float:
        """The core's spacing for a quiet job (its share of the run, floored at the forecast
        interval), scaled by the job's stake."""
        return self._scaled(job, self.core.forecast_bound(job.key))

    def _close_bound(self, job: SimJob) -> float:
        """The close look's spacing (``close_interval_s``), scaled by the job's stake."""
        return self._scaled(job, self.close_interval_s)

    def forecast_spacing(self, key: str, decision: Decision) -> float:
        """How long until the job's next forecast: short near a decision, else the row's bound.

        Near means near a decision of the policy that selects the job (``decision.policy``): a flat
        pre-training run whose policy has no plateau rule is not watched for a plateau."""
        plateau, diverge = self._watches.get(decision.policy or "", (False, False))
        if not (plateau or diverge):
            return self.forecast_interval_s
        rec = self.core.record(key)
        fc = rec.forecast if rec is not None else None
        p_plateau = fc.plateau_probability if fc is not None else 0.0
        p_diverge = fc.divergence_probability if fc is not None else 0.0
        near = (plateau and (decision.advice == "plateau?" or p_plateau > self.watch_probability)) or (
            diverge and (decision.advice == "diverging?" or p_diverge > self.watch_probability)
        )
        return self.watch_interval_s if near else self.forecast_interval_s

    def _recent_trend(self, key: str) -> tuple[float, float, float, float] | None:
        """The median loss of the older and the newer half of the job's recent points, the steps
        between those halves and the steps left: ``(a, b, ds, left_steps)``; None when the job has
        too few points or no known length."""
        rec = self.core.record(key)
        if rec is None or not rec.total_steps:
            return None
        steps, losses = rec.history.last_segment()  # steps strictly increase within a segment
        n = len(steps)
        if n < 8:
            return None
        last = steps[-1]
        lo = bisect.bisect_left(steps, last - self.flatten_window * last)
        if n - lo < 8:
            lo = n - 8
        half = (n - lo) // 2
        a = statistics.median(losses[lo : lo + half])
        b = statistics.median(losses[lo + half :])
        ds = statistics.median(steps[lo + half :]) - statistics.median(steps[lo : lo + half])
        return a, b, ds, max(0, rec.total_steps - last)

    def flattening(self, key: str) -> bool:
        """Whether the job's loss, at the pace of its recent steps, would improve by less than
        ``flatten_margin`` (relative) over the rest of its run: a cheap look at its history (no
        fit) that brings back the plain forecast interval where a plateau may be near. A straight
        line overstates what a decelerating curve has left, so it never calls a run that the
        forecaster would find far from a plateau flattening, only the other way round. A loss
        rising or not finite counts as flattening too (see :meth:`rising`)."""
        return self._flattening(self._recent_trend(key))

    def _flattening(self, trend: tuple[float, float, float, float] | None) -> bool:
        if trend is None:
            return False
        a, b, ds, left_steps = trend
        if not (math.isfinite(a) and math.isfinite(b)) or b <= 0 or ds <= 0:
            return True
        left = max(0.0, (a - b) / ds) * left_steps / b
        return left < self.flatten_margin

    def rising(self, key: str) -> bool:
        """Whether the job's recent loss went up (or is not finite): where a divergence shows,
        which a policy acting on divergence must not see a look late."""
        return _rising(self._recent_trend(key))

    def _close_look(self, key: str) -> bool:
        """Whether a quiet job is looked at every ``close_interval_s`` rather than once per share of
        its run: its loss is flattening and its policy acts on a plateau, or its loss is
        rising and its policy acts on divergence. The policy is the one that last decided on the
        job (before any decision it is not known yet: both count)."""
        rec = self.core.record(key)
        last = rec.last_decision if rec is not None else None
        if last is None:
            plateau, diverge = True, True
        else:
            plateau, diverge = self._watches.get(last.policy or "", (False, False))
        if not (plateau or diverge):
            return False
        trend = self._recent_trend(key)  # read once for both checks
        return (plateau and self._flattening(trend)) or (diverge and _rising(trend))

    def forecast_bound(self, job: SimJob) -> float | None:
        """Before a look: the spacing of forecasts the job may have at it (a near job's watch
        interval, a quiet judged job's stake-scaled or close spacing), None for the core's own."""
        key = job.key
        bound = self._spacing.get(key)
        if self.run_fraction > 0 and bound is None:
            if self._close_look(key):
                self._flat.add(key)
                bound = min(self._close_bound(job), self._quiet_bound(job))
            else:
                self._flat.discard(key)
                if self.reference_gpus is not None:
                    bound = self._quiet_bound(job)
        return bound

    def decided(self, key: str, decision: Decision) -> None:
        """After a look: how near the job is to a decision, and the deadlines the decision set."""
        spacing = self.forecast_spacing(key, decision)
        if spacing < self.forecast_interval_s:
            self._spacing[key] = spacing
        else:
            self._spacing.pop(key, None)
        for store, when in (
            (self._recheck_at, decision.recheck_at),
            (self._idle_recheck_at, decision.idle_recheck_at),
        ):
            if when is not None:
                store[key] = when
            else:
                store.pop(key, None)
