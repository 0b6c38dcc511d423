"""The optional extras of the package, and the error a user sees when one is missing.

The core install (`pip install sqlenv`) serves, plays and evaluates the reference policies. Three
extras add the rest; a command that needs one that is not installed says which and how to install
it instead of failing with an ImportError traceback.
"""

from __future__ import annotations

import importlib.util

# extra -> (the modules that show it is installed, how to install it, what it adds)
EXTRAS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "llm": (
        ("torch", "transformers", "trl"),
        "pip install torch==2.13.0 && pip install -e '.[llm]'",
        "language-model policies and training (torch, transformers, TRL, peft)",
    ),
    "eval": (
        ("matplotlib", "ray"),
        "pip install -e '.[eval]'",
        "report plots and the Ray backend (matplotlib, Ray)",
    ),
    "dev": (("pytest",), "pip install -e '.[dev]'", "the test tools"),
}


class MissingExtraError(ValueError):
    """A feature needs an optional extra that is not installed; the message says how to install it."""


def missing_extra_message(extra: str, feature: str) -> str:
    """The sentence that tells a user which extra `feature` needs and the command that installs it.

    Args:
        extra: the extra's name (`llm`, `eval`, `dev`).
        feature: what the user asked for, as they would name it (`--policy smollm2-135m`).

    Returns:
        One line naming the feature, the extra and its install command.
    """
    _, command, adds = EXTRAS[extra]
    return f"{feature} needs the '{extra}' extra ({adds}): {command}"


def has_extra(extra: str) -> bool:
    """Whether an extra's modules can be imported here (found, not imported).

    Args:
        extra: the extra's name.

    Returns:
        True when every module that marks the extra is installed.
    """
    modules, _, _ = EXTRAS[extra]
    return all(importlib.util.find_spec(module) is not None for module in modules)


def require_extra(extra: str, feature: str) -> None:
    """Raise a clear error when an extra that `feature` needs is not installed.

    Args:
        extra: the extra's name.
        feature: what the user asked for.

    Raises:
        MissingExtraError: the extra is missing; the message names it and its install command.
    """
    if not has_extra(extra):
        raise MissingExtraError(missing_extra_message(extra, feature))
