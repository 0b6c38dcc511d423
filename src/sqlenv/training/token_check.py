"""Whether a model writes the protocol's tokens: the mean loss of named tokens where SFT data has them.

A warm-up can fit every other token of the oracle trajectories and still leave a rare protocol
token, such as Qwen's `<tool_call>` tag, improbable; the model then writes something else in its
place, TRL parses no tool call, and every GRPO rollout scores 0. `sqlenv train sft` measures the
loss of each such token, teacher-forced on a few training rows, before and after training, prints
both and saves them to `<output_dir>/sft/token_losses.json`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Above this mean loss (nats) the model gives the token a probability below ~0.37 where it belongs.
UNLEARNT_NATS = 1.0
TOOL_CALL_TAGS: tuple[str, ...] = ("<tool_call>", "</tool_call>")


def protocol_tokens(tokenizer: Any, trainable_tokens: Sequence[str]) -> dict[str, int]:
    """The tokens to check, by text: the config's trainable tokens, else the tool-call tags where
    each is a single token of `tokenizer` (Qwen's are; a tokenizer that spells them in several
    tokens learns them as ordinary text).

    Args:
        tokenizer: the model's tokenizer.
        trainable_tokens: the config's `sft.lora.trainable_tokens`.

    Returns:
        {token text: token id}, possibly empty.
    """
    from sqlenv.training.models import one_token_id

    names = list(trainable_tokens) or list(TOOL_CALL_TAGS)
    ids = {name: one_token_id(tokenizer, name) for name in names}
    return {name: token_id for name, token_id in ids.items() if token_id is not None}


def token_losses(model: Any, rows: Sequence[dict[str, list[int]]], tokens: dict[str, int]) -> dict[str, float | None]:
    """The mean negative log-likelihood of each token where a row's learnt part has it.

    Args:
        model: a causal language model (a peft model too).
        rows: tokenised rows with `input_ids` and `assistant_masks` (1 where the model must write).
        tokens: {token text: token id}, as `protocol_tokens` gives.

    Returns:
        {token text: mean loss in nats, or None where no row has the token in its learnt part}.
    """
    import torch

    ids_to_name = {token_id: name for name, token_id in tokens.items()}
    totals: dict[str, list[float]] = {name: [] for name in tokens}
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        for row in rows:
            input_ids, mask = row["input_ids"], row["assistant_masks"]
            # Position i predicts token i + 1: only the positions before a named, learnt token.
            positions = [i for i in range(len(input_ids) - 1) if mask[i + 1] and input_ids[i + 1] in ids_to_name]
            if not positions:
                continue
            with torch.no_grad():
                logits = model(
                    input_ids=torch.tensor([input_ids], device=device),
                    logits_to_keep=torch.tensor(positions, device=device),
                ).logits[0]
            log_probs = logits.float().log_softmax(dim=-1)
            for k, i in enumerate(positions):
                target = input_ids[i + 1]
                totals[ids_to_name[target]].append(-float(log_probs[k, target]))
    finally:
        model.train(was_training)
    return {name: (sum(values) / len(values) if values else None) for name, values in totals.items()}


def unlearnt(losses: dict[str, float | None]) -> list[str]:
    """The tokens whose mean loss is above `UNLEARNT_NATS`.

    Args:
        losses: as `token_losses` returns.

    Returns:
        Their texts, in order.
    """
    return [name for name, loss in losses.items() if loss is not None and loss > UNLEARNT_NATS]
