"""The episode state machine: `SQLEnvironment`, an OpenEnv `Environment`.

reset() picks a question (seeded, or by id) and shows the question and the table names only;
with `EnvConfig.show_schema` (a control), its `schema_info` also holds every table's CREATE TABLE
statement (`DatabaseCatalog.schema_text`), while later observations name the tables as always.
step() runs one action — DESCRIBE, SAMPLE, QUERY or ANSWER — spends one step of the budget and
pays the reward of `sqlenv.env.rewards`. ANSWER or an exhausted budget ends the episode; after the
end every action gets an error and changes nothing. What ANSWER takes follows
`EnvConfig.answer_mode`: the answer value ("value"), or one read-only SQL statement whose result is
graded by Spider's execution match ("sql"); every observation's metadata names the mode. Invalid actions (unknown type, unknown
table, refused SQL) are errors the agent reads; they spend a step and never raise.
"""

from __future__ import annotations

import asyncio
import functools
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from sqlenv.config import DEFAULT_CONFIG, EnvConfig, SandboxLimits, answer_sql_limits
from sqlenv.data import Dataset, QuestionRecord, load_dataset
from sqlenv.data.records import normalize_cell
from sqlenv.env.models import ACTION_TYPES, SQLAction, SQLObservation, SQLState
from sqlenv.env.rewards import (
    GoldProfile,
    exploration_reward_parts,
    progress_potential,
    repeat_text_of_folded,
    terminal_reward,
)
from sqlenv.env.verifier import Verdict, execution_match, verify_answer
from sqlenv.sandbox.executor import SandboxError
from sqlenv.sandbox.pool import SHARED_SANDBOXES
from sqlenv.sandbox.rendering import render_result
from sqlenv.sandbox.schema import DatabaseCatalog, catalog_for
from sqlenv.settings import query_threads_from_environment

# Under a server, QUERY and ANSWER run on this small shared pool; everything else is answered on
# the event loop (see step_async). SQLite releases the GIL while it executes, so a few threads
# use both cores; a slow query holds one thread, never the loop.
_query_pool: ThreadPoolExecutor | None = None


def _shared_query_pool() -> ThreadPoolExecutor:
    global _query_pool
    if _query_pool is None:
        _query_pool = ThreadPoolExecutor(
            max_workers=query_threads_from_environment(), thread_name_prefix="sqlenv-query")
    return _query_pool


_NO_EPISODE = "no episode is running: call reset() first"


@dataclass
class _Episode:
    episode_id: str
    record: QuestionRecord
    catalog: DatabaseCatalog
    budget: int
    step_count: int = 0
    done: bool = False
    history: list[str] = field(default_factory=list)
    seen_actions: set[tuple[str, int]] = field(default_factory=set)  # (type, hash of argument)
    seen_info: set[object] = field(default_factory=set)
    phi: float = 0.0
    operational_total: float = 0.0
    progress_total: float = 0.0
    terminal_total: float = 0.0
    answered: bool = False
    correct: bool | None = None

    @property
    def total_reward(self) -> float:
        return self.operational_total + self.progress_total + self.terminal_total


@dataclass
class _Outcome:
    """What an action produced before rewards: text for the agent and facts for the reward."""

    result: str = ""
    error: str = ""
    executed: bool = False
    new_info: bool = False
    phi: float | None = None  # set by a successful QUERY


class SQLEnvironment(Environment[SQLAction, SQLObservation, SQLState]):
    """Answer a question about a SQLite database by exploring it within a step budget."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # Not a thread-safety need: OpenEnv's server otherwise gives every WebSocket session its own
    # ThreadPoolExecutor, and so its own OS thread (~23 KB of RSS) for as long as the session
    # lives. Its only synchronous calls under the server are construction and close() (reset and
    # step are async here), which are microseconds: one shared thread serves them all. OpenEnv
    # reads this flag only when the factory is the class or a functools.partial of it.
    REQUIRES_SINGLE_THREAD_EXECUTOR = True

    def __init__(
        self,
        dataset: str | Dataset = "demo",
        split: str = "train",
        spider_dir: str | Path | None = None,
        config: EnvConfig | None = None,
    ) -> None:
        super().__init__()
        self.config = config or DEFAULT_CONFIG
        self.dataset = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, spider_dir)
        self.split = split
        self.questions = self.dataset.split(split)
        if not self.questions:
            raise ValueError(f"split {split!r} of dataset {self.dataset.name!r} has no questions")
        self._episode: _Episode | None = None

    @functools.cached_property
    def _rng(self) -> random.Random:
        """The generator of unseeded resets, made on first use: a Random holds ~2.5 KB of state,
        which an idle server session (or one that always resets by id or seed) never needs."""
        return random.Random()

    @functools.cached_property
    def _answer_limits(self) -> SandboxLimits:
        """The sandbox limits of an SQL answer's statement, made on first use: only sessions in
        answer mode "sql" that reach ANSWER need them."""
        return answer_sql_limits(self.config.sandbox)

    # ---- OpenEnv API -------------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        question_id: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> SQLObservation:
        """Start an episode on `question_id`; or on task `index` of `split` (OpenEnv's task API,
        `split` defaulting to this environment's); or on a question drawn from the split (seeded).

        Raises:
            KeyError: an unknown question_id.
            ValueError: an unknown argument or split, or an index outside the split.
        """
        if kwargs:
            raise ValueError(f"unknown reset argument(s): {', '.join(sorted(kwargs))}")
        if question_id is not None and index is not None:
            raise ValueError("reset takes a question_id or a split and index, not both")
        if index is not None:
            record = self._task_record(split or self.split, index, ValueError)
        elif split is not None:
            raise ValueError("reset(split=...) needs index= too (a task of that split)")
        elif question_id is not None:
            record = self.dataset.get(question_id)
        else:
            rng = random.Random(seed) if seed is not None else self._rng
            record = self.questions[rng.randrange(len(self.questions))]
        catalog = catalog_for(self.dataset.db_path(record.db_id))
        self._episode = _Episode(
            episode_id=episode_id or uuid.uuid4().hex,
            record=record,
            catalog=catalog,
            budget=self.config.step_budget,
        )
        schema = catalog.schema_text if self.config.show_schema else catalog.table_list_text
        return self._observation(self._episode, result="", error="", reward=None, schema_info=schema)

    def step(self, action: SQLAction, timeout_s: float | None = None, **kwargs: Any) -> SQLObservation:
        ep = self._episode
        if not isinstance(action, SQLAction):
            action = SQLAction.model_validate(action)
        if ep is None:
            return SQLObservation(error=_NO_EPISODE, done=True, reward=0.0)
        if ep.done:
            return self._observation(
                ep,
                result="",
                error="the episode is over (it ended with ANSWER or an exhausted budget): call reset() "
                "to start a new one",
                reward=0.0,
            )
        kind = action.action_type.strip().upper()
        argument = action.argument
        ep.step_count += 1
        # Whitespace folded once, for both the history line and the repeat key.
        folded = " ".join(argument.split())
        ep.history.append(f"{kind or '?'} {_shorten(folded)}".rstrip())
        if kind == "ANSWER":
            return self._answer(ep, argument, timeout_s)
        # A hash, not the text: an episode's memory must not grow with the size of its arguments.
        action_key = (kind, hash(repeat_text_of_folded(folded)))
        repeat = not _add_if_new(ep.seen_actions, action_key)
        outcome = self._explore(ep, kind, argument, timeout_s)
        phi_before = ep.phi
        if outcome.phi is not None:
            ep.phi = outcome.phi
        # The parts without StepOutcome/StepReward objects: this runs on every step.
        operational, progress = exploration_reward_parts(
            outcome.executed, outcome.new_info, repeat, phi_before, ep.phi, self.config.reward
        )
        ep.operational_total += operational
        ep.progress_total += progress
        result = outcome.result
        terminal = 0.0
        if ep.step_count >= ep.budget:
            ep.done = True
            ep.correct = False
            # Paid on this step's observation too, so that observed rewards sum to total_reward.
            terminal = terminal_reward(False, self.config.reward)
            ep.terminal_total += terminal
            result = (result + "\n" if result else "") + "Step budget exhausted: the episode is over."
        return self._observation(
            ep,
            result=result,
            error=outcome.error,
            reward=operational + progress + terminal,
            reward_components={"operational": operational, "progress": progress, "terminal": terminal},
        )

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        question_id: str | None = None,
        **kwargs: Any,
    ) -> SQLObservation:
        """reset() is a dictionary lookup and a catalog read: done on the event loop. With the
        schema shown it runs on the shared pool instead: the first reset on a database reads
        every table's PRAGMAs (6 ms for Spider's largest), which would hold the loop."""
        if self.config.show_schema:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                _shared_query_pool(),
                lambda: self.reset(seed=seed, episode_id=episode_id, question_id=question_id, **kwargs),
            )
        return self.reset(seed=seed, episode_id=episode_id, question_id=question_id, **kwargs)

    # ---- OpenEnv's task API (TaskProvider): the questions of each split, never their gold --------

    def list_splits(self) -> list[dict[str, Any]]:
        """The dataset's splits as OpenEnv task splits: name, type ("train" or "test") and size."""
        return [
            {"name": name, "type": "train" if name == "train" else "test", "num_tasks": len(self.dataset.split(name))}
            for name in self.dataset.split_names
        ]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        """Every task of `split` (`get_task`'s shape), in the split's order."""
        return self.get_task_range(split, 0, self.num_tasks(split))

    def num_tasks(self, split: str) -> int:
        """How many questions `split` has."""
        return len(self._split_records(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        """Task `index` of `split`: its id (the question_id), the question, database, difficulty
        and answer type; play it with `reset(split=split, index=index)`.

        Raises:
            IndexError: an index outside the split (OpenEnv answers 400).
        """
        return _task(self._task_record(split, index, IndexError), split, index)

    def get_task_range(self, split: str, start: int, stop: int) -> list[dict[str, Any]]:
        """Tasks `start` to `stop` (exclusive) of `split`, clipped to the split."""
        records = self._split_records(split)
        if start < 0 or stop < start:
            raise IndexError(f"bad task range {start}:{stop}")
        return [_task(r, split, start + i) for i, r in enumerate(records[start:stop])]

    def _split_records(self, split: str) -> tuple[QuestionRecord, ...]:
        if split not in self.dataset.split_names:
            # IndexError: OpenEnv's task routes answer it with 400, anything else with 500.
            raise IndexError(f"unknown split {split!r}; splits: {', '.join(self.dataset.split_names)}")
        return self.dataset.split(split)

    def _task_record(self, split: str, index: int, error: type[Exception]) -> QuestionRecord:
        try:
            records = self._split_records(split)
        except IndexError as exc:
            raise error(str(exc)) from None
        if not 0 <= index < len(records):
            raise error(f"task index {index} is outside split {split!r} (0 to {len(records) - 1})")
        return records[index]

    async def step_async(
        self, action: SQLAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SQLObservation:
        """The server path. Cheap actions (DESCRIBE/SAMPLE already in the catalog's cache, errors,
        steps after the end) run inline on the event loop, saving the thread hop that dominates
        their cost; QUERY, ANSWER (whose gold comparison can be large) and first reads of a table
        go to the shared pool, so a slow query never stalls other sessions."""
        if not isinstance(action, SQLAction):
            action = SQLAction.model_validate(action)
        if self._needs_pool(action):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_shared_query_pool(), lambda: self.step(action, timeout_s))
        return self.step(action, timeout_s)

    def _needs_pool(self, action: SQLAction) -> bool:
        ep = self._episode
        if ep is None or ep.done:
            return False
        kind = action.action_type.strip().upper()
        if kind in ("QUERY", "ANSWER"):
            return True
        if kind in ("DESCRIBE", "SAMPLE"):  # the first read of a table touches the file
            table = ep.catalog.resolve_table(action.argument)
            return table is not None and not ep.catalog.is_cached(kind, table, self.config.sample_rows)
        return False

    @property
    def state(self) -> SQLState:
        ep = self._episode
        if ep is None:
            return SQLState(step_budget=self.config.step_budget)
        return SQLState(
            episode_id=ep.episode_id,
            step_count=ep.step_count,
            question_id=ep.record.question_id,
            db_id=ep.record.db_id,
            difficulty=ep.record.difficulty,
            step_budget=ep.budget,
            done=ep.done,
            total_reward=ep.total_reward,
            shaping_reward=ep.operational_total + ep.progress_total,
            operational_reward=ep.operational_total,
            progress_reward=ep.progress_total,
            terminal_reward=ep.terminal_total,
            progress=ep.phi,
            answered=ep.answered,
            correct=ep.correct,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="sqlenv",
            description="Answer questions about SQLite databases by exploring them: DESCRIBE a table, "
            "SAMPLE rows, run a read-only QUERY, then ANSWER, within a step budget."
            + (" ANSWER takes one SQL statement, graded by execution match." if self.config.answer_mode == "sql" else ""),
            version="0.1.0",
            author="sqlenv developers",
        )

    def close(self) -> None:
        """Nothing to release: sandboxes belong to the process-wide pool, not to a session."""
        self._episode = None

    # ---- actions -----------------------------------------------------------------------------

    def _explore(self, ep: _Episode, kind: str, argument: str, timeout_s: float | None) -> _Outcome:
        if kind in ("DESCRIBE", "SAMPLE"):
            table = ep.catalog.resolve_table(argument)
            if table is None:
                what = "a table name" if not argument.strip() else f"unknown table {_short(argument)!r}"
                return _Outcome(error=f"{kind} needs {what}; tables: {', '.join(ep.catalog.tables)}")
            if kind == "DESCRIBE":
                text = ep.catalog.describe(table)
            else:
                text = ep.catalog.sample(table, self.config.sample_rows, self.config.sandbox)
            new_info = _add_if_new(ep.seen_info, (kind, table))
            return _Outcome(result=text, executed=True, new_info=new_info)
        if kind == "QUERY":
            return self._query(ep, argument, timeout_s)
        return _Outcome(
            error=f"unknown action type {_short(kind) or '(empty)'!r}; use one of: {', '.join(ACTION_TYPES)}"
        )

    def _query(self, ep: _Episode, sql: str, timeout_s: float | None) -> _Outcome:
        try:
            with SHARED_SANDBOXES.lease(
                self.dataset.db_path(ep.record.db_id), self.config.sandbox
            ) as sandbox:
                result = sandbox.execute(sql, time_limit_s=self._time_limit(timeout_s))
        except SandboxError as exc:
            return _Outcome(error=str(exc))
        # The key holds the whole result, so hashing it costs a pass over every kept cell: once.
        new_info = _add_if_new(ep.seen_info, ("RESULT", result.columns, result.rows, result.truncated))
        phi = progress_potential(
            result.rows, _gold_profile(ep.record), self.config.reward, self.config.float_tolerance
        )
        return _Outcome(
            result=render_result(result, self.config.sandbox), executed=True, new_info=new_info, phi=phi
        )

    def _answer(self, ep: _Episode, argument: str, timeout_s: float | None = None) -> SQLObservation:
        record = ep.record
        limit = self.config.max_answer_chars
        if len(argument) > limit:  # verification time grows with the answer: bound it
            verdict = Verdict(
                False, f"wrong: the answer is too long ({len(argument)} characters, limit {limit})"
            )
        elif self.config.answer_mode == "sql":
            verdict = self._verify_answer_sql(ep, argument, timeout_s)
        else:
            verdict = verify_answer(
                argument,
                record.gold_answer,
                record.answer_type,
                record.order_sensitive,
                self.config.float_tolerance,
            )
        reward = terminal_reward(verdict.correct, self.config.reward)
        ep.done = True
        ep.answered = True
        ep.correct = verdict.correct
        ep.terminal_total += reward
        obs = self._observation(ep, result=verdict.reason, error="", reward=reward)
        obs.metadata["correct"] = verdict.correct
        obs.metadata["reward_components"] = {"operational": 0.0, "progress": 0.0, "terminal": reward}
        return obs

    def _verify_answer_sql(self, ep: _Episode, sql: str, timeout_s: float | None) -> Verdict:
        """Run the answer's statement in the sandbox and grade its result by execution match."""
        if not sql.strip():
            return Verdict(False, "wrong: the answer must be one read-only SQL statement (answer mode 'sql')")
        try:
            with SHARED_SANDBOXES.lease(self.dataset.db_path(ep.record.db_id), self._answer_limits) as sandbox:
                result = sandbox.execute(sql, time_limit_s=self._time_limit(timeout_s))
        except SandboxError as exc:
            return Verdict(False, f"wrong: the answer's SQL did not run: {exc}")
        record = ep.record
        if result.truncated:  # more rows than any gold result has
            return Verdict(False, f"wrong: the query returned more than {len(result.rows)} rows")
        rows = [tuple(normalize_cell(c) for c in row) for row in result.rows]
        if execution_match(rows, record.gold_answer, record.order_sensitive):
            return Verdict(True, "correct: the query's result matches the gold result")
        if len(rows) != len(record.gold_answer):
            return Verdict(False, f"wrong: the query returned {_rows(len(rows))}, not the expected result")
        return Verdict(False, "wrong: the query's result differs from the expected result")

    def _time_limit(self, timeout_s: float | None) -> float:
        limit = self.config.sandbox.time_limit_s
        if timeout_s is not None and timeout_s > 0:
            limit = min(limit, timeout_s)
        return limit

    def _observation(
        self,
        ep: _Episode,
        *,
        result: str,
        error: str,
        reward: float | None,
        reward_components: dict[str, float] | None = None,
        schema_info: str | None = None,
    ) -> SQLObservation:
        """The observation of `ep` now; `reward_components`, when given, go into its metadata;
        `schema_info` replaces the table list (reset's, when the schema is shown)."""
        record = ep.record
        metadata: dict[str, Any] = {
            "question_id": record.question_id,
            "db_id": record.db_id,
            "difficulty": record.difficulty,
            "episode_id": ep.episode_id,
            "answer_mode": self.config.answer_mode,
            "show_schema": self.config.show_schema,
        }
        if reward_components is not None:
            metadata["reward_components"] = reward_components
        # In SQLObservation's field order, as its validating constructor would store them.
        return _trusted_observation(
            {
                "done": ep.done,
                "reward": reward,
                "metadata": metadata,
                "question": record.question,
                "schema_info": ep.catalog.table_list_text if schema_info is None else schema_info,
                "result": result,
                "error": error,
                "step_count": ep.step_count,
                "budget_remaining": max(ep.budget - ep.step_count, 0),
                "action_history": ep.history.copy(),  # the episode's list keeps growing
            }
        )


# Gold profiles by record identity (the record is kept alive alongside, so ids stay unique).
_GOLD_PROFILES: dict[int, tuple[QuestionRecord, GoldProfile]] = {}


def _gold_profile(record: QuestionRecord) -> GoldProfile:
    entry = _GOLD_PROFILES.get(id(record))
    if entry is None or entry[0] is not record:
        entry = (record, GoldProfile.of(record.gold_answer))
        _GOLD_PROFILES[id(record)] = entry
    return entry[1]


def _task(record: QuestionRecord, split: str, index: int) -> dict[str, Any]:
    return {
        "id": record.question_id,
        "index": index,
        "split": split,
        "question": record.question,
        "db_id": record.db_id,
        "difficulty": record.difficulty,
        "answer_type": record.answer_type,
    }


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def _short(text: str, limit: int = 120) -> str:
    return _shorten(" ".join(text.split()), limit)


def _shorten(folded: str, limit: int = 120) -> str:
    """_short of a text whose whitespace is already folded."""
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def _add_if_new(seen: set[Any], key: object) -> bool:
    """Add `key` to `seen`; whether it was new. One hash of the key instead of two
    (`in` then `add`), which matters when the key holds a whole query result."""
    size = len(seen)
    seen.add(key)
    return len(seen) != size


# The fields _observation fills, in SQLObservation's order. Should the model's fields ever differ
# (an OpenEnv upgrade adding one), observations are validated as usual instead.
_OBSERVATION_FIELD_ORDER = (
    "done", "reward", "metadata", "question", "schema_info", "result", "error", "step_count",
    "budget_remaining", "action_history",
)
_OBSERVATION_FIELDS = frozenset(_OBSERVATION_FIELD_ORDER)
_TRUST_OBSERVATIONS = tuple(SQLObservation.model_fields) == _OBSERVATION_FIELD_ORDER
_set_attribute = object.__setattr__


def _trusted_observation(values: dict[str, Any]) -> SQLObservation:
    """An SQLObservation holding `values` (every field, each already of its field's type),
    without pydantic's validation, which costs several microseconds on every step.

    What pydantic's model_construct does, minus its per-field default and alias handling (it is
    slower than validating): the instance's __dict__, the set of fields given (all of them, as
    the validating constructor records when every field is passed), and no extra or private
    values. tests/test_step_equivalence.py checks that the result equals the validated model.
    """
    if not _TRUST_OBSERVATIONS:
        return SQLObservation(**values)
    obs = SQLObservation.__new__(SQLObservation)
    _set_attribute(obs, "__dict__", values)
    _set_attribute(obs, "__pydantic_fields_set__", set(_OBSERVATION_FIELDS))
    _set_attribute(obs, "__pydantic_extra__", None)
    _set_attribute(obs, "__pydantic_private__", None)
    return obs
