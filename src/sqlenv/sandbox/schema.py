"""The schema catalog of one database file: table names, and DESCRIBE / SAMPLE texts built once
per table on first use and shared by every episode and environment in the process.

The catalog reads through its own read-only connection (it needs PRAGMA, which the agent's
sandbox refuses). Texts are deterministic, so caching them changes nothing an agent can observe.
"""

from __future__ import annotations

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
