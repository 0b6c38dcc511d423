"""What keeps a server session cheap, checked as behaviour: `sqlenv serve` runs uvicorn without
permessage-deflate, on uvloop, with the open-file limit raised; a session takes no thread of its
own; and an environment makes its random generator only when a reset needs it. Memory per session is
measured by benchmarks/bench_server.py, not asserted here (it depends on the machine)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import websockets
from typer.testing import CliRunner

import sqlenv.server.app as server_app
from conftest import RunningServer
from sqlenv import SQLEnvironment
from sqlenv.cli import app
from sqlenv.settings import served_data_environment


def test_serve_runs_uvicorn_without_permessage_deflate_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    raised: list[bool] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: calls.append(kwargs))
    monkeypatch.setattr(server_app, "raise_open_file_limit", lambda: raised.append(True) or (0, 0))
    # `--workers` hands the settings to its workers through os.environ: restore it afterwards.
    for name in served_data_environment("demo", "train", None, 1):
        monkeypatch.setenv(name, "")
    runner = CliRunner()
    for extra in ([], ["--workers", "2"]):
        result = runner.invoke(app, ["serve", "--dataset", "demo", *extra])
        assert result.exit_code == 0, result.output
    assert len(calls) == 2 and len(raised) == 2
    assert all(call["ws_per_message_deflate"] is False for call in calls)
    assert calls[1]["workers"] == 2


def test_raise_open_file_limit_lifts_the_soft_limit_to_the_hard_one() -> None:
    # In a child process: this one's limits stay as they are.
    code = (
        "import resource\n"
        "from sqlenv.server.app import raise_open_file_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
        "print(*raise_open_file_limit(), *resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    returned_soft, returned_hard, soft, hard = (int(x) for x in out.split())
    assert (returned_soft, returned_hard) == (soft, hard)
    if hard == resource.RLIM_INFINITY:
        assert soft > 256
    else:
        assert soft == hard


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def _soft_open_file_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit")


SESSIONS = 1100  # more than a default soft limit of 1,024 descriptors allows


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc")
def test_a_server_started_with_a_low_file_limit_holds_more_idle_sessions_than_it() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2 * SESSIONS:
        pytest.skip(f"the hard open-file limit ({hard}) is too low for {SESSIONS} sessions on each side")
    # The server inherits a soft limit of 1,024, as under a default shell; this process holds
    # the clients, so its own limit goes back up at once.
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 1024), hard))
    try:
        server = RunningServer("--max-sessions", str(SESSIONS + 16))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        if soft < 2 * SESSIONS:  # the clients' side needs the descriptors too
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 4 * SESSIONS, hard))
        pid = server.process.pid
        assert _soft_open_file_limit(pid) > SESSIONS
        if importlib.util.find_spec("uvloop") is not None:  # a dependency, except on Windows and PyPy
            assert "uvloop" in Path(f"/proc/{pid}/maps").read_text()  # uvicorn's "auto" loop took it
        threads_before = _threads(pid)
        url = f"ws://127.0.0.1:{server.port}/ws"
        reset = json.dumps({"type": "reset", "data": {"seed": 1}})

        async def hold() -> tuple[list[dict], list[str | None], int]:
            held = []
            for start in range(0, SESSIONS, 100):
                # The websockets client offers permessage-deflate, as browsers do.
                held += await asyncio.gather(
                    *(websockets.connect(url, ping_interval=None) for _ in range(min(100, SESSIONS - start)))
                )
            replies = []
            for ws in held:
                await ws.send(reset)
                replies.append(json.loads(await ws.recv()))
            extensions = [ws.response.headers.get("Sec-WebSocket-Extensions") for ws in held]
            threads_holding = _threads(pid)
            await asyncio.gather(*(ws.close() for ws in held))
            return replies, extensions, threads_holding

        replies, extensions, threads_holding = asyncio.run(hold())
        assert [r["type"] for r in replies] == ["observation"] * SESSIONS
        assert extensions == [None] * SESSIONS  # nothing negotiated: no zlib state per connection
        # A handful of shared threads (queries, session set-up), never one per session.
        assert threads_holding - threads_before < 32
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        server.stop()


def test_an_environment_makes_its_random_generator_only_for_an_unseeded_reset(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="train")
    first = env.reset(seed=7).metadata["question_id"]
    env.reset(question_id=first)
    assert "_rng" not in vars(env)  # an idle session, or one reset by seed or id, holds none
    assert env.reset(seed=7).metadata["question_id"] == first
    drawn = {env.reset().metadata["question_id"] for _ in range(30)}
    assert "_rng" in vars(env) and len(drawn) > 1
