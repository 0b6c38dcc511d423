"""Faults of whole workers and of sessions held at the limit, around a real server: one of several
`--workers` killed with SIGKILL mid-episode, and a client that opens sessions up to
`--max-sessions` and never sends anything.

What must hold: the other worker serves on and its clients' episodes pay exactly the in-process
rewards; the killed worker's clients get `SessionLostError` at once (not a hang), reconnect and
play on; the supervisor replaces the dead worker. A silent client at the limit keeps the limit
(others get `ServerAtCapacityError`) without harming `/health`, and its disconnect gives the
capacity back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import websockets

from conftest import (
    RunningServer,
    kill_processes,
    oracle_episode_total,
    process_dead,
    process_start_ticks,
    worker_pids,
)
from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.evaluation import evaluate
from sqlenv.server.client import (
    RemoteSQLEnvironment,
    ServerAtCapacityError,
    SessionLostError,
    SQLEnvClient,
)

DEADLINE_S = 30.0  # no call may take this long: a hang fails instead of blocking the suite
STARTUP_S = 90.0  # a worker (re)starting loads the dataset; generous on a loaded machine
CLIENTS_PER_WORKER = 2  # sessions each worker holds when one is killed
MAX_CLIENTS = 48  # give up spreading sessions over the workers after this many connections
SLOW_QUERY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers in /proc")


@pytest.fixture(scope="module")
def oracle_totals(demo_dataset) -> dict[str, float]:
    local = evaluate(SQLEnvironment(dataset=demo_dataset, split="train"), OraclePolicy(demo_dataset))
    return {e.question_id: e.total_reward for e in local.episodes}


def drained(server: RunningServer) -> RunningServer:
    threading.Thread(target=server.process.stdout.read, daemon=True).start()  # never let the pipe fill
    return server


def wait_for(condition, what: str, within_s: float = DEADLINE_S):
    """Poll `condition()` until it returns something truthy; fail naming `what` after `within_s`."""
    deadline = time.monotonic() + within_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {within_s:.0f} s")
        time.sleep(0.05)
    return result


def serving_workers(server: RunningServer, n: int, seen: dict[int, int | None]) -> set[int]:
    """Wait until the server has `n` live workers and every one has answered `/sessions` (each
    request is accepted by whichever worker wins it); record them in `seen` for the cleanup."""
    pids = wait_for(lambda: (p := worker_pids(server)) and len(p) == n and p, f"{n} workers", STARTUP_S)
    seen.update({pid: process_start_ticks(pid) for pid in pids})
    answered: set[int] = set()

    def all_answered() -> bool:
        answered.add(server.get_json("/sessions")["pid"])
        return pids <= answered

    wait_for(all_answered, f"workers {sorted(pids)} answering /sessions", STARTUP_S)
    return pids


def worker_of_new_session(server: RunningServer, counts: dict[int, int]) -> int:
    """The worker holding the session just opened: the one whose `/sessions` count grew by one
    (every other session here is already counted in `counts`, which is updated)."""

    def grown() -> int | None:
        reading = server.get_json("/sessions")
        return reading["pid"] if reading["active"] == counts[reading["pid"]] + 1 else None

    pid = wait_for(grown, "a worker reporting the new session")
    counts[pid] += 1
    return pid


class Player:
    """One client playing an oracle episode, step by step."""

    def __init__(self, server: RunningServer, dataset, question_id: str) -> None:
        self.client = SQLEnvClient(base_url=server.url)
        self.dataset = dataset
        self.question_id = question_id
        self.total = 0.0
        self.result = None

    async def start(self) -> None:
        self.policy = OraclePolicy(self.dataset)
        self.result = await asyncio.wait_for(self.client.reset(question_id=self.question_id), DEADLINE_S)
        self.policy.reset(self.result.observation, 0)
        self.total = 0.0

    async def step(self) -> None:
        action = self.policy.act(self.result.observation)
        self.result = await asyncio.wait_for(self.client.step(action), DEADLINE_S)
        self.total += self.result.reward or 0.0

    async def finish(self) -> float:
        while not self.result.done:
            await self.step()
        return round(self.total, 6)


@pytest.mark.slow
@needs_proc
def test_a_worker_killed_mid_episode_loses_only_its_own_sessions(demo_dataset, oracle_totals) -> None:
    questions = sorted(oracle_totals)
    seen: dict[int, int | None] = {}
    server = drained(RunningServer("--dataset", "demo", "--split", "train", "--workers", "2"))

    async def scenario(workers: set[int]) -> dict:
        counts = dict.fromkeys(workers, 0)
        players: list[Player] = []
        worker_of: list[int] = []
        try:
            # Connections go to whichever worker accepts first: open them until both hold some.
            while min(counts.values()) < CLIENTS_PER_WORKER and len(players) < MAX_CLIENTS:
                player = Player(server, demo_dataset, questions[len(players) % len(questions)])
                players.append(player)
                await player.client.connect()
                worker_of.append(await asyncio.to_thread(worker_of_new_session, server, counts))
            assert min(counts.values()) >= CLIENTS_PER_WORKER, f"sessions per worker: {counts}"
            for player in players:  # every episode to its middle
                await player.start()
                await player.step()
                assert not player.result.done

            victim = max(counts, key=lambda pid: counts[pid])
            lost = [p for p, w in zip(players, worker_of, strict=True) if w == victim]
            kept = [p for p in players if p not in lost]
            # One of the victim's clients is waiting on a query that runs until the time limit.
            in_flight = asyncio.create_task(
                lost[0].client.step(SQLAction(action_type="QUERY", argument=SLOW_QUERY))
            )
            await asyncio.sleep(0.5)
            assert not in_flight.done()
            os.kill(victim, signal.SIGKILL)
            with pytest.raises(SessionLostError, match="mid-episode") as caught:
                await asyncio.wait_for(in_flight, DEADLINE_S)
            messages = [str(caught.value)]
            await asyncio.to_thread(wait_for, lambda: process_dead(victim), "the killed worker exiting")
            await asyncio.sleep(1.0)  # let the other sockets see the close before their next call
            for player in lost[1:]:
                with pytest.raises(SessionLostError, match="mid-episode") as caught:
                    await player.step()
                messages.append(str(caught.value))
            # The other worker's episodes go on as if nothing happened.
            kept_totals = {id(p): await p.finish() for p in kept}
            # The lost clients reconnect and play whole episodes.
            lost_totals = {}
            for player in lost:
                total = await asyncio.wait_for(
                    oracle_episode_total(player.client, demo_dataset, player.question_id), DEADLINE_S
                )
                lost_totals[id(player)] = total
            return {
                "victim": victim,
                "kept": [(kept_totals[id(p)], oracle_totals[p.question_id]) for p in kept],
                "lost": [(lost_totals[id(p)], oracle_totals[p.question_id]) for p in lost],
                "messages": messages,
            }
        finally:
            for player in players:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(player.client.close(), 10)

    try:
        workers = serving_workers(server, 2, seen)
        outcome = asyncio.run(scenario(workers))
        # uvicorn's supervisor replaces the dead worker, and the replacement serves.
        replaced = serving_workers(server, 2, seen)
        assert outcome["victim"] not in replaced and len(replaced - workers) == 1
        assert server.get_json("/health")["status"] == "healthy"
        assert server.process.poll() is None
    finally:
        server.stop()
        kill_processes(seen)
    print(f"\nlost {len(outcome['lost'])} sessions, kept {len(outcome['kept'])}: {outcome['messages'][0]}")
    assert all(total == expected for total, expected in outcome["kept"]), outcome["kept"]
    assert all(total == expected for total, expected in outcome["lost"]), outcome["lost"]
    assert all("episode is lost" in m and "reset()" in m for m in outcome["messages"])


def test_a_silent_client_at_the_session_limit(demo_dataset, oracle_totals) -> None:
    limit = 3
    questions = sorted(oracle_totals)[:limit]
    server = drained(RunningServer("--dataset", "demo", "--split", "train", "--max-sessions", str(limit)))
    ws_url = f"ws://127.0.0.1:{server.port}/ws"

    def active() -> int:
        return server.get_json("/sessions")["active"]

    async def refused_client() -> ServerAtCapacityError:
        async with SQLEnvClient(base_url=server.url) as client:
            with pytest.raises(ServerAtCapacityError) as caught:
                await asyncio.wait_for(client.reset(question_id=questions[0]), DEADLINE_S)
        return caught.value

    def refused_blocking_client() -> ServerAtCapacityError:
        with (
            RemoteSQLEnvironment(server.url, demo_dataset, "train") as remote,
            pytest.raises(ServerAtCapacityError) as caught,
        ):
            remote.reset(question_id=questions[0])
        return caught.value

    async def scenario() -> list[ServerAtCapacityError]:
        # Sessions opened and never used: no message, not even pings.
        silent = [await websockets.connect(ws_url, ping_interval=None) for _ in range(limit)]
        try:
            await asyncio.to_thread(wait_for, lambda: active() == limit, f"{limit} silent sessions")
            errors = [await refused_client(), await asyncio.to_thread(refused_blocking_client)]
            await asyncio.sleep(2.0)  # the silent sessions stay held; the limit still holds
            errors.append(await refused_client())
            for _ in range(5):
                assert server.get_json("/health")["status"] == "healthy"
            assert active() == limit
        finally:
            silent[0].transport.abort()  # one vanishes without a goodbye, the others close
            for ws in silent[1:]:
                await ws.close()
        return errors

    try:
        errors = asyncio.run(scenario())
        wait_for(lambda: active() == 0, "the silent sessions freed")

        async def play_at_the_limit() -> list[float]:  # every slot is back
            async def one(qid: str) -> float:
                async with SQLEnvClient(base_url=server.url) as client:
                    return await oracle_episode_total(client, demo_dataset, qid)

            return await asyncio.wait_for(asyncio.gather(*(one(q) for q in questions)), DEADLINE_S)

        totals = asyncio.run(play_at_the_limit())
        assert server.get_json("/health")["status"] == "healthy"
    finally:
        server.stop()
    assert totals == [oracle_totals[q] for q in questions]
    for error in errors:
        assert error.max_sessions == limit and error.active_sessions == limit
        assert f"{limit}/{limit} sessions" in str(error) and "--max-sessions" in str(error), str(error)
