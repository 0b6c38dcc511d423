"""Rollout throughput of the CPU preset: environment steps/s and generated tokens/s, and the share
of time spent in the environment vs in the model.

A rollout is what GRPO and evaluation both do: the model writes a tool call, the environment runs
it, the result goes back into the conversation. Measured with `LLMPolicy` (greedy, one episode at
a time) on the same questions:
1. the environment alone (the oracle's steps/s): the baseline every other line is compared to;
2. the model's rollouts with the prefix key/value cache (the default), and without it (each turn
   re-encodes the whole conversation): steps/s, tokens generated per second, the share of time
   in `env.step` vs in the model, and the ratio to (1);
3. batched sampling as GRPO does it (`--group` completions of one prompt at once) vs one at a
   time: generated tokens/s;
4. the same episodes as (2) played by `--parallel` threads whose replies are decoded together
   (`sqlenv.agents.batched_generation`, what `sqlenv eval --parallel N` does with a language model):
   steps/s and tokens/s against (2)'s one-at-a-time row.

Run: .venv/bin/python benchmarks/bench_rollout.py --spider-dir ../shared/spider
     [--model smollm2-135m | a trained model directory] [--episodes 4] [--max-new-tokens 64]
     [--group 4] [--parallel EPISODES] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from sqlenv.agents.local_policy import LLMPolicy
from sqlenv.agents.reference import OraclePolicy
from sqlenv.data import Dataset, load_dataset
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation
from sqlenv.evaluation import evaluate


class TimedEnvironment(SQLEnvironment):
    """SQLEnvironment that adds up the time spent in step()."""

    step_seconds = 0.0
    steps = 0

    def step(self, action: SQLAction, timeout_s: float | None = None, **kwargs: object) -> SQLObservation:
        start = time.perf_counter()
        try:
            return super().step(action, timeout_s, **kwargs)
        finally:
            self.step_seconds += time.perf_counter() - start
            self.steps += 1


def _spider_dir(given: str | None) -> Path | None:
    candidate = Path(
        given or os.environ.get("SQLENV_SPIDER_DIR") or Path(__file__).parents[2] / "shared" / "spider"
    )
    return candidate if (candidate / "database").is_dir() else None


def _rollouts(
    dataset: Dataset, split: str, policy: LLMPolicy, episodes: int, seed: int, parallel: int = 1
) -> dict[str, float]:
    """Play `episodes` and total the time in env.step and the tokens (over every thread's copy)."""
    envs: list[TimedEnvironment] = []
    policies: list[LLMPolicy] = [policy]

    def new_env() -> TimedEnvironment:
        envs.append(TimedEnvironment(dataset=dataset, split=split))
        return envs[-1]

    def new_policy() -> LLMPolicy:
        policies.append(policy.clone())
        return policies[-1]

    env = new_env()
    start = time.perf_counter()
    if parallel > 1:
        result = evaluate(
            env,
            policy,
            n_episodes=episodes,
            seed=seed,
            parallel=parallel,
            backend="threads",
            env_factory=new_env,
            policy_factory=new_policy,
        )
    else:
        result = evaluate(env, policy, n_episodes=episodes, seed=seed)
    wall = time.perf_counter() - start
    return {
        "wall": wall,
        "steps": sum(e.steps for e in envs),
        "env_s": sum(e.step_seconds for e in envs),  # summed over threads: a share of thread time
        "tokens": sum(p.generated_tokens for p in policies),
        "encoded": sum(p.encoded_tokens for p in policies),
        "success": result.success_rate,
    }


def _batched_tokens_per_s(
    policy: LLMPolicy, dataset: Dataset, split: str, group: int, new_tokens: int
) -> float:
    """Tokens/s when `group` completions of one episode prompt are sampled in one batch."""
    import torch

    from sqlenv.agents.tools import TOOLS

    env = SQLEnvironment(dataset=dataset, split=split)
    observation = env.reset(question_id=env.questions[0].question_id)
    policy.reset(observation, 0)
    loaded = policy.loaded
    inputs = loaded.tokenizer.apply_chat_template(
        policy._head, tools=list(TOOLS), add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    batch = {k: v.repeat(group, 1).to(loaded.model.device) for k, v in inputs.items()}
    start = time.perf_counter()
    with torch.no_grad():
        loaded.model.generate(
            **batch,
            do_sample=True,
            temperature=1.0,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=loaded.tokenizer.pad_token_id or loaded.tokenizer.eos_token_id,
        )
    return group * new_tokens / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spider-dir", default=None)
    parser.add_argument("--split", default="eval")
    parser.add_argument("--model", default="smollm2-135m", help="preset or trained model directory")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--group", type=int, default=4, help="completions per prompt in section 3")
    parser.add_argument(
        "--parallel", type=int, default=None, help="threads in section 4 (default: --episodes)"
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    spider = _spider_dir(args.spider_dir)
    dataset = load_dataset("spider10", spider) if spider else load_dataset("demo")
    print(
        f"{args.model} on {dataset.name}/{args.split}, {args.episodes} episodes, max {args.max_new_tokens} new "
        f"tokens per turn; {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, "
        f"Python {platform.python_version()}"
    )

    oracle_env = TimedEnvironment(dataset=dataset, split=args.split)
    evaluate(oracle_env, OraclePolicy(dataset), n_episodes=200, seed=args.seed)  # warm
    start = time.perf_counter()
    oracle_env.steps = 0
    evaluate(oracle_env, OraclePolicy(dataset), n_episodes=200, seed=args.seed)
    env_steps_per_s = oracle_env.steps / (time.perf_counter() - start)
    print(f"\n1. environment alone (oracle): {env_steps_per_s:,.0f} steps/s  (baseline)")

    print("\n2. model rollouts")
    header = f"{'':26} {'steps/s':>8} {'tokens/s':>9} {'encoded':>9} {'env share':>10} {'vs env':>10} {'success':>8}"
    print(header)
    rows = {}
    for label, reuse in (("prefix cache (default)", True), ("no cache (re-encode)", False)):
        policy = LLMPolicy(args.model, max_new_tokens=args.max_new_tokens, reuse_prefix_cache=reuse, engine="transformers")
        _ = policy.loaded  # load outside the timing
        r = _rollouts(dataset, args.split, policy, args.episodes, args.seed)
        rows[label] = r
        steps_per_s = r["steps"] / r["wall"]
        print(
            f"{label:26} {steps_per_s:8.3f} {r['tokens'] / r['wall']:9.1f} {r['encoded']:9,d} "
            f"{r['env_s'] / r['wall']:10.4%} {steps_per_s / env_steps_per_s:10.2e} {r['success']:8.2f}"
        )
    cached, plain = rows["prefix cache (default)"], rows["no cache (re-encode)"]
    print(
        f"prefix cache: {(cached['steps'] / cached['wall']) / (plain['steps'] / plain['wall']):.2f}x the steps/s "
        f"of re-encoding, {plain['encoded'] / max(cached['encoded'], 1):.1f}x fewer prompt tokens encoded"
    )

    print(f"\n3. sampling {args.max_new_tokens} tokens (temperature 1), as GRPO does")
    policy = LLMPolicy(args.model, max_new_tokens=args.max_new_tokens, engine="transformers")
    single = _batched_tokens_per_s(policy, dataset, args.split, 1, args.max_new_tokens)
    grouped = _batched_tokens_per_s(policy, dataset, args.split, args.group, args.max_new_tokens)
    print(f"one at a time:        {single:7.1f} tokens/s  (baseline)")
    print(f"group of {args.group} at once:  {grouped:7.1f} tokens/s  ({grouped / single:.2f}x)")

    parallel = args.parallel or args.episodes
    print(f"\n4. the episodes of (2) on {parallel} threads, replies decoded in one batch")
    policy = LLMPolicy(args.model, max_new_tokens=args.max_new_tokens, engine="transformers")
    _ = policy.loaded
    r = _rollouts(dataset, args.split, policy, args.episodes, args.seed, parallel=parallel)
    steps_per_s = r["steps"] / r["wall"]
    serial_steps_per_s = cached["steps"] / cached["wall"]
    print(header)
    print(
        f"{'batched, ' + str(parallel) + ' threads':26} {steps_per_s:8.3f} {r['tokens'] / r['wall']:9.1f} "
        f"{r['encoded']:9,d} {r['env_s'] / (r['wall'] * parallel):10.4%} "
        f"{steps_per_s / env_steps_per_s:10.2e} {r['success']:8.2f}"
    )
    print(f"batched: {steps_per_s / serial_steps_per_s:.2f}x the steps/s of one episode at a time (2)")


if __name__ == "__main__":
    main()
