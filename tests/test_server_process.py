"""`running_server` and `stop_process_group` (`sqlenv.training.vllm_server`), on small real servers:
a Python HTTP server that answers `/health` (and starts a child, as vLLM starts an engine and a
worker), one that exits at once, and one that never answers."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from conftest import free_port
from sqlenv.training.vllm_server import ServerStartError, running_server, stop_process_group

# A server with a child process (`sleep`), as vLLM has; /health answers 200 once it listens.
SERVER = """
import http.server, subprocess, sys
child = subprocess.Popen(["sleep", "600"])
print("child", child.pid, flush=True)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"ok")
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def _child_pid(log: Path) -> int:
    for line in log.read_text().splitlines():
        if line.startswith("child "):
            return int(line.split()[1])
    raise AssertionError(f"no child in {log.read_text()!r}")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_serves_inside_the_block_and_stops_the_whole_group_after(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    with running_server(
        [sys.executable, "-c", SERVER, str(port)], {}, url=url, log=log, ready_s=60
    ) as server:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
            assert answer.status == 200
        child = _child_pid(log)
        assert _alive(child)
    assert server.poll() is not None, "the server is stopped on leaving the block"
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, "the server's child outlived it: the group was not stopped"
        time.sleep(0.1)


def test_stops_the_server_when_the_block_raises(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (
        pytest.raises(KeyError),
        running_server(
            [sys.executable, "-c", SERVER, str(port)], {}, url=url, log=tmp_path / "server.log", ready_s=60
        ) as server,
    ):
        raise KeyError("the block failed")
    assert server.poll() is not None


def test_a_server_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('bad option --x'); sys.exit(3)"]
    with (
        pytest.raises(ServerStartError, match=r"exited with 3:\n.*bad option --x"),
        running_server(
            argv, {}, url=f"http://127.0.0.1:{free_port()}", log=tmp_path / "server.log", ready_s=60
        ),
    ):
        pytest.fail("the block must not run")


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import time; print('loading', flush=True); time.sleep(600)"]
    started = time.monotonic()
    with (
        pytest.raises(ServerStartError, match=r"did not answer .*/health within 3 s:\n.*loading"),
        running_server(
            argv, {}, url=f"http://127.0.0.1:{free_port()}", log=tmp_path / "server.log", ready_s=3
        ),
    ):
        pytest.fail("the block must not run")
    assert time.monotonic() - started < 60


def test_stop_process_group_kills_what_ignores_sigterm() -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
    process = subprocess.Popen(
        [sys.executable, "-c", stubborn], stdout=subprocess.PIPE, start_new_session=True
    )
    assert process.stdout is not None and process.stdout.readline() == b"up\n"
    stop_process_group(process, grace_s=1)
    assert process.returncode == -9
    stop_process_group(process)  # already stopped: nothing to do, no error
