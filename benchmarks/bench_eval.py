"""Evaluation throughput: episodes per second of the oracle policy, serial vs threads vs Ray.

Plays the same episodes (spider10 eval, or the demo eval split when Spider is absent) with every
backend and prints episodes/s and the ratio to the serial run measured in the same process.

1. The oracle as is (CPU-bound: every step is Python plus a short SQLite call):
   - serial, with transcripts (the default) and without (`record_transcripts=False`: their cost);
   - threads with each `--parallel` worker count (an in-process `SQLEnvironment` per worker);
   - Ray (`--no-ray` to skip): the local cluster's start-up, the first run (worker processes
     import sqlenv then), and warm runs on the same cluster.
2. The oracle with `--latency-ms` of waiting per action, standing in for a policy that calls a
   language model (the case parallel evaluation is for): serial, threads (`--latency-parallel`)
   and warm Ray.

Every backend's episodes are checked to be identical to the serial ones.

Run: .venv/bin/python benchmarks/bench_eval.py --spider-dir ../shared/spider [--episodes 2000]
     [--parallel 2,4] [--repeats 3] [--latency-ms 20] [--latency-episodes 200]
     [--latency-parallel 4,16] [--no-ray] [--ray-address ADDR]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from sqlenv.agents.reference import OraclePolicy
from sqlenv.agents.registry import PolicyFactory
from sqlenv.data import Dataset, load_dataset
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.evaluation import EvaluationResult, LocalEnvironmentFactory, RaySession, evaluate


class WaitingOracle(OraclePolicy):
    """The oracle, waiting `latency_s` before each action as a model call would."""

    def __init__(self, dataset: Dataset, latency_s: float) -> None:
        super().__init__(dataset)
        self.latency_s = latency_s

    def clone(self) -> WaitingOracle:
        return WaitingOracle(self.dataset, self.latency_s)

    def act(self, observation: SQLObservation) -> SQLAction:
        time.sleep(self.latency_s)
        return super().act(observation)


@dataclass(frozen=True)
class WaitingOracleFactory:
    dataset: Dataset
    latency_s: float

    def __call__(self) -> WaitingOracle:
        return WaitingOracle(self.dataset, self.latency_s)


def _spider_dir(given: str | None) -> Path | None:
    candidate = Path(
        given or os.environ.get("SQLENV_SPIDER_DIR") or Path(__file__).parents[2] / "shared" / "spider"
    )
    return candidate if (candidate / "database").is_dir() else None


def _timed(run, repeats: int) -> tuple[float, EvaluationResult]:
    samples, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spider-dir", default=None)
    parser.add_argument("--split", default="eval")
    parser.add_argument(
        "--episodes", type=int, default=2000, help="episodes per run (sampled from the split)"
    )
    parser.add_argument("--parallel", default="2,4", help="thread worker counts to measure")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="section 2: wait per action (0: skip)")
    parser.add_argument("--latency-episodes", type=int, default=200, help="section 2: episodes per run")
    parser.add_argument("--latency-parallel", default="4,16", help="section 2: thread worker counts")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--ray-address", default=None)
    args = parser.parse_args()

    spider = _spider_dir(args.spider_dir)
    dataset: Dataset = load_dataset("spider10", spider) if spider else load_dataset("demo")
    env = SQLEnvironment(dataset=dataset, split=args.split)
    policy = OraclePolicy(dataset)
    n = args.episodes
    print(
        f"oracle on {dataset.name}/{args.split} ({len(env.questions)} questions), {n} episodes per run, "
        f"median of {args.repeats}; {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    evaluate(env, policy, n, args.seed)  # warm catalogs, sandboxes, statement caches

    rows: list[tuple[str, float, int, float]] = []  # label, seconds, episodes, serial seconds
    serial_s, serial = _timed(lambda: evaluate(env, policy, n, args.seed), args.repeats)
    rows.append(("serial (baseline)", serial_s, n, serial_s))
    bare_s, bare = _timed(lambda: evaluate(env, policy, n, args.seed, record_transcripts=False), args.repeats)
    rows.append(("serial, no transcripts", bare_s, n, serial_s))
    assert [e.total_reward for e in bare.episodes] == [e.total_reward for e in serial.episodes]
    for workers in _counts(args.parallel):
        t, result = _timed(lambda w=workers: evaluate(env, policy, n, args.seed, parallel=w), args.repeats)
        assert result.episodes == serial.episodes, f"threads x{workers} differ from serial"
        rows.append((f"threads, parallel={workers}", t, n, serial_s))

    latency_s = args.latency_ms / 1000
    waiting = WaitingOracle(dataset, latency_s)
    m = args.latency_episodes
    slow_rows: list[tuple[str, float, int, float]] = []
    slow_serial = None
    if latency_s > 0:
        slow_serial_s, slow_serial = _timed(lambda: evaluate(env, waiting, m, args.seed), 1)
        slow_rows.append(("serial (baseline)", slow_serial_s, m, slow_serial_s))
        for workers in _counts(args.latency_parallel):
            t, result = _timed(lambda w=workers: evaluate(env, waiting, m, args.seed, parallel=w), 1)
            assert result.episodes == slow_serial.episodes, f"threads x{workers} differ from serial"
            slow_rows.append((f"threads, parallel={workers}", t, m, slow_serial_s))

    if not args.no_ray:
        start = time.perf_counter()
        with RaySession(args.ray_address) as ray:
            rows.append(("ray: cluster start (no episodes)", time.perf_counter() - start, 0, serial_s))
            cpus = int(ray.cluster_resources().get("CPU", 1))

            def run_ray(pol, factory, count: int) -> EvaluationResult:
                return evaluate(
                    env,
                    pol,
                    count,
                    args.seed,
                    backend="ray",
                    parallel=cpus,
                    policy_factory=factory,
                    env_factory=LocalEnvironmentFactory(dataset, args.split),
                )

            oracle_factory = PolicyFactory("oracle", dataset, args.seed)
            first_s, first = _timed(lambda: run_ray(policy, oracle_factory, n), 1)
            assert first.episodes == serial.episodes, "ray differs from serial"
            rows.append((f"ray, {cpus} CPUs, first run (workers import sqlenv)", first_s, n, serial_s))
            warm_s, _ = _timed(lambda: run_ray(policy, oracle_factory, n), args.repeats)
            rows.append((f"ray, {cpus} CPUs, warm", warm_s, n, serial_s))
            if slow_serial is not None:
                t, result = _timed(lambda: run_ray(waiting, WaitingOracleFactory(dataset, latency_s), m), 1)
                assert result.episodes == slow_serial.episodes, "ray differs from serial (latency)"
                slow_rows.append((f"ray, {cpus} CPUs, warm", t, m, slow_rows[0][1]))

    _print_table("1. oracle, CPU-bound", rows)
    if slow_rows:
        _print_table(f"2. oracle + {args.latency_ms:g} ms wait per action (a model call)", slow_rows)
    print("all backends gave identical episodes")


def _counts(text: str) -> list[int]:
    return [int(w) for w in text.split(",") if w.strip()]


def _print_table(title: str, rows: list[tuple[str, float, int, float]]) -> None:
    width = max(len(label) for label, *_ in rows)
    print(f"\n{title}")
    print(f"  {'backend':<{width}}  {'episodes':>8}  {'seconds':>8}  {'episodes/s':>10}  {'vs serial':>9}")
    for label, seconds, count, baseline in rows:
        if not count:
            print(f"  {label:<{width}}  {'':>8}  {seconds:8.3f}")
            continue
        print(
            f"  {label:<{width}}  {count:8d}  {seconds:8.3f}  {count / seconds:10.1f}  {baseline / seconds:8.2f}x"
        )


if __name__ == "__main__":
    main()
