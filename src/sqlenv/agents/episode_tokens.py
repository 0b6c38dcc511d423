"""An episode's conversation as the token ids a local model read and wrote, and how the
environment's turns are added to it.

A local model's context only grows during an episode: its own reply stays in it exactly as it was
generated (whatever the parser made of it), and the environment's answer (a tool result, or the
format-error feedback) is appended as the tokens the chat template renders for that message, with
the generation prompt of the next reply. Evaluation plays episodes this way and GRPO trains on the
same token ids (`sqlenv.training.rollouts`): the policy is trained on the sequence it was sampled
from, token for token, and the environment's tokens are masked out of the loss.

`EpisodeTokens` holds one episode's ids: the opening prompt (system message, tools, question), then
the completion, each token marked as the model's (1) or the environment's (0), with the sampling
log-probability of each model token where the engine reports it. `message_suffix_ids` renders an
environment message as the tokens that follow a reply, the way TRL's multi-turn loop does
(`GRPOTrainer._get_tool_suffix_ids`): the template renders a short conversation with and without
the message, and the ids after the end of the assistant's turn are the suffix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EpisodeTokens", "message_suffix_ids"]

MODEL_TOKEN = 1
ENVIRONMENT_TOKEN = 0


@dataclass
class EpisodeTokens:
    """One episode's conversation in token ids (module docstring).

    Attributes:
        prompt_ids: the opening prompt, generation prompt included.
        completion_ids: everything after it: replies and environment turns, in order.
        model_mask: for each completion token, 1 where the model generated it, 0 where the
            environment (or the chat template) added it.
        logprobs: for each completion token, the log-probability the engine sampled it with (0.0
            for environment tokens); None once any reply came from an engine that reports none.
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    model_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        """The whole conversation: the prompt, then the completion."""
        return self.prompt_ids + self.completion_ids

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    def add_reply(self, ids: list[int], logprobs: list[float] | None) -> None:
        """Append a reply the model generated.

        Args:
            ids: its token ids, the stop token included when one ended it.
            logprobs: the log-probability of each, or None when the engine reports none.
        """
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError(f"a reply of {len(ids)} tokens came with {len(logprobs)} log-probabilities")
        self.completion_ids += ids
        self.model_mask += [MODEL_TOKEN] * len(ids)
        if self.logprobs is not None:
            self.logprobs = None if logprobs is None else self.logprobs + list(logprobs)

    def add_environment(self, ids: list[int]) -> None:
        """Append tokens the model did not write (a tool result, the feedback, the template's
        markers).

        Args:
            ids: their token ids.
        """
        self.completion_ids += ids
        self.model_mask += [ENVIRONMENT_TOKEN] * len(ids)
        if self.logprobs is not None:
            self.logprobs += [0.0] * len(ids)

    @property
    def model_tokens(self) -> int:
        """How many completion tokens the model generated."""
        return sum(self.model_mask)

    def to_json(self) -> dict[str, Any]:
        """The ids, mask and log-probabilities as plain lists."""
        return {
            "prompt_ids": list(self.prompt_ids),
            "completion_ids": list(self.completion_ids),
            "model_mask": list(self.model_mask),
            "logprobs": None if self.logprobs is None else list(self.logprobs),
        }


_DUMMY_QUESTION = {"role": "user", "content": "dummy"}


def _dummy_call(name: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}],
    }


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]], generation: bool) -> list[int]:
    rendered = tokenizer.apply_chat_template(
        messages, tools=tools or None, add_generation_prompt=generation, tokenize=True, return_dict=False
    )
    if isinstance(rendered, dict) or hasattr(rendered, "keys"):  # a BatchEncoding in some versions
        rendered = rendered["input_ids"]
    return list(rendered)


def message_suffix_ids(tokenizer: Any, message: dict[str, Any], tools: list[dict[str, Any]]) -> list[int]:
    """The token ids that follow a model's reply when `message` is the environment's answer to it:
    the end of the assistant's turn, the message, and the generation prompt of the next reply.

    Args:
        tokenizer: the model's tokenizer, with its chat template.
        message: a `tool` message (a tool result) or a `user` message (the format-error feedback).
        tools: the tool schemas the conversation is rendered with.

    Returns:
        The suffix's ids. They start after the assistant turn's end-of-turn token (the reply's own
        stop token), so a reply that ended with it is followed by them directly.

    Raises:
        ValueError: the chat template does not render the shorter conversation as a prefix of the
            longer one (it rewrites earlier turns), so no suffix can be cut from it.
    """
    name = str(message.get("name") or "tool")
    prefix = _render(tokenizer, [_DUMMY_QUESTION, _dummy_call(name)], tools, generation=False)
    # Templates end an assistant turn with the end-of-turn token and a newline; the reply stops at
    # the token, so the suffix starts right after it (the newline is the environment's).
    eos = tokenizer.eos_token_id
    ends = [index for index, token in enumerate(prefix) if token == eos]
    if ends:
        prefix = prefix[: ends[-1] + 1]
    full = _render(tokenizer, [_DUMMY_QUESTION, _dummy_call(name), message], tools, generation=True)
    if full[: len(prefix)] != prefix:
        raise ValueError(
            "the chat template renders a conversation's earlier turns differently once a message follows "
            "them: an environment turn cannot be appended as tokens"
        )
    return full[len(prefix) :]
