"""sqlenv through NeMo Gym's own OpenEnv resources server (nemo-gym 0.7): the server classes built
from configs/integrations/nemo_gym_sqlenv.yaml and driven over HTTP the way NeMo Gym's simple agent
drives them (`/seed_session` with the dataset row, one `POST /<tool>` per tool call with the call's
arguments and the session cookie, `/verify`), and once launched as `gym env start` launches it.
Oracle and random episodes earn what sqlenv's environment gives the same actions in process: the
same result or error at every step, the same total reward (NeMo Gym's own sum of step rewards) and
the same reward parts."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from integration_episodes import oracle_replies, random_replies, reference, require_stack

require_stack("nemo_gym", "nemo-gym")

import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from nemo_gym.config_types import BaseServerConfig  # noqa: E402
from nemo_gym.server_utils import ServerClient  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from resources_servers.openenv.app import OpenEnvResourcesServer, OpenEnvResourcesServerConfig  # noqa: E402
from responses_api_agents.simple_agent.app import SimpleAgentRunRequest  # noqa: E402

from sqlenv.agents.tools import action_to_tool_call  # noqa: E402
from sqlenv.config import DEFAULT_CONFIG  # noqa: E402
from sqlenv.data import load_dataset  # noqa: E402
from sqlenv.env.environment import SQLEnvironment  # noqa: E402
from sqlenv.env.models import SQLAction, SQLObservation  # noqa: E402
from sqlenv.integrations import nemo_gym as nemo_gym_module  # noqa: E402
from sqlenv.integrations.chat_episode import EpisodeSettings  # noqa: E402
from sqlenv.integrations.nemo_gym import (  # noqa: E402
    SQLEnvResourcesServer,
    SQLEnvResourcesServerConfig,
    task_rows,
    write_task_rows,
)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "integrations" / "nemo_gym_sqlenv.yaml"
SERVER_DIR = ROOT / "configs" / "integrations" / "nemo_gym" / "resources_servers" / "sqlenv"
SERVER_KEY = "sqlenv_resources_server"
PARTS = ("correctness", "progress", "operational")


@pytest.fixture(scope="module")
def dataset():
    return load_dataset("demo")


def _server_client() -> ServerClient:
    """A real NeMo Gym server client; these servers never call another server."""
    return ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=11000),
        global_config_dict=OmegaConf.create({}),
    )


def _yaml_section() -> dict:
    """The resources server's section of the NeMo Gym config, as NeMo Gym validates it."""
    loaded = OmegaConf.to_container(OmegaConf.load(CONFIG), resolve=True)
    return loaded[SERVER_KEY]["resources_servers"]["sqlenv"] | {
        "host": "127.0.0.1",
        "port": 0,
        "name": SERVER_KEY,
    }


@pytest.fixture(scope="module")
def app():
    """sqlenv's resources server, configured by the YAML file, as a FastAPI app."""
    config = SQLEnvResourcesServerConfig.model_validate(_yaml_section())
    return SQLEnvResourcesServer(config=config, server_client=_server_client()).setup_webserver()


def _row(question_id: str) -> dict:
    (row,) = task_rows(EpisodeSettings(), [question_id])
    return row


def _response(calls: list[tuple[str, dict, str]]) -> dict:
    """The agent's response as NeMo Gym's simple agent posts it to /verify: each tool call and its
    output, as the Responses API writes them."""
    output = []
    for index, (name, arguments, result) in enumerate(calls):
        call_id = f"call_{index}"
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{index}",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        )
        output.append({"type": "function_call_output", "call_id": call_id, "output": result})
    return {
        "id": "resp_sqlenv_test",
        "created_at": 0,
        "model": "oracle",
        "object": "response",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }


def _in_process(dataset, question_id: str, actions: list[SQLAction]) -> list[SQLObservation]:
    env = SQLEnvironment(dataset=dataset, split=dataset.get(question_id).split, config=DEFAULT_CONFIG)
    env.reset(question_id=question_id)
    return [env.step(action) for action in actions]


def play_over_http(client, row: dict, actions: list[SQLAction]) -> tuple[list[dict], dict]:
    """One episode as NeMo Gym's simple agent plays it against the resources server."""
    seeded = client.post("/seed_session", json=row)  # the client keeps the session cookie
    assert seeded.status_code == 200, seeded.text
    replies, calls = [], []
    for action in actions:
        function = action_to_tool_call(action)["function"]
        reply = client.post(f"/{function['name']}", json=function["arguments"])
        assert reply.status_code == 200, reply.text
        replies.append(reply.json())
        calls.append((function["name"], function["arguments"], reply.text))
    verified = client.post("/verify", json=row | {"response": _response(calls)})
    assert verified.status_code == 200, verified.text
    return replies, verified.json()


def assert_pays_in_process(dataset, question_id, actions, replies, verified) -> None:
    """Every reply is the in-process step's result or error; /verify pays sqlenv's total and parts."""
    expected = _in_process(dataset, question_id, actions)
    assert [r["result"] for r in replies] == [o.result for o in expected]
    assert [r["error"] or "" for r in replies] == [o.error for o in expected]
    ref = reference(dataset, question_id, actions, DEFAULT_CONFIG)
    assert verified["reward"] == pytest.approx(ref.total, abs=1e-9)
    assert verified["reward"] == pytest.approx(sum(o.reward or 0.0 for o in expected), abs=1e-9)
    for part in PARTS:
        assert verified["reward_components"][part] == pytest.approx(ref.parts[part], abs=1e-9), part
    assert sum(verified["reward_components"].values()) == pytest.approx(verified["reward"], abs=1e-9)
    assert verified["question_id"] == question_id
    assert (verified["correct"], verified["answered"], verified["steps"]) == (
        ref.correct,
        ref.answered,
        ref.steps,
    )


def test_oracle_episodes_earn_the_in_process_rewards(app, dataset):
    """Every demo question, train and eval: the oracle is correct, and NeMo Gym pays sqlenv's reward."""
    question_ids = [r.question_id for split in ("train", "eval") for r in dataset.split(split)]
    assert len(question_ids) == 95
    for question_id in question_ids:
        actions = oracle_replies(dataset, question_id, DEFAULT_CONFIG)
        replies, verified = play_over_http(TestClient(app), _row(question_id), actions)
        assert_pays_in_process(dataset, question_id, actions, replies, verified)
        assert verified["correct"] is True
        assert verified["reward"] > 1.0


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_random_episodes_earn_the_in_process_rewards(app, dataset, seed):
    """The random policy's episodes (explorations, then a wrong answer) pay the same."""
    question_id = dataset.split("train")[seed * 7].question_id
    actions = random_replies(dataset, question_id, seed, DEFAULT_CONFIG)
    replies, verified = play_over_http(TestClient(app), _row(question_id), actions)
    assert_pays_in_process(dataset, question_id, actions, replies, verified)
    assert verified["correct"] is False


def test_refused_actions_and_a_spent_budget_earn_the_in_process_rewards(app, dataset):
    """An unknown table, a statement that is not read-only, repeated queries and a budget spent
    without an answer: errors the model reads, penalties, a negative total, all as in process."""
    actions = [
        SQLAction(action_type="DESCRIBE", argument="no_such_table"),
        SQLAction(action_type="QUERY", argument="DELETE FROM books"),
        *[SQLAction(action_type="QUERY", argument="SELECT 1")] * 13,
    ]
    assert len(actions) == DEFAULT_CONFIG.step_budget
    replies, verified = play_over_http(TestClient(app), _row("demo-0000"), actions)
    assert_pays_in_process(dataset, "demo-0000", actions, replies, verified)
    assert replies[0]["error"] and replies[1]["error"]
    assert verified["answered"] is False and verified["reward"] < 0


def test_sessions_are_separate_episodes(app, dataset):
    """Two sessions on different questions, their steps interleaved, each pay their own reward."""
    first, second = "demo-0000", dataset.split("eval")[3].question_id
    plans = {qid: oracle_replies(dataset, qid, DEFAULT_CONFIG) for qid in (first, second)}
    clients = {qid: TestClient(app) for qid in plans}  # each keeps its own session cookie
    for qid, client in clients.items():
        assert client.post("/seed_session", json=_row(qid)).status_code == 200
    replies: dict[str, list[dict]] = {qid: [] for qid in plans}
    for step in range(max(len(p) for p in plans.values())):
        for qid, plan in plans.items():
            if step < len(plan):
                function = action_to_tool_call(plan[step])["function"]
                reply = clients[qid].post(f"/{function['name']}", json=function["arguments"])
                replies[qid].append(reply.json())
    for qid, client in clients.items():
        verified = client.post("/verify", json=_row(qid) | {"response": _response([])})
        assert_pays_in_process(dataset, qid, plans[qid], replies[qid], verified.json())


def test_the_tools_are_sqlenvs_own(app):
    """NeMo Gym asked the environment for its tools at start-up and serves exactly sqlenv's four,
    with the same arguments as the rows' tool definitions."""
    paths = TestClient(app).get("/openapi.json").json()["paths"]
    served = {p.strip("/") for p in paths} - {
        "seed_session",
        "close_session",
        "verify",
        "aggregate_metrics",
        "reverify_mode",
    }
    assert served == {"describe", "sample", "query", "answer"}
    row_tools = {
        t["name"]: t["parameters"]["required"] for t in _row("demo-0000")["responses_create_params"]["tools"]
    }
    assert row_tools == {
        "describe": ["table_name"],
        "sample": ["table_name"],
        "query": ["sql"],
        "answer": ["value"],
    }


def test_bad_calls_spend_no_step_and_the_episode_ends(app, dataset):
    """A call without its argument is refused by NeMo Gym (422) before the environment sees it; an
    unknown question is a 400 naming it; after the answer, calls get NeMo Gym's 'Episode has ended.'"""
    client = TestClient(app)
    unknown = client.post("/seed_session", json=_row("demo-0000") | {"question_id": "no-such-question"})
    assert unknown.status_code == 400 and "no-such-question" in unknown.text
    row = _row("demo-0000")
    assert client.post("/seed_session", json=row).status_code == 200
    assert client.post("/describe", json={"table": "books"}).status_code == 422
    assert client.post("/query", json={}).status_code == 422
    actions = oracle_replies(dataset, "demo-0000", DEFAULT_CONFIG)
    replies = []
    for action in actions:
        function = action_to_tool_call(action)["function"]
        replies.append(client.post(f"/{function['name']}", json=function["arguments"]).json())
    late = client.post("/query", json={"sql": "SELECT 1"}).json()
    assert late == {"error": "Episode has ended.", "result": None}
    verified = client.post("/verify", json=row | {"response": _response([])}).json()
    assert_pays_in_process(dataset, "demo-0000", actions, replies, verified)


def test_stock_openenv_server_plays_sqlenvs_environment(dataset):
    """NeMo Gym's unmodified OpenEnv server with sqlenv's environment class: in MCP mode on the
    question its reset_kwargs name, and in its single-`step` mode with `SQLAction`, whose replies
    carry every step's reward, each equal to the in-process step's."""
    question_id = "demo-0001"
    actions = oracle_replies(dataset, question_id, DEFAULT_CONFIG)
    base = _yaml_section() | {"reset_kwargs": {"question_id": question_id}}
    mcp = OpenEnvResourcesServer(
        config=OpenEnvResourcesServerConfig.model_validate(base), server_client=_server_client()
    )
    replies, verified = play_over_http(TestClient(mcp.setup_webserver()), _row(question_id), actions)
    expected = _in_process(dataset, question_id, actions)
    assert [r["result"] for r in replies] == [o.result for o in expected]
    assert verified["reward"] == pytest.approx(
        reference(dataset, question_id, actions, DEFAULT_CONFIG).total, abs=1e-9
    )

    single = base | {"action_class": "sqlenv.env.models.SQLAction", "is_mcp": False}
    server = OpenEnvResourcesServer(
        config=OpenEnvResourcesServerConfig.model_validate(single), server_client=_server_client()
    )
    client = TestClient(server.setup_webserver())
    assert client.post("/seed_session", json={}).status_code == 200
    steps = [
        client.post("/step", json=a.model_dump(include={"action_type", "argument"})).json() for a in actions
    ]
    assert [s["reward"] for s in steps] == pytest.approx([o.reward for o in expected], abs=1e-12)
    assert [s["done"] for s in steps] == [o.done for o in expected]
    total = client.post("/verify", json=_row(question_id) | {"response": _response([])}).json()
    assert total["reward"] == pytest.approx(sum(o.reward for o in expected), abs=1e-9)


# Runs until sqlenv's time limit stops it (5 s), on any machine.
SLOW_QUERY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000) SELECT COUNT(*) FROM c"


async def _slow_query_and_others(app) -> list[str]:
    """Session A runs a query that sqlenv stops at its 5 s time limit; 0.5 s later session B makes
    three calls. The order in which they finish shows whether A's query held the event loop."""
    transport = httpx.ASGITransport(app=app)
    finished: list[str] = []
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://nemo-gym") as a,
        httpx.AsyncClient(transport=transport, base_url="http://nemo-gym") as b,
    ):
        assert (await a.post("/seed_session", json=_row("demo-0000"))).status_code == 200
        assert (await b.post("/seed_session", json=_row("demo-0001"))).status_code == 200

        async def slow() -> None:
            reply = (await a.post("/query", json={"sql": SLOW_QUERY})).json()
            assert "timed out after 5 s" in reply["error"], reply
            finished.append("slow query")

        async def others() -> None:
            await asyncio.sleep(0.5)
            for table in ("books", "loans", "members"):
                assert (await b.post("/describe", json={"table_name": table})).json()["error"] is None
                finished.append(f"describe {table}")

        await asyncio.gather(slow(), others())
    return finished


def test_a_slow_query_does_not_hold_other_sessions(app):
    """sqlenv's tool endpoints await step_async: while one session's query runs, another's calls
    are answered."""
    assert asyncio.run(_slow_query_and_others(app))[-1] == "slow query"


def test_on_an_untested_nemo_gym_the_stock_endpoints_serve(monkeypatch):
    """The version guard: on a nemo-gym release sqlenv was not tested with, nemo-gym's own
    endpoints serve (with a warning), and there a slow query holds the other session's calls,
    which is what the replacement endpoints prevent."""
    monkeypatch.setattr(nemo_gym_module, "TESTED_NEMO_GYM", ())
    config = SQLEnvResourcesServerConfig.model_validate(_yaml_section())
    with pytest.warns(RuntimeWarning, match="not one sqlenv's resources server was tested with"):
        stock = SQLEnvResourcesServer(config=config, server_client=_server_client()).setup_webserver()
    assert asyncio.run(_slow_query_and_others(stock))[0] == "slow query"


def test_rows_are_nemo_gym_rows(tmp_path, dataset):
    """The rows NeMo Gym's simple agent reads: they validate as its run request, one per question,
    with sqlenv's opening messages (the schema hidden: table names only)."""
    path = tmp_path / "sqlenv_demo_train.jsonl"
    assert write_task_rows(path) == len(dataset.split("train"))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["question_id"] for r in rows] == [q.question_id for q in dataset.split("train")]
    for row in rows:
        SimpleAgentRunRequest.model_validate(row)
        system, user = row["responses_create_params"]["input"]
        assert system["role"] == "system" and user["role"] == "user"
        assert user["content"].startswith("Question: ") and "CREATE TABLE" not in user["content"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_server_launched_as_gym_env_start_launches_it(dataset, tmp_path):
    """NeMo Gym's own config parser reads the YAML; `app.py` runs in its server folder with the
    parsed config in NEMO_GYM_CONFIG_DICT (what `gym env start` does after building the venv); an
    oracle episode over real HTTP earns the in-process reward."""
    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig

    parser_config = GlobalConfigDictParserConfig(
        initial_global_config_dict=OmegaConf.create(
            {"config_paths": [str(CONFIG)], **GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT}
        ),
        skip_load_from_cli=True,
        skip_load_from_dotenv=True,
    )
    parsed = GlobalConfigDictParser().parse(parser_config)
    port = _free_port()
    parsed[SERVER_KEY]["resources_servers"]["sqlenv"]["port"] = port
    env = dict(
        os.environ,
        NEMO_GYM_CONFIG_DICT=OmegaConf.to_yaml(parsed),
        NEMO_GYM_CONFIG_PATH=SERVER_KEY,
        SQLENV_DATASET="demo",
        SQLENV_SPLIT="eval",
    )
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "app.py"], cwd=SERVER_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /health in 120 s"
            time.sleep(0.5)
        question_id = dataset.split("eval")[0].question_id
        actions = oracle_replies(dataset, question_id, DEFAULT_CONFIG)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            replies, verified = play_over_http(client, _row(question_id), actions)
        assert_pays_in_process(dataset, question_id, actions, replies, verified)
        assert verified["correct"] is True
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_without_nemo_gym_the_import_names_the_extra():
    code = (
        "import sys; sys.modules['resources_servers'] = None\n"
        "from sqlenv.extras import MissingExtraError\n"
        "try:\n    import sqlenv.integrations.nemo_gym\nexcept MissingExtraError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'nemo-gym' extra" in out and "pip install" in out
