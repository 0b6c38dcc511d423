"""`sqlenv space write`: the folder of a Hugging Face Docker Space (sqlenv.server.space).

The demo folder holds exactly the Space's files (the repository's Dockerfile, pyproject.toml,
LICENSE, discovery.json and openenv.yaml byte for byte, the package without bytecode), its README
front matter is what a Docker Space reads (parsed as YAML and by huggingface_hub's SpaceCard),
`openenv validate --level static` passes on it, and its image, built by Docker from that folder
alone, serves /health and /web, passes `openenv validate --url` and runs the README's Python
example. The Spider variant fetches Spider in its build and serves it, declares Spider's task
counts, and holds no Spider file. A non-empty folder, a missing Spider and a package outside a
checkout each end the command with a clear error.

The image test builds with tests/test_docker_image.py's helpers (the same base, BuildKit, the
pip_cert secret, and its skip, or failure under SQLENV_REQUIRE_DOCKER, where no engine answers).
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT
from sqlenv.server.space import (
    APP_PORT,
    SOURCE_IGNORED,
    SPACE_ENTRIES,
    SPIDER_IN_IMAGE,
    repository_root,
)
from test_docker_image import BuiltImage, Container, build_image, docker

OPENENV = str(Path(sys.executable).with_name("openenv"))
HUB_COLORS = {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}
README_ADDRESS = "https://OWNER-SPACE.hf.space"


def sqlenv_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # A wide terminal: rich wraps an error message at 80 columns otherwise.
    env = {**(os.environ if env is None else env), "COLUMNS": "300"}
    return subprocess.run(
        [sys.executable, "-m", "sqlenv.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


def front_matter(readme: str) -> dict:
    match = re.match(r"---\n(.*?\n)---\n", readme, re.S)
    assert match, "README.md starts with a YAML front matter block"
    return yaml.safe_load(match[1])


def validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([OPENENV, "validate", *args], capture_output=True, text=True, timeout=120)


def source_files(root: Path) -> set[Path]:
    """Every file under root/src but bytecode and build metadata, relative to root."""
    ignored = re.compile("|".join(p.replace(".", r"\.").replace("*", ".*") for p in SOURCE_IGNORED))
    return {
        p.relative_to(root)
        for p in (root / "src").rglob("*")
        if p.is_file() and not any(ignored.fullmatch(part) for part in p.relative_to(root).parts)
    }


@pytest.fixture(scope="module")
def demo_space(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("space") / "demo"
    result = sqlenv_cli("space", "write", str(folder))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "train 67, eval 28" in result.stdout
    return folder


def test_the_demo_folder_holds_exactly_the_space_files(demo_space: Path, demo_dataset) -> None:
    assert sorted(p.name for p in demo_space.iterdir()) == sorted(SPACE_ENTRIES)
    for name in ("Dockerfile", "pyproject.toml", "LICENSE", "discovery.json", "openenv.yaml"):
        assert (demo_space / name).read_bytes() == (REPO_ROOT / name).read_bytes(), name
    manifest = yaml.safe_load((demo_space / "openenv.yaml").read_text())
    declared = manifest["validation"]["capabilities"]["declared_task_count"]
    assert declared == {name: len(demo_dataset.split(name)) for name in demo_dataset.split_names}
    files = source_files(REPO_ROOT)
    assert {p.relative_to(demo_space) for p in (demo_space / "src").rglob("*") if p.is_file()} == files
    assert all(filecmp.cmp(REPO_ROOT / p, demo_space / p, shallow=False) for p in files)
    assert "src/sqlenv/server/space.py" in {p.as_posix() for p in files}


def test_the_readme_front_matter_is_a_docker_space_on_the_app_port(demo_space: Path) -> None:
    from huggingface_hub import SpaceCard

    readme = (demo_space / "README.md").read_text(encoding="utf-8")
    meta = front_matter(readme)
    assert meta["sdk"] == "docker" and meta["app_port"] == APP_PORT == 8000
    assert meta["title"] == "sqlenv" and meta["emoji"] and meta["license"] == "apache-2.0"
    assert {meta["colorFrom"], meta["colorTo"]} <= HUB_COLORS
    assert "openenv" in meta["tags"] and meta["base_path"] == "/web"
    assert 0 < len(meta["short_description"]) <= 60
    # The port the image serves on is the one the front matter names.
    dockerfile = (demo_space / "Dockerfile").read_text()
    assert f"EXPOSE {APP_PORT}\n" in dockerfile and f'"--port", "{APP_PORT}"' in dockerfile
    card = SpaceCard(readme)
    assert card.data.sdk == "docker" and card.data.app_port == APP_PORT and card.data.license == "apache-2.0"
    assert "questions per split: train 67, eval 28" in readme and "openenv validate --url" in readme


def test_openenv_validate_static_passes_on_the_folder(demo_space: Path) -> None:
    result = validate(str(demo_space), "--level", "static", "--skip-build")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout


def test_a_non_empty_folder_is_refused_without_force_and_force_keeps_other_entries(tmp_path: Path) -> None:
    folder = tmp_path / "space"
    (folder / "src" / "stale").mkdir(parents=True)
    (folder / "src" / "stale" / "old.py").write_text("stale = True\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    refused = sqlenv_cli("space", "write", str(folder))
    assert refused.returncode == 2
    assert f"{folder} is not empty" in refused.stdout and "--force" in refused.stdout
    assert sorted(p.name for p in folder.iterdir()) == [".git", "src"]  # untouched
    forced = sqlenv_cli("space", "write", str(folder), "--force", "--title", "SQL explorer")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "kept as they were: .git" in forced.stdout
    assert sorted(p.name for p in folder.iterdir()) == sorted([".git", *SPACE_ENTRIES])
    assert not (folder / "src" / "stale").exists()  # the package is replaced, not merged
    assert (folder / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert front_matter((folder / "README.md").read_text(encoding="utf-8"))["title"] == "SQL explorer"


def test_a_spider_space_without_spider_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SQLENV_SPIDER_DIR"}
    result = sqlenv_cli("space", "write", str(tmp_path / "space"), "--dataset", "spider10", env=env)
    assert result.returncode == 2
    assert "Spider is not configured: pass --spider-dir DIR or set SQLENV_SPIDER_DIR" in result.stdout
    assert "never copied into the folder" in result.stdout
    assert not (tmp_path / "space").exists()


def test_outside_a_source_checkout_the_error_says_to_use_one(tmp_path: Path) -> None:
    """The package alone on the path, as a wheel installs it: no Dockerfile or manifest beside it."""
    shutil.copytree(REPO_ROOT / "src" / "sqlenv", tmp_path / "site" / "sqlenv")
    code = "from sqlenv.server.space import repository_root\nrepository_root()"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        cwd=tmp_path,
    )
    assert result.returncode != 0 and "SpaceError: a Space is written from a source checkout" in result.stderr
    assert "no Dockerfile, openenv.yaml, pyproject.toml, LICENSE, discovery.json" in result.stderr
    assert repository_root() == REPO_ROOT  # run from the checkout, it is found


def test_the_spider10_space_fetches_spider_in_its_build_and_declares_its_task_counts(
    tmp_path: Path, spider_dir: Path, spider10
) -> None:
    folder = tmp_path / "space"
    result = sqlenv_cli(
        "space", "write", str(folder), "--dataset", "spider10", "--spider-dir", str(spider_dir)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted(SPACE_ENTRIES)
    dockerfile = (folder / "Dockerfile").read_text()
    original = (REPO_ROOT / "Dockerfile").read_text()
    serve = f'CMD ["--dataset", "spider10", "--spider-dir", "{SPIDER_IN_IMAGE}"]'
    assert dockerfile.splitlines()[-1] == serve and 'CMD ["--dataset", "demo"]' not in dockerfile
    download = f"&& sqlenv data download spider --dest {SPIDER_IN_IMAGE}"
    assert download in dockerfile
    # Fetched as root after the install, before the server's user takes over.
    assert dockerfile.index("pip install") < dockerfile.index(download) < dockerfile.index("USER sqlenv")
    # Otherwise the repository's Dockerfile: only the download step is added, only CMD changed.
    added = dockerfile[dockerfile.index("# Spider 1.0") : dockerfile.index("USER sqlenv")]
    assert dockerfile.replace(added, "").replace(serve, 'CMD ["--dataset", "demo"]') == original
    manifest = yaml.safe_load((folder / "openenv.yaml").read_text())
    declared = manifest["validation"]["capabilities"]["declared_task_count"]
    assert declared == {"train": len(spider10.split("train")), "eval": len(spider10.split("eval"))}
    assert declared == {"train": 473, "eval": 203}
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA 4.0" in readme and front_matter(readme)["sdk"] == "docker"
    # Spider itself never leaves this machine through the folder.
    spider_names = {p.name for p in spider_dir.iterdir() if p.suffix in {".json", ".sql"}}
    spider_names |= {"database", *spider10.databases}
    assert not [p for p in folder.rglob("*") if p.suffix == ".sqlite" or p.name in spider_names]
    static = validate(str(folder), "--level", "static", "--skip-build")
    assert static.returncode == 0 and "Verdict: PASS" in static.stdout, static.stdout + static.stderr


@pytest.fixture(scope="module")
def space_image(demo_space: Path) -> Iterator[BuiltImage]:
    built = build_image(demo_space)  # the folder alone is the build context
    yield built
    docker("image", "rm", "--force", built.tag, check=False)


@pytest.fixture(scope="module")
def space_container(space_image: BuiltImage) -> Iterator[Container]:
    container = Container(space_image)  # run as the Space runs it: the image's own command
    yield container
    container.remove()


@pytest.mark.slow
@pytest.mark.timeout(1_200)
def test_the_space_image_serves_health_and_the_web_page_and_passes_openenv_validate(
    space_container: Container,
) -> None:
    status, body = space_container.get("/health")
    assert status == 200 and json.loads(body) == {"status": "healthy"}
    status, page = space_container.get("/web")
    assert status == 200 and "<html" in page.lower()
    result = validate("--url", space_container.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout and "FAIL" not in result.stdout


@pytest.mark.slow
@pytest.mark.timeout(1_200)
def test_the_readme_python_example_plays_against_the_space_image(
    demo_space: Path, space_container: Container
) -> None:
    readme = (demo_space / "README.md").read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", readme, re.S)
    assert example and README_ADDRESS in example[1]
    code = example[1].replace(README_ADDRESS, space_container.url)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Tables: " in result.stdout and "(3 rows)" not in result.stderr
