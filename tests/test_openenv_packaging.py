"""OpenEnv packaging and conventions: the manifest validates statically, a live server passes
`openenv validate --url`, the task API lists the questions (never their gold) and plays a chosen
task, and the discovery declaration is one OpenEnv's catalog accepts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT, RunningServer
from sqlenv.server.client import SQLEnvClient

OPENENV = str(Path(sys.executable).with_name("openenv"))


def run_validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OPENENV, "validate", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )


def test_manifest_passes_static_validation() -> None:
    result = run_validate("--level", "static", "--skip-build")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout


def test_live_server_passes_openenv_validate(demo_server: RunningServer) -> None:
    result = run_validate("--url", demo_server.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout
    assert "FAIL" not in result.stdout


def post_json(server: RunningServer, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        server.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_task_api_lists_every_question_of_each_split_without_gold(demo_server: RunningServer, demo_dataset) -> None:
    assert demo_server.get_json("/list_environments") == ["sqlenv"]
    splits = {s["name"]: s for s in demo_server.get_json("/sqlenv/splits")}
    assert set(splits) == set(demo_dataset.split_names)
    assert splits["train"]["type"] == "train" and splits["eval"]["type"] == "test"
    manifest = yaml.safe_load((REPO_ROOT / "openenv.yaml").read_text())
    declared = manifest["validation"]["capabilities"]["declared_task_count"]
    for name in demo_dataset.split_names:
        records = demo_dataset.split(name)
        status, body = post_json(demo_server, "/sqlenv/num_tasks", {"split": name})
        assert status == 200 and body["num_tasks"] == len(records) == splits[name]["num_tasks"] == declared[name]
        status, body = post_json(demo_server, "/sqlenv/tasks", {"split": name})
        assert [t["id"] for t in body["tasks"]] == [r.question_id for r in records]
        assert [t["index"] for t in body["tasks"]] == list(range(len(records)))
        for task, record in zip(body["tasks"], records, strict=True):
            assert task["question"] == record.question
            assert record.gold_sql not in json.dumps(task) and "gold" not in json.dumps(task)
    status, body = post_json(demo_server, "/sqlenv/task_range", {"split": "eval", "start": 2, "stop": 5})
    assert [t["index"] for t in body["tasks"]] == [2, 3, 4]


def test_the_task_api_refuses_a_bad_index_or_split_with_400(demo_server: RunningServer) -> None:
    for body in ({"split": "eval", "index": 10_000}, {"split": "eval", "index": -1}, {"split": "test", "index": 0}):
        status, _ = post_json(demo_server, "/sqlenv/task", body)
        assert status == 400, body
    status, _ = post_json(demo_server, "/sqlenv/tasks", {"split": "nope"})
    assert status == 400
    assert demo_server.get_json("/health")["status"] == "healthy"


def test_a_task_is_played_by_reset_with_its_split_and_index(demo_server: RunningServer, demo_dataset) -> None:
    status, body = post_json(demo_server, "/sqlenv/task", {"split": "eval", "index": 3})
    assert status == 200
    task = body["task"]

    async def scenario() -> None:
        async with SQLEnvClient(base_url=demo_server.url) as client:
            result = await client.reset(split="eval", index=3)
            assert result.observation.metadata["question_id"] == task["id"]
            assert result.observation.question == demo_dataset.get(task["id"]).question
            with pytest.raises(Exception, match="outside split"):
                await client.reset(split="eval", index=10_000)

    asyncio.run(scenario())


def test_the_discovery_declaration_is_valid_and_names_the_mcp_tools() -> None:
    from openenv.discovery.metadata import DiscoveryDeclaration

    from sqlenv.server.mcp_server import create_mcp_server

    declaration = DiscoveryDeclaration.model_validate(json.loads((REPO_ROOT / "discovery.json").read_text()))
    assert declaration.tags and declaration.license == "Apache-2.0"
    assert (REPO_ROOT / declaration.license_source).is_file()
    tools = declaration.agent_tools
    assert tools is not None and (REPO_ROOT / tools.source).is_file()
    server = create_mcp_server("demo")
    served = {tool.name for tool in asyncio.run(server.list_tools())}
    assert set(tools.names) == served
