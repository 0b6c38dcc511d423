"""sqlenv's verl tools through verl's own code (verl 0.9): the tools loaded from
configs/integrations/verl_sqlenv_tools.yaml by verl's tool registry, episodes played by verl's
`ToolAgentLoop` (built as verl's agent-loop worker builds it, parsing Hermes tool calls), and the
reward computed by verl's naive reward manager with sqlenv's `compute_score`, loaded the way verl
loads a custom reward function. The model is a scripted policy (the oracle's or the random
policy's tool calls, rendered as Qwen's chat template writes them) behind verl's generate()
interface, on a byte-level tokenizer with a Hermes chat template; no language model runs. Every
step's tool result and reward, and the trajectory's reward and its parts, are what sqlenv's
environment gives the same calls in process."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from integration_episodes import call_json, oracle_replies, random_replies, reference, require_stack, tagged

require_stack("verl", "verl")

import hydra  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop  # noqa: E402
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager  # noqa: E402
from verl.tools.tool_registry import load_all_tools  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from sqlenv.agents.prompts import tool_result_text  # noqa: E402
from sqlenv.config import DEFAULT_CONFIG  # noqa: E402
from sqlenv.data import load_dataset  # noqa: E402
from sqlenv.env.environment import SQLEnvironment  # noqa: E402
from sqlenv.integrations import verl_tools  # noqa: E402
from sqlenv.integrations.chat_episode import EpisodeSettings  # noqa: E402
from sqlenv.integrations.verl_tools import compute_score, verl_rows, write_verl_parquet  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOL_CONFIG = ROOT / "configs" / "integrations" / "verl_sqlenv_tools.yaml"
VERL_CONFIG = Path(sys.modules["verl"].__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
PARTS = ("correctness", "progress", "operational")

# A ChatML chat template with Hermes tool calls (the format of Qwen's templates, which verl's
# `hermes` parser reads), without separators between turns.
CHAT_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}"
    "{%- if tools %}\n# Tools\n<tools>{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>"
    "{%- endif %}<|im_end|>{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}<|im_start|>user\n{{ message.content }}<|im_end|>"
    "{%- elif message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content }}"
    "{%- for call in message.tool_calls or [] %}<tool_call>\n"
    '{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}\n</tool_call>'
    "{%- endfor %}<|im_end|>"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n"
    "</tool_response><|im_end|>{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("demo")


@pytest.fixture(scope="module")
def tokenizer():
    """A byte-level tokenizer (every byte one token, so any text round-trips) with the template."""
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture(scope="module")
def tools():
    """The tools as verl's agent-loop worker loads them: its registry reads the tool config."""
    return load_all_tools(tool_config_path=str(TOOL_CONFIG), function_tool_path=None)


@pytest.fixture(scope="module")
def trainer_config():
    """verl's own full trainer config, with multi-turn tool calling switched on."""
    config = OmegaConf.load(VERL_CONFIG)
    overrides = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 4096,
                    "response_length": 16384,
                    "multi_turn": {
                        "enable": True,
                        "tool_config_path": str(TOOL_CONFIG),
                        "format": "hermes",
                        "max_tool_response_length": 4096,
                    },
                }
            },
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://sqlenv.integrations.verl_tools",
                    "name": "compute_score",
                }
            },
        }
    )
    return OmegaConf.merge(config, overrides)


class ScriptedModel:
    """verl's generate() interface (`LLMServerClient.generate`), replying with scripted tool calls:
    each reply one call in Hermes tags, then a reply without a call, which ends the loop. It keeps
    every prompt it was sent, to check what the model read."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.prompts: list[str] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs
    ) -> TokenOutput:
        self.prompts.append(self.tokenizer.decode(prompt_ids))
        text = self.replies.pop(0) if self.replies else "I have answered."
        ids = self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


def tagged_call(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def _agent_loop(tokenizer, tools, trainer_config, model, agent_name: str = "tool_agent"):
    """The agent loop as verl's agent-loop worker builds it (`_run_agent_loop`), inside the running
    event loop (the loop keeps it for its tokenizer calls)."""
    return hydra.utils.instantiate(
        config=_agent_loop_registry[agent_name],
        trainer_config=DictConfigWrap(config=trainer_config),
        server_manager=model,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(trainer_config.data),
        tools=ToolListWrap(tools),
    )


async def _run(tokenizer, tools, trainer_config, row: dict, model: ScriptedModel):
    agent_loop = _agent_loop(tokenizer, tools, trainer_config, model, row["agent_name"])
    assert isinstance(agent_loop, ToolAgentLoop)
    extra_info = row["extra_info"]
    return await agent_loop.run(
        {"temperature": 1.0},
        raw_prompt=row["prompt"],
        tools_kwargs=extra_info["tools_kwargs"],
        extra_info=extra_info,
    )


def run_trajectory(tokenizer, tools, trainer_config, row: dict, replies: list[str]):
    """One trajectory through ToolAgentLoop; returns its output and the model (with its prompts)."""
    model = ScriptedModel(tokenizer, replies)
    return asyncio.run(_run(tokenizer, tools, trainer_config, row, model)), model


def verl_reward(tokenizer, trainer_config, row: dict, output) -> dict:
    """The trajectory's reward as verl's naive reward manager computes it, with the reward function
    verl loads from the config, on the data verl's agent loop hands it (`_compute_score`)."""
    prompts = torch.tensor([output.prompt_ids])
    responses = torch.tensor([output.response_ids])
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": torch.ones(1, prompts.size(1) + responses.size(1), dtype=torch.int64),
        },
        non_tensors={
            "data_source": np.array([row["data_source"]], dtype=object),
            "reward_model": np.array([row["reward_model"]], dtype=object),
            "extra_info": np.array([dict(row["extra_info"])], dtype=object),
            "tool_extra_fields": np.array([output.extra_fields], dtype=object),
            "__num_turns__": np.array([output.num_turns]),
        },
    )

    async def score():
        manager = NaiveRewardManager(trainer_config, tokenizer, get_custom_reward_fn(trainer_config))
        return await manager.run_single(data)

    return asyncio.run(score())


def assert_pays_in_process(dataset, question_id, actions, output, model, reward) -> None:
    ref = reference(dataset, question_id, actions, DEFAULT_CONFIG)
    assert output.extra_fields["tool_rewards"] == pytest.approx(ref.step_rewards, abs=1e-9)
    assert reward["reward_score"] == pytest.approx(ref.total, abs=1e-9)
    info = reward["reward_extra_info"]
    for part in PARTS:
        assert info[part] == pytest.approx(ref.parts[part], abs=1e-9), part
    assert (info["correct"], info["steps"]) == (float(ref.correct), float(ref.steps))
    summary = output.extra_fields["sqlenv"]
    assert summary["question_id"] == question_id and summary["steps"] == ref.steps
    # What the model read after each call is the in-process step's result (or error), as a tool message.
    env = SQLEnvironment(dataset=dataset, split=dataset.get(question_id).split, config=DEFAULT_CONFIG)
    env.reset(question_id=question_id)
    for step, action in enumerate(actions, start=1):
        shown = tool_result_text(env.step(action))
        assert f"<tool_response>\n{shown[:200]}" in model.prompts[step], step


def test_oracle_trajectories_earn_the_in_process_rewards(dataset, tokenizer, tools, trainer_config):
    """Oracle trajectories on demo questions of both splits: correct, and paid sqlenv's reward."""
    question_ids = [q.question_id for q in dataset.split("train")[:8]] + [
        q.question_id for q in dataset.split("eval")[:4]
    ]
    for question_id in question_ids:
        (row,) = verl_rows(EpisodeSettings(), [question_id])
        actions = oracle_replies(dataset, question_id, DEFAULT_CONFIG)
        replies = [tagged(a) for a in actions]
        output, model = run_trajectory(tokenizer, tools, trainer_config, row, replies)
        reward = verl_reward(tokenizer, trainer_config, row, output)
        assert_pays_in_process(dataset, question_id, actions, output, model, reward)
        assert reward["reward_extra_info"]["correct"] == 1.0 and reward["reward_score"] > 1.0
        # The opening prompt is sqlenv's, with sqlenv's four tools in the template's tools block.
        assert model.prompts[0].count('"type": "function"') == 4
        assert row["prompt"][1]["content"] in model.prompts[0]


@pytest.mark.parametrize("seed", [1, 3, 5])
def test_random_trajectories_earn_the_in_process_rewards(dataset, tokenizer, tools, trainer_config, seed):
    question_id = dataset.split("train")[seed * 9].question_id
    (row,) = verl_rows(EpisodeSettings(), [question_id])
    actions = random_replies(dataset, question_id, seed, DEFAULT_CONFIG)
    replies = [tagged(a) for a in actions]
    output, model = run_trajectory(tokenizer, tools, trainer_config, row, replies)
    assert_pays_in_process(
        dataset, question_id, actions, output, model, verl_reward(tokenizer, trainer_config, row, output)
    )


def test_a_wrong_argument_is_the_chat_loops_format_error(dataset, tokenizer, tools, trainer_config):
    """A call with a wrong argument name reaches the tool and spends a step as a format error, as
    in `sqlenv eval`; a call to a tool that does not exist is refused by verl and spends none."""
    question_id = "demo-0000"
    (row,) = verl_rows(EpisodeSettings(), [question_id])
    oracle = oracle_replies(dataset, question_id, DEFAULT_CONFIG)
    replies = [tagged_call("describe", {"table": "books"}), tagged_call("drop_table", {"name": "books"})]
    replies += [tagged(a) for a in oracle]
    output, model = run_trajectory(tokenizer, tools, trainer_config, row, replies)
    reward = verl_reward(tokenizer, trainer_config, row, output)
    bad = 'describe({"table": "books"})'
    ref = reference(dataset, question_id, [bad, *oracle], DEFAULT_CONFIG)
    assert ref.format_errors == 1
    # verl's own refusal pays 0 and is no step; sqlenv's steps pay what they pay in process.
    assert output.extra_fields["tool_rewards"] == pytest.approx(
        [ref.step_rewards[0], 0.0, *ref.step_rewards[1:]], abs=1e-9
    )
    assert reward["reward_score"] == pytest.approx(ref.total, abs=1e-9)
    assert reward["reward_extra_info"]["steps"] == ref.steps
    assert "Unknown function 'drop_table'" in model.prompts[2]


def test_a_trajectory_that_never_calls_a_tool_scores_zero(dataset, tokenizer, tools, trainer_config):
    (row,) = verl_rows(EpisodeSettings(), ["demo-0000"])
    output, _ = run_trajectory(tokenizer, tools, trainer_config, row, ["The answer is 60."])
    reward = verl_reward(tokenizer, trainer_config, row, output)
    assert reward["reward_score"] == 0.0 and reward["reward_extra_info"]["steps"] == 0.0


def test_episodes_belong_to_their_trajectory(dataset, tokenizer, tools, trainer_config):
    """Two trajectories run concurrently on the event loop, their calls interleaved, each pay their
    own episode; the episodes go when verl drops the trajectories."""
    rows = verl_rows(EpisodeSettings(), ["demo-0000", "demo-0001"])
    plans = {
        row["extra_info"]["question_id"]: oracle_replies(
            dataset, row["extra_info"]["question_id"], DEFAULT_CONFIG
        )
        for row in rows
    }

    async def both():
        models = [
            ScriptedModel(tokenizer, [tagged(a) for a in plans[row["extra_info"]["question_id"]]])
            for row in rows
        ]
        outputs = await asyncio.gather(
            *(
                _run(tokenizer, tools, trainer_config, row, model)
                for row, model in zip(rows, models, strict=True)
            )
        )
        return outputs, models

    outputs, models = asyncio.run(both())
    for row, output, model in zip(rows, outputs, models, strict=True):
        question_id = row["extra_info"]["question_id"]
        reward = verl_reward(tokenizer, trainer_config, row, output)
        assert_pays_in_process(dataset, question_id, plans[question_id], output, model, reward)
    del outputs, models
    gc.collect()
    assert len(verl_tools._BY_AGENT_DATA) == 0


def test_the_basetool_contract_without_the_agent_loop(dataset, tools):
    """verl's BaseTool contract called directly (create, execute, calc_reward, release): calls with
    one instance id, to any of the four tools, play one episode, paid as in process."""
    by_name = {tool.name: tool for tool in tools}
    actions = oracle_replies(dataset, "demo-0002", DEFAULT_CONFIG)
    ref = reference(dataset, "demo-0002", actions, DEFAULT_CONFIG)

    async def play():
        rewards, totals = [], []
        for action in actions:
            call = json.loads(call_json(action))
            tool = by_name[call["name"]]
            instance_id, _ = await tool.create("episode-1", create_kwargs={"question_id": "demo-0002"})
            _, reward, facts = await tool.execute(instance_id, call["arguments"])
            rewards.append(reward)
            totals.append(await tool.calc_reward(instance_id))
        await tool.release("episode-1")
        return rewards, totals, facts, await tool.calc_reward("episode-1")

    rewards, totals, facts, after = asyncio.run(play())
    assert rewards == pytest.approx(ref.step_rewards, abs=1e-9)
    assert totals[-1] == pytest.approx(ref.total, abs=1e-9) and facts["done"] is True
    assert after == 0.0 and "episode-1" not in verl_tools._BY_INSTANCE_ID


def test_a_row_without_a_question_is_refused_with_the_fix(dataset, tokenizer, tools, trainer_config):
    (row,) = verl_rows(EpisodeSettings(), ["demo-0000"])
    row = row | {"extra_info": row["extra_info"] | {"tools_kwargs": {}}}
    output, model = run_trajectory(
        tokenizer, tools, trainer_config, row, [tagged_call("describe", {"table_name": "books"})]
    )
    assert "names no sqlenv question" in model.prompts[1] and "tools_kwargs" in model.prompts[1]
    assert verl_reward(tokenizer, trainer_config, row, output)["reward_score"] == 0.0


def test_bad_tool_configs_are_refused(tools):
    from verl.tools.schemas import OpenAIFunctionToolSchema

    with pytest.raises(ValueError, match="unknown sqlenv tool config key"):
        verl_tools.DescribeTool({"type": "native", "datset": "demo"})
    schema = OpenAIFunctionToolSchema.model_validate(tools[1].tool_schema.model_dump())  # sample's
    with pytest.raises(ValueError, match="names 'sample'"):
        verl_tools.DescribeTool({"type": "native"}, schema)


def test_rows_load_in_verls_dataset(tmp_path, dataset, tokenizer, trainer_config):
    """The parquet rows load through verl's RLHFDataset: raw prompt, tools_kwargs, agent name."""
    path = tmp_path / "sqlenv_demo_train.parquet"
    assert write_verl_parquet(path) == len(dataset.split("train"))
    data_config = OmegaConf.merge(trainer_config.data, {"return_raw_chat": True, "max_prompt_length": 4096})
    loaded = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=data_config, processor=None)
    assert len(loaded) == len(dataset.split("train"))
    item = loaded[0]
    assert item["agent_name"] == "tool_agent"
    assert list(item["raw_prompt"]) == verl_rows(EpisodeSettings(), ["demo-0000"])[0]["prompt"]
    assert item["tools_kwargs"]["answer"]["create_kwargs"]["question_id"] == "demo-0000"


def test_compute_score_without_a_summary():
    assert compute_score("sqlenv", "", "demo-0000", {}) == {
        "score": 0.0,
        "correctness": 0.0,
        "progress": 0.0,
        "operational": 0.0,
        "correct": 0.0,
        "steps": 0.0,
    }


def test_without_verl_the_import_names_the_extra():
    code = (
        "import sys; sys.modules['verl'] = None\n"
        "from sqlenv.extras import MissingExtraError\n"
        "try:\n    import sqlenv.integrations.verl_tools\nexcept MissingExtraError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'verl' extra" in out and "pip install" in out
