"""Loading a model to train: the tokenizer with a tool-calling chat template TRL knows, and the
model in float32 (the CPU's training type), and whether to autocast it to bfloat16; bfloat16 copies
of its frozen weights for a pass under autocast (`frozen_bf16_weights`).

bf16 autocast pays only where the hardware computes in bfloat16: a GPU that supports it, or a CPU
with AVX-512 BF16 or AMX. Elsewhere PyTorch emulates it, and on this project's 2-core AVX2 machine
an SFT step took 10.7x as long as in float32 (`benchmarks/bench_training.py`). The configs
say `bf16: auto`, which asks the hardware (`resolve_bf16`).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator
from typing import Any

from sqlenv.agents.devices import native_bf16
from sqlenv.agents.local_models import model_source
from sqlenv.training.config import LoRASection

__all__ = [
    "bf16_for",
    "frozen_bf16_weights",
    "load_tokenizer",
    "load_trainable",
    "lora_config",
    "model_source",
    "native_bf16",
    "one_token_id",
    "resolve_bf16",
    "single_token_id",
    "token_rows",
]


def load_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    tokenizer = AutoTokenizer.from_pretrained(model_source(name))
    if getattr(tokenizer, "response_schema", None) is None:
        tokenizer = add_response_schema(tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_trainable(name: str) -> tuple[Any, Any]:
    """(tokenizer, model) for training; the model is a fresh copy in train mode."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(name)
    model = AutoModelForCausalLM.from_pretrained(model_source(name), dtype=torch.float32)
    model.train()
    return tokenizer, model


@contextlib.contextmanager
def frozen_bf16_weights(model: Any) -> Iterator[dict[Any, tuple[Any, Any]]]:
    """Inside the block, `model`'s frozen float32 `nn.Linear` layers compute with bfloat16 copies of
    their weights made once on entry, instead of autocast casting each weight again at every call.

    Under bf16 autocast a linear layer casts its float32 weight (and bias) to bfloat16 on every call,
    and the copy lives as long as the call's autograd graph: with a LoRA model's base frozen, that is
    a pass over all its weights per forward call. The copies made here are the values autocast
    computes (the same rounding), so results are unchanged. The float32 weights stay the model's
    parameters (for merging adapters, saving, the weight sync); the copies are freed on exit, and a
    weight changed inside the block (merging adapters) is not seen: keep the block to one pass.

    Args:
        model: a model (PEFT-wrapped or not); layers whose weight requires grad are left alone.

    Yields:
        {layer: (bfloat16 weight, bfloat16 bias or None)} for the layers switched.

    Raises:
        RuntimeError: a switched layer called outside bf16 autocast (it would compute in bfloat16
            where the caller expects float32).
    """
    import torch

    # PEFT's adapter layers (lora_A, lora_B, ...) are never switched: disabling the adapters (as TRL
    # does to score the reference model) sets their requires_grad to False for a while.
    adapters = {
        id(inner)
        for module in model.modules()
        for name in getattr(module, "adapter_layer_names", ())
        if isinstance(getattr(module, name, None), torch.nn.Module)
        for inner in getattr(module, name).modules()
    }
    switched: dict[Any, tuple[Any, Any]] = {}
    try:
        for module in model.modules():
            weight = getattr(module, "weight", None)
            if type(module) is not torch.nn.Linear or id(module) in adapters:
                continue
            if weight.requires_grad or weight.dtype != torch.float32:
                continue
            bias = None if module.bias is None else module.bias.detach().to(torch.bfloat16)
            switched[module] = (weight.detach().to(torch.bfloat16), bias)
            module.forward = functools.partial(_bf16_linear, *switched[module])
        yield switched
    finally:
        for module in switched:
            del module.forward  # the class's forward again


def _bf16_linear(weight: Any, bias: Any, x: Any) -> Any:
    import torch

    if not (
        torch.is_autocast_enabled(x.device.type) and torch.get_autocast_dtype(x.device.type) == torch.bfloat16
    ):
        raise RuntimeError(
            "frozen_bf16_weights: a layer with bfloat16 weights was called outside bf16 autocast"
        )
    return torch.nn.functional.linear(x, weight, bias)


def single_token_id(tokenizer: Any, token: str) -> int:
    """The id of `token`, which must be one token of `tokenizer`'s vocabulary.

    Args:
        tokenizer: the model's tokenizer.
        token: the token's text, e.g. `<tool_call>`.

    Returns:
        Its id.

    Raises:
        ValueError: the text is several tokens (or none) for this tokenizer.
    """
    token_id = one_token_id(tokenizer, token)
    if token_id is None:
        count = len(tokenizer.encode(token, add_special_tokens=False))
        raise ValueError(
            f"lora.trainable_tokens: {token!r} is {count} tokens for this tokenizer, not one; only a "
            "single token's rows can be trained (a multi-token text is learnt by the adapters)"
        )
    return token_id


def one_token_id(tokenizer: Any, token: str) -> int | None:
    """The id of `token` where it is one token of `tokenizer`'s vocabulary.

    Args:
        tokenizer: the model's tokenizer.
        token: the token's text.

    Returns:
        Its id, or None where the tokenizer spells it in several tokens (or none).
    """
    ids = tokenizer.encode(token, add_special_tokens=False)
    return int(ids[0]) if len(ids) == 1 else None


# peft keeps the trained rows of `trainable_token_indices` in parameters with this in their name.
TOKEN_ROWS_PARAMETER = "trainable_tokens_delta"


def token_rows(model: Any) -> dict[str, Any]:
    """The trainable token-row parameters of a peft model (empty where it has none).

    Args:
        model: a model, peft-wrapped or not.

    Returns:
        {parameter name: parameter} for each of peft's token-row deltas that requires grad.
    """
    return {
        name: p for name, p in model.named_parameters() if TOKEN_ROWS_PARAMETER in name and p.requires_grad
    }


def lora_config(section: LoRASection, tokenizer: Any = None) -> Any:
    """The peft `LoraConfig` for a config's `lora` section, or None when it is not enabled.

    Args:
        section: the `sft.lora` or `grpo.lora` section.
        tokenizer: the model's tokenizer; needed when the section names `trainable_tokens`.

    Returns:
        A `peft.LoraConfig` for a causal language model, or None. With `trainable_tokens`, those
        tokens' rows of the input embedding and of the output layer are trained too (peft's
        `trainable_token_indices`; for a model whose output layer is tied to the embedding, peft
        trains the shared rows once).
    """
    if not section.enabled:
        return None
    from peft import LoraConfig

    token_rows = None
    if section.trainable_tokens:
        if tokenizer is None:
            raise ValueError("lora.trainable_tokens: the tokenizer is needed to find the tokens' ids")
        ids = [single_token_id(tokenizer, token) for token in section.trainable_tokens]
        token_rows = {"embed_tokens": ids, "lm_head": ids}
    return LoraConfig(
        r=section.r,
        lora_alpha=section.alpha,
        lora_dropout=section.dropout,
        target_modules=section.target_modules,
        trainable_token_indices=token_rows,
        task_type="CAUSAL_LM",
    )


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_bf16(setting: bool | str, native: bool, device: str, where: str) -> bool:
    """The bf16 flag to give the trainer for a config's `bf16` setting (true, false or "auto").
    "auto" follows the hardware; an explicit true on hardware that would emulate bfloat16 is kept
    (the user asked for it) with a warning, because it makes training many times slower."""
    if setting == "auto":
        return native
    if setting and not native:
        warnings.warn(
            f"{where}.bf16 is true, but this {device} has no native bfloat16: PyTorch emulates it, "
            "which makes training many times slower than float32. Use bf16: auto or false.",
            stacklevel=2,
        )
    return bool(setting)


def bf16_for(setting: bool | str, where: str, console: Any = None) -> bool:
    """`resolve_bf16` on this machine's training device, saying the outcome on `console`."""
    native, device = native_bf16()
    bf16 = resolve_bf16(setting, native, device, where)
    if console is not None:
        support = "computes" if native else "has no native"
        console.print(
            f"{where}: bf16 autocast {'on' if bf16 else 'off'} ({where}.bf16: {str(setting).lower()}; "
            f"this {device} {support} bfloat16)"
        )
    return bf16


def set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def progress_callbacks() -> list[Any]:
    """TRL's rich progress display in a terminal; none inside Jupyter, where a live terminal
    display does not belong (the notebooks show the plots instead)."""
    from rich import get_console
    from trl.trainer.callbacks import RichProgressCallback

    return [] if get_console().is_jupyter else [RichProgressCallback()]
