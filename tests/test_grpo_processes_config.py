"""GRPO's settings for several training processes and the vLLM server (`sqlenv.training.config`).

`accelerate launch` (torchrun) sets WORLD_SIZE in each process it starts; the config reads it, so a
step's rollouts (batch_size x gradient_accumulation_steps in each process) and the settings that
cannot work across processes are checked before anything loads. The runs themselves are in
tests/test_vllm_server.py (two processes against a real server) and docs/training.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sqlenv.training.config import load_config, world_size

REPO = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_a_steps_rollouts_count_every_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(
        tmp_path, "grpo:\n  batch_size: 2\n  gradient_accumulation_steps: 1\n  num_generations: 4\n"
    )
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(
        ValueError, match=r"grpo\.batch_size x grpo\.gradient_accumulation_steps \(2\) must be"
    ):
        load_config(path)
    monkeypatch.setenv("WORLD_SIZE", "2")
    config = load_config(path)
    assert config.grpo.rollouts_per_step() == 4 and config.grpo.questions_per_step() == 1
    assert config.grpo.rollouts_per_step(processes=1) == 2
    assert config.grpo.questions_read() == config.grpo.max_steps
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(
        ValueError,
        match=r"x 3 processes \(WORLD_SIZE\) \(6\) must be a multiple of grpo\.num_generations \(4\)",
    ):
        load_config(path)


def test_a_bad_world_size_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("0", "two", "-1"):
        monkeypatch.setenv("WORLD_SIZE", value)
        with pytest.raises(
            ValueError, match=f"WORLD_SIZE: expected a positive whole number of processes, got '{value}'"
        ):
            world_size()


def test_the_shared_prompt_pass_is_refused_across_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _config(tmp_path, "grpo:\n  shared_prompt: true\n")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert load_config(path).grpo.shared_prompt
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"grpo\.shared_prompt: runs in one process only \(2 processes here"):
        load_config(path)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("vllm_mode: remote", r"grpo\.vllm_mode: 'remote' is not one of colocate, server"),
        ("vllm_mode: server\n  loop: sqlenv", r"grpo\.vllm_mode: server needs grpo\.loop: trl"),
        (
            "vllm_mode: server\n  engine: transformers",
            r"grpo\.vllm_mode: server needs grpo\.engine: vllm or auto",
        ),
        (
            "vllm_mode: server\n  vllm_server_url: 127.0.0.1:8000",
            r"grpo\.vllm_server_url: expected an http\(s\) URL",
        ),
        (
            "vllm_mode: server\n  vllm_server_timeout: 0",
            r"grpo\.vllm_server_timeout: expected a positive number",
        ),
    ],
)
def test_server_settings_that_cannot_work_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: str, message: str
) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ValueError, match=message):
        load_config(_config(tmp_path, f"grpo:\n  {settings}\n"))


def test_the_server_smoke_config_loads_in_one_process_and_in_two(monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / "configs" / "smoke-server.yaml"
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    one = load_config(path)
    assert (one.grpo.vllm_mode, one.grpo.loop, one.grpo.engine) == ("server", "trl", "vllm")
    assert one.grpo.rollouts_per_step() == 4
    monkeypatch.setenv("WORLD_SIZE", "2")
    two = load_config(path, {"grpo.gradient_accumulation_steps": 1})
    assert two.grpo.rollouts_per_step() == 4  # the same step, 2 rollouts in each process


def test_the_main_process_is_rank_zero_or_the_only_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlenv.training.grpo import is_main_process

    monkeypatch.delenv("RANK", raising=False)
    assert is_main_process()
    monkeypatch.setenv("RANK", "0")
    assert is_main_process()
    monkeypatch.setenv("RANK", "1")
    assert not is_main_process()
