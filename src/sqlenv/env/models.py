"""The wire types of an episode: what an agent sends (SQLAction), sees (SQLObservation), and the
episode's bookkeeping (SQLState). Pydantic models on OpenEnv's base types, so the same objects
travel in-process and over the OpenEnv server."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

ACTION_TYPES: tuple[str, ...] = ("DESCRIBE", "SAMPLE", "QUERY", "ANSWER")


class SQLAction(Action):
    """One agent action. `action_type` is matched case-insensitively against ACTION_TYPES; an
    unknown type is not a validation error but an environment error the agent can read."""

    action_type: str = Field(description="DESCRIBE, SAMPLE, QUERY or ANSWER (case-insensitive)")
    argument: str = Field(default="", description="table name, SQL statement or answer value")


class SQLObservation(Observation):
    """What the agent sees after reset or a step. `reward` and `done` come from Observation."""

    question: str = Field(default="", description="the natural-language question")
    schema_info: str = Field(default="", description="the database's table names (DESCRIBE for more)")
    result: str = Field(default="", description="text result of the last action")
    error: str = Field(default="", description="error message of the last action, empty if none")
    step_count: int = Field(default=0, ge=0)
    budget_remaining: int = Field(default=0, ge=0)
    action_history: list[str] = Field(default_factory=list)


class SQLState(State):
    """Episode bookkeeping exposed through `env.state` (never the gold answer)."""

    question_id: str | None = None
    db_id: str | None = None
    difficulty: str | None = None
    step_budget: int = 0
    done: bool = False
    total_reward: float = 0.0
    shaping_reward: float = 0.0
    # The episode's reward so far by layer (`RewardConfig`); they add up to total_reward.
    operational_reward: float = 0.0
    progress_reward: float = 0.0
    terminal_reward: float = 0.0
    progress: float = 0.0
    answered: bool = False
    correct: bool | None = None
