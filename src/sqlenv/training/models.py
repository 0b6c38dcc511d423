"""Loading a model to train: the tokenizer with a tool-calling chat template TRL knows, and the
model in float32 (the CPU's training type; bf16 autocast is a config option)."""

from __future__ import annotations

from typing import Any


def model_source(name: str) -> str:
    """A loadable directory or hub id for a preset, a directory or a hub id."""
    from sqlenv.llm_policy import SMOLLM2_PRESET, smollm2_checkpoint

    return str(smollm2_checkpoint()) if name == SMOLLM2_PRESET else name


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


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


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
