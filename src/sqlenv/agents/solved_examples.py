"""Solved examples: the train questions most like the episode's question, with their gold SQL,
shown in the prompt.

A small model recalls few of the queries it was trained on: SmolLM2-135M fine-tuned without
examples answered 27 of the 129 spider10 eval questions whose query it had seen in training as
another question's (docs/lab-notebook.md). Shown
the most similar solved questions of the same database in its prompt, a model can copy or adapt a
query from its context instead of recalling it from its weights.

Retrieval is lexical and restricted to the episode's database. A train question scores the cosine
similarity of its question to the episode's question plus that of its gold SQL's words (identifiers
split at underscores: `T1.document_id` is `t1 document id`) to the episode's question, each under
TF-IDF fitted on the train split (scikit-learn, sublinear term frequency, a few function words
dropped). The SQL half finds the query whose columns and values the question names when the wording
differs ("the largest amount of horsepower" and `ORDER BY T2.horsepower`). A train question is
never shown its own answer: examples with the same question text are left out.

Of the 330 spider10 train questions whose query another train question of the same database asks
too, the first example is such a twin for 260 when each is left out in turn (the questions alone:
237), which is how the equal weight of the two halves was chosen. Of the 129 eval questions with a
train twin, the first example is one for 100 and one of the first three for 121 (the questions
alone: 94 and 114).
`EXAMPLES_RANKING` names the ranking; an episode journal records it, so that a run started with
one ranking is never continued with another (`sqlenv.evaluation.journal`).

The database is found from the observation's table list (the first line of `schema_info`), which
is what a policy always sees; databases with the same table list share their examples. An episode on a database without train
questions gets no examples and the prompt has no examples block.

The SFT data, the GRPO prompts and the chat policies build the prompt with the same
`question_message`, so a model is evaluated on the prompt it was trained on; a trained model's
directory records the count it was trained with (`PROMPT_SETTINGS_FILE`). `sqlenv eval
--solved-examples N` overrides it for every chat policy of a run, presets and OpenAI servers included
(through $SQLENV_SOLVED_EXAMPLES, which a local Ray cluster's workers inherit).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from sqlenv.data import Dataset
    from sqlenv.data.records import QuestionRecord
    from sqlenv.env.models import SQLObservation

__all__ = [
    "EXAMPLES_RANKING",
    "PROMPT_SETTINGS_FILE",
    "SolvedExamples",
    "check_solved_examples_count",
    "examples_text",
    "read_prompt_settings",
    "write_prompt_settings",
]

# Written next to a trained model's weights: the prompt settings it was trained with.
PROMPT_SETTINGS_FILE = "sqlenv_prompt.json"

# Function words only: "how many", "each", "all" and "not" change the query and stay.
_STOP_WORDS = [
    "the", "a", "an", "of", "in", "on", "for", "to", "is", "are", "what", "which", "how", "with",
    "and", "or", "by", "that", "from", "as", "be", "do", "does", "did", "their", "its", "there",
]  # fmt: skip

EXAMPLES_HEADING = "Solved questions on this database, most similar first:"
# How `SolvedExamples` ranks (module docstring); before it was named, it ranked by "question" alone.
EXAMPLES_RANKING = "question+sql"


def check_solved_examples_count(count: object, where: str = "") -> int:
    """`count` if it is a whole number >= 0 (not a bool); otherwise a ValueError, naming `where`
    (a file) when given. The config, the prompt-settings file and the policies all check with it."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        prefix = f"{where}: " if where else ""
        raise ValueError(f"{prefix}solved_examples must be a whole number >= 0, not {count!r}")
    return count


def _sql_words(sql: str) -> str:
    """A query's words for retrieval: lower case, split at anything not a letter or digit
    (underscores included, so identifiers give their words)."""
    return " ".join(word.lower() for word in re.findall(r"[A-Za-z0-9]+", sql.replace("_", " ")))


class _TfidfIndex:
    """TF-IDF vectors of a list of texts, and their cosine similarity to a question."""

    def __init__(self, texts: list[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(stop_words=_STOP_WORDS, sublinear_tf=True)
        # TF-IDF cannot be fitted on nothing; an empty split has no rows to ask about either.
        self.matrix = self.vectorizer.fit_transform(texts) if texts else None

    def similarity(self, question: str, rows: list[int]) -> np.ndarray:
        """The similarity of `question` to each text of `rows`, in that order."""
        assert self.matrix is not None, "no texts to compare with"
        return (self.matrix[rows] @ self.vectorizer.transform([question]).T).toarray().ravel()


class SolvedExamples:
    """The `count` train questions most like a question on its database (module docstring)."""

    def __init__(self, dataset: Dataset, count: int, *, split: str = "train") -> None:
        if count < 1:
            raise ValueError(f"the number of solved examples must be at least 1, not {count}")
        from sqlenv.sandbox.schema import catalog_for

        self.count = count
        self._records: list[QuestionRecord] = list(dataset.split(split))
        self._question_index = _TfidfIndex([r.question for r in self._records])
        self._sql_index = _TfidfIndex([_sql_words(r.gold_sql) for r in self._records])
        self._rows_by_database: dict[str, list[int]] = {}
        for row, record in enumerate(self._records):
            self._rows_by_database.setdefault(record.db_id, []).append(row)
        self._databases_by_tables: dict[str, set[str]] = {}
        for db_id in sorted({r.db_id for r in self._records}):
            tables = catalog_for(dataset.db_path(db_id)).table_list_text
            self._databases_by_tables.setdefault(tables, set()).add(db_id)

    def for_question(self, question: str, databases: set[str]) -> list[QuestionRecord]:
        """The most similar train questions on `databases`, best first, never `question` itself."""
        rows = sorted(row for db_id in databases for row in self._rows_by_database.get(db_id, []))
        candidates = [row for row in rows if self._records[row].question != question]
        if not candidates:
            return []
        scores = self._question_index.similarity(question, candidates) + self._sql_index.similarity(
            question, candidates
        )
        # Stable: equal scores keep the split's order, so the prompt is the same on every run.
        ranked = sorted(range(len(candidates)), key=lambda i: -scores[i])
        return [self._records[candidates[i]] for i in ranked[: self.count]]

    def for_observation(self, observation: SQLObservation) -> list[QuestionRecord]:
        from sqlenv.agents.policy import table_list_line

        # Keyed by the table list line alone: a shown schema's statements follow it.
        databases = self._databases_by_tables.get(table_list_line(observation.schema_info), set())
        return self.for_question(observation.question, databases)


def examples_text(records: list[QuestionRecord]) -> str:
    """The examples block of the question message ("" for none)."""
    if not records:
        return ""
    lines = [EXAMPLES_HEADING]
    for record in records:
        lines += [f"Q: {record.question}", f"SQL: {' '.join(record.gold_sql.split())}"]
    return "\n".join(lines)


def write_prompt_settings(model_dir: str | Path, *, solved_examples: int) -> None:
    Path(model_dir, PROMPT_SETTINGS_FILE).write_text(
        json.dumps({"solved_examples": solved_examples}) + "\n", encoding="utf-8"
    )


def read_prompt_settings(model: str | Path) -> dict[str, Any]:
    """The prompt settings a local model was trained with ({} for a preset, a hub id or a model
    trained before they were recorded: no solved examples)."""
    path = Path(model).expanduser() / PROMPT_SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a readable prompt-settings file: {error}") from None
    count = settings.get("solved_examples", 0) if isinstance(settings, dict) else None
    return {"solved_examples": check_solved_examples_count(count, str(path))}
