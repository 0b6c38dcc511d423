"""Train overlap: which questions share their gold SQL with a question of the train split.

Spider words many questions more than one way, and a preset such as spider10 draws its train and
eval splits from the same databases, so an eval question can have a train "twin" that asks for the
same query in other words. A model trained on the train split can answer such a question by
recalling the query; success on the others measures what it learnt to do. Evaluation results show
the two apart (`EvaluationResult.by_train_overlap`).

Two gold queries match when they run on the same database and are equal once canonicalised with
sqlglot (SQLite dialect): keyword and identifier case, spacing, alias case and a trailing semicolon
do not matter, and a double-quoted word that SQLite would read as a string ("Bob", as Spider often
writes) counts as the string 'Bob'. String literals keep their case. Queries that do not parse are
compared with their case and spacing folded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from sqlenv.data.records import QuestionRecord

__all__ = ["TRAIN_SPLIT", "canonical_sql", "gold_keys", "overlap_key"]

TRAIN_SPLIT = "train"


def _quoted_word_as_string(node: exp.Expression) -> exp.Expression:
    # sqlglot reads `name = "Bob"` as a quoted column; SQLite falls back to the string 'Bob' when no
    # such column exists, and that is what Spider means by it.
    if isinstance(node, exp.Column) and not node.table and node.this.args.get("quoted"):
        return exp.Literal.string(node.name)
    return node


def canonical_sql(sql: str) -> str:
    """`sql` in one canonical spelling, for deciding whether two gold queries are the same."""
    text = sql.strip().rstrip(";").strip()
    try:
        statements = [s for s in sqlglot.parse(text, read="sqlite") if s is not None]
    except SqlglotError:
        statements = []
    if len(statements) != 1:
        return re.sub(r"\s+", " ", text.lower())
    tree = statements[0].transform(_quoted_word_as_string)
    return tree.sql(dialect="sqlite", normalize=True)


def overlap_key(record: QuestionRecord) -> tuple[str, str]:
    """(database, canonical gold SQL): questions with equal keys ask for the same query."""
    return (record.db_id, canonical_sql(record.gold_sql))


def gold_keys(records: Iterable[QuestionRecord]) -> frozenset[tuple[str, str]]:
    return frozenset(overlap_key(r) for r in records)
