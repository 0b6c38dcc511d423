"""Loaders of raw questions and database files: the Spider layout and bring-your-own folders.

A raw question is what a question file says (db_id, question, SQL) plus a stable id. Nothing here
executes SQL; `sqlenv.data.build` turns raw questions into records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sqlenv.settings import SPIDER_DIR_ENV, spider_dir_from_environment


class DataError(Exception):
    """A dataset cannot be loaded; the message says what is missing and how to fix it."""


@dataclass(frozen=True)
class RawQuestion:
    question_id: str
    db_id: str
    question: str
    sql: str
    source_split: str | None = None  # a split named by the input, if any


def resolve_spider_dir(spider_dir: str | Path | None) -> Path:
    """The Spider directory from the argument, else $SQLENV_SPIDER_DIR; an error names both."""
    chosen = spider_dir or spider_dir_from_environment()
    if not chosen:
        raise DataError(
            f"Spider is not configured: pass --spider-dir DIR or set {SPIDER_DIR_ENV}. "
            "(`sqlenv data download spider --dest DIR` fetches it.)"
        )
    root = Path(chosen).expanduser()
    if not (root / "database").is_dir():
        raise DataError(
            f"{root} does not look like a Spider directory (no database/ folder); "
            f"check --spider-dir or {SPIDER_DIR_ENV}"
        )
    return root


def spider_databases(root: Path) -> dict[str, Path]:
    """db_id -> sqlite file for every `database/<db_id>/<db_id>.sqlite` under root."""
    found: dict[str, Path] = {}
    for db_dir in sorted((root / "database").iterdir()):
        candidate = db_dir / f"{db_dir.name}.sqlite"
        if candidate.is_file():
            found[db_dir.name] = candidate
    return found


def read_question_file(path: Path, id_prefix: str | None = None) -> list[RawQuestion]:
    """Questions from a JSON list or JSONL file of {db_id, question, query} objects."""
    if not path.is_file():
        raise DataError(f"question file not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".jsonl":
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            items = json.loads(text)
    except ValueError as exc:
        raise DataError(f"{path} is not valid JSON/JSONL: {exc}") from None
    if not isinstance(items, list):
        raise DataError(f"{path} must hold a list of question objects")
    prefix = id_prefix or path.stem
    questions = []
    for index, item in enumerate(items):
        missing = [k for k in ("db_id", "question", "query") if not isinstance(item, dict) or k not in item]
        if missing:
            raise DataError(f"{path}: entry {index} lacks {', '.join(missing)}")
        questions.append(
            RawQuestion(
                question_id=str(item.get("question_id") or f"{prefix}-{index:04d}"),
                db_id=str(item["db_id"]),
                question=str(item["question"]),
                sql=str(item["query"]),
                source_split=item.get("split"),
            )
        )
    return questions


def byo_databases(folder: Path) -> dict[str, Path]:
    """db_id -> file for `*.sqlite`/`*.db` files in a folder (or its Spider-style subfolders)."""
    found: dict[str, Path] = {}
    for pattern in ("*.sqlite", "*.sqlite3", "*.db", "*/*.sqlite", "database/*/*.sqlite"):
        for f in sorted(folder.glob(pattern)):
            found.setdefault(f.stem, f)
    return found


def byo_question_file(folder: Path) -> Path:
    for name in ("questions.jsonl", "questions.json"):
        if (folder / name).is_file():
            return folder / name
    raise DataError(f"{folder}: expected a questions.json or questions.jsonl file next to the databases")
