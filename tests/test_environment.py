"""The episode state machine, as the spec describes it."""

from __future__ import annotations

import pytest

import sqlenv
from sqlenv import SQLAction, SQLEnvironment, SQLObservation
from sqlenv.config import DEFAULT_CONFIG, EnvConfig
from sqlenv.env.verifier import format_answer


def act(kind: str, argument: str = "") -> SQLAction:
    return SQLAction(action_type=kind, argument=argument)


@pytest.fixture()
def env(demo_dataset) -> SQLEnvironment:
    return SQLEnvironment(dataset=demo_dataset, split="train")


def test_package_exports_the_three_types() -> None:
    assert sqlenv.SQLEnvironment is SQLEnvironment
    assert sqlenv.SQLAction is SQLAction
    assert sqlenv.SQLObservation is SQLObservation


def test_default_constructor_serves_the_demo_train_split() -> None:
    env = SQLEnvironment()
    assert env.dataset.name == "demo"
    assert env.split == "train"
    assert all(r.split == "train" for r in env.questions)


def test_reset_shows_only_the_question_and_table_names(env: SQLEnvironment) -> None:
    obs = env.reset(seed=3)
    record = env.dataset.get(obs.metadata["question_id"])
    assert obs.question == record.question
    assert obs.schema_info.startswith("Tables: ")
    assert "column" not in obs.schema_info.lower()
    assert obs.result == "" and obs.error == ""
    assert obs.step_count == 0 and obs.budget_remaining == DEFAULT_CONFIG.step_budget
    assert obs.done is False and obs.reward is None
    dumped = obs.model_dump_json()
    assert record.gold_sql not in dumped
    assert "gold" not in dumped


def test_reset_is_seeded_and_accepts_a_question_id(env: SQLEnvironment) -> None:
    first = [env.reset(seed=s).metadata["question_id"] for s in range(10)]
    again = [env.reset(seed=s).metadata["question_id"] for s in range(10)]
    assert first == again
    assert len(set(first)) > 3
    target = env.questions[7].question_id
    assert env.reset(question_id=target).metadata["question_id"] == target
    with pytest.raises(KeyError, match="unknown question_id"):
        env.reset(question_id="no-such-question")


def test_describe_sample_query_answer_round(env: SQLEnvironment) -> None:
    record = next(r for r in env.questions if r.answer_type == "integer")
    env.reset(question_id=record.question_id)
    table = record.tables_involved[0]

    described = env.step(act("describe", table))
    assert described.error == ""
    assert f"table {table}" in described.result and "rows)" in described.result
    assert "columns:" in described.result

    sampled = env.step(act("SAMPLE", table))
    assert sampled.error == ""
    data_lines = sampled.result.splitlines()[1:-1]
    assert 1 <= len(data_lines) <= DEFAULT_CONFIG.sample_rows

    queried = env.step(act("Query", record.gold_sql))
    assert queried.error == ""
    assert str(record.gold_answer[0][0]) in queried.result

    answered = env.step(act("ANSWER", format_answer(record.gold_answer, record.answer_type)))
    assert answered.done is True
    assert answered.reward == DEFAULT_CONFIG.reward.correct_answer
    assert answered.metadata["correct"] is True
    assert answered.step_count == 4
    assert answered.action_history[0].startswith("DESCRIBE")


def test_wrong_answer_ends_the_episode_with_zero_terminal(env: SQLEnvironment) -> None:
    record = next(r for r in env.questions if r.answer_type == "integer")
    env.reset(question_id=record.question_id)
    obs = env.step(act("ANSWER", str(int(record.gold_answer[0][0]) + 1)))
    assert obs.done and obs.reward == 0.0 and obs.metadata["correct"] is False
    assert env.state.correct is False and env.state.answered is True


def test_every_action_after_the_end_is_refused_and_changes_nothing(env: SQLEnvironment) -> None:
    env.reset(seed=0)
    env.step(act("ANSWER", "whatever"))
    before = env.state.model_dump()
    for action in (act("DESCRIBE", "books"), act("QUERY", "SELECT 1"), act("ANSWER", "x"), act("FLY")):
        obs = env.step(action)
        assert obs.done is True
        assert obs.reward == 0.0
        assert "episode is over" in obs.error
    assert env.state.model_dump() == before


def test_step_before_reset_is_an_error_not_an_exception(demo_dataset) -> None:
    fresh = SQLEnvironment(dataset=demo_dataset)
    obs = fresh.step(act("QUERY", "SELECT 1"))
    assert "reset" in obs.error and obs.done


def test_unknown_action_type_lists_the_four(env: SQLEnvironment) -> None:
    env.reset(seed=0)
    obs = env.step(act("DROP", "books"))
    for name in ("DESCRIBE", "SAMPLE", "QUERY", "ANSWER"):
        assert name in obs.error
    assert obs.step_count == 1 and obs.budget_remaining == DEFAULT_CONFIG.step_budget - 1
    assert obs.done is False


def test_action_types_match_case_insensitively(env: SQLEnvironment) -> None:
    table = env.reset(seed=0).schema_info.removeprefix("Tables: ").split(", ")[0]
    for kind in ("describe", "Describe", " DESCRIBE "):
        assert env.step(act(kind, table)).error == ""


def test_unknown_table_lists_the_tables(env: SQLEnvironment) -> None:
    obs = env.reset(seed=0)
    tables = obs.schema_info.removeprefix("Tables: ").split(", ")
    obs = env.step(act("DESCRIBE", "no_such_table"))
    assert "unknown table 'no_such_table'" in obs.error
    for t in tables:
        assert t in obs.error
    assert "needs a table name" in env.step(act("SAMPLE", "  ")).error


def test_table_names_match_case_insensitively_and_quoted(env: SQLEnvironment) -> None:
    obs = env.reset(seed=0)
    table = obs.schema_info.removeprefix("Tables: ").split(", ")[0]
    reference = env.step(act("DESCRIBE", table)).result
    for spelling in (table.upper(), f'"{table}"', f"`{table}`", f"[{table}]", f" {table.title()} "):
        assert env.step(act("DESCRIBE", spelling)).result == reference


def test_budget_is_enforced(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, config=EnvConfig(step_budget=3))
    env.reset(seed=1)
    observations = [env.step(act("QUERY", f"SELECT {i}")) for i in range(3)]
    assert [o.budget_remaining for o in observations] == [2, 1, 0]
    assert [o.done for o in observations] == [False, False, True]
    assert "budget exhausted" in observations[-1].result
    assert env.state.correct is False
    assert "episode is over" in env.step(act("ANSWER", "1")).error


def test_refused_sql_is_an_error_observation_and_the_episode_goes_on(env: SQLEnvironment) -> None:
    obs = env.reset(seed=2)
    table = obs.schema_info.removeprefix("Tables: ").split(", ")[0]
    bad = env.step(act("QUERY", f"DELETE FROM {table}"))
    assert "not allowed" in bad.error and not bad.done
    good = env.step(act("QUERY", f"SELECT COUNT(*) FROM {table}"))
    assert good.error == "" and "row" in good.result


def test_invalid_action_payload_is_rejected_by_the_model() -> None:
    with pytest.raises(ValueError):
        SQLAction.model_validate({"action_type": "QUERY", "argument": "x", "extra_field": 1})


def test_state_tracks_rewards_and_never_shows_gold(env: SQLEnvironment) -> None:
    obs = env.reset(seed=5)
    record = env.dataset.get(obs.metadata["question_id"])
    rewards = []
    for table in record.tables_involved:
        rewards.append(env.step(act("DESCRIBE", table)).reward)
    rewards.append(env.step(act("QUERY", record.gold_sql)).reward)
    rewards.append(env.step(act("ANSWER", format_answer(record.gold_answer, record.answer_type))).reward)
    state = env.state
    assert state.total_reward == pytest.approx(sum(rewards))
    assert state.progress == 1.0
    assert record.gold_sql not in state.model_dump_json()


def test_two_environments_do_not_share_episodes(demo_dataset) -> None:
    a = SQLEnvironment(dataset=demo_dataset)
    b = SQLEnvironment(dataset=demo_dataset)
    qa = a.reset(seed=1).metadata["question_id"]
    qb = b.reset(seed=2).metadata["question_id"]
    a.step(act("ANSWER", "x"))
    assert b.state.done is False and b.state.question_id == qb
    assert a.state.question_id == qa


def test_selecting_another_split_and_dataset(demo_dataset, spider10) -> None:
    assert all(r.split == "eval" for r in SQLEnvironment(dataset=demo_dataset, split="eval").questions)
    env = SQLEnvironment(
        dataset="spider10", split="eval", spider_dir=spider10.databases["world_1"].parents[2]
    )
    assert len(env.questions) == 203
    with pytest.raises(KeyError, match="no split"):
        SQLEnvironment(dataset=demo_dataset, split="validation")


def test_an_overlong_answer_is_wrong_without_being_parsed(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, config=EnvConfig(max_answer_chars=100))
    env.reset(seed=0)
    obs = env.step(act("ANSWER", "[" + ", ".join(["1"] * 100) + "]"))
    assert obs.done and obs.metadata["correct"] is False
    assert "too long" in obs.result
