"""`sqlenv mcp`: the environment behind a real MCP server, driven by the `mcp` SDK's own clients
over stdio and over streamable HTTP.

What must hold: the tools list the questions and play an episode with exactly the results and
rewards of an in-process `SQLEnvironment`; a refused statement is an observation with the
sandbox's error; a call without an episode is a tool error; concurrent clients keep separate
episodes, and a closed session's environment is released.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import free_port
from sqlenv import SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.config import EnvConfig
from sqlenv.env.models import SQLObservation

TOOLS = {"list_questions", "start_episode", "describe", "sample", "query", "answer"}
TOOL_FOR_ACTION = {"DESCRIBE": "describe", "SAMPLE": "sample", "QUERY": "query", "ANSWER": "answer"}
ARGUMENT_OF_TOOL = {"describe": "table_name", "sample": "table_name", "query": "sql", "answer": "value"}


def mcp_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sqlenv.cli", "mcp", "--dataset", "demo", *args]


@asynccontextmanager
async def stdio_session(*args: str) -> AsyncIterator[ClientSession]:
    command = mcp_command(*args)
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


class RunningMcpServer:
    """`sqlenv mcp --transport http` as a real process on a free port."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            mcp_command("--transport", "http", "--port", str(self.port), *args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self.process.stdout.read, daemon=True).start()  # never let the pipe fill
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sqlenv mcp exited early with {self.process.returncode}")
            try:
                urllib.request.urlopen(self.url, timeout=1)
            except urllib.error.HTTPError:
                return  # the endpoint answers (a bare GET is refused): the server is up
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("sqlenv mcp did not start within 90 s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def mcp_http() -> Iterator[RunningMcpServer]:
    server = RunningMcpServer()
    yield server
    server.stop()


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call's structured result; a tool error fails the test with its message."""
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content[0].text
    assert result.structuredContent is not None
    return result.structuredContent


async def play_oracle(session: ClientSession, dataset, question_id: str) -> list[SQLObservation]:
    """An oracle episode through the MCP tools; the observations as the server sent them."""
    first = SQLObservation.model_validate(await call(session, "start_episode", question_id=question_id))
    policy = OraclePolicy(dataset)
    policy.reset(first, 0)
    observations = [first]
    while not observations[-1].done:
        action = policy.act(observations[-1])
        tool = TOOL_FOR_ACTION[action.action_type]
        observed = await call(session, tool, **{ARGUMENT_OF_TOOL[tool]: action.argument})
        observations.append(SQLObservation.model_validate(observed))
    return observations


def in_process_rewards(dataset, question_id: str, config: EnvConfig | None = None) -> list[float | None]:
    env = SQLEnvironment(dataset=dataset, split="train", config=config)
    policy = OraclePolicy(dataset)
    observation = env.reset(question_id=question_id)
    policy.reset(observation, 0)
    rewards = []
    while not observation.done:
        observation = env.step(policy.act(observation))
        rewards.append(observation.reward)
    return rewards


def test_over_stdio_the_tools_list_questions_and_play_an_oracle_episode_as_in_process(demo_dataset) -> None:
    async def scenario() -> None:
        async with stdio_session() as session:
            listed = await session.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            page = await call(session, "list_questions", limit=5)
            assert page["split"] == "train" and page["total"] == len(demo_dataset.split("train"))
            assert len(page["questions"]) == 5
            assert "gold" not in str(page)  # never the answers
            question_id = page["questions"][0]["question_id"]
            observations = await play_oracle(session, demo_dataset, question_id)
            assert observations[-1].metadata["correct"] is True
            assert [o.reward for o in observations[1:]] == in_process_rewards(demo_dataset, question_id)

    asyncio.run(scenario())


def test_over_stdio_a_refused_statement_and_a_missing_episode_are_clear_errors() -> None:
    async def scenario() -> None:
        async with stdio_session() as session:
            early = await session.call_tool("query", {"sql": "SELECT 1"})
            assert early.isError and "call start_episode first" in early.content[0].text
            unknown = await session.call_tool("start_episode", {"question_id": "no-such-question"})
            assert unknown.isError and "unknown question_id" in unknown.content[0].text
            await call(session, "start_episode", question_id="demo-0000")
            refused = await call(session, "query", sql="DELETE FROM books")
            assert "not allowed: DELETE" in refused["error"] and refused["done"] is False
            assert refused["reward"] < 0  # a step spent, as in-process
            still_there = await call(session, "query", sql="SELECT COUNT(*) FROM books")
            assert still_there["error"] == "" and still_there["result"]  # the database is untouched

    asyncio.run(scenario())


def test_over_stdio_in_sql_answer_mode_the_oracle_answers_with_sql_and_is_correct(demo_dataset) -> None:
    async def scenario() -> None:
        async with stdio_session("--answer-mode", "sql") as session:
            listed = await session.list_tools()
            answer_tool = next(t for t in listed.tools if t.name == "answer")
            assert "SELECT statement" in answer_tool.description
            observations = await play_oracle(session, demo_dataset, "demo-0003")
            assert observations[0].metadata["answer_mode"] == "sql"
            assert observations[-1].metadata["correct"] is True
            assert [o.reward for o in observations[1:]] == in_process_rewards(
                demo_dataset, "demo-0003", EnvConfig(answer_mode="sql")
            )

    asyncio.run(scenario())


def test_over_http_concurrent_clients_keep_separate_episodes(mcp_http, demo_dataset) -> None:
    async def scenario() -> None:
        async with http_session(mcp_http.url) as first, http_session(mcp_http.url) as second:
            a = await call(first, "start_episode", question_id="demo-0000")
            b = await call(second, "start_episode", question_id="demo-0001")
            assert a["metadata"]["episode_id"] != b["metadata"]["episode_id"]
            # Steps interleaved: each session's step count and history are its own.
            await call(first, "describe", table_name="books")
            second_step = await call(second, "sample", table_name="authors")
            first_step = await call(first, "query", sql="SELECT COUNT(*) FROM books")
            assert second_step["step_count"] == 1 and second_step["action_history"] == ["SAMPLE authors"]
            assert first_step["step_count"] == 2 and first_step["question"] == a["question"]
            finished = await call(first, "answer", value="0")
            assert finished["done"] is True
            after = await call(second, "describe", table_name="books")
            assert after["done"] is False and after["error"] == ""  # the other episode goes on

    asyncio.run(scenario())


def test_over_http_an_oracle_episode_pays_the_in_process_rewards(mcp_http, demo_dataset) -> None:
    async def scenario() -> None:
        async with http_session(mcp_http.url) as session:
            observations = await play_oracle(session, demo_dataset, "demo-0005")
            assert observations[-1].metadata["correct"] is True
            assert [o.reward for o in observations[1:]] == in_process_rewards(demo_dataset, "demo-0005")
            over = await call(session, "query", sql="SELECT 1")
            assert "episode is over" in over["error"]

    asyncio.run(scenario())


def test_a_closed_http_session_releases_its_environment(demo_dataset) -> None:
    """In-process server (uvicorn on a thread) so that its open-session count can be read."""
    import uvicorn

    from sqlenv.server.mcp_server import create_mcp_server

    port = free_port()
    server = create_mcp_server(demo_dataset, "train", port=port)
    http = uvicorn.Server(
        uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=http.run, daemon=True)
    thread.start()
    try:
        while not http.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"

        async def scenario() -> int:
            async with http_session(url) as one, http_session(url) as two:
                await call(one, "start_episode", question_id="demo-0000")
                await call(two, "start_episode", question_id="demo-0001")
                open_during = server.episode_sessions.open
            return open_during

        assert asyncio.run(scenario()) == 2
        deadline = time.monotonic() + 10
        while server.episode_sessions.open and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.episode_sessions.open == 0
    finally:
        http.should_exit = True
        thread.join(timeout=10)


def test_list_questions_filters_and_refuses_a_bad_split(demo_dataset) -> None:
    async def scenario() -> None:
        async with stdio_session() as session:
            evaluation = await call(session, "list_questions", split="eval", limit=1000)
            assert evaluation["total"] == len(demo_dataset.split("eval"))
            hard = await call(session, "list_questions", difficulty="hard", limit=1000)
            assert hard["questions"] and all(q["difficulty"] == "hard" for q in hard["questions"])
            books = await call(session, "list_questions", contains="BOOKS", limit=1000)
            assert books["questions"] and all("books" in q["question"].lower() for q in books["questions"])
            bad = await session.call_tool("list_questions", {"split": "test"})
            assert bad.isError and "unknown split 'test'" in bad.content[0].text

    asyncio.run(scenario())


def first_question(dataset, answer_type: str) -> Any:
    """The first train question with this answer type and a non-empty gold answer."""
    return next(r for r in dataset.split("train") if r.answer_type == answer_type and not r.empty_gold)


def test_answer_takes_any_json_value_as_the_value_mode_answer(demo_dataset) -> None:
    """Numbers, lists and booleans are played as answers (the text of them), exactly as the same
    answer sent as text; a wrongly typed argument of another tool is a tool error naming it."""
    integer = first_question(demo_dataset, "integer")
    listed = first_question(demo_dataset, "list")
    gold_number = integer.gold_answer[0][0]
    gold_list = [row[0] for row in listed.gold_answer]

    async def answered(session: ClientSession, question_id: str, value: Any) -> dict[str, Any]:
        await call(session, "start_episode", question_id=question_id)
        return await call(session, "answer", value=value)

    async def scenario() -> None:
        async with stdio_session() as session:
            schema = next(t for t in (await session.list_tools()).tools if t.name == "answer").inputSchema
            kinds = {option.get("type") for option in schema["properties"]["value"]["anyOf"]}
            assert {"string", "integer", "number", "boolean", "array", "object"} <= kinds
            as_number = await answered(session, integer.question_id, gold_number)
            as_text = await answered(session, integer.question_id, str(gold_number))
            assert as_number["metadata"]["correct"] is True and as_number["reward"] == as_text["reward"]
            assert as_number["action_history"][-1] == f"ANSWER {gold_number}"
            as_array = await answered(session, listed.question_id, gold_list)
            assert as_array["metadata"]["correct"] is True
            wrong_array = await answered(session, listed.question_id, [*gold_list, "not in the answer"])
            assert wrong_array["done"] is True and wrong_array["metadata"]["correct"] is False
            as_bool = await answered(session, integer.question_id, True)
            assert as_bool["done"] is True and as_bool["action_history"][-1] == "ANSWER true"
            as_object = await answered(session, integer.question_id, {"count": gold_number})
            assert as_object["done"] is True and as_object["error"] == ""
            await call(session, "start_episode", question_id=integer.question_id)
            bad = await session.call_tool("describe", {"table_name": 5})
            assert bad.isError and bad.content[0].text == (
                "describe needs table_name as a string, the name of a table in the database; got a number"
            )
            missing = await session.call_tool("query", {})
            assert missing.isError and missing.content[0].text == (
                "query needs sql: a string, one read-only SQLite SELECT statement"
            )
            after = await call(session, "sample", table_name="books")
            assert after["step_count"] == 1  # the refused call spent no step

    asyncio.run(scenario())


def test_in_sql_answer_mode_a_non_string_answer_is_refused_and_the_episode_goes_on(demo_dataset) -> None:
    async def scenario() -> None:
        async with stdio_session("--answer-mode", "sql") as session:
            await call(session, "start_episode", question_id="demo-0003")
            refused = await session.call_tool("answer", {"value": 42})
            assert (
                refused.isError and "must be a string holding one SELECT statement" in refused.content[0].text
            )
            gold = demo_dataset.get("demo-0003").gold_sql
            finished = await call(session, "answer", value=gold)
            assert finished["step_count"] == 1 and finished["metadata"]["correct"] is True

    asyncio.run(scenario())
