"""Parallel and distributed evaluation: the same seed gives the same episodes on every backend
(serial, threads, Ray), in-process and against a real server."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.agents.registry import PolicyFactory
from sqlenv.cli import app
from sqlenv.env.models import SQLObservation
from sqlenv.evaluation import (
    EpisodeRecord,
    LocalEnvironmentFactory,
    RaySession,
    RemoteEnvironmentFactory,
    episode_plan,
    episode_seed,
    evaluate,
)
from sqlenv.server.client import RemoteSQLEnvironment

runner = CliRunner()


def same_episodes(a: list[EpisodeRecord], b: list[EpisodeRecord]) -> None:
    assert [e.question_id for e in a] == [e.question_id for e in b]
    for x, y in zip(a, b, strict=True):
        assert x == y, f"episode {x.question_id} differs"


@pytest.fixture(scope="module")
def serial_random(demo_dataset):
    return evaluate(SQLEnvironment(dataset=demo_dataset, split="eval"), RandomPolicy(), seed=11)


def test_episode_i_plays_question_i_with_its_own_seed(demo_dataset) -> None:
    questions = demo_dataset.split("eval")
    plan = episode_plan(questions, None, seed=4)
    assert plan == [(i, r.question_id, episode_seed(4, i)) for i, r in enumerate(questions)]
    sampled = episode_plan(questions, 50, seed=4)  # more than the split: with replacement
    assert len(sampled) == 50 and sampled == episode_plan(questions, 50, seed=4)


def test_threads_give_the_serial_episodes_in_question_order(demo_dataset, serial_random) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    threaded = evaluate(env, RandomPolicy(), seed=11, parallel=4)
    assert threaded.backend == "threads" and serial_random.backend == "serial"
    same_episodes(threaded.episodes, serial_random.episodes)
    assert threaded.by_difficulty == serial_random.by_difficulty
    assert threaded.by_database == serial_random.by_database
    sampled_serial = evaluate(env, OraclePolicy(demo_dataset), n_episodes=60, seed=2)
    sampled_threads = evaluate(env, OraclePolicy(demo_dataset), n_episodes=60, seed=2, parallel=3)
    same_episodes(sampled_threads.episodes, sampled_serial.episodes)
    assert sampled_threads.success_rate == 1.0


class OneThreadPolicy(RandomPolicy):
    """A random policy that fails if two threads ever share it."""

    made = 0
    lock = threading.Lock()

    def __init__(self) -> None:
        super().__init__()
        with OneThreadPolicy.lock:
            OneThreadPolicy.made += 1
        self.owner: int | None = None

    def reset(self, observation: SQLObservation, seed: int) -> None:
        me = threading.get_ident()
        assert self.owner in (None, me), "a policy instance was used by two threads"
        self.owner = me
        super().reset(observation, seed)

    def act(self, observation: SQLObservation) -> SQLAction:
        assert self.owner == threading.get_ident()
        return super().act(observation)


def test_each_worker_thread_has_its_own_policy_and_environment(demo_dataset, serial_random) -> None:
    OneThreadPolicy.made = 0
    built: list[SQLEnvironment] = []

    def make_env() -> SQLEnvironment:
        env = SQLEnvironment(dataset=demo_dataset, split="eval")
        built.append(env)
        return env

    seen_on: set[int] = set()
    result = evaluate(
        SQLEnvironment(dataset=demo_dataset, split="eval"),
        RandomPolicy(),
        seed=11,
        parallel=4,
        policy_factory=OneThreadPolicy,
        env_factory=make_env,
        on_episode=lambda _e: seen_on.add(threading.get_ident()),
    )
    same_episodes(result.episodes, serial_random.episodes)
    assert 1 <= OneThreadPolicy.made <= 4 and 1 <= len(built) <= 4
    assert len({id(e) for e in built}) == len(built)
    assert all(env.dataset is demo_dataset for env in built)  # shared, not reloaded
    assert seen_on == {threading.get_ident()}  # progress callbacks run on the calling thread


def test_parallel_needs_a_way_to_make_more_policies(demo_dataset) -> None:
    class NoClone:
        name = "noclone"

        def reset(self, observation: SQLObservation, seed: int) -> None: ...

        def act(self, observation: SQLObservation) -> SQLAction:
            return SQLAction(action_type="ANSWER", argument="1")

    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    with pytest.raises(ValueError, match="policy_factory"):
        evaluate(env, NoClone(), parallel=2)
    assert evaluate(env, NoClone(), parallel=2, policy_factory=NoClone).n_episodes == len(env.questions)


def test_bad_backend_settings_are_refused(demo_dataset) -> None:
    env = SQLEnvironment(dataset=demo_dataset, split="eval")
    with pytest.raises(ValueError, match="one episode at a time"):
        evaluate(env, RandomPolicy(), parallel=4, backend="serial")
    with pytest.raises(ValueError, match="unknown backend"):
        evaluate(env, RandomPolicy(), parallel=2, backend="processes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        evaluate(env, RandomPolicy(), parallel=0)


def test_a_failing_episode_stops_a_threaded_run_with_its_error(demo_dataset) -> None:
    class Breaks(RandomPolicy):
        def act(self, observation: SQLObservation) -> SQLAction:
            if observation.metadata["question_id"] == demo_dataset.split("eval")[5].question_id:
                raise RuntimeError("policy crashed")
            return super().act(observation)

    with pytest.raises(RuntimeError, match="policy crashed"):
        evaluate(
            SQLEnvironment(dataset=demo_dataset, split="eval"), Breaks(), parallel=3, policy_factory=Breaks
        )


def test_parallel_sessions_on_a_real_server_match_in_process(demo_server, demo_dataset) -> None:
    local = evaluate(
        SQLEnvironment(dataset=demo_dataset, split="train"), RandomPolicy(), n_episodes=40, seed=5
    )
    with RemoteSQLEnvironment(demo_server.url, demo_dataset, "train") as remote_env:
        remote = evaluate(remote_env, RandomPolicy(), n_episodes=40, seed=5, parallel=4)
    same_episodes(remote.episodes, local.episodes)
    assert demo_server.get_json("/sessions")["active"] == 0  # every worker's session was closed


def test_cli_parallel_flags_give_the_serial_numbers(tmp_path: Path) -> None:
    outputs = {}
    for label, flags in (("serial", []), ("threads", ["--parallel", "3"])):
        out = tmp_path / f"{label}.json"
        result = runner.invoke(
            app, ["eval", "--policy", "random", "--episodes", "20", "--seed", "9", "--json", str(out), *flags]
        )
        assert result.exit_code == 0, result.output
        outputs[label] = json.loads(out.read_text())
    assert outputs["threads"]["backend"] == "threads"
    assert outputs["threads"]["episodes"] == outputs["serial"]["episodes"]
    refused = runner.invoke(app, ["eval", "--backend", "serial", "--parallel", "2"])
    assert refused.exit_code == 2 and "one episode at a time" in refused.output
    refused = runner.invoke(app, ["eval", "--ray-address", "auto"])
    assert refused.exit_code == 2 and "--ray-address needs --backend ray" in refused.output


@pytest.mark.slow
def test_ray_gives_the_serial_episodes_in_process_and_over_the_server(
    demo_server, demo_dataset, serial_random
) -> None:
    """One local Ray cluster (2 CPUs, 256 MB object store) for both runs, stopped afterwards."""
    ray = pytest.importorskip("ray")
    local_train = evaluate(
        SQLEnvironment(dataset=demo_dataset, split="train"), RandomPolicy(), n_episodes=30, seed=5
    )
    with RaySession(None):
        assert ray.is_initialized()
        in_process = evaluate(
            SQLEnvironment(dataset=demo_dataset, split="eval"),
            RandomPolicy(),
            seed=11,
            backend="ray",
            policy_factory=PolicyFactory("random", demo_dataset, 0),
            env_factory=LocalEnvironmentFactory(demo_dataset, "eval"),
        )
        with RemoteSQLEnvironment(demo_server.url, demo_dataset, "train") as remote_env:
            remote = evaluate(
                remote_env,
                RandomPolicy(),
                n_episodes=30,
                seed=5,
                backend="ray",
                parallel=2,
                env_factory=RemoteEnvironmentFactory(demo_server.url, demo_dataset, "train"),
            )
    assert not ray.is_initialized()  # what the session started, it stopped
    assert in_process.backend == remote.backend == "ray"
    same_episodes(in_process.episodes, serial_random.episodes)
    same_episodes(remote.episodes, local_train.episodes)
    assert demo_server.get_json("/sessions")["active"] == 0
