"""GRPO rollouts played by sqlenv's own episode loop: evaluation's game, trained on token for token.

`sqlenv eval` plays an episode with `run_episode` and a local model's `LLMPolicy`: the prompt, the
reply parser (a call in `<tool_call>` tags, or a JSON object in a fence or bare), the format-error
feedback, the step budget, the answer mode and the context, kept as the token ids the model read
and wrote (`sqlenv.agents.episode_tokens`). With `grpo.loop: sqlenv` the rollouts of a GRPO step
are played by exactly that code, through TRL's `GRPOTrainer(rollout_func=...)`: `EpisodeRollouts`
is the rollout function. For the step's questions (a group's rollouts next to each other, as TRL
lists them) it plays one episode each, in parallel threads whose replies the engine decodes
together, each rollout sampled at the run's temperature with its own seed, and returns the ids TRL
trains on:

- `prompt_ids`: the episode's opening prompt (system message, tools, question);
- `completion_ids`: everything after it, the model's replies and the environment's turns;
- `env_mask`: 1 for the model's tokens, 0 for the environment's, which the loss leaves out;
- `logprobs`: the engine's sampling log-probability of each model token (0 elsewhere; None when
  the engine reports none: transformers);

and, for the reward functions, `environments`: one `PlayedEpisode` per rollout, with the reward
parts that `sqlenv.training.trl_env.REWARD_FUNCS` read (an episode that ends unanswered keeps its
shaping's penalties but not its payments, as with TRL's own loop). An episode longer than
`max_completion_length` is cut there for the trainer (it is played whole; TRL sees no end of turn
and, with `mask_truncated_completions`, leaves it out of the loss).

A rollout's episode is the episode `sqlenv eval --temperature T` plays with the same model, seed
and engine: `step_seed(seed, step)` is the evaluation seed of a step and `episode_seed` gives each
rollout its own, as for the episodes of an evaluation (`tests/test_rollouts.py` plays both and
compares actions, observations, rewards and format errors).

Where TRL's colocated vLLM holds the policy (`grpo.engine: vllm`), the episodes are decoded on it
(`sqlenv.training.vllm_colocate.colocated_reply_generator`; TRL syncs the weights before each
step's rollouts); otherwise the trained model generates them with transformers, in eval mode.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlenv.agents.episode_tokens import EpisodeTokens
from sqlenv.config import DEFAULT_PROMPT_CONFIG, EnvConfig
from sqlenv.data import Dataset
from sqlenv.env.rewards import scored_reward_parts
from sqlenv.evaluation.episodes import episode_seed, run_episode
from sqlenv.evaluation.records import EpisodeRecord

__all__ = ["EpisodeRollouts", "PlayedEpisode", "rollout_rows", "step_seed"]


def step_seed(seed: int, step: int) -> int:
    """The evaluation seed of a training step's rollouts: rollout i of the step plays with
    `episode_seed(step_seed(seed, step), i)`, as episode i of `evaluate(..., seed=step_seed(...))`.

    Args:
        seed: the run's seed.
        step: the optimisation step the rollouts are generated for (TRL's global step).

    Returns:
        A seed in [0, 2**31 - 1).
    """
    return (seed * 1_000_003 + 7_919 * (step + 1)) % (2**31 - 1)


@dataclass
class PlayedEpisode:
    """One rollout's episode as the reward functions and the run's diagnostics read it: the same
    members as `sqlenv.training.trl_env.SQLToolEnv` offers them (`_reward_parts()` is private
    there so that TRL does not take it for a tool)."""

    question_id: str
    record: EpisodeRecord
    answered: bool
    correct: bool
    tool_calls: int
    failed_calls: int
    terminal: float
    progress: float
    operational: float
    config: EnvConfig

    def _reward_parts(self) -> dict[str, float]:
        return scored_reward_parts(
            answered=self.answered,
            terminal=self.terminal,
            progress=self.progress,
            operational=self.operational,
            reward=self.config.reward,
        )


def rollout_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Training rows for the rollout function: TRL hands it each row's `prompt` alone, so the
    prompt is the question id (the episode renders its own conversation).

    Args:
        rows: `sqlenv.training.grpo.grpo_rows` rows (prompt messages, question_id, difficulty).

    Returns:
        The rows with `prompt` replaced by their question id.
    """
    return [{**row, "prompt": row["question_id"]} for row in rows]


class EpisodeRollouts:
    """`rollout_func` for `GRPOTrainer`: plays a step's rollouts with sqlenv's loop (module docstring)."""

    def __init__(
        self,
        dataset: Dataset,
        *,
        config: EnvConfig,
        temperature: float,
        max_completion_length: int,
        max_new_tokens: int = DEFAULT_PROMPT_CONFIG.max_new_tokens,
        max_context_tokens: int = DEFAULT_PROMPT_CONFIG.max_context_tokens,
        solved_examples: int = 0,
        split: str = "train",
        seed: int = 0,
        parallel: int = 16,
    ) -> None:
        """
        Args:
            dataset: the dataset the episodes are drawn from.
            config: the episode rules (answer mode, budget, schema shown or not).
            temperature: the sampling temperature of every reply (above 0).
            max_completion_length: the longest completion the trainer is given (longer episodes
                are cut there for training, module docstring).
            max_new_tokens: the longest reply, as `sqlenv eval --max-new-tokens`.
            max_context_tokens: the model's whole conversation, as evaluation's.
            solved_examples: solved train questions shown in the prompt, as the model was trained.
            split: the split the questions belong to.
            seed: the run's seed (`step_seed`).
            parallel: episodes played at the same time (their replies decoded together).
        """
        if not temperature > 0:
            raise ValueError(f"GRPO samples its rollouts: the temperature must be above 0, not {temperature}")
        self.dataset = dataset
        self.config = config
        self.temperature = temperature
        self.max_completion_length = max_completion_length
        self.max_new_tokens = max_new_tokens
        self.max_context_tokens = max_context_tokens
        self.solved_examples = solved_examples
        self.split = split
        self.seed = seed
        self.parallel = parallel
        self._solved_index: Any = None

    def policy(self, tokenizer: Any, model: Any, generator: Any) -> Any:
        """The sampling policy the rollouts play, on `model` (or on `generator`, an engine that
        holds the same weights): the `LLMPolicy` that `sqlenv eval --temperature T` builds.

        Args:
            tokenizer: the model's tokenizer.
            model: the trained model.
            generator: a `ReplyGenerator` over the same weights (vLLM), or None (transformers).

        Returns:
            The policy; its clones play the episodes.
        """
        from sqlenv.agents.local_policy import LLMPolicy
        from sqlenv.agents.solved_examples import SolvedExamples

        if self.solved_examples and self._solved_index is None:
            self._solved_index = SolvedExamples(self.dataset, self.solved_examples)
        policy = LLMPolicy.from_model(
            tokenizer,
            model,
            name="grpo-rollout",
            generator=generator,
            greedy=False,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            max_context_tokens=self.max_context_tokens,
            example_dataset=self.dataset if self.solved_examples else None,
            solved_examples=self._solved_index or 0,
        )
        policy.record_logprobs = generator is not None
        return policy

    def play(
        self, question_ids: list[str], policy: Any, seed: int, *, first_index: int = 0
    ) -> list[tuple[PlayedEpisode, EpisodeTokens]]:
        """Play one episode per question id (repeats allowed), episode i with
        `episode_seed(seed, first_index + i)`, `parallel` at a time.

        Args:
            question_ids: the questions, in order.
            policy: the policy to clone for each episode (`policy()`).
            seed: the evaluation seed (`step_seed`).
            first_index: the first episode's place in the step's rollouts: under several training
                processes each plays a slice of them, and two slices of one group must not play
                the same seeds.

        Returns:
            Each episode and its token ids, in the order of `question_ids`.
        """
        from sqlenv.env.environment import SQLEnvironment

        def one(job: tuple[int, str]) -> tuple[PlayedEpisode, EpisodeTokens]:
            index, question_id = job
            player = policy.clone(max_batch=self.parallel)
            env = SQLEnvironment(dataset=self.dataset, split=self.split, config=self.config)
            record = run_episode(env, player, question_id, episode_seed(seed, first_index + index))
            state = env.state
            if player.tokens is None:  # run_episode always asks for a first reply
                raise RuntimeError(f"the rollout of {question_id} generated nothing")
            played = PlayedEpisode(
                question_id=question_id,
                record=record,
                answered=state.answered,
                correct=bool(state.correct),
                tool_calls=record.steps,
                # Steps that failed: a reply that was no tool call, or an action the environment
                # refused (an SQL error, an unknown table), as `SQLToolEnv.failed_calls` counts.
                failed_calls=sum(1 for step in record.transcript if step.error),
                terminal=state.terminal_reward,
                progress=state.progress_reward,
                operational=state.operational_reward,
                config=self.config,
            )
            return played, player.tokens

        with ThreadPoolExecutor(max_workers=max(1, min(self.parallel, len(question_ids)))) as pool:
            return list(pool.map(one, enumerate(question_ids)))

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        """TRL's rollout function: the step's prompts (question ids, each `num_generations` times)
        played as episodes.

        Args:
            prompts: the rows' prompts (`rollout_rows`: question ids).
            trainer: the `GRPOTrainer`.

        Returns:
            prompt_ids, completion_ids, logprobs, env_mask, and the episodes as `environments`.
        """
        question_ids = [_question_id(prompt) for prompt in prompts]
        unknown = [q for q in question_ids if q not in self.dataset]
        if unknown:
            raise ValueError(f"rollout prompts must be question ids of {self.dataset.name!r}: {unknown[:3]}")
        generator = None
        make_generator = getattr(trainer, "sqlenv_reply_generator", None)
        if make_generator is not None:
            generator = make_generator()
        model = trainer.model
        was_training = model.training
        model.eval()
        try:
            policy = self.policy(trainer.processing_class, model, generator)
            # This process's slice of the step's rollouts starts at rank x its length (TRL hands
            # each process an equal, contiguous slice).
            first = trainer.accelerator.process_index * len(question_ids)
            seed = step_seed(self.seed, trainer.state.global_step)
            played = self.play(question_ids, policy, seed, first_index=first)
        finally:
            if was_training:
                model.train()
        return self.batch(played)

    def batch(self, played: list[tuple[PlayedEpisode, EpisodeTokens]]) -> dict[str, list[Any]]:
        """The episodes in TRL's rollout format, each cut at `max_completion_length`.

        Args:
            played: `play()`'s episodes and their tokens.

        Returns:
            prompt_ids, completion_ids, logprobs (None when any episode has none), env_mask,
            environments.
        """
        limit = self.max_completion_length
        prompt_ids, completion_ids, env_mask, logprobs = [], [], [], []
        for _, tokens in played:
            prompt_ids.append(list(tokens.prompt_ids))
            completion_ids.append(tokens.completion_ids[:limit])
            env_mask.append(tokens.model_mask[:limit])
            logprobs.append(None if tokens.logprobs is None else tokens.logprobs[:limit])
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
            "env_mask": env_mask,
            "environments": [episode for episode, _ in played],
        }


def _question_id(prompt: Any) -> str:
    if not isinstance(prompt, str):
        raise ValueError(
            "grpo.loop 'sqlenv' expects each training row's prompt to be its question id "
            f"(sqlenv.training.rollouts.rollout_rows), not {type(prompt).__name__}"
        )
    return prompt

