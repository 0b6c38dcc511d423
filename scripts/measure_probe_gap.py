"""How far vLLM and transformers part on the weight sync's probe text, on equal weights.

The colocated GRPO engine's weight sync (`sqlenv.training.vllm_colocate`) checks after every sync
that vLLM's log-probabilities of `PROBE_TEXT` are the policy's within `PROBE_TOLERANCE`. This
measures the gap the two engines have anyway (vLLM in the dtype given, transformers in float32 as
the trainer holds the policy, or as asked), and what each side of the check costs, so that the tolerance can be
set well above the one and the check kept cheap:

    .venv/bin/python scripts/measure_probe_gap.py qwen2.5-coder-0.5b --dtype bfloat16
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model name (smollm2-135m, qwen2.5-coder-0.5b, ...) or directory")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"], help="vLLM's dtype")
    parser.add_argument(
        "--policy-dtype", default="float32", choices=["bfloat16", "float32"], help="transformers' dtype"
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each side")
    args = parser.parse_args()

    from sqlenv.agents.vllm_engine import configure_vllm_environment

    configure_vllm_environment()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM

    from sqlenv.agents.local_models import model_source
    from sqlenv.training.vllm_colocate import (
        PROBE_TOLERANCE,
        engine_log_probs,
        mean_gap,
        policy_log_probs,
        probe_ids,
    )

    source = model_source(args.model)
    llm = LLM(model=source, dtype=args.dtype, max_model_len=512, enable_prefix_caching=True)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, args.policy_dtype))
    ids = probe_ids(AutoTokenizer.from_pretrained(source))

    def timed(run: Callable[[], list[float]]) -> tuple[list[float], float]:
        result: list[float] = []
        seconds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = run()
            seconds.append(time.perf_counter() - started)
        return result, statistics.median(seconds)

    engine, engine_s = timed(lambda: engine_log_probs(llm, ids))
    policy, policy_s = timed(lambda: policy_log_probs(model, ids))
    gaps = [abs(e - p) for e, p in zip(engine, policy, strict=True)]
    print(
        f"{args.model}: vLLM {args.dtype} against transformers {args.policy_dtype}, {len(ids)} probe tokens"
    )
    print(f"  mean gap {mean_gap(engine, policy):.5f} nats a token, largest {max(gaps):.5f}")
    print(f"  tolerance {PROBE_TOLERANCE[args.dtype]}")
    print(f"  median of {args.repeats}: vLLM {engine_s * 1000:.0f} ms, transformers {policy_s * 1000:.0f} ms")


if __name__ == "__main__":
    main()
