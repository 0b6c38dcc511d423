"""A reply is a tool call in the template's tags, or a JSON object in a code fence or bare;
evaluation counts which format each accepted call used."""

from __future__ import annotations

import pytest

from sqlenv.agents.reply_formats import json_tool_call


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('```json\n{"name": "query", "arguments": {"sql": "SELECT 1"}}\n```', ("query", {"sql": "SELECT 1"})),
        ('I will look first.\n```\n{"name": "describe", "arguments": {"table_name": "cars"}}\n```', ("describe", {"table_name": "cars"})),
        ('{"name": "answer", "arguments": {"value": "42"}}<|im_end|>', ("answer", {"value": "42"})),
        ('```json\n{"name": "sample", "parameters": {"table_name": "t"}}\n```', ("sample", {"table_name": "t"})),
        # the first fenced block that is a call wins; a block of other JSON is skipped
        ('```json\n{"rows": 3}\n```\n```json\n{"name": "answer", "arguments": {"value": "3"}}\n```', ("answer", {"value": "3"})),
    ],
)
def test_json_calls_are_read(reply: str, expected: tuple) -> None:
    assert json_tool_call(reply) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "SELECT name FROM singer",
        "describe",
        '```sql\nSELECT 1\n```',
        '```json\n{"name": "query", "arguments": {"sql": "SELECT 1"}\n```',  # unclosed object
        '{"tool": "query", "arguments": {}}',
        '["query", {"sql": "SELECT 1"}]',
    ],
)
def test_replies_without_a_json_call_are_not_read(reply: str) -> None:
    assert json_tool_call(reply) is None
