"""The SQL sandbox: executes exactly one read-only statement on one SQLite file, bounded.

Defences, each independent of the others:
- the file is opened through a read-only, immutable URI (SQLite itself refuses writes and never
  creates journal files next to the database);
- an authorizer allow-list admits only SELECT, column reads, recursive CTEs and ordinary
  functions; writes, DDL, temp objects, ATTACH (and so VACUUM INTO), PRAGMA (statements and
  table-valued pragma functions), transactions and `load_extension` are refused with a reason;
- `setlimit` caps string size, expression depth, compound selects, LIKE patterns, attached
  databases, bound variables and columns;
- a progress handler interrupts any statement that runs past the time limit;
- rows are fetched in chunks and only a bounded number is kept, so no result is materialised
  in full; the text shown to the agent is capped per cell and in total, with a visible marker.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlenv.config import SandboxLimits

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})

# Names for authorizer action codes, used in the refusal message.
_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ").lower()
    for name in dir(sqlite3)
    if name.startswith("SQLITE_")
    and name not in {"SQLITE_OK", "SQLITE_DENY", "SQLITE_IGNORE"}
    and isinstance(getattr(sqlite3, name), int)
    and not name.startswith(("SQLITE_LIMIT", "SQLITE_CONSTRAINT", "SQLITE_IOERR", "SQLITE_DBCONFIG"))
}
_ACTION_NAMES.update({sqlite3.SQLITE_ATTACH: "attach", sqlite3.SQLITE_PRAGMA: "pragma"})

TRUNCATION_MARKER = "…"


class SandboxError(Exception):
    """A statement was refused or failed; the message is meant for the agent."""


@dataclass(frozen=True)
class QueryResult:
    """The bounded outcome of one statement."""

    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]  # at most max_rows_kept rows, cells as SQLite returned them
    truncated: bool  # more rows existed than were kept
    elapsed_s: float

    @property
    def row_count_text(self) -> str:
        return f"more than {len(self.rows)}" if self.truncated else str(len(self.rows))


def _connect_read_only(db_path: Path) -> sqlite3.Connection:
    if not db_path.is_file():
        raise FileNotFoundError(f"database file not found: {db_path}")
    uri = f"file:{quote(str(db_path.resolve()))}?mode=ro&immutable=1"
    # check_same_thread=False: a server session may be served by different threads over time,
    # but one sandbox is only ever used by one caller at a time.
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)


class SQLSandbox:
    """One read-only connection to one database file, with all the limits applied."""

    def __init__(self, db_path: str | Path, limits: SandboxLimits | None = None) -> None:
        self.db_path = Path(db_path)
        self.limits = limits or SandboxLimits()
        self._conn = _connect_read_only(self.db_path)
        self._deadline = 0.0
        self._timed_out = False
        self._denial: str | None = None
        self._apply_limits()
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._on_progress, self.limits.progress_interval_ops)

    def _apply_limits(self) -> None:
        lim = self.limits
        c = self._conn
        c.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, lim.max_string_bytes)
        c.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, lim.max_sql_chars * 4)
        c.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, lim.max_expr_depth)
        c.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, lim.max_compound_select)
        c.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, lim.max_like_pattern_bytes)
        c.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        c.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, lim.max_variables)
        c.setlimit(sqlite3.SQLITE_LIMIT_FUNCTION_ARG, lim.max_function_args)
        c.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, lim.max_columns)
        c.setlimit(sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH, 1)

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None
    ) -> int:
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if arg2 is not None and arg2.lower() in _DENIED_FUNCTIONS:
                self._denial = f"function {arg2}() is not allowed"
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, f"operation {action}")
        self._denial = f"{what} is not allowed (the database is read-only; only SELECT queries run)"
        return sqlite3.SQLITE_DENY

    def _on_progress(self) -> int:
        if time.perf_counter() > self._deadline:
            self._timed_out = True
            return 1  # non-zero interrupts the statement
        return 0

    def execute(self, sql: str, time_limit_s: float | None = None) -> QueryResult:
        """Run one read-only statement; raise SandboxError with an agent-readable reason."""
        if not isinstance(sql, str):
            raise SandboxError("the query must be a string")
        if len(sql) > self.limits.max_sql_chars:
            raise SandboxError(f"query too long: {len(sql)} characters (limit {self.limits.max_sql_chars})")
        if "\x00" in sql:
            raise SandboxError("the query contains a NUL character")
        if not sql.strip():
            raise SandboxError("empty query")
        limit_s = self.limits.time_limit_s if time_limit_s is None else time_limit_s
        self._denial = None
        self._timed_out = False
        start = time.perf_counter()
        self._deadline = start + limit_s
        cursor = self._conn.cursor()
        try:
            cursor.execute(sql)
            if cursor.description is None:
                raise SandboxError("only SELECT queries are allowed")
            columns = tuple(d[0] for d in cursor.description)
            rows, truncated = self._fetch_bounded(cursor)
        except SandboxError:
            raise
        except sqlite3.ProgrammingError as exc:
            if "one statement" in str(exc):
                raise SandboxError("exactly one statement is allowed per query") from None
            raise SandboxError(f"SQL error: {exc}") from None
        except (sqlite3.DatabaseError, sqlite3.Warning, OverflowError, MemoryError, ValueError) as exc:
            raise self._explain(exc, limit_s) from None
        finally:
            cursor.close()
        return QueryResult(columns, rows, truncated, time.perf_counter() - start)

    def _fetch_bounded(self, cursor: sqlite3.Cursor) -> tuple[tuple[tuple[object, ...], ...], bool]:
        keep = self.limits.max_rows_kept
        chunk = min(self.limits.fetch_chunk_rows, keep + 1)
        rows: list[tuple[object, ...]] = []
        while len(rows) <= keep:
            batch = cursor.fetchmany(chunk)
            if not batch:
                return tuple(rows), False
            rows.extend(batch)
        return tuple(rows[:keep]), True

    def _explain(self, exc: BaseException, limit_s: float) -> SandboxError:
        if self._timed_out:
            return SandboxError(f"query timed out after {limit_s:g} s and was stopped")
        if self._denial is not None:
            return SandboxError(f"not allowed: {self._denial}")
        message = str(exc) or type(exc).__name__
        if "string or blob too big" in message or isinstance(exc, OverflowError | MemoryError):
            return SandboxError(f"result value too large (limit {self.limits.max_string_bytes} bytes)")
        return SandboxError(f"SQL error: {message}")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> SQLSandbox:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def render_cell(value: object, max_chars: int) -> str:
    """One cell as the agent sees it: NULL for None, floats compact, long text cut with a marker."""
    if value is None:
        text = "NULL"
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, bytes):
        text = f"<blob {len(value)} bytes>"
    else:
        text = str(value)
    text = text.replace("\n", " ").replace("|", "/")
    if len(text) > max_chars:
        text = text[: max_chars - 1] + TRUNCATION_MARKER
    return text


def render_table(
    columns: tuple[str, ...],
    rows: tuple[tuple[object, ...], ...],
    limits: SandboxLimits,
    *,
    total_text: str | None = None,
    max_rows: int | None = None,
) -> str:
    """Rows as compact pipe-separated text, capped in rows, per cell and in total."""
    max_rows = limits.max_rows_shown if max_rows is None else max_rows
    shown = rows[:max_rows]
    lines = [" | ".join(render_cell(c, limits.max_cell_chars) for c in columns)]
    lines.extend(" | ".join(render_cell(v, limits.max_cell_chars) for v in row) for row in shown)
    total = total_text if total_text is not None else str(len(rows))
    if len(shown) < len(rows) or (total_text is not None and total_text != str(len(shown))):
        lines.append(f"({len(shown)} of {total} rows shown)")
    else:
        lines.append(f"({total} row{'s' if total != '1' else ''})")
    text = "\n".join(lines)
    if len(text) > limits.max_result_chars:
        cut = text[: limits.max_result_chars].rsplit("\n", 1)[0]
        text = f"{cut}\n{TRUNCATION_MARKER} [output truncated at {limits.max_result_chars} characters]"
    return text


def render_result(result: QueryResult, limits: SandboxLimits) -> str:
    """A QueryResult as the text of an observation."""
    return render_table(result.columns, result.rows, limits, total_text=result.row_count_text)
