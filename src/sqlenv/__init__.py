"""sqlenv: an OpenEnv environment in which an agent answers questions about SQLite databases by
exploring them (DESCRIBE, SAMPLE, QUERY) and then answering (ANSWER), with dense rewards.

The names below are imported on first use (PEP 562), so importing a part of the package (the CLI,
a server worker) does not load OpenEnv before that part has decided how to load it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlenv.config import EnvConfig, RewardConfig, SandboxLimits
    from sqlenv.env.environment import SQLEnvironment
    from sqlenv.env.models import SQLAction, SQLObservation, SQLState

_HOMES = {
    "EnvConfig": "sqlenv.config",
    "RewardConfig": "sqlenv.config",
    "SandboxLimits": "sqlenv.config",
    "SQLEnvironment": "sqlenv.env.environment",
    "SQLAction": "sqlenv.env.models",
    "SQLObservation": "sqlenv.env.models",
    "SQLState": "sqlenv.env.models",
}
__all__ = [
    "EnvConfig",
    "RewardConfig",
    "SQLAction",
    "SQLEnvironment",
    "SQLObservation",
    "SQLState",
    "SandboxLimits",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sqlenv' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
