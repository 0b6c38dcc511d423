"""Soak test: many sessions playing episodes for minutes against a `sqlenv serve` it starts.

Each session plays demo-train episodes back to back: reset, DESCRIBE, SAMPLE, QUERY (the gold
SQL), a refused query (DELETE), ANSWER (the gold answer, which must be judged correct); every
reply is checked. Every fourth session disconnects and reconnects every 3 episodes (half of those
by aborting the TCP connection, as a crashed client would). Every --report-every seconds it
prints steps so far, steps/s, errors, the server's active sessions (GET /sessions) and the
server's RSS (the server process and all its children, from /proc).

At the end: total errors, leaked sessions (still active on the server after every client has
closed), the server's RSS after warm-up (the first 20 % of the run, at most 60 s) vs at the end
of the load, and the change in %. Exit status 1 if errors > 0, leaked sessions > 0, or the RSS
grew more than 10 % after warm-up.

With --workers N, /sessions is answered by whichever worker accepts that request, so "active" is
one worker's count; for the leak check it is sampled many times (new connections spread over
the workers) and the largest value is reported.

With --kill-worker-at M (and --workers >= 2), one worker is killed with SIGKILL M minutes in.
Its clients' connections drop: an episode lost that way within KILL_WINDOW_S of the kill is
counted as "lost to the kill", not as an error, and the session reconnects and plays on. Every
other failure is an error, so "errors: 0" means no episode was lost on the surviving workers.
The report then says whether uvicorn brought the worker count back.

Run: .venv/bin/python benchmarks/soak.py [--sessions 256] [--minutes 10] [--workers 1]
     [--report-every 30] [--kill-worker-at MINUTES]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import websockets

from sqlenv.data import load_dataset
from sqlenv.env.verifier import format_answer

REPLY_TIMEOUT_S = 60.0
RECONNECT_EVERY_EPISODES = 3
RSS_GROWTH_LIMIT = 0.10
LEAK_WAIT_S = 15.0
# After a worker is killed, connection failures within this window are blamed on the kill.
KILL_WINDOW_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the server -------------------------------------------------------------------------------------


def process_tree(root: int) -> list[int]:
    """The process and all its descendants (uvicorn workers, multiprocessing helpers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_rss_mb(root: int) -> float:
    total_kb = 0
    for pid in process_tree(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


class Server:
    def __init__(self, sessions: int, workers: int, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log = log_path.open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sqlenv.cli",
                "serve",
                "--dataset",
                "demo",
                "--split",
                "train",
                "--port",
                str(self.port),
                "--workers",
                str(workers),
                # any worker may be handed every connection; room for reconnects in flight
                "--max-sessions",
                str(sessions + 32),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_tail()}")
            try:
                if self.get_json("/health", timeout=1)["status"] == "healthy":
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server not healthy within 120 s:\n{self.log_tail()}")

    def get_json(self, path: str, timeout: float = 10) -> dict:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
            return json.loads(response.read())

    def active_sessions(self) -> int:
        return int(self.get_json("/sessions")["active"])

    def rss_mb(self) -> float:
        return tree_rss_mb(self.process.pid)

    def worker_pids(self) -> list[int]:
        """uvicorn's worker processes: children of the server started by multiprocessing's
        spawn (`spawn_main`); its resource tracker, also a child, is not one."""
        workers = []
        for pid in process_tree(self.process.pid):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == self.process.pid and state not in ("Z", "X") and b"spawn_main" in command:
                workers.append(pid)
        return sorted(workers)

    def log_tail(self, n: int = 3000) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-n:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            for pid in reversed(process_tree(self.process.pid)):
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            self.process.wait(timeout=10)
        self.log.close()


# ---- the sessions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    message: str
    kind: str  # reset, ok (no error), refused (an error), answer (correct, done)


def episode_plans(dataset) -> list[tuple[str, list[Step]]]:
    plans = []
    for r in dataset.split("train"):
        table = r.tables_involved[0]

        def step(kind: str, action: str, argument: str) -> Step:
            data = {"action_type": action, "argument": argument}
            return Step(json.dumps({"type": "step", "data": data}), kind)

        steps = [
            Step(json.dumps({"type": "reset", "data": {"question_id": r.question_id}}), "reset"),
            step("ok", "DESCRIBE", table),
            step("ok", "SAMPLE", table),
            step("ok", "QUERY", r.gold_sql),
            step("refused", "QUERY", f"DELETE FROM {table}"),
            step("answer", "ANSWER", format_answer(r.gold_answer, r.answer_type)),
        ]
        plans.append((r.question_id, steps))
    return plans


@dataclass
class Totals:
    steps: int = 0
    episodes: int = 0
    errors: int = 0
    reconnects: int = 0
    lost_to_kill: int = 0  # episodes whose connection dropped when a worker was killed
    killed_at: float | None = None  # monotonic time of the kill
    error_samples: list[str] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(what[:400])


def check_reply(step: Step, question_id: str, reply: dict) -> str | None:
    """Why the reply is wrong, or None."""
    if reply.get("type") != "observation":
        return f"{step.kind}: expected an observation, got {json.dumps(reply)[:200]}"
    data = reply["data"]
    observation = data["observation"]
    if observation["metadata"].get("question_id") != question_id:
        return (
            f"{step.kind}: reply for question {observation['metadata'].get('question_id')}, not {question_id}"
        )
    if step.kind == "reset":
        return None if observation["step_count"] == 0 else "reset: step_count is not 0"
    if step.kind == "ok":
        return (
            None if not observation["error"] and not data["done"] else f"step failed: {observation['error']}"
        )
    if step.kind == "refused":
        return None if observation["error"] and not data["done"] else "a DELETE was not refused"
    if not (data["done"] and observation["metadata"].get("correct") is True and data["reward"] == 1.0):
        return f"gold answer not judged correct: {observation['result'][:120]}"
    return None


async def run_session(
    index: int, ws_url: str, plans, totals: Totals, stop_at: float, rng: random.Random
) -> None:
    reconnects = index % 4 == 0
    await asyncio.sleep(rng.random() * 2)  # spread the handshakes
    ws = None
    episodes_on_connection = 0
    plan_index = index
    while time.monotonic() < stop_at:
        try:
            if ws is None:
                ws = await websockets.connect(
                    ws_url, max_size=None, ping_interval=None, open_timeout=REPLY_TIMEOUT_S
                )
                episodes_on_connection = 0
            question_id, steps = plans[plan_index % len(plans)]
            plan_index += 7
            for step in steps:
                await ws.send(step.message)
                reply = json.loads(await asyncio.wait_for(ws.recv(), REPLY_TIMEOUT_S))
                totals.steps += 1
                problem = check_reply(step, question_id, reply)
                if problem is not None:
                    totals.error(f"session {index}: {problem}")
                    break
            totals.episodes += 1
            episodes_on_connection += 1
            if reconnects and episodes_on_connection >= RECONNECT_EVERY_EPISODES:
                if index % 8 == 0:
                    ws.transport.abort()  # no close handshake, as if the client died
                else:
                    await ws.close()
                ws = None
                totals.reconnects += 1
        except Exception as exc:  # a dropped connection, a timeout, a refused handshake
            killed = totals.killed_at is not None and time.monotonic() - totals.killed_at < KILL_WINDOW_S
            if killed and isinstance(exc, websockets.ConnectionClosed):
                totals.lost_to_kill += 1
            else:
                totals.error(f"session {index}: {type(exc).__name__}: {exc}")
            if ws is not None:
                ws.transport.abort()
            ws = None
            await asyncio.sleep(0.5)
    if ws is not None:
        await ws.close()


async def report_loop(server: Server, totals: Totals, started: float, args, marks: dict) -> None:
    warmup_s = max(5.0, min(60.0, 0.2 * args.minutes * 60))
    last_steps, last_t = 0, started
    while True:
        now = time.monotonic()
        next_report = last_t + args.report_every
        if "warmup_rss" not in marks and started + warmup_s < next_report:
            await asyncio.sleep(max(0.0, started + warmup_s - now))
            marks["warmup_rss"] = server.rss_mb()
            print(
                f"[{time.monotonic() - started:6.0f} s] warm-up over: server RSS {marks['warmup_rss']:.1f} MB"
            )
            continue
        await asyncio.sleep(max(0.0, next_report - now))
        now = time.monotonic()
        try:
            active = await asyncio.to_thread(server.active_sessions)
        except OSError as exc:
            active = f"? ({exc})"
            totals.error(f"/sessions failed: {exc}")
        rate = (totals.steps - last_steps) / (now - last_t)
        last_steps, last_t = totals.steps, now
        print(
            f"[{now - started:6.0f} s] steps {totals.steps:,} ({rate:,.0f}/s), episodes {totals.episodes:,}, "
            f"errors {totals.errors}, reconnects {totals.reconnects:,}, active sessions {active}"
            f"{' (one worker)' if args.workers > 1 else ''}, server RSS {server.rss_mb():.1f} MB",
            flush=True,
        )


def leaked_sessions(server: Server, workers: int) -> int:
    """Active sessions once every client has closed (waits up to LEAK_WAIT_S for the server to
    notice); with several workers the most any of many samples reports."""
    deadline = time.monotonic() + LEAK_WAIT_S
    while time.monotonic() < deadline:
        samples = [server.active_sessions() for _ in range(1 if workers == 1 else 8 * workers)]
        if max(samples) == 0:
            break
        time.sleep(0.25)
    return max(server.active_sessions() for _ in range(1 if workers == 1 else 8 * workers))


async def soak(args, server: Server, plans) -> tuple[Totals, dict, float]:
    totals = Totals()
    marks: dict = {}
    ws_url = f"ws://127.0.0.1:{server.port}/ws"
    started = time.monotonic()
    stop_at = started + args.minutes * 60
    reporter = asyncio.create_task(report_loop(server, totals, started, args, marks))
    killer = None
    if args.kill_worker_at is not None:
        killer = asyncio.create_task(kill_a_worker(server, totals, started + args.kill_worker_at * 60, marks))
    rng = random.Random(args.seed)
    await asyncio.gather(
        *(
            run_session(i, ws_url, plans, totals, stop_at, random.Random(rng.random()))
            for i in range(args.sessions)
        )
    )
    elapsed = time.monotonic() - started
    marks.setdefault("warmup_rss", server.rss_mb())
    marks["end_rss"] = server.rss_mb()  # measured as the load ends, before the leak wait
    reporter.cancel()
    if killer is not None:
        killer.cancel()
    return totals, marks, elapsed


async def kill_a_worker(server: Server, totals: Totals, at: float, marks: dict) -> None:
    """SIGKILL one uvicorn worker at `at`, then note how many workers there are 30 s later."""
    await asyncio.sleep(max(0.0, at - time.monotonic()))
    before = server.worker_pids()
    victim = before[0]
    totals.killed_at = time.monotonic()
    os.kill(victim, 9)
    marks["killed"] = (victim, len(before))
    print(f"[kill] SIGKILL worker {victim} (of {before})", flush=True)
    await asyncio.sleep(30)
    after = server.worker_pids()
    marks["workers_after_kill"] = after
    print(f"[kill] 30 s later the workers are {after}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--report-every", type=float, default=30.0, help="seconds between reports")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kill-worker-at", type=float, default=None, help="minutes into the run to SIGKILL one worker"
    )
    args = parser.parse_args()
    if args.kill_worker_at is not None and args.workers < 2:
        parser.error("--kill-worker-at needs --workers 2 or more (a server with one worker would be gone)")

    dataset = load_dataset("demo")
    plans = episode_plans(dataset)
    log_path = Path(tempfile.mkdtemp(prefix="sqlenv-soak-")) / "server.log"
    print(
        f"soak: {args.sessions} sessions for {args.minutes:g} min against `sqlenv serve --workers "
        f"{args.workers}` (demo/train); reports every {args.report_every:g} s; server log {log_path}",
        flush=True,
    )
    server = Server(args.sessions, args.workers, log_path)
    try:
        print(f"server up on {server.url}: RSS {server.rss_mb():.1f} MB before any session", flush=True)
        totals, marks, elapsed = asyncio.run(soak(args, server, plans))
        after_close_rss = None
        try:
            leaked = leaked_sessions(server, args.workers)
            healthy = server.get_json("/health").get("status") == "healthy"
            after_close_rss = server.rss_mb()
        except OSError as exc:
            totals.error(f"server unreachable after the run: {exc}")
            leaked, healthy = -1, False
        if server.process.poll() is not None:
            totals.error(f"server exited with {server.process.returncode}")
    finally:
        log_tail = server.log_tail()
        server.stop()

    growth = (marks["end_rss"] - marks["warmup_rss"]) / marks["warmup_rss"]
    recovered = True
    if args.kill_worker_at is not None:
        victim, count = marks.get("killed", (None, 0))
        after = marks.get("workers_after_kill", [])
        recovered = victim is not None and len(after) == count and victim not in after
    failed = totals.errors > 0 or leaked != 0 or growth > RSS_GROWTH_LIMIT or not healthy or not recovered
    print("== soak result ==")
    print(
        f"sessions {args.sessions} (workers {args.workers}), {elapsed / 60:.1f} min: {totals.steps:,} steps "
        f"({totals.steps / elapsed:,.0f} steps/s), {totals.episodes:,} episodes, {totals.reconnects:,} reconnects"
    )
    if args.kill_worker_at is not None:
        victim, count = marks.get("killed", (None, 0))
        print(
            f"worker killed at {args.kill_worker_at:g} min: pid {victim} of {count}; episodes lost with its "
            f"connections: {totals.lost_to_kill}; workers 30 s later: {marks.get('workers_after_kill')} "
            f"({'recovered' if recovered else 'NOT recovered'})"
        )
    print(f"errors: {totals.errors}{' (on the surviving workers, and after the kill window)' if args.kill_worker_at is not None else ''}")
    for sample in totals.error_samples:
        print(f"  - {sample}")
    note = " (largest of many samples: /sessions is per worker)" if args.workers > 1 else ""
    print(f"leaked sessions: {leaked}{note}")
    print(f"server healthy after the run: {healthy}")
    closed = f", after clients closed {after_close_rss:.1f} MB" if after_close_rss is not None else ""
    print(
        f"server RSS: warm-up {marks['warmup_rss']:.1f} MB, end {marks['end_rss']:.1f} MB "
        f"({100 * growth:+.1f} %, limit +{100 * RSS_GROWTH_LIMIT:.0f} %){closed}"
    )
    if failed:
        print(f"server log (tail):\n{log_tail}")
    print(f"verdict: {'FAIL' if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
