"""`sqlenv mcp`: the environment as an MCP server (stdio or streamable HTTP).

Over stdio, stdout carries the protocol: everything this command says goes to stderr.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from sqlenv.cli.common import (
    AnswerMode,
    AnswerModeOption,
    DatasetOption,
    ShowSchemaOption,
    SpiderDirOption,
    Split,
    app,
)


class McpTransport(StrEnum):
    """How MCP clients reach the server."""

    stdio = "stdio"
    http = "http"


@app.command("mcp")
def mcp_command(
    dataset: DatasetOption = "demo",
    split: Annotated[Split, typer.Option(help="the split list_questions shows and seeded episodes draw from")] = Split.train,
    spider_dir: SpiderDirOption = None,
    transport: Annotated[
        McpTransport,
        typer.Option(help="stdio: one client that started this process; http: streamable HTTP at /mcp"),
    ] = McpTransport.stdio,
    host: Annotated[str, typer.Option(help="interface to listen on (http)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (http)")] = 8000,
    max_sessions: Annotated[
        int | None, typer.Option(min=1, help="concurrent MCP sessions over http (default: the SDK's)")
    ] = None,
    answer_mode: AnswerModeOption = AnswerMode.value,
    show_schema: ShowSchemaOption = False,
) -> None:
    """Serve the environment to MCP clients: tools list_questions, start_episode, describe, sample,
    query and answer; each MCP session plays its own episode."""
    from sqlenv.config import EnvConfig
    from sqlenv.data import DataError, load_dataset
    from sqlenv.server.mcp_server import create_mcp_server, run_mcp_server

    stderr = Console(stderr=True)
    try:
        data = load_dataset(dataset, spider_dir)
        server = create_mcp_server(
            data,
            split.value,
            config=EnvConfig(answer_mode=answer_mode.value, show_schema=show_schema),
            host=host,
            port=port,
            max_sessions=max_sessions,
        )
    except (DataError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        stderr.print(f"[bold red]error:[/] {escape(str(message))}")
        raise typer.Exit(2) from None
    where = f"http://{host}:{port}/mcp" if transport == McpTransport.http else "stdio"
    schema = ", schema shown" if show_schema else ""
    stderr.print(f"sqlenv MCP server: {dataset}/{split.value}, answer mode {answer_mode.value}{schema}, on {where}")
    run_mcp_server(server, transport.value)
