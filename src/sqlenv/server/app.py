"""The OpenEnv server: `create_sqlenv_app()` wires SQLEnvironment into OpenEnv's FastAPI app with
many concurrent sessions, and adds the browser page at /web.

Endpoints (OpenEnv's, plus ours):
- /ws: one episode session per WebSocket connection (its own SQLEnvironment) — how clients play;
- /reset, /step, /state: OpenEnv's stateless one-shot HTTP calls: each request gets a fresh
  environment, so a /step after a /reset does NOT continue that episode;
- /health, /schema, /metadata, /docs: OpenEnv's; /sessions: live sessions of this worker;
- /web: a page that plays episodes over /ws (one session per browser tab);
- /web/questions: the served split's questions (id, text, database, difficulty; never gold).

The dataset is loaded once per server process and shared read-only by every session.
"""

from __future__ import annotations

import contextlib
import functools
import os
from importlib import resources
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # Windows: no per-process limit on open files to raise
    resource = None  # type: ignore[assignment]

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ServerMode

from sqlenv.config import EnvConfig
from sqlenv.data import load_dataset
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation, SQLState
from sqlenv.settings import max_sessions_from_environment, served_data_from_environment


def default_max_sessions() -> int:
    """Sessions per worker when the caller names none.

    Returns:
        $SQLENV_MAX_SESSIONS, else 64 (`sqlenv.settings`).
    """
    return max_sessions_from_environment()


def create_sqlenv_app(
    dataset: str = "demo",
    split: str = "train",
    spider_dir: str | Path | None = None,
    max_sessions: int | None = None,
    config: EnvConfig | None = None,
) -> FastAPI:
    """The FastAPI app serving SQLEnvironment sessions over OpenEnv's protocol."""
    data = load_dataset(dataset, spider_dir)
    questions = data.split(split)  # fails early, naming the splits, if `split` is wrong
    limit = max_sessions if max_sessions is not None else default_max_sessions()

    # A partial of the class, not a closure: OpenEnv reads the class's flags through it (its
    # concurrency check then needs no throwaway environment, and REQUIRES_SINGLE_THREAD_EXECUTOR
    # spares each session a thread of its own).
    make_environment = functools.partial(SQLEnvironment, dataset=data, split=split, config=config)

    # OpenEnv's HTTPEnvServer on our own FastAPI app, as create_fastapi_app does, so that the
    # server object (its live session count) stays reachable. Not create_app: with
    # ENABLE_WEB_INTERFACE set it mounts OpenEnv's Gradio page, which shares ONE environment
    # among all visitors.
    app = FastAPI(
        title="sqlenv",
        version="0.1.0",
        description="Answer questions about SQLite databases by exploring them (OpenEnv protocol). "
        "Episodes run over WebSocket /ws; HTTP /reset and /step are stateless one-shot calls.",
    )
    server = HTTPEnvServer(
        make_environment,
        SQLAction,
        SQLObservation,
        max_concurrent_envs=limit,
        env_name="sqlenv",
        state_cls=SQLState,
    )
    server.register_routes(app, mode=ServerMode.SIMULATION)
    _document_task_api_errors(app)
    app.state.env_server = server
    _environment_input_errors_as_422(app)
    question_list = [
        {"question_id": r.question_id, "question": r.question, "db_id": r.db_id, "difficulty": r.difficulty}
        for r in questions
    ]
    page = (resources.files("sqlenv.server") / "web" / "index.html").read_text(encoding="utf-8")

    @app.get("/web", response_class=HTMLResponse, include_in_schema=False)
    async def web_page() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/sessions", tags=["Health"])
    async def sessions() -> JSONResponse:
        """Live WebSocket sessions of this worker process, its limit, and its pid (which worker
        answered, when `--workers` runs several)."""
        return JSONResponse(
            {"active": server.active_sessions, "max": server.max_concurrent_envs, "pid": os.getpid()}
        )

    @app.get("/web/questions", tags=["Web"])
    async def web_questions() -> JSONResponse:
        """The served split's questions, for the page's picker (never the gold answers)."""
        body: dict[str, Any] = {"dataset": data.name, "split": split, "questions": question_list}
        return JSONResponse(body)

    return app


_TASK_API_PATHS = frozenset(
    {"/{env_name}/splits", "/{env_name}/tasks", "/{env_name}/num_tasks", "/{env_name}/task", "/{env_name}/task_range"}
)


def _document_task_api_errors(app: FastAPI) -> None:
    """OpenEnv's task routes answer an unknown split or index with 400 and another environment's
    name with 404, but declare only 200 and 422: add both to their OpenAPI entries, so the schema
    says what the server does (the schema is built on first request, after this)."""
    from fastapi.routing import APIRoute

    for route in app.routes:
        if isinstance(route, APIRoute) and route.path in _TASK_API_PATHS:
            route.responses.setdefault(400, {"description": "an unknown split, or a task index outside it"})
            route.responses.setdefault(404, {"description": "an environment name other than this server's"})


_INPUT_ERRORS = (ValueError, KeyError, TypeError)
_STATELESS_PATHS = frozenset({"/reset", "/step"})


def _environment_input_errors_as_422(app: FastAPI) -> None:
    """HTTP /reset and /step hand the request's extra fields to the environment, which rejects
    bad ones (an unknown question_id or reset argument) by raising; OpenEnv's handlers do not
    catch that, so it was a 500. Here it is a 422 naming the problem, as over /ws (error frame)."""

    async def input_error(request: Request, exc: Exception) -> JSONResponse:
        if request.url.path not in _STATELESS_PATHS:
            raise exc
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        detail = [{"loc": ["body"], "msg": str(message), "type": "value_error"}]  # FastAPI's 422 shape
        return JSONResponse({"detail": detail}, status_code=422)

    for error in _INPUT_ERRORS:
        app.add_exception_handler(error, input_error)


def raise_open_file_limit() -> tuple[int, int] | None:
    """Raise this process's soft limit on open files to its hard limit.

    Every WebSocket session is a socket: thousands of sessions need more descriptors than the
    usual soft limit of 1,024. `sqlenv serve` calls it before starting uvicorn (whose workers
    inherit the limit); `app_from_environment` calls it in the process that will serve.

    Returns:
        The (soft, hard) limits now in force; None where the platform has none (Windows).
    """
    if resource is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        # An unlimited hard limit cannot be the soft one on Linux (nr_open caps it): ask for much.
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        # On failure the soft limit stays: the server still runs, only with fewer sessions.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def app_from_environment() -> FastAPI:
    """App factory for `uvicorn --factory` (used by `sqlenv serve --workers N`): settings come
    from SQLENV_DATASET, SQLENV_SPLIT, SQLENV_SPIDER_DIR, SQLENV_ANSWER_MODE, SQLENV_SHOW_SCHEMA
    and SQLENV_MAX_SESSIONS."""
    served = served_data_from_environment()
    raise_open_file_limit()  # also when plain uvicorn (openenv.yaml) serves this app
    return create_sqlenv_app(
        dataset=served.dataset,
        split=served.split,
        spider_dir=served.spider_dir,
        config=EnvConfig(answer_mode=served.answer_mode, show_schema=served.show_schema),  # type: ignore[arg-type]  # checked there
    )
