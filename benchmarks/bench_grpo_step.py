"""Where one GRPO step's wall time goes, for a training config against SmolLM2-135M's.

A step of `sqlenv train grpo` is built exactly as the command builds it (`build_grpo_trainer`:
the config's rollouts, completion budget, LoRA, environments), started from the config's base
model (no SFT needed) or from `--init-from` (an untrained model that writes no tool call in the
template's tags makes no environment calls: give an SFT model to see them), and split three ways:
1. generation: the model decoding rollouts (TRL's `_generate_single_turn`, every turn);
2. environment: sqlenv's `reset` and `step` inside the rollouts (the tool calls);
3. the rest: scoring (log-probabilities of the policy and the reference), the loss, backward and
   the optimiser step, and TRL's own bookkeeping.
The baseline is the same step with SmolLM2-135M (the `smollm2-135m` preset) in the same process,
the same rollouts and budgets; the first step of each is a warm-up and is not reported.

`--engines transformers,vllm` compares generation engines instead: the config's model (from
`--init-from`) with `grpo.engine` set to each in turn, the first the baseline. With vLLM the weight
sync into the engine (TRL's, or `sqlenv.training.vllm_colocate`'s on a CPU) is its own column,
taken out of generation.

Run: .venv/bin/python benchmarks/bench_grpo_step.py --config configs/cpu-qwen0.5b.yaml
     --spider-dir ../shared/spider [--steps 2] [--threads N] [--set grpo.max_completion_length=512 ...]
     [--engines transformers,vllm --init-from runs/cpu-qwen0.5b/sft/final]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from typing import Any

from transformers import TrainerCallback

from training_timing import StepClock, parse_timing_args


class _Timer:
    """Seconds spent inside the wrapped calls since the last `take()`."""

    def __init__(self) -> None:
        self.total = 0.0

    def wrap(self, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.total += time.perf_counter() - started

        return timed

    def take(self) -> float:
        spent, self.total = self.total, 0.0
        return spent


def _measure(
    config_path: str,
    model: str,
    steps: int,
    overrides: dict[str, Any],
    init_from: str | None = None,
    engine: str | None = None,
) -> list[dict[str, float]]:
    from sqlenv.env.environment import SQLEnvironment
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    with tempfile.TemporaryDirectory() as out:
        settings = {
            **overrides,
            "model": model,
            "output_dir": out,
            "sft.enabled": False,
            "grpo.init_from": init_from,
            "grpo.max_steps": steps,
            "grpo.save_steps": 10_000,
            "live.transcript_every": 0,
            "live.eval_every": 0,
            "live.heldout_questions": 0,
            "live.plot_every": 0,
            **({"grpo.engine": engine} if engine else {}),
        }
        config = load_config(config_path, settings)
        environment, generation, sync = _Timer(), _Timer(), _Timer()
        originals = SQLEnvironment.reset, SQLEnvironment.step
        SQLEnvironment.reset = environment.wrap(SQLEnvironment.reset)  # type: ignore[method-assign]
        SQLEnvironment.step = environment.wrap(SQLEnvironment.step)  # type: ignore[method-assign]
        try:
            trainer = build_grpo_trainer(config)
            trainer._generate_single_turn = generation.wrap(trainer._generate_single_turn)
            if getattr(trainer, "vllm_generation", None) is not None:
                vllm_generation = trainer.vllm_generation
                vllm_generation.sync_weights = sync.wrap(vllm_generation.sync_weights)
            clock = StepClock()
            rows: list[dict[str, float]] = []

            class Split(TrainerCallback):
                def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
                    environment.take()  # what happened before the step is not the step's
                    generation.take()
                    sync.take()

                def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                    synced = sync.take()  # inside generation: TRL syncs before it generates
                    rows.append(
                        {"generation": generation.take() - synced, "sync": synced, "environment": environment.take()}
                    )

                def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                    if logs and "completions/mean_length" in logs and rows:  # the step just ended
                        rollouts = config.grpo.batch_size * config.grpo.gradient_accumulation_steps
                        rows[-1]["tokens"] = float(logs["completions/mean_length"]) * rollouts
                        rows[-1]["tool_calls"] = float(logs.get("tools/call_frequency", 0.0))

            trainer.add_callback(clock)
            trainer.add_callback(Split())
            trainer.train()
            del trainer  # free this model before the next one loads
            gc.collect()
        finally:
            SQLEnvironment.reset, SQLEnvironment.step = originals  # type: ignore[method-assign]
    for row, total in zip(rows, clock.durations, strict=True):
        row["total"] = total
        row["rest"] = total - row["generation"] - row["sync"] - row["environment"]
    return rows[1:]  # the first step warms up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the training config whose GRPO step is measured")
    parser.add_argument("--steps", type=int, default=2, help="optimisation steps per model (the first warms up)")
    parser.add_argument("--spider-dir", default=None)
    parser.add_argument("--baseline-model", default="smollm2-135m")
    parser.add_argument(
        "--init-from", default=None, help="start the config's model from this checkpoint (an SFT model, say)"
    )
    parser.add_argument("--baseline-init-from", default=None, help="start the baseline from this checkpoint")
    parser.add_argument("--set", action="append", default=[], dest="sets", help="KEY=VALUE config override")
    parser.add_argument(
        "--engines", default=None, help="compare grpo.engine values (e.g. transformers,vllm) on the config's model"
    )
    args = parse_timing_args(parser)
    import yaml

    from sqlenv.training.config import load_config

    overrides: dict[str, Any] = {"spider_dir": args.spider_dir} if args.spider_dir else {}
    for item in args.sets:
        key, _, value = item.partition("=")
        overrides[key] = yaml.safe_load(value)
    configured = load_config(args.config, overrides).model
    if args.engines:
        engines = args.engines.split(",")
        results = {
            f"{configured} ({engine})": _measure(args.config, configured, args.steps, overrides, args.init_from, engine)
            for engine in engines
        }
        names = list(results)
        args.baseline_model, model = names[0], names[-1]  # one engine alone: its split, no ratios
    else:
        model = configured
        results = {
            args.baseline_model: _measure(
                args.config, args.baseline_model, args.steps, overrides, args.baseline_init_from
            ),
            model: _measure(args.config, model, args.steps, overrides, args.init_from),
        }

    def mean(name: str, part: str) -> float:
        return sum(r.get(part, 0.0) for r in results[name]) / len(results[name])

    print(f"GRPO step of {args.config} (mean of {args.steps - 1} step(s) after a warm-up), seconds:")
    print(
        f"{'model':<34}{'generation':>12}{'sync':>8}{'environment':>13}{'rest':>10}{'total':>10}{'tokens':>9}{'calls':>7}"
    )
    for name in results:
        print(
            f"{name:<34}{mean(name, 'generation'):>12.2f}{mean(name, 'sync'):>8.2f}{mean(name, 'environment'):>13.4f}"
            f"{mean(name, 'rest'):>10.2f}{mean(name, 'total'):>10.2f}{mean(name, 'tokens'):>9.0f}"
            f"{mean(name, 'tool_calls'):>7.2f}"
        )
    print("tokens: completion tokens of the step's rollouts; calls: tool calls per rollout")
    for name in results:
        if mean(name, "tokens"):
            print(f"{name}: {1000 * mean(name, 'generation') / mean(name, 'tokens'):.1f} s of generation per 1k completion tokens")
    for part in ("generation", "sync", "environment", "rest", "total"):
        if model == args.baseline_model:
            break
        base = mean(args.baseline_model, part)
        if not base:  # the transformers engine has no weight sync: nothing to divide by
            continue
        print(f"{model} / {args.baseline_model}, {part}: {mean(model, part) / base:.2f}x")
    share = mean(model, "environment") / mean(model, "total")
    print(f"environment share of {model}'s step: {100 * share:.3f} %")


if __name__ == "__main__":
    main()
