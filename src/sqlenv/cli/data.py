"""`sqlenv data info` and `sqlenv data download`: what a dataset holds, and fetching Spider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sqlenv.cli.common import DatasetOption, SpiderDirOption, console, data_app, fail, load_or_fail


@data_app.command("info")
def data_info(
    dataset: DatasetOption = "demo",
    spider_dir: SpiderDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
) -> None:
    """Databases, questions per split, per difficulty, per answer type, empty-gold count."""
    summary = load_or_fail(dataset, spider_dir).summary()
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    console.print(
        f"[bold]{summary['name']}[/]: {summary['databases']} databases, {summary['questions']} questions"
    )
    table = Table()
    table.add_column("split")
    table.add_column("questions", justify="right")
    table.add_column("by difficulty")
    table.add_column("by answer type")
    table.add_column("empty gold", justify="right")
    for split, n in summary["splits"].items():
        table.add_row(
            split,
            str(n),
            ", ".join(f"{k} {v}" for k, v in summary["by_difficulty"][split].items()),
            ", ".join(f"{k} {v}" for k, v in summary["by_answer_type"][split].items()),
            str(summary["empty_gold"][split]),
        )
    console.print(table)
    if summary["dropped"]:
        console.print("left out: " + ", ".join(f"{k}: {v}" for k, v in summary["dropped"].items()))


@data_app.command("download")
def data_download(
    name: Annotated[str, typer.Argument(help="dataset to fetch (spider)")],
    dest: Annotated[Path, typer.Option(help="directory to install it into (must not exist or be empty)")],
    url: Annotated[str | None, typer.Option(help="download from this URL instead (a mirror)")] = None,
    sha256: Annotated[str | None, typer.Option(help="expected SHA-256 of the archive")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace an existing non-empty --dest")] = False,
) -> None:
    """Fetch a dataset archive over HTTPS, verify its checksum and install it atomically."""
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    from sqlenv.data.download import DownloadError, download_dataset

    with Progress(
        *Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn(), console=console
    ) as bar:
        task = bar.add_task(f"downloading {name}", total=None)

        def report(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        try:
            path = download_dataset(name, dest, url=url, sha256=sha256, progress=report, overwrite=overwrite)
        except DownloadError as exc:
            fail(str(exc))
    console.print(f"installed {name} at {path}; use it with --spider-dir {path}")
