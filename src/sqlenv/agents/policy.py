"""The `Policy` protocol: what evaluation asks of anything that plays episodes.

A policy is told when an episode starts (`reset`, with the episode's seed, so its own randomness
is reproducible) and then maps each observation to the next action (`act`). Two optional members
are read when present:

- `format_errors: int` — how many of this episode's outputs could not be parsed into an action
  (counted since the last `reset`; policies driven by a language model set it, the reference
  policies are always 0). `evaluate()` records it per episode.
- `call_formats: dict[str, int]` — this episode's accepted tool calls by the format the model
  wrote them in (`sqlenv.agents.reply_formats`); `evaluate()` records it per episode.
- `clone() -> Policy` — an independent policy that behaves the same: parallel evaluation gives
  each worker its own (or pass `policy_factory=` to `evaluate()`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from sqlenv.env.models import SQLAction, SQLObservation

__all__ = ["Policy", "table_list_line", "table_names"]


@runtime_checkable
class Policy(Protocol):
    """Anything with a `name`, `reset(observation, seed)` and `act(observation)`."""

    name: str

    def reset(self, observation: SQLObservation, seed: int) -> None:
        """A new episode begins with `observation`; `seed` fixes the policy's own randomness."""

    def act(self, observation: SQLObservation) -> SQLAction:
        """The next action given the latest observation."""


def table_names(observation: SQLObservation) -> list[str]:
    """The table names listed in an observation's schema_info ("Tables: a, b, c"): its first line,
    which the CREATE TABLE statements of a shown schema follow (`EnvConfig.show_schema`)."""
    text = table_list_line(observation.schema_info).removeprefix("Tables:").strip()
    return [t.strip() for t in text.split(",") if t.strip()]


def table_list_line(schema_info: str) -> str:
    """The table list line of an observation's `schema_info` ("Tables: a, b, c"), without what a
    shown schema adds after it.

    Args:
        schema_info: an observation's `schema_info`.

    Returns:
        Its first line.
    """
    return schema_info.split("\n", 1)[0]
