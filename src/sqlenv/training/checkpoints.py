"""Which checkpoint a stopped training run continues from (`--resume`).

The Trainer writes a checkpoint folder file by file (adapters, optimizer, random state) and its
`trainer_state.json` last, and picks the highest-numbered `checkpoint-N` folder to resume from
whether or not it was finished. A run killed while saving (the end of a sitting is a kill) would
then fail to resume from the half-written folder, although the previous checkpoint, which the
Trainer only deletes after the new one is complete, is whole. This module picks the newest whole
one, before anything heavy loads.
"""

from __future__ import annotations

import re
from pathlib import Path

# What the Trainer writes last into a checkpoint folder (transformers' TRAINER_STATE_NAME).
FINISHED_MARKER = "trainer_state.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


class NoFinishedCheckpointError(ValueError):
    """`--resume` found no checkpoint whose saving finished (the message says what it found)."""


def checkpoint_folders(run_dir: Path) -> list[Path]:
    """The `checkpoint-N` folders of a run directory, oldest (lowest N) first.

    Args:
        run_dir: the folder a trainer saved its checkpoints in (e.g. `<output_dir>/grpo`).

    Returns:
        The folders, sorted by their step number; empty when there are none or the folder is missing.
    """
    if not run_dir.is_dir():
        return []
    found = [
        (int(match.group(1)), path)
        for path in run_dir.iterdir()
        if path.is_dir() and (match := _CHECKPOINT.match(path.name))
    ]
    return [path for _, path in sorted(found)]


def is_finished(checkpoint: Path) -> bool:
    """Whether the Trainer finished saving this checkpoint folder (its state file is written last)."""
    return (checkpoint / FINISHED_MARKER).is_file()


def resume_checkpoint(run_dir: Path) -> Path:
    """The checkpoint a resumed run continues from: the newest one whose saving finished.

    Args:
        run_dir: the folder a trainer saved its checkpoints in.

    Returns:
        The newest finished `checkpoint-N` folder.

    Raises:
        NoFinishedCheckpointError: there is no finished checkpoint (none at all, or only half-written ones, which
            the message names).
    """
    folders = checkpoint_folders(run_dir)
    finished = [folder for folder in folders if is_finished(folder)]
    if finished:
        return finished[-1]
    if not folders:
        raise NoFinishedCheckpointError(f"--resume: no checkpoint-N folder in {run_dir}; run without --resume to start the run")
    names = ", ".join(folder.name for folder in folders)
    raise NoFinishedCheckpointError(
        f"--resume: no finished checkpoint in {run_dir}: {names} lack {FINISHED_MARKER} (the run stopped "
        "while saving); delete them and run without --resume to start the run again"
    )
