"""`evaluate()`: runs a policy over episodes of an environment and summarises the results.

By default every question of the environment's split is played once, in order; with
`n_episodes` a seeded sample (with replacement past the split's size) is played instead. Episode
i always plays question i of that list and is reset with `episode_seed(seed, i)`, which also
seeds the policy, so a run is reproducible episode by episode — on every backend:

- `serial` (default): one episode after another on the given environment and policy;
- `threads` (`parallel=N`, N > 1): N worker threads, each with its own environment (an
  in-process `SQLEnvironment` sharing the dataset, or its own `RemoteSQLEnvironment` session on
  the server) and its own policy (`policy_factory`, else `policy.clone()`);
- `ray`: chunks of episodes as Ray tasks, each building its environment and policy from
  picklable factories; `ray_address=None` starts (and afterwards stops) a small local cluster.

Results are sorted back into question order, so the backends give identical episode records.
With `journal=`, every finished episode is appended to a file and a stopped run continues where it
stopped (`sqlenv.journal`).
Each `EpisodeRecord` keeps a short transcript (every action, an excerpt of its result or error,
its reward, and the final verdict) for reports.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sqlenv.data import Dataset, QuestionRecord
from sqlenv.models import SQLAction, SQLObservation
from sqlenv.policies import Policy

if TYPE_CHECKING:
    from sqlenv.config import EnvConfig

Backend = Literal["serial", "threads", "ray"]
BACKENDS: tuple[str, ...] = ("serial", "threads", "ray")
DIFFICULTY_ORDER: tuple[str, ...] = ("easy", "medium", "hard", "extra")

# Transcript excerpts: enough to read an episode, small enough to keep thousands of them.
TRANSCRIPT_ACTION_CHARS = 400
TRANSCRIPT_RESULT_CHARS = 300
NO_ANSWER_VERDICT = "no answer: the step budget ran out"


class EpisodeEnvironment(Protocol):
    """What evaluate() needs: SQLEnvironment in-process, or RemoteSQLEnvironment over a server."""

    dataset: Dataset
    split: str
    questions: Sequence[QuestionRecord]

    def reset(self, seed: int | None = None, question_id: str | None = None) -> SQLObservation: ...

    def step(self, action: SQLAction) -> SQLObservation: ...


EnvironmentFactory = Callable[[], EpisodeEnvironment]
PolicyFactory = Callable[[], Policy]


@dataclass(frozen=True)
class StepRecord:
    """One step of a transcript: the action, an excerpt of what came back, the step's reward."""

    action: str
    result: str
    error: str
    reward: float


@dataclass(frozen=True)
class EpisodeRecord:
    question_id: str
    db_id: str
    difficulty: str
    answer_type: str
    success: bool
    total_reward: float
    steps: int
    actions: list[str]
    question: str = ""
    # Outputs the policy could not parse into an action (policies driven by a language model).
    format_errors: int = 0
    # "correct", "wrong: <why>", or NO_ANSWER_VERDICT.
    verdict: str = ""
    transcript: list[StepRecord] = field(default_factory=list)
    # Whether a train question has the same gold SQL (`Dataset.seen_in_train`); None for train
    # questions and datasets without a train split.
    seen_in_train: bool | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeRecord:
        """An episode as `asdict` wrote it: a journal entry, or one of results.json's episodes."""
        fields = dict(data)
        fields["transcript"] = [StepRecord(**step) for step in fields.get("transcript", [])]
        return cls(**fields)


@dataclass
class EvaluationResult:
    policy: str
    dataset: str
    split: str
    n_episodes: int
    success_rate: float
    avg_reward: float
    avg_steps: float
    by_difficulty: dict[str, dict[str, float]]
    episodes: list[EpisodeRecord] = field(default_factory=list)
    by_answer_type: dict[str, dict[str, float]] = field(default_factory=dict)
    by_database: dict[str, dict[str, float]] = field(default_factory=dict)
    # Share of all actions whose policy output could not be parsed (0 for random and oracle).
    format_error_rate: float = 0.0
    seed: int = 0
    backend: str = "serial"
    wall_time_s: float = 0.0  # this call's time: the episodes it played, not those of a journal
    journal_episodes: int = 0  # episodes loaded from a journal (played by an earlier run)
    # A stopped run reported so far (`evaluate(..., play=False)`): the plan's size, and how many of
    # its episodes had finished after the first one missing (left out of these results). 0: whole.
    planned_episodes: int = 0
    finished_after_gap: int = 0
    # Keyed SEEN_IN_TRAIN / NOT_IN_TRAIN: recall of a trained query vs the rest (`sqlenv.data.overlap`).
    by_train_overlap: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self, include_episodes: bool = True) -> dict[str, Any]:
        data = asdict(self)
        if not include_episodes:
            data.pop("episodes")
        return data


SEEN_IN_TRAIN = "gold SQL seen in train"
NOT_IN_TRAIN = "gold SQL not in train"


def episode_seed(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index) % (2**31 - 1)


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _action_text(action: SQLAction) -> str:
    return _excerpt(
        f"{action.action_type.strip().upper()} {action.argument}".rstrip(), TRANSCRIPT_ACTION_CHARS
    )


def run_episode(
    env: EpisodeEnvironment, policy: Policy, question_id: str, seed: int, *, record_transcript: bool = True
) -> EpisodeRecord:
    observation = env.reset(seed=seed, question_id=question_id)
    policy.reset(observation, seed)
    total = 0.0
    transcript: list[StepRecord] = []
    while not observation.done:
        action = policy.act(observation)
        # A chat policy's reply that was no tool call reaches the environment as an unknown action;
        # the transcript shows the policy's reason instead of the environment's "unknown action".
        format_error = getattr(policy, "last_format_error", None)
        observation = env.step(action)
        reward = observation.reward or 0.0
        total += reward
        if record_transcript:
            error = f"not a valid tool call: {format_error}" if format_error else observation.error
            transcript.append(
                StepRecord(
                    action=_action_text(action),
                    result=_excerpt(observation.result, TRANSCRIPT_RESULT_CHARS),
                    error=_excerpt(error, TRANSCRIPT_RESULT_CHARS),
                    reward=round(reward, 6),
                )
            )
    record = env.dataset.get(question_id)
    answered = "correct" in observation.metadata
    return EpisodeRecord(
        question_id=question_id,
        db_id=record.db_id,
        difficulty=record.difficulty,
        answer_type=record.answer_type,
        success=bool(observation.metadata.get("correct", False)),
        total_reward=round(total, 6),
        steps=observation.step_count,
        actions=list(observation.action_history),
        question=record.question,
        format_errors=int(getattr(policy, "format_errors", 0) or 0),
        verdict=observation.result if answered else NO_ANSWER_VERDICT,
        transcript=transcript,
        seen_in_train=env.dataset.seen_in_train(question_id),
    )


def _with_train_overlap(episode: EpisodeRecord, dataset: Dataset) -> EpisodeRecord:
    """An episode from a journal written before records knew their train overlap, completed."""
    if episode.seen_in_train is not None:
        return episode
    return replace(episode, seen_in_train=dataset.seen_in_train(episode.question_id))


def group_stats(episodes: Sequence[EpisodeRecord]) -> dict[str, float]:
    """n, success rate, mean reward, mean steps and format-error rate of some episodes."""
    n = len(episodes)
    steps = sum(e.steps for e in episodes)
    return {
        "n": n,
        "success_rate": sum(e.success for e in episodes) / n if n else 0.0,
        "avg_reward": sum(e.total_reward for e in episodes) / n if n else 0.0,
        "avg_steps": steps / n if n else 0.0,
        "format_error_rate": sum(e.format_errors for e in episodes) / steps if steps else 0.0,
    }


def _grouped(
    episodes: Sequence[EpisodeRecord], key: Callable[[EpisodeRecord], str], order: Sequence[str] = ()
) -> dict[str, dict[str, float]]:
    groups: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for e in episodes:
        groups[key(e)].append(e)

    def rank(name: str) -> tuple[int, str]:
        return (order.index(name) if name in order else len(order), name)

    return {name: group_stats(groups[name]) for name in sorted(groups, key=rank)}


def summarise(
    policy: str,
    dataset: str,
    split: str,
    episodes: Sequence[EpisodeRecord],
    *,
    seed: int = 0,
    backend: str = "serial",
    wall_time_s: float = 0.0,
    journal_episodes: int = 0,
    planned_episodes: int = 0,
    finished_after_gap: int = 0,
) -> EvaluationResult:
    """An `EvaluationResult` from episode records (overall and by difficulty, type, database)."""
    overall = group_stats(episodes)
    return EvaluationResult(
        policy=policy,
        dataset=dataset,
        split=split,
        n_episodes=len(episodes),
        success_rate=overall["success_rate"],
        avg_reward=overall["avg_reward"],
        avg_steps=overall["avg_steps"],
        by_difficulty=_grouped(episodes, lambda e: e.difficulty, DIFFICULTY_ORDER),
        episodes=list(episodes),
        by_answer_type=_grouped(episodes, lambda e: e.answer_type),
        by_database=_grouped(episodes, lambda e: e.db_id),
        by_train_overlap=_grouped(
            [e for e in episodes if e.seen_in_train is not None],
            lambda e: SEEN_IN_TRAIN if e.seen_in_train else NOT_IN_TRAIN,
            (SEEN_IN_TRAIN, NOT_IN_TRAIN),
        ),
        format_error_rate=overall["format_error_rate"],
        seed=seed,
        backend=backend,
        wall_time_s=round(wall_time_s, 4),
        journal_episodes=journal_episodes,
        planned_episodes=planned_episodes,
        finished_after_gap=finished_after_gap,
    )


# ---- environment factories (picklable, so Ray workers can build their own) ---------------------


@dataclass(frozen=True)
class LocalEnvironmentFactory:
    """Builds an in-process `SQLEnvironment` on a shared, already loaded dataset."""

    dataset: Dataset
    split: str
    config: EnvConfig | None = None

    def __call__(self) -> EpisodeEnvironment:
        from sqlenv.environment import SQLEnvironment

        return SQLEnvironment(dataset=self.dataset, split=self.split, config=self.config)


@dataclass(frozen=True)
class RemoteEnvironmentFactory:
    """Opens a new `RemoteSQLEnvironment` session on a running server."""

    url: str
    dataset: Dataset
    split: str
    message_timeout_s: float = 60.0

    def __call__(self) -> EpisodeEnvironment:
        from sqlenv.client import RemoteSQLEnvironment

        return RemoteSQLEnvironment(self.url, self.dataset, self.split, self.message_timeout_s)


def environment_factory_for(env: EpisodeEnvironment) -> EnvironmentFactory:
    """A factory of environments like `env` (same dataset, split, config or server)."""
    from sqlenv.environment import SQLEnvironment

    if isinstance(env, SQLEnvironment):
        return LocalEnvironmentFactory(env.dataset, env.split, env.config)
    url = getattr(env, "base_url", None)  # RemoteSQLEnvironment
    if isinstance(url, str) and url:
        return RemoteEnvironmentFactory(url, env.dataset, env.split)
    raise ValueError(
        f"cannot make more environments like {type(env).__name__} for parallel workers: "
        "pass env_factory= (a zero-argument callable returning a new environment)"
    )


def _policy_factory_for(policy: Policy) -> PolicyFactory:
    clone = getattr(policy, "clone", None)
    if callable(clone):
        return clone
    raise ValueError(
        f"policy {getattr(policy, 'name', type(policy).__name__)!r} has no clone(): pass "
        "policy_factory= (a zero-argument callable returning a new policy) to run it in parallel"
    )


def _close(env: object) -> None:
    close = getattr(env, "close", None)
    if callable(close):
        close()


# ---- backends ---------------------------------------------------------------------------------

Job = tuple[int, str, int]  # (index, question_id, episode seed)
DoneCallback = Callable[[int, EpisodeRecord], None]  # (job index, its finished episode)


def _run_serial(
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


def _run_threads(
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
            _close(env)
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
        _close(env)


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


def _run_ray(
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


def episode_plan(questions: Sequence[QuestionRecord], n_episodes: int | None, seed: int) -> list[Job]:
    """(index, question_id, episode seed) of every episode a run plays, in order."""
    ids = [r.question_id for r in questions]
    if n_episodes is not None:
        if n_episodes < 0:
            raise ValueError(f"n_episodes must be positive, not {n_episodes}")
        rng = random.Random(seed)
        ids = rng.sample(ids, n_episodes) if n_episodes <= len(ids) else rng.choices(ids, k=n_episodes)
    return [(i, qid, episode_seed(seed, i)) for i, qid in enumerate(ids)]


def evaluate(
    env: EpisodeEnvironment,
    policy: Policy,
    n_episodes: int | None = None,
    seed: int = 0,
    *,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    parallel: int = 1,
    backend: Backend | None = None,
    policy_factory: PolicyFactory | None = None,
    env_factory: EnvironmentFactory | None = None,
    ray_address: str | None = None,
    record_transcripts: bool = True,
    journal: str | Path | None = None,
    play: bool = True,
) -> EvaluationResult:
    """Play episodes of `policy` in `env`; every question of the split once unless n_episodes.

    `parallel` > 1 runs that many episodes at a time (threads by default, or `backend="ray"`).
    Parallel workers get their own environments (`env_factory`, default: like `env`) and policies
    (`policy_factory`, default: `policy.clone`); for Ray both must be picklable. `on_episode` is
    called on the calling thread as each episode finishes (in completion order); the result lists
    episodes in question order whatever the backend.

    `journal` (a JSON-lines file, `sqlenv.journal`) records each episode as it finishes; given the
    journal of an unfinished run with the same policy name, dataset, split, seed and episodes (and,
    for a policy with a `weights_fingerprint`, the same weights, and for a language model the same
    `max_new_tokens` and `examples_ranking`), the run continues: the recorded episodes are loaded
    (and passed to `on_episode` first), only the others are played. A run that plays holds the journal's lock
    until it returns: a second one started on the same journal meanwhile is refused
    (`sqlenv.journal.JournalInUse`).
    `wall_time_s` is then this call's time. `play=False` (with a journal) plays nothing: the result
    holds the results so far of a run that stopped, the episodes of the plan up to its first one the
    journal lacks. Later episodes that finished are left out: run in parallel, those are the ones
    that finished early, the short ones, while a prefix of the plan is a sample like the whole.
    """
    if not play and (journal is None or not Path(journal).is_file()):
        raise ValueError(f"nothing to report without playing: no episode journal at {journal}")
    chosen = resolve_backend(parallel, backend)
    plan = episode_plan(env.questions, n_episodes, seed)
    name = getattr(policy, "name", type(policy).__name__)
    done: dict[int, EpisodeRecord] = {}
    opened = None
    if journal is not None:
        from sqlenv.journal import EpisodeJournal

        opened = EpisodeJournal(
            journal,
            policy=name,
            dataset=env.dataset.name,
            split=env.split,
            seed=seed,
            jobs=plan,
            weights=getattr(policy, "weights_fingerprint", None),
            max_new_tokens=getattr(policy, "max_new_tokens", None),
            examples_ranking=getattr(policy, "examples_ranking", None),
            write=play,  # a report of the results so far only reads it
        )
        done = {index: _with_train_overlap(e, env.dataset) for index, e in opened.done.items()}
    try:
        from_journal = len(done)
        if on_episode is not None:
            for index in sorted(done):
                on_episode(done[index])

        def on_done(index: int, episode: EpisodeRecord) -> None:
            done[index] = episode
            if opened is not None:
                opened.record(index, episode)
            if on_episode is not None:
                on_episode(episode)

        jobs = [job for job in plan if job[0] not in done] if play else []
        started = time.perf_counter()
        if jobs and chosen == "serial":
            _run_serial(env, policy, jobs, on_done, record_transcripts)
        elif jobs:
            make_env = env_factory or environment_factory_for(env)
            make_policy = policy_factory or _policy_factory_for(policy)
            if chosen == "threads":
                _run_threads(make_env, make_policy, jobs, parallel, on_done, record_transcripts)
            else:
                _run_ray(make_env, make_policy, jobs, parallel, ray_address, on_done, record_transcripts)
        planned = after_gap = 0
        if play:
            episodes = [done[i] for i, _, _ in plan]
        else:
            finished = next((i for i, _, _ in plan if i not in done), len(plan))
            episodes = [done[i] for i, _, _ in plan[:finished]]
            from_journal = len(episodes)  # all of them, and only those
            if finished < len(plan):
                planned, after_gap = len(plan), len(done) - finished
        return summarise(
            name,
            env.dataset.name,
            env.split,
            episodes,
            seed=seed,
            backend=chosen,
            wall_time_s=time.perf_counter() - started,
            journal_episodes=from_journal,
            planned_episodes=planned,
            finished_after_gap=after_gap,
        )
    finally:
        if opened is not None:
            opened.close()  # the journal's lock: another run may continue it now
