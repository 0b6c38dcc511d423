"""`sqlenv eval`, `sqlenv compare` and `sqlenv patterns`: play policies and show or write what
they did. The playing itself is `sqlenv.evaluation`; this module parses options, shows progress
and tables, and writes reports."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

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
from sqlenv.extras import has_extra, missing_extra_message

if TYPE_CHECKING:
    from sqlenv.agents.registry import PolicySettings
    from sqlenv.data import Dataset
    from sqlenv.evaluation import EvaluationResult
    from sqlenv.evaluation.records import EpisodeRecord
    from sqlenv.evaluation.reports import ReportFiles
    from sqlenv.evaluation.reports.files import SavedResults


class BackendChoice(StrEnum):
    serial = "serial"
    threads = "threads"
    ray = "ray"


ParallelOption = Annotated[
    int, typer.Option("--parallel", min=1, help="episodes played at the same time (threads unless --backend)")
]
BackendOption = Annotated[
    BackendChoice | None,
    typer.Option(
        "--backend", help="serial, threads or ray (default: threads when --parallel > 1, else serial)"
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address", help="Ray cluster to join (default: start a local 2-CPU one and stop it after)"
    ),
]
JournalOption = Annotated[
    Path | None,
    typer.Option(
        "--journal",
        help="record each finished episode in DIR/<policy>.jsonl; the same command run again "
        "continues where it stopped",
    ),
]
DeviceOption = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="where local language models run: auto (a GPU if PyTorch sees one), cpu, cuda or cuda:N "
        "(default: $SQLENV_DEVICE, else auto)",
        show_default=False,
    ),
]
EngineOption = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="what generates local language models' replies: auto (vllm where installed, else "
        "transformers), transformers or vllm (default: $SQLENV_ENGINE, else auto)",
        show_default=False,
    ),
]
MaxNewTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-new-tokens",
        min=1,
        help="tokens a language model may write per reply (default: $SQLENV_MAX_NEW_TOKENS, else 256)",
        show_default=False,
    ),
]
SolvedExamplesOption = Annotated[
    int | None,
    typer.Option(
        "--solved-examples",
        min=0,
        help="show language models the N most similar solved train questions with their SQL, 0 for "
        "none (default: $SQLENV_SOLVED_EXAMPLES, else as each model was trained; none for presets "
        "and OpenAI servers)",
        show_default=False,
    ),
]
UrlOption = Annotated[
    str | None,
    typer.Option(help="play against a running `sqlenv serve` at this URL instead of in-process"),
]


def _policy_settings(
    device: str | None,
    max_new_tokens: int | None,
    solved_examples: int | None = None,
    engine: str | None = None,
    temperature: float | None = None,
) -> PolicySettings:
    """`--device`, `--max-new-tokens`, `--solved-examples`, `--engine` and `--temperature` as the
    settings every language-model policy of the run is built with (a bad device, engine or
    temperature ends the command before anything plays)."""
    from sqlenv.agents.registry import PolicySettings

    if engine is not None:
        from sqlenv.agents.engines import resolve_engine

        try:
            engine = resolve_engine(engine)
        except ValueError as exc:
            fail(str(exc))

    if device is not None:
        try:
            from sqlenv.agents.devices import resolve_device

            resolve_device(device)
        except ImportError:
            fail(missing_extra_message("llm", "--device"))
        except ValueError as exc:
            fail(str(exc))
    if temperature is not None and not temperature > 0:
        fail(f"--temperature must be above 0 (greedy decoding is the default), got {temperature}")
    return PolicySettings(
        device=device,
        max_new_tokens=max_new_tokens,
        solved_examples=solved_examples,
        engine=engine,
        temperature=temperature,
    )


def _policy_names(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        fail("no policy given")
    if len(set(names)) != len(names):
        fail(f"a policy is named twice in {text!r}")
    return names


def _run_policies(
    names: list[str],
    dataset: str,
    split: Split,
    spider_dir: Path | None,
    episodes: int | None,
    seed: int,
    url: str | None,
    parallel: int,
    backend: BackendChoice | None,
    ray_address: str | None,
    journal: Path | None = None,
    play: bool = True,
    settings: PolicySettings | None = None,
    heldout: int | None = None,
    answer_mode: AnswerMode = AnswerMode.value,
    samples: int = 1,
    show_schema: bool = False,
) -> list[EvaluationResult]:
    """Evaluate each named policy on the same questions with the same seeds (one progress bar each);
    with `samples` K, each question K times in a row, each episode with its own seed."""
    from contextlib import nullcontext

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from sqlenv.agents.registry import make_policy
    from sqlenv.config import EnvConfig
    from sqlenv.evaluation import (
        LocalEnvironmentFactory,
        RaySession,
        RemoteEnvironmentFactory,
        evaluate,
        resolve_backend,
        worker_policy_factory,
    )
    from sqlenv.evaluation.reports import slug

    try:
        chosen = resolve_backend(parallel, backend.value if backend else None)
    except ValueError as exc:
        fail(str(exc))
    if ray_address is not None and chosen != "ray":
        fail("--ray-address needs --backend ray")
    if chosen == "ray" and not has_extra("eval"):
        fail(missing_extra_message("eval", "--backend ray"))
    data = load_or_fail(dataset, spider_dir)
    try:
        if url is None:
            env_factory = LocalEnvironmentFactory(
                data, split.value, EnvConfig(answer_mode=answer_mode.value, show_schema=show_schema)
            )
        else:
            env_factory = RemoteEnvironmentFactory(url, data, split.value)
        env = env_factory()
        if url is not None:
            served = env.reset().metadata
            served_mode = served.get("answer_mode", "value")
            if served_mode != answer_mode.value:
                env.close()
                fail(
                    f"the server at {url} grades answers in mode {served_mode!r}, not {answer_mode.value!r}: "
                    f"pass --answer-mode {served_mode}, or serve with --answer-mode {answer_mode.value}"
                )
            if served.get("show_schema") is not True and show_schema:
                env.close()
                fail(f"the server at {url} hides the schema: serve with --show-schema, or leave --show-schema out")
            if served.get("show_schema") is True and not show_schema:
                env.close()
                fail(f"the server at {url} shows the schema: pass --show-schema, or serve without it")
    except KeyError as exc:
        fail(str(exc.args[0]))
    except (OSError, ConnectionError) as exc:
        fail(f"cannot connect to {url}: {exc}")
    policies = {}
    for name in names:
        try:
            policies[name] = make_policy(name, data, seed, settings)
        except ValueError as exc:
            env.close()
            fail(str(exc))
    question_ids = None
    if heldout is not None:  # the learning curve's held-out set (sqlenv.training.heldout)
        from sqlenv.training.heldout import heldout_questions

        try:
            question_ids = heldout_questions(data, heldout, split=split.value, seed=seed)
        except ValueError as exc:
            env.close()
            fail(str(exc))
    if samples > 1:
        chosen_ids = question_ids if question_ids is not None else [r.question_id for r in env.questions]
        question_ids = [question_id for question_id in chosen_ids for _ in range(samples)]
    total = episodes if episodes is not None else len(question_ids or env.questions)
    results: list[EvaluationResult] = []
    try:
        session = RaySession(ray_address) if chosen == "ray" else nullcontext()
        if chosen == "ray":
            console.print("starting Ray (workers import sqlenv once, a few seconds)…")
        with session:
            for name, pol in policies.items():
                where = f"{dataset}/{split.value}" + (f" via {url}" if url else "")
                with Progress(
                    TextColumn("[progress.description]{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeRemainingColumn(),
                    console=console,
                    transient=True,
                ) as progress:
                    task = progress.add_task(f"{name} on {where} ({chosen})", total=total)
                    try:
                        result = evaluate(
                            env,
                            pol,
                            episodes,
                            seed,
                            on_episode=lambda _e, t=task: progress.advance(t),
                            parallel=parallel,
                            backend=chosen,
                            policy_factory=worker_policy_factory(pol, name, data, seed, chosen, parallel, settings),
                            env_factory=env_factory,
                            ray_address=ray_address,
                            journal=journal / f"{slug(name)}.jsonl" if journal is not None else None,
                            play=play,
                            question_ids=question_ids,
                        )
                    except ValueError as exc:  # a journal of another run
                        fail(str(exc))
                result.policy = name
                results.append(result)
    except ConnectionError as exc:
        fail(f"lost the connection to {url}: {exc}")
    finally:
        env.close()
    return results


def _success_words(answer_mode: AnswerMode, show_schema: bool = False) -> str:
    """What the success column measures: execution accuracy when answers are SQL statements; and
    whether the schema was shown."""
    notes = (["SQL answers"] if answer_mode == AnswerMode.sql else []) + (["schema shown"] if show_schema else [])
    words = "execution accuracy" if answer_mode == AnswerMode.sql else "success rate"
    return words + (f" ({', '.join(notes)})" if notes else "")


def _results_table(title: str, results: list[EvaluationResult], *, compare: bool = False) -> Table:
    """One row per policy. For `compare` (every policy played the same episodes) the episode count
    moves to the title and a format-error-rate column is added."""
    from sqlenv.evaluation import NOT_IN_TRAIN, SEEN_IN_TRAIN

    table = Table(title=title)
    difficulties = _difficulty_columns(results)
    # Success apart on questions whose gold SQL a train question shares, where there are some.
    overlap = {SEEN_IN_TRAIN: "seen SQL", NOT_IN_TRAIN: "new SQL"}
    if not any(SEEN_IN_TRAIN in r.by_train_overlap for r in results):
        overlap = {}
    else:
        table.caption = "seen SQL / new SQL: success where a train question has the same gold SQL / has not"
    columns = (
        ["policy", "success", "reward", "steps", "fmt err"]
        if compare
        else ["policy", "episodes", "success", "reward", "steps"]
    )
    for column in (*columns, *difficulties):
        table.add_column(column, justify="left" if column == "policy" else "right", no_wrap=True)
    for column in overlap.values():
        table.add_column(column, justify="right", no_wrap=True)
    for r in results:
        cells = {
            "policy": r.policy,
            "episodes": str(r.n_episodes),
            "success": f"{r.success_rate:.3f}",
            "reward": f"{r.avg_reward:.3f}",
            "steps": f"{r.avg_steps:.2f}",
            "fmt err": f"{r.format_error_rate:.3f}",
        }
        per_diff = [
            f"{r.by_difficulty[d]['success_rate']:.2f}" if d in r.by_difficulty else "-" for d in difficulties
        ]
        per_overlap = [
            f"{r.by_train_overlap[o]['success_rate']:.2f}" if o in r.by_train_overlap else "-"
            for o in overlap
        ]
        table.add_row(*(cells[c] for c in columns), *per_diff, *per_overlap)
    return table


def _print_pass_at_k(results: list[EvaluationResult], samples: int) -> None:
    """Per policy: pass@K, and how many questions were solved in some samples but not all (the
    ones a GRPO group of this policy's rollouts can learn from: `grpo.pass_rate_range`)."""
    from sqlenv.evaluation.records import successes_by_question

    for r in results:
        counts = successes_by_question(r.episodes).values()
        whole = [solved for solved, played in counts if played == samples]  # a stopped run: whole questions
        if not whole:
            continue
        some = sum(solved >= 1 for solved in whole)
        mixed = sum(0 < solved < samples for solved in whole)
        console.print(
            f"{r.policy}: pass@{samples} {some / len(whole):.3f} ({some} of {len(whole)} questions solved at "
            f"least once); {mixed} solved in some samples but not all"
        )


def _print_written(files: ReportFiles) -> None:
    console.print(f"report written to {files.directory}: " + ", ".join(p.name for p in files.written))
    for note in files.skipped:
        console.print(f"[yellow]skipped[/] {note}")


@app.command("eval")
def eval_command(
    policy: Annotated[
        str, typer.Option(help="oracle, random (or another registered policy), or a comma-separated list")
    ] = "oracle",
    dataset: DatasetOption = "demo",
    split: Annotated[Split, typer.Option(help="which split to play")] = Split.eval,
    episodes: Annotated[
        int | None, typer.Option(min=0, help="episodes to play (default: every question once)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed for question sampling and policies")] = 0,
    spider_dir: SpiderDirOption = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="write the results as JSON here")] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="write results.json, summary.md, plots and transcripts.html here "
            "(one subfolder per policy when several)",
        ),
    ] = None,
    url: UrlOption = None,
    parallel: ParallelOption = 1,
    backend: BackendOption = None,
    ray_address: RayAddressOption = None,
    journal: JournalOption = None,
    device: DeviceOption = None,
    engine: EngineOption = None,
    max_new_tokens: MaxNewTokensOption = None,
    solved_examples: SolvedExamplesOption = None,
    answer_mode: AnswerModeOption = AnswerMode.value,
    show_schema: ShowSchemaOption = False,
    journal_only: Annotated[
        bool,
        typer.Option(
            "--journal-only",
            help="with --journal: play nothing and report the results so far of a run that stopped "
            "(the planned episodes up to the first one the journal lacks)",
        ),
    ] = False,
    heldout: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="play only the N-question held-out set that training's learning curve measures "
            "(stratified by difficulty and twin / new SQL; the same for the same --seed)",
        ),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            help="sample language models' replies at this temperature (seeded by episode and turn) "
            "instead of decoding greedily",
            show_default=False,
        ),
    ] = None,
    samples: Annotated[
        int,
        typer.Option(
            min=1,
            help="play every question K times (each episode with its own seed; with --temperature, "
            "K samples): success is then the mean over episodes, and pass@K and each question's "
            "success count are reported",
        ),
    ] = 1,
) -> None:
    """Evaluate policies on a dataset split and print a table of results."""
    names = _policy_names(policy)
    if journal_only and journal is None:
        fail("--journal-only reports a journal's episodes: give --journal")
    if samples > 1 and episodes is not None:
        fail("--samples plays every question K times and --episodes samples the questions: give one of them")
    settings = _policy_settings(device, max_new_tokens, solved_examples, engine, temperature)
    results = _run_policies(
        names,
        dataset,
        split,
        spider_dir,
        episodes,
        seed,
        url,
        parallel,
        backend,
        ray_address,
        journal,
        play=not journal_only,
        settings=settings,
        heldout=heldout,
        answer_mode=answer_mode,
        samples=samples,
        show_schema=show_schema,
    )
    console.print(
        _results_table(
            f"{dataset} / {split.value}{f' (held-out {heldout})' if heldout else ''}: "
            f"{_success_words(answer_mode, show_schema)} overall and by difficulty, mean reward and steps",
            results,
        )
    )
    if samples > 1:
        _print_pass_at_k(results, samples)
    for r in results:
        if r.planned_episodes:
            console.print(
                f"{r.policy}: a stopped run, the first {r.n_episodes} of {r.planned_episodes} planned "
                f"episodes ({r.finished_after_gap} that finished after the first missing one left out)"
            )
    if json_path is not None:
        payload = results[0].to_json() if len(results) == 1 else {r.policy: r.to_json() for r in results}
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(payload, indent=2, default=list))
        console.print(f"results written to {json_path}")
    if report is not None:
        from sqlenv.evaluation.reports import slug, write_report

        for r in results:
            _print_written(write_report(r, report if len(results) == 1 else report / slug(r.policy)))


@app.command("compare")
def compare_command(
    policies: Annotated[
        str, typer.Option(help="comma-separated policies to compare, e.g. random,oracle")
    ] = "random,oracle",
    dataset: DatasetOption = "demo",
    split: Annotated[Split, typer.Option(help="which split to play")] = Split.eval,
    episodes: Annotated[
        int | None, typer.Option(min=0, help="episodes per policy (default: every question once)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed for question sampling and policies")] = 0,
    spider_dir: SpiderDirOption = None,
    out: Annotated[Path | None, typer.Option("--out", help="write compare.json and compare.png here")] = None,
    reports: Annotated[
        bool, typer.Option("--reports", help="with --out: also each policy's full report in OUT/<policy>/")
    ] = False,
    url: UrlOption = None,
    parallel: ParallelOption = 1,
    backend: BackendOption = None,
    ray_address: RayAddressOption = None,
    journal: JournalOption = None,
    device: DeviceOption = None,
    engine: EngineOption = None,
    max_new_tokens: MaxNewTokensOption = None,
    solved_examples: SolvedExamplesOption = None,
    answer_mode: AnswerModeOption = AnswerMode.value,
    show_schema: ShowSchemaOption = False,
) -> None:
    """Play several policies on the same questions with the same seeds and compare them."""
    names = _policy_names(policies)
    settings = _policy_settings(device, max_new_tokens, solved_examples, engine)
    if reports and out is None:
        fail("--reports needs --out DIR")
    results = _run_policies(
        names, dataset, split, spider_dir, episodes, seed, url, parallel, backend, ray_address, journal,
        settings=settings,
        answer_mode=answer_mode,
        show_schema=show_schema,
    )
    console.print(
        _results_table(
            f"{dataset}/{split.value}, seed {seed}, {results[0].n_episodes} episodes per policy (the same ones)\n"
            f"{_success_words(answer_mode, show_schema)} overall and by difficulty; mean reward and steps; fmt err: unparseable outputs per action",
            results,
            compare=True,
        )
    )
    if out is not None:
        from sqlenv.evaluation.reports import slug, write_comparison, write_report

        _print_written(write_comparison(results, out))
        if reports:
            for r in results:
                _print_written(write_report(r, out / slug(r.policy)))


@app.command("patterns")
def patterns_command(
    results: Annotated[
        list[Path],
        typer.Argument(help="results.json files (or the report folders holding them) written by --report"),
    ],
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="count only the questions every report played, so that reports of different "
            "samples compare like for like",
        ),
    ] = False,
    gold_rows: Annotated[
        bool,
        typer.Option(
            "--gold-rows",
            help="count only the questions whose gold answer has rows, where an empty answer "
            "cannot be right",
        ),
    ] = False,
    trained_on: Annotated[
        str | None,
        typer.Option(
            "--trained-on",
            help="also count success by how each question stands to this dataset's train split "
            "(the same question, a twin, new SQL on its databases, another database), e.g. spider10 "
            "for Spider dev reports of a model trained there",
            show_default=False,
        ),
    ] = None,
    spider_dir: SpiderDirOption = None,
) -> None:
    """How saved evaluations' episodes ended, the actions they used, their failure patterns and what
    followed their first failed query, side by side; and, paired with the first, which questions
    each one solved."""
    from sqlenv.evaluation.patterns import ACTION_KINDS, paired_successes, pattern_summary
    from sqlenv.evaluation.reports import read_results

    try:
        runs = [read_results(path) for path in results]
    except ValueError as error:
        fail(str(error))
    episode_lists = [run.episodes for run in runs]
    if gold_rows:
        unknown = [
            path for path, run in zip(results, runs, strict=True) if any(e.empty_gold is None for e in run.episodes)
        ]
        if unknown:
            fail(
                "--gold-rows: a report written before reports kept which gold answers are empty: "
                f"{', '.join(map(str, unknown))}; write it again from its journal with --journal-only"
            )
        episode_lists = [[e for e in episodes if not e.empty_gold] for episodes in episode_lists]
    if shared:
        common = set.intersection(*({e.question_id for e in episodes} for episodes in episode_lists))
        if not common:
            fail("--shared: the reports have no question in common")
        episode_lists = [[e for e in episodes if e.question_id in common] for episodes in episode_lists]
    summaries = [pattern_summary(episodes) for episodes in episode_lists]
    labels = [run.path.parent.name if run.path.name == "results.json" else run.path.name for run in runs]
    table = Table(
        title="episodes: how they ended; actions per episode; patterns: episodes (success among them)",
        caption="\n".join(
            f"{label}: {run.policy}" + (" (schema shown)" if any(e.show_schema for e in run.episodes) else "")
            for label, run in zip(labels, runs, strict=True)
        ),
    )
    table.add_column("", no_wrap=True)
    for label in labels:
        table.add_column(label, justify="right")
    table.add_row("episodes", *(str(s["n"]) for s in summaries))
    for ending in summaries[0]["ended"]:
        table.add_row(
            ending, *(f"{s['ended'][ending]} ({s['ended'][ending] / max(s['n'], 1):.0%})" for s in summaries)
        )
    for kind in ACTION_KINDS:
        table.add_row(
            f"{kind} per episode", *(f"{s['actions'][kind]['mean_per_episode']:.2f}" for s in summaries)
        )

    def count_rows(key: str, prefix: str = "") -> None:
        """One row per name under `key` (patterns, or the steps after a first failed query)."""
        for name in dict.fromkeys(name for s in summaries for name in s[key]):
            cells = []
            for s in summaries:
                p = s[key].get(name)
                if p is None:
                    cells.append("no transcripts")
                else:
                    cells.append(f"{p['episodes']} ({p['success_rate']:.0%})" if p["episodes"] else "0")
            table.add_row(prefix + name, *cells)

    count_rows("patterns")
    if any(s["after_first_failed_query"] for s in summaries):
        table.add_section()
        count_rows("after_first_failed_query", prefix="after the first failed query: ")
    if len(runs) > 1:  # the other runs paired with the first, on the questions both played
        pairs = [paired_successes(episode_lists[0], episodes) for episodes in episode_lists[1:]]
        table.add_section()
        for row, field in (
            (f"questions also played by {labels[0]}", "shared"),
            ("correct in both", "both"),
            (f"correct only in {labels[0]}", "only_first"),
            ("correct only in this one", "only_second"),
        ):
            table.add_row(row, "", *(str(getattr(pair, field)) for pair in pairs))
        table.add_row(
            "McNemar exact p (two-sided)", "", *(f"{pair.mcnemar_p_value:.3g}" for pair in pairs)
        )
    if trained_on is not None:
        _add_training_overlap_rows(table, runs, episode_lists, labels, trained_on, spider_dir)
    console.print(table)


def _add_training_overlap_rows(
    table: Table,
    runs: list[SavedResults],
    episode_lists: list[list[EpisodeRecord]],
    labels: list[str],
    trained_on: str,
    spider_dir: Path | None,
) -> None:
    """`sqlenv patterns --trained-on`: success by how each question stands to a train split.

    Args:
        table: the patterns table, which gains a section.
        runs: the saved reports (their dataset names say where each question's record is).
        episode_lists: each report's episodes, after the command's filters.
        labels: the reports' column names.
        trained_on: the dataset whose train split the questions are placed against.
        spider_dir: where Spider is, for presets built from it.
    """
    from sqlenv.data.overlap import RELATIONS, TRAIN_SPLIT, TrainSplitOverlap
    from sqlenv.evaluation.patterns import paired_successes
    from sqlenv.evaluation.records import wilson_interval

    trained = load_or_fail(trained_on, spider_dir)
    if TRAIN_SPLIT not in trained.split_names:
        fail(f"--trained-on {trained_on}: that dataset has no {TRAIN_SPLIT} split")
    overlap = TrainSplitOverlap.of(trained.split(TRAIN_SPLIT))
    datasets: dict[str, Dataset] = {}
    by_relation: list[dict[str, list[EpisodeRecord]]] = []
    for label, run, episodes in zip(labels, runs, episode_lists, strict=True):
        if run.dataset not in datasets:
            datasets[run.dataset] = load_or_fail(run.dataset, spider_dir)
        dataset = datasets[run.dataset]
        groups: dict[str, list[EpisodeRecord]] = {relation: [] for relation in RELATIONS}
        for episode in episodes:
            if episode.question_id not in dataset:
                fail(f"--trained-on: {label} played {episode.question_id!r}, which {run.dataset} does not hold")
            groups[overlap.relation(dataset.get(episode.question_id))].append(episode)
        by_relation.append(groups)
    table.add_section()
    for relation in RELATIONS:
        cells = []
        for groups in by_relation:
            episodes = groups[relation]
            solved = sum(e.success for e in episodes)
            low, high = wilson_interval(solved, len(episodes))
            cells.append(
                f"{solved}/{len(episodes)} ({solved / len(episodes):.1%}, {low:.1%}-{high:.1%})" if episodes else "0/0"
            )
        table.add_row(f"{trained_on} train split: {relation}: correct", *cells)
        if len(runs) > 1:
            pairs = [paired_successes(by_relation[0][relation], groups[relation]) for groups in by_relation[1:]]
            table.add_row(
                f"{trained_on} train split: {relation}: gained / lost against {labels[0]} (McNemar p)",
                "",
                *(f"{pair.only_second} / {pair.only_first} ({pair.mcnemar_p_value:.3g})" for pair in pairs),
            )


def _difficulty_columns(results: list[EvaluationResult]) -> list[str]:
    seen = {d for r in results for d in r.by_difficulty}
    return [d for d in ("easy", "medium", "hard", "extra") if d in seen]
