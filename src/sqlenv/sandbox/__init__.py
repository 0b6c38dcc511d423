"""The SQLite layer: one read-only statement on one database file, bounded in time, rows and bytes
(`executor`), the guards on SQLite's uninterruptible built-ins (`guards`), sandboxes pooled per
database (`pool`), a database's cached catalogue for DESCRIBE and SAMPLE (`schema`), and the text
an agent reads of a result (`rendering`). Nothing here knows about questions or episodes."""

from sqlenv.sandbox.executor import MAX_KEPT_BYTES, QueryResult, SandboxError, SQLSandbox, connect_read_only
from sqlenv.sandbox.pool import SHARED_SANDBOXES, SandboxPool
from sqlenv.sandbox.rendering import TRUNCATION_MARKER, render_cell, render_result, render_table

__all__ = [
    "MAX_KEPT_BYTES",
    "SHARED_SANDBOXES",
    "TRUNCATION_MARKER",
    "QueryResult",
    "SQLSandbox",
    "SandboxError",
    "SandboxPool",
    "connect_read_only",
    "render_cell",
    "render_result",
    "render_table",
]
