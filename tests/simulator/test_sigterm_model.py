"""The simulator's save on SIGTERM: it lands only for a helper that saves on SIGTERM, whose save
works, when the rest of the step under way plus the save fit the grace period."""

from __future__ import annotations

from pathlib import Path

from simulator.actuator import sigterm_save_lands
from simulator.baselines import NoAdvisor
from simulator.jobs import Phase
from simulator.runner import run_strategy
from simulator.scenario import default_scenario, with_world


def _job(**kw: object):
    scenario = default_scenario(seed=0, n_jobs=3)
    from simulator.curves import CurveLibrary
    from simulator.jobs import build_jobs

    job = build_jobs(scenario.trace.jobs, scenario.queue_map, scenario.world, CurveLibrary(), 0)[0]
    job.phase, job.phase_start = Phase.RUNNING, 0.0
    job.step_time, job.ckpt_cost, job.rate_factor = 10.0, 20.0, 1.0
    for k, v in kw.items():
        setattr(job, k, v)
    return job


def test_the_save_lands_only_when_the_step_and_the_save_fit() -> None:
    fits = _job(jit=True, sigterm_ok=True, grace_s=30.0)
    assert sigterm_save_lands(fits, now=5.0)  # 5 s left of the step + 20 s save <= 30 s
    tight = _job(jit=True, sigterm_ok=True, grace_s=24.0)
    assert not sigterm_save_lands(tight, now=5.0)  # 25 s > 24 s
    assert sigterm_save_lands(tight, now=9.0)  # late in the step: 1 s + 20 s
    assert not sigterm_save_lands(_job(jit=False, grace_s=300.0), now=5.0)
    assert not sigterm_save_lands(_job(jit=True, sigterm_ok=False, grace_s=300.0), now=5.0)
    saving = _job(jit=True, sigterm_ok=True, grace_s=10.0, phase=Phase.CHECKPOINTING, phase_start=0.0)
    assert not sigterm_save_lands(saving, now=5.0) and sigterm_save_lands(saving, now=12.0)


def test_a_grace_that_fits_the_save_removes_the_work_lost_to_preemption() -> None:
    base = default_scenario(seed=1, n_jobs=60)
    today = run_strategy(base, NoAdvisor()).metrics
    platform = run_strategy(with_world(base, jit_fraction=1.0, grace_fits_save=True), NoAdvisor()).metrics
    broken = run_strategy(
        with_world(base, jit_fraction=1.0, grace_fits_save=True, sigterm_success=0.0), NoAdvisor()
    ).metrics
    assert today["preemptions"] > 0
    # at most the fraction of the step under way is lost per preemption
    assert platform["lost_work_preemption_gpu_hours"] < 0.05 * today["lost_work_preemption_gpu_hours"]
    assert broken["lost_work_preemption_gpu_hours"] > 10 * platform["lost_work_preemption_gpu_hours"]


def test_the_victim_predictor_is_scored_against_the_quota_models_choice() -> None:
    scenario = with_world(default_scenario(seed=0, n_jobs=60), score_victims=True)
    result = run_strategy(scenario, NoAdvisor())
    m = result.metrics
    assert m["victim_model_chosen"] == result.record.victims_chosen > 0
    assert 0.0 <= m["victim_model_precision"] <= 1.0 and 0.0 <= m["victim_model_recall"] <= 1.0
    # a pass can preempt only what the model saw admitted: every hit was both predicted and chosen
    assert result.record.victims_hit <= min(result.record.victims_predicted, result.record.victims_chosen)


def test_the_advisor_sets_the_grace_period_of_evicted_jobs_and_their_later_saves_land(tmp_path) -> None:
    import yaml

    from simulator.runner import policy_strategies

    guard = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "manifests/samples/policy-preemption-guard.yaml").read_text()
    )
    assert guard["spec"]["rules"]["checkpoint"]["setGracePeriod"] is True
    off = tmp_path / "policy-guard-off.yaml"
    guard["spec"]["rules"]["checkpoint"]["setGracePeriod"] = False
    off.write_text(yaml.safe_dump(guard))
    on = Path(__file__).resolve().parents[2] / "manifests/samples/policy-preemption-guard.yaml"
    # every job saves on SIGTERM, with Kubernetes' 30 s grace period unless the advisor sets one
    scenario = with_world(default_scenario(seed=4, n_jobs=60), jit_fraction=1.0)
    rows = {s.name: run_strategy(scenario, s) for s in policy_strategies([on, off])}
    with_grace = rows["advisor-preemption-guard"]
    without = rows["advisor-preemption-guard (policy-guard-off.yaml)"]
    assert with_grace.record.actions.get("set-grace-period", 0) > 0
    assert "set-grace-period" not in without.record.actions
    assert with_grace.metrics["preemptions"] > 0
    assert (
        with_grace.metrics["lost_work_preemption_gpu_hours"]
        < without.metrics["lost_work_preemption_gpu_hours"]
    )


def test_with_the_admission_check_new_jobs_get_their_grace_period_before_their_first_start() -> None:
    from simulator.runner import policy_strategies

    guard = Path(__file__).resolve().parents[2] / "manifests/samples/policy-preemption-guard.yaml"
    base = with_world(default_scenario(seed=4, n_jobs=60), jit_fraction=1.0)
    raced = run_strategy(base, policy_strategies([guard])[0])
    checked = run_strategy(with_world(base, save_window_check=True), policy_strategies([guard])[0])
    # the check holds every new job until the advisor decided on it, so more of them start with
    # the grace period their runtime's save windows call for, and fewer first evictions lose work
    assert checked.record.actions["set-grace-period"] > raced.record.actions["set-grace-period"]
    assert checked.metrics["lost_work_preemption_gpu_hours"] < raced.metrics["lost_work_preemption_gpu_hours"]
    # rows that do not watch the cluster are not held by it
    plain = run_strategy(base, NoAdvisor()).metrics
    held = run_strategy(with_world(base, save_window_check=True), NoAdvisor()).metrics
    assert {k: v for k, v in held.items() if k != "wall_seconds"} == {
        k: v for k, v in plain.items() if k != "wall_seconds"
    }
