"""Shared fixtures: where Spider is, the demo dataset, and a session-wide guard that no database
file is modified by anything the tests do (sha256 of every file before and after the session)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


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
