"""Rewards: pure functions of (episode facts, action outcome). Constants live in RewardConfig.

Three layers:
- L1 operational (every exploration step): executed bonus, new-information bonus, repeat
  penalty, step cost;
- L2 progress (successful QUERY only): progress_weight * (phi_new - phi_old), where phi is the
  binned similarity of the query's result to the gold rows. Potential-based: over an episode the
  payments sum to progress_weight * phi_last, so oscillating between results earns nothing;
- L3 terminal (ANSWER): correct_answer or wrong_answer.
Each exploration step's L1 + L2 is clipped to [step_clip_low, step_clip_high].

`scored_reward_parts` is how GRPO scores a whole episode from those layers (an unanswered episode
keeps only its shaping's penalties); it lives here so that every player of an episode (training,
the RL-stack integrations) scores it the same way.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

from sqlenv.config import RewardConfig
from sqlenv.data.records import Cell
from sqlenv.env.verifier import rows_equal_unordered


@dataclass(frozen=True)
class StepOutcome:
    """What one exploration step did, as far as rewards are concerned."""

    executed: bool
    new_info: bool
    repeat: bool
    phi_before: float
    phi_after: float


@dataclass(frozen=True)
class StepReward:
    operational: float
    progress: float

    @property
    def total(self) -> float:
        return self.operational + self.progress


def repeat_text(argument: str) -> str:
    """An action's argument as the repeat penalty compares it: whitespace folded, a final `;` off."""
    return repeat_text_of_folded(" ".join(argument.split()))


def repeat_text_of_folded(folded: str) -> str:
    """repeat_text of an argument whose whitespace is already folded (`" ".join(arg.split())`)."""
    return folded.rstrip(";").strip()


def exploration_reward(outcome: StepOutcome, cfg: RewardConfig) -> StepReward:
    """L1 + L2 for one DESCRIBE/SAMPLE/QUERY (or invalid) step, clipped as a whole."""
    operational, progress = exploration_reward_parts(
        outcome.executed, outcome.new_info, outcome.repeat, outcome.phi_before, outcome.phi_after, cfg
    )
    return StepReward(operational=operational, progress=progress)


def exploration_reward_parts(
    executed: bool, new_info: bool, repeat: bool, phi_before: float, phi_after: float, cfg: RewardConfig
) -> tuple[float, float]:
    """exploration_reward as (operational, progress), without the two objects (the environment's
    per-step path: building frozen dataclasses costs more than the arithmetic)."""
    operational = cfg.step_cost
    if executed:
        operational += cfg.executed_bonus
    if new_info:
        operational += cfg.new_info_bonus
    if repeat:
        operational += cfg.repeat_penalty
    progress = cfg.progress_weight * (phi_after - phi_before)
    total = min(max(operational + progress, cfg.step_clip_low), cfg.step_clip_high)
    paid_progress = min(max(progress, cfg.step_clip_low), cfg.step_clip_high)
    # Clipping is charged to the operational part; the progress part is paid as computed.
    return total - paid_progress, paid_progress


def terminal_reward(correct: bool, cfg: RewardConfig) -> float:
    """L3: the reward of an ANSWER (or of running out of budget, which is not correct)."""
    return cfg.correct_answer if correct else cfg.wrong_answer


def scored_reward_parts(
    *, answered: bool, terminal: float, progress: float, operational: float, reward: RewardConfig
) -> dict[str, float]:
    """The reward parts GRPO scores an episode with: the environment's own, except that an
    episode that ended without an ANSWER (the step budget ran out, or the player stopped or was
    cut short) scores as a wrong answer and keeps its shaping's penalties but not its payments.

    The shaping pays for exploration that leads to an answer. Were its payments kept, exploring
    until the cut would out-earn a wrong answer given earlier, and a policy that rarely answers
    correctly would learn to stop answering. So the same exploration scores at least as much
    answered (wrongly) as unanswered.

    Args:
        answered: whether the episode ended with an ANSWER.
        terminal: its terminal reward.
        progress: its progress shaping, summed over its steps.
        operational: its operational shaping, summed over its steps.
        reward: the reward constants (the wrong answer's reward).

    Returns:
        {"correctness", "progress", "operational"}: the parts GRPO's reward functions return
        (`sqlenv.training.trl_env.REWARD_FUNCS`); they add up to the episode's score.
    """
    if not answered:
        return {
            "correctness": reward.wrong_answer,
            "progress": min(progress, 0.0),
            "operational": min(operational, 0.0),
        }
    return {"correctness": terminal, "progress": progress, "operational": operational}


def _value_key(value: Cell) -> object:
    """A hashable, loosely normalised form of a cell for value-overlap counting."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return round(float(value), 4)
    if isinstance(value, str):
        return value.strip().casefold()
    return value


def _value_keys(rows: Sequence[Sequence[Cell]]) -> set[object]:
    """{_value_key(c) for every cell c}, computed over the distinct cells (a C-speed set) with
    the plain int, float and str cases inline: a result can hold a thousand rows. Equal cells
    have equal keys, so deduplicating first gives the same set."""
    return {
        round(float(c), 4)
        if c.__class__ is int or c.__class__ is float
        else c.strip().casefold()
        if c.__class__ is str
        else _value_key(c)
        for c in set(chain.from_iterable(rows))
    }


@dataclass
class GoldProfile:
    """What phi needs of the gold rows; built once per question and reused by every episode."""

    rows: Sequence[Sequence[Cell]]
    row_counts: Counter[tuple[Cell, ...]]
    values: frozenset[object]
    scalar_number: float | None

    @classmethod
    def of(cls, rows: Sequence[Sequence[Cell]]) -> GoldProfile:
        values = frozenset(_value_keys(rows))
        scalar = None
        if len(rows) == 1 and len(rows[0]) == 1:
            cell = rows[0][0]
            if isinstance(cell, int | float) and not isinstance(cell, bool):
                scalar = float(cell)
        return cls(rows, Counter(tuple(r) for r in rows), values, scalar)


def _same_rows(rows: Sequence[Sequence[Cell]], gold: GoldProfile, float_tolerance: float) -> bool:
    if len(rows) != len(gold.rows):
        return False
    if rows == gold.rows or Counter(tuple(r) for r in rows) == gold.row_counts:  # exact: the common case
        return True
    return rows_equal_unordered(rows, gold.rows, float_tolerance)


def result_similarity(
    rows: Sequence[Sequence[Cell]], gold: GoldProfile, float_tolerance: float, cfg: RewardConfig | None = None
) -> float:
    """Raw similarity in [0, 1] of a query result to the gold rows; 1.0 only for the gold result."""
    cfg = cfg or RewardConfig()
    if _same_rows(rows, gold, float_tolerance):
        return 1.0
    n, g = len(rows), len(gold.rows)
    cardinality = min(n, g) / max(n, g) if max(n, g) else 1.0
    values = _value_keys(rows)
    common = len(values & gold.values)
    overlap = 2 * common / (len(values) + len(gold.values)) if common else 0.0
    if gold.scalar_number is None:
        return cfg.cardinality_weight * cardinality + cfg.overlap_weight * overlap
    closeness = 0.0
    scale = max(abs(gold.scalar_number), 1e-9)
    for row in rows[: cfg.closeness_rows]:
        for cell in row:
            if isinstance(cell, int | float) and not isinstance(cell, bool):
                closeness = max(closeness, 1.0 - min(1.0, abs(float(cell) - gold.scalar_number) / scale))
    return (
        cfg.scalar_cardinality_weight * cardinality
        + cfg.scalar_overlap_weight * overlap
        + cfg.scalar_closeness_weight * closeness
    )


def progress_potential(
    rows: Sequence[Sequence[Cell]], gold: GoldProfile, cfg: RewardConfig, float_tolerance: float
) -> float:
    """phi: the similarity floored to a multiple of 1/bins; only the gold result reaches 1.0."""
    if rows == gold.rows:  # result_similarity's first, exact test, without its calls
        return 1.0
    raw = result_similarity(rows, gold, float_tolerance, cfg)
    if raw >= 1.0:
        return 1.0
    top = (cfg.progress_bins - 1) / cfg.progress_bins
    return min(math.floor(raw * cfg.progress_bins) / cfg.progress_bins, top)
