"""`sqlenv train grpo`: GRPO with TRL's GRPOTrainer, its rollouts played by one of two loops.

`grpo.loop: sqlenv` plays them with evaluation's own episode loop through TRL's `rollout_func`
(`sqlenv.training.rollouts`): the episodes are those `sqlenv eval` plays (prompt, reply parser,
format-error feedback, budget, context), and the trainer learns from the token ids the model read
and wrote, the environment's tokens masked out of the loss. `grpo.loop: trl` plays them with TRL's
multi-turn loop (`environment_factory`): each rollout gets its own `SQLToolEnv` (in-process, or a
WebSocket session on `grpo.env_url`), started on the row's question; the prompt is the evaluation
prompt (system message and question message of `sqlenv.agents.prompts`, tools from
`sqlenv.agents.tools.TOOLS` in that order: `present_tools_in_evaluation_order`), parsed and cut by
TRL's rules. Either way, rewards are the three parts of the episode reward as separate reward
functions (weights in the config; 1, 1, 1 is the environment's own total). The curriculum orders
the train questions (all of them, or those whose sampled pass rate lies in
`grpo.pass_rate_range`: `sqlenv.training.pass_rates`) by difficulty (easy first) and the trainer
reads them in that order.

`grpo.engine` chooses what generates the rollouts: TRL's colocated vLLM (`vllm`; on a CPU with
the adjustments of `sqlenv.training.vllm_colocate`) or the trained model through transformers
(`transformers`); `auto` is vLLM where it is installed.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from sqlenv.agents.engines import resolve_engine
from sqlenv.config import EnvConfig
from sqlenv.data import Dataset
from sqlenv.training.config import TrainConfig
from sqlenv.training.heldout import proportional_shares


def grpo_rows(
    dataset: Dataset,
    *,
    split: str = "train",
    curriculum: list[str],
    seed: int = 0,
    max_questions: int | None = None,
    solved_examples: int = 0,
    config: EnvConfig | None = None,
    fit_to: int | None = None,
    keep: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Training rows in curriculum order: {"prompt": [system, question], "question_id", "difficulty"}.
    With `solved_examples` N, the question message shows the N most similar solved train questions;
    `config` is the environment the rollouts play (its answer mode is in the system message).
    `fit_to` is how many questions the run will read: when that is fewer than the curriculum holds,
    each level keeps only its share in proportion to its size (`proportional_shares`), so a short
    run still reaches every level, easy first, instead of spending all its steps on the first.
    `keep`: only these questions (those in the run's pass-rate range, `training.pass_rates`). When
    `fit_to` is more than the questions there are, they are repeated in order up to it: TRL's
    sampler would read them again too, but leaves out an epoch's last question when the count is
    not a multiple of the questions per step."""
    from sqlenv.agents.prompts import question_message, system_message
    from sqlenv.agents.solved_examples import SolvedExamples
    from sqlenv.env.environment import SQLEnvironment

    env = SQLEnvironment(dataset=dataset, split=split, config=config)
    examples = SolvedExamples(dataset, solved_examples) if solved_examples else None
    rng = random.Random(seed)
    levels: dict[str, list[Any]] = {}
    for level in curriculum:
        levels[level] = [r for r in dataset.split(split) if r.difficulty == level and not r.empty_gold]
        rng.shuffle(levels[level])
        if keep is not None:  # after the shuffle: the kept questions in the order of the whole
            levels[level] = [r for r in levels[level] if r.question_id in keep]
    if fit_to is not None and fit_to < sum(len(records) for records in levels.values()):
        shares = proportional_shares({level: len(records) for level, records in levels.items()}, fit_to)
        levels = {level: records[: shares[level]] for level, records in levels.items()}
    rows: list[dict[str, Any]] = []
    for records in levels.values():
        for record in records:
            observation = env.reset(question_id=record.question_id)
            rows.append(
                {
                    "prompt": [system_message(observation), question_message(observation, examples)],
                    "question_id": record.question_id,
                    "difficulty": record.difficulty,
                }
            )
    if fit_to is not None and rows and len(rows) < fit_to:
        rows = [rows[index % len(rows)] for index in range(fit_to)]
    return rows[:max_questions] if max_questions is not None else rows


def present_tools_in_evaluation_order(trainer: Any) -> None:
    """Make TRL render the environment's tools in `TOOLS` order, as evaluation and SFT do.

    TRL lists an environment's tool methods with `inspect.getmembers`, which sorts them by name
    (answer, describe, query, sample), and renders the prompt's tool list in that order. SFT taught
    the model on the `TOOLS` order (describe first); shown the other order, SmolLM2 opened every
    GRPO rollout with `answer(table_name=...)`. TRL has no option for the order, so its
    per-environment lists are re-sorted here; a TRL that keeps them elsewhere is refused by name."""
    from sqlenv.agents.tools import TOOLS

    tools_by_environment = getattr(trainer, "_env_tools", None)
    if not isinstance(tools_by_environment, dict):
        raise RuntimeError(
            "this TRL version does not keep environment tools in GRPOTrainer._env_tools: the prompt's "
            "tool order cannot be made the evaluation's (sqlenv is tested with trl 1.16)"
        )
    order = [tool["function"]["name"] for tool in TOOLS]

    def rank(tool: Any) -> int:
        name = getattr(tool, "__name__", "")
        return order.index(name) if name in order else len(order)

    for name, tools in tools_by_environment.items():
        tools_by_environment[name] = sorted(tools, key=rank)


def build_grpo_trainer(config: TrainConfig, *, console: Any = None) -> Any:
    """The GRPOTrainer `run_grpo` trains: model, curriculum rows, rewards, environments, callbacks."""
    import datasets
    from trl import GRPOConfig, GRPOTrainer

    from sqlenv.agents.solved_examples import read_prompt_settings
    from sqlenv.data import load_dataset
    from sqlenv.training.diagnostics import RolloutDiagnostics
    from sqlenv.training.live import LiveVisualizationCallback
    from sqlenv.training.models import (
        bf16_for,
        has_gpu,
        load_trainable,
        lora_config,
        progress_callbacks,
        set_threads,
    )
    from sqlenv.training.trl_env import REWARD_FUNCS, SQLToolEnv

    set_threads(config.threads)
    section = config.grpo
    dataset = load_dataset(config.dataset, config.spider_dir)
    init = config.grpo_init()
    if init != config.model and not Path(init).exists() and config.sft.enabled and not section.init_from:
        raise FileNotFoundError(
            f"GRPO starts from the SFT model {init}, which does not exist: run `sqlenv train sft` first"
        )
    trained_with = read_prompt_settings(init).get("solved_examples", 0)
    if Path(init).expanduser().is_dir() and trained_with != config.solved_examples:
        raise ValueError(
            f"{init} was trained with {trained_with} solved examples in its prompt and the config asks "
            f"for {config.solved_examples}: GRPO would train it on a prompt it has not learnt "
            f"(set solved_examples: {trained_with}, or run SFT with the config's)"
        )
    keep = None
    if section.pass_rates_from:
        from sqlenv.training.pass_rates import questions_in_pass_rate_range

        low, high = section.pass_rate_range
        keep, counts = questions_in_pass_rate_range(
            section.pass_rates_from, dataset=dataset.name, answer_mode=config.answer_mode, low=low, high=high
        )
        if not keep:
            raise ValueError(
                f"grpo.pass_rates_from: none of the {counts['questions']} questions in {section.pass_rates_from} "
                f"has a pass rate in [{low}, {high}] ({counts['below']} below, {counts['above']} above)"
            )
        if console is not None:
            console.print(
                f"pass rates from {section.pass_rates_from}: {counts['kept']} of {counts['questions']} "
                f"train questions in [{low}, {high}] ({counts['below']} below, {counts['above']} above)"
            )
    tokenizer, model = load_trainable(init)
    tokenizer.padding_side = "left"
    rows = grpo_rows(
        dataset,
        curriculum=section.curriculum,
        seed=config.seed,
        max_questions=section.max_questions,
        solved_examples=config.solved_examples,
        config=config.env_config,
        fit_to=section.questions_read() if section.curriculum_fit else None,
        keep=keep,
    )
    if console is not None:
        distinct = {row["question_id"]: row["difficulty"] for row in rows}
        levels = Counter(distinct.values())
        console.print(
            f"GRPO from {init}: {len(distinct)} train questions "
            f"({', '.join(f'{level} {levels[level]}' for level in section.curriculum)}), "
            f"{section.max_steps} steps x {section.questions_per_step()} question(s) x "
            f"{section.num_generations} rollouts, {section.batch_size} rollouts per pass"
        )
    bf16 = bf16_for(section.bf16, "grpo", console)
    names = list(REWARD_FUNCS)
    engine = resolve_engine(None if section.engine == "auto" else section.engine)
    vllm_options: dict[str, Any] = {}
    if engine == "vllm":
        from sqlenv.training.vllm_colocate import prepare_colocated_vllm

        patched = prepare_colocated_vllm(
            dtype="bfloat16" if bf16 else "float32", cpu_kv_cache_gib=section.vllm_cpu_kv_cache_gib
        )
        vllm_options = {
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_importance_sampling_correction": section.vllm_importance_sampling_correction,
            "vllm_enable_sleep_mode": False,  # vLLM's CPU backend has no sleep mode
            "vllm_max_model_length": section.vllm_max_model_length,
        }
        if console is not None:
            where = "on the CPU (sqlenv.training.vllm_colocate)" if patched else "on the GPU"
            console.print(f"rollouts generated by TRL's colocated vLLM {where}")
    out = config.grpo_dir
    args = GRPOConfig(
        output_dir=str(out),
        max_steps=section.max_steps,
        learning_rate=section.learning_rate,
        per_device_train_batch_size=section.batch_size,
        gradient_accumulation_steps=section.gradient_accumulation_steps,
        num_generations=section.num_generations,
        max_completion_length=section.max_completion_length,
        max_tool_calling_iterations=section.max_tool_calling_iterations,
        temperature=section.temperature,
        beta=section.beta,
        loss_type=section.loss_type,
        scale_rewards=section.scale_rewards,
        mask_truncated_completions=section.mask_truncated_completions,
        reward_weights=[section.reward_weights.get(n, 1.0) for n in names],
        shuffle_dataset=False,  # the curriculum's order
        bf16=bf16,
        use_cpu=not has_gpu(),
        activation_checkpointing=False,
        logging_steps=1,
        save_steps=section.save_steps,
        save_total_limit=2,
        report_to="none",
        seed=config.seed,
        disable_tqdm=True,
        **vllm_options,
    )
    peft_config = lora_config(section.lora)
    live = LiveVisualizationCallback(config, out, tokenizer=tokenizer, phase="grpo")
    live.diagnostics = RolloutDiagnostics(section.num_generations, section.reward_weights)
    reward_funcs = [REWARD_FUNCS[n] for n in names]
    reward_funcs[0] = live.diagnostics.observing(reward_funcs[0])  # TRL calls every reward function
    if engine == "vllm" and section.vllm_max_model_length:  # the engine holds no longer sequence
        live.max_context_tokens = min(live.max_context_tokens, section.vllm_max_model_length)
    if section.loop == "sqlenv":
        import os

        from sqlenv.training.rollouts import EpisodeRollouts, rollout_rows

        # TRL calls rollout_func experimental and warns at every start; the module docstring of
        # sqlenv.training.rollouts says what it relies on, and its tests check it.
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        loop_options: dict[str, Any] = {
            "rollout_func": EpisodeRollouts(
                dataset,
                config=config.env_config,
                temperature=section.temperature,
                max_completion_length=section.max_completion_length,
                max_new_tokens=config.live.max_new_tokens,
                max_context_tokens=live.max_context_tokens,
                solved_examples=config.solved_examples,
                seed=config.seed,
                parallel=section.batch_size * section.gradient_accumulation_steps,
            )
        }
        rows = rollout_rows(rows)
    else:
        loop_options = {
            "environment_factory": lambda: SQLToolEnv(
                dataset, split="train", url=section.env_url, config=config.env_config
            )
        }
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[*progress_callbacks(), live],
        **loop_options,
    )
    if section.loop == "trl":
        present_tools_in_evaluation_order(trainer)
    if engine == "vllm":  # rollouts (sqlenv loop), the held-out curve and transcripts: one engine
        from sqlenv.training.vllm_colocate import colocated_reply_generator

        live.reply_generator = colocated_reply_generator(trainer)
        trainer.sqlenv_reply_generator = live.reply_generator
    if section.shared_prompt:
        from sqlenv.training.grpo_shared_prefix import use_shared_prompt_logps

        use_shared_prompt_logps(trainer)
        if console is not None:
            console.print(
                "training pass: each prompt computed once per optimisation step, only the model's "
                "tokens projected onto the vocabulary (grpo.shared_prompt)"
            )
    return trainer


def run_grpo(config: TrainConfig, *, resume: bool = False, console: Any = None) -> Path:
    from sqlenv.agents.published_models import FINAL_ADAPTER
    from sqlenv.agents.solved_examples import write_prompt_settings
    from sqlenv.training.checkpoints import resume_checkpoint

    out = config.grpo_dir
    # Found before the trainer loads the model and the engine, so a missing checkpoint fails at once.
    checkpoint = str(resume_checkpoint(out)) if resume else None
    trainer = build_grpo_trainer(config, console=console)
    tokenizer = trainer.processing_class
    trainer.train(resume_from_checkpoint=checkpoint)
    final = out / "final"
    if config.grpo.lora.enabled:  # the adapter as trained, beside the merged model: what gets published
        trainer.model.save_pretrained(str(out / FINAL_ADAPTER))
    final_model = trainer.model.merge_and_unload() if config.grpo.lora.enabled else trainer.model
    final_model.save_pretrained(str(final))
    tokenizer.padding_side = "right"
    tokenizer.save_pretrained(str(final))
    write_prompt_settings(final, solved_examples=config.solved_examples)
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1), encoding="utf-8")
    return final
