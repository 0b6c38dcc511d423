"""Clients of a running sqlenv server.

- `SQLEnvClient`: the typed OpenEnv `EnvClient` (async by default; `.sync()` for blocking use),
  one WebSocket session per instance. A refused session raises `ServerAtCapacityError`; a
  connection the server drops (its worker died or restarted) raises `SessionLostError`.
- `RemoteSQLEnvironment`: a blocking wrapper with SQLEnvironment's `reset`/`step`/`state`
  shape (observations with reward and done set), so `evaluate()` and policies run unchanged
  against a server. It needs the same dataset locally to know the split's questions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from sqlenv.data import Dataset
from sqlenv.env.models import SQLAction, SQLObservation, SQLState

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

CAPACITY_REACHED = "CAPACITY_REACHED"  # OpenEnv's WSErrorCode for a refused session


class SessionLostError(ConnectionError):
    """The server closed this client's WebSocket, e.g. because its worker process died or
    restarted. The session and any episode in it are gone; the client drops the socket, so the
    next call (start with `reset()`) connects again and opens a new session."""


class ServerAtCapacityError(RuntimeError):
    """The server refused a new session: the worker that accepted the connection already holds
    its `--max-sessions` sessions. Retry later, when sessions have ended.

    Attributes:
        active_sessions: the worker's live sessions when it refused, if the server said.
        max_sessions: the worker's session limit, if the server said.
    """

    def __init__(self, message: str, active_sessions: int | None, max_sessions: int | None) -> None:
        super().__init__(message)
        self.active_sessions = active_sessions
        self.max_sessions = max_sessions


class SQLEnvClient(EnvClient[SQLAction, SQLObservation, SQLState]):
    """Typed OpenEnv client: `await client.reset(question_id=...)`, `await client.step(action)`.

    Unlike OpenEnv's `EnvClient`, a connection the server closed is never replaced silently: the
    call raises `SessionLostError` (OpenEnv's client would open a new session and send a step
    there, where no episode runs), and a refused session raises `ServerAtCapacityError`.
    """

    # The socket whose episode is in progress (reset, not yet done): losing it loses the episode.
    _episode_socket: ClientConnection | None = None

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

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one message on this session's socket and return the server's reply.

        Args:
            message: the protocol message (`reset`, `step` or `state`).

        Returns:
            The reply frame, decoded.

        Raises:
            SessionLostError: the server closed the connection (before or while this call ran).
            ServerAtCapacityError: the server refused the session (at `--max-sessions`).
            RuntimeError: any other error frame, worded as OpenEnv's client words it.
        """
        ws = self._ws
        if ws is not None and ws.state in (State.CLOSING, State.CLOSED):
            # Closed by the server while we were idle. OpenEnv's `_send` would reconnect here
            # without a word; a refusal's error frame, if that was the reason, is still queued.
            response = None if ws is self._episode_socket else await _queued_frame(ws)
            self._drop_socket()
            if response is None:
                raise self._lost(ws)
        else:
            # A refusal's error frame may have arrived before the close that fails this send:
            # `_receive` reads it.
            with contextlib.suppress(ConnectionClosed):
                await self._send(message)
            try:
                response = await self._receive()
            except ConnectionClosed as exc:
                ws = self._ws
                self._drop_socket()
                raise self._lost(ws) from exc
        if response.get("type") == "error":
            data = response.get("data") or {}
            text = data.get("message", "Unknown error")
            if data.get("code") == CAPACITY_REACHED:
                self._drop_socket()  # the server closes it: the next call tries a new connection
                raise ServerAtCapacityError(
                    f"{self._base_url} refused a new session: {text} Each worker holds at most "
                    "--max-sessions sessions; retry when some have ended.",
                    data.get("active_sessions"),
                    data.get("max_sessions"),
                )
            raise RuntimeError(f"Server error: {text} (code: {data.get('code', 'UNKNOWN')})")
        if message.get("type") in ("reset", "step"):
            done = bool((response.get("data") or {}).get("done"))
            self._episode_socket = None if done else self._ws
        return response

    def _drop_socket(self) -> None:
        """Forget the current socket, so the next call connects a new one, and finish closing it
        in the background (`close()` and the next connect wait for that)."""
        if self._ws is not None:
            self._schedule_socket_close(self._ws)
        self._ws = None
        self._ws_loop = None

    def _lost(self, ws: ClientConnection | None) -> SessionLostError:
        """The error for a socket the server closed; it says whether an episode was lost."""
        if ws is not None and ws is self._episode_socket:
            self._episode_socket = None
            return SessionLostError(
                f"the server at {self._base_url} closed the connection mid-episode (its worker may "
                "have died or restarted): this episode is lost. Reconnecting starts a new session: "
                "call reset() to begin a new episode."
            )
        return SessionLostError(
            f"the server at {self._base_url} closed the connection (its worker may have died or "
            "restarted); no episode was in progress. Reconnecting starts a new session: call reset()."
        )


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


async def _queued_frame(ws: ClientConnection) -> dict[str, Any] | None:
    """The frame a closed socket still holds unread (a refusal's error frame), if any."""
    try:
        return json.loads(await asyncio.wait_for(ws.recv(), 1.0))
    except (ConnectionClosed, TimeoutError, ValueError):
        return None
