"""sqlenv as a SkyRL-gym environment: `SQLEnvSkyRL`, a `BaseTextEnv` registered as "sqlenv".

SkyRL's generator makes one environment per trajectory with
`skyrl_gym.make("sqlenv", env_config=..., extras=...)`, calls `init(prompt)` for the first
messages, then `step(reply)` with each model reply until `done`. Here:

- `env_config` (SkyRL's `environment.skyrl_gym.sqlenv` section) chooses the episodes:
  `dataset` (default `demo`), `split` (`train`), `spider_dir`, `answer_mode` (`value` or `sql`),
  `show_schema` (false), `step_budget` (15), `scoring` (`env`, or `grpo` to score an episode as
  `sqlenv train grpo` does: `chat_episode`) and `tools_in_prompt` (true);
- `extras` (a dataset row's other columns) names the question: `question_id`, or `seed` to draw
  one from the split; SkyRL's `max_turns`, when below the step budget, becomes the budget;
- `init` ignores the row's prompt and returns sqlenv's own opening messages (the system message
  and the question with the table names only; `sqlenv.agents.prompts`), so the schema stays
  hidden exactly as in `sqlenv eval`. SkyRL renders the chat template without a tools channel,
  so with `tools_in_prompt` the system message also lists the four tools and the call format;
  `init`'s metadata holds the tool definitions for a chat template that takes `tools=`;
- `step` reads the reply with sqlenv's reply reader (a call in `<tool_call>` tags, else a JSON
  object: `chat_episode.read_reply`), plays it, and returns the tool result as a `tool` message
  (the format-error feedback as a `user` message), the environment's step reward, `done`, and
  in `metadata` the step's reward parts; the episode's rewards add up to sqlenv's total reward
  (with `scoring: grpo`, to the score sqlenv's GRPO gives the episode).

`skyrl_rows(...)` writes dataset rows for SkyRL (`prompt`, `env_class`, `question_id`). Importing
this module registers the environment (`register_sqlenv`); it needs the `skyrl` extra.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlenv.extras import MissingExtraError, missing_extra_message

try:
    from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
    from skyrl_gym.envs.registration import register, registry
except ImportError as exc:  # the extra is not installed: say so before importing the rest
    raise MissingExtraError(missing_extra_message("skyrl", "sqlenv.integrations.skyrl_gym_env")) from exc

from sqlenv.config import DEFAULT_CONFIG
from sqlenv.integrations.chat_episode import SETTINGS_DEFAULTS, EpisodeSettings, read_reply

__all__ = ["ENV_ID", "SQLEnvSkyRL", "register_sqlenv", "skyrl_rows"]

ENV_ID = "sqlenv"

# env_config keys and their defaults; anything else is a mistake worth naming.
_CONFIG_KEYS: dict[str, Any] = {**SETTINGS_DEFAULTS, "tools_in_prompt": True}

# How the model is told to call a tool where no chat template lists the tools (Qwen's Hermes
# format, which `read_reply` reads first; a bare JSON object is accepted too).
_TOOLS_BLOCK = (
    "\n\nThe tools, as JSON function signatures:\n<tools>\n{tools}\n</tools>\n"
    "Call one per reply, as a JSON object with the tool's name and arguments inside "
    '<tool_call></tool_call> tags:\n<tool_call>\n{{"name": "describe", "arguments": '
    '{{"table_name": "..."}}}}\n</tool_call>'
)


class SQLEnvSkyRL(BaseTextEnv):
    """One sqlenv episode as a SkyRL-gym text environment (module docstring).

    Args:
        env_config: SkyRL's config section for this environment (a mapping or OmegaConf node).
        extras: the dataset row's extra columns: `question_id` or `seed`, and SkyRL's `max_turns`.

    Raises:
        ValueError: an unknown env_config key or a bad value.
        KeyError: an unknown question_id or split.
    """

    def __init__(
        self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__()
        config = dict(_CONFIG_KEYS)
        given = {str(k): v for k, v in dict(env_config or {}).items()}
        unknown = sorted(set(given) - set(config))
        if unknown:
            raise ValueError(
                f"unknown sqlenv env_config key(s) {unknown}; the keys are: {', '.join(_CONFIG_KEYS)}"
            )
        config.update(given)
        extras = dict(extras or {})
        budget = config["step_budget"]
        max_turns = extras.get("max_turns")
        if max_turns is not None:  # SkyRL's generator.max_turns bounds the episode, as its own envs do
            budget = min(int(max_turns), DEFAULT_CONFIG.step_budget if budget is None else int(budget))
        self.settings = EpisodeSettings(
            dataset=str(config["dataset"]),
            split=str(config["split"]),
            spider_dir=config["spider_dir"],
            answer_mode=str(config["answer_mode"]),
            show_schema=config["show_schema"],  # EnvConfig refuses anything but true or false
            step_budget=budget,
            scoring=config["scoring"],  # EpisodeSettings names a value that is not one of SCORINGS
        )
        if not isinstance(config["tools_in_prompt"], bool):
            raise ValueError(f"tools_in_prompt must be true or false, not {config['tools_in_prompt']!r}")
        self.tools_in_prompt = config["tools_in_prompt"]
        self.question_id: str | None = extras.get("question_id")
        seed = extras.get("seed")
        self.seed: int | None = None if seed is None else int(seed)
        self.max_turns = self.settings.config.step_budget
        self.episode = self.settings.episode()

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Start the episode.

        Args:
            prompt: the dataset row's prompt; not used (sqlenv writes its own opening messages).

        Returns:
            The system and question messages, and metadata: the question, database, answer
            mode, step budget and the tool definitions.
        """
        messages = self.prompt(self.episode.start(question_id=self.question_id, seed=self.seed))
        tools = self.settings.tools()
        observation = self.episode.observation
        assert observation is not None
        return messages, {
            "question_id": observation.metadata["question_id"],
            "db_id": observation.metadata["db_id"],
            "answer_mode": self.settings.answer_mode,
            "step_budget": self.settings.config.step_budget,
            "tools": tools,
        }

    def prompt(self, opening: list[dict[str, str]]) -> list[dict[str, str]]:
        """The messages `init` returns for an episode's opening messages: with `tools_in_prompt`,
        the system message also lists the tools and the call format.

        Args:
            opening: the system and question messages (`ChatEpisode.start`).

        Returns:
            The messages, the opening left unchanged.
        """
        if not self.tools_in_prompt:
            return list(opening)
        listed = "\n".join(json.dumps(tool) for tool in self.settings.tools())
        system = {**opening[0], "content": opening[0]["content"] + _TOOLS_BLOCK.format(tools=listed)}
        return [system, *opening[1:]]

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play one model reply.

        Args:
            action: the reply's text.

        Returns:
            The next messages (none once the episode is over), the environment's step reward,
            whether the episode is over, and metadata: the step's reward parts, the action, its
            error or format error and, at the end, whether the answer was correct.
        """
        self.turns += 1
        parsed, problem, call_format = read_reply(action)
        played = self.episode.play(parsed, problem, action, call_format)
        observation = played.observation
        metadata: dict[str, Any] = {
            "question_id": observation.metadata["question_id"],
            "action": None if parsed is None else f"{parsed.action_type} {parsed.argument}",
            "call_format": played.call_format,
            "format_error": played.format_error,
            "error": observation.error,
            "reward_components": played.parts,
            "step_count": observation.step_count,
            "budget_remaining": observation.budget_remaining,
        }
        if played.done:
            metadata["correct"] = bool(observation.metadata.get("correct", False))
            metadata["verdict"] = observation.result
            return BaseTextEnvStepOutput(observations=[], reward=played.reward, done=True, metadata=metadata)
        role = "tool" if played.format_error is None else "user"
        return BaseTextEnvStepOutput(
            observations=[{"role": role, "content": played.feedback}],
            reward=played.reward,
            done=False,
            metadata=metadata,
        )

    def get_metrics(self) -> dict[str, Any]:
        """The episode's outcome for SkyRL's per-environment averages: whether it was answered
        and correct, its steps, format errors, total reward and reward parts."""
        summary = self.episode.summary()
        return {
            "correct": float(summary["correct"]),
            "answered": float(summary["answered"]),
            "steps": summary["steps"],
            "format_errors": summary["format_errors"],
            "total_reward": summary["total_reward"],
            **summary["reward_parts"],
        }

    def close(self) -> None:
        self.episode.environment.close()


def register_sqlenv(env_id: str = ENV_ID) -> None:
    """Register `SQLEnvSkyRL` with SkyRL-gym under `env_id` (nothing when it already is).

    Args:
        env_id: the id `skyrl_gym.make` and SkyRL's `env_class` name it by.
    """
    if env_id not in registry:
        register(id=env_id, entry_point=f"{__name__}:SQLEnvSkyRL")


def skyrl_rows(env_config: Mapping[str, Any] | None = None, env_id: str = ENV_ID) -> list[dict[str, Any]]:
    """Dataset rows for SkyRL's prompt datasets: one per question of the configured split.

    SkyRL needs a `prompt` column (it filters prompts by length) and an `env_class`; its other
    columns reach the environment as `extras`. Each row's prompt is what `init` returns for its
    question, and `question_id` names the episode. Write them with
    `datasets.Dataset.from_list(rows).to_parquet(path)`.

    Args:
        env_config: the environment's config, as SkyRL will pass it (`dataset`, `split`, ...).
        env_id: the registered environment id.

    Returns:
        One row per question, in the split's order.
    """
    env = SQLEnvSkyRL(env_config)
    return [
        {"prompt": env.prompt(opening), "env_class": env_id, "question_id": question_id}
        for question_id, opening in env.settings.opening_messages()
    ]


register_sqlenv()
