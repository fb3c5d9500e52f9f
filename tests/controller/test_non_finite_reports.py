"""Each progress report with a non-finite loss is judged as it comes: the divergence rule counts
them in a row, and the cheap path (a new report between two forecasts) left the second and third
unjudged, so that a streak over before the next forecast was never acted on."""

from __future__ import annotations

from advisor.controller.engine import Engine, EngineConfig
from advisor.controller.render import iso
from advisor.core import AdvisorCore
from advisor.model import ClusterView, Decision, JobView, Mode
from tests.controller.fakes import FakeApi, trainjob, workload

T0 = 1_800_000_000.0
WL = "team-a/trainjob-llm-abcde"


def test_every_report_with_a_non_finite_loss_is_judged_between_two_forecasts() -> None:
    api = FakeApi()
    api.workloads[WL] = workload()
    seen: list[tuple[int, int | None]] = []

    def decide(job: JobView, cluster: ClusterView, policy: object, *, now: float) -> Decision:
        seen.append((job.step, job.non_finite_reports))
        return Decision(job=job.key, policy="p", mode=Mode.APPLY)

    core = AdvisorCore(
        policies=[object()], forecast_interval_s=30.0, selector=lambda ps, job: ps[0], decider=decide
    )
    config = EngineConfig(
        write_interval_s=0, writer_workers=0, forecast_interval_s=30.0, evaluate_interval_s=30.0
    )
    e = Engine(api, config=config, core=core)
    e.enqueue("workload", "ADDED", api.workloads[WL])
    for i, (step, loss) in enumerate(
        [(10, "1.0"), (20, "0.9"), (30, "nan"), (40, "nan"), (50, "nan"), (60, "0.8")]
    ):
        e.enqueue("job", "MODIFIED", trainjob(step=step, loss=loss, updated=iso(T0 + 2 * i)))
        e.step(T0 + 2 * i)
    judged = dict(seen)
    # each NaN report judged with the streak as it stood; the finite ones in between forecasts not
    assert [judged.get(s) for s in (30, 40, 50)] == [1, 2, 3]
    assert 20 not in judged and 60 not in judged
