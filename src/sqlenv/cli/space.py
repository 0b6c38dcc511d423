"""`sqlenv space write`: a folder holding exactly what a Hugging Face Docker Space of the server
needs (sqlenv.server.space), ready to push.

A group of its own, beside `data` and `models`: `serve` is one command and cannot take a
subcommand, and the Space is an artefact written to disk, not a server started here.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from sqlenv.cli.common import SpiderDirOption, app, console, fail
from sqlenv.data import PRESETS

space_app = typer.Typer(help="Hugging Face Docker Space: write the folder to push.", no_args_is_help=True)
app.add_typer(space_app, name="space")


# What the Space's image serves: every data preset (sqlenv.server.space.SPACE_DATASETS), read from
# sqlenv.data, which the CLI imports anyway, so that a new preset needs no edit here.
SpaceDataset = StrEnum("SpaceDataset", [(name, name) for name in PRESETS])


@space_app.command("write")
def space_write(
    dest: Annotated[Path, typer.Argument(help="the folder to write (new or empty, unless --force)")],
    dataset: Annotated[
        SpaceDataset,
        typer.Option(
            help="what the Space serves: demo (the embedded set), or spider10 / spider, which the image "
            "downloads while it builds (their task counts are read from --spider-dir here)"
        ),
    ] = SpaceDataset.demo,
    title: Annotated[str, typer.Option(help="the Space's display title")] = "sqlenv",
    spider_dir: SpiderDirOption = None,
    force: Annotated[
        bool,
        typer.Option(help="replace the Space's files in a non-empty folder; other entries (e.g. .git) stay"),
    ] = False,
) -> None:
    """Write a Docker Space: README front matter, Dockerfile, the package, openenv.yaml, discovery.json."""
    from sqlenv.server.space import SpaceError, write_space

    try:
        with console.status(f"reading the task counts of {dataset.value}…"):
            written = write_space(dest, dataset.value, title, spider_dir, force)
    except SpaceError as exc:
        fail(str(exc))
    counts = ", ".join(f"{split} {n}" for split, n in written.task_counts.items())
    entries = ", ".join(f"{name}/" if name == "src" else name for name in written.entries)
    lines = [
        f"wrote a Docker Space serving {written.dataset} ({counts}) to {written.path}: {entries}",
        *([f"kept as they were: {', '.join(written.kept)}"] if written.kept else []),
        f"build it here: docker build -t sqlenv-space {written.path}",
        f"push it (docs/serving.md): hf upload OWNER/SPACE {written.path} . --repo-type space",
    ]
    for line in lines:
        console.print(line, soft_wrap=True, highlight=False)
