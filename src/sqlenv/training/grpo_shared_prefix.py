"""GRPO log-probabilities with each group's prompt computed once.

The rollouts of a GRPO group share their prompt (system message, tools, question: ~1,100 of the
~1,300 tokens of a Qwen rollout), and TRL 1.16's `_get_per_token_logps_and_entropies` runs every
row whole, so the prompt goes forward (and backward) once per rollout. Here the rows of a batch
whose prompt tokens and prompt mask are identical are scored together:

1. the prompt, without its left padding and without its last token, runs forward once with a
   key/value cache (and its autograd graph): `logits_to_keep=1`, so no vocabulary projection;
2. each row's last prompt token and completion (less its last token) run on that cache, expanded
   to the group's rows, through TRL's fused LM head with pre-shifted labels (`shift_labels`): the
   log-probability (and entropy) of each completion token, as TRL computes it.

The gradients flow back through the expanded cache into the prefix once per group (autograd sums
them). The result is TRL's up to the order of floating-point sums (`tests/test_grpo_shared_prefix.py`
checks log-probabilities, loss and gradients against TRL's own on SmolLM2). Rows with a prompt of
their own, a model without TRL's fused head, and multimodal inputs take TRL's path.
"""

from __future__ import annotations

from typing import Any

import torch

from sqlenv.training.shared_prefix import IGNORE_INDEX, plain_kv_cache


def shared_prompt_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    compute_entropy: bool,
    autocast: Any,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """Per-token log-probabilities (and entropies) of the completions, each prompt computed once.

    Args:
        model: the (PEFT-wrapped) causal LM, with TRL's fused LM head added.
        input_ids: left-padded prompts then right-padded completions, `(rows, P + C)`.
        attention_mask: the same shape; 0 on padding.
        logits_to_keep: C, the completion length.
        compute_entropy: also return the entropy of each completion position's distribution.
        autocast: the trainer's autocast context factory (`accelerator.autocast`).

    Returns:
        `(log_probs, entropies)`, each `(rows, C)` in the input's row order (entropies None unless
        asked for); padding positions are 0, as TRL's. None when the model's cache is not a plain
        dynamic one (`plain_kv_cache`: sliding-window, hybrid or quantised caches).
    """
    from transformers import DynamicCache

    rows, width = input_ids.shape
    prompt_width = width - logits_to_keep
    groups: dict[tuple[int, ...], list[int]] = {}
    for row in range(rows):
        real = attention_mask[row, :prompt_width].bool()
        key = tuple(input_ids[row, :prompt_width][real].tolist())
        groups.setdefault(key, []).append(row)
    out_rows: list[torch.Tensor] = []
    out_entropy: list[torch.Tensor] = []
    order: list[int] = []
    for prompt, members in groups.items():
        index = torch.tensor(members, device=input_ids.device)
        length = len(prompt)
        prefix = torch.tensor([prompt[:-1]], device=input_ids.device)
        with autocast():
            kv = plain_kv_cache(model(input_ids=prefix, use_cache=True, logits_to_keep=1).cache)
        if kv is None:
            return None
        count = len(members)
        expanded = DynamicCache(
            ddp_cache_data=[(k.expand(count, -1, -1, -1), v.expand(count, -1, -1, -1)) for k, v in kv]
        )
        completion = input_ids[index, prompt_width:]
        completion_mask = attention_mask[index, prompt_width:]
        suffix = torch.cat([input_ids[index, prompt_width - 1 : prompt_width], completion[:, :-1]], dim=1)
        suffix_mask = torch.cat(
            [torch.ones(len(members), length, dtype=attention_mask.dtype, device=attention_mask.device),
             completion_mask[:, :-1]],
            dim=1,
        )  # fmt: skip
        positions = torch.arange(length - 1, length - 1 + logits_to_keep, device=input_ids.device)
        labels = completion.masked_fill(completion_mask == 0, IGNORE_INDEX)
        with autocast():
            outputs = model(
                input_ids=suffix,
                attention_mask=suffix_mask,
                position_ids=positions.expand(len(members), -1),
                cache=expanded,
                shift_labels=labels,
                fused_lm_head=True,
            )
        out_rows.append(outputs.log_probs)
        if compute_entropy:
            out_entropy.append(outputs.entropy)
        order.extend(members)
    inverse = torch.empty(rows, dtype=torch.long, device=input_ids.device)
    inverse[torch.tensor(order, device=input_ids.device)] = torch.arange(rows, device=input_ids.device)
    log_probs = torch.cat(out_rows)[inverse]
    entropies = torch.cat(out_entropy)[inverse] if compute_entropy else None
    return log_probs, entropies


def use_shared_prompt_logps(trainer: Any) -> None:
    """Make a `GRPOTrainer` score its rollouts with `shared_prompt_logps` (module docstring).

    Calls with multimodal inputs or MoE auxiliary losses keep TRL's own method, and so does a model
    whose cache cannot be shared.

    Args:
        trainer: a TRL 1.16 `GRPOTrainer` (its `_get_per_token_logps_and_entropies` is replaced on
            the instance).
    """
    original = trainer._get_per_token_logps_and_entropies
    shareable = True  # until the model's cache turns out not to be a plain dynamic one

    def scored(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
               batch_size: int | None = None, compute_entropy: bool = False, compute_aux_loss: bool = False,
               **extra: Any) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
        nonlocal shareable
        if shareable and not compute_aux_loss and all(value is None for value in extra.values()):
            shared = shared_prompt_logps(
                model, input_ids, attention_mask, logits_to_keep,
                compute_entropy=compute_entropy, autocast=trainer.accelerator.autocast,
            )  # fmt: skip
            if shared is not None:
                return shared[0], shared[1], None
            shareable = False
        return original(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                        compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)  # fmt: skip

    trainer._get_per_token_logps_and_entropies = scored
