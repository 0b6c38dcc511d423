"""sqlenv served by NeMo Gym (the `nemo-gym` extra), through NeMo Gym's OpenEnv resources server.

NeMo Gym's `resources_servers/openenv` server (`OpenEnvResourcesServer`, nemo-gym 0.7) runs an
OpenEnv environment class in its own process: YAML names the class (`env_class`) and its action
(`action_class`); every session (`POST /seed_session`) builds one with no arguments and calls
`reset(**reset_kwargs)`; with `is_mcp: true` it asks the environment for its tools once at start-up
(`step(ListToolsAction())`) and serves each as `POST /<tool>`, which calls
`step(CallToolAction(tool_name=..., arguments=...))` and returns `{"result", "error"}` to the
model; `POST /verify` returns the sum of the session's step rewards and closes it. It talks to no
OpenEnv or MCP server over the network, so sqlenv's `sqlenv serve` and `sqlenv mcp` are not used:
the environment class is.

This module owns what sqlenv adds:

- `SQLEnvNeMoGymEnvironment`: `SQLEnvironment` as that server builds it: no constructor
  arguments (dataset, split, answer mode and schema shown come from the `SQLENV_*` variables, as
  for `sqlenv serve` workers), and besides `SQLAction` it takes OpenEnv's MCP actions: the four
  tools `describe`, `sample`, `query`, `answer` with sqlenv's own definitions
  (`sqlenv.agents.tools`). Its rewards are the environment's, so `/verify` pays the episode's
  total reward.
- `SQLEnvResourcesServer`: that server with three changes. The stock one resets every session
  with the same `reset_kwargs`: here `/seed_session` plays the question its request names (the
  dataset row's `question_id`, as NeMo Gym's agents post the whole row). `/verify` also returns
  the reward's parts, whether the answer was correct and the steps played; with `scoring: grpo`
  in the server's YAML section it pays the score sqlenv's GRPO gives the episode
  (`chat_episode.episode_reward_parts`) instead of the sum of its step rewards. And the stock tool
  endpoints call `env.step` on the server's event loop, so one query running to sqlenv's time
  limit (5 s) would hold every other session of the server; here they await
  `SQLEnvironment.step_async`, which runs QUERY and ANSWER on sqlenv's shared thread pool, as
  `sqlenv serve` does. That replaces a private method of nemo-gym's server
  (`_make_mcp_handler`), so it is applied only to the nemo-gym versions it was tested with
  (`TESTED_NEMO_GYM`); on others the stock endpoints serve, with a warning.
- `task_rows` / `write_task_rows`: NeMo Gym dataset rows (JSONL): `question_id` and the
  `responses_create_params` a NeMo Gym agent sends the model (sqlenv's system message and question
  message, as `sqlenv eval` shows them, and the four tools in the Responses API format).

`configs/integrations/nemo_gym_sqlenv.yaml` is the NeMo Gym config; docs/integrations.md says how
to run it. Importing this module without nemo-gym raises `MissingExtraError`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction, ListToolsObservation, Tool
from pydantic import ConfigDict, field_validator

from sqlenv.agents.tools import tool_call_to_action
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.extras import MissingExtraError, missing_extra_message
from sqlenv.integrations.chat_episode import REWARD_PARTS, SCORINGS, EpisodeSettings, episode_reward_parts
from sqlenv.settings import served_data_from_environment

try:
    from fastapi import HTTPException, Request
    from nemo_gym.base_resources_server import (
        BaseMultiRewardVerifyResponse,
        BaseSeedSessionRequest,
        BaseSeedSessionResponse,
        BaseVerifyRequest,
    )
    from nemo_gym.server_utils import SESSION_ID_KEY
    from resources_servers.openenv.app import (
        OpenEnvResourcesServer,
        OpenEnvResourcesServerConfig,
        SessionState,
    )
except ImportError as exc:  # the extra is not installed
    raise MissingExtraError(missing_extra_message("nemo-gym", "sqlenv.integrations.nemo_gym")) from exc

__all__ = [
    "TESTED_NEMO_GYM",
    "SQLEnvNeMoGymEnvironment",
    "SQLEnvResourcesServer",
    "SQLEnvResourcesServerConfig",
    "SQLEnvSeedSessionRequest",
    "SQLEnvVerifyResponse",
    "settings_from_environment",
    "task_rows",
    "write_task_rows",
]

# The nemo-gym releases whose OpenEnv server's tool endpoints `SQLEnvResourcesServer` replaces
# (their `_make_mcp_handler` was read and the replacement tested against them).
TESTED_NEMO_GYM: tuple[str, ...] = ("0.7.0",)

ENV_CLASS = "sqlenv.integrations.nemo_gym.SQLEnvNeMoGymEnvironment"
MCP_ACTION_CLASS = "openenv.core.env_server.mcp_types.CallToolAction"


def settings_from_environment() -> EpisodeSettings:
    """The episodes a server process serves, from the variables `sqlenv serve` workers read.

    Returns:
        Settings from $SQLENV_DATASET (default demo), $SQLENV_SPLIT (train), $SQLENV_SPIDER_DIR,
        $SQLENV_ANSWER_MODE (value) and $SQLENV_SHOW_SCHEMA (0).

    Raises:
        ValueError: a variable holds a value sqlenv does not take (named in the message).
    """
    served = served_data_from_environment()
    return EpisodeSettings(
        dataset=served.dataset,
        split=served.split,
        spider_dir=served.spider_dir,
        answer_mode=served.answer_mode,
        show_schema=served.show_schema,
    )


class SQLEnvNeMoGymEnvironment(SQLEnvironment):
    """`SQLEnvironment` for NeMo Gym's OpenEnv server: built with no arguments, and playing OpenEnv's
    MCP actions as well as `SQLAction` (module docstring)."""

    def __init__(self, settings: EpisodeSettings | None = None) -> None:
        """Build the environment on the (shared, read-only) dataset.

        Args:
            settings: the episodes to play; None (how NeMo Gym builds it) reads `SQLENV_*`.
        """
        settings = settings or settings_from_environment()
        super().__init__(dataset=settings.load(), split=settings.split, config=settings.config)
        self.settings = settings
        self._tools = [
            Tool(
                name=tool["function"]["name"],
                description=tool["function"]["description"],
                input_schema=tool["function"]["parameters"],
            )
            for tool in settings.tools()
        ]

    def step(  # type: ignore[override]  # also takes OpenEnv's MCP actions
        self,
        action: SQLAction | ListToolsAction | CallToolAction,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> SQLObservation | ListToolsObservation:
        """Play one action: an `SQLAction`, a tool call, or the question which tools there are.

        Args:
            action: `SQLAction`; `CallToolAction` (`describe`/`sample` with `table_name`,
                `query` with `sql`, `answer` with `value`); or `ListToolsAction`.
            timeout_s: the query's time limit (default: the sandbox's).

        Returns:
            The step's observation, or, for `ListToolsAction`, the four tools (no step spent).

        Raises:
            ValueError: a tool call names no tool or has the wrong arguments; NeMo Gym's server
                answers the model with the message and no step is spent.
        """
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=list(self._tools))
        if isinstance(action, CallToolAction):
            action = tool_call_to_action(action.tool_name, action.arguments)
        return super().step(action, timeout_s, **kwargs)

    async def step_async(  # type: ignore[override]  # also takes OpenEnv's MCP actions
        self,
        action: SQLAction | ListToolsAction | CallToolAction,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> SQLObservation | ListToolsObservation:
        """`step` for an event loop: QUERY and ANSWER run on sqlenv's shared thread pool
        (`SQLEnvironment.step_async`), the rest inline.

        Args:
            action: as for `step`.
            timeout_s: the query's time limit (default: the sandbox's).

        Returns:
            As `step`.

        Raises:
            ValueError: as `step`.
        """
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=list(self._tools))
        if isinstance(action, CallToolAction):
            action = tool_call_to_action(action.tool_name, action.arguments)
        return await super().step_async(action, timeout_s, **kwargs)


class SQLEnvResourcesServerConfig(OpenEnvResourcesServerConfig):
    """The server's YAML section; sqlenv's environment in MCP mode unless the YAML says otherwise.
    `scoring` is how `/verify` scores an episode (`chat_episode.SCORINGS`: "env", the sum of its
    step rewards; "grpo", as `sqlenv train grpo` scores it)."""

    env_class: str = ENV_CLASS
    action_class: str = MCP_ACTION_CLASS
    is_mcp: bool = True
    scoring: str = "env"

    @field_validator("scoring")
    @classmethod
    def _known_scoring(cls, scoring: str) -> str:
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, not {scoring!r}")
        return scoring


class SQLEnvSeedSessionRequest(BaseSeedSessionRequest):
    """What `/seed_session` reads from the dataset row a NeMo Gym agent posts (other fields pass)."""

    model_config = ConfigDict(extra="allow")

    question_id: str | None = None
    seed: int | None = None


class SQLEnvVerifyResponse(BaseMultiRewardVerifyResponse):
    """`/verify`'s answer: `reward` is the episode's total reward (NeMo Gym's sum of its step
    rewards; with `scoring: grpo`, the score sqlenv's GRPO gives the episode); `reward_components`
    its parts (`correctness`, `progress`, `operational`), which add up to it; the question played,
    whether it was answered and correctly, and the steps spent."""

    question_id: str | None = None
    answered: bool = False
    correct: bool = False
    steps: int = 0


class SQLEnvResourcesServer(OpenEnvResourcesServer):
    """NeMo Gym's OpenEnv resources server, playing the question each dataset row names, paying
    the reward with its parts, and stepping off the event loop (module docstring)."""

    config: SQLEnvResourcesServerConfig

    async def seed_session(  # type: ignore[override]  # reads the row's question_id
        self, request: Request, body: SQLEnvSeedSessionRequest
    ) -> BaseSeedSessionResponse:
        """Start the session's episode on the row's `question_id` (else `reset_kwargs`, else a
        question drawn from the split, with the row's `seed` when it has one).

        Args:
            request: the HTTP request; its session cookie keys the episode.
            body: the dataset row as the agent posts it.

        Returns:
            NeMo Gym's empty seed response.

        Raises:
            HTTPException: 400 for a question id the dataset does not have or a bad reset argument.
        """
        session_id = request.session[SESSION_ID_KEY]
        reset_kwargs = dict(self.config.reset_kwargs)
        if body.question_id is not None:
            reset_kwargs["question_id"] = body.question_id
        if body.seed is not None:
            reset_kwargs["seed"] = body.seed
        env = self._env_class()
        try:
            observation = env.reset(**reset_kwargs)
        except KeyError as exc:
            raise HTTPException(status_code=400, detail=f"unknown question_id: {exc.args[0]}") from None
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        self._sessions[session_id] = SessionState(
            env=env, accumulated_reward=float(observation.reward or 0.0), done=observation.done
        )
        return BaseSeedSessionResponse()

    def _make_mcp_handler(self, tool_name: str, request_model: type) -> Callable[..., Any]:
        """The endpoint of one tool: nemo-gym's own (`OpenEnvResourcesServer._make_mcp_handler`),
        except that it awaits `step_async`, so a slow query leaves the event loop free. Versions of
        nemo-gym other than `TESTED_NEMO_GYM` get the stock endpoint (and a warning).

        Args:
            tool_name: the tool the endpoint calls.
            request_model: the pydantic model of its arguments, which nemo-gym built from the
                tool's input schema.

        Returns:
            The FastAPI endpoint, answering `{"result", "error"}` as nemo-gym's does.
        """
        installed = version("nemo-gym")
        if installed not in TESTED_NEMO_GYM:
            warnings.warn(
                f"nemo-gym {installed} is not one sqlenv's resources server was tested with "
                f"({', '.join(TESTED_NEMO_GYM)}): its tool endpoints are nemo-gym's own, which run "
                "each step on the event loop, so a slow query holds the server's other sessions",
                RuntimeWarning,
                stacklevel=2,
            )
            return super()._make_mcp_handler(tool_name, request_model)

        async def handler(request: Request, body: Any) -> dict:
            session = self._sessions.get(request.session[SESSION_ID_KEY])
            if session is None:
                return {"error": "No active session. Call /seed_session first.", "result": None}
            if session.done:
                return {"error": "Episode has ended.", "result": None}
            try:
                action = self._action_class(tool_name=tool_name, arguments=body.model_dump())
                observation = await session.env.step_async(action)
            except Exception as exc:  # as nemo-gym's endpoint: the model reads the message
                return {"error": str(exc), "result": None}
            if observation.reward is not None:
                session.accumulated_reward += float(observation.reward)
            session.step_count += 1
            session.done = observation.done
            return {"result": observation.result, "error": observation.error or None}

        # FastAPI reads the arguments' types from the annotations: the model built at run time.
        handler.__annotations__ = {"request": Request, "body": request_model, "return": dict}
        handler.__name__ = f"handle_{tool_name}"
        return handler

    async def verify(self, request: Request, body: BaseVerifyRequest) -> SQLEnvVerifyResponse:  # type: ignore[override]
        """The episode's reward (NeMo Gym's own sum of the step rewards, or under `scoring: grpo`
        the score sqlenv's GRPO gives the episode) with its parts.

        Args:
            request: the HTTP request; its session cookie names the episode.
            body: the row and the agent's response, as NeMo Gym posts them.

        Returns:
            The verify response; an unknown session (never seeded, or verified already) gets
            reward 0 and no parts played, as the stock server gives it.
        """
        session = self._sessions.get(request.session[SESSION_ID_KEY])
        facts: dict[str, Any] = {"reward_components": dict.fromkeys(REWARD_PARTS, 0.0)}
        if session is not None and isinstance(session.env, SQLEnvironment) and session.env.state.question_id:
            state = session.env.state
            parts = episode_reward_parts(state, self.config.scoring, session.env.config.reward)
            facts = {
                "reward_components": parts,
                "question_id": state.question_id,
                "answered": state.answered,
                "correct": bool(state.correct),
                "steps": state.step_count,
            }
            if self.config.scoring == "grpo":
                facts["reward"] = sum(parts.values())
        verified = await super().verify(request, body)  # the stock reward; closes the session
        return SQLEnvVerifyResponse.model_validate(verified.model_dump() | facts)


def _responses_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool definition in the Responses API's function-tool format (what NeMo Gym rows carry)."""
    function = tool["function"]
    return {
        "type": "function",
        "name": function["name"],
        "description": function["description"],
        "parameters": {**function["parameters"], "additionalProperties": False},
        "strict": True,
    }


def task_rows(
    settings: EpisodeSettings | None = None, question_ids: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """NeMo Gym dataset rows, one per question: what an agent sends the model, and the question id
    `SQLEnvResourcesServer` resets to.

    Args:
        settings: the episodes (dataset, split, answer mode, schema shown, budget); default demo/train.
        question_ids: the questions (any split of the dataset); default every question of the split.

    Returns:
        Rows `{"question_id", "responses_create_params": {"input": [system, user], "tools": [...]}}`.

    Raises:
        KeyError: a question id the dataset does not have.
    """
    settings = settings or EpisodeSettings()
    tools = [_responses_tool(tool) for tool in settings.tools()]
    return [
        {"question_id": question_id, "responses_create_params": {"input": messages, "tools": tools}}
        for question_id, messages in settings.opening_messages(question_ids)
    ]


def write_task_rows(
    path: str | Path, settings: EpisodeSettings | None = None, question_ids: Sequence[str] | None = None
) -> int:
    """Write `task_rows(...)` as JSON lines (the file `gym eval run --input` reads).

    Args:
        path: the file to write.
        settings: the episodes; default demo/train.
        question_ids: the questions; default every question of the split.

    Returns:
        The number of rows written.
    """
    rows = task_rows(settings, question_ids)
    Path(path).write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
    )
    return len(rows)
