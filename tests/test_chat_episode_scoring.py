"""The integrations' scoring option (`EpisodeSettings.scoring`, sqlenv.integrations.chat_episode):
under "grpo" an episode played as a chat scores what sqlenv's GRPO reward functions
(`sqlenv.training.trl_env.REWARD_FUNCS`) give the same episode played through GRPO's own players
(TRL's tools on `SQLEnvTRL`, and the rollout function's `PlayedEpisode`); under "env" it keeps the
environment's reward. Also `EpisodeSettings.opening_messages`, which writes every stack's rows."""

from __future__ import annotations

import pytest

from integration_episodes import MALFORMED, ScriptedChatPolicy
from sqlenv.agents.prompts import question_message, system_message
from sqlenv.config import EnvConfig
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction
from sqlenv.evaluation import run_episode
from sqlenv.integrations.chat_episode import SETTINGS_DEFAULTS, ChatEpisode, EpisodeSettings
from sqlenv.training.rollouts import PlayedEpisode
from sqlenv.training.trl_env import REWARD_FUNCS, SQLEnvTRL


def _question(dataset):
    """A train question whose gold query pays progress (a non-empty gold result)."""
    return next(r for r in dataset.split("train") if r.tables_involved and not r.empty_gold)


def _explore(record) -> list[SQLAction]:
    """Exploration that earns shaping payments: a table described, the gold query run."""
    return [
        SQLAction(action_type="DESCRIBE", argument=record.tables_involved[0]),
        SQLAction(action_type="QUERY", argument=record.gold_sql),
    ]


def _chat(dataset, record, replies, scoring: str, step_budget: int | None = None):
    settings = EpisodeSettings(dataset="demo", split="train", step_budget=step_budget, scoring=scoring)
    episode = settings.episode()
    episode.start(question_id=record.question_id)
    played = [
        episode.play(None, "no tool call found", r) if isinstance(r, str) else episode.play(r)
        for r in replies
    ]
    return episode, played


def _trl(dataset, record, actions, config: EnvConfig) -> dict[str, float]:
    """The actions as TRL's tool calls on GRPO's environment, scored by GRPO's reward functions."""
    env = SQLEnvTRL(dataset, split="train", config=config)
    env.reset(question_id=record.question_id)
    tools = {"DESCRIBE": env.describe, "SAMPLE": env.sample, "QUERY": env.query, "ANSWER": env.answer}
    for action in actions:
        tools[action.action_type](action.argument)
    return {name: f([env])[0] for name, f in REWARD_FUNCS.items()}


def test_an_episode_cut_short_scores_as_grpo_scores_it(demo_dataset) -> None:
    """Explored, then cut short by the stack (no ANSWER, budget left): "grpo" gives what TRL's
    reward functions give (a wrong answer, no shaping payments); "env" keeps the payments."""
    record = _question(demo_dataset)
    grpo, _ = _chat(demo_dataset, record, _explore(record), "grpo")
    env, _ = _chat(demo_dataset, record, _explore(record), "env")
    expected = _trl(demo_dataset, record, _explore(record), EnvConfig())
    assert not grpo.done and expected == {"correctness": 0.0, "progress": 0.0, "operational": 0.0}
    assert grpo.reward_parts() == pytest.approx(expected, abs=1e-12)
    assert grpo.summary()["total_reward"] == pytest.approx(sum(expected.values()), abs=1e-12)
    state = env.environment.state
    assert env.reward_parts() == {
        "correctness": state.terminal_reward,
        "progress": state.progress_reward,
        "operational": state.operational_reward,
    }
    assert env.summary()["total_reward"] == state.total_reward and state.progress_reward > 0


def test_an_episode_that_spends_its_budget_scores_as_grpo_scores_it(demo_dataset) -> None:
    """Three valid calls on a budget of three: the step that spends it settles the episode, so the
    step rewards add up to GRPO's score, and a call after the end pays nothing more."""
    record = _question(demo_dataset)
    actions = [*_explore(record), SQLAction(action_type="SAMPLE", argument=record.tables_involved[0])]
    expected = _trl(demo_dataset, record, actions, EnvConfig(step_budget=3))
    episode, played = _chat(demo_dataset, record, actions, "grpo", step_budget=3)
    _, paid = _chat(demo_dataset, record, actions, "env", step_budget=3)
    assert episode.done and not episode.summary()["answered"]
    assert episode.reward_parts() == pytest.approx(expected, abs=1e-12)
    assert sum(p.reward for p in played) == pytest.approx(sum(expected.values()), abs=1e-12)
    assert [p.reward for p in played[:-1]] == [p.reward for p in paid[:-1]]  # only the last step settles
    assert played[-1].reward < paid[-1].reward
    for step in played:
        assert sum(step.parts.values()) == pytest.approx(step.reward, abs=1e-12)
    after = episode.play(SQLAction(action_type="DESCRIBE", argument=record.tables_involved[0]))
    assert after.reward == 0.0 and after.observation.error
    assert episode.reward_parts() == pytest.approx(expected, abs=1e-12)


def test_a_malformed_episode_scores_as_grpos_rollout_function_scores_it(demo_dataset) -> None:
    """Replies that are no tool call (GRPO's rollout function plays them as sqlenv's chat loop
    does) until the budget is spent, after a paid exploration: the penalties stay, the progress
    payment goes."""
    record = _question(demo_dataset)
    config = EnvConfig(step_budget=6)
    replies = [*_explore(record), *[MALFORMED] * 4]  # the same bad reply again is a repeat, too
    environment = SQLEnvironment(dataset=demo_dataset, split="train", config=config)
    episode_record = run_episode(environment, ScriptedChatPolicy(replies), record.question_id, seed=0)
    state = environment.state
    rollout = PlayedEpisode(  # as `EpisodeRollouts.play` records a rollout
        question_id=record.question_id,
        record=episode_record,
        answered=state.answered,
        correct=bool(state.correct),
        tool_calls=episode_record.steps,
        failed_calls=sum(1 for step in episode_record.transcript if step.error),
        terminal=state.terminal_reward,
        progress=state.progress_reward,
        operational=state.operational_reward,
        config=config,
    )
    expected = {name: f([rollout])[0] for name, f in REWARD_FUNCS.items()}
    episode, played = _chat(demo_dataset, record, replies, "grpo", step_budget=6)
    assert episode.done and episode.format_errors == 4 and expected["operational"] < 0  # penalties kept
    assert episode.reward_parts() == pytest.approx(expected, abs=1e-12)
    assert sum(p.reward for p in played) == pytest.approx(sum(expected.values()), abs=1e-12)
    assert sum(expected.values()) < state.total_reward  # the environment paid the progress


def test_an_answered_episode_scores_the_same_both_ways(demo_dataset) -> None:
    record = _question(demo_dataset)
    answer = SQLAction(action_type="ANSWER", argument="certainly not the answer")
    grpo, grpo_steps = _chat(demo_dataset, record, [*_explore(record), answer], "grpo")
    env, env_steps = _chat(demo_dataset, record, [*_explore(record), answer], "env")
    assert grpo.reward_parts() == env.reward_parts()
    expected = _trl(demo_dataset, record, [*_explore(record), answer], EnvConfig())
    assert grpo.reward_parts() == pytest.approx(expected, abs=1e-12)
    assert [s.reward for s in grpo_steps] == [s.reward for s in env_steps]


def test_scoring_is_a_setting_and_a_bad_one_is_named(demo_dataset) -> None:
    assert SETTINGS_DEFAULTS["scoring"] == "env"  # what every stack's config accepts, and today's scoring
    with pytest.raises(ValueError, match="scoring must be one of env, grpo, not 'ppo'"):
        EpisodeSettings(scoring="ppo")
    with pytest.raises(ValueError, match="scoring must be one of env, grpo, not 'GRPO'"):
        ChatEpisode(SQLEnvironment(dataset=demo_dataset, split="train"), scoring="GRPO")


def test_opening_messages_are_what_an_episode_starts_with(demo_dataset) -> None:
    settings = EpisodeSettings(split="eval")
    every = settings.opening_messages()
    assert [q for q, _ in every] == [r.question_id for r in demo_dataset.split("eval")]
    chosen = [demo_dataset.split("train")[2].question_id, every[0][0]]  # any split, in the order given
    environment = SQLEnvironment(dataset=demo_dataset, split="eval")
    for question_id, messages in settings.opening_messages(chosen):
        observation = environment.reset(question_id=question_id)
        assert messages == [system_message(observation), question_message(observation)]
    with pytest.raises(KeyError, match="demo-9999"):
        settings.opening_messages(["demo-9999"])
