"""Evaluation speed by generation engine: episodes per minute of a local model, vLLM against transformers.

Plays the same spider10 eval questions (the first `--questions` of the split, seed 0, greedy) with
`sqlenv.agents.local_policy.LLMPolicy` on each engine, at each `--parallel` count, and prints
episodes per minute, generated tokens per second (all episodes together), success and format-error
rates, and each engine's ratio to the first one listed (the baseline) at the same parallelism. An
engine may name the dtype it computes in (`transformers:float32`; else the machine's choice:
bfloat16 where the CPU computes it natively, `sqlenv.agents.local_models.run_in_bf16`), so a CPU
with AVX-512 BF16 can compare against the float32 path of CPUs without it. Each engine runs in a
process of its own (vLLM binds its threads to the cores, which would slow a transformers run in the
same process); the model is loaded and warmed before the clock starts, so the numbers are playing
time, not start-up (which is printed apart).

Run: .venv/bin/python benchmarks/bench_engines.py --spider-dir ../shared/spider
     [--model qwen2.5-coder-0.5b] [--questions 32] [--parallel 1,16]
     [--engines transformers,vllm]  (or e.g. transformers:float32,transformers,vllm)
     [--max-new-tokens 256]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def play(args: argparse.Namespace) -> dict[str, object]:
    """One engine, every parallel count: the measurements as a JSON-ready dict."""
    from sqlenv.agents.devices import resolve_device
    from sqlenv.agents.local_models import play_dtype
    from sqlenv.agents.local_policy import LLMPolicy
    from sqlenv.data import load_dataset
    from sqlenv.env.environment import SQLEnvironment
    from sqlenv.evaluation import evaluate

    dataset = load_dataset("spider10", args.spider_dir)
    env = SQLEnvironment(dataset=dataset, split="eval")
    question_ids = [r.question_id for r in dataset.split("eval")[: args.questions]]
    started = time.perf_counter()
    policy = LLMPolicy(args.model, max_new_tokens=args.max_new_tokens, engine=args.engine)
    policy.clone(max_batch=16).warm_up()  # loads the model (and starts vLLM) outside the clock
    start_up = time.perf_counter() - started
    runs = []
    for parallel in args.parallel:
        before = policy.generated_tokens
        clones: list[LLMPolicy] = []

        def factory(clones: list[LLMPolicy] = clones) -> LLMPolicy:
            clone = policy.clone(max_batch=16)
            clones.append(clone)
            return clone

        began = time.perf_counter()
        finished = 0

        def progress(record: object, parallel: int = parallel, began: float = began) -> None:
            # one line per finished episode, so a run stopped part-way still gives its pace
            nonlocal finished
            finished += 1
            print(f"{args.engine} parallel {parallel}: {finished}/{len(question_ids)} episodes "
                  f"after {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)  # fmt: skip

        result = evaluate(
            env,
            policy,
            n_episodes=len(question_ids),
            question_ids=question_ids,
            parallel=parallel,
            policy_factory=factory if parallel > 1 else None,
            on_episode=progress,
        )
        seconds = time.perf_counter() - began
        tokens = policy.generated_tokens - before + sum(c.generated_tokens for c in clones)
        runs.append(
            {
                "parallel": parallel,
                "seconds": round(seconds, 1),
                "episodes": result.n_episodes,
                "episodes_per_minute": round(60 * result.n_episodes / seconds, 2),
                "generated_tokens": tokens,
                "tokens_per_s": round(tokens / seconds, 1),
                "success_rate": result.success_rate,
                "format_error_rate": round(result.format_error_rate, 3),
                "successes": [e.success for e in result.episodes],
            }
        )
        print(json.dumps(runs[-1] | {"engine": args.engine, "successes": None}), file=sys.stderr, flush=True)
    return {"engine": args.engine, "dtype": play_dtype(resolve_device()), "start_up_s": round(start_up, 1), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spider-dir", default=None)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--parallel", default="1,16")
    parser.add_argument("--engines", default="transformers,vllm")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--engine", help=argparse.SUPPRESS)  # the child process's one engine
    args = parser.parse_args()
    args.parallel = [int(p) for p in str(args.parallel).split(",")]
    if args.engine:
        print(json.dumps(play(args)))
        return
    results = {}
    for label in args.engines.split(","):
        engine, _, dtype = label.partition(":")
        command = [sys.executable, __file__, "--engine", engine, "--model", args.model,
                   "--questions", str(args.questions), "--parallel", ",".join(map(str, args.parallel)),
                   "--max-new-tokens", str(args.max_new_tokens)]  # fmt: skip
        if args.spider_dir:
            command += ["--spider-dir", args.spider_dir]
        env = {**os.environ, "SQLENV_ENGINE": engine, "SQLENV_DTYPE": dtype or "auto"}
        # The child's stderr (its log, and each parallel count's numbers as they finish) passes
        # through, so a run stopped part-way still shows what it measured.
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"{label} failed (exit {done.returncode}); its log is above")
        results[label] = json.loads(done.stdout.strip().splitlines()[-1])
    baseline = next(iter(results))
    print(f"{args.model}, spider10 eval, first {args.questions} questions, greedy, "
          f"{args.max_new_tokens} tokens per reply, {os.cpu_count()} cores")  # fmt: skip
    print(f"engine               dtype     start-up  parallel  episodes/min  tokens/s  success  format errors  vs {baseline}")
    base = {r["parallel"]: r for r in results[baseline]["runs"]}
    for label, measured in results.items():
        for run in measured["runs"]:
            ratio = run["episodes_per_minute"] / base[run["parallel"]]["episodes_per_minute"]
            print(f"{label:<20} {measured['dtype']:<9} {measured['start_up_s']:>7.1f}s  {run['parallel']:>8}  "
                  f"{run['episodes_per_minute']:>12.2f}  {run['tokens_per_s']:>8.1f}  {run['success_rate']:>7.3f}  "
                  f"{run['format_error_rate']:>13.3f}  {ratio:>7.2f}x")  # fmt: skip
    for label in list(results)[1:]:
        for parallel in args.parallel:
            a = next(r for r in results[baseline]["runs"] if r["parallel"] == parallel)["successes"]
            b = next(r for r in results[label]["runs"] if r["parallel"] == parallel)["successes"]
            same = sum(x == y for x, y in zip(a, b, strict=True))
            print(f"parallel {parallel}: {label} and {baseline} agree on success in {same} of {len(a)} episodes")
    Path("bench_engines.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
