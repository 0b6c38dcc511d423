"""`evaluate()`: runs a policy over episodes of an environment and summarises the results.

By default every question of the environment's split is played once, in order; with
`n_episodes` a seeded sample (with replacement past the split's size) is played instead. Episode
i is reset with a seed derived from (seed, i), which also seeds the policy, so a run is
reproducible episode by episode.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from sqlenv.data import Dataset, QuestionRecord
from sqlenv.models import SQLAction, SQLObservation
from sqlenv.policies import Policy


class EpisodeEnvironment(Protocol):
    """What evaluate() needs: SQLEnvironment in-process, or RemoteSQLEnvironment over a server."""

    dataset: Dataset
    split: str
    questions: Sequence[QuestionRecord]

    def reset(self, seed: int | None = None, question_id: str | None = None) -> SQLObservation: ...

    def step(self, action: SQLAction) -> SQLObservation: ...


@dataclass(frozen=True)
class EpisodeRecord:
    question_id: str
    db_id: str
    difficulty: str
    answer_type: str
    success: bool
    total_reward: float
    steps: int
    actions: list[str]


@dataclass
class EvaluationResult:
    policy: str
    dataset: str
    split: str
    n_episodes: int
    success_rate: float
    avg_reward: float
    avg_steps: float
    by_difficulty: dict[str, dict[str, float]]
    episodes: list[EpisodeRecord] = field(default_factory=list)

    def to_json(self, include_episodes: bool = True) -> dict[str, Any]:
        data = asdict(self)
        if not include_episodes:
            data.pop("episodes")
        return data


def episode_seed(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index) % (2**31 - 1)


def run_episode(env: EpisodeEnvironment, policy: Policy, question_id: str, seed: int) -> EpisodeRecord:
    observation = env.reset(seed=seed, question_id=question_id)
    policy.reset(observation, seed)
    total = 0.0
    while not observation.done:
        observation = env.step(policy.act(observation))
        total += observation.reward or 0.0
    record = env.dataset.get(question_id)
    return EpisodeRecord(
        question_id=question_id,
        db_id=record.db_id,
        difficulty=record.difficulty,
        answer_type=record.answer_type,
        success=bool(observation.metadata.get("correct", False)),
        total_reward=round(total, 6),
        steps=observation.step_count,
        actions=list(observation.action_history),
    )


def _summarise(policy: str, env: EpisodeEnvironment, episodes: Sequence[EpisodeRecord]) -> EvaluationResult:
    n = len(episodes)
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for e in episodes:
        groups[e.difficulty].append(e)
    order = ["easy", "medium", "hard", "extra"]
    by_difficulty = {
        d: {
            "n": len(groups[d]),
            "success_rate": sum(e.success for e in groups[d]) / len(groups[d]),
            "avg_reward": sum(e.total_reward for e in groups[d]) / len(groups[d]),
        }
        for d in sorted(groups, key=lambda d: order.index(d) if d in order else len(order))
    }
    return EvaluationResult(
        policy=policy,
        dataset=env.dataset.name,
        split=env.split,
        n_episodes=n,
        success_rate=sum(e.success for e in episodes) / n if n else 0.0,
        avg_reward=sum(e.total_reward for e in episodes) / n if n else 0.0,
        avg_steps=sum(e.steps for e in episodes) / n if n else 0.0,
        by_difficulty=by_difficulty,
        episodes=list(episodes),
    )


def evaluate(
    env: EpisodeEnvironment,
    policy: Policy,
    n_episodes: int | None = None,
    seed: int = 0,
    *,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
) -> EvaluationResult:
    """Play episodes of `policy` in `env`; every question of the split once unless n_episodes."""
    ids = [r.question_id for r in env.questions]
    if n_episodes is not None:
        rng = random.Random(seed)
        ids = rng.sample(ids, n_episodes) if n_episodes <= len(ids) else rng.choices(ids, k=n_episodes)
    episodes = []
    for i, qid in enumerate(ids):
        episode = run_episode(env, policy, qid, episode_seed(seed, i))
        episodes.append(episode)
        if on_episode is not None:
            on_episode(episode)
    return _summarise(getattr(policy, "name", type(policy).__name__), env, episodes)
