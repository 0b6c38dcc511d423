"""A GRPO run continued on another machine from a published checkpoint or warm-up (`--resume-from NAME`).

A run folder does not outlive the machine it was written on, and a long GRPO run outlives a
working session. `sqlenv models publish RUN --phase grpo --adapter grpo=RUN/grpo/checkpoint-N`
publishes the adapter of step N with the checkpoint's resume state as JSON (`trainer_state.json`:
the step, the log history, the best metric; `scheduler.json`: where the learning-rate schedule
stands; `rng_state*.json`: the random generators), hash-checked like the adapters. This module writes a
run folder back from such a model (`restore_run`): the SFT warm-up's merged model in
`<output_dir>/sft/final` (the published SFT adapter merged into the base exactly as `sqlenv models
fetch` merges it, which `publish`'s final check showed to be the run's own `final/`), its adapter
in `sft/final-adapter`, and `grpo/checkpoint-N` with the GRPO adapter and the resume state in the
Trainer's own files (`scheduler.pt`, `rng_state*.pth`, written back from the JSON), so that
`--resume` continues the run at step N + 1 with the same questions, schedule and random state.
A published SFT warm-up alone restores `sft/` only, and GRPO starts from it at step 1, as after
`sqlenv train sft` on this machine.

An adapter published in bfloat16 (the 1.5B's, whose float32 file is over the size a published
file may have) continues the run from its adapter rounded to bfloat16, a relative change below
2^-8 per weight; the manifest says which dtype it is.

The optimiser's moments are not carried: they are twice the adapter's size, and a published
folder holds adapters, not training state. The resumed run starts AdamW afresh, its moments
re-estimated over the first steps as at a run's start; the transformers Trainer loads a
checkpoint's scheduler only beside its optimiser, so `ScheduleFromCheckpoint` puts the schedule
back in place of the fresh one (otherwise the learning rate would restart at its first value).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from sqlenv.agents.published_models import (
    ADAPTER_FILES,
    FINAL_ADAPTER,
    PublishedModel,
    PublishedModelError,
    merge_phases,
    save_with_tokenizer,
    verify_files,
)
from sqlenv.agents.resume_state import ResumeStateError, restore_resume_state
from sqlenv.training.checkpoints import FINISHED_MARKER, checkpoint_folders
from sqlenv.training.config import TrainConfig, load_config

__all__ = ["OPTIMIZER_FILE", "SCHEDULER_FILE", "ScheduleFromCheckpoint", "restore_run", "schedule_callback"]

# transformers' names for a checkpoint's optimiser and scheduler states (OPTIMIZER_NAME, SCHEDULER_NAME).
OPTIMIZER_FILE = "optimizer.pt"
SCHEDULER_FILE = "scheduler.pt"
# What a published run must have trained with to be continued by this config: everything that
# decides what the next steps compute. Paths (output_dir, spider_dir), threads and the live
# plots may differ between machines.
_SAME_SETTINGS = ("model", "dataset", "seed", "answer_mode", "show_schema", "solved_examples", "sft", "grpo")


def restore_run(model: PublishedModel, config: TrainConfig) -> Path | None:
    """Write the run folder of `config` from a published model: a GRPO checkpoint, ready for
    `--resume`, or an SFT warm-up, ready for GRPO's first step.

    Args:
        model: a published model whose last phase is GRPO, published from a `checkpoint-N` folder
            (it carries that checkpoint's resume state), or an SFT warm-up alone.
        config: the training config of the run to continue: the published run's settings, any
            output folder.

    Returns:
        The restored `checkpoint-N` folder; None for a warm-up (GRPO starts at step 1).

    Raises:
        PublishedModelError: a GRPO model without resume state, a file that fails its hash, a base,
            phases or training settings other than the config's, or a run folder that already
            holds a checkpoint or an SFT model (continue that with `--resume`).
    """
    verify_files(model)
    last = model.phases[-1]
    resume = last.get("resume")
    if last["phase"] == "sft":
        _check_same_run(model, config, warm_up_only=True)
    elif not resume:
        raise PublishedModelError(
            f"{model.name} carries no GRPO checkpoint's resume state: it was published from a finished "
            "run (final-adapter), not from a checkpoint-N folder, so there is no step to continue from"
        )
    else:
        _check_same_run(model, config)
    grpo_dir, sft_final = config.grpo_dir, config.sft_dir / "final"
    if checkpoint_folders(grpo_dir):
        raise PublishedModelError(
            f"{grpo_dir} already holds checkpoints: continue it with --resume, or restore into another "
            "output_dir (--set output_dir=...)"
        )
    phases = [p["phase"] for p in model.phases]
    if "sft" in phases and sft_final.exists():
        raise PublishedModelError(
            f"{sft_final} exists: restoring would replace the run's SFT model; restore into another "
            "output_dir (--set output_dir=...)"
        )
    if "sft" in phases:
        _restore_sft(model, config)
    if last["phase"] == "sft":
        return None
    steps = int(json.loads((model.folder / last["folder"] / "resume" / FINISHED_MARKER).read_text())["global_step"])
    checkpoint = grpo_dir / f"checkpoint-{steps}"
    staging = grpo_dir / f".checkpoint-{steps}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ADAPTER_FILES:
        shutil.copyfile(model.folder / last["folder"] / name, staging / name)
    try:  # the marker (trainer_state.json) is written last, as the Trainer writes it
        restore_resume_state(model.folder / last["folder"] / "resume", list(resume), staging)
    except ResumeStateError as error:
        raise PublishedModelError(f"{model.name}: {error}") from None
    staging.rename(checkpoint)
    _restore_kept_points(config)
    return checkpoint


def _check_same_run(model: PublishedModel, config: TrainConfig, warm_up_only: bool = False) -> None:
    """Refuse a config whose training settings differ from the published run's, naming them (for
    a warm-up, the settings that decided it: GRPO's may have changed since)."""
    published_config = model.folder / "train-config.yaml"
    if not published_config.is_file():
        raise PublishedModelError(f"{model.name} has no train-config.yaml: its run's settings are unknown")
    theirs = asdict(load_config(published_config))
    ours = asdict(config)
    keys = [key for key in _SAME_SETTINGS if not (warm_up_only and key == "grpo")]
    differ = [key for key in keys if theirs[key] != ours[key]]
    if differ:
        detail = "; ".join(f"{key}: published {theirs[key]!r}, here {ours[key]!r}" for key in differ)
        raise PublishedModelError(
            f"{model.name} was trained with other settings than this config ({detail}): continuing it "
            "would not be the same run"
        )
    if config.grpo_init() not in (config.model, str(config.sft_dir / "final")):
        raise PublishedModelError(
            f"grpo.init_from {config.grpo_init()!r}: a run is restored from the base model or its SFT warm-up"
        )
    expected = ["grpo"] if config.grpo_init() == config.model else ["sft", "grpo"]
    if warm_up_only:
        expected = ["sft"]
        if config.grpo_init() == config.model:
            raise PublishedModelError(
                f"{model.name} is an SFT warm-up and this config's GRPO starts from the base model"
            )
    if [p["phase"] for p in model.phases] != expected:
        raise PublishedModelError(
            f"{model.name} carries the phases {[p['phase'] for p in model.phases]}, this config's GRPO "
            f"starts from {config.grpo_init()} ({expected})"
        )


def _restore_sft(model: PublishedModel, config: TrainConfig) -> None:
    """The SFT warm-up's merged model and adapter into `<output_dir>/sft`, as the run left them."""
    sft = model.phases[0]
    final = config.sft_dir / "final"
    staging = final.with_name(".final.partial")
    shutil.rmtree(staging, ignore_errors=True)
    save_with_tokenizer(model, merge_phases(model, 1), staging)
    adapter = config.sft_dir / FINAL_ADAPTER
    if not adapter.exists():
        shutil.copytree(model.folder / sft["folder"], adapter)
    staging.rename(final)


def _restore_kept_points(config: TrainConfig) -> None:
    """The held-out and diagnostics points kept in `live.keep_points_in` back into the run's live
    folder, where a resumed run reads the points measured before its checkpoint."""
    kept = config.live.keep_points_in
    if not kept:
        return
    live = config.grpo_dir / "live"
    for name in ("heldout.json", "diagnostics.json"):
        source = Path(kept) / name
        if source.is_file() and not (live / name).exists():
            live.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, live / name)


class ScheduleFromCheckpoint(TrainerCallback):
    """Puts a checkpoint's learning-rate schedule in place when its optimiser state is absent.

    transformers loads `scheduler.pt` only where `optimizer.pt` is there too; a published checkpoint
    carries the first and not the second. At the start of training (after the Trainer has built its
    fresh optimiser and schedule and read the checkpoint), this loads the schedule and sets each
    parameter group's learning rate to the schedule's current one.
    """

    def __init__(self, checkpoint: Path) -> None:
        self.checkpoint = Path(checkpoint)
        self.loaded_step: int | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        import torch

        scheduler, optimizer = kwargs.get("lr_scheduler"), kwargs.get("optimizer")
        if scheduler is None or optimizer is None:
            raise RuntimeError(
                "the Trainer passed no lr_scheduler/optimizer to on_train_begin: the learning-rate "
                "schedule of the resumed checkpoint cannot be put back (a transformers change)"
            )
        scheduler.load_state_dict(torch.load(self.checkpoint / SCHEDULER_FILE, weights_only=True))
        if scheduler.last_epoch != state.global_step:
            raise RuntimeError(
                f"{self.checkpoint / SCHEDULER_FILE} stands at step {scheduler.last_epoch}, the checkpoint "
                f"at {state.global_step}"
            )
        for group, rate in zip(optimizer.param_groups, scheduler.get_last_lr(), strict=True):
            group["lr"] = rate
        self.loaded_step = scheduler.last_epoch


def schedule_callback(checkpoint: Path | None) -> Any:
    """The callback a resumed run needs for its learning-rate schedule, or None.

    Args:
        checkpoint: the checkpoint the run resumes from (None: a new run).

    Returns:
        A `TrainerCallback` (`ScheduleFromCheckpoint`) where the checkpoint has a schedule and no
        optimiser state; None where the Trainer loads both itself, or there is no checkpoint.
    """
    if checkpoint is None:
        return None
    checkpoint = Path(checkpoint)
    if (checkpoint / OPTIMIZER_FILE).is_file() or not (checkpoint / SCHEDULER_FILE).is_file():
        return None
    return ScheduleFromCheckpoint(checkpoint)
