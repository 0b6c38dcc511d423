"""The real server (`sqlenv serve` in its own process) with real WebSocket clients."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import websockets

from conftest import RunningServer, oracle_episode_total
from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.evaluation import evaluate
from sqlenv.server.client import RemoteSQLEnvironment, SQLEnvClient


def ws_url(server: RunningServer) -> str:
    return f"ws://127.0.0.1:{server.port}/ws"


async def _oracle_episode(server: RunningServer, dataset, question_id: str) -> float:
    async with SQLEnvClient(base_url=server.url) as client:
        return await oracle_episode_total(client, dataset, question_id)


def test_64_concurrent_clients_get_the_in_process_rewards(demo_server: RunningServer, demo_dataset) -> None:
    questions = [r.question_id for r in demo_dataset.split("train")]
    chosen = [questions[i % len(questions)] for i in range(64)]
    local = evaluate(SQLEnvironment(dataset=demo_dataset, split="train"), OraclePolicy(demo_dataset))
    expected = {e.question_id: e.total_reward for e in local.episodes}

    async def run_all() -> list[float]:
        return await asyncio.gather(*(_oracle_episode(demo_server, demo_dataset, qid) for qid in chosen))

    remote = asyncio.run(run_all())
    assert remote == [expected[qid] for qid in chosen]
    assert demo_server.get_json("/sessions")["active"] == 0


def test_evaluate_over_the_server_matches_in_process(demo_server: RunningServer, demo_dataset) -> None:
    local = evaluate(
        SQLEnvironment(dataset=demo_dataset, split="train"), RandomPolicy(), n_episodes=20, seed=5
    )
    with RemoteSQLEnvironment(demo_server.url, demo_dataset, "train") as remote_env:
        remote = evaluate(remote_env, RandomPolicy(), n_episodes=20, seed=5)
    assert [e.__dict__ for e in remote.episodes] == [e.__dict__ for e in local.episodes]


async def _exchange(ws, message: dict | str) -> dict:
    await ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(await ws.recv())


def test_bad_frames_get_error_frames_and_the_session_stays_usable(demo_server: RunningServer) -> None:
    async def scenario() -> None:
        async with websockets.connect(ws_url(demo_server)) as ws:
            reset = await _exchange(ws, {"type": "reset", "data": {"seed": 3}})
            assert reset["type"] == "observation"
            bad_json = await _exchange(ws, "{not json")
            assert bad_json["type"] == "error" and "Invalid JSON" in bad_json["data"]["message"]
            unknown = await _exchange(ws, {"type": "teleport"})
            assert unknown["type"] == "error" and "Unknown message type" in unknown["data"]["message"]
            invalid = await _exchange(ws, {"type": "step", "data": {"argument": "no action type"}})
            assert invalid["type"] == "error"
            extra = await _exchange(
                ws, {"type": "step", "data": {"action_type": "QUERY", "argument": "x", "y": 1}}
            )
            assert extra["type"] == "error"
            bad_reset = await _exchange(ws, {"type": "reset", "data": {"question_id": "no-such-id"}})
            assert bad_reset["type"] == "error" and "no-such-id" in bad_reset["data"]["message"]
            # The session still plays: the episode of the first reset goes on.
            ok = await _exchange(
                ws, {"type": "step", "data": {"action_type": "QUERY", "argument": "SELECT 1"}}
            )
            assert ok["type"] == "observation"
            assert ok["data"]["observation"]["step_count"] == 1

    asyncio.run(scenario())


def test_stepping_after_the_end_is_a_clear_error(demo_server: RunningServer) -> None:
    async def scenario() -> None:
        async with SQLEnvClient(base_url=demo_server.url) as client:
            await client.reset(seed=1)
            final = await client.step(SQLAction(action_type="ANSWER", argument="nope"))
            assert final.done
            after = await client.step(SQLAction(action_type="QUERY", argument="SELECT 1"))
            assert after.done and "episode is over" in after.observation.error

    asyncio.run(scenario())


def test_sessions_are_isolated(demo_server: RunningServer) -> None:
    async def scenario() -> None:
        async with SQLEnvClient(base_url=demo_server.url) as a, SQLEnvClient(base_url=demo_server.url) as b:
            ra = await a.reset(question_id="demo-0000")
            rb = await b.reset(question_id="demo-0001")
            await a.step(SQLAction(action_type="ANSWER", argument="x"))
            state_b = await b.state()
            assert state_b.question_id == "demo-0001" and not state_b.done
            step_b = await b.step(SQLAction(action_type="QUERY", argument="SELECT 1"))
            assert step_b.observation.step_count == 1 and not step_b.done
            assert ra.observation.question != rb.observation.question

    asyncio.run(scenario())


def test_a_client_that_disconnects_mid_episode_frees_its_session(demo_server: RunningServer) -> None:
    async def scenario() -> None:
        sockets = [await websockets.connect(ws_url(demo_server)) for _ in range(5)]
        for ws in sockets:
            await _exchange(ws, {"type": "reset", "data": {}})
        assert demo_server.get_json("/sessions")["active"] == 5
        for ws in sockets:
            ws.transport.abort()  # no close handshake: as if the client process died

    asyncio.run(scenario())
    deadline = time.monotonic() + 10
    while demo_server.get_json("/sessions")["active"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert demo_server.get_json("/sessions")["active"] == 0


def test_capacity_reached_is_a_clear_error_naming_the_limit() -> None:
    server = RunningServer("--max-sessions", "2")
    try:

        async def scenario() -> None:
            first = await websockets.connect(ws_url(server))
            second = await websockets.connect(ws_url(server))
            await _exchange(first, {"type": "reset", "data": {}})
            await _exchange(second, {"type": "reset", "data": {}})
            async with websockets.connect(ws_url(server)) as third:
                refused = json.loads(await third.recv())
                assert refused["type"] == "error"
                assert refused["data"]["max_sessions"] == 2
                assert "2" in refused["data"]["message"]
            # The first two sessions keep working.
            ok = await _exchange(
                first, {"type": "step", "data": {"action_type": "QUERY", "argument": "SELECT 1"}}
            )
            assert ok["type"] == "observation"
            await first.close()
            await second.close()

        asyncio.run(scenario())
    finally:
        server.stop()


def test_http_endpoints(demo_server: RunningServer) -> None:
    assert demo_server.get_json("/health")["status"] == "healthy"
    schema = demo_server.get_json("/schema")
    assert "action_type" in json.dumps(schema["action"])
    assert demo_server.get_json("/metadata")["name"] == "sqlenv"
    questions = demo_server.get_json("/web/questions")
    assert questions["split"] == "train" and len(questions["questions"]) == 67
    assert "gold" not in json.dumps(questions)


@pytest.mark.slow
def test_workers_option_serves_from_several_processes(demo_dataset) -> None:
    server = RunningServer("--workers", "2")
    try:

        async def scenario() -> list[float]:
            qids = [r.question_id for r in demo_dataset.split("train")[:8]]
            return await asyncio.gather(*(_oracle_episode(server, demo_dataset, q) for q in qids))

        totals = asyncio.run(scenario())
        assert all(1.0 <= t <= 1.3 for t in totals)
    finally:
        server.stop()
