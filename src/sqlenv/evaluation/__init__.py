"""Evaluation: play a policy over a split's questions (`evaluate`), on one thread, several, or Ray,
with journals that let a long run continue across sittings; summarise the episodes, find their
failure patterns, and write reports (`sqlenv.evaluation.reports`)."""

from sqlenv.evaluation.backends import BACKENDS, RaySession, resolve_backend
from sqlenv.evaluation.episodes import (
    EpisodeEnvironment,
    LocalEnvironmentFactory,
    RemoteEnvironmentFactory,
    environment_factory_for,
    episode_plan,
    episode_seed,
    run_episode,
    worker_policy_factory,
)
from sqlenv.evaluation.records import (
    CONTEXT_FULL_VERDICT,
    DIFFICULTY_ORDER,
    NO_ANSWER_VERDICT,
    NO_ANSWER_VERDICTS,
    NOT_IN_TRAIN,
    SEEN_IN_TRAIN,
    TRANSCRIPT_ACTION_CHARS,
    TRANSCRIPT_RESULT_CHARS,
    EpisodeRecord,
    EvaluationResult,
    StepRecord,
    group_stats,
    summarise,
)
from sqlenv.evaluation.runner import evaluate

__all__ = [
    "BACKENDS",
    "CONTEXT_FULL_VERDICT",
    "DIFFICULTY_ORDER",
    "NOT_IN_TRAIN",
    "NO_ANSWER_VERDICT",
    "NO_ANSWER_VERDICTS",
    "SEEN_IN_TRAIN",
    "TRANSCRIPT_ACTION_CHARS",
    "TRANSCRIPT_RESULT_CHARS",
    "EpisodeEnvironment",
    "EpisodeRecord",
    "EvaluationResult",
    "LocalEnvironmentFactory",
    "RaySession",
    "RemoteEnvironmentFactory",
    "StepRecord",
    "environment_factory_for",
    "episode_plan",
    "episode_seed",
    "evaluate",
    "group_stats",
    "resolve_backend",
    "run_episode",
    "summarise",
    "worker_policy_factory",
]
