"""A built dataset: its databases, its question records and their splits."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlenv.data.overlap import TRAIN_SPLIT, gold_keys, overlap_key
from sqlenv.data.records import QuestionRecord


@dataclass
class Dataset:
    name: str
    databases: dict[str, Path]
    records: tuple[QuestionRecord, ...]
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count of questions left out
    _by_id: dict[str, QuestionRecord] = field(default_factory=dict, repr=False)
    _by_split: dict[str, tuple[QuestionRecord, ...]] = field(default_factory=dict, repr=False)
    _train_gold: frozenset[tuple[str, str]] | None = field(default=None, repr=False)  # built on first use

    def __post_init__(self) -> None:
        self._by_id = {r.question_id: r for r in self.records}
        splits: dict[str, list[QuestionRecord]] = {}
        for r in self.records:
            splits.setdefault(r.split, []).append(r)
        self._by_split = {k: tuple(v) for k, v in splits.items()}

    @property
    def split_names(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_split))

    def split(self, name: str) -> tuple[QuestionRecord, ...]:
        if name not in self._by_split:
            raise KeyError(
                f"dataset {self.name!r} has no split {name!r}; splits: {', '.join(self.split_names)}"
            )
        return self._by_split[name]

    def get(self, question_id: str) -> QuestionRecord:
        try:
            return self._by_id[question_id]
        except KeyError:
            raise KeyError(f"unknown question_id {question_id!r} in dataset {self.name!r}") from None

    def __contains__(self, question_id: object) -> bool:
        return question_id in self._by_id

    def seen_in_train(self, question_id: str) -> bool | None:
        """Whether a train question has the same gold SQL (`sqlenv.data.overlap`); None for a train
        question, or in a dataset without a train split."""
        record = self.get(question_id)
        if record.split == TRAIN_SPLIT or TRAIN_SPLIT not in self._by_split:
            return None
        if self._train_gold is None:
            # Only train questions on databases other splits use can match (none in Spider's own
            # train/dev, which share no database): the rest are not parsed.
            others = {r.db_id for r in self.records if r.split != TRAIN_SPLIT}
            self._train_gold = gold_keys(r for r in self._by_split[TRAIN_SPLIT] if r.db_id in others)
        return overlap_key(record) in self._train_gold

    def db_path(self, db_id: str) -> Path:
        return self.databases[db_id]

    def summary(self) -> dict[str, Any]:
        """Counts for `sqlenv data info`."""
        return {
            "name": self.name,
            "databases": len({r.db_id for r in self.records}),
            "questions": len(self.records),
            "splits": {name: len(self._by_split[name]) for name in self.split_names},
            "by_difficulty": {
                name: dict(sorted(Counter(r.difficulty for r in self._by_split[name]).items()))
                for name in self.split_names
            },
            "by_answer_type": {
                name: dict(sorted(Counter(r.answer_type for r in self._by_split[name]).items()))
                for name in self.split_names
            },
            "empty_gold": {
                name: sum(r.empty_gold for r in self._by_split[name]) for name in self.split_names
            },
            "dropped": dict(self.dropped),
        }
