"""GRPO's training pass with each group's prompt computed once per optimisation step.

TRL 1.16's `GRPOTrainer` scores rollouts with `_get_per_token_logps_and_entropies`: every row of a
micro-batch runs whole (its prompt, then its completion right-padded to the step's longest), and on
a CPU its fused LM head projects every position onto the vocabulary (151,936 entries for Qwen),
prompt and padding included. `use_shared_prompt_logps` replaces that method on a trainer with one
that computes what the loss uses:

1. each prompt (the rows whose prompt tokens are equal: a GRPO group) runs forward once, without
   its last token and without the LM head, keeping its key/value cache. Inside the trainer's
   `training_step` one forward serves every micro-batch of the optimisation step: the rows run on a
   detached copy of the cache, whose gradients are summed in float32 after each micro-batch's
   backward and sent back through the prompt once, in the step's last micro-batch (before the
   optimiser step). Called directly (tests, benchmarks), the rows run on the cache itself, so the
   caller's one backward covers the prompt;
2. each row runs alone, from its last prompt token to the last token the loss uses: no padding,
   nothing after it (causal attention: later tokens change nothing before them);
3. only the positions the loss uses (TRL's completion mask times its `tool_mask`, which a
   `rollout_func`'s `env_mask` becomes: 0 on tokens the environment wrote) are projected onto the
   vocabulary, through TRL's own kernel (`trl.kernels.ChunkedLogProbFunction`, as TRL's fused head
   calls it); the other positions are 0, and the loss masks them;
4. under bf16 autocast the frozen weights are cast to bfloat16 once per pass instead of at every
   matmul (`models.frozen_bf16_weights`: the same values autocast computes).

Scoring without gradients (the reference model's log-probabilities while `beta > 0`; TRL's old
log-probabilities for vLLM's importance sampling) does 1-4 per call. The results are TRL's up to
the order of floating-point sums (tests/test_grpo_shared_prefix.py compares log-probabilities,
entropies, TRL's loss and the gradients on SmolLM2, through the trainer's own `training_step`).
One difference is by design: with dropout active (LoRA dropout in training mode) a group's rows
share one dropout mask over their prompt where TRL draws one per row; each row's gradient has the
same expectation either way.

Nothing falls back quietly to TRL's pass. What this pass cannot do (multimodal inputs, MoE
auxiliary losses, a cache other than a plain dynamic one, activation checkpointing, logit scaling
or soft-capping, a TRL other than 1.16.x) raises an error naming `grpo.shared_prompt: false`,
which runs TRL's own pass: a quiet fallback would make a CPU run several times slower and, at two
rollouts per pass, larger than a 24 GB machine (docs/benchmarks.md), and would make a test that
compares the two passes compare TRL with itself. `trainer.shared_prompt_counts` (`PassCounts`)
counts what the pass computed; tests assert it ran and the benchmarks turn it into FLOPs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch

from sqlenv.training.shared_prefix import plain_kv_cache

SUPPORTED_TRL = "1.16."  # the TRL methods replaced and wrapped here are those of this release
OFF = "set grpo.shared_prompt: false to train with TRL's own pass"
# Logit transforms TRL's fused head applies for some models (trl.trainer.utils.add_fused_lm_head);
# this pass calls TRL's kernel without them, so a model that has one is refused.
LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)
CHUNK = 32_768  # vocabulary columns per tile of TRL's kernel (its `_CHUNKED_LOGPROB_CHUNK_SIZE`)


class SharedPromptError(RuntimeError):
    """The shared-prompt pass cannot score this batch or this model (never a quiet fallback)."""


@dataclass
class Work:
    """Tokens one kind of pass ran: through the layers, attended to, projected onto the vocabulary."""

    tokens: int = 0  # tokens run through the transformer layers
    attended: int = 0  # sum over those tokens of the positions each attends to (itself included)
    projected: int = 0  # positions projected onto the vocabulary

    def add(self, tokens: int, context: int, projected: int) -> None:
        """Count `tokens` consecutive tokens after `context` cached ones, `projected` of them scored."""
        self.tokens += tokens
        self.attended += tokens * context + tokens * (tokens + 1) // 2
        self.projected += projected


@dataclass
class PassCounts:
    """What the pass computed since it was installed (`trainer.shared_prompt_counts`)."""

    prompt_forwards: int = 0  # prompts run with their graph: once per group and optimisation step
    prompt_backwards: int = 0
    rows: int = 0  # completions scored with gradients
    scoring_calls: int = 0  # calls without gradients (reference, old log-probabilities)
    scored_prompts: int = 0
    scored_rows: int = 0
    trained: Work = field(default_factory=Work)  # forward and backward
    scored: Work = field(default_factory=Work)  # forward only


@dataclass
class _Prompt:
    """A prompt computed once for an optimisation step: its cache as the graph produced it
    (`outputs`), the detached leaves its rows run on, and their gradients summed so far."""

    outputs: list[tuple[torch.Tensor, torch.Tensor]]
    leaves: list[tuple[torch.Tensor, torch.Tensor]]
    sums: list[tuple[torch.Tensor, torch.Tensor]]
    length: int
    touched: bool = False  # leaves that received gradients in the current micro-batch


def _causal_lm(model: Any) -> Any:
    """The causal LM under a PEFT wrapper (the module whose `base_model` is the transformer)."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def check_model(model: Any) -> None:
    """Raise `SharedPromptError` for a model this pass cannot score (module docstring).

    Args:
        model: the policy or reference model, PEFT-wrapped or not.
    """
    causal_lm = _causal_lm(model)
    text_config = causal_lm.config.get_text_config()
    transforms = [name for name in LOGIT_TRANSFORMS if getattr(text_config, name, None) not in (None, 1.0)]
    if transforms:
        raise SharedPromptError(
            f"grpo.shared_prompt: {type(causal_lm).__name__} scales its logits ({transforms}); {OFF}"
        )
    if getattr(text_config, "output_router_logits", False):
        raise SharedPromptError(
            f"grpo.shared_prompt: MoE models (router auxiliary loss) are not supported; {OFF}"
        )
    if getattr(causal_lm, "is_gradient_checkpointing", False):
        raise SharedPromptError(f"grpo.shared_prompt: activation checkpointing is not supported; {OFF}")
    head = causal_lm.get_output_embeddings()
    if type(head) is not torch.nn.Linear:
        raise SharedPromptError(
            f"grpo.shared_prompt: the output layer is a {type(head).__name__}, not a plain Linear (adapters or "
            f"trainable token rows on it); {OFF}"
        )


class SharedPromptPass:
    """The pass installed on one trainer (`use_shared_prompt_logps`)."""

    def __init__(self, trainer: Any) -> None:
        import trl

        if not trl.__version__.startswith(SUPPORTED_TRL):
            raise SharedPromptError(
                f"grpo.shared_prompt replaces GRPOTrainer methods of TRL {SUPPORTED_TRL}x; TRL {trl.__version__} is "
                f"installed; {OFF}"
            )
        for name in (
            "_get_per_token_logps_and_entropies",
            "_compute_loss",
            "_generate",
            "_generate_and_score_completions",
            "training_step",
        ):
            if not callable(getattr(trainer, name, None)):
                raise SharedPromptError(f"grpo.shared_prompt: GRPOTrainer.{name} is missing; {OFF}")
        if getattr(trainer, "_is_vlm", False):
            raise SharedPromptError(f"grpo.shared_prompt: vision-language models are not supported; {OFF}")
        check_model(trainer.model)
        if getattr(trainer, "ref_model", None) is not None:
            check_model(trainer.ref_model)
        self.trainer = trainer
        self.counts = PassCounts()
        self._trl_compute_loss = trainer._compute_loss
        self._trl_generate = trainer._generate
        self._trl_training_step = trainer.training_step
        self._trl_generate_and_score = trainer._generate_and_score_completions
        self._prompts: dict[tuple[int, ...], _Prompt] = {}  # this optimisation step's, in training_step
        self._in_training_step = False
        self._loss_mask: torch.Tensor | None = None  # of the `_compute_loss` call in progress
        self._generated: tuple[list[list[int]], list[list[int]] | None] | None = (
            None  # completions, tool masks
        )
        self._weights = contextlib.ExitStack()  # the step's bfloat16 copies, freed with its prompts
        self._bf16: dict[torch.nn.Linear, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._bf16_models: set[int] = set()

    def install(self) -> None:
        """Replace and wrap the trainer's methods (instance attributes; the class is untouched)."""
        trainer = self.trainer
        trainer._get_per_token_logps_and_entropies = self.logps
        trainer._compute_loss = self._compute_loss
        trainer._generate = self._generate
        trainer.training_step = self._training_step
        trainer._generate_and_score_completions = self._generate_and_score_completions
        trainer.shared_prompt_counts = self.counts
        trainer.add_callback(_step_guard(self))

    # ---- the trainer's methods ----------------------------------------------------------------

    def _generate(self, prompts: list[Any]) -> Any:
        """TRL's `_generate`; its completions and tool masks are kept, so that the scoring calls that
        follow in `_generate_and_score_completions` (no loss mask passed) project only model tokens."""
        result = self._trl_generate(prompts)
        completion_ids, tool_mask = result[1], result[2]
        self._generated = (
            [list(ids) for ids in completion_ids],
            None if tool_mask is None else [list(m) for m in tool_mask],
        )
        return result

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        """TRL's; the completions `_generate` kept serve only the scoring inside it."""
        try:
            return self._trl_generate_and_score(inputs)
        finally:
            self._generated = None

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        """TRL's `_compute_loss`, with its loss mask known to the scoring it calls."""
        mask = inputs["completion_mask"]
        self._loss_mask = mask if "tool_mask" not in inputs else mask * inputs["tool_mask"]
        try:
            return self._trl_compute_loss(model, inputs)
        finally:
            self._loss_mask = None

    def _training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> torch.Tensor:
        """TRL's `training_step` (forward and backward of one micro-batch), then the prompts'
        gradients collected; on the optimisation step's last micro-batch they go back through the
        prompts before the optimiser steps."""
        self._in_training_step = True
        try:
            loss = self._trl_training_step(model, inputs, num_items_in_batch)
            self._collect()
            if self.trainer.accelerator.sync_gradients:
                self.backward_prompts()
        except BaseException:
            self._release()
            raise
        finally:
            self._in_training_step = False
        return loss

    def logps(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, None]:
        """TRL's `_get_per_token_logps_and_entropies`, computed as the module docstring says.

        Args:
            model: the policy (PEFT-wrapped or not) or the reference model.
            input_ids: left-padded prompts then right-padded completions, `(rows, P + C)`.
            attention_mask: the same shape; 0 on padding.
            logits_to_keep: C, the completion width.
            batch_size: TRL's rows per forward pass; unused (rows run one at a time).
            compute_entropy: also return each scored position's entropy.
            compute_aux_loss: an MoE auxiliary loss; refused.
            **extra: TRL's multimodal inputs; refused unless all None.

        Returns:
            `(log_probs, entropies, None)`, `(rows, C)` each (entropies None unless asked for); 0 at
            positions the loss does not use.
        """
        given = sorted(name for name, value in extra.items() if value is not None)
        if compute_aux_loss or given:
            raise SharedPromptError(
                f"grpo.shared_prompt: cannot score {given or 'an MoE auxiliary loss'}; {OFF}"
            )
        rows, width = input_ids.shape
        prompt_width = width - logits_to_keep
        loss_mask = self._scored_positions(input_ids, attention_mask, prompt_width)
        training = torch.is_grad_enabled()
        autocast = self.trainer.accelerator.autocast
        causal_lm = _causal_lm(model)
        backbone = causal_lm.base_model
        head = causal_lm.get_output_embeddings()
        groups: dict[tuple[int, ...], list[int]] = {}
        for row in range(rows):
            real = attention_mask[row, :prompt_width].bool()
            groups.setdefault(tuple(input_ids[row, :prompt_width][real].tolist()), []).append(row)
        log_probs: list[torch.Tensor | None] = [None] * rows
        entropies: list[torch.Tensor | None] = [None] * rows
        with self._frozen_weights(model):
            head_weight, head_bias = self._bf16.get(head, (head.weight, head.bias))
            for prompt, members in groups.items():
                if len(prompt) < 2:
                    raise SharedPromptError(
                        f"grpo.shared_prompt: a prompt of {len(prompt)} token(s) has no prefix to share"
                    )
                kv = self._prompt_cache(backbone, prompt, training, autocast)
                for row in members:
                    scored = self._score_row(
                        backbone, (head_weight, head_bias), kv, prompt, input_ids[row, prompt_width:],
                        attention_mask[row, prompt_width:], loss_mask[row], training=training,
                        compute_entropy=compute_entropy, autocast=autocast,
                    )  # fmt: skip
                    if scored is not None:
                        log_probs[row], entropies[row] = scored
        zeros = torch.zeros(logits_to_keep, dtype=torch.float32, device=input_ids.device)
        logps = torch.stack([zeros if lp is None else lp for lp in log_probs])
        if training and not logps.requires_grad:  # every row masked: TRL's loss must still backpropagate
            logps.requires_grad_()
        entropy = torch.stack([zeros if e is None else e for e in entropies]) if compute_entropy else None
        if not training:
            self.counts.scoring_calls += 1
        return logps, entropy, None

    # ---- the pass ---------------------------------------------------------------------------

    def _scored_positions(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int
    ) -> torch.Tensor:
        """The completion positions the loss uses, `(rows, C)`: the loss mask of the `_compute_loss`
        call in progress, else (scoring in `_generate_and_score_completions`) the completion mask
        times the tool masks of the completions just generated."""
        completion_mask = attention_mask[:, prompt_width:]
        if self._loss_mask is not None:
            if self._loss_mask.shape != completion_mask.shape:
                raise SharedPromptError(
                    f"grpo.shared_prompt: the loss mask is {tuple(self._loss_mask.shape)}, the completions "
                    f"{tuple(completion_mask.shape)}: TRL's _compute_loss has changed; {OFF}"
                )
            return self._loss_mask * completion_mask
        if self._generated is None or self._generated[1] is None:
            return completion_mask
        completions, tool_masks = self._generated
        if len(completions) != len(input_ids):
            raise SharedPromptError(
                f"grpo.shared_prompt: {len(input_ids)} rows scored after {len(completions)} were generated: TRL's "
                f"_generate_and_score_completions has changed; {OFF}"
            )
        tool_mask = torch.ones_like(completion_mask)
        for row, (ids, mask) in enumerate(zip(completions, tool_masks, strict=True)):
            if input_ids[row, prompt_width : prompt_width + len(ids)].tolist() != ids:
                raise SharedPromptError(
                    f"grpo.shared_prompt: row {row} scored is not the completion generated in that place: TRL's "
                    f"_generate_and_score_completions has changed; {OFF}"
                )
            tool_mask[row, : len(mask)] = torch.tensor(mask, dtype=tool_mask.dtype)
        return completion_mask * tool_mask

    def _prompt_cache(
        self, backbone: Any, prompt: tuple[int, ...], training: bool, autocast: Any
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The key/value cache of `prompt` less its last token, for its rows to run on: the step's
        leaves inside a training step, else the cache of a forward made for this call."""
        if training and self._in_training_step and prompt in self._prompts:
            entry = self._prompts[prompt]
            entry.touched = True
            return entry.leaves
        ids = torch.tensor([prompt[:-1]], device=backbone.device)
        with autocast():
            kv = plain_kv_cache(backbone(input_ids=ids, use_cache=True).cache)
        if kv is None:
            raise SharedPromptError(
                f"grpo.shared_prompt: {type(backbone).__name__}'s cache is not a plain key/value cache (sliding "
                f"window, hybrid or quantised layers); {OFF}"
            )
        work = self.counts.trained if training else self.counts.scored
        work.add(len(prompt) - 1, 0, 0)
        if not training:
            self.counts.scored_prompts += 1
            return kv
        self.counts.prompt_forwards += 1
        if not self._in_training_step:
            return kv  # the caller's backward runs through the prompt's own graph
        leaves = [(k.detach().requires_grad_(), v.detach().requires_grad_()) for k, v in kv]
        sums = [
            (torch.zeros_like(k, dtype=torch.float32), torch.zeros_like(v, dtype=torch.float32))
            for k, v in kv
        ]
        self._prompts[prompt] = _Prompt(
            outputs=kv, leaves=leaves, sums=sums, length=len(prompt), touched=True
        )
        return leaves

    def _score_row(
        self,
        backbone: Any,
        head: tuple[torch.Tensor, torch.Tensor | None],
        kv: list[tuple[torch.Tensor, torch.Tensor]],
        prompt: tuple[int, ...],
        completion: torch.Tensor,
        attention: torch.Tensor,
        scored: torch.Tensor,
        *,
        training: bool,
        compute_entropy: bool,
        autocast: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """One row's log-probabilities (and entropies) over its C completion positions, 0 where the
        loss does not use them; None when it uses none."""
        from transformers import DynamicCache
        from trl.kernels import ChunkedLogProbFunction

        used = (scored * attention).bool()
        positions = used.nonzero().flatten()
        if not len(positions):
            return None
        end = int(positions[-1]) + 1  # suffix[j] predicts completion[j]: nothing after `end` is needed
        cached = len(prompt) - 1
        device = completion.device
        suffix = torch.cat([torch.tensor([prompt[-1]], device=device), completion[: end - 1]])
        suffix_mask = torch.cat([attention.new_ones(1), attention[: end - 1]])
        mask = None
        if not bool(suffix_mask.all()):
            mask = torch.cat([attention.new_ones(cached), suffix_mask]).unsqueeze(0)
        cache = DynamicCache(ddp_cache_data=list(kv))
        with autocast():
            hidden = backbone(
                input_ids=suffix.unsqueeze(0),
                attention_mask=mask,
                position_ids=torch.arange(cached, cached + end, device=device).unsqueeze(0),
                cache=cache,
                use_cache=True,
            ).last_hidden_state[0]
            outputs = ("log_probs", "entropy") if compute_entropy else ("log_probs",)
            weight, bias = head
            log_probs, entropy, *_ = ChunkedLogProbFunction.apply(
                hidden[used[:end]], weight, bias, completion[:end][used[:end]], self.trainer.temperature, CHUNK,
                None, 1.0, outputs,
            )  # fmt: skip
        (self.counts.trained if training else self.counts.scored).add(end, cached, len(positions))
        if training:
            self.counts.rows += 1
        else:
            self.counts.scored_rows += 1
        width = len(completion)
        full = torch.zeros(width, dtype=log_probs.dtype, device=device).index_put((positions,), log_probs)
        if entropy is None:
            return full, None
        return full, torch.zeros(width, dtype=entropy.dtype, device=device).index_put((positions,), entropy)

    def _collect(self) -> None:
        """Add the gradients the micro-batch's backward left on the prompts' leaves to their sums."""
        for entry in self._prompts.values():
            if not entry.touched:
                continue
            for (k_sum, v_sum), (k_leaf, v_leaf) in zip(entry.sums, entry.leaves, strict=True):
                if k_leaf.grad is not None:
                    k_sum += k_leaf.grad
                if v_leaf.grad is not None:
                    v_sum += v_leaf.grad
                k_leaf.grad = v_leaf.grad = None
            entry.touched = False

    def backward_prompts(self) -> None:
        """Send each prompt's summed cache gradient back through the prompt's forward (once per
        prompt and optimisation step), then free the prompts and the step's bfloat16 weights."""
        try:
            for entry in self._prompts.values():
                outputs = [t for pair in entry.outputs for t in pair]
                grads = [
                    s.to(t.dtype)
                    for s, t in zip((s for pair in entry.sums for s in pair), outputs, strict=True)
                ]
                torch.autograd.backward(outputs, grads)
                self.counts.prompt_backwards += 1
        finally:
            self._release()

    def _release(self) -> None:
        self._prompts.clear()
        self._weights.close()
        self._bf16.clear()
        self._bf16_models.clear()

    @contextlib.contextmanager
    def _frozen_weights(self, model: Any) -> Any:
        """Under bf16 autocast, bfloat16 copies of `model`'s frozen weights (`models.frozen_bf16_weights`):
        inside a training step made at its first scoring and kept until `backward_prompts`, else for
        this call alone."""
        if not self.trainer.args.bf16:
            yield
            return
        _check_unmerged(model)
        if id(model) in self._bf16_models:
            yield
            return
        from sqlenv.training.models import frozen_bf16_weights

        if self._in_training_step:
            self._bf16.update(self._weights.enter_context(frozen_bf16_weights(model)))
            self._bf16_models.add(id(model))
            yield
            return
        with frozen_bf16_weights(model) as copies:
            self._bf16.update(copies)
            self._bf16_models.add(id(model))
            try:
                yield
            finally:
                self._bf16.clear()
                self._bf16_models.clear()


def _check_unmerged(model: Any) -> None:
    """The bfloat16 copies are made from the unmerged weights, and the adapters are added on top: a
    merged adapter (TRL merges them for the weight sync) would count twice, so it is an error."""
    for module in model.modules():
        if getattr(module, "merged", False) is True and hasattr(module, "lora_A"):
            raise SharedPromptError(
                "grpo.shared_prompt: LoRA adapters are merged into the weights during scoring"
            )


def _step_guard(shared: SharedPromptPass) -> Any:
    """A trainer callback: the optimiser must not step while prompt gradients are pending (they go
    back in the optimisation step's last `training_step`; a step that bypassed it would lose them)."""
    from transformers import TrainerCallback

    class StepGuard(TrainerCallback):
        def on_pre_optimizer_step(self, *args: Any, **kwargs: Any) -> None:
            if shared._prompts:
                shared._release()
                raise SharedPromptError(
                    "grpo.shared_prompt: the optimiser would step before the prompts' gradients were added (the "
                    "step's last micro-batch did not run with sync_gradients)"
                )

    return StepGuard()


def use_shared_prompt_logps(trainer: Any) -> SharedPromptPass:
    """Make a `GRPOTrainer` train with the shared-prompt pass (module docstring).

    Args:
        trainer: a TRL 1.16 `GRPOTrainer`; its `_get_per_token_logps_and_entropies` is replaced and its
            `_compute_loss`, `_generate` and `training_step` wrapped, on the instance.

    Returns:
        The installed pass; its `counts` are also `trainer.shared_prompt_counts`.

    Raises:
        SharedPromptError: the TRL version, the model or the trainer's setup is one the pass cannot
            score (the message names `grpo.shared_prompt: false`).
    """
    shared = SharedPromptPass(trainer)
    shared.install()
    return shared
