"""What the tests of the RL-stack integrations (tests/test_integrations_*.py) share: whether a
stack's extra is installed (a skip, or a failure where SQLENV_REQUIRE_INTEGRATIONS is set, as in
CI), the episodes' replies (the oracle's and the random policy's actions, and malformed replies),
and the reference: the same replies played in process by sqlenv's own chat loop
(`ChatToolPolicy` under `run_episode`), with the rewards the environment gives them."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from sqlenv.agents.chat_policy import ChatToolPolicy
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.agents.tools import action_to_tool_call
from sqlenv.config import EnvConfig
from sqlenv.data import Dataset
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.evaluation import run_episode
from sqlenv.extras import EXTRAS

Reply = SQLAction | str  # an action the model calls, or a reply that is no tool call


def require_stack(module: str, extra: str) -> None:
    """Skip the calling test module where `module` is not installed, saying which extra brings
    it; fail instead where SQLENV_REQUIRE_INTEGRATIONS is set (CI), where nothing may skip."""
    if importlib.util.find_spec(module) is not None:
        return
    command = EXTRAS[extra][1] if extra in EXTRAS else f"pip install -e '.[{extra}]'"
    reason = f"{module} not installed: {command}"
    if os.environ.get("SQLENV_REQUIRE_INTEGRATIONS"):
        pytest.fail(reason + " — SQLENV_REQUIRE_INTEGRATIONS is set, so integration tests may not skip")
    pytest.skip(reason, allow_module_level=True)


class _Recorder:
    """A policy that plays another and keeps its actions."""

    def __init__(self, policy: object) -> None:
        self.policy = policy
        self.actions: list[SQLAction] = []

    def reset(self, observation: SQLObservation, seed: int) -> None:
        self.policy.reset(observation, seed)  # type: ignore[attr-defined]

    def act(self, observation: SQLObservation) -> SQLAction:
        action = self.policy.act(observation)  # type: ignore[attr-defined]
        self.actions.append(action)
        return action


def _environment(dataset: Dataset, question_id: str, config: EnvConfig) -> SQLEnvironment:
    return SQLEnvironment(dataset=dataset, split=dataset.get(question_id).split, config=config)


def oracle_replies(dataset: Dataset, question_id: str, config: EnvConfig) -> list[Reply]:
    """The oracle's actions on the question (it describes, queries the gold SQL, answers)."""
    recorder = _Recorder(OraclePolicy(dataset))
    run_episode(_environment(dataset, question_id, config), recorder, question_id, seed=0)
    return list(recorder.actions)


def random_replies(dataset: Dataset, question_id: str, seed: int, config: EnvConfig) -> list[Reply]:
    """The random policy's actions on the question with this seed."""
    recorder = _Recorder(RandomPolicy(seed))
    run_episode(_environment(dataset, question_id, config), recorder, question_id, seed=seed)
    return list(recorder.actions)


class ScriptedChatPolicy(ChatToolPolicy):
    """sqlenv's chat loop with scripted replies: an action is a valid call, a string a reply that
    is no tool call (the loop's format error: the step is spent on an invalid action)."""

    name = "scripted"

    def __init__(self, replies: Sequence[Reply]) -> None:
        super().__init__()
        self.replies = list(replies)

    def _reply(self) -> tuple[SQLAction | None, str, str]:
        reply = self.replies.pop(0)
        if isinstance(reply, str):
            return None, "no tool call found", reply
        return reply, "", tagged(reply)


@dataclass(frozen=True)
class Reference:
    """An episode played in process: its rewards as the environment gives them."""

    question_id: str
    step_rewards: list[float]
    total: float
    parts: dict[str, float]
    correct: bool
    answered: bool
    steps: int
    format_errors: int


def reference(dataset: Dataset, question_id: str, replies: Sequence[Reply], config: EnvConfig) -> Reference:
    """The replies played in process by sqlenv's own chat loop under `run_episode`."""
    env = _environment(dataset, question_id, config)
    policy = ScriptedChatPolicy(replies)
    record = run_episode(env, policy, question_id, seed=0)
    state = env.state
    assert abs(record.total_reward - state.total_reward) < 1e-6  # what evaluation reports
    return Reference(
        question_id=question_id,
        step_rewards=[step.reward for step in record.transcript],
        total=state.total_reward,
        parts={
            "correctness": state.terminal_reward,
            "progress": state.progress_reward,
            "operational": state.operational_reward,
        },
        correct=bool(state.correct),
        answered=state.answered,
        steps=state.step_count,
        format_errors=record.format_errors,
    )


def call_json(action: SQLAction) -> str:
    """The call as a JSON object `{"name": ..., "arguments": {...}}`."""
    function = action_to_tool_call(action)["function"]
    return json.dumps({"name": function["name"], "arguments": function["arguments"]})


def tagged(action: SQLAction) -> str:
    """The call as Qwen's chat template writes it (Hermes `<tool_call>` tags)."""
    return f"<tool_call>\n{call_json(action)}\n</tool_call>"


def fenced(action: SQLAction) -> str:
    """The call as untrained instruction models often write it: JSON in a code fence."""
    return f"Let me check.\n```json\n{call_json(action)}\n```"


MALFORMED = "I am not sure which table holds that."  # a reply that is no tool call
