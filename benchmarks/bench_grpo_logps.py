"""GRPO's training pass with each group's prompt computed once, against TRL's own, on one group.

Times the log-probabilities (with entropy) and the backward pass of one GRPO group as TRL 1.16's
`_get_per_token_logps_and_entropies` computes them, and as `sqlenv.training.grpo_shared_prefix`
does (the prompt once, the completions on its cache), for a trainer built from a config exactly as
`sqlenv train grpo` builds it (its model, LoRA, dtype; rollouts on the transformers engine). The
group: `--rollouts` rows sharing one `--prompt-tokens`-token prompt, with completions of
`--completion-tokens` tokens (random token ids: the cost does not depend on them). TRL's path is
timed as the config runs it (`grpo.batch_size` rows per forward pass) and, with `--trl-group`, with
the whole group in one pass (on Qwen's 151k vocabulary that can run out of memory: it was killed at
24 GB on the development machine). The log-probabilities are checked to agree.

Run: .venv/bin/python benchmarks/bench_grpo_logps.py --config configs/cpu-qwen0.5b.yaml
     --spider-dir ../shared/spider [--rollouts 4] [--prompt-tokens 1100] [--completion-tokens 250] [--repeats 2] [--trl-group]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--spider-dir", default=None)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=1_100)
    parser.add_argument("--completion-tokens", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--trl-group", action="store_true", help="also time TRL with the whole group in one pass")
    args = parser.parse_args()
    import torch

    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer
    from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps

    with tempfile.TemporaryDirectory() as out:
        overrides: dict[str, Any] = {"output_dir": out, "sft.enabled": False, "grpo.engine": "transformers",
                                     "live.heldout_questions": 0, "live.eval_every": 0, "live.transcript_every": 0}  # fmt: skip
        if args.spider_dir:
            overrides["spider_dir"] = args.spider_dir
        config = load_config(args.config, overrides)
        trainer = build_grpo_trainer(config)
        model = trainer.model
        generator = torch.Generator().manual_seed(0)
        prompt = torch.randint(100, 20_000, (args.prompt_tokens,), generator=generator)
        rows = [torch.cat([prompt, torch.randint(100, 20_000, (args.completion_tokens,), generator=generator)])
                for _ in range(args.rollouts)]  # fmt: skip
        ids = torch.stack(rows)
        mask = torch.ones_like(ids)
        keep = args.completion_tokens
        trl_scoring = trainer._get_per_token_logps_and_entropies

        def timed(scoring: Any, batch_size: int | None) -> tuple[float, Any]:
            best, logps = float("inf"), None
            for _ in range(args.repeats):
                model.zero_grad(set_to_none=True)
                began = time.perf_counter()
                if batch_size is None:
                    logps, _, _ = scoring(model, ids, mask, keep, compute_entropy=True)
                    logps.mean().backward()
                else:  # as TRL's accumulation runs it: batch_size rows per forward and backward
                    parts = []
                    for start in range(0, len(rows), batch_size):
                        part, _, _ = scoring(model, ids[start : start + batch_size], mask[start : start + batch_size],
                                             keep, compute_entropy=True)  # fmt: skip
                        part.mean().backward()
                        parts.append(part.detach())
                    logps = torch.cat(parts)
                best = min(best, time.perf_counter() - began)
            return best, logps.detach()

        per_pass = config.grpo.batch_size
        print(f"{config.model} ({args.config}): one group of {args.rollouts} rollouts, a {args.prompt_tokens}-token "
              f"prompt, {args.completion_tokens}-token completions; log-probabilities + entropy + backward, "
              f"best of {args.repeats}", flush=True)  # fmt: skip
        # Printed as measured: TRL's whole-group pass can run out of memory (a 151k vocabulary).
        trl_config, trl_logps = timed(trl_scoring, per_pass)
        print(f"TRL, {per_pass} row(s) per pass (the config's): {trl_config:8.2f} s  1.00x", flush=True)
        use_shared_prompt_logps(trainer)
        shared, shared_logps = timed(trainer._get_per_token_logps_and_entropies, None)
        print(f"shared prompt, the group at once:   {shared:8.2f} s  {trl_config / shared:.2f}x", flush=True)
        agree = torch.allclose(trl_logps, shared_logps, atol=1e-3)
        print(f"log-probabilities agree (atol 1e-3): {agree}", flush=True)
        if args.trl_group:
            trl_group, _ = timed(trl_scoring, None)
            print(f"TRL, the group in one pass:         {trl_group:8.2f} s  {trl_config / trl_group:.2f}x", flush=True)

if __name__ == "__main__":
    main()
