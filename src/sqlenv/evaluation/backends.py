"""How a run's episodes are played: one after another (`serial`), on worker threads (`threads`),
or as Ray tasks (`ray`, on a small local cluster or a given one). Each backend reports every
finished episode as it finishes; `evaluate()` puts them back in plan order."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any, Literal

from sqlenv.agents.policy import Policy
from sqlenv.evaluation.episodes import (
    EnvironmentFactory,
    EpisodeEnvironment,
    PolicyFactory,
    close_environment,
    run_episode,
)
from sqlenv.evaluation.records import EpisodeRecord, Job

Backend = Literal["serial", "threads", "ray"]
BACKENDS: tuple[str, ...] = ("serial", "threads", "ray")
DoneCallback = Callable[[int, EpisodeRecord], None]  # (job index, its finished episode)


def run_serial(
    env: EpisodeEnvironment,
    policy: Policy,
    jobs: Sequence[Job],
    on_done: DoneCallback,
    record_transcripts: bool,
) -> list[EpisodeRecord]:
    episodes = []
    for i, qid, s in jobs:
        episode = run_episode(env, policy, qid, s, record_transcript=record_transcripts)
        episodes.append(episode)
        on_done(i, episode)
    return episodes


def run_threads(
    env_factory: EnvironmentFactory,
    policy_factory: PolicyFactory,
    jobs: Sequence[Job],
    workers: int,
    on_done: DoneCallback,
    record_transcripts: bool,
) -> list[EpisodeRecord]:
    """Each worker thread lazily builds its own environment and policy and keeps them."""
    local = threading.local()
    created: list[object] = []
    lock = threading.Lock()

    def play(qid: str, s: int) -> EpisodeRecord:
        if not hasattr(local, "env"):
            local.env = env_factory()
            with lock:
                created.append(local.env)
            local.policy = policy_factory()
        return run_episode(local.env, local.policy, qid, s, record_transcript=record_transcripts)

    results: dict[int, EpisodeRecord] = {}
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sqlenv-eval")
    try:
        futures: dict[Future[EpisodeRecord], int] = {executor.submit(play, qid, s): i for i, qid, s in jobs}
        for future in as_completed(futures):
            episode = future.result()  # re-raises the first failure; the rest are cancelled below
            results[futures[future]] = episode
            on_done(futures[future], episode)  # on the calling thread, in completion order
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        for env in created:
            close_environment(env)
    return [results[i] for i, _, _ in jobs]


def _run_chunk(
    env_factory: EnvironmentFactory,
    policy_factory: PolicyFactory,
    jobs: Sequence[Job],
    record_transcripts: bool,
) -> list[tuple[int, EpisodeRecord]]:
    """Run some episodes with one freshly built environment and policy (a Ray task's body)."""
    env = env_factory()
    try:
        policy = policy_factory()
        return [
            (i, run_episode(env, policy, qid, s, record_transcript=record_transcripts)) for i, qid, s in jobs
        ]
    finally:
        close_environment(env)


RAY_ENVIRONMENT: dict[str, str] = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # otherwise a local cluster binds a non-loopback address
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}
LOCAL_RAY_CPUS = 2
LOCAL_RAY_OBJECT_STORE_BYTES = 256 * 1024**2


class RaySession:
    """`with RaySession(address):` connects to Ray (starting a small local cluster when address is
    None, reusing one this process already joined) and shuts down only what it started."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        self._started = False

    def __enter__(self) -> Any:
        try:
            import ray
        except ImportError as exc:
            raise RuntimeError("backend 'ray' needs Ray: pip install 'sqlenv[eval]'") from exc
        for key, value in RAY_ENVIRONMENT.items():
            os.environ.setdefault(key, value)
        if not ray.is_initialized():
            import logging

            kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
            if self.address is None:
                kwargs.update(
                    num_cpus=LOCAL_RAY_CPUS,
                    object_store_memory=LOCAL_RAY_OBJECT_STORE_BYTES,
                    include_dashboard=False,
                )
            else:
                kwargs["address"] = self.address
            ray.init(**kwargs)
            self._started = True
        return ray

    def __exit__(self, *_exc: object) -> None:
        if self._started:
            import ray

            ray.shutdown()


def _chunks(jobs: Sequence[Job], count: int) -> Iterator[list[Job]]:
    size = max(1, -(-len(jobs) // max(count, 1)))
    for start in range(0, len(jobs), size):
        yield list(jobs[start : start + size])


def run_ray(
    env_factory: EnvironmentFactory,
    policy_factory: PolicyFactory,
    jobs: Sequence[Job],
    workers: int,
    ray_address: str | None,
    on_done: DoneCallback,
    record_transcripts: bool,
) -> list[EpisodeRecord]:
    """Episodes in chunks (about 4 per worker, for load balance and a moving progress bar)."""
    with RaySession(ray_address) as ray:
        if workers <= 1:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        task = ray.remote(num_cpus=1)(_run_chunk)
        env_ref = ray.put(env_factory)
        policy_ref = ray.put(policy_factory)
        pending = [
            task.remote(env_ref, policy_ref, chunk, record_transcripts)
            for chunk in _chunks(jobs, workers * 4)
        ]
        results: dict[int, EpisodeRecord] = {}
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for i, episode in ray.get(ready[0]):
                    results[i] = episode
                    on_done(i, episode)
        finally:
            for ref in pending:
                ray.cancel(ref)
    return [results[i] for i, _, _ in jobs]


def resolve_backend(parallel: int, backend: str | None) -> str:
    """The backend to use: as given, else "threads" when parallel > 1, else "serial"."""
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1, not {parallel}")
    if backend is None:
        return "threads" if parallel > 1 else "serial"
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "serial" and parallel > 1:
        raise ValueError("backend 'serial' plays one episode at a time: use parallel=1, or threads / ray")
    return backend
