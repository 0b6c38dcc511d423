"""The environment's per-step fast paths against a deliberately plain reference of the same rules.

`SQLEnvironment.step` builds observations without pydantic's validation, hashes a query result
once, renders cells through inline fast paths, short-cuts phi for the gold result and computes
value overlap over distinct cells. Here a reference written the plain way (a validated
SQLObservation, render_cell on every cell, `in` then `add`, phi through result_similarity's
formula over every cell, rewards through StepOutcome/StepReward) plays the same actions beside
the environment, and every observation must be equal: same field values (floats included), same
fields set, same JSON.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from sqlenv import SQLAction, SQLEnvironment, SQLObservation
from sqlenv.agents.policy import table_names
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.config import EnvConfig, RewardConfig, SandboxLimits
from sqlenv.data import Dataset
from sqlenv.env.environment import _gold_profile, _trusted_observation
from sqlenv.env.models import ACTION_TYPES
from sqlenv.env.rewards import (
    GoldProfile,
    StepOutcome,
    _value_key,
    _value_keys,
    exploration_reward,
    progress_potential,
    repeat_text,
    terminal_reward,
)
from sqlenv.env.verifier import rows_equal_unordered, verify_answer
from sqlenv.sandbox import TRUNCATION_MARKER, QueryResult, SandboxError, SQLSandbox, render_cell, render_table
from sqlenv.sandbox.rendering import render_result

SMALL = EnvConfig(
    step_budget=6,
    sandbox=SandboxLimits(max_rows_shown=3, max_cell_chars=10, max_result_chars=200, max_rows_kept=7),
)
CONFIGS = {"default": EnvConfig(), "small": SMALL}


# ---- the reference ------------------------------------------------------------------------------


def reference_render(
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    limits: SandboxLimits,
    total_text: str | None = None,
    max_rows: int | None = None,
) -> str:
    """render_table written plainly: render_cell on every cell of the header and shown rows,
    except ints, which render_table has always shown whole (SQLite's fit in 20 characters)."""
    shown = rows[: limits.max_rows_shown if max_rows is None else max_rows]
    width = limits.max_cell_chars
    lines = [
        " | ".join(str(c) if c.__class__ is int else render_cell(c, width) for c in row)
        for row in [columns, *shown]
    ]
    total = total_text if total_text is not None else str(len(rows))
    if len(shown) < len(rows) or (total_text is not None and total_text != str(len(shown))):
        lines.append(f"({len(shown)} of {total} rows shown)")
    else:
        lines.append(f"({total} row{'s' if total != '1' else ''})")
    text = "\n".join(lines)
    if len(text) > limits.max_result_chars:
        cut = text[: limits.max_result_chars].rsplit("\n", 1)[0]
        text = f"{cut}\n{TRUNCATION_MARKER} [output truncated at {limits.max_result_chars} characters]"
    return text


def reference_phi(rows: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], cfg: EnvConfig) -> float:
    """progress_potential written plainly: result_similarity's formula over every cell."""
    r = cfg.reward
    if len(rows) == len(gold) and (
        rows == gold
        or Counter(tuple(x) for x in rows) == Counter(tuple(x) for x in gold)
        or rows_equal_unordered(rows, gold, cfg.float_tolerance)
    ):
        return 1.0
    n, g = len(rows), len(gold)
    cardinality = min(n, g) / max(n, g) if max(n, g) else 1.0
    values = {_value_key(c) for row in rows for c in row}
    gold_values = frozenset(_value_key(c) for row in gold for c in row)
    common = len(values & gold_values)
    overlap = 2 * common / (len(values) + len(gold_values)) if common else 0.0
    scalar = None
    if (
        len(gold) == 1
        and len(gold[0]) == 1
        and isinstance(gold[0][0], int | float)
        and not isinstance(gold[0][0], bool)
    ):
        scalar = float(gold[0][0])
    if scalar is None:
        raw = r.cardinality_weight * cardinality + r.overlap_weight * overlap
    else:
        closeness = 0.0
        scale = max(abs(scalar), 1e-9)
        for row in rows[: r.closeness_rows]:
            for cell in row:
                if isinstance(cell, int | float) and not isinstance(cell, bool):
                    closeness = max(closeness, 1.0 - min(1.0, abs(float(cell) - scalar) / scale))
        raw = (
            r.scalar_cardinality_weight * cardinality
            + r.scalar_overlap_weight * overlap
            + r.scalar_closeness_weight * closeness
        )
    if raw >= 1.0:
        return 1.0
    return min(math.floor(raw * r.progress_bins) / r.progress_bins, (r.progress_bins - 1) / r.progress_bins)


def plain_short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Reference:
    """One episode's bookkeeping and observations, kept the plain way."""

    env: SQLEnvironment
    first: SQLObservation
    history: list[str] = field(default_factory=list)
    seen_actions: set[tuple[str, int]] = field(default_factory=set)
    seen_info: set[object] = field(default_factory=set)
    step_count: int = 0
    phi: float = 0.0
    done: bool = False

    def observation(self, result: str, error: str, reward: float | None, **extra: Any) -> SQLObservation:
        record = self.env.dataset.get(self.first.metadata["question_id"])
        return SQLObservation(
            question=record.question,
            schema_info=self.first.schema_info,
            result=result,
            error=error,
            step_count=self.step_count,
            budget_remaining=max(self.env.config.step_budget - self.step_count, 0),
            action_history=list(self.history),
            done=self.done,
            reward=reward,
            metadata={**self.first.metadata, **extra},
        )

    def step(self, action: SQLAction) -> SQLObservation:
        cfg = self.env.config
        if self.done:
            return self.observation(
                "",
                "the episode is over (it ended with ANSWER or an exhausted budget): call reset() "
                "to start a new one",
                0.0,
            )
        kind = action.action_type.strip().upper()
        record = self.env.dataset.get(self.first.metadata["question_id"])
        self.step_count += 1
        self.history.append(f"{kind or '?'} {plain_short(action.argument)}".rstrip())
        if kind == "ANSWER":
            verdict = verify_answer(
                action.argument,
                record.gold_answer,
                record.answer_type,
                record.order_sensitive,
                cfg.float_tolerance,
            )
            self.done = True
            reward = terminal_reward(verdict.correct, cfg.reward)
            components = {"operational": 0.0, "progress": 0.0, "terminal": reward}
            return self.observation(
                verdict.reason, "", reward, correct=verdict.correct, reward_components=components
            )
        key = (kind, hash(repeat_text(action.argument)))
        repeat = key in self.seen_actions
        self.seen_actions.add(key)
        result, error, executed, new_info, phi = "", "", False, False, None
        catalog = self.env._episode.catalog  # the catalog's texts are tested on their own
        if kind in ("DESCRIBE", "SAMPLE"):
            table = catalog.resolve_table(action.argument)
            if table is None:
                what = (
                    "a table name"
                    if not action.argument.strip()
                    else f"unknown table {plain_short(action.argument)!r}"
                )
                error = f"{kind} needs {what}; tables: {', '.join(catalog.tables)}"
            else:
                result = (
                    catalog.describe(table)
                    if kind == "DESCRIBE"
                    else catalog.sample(table, cfg.sample_rows, cfg.sandbox)
                )
                executed = True
                new_info = (kind, table) not in self.seen_info
                self.seen_info.add((kind, table))
        elif kind == "QUERY":
            with SQLSandbox(self.env.dataset.db_path(record.db_id), cfg.sandbox) as sandbox:
                try:
                    found = sandbox.execute(action.argument, time_limit_s=cfg.sandbox.time_limit_s)
                except SandboxError as exc:
                    error = str(exc)
                else:
                    info = ("RESULT", found.columns, found.rows, found.truncated)
                    new_info = info not in self.seen_info
                    self.seen_info.add(info)
                    executed = True
                    phi = reference_phi(found.rows, record.gold_answer, cfg)
                    result = reference_render(found.columns, found.rows, cfg.sandbox, found.row_count_text)
        else:
            error = f"unknown action type {plain_short(kind) or '(empty)'!r}; use one of: {', '.join(ACTION_TYPES)}"
        before = self.phi
        if phi is not None:
            self.phi = phi
        reward = exploration_reward(StepOutcome(executed, new_info, repeat, before, self.phi), cfg.reward)
        terminal = 0.0
        if self.step_count >= cfg.step_budget:
            self.done = True
            terminal = terminal_reward(False, cfg.reward)
            result = (result + "\n" if result else "") + "Step budget exhausted: the episode is over."
        components = {"operational": reward.operational, "progress": reward.progress, "terminal": terminal}
        return self.observation(result, error, reward.total + terminal, reward_components=components)


def assert_same(obs: SQLObservation, expected: SQLObservation, where: str) -> None:
    assert type(obs) is SQLObservation, where
    assert obs.model_dump() == expected.model_dump(), where
    assert obs.model_dump_json() == expected.model_dump_json(), where  # float reprs included
    assert obs.model_fields_set == expected.model_fields_set, where
    assert obs == expected, where
    assert type(obs.reward) is type(expected.reward), where


# ---- the episodes -------------------------------------------------------------------------------


def hand_made(record: Any, tables: list[str]) -> Iterator[list[SQLAction | dict[str, str]]]:
    """Repeats, refusals, errors, tricky cells and the budget's end, around the gold query."""
    t = tables[0] if tables else "nosuch"
    gold = record.gold_sql

    def q(sql: str) -> SQLAction:
        return SQLAction(action_type="QUERY", argument=sql)

    yield [
        q(gold),
        q("  " + gold + " ;"),
        q(gold.replace(" ", "\n")),
        q(f'SELECT * FROM "{t}"'),
        q(f'SELECT * FROM "{t}" LIMIT 3'),
        q(f'SELECT COUNT(*) FROM "{t}"'),
        q("SELECT 1.5, NULL, x'00ff', 'a|b\nc', 'x' || printf('%.100c', 'y'), 12345678901234, -0.0, 1e300"),
        q(f'DELETE FROM "{t}"'),
        q("SELEC oops"),
        q(""),
        q("   "),
        q("SELECT 1; SELECT 2"),
        q(f"SELECT * FROM ({gold}) LIMIT 1"),
        q(gold),
        q(f'SELECT * FROM "{t}" ORDER BY 1 DESC'),
        q("SELECT 2"),
    ]
    yield [
        SQLAction(action_type="describe", argument=t),
        SQLAction(action_type="DESCRIBE", argument=t),
        SQLAction(action_type="SAMPLE", argument=t),
        SQLAction(action_type=" sample ", argument=t.upper()),
        SQLAction(action_type="DESCRIBE", argument="nosuch_table"),
        SQLAction(action_type="SAMPLE", argument=""),
        SQLAction(action_type="bogus", argument="zzz " * 50),
        SQLAction(action_type="", argument=""),
        {"action_type": "query", "argument": gold},
        q(f'SELECT DISTINCT * FROM "{t}"'),
        q(f'SELECT DISTINCT * FROM "{t}"'),
        q(f"WITH g AS ({gold}) SELECT COUNT(*) FROM g"),
        q("SELECT 1, 1.0, '1', ' 1 ', 'A', 'a'"),
        q("PRAGMA table_info(x)"),
        SQLAction(action_type="ANSWER", argument="42"),
        q("SELECT 3"),
    ]
    yield [q(f'SELECT * FROM "{t}" LIMIT {k}') for k in (1, 2, 5, 20, 21, 100)] + [
        q(gold),
        SQLAction(action_type="ANSWER", argument="x" * 200),
    ]


def play(
    env: SQLEnvironment, question_id: str, actions: Iterator[SQLAction | dict[str, str]] | list[Any]
) -> int:
    """Play `actions` in `env` and in a Reference; compare every observation; return the count."""
    first = env.reset(question_id=question_id)
    ref = Reference(env, first)
    count = 0
    for i, action in enumerate(actions):
        obs = env.step(action)  # type: ignore[arg-type]  # a dict too, as the server may send
        expected = ref.step(action if isinstance(action, SQLAction) else SQLAction.model_validate(action))
        assert_same(obs, expected, f"{question_id} step {i}: {action!r}")
        count += 1
    return count


def policy_actions(env: SQLEnvironment, policy: Any, question_id: str, seed: int) -> list[SQLAction]:
    """The actions `policy` takes in one episode (played once to find them)."""
    obs = env.reset(question_id=question_id)
    policy.reset(obs, seed)
    actions = []
    while not obs.done:
        actions.append(policy.act(obs))
        obs = env.step(actions[-1])
    return [*actions, SQLAction(action_type="DESCRIBE", argument="x")]  # and one after the end


def play_dataset(dataset: Dataset, every: int = 1) -> int:
    count = 0
    for name, config in CONFIGS.items():
        env = SQLEnvironment(dataset=dataset, split=dataset.split_names[0], config=config)
        rng = random.Random(name)
        for k, record in enumerate(dataset.records[::every]):
            qid = record.question_id
            for policy in (OraclePolicy(dataset), RandomPolicy(seed=rng.randrange(1000))):
                count += play(env, qid, policy_actions(env, policy, qid, k))
            tables = list(record.tables_involved) or table_names(env.reset(question_id=qid))
            for actions in hand_made(record, tables):
                count += play(env, qid, actions)
    return count


def test_demo_episodes_match_the_reference(demo_dataset: Dataset) -> None:
    assert play_dataset(demo_dataset) > 5000


def test_spider10_episodes_match_the_reference(spider10: Dataset) -> None:
    assert play_dataset(spider10, every=7) > 5000


def test_steps_before_reset_and_after_the_end() -> None:
    env = SQLEnvironment()
    obs = env.step(SQLAction(action_type="QUERY", argument="SELECT 1"))
    assert obs == SQLObservation(error="no episode is running: call reset() first", done=True, reward=0.0)
    assert obs.model_fields_set == {"error", "done", "reward"}


# ---- the pieces ---------------------------------------------------------------------------------


def test_trusted_observation_equals_the_validated_model() -> None:
    values = {
        "done": False,
        "reward": 0.030000000000000002,
        "metadata": {"question_id": "q", "reward_components": {"operational": 0.01}},
        "question": "How many?",
        "schema_info": "Tables: a, b",
        "result": "x\n(1 row)",
        "error": "",
        "step_count": 3,
        "budget_remaining": 12,
        "action_history": ["QUERY SELECT 1", "DESCRIBE a"],
    }
    assert list(values) == list(SQLObservation.model_fields)  # every field, in declaration order
    built = _trusted_observation(dict(values))
    validated = SQLObservation(**values)
    assert_same(built, validated, "trusted")
    assert list(built.__dict__) == list(validated.__dict__)
    assert built.__pydantic_extra__ is None and built.__pydantic_private__ is None
    built.done = True  # assignment still validates and records the field
    with pytest.raises(ValueError):
        built.step_count = -1
    other = _trusted_observation(dict(values))
    assert other.model_fields_set is not built.model_fields_set  # never shared between instances
    assert SQLObservation.model_validate(built.model_dump()) == built


def test_observations_do_not_share_the_history(demo_dataset: Dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset)
    env.reset(seed=1)
    first = env.step(SQLAction(action_type="QUERY", argument="SELECT 1"))
    env.step(SQLAction(action_type="QUERY", argument="SELECT 2"))
    assert first.action_history == ["QUERY SELECT 1"]


TRICKY_ROWS: tuple[tuple[object, ...], ...] = (
    (None, 1, -5, 0.1, 1e300, -0.0, float("inf")),
    ("plain", "with|pipe", "with\nnewline", "x" * 200, "", "NULL", " padded "),
    (b"\x00\xff", 12345678901234567890, 2.5, True, "ü" * 11, "a" * 10, "a" * 9),
)


@pytest.mark.parametrize("width", [1, 3, 4, 5, 10, 80])
@pytest.mark.parametrize("shown", [0, 1, 2, 20])
def test_render_table_matches_render_cell_on_every_cell(width: int, shown: int) -> None:
    columns = tuple(f"c|{i}" if i % 3 == 0 else f"column {i}" for i in range(7))
    for limits in (
        SandboxLimits(max_cell_chars=width, max_rows_shown=shown),
        SandboxLimits(max_cell_chars=width, max_rows_shown=shown, max_result_chars=40),
    ):
        for total in (None, "3", "more than 3"):
            expected = reference_render(columns, TRICKY_ROWS, limits, total)
            assert render_table(columns, TRICKY_ROWS, limits, total_text=total) == expected


def test_render_table_with_ragged_rows_or_no_columns() -> None:
    limits = SandboxLimits()
    ragged = ((1, 2), (3,), (None, "x", 2.5))
    assert render_table(("a", "b"), ragged, limits) == reference_render(("a", "b"), ragged, limits)
    assert render_table((), ((), ()), limits) == reference_render((), ((), ()), limits)


def test_sample_texts_match_the_reference(demo_dataset: Dataset) -> None:
    from sqlenv.sandbox.schema import catalog_for

    for limits in (SandboxLimits(), SMALL.sandbox):
        for db_id, path in demo_dataset.databases.items():
            catalog = catalog_for(path)
            with SQLSandbox(path) as sandbox:
                for table in catalog.tables:
                    found = sandbox.execute(f'SELECT * FROM "{table}" LIMIT 5')
                    expected = reference_render(found.columns, found.rows, limits, max_rows=5)
                    # A fresh text, not the catalog's cache (which other tests may have filled).
                    assert render_table(found.columns, found.rows, limits, max_rows=5) == expected, (
                        db_id,
                        table,
                    )
                    if limits == SandboxLimits():
                        assert catalog.sample(table, 5, limits) == expected, (db_id, table)


def test_render_result_of_every_spider10_gold_query(spider10: Dataset) -> None:
    sandboxes = {db: SQLSandbox(path) for db, path in spider10.databases.items()}
    try:
        for limits in (SandboxLimits(), SMALL.sandbox):
            for record in spider10.records:
                found = sandboxes[record.db_id].execute(record.gold_sql)
                result = QueryResult(found.columns, found.rows, found.truncated, 0.0)
                expected = reference_render(result.columns, result.rows, limits, result.row_count_text)
                assert render_result(result, limits) == expected, record.question_id
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()


NUMBERS = (0, 1, True, False, 2**53, 2**53 + 1, 1.0, 0.0, -0.0, float(2**53), 1.00001, 1.000049)
TEXTS = ("a", "A", " a ", "")
CELLS: tuple[object, ...] = (*NUMBERS, *TEXTS, None, b"a", b"", "Ünïcode", "ß", "SS", 3.14159265)


def test_value_keys_equal_the_per_cell_comprehension() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        rows = [tuple(rng.choice(CELLS) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(0, 6))]
        expected = {_value_key(c) for row in rows for c in row}
        got = _value_keys(rows)
        assert got == expected and len(got) == len(expected), rows


def test_progress_potential_equals_the_plain_formula() -> None:
    rng = random.Random(9)
    cfg = EnvConfig()
    for _ in range(3000):
        width = rng.randint(1, 2)
        gold = tuple(
            tuple(rng.choice((*NUMBERS, *TEXTS)) for _ in range(width)) for _ in range(rng.randint(0, 4))
        )
        rows = (
            gold
            if rng.random() < 0.2
            else tuple(
                tuple(rng.choice((*NUMBERS, *TEXTS)) for _ in range(width)) for _ in range(rng.randint(0, 4))
            )
        )
        got = progress_potential(rows, GoldProfile.of(gold), cfg.reward, cfg.float_tolerance)
        assert got == reference_phi(rows, gold, cfg), (rows, gold)


def test_progress_potential_of_spider10_results_near_the_gold(spider10: Dataset) -> None:
    cfg = EnvConfig()
    sandboxes = {db: SQLSandbox(path) for db, path in spider10.databases.items()}
    try:
        for record in spider10.records[::5]:
            gold = _gold_profile(record)
            inner = record.gold_sql.strip().rstrip(";")
            for sql in (
                record.gold_sql,
                f"SELECT * FROM ({inner}) LIMIT 1",
                f"SELECT DISTINCT * FROM ({inner})",
            ):
                rows = sandboxes[record.db_id].execute(sql).rows
                got = progress_potential(rows, gold, cfg.reward, cfg.float_tolerance)
                assert got == reference_phi(rows, record.gold_answer, cfg), (record.question_id, sql)
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()


def test_exploration_reward_parts_are_the_rewards_parts() -> None:
    from sqlenv.env.rewards import exploration_reward_parts

    for cfg in (RewardConfig(), RewardConfig(new_info_bonus=0.5, step_clip_high=0.05, repeat_penalty=-0.5)):
        for flags in range(8):
            for before, after in ((0.0, 0.0), (0.25, 1.0), (1.0, 0.0), (0.5, 0.75)):
                executed, new, repeat = bool(flags & 1), bool(flags & 2), bool(flags & 4)
                whole = exploration_reward(StepOutcome(executed, new, repeat, before, after), cfg)
                parts = exploration_reward_parts(executed, new, repeat, before, after, cfg)
                assert parts == (whole.operational, whole.progress)
