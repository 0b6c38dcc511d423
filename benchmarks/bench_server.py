"""Load generator for `sqlenv serve` on loopback, with an in-process run of the same steps as the
baseline measured in the same run.

For each concurrency level (default 1, 16, 64, 256 sessions) every session plays episodes of the
demo train split — reset, DESCRIBE, SAMPLE, QUERY (the gold SQL), ANSWER — for a fixed time;
the benchmark reports steps/s, p50/p99 step latency, and the CPU used over the timed window by
the server, by its two busiest processes ("per worker": uvicorn's workers take the connections
they accept first, so one may get more than its share), by the load generator, and by anything
else ("other CPU": above ~0.1 core, that level was measured on a busy machine). Then it opens as
many idle sessions as asked (default 8,192), counts errors, and reports the server's RSS growth
per idle session.

The load generator runs in its own processes (--generators, default 1), never in the server's
and never in this one, each driving a share of the sessions. Its client (--client) is by default
`raw`: a minimal RFC 6455 client (frames masked once, in advance; replies parsed just enough to
find their end) so that the generator takes as little as possible of the cores it shares with the
server; `websockets` uses the websockets library, as real clients do. Generators run on uvloop
where it is installed. Idle sessions are always held with the websockets library (its handshake
headers are what a server stores per session).

Both this process and the server raise their soft limit on open files to the hard limit: holding
8,192 sessions takes more than 8,192 descriptors on each side.

Run: .venv/bin/python benchmarks/bench_server.py [--workers 2] [--levels 1,16,64,256]
     [--seconds 10] [--hold 8192] [--generators 1] [--client raw|websockets]
Targets (issue 30, this 2-core machine): >= 10,000 steps/s at 256 sessions, 8,192 sessions
with 0 errors, <= 40 KB per idle session.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from array import array
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

import websockets

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.data import load_dataset
from sqlenv.env.verifier import format_answer
from sqlenv.server.app import raise_open_file_limit

# Every reply of OpenEnv's /ws to a reset or a step starts so; anything else is an error frame.
OBSERVATION_PREFIX = b'{"type":"observation"'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def episode_messages(dataset) -> list[list[str]]:
    """Per question: the JSON frames of one oracle-like episode (5 messages, 4 of them steps)."""
    plans = []
    for r in dataset.split("train"):
        table = r.tables_involved[0]
        steps = [
            ("DESCRIBE", table),
            ("SAMPLE", table),
            ("QUERY", r.gold_sql),
            ("ANSWER", format_answer(r.gold_answer, r.answer_type)),
        ]
        frames = [json.dumps({"type": "reset", "data": {"question_id": r.question_id}})]
        frames += [json.dumps({"type": "step", "data": {"action_type": k, "argument": a}}) for k, a in steps]
        plans.append(frames)
    return plans


def in_process_steps_per_second(dataset, seconds: float) -> float:
    env = SQLEnvironment(dataset=dataset, split="train")
    plans = [
        (json.loads(p[0])["data"]["question_id"], [SQLAction(**json.loads(f)["data"]) for f in p[1:]])
        for p in episode_messages(dataset)
    ]
    steps = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        for qid, actions in plans:
            env.reset(question_id=qid)
            for action in actions:
                env.step(action)
            steps += len(actions) + 1
    return steps / (time.perf_counter() - start)


def process_tree(root: int) -> list[int]:
    """A process and its descendants (uvicorn's workers), from /proc."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return pids


def rss_kb(pid: int) -> int:
    """Resident memory of a process and its descendants, in KB."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_seconds(pid: int) -> dict[int, float]:
    """User + system CPU time of a process and of each of its descendants, in seconds."""
    seconds = {}
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[p] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return seconds


def machine_busy_seconds() -> float:
    """CPU seconds all processes of the machine have used (user, nice, system, irq, softirq,
    steal), from /proc/stat: with the server's and the generator's, it shows what else ran."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


# ---- the raw client: just enough RFC 6455 to drive the server cheaply ------------------------------


def client_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """One final client frame: clients must mask what they send (RFC 6455, 5.3)."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    key = (mask * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
    return head + mask + masked


class RawWebSocket(asyncio.Protocol):
    """A WebSocket client connection that sends prepared frames and returns whole replies."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.handshake_done = False
        self.waiter: asyncio.Future[bytes] | None = None

    @classmethod
    async def connect(cls, host: str, port: int, path: str = "/ws") -> RawWebSocket:
        _, protocol = await asyncio.get_running_loop().create_connection(cls, host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        head = await protocol.request(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(head[:80].decode(errors="replace"))
        return protocol

    def request(self, data: bytes) -> asyncio.Future[bytes]:
        """Send `data` (a prepared frame); the future gets the next message."""
        self.waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(data)
        return self.waiter

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        if not self.handshake_done:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buffer[:end])
            del buffer[: end + 4]
            self.handshake_done = True
            self._deliver(head)
        while len(buffer) >= 2:
            opcode, length, start = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
            if length == 126:
                if len(buffer) < 4:
                    return
                length, start = struct.unpack_from("!H", buffer, 2)[0], 4
            elif length == 127:
                if len(buffer) < 10:
                    return
                length, start = struct.unpack_from("!Q", buffer, 2)[0], 10
            if len(buffer) < start + length:
                return
            payload = bytes(buffer[start : start + length])
            del buffer[: start + length]
            if opcode == 0x9:  # ping: the server's keepalive
                assert self.transport is not None
                self.transport.write(client_frame(payload, 0xA))
            elif opcode == 0x8:  # close
                self.connection_lost(ConnectionError("the server closed the connection"))
            elif opcode != 0xA:  # messages are never fragmented by this server (one frame each)
                self._deliver(payload)

    def _deliver(self, message: bytes) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(message)

    def connection_lost(self, exc: Exception | None) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc or ConnectionError("connection closed"))
        if self.transport is not None:
            self.transport.close()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(client_frame(struct.pack("!H", 1000), 0x8))
            self.transport.close()


class LibraryWebSocket:
    """The same interface over the websockets library's client."""

    def __init__(self, connection: websockets.ClientConnection) -> None:
        self.connection = connection

    @classmethod
    async def connect(cls, host: str, port: int, path: str = "/ws") -> LibraryWebSocket:
        return cls(await websockets.connect(f"ws://{host}:{port}{path}", max_size=None, ping_interval=None))

    async def request(self, text: str) -> bytes:
        await self.connection.send(text)
        reply = await self.connection.recv()
        return reply.encode() if isinstance(reply, str) else reply

    def close(self) -> None:
        self.connection.transport.close()


# ---- generator processes -------------------------------------------------------------------------


def uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event-loop factory where it is installed (as the server uses it), else None."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def event_loop_runner() -> asyncio.Runner:
    """An asyncio runner on uvloop where it is installed: the generator's own overhead per step is
    then smaller, leaving more of the shared cores to the server."""
    return asyncio.Runner(loop_factory=uvloop_factory())


def generator_loop_name() -> str:
    return "uvloop" if uvloop_factory() is not None else "asyncio"


def generator_level(
    pipe: Connection,
    barrier: Barrier,
    port: int,
    plans: list[list[str]],
    sessions: list[int],
    total_sessions: int,
    seconds: float,
    client: str,
) -> None:
    """A generator process: connect `sessions`, wait for the others, play for `seconds`, report."""
    raise_open_file_limit()
    with event_loop_runner() as runner:
        result = runner.run(_generator_level(barrier, port, plans, sessions, total_sessions, seconds, client))
    pipe.send(result)
    pipe.close()


async def _generator_level(
    barrier: Barrier,
    port: int,
    plans: list[list[str]],
    sessions: list[int],
    total_sessions: int,
    seconds: float,
    client: str,
) -> dict:
    if client == "raw":
        frames: list[list[bytes] | list[str]] = [[client_frame(f.encode()) for f in plan] for plan in plans]
        connect = RawWebSocket.connect
    else:
        frames = plans
        connect = LibraryWebSocket.connect  # type: ignore[assignment]
    connections = await asyncio.gather(
        *(connect("127.0.0.1", port) for _ in sessions), return_exceptions=True
    )
    latencies = array("d")
    errors = sum(isinstance(c, BaseException) for c in connections)
    await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
    cpu_start, start = time.process_time(), time.perf_counter()
    stop_at = start + seconds

    async def session(connection: RawWebSocket | LibraryWebSocket, index: int) -> None:
        nonlocal errors
        i = index
        while time.perf_counter() < stop_at:
            for frame in frames[i % len(frames)]:
                t0 = time.perf_counter()
                reply = await connection.request(frame)  # type: ignore[arg-type]
                latencies.append(time.perf_counter() - t0)
                if not reply.startswith(OBSERVATION_PREFIX):
                    errors += 1
            i += total_sessions

    outcomes = await asyncio.gather(
        *(session(c, i) for c, i in zip(connections, sessions, strict=True) if not isinstance(c, BaseException)),
        return_exceptions=True,
    )
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    errors += sum(isinstance(o, BaseException) for o in outcomes)
    for c in connections:
        if not isinstance(c, BaseException):
            c.close()
    return {"latencies": latencies.tobytes(), "errors": errors, "elapsed": elapsed, "cpu": cpu}


def run_level(
    server_pid: int, port: int, plans: list[list[str]], sessions: int, seconds: float, generators: int, client: str
) -> dict:
    """One concurrency level, its sessions spread over `generators` processes."""
    context = multiprocessing.get_context("fork")
    count = min(generators, sessions)
    barrier = context.Barrier(count + 1)
    children = []
    for g in range(count):
        receiver, sender = context.Pipe(duplex=False)
        share = list(range(g, sessions, count))
        child = context.Process(
            target=generator_level, args=(sender, barrier, port, plans, share, sessions, seconds, client)
        )
        child.start()
        sender.close()
        children.append((child, receiver))
    barrier.wait(timeout=300)  # a generator that cannot connect breaks the barrier, not the run
    server_cpu_start, busy_start, start = cpu_seconds(server_pid), machine_busy_seconds(), time.perf_counter()
    results = [receiver.recv() for _, receiver in children]
    wall = time.perf_counter() - start
    server_cpu_end = cpu_seconds(server_pid)
    # Per process: uvicorn's workers each take the connections they accept first, so one may get
    # more than its share (and its core is then the limit).
    process_cpu = {p: end - server_cpu_start.get(p, 0.0) for p, end in server_cpu_end.items()}
    server_cpu = sum(process_cpu.values())
    busy = machine_busy_seconds() - busy_start
    for child, _ in children:
        child.join()
    latencies = array("d")
    for r in results:
        latencies.frombytes(r["latencies"])
    ordered = sorted(latencies)
    elapsed = max(r["elapsed"] for r in results)
    generator_cpu = sum(r["cpu"] for r in results)
    return {
        "sessions": sessions,
        "steps_per_s": len(ordered) / elapsed,
        "p50_ms": 1000 * ordered[len(ordered) // 2] if ordered else float("nan"),
        "p99_ms": 1000 * ordered[int(len(ordered) * 0.99)] if ordered else float("nan"),
        "errors": sum(r["errors"] for r in results),
        "server_cores": server_cpu / wall,
        "busiest_process_cores": sorted((c / wall for c in process_cpu.values()), reverse=True)[:2],
        "generator_cores": generator_cpu / elapsed,
        "generator_cpu_s": generator_cpu,
        # Everything else the machine ran meanwhile (this process, other users' jobs): > 0.1 core
        # means the numbers of this level were measured on a busy machine.
        "other_cores": max(busy - server_cpu - generator_cpu, 0.0) / wall,
    }


def generator_hold(pipe: Connection, port: int, count: int) -> None:
    """A generator process: open `count` idle sessions (one reset each, with the websockets
    library), report how many and the errors, keep them until told, then close them."""
    raise_open_file_limit()

    async def hold() -> None:
        held, errors = [], 0
        reset = json.dumps({"type": "reset", "data": {"seed": 1}})
        url = f"ws://127.0.0.1:{port}/ws"
        for start in range(0, count, 64):
            batch = await asyncio.gather(
                *(websockets.connect(url, ping_interval=None) for _ in range(min(64, count - start))),
                return_exceptions=True,
            )
            for ws in batch:
                if isinstance(ws, BaseException):
                    errors += 1
                    continue
                held.append(ws)
                try:
                    await ws.send(reset)
                    reply = await ws.recv()
                    errors += not str(reply).startswith(OBSERVATION_PREFIX.decode())
                except websockets.ConnectionClosed:
                    errors += 1
        pipe.send((len(held), errors))
        await asyncio.get_running_loop().run_in_executor(None, pipe.recv)  # the parent has measured
        await asyncio.gather(*(ws.close() for ws in held), return_exceptions=True)

    with event_loop_runner() as runner:
        runner.run(hold())


def hold_sessions(server_pid: int, port: int, count: int, generators: int) -> tuple[int, int, int, int]:
    """Hold `count` idle sessions from `generators` processes.

    Returns:
        Sessions held, errors, server RSS (KB) before and while holding them.
    """
    context = multiprocessing.get_context("fork")
    time.sleep(1.0)
    before = rss_kb(server_pid)
    children = []
    for g in range(generators):
        parent_end, child_end = context.Pipe()
        share = count // generators + (g < count % generators)
        child = context.Process(target=generator_hold, args=(child_end, port, share))
        child.start()
        children.append((child, parent_end))
    reports = [parent_end.recv() for _, parent_end in children]
    time.sleep(1.0)
    after = rss_kb(server_pid)
    for child, parent_end in children:
        parent_end.send("release")
        child.join()
    return sum(r[0] for r in reports), sum(r[1] for r in reports), before, after


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--levels", default="1,16,64,256", help='sessions per level; "" for none')
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hold", type=int, default=8192)
    parser.add_argument("--generators", type=int, default=1, help="load generator processes")
    parser.add_argument("--client", choices=("raw", "websockets"), default="raw")
    args = parser.parse_args()

    soft, _ = raise_open_file_limit()
    dataset = load_dataset("demo")
    plans = episode_messages(dataset)
    baseline = in_process_steps_per_second(dataset, args.seconds / 2)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]  # none: only --hold, on a fresh server

    port = free_port()
    max_sessions = max([args.hold, *levels]) + 64
    env = {**os.environ, "SQLENV_MAX_SESSIONS": str(max_sessions)}
    server = subprocess.Popen(
        [sys.executable, "-m", "sqlenv.cli", "serve", "--port", str(port), "--workers", str(args.workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        time.sleep(1.0)
        if levels:
            run_level(server.pid, port, plans, 8, 2.0, args.generators, args.client)  # warm-up: caches

        print(f"in-process baseline: {baseline:,.0f} steps/s (same episodes, one thread)")
        print(
            f"server: {args.workers} worker(s) on 127.0.0.1; load generator: {args.generators} process(es), "
            f"{args.client} client on {generator_loop_name()}; open-file limit {soft}"
        )
        if levels:
            print(
                f"{'sessions':>9}{'steps/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'vs in-process':>15}"
                f"{'server CPU':>22}{'per worker':>12}{'generator CPU':>22}{'other CPU':>11}"
            )
        for level in levels:
            r = run_level(server.pid, port, plans, level, args.seconds, args.generators, args.client)
            per_step_us = 1e6 * r["server_cores"] / r["steps_per_s"]
            print(
                f"{r['sessions']:>9}{r['steps_per_s']:>11,.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
                f"{r['errors']:>8}{r['steps_per_s'] / baseline:>15.3f}"
                f"{r['server_cores']:>7.2f} cores ({per_step_us:.0f} µs/step)"
                f"{'/'.join(f'{c:.2f}' for c in r['busiest_process_cores']):>12}"
                f"{r['generator_cores']:>7.2f} cores ({r['generator_cpu_s']:.1f} s)"
                f"{r['other_cores']:>11.2f}"
            )

        if args.hold:
            held, errors, before, after = hold_sessions(server.pid, port, args.hold, args.generators)
            print(
                f"held {held} idle sessions with {errors} errors; server RSS {before / 1024:.0f} MB -> "
                f"{after / 1024:.0f} MB, {(after - before) / max(held, 1):.1f} KB per idle session"
            )
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
