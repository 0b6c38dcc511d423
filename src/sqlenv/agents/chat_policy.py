"""The conversation every chat-model policy shares: the prompt, the tool results, the format-error
feedback and context truncation. A subclass supplies only `_reply()`: a local transformers model
(`sqlenv.agents.local_policy`) or an OpenAI-compatible server (`sqlenv.agents.openai_policy`).

Each reply must be exactly one tool call (the tool schema is `sqlenv.agents.tools.TOOLS`, or
`SQL_ANSWER_TOOLS` when the environment grades SQL answers; shared with training), in the chat template's tags or as a JSON object (`sqlenv.agents.reply_formats`;
`call_formats` counts which, per episode). A reply that does not parse as a tool call is a format error: the step is spent
(the environment receives an invalid action) and the model is told what went wrong. A reply may
take `max_new_tokens` tokens (default 256, else `$SQLENV_MAX_NEW_TOKENS`, `sqlenv eval
--max-new-tokens`): enough for any spider10 gold query written as a tool call. A policy whose
context can take no more turns raises `ContextFull`; the episode then ends without an answer
(`sqlenv.evaluation.episodes.run_episode`).
"""

from __future__ import annotations

from typing import Any

from sqlenv.agents.prompts import (
    FORMAT_ERROR_ACTION,
    FORMAT_ERROR_MESSAGE,
    answer_mode_of,
    example_messages,
    question_message,
    system_message,
    tool_result_text,
    truncate,
)
from sqlenv.agents.reply_formats import FORMAT_TAGGED
from sqlenv.agents.solved_examples import EXAMPLES_RANKING, SolvedExamples, check_solved_examples_count
from sqlenv.agents.tools import TOOLS, action_to_tool_call, tools_for_answer_mode
from sqlenv.config import DEFAULT_PROMPT_CONFIG
from sqlenv.data import Dataset
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.settings import MAX_NEW_TOKENS_ENV, max_new_tokens_from_environment

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "MAX_NEW_TOKENS_ENV",
    "ChatToolPolicy",
    "ContextFull",
    "resolve_max_new_tokens",
]

DEFAULT_MAX_NEW_TOKENS = DEFAULT_PROMPT_CONFIG.max_new_tokens  # why 256: `PromptConfig.max_new_tokens`


class ContextFull(Exception):
    """The model's context cannot take another turn: the episode ends without an answer."""


def resolve_max_new_tokens(value: int | None = None) -> int:
    """The per-reply token limit: `value`, else $SQLENV_MAX_NEW_TOKENS, else the default."""
    if value is None:
        value = max_new_tokens_from_environment()
        if value is None:
            return DEFAULT_MAX_NEW_TOKENS
    if value < 1:
        raise ValueError(f"the per-reply token limit must be at least 1, not {value}")
    return value


class ChatToolPolicy:
    """The conversation shared by every chat-model policy: the prompt, the tool results, the
    format-error feedback and context truncation. Subclasses supply `_reply()`: the model's
    next action (or None and the problem), and its raw text, of at most `max_new_tokens` tokens
    (evaluation journals record it: it changes what a model can answer)."""

    name = "chat"
    max_new_tokens = DEFAULT_MAX_NEW_TOKENS

    def __init__(
        self,
        *,
        shots: int = 0,
        example_dataset: Dataset | None = None,
        solved_examples: int | SolvedExamples = 0,
    ) -> None:
        """`solved_examples`: how many to show, or an index already built (clones and the live
        training callback share one rather than fitting TF-IDF again)."""
        if shots and example_dataset is None:
            raise ValueError(
                "few-shot prompting needs example_dataset (its train split supplies the examples)"
            )
        self._solved: SolvedExamples | None = None
        if isinstance(solved_examples, SolvedExamples):
            self._solved, solved_examples = solved_examples, solved_examples.count
        elif check_solved_examples_count(solved_examples) and example_dataset is None:
            raise ValueError("solved examples need example_dataset (its train split supplies them)")
        self.shots = shots
        self.example_dataset = example_dataset
        self.solved_examples = solved_examples
        self.format_errors = 0
        # Accepted calls of this episode by format (`sqlenv.agents.reply_formats.CALL_FORMATS`);
        # `_reply()` sets `_reply_format` for each call it accepts.
        self.call_formats: dict[str, int] = {}
        self._reply_format = FORMAT_TAGGED
        self._examples: list[dict[str, Any]] | None = None
        self._examples_mode = "value"  # the answer mode the examples were made for
        # The tools the model is shown, by the environment's answer mode (set at each reset).
        self._tools: tuple[dict[str, Any], ...] = TOOLS
        self._head: list[dict[str, Any]] = []
        self._turns: list[dict[str, Any]] = []
        self._pending_problem: str | None = None
        self._seed = 0
        # Why the last reply was not a tool call, for transcripts (None after a valid one). The
        # model is told the problem alone; this also says when the reply hit the token limit.
        self.last_format_error: str | None = None
        self._reply_cut_off = False  # set by `_reply()`: the last reply stopped at max_new_tokens

    @property
    def decoding(self) -> str:
        """How replies are chosen: "greedy", or "temperature T" (sampled, seeded by the episode's
        seed and the reply's turn). Evaluation journals and results record it: a sampled run is
        another run than a greedy one. Subclasses set `temperature` (and `greedy`, where 0 is not
        how they say greedy)."""
        temperature = float(getattr(self, "temperature", 0.0))
        if getattr(self, "greedy", False) or temperature == 0.0:
            return "greedy"
        return f"temperature {temperature:g}"

    def reset(self, observation: SQLObservation, seed: int) -> None:
        mode = answer_mode_of(observation)
        if self._examples is None or self._examples_mode != mode:
            self._examples = (
                example_messages(self.example_dataset, self.shots, seed=0, answer_mode=mode)  # type: ignore[arg-type]
                if self.example_dataset
                else []
            )
            self._examples_mode = mode
        self._tools = tools_for_answer_mode(mode)
        self._head = [system_message(observation), *self._examples, question_message(observation, self._solved_index())]
        self._turns = []
        self._pending_problem = None
        self.format_errors = 0
        self.call_formats = {}
        self.last_format_error = None
        self._seed = seed

    def act(self, observation: SQLObservation) -> SQLAction:
        if self._turns:  # report what the last action did
            if self._pending_problem is not None:
                self._turns.append(
                    {"role": "user", "content": FORMAT_ERROR_MESSAGE.format(problem=self._pending_problem)}
                )
                self._pending_problem = None
            else:
                last_call = self._turns[-1]["tool_calls"][0]["function"]["name"]
                self._turns.append(
                    {"role": "tool", "name": last_call, "content": tool_result_text(observation)}
                )
        self._reply_cut_off = False
        self._reply_format = FORMAT_TAGGED
        action, problem, text = self._reply()
        self.last_format_error = None
        if action is None:
            self.format_errors += 1
            self._pending_problem = problem
            # The first line only: a parser error goes on to quote the reply, which the action shows.
            reason = problem.split("\n", 1)[0]
            if self._reply_cut_off:
                reason = f"cut off at the {self.max_new_tokens}-token limit; {reason}"
            self.last_format_error = reason
            self._turns.append(
                {
                    "role": "assistant",
                    "content": truncate(text, DEFAULT_PROMPT_CONFIG.format_error_reply_chars),
                }
            )
            return SQLAction(
                action_type=FORMAT_ERROR_ACTION,
                argument=truncate(text, DEFAULT_PROMPT_CONFIG.format_error_action_chars),
            )
        self.call_formats[self._reply_format] = self.call_formats.get(self._reply_format, 0) + 1
        # The conversation shows the call in the template's own format whatever the model wrote,
        # so the model sees the format training teaches.
        self._turns.append({"role": "assistant", "content": "", "tool_calls": [action_to_tool_call(action)]})
        return action

    def _named(self, model: str) -> str:
        """The policy's name: the model, the shots and the solved examples it is prompted with."""
        solved = f"-{self.solved_examples}solved" if self.solved_examples else ""
        return f"{model}-{self.shots}shot{solved}"

    @property
    def examples_ranking(self) -> str | None:
        """How the solved examples in the prompt are ranked (None: no examples); a journal records it."""
        return EXAMPLES_RANKING if self.solved_examples else None

    def _solved_index(self) -> SolvedExamples | None:
        """The solved-examples index, built on first use and shared with clones."""
        if self.solved_examples and self._solved is None:
            assert self.example_dataset is not None  # checked in __init__
            self._solved = SolvedExamples(self.example_dataset, self.solved_examples)
        return self._solved

    def _reply(self) -> tuple[SQLAction | None, str, str]:
        raise NotImplementedError

    def _drop_oldest_exchange(self) -> bool:
        """Drop the oldest assistant call and its result; False when only the latest remain."""
        if len(self._turns) <= 2:
            return False
        self._turns = self._turns[2:]
        return True

    def _shorten_latest_result(self, excess_tokens: int) -> bool:
        """Cut the text the model reads last (a tool result, or the format-error feedback) by
        `excess_tokens` characters, ending it with "…"; False when it is already empty. A token
        is at least a character, so no cut removes more than is needed; the text shrinks at
        every call, so a caller cutting until the prompt fits stops.

        Args:
            excess_tokens: how many tokens the prompt is over its budget.

        Returns:
            Whether anything was cut."""
        if not self._turns or self._turns[-1]["role"] == "assistant":
            return False
        latest = self._turns[-1]
        text = str(latest["content"]).removesuffix("…")
        if not text:
            return False
        keep = max(0, len(text) - max(1, excess_tokens))
        self._turns[-1] = {**latest, "content": text[:keep] + "…"}
        return True
