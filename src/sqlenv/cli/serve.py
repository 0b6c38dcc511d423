"""`sqlenv serve`: the environment over OpenEnv's protocol, with the web page."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sqlenv.cli.common import (
    AnswerMode,
    AnswerModeOption,
    DatasetOption,
    ShowSchemaOption,
    SpiderDirOption,
    Split,
    app,
    console,
    fail,
    load_or_fail,
)

# uvicorn settings of every `sqlenv serve`, one worker or several.
# - No permessage-deflate: it keeps a zlib compressor and decompressor per connection (~44 KB
#   of RSS per idle session, more than everything else a session holds) and compresses every
#   reply; observations are a few KB of text, usually on loopback or a LAN.
# - The event loop stays uvicorn's "auto": uvloop (a dependency) where it is installed, asyncio
#   elsewhere (Windows).
UVICORN_OPTIONS: dict[str, Any] = {"log_level": "warning", "ws_per_message_deflate": False}


@app.command()
def serve(
    dataset: DatasetOption = "demo",
    split: Annotated[Split, typer.Option(help="which split to serve")] = Split.train,
    spider_dir: SpiderDirOption = None,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    max_sessions: Annotated[
        int | None,
        typer.Option(help="concurrent WebSocket sessions per worker (default 64, or $SQLENV_MAX_SESSIONS)"),
    ] = None,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes, each with its own sessions")] = 1,
    worker_timeout: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="with --workers: seconds a worker has to answer uvicorn's health check, at start-up "
            "and after, before it is replaced (default 60, or $SQLENV_WORKER_TIMEOUT)",
        ),
    ] = None,
    answer_mode: AnswerModeOption = AnswerMode.value,
    show_schema: ShowSchemaOption = False,
) -> None:
    """Serve the environment over OpenEnv's protocol (WebSocket /ws) with a web page at /web."""
    import os

    import uvicorn

    from sqlenv.config import EnvConfig
    from sqlenv.server.app import create_sqlenv_app, raise_open_file_limit
    from sqlenv.settings import served_data_environment, worker_timeout_from_environment

    load_or_fail(dataset, spider_dir)  # fail early, and build the cache once for all workers
    raise_open_file_limit()
    console.print(
        f"sqlenv serving {dataset}/{split.value} on http://{host}:{port} — play at http://{host}:{port}/web"
        + (" (answers are SQL statements)" if answer_mode == AnswerMode.sql else "")
        + (" (the schema is shown)" if show_schema else "")
    )
    if workers > 1:
        # uvicorn's workers are separate processes that build the app from the environment. Its
        # supervisor pings each one and replaces any that does not answer within the timeout,
        # also while it starts: the timeout must cover a start on a busy machine.
        try:
            timeout = worker_timeout or worker_timeout_from_environment()
        except ValueError as exc:
            fail(str(exc))
        os.environ.update(
            served_data_environment(
                dataset, split.value, spider_dir, max_sessions, answer_mode.value, show_schema
            )
        )
        uvicorn.run(
            "sqlenv.server.worker:app_from_environment",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            timeout_worker_healthcheck=timeout,
            **UVICORN_OPTIONS,
        )
        return
    try:
        application = create_sqlenv_app(
            dataset,
            split.value,
            spider_dir,
            max_sessions,
            EnvConfig(answer_mode=answer_mode.value, show_schema=show_schema),
        )
    except KeyError as exc:
        fail(str(exc.args[0]))
    uvicorn.run(application, host=host, port=port, **UVICORN_OPTIONS)
