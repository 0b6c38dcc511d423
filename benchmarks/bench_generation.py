"""Generation speed by engine: prefill and decode tokens/s for 1, 8 and 16 sequences, vLLM against
transformers, and against this machine's memory bandwidth.

Each sequence is a different `--prompt-tokens`-token prompt (random token ids, no shared prefix);
prefill is timed as a 1-token generation, decode as `--new-tokens` more tokens after it (the
prompt then comes from the engine's cache: vLLM's prefix cache, transformers' key/value cache), so
decode tokens/s = new tokens x sequences / (time - prefill time). transformers decodes the
sequences as one batch (`model.generate`); vLLM as one `LLM.generate` call. Each engine runs in a
process of its own; load time is printed apart.

The bound: decoding reads every weight once per step, so one sequence can decode at most
bandwidth / weight bytes tokens per second. The bandwidth is measured in the same run (a NumPy
copy of 1 GiB, bytes read + written per second, best of 5), and each decode rate is printed as a
share of that bound (several sequences share one read of the weights, so they can pass 100 %).

Run: .venv/bin/python benchmarks/bench_generation.py [--model qwen2.5-coder-0.5b]
     [--sequences 1,8,16] [--prompt-tokens 1000] [--new-tokens 64] [--engines transformers,vllm]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def memory_bandwidth_gb_s() -> float:
    """Bytes read plus bytes written per second of a 1 GiB NumPy copy, best of 5, in GB/s."""
    import numpy as np

    source = np.ones(1 << 27, dtype=np.float64)  # 1 GiB
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - began)
    return 2 * source.nbytes / best / 1e9


def _prompts(count: int, length: int, seed: int) -> list[list[int]]:
    import random

    rng = random.Random(seed)
    return [[rng.randrange(1_000, 20_000) for _ in range(length)] for _ in range(count)]


def measure(args: argparse.Namespace) -> dict[str, object]:
    """One engine: load time, weight bytes, and (prefill, decode) tokens/s per sequence count."""
    from sqlenv.agents.devices import resolve_device
    from sqlenv.agents.local_models import load_chat_model, model_source, play_dtype

    device = resolve_device(None)
    dtype = play_dtype(device)
    began = time.perf_counter()
    if args.engine == "vllm":
        from sqlenv.agents.vllm_engine import configure_vllm_environment

        configure_vllm_environment()
        from vllm import LLM, SamplingParams

        llm = LLM(model=model_source(args.model), dtype=dtype, max_model_len=args.prompt_tokens + args.new_tokens + 16,
                  seed=0, skip_tokenizer_init=True, enable_prefix_caching=True)  # fmt: skip
        weights = _checkpoint_parameters(args.model) * (2 if dtype == "bfloat16" else 4)

        def run(prompts: list[list[int]], new: int) -> float:
            params = SamplingParams(max_tokens=new, min_tokens=new, temperature=0.0, detokenize=False)
            start = time.perf_counter()
            llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
            return time.perf_counter() - start

    else:
        import torch

        model = load_chat_model(args.model).model
        weights = sum(p.numel() * p.element_size() for p in model.parameters())

        def run(prompts: list[list[int]], new: int) -> float:
            ids = torch.tensor(prompts)
            start = time.perf_counter()
            with torch.no_grad():
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                               min_new_tokens=new, do_sample=False)  # fmt: skip
            return time.perf_counter() - start

    load_s = time.perf_counter() - began
    run(_prompts(1, 32, seed=99), 4)  # warm-up (vLLM compiles some shapes on first use)
    rows = []
    for count in args.sequences:
        prefill = run(_prompts(count, args.prompt_tokens, seed=count), 1)
        # A new set of prompts: prefill again, then decode; the decode time is the difference.
        prompts = _prompts(count, args.prompt_tokens, seed=1_000 + count)
        whole = run(prompts, args.new_tokens + 1)
        decode = max(whole - prefill, 1e-9)
        rows.append({"sequences": count, "prefill_tok_s": round(count * args.prompt_tokens / prefill, 1),
                     "decode_tok_s": round(count * args.new_tokens / decode, 1)})  # fmt: skip
        print(json.dumps(rows[-1] | {"engine": args.engine}), file=sys.stderr, flush=True)
    return {"engine": args.engine, "dtype": dtype, "load_s": round(load_s, 1), "weight_bytes": weights, "rows": rows}


def _checkpoint_parameters(model: str) -> int:
    """How many parameters the model's checkpoint holds (vLLM's CPU backend repacks its linear
    weights into its own handles, so they are counted from the files it loaded)."""
    from pathlib import Path

    from safetensors import safe_open

    from sqlenv.agents.local_models import model_source

    count = 0
    for file in Path(model_source(model)).glob("*.safetensors"):
        with safe_open(str(file), "pt") as tensors:
            for name in tensors.keys():  # noqa: SIM118 (safe_open is not a dict)
                count += _numel(tensors.get_slice(name).get_shape())
    return count


def _numel(shape: list[int]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--sequences", default="1,8,16")
    parser.add_argument("--prompt-tokens", type=int, default=1_000)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--engines", default="transformers,vllm")
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.sequences = [int(s) for s in str(args.sequences).split(",")]
    if args.engine:
        print(json.dumps(measure(args)))
        return
    bandwidth = memory_bandwidth_gb_s()
    results = {}
    for engine in args.engines.split(","):
        command = [sys.executable, __file__, "--engine", engine, "--model", args.model,
                   "--sequences", ",".join(map(str, args.sequences)), "--prompt-tokens", str(args.prompt_tokens),
                   "--new-tokens", str(args.new_tokens)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
        results[engine] = json.loads(done.stdout.strip().splitlines()[-1])
    weights = max(r["weight_bytes"] for r in results.values())
    bound = bandwidth * 1e9 / weights
    print(f"{args.model}: {weights / 1e9:.2f} GB of weights; memory bandwidth {bandwidth:.1f} GB/s (copy, "
          f"read+written), so one sequence decodes at most {bound:.1f} tokens/s; {os.cpu_count()} cores; "
          f"prompts of {args.prompt_tokens} tokens, {args.new_tokens} new tokens")  # fmt: skip
    print("engine        dtype     load  sequences  prefill tok/s  decode tok/s  decode vs bound  vs transformers")
    base = {r["sequences"]: r for r in results.get("transformers", {"rows": []})["rows"]}
    for engine, measured in results.items():
        for row in measured["rows"]:
            reference = base.get(row["sequences"])
            ratio = (f"{row['prefill_tok_s'] / reference['prefill_tok_s']:.2f}x / "
                     f"{row['decode_tok_s'] / reference['decode_tok_s']:.2f}x") if reference else "-"  # fmt: skip
            print(f"{engine:<13} {measured['dtype']:<8} {measured['load_s']:>5.0f}s {row['sequences']:>10}  "
                  f"{row['prefill_tok_s']:>13.1f}  {row['decode_tok_s']:>12.1f}  "
                  f"{100 * row['decode_tok_s'] / bound:>14.0f}%  {ratio:>15}")  # fmt: skip


if __name__ == "__main__":
    main()
