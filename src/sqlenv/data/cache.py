"""The on-disk cache of built datasets and demo databases, outside the repository.

Location: $SQLENV_CACHE_DIR, else $XDG_CACHE_HOME/sqlenv, else ~/.cache/sqlenv. Entries are
keyed by a hash of their inputs (file sizes and modification times, code version), so a changed
input builds a new entry. Writes are atomic (temp file + rename). When the cache cannot be
written, callers get `None` from `writable_cache_dir()` and work in memory, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from sqlenv.settings import cache_root_from_environment

# Bump when the record format or how records are derived changes: old entries are then ignored.
CACHE_FORMAT_VERSION = "3"


def cache_dir() -> Path:
    """Where sqlenv keeps built datasets and converted models (`sqlenv.settings`).

    Returns:
        $SQLENV_CACHE_DIR, else `$XDG_CACHE_HOME/sqlenv`, else `~/.cache/sqlenv`; not created here.
    """
    return cache_root_from_environment()


def writable_cache_dir() -> Path | None:
    """The cache directory if it can be created and written, else None (with a warning)."""
    root = cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except OSError as exc:
        warnings.warn(
            f"sqlenv cache directory {root} is not writable ({exc}); working in memory. "
            "Set SQLENV_CACHE_DIR to a writable directory to keep built datasets.",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return root


def input_fingerprint(*parts: object, files: list[Path] = ()) -> str:  # type: ignore[assignment]
    """A short hash of arbitrary parts plus each file's path, size and modification time."""
    h = hashlib.sha256(CACHE_FORMAT_VERSION.encode())
    for part in parts:
        h.update(repr(part).encode())
    for f in sorted(files):
        st = f.stat()
        h.update(f"{f.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def read_json(path: Path) -> Any | None:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
