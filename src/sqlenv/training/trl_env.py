"""The adapter between sqlenv and TRL's `GRPOTrainer(environment_factory=...)`.

TRL makes every public method of the environment class a tool (its signature and Google-style
docstring become the schema) and calls `reset(**row)` with the dataset row before each rollout.
`SQLToolEnv` exposes `describe`, `sample`, `query` and `answer` with the docstrings of the shared
tool schema (`sqlenv.agents.tools.TOOLS`), so a model sees at training exactly the tools it sees at
evaluation (TRL sorts them by name; `sqlenv.training.grpo` restores the `TOOLS` order). Tool output is the text an evaluation policy reads back (`tool_result_text`). Once the
episode is over (answered, or budget spent) every tool raises, which TRL shows the model as
`{"error": ...}`.

`SQLEnvTRL` adds `get_reward()` (the episode's total reward); TRL then scores rollouts with it on
its own. A rollout that ends without an ANSWER scores as a wrong answer and keeps its shaping's
penalties but not its payments (`sqlenv.env.rewards.scored_reward_parts` says why). For weighting
the reward's parts separately, use `SQLToolEnv` (no `get_reward`) with `reward_correctness`,
`reward_progress` and `reward_operational` as `reward_funcs`: with weights 1, 1, 1 they add up to
`get_reward()`.

An instance runs its episodes in-process (`SQLEnvironment`) or, given `url`, on a sqlenv server
through one WebSocket session of its own.
"""

from __future__ import annotations

import types
from typing import Any

from sqlenv.agents.tools import TOOL_NAMES, google_docstring, tool_call_to_action
from sqlenv.config import DEFAULT_CONFIG, EnvConfig
from sqlenv.data import Dataset
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.env.rewards import scored_reward_parts

EPISODE_OVER = "The episode is over ({why}); no more tool calls are accepted."


class SQLToolEnv:
    """One rollout's episode, with the four actions as tools (module docstring)."""

    def __init__(
        self,
        dataset: Dataset | str = "spider10",
        *,
        split: str = "train",
        spider_dir: str | None = None,
        url: str | None = None,
        config: EnvConfig | None = None,
    ) -> None:
        from sqlenv.data import load_dataset

        self._dataset = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, spider_dir)
        self._config = config or DEFAULT_CONFIG
        if url is not None:
            from sqlenv.server.client import RemoteSQLEnvironment

            self._env: Any = RemoteSQLEnvironment(url, self._dataset, split)
        else:
            from sqlenv.env.environment import SQLEnvironment

            self._env = SQLEnvironment(dataset=self._dataset, split=split, config=self._config)
        if self._config != DEFAULT_CONFIG:
            self._describe_tools_for(self._config)
        self._clear()

    def _describe_tools_for(self, config: EnvConfig) -> None:
        """Give this instance's tools docstrings that name `config`'s numbers (rows sampled, rows
        shown). TRL lists the tool names on the class but reads each tool from the instance, so an
        instance attribute is what the model is shown."""
        for name in TOOL_NAMES:
            function = getattr(type(self), name)
            described = types.FunctionType(
                function.__code__, function.__globals__, name, function.__defaults__, function.__closure__
            )
            described.__kwdefaults__ = function.__kwdefaults__
            described.__annotations__ = dict(function.__annotations__)
            described.__doc__ = google_docstring(name, config)
            setattr(self, name, types.MethodType(described, self))

    def _clear(self) -> None:
        self._started = False
        self._done = False
        self._correct = False
        self._answered = False
        self._operational = 0.0
        self._progress = 0.0
        self._terminal = 0.0
        self.tool_calls = 0  # every call the rollout made, failed ones included
        self.failed_calls = 0  # calls that raised (bad arguments, after the end) or the environment refused
        self.question_id: str | None = None  # the episode's question: the diagnostics record it per step
        self.observation: SQLObservation | None = None

    def reset(self, **row: Any) -> str | None:
        """Start the episode of the row's `question_id`. The prompt already carries the question
        (see `sqlenv.training.grpo.grpo_rows`), so nothing is appended to it."""
        question_id = row.get("question_id")
        if not question_id:
            raise ValueError("a training row needs a 'question_id' column naming the episode's question")
        self._clear()
        self.observation = self._env.reset(question_id=question_id)
        self.question_id = question_id
        self._started = True
        return None

    # No return annotations on the four tools: TRL would add a "return" entry to their schema, and
    # the rendered tools would then differ from `TOOLS`, which evaluation prompts use.
    def describe(self, table_name: str):
        return self._act("describe", {"table_name": table_name})

    def sample(self, table_name: str):
        return self._act("sample", {"table_name": table_name})

    def query(self, sql: str):
        return self._act("query", {"sql": sql})

    def answer(self, value: str):
        return self._act("answer", {"value": value})

    # ---- episode bookkeeping -----------------------------------------------------------------

    def _act(self, tool: str, arguments: dict[str, Any]) -> str:
        from sqlenv.agents.prompts import tool_result_text

        if not self._started:
            raise RuntimeError("no episode: reset() must be called with a training row first")
        self.tool_calls += 1
        try:  # a call that raises (TRL reports the error to the model) or that the environment refuses
            if self._done:
                why = "the answer was given" if self._answered else "the step budget is spent"
                raise RuntimeError(EPISODE_OVER.format(why=why))
            action: SQLAction = tool_call_to_action(tool, arguments)  # ValueError for bad arguments
            observation = self._env.step(action)
        except Exception:
            self.failed_calls += 1
            raise
        self.observation = observation
        if observation.error:
            self.failed_calls += 1
        parts = observation.metadata.get("reward_components", {})
        self._operational += float(parts.get("operational", 0.0))
        self._progress += float(parts.get("progress", 0.0))
        self._terminal += float(parts.get("terminal", 0.0))
        if observation.done:
            self._done = True
            self._answered = tool == "answer"
            self._correct = bool(observation.metadata.get("correct", False))
        return tool_result_text(observation)

    @property
    def correct(self) -> bool:
        return self._correct

    @property
    def answered(self) -> bool:
        return self._answered

    def _reward_parts(self) -> dict[str, float]:
        """The episode's reward so far by part, as GRPO scores it (`scored_reward_parts`): an
        episode that ended without an ANSWER (the model stopped calling tools, TRL's
        `max_tool_calling_iterations` cut it, or the step budget ran out) scores as a wrong answer
        and keeps its shaping's penalties but not its payments."""
        return scored_reward_parts(
            answered=self._answered,
            terminal=self._terminal,
            progress=self._progress,
            operational=self._operational,
            reward=self._config.reward,
        )

    def _close(self) -> None:
        """End a server session (TRL never closes environments; only tools may be public)."""
        closer = getattr(self._env, "close", None)
        if closer is not None:
            closer()


# The tool docstrings come from the shared schema, so TRL renders the same tools as evaluation.
for _name in ("describe", "sample", "query", "answer"):
    getattr(SQLToolEnv, _name).__doc__ = google_docstring(_name)


class SQLEnvTRL(SQLToolEnv):
    """`SQLToolEnv` that owns its reward: TRL calls `get_reward()` once per finished rollout."""

    def get_reward(self) -> float:
        return sum(self._reward_parts().values())


def reward_correctness(environments: list[SQLToolEnv], **_: Any) -> list[float]:
    """Terminal reward: `correct_answer` for a correct ANSWER, `wrong_answer` otherwise."""
    return [env._reward_parts()["correctness"] for env in environments]


def reward_progress(environments: list[SQLToolEnv], **_: Any) -> list[float]:
    """Progress shaping: how close the episode's queries came to the gold result."""
    return [env._reward_parts()["progress"] for env in environments]


def reward_operational(environments: list[SQLToolEnv], **_: Any) -> list[float]:
    """Operational shaping: executed and new-information bonuses, repeat penalty and step cost."""
    return [env._reward_parts()["operational"] for env in environments]


REWARD_FUNCS = {
    "correctness": reward_correctness,
    "progress": reward_progress,
    "operational": reward_operational,
}
