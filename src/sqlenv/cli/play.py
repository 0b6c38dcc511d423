"""`sqlenv play`, terminal play: a person types actions and sees results, rewards and budget,
rendered with rich. Runs in-process, or against a server with --url."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from sqlenv.cli.common import (
    DatasetOption,
    ShowSchemaOption,
    SpiderDirOption,
    Split,
    app,
    console,
    fail,
    load_or_fail,
)
from sqlenv.data import Dataset
from sqlenv.env.models import ACTION_TYPES, SQLAction, SQLObservation

HELP = (
    "Actions: [bold]describe[/] TABLE · [bold]sample[/] TABLE · [bold]query[/] SQL · [bold]answer[/] VALUE\n"
    "Other: [bold]new[/] (next episode) · [bold]help[/] · [bold]quit[/]"
)


def parse_command(line: str) -> tuple[str, str] | None:
    """'query SELECT 1' -> ('QUERY', 'SELECT 1'); None if the line is empty."""
    line = line.strip()
    if not line:
        return None
    head, _, rest = line.partition(" ")
    return head.upper(), rest.strip()


def render_result(console: Console, observation: SQLObservation, kind: str) -> None:
    if observation.error:
        console.print(f"[bold red]error:[/] {observation.error}")
        return
    text = observation.result
    lines = text.splitlines()
    if kind in ("QUERY", "SAMPLE") and len(lines) >= 2:
        footer = lines.pop() if lines[-1].startswith(("(", "…")) else ""
        table = Table(show_lines=False)
        for column in lines[0].split(" | "):
            table.add_column(column)
        for row in lines[1:]:
            table.add_row(*row.split(" | "))
        console.print(table)
        if footer:
            console.print(f"[dim]{footer}[/]")
    else:
        console.print(text)


def play_in_terminal(
    console: Console,
    dataset: Dataset,
    split: str,
    *,
    question_id: str | None = None,
    seed: int | None = None,
    url: str | None = None,
    show_schema: bool = False,
) -> None:
    """Play episodes until the player quits.

    Args:
        console: where the episodes are shown and typed.
        dataset: the dataset played.
        split: the split questions are drawn from.
        question_id: the first episode's question (default: a random one).
        seed: draws the first episode's question.
        url: a running server to play on (it decides whether the schema is shown).
        show_schema: in-process, show every table's CREATE TABLE statement (`EnvConfig.show_schema`).
    """
    if url is None:
        from sqlenv.config import EnvConfig
        from sqlenv.env.environment import SQLEnvironment

        env = SQLEnvironment(dataset=dataset, split=split, config=EnvConfig(show_schema=show_schema))
    else:
        from sqlenv.server.client import RemoteSQLEnvironment

        env = RemoteSQLEnvironment(url, dataset, split)
    try:
        while True:
            observation = env.reset(seed=seed, question_id=question_id)
            question_id, seed = None, None  # later episodes: random questions
            if not _play_episode(console, env, observation):
                return
    finally:
        env.close()


def _play_episode(console: Console, env, observation: SQLObservation) -> bool:
    """One episode; returns False when the player wants to quit."""
    meta = observation.metadata
    console.print(
        Panel(
            # The schema is text, not markup (a quoted name may hold brackets).
            f"[bold]{escape(observation.question)}[/]\n\n{escape(observation.schema_info)}\n"
            f"[dim]{meta.get('db_id')} · {meta.get('difficulty')} · {meta.get('question_id')}[/]",
            title="sqlenv",
        )
    )
    console.print(HELP)
    total = 0.0
    while True:
        try:
            line = console.input(f"[bold cyan]({observation.budget_remaining} steps left)>[/] ")
        except EOFError:
            return False
        parsed = parse_command(line)
        if parsed is None:
            continue
        kind, argument = parsed
        if kind in ("QUIT", "EXIT"):
            return False
        if kind == "HELP":
            console.print(HELP)
            continue
        if kind == "NEW":
            return True
        if kind not in ACTION_TYPES:
            console.print(f"[red]unknown command {kind.lower()!r}[/]; " + HELP)
            continue
        observation = env.step(SQLAction(action_type=kind, argument=argument))
        reward = observation.reward or 0.0
        total += reward
        render_result(console, observation, kind)
        console.print(
            f"[dim]reward {reward:+.3f} · total {total:.3f} · {observation.budget_remaining} steps left[/]"
        )
        if observation.done:
            verdict = observation.metadata.get("correct")
            status = "[bold green]correct[/]" if verdict else "[bold red]not correct[/]"
            console.print(
                f"Episode over: {status}, total reward {total:.3f}. Type [bold]new[/] or [bold]quit[/]."
            )
            while True:
                try:
                    again = console.input("> ").strip().lower()
                except EOFError:
                    return False
                if again in ("new", "n", ""):
                    return True
                if again in ("quit", "q", "exit"):
                    return False


@app.command()
def play(
    dataset: DatasetOption = "demo",
    split: Annotated[Split, typer.Option(help="which split to draw questions from")] = Split.train,
    spider_dir: SpiderDirOption = None,
    question_id: Annotated[
        str | None, typer.Option(help="play this question (default: a random one)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="seed for the random question")] = None,
    url: Annotated[
        str | None, typer.Option(help="play against a running server instead of in-process")
    ] = None,
    show_schema: ShowSchemaOption = False,
) -> None:
    """Play episodes in the terminal: type `describe T`, `sample T`, `query SQL`, `answer X`."""
    if url is not None and show_schema:
        fail(
            "with --url the server decides whether the schema is shown: start it with `sqlenv serve --show-schema`"
        )
    data = load_or_fail(dataset, spider_dir)
    play_in_terminal(
        console, data, split.value, question_id=question_id, seed=seed, url=url, show_schema=show_schema
    )
