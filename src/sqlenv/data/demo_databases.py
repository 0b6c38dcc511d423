"""The embedded demo databases: built deterministically from the SQL text shipped in
`sqlenv/data/demo/*.sql` into the cache (or a temp folder), once per version of that text. Each
file's sha256 is recorded beside it, so a damaged file is rebuilt instead of served."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import warnings
from importlib import resources
from pathlib import Path

from sqlenv.data.cache import writable_cache_dir, write_bytes_atomic

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
    """Build (or reuse) each demo database file.

    The files live in the cache, under a digest of the SQL text. A file is reused only when its
    sha256 matches the digest recorded beside it when it was built; a file that does not (corrupt,
    truncated) is rebuilt with a warning. When the cache cannot take the files (read-only, disk
    full), they are built in the temporary folder shared by the machine's users, else in one of
    this process's own, with a warning for each place that failed.

    Returns:
        db_id -> path of its SQLite file.
    """
    texts = demo_sql_texts()
    digest = hashlib.sha256("".join(f"{k}\n{v}" for k, v in sorted(texts.items())).encode()).hexdigest()[:16]
    root = writable_cache_dir()
    places = [root / "demo-db"] if root is not None else []
    places.append(Path(tempfile.gettempdir()) / "sqlenv-demo" / "demo-db")  # shared by the machine's users
    for place in places:
        try:
            return _build_in(place / digest, texts)
        except (OSError, sqlite3.Error) as exc:
            warnings.warn(
                f"sqlenv could not write the demo databases under {place} ({exc}); building them elsewhere",
                RuntimeWarning,
                stacklevel=2,
            )
    # Last resort, e.g. another user's files in the shared folder: a private folder of this process.
    return _build_in(Path(tempfile.mkdtemp(prefix="sqlenv-demo-")) / digest, texts)


def _build_in(base: Path, texts: dict[str, str]) -> dict[str, Path]:
    """Each database under `base/<db_id>/<db_id>.sqlite`, built unless a verified copy is there."""
    paths: dict[str, Path] = {}
    for db_id, script in texts.items():
        target = base / db_id / f"{db_id}.sqlite"
        recorded = target.with_name(target.name + ".sha256")
        if target.is_file():
            expected = (
                recorded.read_bytes().decode("ascii", "replace").strip() if recorded.is_file() else None
            )
            actual = hashlib.sha256(target.read_bytes()).hexdigest()
            if expected is not None and actual != expected:
                warnings.warn(
                    f"sqlenv demo database {target} does not match the sha256 recorded when it was "
                    "built (corrupt or truncated); rebuilding it",
                    RuntimeWarning,
                    stacklevel=3,
                )
            if actual != expected:  # no record: a build that did not finish, or an older layout
                _build_database(target, recorded, script)
        else:
            _build_database(target, recorded, script)
        paths[db_id] = target
    return paths


def _build_database(target: Path, recorded: Path, script: str) -> None:
    """Run the script into a temp file, record its sha256, then rename it to `target`.

    The record is written first: the build is deterministic, so a record already in place names
    the same bytes, and a reader that finds the database always finds its record.
    """
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
        write_bytes_atomic(recorded, hashlib.sha256(Path(tmp).read_bytes()).hexdigest().encode("ascii"))
        os.replace(tmp, target)  # atomic: concurrent builders agree on the result
    finally:
        Path(tmp).unlink(missing_ok=True)
