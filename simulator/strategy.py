"""What the simulator asks of whoever advises the jobs: the baselines and the real advisor core.

The engine feeds a strategy the new progress samples at each tick and carries out the
:class:`advisor.model.Action` s it returns with its own actuator, exactly as the controller's
actuators would. A strategy only chooses actions and its tick cadence; it cannot touch the world.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from advisor.model import Action, ProgressSample

if TYPE_CHECKING:
    from simulator.engine import Simulation
    from simulator.jobs import SimJob

__all__ = ["Cadence", "Strategy"]


class Cadence:
    """Adaptive tick spacing: often early in a run, then a fixed fraction of its age, capped."""

    def __init__(
        self, first_s: float = 300.0, min_s: float = 300.0, max_s: float = 1800.0, fraction: float = 0.15
    ) -> None:
        if not 0 < min_s <= max_s:
            raise ValueError("tick cadence needs 0 < min_s <= max_s")
        self.first_s, self.min_s, self.max_s, self.fraction = first_s, min_s, max_s, fraction

    def next(self, age_s: float) -> float:
        return min(self.max_s, max(self.min_s, self.fraction * age_s))


class Strategy(Protocol):
    """One row of the comparison: how jobs are advised (or not)."""

    name: str
    #: whether its actions carry victim predictions worth scoring (precision/recall)
    predicts_victims: bool
    #: whether it marks the jobs its policy judged (``SimJob.judged``): the advisor's rows
    judges_by_policy: bool
    #: whether it wants a tick for likely victims when a higher-priority workload arrives pending
    watches_cluster: bool

    def reset(self, sim: Simulation) -> None:
        """Called once before a run; drop all per-run state."""

    def first_tick(self, job: SimJob) -> float | None:
        """Seconds after a job is first admitted until its first tick (None: never tick it)."""

    def next_tick(self, job: SimJob, now: float) -> float | None:
        """Seconds until the job's next tick."""

    def tick(self, job: SimJob, samples: Sequence[ProgressSample], now: float) -> Sequence[Action]:
        """New samples since the last tick in, actions out."""

    def record(self, job: SimJob, action: Action, request_id: str, now: float) -> None:
        """Called before the actuator carries out ``action`` under ``request_id``."""

    def action_outcome(self, job: SimJob, request_id: str, outcome: str, now: float) -> None:
        """The actuator reports what became of a request (``acknowledged``, ``done``, ...)."""

    def policy_of(self, job: SimJob) -> str | None:
        """The policy whose decision the job's actions of this tick carry out (None: a baseline,
        whose rule is no policy's), named with the rule on each stop ``simulate --json`` lists."""

    def finished(self, job: SimJob, now: float) -> None:
        """The job completed, was released or stopped; free per-job state."""
