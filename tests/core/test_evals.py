"""Eval series in the history: recognising a new evaluation, bounds, restarts, bad input, persistence."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.core.evals import EvalHistory
from advisor.core.history import History
from advisor.model import ProgressSample
from advisor.series import Direction, direction_of, eval_series_name, primary_eval, summaries_first


def ev(step: int, loss: float | None = 1.0, time: float | None = None, **metrics: float) -> ProgressSample:
    return ProgressSample(step=step, loss=loss, time=float(step) if time is None else time, metrics=metrics)


class TestDirections:
    def test_lower_and_higher_words(self) -> None:
        for name in ("eval_loss", "eval_wer", "eval_cer", "eval_perplexity", "eval_error_rate", "val_mse"):
            assert direction_of(name) is Direction.LOWER, name
        for name in (
            "eval_accuracy",
            "eval_f1",
            "eval_bleu",
            "eval_rouge1",
            "eval_rougeLsum",
            "eval_exact_match",
        ):
            assert direction_of(name) is Direction.HIGHER, name

    def test_timings_and_unknown_names_have_no_direction(self) -> None:
        for name in ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "eval_foo"):
            assert direction_of(name) is None, name

    def test_override_wins(self) -> None:
        assert direction_of("eval_foo", {"eval_foo": "higher"}) is Direction.HIGHER
        assert direction_of("eval_loss", {"eval_loss": "higher"}) is Direction.HIGHER

    def test_aliases_and_primary(self) -> None:
        assert eval_series_name("val_loss") == "eval_loss"
        assert primary_eval(("eval_accuracy", "eval_loss")) == "eval_loss"
        assert primary_eval(("eval_runtime", "eval_accuracy")) == "eval_accuracy"
        assert primary_eval(("loss",)) is None

    def test_summaries_are_shown_before_each_labels_own(self) -> None:
        names = ["eval_t005_f1", "eval_PER_f1", "eval_overall_f1", "eval_loss", "eval_class_3_accuracy"]
        names += ["eval_macro_f1", "eval_accuracy", "eval_word_error_rate"]
        assert summaries_first(names) == [
            "eval_loss",  # the primary one: what the run is judged by
            "eval_overall_f1",
            "eval_macro_f1",
            "eval_accuracy",
            "eval_word_error_rate",
            "eval_t005_f1",
            "eval_PER_f1",
            "eval_class_3_accuracy",
        ]


class TestNewEvaluations:
    def test_repeated_values_are_one_evaluation(self) -> None:
        h = History()
        h.append(ev(10, eval_loss=0.9, eval_runtime=3.1))
        h.append(ev(20, eval_loss=0.9, eval_runtime=3.1))  # the status repeats the last evaluation
        h.append(ev(30, eval_loss=0.8, eval_runtime=3.0))
        s = h.evals.series("eval_loss")
        assert s is not None and s.steps == [10, 30] and s.values == [0.9, 0.8]
        assert h.evals.series("eval_runtime") is None  # watched, not kept

    def test_a_change_of_any_eval_value_is_a_new_evaluation(self) -> None:
        h = History()
        h.append(ev(10, eval_accuracy=0.5, eval_runtime=3.0))
        h.append(ev(20, eval_accuracy=0.5, eval_runtime=3.2))
        s = h.evals.series("eval_accuracy")
        assert s is not None and s.steps == [10, 20] and s.direction is Direction.HIGHER

    def test_an_eval_at_a_step_already_seen_without_loss_is_kept(self) -> None:
        h = History()
        assert h.append(ev(10, loss=1.0)) == "appended"
        assert h.append(ProgressSample(step=10, eval_loss=0.7, time=11.0)) == "invalid"
        assert h.last_evals_added == 1
        assert h.evals.series("eval_loss").steps == [10]  # type: ignore[union-attr]

    def test_val_loss_field_is_the_eval_loss_series(self) -> None:
        h = History()
        h.append(ProgressSample(step=5, loss=1.0, eval_loss=0.5, time=5.0))
        assert h.evals.names == ("eval_loss",)

    def test_stale_samples_record_no_evaluation(self) -> None:
        h = History()
        h.append(ev(10, time=100.0, eval_loss=0.5))
        h.append(ev(11, time=50.0, eval_loss=0.4))
        assert h.evals.series("eval_loss").values == [0.5]  # type: ignore[union-attr]


class TestBadInput:
    def test_nan_eval_is_kept_and_counted(self) -> None:
        h = History()
        h.append(ProgressSample(step=1, loss=1.0, eval_loss=float("nan"), time=1.0))
        h.append(ProgressSample(step=2, loss=1.0, eval_loss=0.5, time=2.0))
        s = h.evals.series("eval_loss")
        assert s is not None and math.isnan(s.values[0]) and s.values[1] == 0.5
        assert h.evals.nonfinite == 1 and s.best_index() == 1

    def test_thousands_of_metrics_are_bounded_and_counted(self) -> None:
        h = History()
        metrics = {f"eval_loss_{i}": float(i) for i in range(3000)}
        h.append(ev(1, **metrics))
        assert len(h.evals.names) == h.evals.max_series
        assert h.evals.ignored == 3000 - h.evals.max_series
        assert len(json.dumps(h.to_dict())) < 20_000
        assert any("beyond the cap" in w for w in h.evals.warnings())

    def test_metric_that_appears_and_disappears(self) -> None:
        h = History()
        h.append(ev(1, eval_loss=1.0))
        h.append(ev(2, eval_loss=0.9, eval_f1=0.3))
        h.append(ev(3, eval_loss=0.8))
        h.append(ev(4, eval_loss=0.7, eval_f1=0.5))
        assert h.evals.series("eval_f1").steps == [2, 4]  # type: ignore[union-attr]
        assert h.evals.series("eval_loss").steps == [1, 2, 3, 4]  # type: ignore[union-attr]

    def test_restart_supersedes_the_abandoned_evaluations(self) -> None:
        h = History()
        for step, value in ((100, 1.0), (200, 0.9), (300, 0.95)):
            h.append(ev(step, eval_loss=value))
        h.append(ev(150, time=400.0, eval_loss=0.97))
        assert h.evals.series("eval_loss").steps == [100, 150]  # type: ignore[union-attr]


class TestBound:
    def test_thinning_keeps_first_last_and_best(self) -> None:
        e = EvalHistory(max_points=20)
        values = [abs(i - 7) + 1.0 for i in range(100)]  # best at step 7
        for i, v in enumerate(values):
            e.add(ProgressSample(step=i, metrics={"eval_loss": v}))
        s = e.series("eval_loss")
        assert s is not None and len(s) <= 20 + 1
        assert s.steps[0] == 0 and s.steps[-1] == 99 and 7 in s.steps
        assert e.dropped == 100 - len(s)


class TestPersistence:
    def test_round_trip_through_json(self) -> None:
        h = History()
        for i in range(1, 30):
            h.append(
                ev(
                    i * 10,
                    loss=1.0 / i,
                    eval_loss=0.5 + abs(i - 12) / 50,
                    eval_accuracy=i / 40,
                    eval_runtime=i,
                )
            )
        back = History.from_dict(json.loads(json.dumps(h.to_dict())))
        assert back.evals.to_dict() == h.evals.to_dict()
        back.append(ev(300, eval_loss=h.evals.series("eval_loss").values[-1], eval_runtime=29))  # type: ignore[union-attr]
        assert back.last_evals_added == 0  # the last evaluation is remembered across a restore

    def test_a_history_written_before_evals_reads_whole(self) -> None:
        h = History()
        for i in range(1, 50):
            h.append(ev(i, loss=1.0 / i))
        old = h.to_dict()
        del old["evals"]
        back = History.from_dict(old)
        assert back.curve() == h.curve() and back.evals.names == ()

    def test_damaged_eval_entries_are_skipped(self) -> None:
        data = {
            "series": {
                "eval_loss": {"direction": "lower", "steps": [1, "x", 3, 2], "values": [0.5, 1, None]},
                "bad": {"direction": "sideways"},
                "worse": 7,
            },
            "dropped": -3,
        }
        e = EvalHistory.from_dict(data)
        s = e.series("eval_loss")
        assert e.names == ("eval_loss",) and s is not None and s.steps == [1, 3] and math.isnan(s.values[1])
        assert e.dropped == 0


class TestWhenAnEvaluationWasMade:
    """A live job reports no eval step: its evaluation lands at the first report after it, so it
    was made after the report before that one. A trainer evaluating at steps 500, 1000, ... and
    reporting every 70 steps had its evaluations kept at 518, 1029, ...; the advice named the
    checkpoint of step 3071 where the one saved was 3000."""

    def test_an_evaluation_carried_by_a_later_report_was_made_after_the_one_before(self) -> None:
        h = History()
        value = None
        for step in range(18, 1100, 70):  # reports at 18, 88, ..., 508, 578, ...
            if step > 500 and value is None:
                value = 0.9  # the evaluation at step 500 rides the report at step 508
            h.append(ev(step, loss=1.0 / step, **({} if value is None else {"eval_loss": value})))
        s = h.evals.series("eval_loss")
        assert s is not None and s.steps == [508] and s.made_after == [438]

    def test_an_evaluation_logged_at_a_step_already_reported_is_at_its_own_step(self) -> None:
        """HF logs the training loss and then the evaluation at the same step: nothing is hedged."""
        h = History()
        for step in (10, 20, 30):
            h.append(ev(step, loss=1.0 / step))
        h.append(ev(30, loss=None, eval_loss=0.7))
        s = h.evals.series("eval_loss")
        assert s is not None and s.steps == [30] and s.made_after == [None]

    def test_it_survives_a_restore_and_a_restored_history_bounds_the_next_evaluation(self) -> None:
        h = History()
        for step in (10, 20, 30):
            h.append(ev(step, loss=1.0 / step, **({"eval_loss": 0.8} if step == 30 else {})))
        back = History.from_dict(json.loads(json.dumps(h.to_dict())))
        assert back.evals.series("eval_loss").made_after == [20]  # type: ignore[union-attr]
        back.append(ev(45, loss=0.02, eval_loss=0.7))
        assert back.evals.series("eval_loss").made_after == [20, 30]  # type: ignore[union-attr]

    def test_a_history_stored_before_it_was_kept_reads_unknown(self) -> None:
        data = {"series": {"eval_loss": {"direction": "lower", "steps": [100, 200], "values": [0.9, 0.8]}}}
        s = EvalHistory.from_dict(data).series("eval_loss")
        assert s is not None and s.made_after == [None, None]
        damaged = {"series": {"eval_loss": {**data["series"]["eval_loss"], "madeAfter": [50, 250]}}}
        s = EvalHistory.from_dict(damaged).series("eval_loss")
        assert s is not None and s.made_after == [50, None]  # not behind its own step: unknown


class TestARunThatWentBack:
    """A run resumed from an earlier checkpoint, or from scratch, abandons the evaluations its
    previous attempt made past that step: they are left out of what the run is judged by at once,
    and dropped when the resumed run evaluates. A run released past its best and resumed from
    scratch read "plateaued, P(plateau) 100%" on its previous attempt's evaluations."""

    @staticmethod
    def _evaluated_to(step: int) -> History:
        h = History()
        for s in range(10, step + 1, 10):
            evals = {"eval_loss": 0.5 + abs(s - 300) / 1000} if s % 100 == 0 else {}
            h.append(ev(s, loss=1.0 / s, **evals))
        return h

    def test_from_scratch_the_abandoned_evaluations_are_left_out_then_dropped(self) -> None:
        h = self._evaluated_to(1000)
        assert h.append(ev(1010, loss=0.01, time=1010.0)) == "appended"
        assert h.append(ev(20, loss=2.0, time=1020.0)) == "restart"
        assert h.evals.current("eval_loss") is not None and h.evals.current("eval_loss").steps == []  # type: ignore[union-attr]
        assert len(h.evals.series("eval_loss")) == 10  # type: ignore[arg-type]  # kept, not yet dropped
        back = History.from_dict(json.loads(json.dumps(h.to_dict())))
        assert back.evals.restarted_at_step == 20 and back.evals.current("eval_loss").steps == []  # type: ignore[union-attr]
        for s in range(30, 101, 10):
            h.append(ev(s, loss=1.5, time=1000.0 + s, **({"eval_loss": 0.9} if s == 100 else {})))
        s = h.evals.series("eval_loss")
        assert s is not None and s.steps == [100] and s.values == [0.9] and h.evals.restarted_at_step is None

    def test_from_a_checkpoint_the_evaluations_before_it_stand(self) -> None:
        h = self._evaluated_to(1000)
        assert h.append(ev(600, loss=0.02, time=2000.0)) == "restart"
        current = h.evals.current("eval_loss")
        assert current is not None and current.steps == [100, 200, 300, 400, 500, 600]

    def test_a_garbled_step_back_taken_back_keeps_every_evaluation(self) -> None:
        h = self._evaluated_to(1000)
        h.append(ev(100, loss=0.5, time=1005.0))  # a stray "100" after 1000
        h.append(ev(1500, loss=0.01, time=1010.0))  # many report gaps past where the run stood
        assert h.evals.restarted_at_step is None and len(h.evals.current("eval_loss")) == 10  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 500), st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none())),
        max_size=80,
    )
)
def test_any_eval_stream_stays_bounded_ordered_and_serialisable(
    points: list[tuple[int, float | None]],
) -> None:
    e = EvalHistory(max_points=16)
    for t, (step, value) in enumerate(points):
        e.add(ProgressSample(step=step, eval_loss=value, time=float(t)))
    for name in e.names:
        s = e.series(name)
        assert s is not None and len(s) <= 17
        assert s.steps == sorted(set(s.steps))
        # each evaluation made after a report behind the one that carried it, or at its own step
        assert len(s.made_after) == len(s.steps)
        assert all(a is None or 0 <= a < step for a, step in zip(s.made_after, s.steps, strict=True))
    json.dumps(e.to_dict(), allow_nan=False)
    assert EvalHistory.from_dict(json.loads(json.dumps(e.to_dict()))).to_dict() == e.to_dict()
