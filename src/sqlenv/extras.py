"""The optional extras of the package, and the error a user sees when one is missing.

The core install (`pip install sqlenv`) serves, plays and evaluates the reference policies. The
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
    "skyrl": (("skyrl_gym",), "pip install -e '.[skyrl]'", "the SkyRL-gym environment (skyrl-gym)"),
    "verifiers": (("verifiers",), "pip install -e '.[verifiers]'", "the verifiers environment (verifiers)"),
    # nemo-gym 0.7 declares Python >= 3.13.14 but runs on 3.11 (tested); --prefer-binary keeps pip
    # on wheels for 3.11 once Requires-Python is ignored.
    "nemo-gym": (
        ("nemo_gym", "resources_servers"),
        "pip install --ignore-requires-python --prefer-binary -e '.[nemo-gym]'",
        "the NeMo Gym resources server (nemo-gym)",
    ),
    # verl 0.9.1 pins transformers < 5.11, the llm extra needs >= 5.24: verl itself goes in
    # without its dependencies, the extra brings the ones its tools import.
    "verl": (
        ("verl", "tensordict"),
        "pip install torch==2.13.0 && pip install -e '.[verl]' && pip install --no-deps verl==0.9.1",
        "the verl tools (verl, without its pins)",
    ),
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
