"""sqlenv's four actions as verl tools (the `verl` extra), for verl's `ToolAgentLoop` (verl 0.9).

verl plays tools from a tool-config YAML (`actor_rollout_ref.rollout.multi_turn.tool_config_path`;
sqlenv's is `configs/integrations/verl_sqlenv_tools.yaml`): each entry names a `BaseTool` subclass
(`class_name`), its `config` and optionally its `tool_schema`. `ToolAgentLoop` parses the model's
tool calls (`multi_turn.format`, `hermes` by default) and, for every call, runs
`create(create_kwargs=...)`, `execute(instance_id, arguments, agent_data=...)` and `release`: a tool
instance lives for one call, so the episode cannot live in it. Here:

- `DescribeTool`, `SampleTool`, `QueryTool`, `AnswerTool` (`SQLEnvTool` subclasses) play sqlenv's
  `describe`, `sample`, `query` and `answer`. Their schemas are sqlenv's tool definitions
  (`sqlenv.agents.tools`) unless the YAML gives one. Their `config` chooses the episodes:
  `dataset` (default `demo`), `split` (`train`), `spider_dir`, `answer_mode` (`value`/`sql`),
  `show_schema` (false), `step_budget` (15), `scoring` (`env`, or `grpo` to score an episode as
  `sqlenv train grpo` does: `chat_episode`).
- The episode belongs to the trajectory: verl hands every call the trajectory's `AgentData`, and
  the first call of a trajectory starts a `ChatEpisode` on the question its dataset row names
  (`extra_info.tools_kwargs.<tool>.create_kwargs.question_id`, or `seed` to draw one), kept for as
  long as that `AgentData` lives. (Outside `ToolAgentLoop`, with no `AgentData`, calls with the
  same instance id share one episode until that id is released.) A call that reaches a tool plays as in `sqlenv eval`: the step's
  result (or error) is the tool's text, its reward the tool reward, and arguments that are no
  valid call (a wrong name, a missing argument) are the chat loop's format error, which spends the
  step. Calls verl refuses itself (an unknown tool, arguments that are not JSON) never reach sqlenv.
- After every step the episode's summary (question, steps, total reward and its parts, answered,
  correct) is in the trajectory's `extra_fields["sqlenv"]`, which verl passes to the reward
  function in `extra_info`; `compute_score` (`reward.custom_reward_function.path=
  pkg://sqlenv.integrations.verl_tools`, `name=compute_score`) pays the episode's total reward,
  so a trajectory earns exactly what sqlenv's environment paid its steps (with `scoring: grpo`,
  the score sqlenv's GRPO gives the episode).
- `verl_rows` / `write_verl_parquet`: dataset rows for verl's `RLHFDataset`: sqlenv's opening
  messages as `prompt`, `agent_name: tool_agent`, and the question id in every tool's
  `create_kwargs`.

Importing this module without verl raises `MissingExtraError`.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from uuid import uuid4

from sqlenv.agents.tools import TOOL_NAMES, tool_call_to_action
from sqlenv.extras import MissingExtraError, missing_extra_message
from sqlenv.integrations.chat_episode import REWARD_PARTS, SETTINGS_DEFAULTS, ChatEpisode, EpisodeSettings

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError as exc:  # the extra is not installed
    raise MissingExtraError(missing_extra_message("verl", "sqlenv.integrations.verl_tools")) from exc

__all__ = [
    "DATA_SOURCE",
    "AnswerTool",
    "DescribeTool",
    "QueryTool",
    "SQLEnvTool",
    "SampleTool",
    "compute_score",
    "verl_rows",
    "write_verl_parquet",
]

DATA_SOURCE = "sqlenv"
SUMMARY_KEY = "sqlenv"  # the key of the episode's summary in a trajectory's extra_fields

# A tool's `config` keys and their defaults (`type` is verl's own); anything else is a mistake.
_CONFIG_KEYS: dict[str, Any] = {"type": "native", **SETTINGS_DEFAULTS}


def settings_from_config(config: Mapping[str, Any]) -> EpisodeSettings:
    """The episodes a tool config chooses.

    Args:
        config: the `config` of a tool entry in the tool-config YAML.

    Returns:
        The episode settings.

    Raises:
        ValueError: an unknown key or a bad value (named in the message).
    """
    given = {str(k): v for k, v in dict(config).items()}
    unknown = sorted(set(given) - set(_CONFIG_KEYS))
    if unknown:
        raise ValueError(
            f"unknown sqlenv tool config key(s) {unknown}; the keys are: {', '.join(_CONFIG_KEYS)}"
        )
    values = _CONFIG_KEYS | given
    if values["type"] != "native":
        raise ValueError(f"sqlenv tools are verl 'native' tools, not {values['type']!r}")
    return EpisodeSettings(
        dataset=str(values["dataset"]),
        split=str(values["split"]),
        spider_dir=values["spider_dir"],
        answer_mode=str(values["answer_mode"]),
        show_schema=values["show_schema"],
        step_budget=values["step_budget"],
        scoring=values["scoring"],
    )


@dataclass
class _Trajectory:
    """The episode of one trajectory."""

    episode: ChatEpisode


@dataclass
class _Instance:
    """One tool instance: what its row said, and the trajectory it played in."""

    create_kwargs: dict[str, Any]
    trajectory: _Trajectory | None = None


# Episodes, shared by the four tools. Under ToolAgentLoop, by trajectory: an episode lives as long
# as verl's `AgentData` of its trajectory (weakly keyed) and goes with it, however the trajectory
# ended. Without an `AgentData` (a caller of the BaseTool contract), by instance id, until `release`.
_BY_AGENT_DATA: weakref.WeakKeyDictionary[Any, _Trajectory] = weakref.WeakKeyDictionary()
_BY_INSTANCE_ID: dict[str, _Trajectory] = {}


class SQLEnvTool(BaseTool):
    """One of sqlenv's actions as a verl `BaseTool` (module docstring); subclasses name the tool.

    Args:
        config: the tool's `config` from the tool-config YAML (`_CONFIG_KEYS`).
        tool_schema: the YAML's `tool_schema`, or None for sqlenv's own definition.

    Raises:
        ValueError: a bad config, or a schema naming another tool.
    """

    tool_name: ClassVar[str] = ""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        if self.tool_name not in TOOL_NAMES:
            raise TypeError(f"{type(self).__name__} names no sqlenv tool; use one of its four subclasses")
        self.settings = settings_from_config(config)
        super().__init__(config, tool_schema)
        if self.name != self.tool_name:
            raise ValueError(
                f"{type(self).__name__} plays sqlenv's {self.tool_name!r}, but its tool_schema names {self.name!r}"
            )
        self._instances: dict[str, _Instance] = {}

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        """sqlenv's definition of this tool, described for the configured episodes."""
        definition = next(t for t in self.settings.tools() if t["function"]["name"] == self.tool_name)
        return OpenAIFunctionToolSchema.model_validate(definition)

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """Open an instance for one call.

        Args:
            instance_id: an id to use (else a new one).
            kwargs: `create_kwargs` (how `ToolAgentLoop` passes the row's `tools_kwargs` entry),
                or `question_id` / `seed` directly.

        Returns:
            The instance id and an empty response.
        """
        create_kwargs = dict(kwargs.get("create_kwargs") or {})
        for key in ("question_id", "seed"):
            if key in kwargs:
                create_kwargs[key] = kwargs[key]
        instance_id = instance_id or uuid4().hex
        self._instances[instance_id] = _Instance(create_kwargs=create_kwargs)
        return instance_id, ToolResponse()

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        """Play the call as one step of the trajectory's episode.

        Args:
            instance_id: the instance `create` opened.
            parameters: the call's arguments (a dict; `ToolAgentLoop` decoded the JSON).
            kwargs: `agent_data`, the trajectory (`ToolAgentLoop` passes it); without it, calls
                with the same instance id (to any of the four tools) play one episode.

        Returns:
            The text the model reads (the result, the error, or the format-error feedback), the
            step's reward, and its facts: the reward parts, whether the episode is done.

        Raises:
            ValueError: the row names no question (no `question_id` or `seed` in any tool's
                `create_kwargs`); `ToolAgentLoop` shows the model the message.
            KeyError: an unknown question id.
        """
        instance = self._instances.get(instance_id)
        if instance is None:
            raise ValueError(f"no {self.tool_name} instance {instance_id!r}: call create() first")
        agent_data = kwargs.get("agent_data")
        trajectory = self._trajectory(instance_id, instance, agent_data)
        try:
            action = tool_call_to_action(self.tool_name, parameters)
        except ValueError as exc:  # a wrong argument: the chat loop's format error, as in `sqlenv eval`
            text = f"{self.tool_name}({json.dumps(parameters, ensure_ascii=False, default=str)})"
            played = trajectory.episode.play(None, str(exc), text)
        else:
            played = await trajectory.episode.play_async(action, call_format="tool_call")
        extra_fields = getattr(agent_data, "extra_fields", None)
        if isinstance(extra_fields, dict):
            extra_fields[SUMMARY_KEY] = trajectory.episode.summary()
        facts = {"reward_parts": played.parts, "done": played.done, "format_error": played.format_error}
        return ToolResponse(text=played.feedback), played.reward, facts

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The total reward so far of the episode the instance played in (0 before its call)."""
        instance = self._instances.get(instance_id)
        trajectory = instance.trajectory if instance is not None else _BY_INSTANCE_ID.get(instance_id)
        if trajectory is None:
            return 0.0
        return float(trajectory.episode.total_reward())

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the instance. Under ToolAgentLoop the episode stays with its trajectory; without
        an `AgentData`, the episode of this instance id ends here."""
        self._instances.pop(instance_id, None)
        _BY_INSTANCE_ID.pop(instance_id, None)

    def _trajectory(self, instance_id: str, instance: _Instance, agent_data: Any) -> _Trajectory:
        """The trajectory's episode, started on its first call."""
        if instance.trajectory is not None:
            return instance.trajectory
        if agent_data is not None:
            trajectory = _BY_AGENT_DATA.get(agent_data)
        else:
            trajectory = _BY_INSTANCE_ID.get(instance_id)
        if trajectory is None:
            question_id, seed = self._question(instance, agent_data)
            episode = self.settings.episode()
            episode.start(question_id=question_id, seed=seed)
            trajectory = _Trajectory(episode=episode)
            if agent_data is not None:
                _BY_AGENT_DATA[agent_data] = trajectory
            else:
                _BY_INSTANCE_ID[instance_id] = trajectory
        instance.trajectory = trajectory
        return trajectory

    @staticmethod
    def _question(instance: _Instance, agent_data: Any) -> tuple[str | None, int | None]:
        """The question the row names: this call's `create_kwargs`, else any tool's in the row."""
        candidates = [instance.create_kwargs]
        tools_kwargs = getattr(agent_data, "tools_kwargs", None) or {}
        candidates += [dict(entry.get("create_kwargs") or {}) for entry in tools_kwargs.values()]
        for create_kwargs in candidates:
            if create_kwargs.get("question_id") is not None:
                return str(create_kwargs["question_id"]), None
            if create_kwargs.get("seed") is not None:
                return None, int(create_kwargs["seed"])
        raise ValueError(
            "the dataset row names no sqlenv question: put {'create_kwargs': {'question_id': ...}} "
            "under extra_info.tools_kwargs for each sqlenv tool (verl_rows writes such rows)"
        )


class DescribeTool(SQLEnvTool):
    """sqlenv's `describe(table_name)`: a table's columns, keys and row count."""

    tool_name = "describe"


class SampleTool(SQLEnvTool):
    """sqlenv's `sample(table_name)`: a table's first rows."""

    tool_name = "sample"


class QueryTool(SQLEnvTool):
    """sqlenv's `query(sql)`: one read-only SELECT statement."""

    tool_name = "query"


class AnswerTool(SQLEnvTool):
    """sqlenv's `answer(value)`: the final answer; it ends the episode."""

    tool_name = "answer"


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's reward function for sqlenv trajectories: the episode's total reward.

    Args:
        data_source: the row's `data_source` (`sqlenv`).
        solution_str: the decoded response; not used (the environment graded the answer).
        ground_truth: the row's `reward_model.ground_truth` (the question id); not used.
        extra_info: the row's `extra_info` with the trajectory's extra fields, where the tools
            left the episode's summary (`extra_info["sqlenv"]`).

    Returns:
        `score`: the episode's total reward (0 when no call reached sqlenv), with its parts
        (`correctness`, `progress`, `operational`), `correct` (1 or 0) and `steps`, which verl
        logs as reward extra info.
    """
    summary = dict((extra_info or {}).get(SUMMARY_KEY) or {})
    parts = dict(summary.get("reward_parts") or {})
    result = {"score": float(summary.get("total_reward", 0.0))}
    result |= {part: float(parts.get(part, 0.0)) for part in REWARD_PARTS}
    result |= {"correct": float(bool(summary.get("correct"))), "steps": float(summary.get("steps", 0))}
    return result


def verl_rows(
    settings: EpisodeSettings | None = None, question_ids: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Dataset rows for verl's `RLHFDataset` with `ToolAgentLoop`, one per question.

    Args:
        settings: the episodes (dataset, split, answer mode, schema shown, budget); default demo/train.
        question_ids: the questions (any split of the dataset); default every question of the split.

    Returns:
        Rows with `data_source`, `agent_name` (`tool_agent`), `prompt` (sqlenv's system and question
        messages), `ability`, `reward_model` (the question id as ground truth) and `extra_info`
        (`index`, `question_id`, and `tools_kwargs` naming the question for each tool).

    Raises:
        KeyError: a question id the dataset does not have.
    """
    settings = settings or EpisodeSettings()
    rows = []
    for index, (question_id, messages) in enumerate(settings.opening_messages(question_ids)):
        tools_kwargs = {name: {"create_kwargs": {"question_id": question_id}} for name in TOOL_NAMES}
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "agent_name": "tool_agent",
                "prompt": messages,
                "ability": "sql",
                "reward_model": {"style": "rule", "ground_truth": question_id},
                "extra_info": {
                    "index": index,
                    "question_id": question_id,
                    "need_tools_kwargs": True,
                    "tools_kwargs": tools_kwargs,
                },
            }
        )
    return rows


def write_verl_parquet(
    path: str | Path, settings: EpisodeSettings | None = None, question_ids: Sequence[str] | None = None
) -> int:
    """Write `verl_rows(...)` as a parquet file (verl's `data.train_files` / `data.val_files`).

    Args:
        path: the file to write.
        settings: the episodes; default demo/train.
        question_ids: the questions; default every question of the split.

    Returns:
        The number of rows written.
    """
    import pandas as pd  # verl's own dependency, as is pyarrow, which writes the file

    rows = verl_rows(settings, question_ids)
    pd.DataFrame(rows).to_parquet(path)
    return len(rows)
