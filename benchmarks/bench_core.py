"""In-process latency of the core environment, with raw sqlite3 as the baseline of the same run.

Measures, on spider10 (or demo with --dataset demo):
- reset() per call;
- DESCRIBE and SAMPLE steps (served from the schema catalog after first use);
- QUERY: every gold query of the dataset through the sandbox alone (authorizer, statement check,
  watchdog, progress handler, bounded fetch) and as a whole environment step (plus rendering,
  reward and observation), each against raw `sqlite3` execute + fetchall of the same statements
  on a plain read-only connection, interleaved in the same run; then the step's time beyond the
  sandbox, split: rendering the result text and the progress potential (each timed alone on the
  same results) and the rest (lease, bookkeeping, observation); and, as an ablation, the step
  loop again with rendering and the potential replaced by constants;
- the oracle policy over every question of the dataset (all splits).

Run: .venv/bin/python benchmarks/bench_core.py --spider-dir ../shared/spider [--repeats 5]
Targets (issue 2): QUERY <= 1.2x raw, DESCRIBE/SAMPLE <= 100 us, reset <= 200 us, oracle over all
676 spider10 questions < 5 s.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from urllib.parse import quote

from sqlenv import SQLAction, SQLEnvironment
from sqlenv.agents.reference import OraclePolicy
from sqlenv.data import load_dataset
from sqlenv.env import environment as environment_module
from sqlenv.env.rewards import GoldProfile, progress_potential
from sqlenv.evaluation import evaluate
from sqlenv.sandbox import SQLSandbox, render_result


def _median_time(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="spider10")
    parser.add_argument("--spider-dir", default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    dataset = load_dataset(args.dataset, args.spider_dir)
    records = list(dataset.records)
    env = SQLEnvironment(dataset=dataset, split=dataset.split_names[0])
    ids = [r.question_id for r in records]

    # Warm caches (catalogs, describe/sample texts, statement caches) once, as training would.
    for r in records:
        env.reset(question_id=r.question_id)
        for t in r.tables_involved:
            env.step(SQLAction(action_type="DESCRIBE", argument=t))
            env.step(SQLAction(action_type="SAMPLE", argument=t))

    def resets() -> None:
        for qid in ids:
            env.reset(question_id=qid)

    reset_s = _median_time(resets, args.repeats) / len(ids)

    # DESCRIBE / SAMPLE: one episode per question, one step each on its first table.
    plan = [(r.question_id, r.tables_involved[0]) for r in records if r.tables_involved]

    def steps_of(kind: str) -> float:
        total = 0.0
        for qid, table in plan:
            env.reset(question_id=qid)
            action = SQLAction(action_type=kind, argument=table)
            start = time.perf_counter()
            env.step(action)
            total += time.perf_counter() - start
        return total

    describe_s = statistics.median(steps_of("DESCRIBE") for _ in range(args.repeats)) / len(plan)
    sample_s = statistics.median(steps_of("SAMPLE") for _ in range(args.repeats)) / len(plan)

    # QUERY vs raw sqlite3 on the same statements, same files, same order.
    raw_conns = {
        db: sqlite3.connect(f"file:{quote(str(p.resolve()))}?mode=ro&immutable=1", uri=True)
        for db, p in dataset.databases.items()
    }
    queries = [(r.question_id, r.db_id, r.gold_sql) for r in records]

    def env_queries() -> float:
        total = 0.0
        for qid, _db, sql in queries:
            env.reset(question_id=qid)
            action = SQLAction(action_type="QUERY", argument=sql)
            start = time.perf_counter()
            env.step(action)
            total += time.perf_counter() - start
        return total

    def raw_queries() -> float:
        total = 0.0
        for _qid, db, sql in queries:
            conn = raw_conns[db]
            start = time.perf_counter()
            conn.execute(sql).fetchall()
            total += time.perf_counter() - start
        return total

    sandboxes = {db: SQLSandbox(p) for db, p in dataset.databases.items()}

    def sandbox_queries() -> float:
        total = 0.0
        for _qid, db, sql in queries:
            sandbox = sandboxes[db]
            start = time.perf_counter()
            sandbox.execute(sql)
            total += time.perf_counter() - start
        return total

    env_queries()
    raw_queries()  # warm the statement caches
    sandbox_queries()
    env_q, raw_q, sandbox_q = [], [], []
    for _ in range(args.repeats):  # interleave so machine noise hits all alike
        raw_q.append(raw_queries())
        sandbox_q.append(sandbox_queries())
        env_q.append(env_queries())
    env_query_s = statistics.median(env_q) / len(queries)
    raw_query_s = statistics.median(raw_q) / len(queries)
    sandbox_query_s = statistics.median(sandbox_q) / len(queries)

    # Where a step's time goes beyond the sandbox: the two computations over a result, each timed
    # alone on the same results; what remains is the lease, the bookkeeping and the observation.
    by_id = {r.question_id: r for r in records}
    results = [
        (sandboxes[db].execute(sql), GoldProfile.of(by_id[qid].gold_answer)) for qid, db, sql in queries
    ]
    limits, reward_config, tolerance = env.config.sandbox, env.config.reward, env.config.float_tolerance

    def renders() -> None:
        for result, _gold in results:
            render_result(result, limits)

    def potentials() -> None:
        for result, gold in results:
            progress_potential(result.rows, gold, reward_config, tolerance)

    render_s = _median_time(renders, args.repeats) / len(queries)
    phi_s = _median_time(potentials, args.repeats) / len(queries)
    rest_s = env_query_s - sandbox_query_s - render_s - phi_s

    # The same step loop with rendering and the potential replaced by constants (the observation
    # then says nothing useful): what the rest of the step costs inside the loop, where caches
    # are colder than in the isolated timings above. An ablation, never the environment's path.
    real = (environment_module.render_result, environment_module.progress_potential)
    environment_module.render_result = lambda _result, _limits: ""
    environment_module.progress_potential = lambda *_args: 1.0
    try:
        env_queries()
        bare_q, bare_raw_q = [], []
        for _ in range(args.repeats):
            bare_raw_q.append(raw_queries())
            bare_q.append(env_queries())
    finally:
        environment_module.render_result, environment_module.progress_potential = real
    bare_ratio = statistics.median(bare_q) / statistics.median(bare_raw_q)

    oracle_env = {split: SQLEnvironment(dataset=dataset, split=split) for split in dataset.split_names}

    def oracle_all() -> None:
        for split_env in oracle_env.values():
            result = evaluate(split_env, OraclePolicy(dataset))
            assert result.success_rate >= 0.99

    oracle_s = _median_time(oracle_all, max(1, args.repeats // 2))

    print(f"dataset {dataset.name}: {len(records)} questions, {len(dataset.databases)} databases")
    print(f"{'measure':<34}{'value':>14}{'target':>14}{'ratio':>10}")
    rows = [
        ("reset", reset_s * 1e6, "us", 200),
        ("DESCRIBE step", describe_s * 1e6, "us", 100),
        ("SAMPLE step", sample_s * 1e6, "us", 100),
    ]
    for name, value, unit, target in rows:
        print(f"{name:<34}{value:>11.1f} {unit}{target:>11} {unit}{value / target:>10.2f}")
    print(f"{'raw sqlite3 execute+fetchall':<34}{raw_query_s * 1e6:>11.1f} us{'(baseline)':>14}")
    sandbox_ratio = sandbox_query_s / raw_query_s
    print(
        f"{'sandbox.execute (gold SQL)':<34}{sandbox_query_s * 1e6:>11.1f} us{'1.20 x raw':>14}{sandbox_ratio:>10.2f}"
    )
    ratio = env_query_s / raw_query_s
    print(
        f"{'QUERY step (execute+render+reward)':<34}{env_query_s * 1e6:>11.1f} us{'1.20 x raw':>14}{ratio:>10.2f}"
    )
    for name, seconds in (
        ("  of which rendering the result", render_s),
        ("  of which progress potential", phi_s),
        ("  of which the rest (lease, obs...)", rest_s),
    ):
        print(f"{name:<34}{seconds * 1e6:>11.1f} us{'x raw':>14}{seconds / raw_query_s:>10.2f}")
    print(f"{'QUERY step, no render, no potential':<34}{'':>14}{'(ablation)':>14}{bare_ratio:>10.2f}")
    print(f"{f'oracle, all {len(records)} questions':<34}{oracle_s:>12.2f} s{5:>12} s{oracle_s / 5:>10.2f}")
    for conn in raw_conns.values():
        conn.close()


if __name__ == "__main__":
    main()
