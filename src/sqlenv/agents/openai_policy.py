"""`OpenAIPolicy`: any OpenAI-compatible chat-completions server with tool calls (vLLM, TGI,
llama.cpp, `transformers serve`) playing episodes, and the conversation in the OpenAI wire format."""

from __future__ import annotations

import json
from typing import Any

from sqlenv.agents.chat_policy import ChatToolPolicy, resolve_max_new_tokens
from sqlenv.agents.reply_formats import FORMAT_JSON, json_tool_call
from sqlenv.agents.solved_examples import SolvedExamples
from sqlenv.agents.tools import tool_call_to_action
from sqlenv.data import Dataset
from sqlenv.env.models import SQLAction
from sqlenv.settings import solved_examples_from_environment


class OpenAIPolicy(ChatToolPolicy):
    """Any OpenAI-compatible chat-completions server with tool calls (vLLM, TGI, llama.cpp,
    `transformers serve`): the same conversation as LLMPolicy, sent as `messages` with
    `tools=TOOLS`. Context is bounded in characters (the server's tokenizer is not at hand)."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str = "not-needed",
        shots: int = 0,
        example_dataset: Dataset | None = None,
        solved_examples: int | SolvedExamples | None = None,
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        max_context_chars: int = 12_000,
        timeout_s: float = 120.0,
    ) -> None:
        if solved_examples is None:  # $SQLENV_SOLVED_EXAMPLES, else none
            solved_examples = solved_examples_from_environment() or 0
        super().__init__(shots=shots, example_dataset=example_dataset, solved_examples=solved_examples)
        from openai import OpenAI

        self.base_url = base_url
        self.client = OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s)
        if model is None:
            try:
                model = self.client.models.list().data[0].id
            except Exception as exc:  # servers differ in how (and whether) they list models
                raise ValueError(f"could not list the models of {base_url} ({exc}); pass model=") from None
        self.model = model
        self.name = self._named(f"openai:{self.model}")
        self.max_new_tokens = resolve_max_new_tokens(max_new_tokens)
        self.temperature = temperature
        self.max_context_chars = max_context_chars

    def clone(self) -> OpenAIPolicy:
        twin = OpenAIPolicy(
            self.base_url,
            self.model,
            shots=self.shots,
            example_dataset=self.example_dataset,
            solved_examples=self._solved_index() or 0,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            max_context_chars=self.max_context_chars,
        )
        twin._examples, twin._examples_mode = self._examples, self._examples_mode
        return twin

    def _reply(self) -> tuple[SQLAction | None, str, str]:
        while sum(len(json.dumps(m)) for m in self._turns) > self.max_context_chars:
            if not self._drop_oldest_exchange():
                break
        from openai import APIStatusError

        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=openai_messages([*self._head, *self._turns]),
                tools=list(self._tools),
                max_tokens=self.max_new_tokens,
                temperature=self.temperature,
            )
        except APIStatusError as exc:
            if not server_could_not_read_reply(exc):
                raise
            return None, f"the server could not read the reply as a tool call ({exc.status_code})", ""
        choice = response.choices[0]
        self._reply_cut_off = choice.finish_reason == "length"
        message = choice.message
        text = message.content or ""
        if not message.tool_calls:
            found = json_tool_call(text)  # a call written as JSON in the text (reply_formats)
            if found is None:
                return None, "no tool call found", text
            self._reply_format = FORMAT_JSON
            try:
                return tool_call_to_action(*found), "", text
            except ValueError as exc:
                return None, str(exc), text
        call = message.tool_calls[0]
        try:
            return tool_call_to_action(call.function.name, call.function.arguments), "", text
        except ValueError as exc:
            return None, str(exc), text or f"{call.function.name}({call.function.arguments})"


def server_could_not_read_reply(error: Any) -> bool:
    """Whether a server's error answer means the model's reply was no readable tool call.

    Some servers fail the request instead of returning the text when the model's tool call is not
    valid JSON: `transformers serve` answered 500, and from transformers 5.25 answers 400 with the
    parser's complaint as its `detail`. That is the model's format error, not the request's; any
    other 4xx (an unknown model, a bad argument) is the caller's mistake and is raised.

    Args:
        error: an `openai.APIStatusError` (anything with `status_code` and `body`).

    Returns:
        True for a 5xx, or a 400 whose body says a parser could not parse the reply.
    """
    if error.status_code >= 500:
        return True
    body = error.body if isinstance(error.body, dict) else {}
    detail = str(body.get("detail", body.get("error", "")))
    return error.status_code == 400 and "could not parse" in detail


def openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation in the OpenAI wire format: tool calls get ids and JSON-text arguments,
    and each tool result names the call it answers."""
    out: list[dict[str, Any]] = []
    last_id = ""
    for index, message in enumerate(messages):
        if message.get("tool_calls"):
            last_id = f"call_{index}"
            function = message["tool_calls"][0]["function"]
            arguments = function["arguments"]
            out.append(
                {
                    "role": "assistant",
                    "content": message.get("content") or None,
                    "tool_calls": [
                        {
                            "id": last_id,
                            "type": "function",
                            "function": {
                                "name": function["name"],
                                "arguments": arguments
                                if isinstance(arguments, str)
                                else json.dumps(arguments),
                            },
                        }
                    ],
                }
            )
        elif message["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": last_id, "content": message["content"]})
        else:
            out.append({"role": message["role"], "content": message["content"]})
    return out
