"""The Docker image, built from the repository's `Dockerfile` and run by a real Docker engine.

The image is built once per session (`BASE_IMAGE`: `$SQLENV_DOCKER_BASE_IMAGE`, else the local
`sqlenv-base:bookworm` that `scripts/install_docker.sh` makes with debootstrap where it exists, else
the Dockerfile's own `python:3.11-slim`). Containers run as a user would run them in production:
`--read-only` root filesystem, tmpfs for the cache and /tmp, Spider mounted read-only, published
on a loopback port. From the host: /health, /metadata, /web, oracle episodes over the WebSocket
paying exactly the in-process rewards (demo, and spider10), the process's user, the read-only
filesystem, the databases unchanged, and `docker stop` ending the server itself (exit 0, not the
SIGKILL that follows the grace period).

Where no Docker engine answers, the tests skip saying why; where SQLENV_REQUIRE_DOCKER is set
(CI), they fail instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import free_port
from sqlenv import SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.evaluation import evaluate
from sqlenv.server.client import RemoteSQLEnvironment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1_200)]
REPO_ROOT = Path(__file__).resolve().parents[1]
LOCAL_BASE = "sqlenv-base:bookworm"
USER_ID = 10001  # the Dockerfile's `sqlenv` user
CACHE_TMPFS = f"/cache:uid={USER_ID},gid={USER_ID}"
SPIDER_IN_CONTAINER = "/data/spider"
STOP_GRACE_S = 20


def docker_client() -> str | None:
    """The docker CLI to drive the engine with: `$SQLENV_DOCKER`, else Debian's docker.io client
    (it builds with the engine's own BuildKit; a CLI without the buildx plugin cannot), else PATH's."""
    for candidate in (os.environ.get("SQLENV_DOCKER"), "/usr/bin/docker", shutil.which("docker")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _unavailable(reason: str) -> None:
    reason += " (bash scripts/install_docker.sh gets one ready on Debian)"
    if os.environ.get("SQLENV_REQUIRE_DOCKER"):
        pytest.fail(reason + " — SQLENV_REQUIRE_DOCKER is set, so the Docker tests may not skip")
    pytest.skip(reason)


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    client = docker_client()
    assert client is not None
    result = subprocess.run([client, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def certificate_bundle() -> str | None:
    """The host's CA bundle, for pip inside the build where a TLS-intercepting proxy is in the way."""
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    base: str
    build_seconds: float
    size_bytes: int


def build_image(context: Path) -> BuiltImage:
    """Build the Dockerfile in `context` with BuildKit (on the local base where there is one; the
    host's CA bundle as the pip_cert secret); the test that needs Docker skips or fails as above
    where no engine answers. The caller removes the image."""
    if docker_client() is None:
        _unavailable("no docker client installed")
    if docker("info", check=False, timeout=30).returncode != 0:
        _unavailable("no Docker engine answers `docker info`")
    base = os.environ.get("SQLENV_DOCKER_BASE_IMAGE") or (
        LOCAL_BASE if docker("image", "inspect", LOCAL_BASE, check=False).returncode == 0 else ""
    )
    tag = f"sqlenv-test:{uuid.uuid4().hex[:10]}"
    command = ["build", "--network", "host", "--tag", tag]
    if base:
        command += ["--build-arg", f"BASE_IMAGE={base}"]
    bundle = certificate_bundle()
    if bundle:
        command += ["--secret", f"id=pip_cert,src={bundle}"]
    began = time.monotonic()
    client = docker_client()
    assert client is not None
    built = subprocess.run(
        [client, *command, str(context)],
        capture_output=True,
        text=True,
        timeout=1_200,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )
    seconds = time.monotonic() - began
    assert built.returncode == 0, f"docker build failed:\n{built.stdout[-4000:]}\n{built.stderr[-4000:]}"
    size = int(docker("image", "inspect", tag, "--format", "{{.Size}}").stdout.strip())
    print(
        f"\nimage {tag} of {context} from {base or 'python:3.11-slim'}: built in {seconds:.0f} s, {size / 1e6:.0f} MB"
    )
    return BuiltImage(tag, base or "python:3.11-slim", seconds, size)


@pytest.fixture(scope="session")
def image() -> Iterator[BuiltImage]:
    built = build_image(REPO_ROOT)
    yield built
    docker("image", "rm", "--force", built.tag, check=False)


class Container:
    """One running container of the image, published on a loopback port; removed at `remove()`."""

    def __init__(self, image: BuiltImage, *server_args: str, mounts: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        run = ["run", "--detach", "--read-only", "--tmpfs", CACHE_TMPFS, "--tmpfs", "/tmp",
               "--publish", f"127.0.0.1:{self.port}:8000"]  # fmt: skip
        for mount in mounts:
            run += ["--volume", mount]
        self.id = docker(*run, image.tag, *server_args).stdout.strip()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.state()["Status"] != "running":
                raise AssertionError(f"container exited early:\n{self.logs()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"container not healthy within 180 s:\n{self.logs()}")

    def state(self) -> dict:
        return json.loads(docker("inspect", "--format", "{{json .State}}", self.id).stdout)

    def logs(self) -> str:
        result = docker("logs", self.id, check=False)
        return result.stdout + result.stderr

    def get(self, path: str) -> tuple[int, str]:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return response.status, response.read().decode()

    def remove(self) -> None:
        docker("rm", "--force", self.id, check=False)


@pytest.fixture(scope="module")
def demo_container(image: BuiltImage) -> Iterator[Container]:
    container = Container(image)  # the image's default command: --dataset demo
    yield container
    container.remove()


def test_the_image_serves_health_metadata_and_the_web_page(demo_container: Container) -> None:
    assert json.loads(demo_container.get("/health")[1]) == {"status": "healthy"}
    assert json.loads(demo_container.get("/metadata")[1])["name"] == "sqlenv"
    status, page = demo_container.get("/web")
    assert status == 200 and "<html" in page.lower()
    questions = json.loads(demo_container.get("/web/questions")[1])
    assert questions, "the web page lists the served questions"


def test_oracle_episodes_in_the_container_pay_the_in_process_rewards(
    demo_container: Container, demo_dataset
) -> None:
    local = evaluate(SQLEnvironment(dataset=demo_dataset, split="train"), OraclePolicy(demo_dataset))
    with RemoteSQLEnvironment(demo_container.url, demo_dataset, "train") as remote_env:
        remote = evaluate(remote_env, OraclePolicy(demo_dataset))
    assert [e.__dict__ for e in remote.episodes] == [e.__dict__ for e in local.episodes]
    assert remote.success_rate == 1.0


def test_the_server_runs_unprivileged_on_a_read_only_root(demo_container: Container) -> None:
    config = json.loads(docker("inspect", "--format", "{{json .HostConfig}}", demo_container.id).stdout)
    assert config["ReadonlyRootfs"] is True
    status = docker("exec", demo_container.id, "cat", "/proc/1/status").stdout
    uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    assert uid_line.split()[1:] == [str(USER_ID)] * 4  # real, effective, saved, filesystem
    write = docker("exec", demo_container.id, "sh", "-c", "echo x > /opt/sqlenv/probe", check=False)
    assert write.returncode != 0 and "Read-only file system" in write.stderr
    # What the server writes goes to its tmpfs cache, owned by its user.
    listing = docker("exec", demo_container.id, "sh", "-c", "stat -c %u /cache && ls /cache").stdout.split()
    assert listing[0] == str(USER_ID) and len(listing) > 1


def _sha256s(files: list[Path]) -> dict[Path, str]:
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


def test_spider10_from_a_read_only_mount_plays_as_in_process_and_leaves_the_databases_unchanged(
    image: BuiltImage, spider_dir: Path, spider10
) -> None:
    files = sorted((spider_dir / "database" / db_id / f"{db_id}.sqlite") for db_id in spider10.databases)
    before = _sha256s(files)
    container = Container(
        image,
        "--dataset", "spider10", "--spider-dir", SPIDER_IN_CONTAINER,
        mounts=(f"{spider_dir}:{SPIDER_IN_CONTAINER}:ro",),
    )  # fmt: skip
    try:
        local = evaluate(
            SQLEnvironment(dataset=spider10, split="train"), OraclePolicy(spider10), n_episodes=12, seed=3
        )
        with RemoteSQLEnvironment(container.url, spider10, "train") as remote_env:
            remote = evaluate(remote_env, OraclePolicy(spider10), n_episodes=12, seed=3)
        assert [e.__dict__ for e in remote.episodes] == [e.__dict__ for e in local.episodes]
        assert {e.question_id for e in remote.episodes} <= {r.question_id for r in spider10.split("train")}
    finally:
        container.remove()
    assert _sha256s(files) == before


def test_docker_stop_ends_the_server_within_its_grace_period(image: BuiltImage) -> None:
    container = Container(image)
    try:
        stopped = docker("stop", "--time", str(STOP_GRACE_S), container.id, timeout=STOP_GRACE_S + 60)
        assert stopped.returncode == 0
        state = container.state()
        # 0: the server handled SIGTERM and exited; 137 would be the SIGKILL after the grace period.
        assert state["Status"] == "exited" and state["ExitCode"] == 0, container.logs()
        assert state["OOMKilled"] is False
    finally:
        container.remove()
