"""Who plays an episode: the `Policy` protocol, the reference policies (random, oracle), the
registry of policy names, and the language-model policies with what they share (the tool schema,
the prompts, solved-example retrieval, local model loading, batched generation). Modules that need
torch or an OpenAI client import them only when a language-model policy is built."""

from sqlenv.agents.policy import Policy, table_names
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.agents.registry import (
    PolicyFactory,
    PolicySettings,
    available_policies,
    make_policy,
    register_policy,
    register_policy_resolver,
)

__all__ = [
    "OraclePolicy",
    "Policy",
    "PolicyFactory",
    "PolicySettings",
    "RandomPolicy",
    "available_policies",
    "make_policy",
    "register_policy",
    "register_policy_resolver",
    "table_names",
]
