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

`--loops trl,sqlenv` compares episode loops instead, the first the baseline: `grpo.loop: trl`
(TRL's multi-turn tool loop over `environment_factory`) and `grpo.loop: sqlenv` (evaluation's own
loop through TRL's `rollout_func`, `sqlenv.training.rollouts`), each on the config's engine and
model (from `--init-from`). In the `sqlenv` loop generation is the rollout function's wall time
less the environment's (its episodes step the environment between replies). Each loop is measured
in a process of its own, started by this one: a colocated vLLM engine leaves a process group and
TRL's RANK/WORLD_SIZE behind it, and a second trainer built in the same process would take itself
for a distributed run.

`--passes today,shared` compares training passes instead, the first the baseline: `trl` (TRL
1.16's own), `today` (each forward call's rows sharing their prompt, every completion position
projected: `training_timing.install_todays_pass`, the pass `grpo.shared_prompt` ran before) and
`shared` (`sqlenv.training.grpo_shared_prefix`: each prompt once per step, only the positions the
loss uses projected). The rest of the step is then split further: scoring (the reference model's
log-probabilities, without gradients), the forward and backward of the loss, the optimiser step;
the three are the training pass. Beside each pass: its FLOPs, counted from the tokens it ran and
the model's shape (`training_timing.ModelShape`), and its bound, those FLOPs at the matmul
throughput measured in the same run on the model's layer shapes in the pass's compute type.
`--rollouts scripted` replaces generation with fixed episodes played against the real environment
(`training_timing.ScriptedRollouts`: the same rollouts for every pass, no engine loaded). Each
pass is measured in a process of its own, as the loops are: beside its own engine with generated
rollouts, and with scripted ones because a trainer freed in Python leaves its memory to the
allocator, so a second 1.5B pass built in the same process ran out of 24 GB where either alone fits.

Run: .venv/bin/python benchmarks/bench_grpo_step.py --config configs/cpu-qwen0.5b.yaml
     --spider-dir ../shared/spider [--steps 2] [--threads N] [--set grpo.max_completion_length=512 ...]
     [--engines transformers,vllm --init-from runs/cpu-qwen0.5b/sft/final]
     [--passes today,shared [--rollouts scripted]] [--loops trl,sqlenv --init-from ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from training_timing import (
    ModelShape,
    ScriptedRollouts,
    StepClock,
    call_work,
    install_todays_pass,
    matmul_throughput,
    parse_timing_args,
)

PASSES = ("trl", "today", "shared")
LOOPS = ("trl", "sqlenv")


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


class _Counter:
    """Calls of the wrapped function since the last `take()` (thread-safe: episodes step in threads)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def wrap(self, function: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls += 1
            return function(*args, **kwargs)

        return counted

    def take(self) -> int:
        with self._lock:
            calls, self.calls = self.calls, 0
        return calls


class _PeakMemory:
    """The process's peak resident memory while `watching`, sampled every 0.2 s."""

    def __init__(self) -> None:
        self.peak = 0
        self.watching = False
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        import os

        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            if self.watching:
                with open("/proc/self/statm") as statm:
                    self.peak = max(self.peak, int(statm.read().split()[1]) * page)
            time.sleep(0.2)

    def take(self) -> float:
        peak, self.peak = self.peak, 0
        return peak / 2**30


def _instrument_pass(trainer: Any, name: str, scoring: _Timer, work: dict[str, list[int]]) -> None:
    """Time the scoring calls made without gradients, and count the tokens each call of the `trl`
    and `today` passes runs (the shared pass counts its own)."""
    import torch

    scorer = trainer._get_per_token_logps_and_entropies

    def scored(
        model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, *args: Any, **kwargs: Any
    ) -> Any:
        graded = torch.is_grad_enabled()
        if name != "shared":
            counted = call_work(name, input_ids, attention_mask, logits_to_keep)
            kept = work["trained" if graded else "scored"]
            kept[:] = [a + b for a, b in zip(kept, counted, strict=True)]
        if graded:
            return scorer(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        return scoring.wrap(scorer)(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = scored


def _measure(
    config_path: str,
    model: str,
    steps: int,
    overrides: dict[str, Any],
    init_from: str | None = None,
    engine: str | None = None,
    training_pass: str | None = None,
    scripted: bool = False,
    memory: _PeakMemory | None = None,
    loop: str | None = None,
) -> list[dict[str, float]]:
    import torch

    from sqlenv.data import load_dataset
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
            **({"grpo.shared_prompt": training_pass == "shared"} if training_pass else {}),
            **({"grpo.engine": "transformers", "grpo.loop": "trl"} if scripted else {}),
            **({"grpo.loop": loop} if loop else {}),
        }
        config = load_config(config_path, settings)
        environment, generation, sync, scoring, preparing, stepping = (_Timer() for _ in range(6))
        work: dict[str, list[int]] = {"trained": [0, 0, 0], "scored": [0, 0, 0]}
        originals = SQLEnvironment.reset, SQLEnvironment.step
        SQLEnvironment.reset = environment.wrap(SQLEnvironment.reset)  # type: ignore[method-assign]
        stepped = _Counter()
        SQLEnvironment.step = environment.wrap(stepped.wrap(SQLEnvironment.step))  # type: ignore[method-assign]
        try:
            trainer = build_grpo_trainer(config)
            if training_pass == "today":
                install_todays_pass(trainer)
            if scripted:
                ScriptedRollouts(trainer, load_dataset(config.dataset, config.spider_dir))
            trainer._generate_single_turn = generation.wrap(trainer._generate_single_turn)
            rollout_timer = _Timer()  # the sqlenv loop's rollout function: replies and environment
            if trainer.rollout_func is not None:
                trainer.rollout_func = rollout_timer.wrap(trainer.rollout_func)
            if getattr(trainer, "vllm_generation", None) is not None:
                vllm_generation = trainer.vllm_generation
                vllm_generation.sync_weights = sync.wrap(vllm_generation.sync_weights)
            shape = ModelShape(trainer.model, config.grpo.lora.r if config.grpo.lora.enabled else None,
                               config.grpo.lora.target_modules)  # fmt: skip
            dtype = torch.bfloat16 if trainer.args.bf16 else torch.float32
            throughput = matmul_throughput(shape, dtype) if training_pass else 0.0
            if training_pass:
                _instrument_pass(trainer, training_pass, scoring, work)
            trainer._prepare_inputs = preparing.wrap(trainer._prepare_inputs)
            trainer.training_step = stepping.wrap(trainer.training_step)
            counts = getattr(trainer, "shared_prompt_counts", None)
            clock = StepClock()
            rows: list[dict[str, float]] = []

            def counted() -> dict[str, list[int]]:
                if counts is None:
                    return {kind: list(values) for kind, values in work.items()}
                return {kind: [w.tokens, w.attended, w.projected] for kind, w in (("trained", counts.trained),
                                                                                   ("scored", counts.scored))}  # fmt: skip

            class Split(TrainerCallback):
                def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
                    for timer in (
                        environment,
                        generation,
                        sync,
                        scoring,
                        preparing,
                        stepping,
                        rollout_timer,
                        stepped,
                    ):
                        timer.take()  # what happened before the step is not the step's
                    self.work = counted()
                    self.optimiser = 0.0
                    if memory is not None:
                        memory.take()
                        memory.watching = True

                def on_pre_optimizer_step(self, *args: Any, **kwargs: Any) -> None:
                    self.optimiser_began = time.perf_counter()

                def on_optimizer_step(self, *args: Any, **kwargs: Any) -> None:
                    self.optimiser += time.perf_counter() - self.optimiser_began

                def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                    synced = sync.take()  # inside generation: TRL syncs before it generates
                    scored = scoring.take()
                    now = counted()
                    done = {
                        kind: [a - b for a, b in zip(now[kind], self.work[kind], strict=True)] for kind in now
                    }
                    environment_spent = environment.take()
                    # The TRL loop syncs inside its generation call; the sqlenv loop syncs before
                    # its rollout function, which plays whole episodes (replies and environment).
                    rolled = rollout_timer.take()
                    row = {
                        "generation": rolled - environment_spent if rolled else generation.take() - synced,
                        "sync": synced,
                        "environment": environment_spent,
                        "steps_played": float(stepped.take()),
                        "scoring": scored,
                        # training_step, less the generation and scoring its first call prepares
                        "training": stepping.take() - preparing.take(),
                        "optimiser": self.optimiser,
                        "flops": shape.forward_backward(*done["trained"])
                        + shape.forward(*done["scored"], lora=False),
                        "throughput": throughput,
                        "trained_tokens": done["trained"][0],
                        "projected": done["trained"][2],
                        "scored_tokens": done["scored"][0],
                    }
                    if memory is not None:
                        memory.watching = False
                        row["peak_gib"] = memory.take()
                    rows.append(row)

                def on_log(
                    self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any
                ) -> None:
                    if logs and "completions/mean_length" in logs and rows:  # the step just ended
                        rollouts = config.grpo.batch_size * config.grpo.gradient_accumulation_steps
                        rows[-1]["tokens"] = float(logs["completions/mean_length"]) * rollouts
                        # environment steps per rollout: the same count in both loops (TRL's
                        # `tools/call_frequency` is the TRL loop's alone)
                        rows[-1]["tool_calls"] = rows[-1].pop("steps_played") / rollouts

            trainer.add_callback(clock)
            trainer.add_callback(Split())
            trainer.train()
            del trainer  # free this model before the next one loads
            gc.collect()
        finally:
            SQLEnvironment.reset, SQLEnvironment.step = originals  # type: ignore[method-assign]
    for row, total in zip(rows, clock.durations, strict=True):
        row["total"] = total
        row["pass"] = row["scoring"] + row["training"] + row["optimiser"]
        row["rest"] = total - row["generation"] - row["sync"] - row["environment"]
        if training_pass:
            row["rest"] -= row["pass"]
    return rows[1:]  # the first step warms up


def _without_option(argv: list[str], option: str) -> list[str]:
    """`argv` without `option` and its value (given as `--option V` or `--option=V`)."""
    kept: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
        elif item == option:
            skip = True
        elif not item.startswith(option + "="):
            kept.append(item)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", required=True, help="the training config whose GRPO step is measured")
    parser.add_argument(
        "--steps", type=int, default=2, help="optimisation steps per model (the first warms up)"
    )
    parser.add_argument("--spider-dir", default=None)
    parser.add_argument("--baseline-model", default="smollm2-135m")
    parser.add_argument(
        "--init-from", default=None, help="start the config's model from this checkpoint (an SFT model, say)"
    )
    parser.add_argument("--baseline-init-from", default=None, help="start the baseline from this checkpoint")
    parser.add_argument("--set", action="append", default=[], dest="sets", help="KEY=VALUE config override")
    parser.add_argument(
        "--engines",
        default=None,
        help="compare grpo.engine values (e.g. transformers,vllm) on the config's model",
    )
    parser.add_argument(
        "--passes", default=None, help=f"compare training passes ({', '.join(PASSES)}) on the config's model"
    )
    parser.add_argument(
        "--loops", default=None, help=f"compare episode loops ({', '.join(LOOPS)}) on the config's model"
    )
    parser.add_argument("--rows-out", default=None, help=argparse.SUPPRESS)  # a child's rows, for its parent
    parser.add_argument(
        "--rollouts", choices=("generated", "scripted"), default="generated",
        help="scripted: fixed episodes against the real environment instead of generation (with --passes)",
    )  # fmt: skip
    args = parse_timing_args(parser)
    import platform

    import yaml

    from sqlenv.training.config import load_config

    overrides: dict[str, Any] = {"spider_dir": args.spider_dir} if args.spider_dir else {}
    for item in args.sets:
        key, _, value = item.partition("=")
        overrides[key] = yaml.safe_load(value)
    configured = load_config(args.config, overrides).model
    scripted = args.rollouts == "scripted"
    if scripted and not args.passes:
        raise SystemExit(
            "--rollouts scripted goes with --passes (it replaces the generation the other modes measure)"
        )
    memory = _PeakMemory()

    def _measure_apart(option: str, value: str) -> list[dict[str, float]]:
        """One loop or pass measured in a child process (the module docstring says why)."""
        with tempfile.TemporaryDirectory() as scratch:
            rows_file = Path(scratch) / "rows.json"
            child = [sys.executable, __file__, *_without_option(sys.argv[1:], option), option, value,
                     "--rows-out", str(rows_file)]  # fmt: skip
            subprocess.run(child, check=True)
            return json.loads(rows_file.read_text(encoding="utf-8"))

    if args.passes:
        passes = args.passes.split(",")
        unknown = sorted(set(passes) - set(PASSES))
        if unknown:
            raise SystemExit(f"--passes: unknown {unknown}; choose from {', '.join(PASSES)}")
        if args.rows_out:  # a child: its one pass's rows to the parent
            (name,) = passes
            rows = _measure(args.config, configured, args.steps, overrides, args.init_from,
                            training_pass=name, scripted=scripted, memory=memory)  # fmt: skip
            Path(args.rows_out).write_text(json.dumps(rows), encoding="utf-8")
            return
        results = {f"{configured} ({name})": _measure_apart("--passes", name) for name in passes}
        names = list(results)
        args.baseline_model, model = names[0], names[-1]
    elif args.loops:
        loops = args.loops.split(",")
        unknown = sorted(set(loops) - set(LOOPS))
        if unknown:
            raise SystemExit(f"--loops: unknown {unknown}; choose from {', '.join(LOOPS)}")
        if args.rows_out:  # a child: one loop, its rows to the parent
            (loop,) = loops
            rows = _measure(
                args.config, configured, args.steps, overrides, args.init_from, memory=memory, loop=loop
            )
            Path(args.rows_out).write_text(json.dumps(rows), encoding="utf-8")
            return
        results = {f"{configured} ({loop} loop)": _measure_apart("--loops", loop) for loop in loops}
        names = list(results)
        args.baseline_model, model = names[0], names[-1]
    elif args.engines:
        engines = args.engines.split(",")
        results = {
            f"{configured} ({engine})": _measure(
                args.config, configured, args.steps, overrides, args.init_from, engine, memory=memory
            )
            for engine in engines
        }
        names = list(results)
        args.baseline_model, model = names[0], names[-1]  # one engine alone: its split, no ratios
    else:
        model = configured
        results = {
            args.baseline_model: _measure(
                args.config,
                args.baseline_model,
                args.steps,
                overrides,
                args.baseline_init_from,
                memory=memory,
            ),
            model: _measure(args.config, model, args.steps, overrides, args.init_from, memory=memory),
        }

    def mean(name: str, part: str) -> float:
        return sum(r.get(part, 0.0) for r in results[name]) / len(results[name])

    cpu = _cpu_name() or platform.processor() or "unknown CPU"
    print(
        f"GRPO step of {args.config} (mean of {args.steps - 1} step(s) after a warm-up), seconds, on {cpu}:"
    )
    parts = ["generation", "sync", "environment"]
    if args.passes:
        parts += ["scoring", "training", "optimiser", "pass"]
    parts += ["rest", "total"]
    print(
        f"{'model':<40}"
        + "".join(f"{part:>12}" for part in parts)
        + f"{'tokens':>9}{'calls':>7}{'peak GiB':>10}"
    )
    for name in results:
        print(
            f"{name:<40}" + "".join(f"{mean(name, part):>12.3f}" for part in parts)
            + f"{mean(name, 'tokens'):>9.0f}{mean(name, 'tool_calls'):>7.2f}{mean(name, 'peak_gib'):>10.1f}"
        )  # fmt: skip
    print(
        "tokens: completion tokens of the step's rollouts (the model's); calls: environment steps per rollout"
    )
    if args.passes:
        print(
            "scoring: log-probabilities without gradients (reference model); training: the loss's forward and"
        )
        print("backward; pass = scoring + training + optimiser; rest: rewards, padding, TRL's bookkeeping")
        for name in results:
            flops, throughput = mean(name, "flops"), mean(name, "throughput")
            bound = flops / throughput
            print(
                f"{name}: {flops / 1e12:.2f} TFLOP ({mean(name, 'trained_tokens'):,.0f} tokens with gradients, "
                f"{mean(name, 'projected'):,.0f} positions projected; {mean(name, 'scored_tokens'):,.0f} tokens "
                f"without); matmul {throughput / 1e9:.0f} GFLOP/s on the model's shapes: bound {bound:.1f} s, "
                f"pass / bound {mean(name, 'pass') / bound:.2f}x"
            )
    for name in results:
        if mean(name, "tokens") and not scripted:
            print(
                f"{name}: {1000 * mean(name, 'generation') / mean(name, 'tokens'):.1f} s of generation per 1k completion tokens"
            )
    for part in ("generation", "sync", "environment", *(["pass"] if args.passes else []), "rest", "total"):
        if model == args.baseline_model:
            break
        base = mean(args.baseline_model, part)
        if not base:  # the transformers engine has no weight sync: nothing to divide by
            continue
        print(f"{model} / {args.baseline_model}, {part}: {mean(model, part) / base:.2f}x")
    share = mean(model, "environment") / mean(model, "total")
    print(f"environment share of {model}'s step: {100 * share:.3f} %")


def _cpu_name() -> str | None:
    """The CPU's model name (lscpu's), or None where /proc/cpuinfo does not say."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


if __name__ == "__main__":
    main()
