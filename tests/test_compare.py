"""`sqlenv compare` and the policy registry that names plug into."""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlenv import SQLAction
from sqlenv.agents import registry as policies_module
from sqlenv.agents.reference import OraclePolicy, RandomPolicy
from sqlenv.agents.registry import (
    PolicyFactory,
    PolicyRequest,
    available_policies,
    make_policy,
    register_policy,
    register_policy_resolver,
)
from sqlenv.cli import app
from sqlenv.env.models import SQLObservation

runner = CliRunner()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_compare_plays_the_same_episodes_for_each_policy_and_writes_json_and_plot(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "compare",
            "--policies",
            "random,oracle",
            "--dataset",
            "demo",
            "--split",
            "eval",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    for column in ("policy", "success", "reward", "steps", "fmt err", "easy", "extra"):
        assert column in result.output
    assert "random" in result.output and "oracle" in result.output
    data = json.loads((tmp_path / "compare.json").read_text())
    assert list(data["policies"]) == ["random", "oracle"]
    assert data["policies"]["oracle"]["success_rate"] == 1.0
    assert data["policies"]["random"]["success_rate"] < data["policies"]["oracle"]["success_rate"]
    assert data["policies"]["random"]["format_error_rate"] == 0.0
    assert len(data["per_episode"]) == data["n_episodes"] == 28
    assert all(row["oracle"]["success"] for row in data["per_episode"])
    width, height = png_size(tmp_path / "compare.png")
    assert 700 <= width <= 2500 and 400 <= height <= 1200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.json", "compare.png"]


def test_compare_with_reports_and_a_sample_of_episodes(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "compare",
            "--policies",
            "oracle,random",
            "--episodes",
            "9",
            "--seed",
            "4",
            "--out",
            str(tmp_path),
            "--reports",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "compare.json").read_text())
    assert data["seed"] == 4 and len(data["per_episode"]) == 9
    for name in ("oracle", "random"):
        report = json.loads((tmp_path / name / "results.json").read_text())
        assert [e["question_id"] for e in report["episodes"]] == [
            r["question_id"] for r in data["per_episode"]
        ]
        assert (tmp_path / name / "transcripts.html").is_file()


def test_compare_refuses_unknown_and_repeated_policies() -> None:
    unknown = runner.invoke(app, ["compare", "--policies", "random,genius"])
    assert unknown.exit_code == 2
    assert "unknown policy 'genius'" in unknown.output and "oracle" in unknown.output
    twice = runner.invoke(app, ["compare", "--policies", "random,random"])
    assert twice.exit_code == 2 and "named twice" in twice.output
    reports_without_out = runner.invoke(app, ["compare", "--reports"])
    assert reports_without_out.exit_code == 2 and "--reports needs --out" in reports_without_out.output


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policies_module, "_NAMES", dict(policies_module._NAMES))
    monkeypatch.setattr(policies_module, "_SCHEMES", dict(policies_module._SCHEMES))
    monkeypatch.setattr(policies_module, "_RESOLVERS", list(policies_module._RESOLVERS))


class EchoPolicy:
    """Answers its own argument: enough to see what a builder received."""

    name = "echo"

    def __init__(self, request: PolicyRequest) -> None:
        self.request = request

    def reset(self, observation: SQLObservation, seed: int) -> None: ...

    def act(self, observation: SQLObservation) -> SQLAction:
        return SQLAction(action_type="ANSWER", argument=self.request.argument)


@pytest.mark.usefixtures("clean_registry")
def test_policies_plug_in_by_name_scheme_or_resolver(demo_dataset, tmp_path: Path) -> None:
    register_policy("tiny-model", EchoPolicy, "a small model")
    register_policy("echo", EchoPolicy, "an echo scheme", scheme=True)
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    register_policy_resolver(lambda name: Path(name).is_dir(), EchoPolicy, "a model directory")

    named = make_policy("Tiny-Model", demo_dataset, seed=3)
    assert isinstance(named, EchoPolicy) and named.request.seed == 3
    by_scheme = make_policy("echo:http://127.0.0.1:9000/v1", demo_dataset)
    assert by_scheme.request.argument == "http://127.0.0.1:9000/v1"
    by_path = make_policy(str(model_dir), demo_dataset)
    assert by_path.request.argument == str(model_dir)
    listed = available_policies()
    assert {
        "oracle",
        "random",
        "tiny-model",
        "smollm2-135m",
        "openai:<argument>",
        "echo:<argument>",
        "a model directory",
    } <= set(listed)
    with pytest.raises(ValueError, match="already registered"):
        register_policy("random", EchoPolicy)
    with pytest.raises(ValueError, match="unknown policy 'nope:x'"):
        make_policy("nope:x", demo_dataset)


def test_built_in_policies_and_their_picklable_factories(demo_dataset) -> None:
    assert isinstance(make_policy("oracle", demo_dataset), OraclePolicy)
    assert isinstance(make_policy(" Random ", demo_dataset), RandomPolicy)
    factory = pickle.loads(pickle.dumps(PolicyFactory("random", demo_dataset, 2)))
    first, second = factory(), factory()
    assert isinstance(first, RandomPolicy) and first is not second
    oracle = OraclePolicy(demo_dataset)
    clone = oracle.clone()
    assert clone is not oracle and clone.dataset is oracle.dataset
