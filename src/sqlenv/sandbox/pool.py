"""Sandboxes shared by every environment of a process, leased one caller at a time."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

from sqlenv.config import SandboxLimits
from sqlenv.sandbox.executor import SQLSandbox


class SandboxPool:
    """Sandboxes shared by every environment of a process: one database's connections are
    reused across episodes and sessions instead of each session opening its own (a connection
    costs ~100 KB and its statement cache warms up once). A sandbox is leased to one caller at a
    time; at most `max_idle_per_database` idle ones are kept per database and limits."""

    def __init__(self, max_idle_per_database: int = 4) -> None:
        self.max_idle_per_database = max_idle_per_database
        self._idle: dict[tuple[Path, SandboxLimits], list[SQLSandbox]] = {}
        self._lock = threading.Lock()

    def lease(self, db_path: Path, limits: SandboxLimits) -> _Lease:
        """`with pool.lease(db_path, limits) as sandbox:` a sandbox for `db_path` and `limits`,
        idle or new, given back to the pool (or closed, when enough are idle) at the end."""
        return _Lease(self, db_path, limits)

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())


class _Lease:
    """SandboxPool.lease's context manager. A class rather than a contextlib generator: every
    QUERY step takes a lease, and a generator-based one costs several times as much. The key
    (whose hash covers every field of the limits) is looked up once, and the sandbox goes back
    to the same list (lists are never removed from the pool)."""

    __slots__ = ("_db_path", "_idle", "_limits", "_pool", "_sandbox")

    def __init__(self, pool: SandboxPool, db_path: Path, limits: SandboxLimits) -> None:
        self._pool = pool
        self._db_path = db_path
        self._limits = limits

    def __enter__(self) -> SQLSandbox:
        pool = self._pool
        key = (self._db_path, self._limits)
        with pool._lock:
            idle = pool._idle.get(key)
            if idle is None:
                idle = pool._idle[key] = []
            sandbox = idle.pop() if idle else None
        self._idle = idle
        if sandbox is None:
            sandbox = SQLSandbox(self._db_path, self._limits)
        self._sandbox = sandbox
        return sandbox

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        pool = self._pool
        sandbox = self._sandbox
        with pool._lock:
            if len(self._idle) < pool.max_idle_per_database:
                self._idle.append(sandbox)
                return
        sandbox.close()


SHARED_SANDBOXES = SandboxPool()
