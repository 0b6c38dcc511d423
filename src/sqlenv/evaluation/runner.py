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
stopped (`sqlenv.evaluation.journal`).
Each `EpisodeRecord` keeps a short transcript (every action, an excerpt of its result or error,
its reward, and the final verdict) for reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlenv.agents.policy import Policy
from sqlenv.config import EnvConfig
from sqlenv.evaluation.backends import Backend, resolve_backend, run_ray, run_serial, run_threads
from sqlenv.evaluation.episodes import (
    EnvironmentFactory,
    EpisodeEnvironment,
    PolicyFactory,
    environment_factory_for,
    episode_plan,
    policy_factory_for,
)
from sqlenv.evaluation.journal import EpisodeJournal
from sqlenv.evaluation.records import EpisodeRecord, EvaluationResult, summarise, with_question_facts


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
    question_ids: Sequence[str] | None = None,
) -> EvaluationResult:
    """Play episodes of `policy` in `env`; every question of the split once unless n_episodes.

    `parallel` > 1 runs that many episodes at a time (threads by default, or `backend="ray"`).
    Parallel workers get their own environments (`env_factory`, default: like `env`) and policies
    (`policy_factory`, default: `policy.clone`); for Ray both must be picklable. `on_episode` is
    called on the calling thread as each episode finishes (in completion order); the result lists
    episodes in question order whatever the backend.

    `journal` (a JSON-lines file, `sqlenv.evaluation.journal`) records each episode as it finishes; given the
    journal of an unfinished run with the same policy name, dataset, split, seed, episodes and
    `EnvConfig.show_schema` (and,
    for a policy with a `weights_fingerprint`, the same weights, and for a language model the same
    `max_new_tokens`, `examples_ranking`, `engine`, `dtype`, `decoding` and `context`), the run continues: the recorded episodes are loaded
    (and passed to `on_episode` first), only the others are played. A run that plays holds the journal's lock
    until it returns: a second one started on the same journal meanwhile is refused
    (`sqlenv.evaluation.journal.JournalInUse`).
    `wall_time_s` is then this call's time. `play=False` (with a journal) plays nothing: the result
    holds the results so far of a run that stopped, the episodes of the plan up to its first one the
    journal lacks. Later episodes that finished are left out: run in parallel, those are the ones
    that finished early, the short ones, while a prefix of the plan is a sample like the whole.
    `question_ids` plays those questions of the split (in that order) instead of all of them: a
    fixed held-out set, say; `n_episodes` then samples from them.
    """
    if not play and (journal is None or not Path(journal).is_file()):
        raise ValueError(f"nothing to report without playing: no episode journal at {journal}")
    chosen = resolve_backend(parallel, backend)
    questions = env.questions
    if question_ids is not None:
        in_split = {r.question_id: r for r in env.questions}
        missing = [q for q in question_ids if q not in in_split]
        if missing:
            raise ValueError(f"question(s) not in the {env.split} split: {', '.join(missing[:5])}")
        questions = [in_split[q] for q in question_ids]
    plan = episode_plan(questions, n_episodes, seed)
    name = getattr(policy, "name", type(policy).__name__)
    done: dict[int, EpisodeRecord] = {}
    opened = None
    if journal is not None:
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
            engine=getattr(policy, "engine", None),
            dtype=getattr(policy, "dtype", None),
            decoding=getattr(policy, "decoding", None),
            show_schema=_shows_schema(env),
            context=getattr(policy, "context", None),
            write=play,  # a report of the results so far only reads it
        )
        done = {index: with_question_facts(e, env.dataset) for index, e in opened.done.items()}
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
            run_serial(env, policy, jobs, on_done, record_transcripts)
        elif jobs:
            make_env = env_factory or environment_factory_for(env)
            make_policy = policy_factory or policy_factory_for(policy)
            if chosen == "threads":
                run_threads(make_env, make_policy, jobs, parallel, on_done, record_transcripts)
            else:
                run_ray(make_env, make_policy, jobs, parallel, ray_address, on_done, record_transcripts)
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
            engine=getattr(policy, "engine", None),
            dtype=getattr(policy, "dtype", None),
            decoding=getattr(policy, "decoding", None),
        )
    finally:
        if opened is not None:
            opened.close()  # the journal's lock: another run may continue it now


def _shows_schema(env: EpisodeEnvironment) -> bool:
    """Whether `env` shows the schema (`EnvConfig.show_schema`): its config says, in-process; a
    server's environment says in its observations' metadata (one reset asks)."""
    config = getattr(env, "config", None)
    if isinstance(config, EnvConfig):
        return config.show_schema
    return env.reset().metadata.get("show_schema") is True
