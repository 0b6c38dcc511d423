"""Batched generation across episodes, for LLM policies played by parallel worker threads.

On a CPU, decoding one token of one sequence leaves the cores mostly idle (a 135M model's decode
step is bound by memory traffic and Python overhead): 16 sequences decode about ten times more
tokens per second in one batch than one at a time. With `--parallel N`, each worker thread plays
its own episode with its own `LLMPolicy` clone; the clones share one `GenerationBatcher`, which
gathers the replies the threads are waiting for and decodes them together (`decode_batch`).

Each sequence keeps its own key/value cache between turns (a batch of one, cut by the policy to
the prefix its next prompt shares with it). For a batch, the new prompt tokens of each sequence
are encoded on its own cache (prefill is compute-bound: batching it would gain little and cost
padding), then the caches are left-padded into one batched cache, decoded in lock step with an
attention mask over the padding, and split back. Rows that finish leave the batch as it goes.

Greedy decoding picks the same tokens as one sequence at a time, up to floating-point differences
of the padded attention (which can flip a near-tie). Sampling draws from one generator per
sequence, seeded by the policy, so it does not depend on the other rows.

Everything runs on the model's device (a GPU as well as the CPU).
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_BATCH = 16
# How long a batch waits for more requests after the latest one arrived. Worker threads come
# back within milliseconds of a batch (parse, environment step, chat template), later on a loaded
# machine; a batch decodes for seconds, so waiting a little longer costs little.
DEFAULT_GATHER_S = 0.2


@dataclass
class GenerationRequest:
    """One sequence to continue: its whole prompt, and its cache (covering a prefix of it)."""

    prompt_ids: list[int]
    cache: Any  # a transformers DynamicCache holding prompt_ids[:cache length], or None
    max_new_tokens: int
    greedy: bool = True
    temperature: float = 0.7
    seed: int = 0
    # Ask for each new token's sampling log-probability (training's rollouts do; the vLLM engine
    # reports them, after temperature, as TRL's colocated engine does).
    logprobs: bool = False


@dataclass
class GenerationResult:
    new_ids: list[int]  # the generated tokens, the stop token included when one was reached
    cache: Any  # a batch-of-one DynamicCache holding cached_ids
    cached_ids: list[int]
    encoded_tokens: int  # prompt tokens run through the model (the rest came from the cache)
    logprobs: list[float] | None = None  # per new token, when asked for and the engine reports them


def _choose(logits: Any, request: GenerationRequest, generator: Any) -> int:
    import torch

    if request.greedy:
        return int(logits.argmax(-1))
    probs = torch.softmax(logits.float() / max(request.temperature, 1e-5), dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def _row_cache(batched: Any, row: int, start: int, end: int) -> Any:
    """Positions [start, end) of one row of a batched cache, as its own batch-of-one cache."""
    from transformers import DynamicCache

    single = DynamicCache()
    for index, layer in enumerate(batched.layers):
        single.update(
            layer.keys[row : row + 1, :, start:end].clone(),
            layer.values[row : row + 1, :, start:end].clone(),
            index,
        )
    return single


def _static_cache(model: Any, keys: list[Any], values: list[Any], capacity: int) -> Any:
    """A StaticCache of `capacity` positions whose first ones hold `keys`/`values` (per layer)."""
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=capacity)
    for index, (layer_keys, layer_values) in enumerate(zip(keys, values, strict=True)):
        cache.update(layer_keys, layer_values, index)
    return cache


def decode_batch(model: Any, requests: list[GenerationRequest], stop_ids: set[int]) -> list[GenerationResult]:
    """Continue every request's prompt until a stop token or its token budget (module docstring)."""
    import torch
    import torch.nn.functional as F
    from transformers import DynamicCache

    count = len(requests)
    device = model.device
    generators = []
    caches = []
    generated: list[list[int]] = []
    encoded = []
    with torch.no_grad():
        # 1. Prefill: each row's uncached prompt tokens on its own cache.
        for request in requests:
            cache = request.cache if request.cache is not None else DynamicCache()
            reused = cache.get_seq_length()
            if not 0 <= reused < len(request.prompt_ids):
                raise ValueError(
                    f"the cache holds {reused} tokens of a {len(request.prompt_ids)}-token prompt"
                )
            new = torch.tensor([request.prompt_ids[reused:]], device=device)
            output = model(input_ids=new, cache=cache, use_cache=True, logits_to_keep=1)
            generator = None
            if not request.greedy:
                generator = torch.Generator(device=device).manual_seed(request.seed)
            generators.append(generator)
            caches.append(cache)
            encoded.append(len(request.prompt_ids) - reused)
            generated.append([_choose(output.logits[0, -1], request, generator)])

        results: list[GenerationResult | None] = [None] * count
        lengths = [len(r.prompt_ids) for r in requests]
        width = max(lengths)  # the batched cache's prompt part, rows left-padded to it

        def finished(i: int) -> bool:
            return generated[i][-1] in stop_ids or len(generated[i]) >= requests[i].max_new_tokens

        def settle(i: int, cache: Any) -> None:
            fed = generated[i][:-1]  # the last token was chosen but never run through the model
            results[i] = GenerationResult(generated[i], cache, requests[i].prompt_ids + fed, encoded[i])

        rows = [i for i in range(count) if not finished(i)]
        for i in range(count):
            if finished(i):
                settle(i, caches[i])
        if not rows:
            return [r for r in results if r is not None]

        # 2. One batched cache, left-padded; the mask hides the padding. A static cache sized for
        # the whole decode is written in place; a dynamic one would be copied at every token.
        capacity = width + max(requests[i].max_new_tokens for i in rows)
        layers = len(caches[rows[0]].layers)

        def left_padded(layer: int, part: str) -> Any:  # part: "keys" or "values"
            rows_of_layer = [getattr(caches[i].layers[layer], part) for i in rows]
            return torch.cat(
                [F.pad(t, (0, 0, width - lengths[i], 0)) for t, i in zip(rows_of_layer, rows, strict=True)]
            )

        batched = _static_cache(
            model,
            [left_padded(n, "keys") for n in range(layers)],
            [left_padded(n, "values") for n in range(layers)],
            capacity,
        )
        mask = torch.zeros(len(rows), width, dtype=torch.long, device=device)
        for position, i in enumerate(rows):
            mask[position, width - lengths[i] :] = 1

        # 3. Decode in lock step. A finished row's cache is split off at once; finished rows
        # leave the batch once they are a quarter of it.
        done: set[int] = set()
        while len(done) < len(rows):
            if len(done) >= max(1, len(rows) // 4):
                keep = [p for p, i in enumerate(rows) if i not in done]
                fill = mask.shape[1]
                batched = _static_cache(
                    model,
                    [layer.keys[keep, :, :fill] for layer in batched.layers],
                    [layer.values[keep, :, :fill] for layer in batched.layers],
                    capacity,
                )
                mask = mask[keep]
                rows = [rows[p] for p in keep]
                done = set()
            tokens = torch.tensor([[generated[i][-1]] for i in rows], device=device)
            positions = torch.tensor([[lengths[i] + len(generated[i]) - 1] for i in rows], device=device)
            mask = torch.cat([mask, torch.ones(len(rows), 1, dtype=torch.long, device=device)], dim=1)
            output = model(
                input_ids=tokens,
                attention_mask=mask,
                position_ids=positions,
                cache=batched,
                use_cache=True,
            )
            for position, i in enumerate(rows):
                if i in done:
                    continue
                generated[i].append(_choose(output.logits[position, -1], requests[i], generators[i]))
                if finished(i):
                    done.add(i)
                    # This row's real positions: its prompt, then the tokens it fed so far.
                    start = width - lengths[i]
                    settle(i, _row_cache(batched, position, start, width + len(generated[i]) - 1))
    return [r for r in results if r is not None]


@dataclass
class _Slot:
    request: GenerationRequest
    result: GenerationResult | None = None
    error: BaseException | None = None
    arrived: float = field(default_factory=time.monotonic)


_M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
_MMAP_THRESHOLD_BYTES = 256 * 1024


@functools.cache  # a process-wide setting: once is enough, however many batchers are made
def _return_large_frees_to_the_os() -> None:
    """Serve allocations over 256 KiB with mmap, so freeing them returns the memory at once.

    Batches run on whichever worker thread gathers them, and glibc gives each thread its own heap:
    the per-batch caches (tens of MB, a different size every batch) then fragment many heaps, and
    a 16-thread evaluation grew past 20 GB of resident memory. Fixed-threshold mmap avoids that.
    A no-op where the C library is not glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = getattr(libc, "mallopt", None)
        if mallopt is not None:
            mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    except OSError:
        pass


class GenerationBatcher:
    """Gathers `generate()` calls from many threads and decodes them together.

    A waiting thread becomes the batch's runner once `max_batch` requests are pending or no new
    one has arrived for `gather_s`; the others wait for their result. One batch runs at a time."""

    def __init__(
        self,
        model: Any,
        stop_ids: set[int],
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        gather_s: float = DEFAULT_GATHER_S,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        _return_large_frees_to_the_os()
        self.model = model
        self.stop_ids = set(stop_ids)
        self.max_batch = max_batch
        self.gather_s = gather_s
        self.batches = 0  # decoded so far (benchmarks and tests read them)
        self.batched_requests = 0
        self._pending: list[_Slot] = []
        self._running = False
        self._condition = threading.Condition()

    def generate(self, request: GenerationRequest) -> GenerationResult:
        slot = _Slot(request)
        with self._condition:
            self._pending.append(slot)
            self._condition.notify_all()
            while slot.result is None and slot.error is None:
                wait = self._gather_wait()
                if wait > 0 or self._running:
                    self._condition.wait(timeout=wait if wait > 0 else None)
                    continue
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
                self._running = True
                self._condition.release()
                try:
                    outcomes: list[GenerationResult] | BaseException = decode_batch(
                        self.model, [s.request for s in batch], self.stop_ids
                    )
                except BaseException as exc:  # every waiting thread of the batch must hear of it
                    outcomes = exc
                finally:
                    self._condition.acquire()
                self._running = False
                self.batches += 1
                self.batched_requests += len(batch)
                for index, pending in enumerate(batch):
                    if isinstance(outcomes, BaseException):
                        pending.error = outcomes
                    else:
                        pending.result = outcomes[index]
                self._condition.notify_all()
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    def _gather_wait(self) -> float:
        """Seconds to wait for more requests before the pending ones run (0: run now)."""
        if not self._pending or len(self._pending) >= self.max_batch:
            return 0.0
        return max(0.0, self._pending[-1].arrived + self.gather_s - time.monotonic())
