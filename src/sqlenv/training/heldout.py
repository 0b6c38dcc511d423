"""The fixed held-out set a training run's learning curve is measured on.

A curve is only a curve if every point is measured on the same questions, none of them trained
on. `heldout_questions` picks them from the eval split, stratified by difficulty and by whether a
train question has the same gold SQL (a "twin": recall can solve it) or not (only a new query can),
so a small set keeps the split's mix; the choice depends only on the dataset and the seed.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping
from typing import TypeVar

from sqlenv.data import Dataset

__all__ = ["NEW_SQL", "TWIN", "heldout_questions", "proportional_shares", "stratum"]

TWIN = "twin"  # a train question has the same gold SQL
NEW_SQL = "new-sql"  # none does

K = TypeVar("K")


def stratum(dataset: Dataset, question_id: str) -> tuple[str, str]:
    """The stratum of a question: (difficulty, `TWIN` or `NEW_SQL`).

    Args:
        dataset: the dataset.
        question_id: a question of it.

    Returns:
        Its difficulty and whether its gold SQL is a train question's.
    """
    record = dataset.get(question_id)
    return record.difficulty, TWIN if dataset.seen_in_train(question_id) else NEW_SQL


def proportional_shares(sizes: Mapping[K, int], n: int) -> dict[K, int]:
    """Split `n` among groups in proportion to their sizes, the rounding going to the largest
    remainders (ties to the smaller key), so the shares add up to `n`.

    Args:
        sizes: group -> how many it has (keys sortable).
        n: how many to take in all, at most the sum of the sizes.

    Returns:
        group -> its share, never more than its size.
    """
    total = sum(sizes.values())
    keys = sorted(sizes)
    exact = {key: n * sizes[key] / total for key in keys}
    shares = {key: int(exact[key]) for key in keys}
    by_remainder = sorted(keys, key=lambda k: (-(exact[k] - shares[k]), k))
    for key in by_remainder[: n - sum(shares.values())]:
        shares[key] += 1
    return shares


def heldout_questions(dataset: Dataset, n: int, *, split: str = "eval", seed: int = 0) -> list[str]:
    """`n` question ids of `split`, stratified by difficulty and twin / new SQL, deterministic.

    Each stratum gets its share of `n` in proportion to its size (the rounding goes to the largest
    remainders); questions whose gold answer is empty are left out (an empty answer is a reward
    hole, not a measure).

    Args:
        dataset: the dataset.
        n: how many questions (at most the split's non-empty ones).
        split: the split to draw from; never one the run trains on.
        seed: fixes the draw within each stratum.

    Returns:
        The ids, grouped by stratum in a fixed order.

    Raises:
        ValueError: `n` is not positive or exceeds the split's usable questions.
    """
    records = [r for r in dataset.split(split) if not r.empty_gold]
    if not 0 < n <= len(records):
        raise ValueError(f"held-out set of {n}: the {split} split has {len(records)} usable questions")
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for record in records:
        groups[stratum(dataset, record.question_id)].append(record.question_id)
    keys = sorted(groups)
    shares = proportional_shares({key: len(groups[key]) for key in keys}, n)
    rng = random.Random(seed)
    chosen: list[str] = []
    for key in keys:
        ids = sorted(groups[key])
        rng.shuffle(ids)
        chosen += sorted(ids[: shares[key]])
    return chosen
