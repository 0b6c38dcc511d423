"""The episode state machine under any sequence of actions, checked with hypothesis.

Actions of every kind (the four types in odd case and padding, unknown types, empty ones) with any
argument (random and unicode text, huge strings, table names in odd case and quotes, gold SQL,
refused SQL, correct and wrong answers), resets at random points and steps after the end. After
every call:
- `step` returned an observation (it never raises);
- an episode counts at most `step_budget` steps, and `budget_remaining == step_budget - step_count`;
- `done` is true exactly when ANSWER was given or the budget is reached;
- after the end, every step is an error that changes nothing (`env.state` is unchanged);
- each step's shaping (operational + progress) lies in [step_clip_low, step_clip_high], and an
  episode's shaping total never exceeds `max_episode_shaping`;
- the rewards of an episode's observations sum to `env.state.total_reward`.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from pydantic import ValidationError

from sqlenv.config import DEFAULT_CONFIG, EnvConfig
from sqlenv.data import load_dataset
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import ACTION_TYPES, SQLAction
from sqlenv.env.verifier import format_answer
from sqlenv.sandbox.schema import catalog_for

DATASET = load_dataset("demo")
QUESTIONS = DATASET.split("train")
TABLES = sorted({t for db in DATASET.databases for t in catalog_for(DATASET.db_path(db)).tables})
GOLD_SQL = sorted({r.gold_sql for r in DATASET.records})
REFUSED_SQL = [
    "DELETE FROM books",
    "DROP TABLE loans",
    "PRAGMA writable_schema = 1",
    "SELECT * FROM pragma_table_info('books')",
    "ATTACH ':memory:' AS m",
    "VACUUM",
    "BEGIN",
    "SELECT 1; SELECT 2",
    "SELECT load_extension('x')",
    "SELECT json_group_array(1)",
    "SELECT ?",
    "SELECT 1\x00",
    "SELECT '" + "x" * 20_001 + "'",
    "WITH RECURSIVE r(s) AS (SELECT 'a' UNION ALL SELECT s || s FROM r) SELECT length(s) FROM r",
    "SELECT printf('%.*c', 2000000000, 'x')",
    "SELECT " + "(" * 3000 + "1" + ")" * 3000,
    "SELECT * FROM no_such_table",
    "How many books are there?",
]
EPSILON = 1e-9

# Action types: the four in any case and padding, unknown words, random text, empty.
ACTION_KIND = st.one_of(
    st.sampled_from(ACTION_TYPES),
    st.sampled_from(ACTION_TYPES).flatmap(
        lambda k: st.sampled_from([k.lower(), k.title(), f" {k} ", f"\t{k.lower()}\n"])
    ),
    st.sampled_from(["", " ", "FLY", "SELECT", "answer!", "QUERY QUERY", "DESCRIBE;", "Ⓠuery", "q"]),
    st.text(max_size=12),
)


def odd_spellings(name: str) -> list[str]:
    return [
        name,
        name.upper(),
        name.title(),
        f'"{name}"',
        f"`{name}`",
        f"[{name}]",
        f" {name} ",
        f"{name};",
        f"'{name}'",
    ]


ARGUMENT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(exclude_categories=()), max_size=200),  # any code point, surrogates too
    st.sampled_from(TABLES).flatmap(lambda t: st.sampled_from(odd_spellings(t))),
    st.sampled_from(GOLD_SQL),
    st.sampled_from(REFUSED_SQL),
    # huge strings, up to a little over the SQL length limit
    st.tuples(st.text(min_size=1, max_size=4), st.integers(1, 25_000)).map(lambda p: (p[0] * p[1])[:25_000]),
    st.sampled_from(
        ["", " ", "\n\t", "42", "0", "-1", "1.5", "NULL", "[]", "[1, 2]", "a | b", "```\n7\n```"]
    ),
)


class EpisodeMachine(RuleBasedStateMachine):
    """A model of the episode next to the real environment; every step is checked against it."""

    config: EnvConfig = DEFAULT_CONFIG.with_time_limit(1.0)

    def __init__(self) -> None:
        super().__init__()
        self.env = SQLEnvironment(dataset=DATASET, split="train", config=self.config)
        self.started = False
        self.done = False
        self.steps = 0
        self.reward_sum = 0.0
        self.shaping_sum = 0.0

    @property
    def budget(self) -> int:
        return self.config.step_budget

    # ---- rules --------------------------------------------------------------------------------

    @initialize(start=st.booleans())
    def maybe_start(self, start: bool) -> None:
        if start:
            self.reset(seed=0, pick=None)

    @rule(seed=st.none() | st.integers(0, 2**32), pick=st.none() | st.integers(0, len(QUESTIONS) - 1))
    def reset(self, seed: int | None, pick: int | None) -> None:
        if pick is None:
            obs = self.env.reset(seed=seed)
        else:
            obs = self.env.reset(question_id=QUESTIONS[pick].question_id)
        assert obs.step_count == 0 and obs.budget_remaining == self.budget
        assert not obs.done and obs.reward is None and obs.error == ""
        state = self.env.state
        assert state.step_count == 0 and not state.done and state.total_reward == 0.0
        self.started, self.done, self.steps = True, False, 0
        self.reward_sum = self.shaping_sum = 0.0

    @rule(kind=ACTION_KIND, argument=ARGUMENT)
    def any_action(self, kind: str, argument: str) -> None:
        self.check_step(SQLAction(action_type=kind, argument=argument))

    @precondition(lambda self: self.started and not self.done)
    @rule()
    def query_the_gold_sql(self) -> None:
        self.check_step(SQLAction(action_type="QUERY", argument=self.record().gold_sql))

    @precondition(lambda self: self.started and not self.done)
    @rule(correct=st.booleans())
    def answer(self, correct: bool) -> None:
        record = self.record()
        text = format_answer(record.gold_answer, record.answer_type) if correct else "certainly not this"
        obs = self.check_step(SQLAction(action_type="ANSWER", argument=text))
        if correct:
            assert obs.metadata["correct"] is True and obs.reward == self.config.reward.correct_answer

    @precondition(lambda self: self.done)
    @rule(kind=ACTION_KIND, argument=ARGUMENT)
    def after_the_end(self, kind: str, argument: str) -> None:
        self.check_step(SQLAction(action_type=kind, argument=argument))

    # ---- the checks ---------------------------------------------------------------------------

    def record(self):
        return DATASET.get(self.env.state.question_id)

    def check_step(self, action: SQLAction):
        before = self.env.state.model_dump()
        obs = self.env.step(action)  # never raises: an exception fails the test here
        if not self.started or self.done:
            event("step before any reset" if not self.started else "step after the end")
            assert obs.done and obs.error and obs.reward in (0.0, None)
            assert self.env.state.model_dump() == before, "a step after the end changed the state"
            return obs
        self.steps += 1
        answered = action.action_type.strip().upper() == "ANSWER"
        state = self.env.state
        assert obs.step_count == state.step_count == self.steps <= self.budget
        assert obs.budget_remaining == self.budget - obs.step_count == state.step_budget - state.step_count
        assert obs.done is state.done is (answered or self.steps == self.budget)
        assert state.answered is answered
        components = obs.metadata["reward_components"]
        shaping = components["operational"] + components["progress"]
        reward_cfg = self.config.reward
        assert reward_cfg.step_clip_low - EPSILON <= shaping <= reward_cfg.step_clip_high + EPSILON
        assert obs.reward == pytest.approx(shaping + components["terminal"])
        if answered:
            assert shaping == 0.0
            assert components["terminal"] in (reward_cfg.correct_answer, reward_cfg.wrong_answer)
        if obs.done:
            event("episode ended by ANSWER" if answered else "episode ended by the budget")
        self.reward_sum += obs.reward
        self.shaping_sum += shaping
        self.done = obs.done
        return obs

    @invariant()
    def totals_add_up(self) -> None:
        state = self.env.state
        if not self.started:
            assert state.step_count == 0 and not state.done and state.episode_id is None
            return
        assert state.total_reward == pytest.approx(self.reward_sum, abs=EPSILON)
        assert state.shaping_reward == pytest.approx(self.shaping_sum, abs=EPSILON)
        assert state.shaping_reward <= self.config.reward.max_episode_shaping + EPSILON
        assert state.step_count == self.steps <= state.step_budget
        assert state.done is self.done


class ShortEpisodeMachine(EpisodeMachine):
    """Budget exhaustion reached often, with a non-zero penalty for ending without a correct answer."""

    config = replace(
        EnvConfig(step_budget=3).with_time_limit(1.0),
        reward=replace(DEFAULT_CONFIG.reward, wrong_answer=-0.25),
    )


SETTINGS = settings(
    max_examples=250, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestEpisodeStateMachine = EpisodeMachine.TestCase
TestEpisodeStateMachine.settings = SETTINGS
TestShortEpisodeStateMachine = ShortEpisodeMachine.TestCase
TestShortEpisodeStateMachine.settings = settings(SETTINGS, max_examples=150, stateful_step_count=20)


# ---- the action model --------------------------------------------------------------------------

ANY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
ACTION_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "action_type": ACTION_KIND | ANY_VALUE,
        "argument": ARGUMENT | ANY_VALUE,
        "metadata": ANY_VALUE,
    },
)
UNKNOWN_FIELDS = st.dictionaries(st.text(max_size=12), ANY_VALUE, min_size=1, max_size=2)
ACTION_LIKE = st.one_of(
    ACTION_FIELDS,
    st.tuples(ACTION_FIELDS, UNKNOWN_FIELDS).map(lambda fields: {**fields[1], **fields[0]}),
    ANY_VALUE,
)


@settings(max_examples=300, deadline=None)
@given(payload=ACTION_LIKE)
def test_action_validation_accepts_or_raises_validation_error_only(payload: object) -> None:
    try:
        action = SQLAction.model_validate(payload)
    except ValidationError:
        return
    assert isinstance(action.action_type, str) and isinstance(action.argument, str)
    env = SQLEnvironment(dataset=DATASET, config=DEFAULT_CONFIG.with_time_limit(1.0))
    env.reset(seed=0)
    obs = env.step(action)  # a valid action never makes step raise
    assert obs.step_count == 1
