"""One sqlenv episode played as a chat, for the RL stacks that drive the conversation themselves
(`sqlenv.integrations.skyrl_gym_env`, `sqlenv.integrations.verifiers_env`).

The episode is `SQLEnvironment`'s, and the chat is the one `sqlenv eval` plays with a chat model
(`sqlenv.agents.chat_policy`): the system message and the opening question message of
`sqlenv.agents.prompts` (the question and the table names; the schema stays hidden unless
`show_schema`), one tool call per reply, the tool result the model reads back
(`tool_result_text`), and for a reply that is no valid tool call the same feedback
(`FORMAT_ERROR_MESSAGE`) and the same invalid action sent to the environment, which spends the
step and pays the step cost. Under the default scoring every step's reward and its parts are the
environment's own, so an episode played through a stack scores what it scores in process.

An episode is scored one of two ways (`SCORINGS`, the settings' `scoring`): "env", the
environment's reward as it paid it; or "grpo", as `sqlenv train grpo` scores a rollout
(`sqlenv.env.rewards.scored_reward_parts`): an episode that ends without an ANSWER scores as a
wrong answer and keeps its shaping's penalties but not its payments. Under "grpo" the step that
ends the episode also carries the difference, so a stack that sums step rewards gets the same score.

`EpisodeSettings` names what a stack's configuration chooses (dataset, split, answer mode, schema
shown, step budget, scoring) and writes the opening messages of dataset rows; `ChatEpisode` plays
one episode; `read_reply` reads a reply written as text (a call in `<tool_call>` tags, else a JSON
object: `sqlenv.agents.reply_formats`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from sqlenv.agents.prompts import (
    FORMAT_ERROR_ACTION,
    FORMAT_ERROR_MESSAGE,
    question_message,
    system_message,
    tool_result_text,
    truncate,
)
from sqlenv.agents.reply_formats import FORMAT_JSON, FORMAT_TAGGED, json_tool_call
from sqlenv.agents.tools import tool_call_to_action, tool_definitions
from sqlenv.config import DEFAULT_CONFIG, DEFAULT_PROMPT_CONFIG, EnvConfig, RewardConfig
from sqlenv.data import Dataset, load_dataset
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation, SQLState
from sqlenv.env.rewards import scored_reward_parts

__all__ = [
    "REWARD_PARTS",
    "SCORINGS",
    "SETTINGS_DEFAULTS",
    "ChatEpisode",
    "EpisodeSettings",
    "PlayedStep",
    "episode_reward_parts",
    "read_reply",
]

# The reward's parts as sqlenv's GRPO names them (`grpo.reward_weights`): the terminal reward, the
# progress shaping and the operational shaping. They add up to the episode's total reward.
REWARD_PARTS: tuple[str, ...] = ("correctness", "progress", "operational")

# How an episode is scored: "env", the environment's reward as it paid it; "grpo", as sqlenv's GRPO
# scores a rollout (`sqlenv.env.rewards.scored_reward_parts`).
SCORINGS: tuple[str, ...] = ("env", "grpo")
# The environment's layer (a step's `reward_components` key) of each reward part.
_LAYERS: dict[str, str] = {"correctness": "terminal", "progress": "progress", "operational": "operational"}

# A call in Qwen's Hermes format, as its chat template teaches: JSON between the tags.
_TAGGED_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class EpisodeSettings:
    """What an integration's configuration chooses about its episodes.

    Attributes:
        dataset: a dataset name (`demo`, `spider10`, `spider`) or a bring-your-own folder.
        split: the split questions are drawn from when an episode names none.
        spider_dir: where Spider is (else `$SQLENV_SPIDER_DIR`), for the Spider datasets.
        answer_mode: what ANSWER takes: the value ("value") or one SQL statement ("sql").
        show_schema: show the CREATE TABLE statements in the first message (a control).
        step_budget: steps per episode (None: `EnvConfig.step_budget`, 15).
        scoring: how an episode is scored (`SCORINGS`): "env" (the environment's reward as it
            paid it) or "grpo" (as `sqlenv train grpo` scores it: an episode that ends without an
            ANSWER scores as a wrong answer keeping only its shaping's penalties).
    """

    dataset: str = "demo"
    split: str = "train"
    spider_dir: str | None = None
    answer_mode: str = "value"
    show_schema: bool = False
    step_budget: int | None = None
    scoring: str = "env"
    config: EnvConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_scoring(self.scoring)
        if self.step_budget is not None and (isinstance(self.step_budget, bool) or self.step_budget < 1):
            raise ValueError(f"step_budget must be a positive number of steps, not {self.step_budget!r}")
        budget = DEFAULT_CONFIG.step_budget if self.step_budget is None else int(self.step_budget)
        # EnvConfig checks the answer mode and show_schema, naming the bad value.
        config = replace(
            DEFAULT_CONFIG,
            step_budget=budget,
            answer_mode=self.answer_mode,  # type: ignore[arg-type]
            show_schema=self.show_schema,
        )
        object.__setattr__(self, "config", config)

    def load(self) -> Dataset:
        """The dataset, loaded once per process (`sqlenv.data.load_dataset` caches it)."""
        spider = str(Path(self.spider_dir).expanduser()) if self.spider_dir else None
        return load_dataset(self.dataset, spider)

    def environment(self) -> SQLEnvironment:
        """A new environment on the (shared, read-only) dataset.

        Raises:
            KeyError: the dataset has no such split.
        """
        return SQLEnvironment(dataset=self.load(), split=self.split, config=self.config)

    def tools(self) -> list[dict[str, Any]]:
        """The four tools in the OpenAI function format, described for these settings."""
        return tool_definitions(self.config)

    def episode(self) -> ChatEpisode:
        """A new chat episode on a new environment, scored as these settings say.

        Returns:
            The episode, not started.

        Raises:
            KeyError: the dataset has no such split.
        """
        return ChatEpisode(self.environment(), scoring=self.scoring)

    def opening_messages(
        self, question_ids: Sequence[str] | None = None
    ) -> list[tuple[str, list[dict[str, str]]]]:
        """The opening messages of each question's episode, as a dataset row's prompt holds them.

        Args:
            question_ids: the questions (any split of the dataset); None: every question of the
                split, in its order.

        Returns:
            (question id, [system message, question message]) per question, in order: what
            `ChatEpisode.start` returns for it.

        Raises:
            KeyError: an unknown question id, or a split the dataset does not have.
        """
        environment = self.environment()
        try:
            if question_ids is None:
                question_ids = [record.question_id for record in environment.questions]
            episode = ChatEpisode(environment)
            return [(question_id, episode.start(question_id=question_id)) for question_id in question_ids]
        finally:
            environment.close()


# The settings a stack's configuration may name, with their defaults: the keys each integration
# accepts in its own config (and names when a key is unknown).
SETTINGS_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(EpisodeSettings) if f.init}


def _check_scoring(scoring: object) -> None:
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, not {scoring!r}")


def episode_reward_parts(state: SQLState, scoring: str, reward: RewardConfig) -> dict[str, float]:
    """An episode's reward so far by part (`REWARD_PARTS`), scored as `scoring` says.

    Args:
        state: the environment's state of the episode.
        scoring: "env" (the parts as the environment paid them; they add up to its
            `state.total_reward`) or "grpo" (`sqlenv.env.rewards.scored_reward_parts`).
        reward: the environment's reward constants.

    Returns:
        {"correctness", "progress", "operational"}.

    Raises:
        ValueError: an unknown scoring.
    """
    _check_scoring(scoring)
    if scoring == "grpo":
        return scored_reward_parts(
            answered=state.answered,
            terminal=state.terminal_reward,
            progress=state.progress_reward,
            operational=state.operational_reward,
            reward=reward,
        )
    return {
        "correctness": state.terminal_reward,
        "progress": state.progress_reward,
        "operational": state.operational_reward,
    }


@dataclass(frozen=True)
class PlayedStep:
    """What one reply did.

    Attributes:
        observation: the environment's observation after the step.
        reward: the step's reward (the environment's; the terminal reward on the last step). Under
            "grpo" scoring the step that ends the episode also carries the difference between the
            episode's GRPO score and what the environment paid, so the steps add up to the score.
        parts: the step's reward by layer (`operational`, `progress`, `terminal`), adding up to
            `reward`.
        feedback: what the model reads next: the tool result, or the format-error message.
        format_error: why the reply was no valid tool call (None when it was one).
        call_format: how a valid call was written (`reply_formats.CALL_FORMATS`, or "tool_call"
            for a call the server parsed); None for a format error.
    """

    observation: SQLObservation
    reward: float
    parts: dict[str, float]
    feedback: str
    format_error: str | None
    call_format: str | None

    @property
    def done(self) -> bool:
        return self.observation.done


class ChatEpisode:
    """One sqlenv episode as chat messages (module docstring).

    Args:
        environment: the environment the episode plays in.
        scoring: how the episode is scored (`SCORINGS`; default "env").

    Raises:
        ValueError: an unknown scoring.
    """

    def __init__(self, environment: SQLEnvironment, scoring: str = "env") -> None:
        _check_scoring(scoring)
        self.environment = environment
        self.scoring = scoring
        self.observation: SQLObservation | None = None
        self.format_errors = 0
        self.steps = 0

    def start(self, question_id: str | None = None, seed: int | None = None) -> list[dict[str, str]]:
        """Reset the environment to a question and return the opening messages.

        Args:
            question_id: the question to play (any split of the dataset).
            seed: without a question_id, which question of the split to draw.

        Returns:
            The system message and the question message, as `sqlenv eval` shows them.

        Raises:
            KeyError: an unknown question_id.
        """
        self.observation = self.environment.reset(seed=seed, question_id=question_id)
        self.format_errors = 0
        self.steps = 0
        return [system_message(self.observation), question_message(self.observation)]

    @property
    def question_id(self) -> str:
        return str(self._started().metadata["question_id"])

    @property
    def done(self) -> bool:
        return self._started().done

    def play(
        self, action: SQLAction | None, problem: str = "", text: str = "", call_format: str | None = None
    ) -> PlayedStep:
        """Apply one reply: its action, or, when it was no valid tool call (`action` None), the
        invalid action a chat policy sends for it.

        Args:
            action: the reply's action, or None for a format error.
            problem: why the reply was no valid tool call (the model is told).
            text: the reply as written (a format error sends its start as the invalid action, so
                that repeating the same bad reply is penalised as a repeat).
            call_format: how a valid call was written, for the step's record.

        Returns:
            The step: its observation, reward and parts, and what the model reads next.
        """
        was_done = self._started().done
        self.steps += 1
        if action is None:
            self.format_errors += 1
            action = SQLAction(
                action_type=FORMAT_ERROR_ACTION,
                argument=truncate(text, DEFAULT_PROMPT_CONFIG.format_error_action_chars),
            )
            observation = self.environment.step(action)
            feedback = FORMAT_ERROR_MESSAGE.format(problem=problem)
            return self._played(observation, feedback, problem, None, was_done)
        observation = self.environment.step(action)
        return self._played(observation, tool_result_text(observation), None, call_format, was_done)

    async def play_async(
        self, action: SQLAction | None, problem: str = "", text: str = "", call_format: str | None = None
    ) -> PlayedStep:
        """`play` for an event loop: QUERY and ANSWER run on the environment's shared thread pool
        (`SQLEnvironment.step_async`), so a slow query never stalls the loop's other episodes."""
        was_done = self._started().done
        if action is None:
            return self.play(None, problem, text)  # an unknown action: answered without SQL
        self.steps += 1
        observation = await self.environment.step_async(action)
        return self._played(observation, tool_result_text(observation), None, call_format, was_done)

    def reward_parts(self) -> dict[str, float]:
        """The episode's reward so far by part (`REWARD_PARTS`), scored as `scoring` says
        (`episode_reward_parts`), also for an episode a stack cut short: under "env" they add up
        to the environment's `state.total_reward`; under "grpo" an episode not (yet) answered
        scores as a wrong answer keeping only its shaping's penalties."""
        return episode_reward_parts(self.environment.state, self.scoring, self.environment.config.reward)

    def total_reward(self) -> float:
        """The episode's score so far: the sum of `reward_parts()` (under "env", exactly the
        environment's `state.total_reward`)."""
        if self.scoring == "env":
            return self.environment.state.total_reward
        return sum(self.reward_parts().values())

    def summary(self) -> dict[str, Any]:
        """The episode's outcome as plain values (JSON-serialisable), for a stack's records."""
        state = self.environment.state
        return {
            "question_id": state.question_id,
            "db_id": state.db_id,
            "answered": state.answered,
            "correct": bool(state.correct),
            "done": state.done,
            "steps": state.step_count,
            "format_errors": self.format_errors,
            "total_reward": self.total_reward(),
            "reward_parts": self.reward_parts(),
        }

    def _started(self) -> SQLObservation:
        if self.observation is None:
            raise RuntimeError("no episode: call start() first")
        return self.observation

    def _played(
        self,
        observation: SQLObservation,
        feedback: str,
        format_error: str | None,
        call_format: str | None,
        was_done: bool,
    ) -> PlayedStep:
        self.observation = observation
        parts = {k: float(v) for k, v in (observation.metadata.get("reward_components") or {}).items()}
        reward = float(observation.reward or 0.0)
        if self.scoring == "grpo" and observation.done and not was_done:
            # The step that ends the episode settles it: a stack that sums step rewards (SkyRL,
            # verl's tool rewards) then gets the GRPO score. Only once: later steps pay nothing.
            state = self.environment.state
            paid = episode_reward_parts(state, "env", self.environment.config.reward)
            for part, scored in self.reward_parts().items():
                difference = scored - paid[part]
                if difference:
                    parts[_LAYERS[part]] = parts.get(_LAYERS[part], 0.0) + difference
                    reward += difference
        return PlayedStep(
            observation=observation,
            reward=reward,
            parts=parts,
            feedback=feedback,
            format_error=format_error,
            call_format=call_format,
        )


def read_reply(text: str) -> tuple[SQLAction | None, str, str | None]:
    """The action of a reply written as text: a call in `<tool_call>` tags (the chat template's
    format), else a JSON object in a code fence or bare (`reply_formats.json_tool_call`).

    Args:
        text: the model's reply as generated.

    Returns:
        (action, "", call format) for a valid call; (None, the problem, None) otherwise.
    """
    tagged = _TAGGED_CALL.search(text)
    if tagged is not None:
        try:
            call = json.loads(tagged.group(1))
        except ValueError as exc:
            return None, f"the tool call is not valid JSON: {exc}", None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return None, f"the tool call is not a JSON object with a name and arguments: {call!r}", None
        name, arguments, call_format = call["name"], call.get("arguments"), FORMAT_TAGGED
    else:
        found = json_tool_call(text)
        if found is None:
            return None, "no tool call found", None
        (name, arguments), call_format = found, FORMAT_JSON
    try:
        return tool_call_to_action(name, arguments), "", call_format
    except ValueError as exc:
        return None, str(exc), None
