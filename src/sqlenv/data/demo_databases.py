"""The embedded demo databases: built deterministically from the SQL text shipped in
`sqlenv/data/demo/*.sql` into the cache (or a temp folder), once per version of that text."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
from importlib import resources
from pathlib import Path

from sqlenv.data.cache import writable_cache_dir

_DEMO_PACKAGE = "sqlenv.data"


def demo_sql_texts() -> dict[str, str]:
    """db_id -> SQL script of every embedded demo database."""
    folder = resources.files(_DEMO_PACKAGE) / "demo"
    return {
        entry.name.removesuffix(".sql"): entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".sql")
    }


def demo_questions_path() -> Path:
    return Path(str(resources.files(_DEMO_PACKAGE) / "demo" / "questions.json"))


def build_demo_databases() -> dict[str, Path]:
    """Build (or reuse) each demo database file; return db_id -> path."""
    texts = demo_sql_texts()
    digest = hashlib.sha256("".join(f"{k}\n{v}" for k, v in sorted(texts.items())).encode()).hexdigest()[:16]
    root = writable_cache_dir()
    base = (root if root is not None else Path(tempfile.gettempdir()) / "sqlenv-demo") / "demo-db" / digest
    paths: dict[str, Path] = {}
    for db_id, script in texts.items():
        target = base / db_id / f"{db_id}.sqlite"
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            os.close(fd)
            try:
                conn = sqlite3.connect(tmp)
                try:
                    conn.executescript(script)
                    conn.commit()
                finally:
                    conn.close()
                os.replace(tmp, target)  # atomic: concurrent builders agree on the result
            finally:
                Path(tmp).unlink(missing_ok=True)
        paths[db_id] = target
    return paths
