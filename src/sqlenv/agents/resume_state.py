"""A training checkpoint's resume state as plain JSON, for a published folder, and back.

The transformers Trainer keeps what a run needs to continue beside each checkpoint's adapter:
`trainer_state.json` (the step, the log history), `scheduler.pt` (where the learning-rate schedule
stands) and `rng_state.pth` (`rng_state_N.pth` per process: the Python, NumPy and torch random
generators). The last two are pickle-format torch files. A published folder is read by people and
kept in a repository, so it holds them as JSON instead (`scheduler.json`, `rng_state.json`): text
that anyone can read and that carries no code. `publish_resume_state` converts a checkpoint's
files and checks that the JSON reads back to exactly what the Trainer wrote;
`restore_resume_state` writes the Trainer's own files back from it, so that `--resume` reads
what it always reads.

The JSON holds the values as they are, with a tag where JSON has no such type: a tuple is
`{"tuple": [...]}` (Python's `random.setstate` takes nothing else), a torch tensor
`{"tensor": dtype, "shape": [...], "data": [...]}`, a NumPy array `{"ndarray": dtype, "shape": ...,
"data": ...}`. Anything else (an object a library might one day put there) is refused by name
rather than guessed at.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "CHECKPOINT_RESUME_PATTERN",
    "PUBLISHED_RESUME_PATTERN",
    "REQUIRED_RESUME_FILES",
    "ResumeStateError",
    "from_json",
    "publish_resume_state",
    "restore_resume_state",
    "to_json",
]

# The Trainer's names in a checkpoint-N folder, and the published names they become.
CHECKPOINT_RESUME_PATTERN = re.compile(r"^(trainer_state\.json|scheduler\.pt|rng_state(_\d+)?\.pth)$")
PUBLISHED_RESUME_PATTERN = re.compile(r"^(trainer_state|scheduler|rng_state(_\d+)?)\.json$")
# Without these a checkpoint cannot be continued where it stopped (the random state is optional:
# a run on several processes names one file per process).
REQUIRED_RESUME_FILES = ("trainer_state.json", "scheduler.pt")
# The key sets of the tagged values: `from_json` reads a dict with one of them as that value, so
# `to_json` refuses a plain dict that has one.
_TUPLE_KEYS = frozenset({"tuple"})
_TENSOR_KEYS = frozenset({"tensor", "shape", "data"})
_ARRAY_KEYS = frozenset({"ndarray", "shape", "data"})
_TAGGED_KEY_SETS = (_TUPLE_KEYS, _TENSOR_KEYS, _ARRAY_KEYS)


class ResumeStateError(ValueError):
    """A checkpoint's resume state cannot be converted to JSON or back."""


def published_name(checkpoint_name: str) -> str:
    """The published name of a checkpoint's resume file (`scheduler.pt` -> `scheduler.json`).

    Args:
        checkpoint_name: a name `CHECKPOINT_RESUME_PATTERN` matches.

    Returns:
        The name it has in a published folder.
    """
    return (
        checkpoint_name if checkpoint_name.endswith(".json") else checkpoint_name.rsplit(".", 1)[0] + ".json"
    )


def checkpoint_name(published: str) -> str:
    """The Trainer's name of a published resume file (`rng_state_1.json` -> `rng_state_1.pth`).

    Args:
        published: a name `PUBLISHED_RESUME_PATTERN` matches.

    Returns:
        The name the Trainer reads in a checkpoint folder.
    """
    stem = published.removesuffix(".json")
    if stem == "trainer_state":
        return published
    return f"{stem}.pt" if stem == "scheduler" else f"{stem}.pth"


def to_json(value: Any, where: str = "state") -> Any:
    """A resume-state value as JSON-ready data (tuples, tensors and arrays tagged).

    Args:
        value: what `torch.load` returned for a scheduler or random-state file.
        where: the value's path, for the error message.

    Returns:
        Data `json.dumps` writes as is.

    Raises:
        ResumeStateError: a value of a type this format does not hold, or a dict key that is not a
            string.
    """
    import numpy as np
    import torch

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple):
        return {"tuple": [to_json(item, f"{where}[{i}]") for i, item in enumerate(value)]}
    if isinstance(value, list):
        return [to_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise ResumeStateError(f"{where} has a key that is not a string: {list(value)!r}")
        if set(value) in _TAGGED_KEY_SETS:
            raise ResumeStateError(
                f"{where} is a dict whose keys {sorted(value)} are those of a tagged value"
            )
        return {key: to_json(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        return {"tensor": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
                "data": tensor.flatten().tolist()}  # fmt: skip
    if isinstance(value, np.ndarray):
        return {"ndarray": str(value.dtype), "shape": list(value.shape), "data": value.flatten().tolist()}
    if isinstance(value, np.integer | np.floating):
        return value.item()
    raise ResumeStateError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which a published resume state does not hold"
    )


def from_json(data: Any) -> Any:
    """The resume-state value that `to_json` wrote.

    Args:
        data: what `json.loads` returned.

    Returns:
        The value, with its tuples, tensors and arrays.

    Raises:
        ResumeStateError: a tensor or array of an unknown dtype, or data that does not fit its shape.
    """
    import numpy as np
    import torch

    if isinstance(data, list):
        return [from_json(item) for item in data]
    if not isinstance(data, dict):
        return data
    if set(data) == _TUPLE_KEYS:
        return tuple(from_json(item) for item in data["tuple"])
    if set(data) == _TENSOR_KEYS:
        dtype = getattr(torch, str(data["tensor"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ResumeStateError(f"unknown tensor dtype {data['tensor']!r}")
        try:
            return torch.tensor(data["data"], dtype=dtype).reshape(data["shape"])
        except (RuntimeError, TypeError) as error:
            raise ResumeStateError(f"a {data['tensor']} tensor of shape {data['shape']}: {error}") from None
    if set(data) == _ARRAY_KEYS:
        try:
            return np.asarray(data["data"], dtype=np.dtype(data["ndarray"])).reshape(data["shape"])
        except (TypeError, ValueError) as error:
            raise ResumeStateError(f"a {data['ndarray']} array of shape {data['shape']}: {error}") from None
    return {key: from_json(item) for key, item in data.items()}


def _same(a: Any, b: Any) -> bool:
    """Whether two resume-state values are equal, types included (tensors and arrays by value)."""
    import numpy as np
    import torch

    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    return a == b or (isinstance(a, float) and a != a and b != b)  # NaN equals NaN here


def _load_checkpoint_file(path: Path) -> Any:
    """A scheduler or random-state file read as the Trainer reads it: `torch.load(weights_only=True)`
    under transformers' allow-list of the NumPy types a random state holds."""
    import torch
    from transformers.trainer_pt_utils import safe_globals

    with safe_globals():
        return torch.load(path, weights_only=True)


def publish_resume_state(checkpoint: Path, target: Path) -> list[str]:
    """Write a checkpoint's resume state into `target` as JSON.

    Args:
        checkpoint: a Trainer's `checkpoint-N` folder.
        target: the published phase's `resume/` folder (created).

    Returns:
        The published names written, sorted.

    Raises:
        ResumeStateError: the folder lacks `trainer_state.json` or `scheduler.pt` (not a whole
            checkpoint), a file holds what JSON cannot carry, or its JSON does not read back to
            exactly what the file held.
    """
    names = sorted(
        p.name for p in checkpoint.iterdir() if p.is_file() and CHECKPOINT_RESUME_PATTERN.match(p.name)
    )
    for required in REQUIRED_RESUME_FILES:
        if required not in names:
            raise ResumeStateError(
                f"{checkpoint} has no {required}: not a whole checkpoint whose run can be continued"
            )
    target.mkdir(parents=True)
    for name in names:
        if name.endswith(".json"):
            shutil.copyfile(checkpoint / name, target / name)
            continue
        value = _load_checkpoint_file(checkpoint / name)
        text = json.dumps(to_json(value, name), indent=1)
        if not _same(from_json(json.loads(text)), value):
            raise ResumeStateError(f"{checkpoint / name} does not read back from JSON as it was")
        (target / published_name(name)).write_text(text + "\n", encoding="utf-8")
    return sorted(published_name(name) for name in names)


def restore_resume_state(folder: Path, names: list[str], target: Path) -> None:
    """Write the Trainer's resume files into a checkpoint folder from their published JSON.

    Args:
        folder: the published phase's `resume/` folder (its files already hash-checked).
        names: the published names to restore (the manifest's `resume` list).
        target: the `checkpoint-N` folder being written; `trainer_state.json` is written last, as
            the Trainer writes it, so a checkpoint is whole once it is there.

    Raises:
        ResumeStateError: a name that is not a published resume file, or JSON that is not one.
    """
    import torch

    for name in sorted(names, key=lambda n: n == "trainer_state.json"):
        if not PUBLISHED_RESUME_PATTERN.match(name):
            raise ResumeStateError(f"{name!r} is not a published resume file")
        if name == "trainer_state.json":
            shutil.copyfile(folder / name, target / name)
            continue
        try:
            value = from_json(json.loads((folder / name).read_text(encoding="utf-8")))
        except json.JSONDecodeError as error:
            raise ResumeStateError(f"{folder / name} is not JSON: {error}") from None
        torch.save(value, target / checkpoint_name(name))
