"""The training benchmarks' shared parts: a per-step clock and their common options."""

from __future__ import annotations

import argparse
import time
from typing import Any

from transformers import TrainerCallback


class StepClock(TrainerCallback):
    """Wall seconds of each optimisation step, in order (`durations`)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.started = 0.0

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        self.started = time.perf_counter()

    def on_step_end(self, *args: Any, **kwargs: Any) -> None:
        self.durations.append(time.perf_counter() - self.started)


def parse_timing_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The parser's options plus `--threads`; at least 2 `--steps` (the first is a warm-up); the
    torch thread count set."""
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.steps < 2:
        raise SystemExit("--steps must be at least 2: the first step is a warm-up")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return args


def timing_sft_config(output_dir: str, *, steps: int, batch_size: int, accumulation: int, bf16: bool) -> Any:
    """TRL's SFTConfig as `sqlenv train sft` sets it (`sqlenv.training.sft`), for `steps` timed
    optimisation steps over the rows in order, saving nothing."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=output_dir,
        max_steps=steps,
        learning_rate=1e-5,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_length=None,
        assistant_only_loss=False,
        activation_checkpointing=False,
        bf16=bf16,
        use_cpu=True,
        train_sampling_strategy="sequential",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
    )


# ---- GRPO's training pass: scripted rollouts, today's pass, FLOPs and the matmul bound ----------


class ScriptedRollouts:
    """Rollouts without a generation engine: each of a group's rollouts plays a fixed episode of
    tool calls (describe, sample, query, answer; 3 to 5 calls, some answers right, some wrong)
    written as the model writes them, through TRL's own multi-turn loop against the real
    environment, so the completions, the environment's tokens (masked from the loss) and the
    rewards are those of a real step. Installed on a trainer built with `grpo.loop: trl`; the same
    config and seed give the same rollouts for every pass compared."""

    PLANS = (
        "I will look at the table, then query it.",
        "First the columns, then a sample.",
        "Let me check both tables before querying.",
        "A sample of the rows first.",
    )

    def __init__(self, trainer: Any, dataset: Any) -> None:
        self.tokenizer = trainer.processing_class
        self.end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.records = dataset.split("train")
        self.episodes: dict[tuple[int, ...], tuple[list[str], int]] = {}
        trainer._generate_single_turn = self.generate

    @staticmethod
    def _call(name: str, **arguments: str) -> str:
        import json

        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    def script(self, record: Any, variant: int) -> list[str]:
        """The turns of rollout `variant` of the group of `record`'s question."""
        first, last = record.tables_involved[0], record.tables_involved[-1]
        value = ", ".join(str(cell) for cell in record.gold_answer[0]) if record.gold_answer else "none"
        call = self._call
        scripts = [
            [call("describe", table_name=first), call("query", sql=record.gold_sql), call("answer", value=value),
             "The answer is given."],
            [call("describe", table_name=first), call("sample", table_name=first), call("query", sql=record.gold_sql),
             call("answer", value="0"), "Done."],
            [call("describe", table_name=first), call("describe", table_name=last),
             call("query", sql=f"SELECT * FROM {first}"), call("query", sql=record.gold_sql),
             call("answer", value=value), "Done."],
            [call("sample", table_name=first), call("query", sql=f"SELECT count(*) FROM {first}"),
             call("answer", value="1"), "Done."],
        ]  # fmt: skip
        turns = list(scripts[variant % len(scripts)])
        turns[0] = f"{self.PLANS[variant % len(self.PLANS)]}\n{turns[0]}"
        return turns

    def _ids(self, text: str) -> list[int]:
        return [*self.tokenizer.encode(text, add_special_tokens=False), self.end]

    def generate(self, prompt_ids: list[list[int]], images: Any, multimodal_fields: Any, num_generations: int,
                 has_tool_images: bool = False) -> tuple[list[list[int]], None]:  # fmt: skip
        """TRL's `_generate_single_turn`: the next turn of each conversation's episode."""
        out: list[list[int]] = []
        if num_generations != 1:  # a step's first turn: new episodes
            self.episodes.clear()
            seen: dict[str, int] = {}
            for ids in prompt_ids:
                text = self.tokenizer.decode(ids)
                record = next(r for r in self.records if r.question in text)
                variant = seen.get(record.question_id, 0)
                seen[record.question_id] = variant + 1
                turns = self.script(record, variant)
                first = self._ids(turns[0])
                self.episodes[tuple(ids) + tuple(first)] = (turns, len(ids))
                out.append(first)
            return out, None
        for ids in prompt_ids:  # later turns: the conversation so far starts with a known first turn
            key = next(key for key in self.episodes if tuple(ids[: len(key)]) == key)
            turns, prompt_length = self.episodes[key]
            done = self.tokenizer.decode(ids[prompt_length:]).count("</tool_call>")
            out.append(self._ids(turns[min(done, len(turns) - 1)]))
        return out, None


def install_todays_pass(trainer: Any) -> None:
    """The training pass `grpo.shared_prompt` ran before `sqlenv.training.grpo_shared_prefix` became
    the step-level pass, kept here as the benchmarks' baseline: rows of one forward call that share
    a prompt compute it once (a forward with the LM head on its last position), then their
    completions, right-padded to the step's longest, run on that cache through TRL's fused head
    (every completion position projected onto the vocabulary), each call with its own prompt
    forward; weights cast by autocast at every matmul. Calls it cannot score raise."""
    import torch
    from transformers import DynamicCache

    from sqlenv.training.shared_prefix import IGNORE_INDEX, plain_kv_cache

    def scored(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
               batch_size: int | None = None, compute_entropy: bool = False, compute_aux_loss: bool = False,
               **extra: Any) -> tuple[torch.Tensor, torch.Tensor | None, None]:  # fmt: skip
        if compute_aux_loss or any(value is not None for value in extra.values()):
            raise RuntimeError("today's pass: multimodal or MoE inputs")
        rows, width = input_ids.shape
        prompt_width = width - logits_to_keep
        groups: dict[tuple[int, ...], list[int]] = {}
        for row in range(rows):
            real = attention_mask[row, :prompt_width].bool()
            groups.setdefault(tuple(input_ids[row, :prompt_width][real].tolist()), []).append(row)
        out_rows, out_entropy, order = [], [], []
        for prompt, members in groups.items():
            index = torch.tensor(members)
            length = len(prompt)
            with trainer.accelerator.autocast():
                kv = plain_kv_cache(
                    model(input_ids=torch.tensor([prompt[:-1]]), use_cache=True, logits_to_keep=1).cache
                )
            if kv is None:
                raise RuntimeError("today's pass: not a plain key/value cache")
            count = len(members)
            expanded = DynamicCache(
                ddp_cache_data=[(k.expand(count, -1, -1, -1), v.expand(count, -1, -1, -1)) for k, v in kv]
            )
            completion = input_ids[index, prompt_width:]
            completion_mask = attention_mask[index, prompt_width:]
            suffix = torch.cat([input_ids[index, prompt_width - 1 : prompt_width], completion[:, :-1]], dim=1)
            suffix_mask = torch.cat(
                [torch.ones(count, length, dtype=attention_mask.dtype), completion_mask[:, :-1]], dim=1
            )
            positions = torch.arange(length - 1, length - 1 + logits_to_keep)
            labels = completion.masked_fill(completion_mask == 0, IGNORE_INDEX)
            with trainer.accelerator.autocast():
                outputs = model(input_ids=suffix, attention_mask=suffix_mask, position_ids=positions.expand(count, -1),
                                cache=expanded, shift_labels=labels, fused_lm_head=True)  # fmt: skip
            out_rows.append(outputs.log_probs)
            if compute_entropy:
                out_entropy.append(outputs.entropy)
            order.extend(members)
        inverse = torch.empty(rows, dtype=torch.long)
        inverse[torch.tensor(order)] = torch.arange(rows)
        entropy = torch.cat(out_entropy)[inverse] if compute_entropy else None
        return torch.cat(out_rows)[inverse], entropy, None

    trainer._get_per_token_logps_and_entropies = scored


def call_work(kind: str, input_ids: Any, attention_mask: Any, logits_to_keep: int) -> tuple[int, int, int]:
    """(tokens run, positions attended, positions projected) of one scoring call of the passes
    "trl" (TRL 1.16's own on a CPU: every row whole, every position projected) and "today"
    (`install_todays_pass`); the shared-prompt pass counts its own (`PassCounts`)."""
    rows, width = input_ids.shape
    if kind == "trl":
        return rows * width, rows * width * (width + 1) // 2, rows * (width - 1)
    prompt_width = width - logits_to_keep
    prompts = {
        tuple(input_ids[r, :prompt_width][attention_mask[r, :prompt_width].bool()].tolist())
        for r in range(rows)
    }
    tokens = attended = projected = 0
    for prompt in prompts:
        cached = len(prompt) - 1
        members = sum(
            tuple(input_ids[r, :prompt_width][attention_mask[r, :prompt_width].bool()].tolist()) == prompt
            for r in range(rows)
        )
        tokens += cached + members * logits_to_keep
        attended += cached * (cached + 1) // 2 + members * (
            logits_to_keep * cached + logits_to_keep * (logits_to_keep + 1) // 2
        )
        projected += 1 + members * logits_to_keep
    return tokens, attended, projected


class ModelShape:
    """FLOPs per unit of work for a causal LM's shape: a token through the layers (2 x the
    layers' linear weights, LoRA's adapters apart), a position attended to (QK and AV), a
    position projected onto the vocabulary, a token through the LoRA adapters."""

    def __init__(self, model: Any, lora_rank: int | None, lora_targets: list[str] | None) -> None:
        config = model.config.get_text_config()
        hidden, layers = config.hidden_size, config.num_hidden_layers
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or hidden // heads
        kv = config.num_key_value_heads * head_dim
        inner = config.intermediate_size
        shapes = {"q_proj": (hidden, heads * head_dim), "k_proj": (hidden, kv), "v_proj": (hidden, kv),
                  "o_proj": (heads * head_dim, hidden), "gate_proj": (hidden, inner), "up_proj": (hidden, inner),
                  "down_proj": (inner, hidden)}  # fmt: skip
        self.shapes = shapes
        self.hidden, self.vocab, self.layers = hidden, config.vocab_size, layers
        self.token = 2 * layers * sum(i * o for i, o in shapes.values())
        self.attended = 4 * layers * heads * head_dim
        self.projected = 2 * hidden * config.vocab_size
        targets = [name for name in shapes if lora_targets and name in lora_targets]
        self.lora = 2 * layers * (lora_rank or 0) * sum(sum(shapes[name]) for name in targets)

    def forward(self, tokens: int, attended: int, projected: int, *, lora: bool) -> float:
        return (
            tokens * self.token
            + attended * self.attended
            + projected * self.projected
            + (tokens * self.lora if lora else 0)
        )

    def forward_backward(self, tokens: int, attended: int, projected: int) -> float:
        """A forward with gradients and its backward: the frozen layers' input gradients (1 x their
        forward), attention's (2 x), the LM head's (recomputed, then its input gradient: 2 x), and
        the adapters' input and weight gradients (2 x)."""
        return (
            2 * tokens * self.token
            + 3 * attended * self.attended
            + 3 * projected * self.projected
            + 3 * tokens * self.lora
        )


def matmul_throughput(shape: ModelShape, dtype: Any, *, rows: int = 512, seconds: float = 3.0) -> float:
    """FLOP/s of torch.matmul on one transformer layer's linear shapes, `rows` tokens at a time in
    `dtype` (the pass's compute type): the best time of each shape over about `seconds` of repeats,
    summed as one layer's forward sums them."""
    import torch

    operands = [
        (torch.randn(rows, i).to(dtype), torch.randn(i, o).to(dtype)) for i, o in shape.shapes.values()
    ]
    best = [float("inf")] * len(operands)
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        for index, (a, b) in enumerate(operands):
            started = time.perf_counter()
            torch.matmul(a, b)
            best[index] = min(best[index], time.perf_counter() - started)
    return sum(2 * rows * i * o for i, o in shape.shapes.values()) / sum(best)
