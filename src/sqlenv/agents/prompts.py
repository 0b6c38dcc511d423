"""The text a chat model reads: the system prompt, the opening question message, tool results,
the format-error feedback and worked examples. Evaluation (`sqlenv.agents.chat_policy`) and
training (`sqlenv.training.sft_data`, `sqlenv.training.grpo`) build their prompts from here, so a
model is evaluated on the prompt it was trained on."""

from __future__ import annotations

import random
from typing import Any

from sqlenv.agents.solved_examples import SolvedExamples, examples_text
from sqlenv.agents.tools import action_to_tool_call
from sqlenv.config import DEFAULT_PROMPT_CONFIG, AnswerMode, EnvConfig
from sqlenv.data import Dataset, QuestionRecord
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.env.verifier import format_answer

FORMAT_ERROR_ACTION = "FORMAT_ERROR"  # what the environment receives for an unparseable reply

# The system prompt's parts: what the agent is shown (the table names, or the whole schema with
# `EnvConfig.show_schema`), the tools, and the answer format of the answer mode.
_SCHEMA_HIDDEN = (
    "You answer a question about a SQLite database that you cannot see. Explore it with the tools, "
)
_SCHEMA_SHOWN = (
    "You answer a question about a SQLite database whose schema (one CREATE TABLE statement per "
    "table) is given in the question message. You can still explore it with the tools, "
)
_TOOLS_AND_BUDGET = (
    "one tool call per reply: describe(table_name) shows a table's columns and keys, "
    "sample(table_name) shows a few rows, query(sql) runs one read-only SELECT statement, and "
    "answer(value) gives the final answer and ends the episode. You have at most {budget} tool "
    "calls. "
)
_VALUE_FORMAT = (
    "Answer format: a single value as plain text (42, Paris); several values as a JSON "
    'array (["a", "b"]); rows of several columns as a JSON array of arrays ([["a", 1], ["b", 2]]).'
)
_SQL_FORMAT = (
    "Answer format: one SQLite SELECT statement whose result answers the question; its "
    "result is compared with the expected one."
)
SYSTEM_PROMPT = _SCHEMA_HIDDEN + _TOOLS_AND_BUDGET + _VALUE_FORMAT
SQL_ANSWER_SYSTEM_PROMPT = _SCHEMA_HIDDEN + _TOOLS_AND_BUDGET + _SQL_FORMAT
SCHEMA_SHOWN_SYSTEM_PROMPT = _SCHEMA_SHOWN + _TOOLS_AND_BUDGET + _VALUE_FORMAT
SQL_ANSWER_SCHEMA_SHOWN_SYSTEM_PROMPT = _SCHEMA_SHOWN + _TOOLS_AND_BUDGET + _SQL_FORMAT
FORMAT_ERROR_MESSAGE = (
    "Your reply was not a valid tool call ({problem}). Reply with exactly one tool call: "
    "describe, sample, query or answer, with its one argument."
)
TOOL_RESULT_CHARS = DEFAULT_PROMPT_CONFIG.tool_result_chars  # tool output kept in the prompt per turn


def truncate(text: str, limit: int = TOOL_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


TOOL_ERROR_PREFIX = "error: "  # how a tool result that is an error starts


def tool_result_text(observation: SQLObservation) -> str:
    """What the model reads back from a tool: the result, or the error."""
    return truncate(f"{TOOL_ERROR_PREFIX}{observation.error}" if observation.error else observation.result)


def answer_mode_of(observation: SQLObservation) -> str:
    """The answer mode an observation's environment grades ("value" when it does not say)."""
    return str(observation.metadata.get("answer_mode", "value"))


def schema_shown(observation: SQLObservation) -> bool:
    """Whether an observation's environment shows the schema (`EnvConfig.show_schema`; False when
    it does not say)."""
    return observation.metadata.get("show_schema") is True


def system_message(observation: SQLObservation) -> dict[str, str]:
    """The system message of an episode: the rules, its step budget and, by the environment's
    answer mode, how to answer; where the schema is shown, that it is in the question message.

    Args:
        observation: the episode's first observation.

    Returns:
        A chat message with role "system".
    """
    sql = answer_mode_of(observation) == "sql"
    if schema_shown(observation):
        template = SQL_ANSWER_SCHEMA_SHOWN_SYSTEM_PROMPT if sql else SCHEMA_SHOWN_SYSTEM_PROMPT
    else:
        template = SQL_ANSWER_SYSTEM_PROMPT if sql else SYSTEM_PROMPT
    return {"role": "system", "content": template.format(budget=observation.budget_remaining)}


def question_message(observation: SQLObservation, examples: SolvedExamples | None = None) -> dict[str, str]:
    """The episode's opening user message: the question, the table list (and with it, where the
    environment shows the schema, the CREATE TABLE statements) and, with `examples`, the most
    similar solved train questions (`sqlenv.agents.solved_examples`)."""
    content = f"Question: {observation.question}\n{observation.schema_info}"
    if examples is not None and (block := examples_text(examples.for_observation(observation))):
        content += f"\n{block}"
    return {"role": "user", "content": content}


def example_messages(
    dataset: Dataset, count: int, seed: int, answer_mode: AnswerMode = "value"
) -> list[dict[str, Any]]:
    """`count` worked examples from the train split: oracle episodes with the real tool results.

    Args:
        dataset: where the train questions come from.
        count: how many examples (0: none).
        seed: which questions.
        answer_mode: what the examples answer with: the gold value ("value") or the gold SQL ("sql").

    Returns:
        The examples' messages, one user question then assistant/tool turns per example.
    """
    if count <= 0:
        return []
    from sqlenv.env.environment import SQLEnvironment

    candidates = [r for r in dataset.split("train") if len(r.tables_involved) == 1 and not r.empty_gold]
    chosen = random.Random(seed).sample(candidates, min(count, len(candidates)))
    env = SQLEnvironment(dataset=dataset, split="train", config=EnvConfig(answer_mode=answer_mode))
    messages: list[dict[str, Any]] = []
    for record in chosen:
        messages += _oracle_conversation(env, record)
    return messages


def _oracle_conversation(env: Any, record: QuestionRecord) -> list[dict[str, Any]]:
    observation = env.reset(question_id=record.question_id)
    messages: list[dict[str, Any]] = [question_message(observation)]
    plan = [
        SQLAction(action_type="DESCRIBE", argument=record.tables_involved[0]),
        SQLAction(action_type="QUERY", argument=record.gold_sql),
        SQLAction(action_type="ANSWER", argument=_oracle_answer(record, answer_mode_of(observation))),
    ]
    for action in plan:
        messages.append({"role": "assistant", "content": "", "tool_calls": [action_to_tool_call(action)]})
        observation = env.step(action)
        messages.append(
            {
                "role": "tool",
                "name": action_to_tool_call(action)["function"]["name"],
                "content": tool_result_text(observation),
            }
        )
    return messages


def _oracle_answer(record: QuestionRecord, answer_mode: str) -> str:
    return record.gold_sql if answer_mode == "sql" else format_answer(record.gold_answer, record.answer_type)
