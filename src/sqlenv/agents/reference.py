"""The two reference policies that bound every agent's score: `RandomPolicy` (the floor) and
`OraclePolicy` (the ceiling: it knows the gold SQL and answer)."""

from __future__ import annotations

import random

from sqlenv.agents.policy import table_names
from sqlenv.data import Dataset
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.env.verifier import format_answer

__all__ = ["OraclePolicy", "RandomPolicy"]


class RandomPolicy:
    """Uniformly random actions with plausible arguments: a floor every agent must beat."""

    name = "random"
    format_errors = 0

    def __init__(self, seed: int = 0, answer_probability: float = 0.15) -> None:
        self._rng = random.Random(seed)
        self.answer_probability = answer_probability
        self._seed = seed
        self._tables: list[str] = []

    def clone(self) -> RandomPolicy:
        return RandomPolicy(self._seed, self.answer_probability)

    def reset(self, observation: SQLObservation, seed: int) -> None:
        self._rng = random.Random(seed)
        self._tables = table_names(observation) or ["unknown"]

    def act(self, observation: SQLObservation) -> SQLAction:
        rng = self._rng
        table = rng.choice(self._tables)
        if rng.random() < self.answer_probability or observation.budget_remaining <= 1:
            answer = rng.choice([str(rng.randint(0, 100)), table, "yes", f"{rng.random() * 100:.2f}"])
            return SQLAction(action_type="ANSWER", argument=answer)
        kind = rng.choice(["DESCRIBE", "SAMPLE", "QUERY"])
        if kind != "QUERY":
            return SQLAction(action_type=kind, argument=table)
        sql = rng.choice(
            [
                f'SELECT COUNT(*) FROM "{table}"',
                f'SELECT * FROM "{table}" LIMIT {rng.randint(1, 10)}',
                f'SELECT * FROM "{table}" ORDER BY 1 DESC LIMIT 1',
                f'SELECT DISTINCT * FROM "{table}"',
            ]
        )
        return SQLAction(action_type="QUERY", argument=sql)


class OraclePolicy:
    """Knows the gold SQL: describes the tables involved, runs the gold query, answers with the
    gold answer in the verifier's canonical format, or with the gold SQL when the environment is
    in SQL-answer mode (the observation's metadata says which). Needs the dataset to look
    questions up."""

    name = "oracle"
    format_errors = 0

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self._plan: list[SQLAction] = []

    def clone(self) -> OraclePolicy:
        return OraclePolicy(self.dataset)  # the dataset is read-only: shared, not copied

    def reset(self, observation: SQLObservation, seed: int) -> None:
        record = self.dataset.get(observation.metadata["question_id"])
        by_folded = {t.casefold(): t for t in table_names(observation)}
        tables = [by_folded[t] for t in record.tables_involved if t in by_folded]
        room = max(observation.budget_remaining - 2, 0)  # keep a step for the query and the answer
        plan = [SQLAction(action_type="DESCRIBE", argument=t) for t in tables[:room]]
        if observation.budget_remaining >= 2:
            plan.append(SQLAction(action_type="QUERY", argument=record.gold_sql))
        if observation.metadata.get("answer_mode") == "sql":
            answer = record.gold_sql
        else:
            answer = format_answer(record.gold_answer, record.answer_type)
        plan.append(SQLAction(action_type="ANSWER", argument=answer))
        self._plan = plan

    def act(self, observation: SQLObservation) -> SQLAction:
        if len(self._plan) > 1:
            return self._plan.pop(0)
        return self._plan[0]
