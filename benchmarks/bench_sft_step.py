"""SFT speed of the shared-prefix step (`sft.shared_prefix`) against TRL's plain step.

Every SFT trajectory opens with the same system message and tool definitions. TRL's SFTTrainer
runs each conversation whole (the CPU config: batch 1, 8 accumulated per optimisation step); the
shared-prefix trainer (`sqlenv.training.shared_prefix`) runs the optimisation batch's common
opening once. Both are measured here on the same trajectories, in the same order, with the same
optimisation batch and the same bf16 setting (`auto`, as the configs):
1. TRL's SFTTrainer, batch 1 x `--batch` accumulated: the baseline;
2. the shared-prefix trainer, one batch of `--batch` (its remainders one at a time).
The first optimisation step of each is a warm-up and is not timed. Tokens/s counts every token of
every conversation, the shared ones once per conversation as the plain step computes them, so the
two rates compare the same work done.

Run: .venv/bin/python benchmarks/bench_sft_step.py [--spider-dir ../shared/spider] [--steps 3] [--batch 8]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
from pathlib import Path
from typing import Any


def _rows(spider_dir: Path | None, max_length: int, count: int) -> tuple[Any, Any, str]:
    from sqlenv.data import load_dataset
    from sqlenv.training.models import load_tokenizer
    from sqlenv.training.sft_data import sft_dataset

    tokenizer = load_tokenizer("smollm2-135m")
    name = "spider10" if spider_dir else "demo"
    rows, _ = sft_dataset(
        load_dataset(name, spider_dir), tokenizer, seed=0, max_length=max_length, max_examples=count
    )
    if len(rows) < count:
        raise SystemExit(
            f"only {len(rows)} {name} trajectories fit {max_length} tokens; lower --steps or --batch"
        )
    return tokenizer, rows, name


def _time_steps(tokenizer: Any, rows: Any, batch: int, shared: bool, bf16: bool) -> tuple[float, int, int]:
    """(seconds, tokens, shared steps) of the optimisation steps after the first."""
    from trl import SFTTrainer

    from sqlenv.training.models import load_trainable
    from sqlenv.training.shared_prefix import shared_prefix_trainer_class
    from training_timing import (  # benchmarks/, on the path when a benchmark runs as a script
        StepClock,
        timing_sft_config,
    )

    _, model = load_trainable("smollm2-135m")
    clock = StepClock()
    with tempfile.TemporaryDirectory() as out:
        args = timing_sft_config(
            out,
            steps=len(rows) // batch,
            batch_size=batch if shared else 1,
            accumulation=1 if shared else batch,
            bf16=bf16,
        )
        trainer_class, extra = (
            (shared_prefix_trainer_class(), {"micro_batch_size": 1}) if shared else (SFTTrainer, {})
        )
        trainer = trainer_class(
            model=model, args=args, train_dataset=rows, processing_class=tokenizer, callbacks=[clock], **extra
        )
        lengths = [len(ids) for ids in trainer.train_dataset["input_ids"]]
        trainer.train()
    assert len(clock.durations) == len(lengths) // batch, (clock.durations, lengths)
    return sum(clock.durations[1:]), sum(lengths[batch:]), getattr(trainer, "shared_steps", 0)


def main() -> None:
    from training_timing import parse_timing_args

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--spider-dir", type=Path, default=None, help="spider10's train trajectories (default: the demo's)"
    )
    parser.add_argument(
        "--steps", type=int, default=3, help="optimisation steps per trainer, the first untimed"
    )
    parser.add_argument(
        "--batch", type=int, default=8, help="conversations per optimisation step (the CPU config's 8)"
    )
    parser.add_argument("--max-length", type=int, default=1536, help="longest trajectory, in tokens")
    args = parse_timing_args(parser)
    import torch

    from sqlenv.training.models import native_bf16, resolve_bf16
    from sqlenv.training.shared_prefix import common_prefix_length

    native, device = native_bf16()
    bf16 = resolve_bf16("auto", native, device, "sft")
    tokenizer, rows, name = _rows(args.spider_dir, args.max_length, args.steps * args.batch)
    ids = [row["input_ids"] for row in rows]
    shortest = min(map(len, ids))
    shared = common_prefix_length(torch.tensor([a[:shortest] for a in ids]), torch.ones(len(ids), shortest))
    mean = sum(map(len, ids)) / len(ids)
    print(
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads; {device}; "
        f"bf16 autocast {'on' if bf16 else 'off'} (auto)"
    )
    print(
        f"{args.steps} optimisation steps of {args.batch} {name} trajectories per trainer, the first untimed; "
        f"{mean:.0f} tokens per trajectory, {shared} of them the common opening"
    )
    base_seconds, tokens, _ = _time_steps(tokenizer, rows, args.batch, shared=False, bf16=bf16)
    base_rate = tokens / base_seconds
    print(
        f"TRL SFTTrainer (plain)  {tokens:6d} tokens in {base_seconds:7.1f} s: {base_rate:6.1f} tokens/s  (baseline)"
    )
    seconds, _, shared_steps = _time_steps(tokenizer, rows, args.batch, shared=True, bf16=bf16)
    rate = tokens / seconds
    print(
        f"shared prefix           {tokens:6d} tokens in {seconds:7.1f} s: {rate:6.1f} tokens/s  "
        f"x{rate / base_rate:.2f} the baseline's speed ({shared_steps} of {args.steps} steps shared)"
    )


if __name__ == "__main__":
    main()
