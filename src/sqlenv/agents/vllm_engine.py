"""`VLLMEngine`: vLLM's engine in this process, continuing the token sequences of many threads.

Parallel episodes (`sqlenv eval --parallel N`) each wait for their next reply on their own thread.
Each `generate()` call hands its request to one driver thread, which adds it to vLLM's engine and
steps the engine while any request is unfinished: a request that arrives while others decode
joins the batch at the next step (continuous batching), and the prompt blocks an episode shares
with its previous turn, or with other episodes (the system message and tools), come from vLLM's
prefix cache instead of being encoded again. Requests and outputs are token ids: the policy
renders the chat template and parses replies itself, exactly as with the transformers engine.

The engine runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so one model serves every
thread and TRL's colocated trainer can share it (`VLLMEngine(trainer.llm, ...)`). On a CPU,
`configure_vllm_environment()` gives the model every core this process may use (vLLM otherwise
keeps one for its front end, which an in-process engine does not need) and a key/value cache of
`VLLM_CPU_KVCACHE_SPACE` GiB (default here 2: 16 episodes of 2,048 tokens of Qwen2.5-0.5B need
0.4 GiB). Each is only a default: a variable already set wins.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from concurrent.futures import Future
from typing import Any

from sqlenv.agents.batched_generation import GenerationRequest, GenerationResult
from sqlenv.settings import vllm_eager_from_environment

__all__ = ["VLLMEngine", "configure_vllm_environment", "shared_vllm_engine"]

DEFAULT_CPU_KVCACHE_GIB = 2


def _core_list() -> str:
    """The cores this process may run on, in vLLM's binding syntax (`0-1`, or `0,2,5`)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(core) for core in cores)


def configure_vllm_environment() -> None:
    """Set vLLM's environment defaults for an in-process engine (module docstring); call before
    vLLM is imported. Variables already set are left as they are."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", _core_list())
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(DEFAULT_CPU_KVCACHE_GIB))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


_STOP = object()  # tells the driver thread to end


class VLLMEngine:
    """Continues token sequences for many threads on one vLLM engine (module docstring)."""

    def __init__(self, llm: Any, stop_ids: set[int]) -> None:
        """
        Args:
            llm: a `vllm.LLM` (this engine's own, or TRL's colocated one).
            stop_ids: the token ids that end a reply (kept in the reply, as transformers does).
        """
        self.llm = llm
        self.stop_ids = sorted(stop_ids)
        self.requests = 0  # finished so far (benchmarks read them)
        self.steps = 0
        self._incoming: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._waiting: dict[str, tuple[GenerationRequest, Future[GenerationResult]]] = {}
        self._ids = itertools.count()
        self._start_lock = threading.Lock()
        self._driver: threading.Thread | None = None

    @classmethod
    def load(
        cls,
        model_dir: str,
        stop_ids: set[int],
        *,
        dtype: str,
        max_model_len: int,
        seed: int = 0,
        enforce_eager: bool | None = None,
    ) -> VLLMEngine:
        """Start vLLM on a local checkpoint.

        Args:
            model_dir: a transformers checkpoint directory.
            stop_ids: the token ids that end a reply.
            dtype: `bfloat16` or `float32` (`sqlenv.agents.devices.native_bf16` decides).
            max_model_len: the longest prompt plus reply a request may have.
            seed: vLLM's seed (sampled requests carry their own seeds too).
            enforce_eager: skip vLLM's graph compilation (starts faster, can decode slower);
                None: as $SQLENV_VLLM_EAGER says (default no).

        Returns:
            The engine; its driver thread starts with the first request.
        """
        configure_vllm_environment()
        from vllm import LLM

        if enforce_eager is None:
            enforce_eager = vllm_eager_from_environment()
        llm = LLM(
            model=model_dir,
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
            enforce_eager=enforce_eager,
            skip_tokenizer_init=True,  # requests and replies are token ids: the policy owns the tokenizer
            enable_prefix_caching=True,
            # Log-probabilities (when a request asks) after temperature, as sampled: TRL's own
            # colocated engine reports them so, and training compares them with the trainer's.
            logprobs_mode="processed_logprobs",
        )
        return cls(llm, stop_ids)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Continue one prompt; blocks until its reply is done (`ReplyGenerator`).

        Args:
            request: the prompt's token ids and sampling settings (`cache` is ignored: vLLM's
                prefix cache finds shared blocks itself).

        Returns:
            The reply's token ids, the stop token included, and the prompt tokens vLLM computed
            (the rest came from its prefix cache).
        """
        future: Future[GenerationResult] = Future()
        self._ensure_driver()
        self._incoming.put((request, future))
        return future.result()

    def close(self) -> None:
        """Stop the driver thread (requests still waiting fail). The vLLM engine stays usable."""
        driver = self._driver
        if driver is not None:
            self._incoming.put(_STOP)
            driver.join()
            self._driver = None

    # ---- the driver thread -------------------------------------------------------------------

    def _ensure_driver(self) -> None:
        with self._start_lock:
            if self._driver is None or not self._driver.is_alive():
                self._driver = threading.Thread(target=self._drive, name="sqlenv-vllm-driver", daemon=True)
                self._driver.start()

    def _sampling_params(self, request: GenerationRequest) -> Any:
        from vllm import SamplingParams

        return SamplingParams(
            max_tokens=request.max_new_tokens,
            temperature=0.0 if request.greedy else request.temperature,
            seed=None if request.greedy else request.seed,
            stop_token_ids=self.stop_ids,
            detokenize=False,
            skip_special_tokens=False,
            logprobs=0 if request.logprobs else None,  # 0: the sampled token's alone
        )

    def _admit(self, item: Any) -> bool:
        """Add one incoming request to the engine; False for the stop signal."""
        if item is _STOP:
            return False
        request, future = item
        request_id = str(next(self._ids))
        try:
            self.llm.llm_engine.add_request(
                request_id, {"prompt_token_ids": list(request.prompt_ids)}, self._sampling_params(request)
            )
        except Exception as exc:  # a prompt too long for max_model_len, say: this request fails alone
            future.set_exception(exc)
            return True
        self._waiting[request_id] = (request, future)
        return True

    def _drive(self) -> None:
        engine = self.llm.llm_engine
        running = True
        while running:
            if not self._waiting:
                running = self._admit(self._incoming.get())  # idle: wait for work
            while running:  # everything else that has arrived joins this step
                try:
                    running = self._admit(self._incoming.get_nowait())
                except queue.Empty:
                    break
            if not self._waiting:
                continue
            try:
                outputs = engine.step()
            except BaseException as exc:  # every waiting thread must hear of it
                engine.abort_request(list(self._waiting))
                for _, future in self._waiting.values():
                    future.set_exception(exc)
                self._waiting.clear()
                continue
            self.steps += 1
            for output in outputs:
                if not output.finished or output.request_id not in self._waiting:
                    continue
                request, future = self._waiting.pop(output.request_id)
                cached = output.num_cached_tokens or 0
                self.requests += 1
                completion = output.outputs[0]
                new_ids = list(completion.token_ids)
                future.set_result(
                    GenerationResult(
                        new_ids=new_ids,
                        cache=None,
                        cached_ids=[],
                        encoded_tokens=len(request.prompt_ids) - cached,
                        logprobs=_sampled_logprobs(new_ids, completion.logprobs) if request.logprobs else None,
                    )
                )
        if self._waiting:
            engine.abort_request(list(self._waiting))
        for _, future in self._waiting.values():
            future.set_exception(RuntimeError("the vLLM engine was closed"))
        self._waiting.clear()


def _sampled_logprobs(token_ids: list[int], logprobs: Any) -> list[float]:
    """The log-probability of each sampled token, from vLLM's per-position {token: Logprob}."""
    if logprobs is None or len(logprobs) != len(token_ids):
        raise RuntimeError(
            f"vLLM returned {0 if logprobs is None else len(logprobs)} log-probabilities for {len(token_ids)} tokens"
        )
    return [float(position[token].logprob) for token, position in zip(token_ids, logprobs, strict=True)]


_ENGINES: dict[tuple[str, str, int], VLLMEngine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_vllm_engine(model_dir: str, stop_ids: set[int], *, dtype: str, max_model_len: int) -> VLLMEngine:
    """One engine per checkpoint, dtype and context length in this process (vLLM takes seconds
    to minutes to start and holds the weights and a key/value cache).

    Args:
        model_dir: a transformers checkpoint directory.
        stop_ids: the token ids that end a reply.
        dtype: `bfloat16` or `float32`.
        max_model_len: the longest prompt plus reply a request may have.

    Returns:
        The engine, started on first use.
    """
    key = (model_dir, dtype, max_model_len)
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = VLLMEngine.load(model_dir, stop_ids, dtype=dtype, max_model_len=max_model_len)
        return _ENGINES[key]
