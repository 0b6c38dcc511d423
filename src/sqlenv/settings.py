"""The `SQLENV_*` environment variables: the one module that reads them.

An environment variable is a setting from outside the program (a shell, a container, the parent
of a uvicorn worker). Each is read here, checked, and handed on as an ordinary value; the rest of
the package takes settings as arguments (`EnvConfig`, `PolicySettings`, function parameters) and
only falls back to these readers where a default is documented to come from the environment.

| variable | what it sets | read by |
|---|---|---|
| `SQLENV_SPIDER_DIR` | where the Spider folder is | `sqlenv.data.loaders` |
| `SQLENV_CACHE_DIR` | where built datasets and converted models are cached (else `$XDG_CACHE_HOME/sqlenv`, else `~/.cache/sqlenv`) | `sqlenv.data.cache` |
| `SQLENV_QUERY_THREADS` | threads of the shared pool that runs QUERY/ANSWER under the server (default 4) | `sqlenv.env.environment` |
| `SQLENV_MAX_SESSIONS` | WebSocket sessions per server worker (default 64) | `sqlenv.server.app` |
| `SQLENV_WORKER_TIMEOUT` | seconds `sqlenv serve --workers N` gives a worker to answer uvicorn's health check, at start-up and after (default 60) | `sqlenv.cli.serve` |
| `SQLENV_DATASET`, `SQLENV_SPLIT`, `SQLENV_ANSWER_MODE`, `SQLENV_SHOW_SCHEMA` | what a server started by uvicorn serves (answer mode default `value`; the schema shown with `1`, default `0`) | `sqlenv.server.app.app_from_environment` |
| `SQLENV_DEVICE` | the torch device of local models (default `auto`) | `sqlenv.agents.devices` |
| `SQLENV_DTYPE` | what local models compute in when they play: `float32`, `bfloat16` or `auto` (default: bfloat16 where the hardware computes it natively) | `sqlenv.agents.local_models` |
| `SQLENV_MAX_NEW_TOKENS` | tokens per reply of a language-model policy (default 256) | `sqlenv.agents.chat_policy` |
| `SQLENV_SOLVED_EXAMPLES` | solved examples in a chat policy's prompt (default: as the model was trained) | `sqlenv.agents.local_policy`, `sqlenv.agents.openai_policy` |
| `SQLENV_ENGINE` | what generates local models' replies: `transformers`, `vllm` or `auto` (default: vLLM where installed) | `sqlenv.agents.engines` |
| `SQLENV_VLLM_EAGER` | `1`: vLLM runs without compiling its model graph (SmolLM2-135M on 2 CPU cores: 12 s to start instead of 80–119 s, decoding ~1.1 × slower); `0` the default | `sqlenv.agents.vllm_engine` |
| `SQLENV_PUBLISHED_MODELS` | the folder of published models, trained adapters known by name (default: `models/` of the checkout sqlenv runs from) | `sqlenv.agents.published_models` |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SPIDER_DIR_ENV = "SQLENV_SPIDER_DIR"
CACHE_DIR_ENV = "SQLENV_CACHE_DIR"
QUERY_THREADS_ENV = "SQLENV_QUERY_THREADS"
MAX_SESSIONS_ENV = "SQLENV_MAX_SESSIONS"
WORKER_TIMEOUT_ENV = "SQLENV_WORKER_TIMEOUT"
DATASET_ENV = "SQLENV_DATASET"
SPLIT_ENV = "SQLENV_SPLIT"
ANSWER_MODE_ENV = "SQLENV_ANSWER_MODE"
SHOW_SCHEMA_ENV = "SQLENV_SHOW_SCHEMA"
DEVICE_ENV = "SQLENV_DEVICE"
DTYPE_ENV = "SQLENV_DTYPE"
DTYPES = ("auto", "float32", "bfloat16")
MAX_NEW_TOKENS_ENV = "SQLENV_MAX_NEW_TOKENS"
SOLVED_EXAMPLES_ENV = "SQLENV_SOLVED_EXAMPLES"
ENGINE_ENV = "SQLENV_ENGINE"
VLLM_EAGER_ENV = "SQLENV_VLLM_EAGER"
PUBLISHED_MODELS_ENV = "SQLENV_PUBLISHED_MODELS"

DEFAULT_QUERY_THREADS = 4
DEFAULT_MAX_SESSIONS = 64
# uvicorn's own default is 5 s: on a busy machine a worker process can take longer than that to
# start, and uvicorn then kills and replaces it, over and over.
DEFAULT_WORKER_TIMEOUT = 60


def _text(name: str) -> str:
    """The variable's value stripped of spaces; empty when unset."""
    return os.environ.get(name, "").strip()


def spider_dir_from_environment() -> Path | None:
    """$SQLENV_SPIDER_DIR as a path.

    Returns:
        The path it names, or None when it is unset or empty.
    """
    text = _text(SPIDER_DIR_ENV)
    return Path(text) if text else None


def cache_root_from_environment() -> Path:
    """Where sqlenv caches built datasets and converted models.

    Returns:
        $SQLENV_CACHE_DIR, else `$XDG_CACHE_HOME/sqlenv`, else `~/.cache/sqlenv` (not created here).
    """
    explicit = _text(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = _text("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "sqlenv"


def _whole_number(name: str, default: int) -> int:
    text = _text(name)
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"${name}={text!r} is not a whole number") from None


def published_models_from_environment() -> Path | None:
    """$SQLENV_PUBLISHED_MODELS: the folder of published models (`sqlenv.agents.published_models`).

    Returns:
        The path it names, or None when it is unset or empty.
    """
    text = _text(PUBLISHED_MODELS_ENV)
    return Path(text).expanduser() if text else None


def query_threads_from_environment() -> int:
    """Threads of the shared pool that runs QUERY and ANSWER under the server.

    Returns:
        $SQLENV_QUERY_THREADS, else 4.

    Raises:
        ValueError: the variable is not a whole number.
    """
    return _whole_number(QUERY_THREADS_ENV, DEFAULT_QUERY_THREADS)


def max_sessions_from_environment() -> int:
    """WebSocket sessions one server worker holds at once.

    Returns:
        $SQLENV_MAX_SESSIONS, else 64.

    Raises:
        ValueError: the variable is not a whole number.
    """
    return _whole_number(MAX_SESSIONS_ENV, DEFAULT_MAX_SESSIONS)


def worker_timeout_from_environment() -> int:
    """Seconds a `sqlenv serve --workers N` worker has to answer uvicorn's health check.

    Returns:
        $SQLENV_WORKER_TIMEOUT, else 60.

    Raises:
        ValueError: the variable is not a whole number of at least 1.
    """
    seconds = _whole_number(WORKER_TIMEOUT_ENV, DEFAULT_WORKER_TIMEOUT)
    if seconds < 1:
        raise ValueError(f"${WORKER_TIMEOUT_ENV}={seconds} must be at least 1 (seconds)")
    return seconds


@dataclass(frozen=True)
class ServedData:
    """What a server started without arguments (by uvicorn, one process per worker) serves."""

    dataset: str = "demo"
    split: str = "train"
    spider_dir: str | None = None
    answer_mode: str = "value"
    show_schema: bool = False


def served_data_from_environment() -> ServedData:
    """What `sqlenv.server.app.app_from_environment` serves.

    Returns:
        $SQLENV_DATASET (default demo), $SQLENV_SPLIT (default train), $SQLENV_SPIDER_DIR,
        $SQLENV_ANSWER_MODE (default value), $SQLENV_SHOW_SCHEMA (1 or 0, default 0).

    Raises:
        ValueError: $SQLENV_SHOW_SCHEMA is neither 1 nor 0.
    """
    show_schema = _text(SHOW_SCHEMA_ENV) or "0"
    if show_schema not in ("0", "1"):
        raise ValueError(f"${SHOW_SCHEMA_ENV}={show_schema!r} must be 1 (show the schema) or 0")
    return ServedData(
        dataset=_text(DATASET_ENV) or "demo",
        split=_text(SPLIT_ENV) or "train",
        spider_dir=_text(SPIDER_DIR_ENV) or None,
        answer_mode=_text(ANSWER_MODE_ENV) or "value",
        show_schema=show_schema == "1",
    )


def served_data_environment(
    dataset: str,
    split: str,
    spider_dir: Path | None,
    max_sessions: int | None,
    answer_mode: str = "value",
    show_schema: bool = False,
) -> dict[str, str]:
    """The variables that make `app_from_environment` serve these data: what `sqlenv serve` sets
    for its uvicorn workers, which are separate processes and can only be told through them.

    Args:
        dataset: the dataset name or folder.
        split: "train" or "eval".
        spider_dir: the Spider folder, when given.
        max_sessions: sessions per worker, when given.
        answer_mode: what ANSWER takes ("value" or "sql").
        show_schema: whether the first observation shows every table's CREATE TABLE statement.

    Returns:
        Variable names and values to add to the workers' environment.
    """
    values = {
        DATASET_ENV: dataset,
        SPLIT_ENV: split,
        ANSWER_MODE_ENV: answer_mode,
        SHOW_SCHEMA_ENV: "1" if show_schema else "0",
    }
    if spider_dir is not None:
        values[SPIDER_DIR_ENV] = str(spider_dir)
    if max_sessions is not None:
        values[MAX_SESSIONS_ENV] = str(max_sessions)
    return values


def device_from_environment() -> str | None:
    """$SQLENV_DEVICE: the torch device local models run on.

    Returns:
        Its value, or None when it is unset or empty (the caller's default applies).
    """
    return _text(DEVICE_ENV) or None


def dtype_from_environment() -> str | None:
    """$SQLENV_DTYPE: what local models compute in when they play (`float32`, `bfloat16`, `auto`).

    Returns:
        Its value, lower-cased, or None when it is unset or empty (the caller's default applies).

    Raises:
        ValueError: a value other than those three.
    """
    text = _text(DTYPE_ENV).lower()
    if text and text not in DTYPES:
        raise ValueError(f"{DTYPE_ENV}={text!r} is not a dtype: use {', '.join(DTYPES)}")
    return text or None


def max_new_tokens_from_environment() -> int | None:
    """$SQLENV_MAX_NEW_TOKENS: tokens per reply of a language-model policy.

    Returns:
        The number, or None when it is unset or empty.

    Raises:
        ValueError: the value is not a whole number.
    """
    text = _text(MAX_NEW_TOKENS_ENV)
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"${MAX_NEW_TOKENS_ENV}={text!r} is not a whole number of tokens") from None


def solved_examples_from_environment() -> int | None:
    """$SQLENV_SOLVED_EXAMPLES: how many solved examples every chat policy shows.

    Returns:
        The count, or None when it is unset or empty (as each model was trained).

    Raises:
        ValueError: the value is not a whole number >= 0.
    """
    text = _text(SOLVED_EXAMPLES_ENV)
    if not text:
        return None
    if not text.isdecimal():  # refuses "-1", "1.5" and "three" alike
        raise ValueError(f"${SOLVED_EXAMPLES_ENV}={text!r} is not a whole number >= 0")
    return int(text)


def engine_from_environment() -> str | None:
    """$SQLENV_ENGINE: the engine that generates local models' replies (`transformers`, `vllm`, `auto`).

    Returns:
        Its value, lower-cased, or None when it is unset or empty (the caller's default applies).
    """
    text = _text(ENGINE_ENV)
    return text.lower() if text else None


def vllm_eager_from_environment() -> bool:
    """$SQLENV_VLLM_EAGER: whether vLLM engines skip compiling their model graph.

    Returns:
        True for `1`; False for `0`, unset or empty.

    Raises:
        ValueError: any other value.
    """
    text = _text(VLLM_EAGER_ENV) or "0"
    if text not in ("0", "1"):
        raise ValueError(f"${VLLM_EAGER_ENV}={text!r} must be 1 (no graph compilation) or 0")
    return text == "1"
