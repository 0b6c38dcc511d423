"""The `sqlenv` command (typer + rich): `eval`, `compare`, `patterns`, `data info`, `data download`, `serve`, `play`,
`train sft`, `train grpo`.

Heavy modules (OpenEnv pulls in its web server stack) are imported inside the commands, so
`sqlenv --help` and `sqlenv data ...` start fast.
"""

from __future__ import annotations

import functools
import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlenv.data import Dataset
    from sqlenv.evaluation import EvaluationResult
    from sqlenv.policies import Policy
    from sqlenv.reports import ReportFiles

app = typer.Typer(
    help="sqlenv: answer questions about SQLite databases by exploring them.", no_args_is_help=True
)
data_app = typer.Typer(help="Datasets: inspect and download.", no_args_is_help=True)
app.add_typer(data_app, name="data")
train_app = typer.Typer(help="Training with TRL: SFT warm-up, then GRPO.", no_args_is_help=True)
app.add_typer(train_app, name="train")
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
    train = "train"
    eval = "eval"


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


def _load(dataset: str, spider_dir: Path | None):
    from sqlenv.data import DataError, load_dataset

    try:
        with console.status(f"loading dataset {dataset} (first use computes gold answers)…"):
            return load_dataset(dataset, spider_dir)
    except DataError as exc:
        _fail(str(exc))


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


def _configure_language_models(
    device: str | None, max_new_tokens: int | None, solved_examples: int | None = None
) -> None:
    """Check `--device`, `--max-new-tokens` and `--solved-examples` and hand them to the LLM
    policies through $SQLENV_DEVICE, $SQLENV_MAX_NEW_TOKENS and $SQLENV_SOLVED_EXAMPLES (which the
    workers of a local Ray cluster, started after this, inherit; a remote cluster's workers do not)."""
    import os

    from sqlenv.llm_policy import DEVICE_ENV, MAX_NEW_TOKENS_ENV, resolve_device
    from sqlenv.solved_examples import SOLVED_EXAMPLES_ENV

    if device is not None:
        try:
            resolve_device(device)
        except ValueError as exc:
            _fail(str(exc))
        os.environ[DEVICE_ENV] = device
    if max_new_tokens is not None:
        os.environ[MAX_NEW_TOKENS_ENV] = str(max_new_tokens)
    if solved_examples is not None:
        os.environ[SOLVED_EXAMPLES_ENV] = str(solved_examples)


def _policy_names(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        _fail("no policy given")
    if len(set(names)) != len(names):
        _fail(f"a policy is named twice in {text!r}")
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
) -> list[EvaluationResult]:
    """Evaluate each named policy on the same questions with the same seeds (one progress bar each)."""
    from contextlib import nullcontext

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from sqlenv.evaluation import (
        LocalEnvironmentFactory,
        RaySession,
        RemoteEnvironmentFactory,
        evaluate,
        resolve_backend,
    )
    from sqlenv.policies import make_policy
    from sqlenv.reports import slug

    try:
        chosen = resolve_backend(parallel, backend.value if backend else None)
    except ValueError as exc:
        _fail(str(exc))
    if ray_address is not None and chosen != "ray":
        _fail("--ray-address needs --backend ray")
    if chosen == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            _fail("--backend ray needs Ray: pip install 'sqlenv[eval]'")
    data = _load(dataset, spider_dir)
    try:
        if url is None:
            env_factory = LocalEnvironmentFactory(data, split.value)
        else:
            env_factory = RemoteEnvironmentFactory(url, data, split.value)
        env = env_factory()
    except KeyError as exc:
        _fail(str(exc.args[0]))
    except (OSError, ConnectionError) as exc:
        _fail(f"cannot connect to {url}: {exc}")
    policies = {}
    for name in names:
        try:
            policies[name] = make_policy(name, data, seed)
        except ValueError as exc:
            env.close()
            _fail(str(exc))
    total = episodes if episodes is not None else len(env.questions)
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
                            policy_factory=_worker_policies(pol, name, data, seed, chosen, parallel),
                            env_factory=env_factory,
                            ray_address=ray_address,
                            journal=journal / f"{slug(name)}.jsonl" if journal is not None else None,
                            play=play,
                        )
                    except ValueError as exc:  # a journal of another run
                        _fail(str(exc))
                result.policy = name
                results.append(result)
    except ConnectionError as exc:
        _fail(f"lost the connection to {url}: {exc}")
    finally:
        env.close()
    return results


def _worker_policies(
    policy: Policy, name: str, data: Dataset, seed: int, backend: str, parallel: int
) -> Callable[[], Policy]:
    """How parallel workers get their own policy: Ray workers build one by name (picklable);
    threads clone the main one when it can (an LLM policy's clones then share its weights and
    decode in batches of up to `parallel`), else build one by name."""
    from sqlenv.policies import PolicyFactory

    clone = getattr(policy, "clone", None)
    if backend == "threads" and callable(clone):
        if hasattr(policy, "max_batch"):  # an LLM policy: every waiting thread's reply in one batch
            return functools.partial(clone, max_batch=parallel)
        return clone
    return PolicyFactory(name, data, seed)


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
    max_new_tokens: MaxNewTokensOption = None,
    solved_examples: SolvedExamplesOption = None,
    journal_only: Annotated[
        bool,
        typer.Option(
            "--journal-only",
            help="with --journal: play nothing and report the results so far of a run that stopped "
            "(the planned episodes up to the first one the journal lacks)",
        ),
    ] = False,
) -> None:
    """Evaluate policies on a dataset split and print a table of results."""
    names = _policy_names(policy)
    if journal_only and journal is None:
        _fail("--journal-only reports a journal's episodes: give --journal")
    _configure_language_models(device, max_new_tokens, solved_examples)
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
    )
    console.print(
        _results_table(
            f"{dataset} / {split.value}: success rate overall and by difficulty, mean reward and steps",
            results,
        )
    )
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
        from sqlenv.reports import slug, write_report

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
    max_new_tokens: MaxNewTokensOption = None,
    solved_examples: SolvedExamplesOption = None,
) -> None:
    """Play several policies on the same questions with the same seeds and compare them."""
    names = _policy_names(policies)
    _configure_language_models(device, max_new_tokens, solved_examples)
    if reports and out is None:
        _fail("--reports needs --out DIR")
    results = _run_policies(
        names, dataset, split, spider_dir, episodes, seed, url, parallel, backend, ray_address, journal
    )
    console.print(
        _results_table(
            f"{dataset}/{split.value}, seed {seed}, {results[0].n_episodes} episodes per policy (the same ones)\n"
            "success overall and by difficulty; mean reward and steps; fmt err: unparseable outputs per action",
            results,
            compare=True,
        )
    )
    if out is not None:
        from sqlenv.reports import slug, write_comparison, write_report

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
) -> None:
    """How saved evaluations' episodes ended, the actions they used, their failure patterns and what
    followed their first failed query, side by side; and, paired with the first, which questions
    each one solved."""
    from sqlenv.episode_patterns import ACTION_KINDS, paired_successes, pattern_summary
    from sqlenv.reports import read_results

    try:
        runs = [read_results(path) for path in results]
    except ValueError as error:
        _fail(str(error))
    episode_lists = [run.episodes for run in runs]
    if shared:
        common = set.intersection(*({e.question_id for e in episodes} for episodes in episode_lists))
        if not common:
            _fail("--shared: the reports have no question in common")
        episode_lists = [[e for e in episodes if e.question_id in common] for episodes in episode_lists]
    summaries = [pattern_summary(episodes) for episodes in episode_lists]
    labels = [run.path.parent.name if run.path.name == "results.json" else run.path.name for run in runs]
    table = Table(
        title="episodes: how they ended; actions per episode; patterns: episodes (success among them)",
        caption="\n".join(f"{label}: {run.policy}" for label, run in zip(labels, runs, strict=True)),
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
    console.print(table)


def _difficulty_columns(results: list[EvaluationResult]) -> list[str]:
    seen = {d for r in results for d in r.by_difficulty}
    return [d for d in ("easy", "medium", "hard", "extra") if d in seen]


@data_app.command("info")
def data_info(
    dataset: DatasetOption = "demo",
    spider_dir: SpiderDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of tables")] = False,
) -> None:
    """Databases, questions per split, per difficulty, per answer type, empty-gold count."""
    summary = _load(dataset, spider_dir).summary()
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
            _fail(str(exc))
    console.print(f"installed {name} at {path}; use it with --spider-dir {path}")


@app.command()
def serve(
    dataset: DatasetOption = "demo",
    split: Annotated[Split, typer.Option(help="which split to serve")] = Split.train,
    spider_dir: SpiderDirOption = None,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    max_sessions: Annotated[
        int | None,
        typer.Option(help="concurrent WebSocket sessions per worker (default 64, or $SQLENV_MAX_SESSIONS)"),
    ] = None,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes, each with its own sessions")] = 1,
) -> None:
    """Serve the environment over OpenEnv's protocol (WebSocket /ws) with a web page at /web."""
    import os

    import uvicorn

    from sqlenv.server import MAX_SESSIONS_ENV, create_sqlenv_app

    _load(dataset, spider_dir)  # fail early, and build the cache once for all workers
    if max_sessions is not None:
        os.environ[MAX_SESSIONS_ENV] = str(max_sessions)
    console.print(
        f"sqlenv serving {dataset}/{split.value} on http://{host}:{port} — play at http://{host}:{port}/web"
    )
    if workers > 1:
        os.environ.update({"SQLENV_DATASET": dataset, "SQLENV_SPLIT": split.value})
        if spider_dir is not None:
            os.environ["SQLENV_SPIDER_DIR"] = str(spider_dir)
        uvicorn.run(
            "sqlenv.server:app_from_environment",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
        )
        return
    try:
        application = create_sqlenv_app(dataset, split.value, spider_dir, max_sessions)
    except KeyError as exc:
        _fail(str(exc.args[0]))
    uvicorn.run(application, host=host, port=port, log_level="warning")


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
) -> None:
    """Play episodes in the terminal: type `describe T`, `sample T`, `query SQL`, `answer X`."""
    from sqlenv.play import play_in_terminal

    data = _load(dataset, spider_dir)
    play_in_terminal(console, data, split.value, question_id=question_id, seed=seed, url=url)


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
            _fail(f"--set needs KEY=VALUE, got {item!r}")
        values[key.strip()] = yaml.safe_load(raw)
    if spider_dir is not None:
        values["spider_dir"] = str(spider_dir)
    try:
        return load_config(config, values)
    except (ValueError, FileNotFoundError) as exc:
        _fail(str(exc))


@train_app.command("sft")
def train_sft(
    config: ConfigOption,
    spider_dir: SpiderDirOption = None,
    resume: ResumeOption = False,
    set_values: SetOption = None,
) -> None:
    """SFT warm-up on oracle trajectories (TRL SFTTrainer); saves <output_dir>/sft/final."""
    from sqlenv.training.sft import run_sft

    settings = _train_config(config, spider_dir, set_values)
    final = run_sft(settings, resume=resume, console=console)
    console.print(f"SFT model saved to [bold]{final}[/] (evaluate it: sqlenv eval --policy {final})")


@train_app.command("grpo")
def train_grpo(
    config: ConfigOption,
    spider_dir: SpiderDirOption = None,
    resume: ResumeOption = False,
    set_values: SetOption = None,
) -> None:
    """GRPO through environment_factory, from the SFT model when the config enables SFT."""
    from sqlenv.training.grpo import run_grpo

    settings = _train_config(config, spider_dir, set_values)
    final = run_grpo(settings, resume=resume, console=console)
    console.print(f"GRPO model saved to [bold]{final}[/] (evaluate it: sqlenv eval --policy {final})")


if __name__ == "__main__":
    app()
