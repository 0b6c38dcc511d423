"""Sandboxes shared by every environment of a process, leased one caller at a time."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

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

    @contextlib.contextmanager
    def lease(self, db_path: Path, limits: SandboxLimits) -> Iterator[SQLSandbox]:
        key = (db_path, limits)
        with self._lock:
            idle = self._idle.get(key)
            sandbox = idle.pop() if idle else None
        if sandbox is None:
            sandbox = SQLSandbox(db_path, limits)
        try:
            yield sandbox
        finally:
            with self._lock:
                idle = self._idle.setdefault(key, [])
                if len(idle) < self.max_idle_per_database:
                    idle.append(sandbox)
                    sandbox = None
            if sandbox is not None:
                sandbox.close()

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())


SHARED_SANDBOXES = SandboxPool()
