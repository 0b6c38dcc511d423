"""The schema catalog of one database file: table names, DESCRIBE / SAMPLE texts built once per
table on first use, and the shown schema (every table's CREATE TABLE statement, for
`EnvConfig.show_schema`) built once per database, all shared by every episode and environment in
the process.

The catalog reads through its own read-only connection (it needs PRAGMA, which the agent's
sandbox refuses). Texts are deterministic, so caching them changes nothing an agent can observe.

The shown schema is rendered from PRAGMA table_info and foreign_key_list, not copied from
`sqlite_master.sql`: one line per table, columns with their declared types, PRIMARY KEY (inline
for one column, a table constraint for several) and FOREIGN KEY ... REFERENCES. NOT NULL, DEFAULT,
UNIQUE and CHECK are left out, as are the stored text's comments, quotes and layout, because a
small model's context is small (docs/environment.md compares the sizes). Executed in an empty
database, it makes the same columns, types, primary keys and foreign keys
(tests/test_schema_shown.py).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from sqlenv.config import SandboxLimits
from sqlenv.sandbox.executor import connect_read_only
from sqlenv.sandbox.rendering import render_table


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _written_name(name: str, probe: sqlite3.Connection) -> str:
    """`name` as the shown schema writes it: bare where SQLite reads it bare as that name (in a
    table definition and in a query), else double-quoted. SQLite itself decides whether a plain
    word is a keyword, so no keyword list is kept here.

    Args:
        name: a table or column name.
        probe: an in-memory connection that compiles the test statements (EXPLAIN runs nothing).
    """
    if not _PLAIN_NAME.fullmatch(name):
        return quote_identifier(name)
    try:
        probe.execute(f"EXPLAIN CREATE TABLE {name} ({name} INT, PRIMARY KEY ({name}))")
        probe.execute(f"EXPLAIN SELECT {name} FROM (SELECT 1 AS {name}) AS {name}")
    except sqlite3.Error:
        return quote_identifier(name)
    return name


def _strip_identifier_quotes(name: str) -> str:
    name = name.strip().rstrip(";").strip()
    if len(name) >= 2 and (name[0], name[-1]) in {('"', '"'), ("`", "`"), ("[", "]"), ("'", "'")}:
        name = name[1:-1].strip()
    return name


@dataclass
class DatabaseCatalog:
    """Table names and cached DESCRIBE/SAMPLE texts of one SQLite file."""

    db_path: Path
    tables: tuple[str, ...]
    _by_folded_name: dict[str, str]
    _describe: dict[str, str] = field(default_factory=dict)
    _sample: dict[tuple[str, int], str] = field(default_factory=dict)
    _schema: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, db_path: Path) -> DatabaseCatalog:
        with _connect(db_path) as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master "
                    "WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
        return cls(db_path, tuple(names), {n.casefold(): n for n in names})

    @property
    def table_list_text(self) -> str:
        return "Tables: " + ", ".join(self.tables)

    @property
    def schema_text(self) -> str:
        """The shown schema: the table list line (`table_list_text`), a blank line, then one
        CREATE TABLE statement per table, one per line, in the table list's order (module
        docstring). Built on first use, then served from memory."""
        text = self._schema
        if text is None:
            text = self._build_schema()
            with self._lock:
                self._schema = text
        return text

    def is_schema_cached(self) -> bool:
        """Whether `schema_text` is served from memory."""
        return self._schema is not None

    def resolve_table(self, argument: str) -> str | None:
        """The real table name for an argument (case-insensitive, quotes allowed), or None."""
        return self._by_folded_name.get(_strip_identifier_quotes(argument).casefold())

    def is_cached(self, kind: str, table: str, n_rows: int) -> bool:
        """Whether DESCRIBE (kind "DESCRIBE") or SAMPLE of `table` is served from memory."""
        return table in self._describe if kind == "DESCRIBE" else (table, n_rows) in self._sample

    def describe(self, table: str) -> str:
        text = self._describe.get(table)
        if text is None:
            text = self._build_describe(table)
            with self._lock:
                self._describe[table] = text
        return text

    def sample(self, table: str, n_rows: int, limits: SandboxLimits) -> str:
        key = (table, n_rows)
        text = self._sample.get(key)
        if text is None:
            with _connect(self.db_path) as conn:
                cur = conn.execute(f"SELECT * FROM {quote_identifier(table)} LIMIT {int(n_rows)}")
                columns = tuple(d[0] for d in cur.description)
                rows = tuple(cur.fetchall())
            text = render_table(columns, rows, limits, max_rows=n_rows)
            with self._lock:
                self._sample[key] = text
        return text

    def _build_describe(self, table: str) -> str:
        q = quote_identifier(table)
        with _connect(self.db_path) as conn:
            columns = conn.execute(f"PRAGMA table_info({q})").fetchall()
            foreign = conn.execute(f"PRAGMA foreign_key_list({q})").fetchall()
            (count,) = conn.execute(f"SELECT COUNT(*) FROM {q}").fetchone()
        lines = [f"table {table} ({count} rows)", "columns:"]
        for _cid, name, col_type, notnull, _default, pk in columns:
            flags = []
            if pk:
                flags.append("primary key")
            if notnull and not pk:
                flags.append("not null")
            suffix = f" ({', '.join(flags)})" if flags else ""
            lines.append(f"- {name} {col_type or 'ANY'}{suffix}")
        if foreign:
            lines.append("foreign keys:")
            for row in foreign:
                ref_table, from_col, to_col = row[2], row[3], row[4]
                lines.append(f"- {from_col} -> {ref_table}.{to_col or '?'}")
        return "\n".join(lines)

    def _build_schema(self) -> str:
        statements = []
        with _connect(self.db_path) as conn, closing(sqlite3.connect(":memory:")) as probe:
            for table in self.tables:
                q = quote_identifier(table)
                columns = conn.execute(f"PRAGMA table_info({q})").fetchall()
                foreign = conn.execute(f"PRAGMA foreign_key_list({q})").fetchall()
                statements.append(_create_statement(table, columns, foreign, probe))
        return "\n".join([self.table_list_text, "", *statements])


def _create_statement(
    table: str, columns: list[tuple], foreign: list[tuple], probe: sqlite3.Connection
) -> str:
    """One table's CREATE TABLE statement from its PRAGMA table_info and foreign_key_list rows."""

    def name(text: str) -> str:
        return _written_name(text, probe)

    key = sorted((pk, column) for _cid, column, _type, _notnull, _default, pk in columns if pk)
    parts = []
    for _cid, column, declared, _notnull, _default, pk in columns:
        inline_key = " PRIMARY KEY" if pk and len(key) == 1 else ""
        parts.append(" ".join(filter(None, (name(column), declared))) + inline_key)
    if len(key) > 1:
        parts.append(f"PRIMARY KEY ({', '.join(name(column) for _, column in key)})")
    # One constraint per id, its columns in their `seq` order; constraints in the order of their
    # first column in the table (SQLite numbers them last-declared first), then by id.
    position = {column: cid for cid, column, *_ in columns}
    constraints: dict[int, list[tuple]] = {}
    for row in foreign:
        constraints.setdefault(row[0], []).append(row)
    for rows in sorted(
        constraints.values(),
        key=lambda rows: (min(position.get(r[3], len(position)) for r in rows), rows[0][0]),
    ):
        rows.sort(key=lambda r: r[1])
        sources = ", ".join(name(r[3]) for r in rows)
        targets = [r[4] for r in rows]
        # No target columns: the constraint names the parent table's primary key, as written.
        referenced = "" if any(t is None for t in targets) else f"({', '.join(name(t) for t in targets)})"
        parts.append(f"FOREIGN KEY ({sources}) REFERENCES {name(rows[0][2])}{referenced}")
    return f"CREATE TABLE {name(table)} ({', '.join(parts)});"


def _connect(db_path: Path) -> closing[sqlite3.Connection]:
    """A read-only connection that a `with` block closes (sqlite3's own only ends a transaction)."""
    return closing(connect_read_only(db_path))


_CATALOGS: dict[Path, DatabaseCatalog] = {}
_CATALOGS_LOCK = threading.Lock()


def catalog_for(db_path: Path) -> DatabaseCatalog:
    """The process-wide catalog of a database file (opened once)."""
    catalog = _CATALOGS.get(db_path)
    if catalog is None:
        with _CATALOGS_LOCK:
            catalog = _CATALOGS.get(db_path)
            if catalog is None:
                catalog = DatabaseCatalog.open(db_path)
                _CATALOGS[db_path] = catalog
    return catalog
