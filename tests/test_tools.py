"""The four actions as tools: one definition shared by LLM policies and the TRL adapter."""

from __future__ import annotations

import json

import pytest

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.tools import (
    TOOL_NAMES,
    TOOLS,
    action_to_tool_call,
    google_docstring,
    tool_call_to_action,
    tool_definitions,
)
from sqlenv.env.models import ACTION_TYPES


def test_there_is_one_function_tool_per_action_with_one_required_string_parameter() -> None:
    assert TOOL_NAMES == ("describe", "sample", "query", "answer")
    assert len(TOOLS) == len(ACTION_TYPES)
    expected_parameter = {"describe": "table_name", "sample": "table_name", "query": "sql", "answer": "value"}
    for tool in TOOLS:
        assert tool["type"] == "function"
        function = tool["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert function["description"].strip()
        parameters = function["parameters"]
        parameter = expected_parameter[function["name"]]
        assert parameters["type"] == "object"
        assert parameters["required"] == [parameter]
        assert parameters["properties"] == {
            parameter: {"type": "string", "description": parameters["properties"][parameter]["description"]}
        }
    json.dumps(TOOLS)  # plain JSON, as chat templates and OpenAI servers need


def test_tool_definitions_are_a_copy_that_callers_may_edit() -> None:
    copy = tool_definitions()
    copy[0]["function"]["description"] = "changed"
    assert TOOLS[0]["function"]["description"] != "changed"


@pytest.mark.parametrize(
    ("name", "arguments", "action_type", "argument"),
    [
        ("describe", {"table_name": "books"}, "DESCRIBE", "books"),
        ("sample", {"table_name": "loans"}, "SAMPLE", "loans"),
        ("query", {"sql": "SELECT 1"}, "QUERY", "SELECT 1"),
        ("answer", {"value": "42"}, "ANSWER", "42"),
        ("query", '{"sql": "SELECT 2"}', "QUERY", "SELECT 2"),  # arguments as JSON text (OpenAI)
        ("Describe", {"table_name": "t"}, "DESCRIBE", "t"),
        ("answer", {"value": 42}, "ANSWER", "42"),
        ("answer", {"value": ["a", "b"]}, "ANSWER", '["a", "b"]'),
    ],
)
def test_tool_calls_become_actions(name: str, arguments: object, action_type: str, argument: str) -> None:
    assert tool_call_to_action(name, arguments) == SQLAction(action_type=action_type, argument=argument)


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("drop_table", {"table_name": "t"}, "unknown tool 'drop_table'; the tools are: describe, sample"),
        ("query", {}, "query needs the argument 'sql'"),
        ("query", {"statement": "SELECT 1"}, "query needs the argument 'sql' (got statement)"),
        ("describe", {"table_name": "t", "limit": 3}, "describe takes only 'table_name'; unexpected: limit"),
        ("query", '{"sql": ', "arguments of query are not valid JSON"),
        ("sample", '["books"]', "must be a JSON object"),
        ("query", {"sql": 1}, "'sql' must be a string, not int"),
        ("answer", None, "answer needs the argument 'value'"),
    ],
)
def test_malformed_tool_calls_raise_readable_value_errors(name: str, arguments: object, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        tool_call_to_action(name, arguments)  # type: ignore[arg-type]
    assert message in str(raised.value)


@pytest.mark.parametrize("action_type", ACTION_TYPES)
def test_actions_and_tool_calls_round_trip(action_type: str) -> None:
    action = SQLAction(action_type=action_type, argument="x y")
    call = action_to_tool_call(action)
    assert call["type"] == "function"
    assert call["function"]["name"] == action_type.lower()
    assert tool_call_to_action(call["function"]["name"], call["function"]["arguments"]) == action


def test_an_action_without_a_tool_is_refused() -> None:
    with pytest.raises(ValueError, match="has no tool"):
        action_to_tool_call(SQLAction(action_type="TELEPORT", argument=""))


def test_docstrings_for_trl_carry_the_same_text() -> None:
    for tool in TOOLS:
        function = tool["function"]
        doc = google_docstring(function["name"])
        assert doc.startswith(function["description"])
        (parameter,) = function["parameters"]["required"]
        assert f"Args:\n    {parameter}: " in doc


def test_an_episode_played_through_tool_calls_is_solved(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    record = next(r for r in env.questions if r.answer_type == "list")
    obs = env.reset(question_id=record.question_id)
    obs = env.step(tool_call_to_action("describe", {"table_name": record.tables_involved[0]}))
    assert not obs.error
    obs = env.step(tool_call_to_action("query", json.dumps({"sql": record.gold_sql})))
    assert not obs.error
    values = [row[0] for row in record.gold_answer]
    obs = env.step(tool_call_to_action("answer", {"value": values}))  # a list, written as JSON
    assert obs.done and obs.metadata["correct"] is True


def test_the_descriptions_follow_the_config_in_use(demo_dataset) -> None:
    """A config that samples 3 rows and shows 7 is described as such, to evaluation policies
    (`tool_definitions(config)`) and to TRL (the tools of a `SQLToolEnv` built with it)."""
    from dataclasses import replace

    from sqlenv.agents.tools import google_docstring, tool_definitions
    from sqlenv.config import DEFAULT_CONFIG
    from sqlenv.training.trl_env import SQLToolEnv

    config = replace(DEFAULT_CONFIG, sample_rows=3, sandbox=replace(DEFAULT_CONFIG.sandbox, max_rows_shown=7))
    described = {t["function"]["name"]: t["function"]["description"] for t in tool_definitions(config)}
    assert "first 3 rows" in described["sample"] and "up to 7 rows" in described["query"]
    assert "first 5 rows" in tool_definitions()[1]["function"]["description"]
    env = SQLToolEnv(demo_dataset, config=config)
    assert env.sample.__doc__ == google_docstring("sample", config) and "first 3 rows" in env.sample.__doc__
    assert "up to 7 rows" in env.query.__doc__
    assert "first 5 rows" in SQLToolEnv(demo_dataset).sample.__doc__  # the default is untouched
    env.reset(question_id=demo_dataset.split("train")[0].question_id)
    assert env.sample(demo_dataset.split("train")[0].tables_involved[0]).count("\n") <= 3 + 2
