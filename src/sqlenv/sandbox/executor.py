"""The SQL sandbox: executes exactly one read-only statement on one SQLite file, bounded.

Defences, each independent of the others:
- the file is opened through a read-only, immutable URI (SQLite itself refuses writes and never
  creates journal files next to the database);
- a statement that does not start with SELECT, WITH, VALUES or EXPLAIN (after comments) is
  refused before SQLite sees it, with the statement class named in the message;
- an authorizer allow-list admits only SELECT, column reads, recursive CTEs and ordinary
  functions; writes, DDL, temp objects, ATTACH (and so VACUUM INTO), PRAGMA (statements and
  table-valued pragma functions), transactions and `load_extension` are refused with a reason,
  and so are the two aggregates whose memory SQLite does not bound (json_group_array/object);
- `setlimit` caps string size, expression depth, compound selects, LIKE patterns, attached
  databases, bound variables and columns;
- a progress handler, and a watchdog thread that interrupts the connection at the deadline, stop
  any statement that runs past the time limit;
- the few built-in functions whose running time is not bounded by their output (LIKE/GLOB,
  instr, replace, trim with a character set: O(n·m); printf's `%.*c`: a loop as long as the
  precision, even when the result is refused as too big) run through guards that refuse inputs
  too large to finish promptly and otherwise delegate to SQLite's own implementation, so results
  are unchanged; SQLite cannot interrupt a function call, only the statement between calls;
- rows are fetched one at a time and only a bounded number, and bytes, are kept, so no result is
  materialised in full; the text shown to the agent is capped per cell and in total, with a
  visible marker.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from urllib.parse import quote

from sqlenv.config import SandboxLimits
from sqlenv.sandbox.guards import GUARDED_FUNCTIONS, PRESENT_BUILTINS, FunctionRefused, Guard

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})
# Aggregates that build their result without checking the size limit until the last row: one
# query over a cross join held ~600 MB per second of its time limit before failing as too big.
# group_concat() stops growing at the limit, so it stays allowed.
_UNBOUNDED_AGGREGATES = frozenset({"json_group_array", "json_group_object"})

# What each refused authorizer action code means, for the refusal message. Listed explicitly:
# deriving names from every SQLITE_* constant mixes in result codes with the same numbers
# (SQLITE_INSERT == SQLITE_TOOBIG == 18), which named an INSERT "toobig".
_ACTION_DESCRIPTIONS = {
    getattr(sqlite3, name): text
    for name, text in {
        "SQLITE_INSERT": "inserting rows",
        "SQLITE_UPDATE": "updating rows",
        "SQLITE_DELETE": "deleting rows",
        "SQLITE_CREATE_INDEX": "CREATE INDEX",
        "SQLITE_CREATE_TABLE": "CREATE TABLE",
        "SQLITE_CREATE_TEMP_INDEX": "creating a temporary index",
        "SQLITE_CREATE_TEMP_TABLE": "creating a temporary table",
        "SQLITE_CREATE_TEMP_TRIGGER": "creating a temporary trigger",
        "SQLITE_CREATE_TEMP_VIEW": "creating a temporary view",
        "SQLITE_CREATE_TRIGGER": "CREATE TRIGGER",
        "SQLITE_CREATE_VIEW": "CREATE VIEW",
        "SQLITE_CREATE_VTABLE": "CREATE VIRTUAL TABLE",
        "SQLITE_DROP_INDEX": "DROP INDEX",
        "SQLITE_DROP_TABLE": "DROP TABLE",
        "SQLITE_DROP_TEMP_INDEX": "dropping a temporary index",
        "SQLITE_DROP_TEMP_TABLE": "dropping a temporary table",
        "SQLITE_DROP_TEMP_TRIGGER": "dropping a temporary trigger",
        "SQLITE_DROP_TEMP_VIEW": "dropping a temporary view",
        "SQLITE_DROP_TRIGGER": "DROP TRIGGER",
        "SQLITE_DROP_VIEW": "DROP VIEW",
        "SQLITE_DROP_VTABLE": "dropping a virtual table",
        "SQLITE_ALTER_TABLE": "ALTER TABLE",
        "SQLITE_ANALYZE": "ANALYZE",
        "SQLITE_REINDEX": "REINDEX",
        "SQLITE_ATTACH": "ATTACH or VACUUM (opening or writing another database file)",
        "SQLITE_DETACH": "DETACH",
        "SQLITE_PRAGMA": "PRAGMA",
        "SQLITE_TRANSACTION": "transaction control (BEGIN/COMMIT/ROLLBACK)",
        "SQLITE_SAVEPOINT": "savepoints",
    }.items()
    if hasattr(sqlite3, name)
}
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema"})
_TEMP_SCHEMA_TABLES = frozenset({"sqlite_temp_master", "sqlite_temp_schema"})
_READ_ONLY = "the database is read-only; only SELECT queries run"

# Statements are classified by their first keyword (after whitespace and comments) before SQLite
# sees them; these are refused with their class named. SELECT, WITH, VALUES and EXPLAIN go on to
# SQLite, whose authorizer refuses any write hidden behind them (WITH ... DELETE, EXPLAIN UPDATE).
_REFUSED_KEYWORDS = {
    **dict.fromkeys(("INSERT", "UPDATE", "DELETE", "REPLACE"), "it would modify data"),
    **dict.fromkeys(("CREATE", "DROP", "ALTER"), "it would change the schema"),
    **dict.fromkeys(("ATTACH", "DETACH"), "it would open or close another database file"),
    "VACUUM": "it would rewrite the database or write a copy of it to a file",
    "PRAGMA": "pragmas read or change connection settings",
    **dict.fromkeys(
        ("BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"),
        "transactions are not needed: each query runs on its own",
    ),
    "ANALYZE": "it would write statistics tables",
    "REINDEX": "it would rebuild indexes",
}
_LEADING_NOISE = re.compile(r"(?:\s+|--[^\n]*|/\*.*?(?:\*/|\Z))*", re.DOTALL)
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_OBJECT_KINDS = frozenset({"TABLE", "INDEX", "VIEW", "TRIGGER"})

MAX_KEPT_BYTES = SandboxLimits().max_kept_bytes  # the default (see SandboxLimits.max_kept_bytes)
_CHUNK_BYTES = 1024 * 1024  # target size of one fetchmany() chunk

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


def connect_read_only(db_path: Path) -> sqlite3.Connection:
    """A connection that can only read `db_path` and never writes beside it (ro + immutable)."""
    uri = f"file:{quote(str(db_path.resolve()))}?mode=ro&immutable=1"
    # check_same_thread=False: a server session may be served by different threads over time,
    # but one sandbox is only ever used by one caller at a time.
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)


def _refused_statement(sql: str) -> str | None:
    """Why a statement is refused by its first keyword, or None when it may be a query."""
    rest = sql[_LEADING_NOISE.match(sql).end() :]  # type: ignore[union-attr]  # always matches
    if not rest:
        return "empty query (only comments)"
    first = _KEYWORD.match(rest)
    keyword = first.group().upper() if first else ""
    reason = _REFUSED_KEYWORDS.get(keyword)
    if reason is None:
        return None  # a query, or something SQLite rejects with its own syntax error
    label = keyword
    if keyword in ("CREATE", "DROP", "ALTER"):
        words = _KEYWORD.findall(rest[:200].upper())
        kind = next((i for i, w in enumerate(words[1:4], 1) if w in _OBJECT_KINDS), None)
        label = " ".join(words[: kind + 1]) if kind is not None else label
    return f"not allowed: {label} statements ({reason}); {_READ_ONLY}"


class _Watchdog:
    """One daemon thread that interrupts a sandbox's statement when its deadline passes.

    The progress handler only runs every `progress_interval_ops` VM instructions, and some
    instructions are slow (a function building a 1 MB value), so thousands of them can run past the
    deadline between two checks; SQLite checks an interrupt at every loop jump instead.
    Arming is cheap: the thread is woken only when a new deadline comes before its next planned
    wake-up; while queries keep coming it wakes every `_TICK_S` to re-plan, and it sleeps for good
    after a tick with no query.
    """

    _TICK_S = 0.25

    def __init__(self) -> None:
        # arm() and disarm() take the plain lock (Condition's own __enter__ is a Python call more
        # on every query); the condition shares it.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._armed: dict[int, tuple[float, SQLSandbox]] = {}
        self._tokens = 0
        self._wake_at = float("inf")
        self._used_since_wake = False
        self._thread: threading.Thread | None = None
        # Set by the thread while it runs: cheaper to read on every query than Thread.is_alive().
        self._running = False

    def arm(self, sandbox: SQLSandbox, deadline: float) -> int:
        with self._lock:
            self._tokens += 1
            token = self._tokens
            self._armed[token] = (deadline, sandbox)
            self._used_since_wake = True
            if not self._running:  # first use, after a fork (__init__ again), or the thread died
                self._wake_at = float("inf")
                self._thread = threading.Thread(target=self._run, name="sqlenv-sandbox-watchdog", daemon=True)
                self._thread.start()
                self._running = True  # before the thread can end: it waits for this lock first
            elif deadline < self._wake_at:
                self._cond.notify()
            return token

    def disarm(self, token: int) -> None:
        """After this returns, the watchdog no longer touches the statement that `token` armed."""
        with self._lock:
            self._armed.pop(token, None)

    def _run(self) -> None:
        try:
            self._watch()
        finally:
            self._running = False

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.perf_counter()
                for token, (deadline, sandbox) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[token]
                        sandbox._interrupt_for_timeout()
                earliest = min((d for d, _ in self._armed.values()), default=float("inf"))
                if earliest == float("inf") and not self._used_since_wake:
                    self._wake_at = float("inf")
                    self._cond.wait()
                else:
                    self._used_since_wake = False
                    self._wake_at = min(earliest, now + self._TICK_S)
                    self._cond.wait(max(self._wake_at - now, 0.0))


_WATCHDOG = _Watchdog()
# A forked child has no watchdog thread, and its lock may have been copied while held.
os.register_at_fork(after_in_child=_WATCHDOG.__init__)




class SQLSandbox:
    """One read-only connection to one database file, with all the limits applied."""

    def __init__(self, db_path: str | Path, limits: SandboxLimits | None = None) -> None:
        self.db_path = Path(db_path)
        self.limits = limits or SandboxLimits()
        if not self.db_path.is_file():
            raise FileNotFoundError(f"database file not found: {self.db_path}")
        self._conn = connect_read_only(self.db_path)
        # A private connection that runs the guarded built-ins, opened on first use.
        self._builtins: sqlite3.Connection | None = None
        self._builtins_cursor: sqlite3.Cursor | None = None
        self._deadline = 0.0
        self._timed_out = False
        self._denial: str | None = None
        self._denial_is_generic = False
        self._function_error: str | None = None
        self._apply_limits(self._conn)
        self._conn.set_authorizer(self._authorize)
        self._conn.set_progress_handler(self._on_progress, self.limits.progress_interval_ops)
        for name, nargs, guard in GUARDED_FUNCTIONS:
            if name in PRESENT_BUILTINS:
                self._conn.create_function(name, nargs, self._guarded(name, nargs, guard), deterministic=True)

    def _apply_limits(self, c: sqlite3.Connection) -> None:
        lim = self.limits
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
                self._deny(f"function {arg2}() is not allowed", generic=False)
                return sqlite3.SQLITE_DENY
            if arg2 is not None and arg2.lower() in _UNBOUNDED_AGGREGATES:
                self._deny(
                    f"function {arg2}() is not allowed: its memory use is unbounded "
                    "(group_concat() builds a list within the size limit)",
                    generic=False,
                )
                return sqlite3.SQLITE_DENY
            return sqlite3.SQLITE_OK
        table = (arg1 or "").lower()
        if action == sqlite3.SQLITE_UPDATE and table in _SCHEMA_TABLES:
            # What SQLite asks while it declares a table-valued function's virtual table (an update
            # of sqlite_master that is never run); plain UPDATEs of sqlite_master never get here.
            self._deny(
                "table-valued functions and virtual tables (pragma_table_info(), json_each(), ...) "
                "are not allowed",
                generic=True,
            )
        elif action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_DELETE) and table in _SCHEMA_TABLES:
            self._deny(f"changing the schema is not allowed ({_READ_ONLY})", generic=True)
        elif table in _TEMP_SCHEMA_TABLES:
            self._deny(f"creating or dropping temporary objects is not allowed ({_READ_ONLY})", generic=True)
        else:
            what = _ACTION_DESCRIPTIONS.get(action, f"operation {action}")
            self._deny(f"{what} is not allowed ({_READ_ONLY})", generic=False)
        return sqlite3.SQLITE_DENY

    def _deny(self, reason: str, *, generic: bool) -> None:
        """Record why a statement was refused; a specific reason replaces a generic one."""
        if self._denial is None or (self._denial_is_generic and not generic):
            self._denial = reason
            self._denial_is_generic = generic

    def _on_progress(self) -> int:
        if time.perf_counter() > self._deadline:
            self._timed_out = True
            return 1  # non-zero interrupts the statement
        return 0

    def _interrupt_for_timeout(self) -> None:
        """Called by the watchdog thread at the deadline of a statement still running."""
        self._timed_out = True
        with contextlib.suppress(sqlite3.ProgrammingError):  # closed meanwhile
            self._conn.interrupt()

    def _guarded(self, name: str, nargs: int, guard: Guard) -> Callable[..., object]:
        fixed_sql = None if nargs < 0 else f"SELECT {name}({', '.join('?' * nargs)})"
        limits = self.limits

        def call(*args: object) -> object:
            try:
                if time.perf_counter() > self._deadline:
                    self._timed_out = True
                    raise FunctionRefused
                reason = guard(limits, args)
                if reason is not None:
                    self._function_error = f"not allowed: {name}(): {reason}"
                    raise FunctionRefused
                cursor = self._builtins_cursor or self._open_builtins()
                cursor.execute(fixed_sql or f"SELECT {name}({', '.join('?' * len(args))})", args)
                return cursor.fetchone()[0]
            except FunctionRefused:
                raise
            except sqlite3.Error as exc:
                self._function_error = self._explain_message(exc)
                raise
            except Exception as exc:  # a bug in a guard must still explain itself
                self._function_error = f"SQL error: {name}() failed: {exc!r}"
                raise

        return call

    def _open_builtins(self) -> sqlite3.Cursor:
        """A private in-memory connection with the same limits, where the built-ins still live."""
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._apply_limits(conn)
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 64)
        self._builtins = conn
        self._builtins_cursor = conn.cursor()
        return self._builtins_cursor

    def execute(self, sql: str, time_limit_s: float | None = None) -> QueryResult:
        """Run one read-only statement; raise SandboxError with an agent-readable reason."""
        if not isinstance(sql, str):
            raise SandboxError("the query must be a string")
        if len(sql) > self.limits.max_sql_chars:
            raise SandboxError(f"query too long: {len(sql)} characters (limit {self.limits.max_sql_chars})")
        if "\x00" in sql:
            raise SandboxError("the query contains a NUL character")
        if not sql or sql.isspace():  # `not sql.strip()` without copying the statement
            raise SandboxError("empty query")
        refusal = _refused_statement(sql)
        if refusal is not None:
            raise SandboxError(refusal)
        limit_s = self.limits.time_limit_s if time_limit_s is None else time_limit_s
        self._denial = None
        self._denial_is_generic = False
        self._function_error = None
        self._timed_out = False
        start = time.perf_counter()
        self._deadline = start + limit_s
        token = _WATCHDOG.arm(self, self._deadline)
        cursor = self._conn.cursor()
        try:
            cursor.execute(sql)
            if cursor.description is None:
                raise SandboxError("only SELECT queries are allowed")
            columns = tuple([d[0] for d in cursor.description])
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
            _WATCHDOG.disarm(token)
            cursor.close()
        return QueryResult(columns, rows, truncated, time.perf_counter() - start)

    def _fetch_bounded(self, cursor: sqlite3.Cursor) -> tuple[tuple[tuple[object, ...], ...], bool]:
        """Keep at most max_rows_kept rows and max_kept_bytes of cells. Rows arrive in chunks
        sized so that one chunk holds about _CHUNK_BYTES (starting small: a chunk of rows with
        1 MB cells must not hold hundreds of MB before it is counted); bytes are counted per
        chunk, and row by row only when a chunk would cross the cap."""
        keep = self.limits.max_rows_kept
        max_bytes = self.limits.max_kept_bytes
        rows: list[tuple[object, ...]] = []
        kept_bytes = 0
        chunk = 4
        while True:
            batch = cursor.fetchmany(chunk)
            if not batch:
                return tuple(rows), False
            size = _cells_bytes(batch)
            if kept_bytes + size > max_bytes:
                for row in batch:
                    kept_bytes += _cells_bytes((row,))
                    if kept_bytes > max_bytes or len(rows) >= keep:
                        return tuple(rows), True
                    rows.append(row)
                continue
            rows.extend(batch)
            kept_bytes += size
            if len(rows) > keep:
                return tuple(rows[:keep]), True
            if len(batch) < chunk:  # fetchmany() returns fewer rows only when there are no more
                return tuple(rows), False
            chunk = max(1, min(256, _CHUNK_BYTES * len(rows) // max(kept_bytes, 1)))

    def _explain(self, exc: BaseException, limit_s: float) -> SandboxError:
        if self._timed_out:
            return SandboxError(f"query timed out after {limit_s:g} s and was stopped")
        if self._function_error is not None:
            return SandboxError(self._function_error)
        if self._denial is not None:
            return SandboxError(f"not allowed: {self._denial}")
        return SandboxError(self._explain_message(exc))

    def _explain_message(self, exc: BaseException) -> str:
        message = str(exc) or type(exc).__name__
        if "string or blob too big" in message or isinstance(exc, OverflowError | MemoryError):
            return f"result value too large (limit {self.limits.max_string_bytes} bytes)"
        if "pattern too complex" in message:
            return f"LIKE or GLOB pattern too long (limit {self.limits.max_like_pattern_bytes} bytes)"
        if "user-defined function raised exception" in message:
            # A guarded function failed before its code ran (its code records its own reason):
            # Python could not decode an argument, i.e. text that is not valid UTF-8.
            return (
                "SQL error: a text value is not valid UTF-8, so LIKE, GLOB, instr, replace, trim or "
                "printf cannot read it"
            )
        if "parser stack overflow" in message:
            return "SQL error: parser stack overflow (the query is nested too deeply)"
        return f"SQL error: {message}"

    def close(self) -> None:
        self._conn.close()
        if self._builtins is not None:
            self._builtins.close()

    def __enter__(self) -> SQLSandbox:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _cells_bytes(rows: Sequence[tuple[object, ...]]) -> int:
    """Approximate bytes held by rows: text and blob lengths, 8 per other cell."""
    sized = [len(v) for v in chain.from_iterable(rows) if v.__class__ is str or v.__class__ is bytes]
    return sum(sized) + 8 * (len(rows) * len(rows[0]) - len(sized))
