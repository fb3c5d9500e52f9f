"""A HuggingFace Trainer's output folder is one run: its ``trainer_state.json``. The model and
tokenizer files beside it are not runs, and its ``checkpoint-<step>`` folders are snapshots of the
same run, not runs of their own (read as runs, a sweep of four runs became a dozen bad or
duplicated ones, and median stopping compared each run with its own past)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from advisor.backtest.runs import load_runs
from advisor.cli import main
from advisor.sources.runlogs import find_run_logs

#: the files HF writes beside the state: none is a run
_ARTEFACTS = {
    "config.json": '{"model_type": "gpt2", "n_layer": 2}',
    "generation_config.json": '{"bos_token_id": 0}',
    "tokenizer_config.json": '{"model_max_length": 1024}',
    "special_tokens_map.json": '{"eos_token": "<|endoftext|>"}',
    "vocab.json": '{"a": 0, "b": 1}',
    "merges.txt": "#version: 0.2\na b\n",
    "all_results.json": '{"epoch": 3.0, "eval_loss": 0.9, "train_loss": 0.5}',
    "train_results.json": '{"epoch": 3.0, "train_loss": 0.5}',
    "eval_results.json": '{"epoch": 3.0, "eval_loss": 0.9}',
    "training_args.bin": "binary",
}


def _history(upto: int) -> list[dict[str, float]]:
    history: list[dict[str, float]] = []
    for s in range(10, upto + 1, 10):
        history.append({"step": s, "loss": 0.4 + 1.6 * math.exp(-s / 700), "epoch": s / 1000})
        if s % 200 == 0:
            history.append({"step": s, "eval_loss": 0.8 + 0.9 * math.exp(-s / 400), "epoch": s / 1000})
    return history


def _output_dir(
    folder: Path, *, checkpoints: tuple[int, ...] = (1000, 2000), final: int | None = 3000
) -> Path:
    """An output folder as ``Trainer.train()`` + ``save_model()`` + ``save_state()`` leave it."""
    folder.mkdir(parents=True, exist_ok=True)
    for step in checkpoints:
        ckpt = folder / f"checkpoint-{step}"
        ckpt.mkdir()
        for name, text in _ARTEFACTS.items():
            if not name.endswith("results.json"):
                (ckpt / name).write_text(text)
        state = {
            "log_history": _history(step),
            "max_steps": 3000,
            "global_step": step,
            "trial_name": folder.name,
        }
        (ckpt / "trainer_state.json").write_text(json.dumps(state))
    if final is not None:
        for name, text in _ARTEFACTS.items():
            (folder / name).write_text(text)
        state = {
            "log_history": _history(final),
            "max_steps": 3000,
            "global_step": final,
            "trial_name": folder.name,
        }
        (folder / "trainer_state.json").write_text(json.dumps(state))
    return folder


def test_an_output_folder_is_one_run_its_state(tmp_path: Path) -> None:
    out = _output_dir(tmp_path / "out")
    notes: list[str] = []
    assert [log.name for log in find_run_logs([out], note=notes.append)] == ["out/trainer_state.json"]
    assert notes == []  # its configs, results and vocabularies go without a word
    (run,), skipped = load_runs([out])
    assert skipped == [] and run.steps[-1] == 3000


def test_logs_of_other_kinds_beside_a_trainer_state_are_named_as_not_read(tmp_path: Path) -> None:
    """A folder with a trainer_state.json is one run; CSV logs put beside it went unread without a
    word (a back-test of three runs read one). They are named, with how to read them."""
    out = _output_dir(tmp_path / "out", checkpoints=())
    (out / "plateau.csv").write_text("step,loss\n1,2.0\n")
    (out / "hung.csv").write_text("step,loss\n1,2.0\n")
    notes: list[str] = []
    assert [log.name for log in find_run_logs([out], note=notes.append)] == ["out/trainer_state.json"]
    assert notes == [
        f"{out.as_posix()}: a HuggingFace output folder, read as one run from its trainer_state.json; "
        "not read beside it: hung.csv, plateau.csv (name them as files to read them as runs)"
    ]


def test_a_run_stopped_before_its_final_save_is_its_latest_checkpoint(tmp_path: Path) -> None:
    out = _output_dir(tmp_path / "out", checkpoints=(500, 1000, 1500), final=None)
    (tmp_path / "out" / "training_args.bin").write_text("binary")
    assert [log.name for log in find_run_logs([out])] == ["checkpoint-1500/trainer_state.json"]
    (run,), _ = load_runs([out])
    assert run.steps[-1] == 1500


def test_an_output_folder_with_no_state_or_arguments_of_its_own_is_its_latest_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``save_model`` alone leaves the model's files (``config.json``) beside the checkpoints and
    no state: the folder read as two runs, the checkpoint's state and the config (`forecast`:
    "2 runs in it"; `backtest`: "config.json: no loss field")."""
    out = _output_dir(tmp_path / "out", checkpoints=(500, 1000, 1500), final=None)
    for name in ("config.json", "tokenizer_config.json", "all_results.json"):
        (out / name).write_text(_ARTEFACTS[name])
    assert [log.name for log in find_run_logs([out])] == ["checkpoint-1500/trainer_state.json"]
    assert main(["forecast", str(out)]) == 0
    assert "step 1,500 of 3,000" in capsys.readouterr().out
    (run,), skipped = load_runs([tmp_path])
    assert skipped == [] and run.steps[-1] == 1500


def test_forecast_of_a_folder_of_many_runs_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its notes on copies read once (1,332 lines on a large tree) came before the one error."""
    for i in range(5):
        _output_dir(tmp_path / f"run{i}")
        _output_dir(tmp_path / "copies" / f"run{i}")
    assert main(["forecast", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "5 runs in it" in err


def test_a_checkpoint_given_is_read_as_a_run(tmp_path: Path) -> None:
    out = _output_dir(tmp_path / "out")
    (run,), _ = load_runs([out / "checkpoint-1000"])
    assert run.steps[-1] == 1000


def test_a_sweep_of_output_folders_is_one_run_each_grouped_as_the_sweep(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    _output_dir(sweep / "lr1e-4")
    _output_dir(sweep / "lr3e-4")
    _output_dir(sweep / "lr1e-3", checkpoints=(1000, 2000), final=None)  # killed
    (sweep / "lr1e-3" / "training_args.bin").write_text("binary")
    (sweep / "lr1e-3" / "config.json").write_text('{"model_type": "gpt2"}')
    runs, skipped = load_runs([sweep])
    assert skipped == []
    assert [r.name for r in runs] == [
        "lr1e-3/checkpoint-2000/trainer_state.json",
        "lr1e-4/trainer_state.json",
        "lr3e-4/trainer_state.json",
    ]
    assert {r.group for r in runs} == {str(sweep)}  # all three in the sweep's group


def test_an_index_names_a_killed_run_by_its_output_folder(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    _output_dir(sweep / "a")
    _output_dir(sweep / "b", checkpoints=(1000, 2000), final=None)
    (sweep / "index.csv").write_text("run,gpus\na,8\nb,4\n")
    runs, _ = load_runs([sweep])
    assert {r.name: r.gpus for r in runs} == {
        "a/trainer_state.json": 8,
        "b/checkpoint-2000/trainer_state.json": 4,
    }


def test_other_logs_keep_being_read_beside_output_folders(tmp_path: Path) -> None:
    _output_dir(tmp_path / "hf")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "train.csv").write_text(
        "step,loss\n" + "".join(f"{s},{2 / s**0.3}\n" for s in range(1, 200))
    )
    (tmp_path / "plain" / "notes.txt").write_text("not a run\n")  # outside an output folder: read, and bad
    names = [log.name for log in find_run_logs([tmp_path])]
    assert names == ["hf/trainer_state.json", "plain/notes.txt", "plain/train.csv"]


def test_compare_and_backtest_read_a_sweep_of_output_folders(tmp_path: Path, capsys) -> None:
    sweep = tmp_path / "sweep"
    _output_dir(sweep / "lr1e-4")
    _output_dir(sweep / "lr3e-4")
    assert main(["compare", str(sweep), "--json"]) == 0
    ranked = json.loads(capsys.readouterr().out)
    text = json.dumps(ranked)
    assert "lr1e-4/trainer_state.json" in text and "checkpoint-" not in text
    assert main(["backtest", str(sweep), "--json"]) == 0
    policies = json.loads(capsys.readouterr().out)
    assert all(p["runs"] == 2 for p in policies)
