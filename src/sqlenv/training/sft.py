"""`sqlenv train sft`: the SFT warm-up with TRL's SFTTrainer on oracle trajectories.

The data is tokenised here (`sqlenv.training.sft_data`) with TRL's training chat template, and the
loss covers assistant turns only (the `assistant_masks` column). With `sft.shared_prefix` (the
default) each optimisation batch's common opening runs once (`sqlenv.training.shared_prefix`).
With `sft.lora` enabled only LoRA adapters train, and they are merged into the weights at the
end (the adapters as trained are kept in `<output_dir>/sft/final-adapter`, what `sqlenv models
publish` publishes). The final model and tokenizer are saved to `<output_dir>/sft/final`, a
directory `sqlenv eval --policy` accepts; the log history goes to
`<output_dir>/sft/log_history.json`, the data counts (and how many steps shared their opening) to
`<output_dir>/sft/data_counts.json`. The loss of
the protocol's tokens (`sqlenv.training.token_check`) is measured before and after training, printed,
and saved to `<output_dir>/sft/token_losses.json`; a token left unlearnt gets a warning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlenv.training.config import TrainConfig

# Rows the protocol-token check reads: a few trajectories hold dozens of each tag; each row is one
# forward pass without gradients.
TOKEN_CHECK_ROWS = 4


def run_sft(config: TrainConfig, *, resume: bool = False, console: Any = None) -> Path:
    from trl import SFTConfig, SFTTrainer

    from sqlenv.agents.published_models import FINAL_ADAPTER
    from sqlenv.agents.solved_examples import write_prompt_settings
    from sqlenv.config import ANSWER_MODES
    from sqlenv.data import load_dataset
    from sqlenv.training.checkpoints import resume_checkpoint
    from sqlenv.training.live import LiveVisualizationCallback
    from sqlenv.training.models import (
        bf16_for,
        has_gpu,
        load_trainable,
        lora_config,
        progress_callbacks,
        set_threads,
    )
    from sqlenv.training.sft_data import mode_count_key, sft_dataset
    from sqlenv.training.shared_prefix import shared_prefix_trainer_class
    from sqlenv.training.token_check import protocol_tokens, token_losses

    set_threads(config.threads)
    # Found before anything loads, so a missing checkpoint fails at once.
    checkpoint = str(resume_checkpoint(config.sft_dir)) if resume else None
    section = config.sft
    dataset = load_dataset(config.dataset, config.spider_dir)
    tokenizer, model = load_trainable(config.model)
    train_data, counts = sft_dataset(
        dataset,
        tokenizer,
        seed=config.seed,
        max_examples=section.max_examples,
        max_length=section.max_length,
        sample_rate=section.sample_rate,
        mistake_rate=section.mistake_rate,
        recovery_rate=section.recovery_rate,
        loss_on_mistakes=section.loss_on_mistakes,
        clean_copies=section.clean_copies,
        solved_examples=config.solved_examples,
        config=config.env_config,
        answer_modes=section.answer_modes,
    )
    if counts["examples"] == 0:
        raise ValueError(
            f"no SFT trajectory fits sft.max_length={section.max_length} tokens "
            f"({counts['too_long']} were longer): raise sft.max_length"
        )
    if console is not None:
        by_mode = ", ".join(f"{mode} {counts[mode_count_key(mode)]}" for mode in ANSWER_MODES if mode_count_key(mode) in counts)
        console.print(
            f"SFT data: {counts['examples']} oracle trajectories ({by_mode}), {counts['tokens']:,} tokens "
            f"({counts['too_long']} longer than {section.max_length} tokens left out)"
        )
    checked_tokens = protocol_tokens(tokenizer, section.lora.trainable_tokens)
    check_rows = [train_data[i] for i in range(min(TOKEN_CHECK_ROWS, len(train_data)))]
    losses_before = token_losses(model, check_rows, checked_tokens)
    bf16 = bf16_for(section.bf16, "sft", console)
    out = config.sft_dir
    batch_size, accumulation = section.batch_size, section.gradient_accumulation_steps
    trainer_class, extra = SFTTrainer, {}
    if section.shared_prefix:
        # The shared-prefix step needs the whole optimisation batch at once; it runs `batch_size`
        # conversations at a time itself, so the memory and the optimisation batch stay the config's.
        batch_size, accumulation = batch_size * accumulation, 1
        trainer_class, extra = shared_prefix_trainer_class(), {"micro_batch_size": section.batch_size}
    args = SFTConfig(
        output_dir=str(out),
        num_train_epochs=section.epochs,
        learning_rate=section.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=0.05,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_length=section.max_length,
        assistant_only_loss=False,  # the tokenised rows carry assistant_masks: the loss is on those only
        activation_checkpointing=False,  # TRL turns it on; a 135M model fits without, and runs ~30% faster
        bf16=bf16,
        use_cpu=not has_gpu(),
        logging_steps=1,
        save_steps=section.save_steps,
        save_total_limit=2,
        report_to="none",
        seed=config.seed,
        disable_tqdm=True,
    )
    if section.lora.trainable_tokens and section.lora.trainable_tokens_learning_rate is not None:
        trainer_class = token_rows_learning_rate(trainer_class, section.lora.trainable_tokens_learning_rate)
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=train_data,
        processing_class=tokenizer,
        peft_config=lora_config(section.lora, tokenizer),
        callbacks=[
            *progress_callbacks(),
            # Loss curves only: playing episodes would cost SFT minutes per check on a CPU.
            LiveVisualizationCallback(config, out, tokenizer=tokenizer, phase="sft", play_episodes=False),
        ],
        **extra,
    )
    trainer.train(resume_from_checkpoint=checkpoint)
    if section.shared_prefix:
        counts |= {"shared_prefix_steps": trainer.shared_steps, "plain_steps": trainer.plain_steps}
        if console is not None:
            console.print(
                f"SFT: {trainer.shared_steps} optimisation steps shared their batch's opening, "
                f"{trainer.plain_steps} ran plain"
            )
    final = out / "final"
    if section.lora.enabled:  # the adapters merged into the weights: a plain model, as without LoRA
        trainer.model.save_pretrained(str(out / FINAL_ADAPTER))  # and kept as trained: what gets published
        trained = trainer.model.merge_and_unload()
        trained.save_pretrained(str(final))
    else:
        trained = trainer.model
        trainer.save_model(str(final))
    losses_after = token_losses(trained, check_rows, checked_tokens)
    _report_token_losses(out, losses_before, losses_after, len(check_rows), console)
    tokenizer.save_pretrained(str(final))
    write_prompt_settings(final, solved_examples=config.solved_examples)
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1), encoding="utf-8")
    (out / "data_counts.json").write_text(json.dumps(counts), encoding="utf-8")
    return final


def token_rows_learning_rate(trainer_class: type, learning_rate: float) -> type:
    """`trainer_class` whose optimiser trains peft's trainable-token rows at their own learning rate.

    Args:
        trainer_class: TRL's SFTTrainer or a subclass.
        learning_rate: the rows' peak learning rate; the schedule scales it as it scales the others.

    Returns:
        A subclass whose `create_optimizer` moves the rows into a group of their own.
    """

    from sqlenv.training.models import token_rows

    class TokenRowsTrainer(trainer_class):  # type: ignore[misc, valid-type]
        def create_optimizer(self, model: Any = None) -> Any:
            optimizer = super().create_optimizer(model)
            rows = {id(p): p for p in token_rows(self.model if model is None else model).values()}
            if rows and not any(group.get("token_rows") for group in optimizer.param_groups):
                for group in optimizer.param_groups:
                    group["params"] = [p for p in group["params"] if id(p) not in rows]
                optimizer.add_param_group(
                    {"params": list(rows.values()), "lr": learning_rate, "weight_decay": 0.0, "token_rows": True}
                )
            return optimizer

    TokenRowsTrainer.__name__ = TokenRowsTrainer.__qualname__ = f"TokenRows{trainer_class.__name__}"
    return TokenRowsTrainer


def _report_token_losses(
    out: Path, before: dict[str, float | None], after: dict[str, float | None], rows: int, console: Any
) -> None:
    """Saves the protocol-token losses, prints them, and warns about any token left unlearnt."""
    import warnings

    from sqlenv.training.token_check import UNLEARNT_NATS, unlearnt

    (out / "token_losses.json").write_text(
        json.dumps({"rows": rows, "before": before, "after": after}, indent=1), encoding="utf-8"
    )
    if console is not None and after:
        shown = ", ".join(
            f"{name} {before[name]:.2f} -> {after[name]:.2f}" for name in after if after[name] is not None
        )
        console.print(f"SFT: protocol tokens' mean loss (nats, {rows} training rows): {shown}")
    missed = unlearnt(after)
    if missed:
        warnings.warn(
            f"SFT left {missed} unlearnt (mean loss above {UNLEARNT_NATS} nats where the data has them): "
            "the model will write something else in their place and its tool calls will not parse; "
            "name them in sft.lora.trainable_tokens or train longer",
            stacklevel=2,
        )
