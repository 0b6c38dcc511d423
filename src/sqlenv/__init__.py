"""sqlenv: an OpenEnv environment in which an agent answers questions about SQLite databases by
exploring them (DESCRIBE, SAMPLE, QUERY) and then answering (ANSWER), with dense rewards."""

from sqlenv.config import EnvConfig, RewardConfig, SandboxLimits
from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import SQLAction, SQLObservation, SQLState

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
