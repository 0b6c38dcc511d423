"""Load generator for `sqlenv serve` on loopback, with an in-process run of the same steps as the
baseline measured in the same run.

For each concurrency level (default 1, 16, 64, 256 sessions) every session plays episodes of the
demo train split — reset, DESCRIBE, SAMPLE, QUERY (the gold SQL), ANSWER — for a fixed time;
the benchmark reports steps/s and p50/p99 step latency. Then it opens as many idle sessions as
asked (default 1,024), counts errors, and reports the server's RSS per idle session.

Run: .venv/bin/python benchmarks/bench_server.py [--workers 2] [--levels 1,16,64,256]
     [--seconds 10] [--hold 1024]
Targets (issue 3, this 2-core machine): >= 2,000 steps/s at 256 sessions, 1,024 sessions with
0 errors, <= 150 KB per idle session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import websockets

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.data import load_dataset
from sqlenv.env.verifier import format_answer


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


def rss_kb(pid: int) -> int:
    """Resident memory of a process and its children (uvicorn workers), in KB."""
    total = 0
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


async def run_level(url: str, plans: list[list[str]], sessions: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors = 0
    stop_at = time.perf_counter() + seconds

    async def session(index: int) -> None:
        nonlocal errors
        async with websockets.connect(url, max_size=None, ping_interval=None) as ws:
            i = index
            while time.perf_counter() < stop_at:
                for frame in plans[i % len(plans)]:
                    t0 = time.perf_counter()
                    await ws.send(frame)
                    reply = await ws.recv()
                    latencies.append(time.perf_counter() - t0)
                    if reply.startswith('{"type":"error"') or '"type": "error"' in reply[:30]:
                        errors += 1
                i += sessions

    start = time.perf_counter()
    results = await asyncio.gather(*(session(i) for i in range(sessions)), return_exceptions=True)
    elapsed = time.perf_counter() - start
    errors += sum(isinstance(r, BaseException) for r in results)
    latencies.sort()
    return {
        "sessions": sessions,
        "steps_per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else float("nan"),
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else float("nan"),
        "errors": errors,
    }


async def hold_sessions(url: str, count: int) -> tuple[list, int]:
    sockets, errors = [], 0
    reset = json.dumps({"type": "reset", "data": {"seed": 1}})
    for start in range(0, count, 64):
        batch = await asyncio.gather(
            *(websockets.connect(url, ping_interval=None) for _ in range(min(64, count - start))),
            return_exceptions=True,
        )
        for ws in batch:
            if isinstance(ws, BaseException):
                errors += 1
                continue
            await ws.send(reset)
            reply = await ws.recv()
            if '"error"' in reply[:40]:
                errors += 1
            sockets.append(ws)
    return sockets, errors


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--levels", default="1,16,64,256")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hold", type=int, default=1024)
    args = parser.parse_args()

    dataset = load_dataset("demo")
    plans = episode_messages(dataset)
    baseline = in_process_steps_per_second(dataset, args.seconds / 2)

    port = free_port()
    max_sessions = max(args.hold, max(int(x) for x in args.levels.split(","))) + 64
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
        url = f"ws://127.0.0.1:{port}/ws"
        asyncio.run(run_level(url, plans, 8, 2.0))  # warm-up: catalogs, statement caches

        print(f"in-process baseline: {baseline:,.0f} steps/s (same episodes, one thread)")
        print(f"server: {args.workers} worker(s) on 127.0.0.1, client in this process")
        print(f"{'sessions':>9}{'steps/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'vs in-process':>15}")
        for level in (int(x) for x in args.levels.split(",")):
            r = asyncio.run(run_level(url, plans, level, args.seconds))
            print(
                f"{r['sessions']:>9}{r['steps_per_s']:>11,.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
                f"{r['errors']:>8}{r['steps_per_s'] / baseline:>15.3f}"
            )

        async def hold() -> None:
            time.sleep(1.0)
            before = rss_kb(server.pid)
            sockets, errors = await hold_sessions(url, args.hold)
            await asyncio.sleep(1.0)
            after = rss_kb(server.pid)
            held = len(sockets) - 0
            per_session = (after - before) / max(held, 1)
            print(
                f"held {held} idle sessions with {errors} errors; server RSS {before / 1024:.0f} MB -> {after / 1024:.0f} MB, {per_session:.0f} KB per idle session"
            )
            await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)

        if args.hold:
            asyncio.run(hold())
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
