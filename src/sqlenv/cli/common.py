"""What every `sqlenv` command shares: the typer apps, the console, the options that several
commands take, and how a command fails (a red line and exit status 2, never a traceback)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from sqlenv.data import Dataset

app = typer.Typer(
    help="sqlenv: answer questions about SQLite databases by exploring them.", no_args_is_help=True
)
data_app = typer.Typer(help="Datasets: inspect and download.", no_args_is_help=True)
app.add_typer(data_app, name="data")
train_app = typer.Typer(help="Training with TRL: SFT warm-up, then GRPO.", no_args_is_help=True)
app.add_typer(train_app, name="train")
models_app = typer.Typer(help="Models: fetch pinned weights, list what is here.", no_args_is_help=True)
app.add_typer(models_app, name="models")
console = Console()

SpiderDirOption = Annotated[
    Path | None,
    typer.Option("--spider-dir", help="Spider directory (else $SQLENV_SPIDER_DIR)", show_default=False),
]
DatasetOption = Annotated[
    str,
    typer.Option("--dataset", help="demo, spider10, spider, or a folder of .sqlite files + questions.json"),
]


class Split(StrEnum):
    """A dataset split (`validation`: the `spider` preset's withheld train databases)."""

    train = "train"
    validation = "validation"
    eval = "eval"


class AnswerMode(StrEnum):
    """What ANSWER takes (`sqlenv.config.EnvConfig.answer_mode`)."""

    value = "value"
    sql = "sql"


AnswerModeOption = Annotated[
    AnswerMode,
    typer.Option(
        "--answer-mode",
        help="value: ANSWER gives the answer itself; sql: ANSWER gives one SELECT statement, graded "
        "by Spider's execution match (success is then execution accuracy)",
    ),
]


ShowSchemaOption = Annotated[
    bool,
    typer.Option(
        "--show-schema",
        help="a control: the first observation also shows every table's CREATE TABLE statement, as "
        "text-to-SQL papers put the schema in the prompt (default: the table names only)",
    ),
]


def fail(message: str) -> NoReturn:
    """Print `message` as an error and exit with status 2."""
    console.print(f"[bold red]error:[/] {escape(message)}")  # a message is text, not markup
    raise typer.Exit(2)


def fail_without_extra(extra: str, command: str) -> None:
    """End `command` with the install hint when an optional extra is missing.

    Args:
        extra: the extra's name (`llm`, `eval`).
        command: the command as the user typed it, for the message.
    """
    from sqlenv.extras import has_extra, missing_extra_message

    if not has_extra(extra):
        fail(missing_extra_message(extra, command))


def load_or_fail(dataset: str, spider_dir: Path | None) -> Dataset:
    """The dataset, loaded with a status line; a data error ends the command with its message."""
    from sqlenv.data import DataError, load_dataset

    try:
        with console.status(f"loading dataset {dataset} (first use computes gold answers)…"):
            return load_dataset(dataset, spider_dir)
    except DataError as exc:
        fail(str(exc))
