"""The question record: one question, its database, its gold SQL and everything derived from it
once at dataset build time (gold answer rows, answer type, difficulty, tables, order)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

AnswerType = Literal["integer", "float", "string", "list", "table"]
ANSWER_TYPES: tuple[AnswerType, ...] = ("integer", "float", "string", "list", "table")
DIFFICULTIES: tuple[str, ...] = ("easy", "medium", "hard", "extra")

Cell = int | float | str | None


@dataclass(frozen=True)
class QuestionRecord:
    question_id: str
    question: str
    db_id: str
    gold_sql: str
    gold_answer: tuple[tuple[Cell, ...], ...]  # the gold result rows
    gold_columns: tuple[str, ...]
    answer_type: AnswerType
    difficulty: str
    tables_involved: tuple[str, ...]
    order_sensitive: bool
    split: str

    @property
    def empty_gold(self) -> bool:
        return len(self.gold_answer) == 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["gold_answer"] = [list(row) for row in self.gold_answer]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QuestionRecord:
        return cls(
            question_id=data["question_id"],
            question=data["question"],
            db_id=data["db_id"],
            gold_sql=data["gold_sql"],
            gold_answer=tuple(tuple(row) for row in data["gold_answer"]),
            gold_columns=tuple(data["gold_columns"]),
            answer_type=data["answer_type"],
            difficulty=data["difficulty"],
            tables_involved=tuple(data["tables_involved"]),
            order_sensitive=bool(data["order_sensitive"]),
            split=data["split"],
        )


def normalize_cell(value: object) -> Cell:
    """Make a SQLite cell JSON-safe: blobs become text, non-finite floats become text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bool):
        return int(value)
    return value  # type: ignore[return-value]


def infer_answer_type(rows: tuple[tuple[Cell, ...], ...], n_columns: int) -> AnswerType:
    """The answer's type from the shape and cell types of the gold rows."""
    if n_columns > 1:
        return "table"
    if len(rows) != 1:
        return "list"
    value = rows[0][0]
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return "string"
