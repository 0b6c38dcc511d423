"""Deterministic, stratified train/eval splits.

Questions whose gold result is empty go to eval first (they are a reward hole in training);
the rest of the eval quota is shared among strata (database x difficulty) by the largest
remainder method, and within a stratum questions are taken in the order of a hash of their id.
The same inputs always give the same split, whatever order they arrive in.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")


def _stable_rank(question_id: str) -> str:
    return hashlib.sha256(question_id.encode()).hexdigest()


def stratified_eval_ids(
    items: Sequence[T],
    n_eval: int,
    *,
    item_id: Callable[[T], str],
    stratum: Callable[[T], Hashable],
    force_eval: Callable[[T], bool] = lambda _item: False,
) -> set[str]:
    """The ids of the `n_eval` items that form the eval split."""
    if not 0 <= n_eval <= len(items):
        raise ValueError(f"cannot take {n_eval} eval questions out of {len(items)}")
    forced = [it for it in items if force_eval(it)]
    chosen = {item_id(it) for it in sorted(forced, key=lambda it: _stable_rank(item_id(it)))[:n_eval]}
    remaining_quota = n_eval - len(chosen)
    pool = [it for it in items if item_id(it) not in chosen]
    if remaining_quota <= 0 or not pool:
        return chosen
    groups: dict[Hashable, list[T]] = defaultdict(list)
    for it in pool:
        groups[stratum(it)].append(it)
    keys = sorted(groups, key=repr)
    exact = {k: len(groups[k]) * remaining_quota / len(pool) for k in keys}
    quota = {k: math.floor(exact[k]) for k in keys}
    leftover = remaining_quota - sum(quota.values())
    for k in sorted(keys, key=lambda k: (-(exact[k] - quota[k]), repr(k)))[:leftover]:
        quota[k] += 1
    for k in keys:
        ranked = sorted(groups[k], key=lambda it: _stable_rank(item_id(it)))
        chosen.update(item_id(it) for it in ranked[: quota[k]])
    return chosen
