"""How long a vLLM engine takes to start and to decode, compiled (vLLM's default) against eager
(`SQLENV_VLLM_EAGER=1`: no graph compilation), each in a fresh process as `sqlenv eval` starts one.

    python benchmarks/bench_vllm_start.py [--model smollm2-135m] [--dtype float32] [--tokens 128] [--rounds 1]

Each round starts both modes once, one after the other; compiled first, so the compiled start of
the first round is the cold one where vLLM's compile cache (~/.cache/vllm) was empty and the later
rounds' are warm. Prints each start's and decode's seconds and the eager/compiled ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# One engine, one greedy request of --tokens new tokens after a 600-token prompt, timed.
_CHILD = """
import json, sys, time
from sqlenv.agents.batched_generation import GenerationRequest
from sqlenv.agents.local_models import model_source
from sqlenv.agents.vllm_engine import VLLMEngine

model, dtype, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
began = time.perf_counter()
engine = VLLMEngine.load(model_source(model), set(), dtype=dtype, max_model_len=2048)
started = time.perf_counter()
reply = engine.generate(GenerationRequest(prompt_ids=list(range(100, 700)), cache=None, max_new_tokens=tokens))
done = time.perf_counter()
eager = engine.llm.llm_engine.vllm_config.model_config.enforce_eager
print(json.dumps({"start_s": started - began, "decode_s": done - started, "tokens": len(reply.new_ids), "eager": eager}))
"""


def _measure(model: str, dtype: str, tokens: int, eager: bool) -> dict:
    env = {**os.environ, "SQLENV_VLLM_EAGER": "1" if eager else "0"}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, model, dtype, str(tokens)], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the {'eager' if eager else 'compiled'} engine failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["eager"] is eager, result  # the variable reached the engine
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for round_ in range(1, args.rounds + 1):
        compiled = _measure(args.model, args.dtype, args.tokens, eager=False)
        eager = _measure(args.model, args.dtype, args.tokens, eager=True)
        for name, r in (("compiled", compiled), ("eager", eager)):
            print(f"round {round_} {name:8}: start {r['start_s']:6.1f} s, {r['tokens']} tokens in {r['decode_s']:5.1f} s")
        print(
            f"round {round_} eager/compiled: start {eager['start_s'] / compiled['start_s']:.2f}x, "
            f"decode {eager['decode_s'] / compiled['decode_s']:.2f}x"
        )


if __name__ == "__main__":
    main()
