"""Faults around a real server: clients killed mid-episode, half-open and stalled sockets, slow
writers and slow readers, a database file missing or corrupt at startup, an unwritable cache.

What must hold: a dead client's session is freed within seconds; a stalled or slow socket never
delays other sessions beyond normal latency; other sessions' episodes pay exactly the in-process
rewards throughout; a bad database file is named in a warning and the good ones are still served;
an unwritable cache only costs a warning.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from conftest import RunningServer, oracle_episode_total
from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.evaluation import evaluate
from sqlenv.server.client import SQLEnvClient

PROBE_STEPS = 60  # steps timed per latency measurement
SLOWDOWN_ALLOWED = 10  # median step latency under a fault vs without: at most this factor ...
LATENCY_FLOOR_S = 0.05  # ... or this, whichever is larger (a stalled event loop takes seconds)
MAX_STEP_S = 2.0  # no single step of another session may take longer than this


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    running = RunningServer("--dataset", "demo", "--split", "train", "--max-sessions", "128")
    threading.Thread(target=running.process.stdout.read, daemon=True).start()  # never let the pipe fill
    yield running
    running.stop()


@pytest.fixture(scope="module")
def oracle_totals(demo_dataset) -> dict[str, float]:
    local = evaluate(SQLEnvironment(dataset=demo_dataset, split="train"), OraclePolicy(demo_dataset))
    return {e.question_id: e.total_reward for e in local.episodes}


def active_sessions(server: RunningServer) -> int:
    return server.get_json("/sessions")["active"]


def wait_for_sessions(server: RunningServer, expected: int, within_s: float = 5.0) -> int:
    deadline = time.monotonic() + within_s
    while (active := active_sessions(server)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return active


async def step_latencies(ws, n: int = PROBE_STEPS) -> list[float]:
    """Seconds per step of a prober session: a cached DESCRIBE and a QUERY, alternately."""
    reply = json.loads(await _send_recv(ws, {"type": "reset", "data": {"question_id": "demo-0000"}}))
    table = reply["data"]["observation"]["schema_info"].removeprefix("Tables: ").split(", ")[0]
    times = []
    for i in range(n):
        if i % 10 == 9:  # stay inside the step budget
            await _send_recv(ws, {"type": "reset", "data": {"question_id": "demo-0000"}})
        action = (
            {"action_type": "DESCRIBE", "argument": table}
            if i % 2
            else {"action_type": "QUERY", "argument": f"SELECT {i}"}
        )
        started = time.perf_counter()
        reply = json.loads(await _send_recv(ws, {"type": "step", "data": action}))
        times.append(time.perf_counter() - started)
        assert reply["type"] == "observation" and not reply["data"]["observation"]["error"], reply
    return times


async def _send_recv(ws, message: dict) -> str:
    await ws.send(json.dumps(message))
    return await asyncio.wait_for(ws.recv(), 30)


def assert_normal_latency(baseline: list[float], under_fault: list[float], what: str) -> None:
    base, now = statistics.median(baseline), statistics.median(under_fault)
    limit = max(SLOWDOWN_ALLOWED * base, LATENCY_FLOOR_S)
    print(
        f"\n{what}: median step {base * 1e3:.1f} ms -> {now * 1e3:.1f} ms, max {max(under_fault) * 1e3:.0f} ms"
    )
    assert now <= limit, f"{what}: median step {now:.4f} s vs {base:.4f} s without it"
    assert max(under_fault) <= MAX_STEP_S, f"{what}: a step took {max(under_fault):.2f} s"


# ---- raw WebSocket pieces, for sockets that misbehave on purpose ----------------------------------


def handshake_bytes(port: int) -> bytes:
    key = base64.b64encode(b"sqlenv-faults-16").decode()
    return (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


def client_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """One masked client frame (RFC 6455), FIN set."""
    mask = b"\x5a\xa5\x3c\xc3"
    n = len(payload)
    if n < 126:
        header = bytes([0x80 | opcode, 0x80 | n])
    elif n < 1 << 16:
        header = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        header = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
    repeated = (mask * (n // 4 + 1))[:n]
    masked = (
        (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(n, "big") if n else b""
    )
    return header + mask + masked


def open_raw_websocket(port: int, recv_buffer: int | None = None) -> socket.socket:
    """A TCP socket that completed the WebSocket handshake (a session exists on the server)."""
    sock = socket.socket()
    if recv_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_buffer)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(handshake_bytes(port))
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(1)  # byte by byte: nothing after the headers is consumed
        assert chunk, "server closed during the handshake"
        response += chunk
    assert response.startswith(b"HTTP/1.1 101"), response
    return sock


def read_server_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One unmasked server frame: (opcode, payload)."""

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "connection closed mid-frame"
            data += chunk
        return data

    first, second = exactly(2)
    n = second & 0x7F
    if n == 126:
        n = int.from_bytes(exactly(2), "big")
    elif n == 127:
        n = int.from_bytes(exactly(8), "big")
    return first & 0x0F, exactly(n)


def abort(sock: socket.socket) -> None:
    """Close with a RST, no goodbye (SO_LINGER 0), as a crashed peer would."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


# ---- clients killed mid-episode ---------------------------------------------------------------------

KILLED_CLIENT = """
import asyncio, json, sys, websockets
async def main(url, in_flight_query):
    ws = await websockets.connect(url)
    await ws.send(json.dumps({"type": "reset", "data": {"seed": 7}}))
    await ws.recv()
    await ws.send(json.dumps({"type": "step", "data": {"action_type": "QUERY", "argument": "SELECT 1"}}))
    await ws.recv()
    if in_flight_query:  # killed while the server still runs its query (until the time limit)
        slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
        await ws.send(json.dumps({"type": "step", "data": {"action_type": "QUERY", "argument": slow}}))
    print("in episode", flush=True)
    await asyncio.sleep(120)
asyncio.run(main(sys.argv[1], sys.argv[2] == "1"))
"""


def test_clients_killed_mid_episode_free_their_sessions(
    server: RunningServer, demo_dataset, oracle_totals
) -> None:
    questions = sorted(oracle_totals)[:6]

    async def scenario() -> list[float]:
        async with SQLEnvClient(base_url=server.url) as bystander:
            totals = [await oracle_episode_total(bystander, demo_dataset, questions[0])]
            clients = [
                subprocess.Popen(
                    [sys.executable, "-c", KILLED_CLIENT, f"ws://127.0.0.1:{server.port}/ws", str(i % 2)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for i in range(4)
            ]
            try:
                for client in clients:
                    line = await asyncio.wait_for(asyncio.to_thread(client.stdout.readline), 60)
                    assert line.strip() == "in episode"
                assert active_sessions(server) == 1 + len(clients)
                # mid-episode with a step in flight on half of them: SIGKILL, no close handshake
                for client in clients:
                    os.kill(client.pid, signal.SIGKILL)
            finally:
                for client in clients:
                    client.kill()
                    client.wait(timeout=10)
            freed = await asyncio.to_thread(wait_for_sessions, server, 1, 5.0)
            assert freed == 1, f"{freed - 1} sessions of killed clients still open after 5 s"
            for qid in questions[1:]:
                totals.append(await oracle_episode_total(bystander, demo_dataset, qid))
            return totals

    totals = asyncio.run(scenario())
    assert totals == [oracle_totals[q] for q in questions]
    assert wait_for_sessions(server, 0) == 0
    assert server.get_json("/health")["status"] == "healthy"


# ---- half-open sockets ---------------------------------------------------------------------------


def test_half_open_sockets_do_not_delay_other_sessions(
    server: RunningServer, demo_dataset, oracle_totals
) -> None:
    port = server.port
    stalled: dict[str, list[socket.socket]] = {}

    def stall_sockets() -> None:
        handshake = handshake_bytes(port)
        stalled["connected, sent nothing"] = [
            socket.create_connection(("127.0.0.1", port)) for _ in range(10)
        ]
        stalled["half a handshake"] = []
        for _ in range(10):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(handshake[: len(handshake) // 2])
            stalled["half a handshake"].append(sock)
        stalled["half a frame header"] = []
        stalled["half a frame"] = []
        for _ in range(10):
            sock = open_raw_websocket(port)
            sock.sendall(client_frame(b'{"type": "state"}')[:1])
            stalled["half a frame header"].append(sock)
            sock = open_raw_websocket(port)
            frame = client_frame(json.dumps({"type": "reset", "data": {"seed": 1}}).encode())
            sock.sendall(frame[: len(frame) // 2])
            stalled["half a frame"].append(sock)

    async def scenario() -> tuple[list[float], list[float], list[float]]:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as prober:
            baseline = await step_latencies(prober)
            await asyncio.to_thread(stall_sockets)
            # the 20 sockets past the handshake hold sessions; the others none
            assert await asyncio.to_thread(wait_for_sessions, server, 1 + 20) == 1 + 20
            stalled_latencies = await step_latencies(prober)
            # new connections are still accepted and play, while all of them stall
            async with SQLEnvClient(base_url=server.url) as newcomer:
                qid = sorted(oracle_totals)[3]
                assert await oracle_episode_total(newcomer, demo_dataset, qid) == oracle_totals[qid]
            for socks in stalled.values():
                for sock in socks:
                    abort(sock)
            freed = await asyncio.to_thread(wait_for_sessions, server, 1, 5.0)
            assert freed == 1
            after = await step_latencies(prober)
            return baseline, stalled_latencies, after

    try:
        baseline, under_stall, after = asyncio.run(scenario())
    finally:
        for socks in stalled.values():
            for sock in socks:
                sock.close()
    assert_normal_latency(baseline, under_stall, "40 half-open sockets")
    assert_normal_latency(baseline, after, "after they were aborted")
    assert wait_for_sessions(server, 0) == 0
    assert server.get_json("/health")["status"] == "healthy"


# ---- runaway queries ---------------------------------------------------------------------------------

RUNAWAY_QUERY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def test_runaway_queries_in_other_sessions_stall_nobody(server: RunningServer) -> None:
    # Two sessions each run a query until the time limit (5 s) while a prober steps: steps run on
    # the shared query pool (or inline), never on a thread the runaway queries hold, nor on the
    # event loop.
    port = server.port
    url = f"ws://127.0.0.1:{port}/ws"

    async def runaway(ws) -> dict:
        await _send_recv(ws, {"type": "reset", "data": {"question_id": "demo-0002"}})
        started = time.perf_counter()
        reply = json.loads(
            await _send_recv(ws, {"type": "step", "data": {"action_type": "QUERY", "argument": RUNAWAY_QUERY}})
        )
        return {"observation": reply["data"]["observation"], "seconds": time.perf_counter() - started}

    async def scenario() -> tuple[list[float], list[float], list[dict]]:
        async with (
            websockets.connect(url) as prober,
            websockets.connect(url) as slow_a,
            websockets.connect(url) as slow_b,
        ):
            baseline = await step_latencies(prober)
            slow = [asyncio.create_task(runaway(ws)) for ws in (slow_a, slow_b)]
            await asyncio.sleep(0.3)  # both queries are running
            during = await step_latencies(prober)
            assert not any(task.done() for task in slow), "the runaway queries ended before the probe did"
            outcomes = await asyncio.gather(*slow)
            # the slow sessions' episodes go on
            for ws in (slow_a, slow_b):
                reply = json.loads(
                    await _send_recv(ws, {"type": "step", "data": {"action_type": "QUERY", "argument": "SELECT 1"}})
                )
                assert reply["data"]["observation"]["error"] == ""
            return baseline, during, outcomes

    baseline, during, outcomes = asyncio.run(scenario())
    assert_normal_latency(baseline, during, "2 runaway queries in other sessions")
    for outcome in outcomes:
        assert "timed out after 5 s" in outcome["observation"]["error"], outcome
        assert outcome["seconds"] >= 4.5
    assert wait_for_sessions(server, 0) == 0
    assert server.get_json("/health")["status"] == "healthy"


# ---- slow clients ----------------------------------------------------------------------------------


def test_a_client_sending_one_byte_at_a_time_stalls_nobody(server: RunningServer) -> None:
    port = server.port
    frame = client_frame(json.dumps({"type": "reset", "data": {"question_id": "demo-0001"}}).encode())
    replies: list[tuple[int, bytes]] = []

    def trickle() -> None:
        sock = open_raw_websocket(port)
        try:
            for byte in frame:  # ~70 bytes, 25 ms apart: ~2 s for one frame
                sock.sendall(bytes([byte]))
                time.sleep(0.025)
            replies.append(read_server_frame(sock))
            sock.sendall(client_frame(b"", opcode=0x8))  # a proper close
        finally:
            sock.close()

    async def scenario() -> tuple[list[float], list[float]]:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as prober:
            baseline = await step_latencies(prober)
            trickler = asyncio.create_task(asyncio.to_thread(trickle))
            await asyncio.sleep(0.1)
            during = await step_latencies(prober)
            assert not trickler.done(), "the trickle ended before the latency was measured"
            await trickler
            return baseline, during

    baseline, during = asyncio.run(scenario())
    assert_normal_latency(baseline, during, "a client sending one byte every 25 ms")
    opcode, payload = replies[0]
    reply = json.loads(payload)
    assert opcode == 0x1 and reply["type"] == "observation"
    assert reply["data"]["observation"]["metadata"]["question_id"] == "demo-0001"
    assert wait_for_sessions(server, 0) == 0


def test_clients_that_never_read_their_replies_stall_nobody(server: RunningServer) -> None:
    """Five clients with a tiny receive buffer ask for ~4 MB of replies each and read none:
    the server's writes to them back up; every other session must go on as usual."""
    port = server.port
    big_type = "x" * 200_000  # the error frame for an unknown type echoes it: ~200 KB per reply
    request = client_frame(json.dumps({"type": big_type}).encode())
    readers: list[socket.socket] = []

    def flood() -> None:
        for _ in range(5):
            sock = open_raw_websocket(port, recv_buffer=4096)
            sock.settimeout(30)
            for _ in range(20):  # fewer than the server's queue of 32 messages: all get read
                sock.sendall(request)
            readers.append(sock)

    async def scenario() -> tuple[list[float], list[float], list[float]]:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as prober:
            baseline = await step_latencies(prober)
            await asyncio.to_thread(flood)
            assert await asyncio.to_thread(wait_for_sessions, server, 1 + len(readers)) == 1 + len(readers)
            during = await step_latencies(prober)
            # read a little, very slowly: the first reply is intact
            opcode, payload = await asyncio.to_thread(read_server_frame, readers[0])
            assert opcode == 0x1 and json.loads(payload)["type"] == "error"
            for sock in readers:
                abort(sock)
            assert await asyncio.to_thread(wait_for_sessions, server, 1, 5.0) == 1
            after = await step_latencies(prober)
            return baseline, during, after

    try:
        baseline, during, after = asyncio.run(scenario())
    finally:
        for sock in readers:
            sock.close()
    assert_normal_latency(baseline, during, "5 clients not reading 20 MB of replies")
    assert_normal_latency(baseline, after, "after they were aborted")
    assert wait_for_sessions(server, 0) == 0
    assert server.get_json("/health")["status"] == "healthy"


# ---- bad data at startup -------------------------------------------------------------------------


def _make_database(path: Path, rows: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
    conn.executemany("INSERT INTO item VALUES (?, ?, ?)", [(i, f"item {i}", i * 1.5) for i in range(rows)])
    conn.commit()
    conn.close()


def byo_folder(root: Path) -> Path:
    """A bring-your-own dataset: shop.sqlite (good), ledger.sqlite (header overwritten: not a
    database any more), and questions on a third database whose file is missing."""
    folder = root / "byo"
    folder.mkdir()
    _make_database(folder / "shop.sqlite", 40)
    _make_database(folder / "ledger.sqlite", 40)
    with open(folder / "ledger.sqlite", "r+b") as fh:
        fh.write(b"this is no database header")
    questions = []
    for db_id in ("shop", "ledger", "archive"):
        questions += [
            {
                "db_id": db_id,
                "question": f"How many items are in {db_id}?",
                "query": "SELECT COUNT(*) FROM item",
            },
            {
                "db_id": db_id,
                "question": f"Most expensive item of {db_id}?",
                "query": "SELECT MAX(price) FROM item",
            },
            {
                "db_id": db_id,
                "question": f"Name of item 3 in {db_id}?",
                "query": "SELECT name FROM item WHERE id = 3",
            },
            {
                "db_id": db_id,
                "question": f"Items under 10 in {db_id}?",
                "query": "SELECT COUNT(*) FROM item WHERE price < 10",
            },
        ]
    for i, q in enumerate(questions):
        q["split"] = "train" if i % 4 else "eval"
    (folder / "questions.json").write_text(json.dumps(questions))
    return folder


def test_a_corrupt_or_missing_database_is_named_and_the_rest_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlenv.data import load_dataset

    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "cache"))
    folder = byo_folder(tmp_path)
    ledger = folder / "ledger.sqlite"
    with pytest.warns(RuntimeWarning) as caught:
        dataset = load_dataset(str(folder), rebuild=True)
    messages = [str(w.message) for w in caught]
    assert any(str(ledger) in m and "file is not a database" in m for m in messages), messages
    assert any("'archive'" in m for m in messages), messages
    assert dataset.dropped == {
        f"database unreadable: {ledger}: file is not a database": 4,
        "database file missing": 4,
    }
    assert {r.db_id for r in dataset.records} == {"shop"} and len(dataset.records) == 4

    monkeypatch.setenv("SQLENV_CACHE_DIR", str(tmp_path / "server-cache"))  # it builds (and warns) anew
    served = RunningServer("--dataset", str(folder), "--split", "train")
    try:
        listed = served.get_json("/web/questions")["questions"]
        assert {q["db_id"] for q in listed} == {"shop"} and len(listed) == 3

        async def play() -> list[float]:
            async with SQLEnvClient(base_url=served.url) as client:
                return [await oracle_episode_total(client, dataset, q["question_id"]) for q in listed]

        totals = asyncio.run(play())
        assert all(1.0 <= t <= 1.3 for t in totals), totals
    finally:
        served.stop()
    output = served.process.stdout.read()
    assert str(ledger) in output and "unreadable" in output, output[-3000:]
    assert "archive" in output


@pytest.mark.parametrize("how", ["a file", "under a file", "a read-only directory"])
def test_an_unwritable_cache_only_costs_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache should be")
    if how == "a file":
        cache = blocker
    elif how == "under a file":
        cache = blocker / "sqlenv"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories; the two file cases cover it")
        cache = tmp_path / "read-only"
        cache.mkdir()
        cache.chmod(0o500)
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(cache))
    served = RunningServer("--dataset", "demo", "--split", "train")
    try:

        async def play() -> dict:
            async with SQLEnvClient(base_url=served.url) as client:
                await client.reset(question_id="demo-0000")
                result = await client.step(SQLAction(action_type="QUERY", argument="SELECT 1 + 1"))
                return {"error": result.observation.error, "result": result.observation.result}

        outcome = asyncio.run(play())
        assert served.get_json("/health")["status"] == "healthy"
    finally:
        served.stop()
        if how == "a read-only directory":
            cache.chmod(0o700)
    output = served.process.stdout.read()
    assert "not writable" in output and str(cache) in output, output[-3000:]
    assert "working in memory" in output
    assert outcome["error"] == "" and outcome["result"], outcome
    assert blocker.read_text() == "a file where the cache should be"
