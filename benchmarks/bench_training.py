"""Training throughput of the CPU preset: SFT tokens/s in float32 against bf16 autocast, on this
machine, and which of the two `bf16: auto` picks here.

bf16 autocast halves the time of an SFT step on a CPU that computes bfloat16 (AVX-512 BF16, AMX)
and multiplies it on one that does not (AVX2 only), where PyTorch emulates it. Both are measured
here with TRL's `SFTTrainer` on the same oracle trajectories (the demo dataset's, rendered as
`sqlenv train sft` renders them), one trajectory per optimisation step, in the same order:
1. float32: the baseline;
2. bf16 autocast: tokens/s and the ratio of its step time to float32's.
The first step of each is a warm-up and is not timed.

Run: .venv/bin/python benchmarks/bench_training.py [--steps 3] [--max-length 1000] [--threads N]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
from typing import Any


def _rows(max_length: int, steps: int) -> Any:
    from sqlenv.data import load_dataset
    from sqlenv.training.models import load_tokenizer
    from sqlenv.training.sft_data import sft_dataset

    tokenizer = load_tokenizer("smollm2-135m")
    rows, _ = sft_dataset(load_dataset("demo"), tokenizer, seed=0, max_length=max_length)
    if len(rows) < steps:
        raise SystemExit(f"only {len(rows)} demo trajectories fit {max_length} tokens; lower --steps")
    return tokenizer, rows.select(range(steps))


def _time_steps(tokenizer: Any, rows: Any, bf16: bool) -> tuple[float, int]:
    """(seconds, tokens) of the optimisation steps after the first: one trajectory each, in order."""
    from trl import SFTTrainer

    from sqlenv.training.models import load_trainable
    from training_timing import (  # benchmarks/, on the path when a benchmark runs as a script
        StepClock,
        timing_sft_config,
    )

    _, model = load_trainable("smollm2-135m")
    clock = StepClock()
    with tempfile.TemporaryDirectory() as out:
        # One trajectory per step.
        args = timing_sft_config(out, steps=len(rows), batch_size=1, accumulation=1, bf16=bf16)
        trainer = SFTTrainer(
            model=model, args=args, train_dataset=rows, processing_class=tokenizer, callbacks=[clock]
        )
        lengths = [len(ids) for ids in trainer.train_dataset["input_ids"]]
        trainer.train()
    assert len(clock.durations) == len(lengths), (clock.durations, lengths)
    return sum(clock.durations[1:]), sum(lengths[1:])


def main() -> None:
    from training_timing import parse_timing_args

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=3, help="optimisation steps per setting, the first untimed"
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=1000,
        help="longest trajectory, in tokens (the demo's shortest are ~900)",
    )
    args = parse_timing_args(parser)
    import torch

    from sqlenv.training.models import native_bf16, resolve_bf16

    native, device = native_bf16()
    tokenizer, rows = _rows(args.max_length, args.steps)
    print(
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads; {device}: "
        f"{'computes' if native else 'no native'} bfloat16; bf16: auto picks {resolve_bf16('auto', native, device, 'sft')}"
    )
    print(f"{args.steps} SFT steps per setting, one demo trajectory each, the first untimed")
    base_seconds, tokens = _time_steps(tokenizer, rows, bf16=False)
    base_rate = tokens / base_seconds
    print(
        f"float32        {tokens:6d} tokens in {base_seconds:7.1f} s: {base_rate:7.1f} tokens/s  (baseline)"
    )
    seconds, _ = _time_steps(tokenizer, rows, bf16=True)
    rate = tokens / seconds
    print(
        f"bf16 autocast  {tokens:6d} tokens in {seconds:7.1f} s: {rate:7.1f} tokens/s  "
        f"step time x{seconds / base_seconds:.2f} of float32's"
    )


if __name__ == "__main__":
    main()
