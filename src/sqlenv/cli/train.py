"""`sqlenv train sft` and `sqlenv train grpo`: TRL training from a YAML config; `sqlenv train
pass-rates`: the pass rates of a sampled evaluation, which choose a run's questions; `sqlenv train curves`:
several runs' held-out learning curves on one plot; `sqlenv train diagnostics`: a run's per-step
diagnostics by blocks of steps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sqlenv.cli.common import SpiderDirOption, console, fail, fail_without_extra, train_app

if TYPE_CHECKING:
    from sqlenv.evaluation.patterns import PairedSuccesses


def require_training_extra(command: str) -> None:
    """End `command` with the install hint when the `llm` extra (torch, TRL, PyYAML) is missing."""
    fail_without_extra("llm", command)


ConfigOption = Annotated[
    Path, typer.Option("--config", help="training config (YAML), e.g. configs/cpu-smollm2.yaml")
]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="continue from the last checkpoint in the run directory")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="override a config value: --set grpo.max_steps=5 (YAML value syntax)"),
]


def _train_config(config: Path, spider_dir: Path | None, overrides: list[str] | None):
    import yaml

    from sqlenv.training.config import load_config

    values: dict[str, object] = {}
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            fail(f"--set needs KEY=VALUE, got {item!r}")
        values[key.strip()] = yaml.safe_load(raw)
    if spider_dir is not None:
        values["spider_dir"] = str(spider_dir)
    try:
        return load_config(config, values)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))


@train_app.command("sft")
def train_sft(
    config: ConfigOption,
    spider_dir: SpiderDirOption = None,
    resume: ResumeOption = False,
    set_values: SetOption = None,
) -> None:
    """SFT warm-up on oracle trajectories (TRL SFTTrainer); saves <output_dir>/sft/final."""
    require_training_extra("sqlenv train sft")
    from sqlenv.training.checkpoints import NoFinishedCheckpointError
    from sqlenv.training.sft import run_sft

    settings = _train_config(config, spider_dir, set_values)
    try:  # run_sft finds the checkpoint before anything loads
        final = run_sft(settings, resume=resume, console=console)
    except NoFinishedCheckpointError as exc:
        fail(str(exc))
    console.print(f"SFT model saved to [bold]{final}[/] (evaluate it: sqlenv eval --policy {final})")


@train_app.command("grpo")
def train_grpo(
    config: ConfigOption,
    spider_dir: SpiderDirOption = None,
    resume: ResumeOption = False,
    resume_from: Annotated[
        str | None,
        typer.Option(
            "--resume-from",
            help="a published GRPO checkpoint (sqlenv models publish --adapter grpo=<run>/grpo/checkpoint-N) "
            "or SFT warm-up: write the run folder back from it and continue the run at its next step",
        ),
    ] = None,
    set_values: SetOption = None,
) -> None:
    """GRPO (its episode loop: `grpo.loop`), from the SFT model when the config enables SFT."""
    require_training_extra("sqlenv train grpo")
    from sqlenv.training.checkpoints import NoFinishedCheckpointError
    from sqlenv.training.config import world_size
    from sqlenv.training.grpo import is_main_process, run_grpo

    settings = _train_config(config, spider_dir, set_values)
    if resume_from is not None:
        if world_size() > 1:
            fail("--resume-from restores the run folder in one process: run it without accelerate launch")
        resume = _restore_published_run(resume_from, settings)
    try:  # run_grpo finds the checkpoint before anything loads
        final = run_grpo(settings, resume=resume, console=console)
    except NoFinishedCheckpointError as exc:
        fail(str(exc))
    if is_main_process():  # under `accelerate launch` every process returns here; one says it
        console.print(f"GRPO model saved to [bold]{final}[/] (evaluate it: sqlenv eval --policy {final})")


def _restore_published_run(name: str, settings: Any) -> bool:
    """Write the run folder back from the published model `name` (`--resume-from`); True where it
    restored a GRPO checkpoint to resume from, False for a warm-up (GRPO starts at step 1)."""
    from sqlenv.agents.local_models import ModelNotFetchedError
    from sqlenv.agents.published_models import PublishedModelError, published_model
    from sqlenv.training.published_runs import restore_run

    try:
        model = published_model(name)
        if model is None:
            fail(f"--resume-from {name!r}: not a published model (sqlenv models list)")
        with console.status(f"restoring {settings.output_dir} from {name}…"):
            checkpoint = restore_run(model, settings)
    except (PublishedModelError, ModelNotFetchedError) as exc:
        fail(str(exc))
    if checkpoint is None:
        console.print(f"restored {settings.sft_dir} from {name}: GRPO starts from that warm-up")
        return False
    console.print(
        f"restored {checkpoint} from {name}: the run continues at step {checkpoint.name.split('-')[-1]} + 1 "
        "(the optimiser's moments start afresh: they are not published)"
    )
    return True


@train_app.command("pass-rates")
def train_pass_rates(
    results: Annotated[
        Path, typer.Argument(help="the results.json (or report folder) of a sampled evaluation, or a pass-rate table")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="write its pass-rate table here (what grpo.pass_rates_from reads)")
    ] = None,
) -> None:
    """How often each question was solved in a sampled evaluation (`sqlenv eval --temperature T
    --samples K`), by difficulty: questions solved in 0, 1, ..., K of their K episodes. With
    --out, writes the pass-rate table: each question's difficulty, solved and played, a few
    kilobytes that `grpo.pass_rates_from` reads in place of the results.json."""
    from collections import Counter

    from rich.table import Table

    from sqlenv.training.pass_rates import read_pass_rates, solved_of_k_by_difficulty, write_pass_rate_table

    try:
        rates = write_pass_rate_table(results, out) if out else read_pass_rates(results)
    except ValueError as exc:
        fail(str(exc))
    samples = {played for _, _, played in rates.questions.values()}
    most = max(samples, default=0)
    table = Table(
        title=f"{rates.policy} on {rates.dataset}/{rates.split} ({rates.decoding or 'no decoding'}): "
        f"{len(rates.questions)} questions, solved in k of {'/'.join(map(str, sorted(samples)))} episodes"
    )
    for header in ("difficulty", "questions", *(str(k) for k in range(most + 1))):
        table.add_column(header, justify="left" if header == "difficulty" else "right")
    by_difficulty = solved_of_k_by_difficulty(rates)
    rows = {**by_difficulty, "all": sum(by_difficulty.values(), Counter())}
    for difficulty, counts in rows.items():
        table.add_row(difficulty, str(counts.total()), *(str(counts[k]) for k in range(most + 1)))
    console.print(table)
    if out:
        console.print(f"pass-rate table written to {out}")


@train_app.command("curves")
def train_curves(
    runs: Annotated[
        list[str], typer.Argument(help="LABEL=RUN, RUN a GRPO run directory (runs/x/grpo) or its heldout.json")
    ],
    out: Annotated[Path, typer.Option("--out", help="the PNG to write")] = Path("learning-curves.png"),
    equal_steps: Annotated[
        bool,
        typer.Option("--equal-steps", help="only the steps every run measured (while one run is still behind)"),
    ] = False,
) -> None:
    """Held-out learning curves of several runs on one plot (e.g. dense reward vs correctness alone),
    and a table of their points, each paired question by question with its run's start and with the
    first run at the same step (McNemar's exact test); then whether each run trained on the first
    run's questions, step by step (from the diagnostics beside each run's held-out points)."""
    fail_without_extra("eval", "sqlenv train curves")
    from sqlenv.training.curves import curve_comparisons, heldout_points, plot_heldout_curves, steps_in_common

    labelled: dict[str, Path] = {}
    for item in runs:
        label, sep, run = item.partition("=")
        if not sep or not label.strip() or not run.strip():
            fail(f"a run is LABEL=RUN, got {item!r}")
        labelled[label.strip()] = Path(run.strip())
    try:
        points = {label: heldout_points(run) for label, run in labelled.items()}
    except FileNotFoundError as exc:
        fail(str(exc))
    if equal_steps:
        steps = steps_in_common(points)
        if not steps:
            fail(f"--equal-steps: {', '.join(labelled)} measured no step in common")
        points = {label: [p for p in run if int(p["step"]) in steps] for label, run in points.items()}
    path = plot_heldout_curves(points, out)
    _print_curve_comparisons(curve_comparisons(points), first=next(iter(labelled)))
    _print_question_agreement(labelled)
    console.print(f"learning curves of {', '.join(labelled)} written to {path}")


def _print_question_agreement(runs: dict[str, Path]) -> None:
    """One line per run after the first: whether it trained on the first run's questions."""
    from sqlenv.training.curves import question_agreement, training_questions

    played = {label: training_questions(run) for label, run in runs.items()}
    first, *others = runs
    for label in others:
        theirs, ours = played[first], played[label]
        if theirs is None or ours is None:
            unrecorded = [name for name in (first, label) if played[name] is None]
            console.print(
                f"training questions: {label} against {first} unknown: {' and '.join(unrecorded)} kept no "
                "per-step questions (a diagnostics.json with 'questions' beside its heldout.json)"
            )
            continue
        agreement = question_agreement(theirs, ours)
        steps, differing = agreement["steps"], agreement["differing"]
        if not steps:
            console.print(f"training questions: {label} and {first} recorded no step in common")
        elif not differing:
            console.print(
                f"training questions: {label} played the same questions as {first}, in the same order, "
                f"at each of the {len(steps)} steps both recorded ({steps[0]}–{steps[-1]})"
            )
        else:
            step = differing[0]
            console.print(
                f"training questions: {label} and {first} differ at {len(differing)} of the {len(steps)} steps "
                f"both recorded, first at step {step} ({', '.join(ours[step])} against {', '.join(theirs[step])})"
            )


@train_app.command("diagnostics")
def train_diagnostics(
    run: Annotated[Path, typer.Argument(help="a GRPO run directory (runs/x/grpo) or its diagnostics.json")],
    every: Annotated[int, typer.Option("--every", min=1, help="steps per block")] = 10,
    markdown: Annotated[bool, typer.Option("--markdown", help="print the table as Markdown")] = False,
) -> None:
    """A GRPO run's per-step diagnostics summed up by blocks of steps: the training reward and its
    correctness, answer rate, tool calls and failed calls, reward spread within groups, groups all
    right or all wrong, completion length and truncation, entropy, KL, clipping, gradient norm and
    step time (each the mean over the block's steps; - where the run did not record it)."""
    from sqlenv.training.diagnostics import BLOCK_COLUMNS, block_means, diagnostic_points

    try:
        rows = block_means(diagnostic_points(run), every)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    if not rows:
        fail(f"{run} records no step yet")
    headers = ["steps", *(header for _, header, _ in BLOCK_COLUMNS)]
    cells = [
        [
            f"{row['first']}–{row['last']}" if row["last"] > row["first"] else str(row["first"]),
            *("-" if row[key] is None else f"{row[key]:.{decimals}f}" for key, _, decimals in BLOCK_COLUMNS),
        ]
        for row in rows
    ]
    if markdown:
        from sqlenv.evaluation.reports.markdown import markdown_table

        print(markdown_table(headers, cells))
        return
    from rich.table import Table

    table = Table(title=f"{run}: means over blocks of {every} steps")
    for header in headers:
        table.add_column(header, justify="left" if header == "steps" else "right")
    for line in cells:
        table.add_row(*line)
    console.print(table)


def _paired_cell(pair: PairedSuccesses | None) -> str:
    """`+6 (p 0.04)`: the change in questions solved, and McNemar's exact p; `-` when unpaired."""
    if pair is None:
        return "-"
    return f"{pair.only_second - pair.only_first:+d} ({pair.only_first}/{pair.only_second}, p {pair.mcnemar_p_value:.2g})"


def _print_curve_comparisons(rows: list[dict[str, Any]], first: str) -> None:
    from rich.table import Table

    table = Table(
        title="held-out points; a change is questions solved (lost/gained, McNemar's exact p)",
        caption="- : nothing to pair (the start itself, or points written without their solved questions), "
        "or not recorded (points written before they kept it)",
    )
    columns = ("run", "step", "success", "new SQL", "mean reward", "answered", "vs its start")
    for column in (*columns, f"vs {first} at this step"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for row in rows:
        table.add_row(
            row["run"],
            str(row["step"]),
            f"{row['success']:.0%} of {row['n']}",
            f"{row['success_new_sql']:.0%}",
            f"{row['mean_reward']:.3f}",
            "-" if row["answer_rate"] is None else f"{row['answer_rate']:.0%}",
            _paired_cell(row["vs_start"]),
            _paired_cell(row["vs_first"]),
        )
    console.print(table)
