"""Shared fixtures: where Spider is, the demo dataset, and a session-wide guard that no database
file is modified by anything the tests do (sha256 of every file before and after the session)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Local models generate with transformers unless a test asks for vLLM by name: starting vLLM takes
# a minute or more, which only the tests of the vLLM engine should pay. (Subprocesses inherit it.)
os.environ.setdefault("SQLENV_ENGINE", "transformers")
# vLLM engines skip compiling their model graph: on a 2-core CPU that takes 80-120 s per engine
# against 12 s eager, and the suite starts more than ten. One test (test_vllm_engine.py's
# token-for-token comparison) runs the compiled default, as users get it.
os.environ.setdefault("SQLENV_VLLM_EAGER", "1")


def require_vllm() -> None:
    """Skip where vLLM is not installed, saying why; a failure where SQLENV_REQUIRE_VLLM is set (CI)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        reason = "vLLM not installed: bash scripts/install_vllm.sh"
        if os.environ.get("SQLENV_REQUIRE_VLLM"):
            pytest.fail(reason + " — SQLENV_REQUIRE_VLLM is set, so vLLM tests may not skip")
        pytest.skip(reason)


# What TRL's colocated vLLM sets in os.environ (trl.generation.vllm_generation) for the process
# group vLLM then starts in this process.
DISTRIBUTED_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@contextlib.contextmanager
def colocated_vllm_scope() -> Iterator[None]:
    """Around a test that builds a trainer with TRL's colocated vLLM in the test process: on exit,
    vLLM's process group is destroyed and the distributed variables are put back. Left behind, they
    leak into later tests: a training subprocess inherits them and fails to bind the port this
    process holds (EADDRINUSE), and accelerate wraps an in-process trainer's model in DDP."""
    before = {name: os.environ.get(name) for name in DISTRIBUTED_VARIABLES}
    try:
        yield
    finally:
        import gc

        gc.collect()  # the engine's objects first: they hold the group
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def spider_dir_or_none() -> Path | None:
    candidate = Path(os.environ.get("SQLENV_SPIDER_DIR") or REPO_ROOT.parent / "shared" / "spider")
    return candidate if (candidate / "database").is_dir() else None


@pytest.fixture(scope="session")
def spider_dir() -> Path:
    found = spider_dir_or_none()
    if found is None:
        reason = (
            "Spider not found: set SQLENV_SPIDER_DIR or place it at ../shared/spider "
            "(sqlenv data download spider --dest DIR)"
        )
        if os.environ.get("SQLENV_REQUIRE_SPIDER"):
            pytest.fail(reason + " — SQLENV_REQUIRE_SPIDER is set, so Spider tests may not skip")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="session")
def demo_dataset():
    from sqlenv.data import load_dataset

    return load_dataset("demo")


@pytest.fixture(scope="session")
def spider10(spider_dir: Path):
    from sqlenv.data import load_dataset

    return load_dataset("spider10", spider_dir)


def _database_files() -> list[Path]:
    from sqlenv.data.demo_databases import build_demo_databases

    files = list(build_demo_databases().values())
    spider = spider_dir_or_none()
    if spider is not None:
        files += sorted((spider / "database").glob("*/*.sqlite"))
    return files


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session", autouse=True)
def databases_never_change() -> Iterator[None]:
    """Every database file's sha256 is identical before and after the whole test session."""
    before = {p: _digest(p) for p in _database_files()}
    yield
    changed = [str(p) for p, digest in before.items() if not p.exists() or _digest(p) != digest]
    assert not changed, f"database files modified during the tests: {changed}"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningServer:
    """A real `sqlenv serve` process on 127.0.0.1 (stopped when the fixture ends)."""

    def __init__(self, *args: str) -> None:
        import subprocess
        import sys
        import time
        import urllib.request

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sqlenv.cli", "serve", "--port", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.process.stdout.read()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("server did not become healthy within 90 s")

    def get_json(self, path: str) -> dict:
        import urllib.request

        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except Exception:
            self.process.kill()
            self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def demo_server() -> Iterator[RunningServer]:
    server = RunningServer("--dataset", "demo", "--split", "train", "--max-sessions", "128")
    yield server
    server.stop()


async def oracle_episode_total(client, dataset, question_id: str) -> float:
    """Play one oracle episode through a connected SQLEnvClient; return its total reward."""
    from sqlenv.agents.reference import OraclePolicy

    policy = OraclePolicy(dataset)
    result = await client.reset(question_id=question_id)
    policy.reset(result.observation, 0)
    total = 0.0
    while not result.done:
        result = await client.step(policy.act(result.observation))
        total += result.reward or 0.0
    return round(total, 6)


def least_of_attempts(measure: Callable[[], float], bound: float, attempts: int = 3) -> float:
    """The least of up to `attempts` measurements, stopping at the first within `bound`.

    For the few tests whose property is a wall time (a runaway query is stopped within its time
    limit + 10 %): on a shared machine another process can take the cores for a moment, and one
    slow measurement then says nothing about the sandbox. A sandbox that stops late does so every
    time, and fails all attempts.

    Args:
        measure: runs the timed operation once (with its own assertions) and returns seconds.
        bound: the time the test requires.
        attempts: how many measurements at most.

    Returns:
        The first measurement within `bound`, else the least of all.
    """
    least = float("inf")
    for _ in range(attempts):
        least = min(least, measure())
        if least <= bound:
            break
    return least


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, ...]; None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def process_dead(pid: int) -> bool:
    """True once `pid` has exited (gone, or a zombie its parent has not reaped yet)."""
    stat = _proc_stat(pid)
    return stat is None or stat[0] in ("Z", "X")


def process_start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot): with the pid, it names one process even
    after the pid is reused. None if it has exited."""
    stat = _proc_stat(pid)
    return None if stat is None or stat[0] in ("Z", "X") else int(stat[19])


def worker_pids(server: RunningServer) -> set[int]:
    """Live uvicorn worker processes of a `sqlenv serve --workers N` server (Linux /proc)."""
    return spawned_workers(server.process.pid)


def spawned_workers(parent: int) -> set[int]:
    """Live uvicorn worker processes of the serving process `parent` (Linux /proc).

    uvicorn starts workers with multiprocessing's spawn, whose children of the serving process
    also include multiprocessing's resource tracker: workers are the ones running `spawn_main`.
    """
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _proc_stat(int(entry.name))
        if stat is None or stat[0] in ("Z", "X") or int(stat[1]) != parent:
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in command:
            found.add(int(entry.name))
    return found


def kill_processes(identities: dict[int, int | None]) -> None:
    """SIGKILL each process of {pid: start ticks} that still runs as that same process (workers
    outlive a supervisor that had to be killed)."""
    import signal

    for pid, ticks in identities.items():
        if ticks is not None and process_start_ticks(pid) == ticks:
            os.kill(pid, signal.SIGKILL)


def patterns_table(*args: str) -> dict[str, list[str]]:
    """`sqlenv patterns ARGS` run through the CLI, its table read back as row name -> cells.

    Args:
        args: the command's arguments (report paths and options).

    Returns:
        Each table row's first cell mapped to its other cells, stripped.
    """
    from typer.testing import CliRunner

    from sqlenv.cli import app

    result = CliRunner().invoke(app, ["patterns", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
        for line in result.output.splitlines()
        if line.count("│") >= 3
    }
