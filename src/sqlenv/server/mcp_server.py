"""The environment as an MCP server: any MCP client can list questions and play episodes.

`create_mcp_server()` builds a FastMCP server (the `mcp` SDK) whose tools drive a
`SQLEnvironment`, the same class the OpenEnv server and training use, so an episode's rules,
results, errors and rewards are exactly those of `step`:

- `list_questions(split, db_id, difficulty, contains, offset, limit)`: the questions (never gold);
- `start_episode(question_id | seed)`: a new episode for this MCP session (`reset`);
- `describe(table_name)`, `sample(table_name)`, `query(sql)`, `answer(value)`: one step each
  (`value` any JSON value: a string is the answer text, anything else is written as JSON).

Each tool returns the observation (`SQLObservation`: result, error, reward, done, budget, ...).
An action the environment refuses (unknown table, a statement that is not read-only) is an
observation whose `error` says why, as over OpenEnv; a call that cannot be an action at all (no
episode started, an unknown question id) is an MCP tool error.

Every MCP session (one stdio connection, or one `Mcp-Session-Id` over streamable HTTP) plays its
own episode: the SDK runs the server's lifespan once per session, and that lifespan owns the
session's `SQLEnvironment`, closed when the session ends (client DELETE, idle timeout, closed
pipe). No tool executes code sent by the client other than a read-only SQL statement in the
sandbox.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from sqlenv.config import EnvConfig
from sqlenv.data import Dataset, load_dataset
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation

Transport = Literal["stdio", "http"]
DEFAULT_LIST_LIMIT = 50
MAX_LIST_LIMIT = 1_000

INSTRUCTIONS = (
    "Answer questions about SQLite databases you cannot see. list_questions shows the questions; "
    "start_episode begins one (it shows the question and the table names). Explore with describe, "
    "sample and query (one read-only SELECT), then call answer once: it ends the episode. Each "
    "call spends one step of the budget; rewards are in each result."
)
# Served with `EnvConfig.show_schema`: start_episode also shows every table's CREATE TABLE statement.
SCHEMA_SHOWN_INSTRUCTIONS = (
    "Answer questions about SQLite databases. list_questions shows the questions; start_episode "
    "begins one (it shows the question, the table names and each table's CREATE TABLE statement). "
    "You can still explore with describe, sample and query (one read-only SELECT); then call answer "
    "once: it ends the episode. Each call spends one step of the budget; rewards are in each result."
)
START_EPISODE_HELP = (
    "Start a new episode in this session: on `question_id`, or on a question of the served split "
    "drawn with `seed` (random without either). Shows the question and {shown}.\n\n"
    "Args:\n"
    "    question_id: the question to play (from list_questions).\n"
    "    seed: draws the question reproducibly when no question_id is given.\n"
)


# What `answer` accepts: any JSON value. MCP clients that build arguments from the tool's schema
# send numbers, booleans and arrays as such, not as the text of them.
AnswerValue = str | int | float | bool | list[Any] | dict[str, Any] | None


def answer_text(value: AnswerValue, answer_mode: str) -> str:
    """The ANSWER argument for an `answer` call's value.

    A string is the answer text itself; any other JSON value is written as JSON (`42`, `true`,
    `["a", "b"]`), which value mode reads as the answer's values; null is `NULL`, as gold NULLs
    are written.

    Args:
        value: the `value` argument, as the client sent it.
        answer_mode: the served answer mode ("value" or "sql").

    Returns:
        The text the environment's ANSWER action takes.

    Raises:
        ValueError: a non-string value in SQL answer mode (the answer is a statement there).
    """
    if isinstance(value, str):
        return value
    if answer_mode == "sql":
        raise ValueError(
            f"in SQL answer mode, value must be a string holding one SELECT statement, "
            f"not {type(value).__name__} {json.dumps(value, ensure_ascii=False)[:80]}"
        )
    if value is None:
        return "NULL"
    return json.dumps(value, ensure_ascii=False)


# The text arguments of the step tools, with what each must hold: a call that sends anything but
# a string gets this said back (the SDK's own message is pydantic's validation report).
TEXT_ARGUMENTS = {
    "describe": ("table_name", "the name of a table in the database"),
    "sample": ("table_name", "the name of a table in the database"),
    "query": ("sql", "one read-only SQLite SELECT statement"),
}


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class SQLEnvMCP(FastMCP):
    """FastMCP whose step tools refuse a missing or non-string text argument in plain words."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        if name in TEXT_ARGUMENTS:
            argument, holds = TEXT_ARGUMENTS[name]
            if argument not in arguments:
                raise ToolError(f"{name} needs {argument}: a string, {holds}")
            value = arguments[argument]
            if not isinstance(value, str):
                raise ToolError(f"{name} needs {argument} as a string, {holds}; got {_json_kind(value)}")
        return await super().call_tool(name, arguments)


@dataclass(frozen=True)
class QuestionSummary:
    """One question as `list_questions` shows it (no gold SQL, no gold answer)."""

    question_id: str
    question: str
    db_id: str
    difficulty: str
    split: str


class EpisodeSessions:
    """The environments of the open MCP sessions, one each (see `session`)."""

    def __init__(self, dataset: Dataset, split: str, config: EnvConfig) -> None:
        self.dataset = dataset
        self.split = split
        self.config = config
        self.open = 0  # sessions whose environment is alive

    @asynccontextmanager
    async def session(self, _server: FastMCP) -> AsyncIterator[SQLEnvironment]:
        """FastMCP's lifespan: entered when an MCP session starts, left when it ends."""
        env = SQLEnvironment(dataset=self.dataset, split=self.split, config=self.config)
        self.open += 1
        try:
            yield env
        finally:
            self.open -= 1
            env.close()


def create_mcp_server(
    dataset: str | Dataset = "demo",
    split: str = "train",
    spider_dir: str | Path | None = None,
    config: EnvConfig | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int | None = None,
) -> FastMCP:
    """The MCP server over one dataset split.

    Args:
        dataset: a preset name, a folder, or a loaded `Dataset`.
        split: the split whose questions `list_questions` shows by default and seeded episodes draw.
        spider_dir: where Spider is, for Spider presets.
        config: the episode rules (answer mode included); default `EnvConfig()`.
        host: interface the streamable HTTP transport listens on.
        port: its TCP port.
        max_sessions: concurrent HTTP sessions (None: the SDK's default); a client beyond it is
            refused by the SDK until a session closes.

    Returns:
        A FastMCP server; `run_mcp_server` runs it on a transport.

    Raises:
        KeyError: `split` is not a split of the dataset.
    """
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset, spider_dir)
    data.split(split)  # fails early, naming the splits
    episode_config = config or EnvConfig()
    sessions = EpisodeSessions(data, split, episode_config)
    answer_help = (
        "one read-only SQLite SELECT statement whose result answers the question (graded by "
        "execution match)"
        if episode_config.answer_mode == "sql"
        else "the answer: a single value (a string, number or boolean), or an array of values (a row "
        "of several columns is itself an array)"
    )
    extra: dict[str, Any] = {} if max_sessions is None else {"max_sessions": max_sessions}
    # WARNING: the SDK logs every request at INFO, to stderr; a served episode needs no such log.
    server = SQLEnvMCP(
        "sqlenv",
        instructions=SCHEMA_SHOWN_INSTRUCTIONS if episode_config.show_schema else INSTRUCTIONS,
        host=host,
        port=port,
        log_level="WARNING",
        lifespan=sessions.session,
        **extra,
    )
    server.episode_sessions = sessions  # type: ignore[attr-defined]  # tests count open sessions

    def session_environment(ctx: Context) -> SQLEnvironment:
        return ctx.request_context.lifespan_context

    def environment(ctx: Context) -> SQLEnvironment:
        env = session_environment(ctx)
        if env.state.episode_id is None:
            raise ValueError("no episode in this session: call start_episode first")
        return env

    async def act(ctx: Context, action_type: str, argument: str) -> SQLObservation:
        # step_async runs QUERY and ANSWER on the environment's thread pool: a slow statement
        # never blocks the event loop that serves the other sessions.
        return await environment(ctx).step_async(SQLAction(action_type=action_type, argument=argument))

    @server.tool()
    def list_questions(
        split: str | None = None,
        db_id: str | None = None,
        difficulty: str | None = None,
        contains: str | None = None,
        offset: int = 0,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> dict[str, Any]:
        """List the questions of a split (never their answers).

        Args:
            split: which split (default: the served one); see `splits` in the result.
            db_id: only questions about this database.
            difficulty: only this difficulty (easy, medium, hard, extra).
            contains: only questions whose text contains this (case-insensitive).
            offset: skip this many matching questions.
            limit: return at most this many (at most 1000).
        """
        chosen = split or sessions.split
        if chosen not in data.split_names:
            raise ValueError(f"unknown split {chosen!r}; splits: {', '.join(data.split_names)}")
        if offset < 0 or not 1 <= limit <= MAX_LIST_LIMIT:
            raise ValueError(f"offset must be >= 0 and limit between 1 and {MAX_LIST_LIMIT}")
        needle = contains.casefold() if contains else None
        matching = [
            r
            for r in data.split(chosen)
            if (db_id is None or r.db_id == db_id)
            and (difficulty is None or r.difficulty == difficulty)
            and (needle is None or needle in r.question.casefold())
        ]
        page = matching[offset : offset + limit]
        return {
            "split": chosen,
            "splits": list(data.split_names),
            "total": len(matching),
            "questions": [
                QuestionSummary(r.question_id, r.question, r.db_id, r.difficulty, r.split).__dict__ for r in page
            ],
        }

    async def start_episode(ctx: Context, question_id: str | None = None, seed: int | None = None) -> SQLObservation:
        env = session_environment(ctx)
        if question_id is not None and question_id not in data:
            raise ValueError(f"unknown question_id {question_id!r}: list_questions shows them")
        return await env.reset_async(seed=seed, question_id=question_id)

    start_episode.__doc__ = START_EPISODE_HELP.format(
        shown="the table names, each with its CREATE TABLE statement" if episode_config.show_schema else "the table names"
    )
    server.tool(name="start_episode")(start_episode)

    @server.tool()
    async def describe(ctx: Context, table_name: str) -> SQLObservation:
        """Show a table's columns with their types, its primary and foreign keys, and its row count.

        Args:
            table_name: name of a table in the database.
        """
        return await act(ctx, "DESCRIBE", table_name)

    @server.tool()
    async def sample(ctx: Context, table_name: str) -> SQLObservation:
        """Show the first rows of a table.

        Args:
            table_name: name of a table in the database.
        """
        return await act(ctx, "SAMPLE", table_name)

    @server.tool()
    async def query(ctx: Context, sql: str) -> SQLObservation:
        """Run one read-only SQLite SELECT statement and show the first rows of its result.

        Args:
            sql: a single SQLite SELECT statement.
        """
        return await act(ctx, "QUERY", sql)

    async def answer(ctx: Context, value: AnswerValue) -> SQLObservation:
        return await act(ctx, "ANSWER", answer_text(value, episode_config.answer_mode))

    answer.__doc__ = (
        "Give the final answer to the question. This ends the episode.\n\n"
        f"Args:\n    value: {answer_help}.\n"
    )
    server.tool(name="answer")(answer)
    return server


def run_mcp_server(server: FastMCP, transport: Transport) -> None:
    """Serve `server` over stdio (one client: the process that started this one) or streamable
    HTTP (many clients, one session each, at http://HOST:PORT/mcp).

    Args:
        server: from `create_mcp_server`.
        transport: "stdio" or "http".
    """
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        server.run("streamable-http")
    else:
        raise ValueError(f"unknown transport {transport!r}: use stdio or http")
