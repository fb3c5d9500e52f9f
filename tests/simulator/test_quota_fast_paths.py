"""The quota model's shortcuts change how fast it answers, never what: a scheduling pass that skips
the sizes that cannot be admitted, the cohort totals and borrowing queues kept between changes,
and the cheap test for preemption candidates give exactly the admissions and preemptions of a pass
that looks at every pending workload the long way, on random clusters and random event sequences."""

from __future__ import annotations

import random

import pytest

from simulator import quota as quota_mod
from simulator.quota import ClusterQueueSpec, QuotaModel, Workload


class LongWay(QuotaModel):
    """The reference: every pending workload visited in order, every fit summed over the cohort,
    every candidate search done in full."""

    def _fits(self, cq: str, gpus: int, removed: dict[str, int]) -> bool:
        return super()._fits(cq, gpus, removed or {"": 0})  # a non-empty map takes the long path

    def _may_have_candidates(self, wl: Workload, prio: int, would_borrow: bool) -> bool:
        return True

    def _borrowers(self, cohort: str) -> tuple[tuple[str, int], ...]:
        return tuple(
            (name, min((self._eff(v) for v in self.queues[name].admitted.values()), default=quota_mod._INF))
            for name in self.cohorts[cohort]
            if self.queues[name].usage > self.queues[name].spec.nominal_gpus
        )

    def schedule(self, now: float) -> tuple[list[Workload], list[quota_mod.Preemption]]:
        original = quota_mod.PendingQueue.next_entry

        def every(
            q: quota_mod.PendingQueue, after: quota_mod.QueueKey | None, below: int
        ) -> tuple[quota_mod.QueueKey, Workload] | None:
            return original(q, after, quota_mod._INF)

        quota_mod.PendingQueue.next_entry = every  # type: ignore[method-assign,assignment]
        try:
            return super().schedule(now)
        finally:
            quota_mod.PendingQueue.next_entry = original  # type: ignore[method-assign]


def _specs(rng: random.Random) -> list[ClusterQueueSpec]:
    specs = []
    for i in range(rng.randint(1, 4)):
        nominal = rng.choice([2, 4, 8, 16])
        specs.append(
            ClusterQueueSpec(
                f"q{i}",
                nominal,
                cohort="c",
                lending_limit=rng.choice([None, nominal // 2]),
                within_cluster_queue=rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
                reclaim_within_cohort=rng.choice(["Never", "LowerPriority", "Any"]),
                queueing_strategy=rng.choice(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
            )
        )
    return specs


def _names(events: list[quota_mod.Preemption] | list[Workload]) -> list[object]:
    return [
        (e.victim.uid, e.preemptor.uid, e.reason) if isinstance(e, quota_mod.Preemption) else e.uid
        for e in events
    ]


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_pass_admits_and_preempts_exactly_like_the_long_way(seed: int) -> None:
    rng = random.Random(seed)
    specs = _specs(rng)
    boost = rng.random() < 0.5
    fast, slow = QuotaModel(specs, priority_boost_enabled=boost), LongWay(specs, priority_boost_enabled=boost)
    pairs: list[tuple[Workload, Workload]] = []
    for step in range(150):
        roll = rng.random()
        if roll < 0.55 or not pairs:
            cq = rng.choice(specs).name
            gpus, prio = rng.choice([1, 1, 2, 3, 4, 8, 16]), rng.choice([0, 0, 100, 1000])
            made = tuple(
                Workload(
                    uid=len(pairs),
                    job=f"ns/j{len(pairs)}",
                    cluster_queue=cq,
                    gpus=gpus,
                    priority=prio,
                    created_at=float(step),
                )
                for _ in range(2)
            )
            pairs.append((made[0], made[1]))
            fast.submit(made[0])
            slow.submit(made[1])
        elif roll < 0.85:
            a, b = rng.choice(pairs)
            if not a.finished:
                for model, w in ((fast, a), (slow, b)):
                    model.release(w)
                    w.finished = True
        else:
            a, b = rng.choice(pairs)
            if not a.finished:
                value = rng.choice([0, 1000])
                fast.set_boost(a, value)
                slow.set_boost(b, value)
        got_fast, got_slow = fast.schedule(float(step)), slow.schedule(float(step))
        assert _names(got_fast[0]) == _names(got_slow[0]), step
        assert _names(got_fast[1]) == _names(got_slow[1]), step
        for p in got_fast[1]:  # the engine requeues victims; so does this test, in both models
            fast.submit(p.victim)
            slow.submit(pairs[p.victim.uid][1])
        assert [fast.usage(s.name) for s in specs] == [slow.usage(s.name) for s in specs]


def test_a_long_backlog_of_big_workloads_does_not_hide_a_small_one() -> None:
    q = QuotaModel([ClusterQueueSpec("a", 8)])
    running = Workload(uid=0, job="ns/r", cluster_queue="a", gpus=6)
    q.submit(running)
    q.schedule(0.0)
    for i in range(1, 500):
        q.submit(Workload(uid=i, job=f"ns/b{i}", cluster_queue="a", gpus=8, created_at=float(i)))
    small = Workload(uid=999, job="ns/s", cluster_queue="a", gpus=2, created_at=1e6)
    q.submit(small)
    admitted, _ = q.schedule(1.0)
    assert admitted == [small] and q.usage("a") == 8
