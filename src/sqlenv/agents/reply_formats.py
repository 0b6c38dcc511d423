"""How a chat model's reply is read as a tool call, and which of the accepted ways it used.

The chat template's own format comes first: a call inside `<tool_call>` tags (Qwen's Hermes
format), which the tokenizer's response schema parses and which TRL parses in training. Untrained
instruction models often write the same call as a JSON object in a code fence instead
(```` ```json {"name": "query", "arguments": {"sql": "..."}} ``` ````), or as a bare JSON object.
Evaluation accepts those too, and counts which format each accepted call used
(`CALL_FORMATS`), so a report shows how much of a model's score rests on the lenient reading.
Training teaches the tags.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["CALL_FORMATS", "FORMAT_JSON", "FORMAT_TAGGED", "json_tool_call"]

FORMAT_TAGGED = "tagged"  # the chat template's <tool_call> tags
FORMAT_JSON = "json"  # a JSON object, in a code fence or bare
CALL_FORMATS: tuple[str, ...] = (FORMAT_TAGGED, FORMAT_JSON)

# A fenced block: ``` or ```json (any info string), its body up to the closing fence.
_FENCE = re.compile(r"```[A-Za-z_]*[ \t]*\n?(.*?)```", re.DOTALL)


def _call_in(text: str) -> tuple[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    # OpenAI-style "arguments"; some models write "parameters" (Llama's JSON tool format).
    for key in ("arguments", "parameters"):
        if key in data:
            return data["name"], data[key]
    return None


def json_tool_call(text: str) -> tuple[str, Any] | None:
    """The first tool call written as a JSON object `{"name": ..., "arguments": {...}}` in a code
    fence, or as the whole reply.

    Args:
        text: the model's reply, as generated.

    Returns:
        (tool name, arguments) of the first such object, or None when the reply has none.
    """
    for match in _FENCE.finditer(text):
        found = _call_in(match.group(1).strip())
        if found is not None:
            return found
    return _call_in(text.strip().removesuffix("<|im_end|>").strip())
