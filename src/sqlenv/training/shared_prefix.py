"""SFT on conversations that open with the same tokens: the shared opening is computed once.

Every SFT trajectory starts with the same system message and tool definitions (~590 tokens of a
~1,100-token Spider trajectory with SmolLM2's template). A plain SFT step runs each conversation
whole, so that opening goes forward and backward once per conversation. Here an optimisation
batch is cut at its longest common token prefix:

1. the prefix runs forward once, keeping its key/value cache (with the autograd graph);
2. each conversation's remainder runs on top of a detached copy of that cache, in micro-batches of
   `micro_batch_size`, and its loss is backpropagated at once (so only one micro-batch's
   activations are held at a time); the cache's gradients are summed in float32;
3. the summed cache gradient is backpropagated through the prefix once.

The gradients are those of the plain step (the loss is the same sum over the same assistant
tokens; only the order of the floating-point sums differs), while the prefix's work is done once
per batch instead of once per conversation. `benchmarks/bench_sft_step.py` measures the speed-up;
`tests/test_shared_prefix.py` checks the gradients against the plain step.

The cut is one token before the common prefix ends, so that the logits predicting the first
differing token come from the remainder's forward. Nothing in the prefix may be a training target
(it is the system message); a batch where it is, or whose common prefix is too short to pay, a
model whose cache is not a plain per-layer key/value cache, fp16 loss scaling and training over
several processes take the plain step instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from sqlenv.training.models import token_rows

IGNORE_INDEX = -100
MIN_SHARED_TOKENS = 32  # below this, the extra forward call costs more than sharing saves


@dataclass(frozen=True)
class SharedPrefixStep:
    """What one shared-prefix step did: the batch's loss (over the normaliser), how
    many of those were predicted right (greedy), and the tokens run through the model."""

    loss: float
    correct: int
    entropy: float  # summed over the target tokens
    targets: int
    tokens_run: int
    tokens_in_batch: int


def common_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """Tokens at the start that every row of the (right-padded) batch has, and has the same."""
    same = (input_ids == input_ids[:1]).all(dim=0) & attention_mask.bool().all(dim=0)
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else input_ids.shape[1]


def shared_prefix_cut(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
) -> int | None:
    """Where to cut this batch (the prefix is `[0, cut)`), or None when the plain step is better:
    one conversation, a short common prefix, or a training target inside the prefix."""
    if input_ids.shape[0] < 2:
        return None
    cut = common_prefix_length(input_ids, attention_mask) - 1
    if cut < MIN_SHARED_TOKENS:
        return None
    # Targets at positions 1..cut are predicted from the prefix's own logits, never computed here.
    if (labels[:, 1 : cut + 1] != IGNORE_INDEX).any():
        return None
    return cut


def plain_kv_cache(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """The per-layer (keys, values) of a plain dynamic cache, or None for any other kind (sliding
    windows, hybrid or quantised caches), whose layers cannot be rebuilt from two tensors."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer or layer.keys is None for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


def shared_prefix_backward(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    labels: torch.Tensor,
    cut: int,
    *,
    micro_batch_size: int = 1,
    normalizer: int | None = None,
) -> SharedPrefixStep | None:
    """Forward and backward of the batch's token loss summed and divided by `normalizer` (default:
    the batch's target tokens, a mean), sharing `[0, cut)`: the parameters' `.grad` receive the
    same sums as `loss.backward()` of the plain step would give. None (and nothing done) when the
    model's cache cannot be shared (`plain_kv_cache`)."""
    from transformers import DynamicCache

    targets = int((labels[:, 1:] != IGNORE_INDEX).sum())
    normalizer = normalizer or max(targets, 1)
    lengths = attention_mask.sum(dim=1).tolist()
    prefix = model(input_ids=input_ids[:1, :cut], use_cache=True, logits_to_keep=1)
    kv = plain_kv_cache(prefix.cache)
    if kv is None:
        return None
    leaves = [(k.detach().requires_grad_(), v.detach().requires_grad_()) for k, v in kv]
    summed = [
        (torch.zeros_like(k, dtype=torch.float32), torch.zeros_like(v, dtype=torch.float32)) for k, v in kv
    ]
    loss_sum, correct, entropy, tokens_run = 0.0, 0, 0.0, cut
    for start in range(0, len(lengths), micro_batch_size):
        rows = list(range(start, min(start + micro_batch_size, len(lengths))))
        end = max(int(lengths[r]) for r in rows)
        size = len(rows)
        cache = DynamicCache(
            ddp_cache_data=[(k.expand(size, -1, -1, -1), v.expand(size, -1, -1, -1)) for k, v in leaves]
        )
        mask = torch.cat(
            [
                torch.ones(size, cut, dtype=attention_mask.dtype, device=attention_mask.device),
                attention_mask[rows, cut:end],
            ],
            dim=1,
        )
        positions = torch.arange(cut, end, device=input_ids.device).expand(size, -1)
        out = model(
            input_ids=input_ids[rows, cut:end],
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            use_cache=True,
        )
        logits = out.logits[:, :-1].float()
        wanted = labels[rows, cut + 1 : end]
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            wanted.reshape(-1),
            ignore_index=IGNORE_INDEX,
            reduction="sum",
        )
        (loss / normalizer).backward()
        loss_sum += float(loss.detach())
        with torch.no_grad():
            scored = wanted != IGNORE_INDEX
            correct += int((logits.argmax(dim=-1).eq(wanted) & scored).sum())
            log_probs = logits[scored].log_softmax(dim=-1)
            entropy -= float((log_probs.exp() * log_probs).sum())
        tokens_run += int(attention_mask[rows, cut:end].sum())
        for (k_sum, v_sum), (k_leaf, v_leaf) in zip(summed, leaves, strict=True):
            k_sum += k_leaf.grad
            v_sum += v_leaf.grad
            k_leaf.grad = v_leaf.grad = None
        del out, logits, loss
    outputs = [t for pair in kv for t in pair]
    grads = [s.to(t.dtype) for s, t in zip((s for pair in summed for s in pair), outputs, strict=True)]
    torch.autograd.backward(outputs, grads)
    return SharedPrefixStep(
        loss=loss_sum / normalizer,
        correct=correct,
        entropy=entropy,
        targets=targets,
        tokens_run=tokens_run,
        tokens_in_batch=int(attention_mask.sum()),
    )


def shared_prefix_trainer_class() -> type:
    """TRL's SFTTrainer with the shared-prefix step (imported lazily: TRL is a training extra)."""
    from trl import SFTTrainer

    class SharedPrefixSFTTrainer(SFTTrainer):
        """SFTTrainer whose training step shares each batch's common prefix. The batch is the
        whole optimisation batch (`per_device_train_batch_size` = the config's batch size times
        its gradient accumulation steps, accumulation 1: `run_sft` sets it so); `micro_batch_size`
        conversations' remainders run at a time, so memory is that of the plain step at the
        config's batch size."""

        def __init__(self, *args: Any, micro_batch_size: int = 1, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.micro_batch_size = micro_batch_size
            self.shared_steps = 0
            self.plain_steps = 0

        def training_step(
            self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None
        ) -> torch.Tensor:
            # Decided on the batch as it comes: the plain step prepares its inputs itself.
            cut = shared_prefix_cut(inputs["input_ids"], inputs["attention_mask"], inputs["labels"])
            # This step calls backward itself: without the accelerator's fp16 loss scaling and
            # gradient synchronisation across processes, so those setups take the plain step.
            if self.args.fp16 or self.accelerator.num_processes > 1:
                cut = None
            if cut is None:
                return self._plain_step(model, inputs, num_items_in_batch)
            inputs = self._prepare_inputs(inputs)
            model.train()
            with self.compute_loss_context_manager():
                step = shared_prefix_backward(
                    model,
                    inputs["input_ids"],
                    inputs["attention_mask"],
                    inputs["labels"],
                    cut,
                    micro_batch_size=self.micro_batch_size,
                    # As the plain step: the targets of all accumulated batches when the trainer
                    # counted them, else this batch's, once per accumulated batch.
                    normalizer=int(num_items_in_batch)
                    if num_items_in_batch is not None
                    else int((inputs["labels"][:, 1:] != IGNORE_INDEX).sum())
                    * self.current_gradient_accumulation_steps,
                )
            if step is None:
                return self._plain_step(model, inputs, num_items_in_batch)
            self.shared_steps += 1
            # The metrics SFTTrainer.compute_loss logs, where this step can give them.
            metrics = self._metrics["train"]
            metrics["entropy"].append(step.entropy / max(step.targets, 1))
            metrics["mean_token_accuracy"].append(step.correct / max(step.targets, 1))
            self._total_train_tokens += step.tokens_in_batch
            metrics["num_tokens"] = [self._total_train_tokens]
            return torch.tensor(step.loss, device=inputs["input_ids"].device)

        def _plain_step(self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any) -> torch.Tensor:
            """TRL's own step, for a batch this one cannot share."""
            if token_rows(model):
                raise ValueError(
                    "sft.lora.trainable_tokens: this batch has no shared opening to compute once (or the "
                    "setup is fp16, several processes, activation checkpointing or a non-plain cache), and "
                    "TRL's own step cannot train token rows (its fused output layer does not see them)"
                )
            self.plain_steps += 1
            return super().training_step(model, inputs, num_items_in_batch)

    return SharedPrefixSFTTrainer
