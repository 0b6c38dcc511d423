"""The episode: its wire types (`models`), the answer verifier (`verifier`), the three reward
layers (`rewards`) and the OpenEnv environment that plays them (`environment`)."""

from sqlenv.env.environment import SQLEnvironment
from sqlenv.env.models import ACTION_TYPES, SQLAction, SQLObservation, SQLState

__all__ = ["ACTION_TYPES", "SQLAction", "SQLEnvironment", "SQLObservation", "SQLState"]
