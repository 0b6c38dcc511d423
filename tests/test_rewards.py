"""Reward semantics and the invariants of docs/environment.md, on the real environment."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.config import DEFAULT_CONFIG, RewardConfig
from sqlenv.env.rewards import (
    GoldProfile,
    StepOutcome,
    exploration_reward,
    progress_potential,
    result_similarity,
)
from sqlenv.evaluation import evaluate

CFG = DEFAULT_CONFIG.reward


def outcome(
    executed: bool = True, new: bool = False, repeat: bool = False, before: float = 0.0, after: float = 0.0
):
    return StepOutcome(executed, new, repeat, before, after)


def test_operational_layer_constants() -> None:
    assert exploration_reward(outcome(new=True), CFG).total == pytest.approx(0.02)
    assert exploration_reward(outcome(), CFG).total == pytest.approx(0.0)
    assert exploration_reward(outcome(executed=False), CFG).total == pytest.approx(-0.01)
    assert exploration_reward(outcome(repeat=True), CFG).total == pytest.approx(-0.02)


def test_progress_is_paid_as_a_difference_of_potentials() -> None:
    up = exploration_reward(outcome(before=0.25, after=1.0), CFG)
    assert up.progress == pytest.approx(0.075)
    down = exploration_reward(outcome(before=1.0, after=0.0), CFG)
    assert down.progress == pytest.approx(-0.10)


def test_each_step_is_clipped() -> None:
    loud = RewardConfig(executed_bonus=1.0, new_info_bonus=1.0)
    assert exploration_reward(outcome(new=True), loud).total == pytest.approx(loud.step_clip_high)
    harsh = RewardConfig(repeat_penalty=-1.0)
    assert exploration_reward(outcome(repeat=True), harsh).total == pytest.approx(harsh.step_clip_low)


def test_potential_reaches_one_only_for_the_gold_result() -> None:
    gold = GoldProfile.of(((1, "a"), (2, "b"), (3, "c")))
    assert progress_potential(((3, "c"), (1, "a"), (2, "b")), gold, CFG, 0.01) == 1.0
    near = progress_potential(((1, "a"), (2, "b")), gold, CFG, 0.01)
    assert 0.0 < near < 1.0
    assert near == pytest.approx(round(near * CFG.progress_bins) / CFG.progress_bins)
    assert progress_potential(((99, "zz"),), gold, CFG, 0.01) <= 0.25
    assert result_similarity(((1, "a"), (2, "b")), gold, 0.01) > result_similarity(((1, "a"),), gold, 0.01)


def test_numeric_closeness_rewards_a_nearby_scalar() -> None:
    gold = GoldProfile.of(((100,),))
    assert result_similarity(((98,),), gold, 0.01) > result_similarity(((10,),), gold, 0.01)


def test_oracle_totals_are_within_bounds_on_demo(demo_dataset) -> None:
    for split in ("train", "eval"):
        env = SQLEnvironment(dataset=demo_dataset, split=split)
        result = evaluate(env, OraclePolicy(demo_dataset))
        assert result.success_rate == 1.0
        for episode in result.episodes:
            assert 1.0 <= episode.total_reward <= 1.3, episode


@pytest.mark.slow
def test_oracle_and_random_on_spider10_eval(spider10) -> None:
    env = SQLEnvironment(dataset=spider10, split="eval")
    oracle = evaluate(env, OraclePolicy(spider10))
    assert oracle.success_rate >= 0.99
    assert 1.0 <= oracle.avg_reward <= 1.3
    assert all(1.0 <= e.total_reward <= 1.3 for e in oracle.episodes if e.success)
    random_run = evaluate(env, RandomPolicy(), seed=0)
    assert random_run.success_rate <= 0.02
    assert random_run.avg_reward <= 0.3
    assert all(e.total_reward < 1.0 for e in random_run.episodes if not e.success)


def test_random_policy_mean_on_demo(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="train")
    result = evaluate(env, RandomPolicy(), n_episodes=200, seed=3)
    assert result.avg_reward <= 0.3


# ---- property-based: any action sequence -----------------------------------------------------

_ENV_CACHE: dict[str, SQLEnvironment] = {}


def _env(demo_dataset) -> SQLEnvironment:
    if "env" not in _ENV_CACHE:
        _ENV_CACHE["env"] = SQLEnvironment(dataset=demo_dataset, split="train")
    return _ENV_CACHE["env"]


@st.composite
def episode_plan(draw: st.DrawFn) -> tuple[int, list[tuple[str, int, str]]]:
    """A question index and a sequence of (kind, table index, SQL choice) actions."""
    question = draw(st.integers(0, 10_000))
    n = draw(st.integers(1, 20))
    kinds = st.sampled_from(["DESCRIBE", "SAMPLE", "QUERY", "QUERY", "QUERY", "ANSWER", "BOGUS"])
    steps = draw(
        st.lists(
            st.tuples(
                kinds,
                st.integers(0, 10),
                st.sampled_from(["gold", "count", "star", "error", "empty", "gold_limit", "text"]),
            ),
            min_size=n,
            max_size=n,
        )
    )
    return question, steps


def _play(env: SQLEnvironment, question: int, steps: list[tuple[str, int, str]]) -> list:
    obs = env.reset(seed=question)
    record = env.dataset.get(obs.metadata["question_id"])
    tables = obs.schema_info.removeprefix("Tables: ").split(", ")
    gold_sql = record.gold_sql.rstrip().rstrip(";")
    observations = []
    for kind, t, choice in steps:
        table = tables[t % len(tables)]
        argument = {
            "gold": gold_sql,
            "count": f"SELECT COUNT(*) FROM {table}",
            "star": f"SELECT * FROM {table} LIMIT {t + 1}",
            "error": "SELECT no_such_column FROM nowhere",
            "empty": f"SELECT * FROM {table} WHERE 0",
            "gold_limit": f"SELECT * FROM ({gold_sql}) LIMIT 1",
            "text": "not sql at all",
        }[choice]
        if kind in ("DESCRIBE", "SAMPLE"):
            argument = table
        if kind == "ANSWER":
            argument = "42" if choice != "gold" else "definitely wrong"
        obs = env.step(SQLAction(action_type=kind, argument=argument))
        observations.append(obs)
        if obs.done:
            break
    return observations


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=episode_plan())
def test_any_episode_respects_the_reward_invariants(demo_dataset, plan) -> None:
    env = _env(demo_dataset)
    question, steps = plan
    observations = _play(env, question, steps)
    shaping = 0.0
    progress = 0.0
    for obs in observations:
        parts = obs.metadata["reward_components"]
        step_shaping = parts["operational"] + parts["progress"]
        assert CFG.step_clip_low - 1e-9 <= step_shaping <= CFG.step_clip_high + 1e-9
        assert obs.reward == pytest.approx(step_shaping + parts["terminal"])
        shaping += step_shaping
        progress += parts["progress"]
    state = env.state
    assert shaping <= CFG.max_episode_shaping
    assert state.shaping_reward == pytest.approx(shaping)
    # Telescoping: progress payments sum to weight * (last potential - initial potential of 0).
    assert progress == pytest.approx(CFG.progress_weight * state.progress, abs=1e-9)
    # Without a correct ANSWER (these plans never give one), no episode reaches 1.0.
    assert state.correct is not True
    assert state.total_reward < 1.0
    assert observations[-1].step_count <= DEFAULT_CONFIG.step_budget


def test_oscillating_between_results_earns_no_progress(demo_dataset) -> None:
    """Leaving the gold result and coming back pays nothing net: only the operational bonus for
    genuinely new results remains, which is bounded by the step budget."""
    env = _env(demo_dataset)
    record = next(r for r in env.questions if r.answer_type == "table")
    env.reset(question_id=record.question_id)
    gold_sql = record.gold_sql.rstrip(";")
    first = env.step(SQLAction(action_type="QUERY", argument=gold_sql))
    assert first.metadata["reward_components"]["progress"] == pytest.approx(CFG.progress_weight)
    cycle_progress = cycle_total = 0.0
    for i in range(6):
        for sql in (f"SELECT {i}", f"{gold_sql} -- {i}"):
            obs = env.step(SQLAction(action_type="QUERY", argument=sql))
            cycle_progress += obs.metadata["reward_components"]["progress"]
            cycle_total += obs.reward
    assert cycle_progress == pytest.approx(0.0, abs=1e-9)
    new_results = 6  # each "SELECT i" is a result not seen before
    assert cycle_total <= new_results * (CFG.executed_bonus + CFG.new_info_bonus + CFG.step_cost) + 1e-9


def test_the_similarity_weights_come_from_the_config() -> None:
    """phi's weights are `RewardConfig` fields: all weight on cardinality makes a result with the
    gold's row count but none of its values as similar as can be short of the gold result."""
    from dataclasses import replace

    from sqlenv.config import RewardConfig

    gold = GoldProfile.of((("a",), ("b",)))
    other = (("x",), ("y",))
    default = RewardConfig()
    assert result_similarity(other, gold, 0.01) == result_similarity(other, gold, 0.01, default) == 0.3
    counting = replace(default, cardinality_weight=1.0, overlap_weight=0.0)
    assert result_similarity(other, gold, 0.01, counting) == 1.0 * 1.0
