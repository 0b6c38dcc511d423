"""`--resume` continues from the newest checkpoint whose saving finished, and says so when there is none.

A sitting ends with a kill, which can land while the Trainer is writing a checkpoint: the folder
then exists without the `trainer_state.json` the Trainer writes last. The end-to-end resume over
such a folder runs in tests/test_training_smoke.py; here, the choice itself and the CLI's error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sqlenv.training.checkpoints import FINISHED_MARKER, checkpoint_folders, resume_checkpoint

REPO = Path(__file__).resolve().parents[1]


def _checkpoint(run_dir: Path, step: int, *, finished: bool = True) -> Path:
    folder = run_dir / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    if finished:
        (folder / FINISHED_MARKER).write_text(json.dumps({"global_step": step}))
    return folder


def test_checkpoints_are_ordered_by_their_step_number_not_their_name(tmp_path: Path) -> None:
    for step in (9, 10, 100, 2):
        _checkpoint(tmp_path, step)
    (tmp_path / "checkpoint-final-copy").mkdir()  # not a checkpoint-N folder
    (tmp_path / "checkpoint-7").write_text("a file, not a folder")
    assert [f.name for f in checkpoint_folders(tmp_path)] == [
        "checkpoint-2", "checkpoint-9", "checkpoint-10", "checkpoint-100",
    ]  # fmt: skip
    assert resume_checkpoint(tmp_path) == tmp_path / "checkpoint-100"


def test_a_checkpoint_whose_saving_was_cut_off_is_passed_over_for_the_one_before(tmp_path: Path) -> None:
    _checkpoint(tmp_path, 6)
    _checkpoint(tmp_path, 8)
    _checkpoint(tmp_path, 10, finished=False)
    assert resume_checkpoint(tmp_path) == tmp_path / "checkpoint-8"


def test_without_a_finished_checkpoint_resuming_is_refused_with_what_was_found(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no checkpoint-N folder in .*run without --resume"):
        resume_checkpoint(tmp_path / "missing")
    with pytest.raises(ValueError, match="no checkpoint-N folder"):
        resume_checkpoint(tmp_path)
    _checkpoint(tmp_path, 2, finished=False)
    with pytest.raises(ValueError, match=rf"checkpoint-2 lack {FINISHED_MARKER} .*stopped while saving"):
        resume_checkpoint(tmp_path)


@pytest.mark.parametrize("phase", ["sft", "grpo"])
def test_the_cli_refuses_resume_at_once_when_nothing_finished_was_saved(tmp_path: Path, phase: str) -> None:
    pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
    _checkpoint(tmp_path / phase, 4, finished=False)
    command = [
        sys.executable, "-m", "sqlenv.cli", "train", phase, "--config", str(REPO / "configs" / "smoke.yaml"),
        "--set", f"output_dir={tmp_path}", "--resume",
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, output[-2000:]
    assert f"--resume: no finished checkpoint in {tmp_path / phase}: checkpoint-4 lack" in output
    assert "Traceback" not in output
    assert (tmp_path / phase / "checkpoint-4" / "adapter_model.safetensors").read_bytes() == b"weights"
