"""sqlenv through SkyRL-gym's own API (`skyrl_gym.make`, `init`, `step`), as SkyRL's generator
drives an environment: oracle, random and malformed episodes earn, step by step and in their
reward parts, what sqlenv's environment gives the same replies in process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from integration_episodes import (
    MALFORMED,
    Reply,
    fenced,
    oracle_replies,
    random_replies,
    reference,
    require_stack,
    tagged,
)

require_stack("skyrl_gym", "skyrl")

import skyrl_gym  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from skyrl_gym.envs.base_text_env import BaseTextEnv  # noqa: E402

from sqlenv.agents.prompts import FORMAT_ERROR_MESSAGE, question_message, system_message  # noqa: E402
from sqlenv.config import EnvConfig  # noqa: E402
from sqlenv.integrations import skyrl_gym_env  # noqa: E402
from sqlenv.integrations.skyrl_gym_env import SQLEnvSkyRL, skyrl_rows  # noqa: E402

PARTS = ("correctness", "progress", "operational")


def play(question_id: str, replies: list[Reply], env_config: dict, render=tagged, max_turns: int = 20):
    """One episode through SkyRL-gym, as SkyRL's generator plays it: make, init, step until done."""
    env = skyrl_gym.make(
        "sqlenv",
        env_config=OmegaConf.create(env_config),  # SkyRL passes its config section as a DictConfig
        extras={"question_id": question_id, "max_turns": max_turns},
    )
    messages, info = env.init([{"role": "user", "content": "the row's prompt, which sqlenv replaces"}])
    outputs = []
    for reply in replies:
        outputs.append(env.step(reply if isinstance(reply, str) else render(reply)))
        if outputs[-1]["done"]:
            break
    return env, messages, info, outputs


def assert_same_rewards(env, outputs, ref) -> None:
    assert outputs[-1]["done"] and not any(o["done"] for o in outputs[:-1])
    assert len(outputs) == ref.steps
    assert [o["reward"] for o in outputs] == pytest.approx(ref.step_rewards, abs=1e-6)
    assert sum(o["reward"] for o in outputs) == pytest.approx(ref.total, abs=1e-9)
    for part, layer in zip(PARTS, ("terminal", "progress", "operational"), strict=True):
        paid = sum(o["metadata"]["reward_components"][layer] for o in outputs)
        assert paid == pytest.approx(ref.parts[part], abs=1e-9), part
    metrics = env.get_metrics()
    assert {p: metrics[p] for p in PARTS} == pytest.approx(ref.parts, abs=1e-12)
    assert metrics["total_reward"] == pytest.approx(ref.total, abs=1e-12)
    assert metrics["correct"] == float(ref.correct) and metrics["steps"] == ref.steps
    assert metrics["format_errors"] == ref.format_errors
    assert outputs[-1]["metadata"]["correct"] is ref.correct


def test_the_environment_is_registered_and_made_by_skyrl_gym() -> None:
    assert "sqlenv" in skyrl_gym.registry
    env = skyrl_gym.make("sqlenv", env_config=OmegaConf.create({}), extras={"question_id": "demo-0011"})
    assert isinstance(env, SQLEnvSkyRL) and isinstance(env, BaseTextEnv)
    skyrl_gym_env.register_sqlenv()  # registering again changes nothing
    assert skyrl_gym.registry["sqlenv"].entry_point == "sqlenv.integrations.skyrl_gym_env:SQLEnvSkyRL"


@pytest.mark.parametrize("answer_mode", ["value", "sql"])
def test_oracle_episodes_earn_sqlenvs_rewards(demo_dataset, answer_mode: str) -> None:
    config = EnvConfig(answer_mode=answer_mode)
    questions = demo_dataset.split("eval")
    for record in questions:
        replies = oracle_replies(demo_dataset, record.question_id, config)
        ref = reference(demo_dataset, record.question_id, replies, config)
        env, _, info, outputs = play(
            record.question_id, replies, {"split": "eval", "answer_mode": answer_mode}
        )
        assert info["question_id"] == record.question_id and info["answer_mode"] == answer_mode
        assert_same_rewards(env, outputs, ref)
        assert ref.correct and outputs[-1]["metadata"]["verdict"].startswith("correct")
    assert len(questions) == 28


def test_random_episodes_earn_sqlenvs_rewards(demo_dataset) -> None:
    config = EnvConfig()
    questions = demo_dataset.split("train")
    for seed in range(12):
        question_id = questions[seed * 5].question_id
        replies = random_replies(demo_dataset, question_id, seed, config)
        ref = reference(demo_dataset, question_id, replies, config)
        render = fenced if seed % 2 else tagged  # both ways a model writes a call
        env, _, _, outputs = play(question_id, replies, {}, render=render)
        assert_same_rewards(env, outputs, ref)
        assert {o["metadata"]["call_format"] for o in outputs} == {"json" if seed % 2 else "tagged"}


def test_replies_that_are_no_tool_call_cost_what_they_cost_in_sqlenv(demo_dataset) -> None:
    """A reply that is no call, or a call with a wrong argument, spends a step on an invalid action
    (the same one twice is a repeat, penalised) and the model is told; the episode then goes on."""
    config = EnvConfig()
    question_id = demo_dataset.split("eval")[3].question_id
    bad_call = '<tool_call>\n{"name": "describe", "arguments": {"table": "loans"}}\n</tool_call>'
    replies = [MALFORMED, MALFORMED, bad_call, *oracle_replies(demo_dataset, question_id, config)]
    ref = reference(demo_dataset, question_id, replies, config)
    env, _, _, outputs = play(question_id, replies, {"split": "eval"})
    assert_same_rewards(env, outputs, ref)
    assert ref.format_errors == 3 and outputs[1]["reward"] < outputs[0]["reward"] < 0  # the repeat costs more
    assert outputs[2]["metadata"]["format_error"] == "describe needs the argument 'table_name' (got table)"
    feedback = FORMAT_ERROR_MESSAGE.format(problem="no tool call found")
    assert outputs[0]["observations"] == [{"role": "user", "content": feedback}]
    assert outputs[0]["metadata"]["format_error"] == "no tool call found"
    assert outputs[3]["observations"][0]["role"] == "tool"


def test_an_episode_that_never_calls_a_tool_ends_with_its_budget(demo_dataset) -> None:
    config = EnvConfig()
    question_id = demo_dataset.split("train")[0].question_id
    replies: list[Reply] = [f"{MALFORMED} ({i})" for i in range(config.step_budget)]
    ref = reference(demo_dataset, question_id, replies, config)
    env, _, _, outputs = play(question_id, replies, {})
    assert_same_rewards(env, outputs, ref)
    assert len(outputs) == 15 and not ref.answered and outputs[-1]["observations"] == []


def test_the_first_messages_are_sqlenvs_and_hide_the_schema(demo_dataset) -> None:
    from sqlenv.env.environment import SQLEnvironment

    question_id = demo_dataset.split("eval")[0].question_id
    observation = SQLEnvironment(dataset=demo_dataset, split="eval").reset(question_id=question_id)
    _, messages, info, _ = play(question_id, [], {"split": "eval"})
    assert messages[1] == question_message(observation)  # the question and the table names only
    assert "CREATE TABLE" not in messages[1]["content"]
    assert messages[0]["content"].startswith(system_message(observation)["content"])
    assert (
        "<tool_call>" in messages[0]["content"]
    )  # the tools and the call format, for a template without tools
    assert [t["function"]["name"] for t in info["tools"]] == ["describe", "sample", "query", "answer"]
    _, plain, _, _ = play(question_id, [], {"split": "eval", "tools_in_prompt": False})
    assert plain[0] == system_message(observation)
    _, shown, _, _ = play(question_id, [], {"split": "eval", "show_schema": True})
    assert "CREATE TABLE" in shown[1]["content"]


def test_skyrls_max_turns_below_the_budget_becomes_the_budget(demo_dataset) -> None:
    config = EnvConfig(step_budget=3)
    question_id = demo_dataset.split("train")[1].question_id
    replies = random_replies(demo_dataset, question_id, 4, config)
    ref = reference(demo_dataset, question_id, replies, config)
    env, messages, info, outputs = play(question_id, replies, {}, max_turns=3)
    assert info["step_budget"] == 3 and "at most 3 tool calls" in messages[0]["content"]
    assert_same_rewards(env, outputs, ref)


def test_grpo_scoring_pays_what_grpos_reward_functions_give(demo_dataset) -> None:
    """`scoring: grpo`: an episode that explores (earning shaping payments) and then spends its
    budget without an ANSWER earns through SkyRL what sqlenv's GRPO reward functions give the same
    calls made through TRL's tools; with the default scoring it earns what the environment paid."""
    from sqlenv.env.models import SQLAction
    from sqlenv.training.trl_env import REWARD_FUNCS, SQLEnvTRL

    record = next(r for r in demo_dataset.split("train") if r.tables_involved and not r.empty_gold)
    table = record.tables_involved[0]
    actions = [
        SQLAction(action_type="DESCRIBE", argument=table),
        SQLAction(action_type="QUERY", argument=record.gold_sql),  # the gold result: progress paid
        SQLAction(action_type="SAMPLE", argument=table),
    ]
    config = EnvConfig(step_budget=3)
    trl = SQLEnvTRL(demo_dataset, split="train", config=config)
    trl.reset(question_id=record.question_id)
    trl.describe(table)
    trl.query(record.gold_sql)
    trl.sample(table)
    grpo = {name: f([trl])[0] for name, f in REWARD_FUNCS.items()}
    ref = reference(demo_dataset, record.question_id, actions, config)
    assert not ref.answered and ref.parts["progress"] > grpo["progress"]  # the scorings differ here
    for scoring, expected in (("grpo", grpo), ("env", ref.parts)):
        env_config = {"scoring": scoring, "step_budget": 3}
        env, _, _, outputs = play(record.question_id, actions, env_config)
        assert outputs[-1]["done"] and len(outputs) == 3
        assert sum(o["reward"] for o in outputs) == pytest.approx(sum(expected.values()), abs=1e-12)
        metrics = env.get_metrics()
        assert {p: metrics[p] for p in PARTS} == pytest.approx(expected, abs=1e-12), scoring
        assert metrics["total_reward"] == pytest.approx(sum(expected.values()), abs=1e-12)
        for o in outputs:  # each step's parts still add up to its reward
            assert sum(o["metadata"]["reward_components"].values()) == pytest.approx(o["reward"], abs=1e-12)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown sqlenv env_config key\(s\) \['budget'\]"):
        skyrl_gym.make("sqlenv", env_config={"budget": 3}, extras={})
    with pytest.raises(ValueError, match="answer_mode must be one of value, sql"):
        skyrl_gym.make("sqlenv", env_config={"answer_mode": "text"}, extras={})
    with pytest.raises(KeyError, match="no split 'test'"):
        skyrl_gym.make("sqlenv", env_config={"split": "test"}, extras={})
    with pytest.raises(ValueError, match="show_schema must be true or false, not 'yes'"):
        skyrl_gym.make("sqlenv", env_config={"show_schema": "yes"}, extras={})
    with pytest.raises(ValueError, match="scoring must be one of env, grpo, not 'ppo'"):
        skyrl_gym.make("sqlenv", env_config={"scoring": "ppo"}, extras={})
    with pytest.raises(ValueError, match="tools_in_prompt must be true or false, not 1"):
        skyrl_gym.make("sqlenv", env_config={"tools_in_prompt": 1}, extras={})
    with pytest.raises(ValueError, match="step_budget must be a positive number of steps, not 0"):
        skyrl_gym.make("sqlenv", env_config={}, extras={"max_turns": 0})
    env = skyrl_gym.make("sqlenv", env_config={}, extras={"question_id": "demo-9999"})
    with pytest.raises(KeyError, match="unknown question_id 'demo-9999'"):
        env.init([])


def test_a_seed_draws_a_question_of_the_split(demo_dataset) -> None:
    drawn = set()
    for seed in range(3):
        env = skyrl_gym.make("sqlenv", env_config={"split": "eval"}, extras={"seed": seed})
        drawn.add(env.init([])[1]["question_id"])
        again = skyrl_gym.make("sqlenv", env_config={"split": "eval"}, extras={"seed": seed})
        assert again.init([])[1]["question_id"] in drawn
    assert drawn <= {r.question_id for r in demo_dataset.split("eval")}


def test_skyrl_rows_carry_the_prompt_init_returns() -> None:
    rows = skyrl_rows({"split": "eval"})
    assert len(rows) == 28 and {r["env_class"] for r in rows} == {"sqlenv"}
    env = skyrl_gym.make(
        "sqlenv", env_config={"split": "eval"}, extras={"question_id": rows[5]["question_id"]}
    )
    assert env.init([])[0] == rows[5]["prompt"]


def test_without_the_extra_the_import_names_it() -> None:
    code = (
        "import sys; sys.modules['skyrl_gym'] = None\n"
        "try:\n    import sqlenv.integrations.skyrl_gym_env\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingExtraError sqlenv.integrations.skyrl_gym_env needs the 'skyrl' extra")
    assert "pip install -e '.[skyrl]'" in out


@pytest.mark.parametrize("answer_mode", ["value", "sql"])
def test_spider_oracle_and_random_episodes_earn_sqlenvs_rewards(
    spider10, spider_dir, answer_mode: str
) -> None:
    config = EnvConfig(answer_mode=answer_mode)
    env_config = {
        "dataset": "spider10",
        "split": "eval",
        "spider_dir": str(spider_dir),
        "answer_mode": answer_mode,
    }
    for i, record in enumerate(spider10.split("eval")[:3]):
        for replies in (
            oracle_replies(spider10, record.question_id, config),
            random_replies(spider10, record.question_id, i, config),
        ):
            ref = reference(spider10, record.question_id, replies, config)
            env, _, _, outputs = play(record.question_id, replies, env_config)
            assert_same_rewards(env, outputs, ref)
