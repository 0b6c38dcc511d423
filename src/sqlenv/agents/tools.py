"""The four episode actions as tool definitions, defined once.

`TOOLS` holds `describe`, `sample`, `query` and `answer` in the OpenAI / transformers "function"
tool format (`{"type": "function", "function": {"name", "description", "parameters"}}`), which
`tokenizer.apply_chat_template(..., tools=TOOLS)` and OpenAI-compatible servers both accept.
LLM policies (evaluation) and the TRL adapter (training) share these definitions, so the prompt a
model sees at evaluation is the prompt it was trained with. `tool_call_to_action` turns a parsed
tool call into an `SQLAction` (a `ValueError` with a readable message for anything malformed: a
policy counts those as format errors), and `action_to_tool_call` goes the other way (SFT data,
transcripts). `google_docstring` renders a definition as the Google-style docstring TRL reads
from `environment_factory` methods, so those methods can take their text from here too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sqlenv.config import DEFAULT_CONFIG, EnvConfig
from sqlenv.env.models import SQLAction


def _tool(name: str, description: str, parameter: str, parameter_description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {parameter: {"type": "string", "description": parameter_description}},
                "required": [parameter],
            },
        },
    }


def _tools_for(config: EnvConfig) -> tuple[dict[str, Any], ...]:
    """The four tool definitions, their numbers (rows sampled, rows shown) taken from `config`."""
    return (
        _tool(
            "describe",
            "Show a table's columns with their types, its primary and foreign keys, and its row count.",
            "table_name",
            "Name of a table in the database.",
        ),
        _tool(
            "sample",
            f"Show the first {config.sample_rows} rows of a table.",
            "table_name",
            "Name of a table in the database.",
        ),
        _tool(
            "query",
            "Run one read-only SQLite SELECT statement and show up to "
            f"{config.sandbox.max_rows_shown} rows of its result.",
            "sql",
            "A single SQLite SELECT statement.",
        ),
        _answer_tool(config),
    )


def _answer_tool(config: EnvConfig) -> dict[str, Any]:
    """The answer tool: its parameter is `value` in both answer modes (one tool-call parser), its
    description says what the environment grades."""
    if config.answer_mode == "sql":
        return _tool(
            "answer",
            "Give the final answer to the question as one read-only SQLite SELECT statement; its "
            "result is compared with the expected result. This ends the episode.",
            "value",
            "A single SQLite SELECT statement whose result answers the question.",
        )
    return _tool(
        "answer",
        "Give the final answer to the question. This ends the episode.",
        "value",
        "The answer: a single value, or a JSON array of values (one per row; a row of several "
        "columns is itself an array).",
    )


# The tools of an environment with the default config; `tool_definitions(config)` for another one.
TOOLS: tuple[dict[str, Any], ...] = _tools_for(DEFAULT_CONFIG)
# The same in SQL-answer mode: only the answer tool's description differs.
SQL_ANSWER_TOOLS: tuple[dict[str, Any], ...] = _tools_for(replace(DEFAULT_CONFIG, answer_mode="sql"))


def tools_for_answer_mode(answer_mode: str) -> tuple[dict[str, Any], ...]:
    """The default tools of an environment whose ANSWER takes a value ("value") or SQL ("sql").

    Args:
        answer_mode: the environment's `EnvConfig.answer_mode` (observations carry it in their
            metadata as "answer_mode").

    Returns:
        `TOOLS` or `SQL_ANSWER_TOOLS` (shared: copy before editing).
    """
    return SQL_ANSWER_TOOLS if answer_mode == "sql" else TOOLS

# tool name -> (action type, its one parameter)
_ACTIONS: dict[str, tuple[str, str]] = {
    "describe": ("DESCRIBE", "table_name"),
    "sample": ("SAMPLE", "table_name"),
    "query": ("QUERY", "sql"),
    "answer": ("ANSWER", "value"),
}
_TOOL_FOR_ACTION: dict[str, str] = {action: name for name, (action, _) in _ACTIONS.items()}
TOOL_NAMES: tuple[str, ...] = tuple(_ACTIONS)


def tool_definitions(config: EnvConfig | None = None) -> list[dict[str, Any]]:
    """The tool definitions of an environment, as a fresh, mutable list.

    Args:
        config: the environment's config (default: `DEFAULT_CONFIG`); the descriptions name its
            numbers, so a model is told what the environment it plays will do.

    Returns:
        A copy callers may edit without changing the shared `TOOLS`.
    """
    return copy.deepcopy(list(TOOLS if config is None else _tools_for(config)))


def tool_call_to_action(name: str, arguments: Mapping[str, Any] | str | None) -> SQLAction:
    """The `SQLAction` for a tool call; `arguments` is a mapping or its JSON text (as OpenAI sends).

    Raises ValueError, naming what is wrong, for an unknown tool, arguments that are not a JSON
    object, a missing or extra argument, or a table name / SQL that is not a string. An answer
    given as a number or a list is accepted and written as JSON text (`42`, `["a", "b"]`).
    """
    key = name.strip().lower() if isinstance(name, str) else ""
    if key not in _ACTIONS:
        raise ValueError(f"unknown tool {name!r}; the tools are: {', '.join(TOOL_NAMES)}")
    action_type, parameter = _ACTIONS[key]
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments of {key} are not valid JSON: {exc.msg}") from None
    if not isinstance(arguments, Mapping):
        raise ValueError(f"arguments of {key} must be a JSON object like {{{parameter!r}: ...}}")
    extra = sorted(str(k) for k in arguments if k != parameter)
    if parameter not in arguments:
        hint = f" (got {', '.join(extra)})" if extra else ""
        raise ValueError(f"{key} needs the argument {parameter!r}{hint}")
    if extra:
        raise ValueError(f"{key} takes only {parameter!r}; unexpected: {', '.join(extra)}")
    value = arguments[parameter]
    if not isinstance(value, str):
        if action_type != "ANSWER":
            raise ValueError(f"{key}: {parameter!r} must be a string, not {type(value).__name__}")
        value = json.dumps(value)
    return SQLAction(action_type=action_type, argument=value)


def action_to_tool_call(action: SQLAction) -> dict[str, Any]:
    """The tool call (transformers / OpenAI message format) that `tool_call_to_action` maps back
    to `action`: `{"type": "function", "function": {"name": ..., "arguments": {...}}}`."""
    action_type = action.action_type.strip().upper()
    if action_type not in _TOOL_FOR_ACTION:
        raise ValueError(
            f"action type {action.action_type!r} has no tool; known: {', '.join(_TOOL_FOR_ACTION)}"
        )
    name = _TOOL_FOR_ACTION[action_type]
    return {"type": "function", "function": {"name": name, "arguments": {_ACTIONS[name][1]: action.argument}}}


def google_docstring(name: str, config: EnvConfig | None = None) -> str:
    """The tool's description and argument as a Google-style docstring (what TRL parses)."""
    key = name.strip().lower()
    if key not in _ACTIONS:
        raise ValueError(f"unknown tool {name!r}; the tools are: {', '.join(TOOL_NAMES)}")
    tools = TOOLS if config is None else _tools_for(config)
    function = next(t["function"] for t in tools if t["function"]["name"] == key)
    parameter = _ACTIONS[key][1]
    described = function["parameters"]["properties"][parameter]["description"]
    return f"{function['description']}\n\nArgs:\n    {parameter}: {described}\n"
