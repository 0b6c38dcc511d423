"""The training benchmarks' shared parts: a per-step clock and their common options."""

from __future__ import annotations

import argparse
import time
from typing import Any

from transformers import TrainerCallback


class StepClock(TrainerCallback):
    """Wall seconds of each optimisation step, in order (`durations`)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.started = 0.0

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        self.started = time.perf_counter()

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.durations.append(time.perf_counter() - self.started)


def parse_timing_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The parser's options plus `--threads`; at least 2 `--steps` (the first is a warm-up); the
    torch thread count set."""
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.steps < 2:
        raise SystemExit("--steps must be at least 2: the first step is a warm-up")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return args


def timing_sft_config(output_dir: str, *, steps: int, batch_size: int, accumulation: int, bf16: bool) -> Any:
    """TRL's SFTConfig as `sqlenv train sft` sets it (`sqlenv.training.sft`), for `steps` timed
    optimisation steps over the rows in order, saving nothing."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=output_dir,
        max_steps=steps,
        learning_rate=1e-5,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_length=None,
        assistant_only_loss=False,
        activation_checkpointing=False,
        bf16=bf16,
        use_cpu=True,
        train_sampling_strategy="sequential",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )
