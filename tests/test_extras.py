"""A command that needs an optional extra which is not installed names the extra and the command
that installs it, and exits with status 2: never an ImportError traceback. The extra is made
missing by hiding its modules from `sqlenv.extras` (the CI environment has every extra)."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from sqlenv import extras
from sqlenv.cli import app


@pytest.fixture
def without(monkeypatch):
    """Hide the given top-level modules from the extras check."""

    def hide(*modules: str) -> None:
        real = importlib.util.find_spec

        def find_spec(name: str, *args, **kwargs):
            return None if name.split(".")[0] in modules else real(name, *args, **kwargs)

        monkeypatch.setattr(extras.importlib.util, "find_spec", find_spec)

    return hide


def test_the_message_names_the_feature_the_extra_and_its_install_command() -> None:
    message = extras.missing_extra_message("llm", "--policy smollm2-135m")
    assert message.startswith("--policy smollm2-135m needs the 'llm' extra")
    assert "pip install torch==2.13.0 && pip install -e '.[llm]'" in message
    assert extras.has_extra("llm") and extras.has_extra("eval")  # as the test suite installs them


def test_an_llm_policy_without_the_llm_extra_prints_the_install_hint(without) -> None:
    without("torch")
    result = CliRunner().invoke(app, ["eval", "--policy", "smollm2-135m", "--dataset", "demo"])
    output = " ".join(result.output.split())  # rich wraps long lines
    assert result.exit_code == 2, output
    assert "needs the 'llm' extra" in output and "pip install -e '.[llm]'" in output
    assert "Traceback" not in result.output
    with pytest.raises(extras.MissingExtraError, match="'llm' extra"):
        extras.require_extra("llm", "a language model")


def test_training_without_the_llm_extra_prints_the_install_hint(without, tmp_path) -> None:
    without("trl")
    result = CliRunner().invoke(app, ["train", "sft", "--config", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "sqlenv train sft needs the 'llm' extra" in " ".join(
        result.output.split()
    )


def test_ray_without_the_eval_extra_prints_the_install_hint(without) -> None:
    without("ray")
    result = CliRunner().invoke(app, ["eval", "--policy", "oracle", "--backend", "ray", "--parallel", "2"])
    assert result.exit_code == 2 and "--backend ray needs the 'eval' extra" in " ".join(result.output.split())


def test_the_reference_policies_need_no_extra(without) -> None:
    without("torch", "transformers", "trl", "ray", "matplotlib")
    result = CliRunner().invoke(app, ["eval", "--policy", "oracle,random", "--dataset", "demo"])
    assert result.exit_code == 0, result.output
    assert "oracle" in result.output and "random" in result.output
