"""A server that comes up on a busy machine: `sqlenv serve --workers 2` started beside CPU-bound
processes that keep every core busy answers /health and plays an oracle episode with the in-process
rewards, and uvicorn replaces no worker while it starts (uvicorn's supervisor kills a worker that
does not answer its health check within `--worker-timeout`, 5 s by uvicorn's default).

Bounds are generous (minutes); what is exact is the behaviour: two worker processes, the same two
from the first moment to the end, and the rewards. Also: the `sqlenv` command and the workers
import OpenEnv without its Gradio web interface (`sqlenv.server.lean_openenv`), which is what makes
their start cheap, while a program importing sqlenv as a library keeps OpenEnv whole.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import free_port, oracle_episode_total, process_start_ticks, spawned_workers
from sqlenv import SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.evaluation import evaluate
from sqlenv.server.client import SQLEnvClient

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers in /proc"),
]
BURNERS_PER_CORE = 3  # load average ~3 per core, as beside a training run
STARTUP_BOUND_S = 300


@pytest.fixture
def busy_machine() -> Iterator[int]:
    """CPU-bound processes keeping every core busy for the test's duration."""
    count = BURNERS_PER_CORE * (os.cpu_count() or 1)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield count
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait(timeout=10)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200 and json.loads(response.read()) == {"status": "healthy"}
    except OSError:
        return False


def test_two_workers_start_beside_busy_cores_without_a_restart(busy_machine: int, demo_dataset) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sqlenv.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--dataset",
            "demo",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: dict[int, int | None] = {}  # every worker process seen: pid -> start ticks
    try:
        began = time.monotonic()
        while not _healthy(url):
            assert server.poll() is None, (
                f"the server exited:\n{server.stdout.read() if server.stdout else ''}"
            )
            assert time.monotonic() - began < STARTUP_BOUND_S, f"no /health within {STARTUP_BOUND_S} s"
            for pid in spawned_workers(server.pid):
                seen.setdefault(pid, process_start_ticks(pid))
            time.sleep(0.1)
        healthy_after = time.monotonic() - began
        question = demo_dataset.split("train")[0].question_id
        expected = (
            evaluate(
                SQLEnvironment(dataset=demo_dataset, split="train"),
                OraclePolicy(demo_dataset),
                question_ids=[question],
            )
            .episodes[0]
            .total_reward
        )

        async def episodes() -> list[float]:
            async def one() -> float:
                async with SQLEnvClient(base_url=url) as client:
                    return await oracle_episode_total(client, demo_dataset, question)

            return await asyncio.gather(*(one() for _ in range(8)))  # several sessions: both workers

        totals = asyncio.run(episodes())
        deadline = time.monotonic() + 10  # and a while longer under load: still the same workers
        while time.monotonic() < deadline:
            for pid in spawned_workers(server.pid):
                seen.setdefault(pid, process_start_ticks(pid))
            time.sleep(0.2)
        alive = spawned_workers(server.pid)
        print(
            f"\n/health after {healthy_after:.1f} s beside {busy_machine} CPU-bound processes; workers {sorted(seen)}"
        )
        assert totals == [round(expected, 6)] * 8
        assert len(seen) == 2, f"uvicorn started {len(seen)} workers for 2: some were replaced"
        assert alive == set(seen)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def _loads_gradio(code: str) -> bool:
    probe = f"{code}\nimport sys\nprint('gradio' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    return done.stdout.strip().splitlines()[-1] == "True"


def test_the_command_and_the_workers_import_openenv_without_gradio_and_libraries_keep_it_whole() -> None:
    assert not _loads_gradio("import sqlenv.cli")
    assert not _loads_gradio("from sqlenv.server.worker import app_from_environment; app_from_environment()")
    assert not _loads_gradio(
        "import sqlenv.server.worker\nimport openenv.core.env_server as s\nassert s.create_web_interface_app is None"
    )
    assert _loads_gradio("import sqlenv.server.app")  # a library user's OpenEnv is untouched
