"""Training configuration: one YAML file (see `configs/`) read into typed sections.

Unknown keys are errors that name the key and the section (a typo must not silently fall back to a
default). Paths in the file are relative to the working directory.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlenv.agents.engines import ENGINES
from sqlenv.agents.solved_examples import check_solved_examples_count
from sqlenv.config import ANSWER_MODES, EnvConfig

DIFFICULTIES = ("easy", "medium", "hard", "extra")
SCALE_REWARDS = ("group", "batch", "none")  # TRL 1.16's scale_rewards values
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")  # TRL 1.16's
# "auto": bf16 autocast only where the hardware computes in bfloat16 (`sqlenv.training.models`).
Bf16Setting = bool | Literal["auto"]


@dataclass
class LoRASection:
    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    # Tokens whose input-embedding and output rows are trained in full beside the adapters (peft's
    # trainable tokens): protocol tokens the base model hardly ever writes, such as Qwen's
    # <tool_call> tags, which low-rank adapters on the projections move far too slowly. SFT only.
    trainable_tokens: list[str] = field(default_factory=list)
    # Their rows' learning rate (None: the section's). The rows start far off (Qwen's <tool_call> at
    # ~21 nats where a call begins) and Adam moves each element about one learning rate per step.
    trainable_tokens_learning_rate: float | None = None


@dataclass
class SFTSection:
    enabled: bool = True
    max_examples: int | None = None  # oracle trajectories (None: every train question)
    max_length: int = 1_280  # longer trajectories are left out
    epochs: float = 1.0
    learning_rate: float = 5e-5
    batch_size: int = 1
    gradient_accumulation_steps: int = 8
    sample_rate: float = 0.3  # share of trajectories that SAMPLE a table
    mistake_rate: float = 0.2  # share with a first, mistaken query that is then corrected
    recovery_rate: float = 0.0  # of those, share that describe the mistyped name's table after the error
    loss_on_mistakes: bool = False  # train on the mistaken query too (it teaches the typos)
    clean_copies: bool = False  # beside each mistake conversation, its clean copy (keeps first-query recall)
    # Answer modes the trajectories are played in, in turn (None: `answer_mode` alone); a model
    # taught in one mode answers in it when asked for the other (`training.sft_data`).
    answer_modes: list[str] | None = None
    bf16: Bf16Setting = False  # autocast to bfloat16: true, false or "auto" (`resolve_bf16`)
    save_steps: int = 50
    # Run each optimisation batch's common opening (system message, tools) once, not once per
    # conversation: the same gradients, 2.1x as fast on the CPU config (`training.shared_prefix`).
    shared_prefix: bool = True
    lora: LoRASection = field(default_factory=LoRASection)  # enabled: adapters trained, merged at the end


GRPO_LOOPS = ("sqlenv", "trl")
VLLM_MODES = ("colocate", "server")  # TRL's vllm_mode values sqlenv runs


@dataclass
class GRPOSection:
    enabled: bool = True
    # Who plays the rollouts: "sqlenv", evaluation's own episode loop (`training.rollouts`, TRL's
    # rollout_func: the same prompt, parser, format-error feedback, budget and context as `sqlenv
    # eval`, trained on the token ids the model read and wrote); "trl", TRL's multi-turn loop over
    # the environment's tools (`environment_factory`, `training.trl_env`).
    loop: str = "trl"
    init_from: str | None = None  # a model; None: the SFT output when SFT is enabled, else `model`
    max_steps: int = 20
    num_generations: int = 4
    batch_size: int = 4  # rollouts per forward/backward pass
    # Rollouts per optimisation step: batch_size x gradient_accumulation_steps, whole groups of
    # num_generations (a smaller batch_size bounds the memory of a pass, not what a step sees).
    gradient_accumulation_steps: int = 1
    max_completion_length: int = 384  # all turns of a rollout, tool results included
    max_tool_calling_iterations: int = 6
    learning_rate: float = 1e-6
    beta: float = 0.04  # KL penalty towards the initial model
    # TRL's loss aggregation, always passed to TRL so a TRL with another default changes nothing.
    # "dapo": token losses normalised by the active tokens of the accumulated batch (no length bias).
    loss_type: str = "dapo"
    # How TRL scales each rollout's advantage (its reward minus its group's mean): "group" divides by
    # the group's standard deviation (TRL's default), "batch" by the step's, "none" not at all
    # (Dr. GRPO). With the dense parts, a group whose rollouts are all wrong still differs by the
    # shaping's hundredths; "group" scales those hundredths up to the size of a right answer's lead.
    scale_rewards: str = "group"
    mask_truncated_completions: bool = False  # drop rollouts cut at max_completion_length from the loss
    temperature: float = 1.0
    curriculum: list[str] = field(default_factory=lambda: list(DIFFICULTIES))  # easy first
    # True: the questions max_steps will read are drawn from every curriculum level in proportion
    # to its size, easy first (`grpo_rows(fit_to=...)`); False: the levels in full, one after
    # another, so a run shorter than the curriculum never leaves its first levels.
    curriculum_fit: bool = False
    # A results.json of `sqlenv eval --split train --temperature T --samples K` with the model the
    # run starts from: only the train questions whose pass rate there lies in `pass_rate_range`
    # are trained on (`training.pass_rates`), in curriculum order; fewer than the run reads are
    # read again. None: every train question.
    pass_rates_from: str | None = None
    pass_rate_range: list[float] = field(default_factory=lambda: [0.0, 1.0])
    max_questions: int | None = None
    reward_weights: dict[str, float] = field(
        default_factory=lambda: {"correctness": 1.0, "progress": 1.0, "operational": 1.0}
    )
    env_url: str | None = None  # play rollouts on a sqlenv server instead of in-process
    # What generates the rollouts: "vllm" (TRL's colocated vLLM; `training.vllm_colocate` on a
    # CPU), "transformers" (the trained model itself), or "auto": vllm where it is installed.
    engine: str = "auto"
    # With vllm: TRL's importance-sampling correction for the gap between the engine's sampling
    # probabilities and the trainer's. It costs one more forward pass of every rollout per step.
    vllm_importance_sampling_correction: bool = True
    # With vllm: the longest prompt plus completion the engine holds (TRL's vllm_max_model_length;
    # None: the model's own, 32,768 for Qwen2.5). It must cover the longest prompt plus
    # max_completion_length, and the live callback's episodes (their context is kept to 2,048).
    vllm_max_model_length: int | None = None
    # With vllm on a CPU: the engine's key/value cache in GiB (VLLM_CPU_KVCACHE_SPACE; None: that
    # variable, else 2). 8 rollouts of 2,300 tokens of Qwen2.5-0.5B in float32 need <= 0.45 GiB.
    vllm_cpu_kv_cache_gib: int | None = None
    # With vllm: "colocate", an engine inside each trainer process (TRL's colocate mode,
    # `training.vllm_colocate`); "server", one `vllm serve` process at `vllm_server_url` that every
    # trainer process sends its rollouts to (TRL's server mode, `training.vllm_server`: the server
    # must be started beforehand, docs/training.md "Several processes and a vLLM server").
    vllm_mode: str = "colocate"
    vllm_server_url: str = "http://127.0.0.1:8000"
    vllm_server_timeout: float = 240.0  # seconds the trainer waits for the server to answer /health
    # Score each group's rollouts with their shared prompt computed once (`training.grpo_shared_prefix`):
    # TRL's log-probabilities and gradients, the prompt's forward and backward once per group.
    shared_prompt: bool = False
    bf16: Bf16Setting = False
    save_steps: int = 10
    lora: LoRASection = field(default_factory=LoRASection)

    def rollouts_per_step(self, processes: int | None = None) -> int:
        """Rollouts one optimisation step plays: batch_size x gradient_accumulation_steps on each
        of the training processes (TRL's generation batch: per device x processes x steps).

        Args:
            processes: the training processes; None: `world_size()` (WORLD_SIZE, set by
                `accelerate launch`/torchrun; 1 without it).

        Returns:
            The rollouts.
        """
        return self.batch_size * self.gradient_accumulation_steps * (processes or world_size())

    def questions_per_step(self, processes: int | None = None) -> int:
        """Questions one optimisation step plays: `rollouts_per_step` over num_generations per
        question."""
        return self.rollouts_per_step(processes) // self.num_generations

    def questions_read(self, processes: int | None = None) -> int:
        """Questions the whole run plays: max_steps x `questions_per_step`."""
        return self.max_steps * self.questions_per_step(processes)


@dataclass
class LiveSection:
    plot_every: int = 1  # reward-curve PNG every k optimisation steps
    transcript_every: int = 10  # one full episode with the current model every m steps (0: never)
    eval_every: int = 10  # train-vs-eval success on a few questions every n steps (0: never)
    eval_questions: int = 4  # per split
    # The learning curve: a fixed, stratified set of eval questions (`training.heldout`), played
    # at the start (the model GRPO starts from), every `heldout_every` steps and at the end.
    heldout_questions: int = 0  # 0: no curve
    # The split the curve's questions come from: "eval", or "validation" where the dataset has one
    # (the `spider` preset: Spider's protocol tunes on validation and plays dev, its eval, only with
    # checkpoints fixed beforehand). Never a split the run trains on.
    heldout_split: str = "eval"
    heldout_every: int = 10
    heldout_parallel: int = 8  # episodes decoded in one batch
    max_new_tokens: int = 256  # per reply, as `sqlenv eval` (sqlenv.agents.local_policy.DEFAULT_MAX_NEW_TOKENS)
    # A second folder for `heldout.json` and `diagnostics.json` (a tracked one, e.g. under docs/),
    # written each time the run writes them: a machine that keeps no `runs/` between sittings still
    # leaves the curve's points behind. Never replaced by a run that has reached fewer steps.
    keep_points_in: str | None = None


@dataclass
class TrainConfig:
    model: str = "smollm2-135m"  # a preset, a local model directory or a hub id
    dataset: str = "spider10"
    spider_dir: str | None = None  # default: $SQLENV_SPIDER_DIR or ../shared/spider
    output_dir: str = "runs/train"
    seed: int = 0
    threads: int | None = None  # torch intra-op threads (None: torch's default)
    # The prompt's N most similar solved train questions (sqlenv.agents.solved_examples), in SFT, GRPO and
    # the trained model's evaluation alike; 0: none.
    solved_examples: int = 0
    # What ANSWER takes in SFT data, GRPO rollouts and the live evaluations: "value", or "sql"
    # (a statement graded by execution match; `sqlenv.config.EnvConfig.answer_mode`).
    answer_mode: str = "value"
    # Whether the first observation shows every table's CREATE TABLE statement (the schema-shown
    # control, `sqlenv.config.EnvConfig.show_schema`); false: the table names only.
    show_schema: bool = False
    sft: SFTSection = field(default_factory=SFTSection)
    grpo: GRPOSection = field(default_factory=GRPOSection)
    live: LiveSection = field(default_factory=LiveSection)

    @property
    def sft_dir(self) -> Path:
        return Path(self.output_dir) / "sft"

    @property
    def grpo_dir(self) -> Path:
        return Path(self.output_dir) / "grpo"

    @property
    def env_config(self) -> EnvConfig:
        """The episode rules every training phase plays by."""
        return EnvConfig(answer_mode=self.answer_mode, show_schema=self.show_schema)  # type: ignore[arg-type]  # checked at load

    def grpo_init(self) -> str:
        if self.grpo.init_from:
            return self.grpo.init_from
        if self.sft.enabled:
            return str(self.sft_dir / "final")
        return self.model


def world_size() -> int:
    """The training processes of this run: WORLD_SIZE, which `accelerate launch` (torchrun) sets in
    each process it starts; 1 when the run was started as one plain process.

    Returns:
        The number of processes.

    Raises:
        ValueError: WORLD_SIZE is set and is not a positive whole number.
    """
    value = os.environ.get("WORLD_SIZE", "1")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"WORLD_SIZE: expected a positive whole number of processes, got {value!r}")
    return int(value)


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    values = {}
    for name, value in data.items():
        default = (
            fields[name].default_factory()
            if fields[name].default_factory is not dataclasses.MISSING
            else None
        )
        if dataclasses.is_dataclass(default) and value is not None:
            value = _build(type(default), value, f"{where}.{name}")
        values[name] = value
    return cls(**values)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """The config in `path`; `overrides` ({"grpo.max_steps": 2, ...}) win over the file."""
    import yaml

    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"training config not found: {source}")
    data = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    config = _build(TrainConfig, data, source.name)
    unknown_levels = sorted(set(config.grpo.curriculum) - set(DIFFICULTIES))
    if unknown_levels:
        raise ValueError(f"grpo.curriculum: unknown difficulty {unknown_levels}; known: {DIFFICULTIES}")
    # TRL generates one batch of batch_size x gradient_accumulation_steps rollouts per step and per
    # process, whole groups (a group may be split between processes).
    processes = world_size()
    rollouts = config.grpo.rollouts_per_step(processes)
    if rollouts % config.grpo.num_generations:
        across = f" x {processes} processes (WORLD_SIZE)" if processes > 1 else ""
        raise ValueError(
            f"grpo.batch_size x grpo.gradient_accumulation_steps{across} ({rollouts}) must be a multiple of "
            f"grpo.num_generations ({config.grpo.num_generations})"
        )
    for section in ("sft", "grpo"):
        value = getattr(config, section).bf16
        if not (isinstance(value, bool) or value == "auto"):
            raise ValueError(f"{section}.bf16: expected true, false or auto, got {value!r}")
    for key in ("shared_prompt", "curriculum_fit"):
        if not isinstance(getattr(config.grpo, key), bool):
            raise ValueError(f"grpo.{key}: expected true or false, got {getattr(config.grpo, key)!r}")
    for key in ("loss_on_mistakes", "clean_copies"):
        if not isinstance(getattr(config.sft, key), bool):
            raise ValueError(f"sft.{key}: expected true or false, got {getattr(config.sft, key)!r}")
    check_solved_examples_count(config.solved_examples)
    if config.answer_mode not in ANSWER_MODES:
        raise ValueError(f"answer_mode: {config.answer_mode!r} is not one of {', '.join(ANSWER_MODES)}")
    if not isinstance(config.show_schema, bool):
        raise ValueError(f"show_schema: expected true or false, got {config.show_schema!r}")
    if config.live.heldout_split == "train":
        raise ValueError("live.heldout_split: the learning curve cannot be measured on the split the run trains on")
    modes = config.sft.answer_modes
    if modes is not None and (
        not isinstance(modes, list) or not modes or any(mode not in ANSWER_MODES for mode in modes)
    ):
        raise ValueError(f"sft.answer_modes: expected a list of {', '.join(ANSWER_MODES)}, got {modes!r}")
    if config.grpo.loop not in GRPO_LOOPS:
        raise ValueError(f"grpo.loop: {config.grpo.loop!r} is not one of {', '.join(GRPO_LOOPS)}")
    if config.grpo.loop == "sqlenv" and config.grpo.env_url:
        raise ValueError("grpo.env_url: rollouts on a server need grpo.loop: trl (the sqlenv loop plays in-process)")
    if config.grpo.engine not in ("auto", *ENGINES):
        raise ValueError(f"grpo.engine: {config.grpo.engine!r} is not one of auto, {', '.join(ENGINES)}")
    _check_parallel_grpo(config.grpo, processes)
    if config.grpo.loss_type not in LOSS_TYPES:
        raise ValueError(f"grpo.loss_type: {config.grpo.loss_type!r} is not one of {', '.join(LOSS_TYPES)}")
    if config.grpo.scale_rewards not in SCALE_REWARDS:
        raise ValueError(
            f"grpo.scale_rewards: {config.grpo.scale_rewards!r} is not one of {', '.join(SCALE_REWARDS)}"
        )
    rate_range = config.grpo.pass_rate_range
    if (
        not isinstance(rate_range, list)
        or len(rate_range) != 2
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in rate_range)
        or not 0 <= rate_range[0] <= rate_range[1] <= 1
    ):
        raise ValueError(f"grpo.pass_rate_range: expected [low, high] with 0 <= low <= high <= 1, got {rate_range!r}")
    unknown_rewards = sorted(set(config.grpo.reward_weights) - {"correctness", "progress", "operational"})
    if unknown_rewards:
        raise ValueError(f"grpo.reward_weights: unknown part(s) {unknown_rewards}")
    if config.grpo.lora.trainable_tokens:
        raise ValueError(
            "grpo.lora.trainable_tokens: token rows are trained in SFT only (GRPO starts from the merged "
            "SFT model, and the weight sync into vLLM carries adapters alone); set sft.lora.trainable_tokens"
        )
    if config.sft.lora.trainable_tokens and not config.sft.lora.enabled:
        raise ValueError("sft.lora.trainable_tokens: needs sft.lora.enabled (without LoRA every row is trained)")
    if config.sft.lora.trainable_tokens and not config.sft.shared_prefix:
        raise ValueError(
            "sft.lora.trainable_tokens: needs sft.shared_prefix: true (TRL's own step computes the loss "
            "with a fused output layer that does not see the trained rows)"
        )
    for key, least in (("vllm_max_model_length", config.grpo.max_completion_length + 1), ("vllm_cpu_kv_cache_gib", 1)):
        value = getattr(config.grpo, key)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= least):
            raise ValueError(f"grpo.{key}: expected a whole number >= {least} (or leave it out), got {value!r}")
    token_rate = config.sft.lora.trainable_tokens_learning_rate
    if token_rate is not None and not (isinstance(token_rate, (int, float)) and token_rate > 0):
        raise ValueError(f"sft.lora.trainable_tokens_learning_rate: must be a positive number, got {token_rate!r}")
    return config


def _check_parallel_grpo(grpo: GRPOSection, processes: int) -> None:
    """Refuse the GRPO settings that cannot work with the vLLM server or with several processes."""
    if grpo.vllm_mode not in VLLM_MODES:
        raise ValueError(f"grpo.vllm_mode: {grpo.vllm_mode!r} is not one of {', '.join(VLLM_MODES)}")
    if grpo.vllm_mode == "server":
        if grpo.engine == "transformers":
            raise ValueError(
                "grpo.vllm_mode: server needs grpo.engine: vllm or auto, not transformers: the rollouts "
                "are generated by the vLLM server"
            )
        if grpo.loop != "trl":
            raise ValueError(
                "grpo.vllm_mode: server needs grpo.loop: trl: the sqlenv loop plays its episodes on an "
                "in-process engine, and with the server it would quietly generate them with transformers"
            )
        url = grpo.vllm_server_url
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"grpo.vllm_server_url: expected an http(s) URL, got {url!r}")
        timeout = grpo.vllm_server_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(
                f"grpo.vllm_server_timeout: expected a positive number of seconds, got {timeout!r}"
            )
    if processes > 1 and grpo.shared_prompt:
        raise ValueError(
            f"grpo.shared_prompt: runs in one process only ({processes} processes here, WORLD_SIZE): its "
            "backward pass runs outside the trainer's, so DistributedDataParallel would not average "
            "its gradients across processes; set grpo.shared_prompt: false"
        )
