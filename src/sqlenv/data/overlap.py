"""Train overlap: which questions share their gold SQL with a question of the train split.

Spider words many questions more than one way, and a preset such as spider10 draws its train and
eval splits from the same databases, so an eval question can have a train "twin" that asks for the
same query in other words. A model trained on the train split can answer such a question by
recalling the query; success on the others measures what it learnt to do. Evaluation results show
the two apart (`EvaluationResult.by_train_overlap`).

Presets can share questions too: spider10's splits are drawn from Spider's own dev questions, so a
model trained on spider10's train split has seen 434 of Spider dev's 972 usable questions.
`TrainSplitOverlap` says, for questions of any dataset, how they stand to one train split: the same
question, a twin, another query on a database the split trains on, or a database it never uses.

Two gold queries match when they run on the same database and are equal once canonicalised with
sqlglot (SQLite dialect): keyword and identifier case, spacing, alias case and a trailing semicolon
do not matter, and a double-quoted word that SQLite would read as a string ("Bob", as Spider often
writes) counts as the string 'Bob'. String literals keep their case. Queries that do not parse are
compared with their case and spacing folded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from sqlenv.data.records import QuestionRecord

__all__ = [
    "OTHER_DATABASE",
    "RELATIONS",
    "SAME_DATABASE",
    "SAME_GOLD",
    "SAME_QUESTION",
    "TRAIN_SPLIT",
    "TrainSplitOverlap",
    "canonical_sql",
    "gold_keys",
    "overlap_key",
]

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


# How a question stands to a train split (`TrainSplitOverlap.relation`), closest first.
SAME_QUESTION = "the same question"
SAME_GOLD = "a twin (a train question's gold SQL)"
SAME_DATABASE = "new SQL on a database it trains on"
OTHER_DATABASE = "a database it never trains on"
RELATIONS: tuple[str, ...] = (SAME_QUESTION, SAME_GOLD, SAME_DATABASE, OTHER_DATABASE)


def _question_key(record: QuestionRecord) -> tuple[str, str]:
    # The same question in two datasets: the same database and words (spacing and case folded).
    return (record.db_id, re.sub(r"\s+", " ", record.question.strip().lower()))


@dataclass(frozen=True)
class TrainSplitOverlap:
    """One train split's questions, gold queries and databases, to place other questions against."""

    questions: frozenset[tuple[str, str]]
    gold: frozenset[tuple[str, str]]
    databases: frozenset[str]

    @classmethod
    def of(cls, train: Iterable[QuestionRecord]) -> TrainSplitOverlap:
        """The overlap index of a train split.

        Args:
            train: the split's question records (`Dataset.split("train")`).

        Returns:
            The index `relation` reads.
        """
        records = list(train)
        return cls(
            questions=frozenset(_question_key(r) for r in records),
            gold=gold_keys(records),
            databases=frozenset(r.db_id for r in records),
        )

    def relation(self, record: QuestionRecord) -> str:
        """How `record` stands to the train split: one of `RELATIONS`, the closest that holds.

        Args:
            record: a question of any dataset (its database, words and gold SQL are compared).

        Returns:
            SAME_QUESTION when the split holds the question itself, SAME_GOLD when it holds another
            question with the same gold query on the same database, SAME_DATABASE when the
            question's database is one the split trains on, else OTHER_DATABASE.
        """
        if _question_key(record) in self.questions:
            return SAME_QUESTION
        if overlap_key(record) in self.gold:
            return SAME_GOLD
        return SAME_DATABASE if record.db_id in self.databases else OTHER_DATABASE
