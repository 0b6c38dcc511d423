"""Playing one episode (`run_episode`), the plan of a run's episodes (`episode_plan`), and the
picklable factories through which parallel workers (threads, Ray tasks) build their own
environments: in-process (`LocalEnvironmentFactory`) or a session on a server
(`RemoteEnvironmentFactory`)."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sqlenv.agents.chat_policy import ContextFull
from sqlenv.agents.policy import Policy
from sqlenv.data import Dataset, QuestionRecord
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.evaluation.records import (
    CONTEXT_FULL_VERDICT,
    NO_ANSWER_VERDICT,
    TRANSCRIPT_ACTION_CHARS,
    TRANSCRIPT_RESULT_CHARS,
    EpisodeRecord,
    Job,
    StepRecord,
)

if TYPE_CHECKING:
    from sqlenv.agents.registry import PolicySettings
    from sqlenv.config import EnvConfig


class EpisodeEnvironment(Protocol):
    """What evaluate() needs: SQLEnvironment in-process, or RemoteSQLEnvironment over a server."""

    dataset: Dataset
    split: str
    questions: Sequence[QuestionRecord]

    def reset(self, seed: int | None = None, question_id: str | None = None) -> SQLObservation: ...

    def step(self, action: SQLAction) -> SQLObservation: ...


EnvironmentFactory = Callable[[], EpisodeEnvironment]
PolicyFactory = Callable[[], Policy]


def episode_seed(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index) % (2**31 - 1)


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _action_text(action: SQLAction) -> str:
    return _excerpt(
        f"{action.action_type.strip().upper()} {action.argument}".rstrip(), TRANSCRIPT_ACTION_CHARS
    )


def run_episode(
    env: EpisodeEnvironment, policy: Policy, question_id: str, seed: int, *, record_transcript: bool = True
) -> EpisodeRecord:
    observation = env.reset(seed=seed, question_id=question_id)
    policy.reset(observation, seed)
    total = 0.0
    transcript: list[StepRecord] = []
    context_full = False
    while not observation.done:
        try:
            action = policy.act(observation)
        except ContextFull as exc:  # the episode ends unanswered, its environment left as it is
            context_full = True
            if record_transcript:
                error = _excerpt(str(exc), TRANSCRIPT_RESULT_CHARS)
                transcript.append(StepRecord(action="", result="", error=error, reward=0.0))
            break
        # A chat policy's reply that was no tool call reaches the environment as an unknown action;
        # the transcript shows the policy's reason instead of the environment's "unknown action".
        format_error = getattr(policy, "last_format_error", None)
        observation = env.step(action)
        reward = observation.reward or 0.0
        total += reward
        if record_transcript:
            error = f"not a valid tool call: {format_error}" if format_error else observation.error
            transcript.append(
                StepRecord(
                    action=_action_text(action),
                    result=_excerpt(observation.result, TRANSCRIPT_RESULT_CHARS),
                    error=_excerpt(error, TRANSCRIPT_RESULT_CHARS),
                    reward=round(reward, 6),
                )
            )
    record = env.dataset.get(question_id)
    answered = "correct" in observation.metadata
    return EpisodeRecord(
        question_id=question_id,
        db_id=record.db_id,
        difficulty=record.difficulty,
        answer_type=record.answer_type,
        success=bool(observation.metadata.get("correct", False)),
        total_reward=round(total, 6),
        steps=observation.step_count,
        actions=list(observation.action_history),
        question=record.question,
        format_errors=int(getattr(policy, "format_errors", 0) or 0),
        call_formats=dict(getattr(policy, "call_formats", None) or {}),
        verdict=observation.result if answered else CONTEXT_FULL_VERDICT if context_full else NO_ANSWER_VERDICT,
        transcript=transcript,
        seen_in_train=env.dataset.seen_in_train(question_id),
        empty_gold=record.empty_gold,
        answer_mode=str(observation.metadata.get("answer_mode", "value")),
        show_schema=observation.metadata.get("show_schema") is True,
    )


def episode_plan(questions: Sequence[QuestionRecord], n_episodes: int | None, seed: int) -> list[Job]:
    """(index, question_id, episode seed) of every episode a run plays, in order."""
    ids = [r.question_id for r in questions]
    if n_episodes is not None:
        if n_episodes < 0:
            raise ValueError(f"n_episodes must be positive, not {n_episodes}")
        rng = random.Random(seed)
        ids = rng.sample(ids, n_episodes) if n_episodes <= len(ids) else rng.choices(ids, k=n_episodes)
    return [(i, qid, episode_seed(seed, i)) for i, qid in enumerate(ids)]


@dataclass(frozen=True)
class LocalEnvironmentFactory:
    """Builds an in-process `SQLEnvironment` on a shared, already loaded dataset."""

    dataset: Dataset
    split: str
    config: EnvConfig | None = None

    def __call__(self) -> EpisodeEnvironment:
        from sqlenv.env.environment import SQLEnvironment

        return SQLEnvironment(dataset=self.dataset, split=self.split, config=self.config)


@dataclass(frozen=True)
class RemoteEnvironmentFactory:
    """Opens a new `RemoteSQLEnvironment` session on a running server."""

    url: str
    dataset: Dataset
    split: str
    message_timeout_s: float = 60.0

    def __call__(self) -> EpisodeEnvironment:
        from sqlenv.server.client import RemoteSQLEnvironment

        return RemoteSQLEnvironment(self.url, self.dataset, self.split, self.message_timeout_s)


def environment_factory_for(env: EpisodeEnvironment) -> EnvironmentFactory:
    """A factory of environments like `env` (same dataset, split, config or server)."""
    from sqlenv.env.environment import SQLEnvironment

    if isinstance(env, SQLEnvironment):
        return LocalEnvironmentFactory(env.dataset, env.split, env.config)
    url = getattr(env, "base_url", None)  # RemoteSQLEnvironment
    if isinstance(url, str) and url:
        return RemoteEnvironmentFactory(url, env.dataset, env.split)
    raise ValueError(
        f"cannot make more environments like {type(env).__name__} for parallel workers: "
        "pass env_factory= (a zero-argument callable returning a new environment)"
    )


def policy_factory_for(policy: Policy) -> PolicyFactory:
    clone = getattr(policy, "clone", None)
    if callable(clone):
        return clone
    raise ValueError(
        f"policy {getattr(policy, 'name', type(policy).__name__)!r} has no clone(): pass "
        "policy_factory= (a zero-argument callable returning a new policy) to run it in parallel"
    )


def worker_policy_factory(
    policy: Policy,
    name: str,
    dataset: Dataset,
    seed: int,
    backend: str,
    parallel: int,
    settings: PolicySettings | None = None,
) -> PolicyFactory:
    """How parallel workers get their own copy of a policy that the registry built by name.

    Threads clone the main policy when it can (a language-model policy's clones share its weights
    and decode the replies they wait for in batches of up to `parallel`); Ray workers, and
    policies without `clone()`, build one by name from a picklable `sqlenv.agents.PolicyFactory`.

    Args:
        policy: the policy the run plays (already built).
        name: the name it was built from.
        dataset: the dataset it was built for.
        seed: the seed it was built with.
        backend: "serial", "threads" or "ray".
        parallel: episodes played at the same time.
        settings: the language-model settings it was built with.

    Returns:
        A zero-argument callable returning a fresh policy.
    """
    from sqlenv.agents.registry import PolicyFactory as NamedPolicyFactory
    from sqlenv.agents.registry import PolicySettings

    clone = getattr(policy, "clone", None)
    if backend == "threads" and callable(clone):
        if hasattr(policy, "max_batch"):  # a local model: every waiting thread's reply in one batch
            return functools.partial(clone, max_batch=parallel)
        return clone
    return NamedPolicyFactory(name, dataset, seed, settings or PolicySettings())


def close_environment(env: object) -> None:
    close = getattr(env, "close", None)
    if callable(close):
        close()
