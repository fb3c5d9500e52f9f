"""``trainjob-advisor policy validate | explain | crd``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from policy_builders import HOUR, T0

from advisor.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "manifests" / "samples").glob("policy-*.yaml"))
BAD = """apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: bad}
spec:
  rules:
    plateau: {probability: 1.5}
    stall: {for: whenever}
"""


def test_validate_prints_ok_for_every_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "validate", *map(str, SAMPLES)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(SAMPLES) and all(": OK: " in line for line in out)


def test_validate_of_a_whole_manifests_folder_names_and_skips_what_is_no_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    everything = sorted((ROOT / "manifests" / "samples").glob("*.yaml"))
    assert main(["policy", "validate", *map(str, everything)]) == 0
    out = capsys.readouterr().out
    assert "trainjob-hf-advisor.yaml: skipped: no AdvisorPolicy (TrainJob)" in out
    # a policy beside a TrainJob in one file is checked, the TrainJob named
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(
        SAMPLES[0].read_text() + "\n---\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
    )
    assert main(["policy", "validate", str(mixed)]) == 0
    assert "(skipped: TrainJob)" in capsys.readouterr().out
    # an AdvisorPolicy with a wrong apiVersion, or the advisor's group with a wrong kind: mistakes
    for api, kind in (("v1", "AdvisorPolicy"), ("advisor.trainjob-advisor.io/v1alpha1", "AdvisorPolcy")):
        typo = tmp_path / "typo.yaml"
        typo.write_text(f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: t}}\nspec: {{}}\n")
        assert main(["policy", "validate", str(typo)]) == 1
        assert "must be" in capsys.readouterr().out


def test_validate_prints_each_error_with_its_path_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    assert main(["policy", "validate", str(SAMPLES[0]), str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}: spec.rules.plateau.probability: must be in (0, 1], got 1.5" in out
    assert f"{bad}: spec.rules.stall.for: must be a duration" in out
    assert ": OK: " in out


def test_validate_unreadable_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "validate", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def _state(tmp_path: Path, **job: object) -> Path:
    state = {
        "now": T0,
        "job": {
            "namespace": "team-a",
            "name": "ft-1",
            "startedAt": T0 - 3 * HOUR,
            "step": 9000,
            "totalSteps": 20000,
            "lastStepChange": T0 - 30,
            "clusterQueue": "cq",
            "gpus": 8,
            "forecast": {
                "finalLoss": {"mean": 1.2, "p10": 1.1, "p90": 1.3},
                "plateauProbability": 0.97,
                "divergenceProbability": 0.01,
                "points": 80,
                "currentLoss": 1.21,
            },
            "checkpoint": {"lastTime": T0 - 2 * HOUR, "costSeconds": 45},
            "ruleState": {"plateau.since": T0 - 2 * HOUR},
            **job,
        },
        "cluster": {
            "clusterQueues": [{"name": "cq", "nominalGpus": 16, "usageGpus": 8}],
            "preemptionRate": {"cq": 0.0001},
        },
    }
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state))
    return path


def test_explain_shows_the_selected_policy_each_rule_and_the_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
    assert main(["policy", "explain", str(sample), "--job-state", str(_state(tmp_path))]) == 0
    out = capsys.readouterr().out
    # the sample ships in Recommend mode: it says what it would do and does nothing
    assert "policy plateau-release (Recommend), most specific match" in out
    assert "plateau" in out and "P(plateau)=0.97 >= 0.70 for 2h" in out
    assert "stall             nothing to do" in out
    assert "recommend [plateau]" in out and "would=release-quota, after=checkpoint" in out
    assert "release-quota [" not in out


def test_explain_json_and_policy_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sample = ROOT / "manifests" / "samples" / "policy-preemption-guard.yaml"
    args = ["policy", "explain", str(sample), "--job-state", str(_state(tmp_path)), "--json"]
    assert main(args) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["policy"] == "preemption-guard" and decision["mode"] == "Recommend"
    # 2 h old, interval far shorter: it would checkpoint (Recommend mode: it only says so)
    assert [(a["kind"], a["params"].get("would")) for a in decision["actions"]] == [
        ("recommend", "checkpoint")
    ]
    assert main([*args[:-1], "--policy", "nope"]) == 2


def test_explain_rejects_bad_state_with_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sample = str(SAMPLES[0])
    assert main(["policy", "explain", sample, "--job-state", str(_state(tmp_path, step="many"))]) == 2
    assert "job.step: must be an integer" in capsys.readouterr().err
    assert main(["policy", "explain", sample, "--job-state", str(_state(tmp_path, stpe=3))]) == 2
    assert "job.stpe: unknown key" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    assert main(["policy", "explain", str(bad), "--job-state", str(_state(tmp_path))]) == 2
    # times in milliseconds read as seconds put now 50,000 years ahead: a stall of "2.04e+07d"
    state = _state(tmp_path)
    doc = json.loads(state.read_text())
    state.write_text(json.dumps({**doc, "now": 1_764_590_400_000}))
    capsys.readouterr()
    assert main(["policy", "explain", sample, "--job-state", str(state)]) == 2
    err = capsys.readouterr().err
    assert "now: 1764590400000 is in the year 57,886: times here are Unix seconds" in err
    assert "milliseconds? (1764590400)" in err


def test_crd_prints_the_committed_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "crd"]) == 0
    assert capsys.readouterr().out == (ROOT / "manifests" / "crds" / "advisorpolicy.yaml").read_text()


def test_explain_counts_a_stall_from_the_admission_time_in_the_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``admittedAt``: re-admitted five minutes ago after two hours without a step (it waited in
    the queue), so not hung; without it the stall rule would release."""
    sample = str(ROOT / "manifests" / "samples" / "policy-plateau-release.yaml")
    quiet = {"lastStepChange": T0 - 2 * HOUR, "lastSampleTime": T0 - 2 * HOUR, "ruleState": {}}
    quiet["forecast"] = {"finalLoss": {"mean": 1.0, "p10": 0.9, "p90": 1.1}, "plateauProbability": 0.1}
    args = ["policy", "explain", sample, "--json", "--job-state"]
    assert main([*args, str(_state(tmp_path, **quiet, admittedAt=T0 - 300))]) == 0
    assert json.loads(capsys.readouterr().out)["actions"] == []
    assert main([*args, str(_state(tmp_path, **quiet))]) == 0
    released = json.loads(capsys.readouterr().out)
    assert [a["rule"] for a in released["actions"]] == ["stall"]


def test_explain_warns_when_the_governing_policy_wins_a_tie_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two policies select the job as specifically with the same priority: the one first by name
    governs, and explain says so on stderr (the JSON on stdout stays JSON)."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {{name: {name}}}
spec:
  mode: {mode}
  selector: {{namespaces: [team-a]}}
  rules: {{plateau: {{probability: 0.8, for: 1h}}}}
"""
    path = tmp_path / "two.yaml"
    path.write_text(
        doc.format(name="a-sample", mode="Recommend") + "---" + doc.format(name="b-mine", mode="Apply")
    )
    args = ["policy", "explain", str(path), "--job-state", str(_state(tmp_path))]
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["policy"] == "a-sample"
    assert "a-sample governs over b-mine (same specificity 1 and priority 0: a Recommend" in out.err
    assert "set spec.priority" in out.err
    path.write_text(
        doc.format(name="a-sample", mode="Recommend")
        + "---"
        + doc.format(name="b-mine", mode="Apply")
        + "  priority: 10\n"
    )
    assert main(args) == 0
    out = capsys.readouterr()
    assert "policy b-mine (Apply)" in out.out and "warning" not in out.err


def test_validate_warns_of_a_rule_metric_whose_name_says_no_direction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``metric: eval_myscore`` is valid but never judged (only eval series with a direction are
    tracked): validate says so and how to fix it; with metricDirections there is no warning."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: score}
spec:
  rules:
    plateau: {probability: 0.8, for: 1h, metric: eval_myscore}
    overfitting: {metric: eval_accuracy}
"""
    path = tmp_path / "score.yaml"
    path.write_text(doc)
    assert main(["policy", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert ": OK: score (Recommend)" in out
    assert "warning: policy score: spec.rules.plateau.metric: eval_myscore is never judged" in out
    assert "spec.metricDirections" in out and "overfitting.metric" not in out
    path.write_text(doc + "  metricDirections: {eval_myscore: higher}\n")
    assert main(["policy", "validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_validate_suggests_the_declared_metric_a_rule_misspells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``metric: eval_rewrd`` beside ``metricDirections: {eval_reward: higher}`` is most likely the
    declared one misspelt: the warning names it."""
    path = tmp_path / "reward.yaml"
    path.write_text(
        """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: reward}
spec:
  metricDirections: {eval_reward: higher}
  rules:
    plateau: {probability: 0.8, for: 1h, metric: eval_rewrd}
"""
    )
    assert main(["policy", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "eval_rewrd is never judged: did you mean eval_reward (spec.metricDirections names it)?" in out


@pytest.mark.parametrize(
    ("metric", "likely"),
    [("eval_acuracy", "eval_accuracy"), ("eval_los", "eval_loss"), ("eval_perplexty", "eval_perplexity")],
)
def test_validate_suggests_the_directed_metric_a_rule_misspells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metric: str, likely: str
) -> None:
    """``metric: eval_acuracy`` was warned of only as a name that says no direction, to be added to
    metricDirections: done so, the rule would judge a series no trainer reports. The warning names
    the likely spelling; a name close to no direction word gets no guess."""
    path = tmp_path / "typo.yaml"
    doc = (
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: typo}\n"
        "spec:\n  rules:\n    plateau: {probability: 0.8, for: 1h, metric: METRIC}\n"
    )
    path.write_text(doc.replace("METRIC", metric))
    assert main(["policy", "validate", str(path)]) == 0
    assert f"{metric} is never judged: did you mean {likely}? else its name says" in capsys.readouterr().out
    path.write_text(doc.replace("METRIC", "eval_reward"))
    assert main(["policy", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "eval_reward is never judged: its name says no direction" in out and "did you mean" not in out


def test_validate_warns_that_a_named_eval_loss_is_judged_without_the_task_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Left out, a rule judges a run's eval loss read with its task's score, and holds while the
    score still improves; ``metric: eval_loss`` written out judges the loss alone, which looks like
    the default and is not: validate says so (an admin's trial stopped a fine-tune whose accuracy
    still rose). A score named, or no metric, is no such slip."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {{name: ovf}}
spec:
  rules:
    overfitting: {{probability: 0.8, for: 10m{metric}}}
"""
    path = tmp_path / "ovf.yaml"
    path.write_text(doc.format(metric=", metric: eval_loss"))
    assert main(["policy", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warning: policy ovf: spec.rules.overfitting.metric: eval_loss named is judged alone" in out
    assert "task's score" in out
    for other in ("", ", metric: eval_accuracy"):
        path.write_text(doc.format(metric=other))
        assert main(["policy", "validate", str(path)]) == 0
        assert "warning" not in capsys.readouterr().out


def test_validate_warns_of_a_policy_without_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``rules: {}`` is valid (a way to exempt the jobs it selects), yet such a policy never acts and
    silences every other policy on the jobs it governs: validate says so; one rule ends the warning."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: empty}
spec:
  rules: {}
"""
    path = tmp_path / "empty.yaml"
    path.write_text(doc)
    assert main(["policy", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert ": OK: empty (Recommend)" in out
    assert f"{path}: warning: policy empty: spec.rules: no rules: it never acts" in out
    path.write_text(doc.replace("rules: {}", "rules: {stall: {for: 30m}}"))
    assert main(["policy", "validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_validate_warns_of_windows_under_a_minute_a_bare_number_made_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stall.for: 30`` is 30 seconds, valid, and in a back-test released every run 30 s after a
    step (an admin's trial meant 30m): validate warns in any mode; 0 and a minute or more do not."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: units}
spec:
  safety: {minRuntime: 20, cooldown: 0}
  rules:
    stall: {for: 30}
    plateau: {for: 10m}
"""
    path = tmp_path / "units.yaml"
    path.write_text(doc)
    assert main(["policy", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert ": OK: units (Recommend)" in out
    warned = [line.split(": ")[3] for line in out.splitlines() if "warning" in line]
    assert warned == ["spec.safety.minRuntime", "spec.rules.stall.for"], out
    assert "spec.rules.stall.for: 30 seconds, under a minute: if minutes were meant, write 30m" in out
    path.write_text(doc.replace("20,", "20m,").replace("for: 30}", "for: 60}"))
    assert main(["policy", "validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_validate_warns_of_an_apply_policy_that_acts_on_weak_evidence_or_on_every_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A platform trial's Apply policy with no selector, ``probability: 0.01``, ``for: 0``,
    ``cooldown: 0`` and ``action: Stop`` validated as a plain OK. Each is legal, and each is said;
    the same policy in Recommend mode acts on nothing, and is not warned of."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: zero}
spec:
  mode: Apply
  safety: {cooldown: 0, maxActionsPerHour: 1000, minRuntime: 0}
  rules: {plateau: {probability: 0.01, for: 0, action: Stop}}
"""
    path = tmp_path / "zero.yaml"
    path.write_text(doc)
    assert main(["policy", "validate", str(path)]) == 0
    warnings = [x for x in capsys.readouterr().out.splitlines() if ": warning: " in x]
    prefix = f"{path}: warning: policy zero: "
    assert [w.removeprefix(prefix).split(":")[0] for w in warnings] == [
        "spec.rules.plateau.probability",
        "spec.rules.plateau.for",
        "spec.safety.cooldown",
        "spec.selector",
    ]
    assert "below even odds: Stop acts on runs more likely still learning than not" in warnings[0]
    path.write_text(doc.replace("mode: Apply", "mode: Recommend"))
    assert main(["policy", "validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_validate_warns_of_metric_directions_that_are_ignored_or_turn_a_metric_against_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``metricDirections: {loss: higher, eval_loss: higher}`` was OK and said nothing: the training
    loss is never turned (the entry is ignored), and eval_loss is turned against its name (applied:
    its best checkpoint becomes its highest). Each is a warning naming its field; the policy stays
    valid, and an entry for a name that says no direction is none."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: dirs}
spec:
  rules: {stall: {for: 30m}}
  metricDirections:
    {loss: higher, val_loss: higher, accuracy: lower, eval_accuracy: higher, eval_reward: higher}
"""
    path = tmp_path / "dirs.yaml"
    path.write_text(doc)
    assert main(["policy", "validate", str(path)]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if ": warning: " in line]
    prefix = f"{path}: warning: policy dirs: spec.metricDirections"
    assert warnings == [
        f"{prefix}.loss: the training loss is no eval metric: ignored, it stays lower-is-better as its "
        "name says",
        f"{prefix}.val_loss: higher contradicts the direction its name says (lower): the override is "
        "applied, eval_loss is judged higher-is-better (remove it if that is not meant)",
        f"{prefix}.accuracy: accuracy is no eval metric (eval_..., val_...): ignored",
    ]


def test_explain_of_a_file_with_no_policy_is_an_error_as_validate_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n---\n")
    assert main(["policy", "explain", str(empty), "--job-state", str(_state(tmp_path))]) == 2
    assert f"{empty}: no AdvisorPolicy found" in capsys.readouterr().err


def test_validate_of_files_that_hold_no_policy_is_an_error_as_its_help_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its help says an error (exit 2) when no file given holds a policy: an empty file alone
    exited 1 like an invalid policy. Beside a valid policy it is still reported, and exits 1."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n---\n")
    assert main(["policy", "validate", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{empty}: no AdvisorPolicy in the file" in err[0]
    good = tmp_path / "good.yaml"
    good.write_text(
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: g}\n"
        "spec:\n  rules: {stall: {for: 30m}}\n"
    )
    assert main(["policy", "validate", str(empty), str(good)]) == 1
    out = capsys.readouterr().out
    assert f"{empty}: no AdvisorPolicy found" in out and f"{good}: OK: g (Recommend)" in out


def test_a_yaml_syntax_error_is_one_line_with_its_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tabbed = tmp_path / "tab.yaml"
    tabbed.write_text("kind: AdvisorPolicy\nmetadata:\n  name: x\nspec:\n\tmode: x\n")
    assert main(["policy", "validate", str(tabbed)]) == 1
    out = capsys.readouterr().out.strip()
    assert "\n" not in out, out
    assert "line 5, column 1: found character '\\t' that cannot start any token" in out
    # explain says it the same way (it printed "...AdvisorPolicy: : not valid YAML")
    state = _state(tmp_path)
    assert main(["policy", "explain", str(tabbed), "--job-state", str(state)]) == 2
    err = capsys.readouterr().err
    assert "is not a valid AdvisorPolicy: not valid YAML or JSON" in err and ": :" not in err


def test_explain_judges_an_overfitting_run_from_the_learning_state_in_the_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job state with the run state a live status shows: the overfitting rule and the plateau
    rule judge its eval loss, and name the checkpoint to keep (without it, "no judgement")."""
    sample = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
    example = ROOT / "examples" / "job-state-overfitting.json"
    assert main(["policy", "explain", str(sample), "--job-state", str(example)]) == 0
    out = capsys.readouterr().out
    assert "decision: advice=overfitting:release" in out
    assert "P(overfitting)=0.90 >= 0.80" in out and "keep the checkpoint of step 800" in out
    # the plateau rule, judging the same eval loss, leaves a run past its best to the overfitting
    # rule (which takes no checkpoint of weights past the best)
    assert "is past its best (best eval_loss" in out and "left to the overfitting rule" in out
    state = json.loads(example.read_text())
    bad = state["job"]["learningState"]
    for key, value, message in (
        ("label", "meh", "job.learningState.label: must be one of"),
        ("metric", "eval_bleu", "job.learningState.metric: 'eval_bleu' has no entry"),
        ("bestStep", "x", "job.learningState.bestStep: must be an integer"),
        ("evalSinceBest", 3, "job.learningState.evalSinceBest: unknown key"),
    ):
        broken = json.loads(json.dumps(state))
        broken["job"]["learningState"] = {**bad, key: value}
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(broken))
        assert main(["policy", "explain", str(sample), "--job-state", str(path)]) == 2
        assert message in capsys.readouterr().err


def test_validate_names_a_missing_api_version_and_reads_a_file_named_twice_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "p.yaml"
    missing.write_text("kind: AdvisorPolicy\nmetadata: {name: a}\nspec: {}\n")
    assert main(["policy", "validate", str(missing)]) == 1
    assert "apiVersion: is required (advisor.trainjob-advisor.io/v1alpha1)" in capsys.readouterr().out
    sample = str(SAMPLES[0])
    assert main(["policy", "validate", sample, sample]) == 0  # not "also defined in" itself
    assert len(capsys.readouterr().out.strip().splitlines()) == 1


def test_validate_does_not_warn_of_an_overfitting_rule_on_a_secondary_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Such a rule judges that metric on its own (``LearningState.judgements``), also on jobs that
    log eval_loss."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: a}\n"
        "spec:\n  rules:\n    overfitting: {metric: eval_accuracy}\n"
    )
    assert main(["policy", "validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_explain_reads_the_job_state_from_standard_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    sample = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
    state = _state(tmp_path).read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(state)))
    assert main(["policy", "explain", str(sample), "--job-state", "-"]) == 0
    assert "policy plateau-release (Recommend), most specific match" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"{not json")))
    assert main(["policy", "explain", str(sample), "--job-state", "-"]) == 2
    assert "- is not JSON" in capsys.readouterr().err
    # a TrainJobForecast piped from kubectl: what to take from it, not "apiVersion: unknown key"
    tjf = b'{"apiVersion": "advisor.trainjob-advisor.io/v1alpha1", "kind": "TrainJobForecast", "status": {}}'
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(tjf)))
    assert main(["policy", "explain", str(sample), "--job-state", "-"]) == 2
    err = capsys.readouterr().err
    assert "a TrainJobForecast object, not a job state" in err and "unknown key" not in err


def test_validate_of_files_that_hold_no_policy_at_all_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cm = tmp_path / "cm.yaml"
    cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    # as simulate --policy says: a file with no AdvisorPolicy in it is no policy file (one line, exit 2)
    assert main(["policy", "validate", str(cm)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f": {cm}: no AdvisorPolicy in the file (it holds ConfigMap)")
    # beside a policy (a folder of manifests), it is skipped with a note
    assert main(["policy", "validate", str(cm), str(SAMPLES[0])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{cm}: skipped: no AdvisorPolicy (ConfigMap)" and ": OK: " in out[1]


def test_a_job_state_given_as_a_policy_is_named_as_what_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    """The job state ``policy explain --job-state`` reads, given to ``validate``, ``simulate`` or
    ``backtest`` as a policy by mistake: one line saying what it is (it read as a policy missing
    its apiVersion, kind and name, with three unknown fields: six lines, exit 1)."""
    state = ROOT / "examples" / "job-state.json"
    assert main(["policy", "validate", str(state)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no AdvisorPolicy in the file (it holds a job state" in err[0]
    assert main(["simulate", "--jobs", "5", "--quiet", "--policy", str(state)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        "not an AdvisorPolicy: a job state, as policy explain --job-state reads"
    )


def test_explain_rejects_a_rule_state_the_job_contradicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rule memory the controller could not have written: a string or NaN, a window opened after
    ``now``, or on an evaluation later than any eval series reports. Replayed, it would explain a
    decision no controller makes (a window that never passes, or one that passes at once)."""
    sample = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
    example = ROOT / "examples" / "job-state-overfitting.json"
    state = json.loads(example.read_text())
    last = max(s["lastStep"] for s in state["job"]["learningState"]["series"].values())
    for rule_state, message in (
        ({"overfitting.openedOn": last + 500}, "job.ruleState.overfitting.openedOn: step"),
        ({"overfitting.since": "600"}, "job.ruleState.overfitting.since: must be a finite number"),
        ({"plateau.since": float("nan")}, "job.ruleState.plateau.since: must be a finite number"),
        ({"plateau.since": state["now"] + 60}, "job.ruleState.plateau.since:"),
    ):
        broken = json.loads(json.dumps(state))
        broken["job"]["ruleState"] = rule_state
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(broken))
        assert main(["policy", "explain", str(sample), "--job-state", str(path)]) == 2
        assert message in capsys.readouterr().err
    # the example's own state (opened on an evaluation it reports) is read as it is
    assert main(["policy", "explain", str(sample), "--job-state", str(example)]) == 0


def test_explain_reads_actions_and_checkpoint_pasted_from_a_trainjobforecast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TrainJobForecast's status shows times as RFC 3339 text: its ``actions`` and
    ``checkpoint`` paste into a job state as they are (the actions were refused as lacking a time,
    the checkpoint's time was dropped silently)."""
    from advisor.controller.render import iso

    sample = ROOT / "manifests" / "samples" / "policy-plateau-release.yaml"
    pasted = {
        "actions": [
            {
                "kind": "release-quota",
                "time": iso(T0 - 600),
                "requestId": "r1",
                "policy": "plateau-release",
                "rule": "plateau",
                "outcome": "succeeded",
                "reason": "P(plateau)=0.97",
            }
        ],
        "checkpoint": {"lastStep": 8000, "lastTime": iso(T0 - 120), "costSeconds": 45},
    }
    state = _state(tmp_path, **pasted)
    assert main(["policy", "explain", str(sample), "--job-state", str(state), "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert "plateau: job already released or inactive; nothing more to do" in decision["reasons"]
    # the checkpoint's time is read: 2 minutes old, the guard has no reason to save again
    # (dropped, it read no checkpoint and asked for one)
    guard = ROOT / "manifests" / "samples" / "policy-preemption-guard.yaml"
    saved = _state(tmp_path, checkpoint=pasted["checkpoint"])
    args = ["policy", "explain", str(guard), "--job-state", str(saved), "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["actions"] == []
    broken = dict(pasted, actions=[{**pasted["actions"][0], "time": "yesterday"}])
    assert main(["policy", "explain", str(sample), "--job-state", str(_state(tmp_path, **broken))]) == 2
    assert "job.actions[0].time: must be epoch seconds or an RFC 3339 time" in capsys.readouterr().err
    broken = dict(pasted, actions=[{k: v for k, v in pasted["actions"][0].items() if k != "requestId"}])
    assert main(["policy", "explain", str(sample), "--job-state", str(_state(tmp_path, **broken))]) == 2
    assert "job.actions[0].requestId: is required" in capsys.readouterr().err


def test_validate_warns_of_a_policy_that_can_never_judge_a_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A selector no labels satisfy, or a minProgress of the whole budget, is valid and judges no
    job (a back-test of it read "0 stops"): validate warns in any mode; a satisfiable one does not."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: never}
spec:
  selector:
    jobSelector:
      matchLabels: {workload-type: fine-tuning}
      matchExpressions:
        - {key: workload-type, operator: NotIn, values: [fine-tuning]}
  safety: {minProgress: 1.0}
  rules: {stall: {for: 30m}}
"""
    path = tmp_path / "never.yaml"
    path.write_text(doc)
    assert main(["policy", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "warning: policy never: spec.selector.jobSelector: no labels satisfy its requirements on "
        "'workload-type': the policy selects no job" in out
    )
    assert "warning: policy never: spec.safety.minProgress: 1: a job that reports its planned steps" in out
    path.write_text(
        doc.replace("NotIn, values: [fine-tuning]", "NotIn, values: [pretraining]").replace("1.0", "0.1")
    )
    assert main(["policy", "validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out
    # a release that waits on a checkpoint given up at once (a platform trial's policy validated OK)
    path.write_text(
        doc.replace(
            "rules: {stall: {for: 30m}}",
            "rules: {plateau: {for: 10m}, quotaRelease: {checkpointTimeout: 0s, releaseOnTimeout: false}}",
        )
    )
    assert main(["policy", "validate", str(path)]) == 0
    assert (
        "spec.rules.quotaRelease.checkpointTimeout: 0 with releaseOnTimeout false" in capsys.readouterr().out
    )
    for expressions, satisfiable in (
        ("[{key: a, operator: In, values: [x]}, {key: a, operator: In, values: [y]}]", False),
        ("[{key: a, operator: In, values: [x, y]}, {key: a, operator: NotIn, values: [x]}]", True),
        ("[{key: a, operator: Exists}, {key: a, operator: DoesNotExist}]", False),
        ("[{key: a, operator: NotIn, values: [x]}, {key: a, operator: DoesNotExist}]", True),
    ):
        path.write_text(
            "apiVersion: advisor.trainjob-advisor.io/v1alpha1\nkind: AdvisorPolicy\nmetadata: {name: s}\n"
            f"spec:\n  selector: {{jobSelector: {{matchExpressions: {expressions}}}}}\n"
            "  rules: {stall: {for: 30m}}\n"
        )
        assert main(["policy", "validate", str(path)]) == 0
        assert ("selects no job" not in capsys.readouterr().out) is satisfiable, expressions


def test_validate_warns_of_the_valid_policies_of_a_file_with_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A platform trial's file of several policies, some invalid: only the errors were printed, and
    the misspelt metric of a valid one beside them showed only once the errors were fixed."""
    doc = """
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: typo}
spec:
  rules:
    overfitting: {probability: 0.8, for: 10m, metric: eval_acuracy}
---
apiVersion: advisor.trainjob-advisor.io/v1alpha1
kind: AdvisorPolicy
metadata: {name: broken}
spec:
  rules:
    plateau: {probability: 1.7, for: 10m}
"""
    path = tmp_path / "two.yaml"
    path.write_text(doc)
    assert main(["policy", "validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "[1].spec.rules.plateau.probability" in out
    assert "warning: policy typo: spec.rules.overfitting.metric: eval_acuracy is never judged" in out
    assert "OK" not in out
