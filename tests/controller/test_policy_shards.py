"""An AdvisorPolicy's figures under namespace shards: releases with their own ``watchNamespaces``
and Lease each write their own entry of the cluster-scoped policy's ``status.shards``, and the
figures ``kubectl get advisorpolicies`` shows are the sums over the entries. A shard never erases
another's part; a shard gone for an hour is dropped; a single release's status keeps its shape."""

from __future__ import annotations

from typing import Any

from advisor.controller.engine import Engine
from advisor.controller.metrics import Metrics
from advisor.controller.policybook import PolicyBook
from advisor.controller.policystatus import (
    DEFAULT_SHARD,
    SHARD_REFRESH_S,
    SHARD_STALE_S,
    JobFigures,
    PolicyFigures,
    policy_figures,
)
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ActionKind, ActionRecord, ClusterView, Decision, Forecast, Interval, JobView, Mode
from tests.controller.fakes import ApiError, Clock, FakeApi, make_engine, trainjob

T0 = 1_800_000_000.0
TJA, TJB = "advisor/tja", "advisor/tjb"


def policy(name: str, namespaces: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"mode": "Apply"}
    if namespaces is not None:
        spec["selector"] = {"namespaces": namespaces}
    return {
        "apiVersion": "advisor.trainjob-advisor.io/v1alpha1",
        "kind": "AdvisorPolicy",
        "metadata": {"name": name, "generation": 1},
        "spec": spec,
    }


def record(policy: str, outcome: str, t: float) -> ActionRecord:
    kind = ActionKind.RECOMMEND if outcome == "recommended" else ActionKind.CHECKPOINT
    return ActionRecord(
        kind=kind, time=t, request_id=f"{policy}-{outcome}-{t}", policy=policy, outcome=outcome
    )


def shard(api: FakeApi, name: str, clock: Clock, *policies: str) -> PolicyBook:
    """A release's book that has seen ``policies`` as the API server holds them now."""
    book = PolicyBook(api, Metrics(), shard=name, clock=clock)
    for p in policies:
        book.on_event("ADDED", api.get_policy(p))
    return book


def jobs_of(policy: str, *keys: str, actions: int = 0, recommendations: int = 0) -> list[JobFigures]:
    out = [JobFigures(key, policy, ()) for key in keys]
    recs = [record(policy, "done", float(i)) for i in range(actions)]
    recs += [record(policy, "recommended", 100.0 + i) for i in range(recommendations)]
    if out:
        out[0] = JobFigures(keys[0], policy, recs)
    return out


def columns(api: FakeApi, name: str) -> tuple[int, int, int]:
    """JOBS, ACTIONS, RECOMMENDED as ``kubectl get advisorpolicies`` prints them."""
    status = api.policies[name]["status"]
    return status["jobsMatched"], status["actionsTaken"], status["recommendations"]


# --------------------------------------------------------------- shards keep each other's part


def test_a_shard_that_starts_keeps_the_figures_another_shard_wrote() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("pol-a", ["team-a"]))
    tja = shard(api, TJA, clock, "pol-a")
    tja.write_figures(jobs_of("pol-a", *(f"team-a/j{i}" for i in range(5)), actions=3, recommendations=1))
    assert columns(api, "pol-a") == (5, 3, 1)
    clock.t += 30
    tjb = shard(api, TJB, clock, "pol-a")  # watches team-c: none of pol-a's jobs
    tjb.write_figures([])
    assert columns(api, "pol-a") == (5, 3, 1)
    assert set(api.policies["pol-a"]["status"]["shards"]) == {TJA, TJB}
    for _ in range(3):  # and for good, at every refresh of either
        clock.t += SHARD_REFRESH_S + 1
        tjb.write_figures([])
        tja.write_figures(jobs_of("pol-a", *(f"team-a/j{i}" for i in range(5)), actions=3, recommendations=1))
    assert columns(api, "pol-a") == (5, 3, 1)


def test_a_controller_restarted_with_more_namespaces_replaces_its_entry_not_adds_one() -> None:
    """A platform trial: ``run -n trial`` restarted as ``run -n trial -n trial2 -n trial3`` (no
    leader election, so the key names the namespaces) wrote a second entry beside its first, and
    the policy read 24 jobs and 12 actions of 14 and 7 for an hour. The same Lease watching
    overlapping namespaces counts the same jobs: its new entry replaces the old, whose carried-over
    GPU-hours it takes on. A shard of the same Lease on other namespaces only is kept."""
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("pol"))
    lease = "trainjob-advisor-system/trainjob-advisor"
    first = shard(api, f"{lease}[trial]", clock, "pol")
    first.hours["pol"] = 2.5
    first.write_figures(jobs_of("pol", *(f"trial/j{i}" for i in range(10)), actions=5))
    other = shard(api, f"{lease}[elsewhere]", clock, "pol")
    other.write_figures(jobs_of("pol", "elsewhere/e1", actions=1))
    assert columns(api, "pol")[:2] == (11, 6)
    clock.t += 60
    wider = shard(api, f"{lease}[trial,trial2,trial3]", clock, "pol")
    assert wider.hours["pol"] == 2.5  # the former entry's, carried over
    wider.write_figures(
        jobs_of("pol", *(f"trial{s}/j{i}" for s in ("", "2", "3") for i in range(4)), actions=7)
    )
    assert columns(api, "pol")[:2] == (13, 8)
    assert set(api.policies["pol"]["status"]["shards"]) == {
        f"{lease}[trial,trial2,trial3]",
        f"{lease}[elsewhere]",
    }
    assert api.policies["pol"]["status"]["gpuHoursFlaggedNonLearning"] == 2.5


def test_a_failover_of_one_shard_leaves_the_other_shards_policy_alone() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("pol-c", ["team-c"]))
    tjb = shard(api, TJB, clock, "pol-c")
    tjb.write_figures(jobs_of("pol-c", "team-c/c1", actions=1))
    tja = shard(api, TJA, clock, "pol-c")
    tja.write_figures([])
    clock.t += 60
    successor = shard(api, TJA, clock, "pol-c")  # tja's standby takes over: a fresh process, same Lease
    successor.write_figures([])
    status = api.policies["pol-c"]["status"]
    assert columns(api, "pol-c")[:2] == (1, 1) and status["matchedJobs"] == ["team-c/c1"]
    assert status["shards"][TJB]["matchedJobs"] == ["team-c/c1"]


def test_a_write_that_conflicts_with_another_shards_is_made_again_from_a_fresh_read() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("global"))
    tja = shard(api, TJA, clock, "global")
    tjb = shard(api, TJB, clock, "global")  # both have seen the same resourceVersion
    tja.write_figures(jobs_of("global", "team-a/g-a", actions=2))
    tjb.write_figures(jobs_of("global", "team-c/g-c", actions=1))  # 409, read again, written
    assert ("get_policy", "global") in api.log
    status = api.policies["global"]["status"]
    assert status["jobsMatched"] == 2 and status["matchedJobs"] == ["team-a/g-a", "team-c/g-c"]
    assert status["actionsTaken"] == 3


def test_a_write_refused_for_another_reason_is_not_retried_and_breaks_nothing() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("pol-a", ["team-a"]))
    tja = shard(api, TJA, clock, "pol-a")

    def unavailable(name: str, status: Any, *, resource_version: str | None = None) -> None:
        raise ApiError(503, "unavailable")

    patch = api.patch_policy_status
    api.patch_policy_status = unavailable  # type: ignore[method-assign]
    tja.write_figures(jobs_of("pol-a", "team-a/a1"))
    assert not [c for c in api.log if c[0] == "get_policy" and len(api.log) > 3]
    api.patch_policy_status = patch  # type: ignore[method-assign]
    tja.write_figures(jobs_of("pol-a", "team-a/a1"))  # the next refresh writes it
    assert columns(api, "pol-a")[0] == 1


# --------------------------------------------------------------------- totals are the sums


def test_a_global_policys_figures_are_the_sums_over_the_shards() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("global"))
    tja = shard(api, TJA, clock, "global")
    tjb = shard(api, TJB, clock, "global")
    tja.add_hours("global", 1.5)
    tjb.add_hours("global", 0.25)
    tja.job_deleted([record("global", "recommended", 7.0)])
    tja.write_figures(jobs_of("global", "team-a/g-a", "team-a/g-a2", actions=2, recommendations=1))
    tjb.on_event("MODIFIED", api.get_policy("global"))  # its watch shows tja's write
    tjb.write_figures(
        [*jobs_of("global", "team-c/g-c", actions=1), JobFigures("team-c/tie", "other", (), ("global",))]
    )
    status = api.policies["global"]["status"]
    assert status["jobsMatched"] == 3
    assert status["matchedJobs"] == ["team-a/g-a", "team-a/g-a2", "team-c/g-c"]
    assert status["actionsTaken"] == 3 and status["actionsByOutcome"] == {"done": 3}
    assert status["actionsByKind"] == {"checkpoint": 3}
    assert status["recommendations"] == 2  # one of them from the job tja saw deleted
    assert status["fromDeletedJobs"]["recommendations"] == 1
    assert status["gpuHoursFlaggedNonLearning"] == 1.75
    assert status["lostTies"] == {"other": 1}
    assert status["shards"][TJA]["jobsMatched"] == 2 and status["shards"][TJB]["jobsMatched"] == 1


def test_a_restarted_shard_carries_over_its_own_hours_and_deleted_counts_not_the_others() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("global"))
    tja = shard(api, TJA, clock, "global")
    tjb = shard(api, TJB, clock, "global")
    tja.add_hours("global", 2.0)
    tja.write_figures([])
    tjb.add_hours("global", 3.0)
    tjb.job_deleted([record("global", "done", 1.0)])
    tjb.write_figures([])
    again = shard(api, TJA, clock, "global")
    assert again.hours["global"] == 2.0 and again.deleted["global"].counts()["actionsByKind"] == {}
    clock.t += SHARD_REFRESH_S + 1
    again.write_figures([])
    status = api.policies["global"]["status"]
    assert status["gpuHoursFlaggedNonLearning"] == 5.0 and status["actionsTaken"] == 1


# ------------------------------------------------------------------------ stale entries go


def test_the_entry_of_a_shard_gone_for_an_hour_is_dropped_by_the_next_writer() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("global"))
    tjb = shard(api, TJB, clock, "global")
    tjb.write_figures(jobs_of("global", "team-c/g-c", actions=4))
    tja = shard(api, TJA, clock, "global")
    tja.write_figures(jobs_of("global", "team-a/g-a"))
    assert columns(api, "global")[:2] == (2, 4)
    # tjb is uninstalled; tja goes on refreshing its own entry
    for _ in range(int(SHARD_STALE_S // SHARD_REFRESH_S)):
        clock.t += SHARD_REFRESH_S
        tja.write_figures(jobs_of("global", "team-a/g-a"))
    assert TJB in api.policies["global"]["status"]["shards"]  # not an hour yet
    clock.t += SHARD_REFRESH_S
    tja.write_figures(jobs_of("global", "team-a/g-a"))
    status = api.policies["global"]["status"]
    assert set(status["shards"]) == {TJA}
    assert columns(api, "global")[:2] == (1, 0) and status["matchedJobs"] == ["team-a/g-a"]


def test_an_idle_shard_refreshes_its_entry_so_that_it_is_never_taken_for_gone() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("pol-c", ["team-c"]))
    tjb = shard(api, TJB, clock, "pol-c")
    tja = shard(api, TJA, clock, "pol-c")
    for _ in range(20):  # ten hours at a 30 s... here 30 min rate; tjb's figures never change
        tjb.write_figures(jobs_of("pol-c", "team-c/c1", actions=1))
        tja.write_figures([])
        clock.t += 1800
    assert set(api.policies["pol-c"]["status"]["shards"]) == {TJA, TJB}
    assert columns(api, "pol-c")[:2] == (1, 1)


def test_nothing_is_written_while_the_status_shows_the_shards_figures_and_its_entry_is_fresh() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("pol-a", ["team-a"]))
    tja = shard(api, TJA, clock, "pol-a")
    tja.write_figures(jobs_of("pol-a", "team-a/a1"))
    writes = len([c for c in api.log if c[0] == "policy_status"])
    clock.t += SHARD_REFRESH_S - 1
    tja.write_figures(jobs_of("pol-a", "team-a/a1"))
    assert len([c for c in api.log if c[0] == "policy_status"]) == writes
    clock.t += 2
    tja.write_figures(jobs_of("pol-a", "team-a/a1"))
    (written,) = [c[2].get("shards") for c in api.log if c[0] == "policy_status"][writes:]
    assert written[TJA]["updatedAt"] == iso(clock.t)  # the refresh: the same figures, a new time
    assert columns(api, "pol-a") == (1, 0, 0)


# ------------------------------------------------------------------ a single release as before


def test_a_single_releases_status_keeps_the_fields_and_values_it_had() -> None:
    api, clock = FakeApi(), Clock(T0)
    api.add_policy(policy("only"))
    book = shard(api, DEFAULT_SHARD, clock, "only")
    book.add_hours("only", 0.5)
    jobs = [
        *jobs_of("only", "team-a/a1", "team-b/b1", actions=2, recommendations=1),
        JobFigures("team-a/x", "other", (), ("only",)),
    ]
    book.write_figures(jobs)
    status = api.policies["only"]["status"]
    expected = policy_figures(["only"], jobs, {"only": 0.5}, {})["only"].status()
    assert {k: status[k] for k in expected} == expected
    assert status["fromDeletedJobs"] == PolicyFigures().counts()
    assert set(status["shards"]) == {DEFAULT_SHARD}
    assert {k: v for k, v in status["shards"][DEFAULT_SHARD].items() if k != "updatedAt"} == {
        **expected,
        "fromDeletedJobs": PolicyFigures().counts(),
    }


def test_a_status_from_before_shards_is_carried_over_by_the_single_release() -> None:
    api, clock = FakeApi(), Clock(T0)
    old = {
        "jobsMatched": 1,
        "matchedJobs": ["team-a/gone"],
        "actionsTaken": 0,
        "actionsByKind": {},
        "actionsByOutcome": {"failed": 2},
        "recommendations": 3,
        "gpuHoursFlaggedNonLearning": 4.0,
        "lostTies": {"x": 1},
        "fromDeletedJobs": {"actionsByKind": {}, "actionsByOutcome": {}, "recommendations": 3},
    }
    api.add_policy({**policy("only"), "status": old})
    book = shard(api, DEFAULT_SHARD, clock, "only")
    book.write_figures([])
    status = api.policies["only"]["status"]
    assert status["gpuHoursFlaggedNonLearning"] == 4.0 and status["recommendations"] == 3
    assert status["jobsMatched"] == 0 and status["matchedJobs"] == []
    assert status["actionsByOutcome"] == {} and status["lostTies"] == {}  # gone keys nulled out


# --------------------------------------------------------------------------- through the engine


def test_two_engines_with_their_own_leases_show_the_sum_of_their_namespaces() -> None:
    api = FakeApi()
    api.add_policy(policy("global"))
    plateau = Forecast(
        final_loss=Interval(0.5, 0.4, 0.6), plateau_probability=0.9, divergence_probability=0.0
    )

    def decide(job: JobView, cluster: ClusterView, p: Any, *, now: float) -> Decision:
        return Decision(job=job.key, policy=p.name, mode=Mode.RECOMMEND, advice="plateau")

    def engine(lease: str) -> Engine:
        core = AdvisorCore(forecast_interval_s=0, forecaster=lambda c, t: plateau, decider=decide)
        e = make_engine(api, core=core, status_shard=lease)
        e.enqueue("policy", "ADDED", api.get_policy("global"))
        return e

    tja = engine(TJA)
    tja.enqueue("job", "MODIFIED", trainjob("g-a", "team-a", uid="a", step=10, loss=0.1, updated=iso(T0)))
    tja.step(T0)
    tjb = engine(TJB)
    tjb.enqueue("job", "MODIFIED", trainjob("g-c", "team-c", uid="c", step=10, loss=0.1, updated=iso(T0)))
    tjb.step(T0 + 1)
    tja.step(T0 + 2)
    status = api.policies["global"]["status"]
    assert status["jobsMatched"] == 2 and status["matchedJobs"] == ["team-a/g-a", "team-c/g-c"]
    assert set(status["shards"]) == {TJA, TJB}


def test_held_actions_of_a_status_written_before_actions_held_are_read_back_apart() -> None:
    """A status from before ``actionsHeld`` counted them as ``held`` among the outcomes, which split
    ``actionsTaken`` (outcomes summing to 10 beside 9 actions taken)."""
    from advisor.controller.policystatus import PolicyFigures

    old = {
        "actionsByKind": {"release-quota": 2},
        "actionsByOutcome": {"done": 2, "held": 1},
        "recommendations": 0,
    }
    figures = PolicyFigures.from_counts(old)
    assert figures.held == 1 and figures.outcomes == {"done": 2}
    assert figures.counts()["actionsHeld"] == 1
    assert PolicyFigures.from_counts(figures.counts()).held == 1  # and kept so
