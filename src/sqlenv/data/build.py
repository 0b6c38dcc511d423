"""Turns raw questions into question records: runs each gold SQL once through the sandbox (with
the generous gold limits), derives answer type, difficulty, tables and order, and assigns splits.
Questions whose database is missing or whose gold SQL fails are dropped and counted by reason.
A database file that SQLite cannot read (not a database, malformed) drops all its questions under
a reason naming the file, with a warning; so does a question file naming a database that has no
file. The other databases' questions are built as usual."""

from __future__ import annotations

import re
import sqlite3
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from sqlenv.config import GOLD_LIMITS
from sqlenv.data.loaders import RawQuestion
from sqlenv.data.records import QuestionRecord, infer_answer_type, normalize_cell
from sqlenv.data.sql_facts import SQLFacts, analyze_sql
from sqlenv.sandbox.executor import SandboxError, SQLSandbox
from sqlenv.sandbox.schema import DatabaseCatalog, catalog_for

# Given the records (split still empty), return question_id -> split name; records mapped to
# None are left out (and counted under "excluded").
SplitAssigner = Callable[[Sequence[QuestionRecord]], dict[str, str | None]]


def _fallback_facts(sql: str, tables: Sequence[str]) -> SQLFacts:
    """For SQL sqlglot cannot parse: tables named in the text, the hardest level, ORDER BY by text."""
    lowered = sql.lower()
    named = tuple(sorted(t.lower() for t in tables if re.search(rf"\b{re.escape(t.lower())}\b", lowered)))
    return SQLFacts("extra", named, bool(re.search(r"\border\s+by\b", lowered)))


# Words of SQLite's errors for a file it cannot read as a database (any query fails the same way).
_UNREADABLE_MARKERS = ("file is not a database", "malformed", "unable to open database", "disk i/o error")


def _unreadable_reason(path: Path) -> str | None:
    """Why SQLite cannot read this database file (it reads the schema to find out), or None."""
    try:
        DatabaseCatalog.open(path)
    except sqlite3.Error as exc:
        return str(exc) or type(exc).__name__
    return None


def _is_unreadable_error(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _UNREADABLE_MARKERS)


def build_records(
    raw_questions: Sequence[RawQuestion],
    databases: dict[str, Path],
    assign_split: SplitAssigner,
) -> tuple[list[QuestionRecord], dict[str, int]]:
    dropped: Counter[str] = Counter()
    sandboxes: dict[str, SQLSandbox] = {}
    records: list[QuestionRecord] = []
    unreadable: dict[str, str] = {}  # db_id -> SQLite's reason
    missing: Counter[str] = Counter()  # db_id -> questions without a database file
    try:
        for q in raw_questions:
            path = databases.get(q.db_id)
            if path is None:
                dropped["database file missing"] += 1
                missing[q.db_id] += 1
                continue
            if q.db_id in unreadable:
                continue
            sandbox = sandboxes.get(q.db_id)
            if sandbox is None:
                reason = _unreadable_reason(path)
                if reason is not None:
                    unreadable[q.db_id] = reason
                    continue
                sandbox = sandboxes[q.db_id] = SQLSandbox(path, GOLD_LIMITS)
            try:
                result = sandbox.execute(q.sql)
            except SandboxError as exc:
                if _is_unreadable_error(str(exc)):  # damage beyond the schema pages
                    unreadable[q.db_id] = str(exc)
                else:
                    dropped["gold SQL failed"] += 1
                continue
            if result.truncated:
                dropped["gold result too large"] += 1
                continue
            try:
                facts = analyze_sql(q.sql)
            except ValueError:
                facts = _fallback_facts(q.sql, catalog_for(path).tables)
            rows = tuple(tuple(normalize_cell(c) for c in row) for row in result.rows)
            records.append(
                QuestionRecord(
                    question_id=q.question_id,
                    question=q.question,
                    db_id=q.db_id,
                    gold_sql=q.sql,
                    gold_answer=rows,
                    gold_columns=result.columns,
                    answer_type=infer_answer_type(rows, len(result.columns)),
                    difficulty=facts.difficulty,
                    tables_involved=facts.tables_involved,
                    order_sensitive=facts.order_sensitive,
                    split="",
                )
            )
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()
    if unreadable:
        records = [r for r in records if r.db_id not in unreadable]
        left_out = Counter(q.db_id for q in raw_questions if q.db_id in unreadable)
        for db_id, reason in unreadable.items():
            path = databases[db_id]
            dropped[f"database unreadable: {path}: {reason}"] += left_out[db_id]
            warnings.warn(
                f"sqlenv: database file {path} is unreadable ({reason}); its {left_out[db_id]} "
                "question(s) are left out",
                RuntimeWarning,
                stacklevel=2,
            )
    for db_id, count in missing.items():
        warnings.warn(
            f"sqlenv: no database file for db_id {db_id!r} (no {db_id}.sqlite found); its {count} "
            "question(s) are left out",
            RuntimeWarning,
            stacklevel=2,
        )
    splits = assign_split(records)
    assigned = []
    for r in records:
        split = splits.get(r.question_id)
        if split is None:
            dropped["excluded from train (empty gold result)" if r.empty_gold else "excluded"] += 1
            continue
        assigned.append(replace(r, split=split))
    return assigned, dict(dropped)
