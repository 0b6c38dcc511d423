"""Clients of a running sqlenv server.

- `SQLEnvClient`: the typed OpenEnv `EnvClient` (async by default; `.sync()` for blocking use),
  one WebSocket session per instance.
- `RemoteSQLEnvironment`: a blocking wrapper with SQLEnvironment's `reset`/`step`/`state`
  shape (observations with reward and done set), so `evaluate()` and policies run unchanged
  against a server. It needs the same dataset locally to know the split's questions.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from sqlenv.data import Dataset
from sqlenv.env.models import SQLAction, SQLObservation, SQLState


class SQLEnvClient(EnvClient[SQLAction, SQLObservation, SQLState]):
    """Typed OpenEnv client: `await client.reset(question_id=...)`, `await client.step(action)`."""

    def _step_payload(self, action: SQLAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"}) if not action.metadata else action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SQLObservation]:
        fields = dict(payload.get("observation", {}))
        fields["reward"] = payload.get("reward")
        fields["done"] = payload.get("done", False)
        observation = SQLObservation.model_validate(fields)
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=payload.get("done", False),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> SQLState:
        return SQLState.model_validate(payload)


class RemoteSQLEnvironment:
    """A blocking, SQLEnvironment-shaped view of one server session (for evaluate())."""

    def __init__(self, base_url: str, dataset: Dataset, split: str, message_timeout_s: float = 60.0) -> None:
        self.dataset = dataset
        self.split = split
        self.base_url = base_url
        self.questions = dataset.split(split)
        self._client = SQLEnvClient(base_url=base_url, message_timeout_s=message_timeout_s).sync()
        self._client.connect()

    def reset(self, seed: int | None = None, question_id: str | None = None, **kwargs: Any) -> SQLObservation:
        return self._client.reset(seed=seed, question_id=question_id, **kwargs).observation

    def step(self, action: SQLAction) -> SQLObservation:
        return self._client.step(action).observation

    @property
    def state(self) -> SQLState:
        return self._client.state()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RemoteSQLEnvironment:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
