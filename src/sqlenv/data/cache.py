"""The on-disk cache of built datasets and demo databases, outside the repository.

Location: $SQLENV_CACHE_DIR, else $XDG_CACHE_HOME/sqlenv, else ~/.cache/sqlenv. Entries are
keyed by a hash of their inputs (file sizes and modification times, code version), so a changed
input builds a new entry. When the cache cannot be written, callers get `None` from
`writable_cache_dir()` and work in memory, with a warning.

This module owns the entry format and its integrity:
- An entry (`write_entry`/`read_entry`) is a one-line JSON header `{"format", "size", "sha256"}`
  followed by the JSON payload. A reader checks the format version, the size and the checksum
  before it parses the payload, so a corrupt, truncated or other-version file is reported
  (`CacheEntryError`, saying what is wrong) instead of being read as data.
- Writes are atomic (temp file in the same folder + rename): a reader sees the old file, the new
  one or none, never a half-written one. A failed write removes its temp file.
- `entry_lock` serialises the builders of one entry across processes (`fcntl.flock` on a lock file
  next to the entry), so an entry that many processes want at once is built and written once.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; concurrent builders then each build (still atomic)
    fcntl = None  # type: ignore[assignment]

from sqlenv.settings import cache_root_from_environment

# Bump when the record format, the entry format or how records are derived changes: old entries
# are then ignored (the version is part of every entry's key and of its header).
CACHE_FORMAT_VERSION = "4"


class CacheEntryError(Exception):
    """A cache entry exists but cannot be trusted; the message says what is wrong with it."""


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


def read_entry(path: Path) -> Any | None:
    """The payload that `write_entry` stored at `path`, checked against its header.

    Args:
        path: the entry file.

    Returns:
        The payload, or None when there is no file.

    Raises:
        CacheEntryError: the file cannot be read, is not a cache entry, is from another format
            version, is truncated or longer than its header says, or fails its checksum.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CacheEntryError(f"cannot be read ({exc})") from exc
    header_line, _, body = data.partition(b"\n")
    try:
        header = json.loads(header_line)
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise CacheEntryError("is not a sqlenv cache entry, or its header is damaged (no JSON header line)")
    if "format" not in header:
        raise CacheEntryError(
            "has no format header: it was written by another sqlenv version "
            f"(this one reads format {CACHE_FORMAT_VERSION})"
        )
    if header["format"] != CACHE_FORMAT_VERSION:
        raise CacheEntryError(
            f"is cache format {header['format']!r}, written by another sqlenv version "
            f"(this one reads format {CACHE_FORMAT_VERSION!r})"
        )
    size, digest = header.get("size"), header.get("sha256")
    if not isinstance(size, int) or not isinstance(digest, str):
        raise CacheEntryError("has a damaged header (no size or sha256)")
    if len(body) < size:
        raise CacheEntryError(f"is truncated ({len(body)} of {size} bytes)")
    if len(body) > size:
        raise CacheEntryError(f"is {len(body)} bytes long, its header says {size}")
    if hashlib.sha256(body).hexdigest() != digest:
        raise CacheEntryError("is corrupt (its contents do not match their sha256 checksum)")
    try:
        return json.loads(body)
    except ValueError as exc:  # only a writer bug gets here: the checksum matched
        raise CacheEntryError(f"is not valid JSON ({exc})") from exc


def write_entry(path: Path, payload: Any) -> None:
    """Store `payload` (JSON-serialisable) at `path` behind a header `read_entry` checks.

    Args:
        path: the entry file; its folder is created.
        payload: what `read_entry` will return.

    Raises:
        OSError: the file could not be written (disk full, read-only); nothing is left behind.
    """
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    header = {"format": CACHE_FORMAT_VERSION, "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    write_bytes_atomic(path, json.dumps(header).encode("ascii") + b"\n" + body)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temp file in the same folder and a rename.

    Args:
        path: the target; its folder is created.
        data: the whole contents.

    Raises:
        OSError: the write failed (disk full, read-only, ...); the temp file is removed and
            `path` is unchanged.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp_beside(path)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        # Without an fsync a power cut can leave an empty or torn file under the final name; the
        # reader's size and checksum test catches that and the entry is rebuilt.
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _create_temp_beside(path: Path) -> tuple[int, str]:
    """Create and open a new temp file `.<name>.<random>.tmp` in `path`'s folder.

    Opened with mode 0o666 as any new file is, so the process's umask decides the final file's
    mode (`tempfile.mkstemp` would make it owner-only, and the rename would keep that). O_EXCL
    with a random name keeps concurrent writers of one path apart.

    Args:
        path: the file the temp file will be renamed to.

    Returns:
        The open descriptor (write-only) and the temp file's path.
    """
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(tmp)
        except FileExistsError:
            continue  # another writer drew the same name: draw again


def _remove_leftover_temps(path: Path) -> None:
    """Delete temp files of `path` left by writers that died mid-write (caller holds the lock)."""
    prefix = f".{path.name}."
    try:
        for entry in os.scandir(path.parent):
            if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                Path(entry.path).unlink(missing_ok=True)
    except OSError:
        pass  # a leftover only costs disk space; the build goes on


@contextmanager
def entry_lock(path: Path) -> Iterator[bool]:
    """Hold the cross-process build lock of the entry `path` for the `with` block.

    The lock is `fcntl.flock` on `<path>.lock`, next to the entry. A second process blocks here
    until the first leaves its block; it should then read the entry again before building. The
    kernel drops a flock when its process dies, however it dies, so a builder killed mid-build
    leaves no stale lock behind. The lock file itself is never deleted: deleting it could let two
    processes lock two different files of the same name.

    Args:
        path: the cache entry (its folder is created).

    Yields:
        True while the lock is held; False when it could not be taken (no fcntl, the folder cannot
        be written, a file system without locks): the caller then builds unlocked, which costs at
        most a duplicate build, since writes stay atomic.
    """
    fd: int | None = None
    locked = False
    if fcntl is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            locked = True
        except OSError:
            pass
    try:
        if locked:
            # Any builder of this entry that is still alive would hold the lock, so a temp file of
            # this entry now is the leftover of one that died mid-write.
            _remove_leftover_temps(path)
        yield locked
    finally:
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
