"""`sqlenv results outcomes` and `sqlenv results recompute`: an evaluation's per-episode outcomes
as a small JSON file, and every number and test of a results table recomputed from such files. The
format and the arithmetic are `sqlenv.evaluation.outcomes`; this module parses options and prints
tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from sqlenv.cli.common import SpiderDirOption, app, console, fail, load_or_fail

if TYPE_CHECKING:
    from sqlenv.evaluation.outcomes import RunOutcomes

DIFFICULTIES = ("easy", "medium", "hard", "extra")

results_app = typer.Typer(
    help="Per-episode outcomes: write them compactly, recompute every number and test from them.",
    no_args_is_help=True,
)
app.add_typer(results_app, name="results")


@results_app.command("outcomes")
def outcomes_command(
    source: Annotated[
        Path,
        typer.Argument(
            help="an evaluation's results: `sqlenv eval --json` output, a report's results.json or its "
            "folder, an episode journal (.jsonl) or a --journal folder"
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="the outcomes file to write (JSON)")],
    policy: Annotated[
        str | None,
        typer.Option(help="the policy to take where the source holds several", show_default=False),
    ] = None,
    spider_dir: SpiderDirOption = None,
) -> None:
    """Write one evaluation's per-episode outcomes (no transcripts, no question text) as compact JSON."""
    from sqlenv.evaluation.outcomes import OutcomesError, load_run, write_outcomes

    try:
        run = load_run(source, policy, dataset_for=lambda name: load_or_fail(name, spider_dir))
    except OutcomesError as error:
        fail(str(error))
    size = write_outcomes(run, out)
    stopped = f" (a stopped run: {run.planned_episodes} planned)" if run.planned_episodes else ""
    console.print(
        f"outcomes of {len(run.outcomes)} episodes{stopped} written to {out} ({size / 1000:.1f} kB)"
    )


def _outcome_files(paths: list[Path]) -> list[Path]:
    """The outcomes files named, a folder standing for the *.json files in it."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                fail(f"{path} holds no .json file")
            files += found
        else:
            files.append(path)
    return files


def _pair_option(text: str) -> list[tuple[str | None, Path]]:
    """`--pair A=a.json,B=b.json` (or `a.json,b.json`) as two (label or None, path)."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        fail(f"--pair {text!r}: give two outcomes files, e.g. --pair untrained=a.json,sft=b.json")
    named: list[tuple[str | None, Path]] = []
    for part in parts:
        label, equals, path = part.partition("=")
        named.append((label.strip() or None, Path(path.strip())) if equals else (None, Path(part)))
    return named


def _percent(count: dict[str, Any]) -> str:
    return f"{count['successes']}/{count['n']} ({100 * count['rate']:.1f}%)"  # no space: a cell wraps there


def _interval(count: dict[str, Any]) -> str:
    low, high = count["interval"]
    return f"{100 * low:.1f}–{100 * high:.1f}%"


def _runs_table(labels: list[str], summaries: list[dict[str, Any]]) -> Table:
    """One column per run, one row per number (as `sqlenv patterns` lays out its reports)."""
    from sqlenv.evaluation.records import GOLD_EMPTY, GOLD_HAS_ROWS, NOT_IN_TRAIN, SEEN_IN_TRAIN

    groups: dict[str, Any] = {
        difficulty: lambda s, d=difficulty: s["by_difficulty"].get(d) for difficulty in DIFFICULTIES
    }
    groups["twin (gold SQL seen in train)"] = lambda s: s["by_train_overlap"].get(SEEN_IN_TRAIN)
    groups["new SQL"] = lambda s: s["by_train_overlap"].get(NOT_IN_TRAIN)
    groups["gold answer has rows"] = lambda s: s["by_gold"].get(GOLD_HAS_ROWS)
    groups["gold answer is empty"] = lambda s: s["by_gold"].get(GOLD_EMPTY)
    groups["new SQL, gold answer has rows"] = lambda s: s["new_sql_with_rows"]
    table = Table(
        title="every number of a results table, recomputed from the outcomes",
        caption="success: success rate (value mode) or execution accuracy (sql mode), with its 95 % "
        "Wilson interval; each group's interval is in --json",
    )
    table.add_column("", no_wrap=True)
    for label in labels:
        table.add_column(label, justify="right")

    def row(name: str, cell: Any) -> None:
        table.add_row(name, *(cell(s) for s in summaries))

    row("policy", lambda s: s["policy"])
    row("dataset / split", lambda s: f"{s['dataset']} / {s['split']}")
    row("answer mode", lambda s: s["answer_mode"] + (", schema shown" if s["show_schema"] else ""))
    row(
        "episodes",
        lambda s: (
            str(s["n_episodes"])
            + (f" (stopped: {s['planned_episodes']} planned)" if s["planned_episodes"] else "")
        ),
    )
    row("success", lambda s: _percent(s["success"]))
    row("95 % interval", lambda s: _interval(s["success"]))
    for name, get in groups.items():
        if any(get(s) for s in summaries):
            row(name, lambda s, get=get: _percent(get(s)) if get(s) else "-")
    row("answered", lambda s: _percent(s["answered"]))
    row("mean steps", lambda s: f"{s['mean_steps']:.2f}")
    row("mean reward", lambda s: f"{s['mean_reward']:.3f}")
    row("format errors per step", lambda s: f"{s['format_error_rate']:.3f}")
    return table


def _pairs_table(pairs: list[dict[str, Any]]) -> Table:
    """One column per pair, one row per count and test."""
    from sqlenv.evaluation.outcomes import PAIR_GROUPS
    from sqlenv.evaluation.records import GOLD_HAS_ROWS, NOT_IN_TRAIN, SEEN_IN_TRAIN

    names = {GOLD_HAS_ROWS: "gold answer has rows", SEEN_IN_TRAIN: "twin", NOT_IN_TRAIN: "new SQL"}
    table = Table(
        title="paired question by question: McNemar's exact test, Holm's correction across these pairs",
        caption="lost: solved by the first only; gained: by the second only",
    )
    table.add_column("", no_wrap=True)
    for p in pairs:
        table.add_column(f"{p['first']} → {p['second']}", justify="right")

    def row(name: str, cell: Any) -> None:
        table.add_row(name, *(cell(p) for p in pairs))

    row("questions", lambda p: str(p["questions"]))
    row("solved by both", lambda p: str(p["both"]))
    row("lost / gained", lambda p: f"{p['only_first']} / {p['only_second']}")
    row("McNemar exact p (two-sided)", lambda p: f"{p['mcnemar_p']:.3g}")
    row(
        f"Holm-corrected p ({len(pairs)} pair{'s' if len(pairs) > 1 else ''})", lambda p: f"{p['holm_p']:.3g}"
    )
    for group, _ in PAIR_GROUPS:
        if any(group in p["groups"] for p in pairs):
            row(
                f"{names[group]}: lost / gained (p)",
                lambda p, g=group: (
                    f"{p['groups'][g]['only_first']} / {p['groups'][g]['only_second']} "
                    f"({p['groups'][g]['mcnemar_p']:.3g})"
                    if g in p["groups"]
                    else "-"
                ),
            )
    return table


@results_app.command("recompute")
def recompute_command(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="outcomes files, or folders of them (each *.json in it)", show_default=False),
    ] = None,
    pair: Annotated[
        list[str] | None,
        typer.Option(
            "--pair",
            help="a pair to test, e.g. untrained=a.json,sft=b.json (labels optional; repeat for more "
            "pairs). Default: every two files played on the same questions",
            show_default=False,
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="also write every number as JSON here")
    ] = None,
) -> None:
    """Recompute every number of a results table from outcomes files: success with its 95 % Wilson
    interval, by difficulty, train overlap and gold answer, mean steps, reward and format-error
    rate; and McNemar's exact test between pairs of runs, with Holm's correction across the pairs."""
    from sqlenv.evaluation.outcomes import (
        OutcomesError,
        paired_tests,
        pairing_problems,
        read_outcomes,
        recompute,
    )

    named_pairs = [_pair_option(text) for text in pair or []]
    files = _outcome_files(list(paths or []))
    files += [path for named in named_pairs for _, path in named]
    if not files:
        fail("no outcomes file given: name files or folders, or --pair A=a.json,B=b.json")
    runs: dict[Path, RunOutcomes] = {}
    given: dict[Path, Path] = {}  # each file as first named
    for path in files:
        key = path.resolve()
        if key in runs:
            continue
        try:
            runs[key] = read_outcomes(path)
        except OutcomesError as error:
            fail(str(error))
        given[key] = path
    stems = [path.stem for path in given.values()]
    labels = {key: path.stem if stems.count(path.stem) == 1 else str(path) for key, path in given.items()}
    for named in named_pairs:  # a label given in --pair names its file everywhere
        for label, path in named:
            if label is not None:
                labels[path.resolve()] = label
    if len(set(labels.values())) < len(labels):
        fail("two runs have the same label: give each file its own label in --pair")
    keys = list(runs)
    if named_pairs:
        chosen = [tuple(path.resolve() for _, path in named) for named in named_pairs]
    else:  # every two runs that can be paired, in the order given
        chosen = [
            (a, b)
            for i, a in enumerate(keys)
            for b in keys[i + 1 :]
            if not pairing_problems(runs[a], runs[b])
        ]
    try:
        pairs = paired_tests([((labels[a], runs[a]), (labels[b], runs[b])) for a, b in chosen])
    except OutcomesError as error:
        fail(str(error))
    summaries = [recompute(runs[key]) for key in keys]
    run_labels = [labels[key] for key in keys]
    console.print(_runs_table(run_labels, summaries))
    if pairs:
        console.print(_pairs_table(pairs))
    elif len(keys) > 1:
        console.print(
            "no two of these runs played the same questions in the same dataset, split and mode: no pair tested"
        )
    if json_path is not None:
        payload = {
            "runs": [{"label": label, **s} for label, s in zip(run_labels, summaries, strict=True)],
            "pairs": pairs,
        }
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        console.print(f"numbers written to {json_path}")
