"""`sqlenv mcp` driven by a non-Python client: the official TypeScript SDK (`@modelcontextprotocol/sdk`
from npm, pinned in tests/mcp_ts_client/package.json), over stdio and over streamable HTTP.

The client (tests/mcp_ts_client/play.mjs) plays a plan of tool calls: oracle episodes, a refused
statement, answers given as a number and as an array, and a wrongly typed argument. The same plan
is played in process on a `SQLEnvironment`; every step's result, error, reward and done must be
the same, and the wrongly typed call an MCP tool error that says what the tool needs.

The SDK comes from `npm ci --prefix tests/mcp_ts_client --no-bin-links` (scripts/test.sh runs it). Where Node.js
or the SDK is missing the tests skip saying why; where SQLENV_REQUIRE_NODE is set (CI), they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.server.mcp_server import answer_text
from test_mcp import ARGUMENT_OF_TOOL, TOOL_FOR_ACTION, TOOLS, RunningMcpServer, first_question

CLIENT_DIR = Path(__file__).resolve().parent / "mcp_ts_client"
ACTION_OF_TOOL = {tool: action for action, tool in TOOL_FOR_ACTION.items()}
COMPARED = ("result", "error", "reward", "done", "step_count", "action_history")


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    reason = None
    if found is None:
        reason = "Node.js is not installed"
    elif not (CLIENT_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        reason = "the TypeScript MCP SDK is not installed: bash scripts/install_test_tools.sh"
    if reason is not None:
        if os.environ.get("SQLENV_REQUIRE_NODE"):
            pytest.fail(reason + " — SQLENV_REQUIRE_NODE is set, so the TypeScript client tests may not skip")
        pytest.skip(reason)
    assert found is not None
    return found


def build_plan(dataset) -> list[dict[str, Any]]:
    """Tool calls covering the episode's whole protocol (see the module docstring)."""
    calls: list[dict[str, Any]] = []
    env = SQLEnvironment(dataset=dataset, split="train")
    for question_id in ("demo-0000", "demo-0003", "demo-0007"):  # oracle episodes, as the oracle plays them
        policy = OraclePolicy(dataset)
        observation = env.reset(question_id=question_id)
        policy.reset(observation, 0)
        calls.append({"tool": "start_episode", "arguments": {"question_id": question_id}})
        while not observation.done:
            action = policy.act(observation)
            tool = TOOL_FOR_ACTION[action.action_type]
            calls.append({"tool": tool, "arguments": {ARGUMENT_OF_TOOL[tool]: action.argument}})
            observation = env.step(action)
    env.close()
    integer, listed = first_question(dataset, "integer"), first_question(dataset, "list")
    calls += [
        {"tool": "start_episode", "arguments": {"question_id": integer.question_id}},
        {"tool": "query", "arguments": {"sql": "DELETE FROM books"}},  # refused, a step spent
        {"tool": "describe", "arguments": {"table_name": 7}},  # a tool error, no step spent
        {"tool": "answer", "arguments": {"value": integer.gold_answer[0][0]}},  # a number
        {"tool": "start_episode", "arguments": {"question_id": listed.question_id}},
        {"tool": "answer", "arguments": {"value": [row[0] for row in listed.gold_answer]}},  # an array
    ]
    return calls


def in_process(dataset, calls: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Each call's observation played on a `SQLEnvironment` (None: the call is no action)."""
    env = SQLEnvironment(dataset=dataset, split="train")
    observed: list[dict[str, Any] | None] = []
    for call in calls:
        tool, arguments = call["tool"], call["arguments"]
        if tool == "start_episode":
            observed.append(env.reset(question_id=arguments["question_id"]).model_dump())
            continue
        value = arguments[ARGUMENT_OF_TOOL[tool]]
        if tool == "answer":
            value = answer_text(value, "value")
        elif not isinstance(value, str):
            observed.append(None)
            continue
        observed.append(env.step(SQLAction(action_type=ACTION_OF_TOOL[tool], argument=value)).model_dump())
    env.close()
    return observed


def play(node: str, plan: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    done = subprocess.run(
        [node, str(CLIENT_DIR / "play.mjs"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=CLIENT_DIR,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def check(played: dict[str, Any], calls: list[dict[str, Any]], expected: list[dict[str, Any] | None]) -> None:
    assert {tool["name"] for tool in played["tools"]} == TOOLS
    answer_schema = next(t for t in played["tools"] if t["name"] == "answer")["inputSchema"]
    assert {"number", "array", "string"} <= {
        o.get("type") for o in answer_schema["properties"]["value"]["anyOf"]
    }
    for call, result, local in zip(calls, played["results"], expected, strict=True):
        if local is None:
            assert result["isError"] is True and not result.get("thrown")
            assert (
                result["text"]
                == "describe needs table_name as a string, the name of a table in the database; got a number"
            )
            continue
        assert result["isError"] is False, (call, result["text"])
        remote = result["structured"]
        assert {key: remote[key] for key in COMPARED} == {key: local[key] for key in COMPARED}, call
        if call["tool"] == "answer":
            assert remote["metadata"]["correct"] is True, call
    refused = played["results"][[c["arguments"].get("sql") for c in calls].index("DELETE FROM books")]
    assert "not allowed: DELETE" in refused["structured"]["error"] and refused["structured"]["reward"] < 0


def test_the_typescript_sdk_plays_episodes_over_stdio(node: str, demo_dataset, tmp_path: Path) -> None:
    calls = build_plan(demo_dataset)
    command = [sys.executable, "-m", "sqlenv.cli", "mcp", "--dataset", "demo"]
    played = play(node, {"command": command, "calls": calls}, tmp_path)
    check(played, calls, in_process(demo_dataset, calls))


def test_the_typescript_sdk_plays_episodes_over_streamable_http(
    node: str, demo_dataset, tmp_path: Path
) -> None:
    server = RunningMcpServer()
    try:
        calls = build_plan(demo_dataset)
        played = play(node, {"url": server.url, "calls": calls}, tmp_path)
        check(played, calls, in_process(demo_dataset, calls))
    finally:
        server.stop()
