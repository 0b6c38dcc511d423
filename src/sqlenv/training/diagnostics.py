"""Why a GRPO curve moves or stays flat: per-step diagnostics of the rollouts and the update.

GRPO learns only from differences within a group: a group whose rollouts all earn the same reward
gives no advantage, and a policy that stops answering, truncates its completions or drifts far from
its reference shows up here before it shows up in the held-out curve. `RolloutDiagnostics` watches
the rollouts themselves: it wraps one of the run's reward functions (TRL calls each with the
generation batch's environments, a group's rollouts next to each other) and records, per rollout,
the episode's weighted reward, whether it answered, and its tool calls and failed calls
(`SQLToolEnv` counts both). `take()` sums up what was recorded since the last call:

- `groups_all_equal`: the fraction of groups whose rewards are all equal (no advantage signal);
- `groups_correctness_all_equal`: the fraction of groups whose rollouts are all right or all
  wrong: whatever advantage such a group gives comes from the shaping parts alone;
- `group_reward_std`: the mean over groups of the reward's standard deviation within the group
  (the sample deviation, as TRL scales advantages by);
- `answer_rate`: the fraction of rollouts that ended with an answer;
- `tool_calls_per_rollout`, `failed_calls_per_rollout`: calls, and calls that failed (bad
  arguments, a call after the episode ended, or an action the environment refused: a SQL error, a
  table that does not exist);
- `questions`: each group's question id, in the order the step played them. Two runs of one config
  play the same questions in the same order whatever their reward weights (the rows' order is the
  curriculum's, and TRL does not shuffle them), and `sqlenv train curves` checks it from these
  lists, so a comparison of two runs says whether they trained on the same questions.

The live callback (`sqlenv.training.live`) adds these to TRL's own logged numbers for the step
(`kl`, `clip_ratio/*`, `completions/mean_length`, `completions/clipped_ratio`, `entropy`; and the
training reward, its correctness part, the gradient norm and the step's wall time) and writes them
to `diagnostics.json` and `diagnostics.png` (`DIAGNOSTIC_PANELS`). `diagnostic_points` reads them
back and `block_means` sums a run up by blocks of steps (`sqlenv train diagnostics`).

Under several training processes each scores only its share of a step's rollouts, and a group can
be split between two of them; `record` gathers every process's rows (in rank order, which is the
step's order: TRL hands each process a contiguous slice) so that the groups are whole, and keeps
them on the main process only, the one whose live callback writes.
"""

from __future__ import annotations

import functools
import statistics
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sqlenv.training.curves import live_points

__all__ = [
    "BLOCK_COLUMNS",
    "DIAGNOSTIC_PANELS",
    "TRL_DIAGNOSTIC_KEYS",
    "TRL_STEP_KEYS",
    "RolloutDiagnostics",
    "block_means",
    "diagnostic_points",
]

# TRL's own per-step numbers that the diagnostics plot draws (GRPOTrainer's logged metric names).
TRL_DIAGNOSTIC_KEYS = (
    "frac_reward_zero_std",
    "kl",
    "clip_ratio/region_mean",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "completions/mean_length",
    "completions/clipped_ratio",
    "entropy",
)

# TRL's logged numbers of a step that a run's summary shows beside the diagnostics (`block_means`):
# the training reward, its correctness part (the reward function's logged mean), the update's
# gradient norm and the step's wall time.
TRL_STEP_KEYS = ("reward", "rewards/reward_correctness/mean", "grad_norm", "step_time")

# The plot's panels: a title and the (key, label) series drawn in it.
DIAGNOSTIC_PANELS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "groups with all rewards equal",
        (("groups_all_equal", "whole reward"), ("groups_correctness_all_equal", "correctness alone")),
    ),
    ("reward std within groups", (("group_reward_std", "mean over groups"),)),
    ("KL to the reference", (("kl", "kl"),)),
    (
        "clipped ratios",
        (
            ("clip_ratio/region_mean", "clipped"),
            ("clip_ratio/low_mean", "below"),
            ("clip_ratio/high_mean", "above"),
        ),
    ),
    ("completion length (tokens)", (("completions/mean_length", "mean"),)),
    ("truncated completions", (("completions/clipped_ratio", "fraction cut at the budget"),)),
    (
        "tool calls per rollout",
        (("tool_calls_per_rollout", "calls"), ("failed_calls_per_rollout", "failed calls")),
    ),
    ("answer rate", (("answer_rate", "rollouts that answered"),)),
)


# The columns of a run's summary by blocks of steps: (key, header, decimals).
BLOCK_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("reward", "training reward", 3),
    ("rewards/reward_correctness/mean", "correctness", 3),
    ("answer_rate", "rollouts that answered", 2),
    ("tool_calls_per_rollout", "tool calls / rollout", 2),
    ("failed_calls_per_rollout", "failed calls / rollout", 2),
    ("group_reward_std", "reward std in a group", 3),
    ("groups_correctness_all_equal", "groups all right or all wrong", 2),
    ("completions/mean_length", "completion tokens", 0),
    ("completions/clipped_ratio", "truncated", 2),
    ("entropy", "entropy", 2),
    ("kl", "KL", 4),
    ("clip_ratio/region_mean", "clipped", 3),
    ("grad_norm", "gradient norm", 3),
    ("step_time", "seconds / step", 0),
)


def diagnostic_points(run: Path) -> list[dict[str, Any]]:
    """The per-step diagnostics of a GRPO run.

    Args:
        run: a GRPO run directory (`runs/x/grpo`), its `live` folder, or a `diagnostics.json` file.

    Returns:
        The points in step order.

    Raises:
        FileNotFoundError: no `diagnostics.json` there.
    """
    return live_points(run, "diagnostics.json", "a GRPO run writes it to <run>/live")


def block_means(points: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """A run summed up by blocks of steps (1 to `every`, then `every` + 1 to 2 x `every`, ...):
    the mean over the block's steps of each `BLOCK_COLUMNS` number.

    Args:
        points: per-step diagnostics (`diagnostic_points`).
        every: steps per block, at least 1.

    Returns:
        One row per block with a step: `first` and `last` (the block's first and last recorded
        steps), `steps` (how many were recorded) and each column's key, None where no step of the
        block recorded it (points written before the key was).

    Raises:
        ValueError: `every` below 1.
    """
    if every < 1:
        raise ValueError(f"a block is at least 1 step, got {every}")
    blocks: dict[int, list[dict[str, float]]] = {}
    for point in points:
        blocks.setdefault((int(point["step"]) - 1) // every, []).append(point)
    rows = []
    for _, block in sorted(blocks.items()):
        row: dict[str, Any] = {"first": int(block[0]["step"]), "last": int(block[-1]["step"]), "steps": len(block)}
        for key, _, _ in BLOCK_COLUMNS:
            values = [point[key] for point in block if point.get(key) is not None]
            row[key] = statistics.fmean(values) if values else None
        rows.append(row)
    return rows


def _gathered(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Every training process's rows, in rank order, and whether this process keeps them (the main
    one). One process: the rows as they are. Every process must call it for each scored batch: the
    gather is a collective (each process's reward function scores each of its batches).
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return rows, True
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, rows)
    return [row for part in parts for row in part], dist.get_rank() == 0


class RolloutDiagnostics:
    """Records every scored rollout and sums them up per step (module docstring)."""

    def __init__(self, group_size: int, reward_weights: Mapping[str, float]) -> None:
        """
        Args:
            group_size: rollouts per question (`num_generations`): consecutive rollouts of a
                scored batch form a group.
            reward_weights: the weight of each reward part (`correctness`, `progress`,
                `operational`), as the trainer weighs them.
        """
        self.group_size = group_size
        self.reward_weights = dict(reward_weights)
        self._batches: list[list[dict[str, Any]]] = []
        self._lock = threading.Lock()

    def observing(self, reward_function: Callable[..., list[float]]) -> Callable[..., list[float]]:
        """`reward_function` unchanged (its name and rewards), recording the rollouts it scores.

        Args:
            reward_function: one of the run's reward functions (`sqlenv.training.trl_env`).

        Returns:
            The wrapped function, for `GRPOTrainer(reward_funcs=...)`.
        """

        @functools.wraps(reward_function)
        def recording(*args: Any, **kwargs: Any) -> list[float]:
            rewards = reward_function(*args, **kwargs)
            environments = kwargs.get("environments")
            if environments:
                self.record(environments)
            return rewards

        return recording

    def record(self, environments: list[Any]) -> None:
        """Record one scored batch of rollouts.

        Args:
            environments: the rollouts' `SQLToolEnv`s, a group's next to each other.
        """
        rows: list[dict[str, Any]] = []
        for env in environments:
            parts = env._reward_parts()
            rows.append(
                {
                    "reward": sum(
                        self.reward_weights.get(name, 1.0) * value for name, value in parts.items()
                    ),
                    "correctness": parts["correctness"],
                    "answered": float(env.answered),
                    "tool_calls": float(env.tool_calls),
                    "failed_calls": float(env.failed_calls),
                    "question": env.question_id,
                }
            )
        rows, keep = _gathered(rows)
        if not keep:
            return
        with self._lock:
            self._batches.append(rows)

    def take(self) -> dict[str, Any]:
        """The diagnostics of every batch recorded since the last call (module docstring).

        Returns:
            The six numbers and the groups' questions; empty when nothing was recorded.
        """
        with self._lock:
            batches, self._batches = self._batches, []
        rollouts = [row for batch in batches for row in batch]
        if not rollouts:
            return {}
        grouped = [
            batch[start : start + self.group_size]
            for batch in batches
            for start in range(0, len(batch), self.group_size)
        ]
        groups = [[row["reward"] for row in group] for group in grouped]
        correctness = [[row["correctness"] for row in group] for group in grouped]
        count = len(rollouts)

        def share_alike(values: list[list[float]]) -> float:  # groups whose values are all equal
            return sum(max(g) - min(g) < 1e-9 for g in values) / len(values)

        return {
            "groups_all_equal": share_alike(groups),
            "groups_correctness_all_equal": share_alike(correctness),
            "group_reward_std": statistics.fmean(statistics.stdev(g) if len(g) > 1 else 0.0 for g in groups),
            "answer_rate": sum(row["answered"] for row in rollouts) / count,
            "tool_calls_per_rollout": sum(row["tool_calls"] for row in rollouts) / count,
            "failed_calls_per_rollout": sum(row["failed_calls"] for row in rollouts) / count,
            "questions": [group[0]["question"] for group in grouped],
        }
